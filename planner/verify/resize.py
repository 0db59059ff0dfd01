"""The verifier's check of resizes: running elastic workloads grown or shrunk in place,
as Kueue's workload slices do (planner.cycle.elastic makes them), on its own.

Checked against the snapshot as read (the cycle's `check` has already judged capacity
and quota with the new sizes, on the snapshot planner.cycle.elastic expanded):

- only a running elastic workload of a kind Kueue resizes (Job, RayCluster, RayJob),
  its assignment known, and only a pod set it may resize (a Job's one pod set; of a Ray
  cluster, the worker groups with a floor, never the head or the submitter);
- a pod set is resized once, and the workload is neither admitted, evicted nor moved
  otherwise in the same plan;
- `from` is what it runs; what it releases runs where it says; `to` is what the release
  and the slice make, at least its floor (or what it runs, if less: a floor above that
  bounds only a shrink) and at most its most;
- the slice is of that pod set, places the pods it adds, takes the flavors it runs
  under, and stays in the one domain its required topology level allows;
- pods are released only for a preemption (Preempted or Reclaimed).

What may be resized (`resizable`, `resizable_pod_sets`, `floor_of`) is defined here
once: planner.cycle.elastic splits exactly these workloads, so the two cannot disagree
about which ones the plan may touch. Like all of planner/verify, models only.
"""

from __future__ import annotations

from typing import Iterator, Mapping

from models import ObjectRef, Plan, PodSet, Resize, Snapshot, Workload, WorkloadState
from planner.verify.violation import Rule, Violation

# The kinds Kueue v0.17 resizes through workload slices (pkg/controller/jobs/{job,raycluster,rayjob}):
# the reader marks no other kind elastic; this is the core's own guard
KINDS = ("Job", "RayCluster", "RayJob")


def resizable(workload: Workload) -> bool:
    """A running elastic workload with a pod set it may resize and its assignment known."""
    return (workload.state is WorkloadState.RUNNING and workload.elastic_job and workload.ref.kind in KINDS
            and bool(resizable_pod_sets(workload))
            and sorted(a.name for a in workload.assignment) == sorted(ps.name for ps in workload.pod_sets)
            and workload.cluster_queue is not None and workload.blocked_reason is None
            and workload.deactivated is None)


def resizable_pod_sets(workload: Workload) -> tuple[str, ...]:
    """The pod sets a resize may change: a Job's one pod set; of several (a Ray cluster's
    head and worker groups), those the reader gave a floor (min_count): the worker groups
    it may resize, never the head or the submitter."""
    if not workload.elastic_job:
        return ()
    if len(workload.pod_sets) == 1:
        return (workload.pod_sets[0].name,)
    return tuple(ps.name for ps in workload.pod_sets if ps.min_count is not None)


def floor_of(pod_set: PodSet) -> int:
    return pod_set.min_count if pod_set.min_count is not None else 1


def domains_of(snapshot: Snapshot, level: str, nodes: Mapping[str, int]) -> set[str]:
    """The values of node label `level` on `nodes` (a node without it: "")."""
    labels = {n.name: n.labels for n in snapshot.nodes}
    return {labels.get(name, {}).get(level, "") for name in nodes}


def check_resizes(snapshot: Snapshot, plan: Plan) -> list[Violation]:
    """The violations of the plan's resizes, in the plan's order, each naming its workload
    (and the node, where it releases pods that do not run there)."""
    workloads = {w.ref: w for w in snapshot.workloads}
    touched = {a.workload for a in plan.admissions} | {e.workload for e in plan.evictions} \
        | {m.workload for m in plan.migrations}
    seen: set[tuple[ObjectRef, str]] = set()
    return [Violation(Rule.RESIZE, f"resize of {resize.workload}: {problem}", workloads=(resize.workload,),
                      node=node, queue=resize.cluster_queue)
            for resize in plan.resizes
            for problem, node in _problems(snapshot, workloads.get(resize.workload), resize, touched, seen)]


def _problems(snapshot: Snapshot, job: Workload | None, resize: Resize, touched: set[ObjectRef],
              seen: set[tuple[ObjectRef, str]]) -> Iterator[tuple[str, str | None]]:
    """What is wrong with one resize: (the problem, the node it is about or None). A floor
    above what the pod set runs bounds only a shrink: a growth from below it is a growth."""
    ref = resize.workload
    if job is None or not resizable(job):
        yield "not a running elastic workload", None
        return
    if resize.pod_set not in resizable_pod_sets(job):
        yield f"pod set {resize.pod_set} is not one it may resize ({', '.join(resizable_pod_sets(job))})", None
        return
    if (ref, resize.pod_set) in seen or ref in touched:
        yield "the plan changes it twice", None
    seen.add((ref, resize.pod_set))
    (pod_set,) = [ps for ps in job.pod_sets if ps.name == resize.pod_set]
    (running,) = [a for a in job.assignment if a.name == resize.pod_set]
    floor, most = min(floor_of(pod_set), running.count), pod_set.count
    if resize.from_count != running.count:
        yield f"from {resize.pod_set}={resize.from_count}, but it runs {running.name}={running.count}", None
    per_node = running.pods_per_node()
    for node, count in resize.release:
        if count <= 0 or count > per_node.get(node, 0):
            yield f"releases {count} pods on {node}, where it runs {per_node.get(node, 0)}", node
    grown = resize.slice.count if resize.slice is not None else 0
    to = running.count - sum(c for _, c in resize.release) + grown
    if to != resize.to_count:
        yield f"to {resize.to_count}, but its release and slice make {to}", None
    if to < floor:
        yield f"{to} pods of {resize.pod_set} is below its minimum {floor}", None
    if to > most:
        yield f"{to} pods of {resize.pod_set} is more than its most {most}", None
    if resize.slice is not None:
        if resize.slice.name != running.name or grown <= 0:
            yield f"its slice is not of pod set {running.name}", None
        if dict(resize.slice.flavors) != dict(running.flavors):
            yield (f"its slice takes flavors {dict(resize.slice.flavors)}, "
                   f"not the ones it runs under {dict(running.flavors)}"), None
        if sum(c for _, c in resize.slice.domains) != grown:
            yield f"its slice places {sum(c for _, c in resize.slice.domains)} pods, not {grown}", None
        level = pod_set.topology.level if pod_set.topology.mode == "required" else None
        if level:
            domains = domains_of(snapshot, level, {**per_node, **resize.slice.pods_per_node()})
            if len(domains) > 1:
                yield f"its slice leaves the {level} domain it requires ({', '.join(sorted(domains))})", None
    if resize.release and resize.reason not in ("Preempted", "Reclaimed"):
        yield f"releases pods for no preemption ({resize.reason or 'no reason'})", None
