"""RayCluster and RayJob on the real control plane, their CRDs installed from KubeRay's
Go module (ray-operator, the version Kueue v0.17.0's go.mod names).

KubeRay's operator does not run on the rig: building it from its module pulls its own
controller-runtime and Kubernetes versions beside the rig's, and what these tests
check is Stowplan's part, the writes: the API server takes them against the CRD's
structural schema (a field the schema does not know would be pruned, so each one is
read back), and every pod template carries the planned placement. The pods KubeRay
would create are copies of those templates; Stowplan's gate release places them as
it places a Job's (tested in test_live_cycle).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner.cluster import apply_live
from planner.output.document import plan_to_dict
from live_kit import GPU, HOSTNAME, POOL, RACK, Env

GATE = "stowplan.io/topology"


def cycle(kube, env):
    return apply_live(kube, lease_namespace=env.namespace, identity="test-planner", release_wait=0)


def template(cpu: str = "1", gpus: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"containers": [{"name": "ray", "image": "registry.invalid/ray:2",
                                     "resources": {"requests": requests, "limits": limits}}]}}


def cluster_spec(workers: int, gpus: int, rack: bool = False) -> dict[str, Any]:
    notes = {"kueue.x-k8s.io/podset-required-topology": RACK} if rack else {}
    return {"headGroupSpec": {"rayStartParams": {}, "template": template()},
            "workerGroupSpecs": [{"groupName": "GPU", "replicas": workers, "minReplicas": 0, "maxReplicas": 8,
                                  "rayStartParams": {}, "template": template("2", gpus, notes)}]}


def create(env: Env, plural: str, kind: str, name: str, spec: dict[str, Any], priority: str | None = None) -> None:
    labels = {"kueue.x-k8s.io/queue-name": env.lq}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    env.co.create_namespaced_custom_object("ray.io", "v1", env.namespace, plural, {
        "apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": name, "namespace": env.namespace,
                                                              "labels": labels}, "spec": spec})


def read(env: Env, plural: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = env.co.get_namespaced_custom_object("ray.io", "v1", env.namespace, plural, name)
    return obj


def pinned_nodes(pod_template: dict[str, Any]) -> list[str]:
    (term,) = pod_template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    (expr,) = term["matchExpressions"]
    assert expr["key"] == HOSTNAME and expr["operator"] == "In"
    return sorted(expr["values"])


def test_raycluster_and_rayjob_admitted_their_templates_carry_the_plan(kube, env_factory):
    env = env_factory(nodes=4, gpus=8, per_rack=2)
    create(env, "rayclusters", "RayCluster", "rc", {"suspend": True, **cluster_spec(2, 4, rack=True)})
    create(env, "rayjobs", "RayJob", "rj", {
        "suspend": True, "entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
        "submissionMode": "K8sJobMode", "submitterPodTemplate": template("500m"),
        "rayClusterSpec": cluster_spec(1, 2)})
    plan, report = cycle(kube, env)
    admitted = {a.workload.name: a for a in plan.admissions}
    assert sorted(admitted) == ["rc", "rj"] and report.conflicts == []
    assert sorted(r.name for r in report.admitted) == ["rc", "rj"]
    documents = {a.workload.name: d for a, d in zip(plan.admissions, plan_to_dict(plan)["admissions"])}

    rc = read(env, "rayclusters", "rc")
    assert rc["spec"]["suspend"] is False
    assert json.loads(rc["metadata"]["annotations"]["stowplan.io/assignment"]) == documents["rc"]["podSets"]
    sets = {ps.name: ps for ps in admitted["rc"].pod_sets}
    assert sorted(sets) == ["gpu", "head"] and sets["gpu"].count == 2
    for name, pod_template in (("head", rc["spec"]["headGroupSpec"]["template"]),
                               ("gpu", rc["spec"]["workerGroupSpecs"][0]["template"])):
        assert pod_template["spec"]["nodeSelector"] == {POOL: env.s}
        assert {"name": GATE} in pod_template["spec"]["schedulingGates"]
        assert pinned_nodes(pod_template) == sorted(sets[name].pods_per_node())
    racks = {env.core.read_node(n).metadata.labels[RACK] for n in sets["gpu"].pods_per_node()}
    assert len(racks) == 1                                  # the workers' rack requirement

    rj = read(env, "rayjobs", "rj")
    assert rj["spec"]["suspend"] is False
    sets = {ps.name: ps for ps in admitted["rj"].pod_sets}
    assert sorted(sets) == ["gpu", "head", "submitter"]
    assert pinned_nodes(rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]) == \
        sorted(sets["gpu"].pods_per_node())
    submitter = rj["spec"]["submitterPodTemplate"]
    assert pinned_nodes(submitter) == sorted(sets["submitter"].pods_per_node())
    assert len(pinned_nodes(submitter)) == 1 and not submitter["spec"].get("schedulingGates")

    again, report = cycle(kube, env)                         # running where the annotation says
    assert again.admissions == () and again.evictions == () and report.conflicts == []


def test_a_raycluster_is_evicted_by_suspending_it(kube, env_factory):
    env = env_factory(nodes=1, gpus=8, quota=8, preemption={"withinClusterQueue": "LowerPriority"})
    low, high = env.priority_class("low", 10), env.priority_class("high", 1000)
    create(env, "rayclusters", "RayCluster", "low", {"suspend": True, **cluster_spec(2, 4)}, priority=low)
    plan, _ = cycle(kube, env)
    assert [a.workload.name for a in plan.admissions] == ["low"]
    create(env, "rayclusters", "RayCluster", "high", {"suspend": True, **cluster_spec(1, 8)}, priority=high)
    plan, report = cycle(kube, env)
    assert [e.workload.name for e in plan.evictions] == ["low"] and [r.name for r in report.evicted] == ["low"]
    low_obj = read(env, "rayclusters", "low")
    assert low_obj["spec"]["suspend"] is True
    assert "stowplan.io/assignment" not in low_obj["metadata"]["annotations"]
    assert low_obj["metadata"]["annotations"]["stowplan.io/eviction-reason"].startswith("Preempted")
