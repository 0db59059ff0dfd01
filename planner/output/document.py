"""Plan -> bytes for machines (YAML, JSON) and people (a table).

An edge module: it may import yaml and json, and it never decides anything. Every
format starts from `plan_to_dict`, whose key order is REFERENCE section 4's, so the
same Plan always gives the same bytes. Floats are rounded for display (6 decimals,
seconds 3); non-finite numbers (an unknown bound) become null. The table is for a
terminal: every text in it that came from input is escaped (planner.base.terminal).
"""

from __future__ import annotations

import json
import math
import numbers
import re
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import yaml

from models import Admission, Eviction, Migration, ObjectRef, PendingEntry, Plan, PodSetAssignment, Resize, Snapshot, SolverReport
from models.objects import Toleration
from models.provisioning import ProvisioningSection, WantedRequest, quantity_text
from planner.output import table
from planner.describe import explain as why
from planner.k8s.annotations import assignment_entry
from planner.base.terminal import printable

API_VERSION = "stowplan.io/v1alpha1"
KIND = "Plan"
FORMATS = ("table", "wide", "yaml", "json")
TABLES = ("table", "wide")
SECONDS_KEYS = ("read", "build", "solve", "verify", "total")

_DIGITS = 6
_SECONDS_DIGITS = 3


# ---------------------------------------------------------------- plain data

def _number(value: float, digits: int = _DIGITS) -> float | None:
    """A float fit for printing: rounded, never -0.0, None when not finite."""
    value = float(value)
    if not math.isfinite(value):
        return None
    return round(value, digits) + 0.0


def _plain(value: Any) -> Any:
    """Summary and stage values as YAML/JSON-safe data, keeping mapping order."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _number(float(value))
    if isinstance(value, ObjectRef):
        return ref_to_dict(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_plain(v) for v in items]
    return str(value)


def ref_to_dict(ref: ObjectRef) -> dict[str, str]:
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def _solver_to_dict(solver: SolverReport) -> dict[str, Any]:
    seconds = {key: _number(solver.seconds.get(key, 0.0), _SECONDS_DIGITS) for key in SECONDS_KEYS}
    # Extra timings a pipeline may add (greedy, decode, ...) follow the five documented ones.
    for key in sorted(k for k in solver.seconds if k not in SECONDS_KEYS):
        seconds[key] = _number(solver.seconds[key], _SECONDS_DIGITS)
    out: dict[str, Any] = {
        "method": solver.method,
        "status": solver.status,
        "objective": _number(solver.objective),
        "bound": _number(solver.bound),
        "gap": _number(solver.gap),
        "seconds": seconds,
    }
    if solver.peak_rss_mib is not None:
        out["peak_rss_mib"] = _number(solver.peak_rss_mib, 1)
    if solver.message:
        out["message"] = solver.message
    if solver.stages:
        out["stages"] = [_plain(stage) for stage in solver.stages]
    if solver.model:
        out["model"] = dict(solver.model)
    return out


def _admission_to_dict(admission: Admission) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": ref_to_dict(admission.workload),
        "clusterQueue": admission.cluster_queue,
        "podSets": [assignment_entry(ps) for ps in admission.pod_sets],
        # written only when planned across clusters, so one-cluster plans stay as they were
        **({"cluster": admission.cluster} if admission.cluster is not None else {}),
    }
    return out


def _eviction_to_dict(eviction: Eviction) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": ref_to_dict(eviction.workload),
        "reason": eviction.reason,
        "for": [ref_to_dict(ref) for ref in eviction.for_],
        "cost": _number(eviction.cost),
    }
    # waitForPodsReady's evictions (planner.cycle.podsready): the requeue they record, and why
    if eviction.requeue_count is not None:
        out["requeueCount"] = eviction.requeue_count
    if eviction.requeue_at is not None:
        out["requeueAt"] = rfc3339(eviction.requeue_at)
    if eviction.message:
        out["message"] = eviction.message
    return out


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _migration_to_dict(migration: Migration) -> dict[str, Any]:
    return {
        "workload": ref_to_dict(migration.workload),
        "clusterQueue": migration.cluster_queue,
        "from": [assignment_entry(ps) for ps in migration.from_],
        "to": [assignment_entry(ps) for ps in migration.to],
        "frees": [{"levels": list(d.levels), "values": list(d.values)} for d in migration.frees],
        "for": [ref_to_dict(ref) for ref in migration.for_],
        "cost": _number(migration.cost),
    }


def _resize_to_dict(resize: Resize) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": ref_to_dict(resize.workload),
        "clusterQueue": resize.cluster_queue,
        "podSet": resize.pod_set,
        "from": resize.from_count,
        "to": resize.to_count,
    }
    if resize.slice is not None:
        out["slice"] = assignment_entry(resize.slice)
    if resize.release:
        out["release"] = [{"node": node, "count": count} for node, count in resize.release]
        out["reason"] = resize.reason
        out["for"] = [ref_to_dict(ref) for ref in resize.for_]
        out["cost"] = _number(resize.cost)
    return out


def _pending_to_dict(entry: PendingEntry) -> dict[str, Any]:
    return {"workload": ref_to_dict(entry.workload), "reason": entry.reason}


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The plan as plain data in REFERENCE section 4's shape and key order; `migrations`
    (defragmentation) only when the plan moves a workload, `resizes` (elastic Jobs) only
    when it resizes one."""
    out = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "snapshot": {"source": plan.source, "digest": plan.digest, "objects": int(plan.object_count)},
        "solver": _solver_to_dict(plan.solver),
        "admissions": [_admission_to_dict(a) for a in plan.admissions],
        "evictions": [_eviction_to_dict(e) for e in plan.evictions],
    }
    if plan.migrations:
        out["migrations"] = [_migration_to_dict(m) for m in plan.migrations]
    if plan.resizes:
        out["resizes"] = [_resize_to_dict(r) for r in plan.resizes]
    out["pending"] = [_pending_to_dict(p) for p in plan.pending]
    if plan.provisioning is not None:
        out["provisioning"] = provisioning_to_dict(plan.provisioning)
    out["summary"] = _plain(plan.summary)
    return out


def _toleration_to_dict(t: Toleration) -> dict[str, str]:
    out = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
    return {k: v for k, v in out.items() if v}


def _request_to_dict(r: WantedRequest) -> dict[str, Any]:
    return {
        "namespace": r.namespace,
        "name": r.name,
        "workload": ref_to_dict(r.workload),
        "admissionCheck": r.check,
        "provisioningClassName": r.class_name,
        "parameters": dict(r.parameters),
        "attempt": r.attempt,
        "action": "create" if r.create else "keep",
        "nodes": dict(r.nodes),
        "podSets": [{"name": p.name, "podTemplate": p.pod_template, "count": p.count,
                     "requests": {k: quantity_text(k, v) for k, v in sorted(p.requests.items())},
                     "nodeSelector": dict(p.node_selector),
                     "tolerations": [_toleration_to_dict(t) for t in p.tolerations]}
                    for p in r.pod_sets],
    }


def provisioning_to_dict(section: ProvisioningSection) -> dict[str, Any]:
    """The plan's `provisioning` section (docs/output.md, docs/provisioning.md)."""
    return {
        "requests": [_request_to_dict(r) for r in section.requests],
        "deletions": [{"namespace": d.namespace, "name": d.name, "workload": ref_to_dict(d.workload),
                       "reason": d.reason, "podTemplates": list(d.pod_templates)} for d in section.deletions],
        "notes": list(section.notes),
    }


# ---------------------------------------------------------------- YAML and JSON

if TYPE_CHECKING:   # libyaml's CSafeDumper where present: the same interface, typed as SafeDumper
    _BaseDumper = yaml.SafeDumper
else:
    _BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _PlanDumper(_BaseDumper):
    """Block style, except leaves (a mapping of scalars or short lists, a list of scalars) in flow style."""


class _FlowMap(dict[str, Any]):
    pass


class _FlowList(list[Any]):
    pass


_PlanDumper.add_representer(
    _FlowMap, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True)
)
_PlanDumper.add_representer(
    _FlowList, lambda d, data: d.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)
)


# Characters a YAML or JSON writer leaves raw (they are "printable") that reorder or hide
# text on a screen: DEL and the C1 controls (0x9b is a terminal's CSI, as ESC [ is),
# bidirectional overrides and isolates, line and paragraph separators, the BOM. Written as \\uXXXX escapes: in JSON any string may hold one; in YAML the
# string is double-quoted first (where \\uXXXX is an escape), so the text reads back the same.
_HIDDEN = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]")
# A lone surrogate (from a file name the OS gave undecodable bytes) is no text at all:
# shown as its escape, so that the output can be written
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_hidden(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escaped(text: str) -> str:
    """JSON or YAML output with the hidden characters (and, in JSON, lone surrogates) escaped."""
    return _SURROGATE.sub(_escape_hidden, _HIDDEN.sub(_escape_hidden, text))


def _represent_str(dumper: Any, data: str) -> Any:
    if _SURROGATE.search(data):
        data = _SURROGATE.sub(_escape_hidden, data)
    style = '"' if _HIDDEN.search(data) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_PlanDumper.add_representer(str, _represent_str)


def _json(value: Any, **options: Any) -> str:
    return escaped(json.dumps(value, ensure_ascii=False, **options))


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _flowed(value: Any) -> Any:
    """Mark leaves for flow style: `{kind: Job, namespace: a, name: b}`, `[n1]`, `{values: [n1], count: 4}`."""
    if isinstance(value, dict):
        leaf = all(
            _is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v)) for v in value.values()
        )
        items = {k: _flowed(v) for k, v in value.items()}
        return _FlowMap(items) if leaf and value else items
    if isinstance(value, list):
        if value and all(_is_scalar(x) for x in value):
            return _FlowList(value)
        return [_flowed(v) for v in value]
    return value


def dump_yaml(data: Any) -> str:
    """Plan-shaped data as yaml: blocks, with leaves in flow style (the style of every plan file)."""
    return escaped(str(
        yaml.dump(
            _flowed(data),
            Dumper=_PlanDumper,
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=4096,
            indent=2,
        )
    ))


def to_yaml(plan: Plan) -> str:
    return dump_yaml(plan_to_dict(plan))


def to_json(plan: Plan) -> str:
    return _json(plan_to_dict(plan), indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------- table

def to_table(plan: Plan, snapshot: Snapshot | None = None, view: table.View = table.View(),
             before: Sequence[str] = ()) -> str:
    """For people: the headline, the workloads, the summary (planner.output.table)."""
    return table.render(plan, snapshot, view, list(before), summary=_plain(plan.summary))


def render_what_if(plan: Plan, fmt: str, answer: Mapping[str, Any], lines: Sequence[str],
                   snapshot: Snapshot | None = None, view: table.View = table.View()) -> str:
    """A capacity or drain what-if: the plan with the answer (`whatIf`) beside it; in a
    table, the answer's lines first."""
    if fmt in TABLES:
        return to_table(plan, snapshot, replace(view, wide=view.wide or fmt == "wide"), lines)
    data = {**plan_to_dict(plan), "whatIf": _plain(answer)}
    if fmt == "yaml":
        return dump_yaml(data)
    if fmt == "json":
        return _json(data, indent=2, allow_nan=False) + "\n"
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def render(plan: Plan, fmt: str, snapshot: Snapshot | None = None, view: table.View = table.View()) -> str:
    """The plan in one of FORMATS; a table (`table`, `wide`) reads `snapshot` for
    priorities, waits, queue positions and the running work."""
    if fmt == "yaml":
        return to_yaml(plan)
    if fmt == "json":
        return to_json(plan)
    if fmt in TABLES:
        return to_table(plan, snapshot, replace(view, wide=view.wide or fmt == "wide"))
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def explain_limits_help() -> str:
    """The `Limits of the search` block of explain's --help, from planner.why.LIMITS (kept as laid out: \\b)."""
    import textwrap

    lines = ["\b", "Limits of the search (counts of work, never time; where one cuts the search,",
             "the output says `stopped early: ...`, stoppedEarly in -o yaml|json):"]
    for name, value, meaning in why.LIMITS:
        lines += textwrap.wrap(f"{meaning}", 76, initial_indent=f"  {value:>5,}  {name}: ",
                               subsequent_indent="         ")
    lines += textwrap.wrap(f"So one workload's search takes at most {why.MAX_PLANS} times --search-time-limit "
                           "(and the work around each plan).", 78)
    return "\n".join(lines)


def render_explanation(explanation: "why.Explanation", fmt: str) -> str:
    """One workload's explanation (planner.describe.explain) in one of FORMATS."""
    if fmt == "yaml":
        return dump_yaml(why.as_dict(explanation))
    if fmt == "json":
        return _json(why.as_dict(explanation), indent=2, allow_nan=False) + "\n"
    return "\n".join(printable(line) for line in why.lines(explanation)) + "\n"


def render_explanations(explanations: "list[why.Explanation]", fmt: str) -> str:
    """`explain --all`: every waiting workload's explanation, as a list (yaml, json) or one
    block each (table)."""
    if fmt == "yaml":
        return dump_yaml({"explanations": [why.as_dict(e) for e in explanations]})
    if fmt == "json":
        return _json({"explanations": [why.as_dict(e) for e in explanations]}, indent=2,
                     allow_nan=False) + "\n"
    if not explanations:
        return "no workload waits in this plan\n"
    return "\n".join("\n".join(printable(line) for line in why.lines(e)) + "\n" for e in explanations)

