"""What is free where, and what each queue already uses, before the plan.

Free capacity of a node = allocatable - unmanaged pods - Stowplan's running
workloads placed on it (per their assignments), so an eviction can give it back.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from models import FlavorResource, ObjectRef, PodSet, Resources, Snapshot, Workload, WorkloadState



def pod_set_by_name(workload: Workload, name: str) -> PodSet | None:
    return next((ps for ps in workload.pod_sets if ps.name == name), None)


def running(snapshot: Snapshot) -> list[Workload]:
    return [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING]


def node_usage_of(workload: Workload) -> Mapping[str, Resources]:
    """Requests a running workload's pods place on each node (models.Workload.node_usage:
    computed once per workload object and kept with it; callers must not change it)."""
    return workload.node_usage


def quota_usage_of(workload: Workload) -> dict[FlavorResource, int]:
    """What a running workload charges to its ClusterQueue's quota."""
    usage: dict[FlavorResource, int] = defaultdict(int)
    for assignment in workload.assignment:
        pod_set = pod_set_by_name(workload, assignment.name)
        if pod_set is None:
            continue
        for resource, flavor in assignment.flavors.items():
            usage[(flavor, resource)] += assignment.count * pod_set.request.get(resource)
    return dict(usage)


def free_capacity(snapshot: Snapshot, evicted: Iterable[ObjectRef] = ()) -> dict[str, Resources]:
    """Node name -> free resources (usable nodes only), with `evicted` workloads gone."""
    gone = set(evicted)
    free = {n.name: n.free for n in snapshot.nodes if n.usable}
    for workload in running(snapshot):
        if workload.ref in gone:
            continue
        for node, used in node_usage_of(workload).items():
            if node in free:
                free[node] = free[node] - used
    return free


def cluster_queue_usage(snapshot: Snapshot, evicted: Iterable[ObjectRef] = ()) -> dict[str, dict[FlavorResource, int]]:
    """`cq:NAME` -> flavor/resource -> quota used by running workloads (QuotaTree's keys)."""
    gone = set(evicted)
    usage: dict[str, dict[FlavorResource, int]] = defaultdict(lambda: defaultdict(int))
    for workload in running(snapshot):
        if workload.ref in gone or workload.cluster_queue is None:
            continue
        for fr, amount in quota_usage_of(workload).items():
            usage[f"cq:{workload.cluster_queue}"][fr] += amount
    return {k: dict(v) for k, v in usage.items()}
