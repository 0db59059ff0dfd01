"""Evictions a decided plan does not need, taken back.

A stage cut short by the time limit can leave evictions its admissions do not use:
the sub-MIPs search around the start and the LP point, and an eviction both agree on
stays fixed even where a later move freed its room. With every admission in place,
a victim whose nodes still have room for it and whose ClusterQueue still has quota
for it keeps running. That only puts running work back, so no tier serves less and
the preemption cost falls (REFERENCE §3: never evict to gain nothing). Measured at M
with the priority-100 stage cut short: 72 of 547 evictions taken back. Where victims
compete for the same room, the objective's order decides who runs again: higher
priority first, then more volume, then the costlier loss. Pure: no I/O.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from models import Decisions, Eviction, ObjectRef, Snapshot, Workload
from planner.greedy import ClusterState
from planner.semantics import effective_priority, running_volume


def restore(snapshot: Snapshot, decisions: Decisions) -> Decisions:
    """`decisions` without the evictions that its admissions fit without."""
    if not decisions.evictions:
        return decisions
    by_ref = {w.ref: w for w in snapshot.workloads}
    running = taken_back(ClusterState.after(snapshot, decisions), decisions.evictions, by_ref)
    if not running:
        return decisions
    return Decisions(admissions=decisions.admissions,
                     evictions=tuple(e for e in decisions.evictions if e.workload not in running))


def taken_back(state: ClusterState, evictions: Iterable[Eviction], by_ref: Mapping[ObjectRef, Workload]) -> set[ObjectRef]:
    """The evicted workloads that fit back as they ran in `state` (a plan's, every
    admission in place), taken back there one by one in the objective's order: higher
    priority, more volume, the costlier loss first."""
    snapshot = state.snapshot

    def turn(eviction: Eviction) -> tuple[int, float, float, ObjectRef]:
        victim = by_ref[eviction.workload]
        return (-effective_priority(victim, snapshot), -running_volume(victim, snapshot), -eviction.cost,
                eviction.workload)

    running: set[ObjectRef] = set()
    for eviction in sorted(evictions, key=turn):
        victim = by_ref[eviction.workload]
        if state.fits_back(victim):
            state.release(victim, sign=-1)      # running again: its room and quota taken
            running.add(eviction.workload)
    return running
