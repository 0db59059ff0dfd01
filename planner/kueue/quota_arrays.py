"""Kueue's quota arithmetic (semantics.QuotaTree) on arrays, every flavor/resource at once.

A preemption search asks, again and again, what one ClusterQueue could admit were
some usage taken from several queues of its cohort tree. QuotaTree answers one
flavor/resource and one change at a time, carrying each change up the tree; here a
node-by-column matrix of usage is rebuilt bottom-up in one pass per cohort, and
available() is read down one chain for every column together. The same numbers:
usage(cohort) = sum over children of max(0, usage - guaranteed), and Kueue's
available() from the root down (QuotaTree.available). Only computes.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from models import FlavorResource as FR
from planner.kueue.semantics import QuotaTree

UNLIMITED = np.iinfo(np.int64).max // 4


class QuotaArrays:
    """The tree's fixed numbers as arrays (a row per tree node, a column per
    flavor/resource of `columns`), and the two computations on them."""

    def __init__(self, tree: QuotaTree, columns: Mapping[FR, int]):
        self.tree = tree
        self.nodes = tree.nodes()
        self.row = {node: i for i, node in enumerate(self.nodes)}
        frs = sorted(columns, key=lambda fr: columns[fr])
        self.width = len(frs)
        shape = (len(self.nodes), self.width)
        self.guaranteed = np.zeros(shape, dtype=np.int64)
        self.subtree = np.zeros(shape, dtype=np.int64)
        self.borrowing = np.full(shape, UNLIMITED, dtype=np.int64)
        for i, node in enumerate(self.nodes):
            for j, fr in enumerate(frs):
                self.guaranteed[i, j] = tree.guaranteed(node, fr)
                self.subtree[i, j] = tree.subtree_quota(node, fr)
                limit = tree.limits(node, fr)[1]
                if limit is not None:
                    self.borrowing[i, j] = limit
        # Cohorts children first, each with the rows of its children.
        self.cohorts: list[tuple[int, np.ndarray]] = []
        for node in self._post_order():
            if not node.startswith("cq:"):
                kids = np.array([self.row[k] for k in tree.children.get(node, [])], dtype=np.int64)
                self.cohorts.append((self.row[node], kids))
        self._chains: dict[str, np.ndarray] = {}

    def _post_order(self) -> list[str]:
        out: list[str] = []

        def walk(node: str) -> None:
            for kid in self.tree.children.get(node, []):
                walk(kid)
            out.append(node)

        for node in self.nodes:
            if self.tree.parent[node] is None:
                walk(node)
        return out

    def chain(self, node: str) -> np.ndarray:
        """Rows of `node`, its parent, ..., the root."""
        found = self._chains.get(node)
        if found is None:
            found = self._chains[node] = np.array([self.row[n] for n in self.tree.path(node)], dtype=np.int64)
        return found

    def roll_up(self, usage: np.ndarray) -> None:
        """Fill in every cohort's usage from its children's (rows of queues as given), in place."""
        for row, kids in self.cohorts:
            if len(kids):
                usage[row] = np.maximum(0, usage[kids] - self.guaranteed[kids]).sum(axis=0)
            else:
                usage[row] = 0

    def available(self, usage: np.ndarray, node: str) -> np.ndarray:
        """Kueue's available() of `node` for every column (not clipped at 0)."""
        rows = self.chain(node)
        root = rows[-1]
        avail: np.ndarray = self.subtree[root] - usage[root]
        for row in rows[-2::-1]:
            used = usage[row]
            guaranteed = self.guaranteed[row]
            local = np.maximum(0, guaranteed - used)
            stored = self.subtree[row] - guaranteed
            from_parent = np.minimum(avail, stored - np.maximum(0, used - guaranteed) + self.borrowing[row])
            avail = np.where(from_parent > 0, local + from_parent, local)
        return avail
