"""Admitting and evicting plain Pods and pod groups (Kueue's pod integration), live.

A pod-integration workload has no object of its own to suspend: its pods are held
by Kueue's scheduling gate `kueue.x-k8s.io/admission`. Admission patches each pod
once: the flavor's node labels and the planned node (by its hostname label,
models.NodePins) as its nodeSelector, the
flavor's tolerations, Stowplan's annotations (the group's assignment, the admission
time, the pod's role), and the gate removed; the scheduler then binds it to that
node. Eviction deletes the pods, as Kueue's pod integration stops them (whoever made
them makes them again, gated). Called by planner.cluster.apply.Applier, which owns
the report and the Events.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from models import HOSTNAME_LABEL, Admission, Eviction, NodePins, ObjectRef, PodSetAssignment, ResourceFlavor
from planner.cluster.kube import JSON_PATCH, ApiStatus, Kube, path_of
from planner.k8s.annotations import ASSIGNMENT, POD_GROUP_NAME, ROLE
from planner.kinds import pods as kind

DONE = ("Succeeded", "Failed")
KINDS = (kind.POD_KIND, kind.GROUP_KIND)


def members(kube: Kube, ref: ObjectRef) -> list[dict[str, Any]]:
    """The workload's pods that are alive (not finished, not being deleted), by name."""
    if ref.kind == kind.POD_KIND:
        pod = kube.get_or_none(path_of("v1", "pods", ref.namespace, ref.name))
        found = [pod] if pod else []
    else:
        found = list(kube.list(path_of("v1", "pods", ref.namespace),
                               label_selector=f"{POD_GROUP_NAME}={ref.name}"))
    alive = [p for p in found if (p.get("status") or {}).get("phase") not in DONE
             and not (p.get("metadata") or {}).get("deletionTimestamp")]
    return sorted(alive, key=lambda p: str(p["metadata"]["name"]))


def role(ref: ObjectRef, pod: Mapping[str, Any]) -> str:
    """The pod set a pod belongs to (before admission: Kueue's role, after: the one written)."""
    if ref.kind == kind.POD_KIND:
        return kind.SINGLE_POD_SET
    meta = pod.get("metadata") or {}
    member = kind.Member(str(meta.get("name")), dict(meta.get("annotations") or {}), dict(pod.get("spec") or {}), "", False)
    return kind.role_of(member)


def flavor_tolerations(pod_set: PodSetAssignment, flavors: Mapping[str, ResourceFlavor]) -> list[dict[str, str]]:
    """The tolerations of the pod set's flavors (its node labels are implied by the node it is pinned to)."""
    tolerations: list[dict[str, str]] = []
    for name in sorted(set(pod_set.flavors.values())):
        flavor = flavors.get(name)
        if flavor is None:
            continue
        for t in flavor.tolerations:
            entry = {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                       ("effect", t.effect)) if v}
            if entry not in tolerations:
                tolerations.append(entry)
    return tolerations


def pinned_node(pod: Mapping[str, Any], pins: NodePins) -> str | None:
    """The node a pod's nodeSelector pins it to (the pin names the hostname label: models.NodePins)."""
    value = ((pod.get("spec") or {}).get("nodeSelector") or {}).get(HOSTNAME_LABEL)
    return pins.node(str(value)) if value else None


def node_of(pod: Mapping[str, Any], pins: NodePins) -> str | None:
    """The node a pod is bound to, or else pinned to."""
    node = (pod.get("spec") or {}).get("nodeName")
    return str(node) if node else pinned_node(pod, pins)


def admit(kube: Kube, admission: Admission, flavors: Mapping[str, ResourceFlavor], pins: NodePins,
          annotations: dict[str, str],
          assignment_text: str, each: Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
          ) -> tuple[str, str | None]:
    """Patch the workload's gated pods. ("admitted" | "unchanged" | "conflict", why)."""
    ref = admission.workload
    pods = members(kube, ref)
    if not pods:
        return "conflict", "its pods no longer exist"
    wanted = {ps.name: ps for ps in admission.pod_sets}
    roles = {str(p["metadata"]["name"]): role(ref, p) for p in pods}
    counts: dict[str, int] = {}
    for r in roles.values():
        counts[r] = counts.get(r, 0) + 1
    short = sorted(n for n, ps in wanted.items() if counts.get(n, 0) < ps.count)
    if short:
        return "conflict", f"it has fewer pods than planned in pod set(s) {', '.join(short)}"
    gated = [p for p in pods if kind.is_gated(p.get("spec") or {})]
    if not gated:
        done = all((p["metadata"].get("annotations") or {}).get(ASSIGNMENT) == assignment_text
                   for p in pods)
        return ("unchanged", None) if done else ("conflict", "it is already running with another assignment")
    places = kind.placement([(str(p["metadata"]["name"]), None if kind.is_gated(p.get("spec") or {}) else node_of(p, pins),
                              roles[str(p["metadata"]["name"])]) for p in pods],
                            {name: ps.pods_per_node() for name, ps in wanted.items()})
    patches = []
    for pod in gated:
        name = str(pod["metadata"]["name"])
        if name not in places:
            continue   # beyond the plan's count (Kueue would delete the excess): it stays gated
        pod_set = wanted[roles[name]]
        extra = {**annotations, ROLE: roles[name]} if ref.kind == kind.GROUP_KIND else annotations
        patches.append((name, kind.admission_patch(pod, pins.value(places[name]), flavor_tolerations(pod_set, flavors), extra)))

    def patch(item: tuple[str, list[dict[str, Any]]]) -> str | None:
        name, ops = item
        try:
            kube.write("PATCH", path_of("v1", "pods", ref.namespace, name), ops, content_type=JSON_PATCH)
        except ApiStatus as err:
            if err.status in (404, 409, 422):
                return f"pod {name}: {err.detail}"
            raise
        return None

    failed = [why for why in each(patch, patches) if why]
    if failed:
        return "conflict", "; ".join(failed)
    return "admitted", None


def evict(kube: Kube, eviction: Eviction) -> list[str]:
    """Delete the workload's pods (each only if it is still the pod read). Returns the pods deleted."""
    deleted = []
    for pod in members(kube, eviction.workload):
        meta = pod["metadata"]
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.get("uid")}}
        try:
            kube.write("DELETE", path_of("v1", "pods", eviction.workload.namespace, str(meta["name"])), options)
        except ApiStatus as err:
            if err.status in (404, 409):
                continue
            raise
        deleted.append(str(meta["name"]))
    return deleted
