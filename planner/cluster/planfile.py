"""The plan file, both ways: what `stowplan plan --out` writes and `apply --plan` reads.

A plan file is the Plan (planner.output.document's document) with, under `snapshot`, the
resourceVersion (`resourceVersions`) and what planning read (`fingerprints`) of every
object the plan writes, so applying it later can tell whether the cluster moved on.
Written as yaml (planner.output.document's style) or json; read as snapshots are read (a
regular file of bounded size, aliases bounded).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Mapping

from models import Admission, Domain, Eviction, Migration, ObjectRef, Plan, Resize, SolverReport
from models.objects import Toleration
from models.provisioning import DeletedRequest, ProvisioningSection, RequestPodSet, WantedRequest
from planner.k8s.annotations import decode_entries
from planner.k8s.fields import Bad
from planner.base.errors import InputError


def touched(plan: Plan) -> list[ObjectRef]:
    return sorted({a.workload for a in plan.admissions} | {e.workload for e in plan.evictions}
                  | {m.workload for m in plan.migrations} | {r.workload for r in plan.resizes})


def ref_key(ref: ObjectRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def plan_document(plan: Plan, versions: Mapping[ObjectRef, str],
                  prints: Mapping[ObjectRef, str] | None = None) -> dict[str, Any]:
    from planner.output.document import plan_to_dict

    data = plan_to_dict(plan)
    data["snapshot"]["resourceVersions"] = {ref_key(ref): versions[ref] for ref in sorted(versions)}
    if prints:
        data["snapshot"]["fingerprints"] = {ref_key(ref): prints[ref] for ref in sorted(prints)}
    return data


def render_saved(plan: Plan, versions: Mapping[ObjectRef, str], fmt: str,
                 prints: Mapping[ObjectRef, str] | None = None) -> str:
    """The plan file `plan --out` writes (yaml or json), with the resourceVersions (and fingerprints)."""
    data = plan_document(plan, versions, prints)
    from planner.output import document as output
    if fmt == "json":
        return output.escaped(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"

    return output.dump_yaml(data)


def load_plan(path: str) -> tuple[Plan, dict[ObjectRef, str]]:
    plan, versions, _ = load_plan_with_fingerprints(path)
    return plan, versions


def load_plan_with_fingerprints(path: str, require_versions: bool = True
                                ) -> tuple[Plan, dict[ObjectRef, str], dict[ObjectRef, str]]:
    """A plan file written by `plan --out` -> the Plan's decisions and the resourceVersions they need.

    `require_versions=False` (a multi-cluster apply, planner.cluster.dispatch) also takes a
    plan without them, as `what-if --cluster` writes it: each write then checks its object's
    own state (suspended, not dispatched elsewhere) instead."""
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
    if raw_versions is None and not require_versions:
        raw_versions = {}
    if not isinstance(raw_versions, dict):
        raise InputError("has no snapshot.resourceVersions: save plans to apply with `stowplan plan --out FILE`",
                         file=path, field="snapshot.resourceVersions")
    try:
        versions = {_ref_of(key): str(value) for key, value in raw_versions.items()}
        raw_prints = (data.get("snapshot") or {}).get("fingerprints") or {}
        prints = {_ref_of(key): str(value) for key, value in raw_prints.items()}
        admissions = tuple(Admission(_ref(a["workload"]), str(a["clusterQueue"]), tuple(decode_entries(a["podSets"], "admissions[].podSets")),
                                     cluster=None if a.get("cluster") is None else str(a["cluster"]))
                           for a in data.get("admissions") or ())
        evictions = tuple(Eviction(_ref(e["workload"]), str(e["reason"]), tuple(_ref(r) for r in e.get("for") or ()),
                                   float(e.get("cost") or 0.0),
                                   requeue_count=None if e.get("requeueCount") is None else int(e["requeueCount"]),
                                   requeue_at=None if e.get("requeueAt") is None else _epoch(str(e["requeueAt"])),
                                   message=str(e.get("message") or ""))
                          for e in data.get("evictions") or ())
        migrations = tuple(Migration(_ref(m["workload"]), str(m["clusterQueue"]), tuple(decode_entries(m["from"], "migrations[].from")),
                                     tuple(decode_entries(m["to"], "migrations[].to")),
                                     tuple(Domain(tuple(map(str, d["levels"])), tuple(map(str, d["values"])))
                                           for d in m.get("frees") or ()),
                                     tuple(_ref(r) for r in m.get("for") or ()), float(m.get("cost") or 0.0))
                           for m in data.get("migrations") or ())
        resizes = tuple(Resize(_ref(r["workload"]), str(r["clusterQueue"]), str(r["podSet"]), int(r["from"]),
                               int(r["to"]), decode_entries([r["slice"]], "resizes[].slice")[0] if r.get("slice") else None,
                               tuple((str(x["node"]), int(x["count"])) for x in r.get("release") or ()),
                               str(r.get("reason") or ""), tuple(_ref(f) for f in r.get("for") or ()),
                               float(r.get("cost") or 0.0))
                        for r in data.get("resizes") or ())
        snapshot = data.get("snapshot") or {}
        solver = data.get("solver") or {}
        plan = Plan(str(snapshot.get("source", path)), str(snapshot.get("digest", "")),
                    int(snapshot.get("objects") or 0),
                    SolverReport(str(solver.get("method", "")), str(solver.get("status", "")),
                                 float(solver.get("objective") or 0), float(solver.get("bound") or 0),
                                 float(solver.get("gap") or 0)),
                    admissions, evictions, migrations=migrations, resizes=resizes,
                    provisioning=None if data.get("provisioning") is None else section_from_dict(data["provisioning"]))
    except Bad as bad:
        raise InputError(f"malformed plan: {bad.message}", file=path, field=bad.field) from None
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as err:
        raise InputError(f"malformed plan: {type(err).__name__}: {err}", file=path) from None
    missing = [str(ref) for ref in touched(plan) if ref not in versions]
    if missing and (require_versions or versions):
        raise InputError(f"snapshot.resourceVersions lacks {', '.join(missing)}", file=path,
                         field="snapshot.resourceVersions")
    return plan, versions, prints


def section_from_dict(data: Mapping[str, Any]) -> ProvisioningSection:
    """The plan's `provisioning` section read back (planner.output.document.provisioning_to_dict's shape);
    KeyError, TypeError or ValueError when malformed."""
    from planner.k8s.quantity import QuantityError, parse_quantity

    def amount(resource: str, value: object) -> int:
        try:
            return parse_quantity(value, resource)
        except QuantityError as err:
            raise ValueError(str(err)) from None

    requests = tuple(
        WantedRequest(str(r["namespace"]), str(r["name"]), _ref(r["workload"]), str(r["admissionCheck"]),
                      str(r["provisioningClassName"]), {str(k): str(v) for k, v in (r.get("parameters") or {}).items()},
                      tuple(RequestPodSet(str(p["name"]), str(p["podTemplate"]), int(p["count"]),
                                          {str(k): amount(str(k), v) for k, v in (p.get("requests") or {}).items()},
                                          {str(k): str(v) for k, v in (p.get("nodeSelector") or {}).items()},
                                          tuple(Toleration(str(t.get("key", "")), str(t.get("operator", "Equal")),
                                                           str(t.get("value", "")), str(t.get("effect", "")))
                                                for t in p.get("tolerations") or ()))
                            for p in r.get("podSets") or ()),
                      attempt=int(r.get("attempt") or 1), create=r.get("action") == "create",
                      nodes={str(k): int(v) for k, v in (r.get("nodes") or {}).items()})
        for r in data.get("requests") or ())
    deletions = tuple(DeletedRequest(str(d["namespace"]), str(d["name"]), _ref(d["workload"]), str(d.get("reason", "")),
                                     tuple(str(t) for t in d.get("podTemplates") or ()))
                      for d in data.get("deletions") or ())
    return ProvisioningSection(requests, deletions, tuple(str(n) for n in data.get("notes") or ()))


def _ref(d: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(str(d["kind"]), str(d.get("namespace") or ""), str(d["name"]))


def _ref_of(key: str) -> ObjectRef:
    kind, namespace, name = key.split("/", 2)
    return ObjectRef(kind, namespace, name)


def _epoch(text: str) -> float:
    """An RFC 3339 time of the plan (requeueAt) -> epoch seconds (ValueError if malformed)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
