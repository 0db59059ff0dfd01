"""Jobs and JobSets -> the parts of a models.Workload that one object determines.

Pod sets (count, effective request, node selector, tolerations, Kueue's TAS
annotations), Stowplan's own annotations (assignment, admitted-at, ...). Field
errors raise `Bad`; the reader decides what they block.
"""

from __future__ import annotations

from typing import Any

from models import HOSTNAME_LABEL, PodSet, PodSetAssignment, SliceLayer, TopologyRequest
from planner.k8s.fields import Bad, decimal, integer, json_value, mapping, required, sequence, string, string_map, tolerations
from planner.k8s.requests import effective_request_dict, resources
from planner.k8s.annotations import (
    ADMITTED_AT, ASSIGNMENT, CHECKPOINTED_AT, DEACTIVATED, ELASTIC_JOB, EVICTED_AT, EVICTION_REASON, GROUP,
    MAX_PARALLELISM, MIGRATING_TO, MIN_PARALLELISM, MOVABLE, NON_PREEMPTIBLE, PODSET_PREFIX, PODS_NOT_READY_AT,
    PODS_READY_AT, PREEMPTION_COST, PREFERRED, PRIORITY_LABEL, QUEUE_LABEL, REQUEUE_AT, REQUEUE_COUNT, REQUIRED,
    SLICE_CONSTRAINTS, SLICE_SIZE, SLICE_TOPOLOGY, UNCONSTRAINED,
)

MAX_SLICE_LAYERS = 3

NO_TOPOLOGY = TopologyRequest()
JOB_POD_SET = "main"   # Kueue's name for a batch/v1 Job's only pod set


def _annotation(field: str, key: str) -> str:
    return f"{field}.metadata.annotations[{key}]"


def _positive_int_text(value: str, field: str) -> int:
    return decimal(value, field, minimum=1)


def topology_request(annotations: dict[str, str], field: str) -> TopologyRequest:
    """Kueue's TAS pod-template annotations, validated as Kueue's webhook does.

    Level names are kept as written: whether a topology has them is decided later.
    """
    if not any(key.startswith(PODSET_PREFIX) for key in annotations):
        return NO_TOPOLOGY
    modes = [(mode, annotations[key]) for mode, key in
             (("required", REQUIRED), ("preferred", PREFERRED), ("unconstrained", UNCONSTRAINED))
             if key in annotations]
    if len(modes) > 1:
        keys = ", ".join(k for k in (REQUIRED, PREFERRED, UNCONSTRAINED) if k in annotations)
        raise Bad(f"{field}.metadata.annotations", f"set at most one of {keys}")
    mode: str | None = None
    level: str | None = None
    if modes:
        mode, value = modes[0]
        if mode == "unconstrained":
            if value not in ("true", "false"):
                raise Bad(_annotation(field, UNCONSTRAINED), f"must be \"true\" or \"false\", got {value!r}")
            mode = "unconstrained" if value == "true" else None
        else:
            if not value.strip():
                raise Bad(_annotation(field, REQUIRED if mode == "required" else PREFERRED), "names no level")
            level = value
    slices: tuple[SliceLayer, ...] = ()
    if SLICE_CONSTRAINTS in annotations:
        if SLICE_TOPOLOGY in annotations or SLICE_SIZE in annotations:
            raise Bad(_annotation(field, SLICE_CONSTRAINTS),
                      f"cannot be combined with {SLICE_TOPOLOGY} / {SLICE_SIZE}")
        slices = _slice_constraints(annotations[SLICE_CONSTRAINTS], _annotation(field, SLICE_CONSTRAINTS))
    elif SLICE_TOPOLOGY in annotations:
        if SLICE_SIZE not in annotations:
            raise Bad(_annotation(field, SLICE_SIZE), f"is required with {SLICE_TOPOLOGY}")
        size = _positive_int_text(annotations[SLICE_SIZE], _annotation(field, SLICE_SIZE))
        slice_level = annotations[SLICE_TOPOLOGY]
        if not slice_level.strip():
            raise Bad(_annotation(field, SLICE_TOPOLOGY), "names no level")
        slices = (SliceLayer(slice_level, size),)
    elif SLICE_SIZE in annotations:
        raise Bad(_annotation(field, SLICE_SIZE), f"needs {SLICE_TOPOLOGY} (the level each slice must fit in)")
    group = annotations.get(GROUP) or None
    return TopologyRequest(mode=mode, level=level, slices=slices, group=group)


def _slice_constraints(text: str, field: str) -> tuple[SliceLayer, ...]:
    layers = json_value(text, field, '[{"topology": LEVEL, "size": N}, ...]')
    if type(layers) is not list or not 1 <= len(layers) <= MAX_SLICE_LAYERS:
        raise Bad(field, f"must be a JSON list of 1 to {MAX_SLICE_LAYERS} {{topology, size}} layers, outer to inner")
    out = []
    for i, layer in enumerate(layers):
        if type(layer) is not dict or set(layer) != {"topology", "size"}:
            raise Bad(field, f"layer {i + 1} must be an object with exactly the keys topology and size")
        if type(layer["topology"]) is not str or not layer["topology"]:
            raise Bad(field, f"layer {i + 1}: topology must be a level name")
        if type(layer["size"]) is not int or layer["size"] < 1:
            raise Bad(field, f"layer {i + 1}: size must be a positive integer, got {layer['size']!r}")
        out.append(SliceLayer(layer["topology"], layer["size"]))
    return tuple(out)


def pod_template(template: dict[str, Any], field: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(template metadata, pod spec, template annotations)."""
    metadata = mapping(template.get("metadata"), f"{field}.metadata")
    spec = mapping(template.get("spec"), f"{field}.spec")
    annotations = string_map(metadata.get("annotations"), f"{field}.metadata.annotations")
    return metadata, spec, annotations


def build_pod_set(name: str, count: int, template: dict[str, Any], field: str,
                  min_count: int | None = None) -> PodSet:
    """One pod set from a pod template at `field` (e.g. spec.template)."""
    _, spec, annotations = pod_template(template, field)
    request = effective_request_dict(spec, f"{field}.spec")
    return PodSet(
        name=name,
        count=count,
        request=resources(request),
        min_count=min_count,
        node_selector=string_map(spec.get("nodeSelector"), f"{field}.spec.nodeSelector"),
        tolerations=tolerations(spec.get("tolerations"), f"{field}.spec.tolerations"),
        topology=topology_request(annotations, field),
    )


def job_count(spec: dict[str, Any], field: str) -> int:
    """Kueue's pod count of a Job: parallelism (default 1), capped by completions."""
    parallelism = integer(spec.get("parallelism"), f"{field}.parallelism", default=1, minimum=0)
    completions = integer(spec.get("completions"), f"{field}.completions", minimum=0)
    count = parallelism if completions is None else min(parallelism, completions)
    if count < 1:
        raise Bad(f"{field}.parallelism", "the Job asks for no pods (parallelism or completions is 0)")
    return count


def max_parallelism(annotations: dict[str, str], completions: object) -> int | None:
    """stowplan.io/max-parallelism of an elastic Job (None: absent), capped by completions."""
    if MAX_PARALLELISM not in annotations:
        return None
    value = _positive_int_text(annotations[MAX_PARALLELISM], f"metadata.annotations[{MAX_PARALLELISM}]")
    return min(value, completions) if type(completions) is int and completions > 0 else value


def min_parallelism(annotations: dict[str, str], count: int) -> int | None:
    """job-min-parallelism: 1 <= N <= count; N == count means "no partial admission"."""
    if MIN_PARALLELISM not in annotations:
        return None
    field = f"metadata.annotations[{MIN_PARALLELISM}]"
    value = _positive_int_text(annotations[MIN_PARALLELISM], field)
    if value > count:
        raise Bad(field, f"{value} is more than the Job's pod count {count}")
    return None if value == count else value


def jobset_pod_sets(spec: dict[str, Any]) -> list[tuple[str, int, dict[str, Any], str]]:
    """(name, count, pod template, field) per replicated job, as Kueue counts them:
    replicas x min(parallelism, completions), parallelism defaulting to 1."""
    out = []
    names: set[str] = set()
    items = sequence(spec.get("replicatedJobs"), "spec.replicatedJobs")
    if not items:
        raise Bad("spec.replicatedJobs", "must list at least one replicated job")
    for i, item in enumerate(items):
        where = f"spec.replicatedJobs[{i}]"
        rjob = mapping(item, where)
        name = required(rjob.get("name"), f"{where}.name")
        if name in names:
            raise Bad(f"{where}.name", f"{name!r} appears twice")
        names.add(name)
        replicas = integer(rjob.get("replicas"), f"{where}.replicas", default=1, minimum=1)
        job_spec = mapping(mapping(rjob.get("template"), f"{where}.template").get("spec"), f"{where}.template.spec")
        per_replica = job_count(job_spec, f"{where}.template.spec")   # Kueue: min(parallelism, completions)
        template = mapping(job_spec.get("template"), f"{where}.template.spec.template")
        assert replicas is not None   # defaulted
        out.append((name, replicas * per_replica, template, f"{where}.template.spec.template"))
    return out
