"""Kueue's quota arithmetic over the cohort tree, beyond `available()`.

What `pkg/cache/scheduler` answers for the flavor assigner and the preemptor
(resource_node.go and friends): potential capacity, the height of the lowest subtree
that fits, quantities that fit a node's quota, "within nominal"; asked of the live
`ClusterState` (planner.kueue.state) or of an `Overlay`, its usage with some admitted
workloads taken away (Kueue's snapshot.RemoveWorkload, for quota only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from models import FlavorResource as FR
from planner.kueue.registry import Admitted
from planner.kueue.semantics import QuotaTree

if TYPE_CHECKING:
    from planner.kueue.state import ClusterState


Usage = Callable[[str, FR], int]   # tree node ("cq:NAME" | "cohort:NAME") -> usage of a flavor/resource


class UsageLookup(Protocol):
    """Usage of the cohort tree with some workloads taken away (Overlay, a search's copies:
    planner.kueue.preemption.search)."""

    def get(self, node: str, fr: FR) -> int: ...


class Overlay:
    """Quota usage of a few flavor/resources with some workloads taken away (Kueue's
    snapshot.RemoveWorkload, for quota only): a copy that the real state never sees."""

    def __init__(self, state: "ClusterState", frs: Iterable[FR]):
        self.tree: QuotaTree = state.quota
        self.usage = {fr: dict(state._usage(fr)) for fr in frs}

    def get(self, node: str, fr: FR) -> int:
        return self.usage[fr].get(node, 0)

    def change(self, a: Admitted, sign: int) -> None:
        """Take `a` away (sign -1) or give it back (+1), carried up the cohort tree."""
        self.change_usage(a.cq, a.usage, sign)

    def release_many(self, admitted: Sequence[Admitted], sign: int = 1) -> None:
        """Take them away (sign 1) or give them back (-1), as ClusterState releases."""
        for a in admitted:
            self.change(a, -sign)

    def change_usage(self, cq: str, amounts: Mapping[FR, int], sign: int) -> None:
        key = f"cq:{cq}"
        if key not in self.tree.parent:
            return
        for fr, amount in amounts.items():
            usage = self.usage.get(fr)
            if usage is None or not amount:
                continue
            old = usage.get(key, 0)
            self.tree.move_usage(usage, key, fr, old, old + sign * amount)


class Quota:
    """Kueue's quota questions about the cohort tree (resource_node.go and friends),
    asked of the live state or of an Overlay."""

    def __init__(self, state: "ClusterState"):
        self.state = state
        self.tree: QuotaTree = state.quota
        self._height: dict[str, int] = {}
        self._potential: dict[tuple[str, FR], int] = {}

    def live(self, node: str, fr: FR) -> int:
        return self.state._usage(fr).get(node, 0)

    def available(self, cq: str, fr: FR, usage: Overlay | None = None) -> int:
        """Kueue's Available(): never below 0."""
        if usage is None:
            return max(0, self.state.available(cq, fr))
        return max(0, self.tree.available(f"cq:{cq}", fr, usage.usage[fr]))

    def potential_available(self, cq: str, fr: FR) -> int:
        """The most the queue could ever take, all else empty (potentialAvailable)."""
        key = (cq, fr)
        found = self._potential.get(key)
        if found is None:
            chain = self.tree.chain(f"cq:{cq}", fr)
            _, _, _, subtree = chain[-1]
            avail = subtree
            for i in range(len(chain) - 2, -1, -1):
                _, guaranteed, borrowing, subtree = chain[i]
                avail = guaranteed + avail
                if borrowing is not None:
                    avail = min(subtree + borrowing, avail)
            found = self._potential[key] = avail
        return found

    def local_available(self, node: str, fr: FR, usage: Usage) -> int:
        return max(0, self.tree.guaranteed(node, fr) - usage(node, fr))

    def borrowing_with(self, node: str, fr: FR, val: int, usage: Usage) -> bool:
        """usage + val above the node's subtree quota (a queue's: its nominal quota)."""
        return usage(node, fr) + val > self.tree.subtree_quota(node, fr)

    def height(self, node: str) -> int:
        """Distance to the furthest leaf (getNodeHeight): 1 for a cohort of queues only."""
        if node not in self._height:
            kids = self.tree.children.get(node, [])
            best = min(len(kids), 1)
            for kid in kids:
                if kid.startswith("cohort:"):
                    best = max(best, self.height(kid) + 1)
            self._height[node] = best
        return self._height[node]

    def lowest_fitting_subtree(self, cq: str, fr: FR, val: int, usage: Usage | None = None) -> tuple[int, bool]:
        """FindHeightOfLowestSubtreeThatFits: (height of the lowest subtree whose quota
        takes `val` more, whether that subtree is smaller than the whole tree)."""
        usage = usage or self.live
        key = f"cq:{cq}"
        parent = self.tree.parent.get(key)
        if parent is None or not self.borrowing_with(key, fr, val, usage):
            return 0, parent is not None
        remaining = val - self.local_available(key, fr, usage)
        node: str | None = parent
        top = parent
        while node is not None:
            if not self.borrowing_with(node, fr, remaining, usage):
                return self.height(node), self.tree.parent.get(node) is not None
            remaining -= self.local_available(node, fr, usage)
            top = node
            node = self.tree.parent.get(node)
        return self.height(top), False

    def within_nominal(self, node: str, frs: Iterable[FR], usage: Usage) -> bool:
        """IsWithinNominalInResources: usage at most the subtree quota for all of `frs`."""
        return all(usage(node, fr) <= self.tree.subtree_quota(node, fr) for fr in frs)

    def fits_in_quota(self, node: str, requests: Mapping[FR, int], usage: Usage) -> tuple[bool, dict[FR, int]]:
        """QuantitiesFitInQuota: do `requests` fit the node's subtree quota, and what is
        left for its parent beyond the node's own guaranteed quota."""
        fits = True
        remaining = {}
        for fr, v in requests.items():
            if usage(node, fr) + v > self.tree.subtree_quota(node, fr):
                fits = False
            remaining[fr] = max(0, v - self.local_available(node, fr, usage))
        return fits, remaining

    def ancestors(self, node: str) -> Iterator[str]:
        parent = self.tree.parent.get(node)
        while parent is not None:
            yield parent
            parent = self.tree.parent.get(parent)
