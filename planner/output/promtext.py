"""A plan's metrics in Prometheus text format, and the push to a Pushgateway.

An edge module (output side): the core never imports it. Built on the official
client (prometheus_client), one registry per cycle:

| metric | labels | what |
|---|---|---|
| `stowplan_pending_workloads` | cluster_queue | workloads still pending after the plan (Kueue's `pending_workloads`) |
| `stowplan_admitted_workloads_total` | cluster_queue | workloads this cycle admits (Kueue's `admitted_workloads_total`) |
| `stowplan_evicted_workloads_total` | cluster_queue, reason | workloads this cycle evicts, reason `Preempted` or `Reclaimed` (always present), `PodsReadyTimeout` or `Deactivated` (Kueue's `evicted_workloads_total`) |
| `stowplan_cycle_seconds` | phase | read, build, solve, verify, total (and apply, when applied) |
| `stowplan_plan_gap` | | the plan's relative gap (0 when proven optimal) |
| `stowplan_plan_objective`, `stowplan_plan_bound` | | the objective and its proven bound |
| `stowplan_plan_info` | method, status | 1 |
| `stowplan_served_gpus` | priority | GPUs served after the plan (GPUs only), REFERENCE §5 |
| `stowplan_served_cores` | priority | CPU cores of CPU-only work served after the plan, REFERENCE §5 |
| `stowplan_gain_over_greedy_gpus` | priority | served_gpus minus Kueue's way (the greedy plan), planner.describe.vs_kueue |
| `stowplan_evictions_over_greedy` | | evictions minus Kueue's way's |
| `stowplan_preemption_cost` | | the evictions' summed cost |
| `stowplan_migrated_workloads_total`, `stowplan_migration_cost` | | workloads this cycle moves and their summed cost (policy `defragment` on only) |
| `stowplan_apply_conflicts` | | workloads the apply skipped (apply only) |
| `stowplan_last_cycle_timestamp_seconds` | | when the file or push was made |

Kueue's names carry its namespace (`kueue_`); these carry Stowplan's, so both sit
side by side in one Prometheus. One process plans one cycle: a `_total` is that
cycle's count (a Pushgateway keeps the last push), so a dashboard plots it as is.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from typing import Mapping
from urllib.parse import urlsplit

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from models import ObjectRef, Plan, Snapshot
from planner.describe import vs_kueue
from planner.base.terminal import printable

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in prometheus-client; `_created` samples mean nothing for a one-cycle process

JOB = "stowplan"
PHASES = ("read", "build", "solve", "verify", "total")
REASONS = ("Preempted", "Reclaimed")


def registry_for(plan: Plan, queues: Mapping[ObjectRef, str | None], *, apply_seconds: float | None = None,
                 conflicts: int | None = None, now: float | None = None) -> CollectorRegistry:
    """Every metric of `plan`; `queues` gives each workload's ClusterQueue (the snapshot's)."""
    registry = CollectorRegistry(auto_describe=True)

    def queue(ref: ObjectRef) -> str:
        return printable(queues.get(ref) or "")

    pending = Gauge("stowplan_pending_workloads", "Workloads pending after the plan, per ClusterQueue.",
                    ["cluster_queue"], registry=registry)
    admitted = Counter("stowplan_admitted_workloads", "Workloads this cycle admits, per ClusterQueue.",
                       ["cluster_queue"], registry=registry)
    evicted = Counter("stowplan_evicted_workloads", "Workloads this cycle evicts, per ClusterQueue and reason.",
                      ["cluster_queue", "reason"], registry=registry)
    # label values come from input: control characters escaped (the client escapes only \\, " and newline)
    every_queue = sorted({printable(q) for q in queues.values() if q})
    for name in every_queue:     # a queue with nothing pending reads 0, not absent
        pending.labels(name)
        admitted.labels(name)
        for reason in REASONS:
            evicted.labels(name, reason)
    for name, count in sorted(Tally(queue(p.workload) for p in plan.pending).items()):
        pending.labels(name).set(count)
    for admission in plan.admissions:
        admitted.labels(printable(admission.cluster_queue) if admission.cluster_queue
                        else queue(admission.workload)).inc()
    for eviction in plan.evictions:
        evicted.labels(queue(eviction.workload), eviction.reason).inc()

    cycle = Gauge("stowplan_cycle_seconds", "Seconds of the cycle, per phase.", ["phase"], registry=registry)
    seconds = dict(plan.solver.seconds)
    for phase in PHASES:
        cycle.labels(phase).set(float(seconds.get(phase, 0.0)))
    if apply_seconds is not None:
        cycle.labels("apply").set(apply_seconds)

    def single(name: str, doc: str, value: float) -> None:
        Gauge(name, doc, registry=registry).set(value)

    def finite(value: float) -> float:
        return value if value == value and abs(value) != float("inf") else float("nan")

    single("stowplan_plan_gap", "Relative gap between the plan's objective and its proven bound.",
           finite(plan.solver.gap))
    single("stowplan_plan_objective", "The plan's objective (admitted volume over priority tiers).",
           finite(plan.solver.objective))
    single("stowplan_plan_bound", "Proven bound on the objective.", finite(plan.solver.bound))
    Gauge("stowplan_plan_info", "The plan's method and status.", ["method", "status"],
          registry=registry).labels(plan.solver.method, plan.solver.status).set(1)

    summary = plan.summary
    served = Gauge("stowplan_served_gpus", "GPUs served after the plan (GPUs only), per priority.",
                   ["priority"], registry=registry)
    for priority, value in dict(summary.get("served_gpus") or {}).items():  # type: ignore[call-overload]
        served.labels(str(priority)).set(float(value))
    cores = Gauge("stowplan_served_cores", "CPU cores of CPU-only work served after the plan, per priority.",
                  ["priority"], registry=registry)
    for priority, value in dict(summary.get("served_cores") or {}).items():  # type: ignore[call-overload]
        cores.labels(str(priority)).set(float(value))
    block = summary.get(vs_kueue.KEY)
    if isinstance(block, Mapping):
        gain = Gauge("stowplan_gain_over_greedy_gpus",
                     "GPUs served beyond Kueue's way (the greedy plan), per priority.", ["priority"],
                     registry=registry)
        for priority, value in vs_kueue.gain_gpus(block).items():
            gain.labels(str(priority)).set(value)
        single("stowplan_evictions_over_greedy", "Evictions minus those of Kueue's way.",
               float(block["difference"].get("evicted", 0)))
    single("stowplan_preemption_cost", "Summed cost of the plan's evictions.",
           float(summary.get("preemption_cost") or 0))  # type: ignore[arg-type]
    if "migrated" in summary:   # defragmentation on
        Counter("stowplan_migrated_workloads", "Workloads this cycle moves (defragmentation).",
                registry=registry).inc(len(plan.migrations))
        single("stowplan_migration_cost", "Summed cost of the plan's migrations.",
               float(summary.get("migration_cost") or 0))  # type: ignore[arg-type]
    if conflicts is not None:
        single("stowplan_apply_conflicts", "Workloads the apply skipped on a conflict.", float(conflicts))
    single("stowplan_last_cycle_timestamp_seconds", "When this cycle's metrics were made (epoch seconds).",
           time.time() if now is None else now)
    return registry


def queues_of(snapshot: Snapshot) -> dict[ObjectRef, str | None]:
    return {w.ref: w.cluster_queue for w in snapshot.workloads}


def text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode("utf-8")


def check_pushgateway(url: str) -> str:
    """The URL if it is one a push can go to (http or https, a host, no user-info), else
    ValueError with why (the CLI makes it exit 2, naming the option)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {redacted(url)!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("user-info in the URL is not supported (it would be a credential in a command line)")
    if parts.query or parts.fragment:
        raise ValueError(f"no query or fragment expected: {redacted(url)!r}")
    return url


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return parts._replace(netloc=host).geturl()


def push(url: str, registry: CollectorRegistry, timeout: float = 10.0) -> None:
    """PUT this cycle's metrics to the Pushgateway at `url` under job `stowplan`
    (replacing the last cycle's). Raises OSError on failure, without the URL's user-info."""
    try:
        prometheus_client.push_to_gateway(url, job=JOB, registry=registry, timeout=timeout)
    except Exception as error:  # urllib raises URLError/HTTPError, both OSError; anything else alike
        raise OSError(f"push to Pushgateway {redacted(url)} failed: {type(error).__name__}: "
                      f"{redacted(str(error))}") from None
