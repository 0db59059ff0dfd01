"""A snapshot's raw objects -> the bodies the harness creates on the test cluster.

Pure dict transforms, no I/O: each function takes one decoded object as the
snapshot holds it and returns what the API server should get. Kueue's objects
come out as v1beta2 (the only version the rig serves: no conversion webhook);
workloads come out suspended, with the scheduling gate GATE on every pod
template so that their pods, once Kueue admits them, are never bound (Kueue's
TAS counts admitted TAS workloads by their assignment and only bound pods as
other usage, see README "Kueue as a peer").
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
GATE = "stowplan.io/peer-hold"
HOSTNAME = "kubernetes.io/hostname"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

# What the API server or a controller sets, never a client.
_SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                    "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences",
                    "finalizers")
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
# Labels the Job controller puts on a Job's pod template (a client may not set its selector).
_JOB_TEMPLATE_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
                        "batch.kubernetes.io/job-name")
# Gates a previous admitter left (Stowplan's apply, Kueue's TAS): GATE replaces them.
_OLD_GATES = ("stowplan.io/topology", "kueue.x-k8s.io/topology")


def metadata(obj: Mapping[str, Any], *, namespaced: bool) -> dict[str, Any]:
    """name, namespace, labels and annotations: what a client may set."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"name": meta["name"]}
    if namespaced:
        out["namespace"] = meta.get("namespace") or "default"
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROP_ANNOTATIONS}
    if annotations:
        out["annotations"] = annotations
    return out


def _base(obj: Mapping[str, Any], *, namespaced: bool) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": metadata(obj, namespaced=namespaced)}


# ---------------------------------------------------------------- plain Kubernetes objects

def namespace_body(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = {k: v for k, v in labels.items() if k != "kubernetes.io/metadata.name"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def priority_class_body(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = _base(obj, namespaced=False)
    for key in ("value", "globalDefault", "description", "preemptionPolicy"):
        if key in obj:
            out[key] = obj[key]
    return out


def node_bodies(obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Node to create, the status to patch in after KWOK initialised it).

    Labels, taints and unschedulable as in the snapshot; allocatable (also as
    capacity) with `pods`, Ready. KWOK keeps the node Ready from then on.
    """
    meta = metadata(obj, namespaced=False)
    labels = dict(meta.get("labels") or {})
    labels.setdefault(HOSTNAME, meta["name"])
    meta["labels"] = labels
    annotations = dict(meta.get("annotations") or {})
    annotations.update({"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"})
    meta["annotations"] = annotations
    spec_in = obj.get("spec") or {}
    spec: dict[str, Any] = {}
    if spec_in.get("taints"):
        spec["taints"] = [{k: v for k, v in t.items() if k in ("key", "value", "effect")} for t in spec_in["taints"]]
    if spec_in.get("unschedulable"):
        spec["unschedulable"] = True
    allocatable = {k: str(v) for k, v in ((obj.get("status") or {}).get("allocatable") or {}).items()}
    allocatable.setdefault("pods", "110")
    status = {
        "allocatable": allocatable,
        "capacity": dict(allocatable),
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kwok"}],
        "addresses": [{"type": "Hostname", "address": meta["name"]}],
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}, {"status": status}


def node_ready(obj: Mapping[str, Any]) -> bool:
    """The snapshot's Ready condition (absent: ready, as the reader takes it)."""
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True


def quantity_text(resource: str, amount: int) -> str:
    """The reader's integer units back to a Kubernetes quantity (cpu is in milli)."""
    return f"{amount}m" if resource == "cpu" else str(amount)


def unmanaged_pod_body(obj: Mapping[str, Any], request: Mapping[str, int], name: str | None = None) -> dict[str, Any]:
    """A pod Stowplan does not manage, bound to its node, asking exactly `request`.

    One container carries the pod's effective request (init containers, sidecars and
    overhead folded in: Kueue's TAS counts a pod's effective request, and a bare pod
    with `overhead` but no RuntimeClass would be refused). Owners are dropped: no
    controller here would own it.
    """
    meta = metadata(obj, namespaced=True)
    if name:
        meta["name"] = name
    spec_in = obj.get("spec") or {}
    requests = {r: quantity_text(r, a) for r, a in sorted(request.items()) if r != "pods" and a > 0}
    spec: dict[str, Any] = {
        "nodeName": spec_in["nodeName"],
        # limits = requests: extended resources (GPUs) must have both, equal
        "containers": [{"name": "usage", "image": "usage",
                        "resources": {"requests": requests, "limits": dict(requests)}}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 0,
    }
    if spec_in.get("tolerations"):
        spec["tolerations"] = copy.deepcopy(spec_in["tolerations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


# ---------------------------------------------------------------- Kueue's objects

def kueue_body(obj: Mapping[str, Any], notes: list[str] | None = None) -> dict[str, Any]:
    """A Kueue object (v1beta1, v1beta2 or the Cohort's/Topology's v1alpha1) as v1beta2.

    The differences are Kueue's own conversion (apis/kueue/v1beta1/*_conversion.go):
    ClusterQueue `cohort` -> `cohortName`, flavorFungibility `Borrow`/`Preempt` ->
    `MayStopSearch`; Cohort `parent` -> `parentName`. Admission checks are dropped
    (Stowplan has none, and without their controllers nothing would be admitted).
    """
    kind = obj["kind"]
    namespaced = kind == "LocalQueue"
    out = _base(obj, namespaced=namespaced)
    out["apiVersion"] = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
    if kind == "WorkloadPriorityClass":
        for key in ("value", "description"):
            if key in obj:
                out[key] = obj[key]
        return out
    spec = copy.deepcopy(obj.get("spec") or {})
    ref = f"{kind}/{out['metadata']['name']}"
    if kind == "ClusterQueue":
        if "cohort" in spec:
            cohort = spec.pop("cohort")
            spec.setdefault("cohortName", cohort)
        fungibility = spec.get("flavorFungibility") or {}
        for key, old in (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")):
            if fungibility.get(key) == old:
                fungibility[key] = "MayStopSearch"
        for key in ("admissionChecks", "admissionChecksStrategy"):
            if spec.pop(key, None) and notes is not None:
                notes.append(f"{ref}: spec.{key} dropped (Stowplan plans without admission checks)")
        spec.pop("stopPolicy", None)
    elif kind == "Cohort":
        if "parent" in spec:
            parent = spec.pop("parent")
            spec.setdefault("parentName", parent)
    out["spec"] = spec
    return out


NO_PREEMPTION = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                 "borrowWithinCohort": {"policy": "Never"}}


def held_spec(spec: Mapping[str, Any], *, preemption: bool, hold: bool) -> dict[str, Any]:
    """A ClusterQueue spec with its preemption turned off (running work is admitted
    first, and must not preempt itself) and/or `stopPolicy: Hold`."""
    out = copy.deepcopy(dict(spec))
    if not preemption:
        out["preemption"] = copy.deepcopy(NO_PREEMPTION)
    if hold:
        out["stopPolicy"] = "Hold"
    else:
        out.pop("stopPolicy", None)
    return out


# ---------------------------------------------------------------- workloads

def _pinned(affinity: Mapping[str, Any] | None, hostnames: Iterable[str]) -> dict[str, Any]:
    """`affinity` with its required node affinity narrowed to these hostnames (ANDed
    into every existing term, since terms are ORed)."""
    out = copy.deepcopy(dict(affinity or {}))
    node = out.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    expression = {"key": HOSTNAME, "operator": "In", "values": sorted(set(hostnames))}
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term.setdefault("matchExpressions", []).append(copy.deepcopy(expression))
    required["nodeSelectorTerms"] = terms
    return out


def pod_template(template: Mapping[str, Any], hostnames: Iterable[str] | None = None) -> dict[str, Any]:
    """A workload's pod template as the harness creates it: GATE added (earlier
    admitters' gates removed), the Job controller's labels removed, pinned to
    `hostnames` when given."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {}) or {}
    out["metadata"] = meta
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in _JOB_TEMPLATE_LABELS}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    for key in ("creationTimestamp", "name", "namespace", "uid"):
        meta.pop(key, None)
    spec = out.setdefault("spec", {})
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") not in _OLD_GATES + (GATE,)]
    spec["schedulingGates"] = gates + [{"name": GATE}]
    spec.pop("nodeName", None)
    if hostnames is not None:
        spec["affinity"] = _pinned(spec.get("affinity"), hostnames)
    return out


def job_body(obj: Mapping[str, Any], pins: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """A batch/v1 Job, suspended; `pins` {pod set: hostnames} pins a running one."""
    out = _base(obj, namespaced=True)
    spec = copy.deepcopy(obj.get("spec") or {})
    for key in ("selector", "manualSelector"):
        spec.pop(key, None)
    spec["suspend"] = True
    hostnames = (pins or {}).get("main") if pins is not None else None
    spec["template"] = pod_template(spec.get("template") or {}, hostnames)
    out["spec"] = spec
    return out


def jobset_body(obj: Mapping[str, Any], pins: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """A JobSet, suspended; each replicated job's pod template gated (and pinned)."""
    out = _base(obj, namespaced=True)
    spec = copy.deepcopy(obj.get("spec") or {})
    spec["suspend"] = True
    for rjob in spec.get("replicatedJobs") or ():
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        for key in ("selector", "manualSelector"):
            job_spec.pop(key, None)
        hostnames = (pins or {}).get(rjob.get("name", "")) if pins is not None else None
        job_spec["template"] = pod_template(job_spec.get("template") or {}, hostnames)
    out["spec"] = spec
    return out


def workload_body(obj: Mapping[str, Any], pins: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    if obj["kind"] == "JobSet":
        return jobset_body(obj, pins)
    return job_body(obj, pins)
