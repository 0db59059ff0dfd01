"""waitForPodsReady, Kueue's way, judged on one snapshot at its planning time.

Kueue (v0.17, `pkg/controller/core/workload_controller.go`) evicts an admitted
workload whose pods are not all Ready (Ready or Succeeded, per pod set, as many as
were admitted) within `timeout` of its admission (underlying cause WaitForStart),
or within `recoveryTimeout` of losing readiness after it had it (WaitForRecovery),
with reason `PodsReadyTimeout`, and requeues it with backoff: the n-th requeue waits
`min(backoffBaseSeconds * 2^(n-1), backoffMaxSeconds)`. A workload whose next
requeue would exceed `backoffLimitCount` is deactivated instead (never admitted
again until someone reactivates it). With `blockAdmission`, nothing is admitted
while an admitted workload is not Ready.

Stowplan has no Workload object: the record lives on the Job or JobSet as
`stowplan.io/*` annotations (planner.k8s.podsets) that planner.cluster.apply
writes. A cycle sees the cluster only when it runs, so "when the pods were first
seen Ready" and "first seen not Ready again" are the planning times of the cycles
that saw them (`marks`). Every decision here uses the snapshot's planning time
(`snapshot.now`), never the clock. Pure: models in, models out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Mapping

from models import Eviction, ObjectRef, Snapshot, Workload, WorkloadState
from models.kueue_config import CREATION_TIMESTAMP, WaitForPodsReadyConfig
from planner.k8s.annotations import PODS_NOT_READY_AT, PODS_READY_AT

PODS_READY_TIMEOUT = "PodsReadyTimeout"          # Kueue's WorkloadEvictedByPodsReadyTimeout
DEACTIVATED = "Deactivated"                      # Kueue's WorkloadDeactivated
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
READINESS_REASONS = frozenset({PODS_READY_TIMEOUT, DEACTIVATED})

# the annotations `marks` sets (a time) or removes (None)


@dataclass(frozen=True)
class Readiness:
    """What waitForPodsReady decides before a cycle plans.

    `seen`: the snapshot as the cycle judges it (workloads in backoff or deactivated are
    blocked with that reason; with `requeuingStrategy.timestamp: Creation` a requeued
    workload queues by its creation). `planning`: `seen` without the workloads evicted
    here, whose room the plan may use. `evictions`: PodsReadyTimeout and Deactivated,
    for nobody. `marks`: per running workload not evicted, the annotations to record
    (an RFC 3339 time) or remove (None)."""

    seen: Snapshot
    planning: Snapshot
    evictions: tuple[Eviction, ...] = ()
    marks: Mapping[ObjectRef, Mapping[str, str | None]] = field(default_factory=dict)


def config_of(snapshot: Snapshot) -> WaitForPodsReadyConfig:
    return snapshot.kueue_config.wait_for_pods_ready


def backoff_seconds(count: int, config: WaitForPodsReadyConfig) -> float:
    """Kueue's n-th requeue delay, without its jitter: base * 2^(n-1), at most max."""
    strategy = config.requeuing_strategy
    if count < 1:
        return 0.0
    return float(min(strategy.backoff_base_seconds * 2 ** min(count - 1, 62), strategy.backoff_max_seconds))


def timed_out(workload: Workload, config: WaitForPodsReadyConfig, now: float) -> tuple[str, float, float] | None:
    """(underlying cause, since, limit) when a running workload's pods exceeded their time, else None.

    Never Ready since admission: `timeout` from `admitted_at` (WaitForStart). Seen Ready,
    then seen not Ready: `recoveryTimeout` from when that was first seen (WaitForRecovery;
    0 turns it off). Unknown readiness (no pods in the snapshot) never times out."""
    if not config.enabled or workload.state is not WorkloadState.RUNNING or workload.all_pods_ready is not False:
        return None
    if workload.pods_ready_at is None:
        since = workload.admitted_at
        if since is not None and now - since >= config.timeout_seconds:
            return WAIT_FOR_START, since, config.timeout_seconds
        return None
    since = workload.pods_not_ready_at
    limit = config.recovery_timeout
    if limit > 0 and since is not None and now - since >= limit:
        return WAIT_FOR_RECOVERY, since, limit
    return None


def eviction_for(workload: Workload, cause: str, since: float, limit: float, config: WaitForPodsReadyConfig,
                 now: float) -> Eviction:
    """The eviction Kueue makes: requeue with the next backoff, or deactivate past the limit."""
    ready = ", ".join(f"{name} {r}/{n}" for name, (r, n) in sorted((workload.pods_ready or {}).items()))
    what = (f"{cause}: pods not all Ready ({ready}) {now - since:.0f}s after "
            f"{'admission' if cause == WAIT_FOR_START else 'losing readiness'} (timeout {limit:g}s)")
    count = workload.requeue_count + 1
    limit_count = config.requeuing_strategy.backoff_limit_count
    if limit_count is not None and count > limit_count:
        return Eviction(workload.ref, DEACTIVATED, (), 0.0, requeue_count=workload.requeue_count,
                        message=f"{REQUEUING_LIMIT_EXCEEDED}: {what}; requeued {workload.requeue_count} time(s), "
                                f"backoffLimitCount {limit_count}")
    at = now + backoff_seconds(count, config)
    return Eviction(workload.ref, PODS_READY_TIMEOUT, (), 0.0, requeue_count=count, requeue_at=at,
                    message=f"{what}; requeue {count}, not before {rfc3339(at)}")


def marks_for(workload: Workload, now: float) -> dict[str, str | None]:
    """The readiness record a running workload needs after this cycle has seen it."""
    ready = workload.all_pods_ready
    out: dict[str, str | None] = {}
    if ready is True:
        if workload.pods_ready_at is None:
            out[PODS_READY_AT] = rfc3339(now)
        if workload.pods_not_ready_at is not None:
            out[PODS_NOT_READY_AT] = None
    elif ready is False and workload.pods_ready_at is not None and workload.pods_not_ready_at is None:
        out[PODS_NOT_READY_AT] = rfc3339(now)
    return out


def blocked_why(workload: Workload, config: WaitForPodsReadyConfig, now: float) -> str | None:
    """Why a pending workload is not planned this cycle: deactivated, or in its backoff."""
    if workload.deactivated is not None:
        return (f"deactivated ({workload.deactivated}): remove the stowplan.io/deactivated annotation to queue "
                "it again")
    if workload.requeue_at is not None and workload.requeue_at > now:
        limit = config.requeuing_strategy.backoff_limit_count
        of = f" of at most {limit}" if limit is not None else ""
        return (f"requeued after {workload.eviction_reason or PODS_READY_TIMEOUT} (requeue "
                f"{workload.requeue_count}{of}): backoff until {rfc3339(workload.requeue_at)}")
    return None


def judge(snapshot: Snapshot) -> Readiness:
    """waitForPodsReady on `snapshot` at `snapshot.now` (see the module docstring)."""
    config = config_of(snapshot)
    now = snapshot.now
    evictions: list[Eviction] = []
    marks: dict[ObjectRef, dict[str, str | None]] = {}
    seen_workloads: list[Workload] = []
    for w in snapshot.workloads:
        if w.state is WorkloadState.PENDING:
            why = blocked_why(w, config, now)
            if why is not None:
                w = replace(w, blocked_reason="; ".join(r for r in (w.blocked_reason, why) if r))
            elif (config.enabled and config.requeuing_strategy.timestamp == CREATION_TIMESTAMP
                  and w.eviction_reason == PODS_READY_TIMEOUT):
                w = replace(w, queued_at=w.created_at)
        elif w.state is WorkloadState.RUNNING and w.deactivated is not None:
            # Kueue evicts an admitted Workload whose spec.active turns false
            evictions.append(Eviction(w.ref, DEACTIVATED, (), 0.0, requeue_count=w.requeue_count,
                                      message=f"{w.deactivated}: the workload is deactivated "
                                              "(stowplan.io/deactivated)"))
        elif w.state is WorkloadState.RUNNING and config.enabled:
            out = timed_out(w, config, now)
            if out is not None:
                evictions.append(eviction_for(w, *out, config, now))
            else:
                mark = marks_for(w, now)
                if mark:
                    marks[w.ref] = mark
        seen_workloads.append(w)
    gone = {e.workload for e in evictions}
    if config.enabled and config.block_admission:
        waiting = sorted(str(w.ref) for w in seen_workloads
                         if w.state is WorkloadState.RUNNING and w.ref not in gone and w.all_pods_ready is False)
        if waiting:
            why = (f"blockAdmission: waiting for all admitted workloads to be in PodsReady condition "
                   f"({len(waiting)} not: {', '.join(waiting[:3])}{' ...' if len(waiting) > 3 else ''})")
            seen_workloads = [replace(w, blocked_reason="; ".join(r for r in (w.blocked_reason, why) if r))
                              if w.state is WorkloadState.PENDING else w for w in seen_workloads]
    seen = replace(snapshot, workloads=tuple(seen_workloads))
    if not evictions and seen_workloads == list(snapshot.workloads):
        seen = snapshot
    planning = replace(seen, workloads=tuple(w for w in seen.workloads if w.ref not in gone)) if gone else seen
    return Readiness(seen, planning, tuple(sorted(evictions, key=lambda e: e.workload)), marks)


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
