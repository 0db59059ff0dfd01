"""The fleet's own rules, checked on a plan across MultiKueue worker clusters.

Each worker's part is checked by planner.verify like any one-cluster plan; here only
what spans clusters: every admission names a known worker, a workload is admitted once
in the fleet (a gang never spans clusters), every pod set's nodes are nodes of the
admission's cluster, and the manager's ClusterQueues hold what runs and what is admitted.

The manager's quota, as MultiKueue setups define it: the manager's flavors carry no
nodes, so its ClusterQueue is checked per resource, summed over its flavors (nominal,
plus the borrowing limit where it is in a cohort; no limit in a cohort: not capped here).
Models only, no I/O.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from models import Admission, ObjectRef, PodSet, Snapshot, WorkloadState

Caps = dict[tuple[str, str], int | None]


def manager_caps(manager: Snapshot) -> Caps:
    """(ClusterQueue, resource) -> the most it may hold; None: no cap here."""
    caps: Caps = {}
    for cq in manager.cluster_queues.values():
        for group in cq.resource_groups:
            for flavor in group.flavors:
                for resource, quota in flavor.resources.items():
                    key = (cq.name, resource)
                    extra: int | None = 0
                    if cq.cohort is not None:
                        extra = quota.borrowing_limit
                    if key in caps and caps[key] is None or extra is None:
                        caps[key] = None
                    else:
                        caps[key] = (caps.get(key) or 0) + quota.nominal + extra
    return caps


def usage_of(cluster_queue: str, pod_sets: Sequence[PodSet], counts: Mapping[str, int]) -> dict[tuple[str, str], int]:
    """(ClusterQueue, resource) -> what `counts` pods of each pod set request."""
    out: dict[tuple[str, str], int] = {}
    for ps in pod_sets:
        for resource, value in ps.request.items():
            key = (cluster_queue, resource)
            out[key] = out.get(key, 0) + value * counts.get(ps.name, 0)
    return out


def verify_fleet(workers: Mapping[str, Snapshot], manager: Snapshot, admissions: Sequence[Admission],
                 evicted: Iterable[ObjectRef] = ()) -> list[str]:
    """Every broken fleet rule, as sentences; empty when the plan holds (`evicted`: the
    plan's evictions, whose manager quota is given back)."""
    out: list[str] = []
    nodes = {name: {n.name for n in snap.nodes} for name, snap in workers.items()}
    seen: dict[ObjectRef, str] = {}
    for a in admissions:
        if a.cluster is None or a.cluster not in workers:
            out.append(f"{a.workload}: admitted on {a.cluster!r}, not a worker cluster of the fleet")
            continue
        if a.workload in seen:
            out.append(f"{a.workload}: admitted on {seen[a.workload]} and again on {a.cluster}: "
                       "a workload's pods are all on one cluster")
        seen[a.workload] = a.cluster
        for psa in a.pod_sets:
            foreign = sorted(set(psa.pods_per_node()) - nodes[a.cluster])
            if foreign:
                out.append(f"{a.workload}: pod set {psa.name} on {', '.join(foreign[:3])}, not nodes of "
                           f"cluster {a.cluster}: a workload's pods are all on one cluster")
    out.extend(_manager_quota(workers, manager, admissions, set(evicted)))
    return out


def _manager_quota(workers: Mapping[str, Snapshot], manager: Snapshot, admissions: Sequence[Admission],
                   evicted: set[ObjectRef]) -> list[str]:
    by_ref = {w.ref: w for w in manager.workloads}
    used: dict[tuple[str, str], int] = {}

    def charge(ref: ObjectRef, counts: Mapping[str, int]) -> None:
        mine = by_ref.get(ref)
        if mine is None or not mine.cluster_queue:
            return
        for key, value in usage_of(mine.cluster_queue, mine.pod_sets, counts).items():
            used[key] = used.get(key, 0) + value

    for snap in workers.values():
        for w in snap.workloads:
            if w.state is WorkloadState.RUNNING and w.ref not in evicted:
                charge(w.ref, {ps.name: ps.count for ps in w.assignment})
    for a in admissions:
        charge(a.workload, {ps.name: ps.count for ps in a.pod_sets})
    caps = manager_caps(manager)
    return [f"manager ClusterQueue {cq}: {resource} used {value} above its quota {caps[(cq, resource)]}"
            for (cq, resource), value in sorted(used.items())
            if caps.get((cq, resource)) is not None and value > (caps[(cq, resource)] or 0)]
