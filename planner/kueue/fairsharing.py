"""Kueue v0.17's fair sharing: dominant resource shares, the admission tournament and
fair-sharing preemption, over the shared `ClusterState`.

When Kueue's Configuration sets `fairSharing` (enable), its scheduler orders a cycle's
heads by a tournament over each cohort tree (pkg/scheduler/fair_sharing_iterator.go)
instead of the classical sort, and its preemptor picks victims by their queues'
shares (pkg/scheduler/preemption/preemption.go fairPreemptions, with
pkg/scheduler/preemption/fairsharing). The share of a ClusterQueue or Cohort is its
dominant resource share (pkg/cache/scheduler/fair_sharing.go): for each resource, what
the node uses above its subtree quota, summed over flavors, per mille of what its
parent could lend it (potentialAvailable, summed over flavors); the largest of these,
divided by the node's `fairSharing.weight` (a zero weight that borrows is always last).
That arithmetic is planner.kueue.shares's (`Shares`, `DRS`, `compare`), the one the
MILP and the reports use too; this module runs Kueue's cycle over it.

This module only computes: every change a search makes to the state is undone
before it returns. The cycle that asks (planner.greedy) and the preemptor
(planner.kueue.preemption) call it; it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from models import FlavorResource as FR
from models.kueue_config import (  # re-exported: the tests name them here
    DEFAULT_STRATEGIES as DEFAULT_STRATEGIES, LESS_THAN_INITIAL_SHARE as LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE as LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
)
# The share arithmetic lives in planner.kueue.shares (one implementation for greedy,
# the MILP and the reports); re-exported here for greedy, the preemptor and the tests.
from planner.kueue.shares import (
    DRS as DRS, NEGATIVE as NEGATIVE, FairSharing as FairSharing, Shares as Shares, UsageOf as Usage,
    compare as compare, weights_of as weights_of,
)

if TYPE_CHECKING:
    from models import Snapshot
    from planner.kueue.registry import Admitted
    from planner.kueue.state import ClusterState


def live_usage(state: "ClusterState") -> Usage:
    """Usage of every tree node as the state has it now (it follows every charge)."""

    def usage(node: str, fr: FR) -> int:
        return state.tree_usage(fr).get(node, 0)
    return usage


# ---------------------------------------------------------------- the admission tournament

@dataclass(eq=False)
class Head:
    """What the tournament reads of a cycle's entry."""

    cq: str                        # ClusterQueue name
    usage: Mapping[FR, int]        # the assignment's quota usage
    priority: int                  # effective priority
    queued_at: float               # queue order timestamp
    item: object = None            # the caller's entry


def tournament_pop(state: "ClusterState", shares: Shares, heads: list[Head], pick: Head) -> Head:
    """fairSharingIterator.pop: the head to process next, chosen in `pick`'s cohort tree
    (Kueue takes any queue with a head: `pick` is the caller's deterministic choice).
    A queue without a cohort gives its own head. Removes the winner from `heads`."""
    tree = state.quota
    key = f"cq:{pick.cq}"
    if tree.parent.get(key) is None:
        heads.remove(pick)
        return pick
    root = tree.root_of(key)
    mine = {h.cq: h for h in heads if f"cq:{h.cq}" in tree.parent and tree.root_of(f"cq:{h.cq}") == root}
    values: dict[tuple[str, int], DRS] = {}
    usage = live_usage(state)
    for h in mine.values():
        charged = [(fr, v) for fr, v in sorted(h.usage.items()) if v]
        for fr, v in charged:
            state.charge(h.cq, fr, v)
        try:
            node = f"cq:{h.cq}"
            share = shares.drs(node, usage)
            for ancestor in tree.path(node)[1:]:
                values[(ancestor, id(h))] = share
                share = shares.drs(ancestor, usage)
        finally:
            for fr, v in charged:
                state.charge(h.cq, fr, -v)

    def less(a: Head, b: Head, parent: str) -> bool:
        da, db = values[(parent, id(a))], values[(parent, id(b))]
        ab, bb = da.borrowing_on(a.usage), db.borrowing_on(b.usage)
        if ab != bb:                       # FairSharingPrioritizeNonBorrowing (on in v0.17)
            return not ab
        c = compare(da, db)
        if c != 0:
            return c < 0
        if a.priority != b.priority:       # PrioritySortingWithinCohort (on)
            return a.priority > b.priority
        return a.queued_at < b.queued_at

    def run(cohort: str) -> Head | None:
        candidates: list[Head] = []
        kids = tree.children.get(cohort, [])
        for child in kids:
            if child.startswith("cohort:"):
                found = run(child)
                if found is not None:
                    candidates.append(found)
        for child in kids:
            if child.startswith("cq:") and child[3:] in mine:
                candidates.append(mine[child[3:]])
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if less(current, best, cohort):
                best = current
        return best

    winner = run(root)
    assert winner is not None
    heads.remove(winner)
    return winner


# ---------------------------------------------------------------- fair-sharing preemption

PREEMPTED, RECLAIMED = "Preempted", "Reclaimed"


@dataclass(eq=False)
class _Ordering:
    """TargetClusterQueueOrdering: the queue to take the next victim from, walking down
    from the root to the child with the highest share."""

    shares: Shares
    usage: Usage
    preemptor: str                               # "cq:NAME"
    queues: dict[str, list["Admitted"]]          # "cq:NAME" -> its candidates, in order
    order: Callable[["Admitted"], tuple[object, ...]]
    pruned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.ancestors = set(self.shares.tree.path(self.preemptor)[1:])

    def has(self, cq: str) -> bool:
        return bool(self.queues.get(cq))

    def pop(self, cq: str) -> "Admitted":
        return self.queues[cq].pop(0)

    def iterate(self) -> "list[str] | None":
        """The next target queue (a list of one), or None when the root is pruned."""
        tree = self.shares.tree
        parent = tree.parent.get(self.preemptor)
        if parent is None:
            return [self.preemptor] if self.has(self.preemptor) else None
        root = tree.root_of(self.preemptor)
        while root not in self.pruned:
            found = self._next(root)
            if found is not None:
                return [found]
        return None

    def _next(self, cohort: str) -> str | None:
        tree = self.shares.tree
        best_cq: str | None = None
        best_cq_drs = NEGATIVE
        for child in tree.children.get(cohort, []):
            if not child.startswith("cq:") or child in self.pruned:
                continue
            d = self.shares.drs(child, self.usage)
            if (not d.borrowing and child != self.preemptor) or not self.has(child):
                self.pruned.add(child)
            elif best_cq is not None and compare(d, best_cq_drs) == 0:
                if self.order(self.queues[child][0]) < self.order(self.queues[best_cq][0]):
                    best_cq = child
            elif compare(d, best_cq_drs) == 1:
                best_cq, best_cq_drs = child, d
        best_cohort: str | None = None
        best_cohort_drs = NEGATIVE
        for child in tree.children.get(cohort, []):
            if not child.startswith("cohort:") or child in self.pruned:
                continue
            d = self.shares.drs(child, self.usage)
            if not d.borrowing and child not in self.ancestors:
                self.pruned.add(child)
            elif compare(d, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, d
        if best_cohort is None and best_cq is None:
            self.pruned.add(cohort)
            return None
        if best_cohort is not None and compare(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        return best_cq

    def almost_lcas(self, target: str) -> tuple[str, str]:
        """(the preemptor's, the target's) node just below their lowest common cohort."""
        tree = self.shares.tree
        lca = next(a for a in tree.path(target)[1:] if a in self.ancestors)

        def below(node: str) -> str:
            last = node
            for a in tree.path(node)[1:]:
                if a == lca:
                    return last
                last = a
            raise AssertionError("no almost-LCA")
        return below(self.preemptor), below(target)


def strategy_allows(name: str, preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    if name == LESS_THAN_INITIAL_SHARE:
        return compare(preemptor_new, target_old) < 0
    return compare(preemptor_new, target_new) <= 0


def fair_targets(state: "ClusterState", shares: Shares, preemptor_cq: str, requests: Mapping[FR, int],
                 frs_need: Sequence[FR], candidates: Sequence["Admitted"],
                 order: Callable[["Admitted"], tuple[object, ...]],
                 fits: Callable[[], bool]) -> list[tuple["Admitted", str]] | None:
    """fairPreemptions: the victims (with their reasons) that let `requests` fit in
    `preemptor_cq` (quota, and whatever else `fits()` checks on the state), or None.

    `candidates` are those findCandidates gives (the preemptor's queue under
    withinClusterQueue, borrowing queues of its cohort tree under
    reclaimWithinCohort, each using a flavor/resource that needs preemption), in
    Kueue's candidate order. `fits()` reads the state with the chosen victims
    released and without the preemptor's own usage. The state is left as found.
    """
    if not candidates:
        return None
    strategies = shares.fair.strategies or DEFAULT_STRATEGIES
    usage = live_usage(state)
    key = f"cq:{preemptor_cq}"
    removed: list[tuple["Admitted", str]] = []
    charged = [(fr, v) for fr, v in sorted(requests.items()) if v]

    def simulate(sign: int) -> None:
        for fr, v in charged:
            state.charge(preemptor_cq, fr, sign * v)

    def take(a: "Admitted", reason: str) -> None:
        state.release(a.view)
        removed.append((a, reason))

    def fits_without_me() -> bool:
        simulate(-1)
        try:
            return fits()
        finally:
            simulate(+1)

    def queues_of(members: Sequence["Admitted"]) -> dict[str, list["Admitted"]]:
        out: dict[str, list["Admitted"]] = {}
        for a in members:
            out.setdefault(f"cq:{a.cq}", []).append(a)
        return out

    simulate(+1)
    done = False
    try:
        # queueWithinNominalInResourcesNeedingPreemption, with the workload's usage added.
        within = all(usage(key, fr) <= state.quota.limits(key, fr)[0] for fr in frs_need)
        ordering = _Ordering(shares, usage, key, queues_of(candidates), order)
        retry: list["Admitted"] = []
        while not done and (nxt := ordering.iterate()) is not None:
            target = nxt[0]
            if target == key:
                take(ordering.pop(target), PREEMPTED)
                done = fits_without_me()
                continue
            if within:
                take(ordering.pop(target), RECLAIMED)
                done = fits_without_me()
                continue
            mine, theirs = ordering.almost_lcas(target)
            preemptor_new, target_old = shares.drs(mine, usage), shares.drs(theirs, usage)
            while ordering.has(target):
                a = ordering.pop(target)
                state.release(a.view)
                target_new = shares.drs(theirs, usage)
                state.release(a.view, sign=-1)
                if strategy_allows(strategies[0], preemptor_new, target_old, target_new):
                    take(a, RECLAIMED)
                    done = fits_without_me()
                    break
                retry.append(a)
        if not done and len(strategies) > 1 and retry:
            second = _Ordering(shares, usage, key, queues_of(sorted(retry, key=order)), order)
            while not done and (nxt := second.iterate()) is not None:
                target = nxt[0]
                mine, theirs = second.almost_lcas(target)
                if compare(shares.drs(mine, usage), shares.drs(theirs, usage)) < 0:
                    take(second.pop(target), RECLAIMED)
                    done = fits_without_me()
                second.pruned.add(target)
    finally:
        simulate(-1)
    if not done:
        for a, _ in reversed(removed):
            state.release(a.view, sign=-1)
        return None
    # fillBackWorkloads: add back, last removed but one first, what it fits without.
    kept = list(removed)
    for i in range(len(kept) - 2, -1, -1):
        a, _ = kept[i]
        state.release(a.view, sign=-1)
        if fits():
            kept[i] = kept[-1]
            kept.pop()
        else:
            state.release(a.view)
    for a, _ in kept:
        state.release(a.view, sign=-1)
    return kept


def from_snapshot(snapshot: "Snapshot") -> FairSharing | None:
    """Kueue's fair sharing as the snapshot's Configuration sets it; None when off."""
    if not snapshot.kueue_config.fair_sharing.enabled:
        return None
    return weights_of(snapshot)
