"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) -> the workloads Kueue v0.17 builds for it.

Kueue's LWS integration (pkg/controller/jobs/leaderworkerset) never suspends the
LeaderWorkerSet: it creates one prebuilt Workload per group (replica index 0 ..
`replicas`-1, `replicas` defaulting to 1) and admits each group's pods through its
pod integration. A group's pod sets: with a `leaderTemplate`, `leader` (1 pod) and
`worker` (`size` - 1 pods, from `workerTemplate`); without one, `main` (`size` pods,
`size` defaulting to 1). Kueue labels a group's pods with the group's workload name
and a role (`kueue.x-k8s.io/role-hash`: leader, worker or main), so each group is a
pod group admitted and evicted on its own.

Stowplan keeps Kueue's unit, the group: group i of LeaderWorkerSet NAME is the
workload `LeaderWorkerSet/NAMESPACE/NAME-i` (Kueue's Workload is
leaderworkerset-NAME-i-HASH), planned, admitted and evicted on its own. The
LeaderWorkerSet has no suspend: its templates carry a scheduling gate
(`kueue.x-k8s.io/admission`, as Kueue's pod webhook would add it to each pod), so LWS
creates every group's pods gated. The groups Stowplan admitted are recorded in the
annotation `stowplan.io/group-assignments` (index -> the plan's podSets and the
admission time); a group not in it waits while the templates hold their pods, and runs
outside Stowplan otherwise. Admission writes each template's scheduling fields for the
union of the admitted groups' nodes, the role annotation `stowplan.io/role`, and the
group's entry; its pods are then pinned to their group's nodes and ungated as a Job's
are. Eviction drops the group's entry and deletes its pods (LWS makes them again,
gated), as Kueue evicts a serving pod group.

Pure: no I/O. Field errors raise `Bad` with the field's path.
"""

from __future__ import annotations

from typing import Any, Mapping

from models import ObjectRef
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.kinds.ray import Entry
from planner.k8s.fields import Bad, integer, is_decimal, json_value, mapping
from planner.k8s.annotations import GROUP_ASSIGNMENTS as GROUPS, ROLE, KUEUE_GATE, TOPOLOGY_GATE

LEADER = "leader"
WORKER = "worker"
MAIN = "main"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def groups(spec: dict[str, Any]) -> int:
    """How many groups (Kueue Workloads) the LeaderWorkerSet has: `replicas`, default 1."""
    count = integer(spec.get("replicas"), "spec.replicas", default=1, minimum=0)
    if count > MAX_GROUPS:   # each group is a workload of its own: 10^7 would exhaust memory first
        raise Bad("spec.replicas", f"{count:,} groups is more than {MAX_GROUPS:,} (each group is one workload)")
    return count


MAX_GROUPS = 10_000


def group_entries(spec: dict[str, Any]) -> list[Entry]:
    """The pod sets of one group, as Kueue's leaderworkerset.podSets builds them (0-pod sets dropped)."""
    lwt = mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    if not lwt:
        raise Bad("spec.leaderWorkerTemplate", "is required")
    size = integer(lwt.get("size"), "spec.leaderWorkerTemplate.size", default=1, minimum=1)
    worker = mapping(lwt.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
    worker_field = "spec.leaderWorkerTemplate.workerTemplate"
    if lwt.get("leaderTemplate") is None:
        return [Entry(MAIN, size, worker, worker_field)]
    leader = mapping(lwt["leaderTemplate"], "spec.leaderWorkerTemplate.leaderTemplate")
    out = [Entry(LEADER, 1, leader, "spec.leaderWorkerTemplate.leaderTemplate")]
    if size > 1:
        out.append(Entry(WORKER, size - 1, worker, worker_field))
    return out


def group_name(name: str, index: int) -> str:
    """The workload name of group `index` (Kueue's is leaderworkerset-NAME-INDEX-HASH)."""
    return f"{name}-{index}"


def role_of(pod_labels: dict[str, str], leader: bool) -> str:
    """The pod set of an LWS pod: worker-index 0 is the leader (when the LWS has a leader template)."""
    if not leader:
        return MAIN
    return LEADER if pod_labels.get(WORKER_INDEX_LABEL, "0") == "0" else WORKER


def template_paths(spec: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Pod set -> the key path of its template inside the LeaderWorkerSet."""
    lwt = mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    worker = ("spec", "leaderWorkerTemplate", "workerTemplate")
    if lwt.get("leaderTemplate") is None:
        return {MAIN: worker}
    return {LEADER: ("spec", "leaderWorkerTemplate", "leaderTemplate"), WORKER: worker}


# ---------------------------------------------------------------- the adapter

HOLD_GATES = (KUEUE_GATE, TOPOLOGY_GATE)


def group_ref(namespace: str, name: str, index: int) -> ObjectRef:
    return ObjectRef(KIND, namespace, group_name(name, index))


def split_ref(ref: ObjectRef) -> tuple[str, int]:
    """(LWS name, group index) of a group's workload."""
    name, _, index = ref.name.rpartition("-")
    return name, int(index)


def group_assignments(annotations: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The groups Stowplan admitted: index -> {"podSets": [...], "admittedAt": RFC 3339}."""
    text = annotations.get(GROUPS)
    if not text:
        return {}
    value = json_value(text, f"metadata.annotations[{GROUPS}]", "group indexes to {podSets, admittedAt}")
    if type(value) is not dict or any(type(v) is not dict for v in value.values()):
        raise Bad(f"metadata.annotations[{GROUPS}]", "must map group indexes to {podSets, admittedAt}")
    return value


def held(spec: Mapping[str, Any]) -> bool:
    """Are the LWS's pods held at creation (a gate in its worker template), so that a group
    waits until admitted? Without one its pods run as soon as LWS creates them."""
    lwt = spec.get("leaderWorkerTemplate")
    worker = lwt.get("workerTemplate") if isinstance(lwt, dict) else None
    pod_spec = worker.get("spec") if isinstance(worker, dict) else None
    gates = pod_spec.get("schedulingGates") if isinstance(pod_spec, dict) else None
    return isinstance(gates, list) and any(isinstance(g, dict) and g.get("name") in HOLD_GATES for g in gates)


KIND = "LeaderWorkerSet"


class LeaderWorkerSetAdapter(Adapter):
    """One workload per group (see the module's docstring); the reader asks `grouped`."""

    group = "leaderworkerset.x-k8s.io"
    version = "v1"
    kind = KIND
    plural = "leaderworkersets"
    pod_selector = NAME_LABEL
    owner_label = NAME_LABEL
    grouped = True

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        entries: list[Entry] = attempt(group_entries, spec, default=[])
        return [PodSetSource(e.name, e.size, e.template, e.field) for e in entries]

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        name, index = labels.get(NAME_LABEL), labels.get(GROUP_INDEX_LABEL)
        if not name or not is_decimal(str(index or "")):
            return None
        annotations = metadata.get("annotations")
        role = annotations.get(ROLE) if isinstance(annotations, dict) else None
        return group_ref(namespace, str(name), int(str(index))), str(role or role_of(dict(labels), True))

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        spec = obj.get("spec")
        lwt = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
        if not isinstance(lwt, dict):
            return {}
        out = {}
        for name, path in template_paths(spec if isinstance(spec, dict) else {}).items():
            template = lwt.get(path[-1])
            if isinstance(template, dict):
                out[name] = template
        return out
