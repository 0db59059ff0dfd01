"""One plan over MultiKueue's worker clusters: which cluster, flavor and nodes per workload.

MultiKueue (Kueue v0.17+): the manager's ClusterQueue holds quota for a workload, then
the workload is created on one worker, whose own Kueue admits it against the worker's
ClusterQueue (found through the same LocalQueue namespace/name), flavors and topology.
So an admission needs the manager's quota and the chosen worker's quota and nodes, and
a gang never spans clusters.

How the plan is made (decomposition: an assignment of workloads to clusters, then each
worker planned exactly as one cluster is, by planner.cycle):
  1. first-fit: Kueue's incremental dispatcher. In Kueue's queue order (priority, then
     age), the manager's quota is reserved, then the workers are tried in the
     MultiKueueConfig's order; the first whose Kueue (greedy) admits it keeps it. This
     is the baseline the plan is measured against, and a candidate.
  2. best-fit: by priority, bigger workloads first, each to the worker that admits it
     with the least room left (the big free domains stay whole for the big work).
  3. each assignment planned per worker (the MILP by default); the best candidate in
     the objective's order wins: volume per priority (highest first), then preemption
     cost, then free domains. First-fit is a candidate, so the plan is never worse.
Pure: Fleet in, FleetPlan out; the CLI reads the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from models import (
    HOSTNAME_LABEL, Decisions, ObjectRef, PendingEntry, Plan, PodSetAssignment, Snapshot, SolverReport, Workload,
    WorkloadState, is_gpu,
)
from planner.base.solve_options import SolveOptions
from planner.fleet.quota import ManagerFlavors, ManagerQuota, dispatched_quota, manager_only
from planner.greedy import greedy
from planner.verify import check_fleet, messages


@dataclass(frozen=True)
class Fleet:
    """The worker clusters in the MultiKueueConfig's order, and the manager."""

    clusters: tuple[tuple[str, Snapshot], ...]
    manager: Snapshot

    def worker(self, name: str) -> Snapshot:
        return dict(self.clusters)[name]


@dataclass(frozen=True)
class FleetPlan:
    plan: Plan
    chosen: str                                  # which candidate won (first-fit, best-fit, ...)
    candidates: Mapping[str, Mapping[str, object]]   # each candidate's merged summary
    per_cluster: Mapping[str, Plan]


Planner = Callable[[Snapshot], Plan]


def running_on_workers(fleet: Fleet) -> dict[ObjectRef, str]:
    """Workloads a worker runs (dispatched earlier): ref -> cluster."""
    return {w.ref: name for name, snap in fleet.clusters for w in snap.workloads
            if w.state is not WorkloadState.PENDING}


def fleet_pending(fleet: Fleet) -> list[Workload]:
    """The manager's pending workloads that no worker runs, in Kueue's queue order
    (the manager keeps its copy of a dispatched workload suspended)."""
    busy = running_on_workers(fleet)
    waiting = [w for w in fleet.manager.workloads if w.state is WorkloadState.PENDING and w.ref not in busy]
    return sorted(waiting, key=lambda w: (-w.priority, w.queued_at, w.uid, w.ref))


def rebind(workload: Workload, worker: Snapshot) -> Workload | None:
    """The workload as the worker's Kueue sees it: its LocalQueue resolved on the worker,
    or None when the worker has no such LocalQueue, its ClusterQueue is missing, or no
    flavor of that queue has a topology level the workload requires."""
    local = worker.local_queues.get((workload.ref.namespace, workload.local_queue))
    cq = worker.cluster_queues.get(local.cluster_queue) if local else None
    if cq is None:
        return None
    levels = [set(_levels(worker, f.flavor)) for g in cq.resource_groups for f in g.flavors]
    for ps in workload.pod_sets:
        wanted = {lv for lv in (ps.topology.level, *(layer.level for layer in ps.topology.slices)) if lv}
        if ps.topology.mode in ("required", "preferred", None) and wanted and not any(wanted <= have for have in levels):
            return None
    blocked = None if manager_only(workload.blocked_reason) else workload.blocked_reason
    return replace(workload, cluster_queue=cq.name, blocked_reason=blocked)


def _levels(worker: Snapshot, flavor: str) -> tuple[str, ...]:
    found = worker.flavors.get(flavor)
    topology = worker.topologies.get(found.topology_name or "") if found else None
    return (topology.levels if topology else ()) + (HOSTNAME_LABEL,)


def worker_snapshot(fleet: Fleet, name: str, assigned: Sequence[Workload]) -> Snapshot:
    """The worker's own snapshot with the workloads dispatched to it added; its own
    pending copies of manager workloads are dropped (the manager's copy is planned)."""
    worker = fleet.worker(name)
    managed = {w.ref for w in fleet.manager.workloads}
    own = tuple(w for w in worker.workloads if w.state is not WorkloadState.PENDING or w.ref not in managed)
    mine = {w.ref for w in own}
    return replace(worker, workloads=own + tuple(w for w in assigned if w.ref not in mine),
                   now=fleet.manager.now or worker.now)


def manager_base_use(fleet: Fleet) -> ManagerQuota:
    """The manager's quota with what dispatched workloads already hold of it
    (planner.fleet.quota: per flavor and resource, by Kueue's rules)."""
    return dispatched_quota(fleet.manager, fleet.clusters)


NO_MANAGER_QUOTA = "no quota left in the manager's ClusterQueue"


def manager_admits(used: ManagerQuota, workload: Workload) -> tuple[PodSetAssignment, ...] | str:
    """The flavors the manager's Kueue reserves for the whole workload beside what `used`
    holds (planner.fleet.quota), or why it reserves none."""
    blocker = used.blocker(workload)
    if blocker is not None:
        return blocker
    found = used.assign(workload)
    return NO_MANAGER_QUOTA if isinstance(found, str) else found


def _admitted_by_greedy(snapshot: Snapshot, refs: set[ObjectRef]) -> bool:
    """The worker's Kueue (greedy) admits all of `refs` together."""
    return refs <= {a.workload for a in greedy(snapshot).decisions.admissions}


@dataclass
class Assignment:
    """Workloads per worker, and why the others were sent nowhere."""

    clusters: dict[str, list[Workload]]
    unsent: dict[ObjectRef, str]
    # What holds the manager's quota, with the manager's flavors: what the workers ran
    # before, and every workload sent (planner.verify.fleet checks them)
    manager: ManagerFlavors = field(default_factory=dict)


def _dispatch(fleet: Fleet, order: Iterable[Workload], pick: Callable[[Workload, list[str], Assignment], str | None]) -> Assignment:
    """Workloads in `order`, each to the cluster `pick` chooses among those whose Kueue
    admits it beside what was sent there before, under the manager's quota."""
    out = Assignment({name: [] for name, _ in fleet.clusters}, {})
    used = manager_base_use(fleet)
    for workload in order:
        flavors = manager_admits(used, workload)
        if isinstance(flavors, str):
            out.unsent[workload.ref] = flavors
            continue
        chosen = pick(workload, [name for name, _ in fleet.clusters], out)
        if chosen is None:
            out.unsent[workload.ref] = "no worker cluster admits it"
            continue
        used.hold(workload, flavors)
    out.manager = dict(used.held)
    return out


def _try(fleet: Fleet, name: str, workload: Workload, out: Assignment) -> bool:
    mine = rebind(workload, fleet.worker(name))
    # what was sent before keeps running there (Kueue admitted it then): all of it still admitted
    sent = [*out.clusters[name], mine] if mine is not None else []
    return mine is not None and _admitted_by_greedy(worker_snapshot(fleet, name, sent), {w.ref for w in sent})


def _keep(fleet: Fleet, name: str, workload: Workload, out: Assignment) -> str:
    mine = rebind(workload, fleet.worker(name))
    assert mine is not None
    out.clusters[name].append(mine)
    return name


def first_fit(fleet: Fleet) -> Assignment:
    """Kueue's incremental dispatcher: the first worker in the config's order that admits it."""
    def pick(workload: Workload, names: list[str], out: Assignment) -> str | None:
        for name in names:
            if _try(fleet, name, workload, out):
                return _keep(fleet, name, workload, out)
        return None
    return _dispatch(fleet, fleet_pending(fleet), pick)


def volume(workload: Workload, snapshot: Snapshot) -> float:
    """Dominant-resource units: GPUs where it asks for GPUs, else cores."""
    gpus = sum(ps.count * sum(v for r, v in ps.request.items() if is_gpu(r) or r in snapshot.policy.gpu_resources)
               for ps in workload.pod_sets)
    return float(gpus) if gpus else sum(ps.count * (ps.request.get("cpu") or 0) for ps in workload.pod_sets) / 1000.0


def _room(snapshot: Snapshot, assigned: Sequence[Workload]) -> float:
    """The worker's free GPUs (else cores) once what was sent there runs: for best fit."""
    gpus = sum(v for n in snapshot.nodes if n.usable for r, v in n.free.items()
               if is_gpu(r) or r in snapshot.policy.gpu_resources)
    used = sum(volume(w, snapshot) for w in snapshot.workloads if w.state is WorkloadState.RUNNING)
    return gpus - used - sum(volume(w, snapshot) for w in assigned)


def best_fit(fleet: Fleet) -> Assignment:
    """By priority, the biggest first; each to the admitting worker with the least room left."""
    order = sorted(fleet_pending(fleet), key=lambda w: (-w.priority, -volume(w, fleet.manager), w.queued_at, w.uid, w.ref))

    def pick(workload: Workload, names: list[str], out: Assignment) -> str | None:
        fits = [name for name in names if _try(fleet, name, workload, out)]
        if not fits:
            return None
        tightest = min(fits, key=lambda n: (_room(fleet.worker(n), out.clusters[n]), names.index(n)))
        return _keep(fleet, tightest, workload, out)
    return _dispatch(fleet, order, pick)


def _greedy_plan(snapshot: Snapshot) -> Plan:
    from planner.cycle import plan_snapshot
    return plan_snapshot(snapshot, SolveOptions(solver="greedy"))


def plan_assignment(fleet: Fleet, assignment: Assignment, planner: Planner) -> dict[str, Plan]:
    return {name: planner(worker_snapshot(fleet, name, assignment.clusters[name])) for name, _ in fleet.clusters}


def served(summary: Mapping[str, object]) -> dict[int, float]:
    """Volume served per priority: GPUs plus cores of CPU-only work (the objective's units)."""
    out: dict[int, float] = {}
    for key in ("served_gpus", "served_cores"):
        part = summary.get(key) or {}
        assert isinstance(part, Mapping)
        for priority, value in part.items():
            out[int(priority)] = out.get(int(priority), 0.0) + float(value)
    return out


def rank(summary: Mapping[str, object]) -> tuple[float, ...]:
    """The objective's order as a tuple to maximise: volume per priority (highest first,
    over every priority any candidate serves), then less preemption cost, then free domains."""
    by_priority = served(summary)
    priorities = summary.get("_priorities") or sorted(by_priority, reverse=True)
    assert isinstance(priorities, list)
    free = summary.get("free_domains") or {}
    assert isinstance(free, Mapping)
    cost = summary.get("preemption_cost") or 0
    assert isinstance(cost, (int, float))
    return (*(by_priority.get(p, 0.0) for p in priorities), -float(cost), float(sum(free.values())))


PER_CLUSTER = ("served_gpus", "served_cores", "admitted", "evicted", "free_domains")


def merge_summaries(plans: Mapping[str, Plan], pending: int) -> dict[str, object]:
    """The fleet's section-5 metrics: sums over the workers, and each worker's own."""
    def summed(key: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for plan in plans.values():
            part = plan.summary.get(key) or {}
            assert isinstance(part, Mapping)
            for k, v in part.items():
                out[str(k)] = _num(out.get(str(k), 0) + float(v))
        return dict(sorted(out.items(), key=lambda kv: _sort_key(kv[0])))

    def total(key: str) -> float:
        values = [plan.summary.get(key) or 0 for plan in plans.values()]
        return _num(sum(float(v) for v in values if isinstance(v, (int, float))))

    return {
        "served_gpus": summed("served_gpus"), "served_cores": summed("served_cores"),
        "admitted": int(total("admitted")), "evicted": int(total("evicted")), "pending": pending,
        "preemption_cost": total("preemption_cost"), "free_domains": summed("free_domains"),
        "clusters": {name: {k: plan.summary[k] for k in PER_CLUSTER if k in plan.summary} for name, plan in plans.items()},
    }


def _sort_key(key: str) -> tuple[int, float | str]:
    try:
        return (0, -float(key))
    except ValueError:
        return (1, key)


def _num(value: float) -> float:
    return int(value) if float(value).is_integer() else round(value, 6)


def merge(fleet: Fleet, assignment: Assignment, plans: Mapping[str, Plan], method: str) -> Plan:
    """Per-worker plans -> one plan: admissions carry their cluster; waiting workloads say why."""
    admissions = tuple(sorted((replace(a, cluster=name) for name, plan in plans.items() for a in plan.admissions),
                              key=lambda a: a.workload))
    evictions = tuple(sorted((e for plan in plans.values() for e in plan.evictions), key=lambda e: e.workload))
    admitted = {a.workload for a in admissions}
    reasons = {p.workload: f"{name}: {p.reason}" for name, plan in plans.items() for p in plan.pending}
    reasons.update(assignment.unsent)
    pending = tuple(PendingEntry(w.ref, reasons.get(w.ref, "not admitted"))
                    for w in sorted(fleet_pending(fleet), key=lambda w: w.ref) if w.ref not in admitted)
    reports = [plan.solver for plan in plans.values()]
    status = "optimal" if all(r.status == "optimal" for r in reports) else \
        "fallback" if any(r.status == "fallback" for r in reports) else "feasible"
    seconds: dict[str, float] = {}
    for r in reports:
        for k, v in r.seconds.items():
            seconds[k] = round(seconds.get(k, 0.0) + v, 3)
    solver = SolverReport(method=method, status=status, objective=sum(r.objective for r in reports),
                          bound=sum(r.bound for r in reports), gap=max((r.gap for r in reports), default=0.0),
                          seconds=seconds, message="; ".join(f"{n}: {p.solver.message}" for n, p in plans.items()
                                                            if p.solver.message))
    return Plan(source=fleet.manager.source, digest=fleet.manager.digest,
                object_count=fleet.manager.object_count + sum(s.object_count for n, s in fleet.clusters
                                                              if s is not fleet.manager),
                solver=solver, admissions=admissions, evictions=evictions, pending=pending,
                summary=merge_summaries(plans, len(pending)))


def plan_fleet(fleet: Fleet, planner: Planner, solver: str = "milp") -> FleetPlan:
    """The best verified candidate (module docstring); raises VerificationError if none verifies."""
    from planner.base.errors import VerificationError

    ff = first_fit(fleet)
    candidates: dict[str, tuple[Assignment, dict[str, Plan]]] = {"first-fit": (ff, plan_assignment(fleet, ff, _greedy_plan))}
    if solver != "greedy":
        candidates["first-fit+" + solver] = (ff, plan_assignment(fleet, ff, planner))
        bf = best_fit(fleet)
        candidates["best-fit+" + solver] = (bf, plan_assignment(fleet, bf, planner))
    merged = {name: merge(fleet, a, plans, f"fleet:{name}") for name, (a, plans) in candidates.items()}
    problems = {name: check_fleet(fleet_workers(fleet, a), fleet.manager, plan.admissions,
                                   [e.workload for e in plan.evictions], a.manager)
                for name, plan in merged.items() for a in [candidates[name][0]]}
    good = [name for name in merged if not problems[name]]
    if not good:
        raise VerificationError(messages(problems["first-fit"]))
    priorities = sorted({p for plan in merged.values() for p in served(plan.summary)}, reverse=True)
    ranked = {name: rank({**merged[name].summary, "_priorities": priorities}) for name in good}
    # the best in the objective's order; on a tie the later (smarter) candidate
    chosen = max(reversed(good), key=lambda n: ranked[n])
    baseline = merged["first-fit"].summary
    # the plan says what it was chosen among, and what Kueue's dispatcher would have done
    fleet_note = {"chosen": chosen, "first_fit": {k: baseline[k] for k in PER_CLUSTER if k in baseline}}
    best = replace(merged[chosen], summary={**merged[chosen].summary, "fleet": fleet_note})
    return FleetPlan(plan=best, chosen=chosen,
                     candidates={name: merged[name].summary for name in merged},
                     per_cluster=candidates[chosen][1])


def fleet_workers(fleet: Fleet, assignment: Assignment) -> dict[str, Snapshot]:
    return {name: worker_snapshot(fleet, name, assignment.clusters[name]) for name, _ in fleet.clusters}


def decisions_of(plan: Plan) -> Decisions:
    return Decisions(plan.admissions, plan.evictions, plan.migrations)


def plan_fleet_cycle(fleet: Fleet, options: SolveOptions = SolveOptions(), read_seconds: float = 0.0) -> FleetPlan:
    """The fleet planned as `what-if --cluster` (snapshot files) and `plan --worker` (read
    live) plan it: each worker by the one-cluster cycle (planner.cycle), the options' time limit shared
    among the candidates' worker plans (two candidates planned per worker)."""
    from planner.cycle import plan_snapshot

    limit = options.time_limit
    share = replace(options, time_limit=None if limit is None else limit / max(1, 2 * len(fleet.clusters)))

    def planner(snap: Snapshot) -> Plan:
        return plan_snapshot(snap, share, read_seconds=read_seconds)

    return plan_fleet(fleet, planner, options.solver)
