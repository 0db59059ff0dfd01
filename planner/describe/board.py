"""The plan as rows a queue user reads (kubectl get, kueuectl, squeue): one row per
workload with its decision, queue, priority, wait, position in its queue, pods,
flavor and nodes; and the headline's tiers (served volume against the bound).

Pure: plain data out of a Snapshot and a Plan, no I/O and no formatting library
(planner.output.table renders it). Queue order and priority come from planner.kueue, so
POSITION is the order greedy and the MILP take, aging included.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from models import ObjectRef, Plan, PodSetAssignment, Snapshot, Workload, WorkloadState, is_gpu
from planner.kueue import semantics

HOSTNAME = "kubernetes.io/hostname"
# The order rows are sorted in: what changes first, then what waits, then what stays.
DECISIONS = ("admit", "move", "resize", "evict", "pending", "running")
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Row:
    decision: str                   # one of DECISIONS
    ref: ObjectRef
    queue: str                      # the ClusterQueue ("-" when unknown)
    local_queue: str
    priority: int | None            # None: not in the snapshot
    wait: float | None              # seconds from creation to the snapshot's now (admit, pending)
    position: int | None            # 1-based place in its ClusterQueue's queue (admit, pending)
    pods: int
    gpus: int                       # GPUs the row's pods ask for (admitted/placed, else wanted)
    flavor: str                     # the GPU flavor, or the one flavor when all agree
    flavors: str                    # every resource's flavor (wide)
    nodes: str                      # compressed: `rack x4 (n01-n04)`
    nodes_wide: str                 # every node with its pods
    note: str                       # why it waits, whom an eviction is for, ...
    cluster: str = ""               # the worker cluster of an admission planned across clusters


@dataclass(frozen=True)
class Tier:
    """One priority tier of the objective: volume served after the plan, and the most
    any plan could serve there given the tiers above (None: no bound proven)."""

    priority: int
    served: float                   # dominant-resource units: gpus + cores
    bound: float | None
    gpus: float                     # the GPU work's part of `served`
    cores: float                    # the CPU-only work's part


# ---------------------------------------------------------------- nodes

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")


def host_ranges(names: Iterable[str], bracket: bool = False) -> str:
    """`n01-n04,n07`: consecutive numbered names as runs (same stem, same width); with
    `bracket`, Slurm's hostlist form, the stem once: `node-[01-04,07]`."""
    plain: list[str] = []
    numbered: dict[tuple[str, int], list[int]] = defaultdict(list)
    for name in sorted(set(names)):
        match = _TRAILING_DIGITS.match(name)
        if match:
            digits = match.group(2)   # zero-padded names keep their width; n9 and n10 are one run
            numbered[(match.group(1), len(digits) if digits.startswith("0") and len(digits) > 1 else 0)].append(int(digits))
        else:
            plain.append(name)
    parts: list[tuple[tuple[str, int], str]] = [((name, -1), name) for name in plain]
    for (stem, width), numbers in numbered.items():
        numbers.sort()
        runs: list[tuple[int, int]] = []
        for number in numbers:
            if runs and number == runs[-1][1] + 1:
                runs[-1] = (runs[-1][0], number)
            else:
                runs.append((number, number))
        if bracket and (len(runs) > 1 or runs[0][0] != runs[0][1]):
            inner = ",".join(f"{a:0{width}d}" + (f"-{b:0{width}d}" if b != a else "") for a, b in runs)
            parts.append(((stem, numbers[0]), f"{stem}[{inner}]"))
            continue
        for a, b in runs:
            first = f"{stem}{a:0{width}d}"
            parts.append(((stem, a), first if a == b else f"{first}-{stem}{b:0{width}d}"))
    return ",".join(text for _, text in sorted(parts))


def _local(host: str, parent: str) -> str:
    """`n01` for host `b1-r11-n01` in rack `b1-r11`: the part a reader does not already see."""
    if parent and host.startswith(parent) and len(host) > len(parent) and host[len(parent)] in "-._":
        return host[len(parent) + 1:]
    return host


def nodes_text(per_node: Mapping[str, int], parent_of: Mapping[str, str], groups_shown: int = 2) -> str:
    """`b1-r11 x4 (n01-n04), b1-r12 x2 (n01-n02) +3 more`: hosts grouped by the
    topology level above them, each group `DOMAIN xNODES (ranges)`."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for host in per_node:
        grouped[parent_of.get(host, "")].append(host)
    texts = []
    for parent in sorted(grouped, key=lambda p: (-len(grouped[p]), p)):
        hosts = grouped[parent]
        ranges = host_ranges(_local(h, parent) for h in hosts)
        if parent:
            texts.append(f"{parent} x{len(hosts)} ({ranges})")
        else:
            texts.append(host_ranges(hosts, bracket=True))
    shown = ", ".join(texts[:groups_shown])
    return shown + (f" +{len(texts) - groups_shown} more" if len(texts) > groups_shown else "")


def nodes_wide(per_node: Mapping[str, int]) -> str:
    return ",".join(f"{host}:{count}" for host, count in sorted(per_node.items()))


def parent_domains(snapshot: Snapshot) -> dict[str, str]:
    """Host -> its domain at the level above the hostname, from the Topologies' levels
    (the finest non-host level any Topology names that the node carries)."""
    levels: list[str] = []
    for topology in sorted(snapshot.topologies.values(), key=lambda t: t.name):
        above = [level for level in topology.levels if level != HOSTNAME]
        if above and above[-1] not in levels:
            levels.append(above[-1])
    out: dict[str, str] = {}
    for node in snapshot.nodes:
        host = node.labels.get(HOSTNAME, node.name)
        for level in levels:
            if level in node.labels:
                out[host] = node.labels[level]
                break
    return out


# ---------------------------------------------------------------- rows

def _per_node(pod_sets: Iterable[PodSetAssignment]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for pod_set in pod_sets:
        for host, count in pod_set.pods_per_node().items():
            out[host] += count
    return dict(out)


def _assigned_parents(pod_sets: Iterable[PodSetAssignment]) -> dict[str, str]:
    """Host -> the domain above it as the assignment itself names it (its own levels)."""
    return {values[-1]: values[-2] for ps in pod_sets for values, _ in ps.domains if len(values) >= 2}


def flavor_texts(pod_sets: Iterable[PodSetAssignment]) -> tuple[str, str]:
    """(short, wide): the GPU flavor, or the one flavor when every resource agrees, else
    `N flavors`; wide: every resource=flavor, pod sets apart."""
    pod_sets = list(pod_sets)
    gpu = sorted({f for ps in pod_sets for r, f in ps.flavors.items() if is_gpu(r)})
    every = sorted({f for ps in pod_sets for f in ps.flavors.values()})
    short = ",".join(gpu) if gpu else (every[0] if len(every) == 1 else (f"{len(every)} flavors" if every else "-"))
    wide = "; ".join(
        (f"{ps.name}: " if len(pod_sets) > 1 else "")
        + ",".join(f"{r}={ps.flavors[r]}" for r in sorted(ps.flavors))
        for ps in pod_sets
    )
    return short, wide or "-"


def _gpus(workload: Workload | None, pod_sets: Iterable[PodSetAssignment]) -> int:
    if workload is None:
        return 0
    per_pod = {ps.name: sum(v for r, v in ps.request.items() if is_gpu(r)) for ps in workload.pod_sets}
    return sum(per_pod.get(ps.name, 0) * ps.count for ps in pod_sets)


def positions(snapshot: Snapshot) -> dict[ObjectRef, int]:
    """Each pending workload's 1-based place in its ClusterQueue's queue, in Kueue's order."""
    queues: dict[str, list[Workload]] = defaultdict(list)
    for workload in snapshot.workloads:
        if workload.state is WorkloadState.PENDING and workload.cluster_queue:
            queues[workload.cluster_queue].append(workload)
    out: dict[ObjectRef, int] = {}
    for members in queues.values():
        members.sort(key=lambda w: semantics.queue_order_key(w, snapshot))
        out.update({w.ref: i for i, w in enumerate(members, start=1)})
    return out


def rows(plan: Plan, snapshot: Snapshot | None) -> list[Row]:
    """Every workload the plan decides about and every one that keeps running, sorted by
    decision, then priority (highest first), then queue position, then name."""
    by_ref = {w.ref: w for w in snapshot.workloads} if snapshot else {}
    parents = parent_domains(snapshot) if snapshot else {}
    place = positions(snapshot) if snapshot else {}
    now = snapshot.now if snapshot else 0.0
    out: list[Row] = []

    def row(decision: str, ref: ObjectRef, queue: str, pod_sets: tuple[PodSetAssignment, ...], note: str,
            waiting: bool) -> Row:
        workload = by_ref.get(ref)
        short, wide = flavor_texts(pod_sets)
        per_node = _per_node(pod_sets)
        if pod_sets:
            pods, gpus = sum(ps.count for ps in pod_sets), _gpus(workload, pod_sets)
        elif workload is not None:
            pods = sum(ps.count for ps in workload.pod_sets)
            gpus = sum(ps.count * sum(v for r, v in ps.request.items() if is_gpu(r)) for ps in workload.pod_sets)
        else:
            pods = gpus = 0
        created = workload.created_at or workload.queued_at if workload else 0.0
        return Row(
            decision=decision, ref=ref,
            queue=queue or (workload.cluster_queue or "-" if workload else "-"),
            local_queue=workload.local_queue if workload else "-",
            priority=workload.priority if workload else None,
            wait=max(0.0, now - created) if waiting and workload and created else None,
            position=place.get(ref) if waiting else None,
            pods=pods, gpus=gpus, flavor=short if pod_sets else "-", flavors=wide if pod_sets else "-",
            nodes=nodes_text(per_node, {**_assigned_parents(pod_sets), **parents}) if per_node else "-",
            nodes_wide=nodes_wide(per_node) if per_node else "-", note=note,
        )

    for admission in plan.admissions:
        admitted = row("admit", admission.workload, admission.cluster_queue, admission.pod_sets, "", True)
        out.append(replace(admitted, cluster=admission.cluster) if admission.cluster else admitted)
    moved = {m.workload for m in plan.migrations}
    for migration in plan.migrations:
        frees = ", ".join("/".join(d.values) for d in migration.frees)
        note = " ".join(part for part in (f"frees {frees}" if frees else "",
                                          "for " + ", ".join(str(r) for r in migration.for_) if migration.for_ else "",
                                          f"(cost {migration.cost:.6g})") if part)
        out.append(row("move", migration.workload, migration.cluster_queue, migration.to, note, False))
    for resize in plan.resizes:
        # an elastic Job: the slice it grows by (its nodes), or the pods it gives back
        parts = [f"{resize.from_count} -> {resize.to_count} pods"]
        if resize.release:
            parts.append("releases " + ", ".join(f"{n} x{c}" for n, c in resize.release))
            parts.append(resize.reason + (" for " + ", ".join(str(r) for r in resize.for_) if resize.for_ else ""))
            parts.append(f"(cost {resize.cost:.6g})")
        resized = row("resize", resize.workload, resize.cluster_queue,
                      (resize.slice,) if resize.slice is not None else (), ", ".join(parts), False)
        per_pod = resized.gpus // max(1, resized.pods)
        out.append(replace(resized, pods=resize.to_count, gpus=per_pod * resize.to_count))
    for eviction in plan.evictions:
        if eviction.workload in moved:
            continue
        workload = by_ref.get(eviction.workload)
        note = eviction.reason + (" for " + ", ".join(str(r) for r in eviction.for_) if eviction.for_ else "")
        if eviction.message and not eviction.for_:
            note += f": {eviction.message}"
        note += f" (cost {eviction.cost:.6g})"
        out.append(row("evict", eviction.workload, "", workload.assignment if workload else (), note, False))
    for entry in plan.pending:
        out.append(row("pending", entry.workload, "", (), entry.reason, True))
    decided = {r.ref for r in out}
    for workload in by_ref.values():
        if workload.state is WorkloadState.RUNNING and workload.ref not in decided and workload.assignment:
            out.append(row("running", workload.ref, workload.cluster_queue or "", workload.assignment, "", False))
    rank = {d: i for i, d in enumerate(DECISIONS)}
    out.sort(key=lambda r: (rank[r.decision], -(r.priority or 0), r.position or 0, str(r.ref)))
    return out


# ---------------------------------------------------------------- headline tiers

def _tier_stages(plan: Plan) -> dict[int, tuple[float, float]]:
    """Priority -> (objective, bound) of the final pass's tier stages (`priority P`)."""
    out: dict[int, tuple[float, float]] = {}
    for stage in plan.solver.stages:
        match = re.fullmatch(r"priority (-?\d+)", str(stage.get("stage", "")))
        objective, bound = stage.get("objective"), stage.get("bound")
        if match and isinstance(objective, (int, float)) and isinstance(bound, (int, float)):
            out[int(match.group(1))] = (float(objective), float(bound))
    return out


def tiers(plan: Plan, snapshot: Snapshot) -> list[Tier]:
    """Per priority tier, highest first: the dominant-resource volume running after the plan
    (GPUs where a workload asks for GPUs, else cores) and the bound the solve proved for
    it. Below the first tier whose bound is not met, bounds are left out: each tier's
    bound holds only given the tiers above it at their optimum."""
    by_ref = {w.ref: w for w in snapshot.workloads}
    evicted = {e.workload for e in plan.evictions} | {m.workload for m in plan.migrations}
    served: dict[int, float] = defaultdict(float)
    cores: dict[int, float] = defaultdict(float)

    def add(workload: Workload, pod_sets: Iterable[PodSetAssignment]) -> None:
        tier = semantics.effective_priority(workload, snapshot)
        volume = semantics.assigned_volume(workload, pod_sets, snapshot)
        served[tier] += volume
        if not any(is_gpu(r) or r in snapshot.policy.gpu_resources for ps in workload.pod_sets for r in ps.request):
            cores[tier] += volume

    for workload in snapshot.workloads:
        if workload.state is WorkloadState.PENDING:
            served[semantics.effective_priority(workload, snapshot)] += 0.0   # every tier is listed
        elif workload.state is WorkloadState.RUNNING and workload.ref not in evicted:
            add(workload, workload.assignment)
    for admission in plan.admissions:
        if admission.workload in by_ref:
            add(by_ref[admission.workload], admission.pod_sets)
    for migration in plan.migrations:
        if migration.workload in by_ref:
            add(by_ref[migration.workload], migration.to)
    for resize in plan.resizes:
        job = by_ref.get(resize.workload)
        running = next((a for a in job.assignment if a.name == resize.pod_set), None) if job else None
        if job is not None and running is not None:
            # an elastic workload runs its new count of the pod set (each of its pods weighs the same)
            add(job, (replace(running, count=resize.to_count - running.count),))
    stages = _tier_stages(plan)
    out: list[Tier] = []
    open_above = False
    for priority in sorted(served, reverse=True):
        bound: float | None = None
        if priority in stages and not open_above:
            objective, stage_bound = stages[priority]
            bound = served[priority] + max(0.0, stage_bound - objective)
            open_above = stage_bound - objective > TOLERANCE * max(1.0, abs(stage_bound))
        out.append(Tier(priority, served[priority], bound, served[priority] - cores[priority], cores[priority]))
    return out
