"""Kueue's cycle run on from a plan: what Kueue would do next in the state a plan leaves.

A plan found with the stability rule relaxed (planner.cycle's first pass: the model
without its stability rows) may leave a queue below its nominal quota with work
waiting while others borrow, which Kueue undoes at once by reclaiming. Running greedy
(Kueue's cycle, to its fixed point) on the state the plan leaves does exactly what
Kueue would; joined to the plan, what it admits and evicts gives a plan Kueue leaves
as it is. The cycle verifies it like any other before using it.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from models import Admission, Decisions, Eviction, ObjectRef, Snapshot, Workload, WorkloadState
from planner.kueue import capacity, semantics
from planner.kueue.preemption.victims import PreemptionRules
from planner.greedy import greedy


def after(snapshot: Snapshot, decisions: Decisions) -> Snapshot:
    """The state `decisions` leave: what they admit runs where they place it (admitted
    now, so a minimum runtime protects it as Kueue's does), what they evict is gone
    (requeued: it is the next cycle's, as the verifier's stability rule has it)."""
    admitted = {a.workload: a.pod_sets for a in decisions.admissions}
    admitted.update({m.workload: m.to for m in decisions.migrations})   # moved: running at the new place
    evicted = {e.workload for e in decisions.evictions}
    workloads = []
    for w in snapshot.workloads:
        if w.ref in evicted:
            continue
        placed = admitted.get(w.ref)
        if placed is not None:
            w = replace(w, state=WorkloadState.RUNNING, assignment=placed, admitted_at=snapshot.now)
        workloads.append(w)
    return replace(snapshot, workloads=tuple(workloads))


def continued(snapshot: Snapshot, decisions: Decisions, rules: PreemptionRules | None) -> Decisions | None:
    """`decisions` and what Kueue's cycle does after them, as one plan of this snapshot;
    None when an eviction of `decisions` is left with no admitted workload the rules
    (`rules`: who may evict whom in `snapshot`; None, the model has no victims) allow it for."""
    onward = greedy(after(snapshot, decisions)).decisions
    if any(e.workload in {m.workload for m in decisions.migrations} for e in onward.evictions):
        return None     # a moved workload would be evicted at once: not a plan to carry on
    mine = {a.workload for a in decisions.admissions}
    undone = {e.workload for e in onward.evictions if e.workload in mine}   # reclaimed at once: never admitted
    admissions = sorted([a for a in decisions.admissions if a.workload not in undone] + list(onward.admissions),
                        key=lambda a: a.workload)
    admitted = {a.workload for a in admissions}
    by_ref = {w.ref: w for w in snapshot.workloads}
    evictions = []
    for eviction in list(decisions.evictions) + [e for e in onward.evictions if e.workload not in mine]:
        kept = tuple(ref for ref in eviction.for_ if ref in admitted)
        if kept:
            evictions.append(replace(eviction, for_=kept))
            continue
        found = justified(by_ref[eviction.workload], admissions, by_ref, rules)
        if found is None:
            return None
        evictions.append(found)
    return Decisions(admissions=tuple(admissions), evictions=tuple(sorted(evictions, key=lambda e: e.workload)),
                     migrations=decisions.migrations)


def justified(victim: Workload, admissions: list[Admission], by_ref: dict[ObjectRef, Workload],
              rules: PreemptionRules | None) -> Eviction | None:
    """The eviction of `victim` for the admissions the rules allow it for, those placed on
    its nodes first (as planner.milp.solution names them); None when no admission may evict it."""
    if rules is None:
        return None
    nodes = set(capacity.node_usage_of(victim))
    near = [a.workload for a in admissions
            if nodes & {path[-1] for ps in a.pod_sets for path, _ in ps.domains}]
    for group in (near, [a.workload for a in admissions]):
        judged = [(ref, rules.reason(by_ref[ref], victim)) for ref in group]
        allowed = [(ref, reason) for ref, reason in judged if reason]
        if allowed:
            return Eviction(victim.ref, allowed[0][1], tuple(sorted(ref for ref, _ in allowed)),
                            round(semantics.eviction_cost(victim, rules.snapshot), 6))
    return None
