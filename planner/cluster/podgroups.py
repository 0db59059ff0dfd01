"""Kubernetes' own gang scheduling for admitted Jobs (opt-in: `apply --pod-groups`).

Kubernetes v1.36 serves the Workload API as `scheduling.k8s.io/v1alpha2` (KEP-4671, gang
scheduling; v1.35's v1alpha1 with `spec.workloadRef` is gone): a `Workload` holds
`podGroupTemplates`, a `PodGroup` is the runtime group (`schedulingPolicy.gang.minCount`,
and with TopologyAwareWorkloadScheduling `schedulingConstraints.topology[].key`), and a
pod joins one by `spec.schedulingGroup.podGroupName`. Alpha, off by default: the
kube-apiserver needs `--feature-gates=GenericWorkload=true` and
`--runtime-config=scheduling.k8s.io/v1alpha2=true`, the kube-scheduler
`--feature-gates=GenericWorkload=true,GangScheduling=true` (the GangScheduling plugin joins
the default profile with its gate), and TopologyAwareWorkloadScheduling on both for the
topology constraint.

A pod's `schedulingGroup` is immutable, and a Job's template field is immutable even while
the Job is suspended (only nodeSelector, tolerations, node affinity, gates, labels and
annotations may change), so Stowplan cannot add the reference: a Job opts in by naming its
group in its template at creation (`spec.template.spec.schedulingGroup.podGroupName`).
At admission, `apply` creates that PodGroup (and a Workload holding its template) with a
gang of the admitted pod count and, for a required topology level, that level as the
group's topology constraint, before the Job is unsuspended. The pods, created gated, are
pinned to the plan's nodes as always; the gang makes kube-scheduler bind them all or none.
Both objects are owned by the Job (garbage-collected with it); an existing pair whose
gang or constraint differs (a re-admission at another size) is replaced (their specs are
immutable).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from models import Admission
from planner.cluster.kube import ApiStatus, Kube, path_of
from planner.k8s.annotations import REQUIRED

API_VERSION = "scheduling.k8s.io/v1alpha2"


def group_name(job: Mapping[str, Any]) -> str | None:
    """The PodGroup a Job's pods join: its template's schedulingGroup.podGroupName."""
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    group = spec.get("schedulingGroup") or {}
    name = group.get("podGroupName") if isinstance(group, dict) else None
    return name if isinstance(name, str) and name else None


def required_level(job: Mapping[str, Any]) -> str | None:
    template = (job.get("spec") or {}).get("template") or {}
    level = ((template.get("metadata") or {}).get("annotations") or {}).get(REQUIRED)
    return level if isinstance(level, str) and level else None


def group_spec(count: int, level: str | None) -> dict[str, Any]:
    """The scheduling policy (a gang of `count`) and constraints a template and its group share."""
    out: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": count}}}
    if level:
        out["schedulingConstraints"] = {"topology": [{"key": level}]}
    return out


def objects(job: Mapping[str, Any], admission: Admission, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Workload, PodGroup) for an admitted Job (pure)."""
    meta = job.get("metadata") or {}
    namespace = str(meta.get("namespace") or admission.workload.namespace)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": str(meta.get("name")), "uid": str(meta.get("uid")),
             "controller": True, "blockOwnerDeletion": False}
    count = sum(ps.count for ps in admission.pod_sets)
    spec = group_spec(count, required_level(job))
    template = admission.pod_sets[0].name if admission.pod_sets else "main"
    workload = {"apiVersion": API_VERSION, "kind": "Workload",
                "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner],
                             "labels": {"app.kubernetes.io/managed-by": "stowplan"}},
                "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": str(meta.get("name"))},
                         "podGroupTemplates": [{"name": template, **spec}]}}
    group = {"apiVersion": API_VERSION, "kind": "PodGroup",
             "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner],
                          "labels": {"app.kubernetes.io/managed-by": "stowplan"}},
             "spec": {"podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": template}},
                      **spec}}
    return workload, group


def _same(found: Mapping[str, Any], wanted: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    have, want = found.get("spec") or {}, wanted.get("spec") or {}
    return all(have.get(k) == want.get(k) for k in keys)


class PodGroups:
    """Ensures each admitted Job's Workload and PodGroup; says once if the API is not served."""

    def __init__(self, kube: Kube, say: Callable[[str], None]):
        self.kube, self.say = kube, say
        self.served = True

    def ensure(self, job: Mapping[str, Any], admission: Admission) -> str | None:
        """Create (or replace) the pair; returns the PodGroup's name, or None when the Job names
        none or the API is not served (it is then admitted without a gang)."""
        name = group_name(job)
        if name is None or not self.served:
            return None
        workload, group = objects(job, admission, name)
        namespace = workload["metadata"]["namespace"]
        try:
            self._put(path_of(API_VERSION, "workloads", namespace), workload, ("podGroupTemplates",))
            self._put(path_of(API_VERSION, "podgroups", namespace), group,
                      ("schedulingPolicy", "schedulingConstraints"))
        except ApiStatus as err:
            if err.status != 404:
                raise
            self.served = False
            self.say(f"warning: the Workload API ({API_VERSION}) is not served: admitted without PodGroups "
                     f"(kube-apiserver needs --feature-gates=GenericWorkload=true and "
                     f"--runtime-config={API_VERSION}=true)")
            return None
        return name

    def _put(self, collection: str, body: dict[str, Any], keys: tuple[str, ...]) -> None:
        path = f"{collection}/{body['metadata']['name']}"
        found = self.kube.get_or_none(path)
        if found is not None:
            if _same(found, body, keys):
                return
            try:   # specs are immutable: a group of another size is a new group
                self.kube.write("DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions",
                                                 "preconditions": {"uid": found["metadata"].get("uid")}})
            except ApiStatus as err:
                if err.status not in (404, 409):
                    raise
        try:
            self.kube.write("POST", collection, body)
        except ApiStatus as err:
            if err.status != 409:
                raise
