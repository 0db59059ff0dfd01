"""Which columns of a Formulation are about which nodes: the wider neighbourhood of planner.rins.

RINS frees the integer columns where the LP point and the incumbent disagree. On
these models that can be too tight: where a node's spare supply (y) or an eviction
(e) on it changes, the node's other columns agree by coincidence and stay fixed, so
pods cannot be traded on it and the sub-MIP finds nothing past its start. The wider
neighbourhood also frees every node column of the nodes a disagreeing node column
is about. Measured at the priority-100 stage on S (512 nodes): the disagreement
(498 columns) finds nothing past the start; with the nodes' other columns (1,848)
it reaches the LP's optimum, 1,892 GPUs, in 0.2 s. (Freeing the node columns under
every disagreeing rack or block column too reached it in 0.9 s; at M it frees 45,000
columns and finds nothing in a cycle.) Pure: no I/O.
"""

from __future__ import annotations

import numpy as np

from planner import capacity
from planner.formulate import Formulation


class NodeColumns:
    """Each node column (spare supply y per shape, eviction e) with the nodes it is about,
    as (column, node id) pairs."""

    def __init__(self, form: Formulation):
        ids: dict[str, int] = {}
        pairs: list[tuple[int, int]] = []
        for shape in form.shapes:
            pairs.extend((col, ids.setdefault(name, len(ids))) for name, col in shape.supply.items())
        for victim, col in zip(form.victims, form.evict_col):
            pairs.extend((col, ids.setdefault(name, len(ids))) for name in capacity.node_usage_of(victim))
        self._pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)

    def on_same_nodes(self, cols: np.ndarray) -> np.ndarray:
        """Every node column about a node that one of `cols` is about (sorted, unique)."""
        nodes = np.unique(self._pairs[np.isin(self._pairs[:, 0], cols), 1])
        return np.unique(self._pairs[np.isin(self._pairs[:, 1], nodes), 0])
