"""A cluster's history -> a trace (docs/simulate.md): the finished Jobs of a snapshot.

`kubectl get jobs -A -o yaml` (or `stowplan snapshot`) lists finished Jobs beside the
running ones. Each batch/v1 Job queued through Kueue (`kueue.x-k8s.io/queue-name`) whose
status has a `startTime` and a `completionTime` becomes one trace line: submitted at its
creation, running for completionTime - startTime (Kubernetes resets startTime when a
Job is suspended again, so this is its last run: the work it needed), with its queue,
priority class, pod count, effective per-pod request and Kueue's topology annotations.
Jobs that failed, are still running or never started are left out and counted.

An edge module: it reads files. What it cannot use of one Job is a reason to skip it
(counted by reason); an unreadable file is an InputError, as for a snapshot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from planner.snapshot import loader
from planner.k8s.fields import Bad, timestamp
from planner.k8s.requests import effective_request_dict
from planner.k8s.annotations import MIN_PARALLELISM, PRIORITY_LABEL, QUEUE_LABEL
from planner.snapshot.trace import ANNOTATIONS, API_VERSION

_TOPOLOGY_KEY = {annotation: key for key, annotation in ANNOTATIONS.items()}


@dataclass
class History:
    """The trace's lines (header first) and why other queued Jobs were left out."""

    lines: list[dict[str, Any]]
    skipped: Counter[str] = field(default_factory=Counter)


def trace_from_history(sources: Sequence[str], since: float | None = None,
                       limits: loader.Limits = loader.DEFAULT_LIMITS) -> History:
    """Every finished, queued Job of `sources` created at or after `since` (default: the
    first such Job's creation), as trace lines submitted relative to that time."""
    loaded = loader.load(list(sources), limits)
    found: list[tuple[float, str, dict[str, Any]]] = []
    skipped: Counter[str] = Counter()
    for _, obj in loaded.objects:
        if obj.get("kind") != "Job" or not str(obj.get("apiVersion", "")).startswith("batch/"):
            continue
        meta = _map(obj.get("metadata"))
        labels = _map(meta.get("labels"))
        if not labels.get(QUEUE_LABEL):
            continue
        try:
            entry = _line(obj, meta, labels)
        except Bad as bad:
            skipped[f"{bad.field}: {bad.message}"] += 1
            continue
        if isinstance(entry, str):
            skipped[entry] += 1
            continue
        found.append(entry)
    start = since if since is not None else min((created for created, _, _ in found), default=0.0)
    lines: list[dict[str, Any]] = []
    last = start
    for created, _, line in sorted(found, key=lambda f: (f[0], f[1])):
        if created < start:
            skipped["created before --since"] += 1
            continue
        line["submit"] = round(created - start, 3)
        last = max(last, created)
        lines.append(line)
    header = {"apiVersion": API_VERSION, "kind": "Trace", "hours": round(max(last - start, 1.0) / 3600, 6),
              "generator": {"from": "history", "jobs": len(lines)}}
    return History([header, *lines], skipped)


def _map(value: Any) -> dict[str, Any]:
    return value if type(value) is dict else {}


def _line(obj: dict[str, Any], meta: dict[str, Any], labels: dict[str, Any]) -> tuple[float, str, dict[str, Any]] | str:
    status = _map(obj.get("status"))
    created = timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    started = timestamp(status.get("startTime"), "status.startTime")
    finished = timestamp(status.get("completionTime"), "status.completionTime")
    if created is None:
        return "no creationTimestamp"
    if started is None or finished is None:
        return "not finished (no startTime and completionTime)"
    if finished <= started:
        return "completionTime not after startTime"
    spec = _map(obj.get("spec"))
    template = _map(spec.get("template"))
    pod_spec = _map(template.get("spec"))
    request = effective_request_dict(pod_spec, "spec.template.spec")
    request.pop("pods", None)
    count = spec.get("parallelism", 1)
    if type(count) is not int or count < 1:
        return "spec.parallelism is not a positive whole number"
    pod_set: dict[str, Any] = {"name": "main", "count": count,
                               "requests": {r: (f"{v}m" if r == "cpu" else str(v)) for r, v in sorted(request.items())}}
    annotations = _map(meta.get("annotations"))
    if str(annotations.get(MIN_PARALLELISM, "")).isdigit() and 1 <= int(annotations[MIN_PARALLELISM]) <= count:
        pod_set["minCount"] = int(annotations[MIN_PARALLELISM])
    template_meta = _map(template.get("metadata"))
    template_annotations = _map(template_meta.get("annotations"))
    topology: dict[str, Any] = {}
    for annotation, key in _TOPOLOGY_KEY.items():
        value = template_annotations.get(annotation)
        if value is None:
            continue
        if key == "unconstrained":
            if str(value) == "true":
                topology[key] = True
        elif key == "sliceSize":
            if str(value).isdigit():
                topology[key] = int(value)
        else:
            topology[key] = str(value)
    if topology:
        pod_set["topology"] = topology
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace") or "default")
    line: dict[str, Any] = {"submit": 0.0, "namespace": namespace, "queue": str(labels[QUEUE_LABEL]), "name": name,
                            "kind": "Job"}
    if labels.get(PRIORITY_LABEL):
        line["priorityClass"] = str(labels[PRIORITY_LABEL])
    line["podSets"] = [pod_set]
    line["duration"] = round(finished - started, 3)
    return created, f"{namespace}/{name}", line
