"""Trace files (JSON lines, docs/simulate.md) -> models.Trace, read with their snapshot.

Each line is one job: checked here (a wrong line is an InputError naming the file, the
line and the field: exit 2), then turned into the batch/v1 Job or JobSet a user would
have submitted (suspended, labelled with its LocalQueue and priority class, its pod
templates annotated with Kueue's topology request) and read by the snapshot reader
together with the snapshot, so a trace job's queue, priority and requests mean exactly
what they mean in a snapshot (an unknown LocalQueue or priority class is a reported
problem and the job waits with that reason, as in Kueue).

This module is an edge: it reads a file. The simulator (planner/simulate) only sees
models.Trace.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

from models import ObjectRef, Snapshot
from models.trace import Arrival, Trace
from planner.base.errors import InputError
from planner.snapshot import loader
from planner.k8s.quantity import QuantityError, parse_quantity
from planner.k8s.annotations import MIN_PARALLELISM, PRIORITY_LABEL, QUEUE_LABEL, REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_TOPOLOGY, SLICE_SIZE, GROUP

API_VERSION = "stowplan.io/v1alpha1"
KINDS = ("Job", "JobSet")
MAX_SECONDS = 366 * 86400.0          # a submit time, duration or interval beyond a year is a mistake
MAX_PODS = 1_000_000
MAX_POD_SETS = 8
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_TOPOLOGY_KEYS = ("required", "preferred", "unconstrained", "sliceRequired", "sliceSize", "group")
_JOB_KEYS = ("submit", "namespace", "queue", "name", "kind", "priorityClass", "podSets", "duration",
             "checkpointInterval")
_POD_SET_KEYS = ("name", "count", "minCount", "requests", "topology")
ANNOTATIONS = {"required": REQUIRED, "preferred": PREFERRED, "unconstrained": UNCONSTRAINED,
               "sliceRequired": SLICE_TOPOLOGY, "sliceSize": SLICE_SIZE, "group": GROUP}


class _Bad(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


@dataclass(frozen=True)
class TraceLine:
    """One checked job line: its object, and what the simulator needs beside it."""

    line: int
    ref: ObjectRef
    obj: dict[str, Any]
    submit: float
    duration: float
    checkpoint_interval: float | None


def read_with_snapshot(trace_path: str, sources: Sequence[str], *, policy_file: str | None = None,
                       now: float | None = None, limits: loader.Limits = loader.DEFAULT_LIMITS
                       ) -> tuple[Snapshot, Trace]:
    """The snapshot (without the trace's jobs) and the trace (its jobs as pending Workloads)."""
    from planner.snapshot.reader import read_snapshot

    hours, lines = parse_trace(trace_path, loader.read_bytes(trace_path, limits.max_file_bytes))
    extra = [(f"{trace_path}:{t.line}", t.obj) for t in lines]
    snapshot = read_snapshot(list(sources), policy_file=policy_file, now=now, limits=limits, extra=extra)
    by_ref = {t.ref: t for t in lines}
    arrivals = []
    kept = []
    for w in snapshot.workloads:
        t = by_ref.get(w.ref)
        if t is None:
            kept.append(w)
            continue
        arrivals.append(Arrival(replace(w, created_at=snapshot.now + t.submit, queued_at=snapshot.now + t.submit),
                                t.submit, t.duration, t.checkpoint_interval, t.line))
    arrivals.sort(key=lambda a: (a.submit, a.line))
    return replace(snapshot, workloads=tuple(kept)), Trace(trace_path, tuple(arrivals), hours)


def parse_trace(path: str, data: bytes) -> tuple[float | None, list[TraceLine]]:
    """The header's hours (None without a header) and every job line, checked."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"is not UTF-8 text (byte {err.start})", file=path) from None
    hours: float | None = None
    lines: list[TraceLine] = []
    seen: dict[ObjectRef, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}: line {number}"
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as err:   # ValueError: also an integer of more than 4,300 digits
            message = err.msg if isinstance(err, json.JSONDecodeError) else \
                "nested too deeply" if isinstance(err, RecursionError) else str(err)[:120]
            raise InputError(f"is not JSON ({message})", file=where) from None
        try:
            if type(doc) is not dict:
                raise _Bad("", f"is not a JSON object but {type(doc).__name__}")
            if doc.get("kind") == "Trace":
                if lines or hours is not None:
                    raise _Bad("kind", "the Trace header must be the first line")
                hours = _header(doc)
                continue
            entry = _job(number, doc)
        except _Bad as bad:
            raise InputError(bad.message, file=where, field=bad.field) from None
        if entry.ref in seen:
            raise InputError(f"{entry.ref} is already on line {seen[entry.ref]}", file=where, field="name")
        seen[entry.ref] = number
        lines.append(entry)
    return hours, lines


def _header(doc: dict[str, Any]) -> float | None:
    _known(doc, ("apiVersion", "kind", "hours", "generator"), "")
    if doc.get("apiVersion") != API_VERSION:
        raise _Bad("apiVersion", f"must be {API_VERSION}")
    if "hours" not in doc:
        return None
    return _number(doc["hours"], "hours", low=0.0, high=MAX_SECONDS / 3600, open_low=True)


def _job(number: int, doc: dict[str, Any]) -> TraceLine:
    _known(doc, _JOB_KEYS, "")
    for key in ("submit", "namespace", "queue", "name", "podSets", "duration"):
        if key not in doc:
            raise _Bad(key, "is required")
    submit = _number(doc["submit"], "submit", low=0.0, high=MAX_SECONDS)
    duration = _number(doc["duration"], "duration", low=0.0, high=MAX_SECONDS, open_low=True)
    interval = None
    if doc.get("checkpointInterval") is not None:
        interval = _number(doc["checkpointInterval"], "checkpointInterval", low=0.0, high=MAX_SECONDS,
                           open_low=True)
    namespace, queue, name = (_name(doc[k], k) for k in ("namespace", "queue", "name"))
    kind = doc.get("kind", "Job")
    if kind not in KINDS:
        raise _Bad("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    priority = doc.get("priorityClass")
    if priority is not None:
        priority = _name(priority, "priorityClass")
    raw_sets = doc["podSets"]
    if type(raw_sets) is not list or not raw_sets or len(raw_sets) > MAX_POD_SETS:
        raise _Bad("podSets", f"must be a list of 1 to {MAX_POD_SETS} pod sets")
    if kind == "Job" and len(raw_sets) != 1:
        raise _Bad("podSets", "a Job has exactly one pod set")
    pod_sets = [_pod_set(ps, f"podSets[{i}]") for i, ps in enumerate(raw_sets)]
    names = [ps["name"] for ps in pod_sets]
    if len(set(names)) != len(names):
        raise _Bad("podSets", "pod set names must differ")
    labels = {QUEUE_LABEL: queue}
    if priority is not None:
        labels[PRIORITY_LABEL] = priority
    ref = ObjectRef(kind, namespace, name)
    obj = _job_object(kind, namespace, name, labels, pod_sets) if kind == "Job" else \
        _jobset_object(namespace, name, labels, pod_sets)
    return TraceLine(number, ref, obj, submit, duration, interval)


def _pod_set(raw: Any, where: str) -> dict[str, Any]:
    if type(raw) is not dict:
        raise _Bad(where, "must be an object")
    _known(raw, _POD_SET_KEYS, where)
    name = _name(raw.get("name", "main"), f"{where}.name")
    count = _integer(raw.get("count"), f"{where}.count", 1, MAX_PODS)
    min_count = None
    if raw.get("minCount") is not None:
        min_count = _integer(raw["minCount"], f"{where}.minCount", 1, count)
    requests = raw.get("requests")
    if type(requests) is not dict or not requests:
        raise _Bad(f"{where}.requests", "must be an object of resource: quantity")
    checked: dict[str, str] = {}
    for resource, value in sorted(requests.items()):
        field = f"{where}.requests[{resource}]"
        if type(value) not in (str, int, float) or isinstance(value, bool):
            raise _Bad(field, "must be a quantity (a string such as \"500m\" or \"64Gi\", or a number)")
        try:
            parse_quantity(value, resource)
        except QuantityError as err:
            raise _Bad(field, str(err)) from None
        checked[resource] = str(value)
    annotations: dict[str, str] = {}
    topology = raw.get("topology")
    if topology is not None:
        if type(topology) is not dict:
            raise _Bad(f"{where}.topology", "must be an object")
        _known(topology, _TOPOLOGY_KEYS, f"{where}.topology")
        modes = [k for k in ("required", "preferred", "unconstrained") if k in topology]
        if len(modes) > 1:
            raise _Bad(f"{where}.topology", f"give one of required, preferred, unconstrained, not {' and '.join(modes)}")
        for key, value in sorted(topology.items()):
            field = f"{where}.topology.{key}"
            if key == "unconstrained":
                if value is not True:
                    raise _Bad(field, "must be true")
                annotations[ANNOTATIONS[key]] = "true"
            elif key == "sliceSize":
                annotations[ANNOTATIONS[key]] = str(_integer(value, field, 1, count))
            else:
                if type(value) is not str or not value:
                    raise _Bad(field, "must be a node label (a topology level) or a group name")
                annotations[ANNOTATIONS[key]] = value
        if ("sliceRequired" in topology) != ("sliceSize" in topology):
            raise _Bad(f"{where}.topology", "sliceRequired and sliceSize go together")
    return {"name": name, "count": count, "min": min_count, "requests": checked, "annotations": annotations}


def _template(ps: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [{"name": ps["name"], "image": "trace",
                                                         "resources": {"requests": ps["requests"]}}],
                                         "restartPolicy": "Never"}}
    if ps["annotations"]:
        template["metadata"] = {"annotations": ps["annotations"]}
    return template


def _job_object(kind: str, namespace: str, name: str, labels: dict[str, str],
                pod_sets: list[dict[str, Any]]) -> dict[str, Any]:
    ps = pod_sets[0]
    annotations = {MIN_PARALLELISM: str(ps["min"])} if ps["min"] is not None else {}
    return {"apiVersion": "batch/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
            "spec": {"suspend": True, "parallelism": ps["count"], "completions": ps["count"],
                     "template": _template(ps)}}


def _jobset_object(namespace: str, name: str, labels: dict[str, str],
                   pod_sets: list[dict[str, Any]]) -> dict[str, Any]:
    if any(ps["min"] is not None for ps in pod_sets):
        raise _Bad("podSets", "minCount is for Jobs only (job-min-parallelism)")
    replicated = [{"name": ps["name"], "replicas": 1,
                   "template": {"spec": {"parallelism": ps["count"], "completions": ps["count"],
                                         "template": _template(ps)}}} for ps in pod_sets]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"suspend": True, "replicatedJobs": replicated}}


def _known(doc: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    for key in doc:
        if key not in keys:
            field = f"{where}.{key}" if where else str(key)
            raise _Bad(field, f"is not a trace field (known: {', '.join(keys)})")


def _number(value: Any, field: str, low: float, high: float, open_low: bool = False) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise _Bad(field, "must be a number")
    number = float(value)
    if number < low or (open_low and number == low) or number > high:
        shown = f"above {low:g}" if open_low else f"at least {low:g}"
        raise _Bad(field, f"{value!r} must be {shown} and at most {high:g}")
    return number


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise _Bad(field, f"must be a whole number from {low} to {high}")
    return value


def _name(value: Any, field: str) -> str:
    if type(value) is not str or not _DNS_LABEL.fullmatch(value):
        raise _Bad(field, f"{value!r} is not a Kubernetes name (lower-case letters, digits and -, at most 63)")
    return value
