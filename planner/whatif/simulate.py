"""The day-long view: a trace replayed through repeated planning cycles, in simulated time.

Every `interval` seconds of simulated time, from the snapshot's planning time to the
trace's end:

  1. work that has run its duration finishes (its room is free from then on);
  2. the trace's jobs submitted by now join the queues (pending, queued at their submit time);
  3. a snapshot of the simulated cluster is built (the starting snapshot's nodes, queues and
     policy; the simulated workloads, running ones with their assignment, start and last
     checkpoint, so the cycle's preemption cost sees the work an eviction would lose);
  4. the planner under test plans it (the CLI hands in planner.cycle.plan_snapshot, which
     verifies every plan and raises on one that breaks a rule);
  5. the plan is applied: evicted work loses what it did since its last checkpoint and waits
     again, queued at the eviction time (Kueue's requeue order); admitted work starts on the
     nodes the plan names (a move is an eviction and an admission at once).

Pure: no I/O, no clock. The planner is a function handed in; what is decided depends only
on the inputs and `seed` (which draws the durations of the snapshot's own workloads, which
no trace line describes). Only the cycle's seconds, which the plan reports, are measured.

Model (docs/simulate.md): a job needs `duration` seconds of running in all, whatever the
count an elastic job is admitted with; it saves its progress every `checkpoint_interval`
seconds of running since it started; an eviction throws away the rest.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

from models import (
    HOSTNAME_LABEL, Admission, ObjectRef, Plan, PodSetAssignment, Snapshot, Workload, WorkloadState, is_gpu,
)
from models.trace import Arrival, Trace

Planner = Callable[[Snapshot], Plan]

# The snapshot's own workloads have no trace line: their durations are drawn from the Philly
# mix (REFERENCE §7: 80% between 30 min and 17 h, 20% between 17 h and 7 days, log-uniform).
SHORT, LONG = (1800.0, 17 * 3600.0), (17 * 3600.0, 7 * 86400.0)
SNAPSHOT_CHECKPOINT_INTERVAL = 3600.0   # snapshot work with a checkpointed-at saves this often
MAX_DRAIN_CYCLES = 100_000
# Draining stops after this many cycles in a row with nothing running and nothing admitted:
# what waits then cannot start (it never fits, or the planner runs out of time every cycle).
MAX_STALLED_CYCLES = 30


@dataclass
class Job:
    """One workload's life in the simulation (mutable: the simulator's own state)."""

    workload: Workload                  # as read (pending form, or running at the start)
    duration: float                     # seconds of running it needs in all
    interval: float | None              # checkpoint every so many seconds of running; None: never
    submitted: float                    # absolute seconds
    from_trace: bool
    queued_at: float
    done: float = 0.0                   # seconds of running saved before the current run
    run_start: float | None = None      # when the current run started (None: not running)
    anchor: float = 0.0                 # checkpoints fall at anchor + k x interval while running
    assignment: tuple[PodSetAssignment, ...] = ()
    gpus: int = 0                       # GPUs of the current run
    first_start: float | None = None
    finished_at: float | None = None
    evictions: int = 0
    requested_gpus: int = 0             # GPUs of all its pods, at full count

    @property
    def running(self) -> bool:
        return self.run_start is not None

    def finish_time(self) -> float:
        assert self.run_start is not None
        return self.run_start + max(0.0, self.duration - self.done)

    def last_checkpoint(self, now: float) -> float | None:
        """The absolute time of this run's last checkpoint at or before `now`, if any."""
        if self.run_start is None or self.interval is None:
            return None
        k = math.floor((now - self.anchor) / self.interval)
        at = self.anchor + k * self.interval
        return at if k >= 0 and at > self.run_start else None


@dataclass
class Counters:
    admitted: int = 0
    evictions: int = 0
    lost_gpu_seconds: float = 0.0           # all the work evictions threw away
    lost_window_gpu_seconds: float = 0.0    # the part of it done within the simulated window
    allocated_gpu_seconds: float = 0.0
    finished: int = 0
    evictions_by_priority: dict[str, int] = field(default_factory=dict)
    lost_by_priority: dict[str, float] = field(default_factory=dict)   # GPU-seconds
    cycle_seconds: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    series: list[dict[str, object]] = field(default_factory=list)


@dataclass(frozen=True)
class Result:
    """What one planner lived through over the trace, JSON-shaped (`as_dict`)."""

    solver: str
    start: float
    end: float
    total_gpus: int
    jobs: tuple[Job, ...]
    counters: Counters

    def as_dict(self) -> dict[str, object]:
        return summarize(self)


def simulate(snapshot: Snapshot, trace: Trace, planner: Planner, *, interval: float = 60.0, seed: int = 0,
             solver: str = "", hours: float | None = None, drain: bool = False,
             progress: Callable[[int, int], None] | None = None) -> Result:
    """Replay `trace` from `snapshot` through `planner` every `interval` simulated seconds,
    until `hours` after the start (default: the trace's hours, else its last arrival); with
    `drain`, on past that until every trace job has finished, or nothing has run or started
    for MAX_STALLED_CYCLES cycles (a job that never fits would keep it going for ever)."""
    if interval <= 0:
        raise ValueError("interval must be above 0")
    start = snapshot.now
    span = hours if hours is not None else trace.hours
    end = start + (span * 3600.0 if span is not None else max((a.submit for a in trace.arrivals), default=0.0))
    sim = _Sim(snapshot, start, end, seed)
    arrivals = sorted(trace.arrivals, key=lambda a: (a.submit, a.line))
    next_arrival = 0
    cycles = int(math.floor((end - start) / interval)) + 1

    def going_on(k: int) -> bool:
        """The planned cycles, then (draining) until the trace's work is done."""
        if k < cycles:
            return True
        return (drain and k < cycles + MAX_DRAIN_CYCLES and sim.stalled < MAX_STALLED_CYCLES
                and sim.trace_work_left(next_arrival < len(arrivals)))

    k = 0
    while going_on(k):
        now = start + k * interval
        if now > end:          # draining: the window grows with the cycles
            end = sim.end = now
        sim.finish_until(now)
        while next_arrival < len(arrivals) and start + arrivals[next_arrival].submit <= now:
            sim.arrive(arrivals[next_arrival], start)
            next_arrival += 1
        plan = planner(sim.snapshot_at(now))
        sim.apply(plan, now)
        sim.sample(now, plan)
        k += 1
        if progress is not None:
            progress(k, max(cycles, k))
    sim.finish_until(end)
    sim.close(end)
    return Result(solver, start, end, sim.total_gpus, tuple(sim.jobs[r] for r in sorted(sim.jobs)), sim.counters)


class _Sim:
    def __init__(self, snapshot: Snapshot, start: float, end: float, seed: int):
        self.base, self.start, self.end = snapshot, start, end
        self.rng = random.Random(seed)
        self.gpu_names = set(snapshot.policy.gpu_resources)
        self.total_gpus = sum(self.gpus_of(n.allocatable.items()) for n in snapshot.nodes if n.usable)
        self.static = tuple(w for w in snapshot.workloads if w.state is WorkloadState.EXTERNAL)
        self.jobs: dict[ObjectRef, Job] = {}
        self.counters = Counters()
        self.stalled = 0            # cycles in a row with nothing running and nothing admitted
        for w in snapshot.workloads:
            if w.state is not WorkloadState.EXTERNAL:
                self.adopt(w)

    # ------------------------------------------------------------ bookkeeping

    def gpus_of(self, items: Iterable[tuple[str, int]]) -> int:
        return sum(v for k, v in items if is_gpu(k) or k in self.gpu_names)

    def run_gpus(self, w: Workload, assignment: Iterable[PodSetAssignment]) -> int:
        per_pod = {ps.name: self.gpus_of(ps.request.items()) for ps in w.pod_sets}
        return sum(a.count * per_pod.get(a.name, 0) for a in assignment)

    def draw_duration(self) -> float:
        low, high = SHORT if self.rng.random() < 0.8 else LONG
        return math.exp(self.rng.uniform(math.log(low), math.log(high)))

    def requested(self, w: Workload) -> int:
        return sum(ps.count * self.gpus_of(ps.request.items()) for ps in w.pod_sets)

    def adopt(self, w: Workload) -> None:
        """A workload of the starting snapshot: no trace line, so a drawn duration."""
        duration = self.draw_duration()
        job = Job(replace(w, pods_ready=None), duration, None, w.created_at, False, w.queued_at,
                  requested_gpus=self.requested(w))
        if w.state is WorkloadState.RUNNING:
            began = w.admitted_at if w.admitted_at is not None else self.start
            # Somewhere in its run: what is left is a share of a drawn duration, at least a minute.
            elapsed = max(0.0, self.start - began)
            job.duration = elapsed + max(60.0, self.rng.random() * duration)
            job.run_start, job.first_start = began, began
            job.assignment, job.gpus = w.assignment, self.run_gpus(w, w.assignment)
            if w.checkpointed_at is not None:
                job.interval, job.anchor = SNAPSHOT_CHECKPOINT_INTERVAL, w.checkpointed_at
        self.jobs[w.ref] = job

    def arrive(self, arrival: Arrival, start: float) -> None:
        w = arrival.workload
        if w.ref in self.jobs:
            raise ValueError(f"{w.ref} is in the snapshot and in the trace (line {arrival.line})")
        at = start + arrival.submit
        self.jobs[w.ref] = Job(replace(w, created_at=at, queued_at=at, pods_ready=None), arrival.duration,
                               arrival.checkpoint_interval, at, True, at, requested_gpus=self.requested(w))

    def trace_work_left(self, more_to_come: bool) -> bool:
        return more_to_come or any(j.from_trace and j.finished_at is None for j in self.jobs.values())

    def finish_until(self, now: float) -> None:
        for job in self.jobs.values():
            if job.running and job.finish_time() <= now:
                at = job.finish_time()
                self.stop(job, at)
                job.done, job.finished_at = job.duration, at
                self.counters.finished += 1

    def stop(self, job: Job, at: float) -> None:
        """End the current run at `at`, counting the GPU-seconds it held within the window."""
        assert job.run_start is not None
        held = max(0.0, min(at, self.end) - max(job.run_start, self.start))
        self.counters.allocated_gpu_seconds += held * job.gpus
        job.run_start, job.assignment, job.gpus = None, (), 0

    # ------------------------------------------------------------ the cycle's view

    def snapshot_at(self, now: float) -> Snapshot:
        workloads = list(self.static)
        for ref in sorted(self.jobs):
            job = self.jobs[ref]
            if job.finished_at is not None or job.submitted > now:
                continue
            if job.running:
                workloads.append(replace(job.workload, state=WorkloadState.RUNNING, assignment=job.assignment,
                                         admitted_at=job.run_start, checkpointed_at=job.last_checkpoint(now),
                                         queued_at=job.queued_at))
            else:
                workloads.append(replace(job.workload, state=WorkloadState.PENDING, assignment=(), admitted_at=None,
                                         checkpointed_at=None, queued_at=job.queued_at))
        return replace(self.base, workloads=tuple(workloads), now=now)

    # ------------------------------------------------------------ applying a plan

    def apply(self, plan: Plan, now: float) -> None:
        for eviction in plan.evictions:
            self.evict(self.job(eviction.workload), now)
        for migration in plan.migrations:
            job = self.job(migration.workload)
            self.evict(job, now)
            self.admit(job, Admission(migration.workload, migration.cluster_queue, migration.to), now)
        for admission in plan.admissions:
            self.admit(self.job(admission.workload), admission, now)
        status = plan.solver.status
        self.counters.statuses[status] = self.counters.statuses.get(status, 0) + 1
        self.counters.cycle_seconds.append(float(plan.solver.seconds.get("total", 0.0)))

    def job(self, ref: ObjectRef) -> Job:
        job = self.jobs.get(ref)
        if job is None:
            raise ValueError(f"the plan names {ref}, which the simulation does not hold")
        return job

    def evict(self, job: Job, now: float) -> None:
        if not job.running:
            raise ValueError(f"the plan evicts {job.workload.ref}, which is not running")
        assert job.run_start is not None
        checkpoint = job.last_checkpoint(now)
        kept = checkpoint - job.run_start if checkpoint is not None else 0.0
        since = job.run_start + kept
        self.counters.lost_gpu_seconds += max(0.0, now - since) * job.gpus
        # utilisation counts only the window: what was lost of the GPU-seconds counted in it
        self.counters.lost_window_gpu_seconds += max(0.0, min(now, self.end) - max(since, self.start)) * job.gpus
        self.counters.evictions += 1
        key = str(job.workload.priority)
        self.counters.evictions_by_priority[key] = self.counters.evictions_by_priority.get(key, 0) + 1
        self.counters.lost_by_priority[key] = self.counters.lost_by_priority.get(key, 0.0) + max(0.0, now - since) \
            * job.gpus
        job.done = min(job.duration, job.done + kept)
        self.stop(job, now)
        job.queued_at = now          # Kueue requeues an evicted workload at its eviction time
        job.evictions += 1

    def admit(self, job: Job, admission: Admission, now: float) -> None:
        if job.running or job.finished_at is not None:
            raise ValueError(f"the plan admits {job.workload.ref}, which is not pending")
        job.run_start, job.anchor = now, now
        job.assignment = admission.pod_sets
        job.gpus = self.run_gpus(job.workload, admission.pod_sets)
        job.workload = replace(job.workload, cluster_queue=admission.cluster_queue)
        if job.first_start is None:
            job.first_start = now
        self.counters.admitted += 1

    # ------------------------------------------------------------ over time

    def sample(self, now: float, plan: Plan) -> None:
        running = [j for j in self.jobs.values() if j.running]
        self.stalled = 0 if running or plan.admissions else self.stalled + 1
        pending = sum(1 for j in self.jobs.values()
                      if not j.running and j.finished_at is None and j.submitted <= now)
        self.counters.series.append({
            "t": round(now - self.start, 3),
            "allocated_gpus": sum(j.gpus for j in running),
            "running": len(running),
            "pending": pending,
            "admitted": len(plan.admissions),
            "evicted": len(plan.evictions),
            "largest_free": self.largest_free(running),
            "cycle_seconds": self.counters.cycle_seconds[-1],
            **fair_distance(plan),
        })

    def largest_free(self, running: list[Job]) -> dict[str, int]:
        """Per topology level above the host: the most free GPUs in one domain."""
        used: dict[str, int] = {}
        for job in running:
            per_pod = {ps.name: self.gpus_of(ps.request.items()) for ps in job.workload.pod_sets}
            for a in job.assignment:
                for name, count in a.pods_per_node().items():
                    used[name] = used.get(name, 0) + count * per_pod.get(a.name, 0)
        levels = sorted({lv for t in self.base.topologies.values() for lv in t.levels if lv != HOSTNAME_LABEL})
        free: dict[str, dict[str, int]] = {lv: {} for lv in levels}
        for node in self.base.nodes:
            if not node.usable:
                continue
            room = max(0, self.gpus_of(node.free.items()) - used.get(node.name, 0))
            for lv in levels:
                value = node.labels.get(lv)
                if value is not None:
                    free[lv][value] = free[lv].get(value, 0) + room
        return {lv: max(domains.values(), default=0) for lv, domains in free.items()}

    def close(self, end: float) -> None:
        for job in self.jobs.values():
            if job.running:
                assert job.run_start is not None
                self.counters.allocated_gpu_seconds += max(0.0, end - max(job.run_start, self.start)) * job.gpus


def fair_distance(plan: Plan) -> dict[str, float]:
    """With fair sharing on: how far the queues are from their fair allocation after the
    plan, in the cohort tree's measured resource (GPUs where it has any): the sum over
    queues of |used - fair| (the plan's own fair-sharing report). Empty when it is off."""
    report = plan.summary.get("fair_sharing")
    queues = report.get("queues") if isinstance(report, Mapping) else None
    if not isinstance(queues, Mapping):
        return {}
    total = 0.0
    for entry in queues.values():
        over = entry.get("over_fair") if isinstance(entry, Mapping) else None
        if isinstance(over, (int, float)):
            total += abs(float(over))
    return {"fair_distance": round(total, 3)}


# ---------------------------------------------------------------- metrics

def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95, p99 by the nearest rank (0 for no values)."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0, "count": 0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"p50": round(rank(0.50), 3), "p95": round(rank(0.95), 3), "p99": round(rank(0.99), 3),
            "mean": round(sum(ordered) / len(ordered), 3), "count": len(ordered)}


def waits(result: Result) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """Queueing delay of each trace job (submit to first start; a job that never started
    counts until the end), by priority value and by ClusterQueue, and how many never started."""
    by_priority: dict[str, list[float]] = {}
    by_queue: dict[str, list[float]] = {}
    unstarted = 0
    for job in result.jobs:
        if not job.from_trace:
            continue
        started = job.first_start if job.first_start is not None else result.end
        unstarted += job.first_start is None
        wait = max(0.0, started - job.submitted)
        by_priority.setdefault(str(job.workload.priority), []).append(wait)
        by_queue.setdefault(job.workload.cluster_queue or "(none)", []).append(wait)
    return by_priority, by_queue, unstarted


def backlog(result: Result) -> dict[str, int]:
    """The starting snapshot's pending work (no trace line, so outside `wait_seconds`): how
    much there was, in workloads and GPUs, and how much of it started within the window."""
    waiting = [j for j in result.jobs if not j.from_trace and j.submitted <= result.start
               and (j.first_start is None or j.first_start >= result.start)]
    started = [j for j in waiting if j.first_start is not None]
    return {"pending_at_start": len(waiting), "gpus_at_start": sum(j.requested_gpus for j in waiting),
            "started": len(started), "gpus_started": sum(j.requested_gpus for j in started)}


def required_waits(result: Result) -> dict[str, dict[str, float]]:
    """Per topology level that trace jobs require (above the host): their waits' percentiles,
    the longest, and how many never started (can rack- and block-sized jobs start?)."""
    by_level: dict[str, list[tuple[float, bool]]] = {}
    for job in result.jobs:
        levels = {ps.topology.level for ps in job.workload.pod_sets
                  if ps.topology.mode == "required" and ps.topology.level not in (None, HOSTNAME_LABEL)}
        if not job.from_trace or not levels:
            continue
        started = job.first_start if job.first_start is not None else result.end
        for level in levels:
            assert level is not None
            by_level.setdefault(level, []).append((max(0.0, started - job.submitted), job.first_start is None))
    return {level: {**percentiles([w for w, _ in entries]), "max": round(max(w for w, _ in entries), 3),
                    "unstarted": sum(1 for _, never in entries if never)}
            for level, entries in sorted(by_level.items())}


def _by_number(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=lambda k: (-int(k), k) if k.lstrip("-").isdigit() else (0, k))


def fair_summary(series: list[dict[str, object]]) -> dict[str, object]:
    """Fair-share distance over the cycles (mean, max, last), when fair sharing is on."""
    values = [float(v) for v in (p.get("fair_distance") for p in series) if isinstance(v, (int, float))]
    if not values:
        return {}
    return {"fair_distance": {"mean": round(sum(values) / len(values), 3), "max": round(max(values), 3),
                              "last": round(values[-1], 3)}}


def summarize(result: Result) -> dict[str, object]:
    c = result.counters
    span = max(0.0, result.end - result.start)
    capacity = result.total_gpus * span
    by_priority, by_queue, unstarted = waits(result)
    cycle = sorted(c.cycle_seconds)
    largest: dict[str, int] = {}
    for point in c.series:
        free = point["largest_free"]
        assert isinstance(free, Mapping)
        for level, gpus in free.items():
            largest[level] = min(largest.get(level, int(gpus)), int(gpus))
    return {
        "utilization_allocated": round(c.allocated_gpu_seconds / capacity, 6) if capacity else 0.0,
        "utilization_useful": round(max(0.0, c.allocated_gpu_seconds - c.lost_window_gpu_seconds) / capacity, 6)
        if capacity else 0.0,
        "wait_seconds": {k: percentiles(by_priority[k]) for k in _by_number(by_priority)},
        "wait_seconds_by_cluster_queue": {k: percentiles(v) for k, v in sorted(by_queue.items())},
        "wait_seconds_topology_required": required_waits(result),
        "admitted": c.admitted,
        "admissions_per_minute": round(c.admitted / (span / 60.0), 4) if span else 0.0,
        "evictions": c.evictions,
        "evictions_per_hour": round(c.evictions / (span / 3600.0), 4) if span else 0.0,
        "lost_gpu_hours": round(c.lost_gpu_seconds / 3600.0, 4),
        "evictions_by_priority": {k: c.evictions_by_priority[k] for k in _by_number(c.evictions_by_priority)},
        "lost_gpu_hours_by_priority": {k: round(c.lost_by_priority[k] / 3600.0, 4)
                                       for k in _by_number(c.lost_by_priority)},
        "evicted_more_than_once": sum(1 for j in result.jobs if j.evictions > 1),
        "finished": c.finished,
        "trace_jobs": sum(1 for j in result.jobs if j.from_trace),
        "backlog": backlog(result),
        "unstarted": unstarted,
        "cycles": len(c.cycle_seconds),
        "cycle_seconds": {"p50": percentiles(cycle)["p50"], "max": round(max(cycle, default=0.0), 3),
                          "total": round(sum(cycle), 3)},
        "admissions_per_planner_second": round(c.admitted / sum(cycle), 3) if sum(cycle) > 0 else 0.0,
        "plan_status": dict(sorted(c.statuses.items())),
        **fair_summary(c.series),
        "smallest_largest_free_gpus": dict(sorted(largest.items())),
        "total_gpus": result.total_gpus,
        "hours": round(span / 3600.0, 4),
        "series": c.series,
    }
