"""Elastic Ray clusters (kueue.x-k8s.io/elastic-job, Kueue v0.17's workload slices for
RayCluster and RayJob) grown and shrunk by apply on the real control plane.

KubeRay's operator does not run on the rig (see test_live_ray.py), so this test does what
it would, and only that, between cycles (`kuberay`): it makes a RayJob's RayCluster from
`spec.rayClusterSpec` (labels and annotations copied, owned by the RayJob, its name in the
RayJob's `status.rayClusterName`, named NAME-xxxxx), creates each group's missing pods
from its template (labels `ray.io/cluster`, `ray.io/group`, `ray.io/node-type`), and, as
KubeRay does for an autoscaling cluster, deletes exactly the pods a worker group names in
`scaleStrategy.workersToDelete` and no other when `replicas` drops. What is checked is
Stowplan's part: the plan's resizes, the RayCluster writes (replicas, the named workers)
taken by the API server against KubeRay's CRD schema, and apply placing the new pods
where the slice says.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from planner.cluster import apply_live
from live_kit import GPU, Env, per_node

CLUSTER, GROUP, NODE_TYPE = "ray.io/cluster", "ray.io/group", "ray.io/node-type"
ELASTIC = "kueue.x-k8s.io/elastic-job"


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=2, gpus=4,
               preemption={"withinClusterQueue": "LowerPriority"})
    yield made
    made.cleanup()


def cycle(kube, env):
    return apply_live(kube, lease_namespace=env.namespace, identity="test-planner", release_wait=3)


def until_resized(kube, env: Env, timeout: float = 60.0) -> tuple[Any, Any]:
    """Cycles until a plan resizes (the filler's pods count where they are until they are gone)."""
    deadline = time.monotonic() + timeout
    while True:
        plan, report = cycle(kube, env)
        if plan.resizes:
            return plan, report
        assert time.monotonic() < deadline, f"no resize in {timeout}s: {plan}"
        time.sleep(1.0)


def template(cpu: str, gpus: int = 0) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    return {"spec": {"terminationGracePeriodSeconds": 0, "containers": [
        {"name": "ray", "image": "registry.invalid/ray:2", "resources": {"requests": requests, "limits": limits}}]}}


def cluster_spec(replicas: int, low: int, high: int) -> dict[str, Any]:
    return {"enableInTreeAutoscaling": True,
            "headGroupSpec": {"rayStartParams": {}, "template": template("1")},
            "workerGroupSpecs": [{"groupName": "GPU", "replicas": replicas, "minReplicas": low, "maxReplicas": high,
                                  "rayStartParams": {}, "template": template("1", 1)}]}


def create(env: Env, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    env.co.create_namespaced_custom_object("ray.io", "v1", env.namespace, plural, {
        "apiVersion": "ray.io/v1", "kind": kind,
        "metadata": {"name": name, "namespace": env.namespace, "labels": {"kueue.x-k8s.io/queue-name": env.lq},
                     "annotations": {ELASTIC: "true"}},
        "spec": spec})


def read(env: Env, plural: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = env.co.get_namespaced_custom_object("ray.io", "v1", env.namespace, plural, name)
    return obj


# ---------------------------------------------------------------- what KubeRay would do

def kuberay_cluster_for(env: Env, rayjob: str) -> str:
    """KubeRay's RayJob controller: the RayJob's cluster, made once from its (admitted) spec."""
    obj = read(env, "rayjobs", rayjob)
    name = (obj.get("status") or {}).get("rayClusterName")
    if name:
        return str(name)
    name = f"{rayjob}-{uuid.uuid4().hex[:5]}"
    meta = obj["metadata"]
    env.co.create_namespaced_custom_object("ray.io", "v1", env.namespace, "rayclusters", {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": env.namespace, "labels": dict(meta.get("labels") or {}),
                     "annotations": {k: v for k, v in (meta.get("annotations") or {}).items()
                                     if not k.startswith("stowplan.io/")},
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": rayjob,
                                          "uid": meta["uid"], "controller": True}]},
        "spec": obj["spec"]["rayClusterSpec"]})
    env.co.patch_namespaced_custom_object_status("ray.io", "v1", env.namespace, "rayjobs", rayjob,
                                                 {"status": {"rayClusterName": name}})
    return name


def kuberay(env: Env, name: str) -> None:
    """KubeRay's RayCluster controller, one pass: the head, the named workers deleted, the missing made."""
    obj = read(env, "rayclusters", name)
    pods = [p for p in env.core.list_namespaced_pod(env.namespace, label_selector=f"{CLUSTER}={name}").items
            if not p.metadata.deletion_timestamp]
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name, "uid": obj["metadata"]["uid"],
             "controller": True}
    wanted = [("head", "headgroup", obj["spec"]["headGroupSpec"]["template"], 1, [])]
    for group in obj["spec"]["workerGroupSpecs"]:
        wanted.append(("worker", group["groupName"], group["template"], group["replicas"],
                       (group.get("scaleStrategy") or {}).get("workersToDelete") or []))
    for node_type, group_name, pod_template, replicas, doomed in wanted:
        mine = [p for p in pods if p.metadata.labels.get(GROUP) == group_name]
        for pod in mine:
            if pod.metadata.name in doomed:
                env.core.delete_namespaced_pod(pod.metadata.name, env.namespace, grace_period_seconds=0)
        alive = [p for p in mine if p.metadata.name not in doomed]
        for _ in range(replicas - len(alive)):     # never fewer: with autoscaling KubeRay deletes only the named
            meta = pod_template.get("metadata") or {}
            env.core.create_namespaced_pod(env.namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{group_name.lower()}-{uuid.uuid4().hex[:5]}", "namespace": env.namespace,
                             "labels": {**(meta.get("labels") or {}), CLUSTER: name, GROUP: group_name,
                                        NODE_TYPE: node_type},
                             "annotations": meta.get("annotations") or {}, "ownerReferences": [owner]},
                "spec": pod_template["spec"]})


def workers(env: Env, cluster: str) -> list[Any]:
    return [p for p in env.core.list_namespaced_pod(env.namespace, label_selector=f"{CLUSTER}={cluster},"
                                                    f"{NODE_TYPE}=worker").items
            if not p.metadata.deletion_timestamp and p.status.phase not in ("Succeeded", "Failed")]


def settle(kube, env: Env, cluster: str, count: int, timeout: float = 120.0) -> list[Any]:
    """KubeRay's passes and cycles until `cluster` has exactly `count` workers, all bound (a
    cycle releases the pods KubeRay made after the last one's release window)."""
    deadline = time.monotonic() + timeout
    while True:
        kuberay(env, cluster)
        pods = workers(env, cluster)
        if len(pods) == count and all(p.spec.node_name for p in pods):
            return pods
        assert time.monotonic() < deadline, f"{cluster}: {len(pods)} workers, want {count} bound"
        time.sleep(1.0)
        plan, _ = cycle(kube, env)
        assert not plan.evictions, plan.evictions


def gpu_assignment(obj: dict[str, Any]) -> dict[str, int]:
    (entry,) = [e for e in json.loads(obj["metadata"]["annotations"]["stowplan.io/assignment"]) if e["name"] == "gpu"]
    return {d["values"][-1]: d["count"] for d in entry["topologyAssignment"]["domains"]}


def crowd_in(kube, env: Env, workload: str, cluster: str, plural: str) -> None:
    """A higher-priority Job of 4 GPUs with 2 free: the plan releases 2 workers (the floor is 4)
    rather than evicting the cluster; apply names them in workersToDelete and KubeRay deletes them."""
    before = per_node(workers(env, cluster))
    high = env.priority_class("high", 1000)
    env.job("urgent", pods=4, gpus=1, priority=high)
    plan, report = cycle(kube, env)
    assert [a.workload.name for a in plan.admissions] == ["urgent"] and not plan.evictions, plan
    (shrink,) = plan.resizes
    assert (shrink.workload.name, shrink.pod_set, shrink.from_count, shrink.to_count) == (workload, "gpu", 6, 4)
    assert sum(c for _, c in shrink.release) == 2 and [r.name for r in shrink.for_] == ["urgent"]
    assert [r.name for r in report.resized] == [workload] and not report.conflicts, report
    (group,) = read(env, "rayclusters", cluster)["spec"]["workerGroupSpecs"]
    named = group["scaleStrategy"]["workersToDelete"]
    assert group["replicas"] == 4 and len(named) == 2
    by_name = {p.metadata.name: p.spec.node_name for p in workers(env, cluster)}
    released: dict[str, int] = {}
    for pod in named:                                     # named on the nodes the plan releases
        released[by_name[pod]] = released.get(by_name[pod], 0) + 1
    assert released == dict(shrink.release)
    assert gpu_assignment(read(env, plural, workload)) == {
        n: c - released.get(n, 0) for n, c in before.items() if c - released.get(n, 0) > 0}
    pods = settle(kube, env, cluster, 4)
    assert not {p.metadata.name for p in pods} & set(named)
    assert len(env.wait_bound("urgent", 4)) == 4


def test_an_elastic_raycluster_is_grown_and_shrunk_by_its_worker_group(kube, env):
    # 8 GPUs. A filler of 2 x 3 GPUs leaves one per node: the cluster (2..6 one-GPU workers)
    # is admitted at its replicas, 2, as Kueue's first slice
    env.job("filler", pods=2, gpus=3)
    create(env, "rayclusters", "RayCluster", "rc", {"suspend": True, **cluster_spec(2, 4, 6)})
    plan, report = cycle(kube, env)
    assert sorted(a.workload.name for a in plan.admissions) == ["filler", "rc"], plan
    rc = read(env, "rayclusters", "rc")
    assert rc["spec"]["suspend"] is False and rc["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    # an elastic template is not pinned to its first nodes (growth may go elsewhere); the gate holds its pods
    worker_spec = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert "affinity" not in worker_spec and {"name": "stowplan.io/topology"} in worker_spec["schedulingGates"]
    pods = settle(kube, env, "rc", 2)
    assert per_node(pods) == gpu_assignment(rc)

    # The filler goes: the plan grows the worker group by a slice of 4, the head stays
    env.batch.delete_namespaced_job("filler", env.namespace, propagation_policy="Background")
    plan, report = until_resized(kube, env)
    (grow,) = plan.resizes
    assert (grow.pod_set, grow.from_count, grow.to_count) == ("gpu", 2, 6) and grow.slice is not None
    assert not grow.release and [r.name for r in report.resized] == ["rc"] and not plan.evictions
    rc = read(env, "rayclusters", "rc")
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 6
    assert [e["count"] for e in json.loads(rc["metadata"]["annotations"]["stowplan.io/assignment"])
            if e["name"] == "head"] == [1]
    pods = settle(kube, env, "rc", 6)
    assert per_node(pods) == gpu_assignment(rc) and sum(per_node(pods).values()) == 6

    crowd_in(kube, env, "rc", "rc", "rayclusters")


def test_an_elastic_rayjob_is_resized_through_its_raycluster(kube, env):
    # The same for a RayJob with in-tree autoscaling: the resize is written where Kueue reads
    # it from, the worker group of the RayCluster KubeRay made for the RayJob; the RayJob keeps
    # the assignment
    env.job("filler", pods=2, gpus=3)
    create(env, "rayjobs", "RayJob", "rj", {"suspend": True, "entrypoint": "python train.py",
                                            "shutdownAfterJobFinishes": True, "submissionMode": "HTTPMode",
                                            "rayClusterSpec": cluster_spec(2, 4, 6)})
    plan, _ = cycle(kube, env)
    assert sorted(a.workload.name for a in plan.admissions) == ["filler", "rj"], plan
    cluster = kuberay_cluster_for(env, "rj")
    settle(kube, env, cluster, 2)

    env.batch.delete_namespaced_job("filler", env.namespace, propagation_policy="Background")
    plan, report = until_resized(kube, env)
    (grow,) = plan.resizes
    assert (grow.workload.name, grow.from_count, grow.to_count) == ("rj", 2, 6) and not report.conflicts, report
    assert read(env, "rayclusters", cluster)["spec"]["workerGroupSpecs"][0]["replicas"] == 6
    assert read(env, "rayjobs", "rj")["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 2   # KubeRay's
    pods = settle(kube, env, cluster, 6)
    assert per_node(pods) == gpu_assignment(read(env, "rayjobs", "rj"))

    crowd_in(kube, env, "rj", cluster, "rayjobs")
