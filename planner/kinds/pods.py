"""Plain Pods and pod groups -> the pod sets of Kueue v0.17's pod integration.

Kueue (pkg/controller/jobs/pod) manages a Pod that carries the queue-name label and
no managed owner. It is held back by the scheduling gate `kueue.x-k8s.io/admission`
(Kueue's webhook adds it at creation; without Kueue's webhook the user's manifest
carries it) and admitted by setting its node selector and removing the gate.

- A Pod without the label `kueue.x-k8s.io/pod-group-name` is a workload of one pod
  set `main` of one pod.
- Pods sharing that label (in one namespace) are one workload, the group. Every
  member carries the annotation `kueue.x-k8s.io/pod-group-total-count: "N"`, the same
  N; Kueue builds the workload only once N runnable pods (not Failed, not being
  deleted) exist, and waits before that. The pod sets are the group's roles: pods
  with the same `kueue.x-k8s.io/role-hash` annotation (which Kueue's webhook writes),
  else the same admission-relevant spec (requests and ports of every container,
  nodeSelector, affinity, tolerations, runtimeClassName, priority,
  topologySpreadConstraints, overhead, resourceClaims: Kueue's `SpecShape`), one pod
  set per role named by an 8-hex hash, at most 8 roles.

Pure: no I/O. Field errors raise `Bad` with the field's path.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, NamedTuple

from models import HOSTNAME_LABEL as HOSTNAME, ObjectRef, PodSet
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.kinds.ray import Entry
from planner.k8s.fields import Bad, decimal, mapping, sequence
from planner.k8s.podsets import build_pod_set
from planner.k8s.annotations import (
    KUEUE_GATE as GATE, POD_GROUP_NAME as GROUP_NAME_LABEL, POD_GROUP_TOTAL_COUNT as TOTAL_COUNT, QUEUE_LABEL, ROLE,
    ROLE_HASH,
)

SINGLE_POD_SET = "main"
MAX_ROLES = 8
SHAPE_FIELDS = ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priority",
                "topologySpreadConstraints", "overhead", "resourceClaims")


class Member(NamedTuple):
    """One pod of a group, as read: what the pod sets need of it."""

    name: str
    annotations: dict[str, str]
    spec: dict[str, Any]
    phase: str
    deleting: bool


def is_gated(spec: dict[str, Any]) -> bool:
    """The pod waits behind Kueue's admission gate."""
    gates = spec.get("schedulingGates")
    return type(gates) is list and any(type(g) is dict and g.get("name") == GATE for g in gates)


def runnable(member: Member) -> bool:
    """Kueue's isPodRunnableOrSucceeded: not Failed and not being deleted."""
    return member.phase != "Failed" and not member.deleting


def role_hash(spec: dict[str, Any]) -> str:
    """8 hex digits of what makes two pods interchangeable for admission (Kueue's SpecShape).

    Same idea as Kueue's GenerateRoleHash, not its bytes (Go's JSON of the typed
    spec): the annotation `kueue.x-k8s.io/role-hash`, when Kueue's webhook wrote it,
    wins over this."""
    def containers(key: str) -> list[dict[str, Any]]:
        out = []
        for c in sequence(spec.get(key), f"spec.{key}"):
            c = mapping(c, f"spec.{key}")
            out.append({"requests": mapping(c.get("resources"), "resources").get("requests"), "ports": c.get("ports")})
        return out
    shape: dict[str, Any] = {"initContainers": containers("initContainers"), "containers": containers("containers")}
    shape.update({key: spec.get(key) for key in SHAPE_FIELDS})
    text = json.dumps({"spec": shape}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def role_of(member: Member) -> str:
    """Stowplan's recorded role, else Kueue's role-hash annotation, else the spec's hash."""
    return member.annotations.get(ROLE) or member.annotations.get(ROLE_HASH) or role_hash(member.spec)


def total_count(annotations: dict[str, str], field: str) -> int:
    """The group's size from `kueue.x-k8s.io/pod-group-total-count` (a positive integer)."""
    text = annotations.get(TOTAL_COUNT)
    where = f"{field}.metadata.annotations[{TOTAL_COUNT}]"
    if text is None:
        raise Bad(where, "is required on every pod of a pod group")
    return decimal(text, where, minimum=1)


def member_field(name: str) -> str:
    return f"pods[{name}]"


def group_entries(members: list[Member]) -> tuple[list[Entry], int, int]:
    """(pod sets, runnable pods, total count) of a pod group; members sorted by name.

    Pod sets are built only from runnable pods, each role's template the first
    member of that role; the caller waits while runnable < total, as Kueue does."""
    members = sorted(members, key=lambda m: m.name)
    totals = {m.name: total_count(m.annotations, member_field(m.name)) for m in members if m.phase != "Failed"}
    if len(set(totals.values())) > 1:
        shown = ", ".join(f"{n}: {t}" for n, t in sorted(totals.items()))
        raise Bad(f"metadata.annotations[{TOTAL_COUNT}]", f"differs between the group's pods ({shown})")
    total = next(iter(totals.values()), 0)
    roles: dict[str, list[Member]] = {}
    for member in members:
        if runnable(member):
            roles.setdefault(role_of(member), []).append(member)
    if len(roles) > MAX_ROLES:
        raise Bad(f"metadata.annotations[{ROLE_HASH}]", f"the group's pods have {len(roles)} different roles; "
                                                        f"Kueue admits at most {MAX_ROLES}")
    active = sum(len(m) for m in roles.values())
    entries = [Entry(role, len(pods), {"metadata": {"annotations": pods[0].annotations}, "spec": pods[0].spec},
                     member_field(pods[0].name))
               for role, pods in sorted(roles.items())]
    return entries, active, total


# ---------------------------------------------------------------- workloads of pods

POD_KIND = "Pod"
GROUP_KIND = "PodGroup"   # Stowplan's name for a pod group's workload (Kueue's Workload is named after the group)


def workload_of(namespace: str, name: str, labels: dict[str, Any]) -> ObjectRef:
    """The workload a queued pod is part of: its group, else itself."""
    group = labels.get(GROUP_NAME_LABEL)
    return ObjectRef(GROUP_KIND, namespace, str(group)) if group else ObjectRef(POD_KIND, namespace, name)


def pod_set_of(ref: ObjectRef, annotations: dict[str, Any]) -> str:
    """The pod set of an admitted pod: `main` alone, else the role Stowplan wrote at admission
    (`stowplan.io/role`: a pod's spec changes when it is pinned, its role must not)."""
    if ref.kind == POD_KIND:
        return SINGLE_POD_SET
    return str(annotations.get(ROLE) or annotations.get(ROLE_HASH) or "")


def placement(pods: list[tuple[str, str | None, str]], assignment: dict[str, dict[str, int]]) -> dict[str, str]:
    """Pod name -> its node, for the pods still to place.

    `pods`: (name, node it is already on or pinned to, or None; its pod set), `assignment`:
    pod set -> planned pods per node. Pods already on a node keep it and use up that
    node's share; the others, by name, take the remaining places node by node (sorted).
    Pods beyond the plan's places are left out (not planned: they stay gated)."""
    left = {ps: dict(sorted(nodes.items())) for ps, nodes in assignment.items()}
    for _, node, ps in pods:
        if node is not None and ps in left and left[ps].get(node, 0) > 0:
            left[ps][node] -= 1
    out: dict[str, str] = {}
    for name, node, ps in sorted(pods):
        if node is not None or ps not in left:
            continue
        free = next((n for n, c in left[ps].items() if c > 0), None)
        if free is None:
            continue
        left[ps][free] -= 1
        out[name] = free
    return out


def admission_patch(pod: dict[str, Any], pin: str, tolerations: list[dict[str, str]],
                    annotations: dict[str, str]) -> list[dict[str, Any]]:
    """JSON patch admitting one gated pod: pin it to its node (nodeSelector
    kubernetes.io/hostname = `pin`, the node's label value, models.NodePins; the node
    implies the flavor's labels), add the flavor's
    tolerations and Stowplan's annotations, remove Kueue's admission gate. A pod may
    gain a node selector only while gated, so all of it is one patch, guarded by the
    resourceVersion read."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion",
                                  "value": meta.get("resourceVersion")}]
    if isinstance(spec.get("nodeSelector"), dict):
        ops.append({"op": "add", "path": f"/spec/nodeSelector/{_escape(HOSTNAME)}", "value": pin})
    else:
        ops.append({"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME: pin}})
    present = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
    new = [t for t in tolerations if t not in present]
    if new and "tolerations" in spec:
        ops += [{"op": "add", "path": "/spec/tolerations/-", "value": t} for t in new]
    elif new:
        ops.append({"op": "add", "path": "/spec/tolerations", "value": new})
    if isinstance(meta.get("annotations"), dict):
        ops += [{"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v}
                for k, v in sorted(annotations.items())]
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(sorted(annotations.items()))})
    gates = spec.get("schedulingGates") or []
    index = next(i for i, g in enumerate(gates) if isinstance(g, dict) and g.get("name") == GATE)
    ops.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
    return ops


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


# ---------------------------------------------------------------- the adapters

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"   # an LWS's pods: its groups are its workloads


def build(entry: Entry) -> PodSet:
    """The pod set of an entry; a single pod's fields are named from the pod (spec...)."""
    try:
        return build_pod_set(entry.name, entry.size, entry.template, entry.field)
    except Bad as bad:
        raise Bad(bad.field.lstrip("."), bad.message) from None


class PodAdapter(Adapter):
    """A queued Pod of its own. Not listed as a kind of its own (pods are always read):
    the reader finds these among the pods (planner.snapshot.reader.read_pod_workloads)."""

    group = ""
    version = "v1"
    kind = POD_KIND
    plural = "pods"
    builtin = True
    pod_selector = QUEUE_LABEL
    owner_label = QUEUE_LABEL

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        return []   # built from the pods themselves (group_entries)

    def read_suspended(self, obj: Mapping[str, Any]) -> bool:
        """Waiting while any of its pods is behind Kueue's admission gate (Kueue's IsSuspended)."""
        spec = obj.get("spec")
        return is_gated(spec) if isinstance(spec, dict) else True

    suspended = read_suspended

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        if not labels.get(QUEUE_LABEL) or labels.get(LWS_NAME_LABEL):
            return None
        ref = workload_of(namespace, str(metadata.get("name", "")), dict(labels))
        if ref.kind != self.kind:
            return None
        annotations = metadata.get("annotations")
        return ref, pod_set_of(ref, dict(annotations) if isinstance(annotations, dict) else {})

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {}


class PodGroupAdapter(PodAdapter):
    kind = GROUP_KIND


POD_ADAPTERS: tuple[PodAdapter, ...] = (PodAdapter(), PodGroupAdapter())
