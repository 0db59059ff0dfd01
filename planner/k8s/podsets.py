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

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
ASSIGNMENT = "stowplan.io/assignment"
ADMITTED_AT = "stowplan.io/admitted-at"
CHECKPOINTED_AT = "stowplan.io/checkpointed-at"
EVICTED_AT = "stowplan.io/evicted-at"
PREEMPTION_COST = "stowplan.io/preemption-cost"
NON_PREEMPTIBLE = "stowplan.io/non-preemptible"
MOVABLE = "stowplan.io/movable"
# Elastic Jobs (Kueue's ElasticJobs via workload slices): resizable while running.
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
# The most pods an elastic Job may grow to, kept by `apply` when it first writes
# spec.parallelism (until then, spec.parallelism is that most).
MAX_PARALLELISM = "stowplan.io/max-parallelism"
# A Job being moved (defragmentation): suspended, its old pods leaving, its new place held.
MIGRATING_TO = "stowplan.io/migrating-to"
EVICTION_REASON = "stowplan.io/eviction-reason"
# waitForPodsReady's record on the object (Kueue keeps it in the Workload's status)
PODS_READY_AT = "stowplan.io/pods-ready-at"
PODS_NOT_READY_AT = "stowplan.io/pods-not-ready-at"
REQUEUE_COUNT = "stowplan.io/requeue-count"
REQUEUE_AT = "stowplan.io/requeue-at"
DEACTIVATED = "stowplan.io/deactivated"
MAX_SLICE_LAYERS = 3

NO_TOPOLOGY = TopologyRequest()
_PODSET_PREFIX = "kueue.x-k8s.io/podset-"
JOB_POD_SET = "main"   # Kueue's name for a batch/v1 Job's only pod set


def _annotation(field: str, key: str) -> str:
    return f"{field}.metadata.annotations[{key}]"


def _positive_int_text(value: str, field: str) -> int:
    return decimal(value, field, minimum=1)


def topology_request(annotations: dict[str, str], field: str) -> TopologyRequest:
    """Kueue's TAS pod-template annotations, validated as Kueue's webhook does.

    Level names are kept as written: whether a topology has them is decided later.
    """
    if not any(key.startswith(_PODSET_PREFIX) for key in annotations):
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


def parse_assignment(text: str, pod_sets: tuple[PodSet, ...], key: str = ASSIGNMENT) -> tuple[PodSetAssignment, ...]:
    """The stowplan.io/assignment annotation (or `key`, of the same form): the plan's
    podSets entries, one per pod set."""
    field = f"metadata.annotations[{key}]"
    entries = json_value(text, field, "a JSON list of podSets entries")
    if type(entries) is not list:
        raise Bad(field, "must be a JSON list of podSets entries")
    by_name = {ps.name: ps for ps in pod_sets}
    out: dict[str, PodSetAssignment] = {}
    for i, entry in enumerate(entries):
        where = f"entry {i + 1}"
        if type(entry) is not dict:
            raise Bad(field, f"{where} must be an object")
        name = entry.get("name")
        if name not in by_name:
            raise Bad(field, f"{where}: pod set {name!r} is not one of {sorted(by_name)}")
        if name in out:
            raise Bad(field, f"{where}: pod set {name!r} appears twice")
        count = entry.get("count")
        if type(count) is not int or count < 1 or count > by_name[name].count:
            raise Bad(field, f"{where}: count must be an integer from 1 to {by_name[name].count}, got {count!r}")
        flavors = entry.get("flavors", {})
        if type(flavors) is not dict or any(type(k) is not str or type(v) is not str for k, v in flavors.items()):
            raise Bad(field, f"{where}: flavors must map resource names to flavor names")
        ta = entry.get("topologyAssignment")
        if type(ta) is not dict:
            raise Bad(field, f"{where}: topologyAssignment (levels and domains) is required")
        levels = ta.get("levels")
        if type(levels) is not list or not levels or any(type(v) is not str for v in levels):
            raise Bad(field, f"{where}: topologyAssignment.levels must be a non-empty list of labels")
        if levels[-1] != HOSTNAME_LABEL:
            raise Bad(field, f"{where}: the last level must be {HOSTNAME_LABEL} (Stowplan names every pod's node), "
                             f"got {levels[-1]!r}")
        domains = []
        raw_domains = ta.get("domains")
        for j, domain in enumerate(raw_domains if type(raw_domains) is list else [None]):
            if (type(domain) is not dict or type(domain.get("values")) is not list
                    or len(domain["values"]) != len(levels) or any(type(v) is not str for v in domain["values"])
                    or type(domain.get("count")) is not int or domain["count"] < 1):
                raise Bad(field, f"{where}: domain {j + 1} must be {{values: [one per level], count: N >= 1}}")
            domains.append((tuple(domain["values"]), domain["count"]))
        if sum(c for _, c in domains) != count:
            raise Bad(field, f"{where}: domain counts add up to {sum(c for _, c in domains)}, not count {count}")
        domains.sort()
        out[name] = PodSetAssignment(name, count, flavors, tuple(levels), tuple(domains))
    missing = [n for n in by_name if n not in out]
    if missing:
        raise Bad(field, f"has no entry for pod set(s) {', '.join(missing)}")
    return tuple(out[n] for n in sorted(out))


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
