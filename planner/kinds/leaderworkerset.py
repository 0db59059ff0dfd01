"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) -> the workloads Kueue v0.17 builds for it.

Kueue's LWS integration (pkg/controller/jobs/leaderworkerset) never suspends the
LeaderWorkerSet: it creates one prebuilt Workload per group (replica index 0 ..
`replicas`-1, `replicas` defaulting to 1) and admits each group's pods through its
pod integration. A group's pod sets: with a `leaderTemplate`, `leader` (1 pod) and
`worker` (`size` - 1 pods, from `workerTemplate`); without one, `main` (`size` pods,
`size` defaulting to 1). Kueue labels a group's pods with the group's workload name
and a role (`kueue.x-k8s.io/role-hash`: leader, worker or main), so each group is a
pod group admitted and evicted on its own.

Pure: no I/O. Field errors raise `Bad` with the field's path.
"""

from __future__ import annotations

from typing import Any

from planner.kinds.ray import Entry
from planner.snapshot.fields import Bad, integer, mapping

LEADER = "leader"
WORKER = "worker"
MAIN = "main"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def groups(spec: dict[str, Any]) -> int:
    """How many groups (Kueue Workloads) the LeaderWorkerSet has: `replicas`, default 1."""
    return integer(spec.get("replicas"), "spec.replicas", default=1, minimum=0)


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
