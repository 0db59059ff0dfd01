"""Pods of a decided plan gathered, where that helps, into fewer domains.

The compact model decides volumes and evictions with preferred topologies placed
like unconstrained ones (planner.formulate), and the tie-breakers that gather them
need the full model, which a short cycle has no time to build. So a plan decoded
from the compact model can scatter a pod set the start had kept in one rack. This
pass keeps every decision (who starts, with how many pods, on which flavors; who is
evicted) and places each admission with a preferred topology again as greedy would
(Kueue's BestFit), largest first, keeping the new placement only where it spans
fewer domains at its preferred levels. Nodes and quota are checked as greedy checks
them, so the plan stays as valid as it was. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from models import Admission, Decisions, PodSetAssignment, Snapshot, Workload
from planner.greedy import ClusterState, try_counts
from planner.semantics import assigned_volume
from planner.topology import levels_for, node_path


def relocate(snapshot: Snapshot, decisions: Decisions) -> Decisions:
    """`decisions` with the pods of preferred-topology admissions on fewer domains where
    BestFit finds such a placement for the same counts and flavors."""
    by_ref = {w.ref: w for w in snapshot.workloads}
    nodes = {n.name: n for n in snapshot.nodes}
    state = ClusterState.after(snapshot, decisions)
    admitted = {a.workload: a for a in decisions.admissions}

    def volume(admission: Admission) -> float:
        return assigned_volume(by_ref[admission.workload], admission.pod_sets, snapshot)

    preferred = [a for a in decisions.admissions
                 if any(ps.topology.mode == "preferred" for ps in by_ref[a.workload].pod_sets)]
    for admission in sorted(preferred, key=lambda a: (-volume(a), a.workload)):
        workload = by_ref[admission.workload]
        placed = replace(workload, assignment=admission.pod_sets, cluster_queue=admission.cluster_queue)
        state.release(placed)
        counts = {psa.name: psa.count for psa in admission.pod_sets}
        choices = try_counts(state, replace(workload, cluster_queue=admission.cluster_queue),
                             [counts.get(ps.name, 0) for ps in workload.pod_sets])
        moved = None if isinstance(choices, str) else tuple(c.assignment() for c in choices)
        if moved is not None and _flavors(moved) == _flavors(admission.pod_sets) \
                and _spans(snapshot, nodes, workload, moved) < _spans(snapshot, nodes, workload, admission.pod_sets):
            state.commit(admission.cluster_queue, choices)  # type: ignore[arg-type]
            admitted[admission.workload] = replace(admission, pod_sets=moved)
        else:
            state.release(placed, sign=-1)    # back where it was
    return Decisions(admissions=tuple(admitted[a.workload] for a in decisions.admissions),
                     evictions=decisions.evictions)


def _flavors(assignments: tuple[PodSetAssignment, ...]) -> dict[str, dict[str, str]]:
    return {psa.name: dict(psa.flavors) for psa in assignments}


def _spans(snapshot: Snapshot, nodes: dict, workload: Workload,
           assignments: tuple[PodSetAssignment, ...]) -> tuple[int, ...]:
    """Domains spanned by the preferred pod sets, level by level from the preferred one
    up (the objective's order: fewest at that level, then at each level above)."""
    by_name = {ps.name: ps for ps in workload.pod_sets}
    total: dict[int, int] = {}
    for psa in assignments:
        pod_set = by_name.get(psa.name)
        if pod_set is None or pod_set.topology.mode != "preferred" or not pod_set.topology.level:
            continue
        levels = levels_for(snapshot, [snapshot.flavors[f] for f in sorted(set(psa.flavors.values()))
                                       if f in snapshot.flavors])
        if pod_set.topology.level not in levels:
            continue
        depth = levels.index(pod_set.topology.level)
        paths = [node_path(nodes[n], levels) for n in psa.pods_per_node() if n in nodes]
        for level in range(depth, -1, -1):
            total[depth - level] = total.get(depth - level, 0) + len({p[: level + 1] for p in paths if p})
    return tuple(total[k] for k in sorted(total))
