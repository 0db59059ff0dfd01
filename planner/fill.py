"""Complete a plan greedily: admit, Kueue's way and without evicting anything more,
whatever pending work still fits after the plan.

A time-limited MILP stage can stop with room left over (lower tiers are left out of
higher tiers' stages, and a stage cut short never adds them back); this pass puts
it to use, so a plan is never poorer than what greedy would add on top of it.
"""

from __future__ import annotations

from dataclasses import replace

from models import Decisions, PreemptionPolicy, Snapshot, WorkloadState
from planner.greedy import greedy


def fill(snapshot: Snapshot, decisions: Decisions) -> Decisions:
    """`decisions` plus the greedy admissions of the work that still fits after them."""
    admitted = {a.workload: a for a in decisions.admissions}
    evicted = {e.workload for e in decisions.evictions}
    workloads = []
    for w in snapshot.workloads:
        if w.ref in evicted:
            continue  # gone from the cluster in this plan; not admitted back in the same one
        if w.ref in admitted:
            w = replace(w, state=WorkloadState.RUNNING, assignment=admitted[w.ref].pod_sets,
                        admitted_at=snapshot.now)
        workloads.append(w)
    # No queue may preempt in this pass: evictions are the MILP's to decide.
    queues = {name: replace(cq, preemption=PreemptionPolicy()) for name, cq in snapshot.cluster_queues.items()}
    residual = replace(snapshot, workloads=tuple(workloads), cluster_queues=queues)
    extra = greedy(residual).decisions.admissions
    if not extra:
        return decisions
    return Decisions(tuple(sorted(decisions.admissions + extra, key=lambda a: a.workload)), decisions.evictions)
