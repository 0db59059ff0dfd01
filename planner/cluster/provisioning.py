"""Apply a plan's `provisioning` section: create the ProvisioningRequests it wants (each
after its PodTemplates, as Kueue's provisioning controller does) and delete those it
no longer needs, with their PodTemplates.

Each object is marked `stowplan.io/managed: "true"` and the request names its workload
(annotation `stowplan.io/workload`) and check (label `stowplan.io/admission-check`),
which is how the next cycle's reader knows them (planner/snapshot/provisioning.py).
Both are owned by the workload's object where it is one (a Job, a JobSet, ...), so the
garbage collector removes them with it even when no cycle runs. Every step is safe to
repeat: an object that already exists (409) or is already gone (404) counts as done,
so a cycle stopped between two writes is finished by the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from models import ObjectRef
from models.provisioning import ProvisioningSection, RequestPodSet, WantedRequest, quantity_text
from planner.cluster.kube import ApiStatus, Kube, path_of
from planner.k8s.annotations import (
    PROVISIONING_ATTEMPT as ATTEMPT_LABEL, PROVISIONING_CHECK as CHECK_LABEL, PROVISIONING_MANAGED as MANAGED_LABEL,
    PROVISIONING_WORKLOAD as WORKLOAD_ANNOTATION,
)
from planner.k8s.annotations import PROVISIONING_REQUEST as REQUEST_LABEL

API_VERSION = "autoscaling.x-k8s.io/v1"
PLURAL = "provisioningrequests"
# The PodTemplate's one container stands for the pod set's pods: the autoscaler simulates
# scheduling it (requests, node selector, tolerations) and never runs it.
CONTAINER_NAME = "main"
CONTAINER_IMAGE = "pause"
OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})


@dataclass
class ProvisioningReport:
    created: list[str] = field(default_factory=list)      # NAMESPACE/NAME of requests made
    deleted: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)      # made or gone before this apply


def pod_template(namespace: str, request: str, ps: RequestPodSet, owner: Mapping[str, Any] | None) -> dict[str, Any]:
    requests = {k: quantity_text(k, v) for k, v in sorted(ps.requests.items())}
    # extended resources (GPUs) and hugepages cannot be overcommitted: the API server wants
    # their limit, equal to the request
    limits = {k: v for k, v in requests.items() if k not in OVERCOMMITTABLE}
    resources: dict[str, Any] = {"requests": requests, **({"limits": limits} if limits else {})}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": CONTAINER_NAME, "image": CONTAINER_IMAGE, "resources": resources}],
    }
    if ps.node_selector:
        spec["nodeSelector"] = dict(ps.node_selector)
    if ps.tolerations:
        spec["tolerations"] = [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                                  ("effect", t.effect)) if v} for t in ps.tolerations]
    metadata: dict[str, Any] = {"name": ps.pod_template, "namespace": namespace,
                                "labels": {MANAGED_LABEL: "true", REQUEST_LABEL: request}}
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": metadata, "template": {"spec": spec}}


def provisioning_request(r: WantedRequest, owner: Mapping[str, Any] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": r.name, "namespace": r.namespace,
        "labels": {MANAGED_LABEL: "true", CHECK_LABEL: r.check, ATTEMPT_LABEL: str(r.attempt)},
        "annotations": {WORKLOAD_ANNOTATION: f"{r.workload.kind}/{r.workload.namespace}/{r.workload.name}"},
    }
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    spec: dict[str, Any] = {
        "provisioningClassName": r.class_name,
        "podSets": [{"podTemplateRef": {"name": ps.pod_template}, "count": ps.count} for ps in r.pod_sets],
    }
    if r.parameters:
        spec["parameters"] = dict(r.parameters)
    return {"apiVersion": API_VERSION, "kind": "ProvisioningRequest", "metadata": metadata, "spec": spec}


def owner_reference(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An ownerReference to the workload's object (not a controller one: its controller is its own)."""
    if not obj:
        return None
    metadata = obj.get("metadata") or {}
    uid, name = metadata.get("uid"), metadata.get("name")
    if not uid or not name or not obj.get("apiVersion") or not obj.get("kind"):
        return None
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": name, "uid": uid}


def apply_provisioning(kube: Kube, section: ProvisioningSection | None, workloads: Mapping[ObjectRef, Mapping[str, Any]],
                       say: Callable[[str], None] = lambda _: None) -> ProvisioningReport:
    """Delete what the section deletes, then create what it wants made; `workloads` are the
    raw workload objects read (for owner references)."""
    report = ProvisioningReport()
    if section is None:
        return report
    for d in section.deletions:
        where = f"{d.namespace}/{d.name}"
        gone = _delete(kube, path_of(API_VERSION, PLURAL, d.namespace, d.name))
        for template in d.pod_templates:
            _delete(kube, path_of("v1", "podtemplates", d.namespace, template))
        (report.deleted if gone else report.already).append(where)
        say(f"deleted ProvisioningRequest {where}: {d.reason}")
    for r in section.requests:
        if not r.create:
            continue
        owner = owner_reference(workloads.get(r.workload))
        for ps in r.pod_sets:
            _create(kube, path_of("v1", "podtemplates", r.namespace), pod_template(r.namespace, r.name, ps, owner))
        where = f"{r.namespace}/{r.name}"
        made = _create(kube, path_of(API_VERSION, PLURAL, r.namespace), provisioning_request(r, owner))
        (report.created if made else report.already).append(where)
        say(f"created ProvisioningRequest {where} ({r.class_name}) for {r.workload}")
    return report


def _create(kube: Kube, path: str, body: dict[str, Any]) -> bool:
    """POST; False when it exists already."""
    try:
        kube.write("POST", path, body)
        return True
    except ApiStatus as err:
        if err.status == 409:
            return False
        raise


def _delete(kube: Kube, path: str) -> bool:
    """DELETE; False when it is gone already."""
    try:
        kube.write("DELETE", path, None)
        return True
    except ApiStatus as err:
        if err.status == 404:
            return False
        raise
