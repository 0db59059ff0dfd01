"""One live cycle, as the CLI and the CronJob run it: read -> plan -> (check) -> lease -> apply.

`apply --plan` applies a saved plan (planner.cluster.planfile) only if none of the
objects it writes changed since it was made (an object already in the state the plan
wants counts as unchanged, so re-applying a plan is a no-op, not an error).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from models import NodePins, ObjectRef, Plan, WorkloadState
from planner.cluster.apply import (
    Applier, ApplyReport, same_assignment, is_suspended, fingerprint,
    planned_kind, running_assignments, moving_assignments,
)
from planner import kinds
from planner.cluster.kube import Kube
from planner.cluster.kueue_guard import check_no_kueue_controller
from planner.cluster.lease import DEFAULT_DURATION, DEFAULT_NAME, DEFAULT_NAMESPACE, Lease
from planner.cluster.planfile import load_plan_with_fingerprints, touched
from planner.cluster.reader import LiveSnapshot, read_cluster
from planner.base.errors import InputError, StalePlanError
from planner.base.solve_options import SolveOptions
from planner.k8s.annotations import ASSIGNMENT, MIGRATING_TO, encode_assignment

Say = Callable[[str], None]


def plan_live(kube: Kube, *, config_files: Sequence[str] = (), policy_file: str | None = None,
              options: SolveOptions = SolveOptions(), say: Say = lambda _: None) -> tuple[LiveSnapshot, Plan]:
    """Read the cluster and plan it (pure planning after the read)."""
    from planner.whatif.provisioning import plan_cycle

    live = read_cluster(kube, config_files=config_files, policy_file=policy_file, say=say)
    snap = live.snapshot
    say(f"read {snap.object_count} objects, {len(snap.workloads)} workloads, {len(snap.nodes)} nodes "
        f"in {live.seconds:.2f}s; planning")
    plan = plan_cycle(snap, options, read_seconds=live.seconds)
    return live, plan


def resource_versions(plan: Plan, live: LiveSnapshot) -> dict[ObjectRef, str]:
    """The resourceVersion, at read time, of every object the plan writes."""
    versions = {w.ref: w.resource_version for w in live.snapshot.workloads}
    return {ref: versions.get(ref, "") for ref in touched(plan)}


def raw_workloads(live: LiveSnapshot) -> dict[ObjectRef, dict[str, Any]]:
    return {ObjectRef(o.get("kind", ""), o.get("metadata", {}).get("namespace", ""),
                      o.get("metadata", {}).get("name", "")): o
            for o in live.document.get("items") or () if planned_kind(o)}


def needed_objects(live: LiveSnapshot) -> list[dict[str, Any]]:
    """The objects adapters read beside the workloads (planner.kinds.needed_kinds), from the live read."""
    wanted = kinds.needed_kinds()
    return [o for o in live.document.get("items") or () if o.get("kind") in wanted]


def fingerprints(plan: Plan, live: LiveSnapshot) -> dict[ObjectRef, str]:
    """What planning read of every object the plan writes (see apply.fingerprint)."""
    raw = raw_workloads(live)
    return {ref: fingerprint(raw[ref]) for ref in touched(plan) if ref in raw}


def stale_objects(plan: Plan, versions: Mapping[ObjectRef, str], live: LiveSnapshot,
                  prints: Mapping[ObjectRef, str] | None = None) -> list[str]:
    """What changed since a saved plan was made, one line per object (empty: still fresh).

    A new resourceVersion with the same fingerprint (only status changed) is fresh.
    """
    raw = raw_workloads(live)
    prints = prints or {}
    wanted = {a.workload: encode_assignment(a.pod_sets) for a in plan.admissions}
    evicted = {e.workload for e in plan.evictions}
    moved = {m.workload: encode_assignment(m.to) for m in plan.migrations}
    out = []
    workloads = {w.ref: w for w in getattr(live.snapshot, "workloads", ())}   # (tests build a live read without one)
    for ref in touched(plan):
        obj = raw.get(ref)
        if obj is None and ref in workloads:
            # a workload that is not one object (a pod group, a LeaderWorkerSet's group): its
            # version is its pods' (its LWS's); done as planned counts as fresh
            w = workloads[ref]
            done = (ref in wanted and w.state is WorkloadState.RUNNING) or \
                (ref in evicted and w.state is not WorkloadState.RUNNING)
            if w.resource_version != versions.get(ref) and not done:
                out.append(f"{ref} changed (resourceVersion {versions.get(ref)} -> {w.resource_version})")
            continue
        if obj is None:
            out.append(f"{ref} no longer exists")
            continue
        now = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if now == versions.get(ref) or (prints.get(ref) and prints.get(ref) == fingerprint(obj)):
            continue
        annotation = (obj.get("metadata", {}).get("annotations") or {}).get(ASSIGNMENT)
        if ref in wanted and not is_suspended(obj) and same_assignment(annotation, wanted[ref]):
            continue   # already admitted as planned
        if ref in evicted and is_suspended(obj) and annotation is None:
            continue   # already evicted
        if ref in moved and same_assignment(annotation, moved[ref]) or ref in moved and is_suspended(obj) \
                and same_assignment((obj.get("metadata", {}).get("annotations") or {}).get(MIGRATING_TO), moved[ref]):
            continue   # already moved, or moving there
        out.append(f"{ref} changed (resourceVersion {versions.get(ref)} -> {now})")
    return out


def apply_live(kube: Kube, *, plan_file: str | None = None, config_files: Sequence[str] = (),
               policy_file: str | None = None, options: SolveOptions = SolveOptions(),
               lease_namespace: str = DEFAULT_NAMESPACE, lease_name: str = DEFAULT_NAME,
               identity: str | None = None, lease_duration: int = DEFAULT_DURATION, release_wait: float = 5.0,
               workers: int = 8, allow_kueue_controller: bool = False, pod_groups: bool = False,
               say: Say = lambda _: None, warn: Say | None = None,
               before_apply: Callable[[LiveSnapshot, Plan], None] | None = None) -> tuple[Plan, ApplyReport]:
    """One cycle: take the Lease, read, plan (or load and check a saved plan), apply, release the Lease.

    The Lease is taken before reading, so the plan is made from a state no other
    planner is changing. A dry run takes no Lease and every write is dryRun=All.
    `before_apply` is a test hook between planning and the first write. Before all of
    it, a cycle refuses to run beside Kueue's own active controller manager
    (planner.cluster.kueue_guard), unless `allow_kueue_controller` (then `warn` says so).
    """
    check_no_kueue_controller(kube, allow=allow_kueue_controller, say=say, warn=warn or say)
    lease = Lease(kube, namespace=lease_namespace, name=lease_name, identity=identity, duration=lease_duration)
    if not kube.dry_run:
        lease.acquire()
        say(f"took Lease {lease_namespace}/{lease_name} as {lease.identity}")
    try:
        if plan_file is None:
            live, plan = plan_live(kube, config_files=config_files, policy_file=policy_file, options=options,
                                   say=say)
            versions, prints = resource_versions(plan, live), fingerprints(plan, live)
        else:
            plan, versions, prints = load_plan_with_fingerprints(plan_file)
            elsewhere = sorted({a.cluster for a in plan.admissions if a.cluster})
            if elsewhere:   # admitted here, its pods would wait for nodes only a worker has
                raise InputError(f"a multi-cluster plan (admissions on worker clusters {', '.join(elsewhere)}): "
                                 "apply it on the manager with --worker NAME=KUBECONFIG or --multikueue-config "
                                 "NAME; nothing applied", file=plan_file, field="admissions.cluster")
            live = read_cluster(kube, config_files=config_files, policy_file=policy_file, say=say)
            stale = stale_objects(plan, versions, live, prints)
            if stale:
                raise StalePlanError(f"the saved plan {plan_file} is stale, nothing applied: " + "; ".join(stale)
                                     + ". Plan again with `stowplan plan --out FILE`")
        say(f"{len(plan.admissions)} admissions, {len(plan.evictions)} evictions, {len(plan.migrations)} migrations to apply")
        if before_apply is not None:
            before_apply(live, plan)
        if lease.held:
            lease.acquire()   # renew after a long solve; if it lapsed and another planner took it: no writes
        applier = Applier(kube, flavors=live.snapshot.flavors, planned_versions=versions,
                          identity=lease.identity, say=say, fingerprints=prints, workers=workers,
                          objects=needed_objects(live), pod_groups=pod_groups,
                          pins=NodePins.of(live.snapshot.nodes))
        started = time.monotonic()
        report = applier.run(plan, running_assignments(live.document, only_gated=True), release_wait=release_wait,
                             moving=moving_assignments(live.document))
        record_readiness(applier, plan, live)
        if plan.provisioning is not None:
            from planner.cluster.provisioning import apply_provisioning

            before = kube.writes
            made = apply_provisioning(kube, plan.provisioning, raw_workloads(live), say)
            report.requests_created, report.requests_deleted = made.created, made.deleted
            report.writes += kube.writes - before
        report.seconds["apply"] = round(time.monotonic() - started, 3)
        return plan, report
    finally:
        lease.release()


def record_readiness(applier: Applier, plan: Plan, live: LiveSnapshot) -> None:
    """waitForPodsReady's record: what this cycle saw of each running workload's pods
    (planner.cycle.podsready's marks, at the snapshot's planning time), on every workload the
    plan leaves running."""
    from planner.cycle.podsready import judge

    evicted = {e.workload for e in plan.evictions}
    for ref, changes in sorted(judge(live.snapshot).marks.items()):
        if ref not in evicted:
            applier.mark(ref, changes)
