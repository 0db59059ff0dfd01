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
from typing import Any, NamedTuple

from planner.kinds.ray import Entry
from planner.snapshot.fields import Bad, mapping, sequence

GATE = "kueue.x-k8s.io/admission"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
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
    return member.annotations.get(ROLE_HASH) or role_hash(member.spec)


def total_count(annotations: dict[str, str], field: str) -> int:
    """The group's size from `kueue.x-k8s.io/pod-group-total-count` (a positive integer)."""
    text = annotations.get(TOTAL_COUNT)
    where = f"{field}.metadata.annotations[{TOTAL_COUNT}]"
    if text is None:
        raise Bad(where, "is required on every pod of a pod group")
    if not text.strip().isdigit() or int(text) < 1:
        raise Bad(where, f"must be a positive integer, got {text!r}")
    return int(text)


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
