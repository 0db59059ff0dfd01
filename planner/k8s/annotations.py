"""The wire contract: every label and annotation key Stowplan reads or writes on
Kubernetes objects, and the one codec of its assignment annotation.

Kueue's keys are Kueue's (REFERENCE §2); Stowplan's own (`stowplan.io/*`) are what a
cycle leaves on an object so that the next cycle, or a person, can read it back. No
other module spells a key (tests/test_layers.py checks): a new key is added here.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from models import HOSTNAME_LABEL, PodSet, PodSetAssignment
from planner.k8s.fields import Bad, json_value

# ------------------------------------------------------------------ Kueue's keys

KUEUE_PREFIX = "kueue.x-k8s.io/"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_GATE = "kueue.x-k8s.io/admission"                 # the scheduling gate Kueue's webhook adds
# Elastic Jobs (Kueue's ElasticJobs via workload slices): resizable while running.
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
# Topology-aware scheduling, per pod template
PODSET_PREFIX = "kueue.x-k8s.io/podset-"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
PODSET_LABEL = "kueue.x-k8s.io/podset"                  # a pod's pod set
# Plain pods and pod groups
POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
# MultiKueue: a worker's copy names the manager's object it came from
MULTIKUEUE_ORIGIN = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_ORIGIN_UID = "kueue.x-k8s.io/multikueue-origin-uid"

# ------------------------------------------------------------------ Stowplan's keys

STOWPLAN_PREFIX = "stowplan.io/"

# Admission, as the plan decided it
ASSIGNMENT = "stowplan.io/assignment"                   # the plan's podSets entries, JSON (codec below)
ADMITTED_AT = "stowplan.io/admitted-at"
TOPOLOGY_GATE = "stowplan.io/topology"                  # scheduling gate held until the pins are written
ORIGINAL_SCHEDULING = "stowplan.io/original-scheduling"  # the templates' own scheduling fields, before any admission
GROUP_ASSIGNMENTS = "stowplan.io/group-assignments"     # on a LeaderWorkerSet: group index -> {podSets, admittedAt}
ROLE = "stowplan.io/role"                               # on each template (so each pod): its pod set
MANAGED_BY = "stowplan.io/planner"                      # a TrainJob's runtime managed by Stowplan
# Eviction, requeueing and moves
EVICTED_AT = "stowplan.io/evicted-at"
EVICTION_REASON = "stowplan.io/eviction-reason"
CHECKPOINTED_AT = "stowplan.io/checkpointed-at"
MIGRATING_TO = "stowplan.io/migrating-to"               # a Job being moved: its new place, held
REQUEUE_COUNT = "stowplan.io/requeue-count"
REQUEUE_AT = "stowplan.io/requeue-at"
DEACTIVATED = "stowplan.io/deactivated"
# waitForPodsReady's record on the object (Kueue keeps it in the Workload's status)
PODS_READY_AT = "stowplan.io/pods-ready-at"
PODS_NOT_READY_AT = "stowplan.io/pods-not-ready-at"
# The most pods an elastic Job may grow to, kept by `apply` when it first writes
# spec.parallelism (until then, spec.parallelism is that most).
MAX_PARALLELISM = "stowplan.io/max-parallelism"
# What a user sets on a workload
PREEMPTION_COST = "stowplan.io/preemption-cost"
NON_PREEMPTIBLE = "stowplan.io/non-preemptible"
MOVABLE = "stowplan.io/movable"
# MultiKueue dispatch, on the manager's object
DISPATCHING_TO = "stowplan.io/dispatching-to"
DISPATCHED_TO = "stowplan.io/dispatched-to"
DISPATCHED_AT = "stowplan.io/dispatched-at"
WORKER_STATUS = "stowplan.io/worker-status"
# ProvisioningRequests Stowplan creates
PROVISIONING_MANAGED = "stowplan.io/managed"
PROVISIONING_CHECK = "stowplan.io/admission-check"
PROVISIONING_WORKLOAD = "stowplan.io/workload"          # KIND/NAMESPACE/NAME of the workload it is for
PROVISIONING_ATTEMPT = "stowplan.io/provisioning-attempt"
PROVISIONING_REQUEST = "stowplan.io/provisioning-request"  # on a PodTemplate: the request it belongs to
# Snapshots
SNAPSHOT_TIME = "stowplan.io/snapshot-time"
SNAPSHOT_SOURCE = "stowplan.io/source"
GENERATOR = "stowplan.io/generator"


# ------------------------------------------------------------------ the assignment codec

def encode_assignment(pod_sets: Iterable[PodSetAssignment]) -> str:
    """The assignment annotation's text: the plan's podSets entries, exactly, compact."""
    return json.dumps([assignment_entry(ps) for ps in pod_sets], separators=(",", ":"))


def assignment_entry(pod_set: PodSetAssignment) -> dict[str, Any]:
    """One `podSets` entry of a plan; also the item shape of the assignment annotation."""
    return {
        "name": pod_set.name,
        "count": int(pod_set.count),
        "flavors": {resource: pod_set.flavors[resource] for resource in sorted(pod_set.flavors)},
        "topologyAssignment": {
            "levels": list(pod_set.levels),
            "domains": [{"values": list(values), "count": int(count)} for values, count in pod_set.domains],
        },
    }


def decode_assignment(text: str, pod_sets: tuple[PodSet, ...] | None = None,
                      key: str = ASSIGNMENT) -> tuple[PodSetAssignment, ...]:
    """The assignment annotation (or `key`, of the same form); `Bad` naming the annotation.

    With the object's `pod_sets` (the snapshot reader): one entry per pod set, each within
    its count, sorted by name. Without (apply reading back what it wrote): as written."""
    field = f"metadata.annotations[{key}]"
    entries = json_value(text, field, "a JSON list of podSets entries")
    if type(entries) is not list:
        raise Bad(field, "must be a JSON list of podSets entries")
    if pod_sets is None:
        return tuple(decode_entries(entries, field))
    by_name = {ps.name: ps for ps in pod_sets}
    out = {ps.name: ps for ps in decode_entries(entries, field, by_name)}
    missing = [n for n in by_name if n not in out]
    if missing:
        raise Bad(field, f"has no entry for pod set(s) {', '.join(missing)}")
    return tuple(out[n] for n in sorted(out))


def decode_entries(entries: Any, field: str = "podSets", pod_sets: dict[str, PodSet] | None = None) -> list[PodSetAssignment]:
    """podSets entries (a plan's, or the annotation's once JSON-decoded) -> PodSetAssignments,
    in their order; `Bad(field, ...)` on the first wrong one. With `pod_sets`, each entry
    must name one of them, once, within its count; its domains are put in order."""
    if type(entries) is not list:
        raise Bad(field, "must be a list of podSets entries")
    out: list[PodSetAssignment] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"entry {i + 1}"
        if type(entry) is not dict:
            raise Bad(field, f"{where} must be an object")
        name = entry.get("name")
        if pod_sets is not None and (type(name) is not str or name not in pod_sets):
            raise Bad(field, f"{where}: pod set {name!r} is not one of {sorted(pod_sets)}")
        if type(name) is not str:
            raise Bad(field, f"{where}: name must be a string")
        if name in seen:
            raise Bad(field, f"{where}: pod set {name!r} appears twice")
        seen.add(name)
        most = pod_sets[name].count if pod_sets is not None else None
        count = entry.get("count")
        if type(count) is not int or count < 1 or (most is not None and count > most):
            raise Bad(field, f"{where}: count must be an integer from 1 to {most if most is not None else 'N'}, "
                             f"got {count!r}")
        flavors = entry.get("flavors") or {}
        if type(flavors) is not dict or any(type(k) is not str or type(v) is not str for k, v in flavors.items()):
            raise Bad(field, f"{where}: flavors must map resource names to flavor names")
        levels, domains = _topology(entry.get("topologyAssignment"), field, where, count)
        if pod_sets is not None:
            domains.sort()
        out.append(PodSetAssignment(name, count, flavors, tuple(levels), tuple(domains)))
    return out


def _topology(ta: Any, field: str, where: str, count: int) -> tuple[list[str], list[tuple[tuple[str, ...], int]]]:
    """An entry's topologyAssignment: levels ending at the node, domains whose counts add up."""
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
    return levels, domains
