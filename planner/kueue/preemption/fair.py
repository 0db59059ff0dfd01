"""Kueue's fair-sharing preemption (fairPreemptions) for greedy's preemptor.

Which admitted workloads are candidates (findCandidates), in Kueue's order, and the
targets among them, asked of planner.kueue.fairsharing (the strategies over the
queues' shares) on the preemptor's state; planner.kueue.preemption.preemptor calls
these where Kueue's Configuration enables fair sharing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from models import ClusterQueue, FlavorResource as FR, Workload
from planner.kueue import fairsharing
from planner.kueue.preemption import PREEMPTED, RECLAIMED, Target
from planner.kueue.quota import Overlay, UsageLookup
from planner.kueue.registry import Admitted

if TYPE_CHECKING:
    from planner.kueue.preemption.preemptor import Preemptor


def candidates(p: "Preemptor", w: Workload, cq: ClusterQueue, frs_need: set[FR]) -> list[Admitted]:
    """findCandidates: the preemptor's queue's workloads its withinClusterQueue allows,
    and, with reclaimWithinCohort, those of every queue of its cohort tree borrowing
    a flavor/resource that needs preemption; each using one of those. Kueue's
    candidate order: being evicted first, other queues first, lower priority first,
    most recently admitted first, then UID."""
    out: list[Admitted] = []
    key = f"cq:{cq.name}"
    tree = p.quota.tree

    def allowed(policy: str, a: Admitted) -> bool:
        if policy == "LowerPriority":
            return a.priority < w.priority
        if policy == "LowerOrNewerEqualPriority":
            return a.priority < w.priority or (a.priority == w.priority and w.queued_at < a.view.queued_at)
        return policy == "Any"

    def uses(a: Admitted) -> bool:
        return a.evictable and bool(a.frs & frs_need)

    if cq.preemption.within_cluster_queue != "Never":
        out += [a for a in p.registry.by_cq.get(cq.name, [])
                if uses(a) and allowed(cq.preemption.within_cluster_queue, a)]
    reclaim = cq.preemption.reclaim_within_cohort
    if tree.parent.get(key) is not None and reclaim != "Never":
        root = tree.root_of(key)
        for node in tree.nodes():
            name = node[3:]
            if not node.startswith("cq:") or node == key or tree.root_of(node) != root:
                continue
            if not any(p.state.used(name, fr) > p.state.nominal(name, fr) for fr in frs_need):
                continue
            out += [a for a in p.registry.by_cq.get(name, [])
                    if uses(a) and a.reclaimable and allowed(reclaim, a)]
    out.sort(key=lambda a: order(p, a, cq))
    return out


def order(p: "Preemptor", a: Admitted, cq: ClusterQueue) -> tuple[bool, bool, int, float, int]:
    """Kueue's candidate order for fair preemption (see candidates)."""
    return (not a.evicting, a.cq == cq.name, a.priority, -a.admitted_at, p.tie.get(a.ref, 0))


def targets(p: "Preemptor", w: Workload, cq: ClusterQueue, frs_need: set[FR], usage: Mapping[FR, int],
            nodes_fit: Callable[[], bool] | None) -> tuple[list[Target], UsageLookup | None]:
    """fairPreemptions (planner.kueue.fairsharing) over the preemptor's state: the victims, and
    the quota with them gone (for the oracle's borrowing height)."""
    assert p.fair is not None
    state = p.state
    found_candidates = candidates(p, w, cq, frs_need)

    def fits() -> bool:
        for fr, v in usage.items():
            if v > max(0, state.available(cq.name, fr)):
                return False
        return nodes_fit() if nodes_fit is not None else True

    found = fairsharing.fair_targets(state, p.fair, cq.name, usage, sorted(frs_need), found_candidates,
                                     lambda a: order(p, a, cq), fits)
    if not found:
        return [], None
    victims = [a.view for a, _ in found]
    state.release_many(victims)
    try:
        overlay = Overlay(state, set(usage) | frs_need)
    finally:
        state.release_many(victims, sign=-1)
    return [Target(a, PREEMPTED if reason == fairsharing.PREEMPTED else RECLAIMED) for a, reason in found], overlay
