"""The plan's summary metrics (REFERENCE section 5), computed from snapshot + decisions.

Pure: no I/O, no solver. "After the plan" means: running workloads that are not
evicted, plus this plan's admissions, plus the unmanaged pods on the nodes.

Keys, in REFERENCE order (nested mappings sorted by key):

- `served_gpus` {priority: GPUs}: the GPUs that workloads running after the plan
  request, per priority: GPUs only, never cores (REFERENCE §5). Every priority of a
  Stowplan workload in the snapshot is a key, 0 when nothing of it runs, so plans of
  one snapshot always have the same keys.
- `served_cores` {priority: cores}: the same in CPU cores for CPU-only work (a
  workload asking for no GPU), with the same keys. The two are never summed: they
  are different units.
- `utilization` {"cpu", "gpu"}: allocated / allocatable over usable nodes; a node's
  allocation (unmanaged + running + admitted) counts up to its allocatable.
- `admitted`, `evicted`, `pending` (pending workloads not admitted, blocked ones
  included), `preemption_cost` (sum of the evictions' costs).
- `locality` {"pod_sets", "one_domain_share", "mean_domains"}: over the pod sets
  this plan admits with a preferred level, the share placed in one domain of that
  level and the mean number of domains spanned (both 0 when there are none). Pod
  sets whose chosen flavors have no topology with that level are left out.
- `free_domains` {level: n}: domains of usable nodes with no pod at all after the
  plan (no unmanaged usage, nothing running, nothing admitted), for every level of
  every Topology plus `kubernetes.io/hostname`. A domain is identified by its values
  at that level and every level above, as Kueue does.
- `migrated`, `migration_cost` (policy `defragment` on only): workloads the plan
  moves and the sum of their costs. A moved workload counts where it goes.

GPU resources: names ending in "/gpu" (models.is_gpu) and policy.gpu_resources.
Numbers are plain ints when whole, else floats rounded to 6 decimals.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Iterator

from models import (
    Decisions, Node, ObjectRef, PodSet, PodSetAssignment, Snapshot, Workload, WorkloadState, is_gpu,
)

from planner.describe import fair_report
HOSTNAME = "kubernetes.io/hostname"
CPU = "cpu"

Placed = tuple[Workload, PodSet, PodSetAssignment]


def summarize(snapshot: Snapshot, decisions: Decisions) -> dict[str, object]:
    """All section-5 metrics of the plan, deterministic, as plain numbers."""
    gpu_names = set(snapshot.policy.gpu_resources)
    placed = list(_placed_after(snapshot, decisions))
    served, cores = _served(snapshot, placed, gpu_names)
    admitted = {a.workload for a in decisions.admissions}
    pending = sum(1 for w in snapshot.workloads
                  if w.state is WorkloadState.PENDING and w.ref not in admitted)
    summary: dict[str, object] = {
        "served_gpus": served,
        "served_cores": cores,
        "utilization": _utilization(snapshot, placed, gpu_names),
        "admitted": len(decisions.admissions),
        "evicted": len(decisions.evictions),
        "pending": pending,
        "preemption_cost": _num(sum(e.cost for e in decisions.evictions)),
        "locality": _locality(snapshot, decisions),
        "free_domains": _free_domains(snapshot, placed),
        **_migrated(snapshot, decisions),
    }
    fair = fair_report.report(snapshot, decisions)   # only with fair sharing on: plans stay as they were without
    if fair is not None:
        summary[fair_report.KEY] = fair
    return summary


def _migrated(snapshot: Snapshot, decisions: Decisions) -> dict[str, object]:
    """With defragmentation on: how many workloads the plan moves, and what that costs."""
    if not snapshot.policy.defragment:
        return {}
    return {"migrated": len(decisions.migrations),
            "migration_cost": _num(sum(m.cost for m in decisions.migrations))}


def _num(value: float) -> int | float:
    rounded = round(float(value), 6)
    return int(rounded) if rounded.is_integer() else rounded


def _is_gpu(resource: str, gpu_names: set[str]) -> bool:
    return is_gpu(resource) or resource in gpu_names


def _pod_sets(workload: Workload) -> dict[str, PodSet]:
    return {ps.name: ps for ps in workload.pod_sets}


def _placed_after(snapshot: Snapshot, decisions: Decisions) -> Iterator[Placed]:
    """Every pod set running after the plan with its assignment."""
    evicted = {e.workload for e in decisions.evictions}
    moved = {m.workload: m.to for m in decisions.migrations}
    by_ref = {w.ref: w for w in snapshot.workloads}
    for workload in snapshot.workloads:
        if workload.state is WorkloadState.RUNNING and workload.ref not in evicted:
            yield from _pairs(workload, moved.get(workload.ref, workload.assignment))
    seen: set[ObjectRef] = set()
    for admission in decisions.admissions:
        admitted = by_ref.get(admission.workload)
        if admitted is None or admitted.ref in seen:
            continue
        seen.add(admitted.ref)
        yield from _pairs(admitted, admission.pod_sets)


def _pairs(workload: Workload, assignments: Iterable[PodSetAssignment]) -> Iterator[Placed]:
    pod_sets = _pod_sets(workload)
    for psa in assignments:
        pod_set = pod_sets.get(psa.name)
        if pod_set is not None:
            yield workload, pod_set, psa


# ---------------------------------------------------------------- served

def _served(snapshot: Snapshot, placed: list[Placed], gpu_names: set[str]) -> tuple[dict[int, int | float], dict[int, int | float]]:
    """Per priority: the GPUs of GPU work; and the cores of CPU-only work."""
    gpus: dict[ObjectRef, int] = defaultdict(int)
    milli: dict[ObjectRef, int] = defaultdict(int)
    priority: dict[ObjectRef, int] = {}
    for workload, pod_set, psa in placed:
        priority[workload.ref] = workload.priority
        for resource, amount in pod_set.request.items():
            if _is_gpu(resource, gpu_names):
                gpus[workload.ref] += amount * psa.count
            elif resource == CPU:
                milli[workload.ref] += amount * psa.count
    served: dict[int, float] = {w.priority: 0.0 for w in snapshot.workloads if w.state is not WorkloadState.EXTERNAL}
    cores: dict[int, float] = dict(served)
    for ref, prio in priority.items():
        served.setdefault(prio, 0.0)
        cores.setdefault(prio, 0.0)
        if gpus[ref] > 0:
            served[prio] += gpus[ref]
        else:
            cores[prio] += milli[ref] / 1000.0
    return ({p: _num(served[p]) for p in sorted(served)}, {p: _num(cores[p]) for p in sorted(cores)})


# ---------------------------------------------------------------- utilization

def _node_usage(snapshot: Snapshot, placed: list[Placed]) -> dict[str, dict[str, int]]:
    """Node -> resource -> requested after the plan (unmanaged + running + admitted)."""
    usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node in snapshot.nodes:
        for resource, amount in node.unmanaged.items():
            usage[node.name][resource] += amount
    for _, pod_set, psa in placed:
        for node_name, count in psa.pods_per_node().items():
            target = usage[node_name]
            for resource, amount in pod_set.request.items():
                target[resource] += amount * count
    return usage


def _utilization(snapshot: Snapshot, placed: list[Placed], gpu_names: set[str]) -> dict[str, int | float]:
    usage = _node_usage(snapshot, placed)
    allocated = {"cpu": 0, "gpu": 0}
    allocatable = {"cpu": 0, "gpu": 0}
    for node in snapshot.nodes:
        if not node.usable:
            continue
        used = usage.get(node.name, {})
        for resource, amount in node.allocatable.items():
            kind = "gpu" if _is_gpu(resource, gpu_names) else "cpu" if resource == CPU else None
            if kind is None:
                continue
            allocatable[kind] += amount
            allocated[kind] += max(0, min(amount, used.get(resource, 0)))
    return {k: _num(allocated[k] / allocatable[k]) if allocatable[k] else 0 for k in sorted(allocated)}


# ---------------------------------------------------------------- locality

def _topology_levels(snapshot: Snapshot, psa: PodSetAssignment, level: str) -> tuple[str, ...] | None:
    """The levels of the first chosen flavor's topology that has `level` (hostname: always)."""
    for name in sorted(set(psa.flavors.values())):
        flavor = snapshot.flavors.get(name)
        if flavor is None or flavor.topology_name is None:
            continue
        topology = snapshot.topologies.get(flavor.topology_name)
        if topology is not None and level in topology.levels:
            return tuple(topology.levels)
    return (HOSTNAME,) if level == HOSTNAME else None


def _path(node: Node, levels: tuple[str, ...], depth: int) -> tuple[str, ...] | None:
    """Node's values at levels[0..depth]; None when it lacks one of them."""
    values = []
    for level in levels[: depth + 1]:
        value = node.name if level == HOSTNAME else node.labels.get(level)
        if value is None:
            return None
        values.append(value)
    return tuple(values)


def _locality(snapshot: Snapshot, decisions: Decisions) -> dict[str, int | float]:
    nodes = {n.name: n for n in snapshot.nodes}
    by_ref = {w.ref: w for w in snapshot.workloads}
    spans: list[int] = []
    for admission in decisions.admissions:
        workload = by_ref.get(admission.workload)
        if workload is None:
            continue
        for _, pod_set, psa in _pairs(workload, admission.pod_sets):
            request = pod_set.topology
            if request.mode != "preferred" or not request.level:
                continue
            levels = _topology_levels(snapshot, psa, request.level)
            if levels is None:
                continue  # no chosen flavor's topology has the level: nothing to measure
            depth = levels.index(request.level)
            domains = set()
            for node_name in psa.pods_per_node():
                node = nodes.get(node_name)
                domains.add(_path(node, levels, depth) if node is not None else (node_name,))
            spans.append(len(domains))
    if not spans:
        return {"mean_domains": 0, "one_domain_share": 0, "pod_sets": 0}
    return {
        "mean_domains": _num(sum(spans) / len(spans)),
        "one_domain_share": _num(sum(1 for s in spans if s == 1) / len(spans)),
        "pod_sets": len(spans),
    }


# ---------------------------------------------------------------- free domains

def _free_domains(snapshot: Snapshot, placed: list[Placed]) -> dict[str, int]:
    """Domains at each level with no pod of any Stowplan workload after the plan.

    Pods Stowplan does not manage (DaemonSets, system pods) do not make a domain
    busy: they sit on nearly every node and would hide what matters, whether a big
    job could still take the whole rack."""
    busy_nodes: set[str] = set()
    for _, _, psa in placed:
        busy_nodes.update(n for n, c in psa.pods_per_node().items() if c > 0)
    usable = [n for n in snapshot.nodes if n.usable]
    result = {HOSTNAME: sum(1 for n in usable if n.name not in busy_nodes)}
    every: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    busy: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for topology in snapshot.topologies.values():
        levels = tuple(topology.levels)
        for depth, level in enumerate(levels):
            if level == HOSTNAME:
                continue
            every.setdefault(level, set())
            for node in usable:
                path = _path(node, levels, depth)
                if path is None:
                    continue
                every[level].add(path)
                if node.name in busy_nodes:
                    busy[level].add(path)
    for level, domains in every.items():
        result[level] = len(domains - busy[level])
    return {level: result[level] for level in sorted(result)}
