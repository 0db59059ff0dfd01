"""One live cycle, as the CLI and the CronJob run it: read -> plan -> (check) -> lease -> apply.

Also the saved-plan round trip: `plan --out` writes the plan with, under
`snapshot.resourceVersions`, the resourceVersion of every object it would write;
`apply --plan` applies such a file only if none of them changed since (an object
already in the state the plan wants counts as unchanged, so re-applying a plan
is a no-op, not an error).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Sequence

import yaml

from models import Admission, Eviction, ObjectRef, Plan, SolverReport
from planner.cluster.apply import (
    ASSIGNMENT, API_VERSIONS, Applier, ApplyReport, _same_assignment, _suspended, assignment_json, fingerprint,
    parse_pod_sets, running_assignments,
)
from planner.cluster.kube import Kube
from planner.cluster.lease import DEFAULT_DURATION, DEFAULT_NAME, DEFAULT_NAMESPACE, Lease
from planner.cluster.reader import LiveSnapshot, read_cluster
from planner.errors import InputError, StalePlanError

Say = Callable[[str], None]


def plan_live(kube: Kube, *, config_files: Sequence[str] = (), policy_file: str | None = None,
              solver: str = "milp", time_limit: float | None = None, gap: float | None = None,
              say: Say = lambda _: None) -> tuple[LiveSnapshot, Plan]:
    """Read the cluster and plan it (pure planning after the read)."""
    from planner.pipeline import plan_snapshot

    live = read_cluster(kube, config_files=config_files, policy_file=policy_file, say=say)
    snap = live.snapshot
    say(f"read {snap.object_count} objects, {len(snap.workloads)} workloads, {len(snap.nodes)} nodes "
        f"in {live.seconds:.2f}s; planning")
    plan = plan_snapshot(snap, solver=solver, time_limit=time_limit, gap=gap, read_seconds=live.seconds)
    return live, plan


def touched(plan: Plan) -> list[ObjectRef]:
    return sorted({a.workload for a in plan.admissions} | {e.workload for e in plan.evictions})


def resource_versions(plan: Plan, live: LiveSnapshot) -> dict[ObjectRef, str]:
    """The resourceVersion, at read time, of every object the plan writes."""
    versions = {w.ref: w.resource_version for w in live.snapshot.workloads}
    return {ref: versions.get(ref, "") for ref in touched(plan)}


def raw_workloads(live: LiveSnapshot) -> dict[ObjectRef, dict[str, Any]]:
    return {ObjectRef(o.get("kind", ""), o.get("metadata", {}).get("namespace", ""),
                      o.get("metadata", {}).get("name", "")): o
            for o in live.document.get("items") or () if o.get("kind") in API_VERSIONS}


def fingerprints(plan: Plan, live: LiveSnapshot) -> dict[ObjectRef, str]:
    """What planning read of every object the plan writes (see apply.fingerprint)."""
    raw = raw_workloads(live)
    return {ref: fingerprint(raw[ref]) for ref in touched(plan) if ref in raw}


def ref_key(ref: ObjectRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def plan_document(plan: Plan, versions: Mapping[ObjectRef, str],
                  prints: Mapping[ObjectRef, str] | None = None) -> dict[str, Any]:
    from planner.render import plan_to_dict

    data = plan_to_dict(plan)
    data["snapshot"]["resourceVersions"] = {ref_key(ref): versions[ref] for ref in sorted(versions)}
    if prints:
        data["snapshot"]["fingerprints"] = {ref_key(ref): prints[ref] for ref in sorted(prints)}
    return data


def render_saved(plan: Plan, versions: Mapping[ObjectRef, str], fmt: str,
                 prints: Mapping[ObjectRef, str] | None = None) -> str:
    """The plan file `plan --out` writes (yaml or json), with the resourceVersions (and fingerprints)."""
    data = plan_document(plan, versions, prints)
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    from planner import render

    return str(yaml.dump(render._flowed(data), Dumper=render._PlanDumper, sort_keys=False,
                         default_flow_style=False, allow_unicode=True, width=4096, indent=2))


def load_plan(path: str) -> tuple[Plan, dict[ObjectRef, str]]:
    plan, versions, _ = load_plan_with_fingerprints(path)
    return plan, versions


def load_plan_with_fingerprints(path: str) -> tuple[Plan, dict[ObjectRef, str], dict[ObjectRef, str]]:
    """A plan file written by `plan --out` -> the Plan's decisions and the resourceVersions they need."""
    from planner.snapshot import loader

    # read as snapshots are: a regular file of bounded size, aliases bounded
    documents = list(loader.decode(path, loader.read_bytes(path)))
    data = documents[0] if len(documents) == 1 else None
    if not isinstance(data, dict) or data.get("kind") != "Plan":
        raise InputError("not a Stowplan plan (kind: Plan)", file=path, field="kind")
    snapshot_part = data.get("snapshot") or {}
    if not isinstance(snapshot_part, dict):
        raise InputError("malformed plan: must be a mapping", file=path, field="snapshot")
    raw_versions = snapshot_part.get("resourceVersions")
    if not isinstance(raw_versions, dict):
        raise InputError("has no snapshot.resourceVersions: save plans to apply with `stowplan plan --out FILE`",
                         file=path, field="snapshot.resourceVersions")
    try:
        versions = {_ref_of(key): str(value) for key, value in raw_versions.items()}
        raw_prints = (data.get("snapshot") or {}).get("fingerprints") or {}
        prints = {_ref_of(key): str(value) for key, value in raw_prints.items()}
        admissions = tuple(Admission(_ref(a["workload"]), str(a["clusterQueue"]), tuple(parse_pod_sets(a["podSets"])))
                           for a in data.get("admissions") or ())
        evictions = tuple(Eviction(_ref(e["workload"]), str(e["reason"]), tuple(_ref(r) for r in e.get("for") or ()),
                                   float(e.get("cost") or 0.0)) for e in data.get("evictions") or ())
        snapshot = data.get("snapshot") or {}
        solver = data.get("solver") or {}
        plan = Plan(str(snapshot.get("source", path)), str(snapshot.get("digest", "")),
                    int(snapshot.get("objects") or 0),
                    SolverReport(str(solver.get("method", "")), str(solver.get("status", "")),
                                 float(solver.get("objective") or 0), float(solver.get("bound") or 0),
                                 float(solver.get("gap") or 0)),
                    admissions, evictions)
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as err:
        raise InputError(f"malformed plan: {type(err).__name__}: {err}", file=path) from None
    missing = [str(ref) for ref in touched(plan) if ref not in versions]
    if missing:
        raise InputError(f"snapshot.resourceVersions lacks {', '.join(missing)}", file=path,
                         field="snapshot.resourceVersions")
    return plan, versions, prints


def _ref(d: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(str(d["kind"]), str(d.get("namespace") or ""), str(d["name"]))


def _ref_of(key: str) -> ObjectRef:
    kind, namespace, name = key.split("/", 2)
    return ObjectRef(kind, namespace, name)


def stale_objects(plan: Plan, versions: Mapping[ObjectRef, str], live: LiveSnapshot,
                  prints: Mapping[ObjectRef, str] | None = None) -> list[str]:
    """What changed since a saved plan was made, one line per object (empty: still fresh).

    A new resourceVersion with the same fingerprint (only status changed) is fresh.
    """
    raw = raw_workloads(live)
    prints = prints or {}
    wanted = {a.workload: assignment_json(a.pod_sets) for a in plan.admissions}
    evicted = {e.workload for e in plan.evictions}
    out = []
    for ref in touched(plan):
        obj = raw.get(ref)
        if obj is None:
            out.append(f"{ref} no longer exists")
            continue
        now = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if now == versions.get(ref) or (prints.get(ref) and prints.get(ref) == fingerprint(obj)):
            continue
        annotation = (obj.get("metadata", {}).get("annotations") or {}).get(ASSIGNMENT)
        if ref in wanted and not _suspended(obj) and _same_assignment(annotation, wanted[ref]):
            continue   # already admitted as planned
        if ref in evicted and _suspended(obj) and annotation is None:
            continue   # already evicted
        out.append(f"{ref} changed (resourceVersion {versions.get(ref)} -> {now})")
    return out


def apply_live(kube: Kube, *, plan_file: str | None = None, config_files: Sequence[str] = (),
               policy_file: str | None = None, solver: str = "milp", time_limit: float | None = None,
               gap: float | None = None, lease_namespace: str = DEFAULT_NAMESPACE, lease_name: str = DEFAULT_NAME,
               identity: str | None = None, lease_duration: int = DEFAULT_DURATION, release_wait: float = 5.0,
               workers: int = 8,
               say: Say = lambda _: None,
               before_apply: Callable[[LiveSnapshot, Plan], None] | None = None) -> tuple[Plan, ApplyReport]:
    """One cycle: take the Lease, read, plan (or load and check a saved plan), apply, release the Lease.

    The Lease is taken before reading, so the plan is made from a state no other
    planner is changing. A dry run takes no Lease and every write is dryRun=All.
    `before_apply` is a test hook between planning and the first write.
    """
    lease = Lease(kube, namespace=lease_namespace, name=lease_name, identity=identity, duration=lease_duration)
    if not kube.dry_run:
        lease.acquire()
        say(f"took Lease {lease_namespace}/{lease_name} as {lease.identity}")
    try:
        if plan_file is None:
            live, plan = plan_live(kube, config_files=config_files, policy_file=policy_file, solver=solver,
                                   time_limit=time_limit, gap=gap, say=say)
            versions, prints = resource_versions(plan, live), fingerprints(plan, live)
        else:
            plan, versions, prints = load_plan_with_fingerprints(plan_file)
            live = read_cluster(kube, config_files=config_files, policy_file=policy_file, say=say)
            stale = stale_objects(plan, versions, live, prints)
            if stale:
                raise StalePlanError(f"the saved plan {plan_file} is stale, nothing applied: " + "; ".join(stale)
                                     + ". Plan again with `stowplan plan --out FILE`")
        say(f"{len(plan.admissions)} admissions, {len(plan.evictions)} evictions to apply")
        if before_apply is not None:
            before_apply(live, plan)
        if lease.held:
            lease.acquire()   # renew after a long solve; if it lapsed and another planner took it: no writes
        applier = Applier(kube, flavors=live.snapshot.flavors, planned_versions=versions,
                          identity=lease.identity, say=say, fingerprints=prints, workers=workers)
        started = time.monotonic()
        report = applier.run(plan, running_assignments(live.document, only_gated=True), release_wait=release_wait)
        report.seconds["apply"] = round(time.monotonic() - started, 3)
        return plan, report
    finally:
        lease.release()
