"""Elastic running workloads (Kueue's ElasticJobs via workload slices): grown or shrunk by the plan.

A running Job marked `kueue.x-k8s.io/elastic-job: "true"` runs `c` pods (its assignment)
and may run from its floor (`kueue.x-k8s.io/job-min-parallelism`, else 1) up to its most
(its pod set's count: `stowplan.io/max-parallelism`, else spec.parallelism). A running
elastic RayCluster or RayJob (planner.kinds.ray) is the same per worker group: the reader
gives each resizable group its most (`maxReplicas`) as its count and its floor
(`minReplicas`, at least 1) as its min_count; the head and the submitter never change.
The planners (greedy and MILP) know nothing of resizing: `expand` rewrites the snapshot
into what they already decide, and `collapse` turns their answer back into resizes, one
per pod set resized.

  - the running *core*: the Job itself, holding `floor` pods of each resizable pod set
    (those on the nodes where it has most: what it keeps is compact) and all of its
    other pod sets. Kept unless evicted, as any running work.
  - *release parts*: one running workload of one pod for each pod above a floor,
    evictable under the Job's own preemption rules, costing the pod's share of the lost
    work and no restart (the Job goes on): so releasing pods is preferred to evicting
    the Job wherever it frees enough. Evicting the core evicts its parts too (a row of
    the MILP; a plan that keeps a part of an evicted Job frees less than it could, never
    more, and `collapse` evicts the whole Job).
  - a *growth slice* per resizable pod set: a pending workload of `most - c` pods of
    that pod set (partial admission from 1),
    of the Job's queue and priority, pinned to the flavors it runs under, and, with a
    required topology level, to the domain at that level it runs in. Admitting k of its
    pods is Kueue's new slice of `c + k` pods replacing the old one.

Pure: no I/O. Which workloads and pod sets may be resized, and their floors, are the
verifier's definitions (planner.verify.resize), which checks the resizes against the
snapshot as read (the floor, the most, the flavors, the required domain, the released
pods existing); the cycle's verifier has already checked capacity and quota with the
new sizes, on the expanded snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from models import (Admission, Eviction, ObjectRef, Plan, PodSet, PodSetAssignment, Resize,
                    Snapshot, Workload, WorkloadState)
from planner.kueue.semantics import eviction_cost
from planner.verify.resize import domains_of, floor_of, resizable, resizable_pod_sets

GROW = "+grow-"         # a name suffix no Kubernetes name can carry: no clash with a real object
PART = "+pod-"


@dataclass
class Expansion:
    """What `expand` split, to put back together: ref -> the Job as read."""

    jobs: dict[ObjectRef, Workload] = field(default_factory=dict)
    growth: dict[ObjectRef, tuple[ObjectRef, str]] = field(default_factory=dict)       # slice -> (Job, pod set)
    parts: dict[ObjectRef, tuple[ObjectRef, str, str]] = field(default_factory=dict)   # part -> (Job, pod set, node)

    @property
    def empty(self) -> bool:
        return not self.jobs


def expand(snapshot: Snapshot) -> tuple[Snapshot, Expansion]:
    """The snapshot with each resizable Job split into core, release parts and growth slice."""
    expansion = Expansion()
    out: list[Workload] = []
    for workload in snapshot.workloads:
        if not resizable(workload):
            out.append(workload)
            continue
        expansion.jobs[workload.ref] = workload
        out.extend(_split(snapshot, workload, expansion))
    if expansion.empty:
        return snapshot, expansion
    return replace(snapshot, workloads=tuple(out)), expansion


def _split(snapshot: Snapshot, job: Workload, expansion: Expansion) -> list[Workload]:
    names = resizable_pod_sets(job)
    pod_sets = {ps.name: ps for ps in job.pod_sets}
    total = sum(a.count for a in job.assignment)
    cost = eviction_cost(job, snapshot)
    restart = 0.0 if job.preemption_cost is not None else snapshot.policy.restart_cost
    per_pod = max(0.0, cost - restart) / max(1, total)
    kept: list[PodSetAssignment] = []
    parts: list[Workload] = []
    growth: list[Workload] = []
    for running in job.assignment:
        pod_set = pod_sets[running.name]
        if running.name not in names:
            kept.append(running)
            continue
        core, released = _keep_floor(running, floor_of(pod_set))
        kept.append(core)
        values_of = {values[-1]: values for values, _ in running.domains if values}
        for node in released:
            index = len(parts)
            ref = ObjectRef(job.ref.kind, job.ref.namespace, f"{job.ref.name}{PART}{index}")
            expansion.parts[ref] = (job.ref, running.name, node)
            part = replace(running, count=1, domains=((values_of[node], 1),))
            parts.append(replace(job, ref=ref, uid=f"{job.uid}{PART}{index + 1}", pod_sets=(pod_set,),
                                 assignment=(part,), preemption_cost=per_pod, pods_ready=None, movable=False,
                                 part_of=job.ref, elastic_job=False))
        if pod_set.count > running.count:
            growth.append(_growth_slice(snapshot, job, pod_set, running, expansion))
    if not parts:
        return [job, *growth]
    core_cost = None if job.preemption_cost is None else job.preemption_cost * (total - len(parts)) / total
    return [replace(job, assignment=tuple(kept), preemption_cost=core_cost), *parts, *growth]


def _keep_floor(running: PodSetAssignment, floor: int) -> tuple[PodSetAssignment, list[str]]:
    """(the `floor` pods kept, where the pod set has most of them: what it keeps is compact;
    the node of each other pod, one entry a pod)."""
    if running.count <= floor:
        return running, []
    values_of = {values[-1]: values for values, _ in running.domains if values}
    per_node = running.pods_per_node()
    keep: dict[str, int] = {}
    left = floor
    for node, pods in sorted(per_node.items(), key=lambda kv: (-kv[1], kv[0])):
        keep[node] = min(pods, left)
        left -= keep[node]
    core = replace(running, count=floor,
                   domains=tuple((values_of[n], k) for n, k in sorted(keep.items()) if k > 0))
    released = [node for node, pods in sorted(per_node.items()) for _ in range(pods - keep.get(node, 0))]
    return core, released


def _growth_slice(snapshot: Snapshot, job: Workload, pod_set: PodSet, running: PodSetAssignment,
                  expansion: Expansion) -> Workload:
    """Pending work of `most - c` pods of `pod_set`, in the flavors (and required domain) it runs in."""
    count, most = running.count, pod_set.count
    selector = dict(pod_set.node_selector)
    request = pod_set.topology
    if request.mode == "required" and request.level:
        # within the domain it runs in at its required level (Kueue: one domain or none)
        domains = domains_of(snapshot, request.level, running.pods_per_node())
        if len(domains) == 1:
            selector[request.level] = domains.pop()
    grow = replace(pod_set, count=most - count, min_count=1 if most - count > 1 else None,
                   node_selector=selector, fixed_flavors=dict(running.flavors))
    ref = ObjectRef(job.ref.kind, job.ref.namespace, f"{job.ref.name}{GROW}{pod_set.name}")
    expansion.growth[ref] = (job.ref, pod_set.name)
    return replace(job, ref=ref, uid=f"{job.uid}{GROW}{pod_set.name}", pod_sets=(grow,),
                   state=WorkloadState.PENDING, assignment=(), admitted_at=None, checkpointed_at=None,
                   pods_ready=None, pods_ready_at=None, pods_not_ready_at=None, movable=False,
                   elastic_job=False, resource_version=job.resource_version)


def collapse(plan: Plan, expansion: Expansion) -> Plan:
    """The planners' answer on the expanded snapshot -> the plan of the snapshot as read."""
    if expansion.empty:
        return plan
    evicted = {e.workload for e in plan.evictions if e.workload in expansion.jobs}
    grown: dict[tuple[ObjectRef, str], Admission] = {}
    admissions = []
    for admission in plan.admissions:
        owner = expansion.growth.get(admission.workload)
        if owner is None:
            admissions.append(admission)
        elif owner[0] not in evicted:
            grown[owner] = admission
    released: dict[tuple[ObjectRef, str], list[Eviction]] = {}
    evictions = []
    part_costs: dict[ObjectRef, float] = {}
    for eviction in plan.evictions:
        part = expansion.parts.get(eviction.workload)
        if part is None:
            evictions.append(eviction)
            continue
        part_costs[part[0]] = part_costs.get(part[0], 0.0) + eviction.cost
        if part[0] not in evicted:
            released.setdefault((part[0], part[1]), []).append(eviction)
    # an evicted Job goes whole: its parts' cost is part of its eviction's
    evictions = [replace(e, cost=e.cost + part_costs.get(e.workload, 0.0)) if e.workload in evicted else e
                 for e in evictions]
    resizes = []
    for ref, name in sorted(set(grown) | set(released)):
        job = expansion.jobs[ref]
        (running,) = [a for a in job.assignment if a.name == name]
        release: dict[str, int] = {}
        shrink = released.get((ref, name), [])
        for eviction in shrink:
            node = expansion.parts[eviction.workload][2]
            release[node] = release.get(node, 0) + 1
        slice_ = grown[(ref, name)].pod_sets[0] if (ref, name) in grown else None
        removed = sum(release.values())
        resizes.append(Resize(
            workload=ref, cluster_queue=job.queue_name, pod_set=name, from_count=running.count,
            to_count=running.count - removed + (slice_.count if slice_ else 0), slice=slice_,
            release=tuple(sorted(release.items())),
            reason=min((e.reason for e in shrink), default=""),
            for_=tuple(sorted({r for e in shrink for r in e.for_})),
            cost=round(sum(e.cost for e in shrink), 6)))
    pending = tuple(p for p in plan.pending if p.workload not in expansion.growth)
    return replace(plan, admissions=tuple(admissions), evictions=tuple(evictions), pending=pending,
                   resizes=tuple(resizes))


def grown_assignment(running: PodSetAssignment, resize: Resize) -> PodSetAssignment:
    """Where the Job runs after `resize`: its pods less the released, plus the slice's."""
    per_node = running.pods_per_node()
    values_of = {values[-1]: values for values, _ in running.domains if values}
    for node, count in resize.release:
        per_node[node] = per_node.get(node, 0) - count
    if resize.slice is not None:
        for values, count in resize.slice.domains:
            if values:
                values_of.setdefault(values[-1], values)
                per_node[values[-1]] = per_node.get(values[-1], 0) + count
    domains = tuple((values_of[n], c) for n, c in sorted(per_node.items()) if c > 0)
    return replace(running, count=sum(c for _, c in domains), domains=domains)

