"""Builders and waits shared by the live-cluster tests (a helper module, not a test file).

Kueue objects are v1beta2 (the only version the rig serves); every test builds
its own flavor/queues with a per-test suffix and its own KWOK nodes labelled
with that suffix, so tests sharing the control plane never see each other's
capacity.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Callable

import yaml
from kubernetes import client

GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
POOL = "stowplan.io/test-pool"
KUEUE = "kueue.x-k8s.io/v1beta2"
GATE = "stowplan.io/topology"
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60.0, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last={last!r}")


class Env:
    """One test's world: nodes in a private pool, a flavor, a ClusterQueue, a LocalQueue in `namespace`."""

    def __init__(self, cp: Any, api: Any, namespace: str, *, nodes: int = 4, gpus: int = 8, per_rack: int = 2,
                 quota: int | None = None, preemption: dict[str, Any] | None = None, pods: int = 110,
                 cpu: str = "96"):
        self.cp, self.api, self.namespace = cp, api, namespace
        self.s = suffix()
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.co = client.CustomObjectsApi(api)
        self.flavor, self.cq, self.lq, self.topology = f"gpu-{self.s}", f"cq-{self.s}", "lq", f"topo-{self.s}"
        self.nodes = [f"n-{self.s}-{i:03d}" for i in range(nodes)]
        for i, name in enumerate(self.nodes):
            cp.make_node(name, labels={POOL: self.s, BLOCK: f"b-{self.s}-{i // (per_rack * 4)}",
                                       RACK: f"r-{self.s}-{i // per_rack}"},
                         allocatable={GPU: str(gpus), "cpu": cpu, "memory": "1Ti", "pods": str(pods)},
                         wait_ready=False)
        self.create_cluster("topologies", {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": self.topology},
                                           "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK},
                                                               {"nodeLabel": HOSTNAME}]}})
        self.create_cluster("resourceflavors", {
            "apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": self.flavor},
            "spec": {"nodeLabels": {POOL: self.s}, "topologyName": self.topology}})
        spec: dict[str, Any] = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [{"name": self.flavor, "resources": [
                {"name": "cpu", "nominalQuota": "100000"},
                {"name": GPU, "nominalQuota": str(quota if quota is not None else nodes * gpus)}]}]}],
        }
        if preemption:
            spec["preemption"] = preemption
        self.create_cluster("clusterqueues", {"apiVersion": KUEUE, "kind": "ClusterQueue",
                                              "metadata": {"name": self.cq}, "spec": spec})
        self.co.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "localqueues", {
            "apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": self.lq, "namespace": namespace},
            "spec": {"clusterQueue": self.cq}})

    def create_cluster(self, plural: str, body: dict[str, Any]) -> None:
        self.co.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, body)

    def priority_class(self, name: str, value: int) -> str:
        full = f"{name}-{self.s}"
        self.create_cluster("workloadpriorityclasses", {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass",
                                                        "metadata": {"name": full}, "value": value})
        return full

    def job(self, name: str, pods: int = 1, gpus: int = 1, *, priority: str | None = None,
            topology: tuple[str, str] | None = None) -> dict[str, Any]:
        labels = {"kueue.x-k8s.io/queue-name": self.lq}
        if priority:
            labels["kueue.x-k8s.io/priority-class"] = priority
        annotations = {f"kueue.x-k8s.io/podset-{topology[0]}-topology": topology[1]} if topology else {}
        body = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"metadata": {"annotations": annotations}, "spec": {
                         "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "train", "image": "registry.invalid/trainer:1",
                                         "resources": {"requests": {GPU: str(gpus), "cpu": "1"},
                                                       "limits": {GPU: str(gpus)}}}]}}},
        }
        return self.batch.create_namespaced_job(self.namespace, body)

    def pods(self, job: str | None = None) -> list[Any]:
        selector = f"batch.kubernetes.io/job-name={job}" if job else "batch.kubernetes.io/job-name"
        return self.core.list_namespaced_pod(self.namespace, label_selector=selector).items

    def wait_bound(self, job: str, count: int, timeout: float = 90.0) -> list[Any]:
        def bound() -> list[Any] | None:
            pods = [p for p in self.pods(job) if p.spec.node_name and p.status.phase == "Running"
                    and not p.metadata.deletion_timestamp]
            return pods if len(pods) == count else None

        return wait_for(f"{count} running pods of {job}", bound, timeout)  # type: ignore[no-any-return]

    def cleanup(self) -> None:
        for name in self.nodes:
            try:
                self.core.delete_node(name)
            except client.ApiException:
                pass
        for plural, name in (("clusterqueues", self.cq), ("resourceflavors", self.flavor),
                             ("topologies", self.topology)):
            try:
                self.co.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name)
            except client.ApiException:
                pass


# ---------------------------------------------------------------- ProvisioningRequest admission checks

def behind_a_provisioning_check(env: Env) -> str:
    """An AdmissionCheck of Kueue's provisioning controller, its ProvisioningRequestConfig, and
    the test's ClusterQueue naming it."""
    check, config = f"prov-{env.s}", f"prc-{env.s}"
    env.create_cluster("provisioningrequestconfigs", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig", "metadata": {"name": config},
        "spec": {"provisioningClassName": PROVISIONING_CLASS, "parameters": {"ValidUntilSeconds": "600"}}})
    env.create_cluster("admissionchecks", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": check},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                 "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": config}}})
    env.co.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", env.cq,
                                       {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}})
    return check


def drop_provisioning_check(env: Env) -> None:
    for plural, name in (("admissionchecks", f"prov-{env.s}"), ("provisioningrequestconfigs", f"prc-{env.s}")):
        try:
            env.co.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name)
        except client.ApiException:
            pass


def policy_file(env: Env, tmp_path: Path) -> str:
    """Provisioning on, with the one node kind the (imagined) autoscaler can add: an 8-GPU host
    in the test's pool, on a fresh block and rack."""
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
        "spec": {"timeLimitSeconds": 10, "provisioning": {"enabled": True, "maxNodesPerCycle": 4, "templates": [{
            "name": f"gpu8-{env.s}", "cost": 1, "topology": [BLOCK, RACK], "labels": {POOL: env.s},
            "allocatable": {GPU: "8", "cpu": "96", "memory": "1Ti", "pods": "110"}, "max": 4}]}}}))
    return str(path)


def per_node(pods: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        out[p.spec.node_name] = out.get(p.spec.node_name, 0) + 1
    return out
