"""Small snapshot documents for the Kueue peer harness, built as Kubernetes objects.

    doc = snapshot_document([namespace("ml"), node("n1", gpu=8), flavor("f"), ...])

Each builder returns one object as `kubectl get -o yaml` prints it (creation
times and UIDs included), so the project's reader and the harness take it like
any snapshot file.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Iterable, Mapping

GPU = "nvidia.com/gpu"
NOW = "2026-12-01T12:00:00Z"
KUEUE = "kueue.x-k8s.io/v1beta2"


def _uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"stowplan-peer/{kind}/{name}"))


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": _uid("ns", name), "creationTimestamp": "2026-09-01T00:00:00Z",
                         "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}}


def node(name: str, *, gpu: int = 8, labels: Mapping[str, str] | None = None, cpu: str = "64",
         memory: str = "512Gi") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": _uid("node", name), "creationTimestamp": "2026-10-01T00:00:00Z",
                         "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, GPU: str(gpu), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def topology(name: str, *levels: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": name, "uid": _uid("topo", name)},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def flavor(name: str, *, node_labels: Mapping[str, str] | None = None, topology_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if topology_name:
        spec["topologyName"] = topology_name
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name, "uid": _uid("rf", name)},
            "spec": spec}


def cluster_queue(name: str, quotas: Mapping[str, Mapping[str, Any]], *, cohort: str | None = None,
                  preemption: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """quotas: {flavor: {resource: nominal or {nominalQuota, borrowingLimit, lendingLimit}}}."""
    resources = sorted({r for q in quotas.values() for r in q})
    flavors = []
    for fname, per in quotas.items():
        entries = []
        for r in resources:
            q = per.get(r, 0)
            entries.append({"name": r, **(dict(q) if isinstance(q, Mapping) else {"nominalQuota": str(q)})})
        flavors.append({"name": fname, "resources": entries})
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": resources,
                                                                          "flavors": flavors}]}
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = dict(preemption)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name, "uid": _uid("cq", name)},
            "spec": spec}


def local_queue(ns: str, name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": ns, "uid": _uid("lq", f"{ns}/{name}")},
            "spec": {"clusterQueue": cq}}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name, "uid": _uid("wpc", name)},
            "value": value}


def job(ns: str, name: str, *, pods: int = 1, gpu: int = 1, queue: str = "lq", priority: str | None = None,
        created: str = "2026-12-01T10:00:00Z", template_annotations: Mapping[str, str] | None = None,
        running_on: Mapping[str, int] | None = None, flavor_name: str | None = None) -> dict[str, Any]:
    """A Job queued through `queue`; with `running_on` {node: pods} it runs there
    (unsuspended, stowplan.io/assignment naming `flavor_name` for the GPUs)."""
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": _uid("job", f"{ns}/{name}"),
                            "creationTimestamp": created, "labels": labels}
    template: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "trainer", "resources": {"requests": {GPU: str(gpu)}, "limits": {GPU: str(gpu)}}}]}}
    if template_annotations:
        template["metadata"] = {"annotations": dict(template_annotations)}
    spec: dict[str, Any] = {"parallelism": pods, "completions": pods, "suspend": running_on is None,
                            "template": template}
    if running_on is not None:
        entry = {"name": "main", "count": pods, "flavors": {GPU: flavor_name},
                 "topologyAssignment": {"levels": ["kubernetes.io/hostname"],
                                        "domains": [{"values": [n], "count": c} for n, c in sorted(running_on.items())]}}
        meta["annotations"] = {"stowplan.io/assignment": json.dumps([entry]),
                               "stowplan.io/admitted-at": "2026-12-01T11:00:00Z"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def snapshot_document(items: Iterable[Mapping[str, Any]], now: str = NOW) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"annotations": {"stowplan.io/snapshot-time": now}},
            "items": list(items)}
