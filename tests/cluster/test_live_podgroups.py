"""Kubernetes' own gang scheduling (KEP-4671, v1.36's scheduling.k8s.io/v1alpha2 Workload and
PodGroup) for what Stowplan admits, on a control plane of its own started with the gates it
needs (rig.WORKLOAD_GATES): `apply --pod-groups` creates each admitted Job's PodGroup, a gang
of its admitted pods; kube-scheduler then binds them all where the plan pinned them, or none.
"""

from __future__ import annotations

import pytest
from kubernetes import client

import rig
from planner.cluster import Kube, apply_live, connect
from planner.cluster.podgroups import API_VERSION
from live_kit import GPU, HOSTNAME, RACK, Env, per_node, wait_for

GROUP, VERSION = API_VERSION.split("/")


@pytest.fixture(scope="module")
def gang_plane():
    cp = rig.ControlPlane(manifest=rig.build(), workload_api=True)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def env(gang_plane, request):
    with gang_plane.api_client() as api:
        core = client.CoreV1Api(api)
        namespace = f"gang-{rig_suffix()}"
        core.create_namespace({"metadata": {"name": namespace}})
        made = Env(gang_plane, api, namespace, nodes=2, gpus=4)
        try:
            yield made
        finally:
            made.cleanup()


def rig_suffix() -> str:
    import uuid

    return uuid.uuid4().hex[:6]


def gang_job(env, name, pods, gpus, group):
    body = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": env.namespace, "labels": {"kueue.x-k8s.io/queue-name": env.lq}},
        "spec": {"suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": 0,
                 "template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                              "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                       "schedulingGroup": {"podGroupName": group},
                                       "containers": [{"name": "train", "image": "registry.invalid/trainer:1",
                                                       "resources": {"requests": {GPU: str(gpus), "cpu": "1"},
                                                                     "limits": {GPU: str(gpus)}}}]}}},
    }
    return env.batch.create_namespaced_job(env.namespace, body)


def _scheduled(pod):
    return next(c for c in pod.status.conditions if c.type == "PodScheduled")


def cycle(gang_plane, env, **kw):
    kube = Kube(connect(str(gang_plane.kubeconfig)))
    return apply_live(kube, lease_namespace=env.namespace, identity="test-planner", release_wait=10,
                      pod_groups=True, **kw)


def pod_group(env, name):
    return env.co.get_namespaced_custom_object(GROUP, VERSION, env.namespace, "podgroups", name)


def test_the_rig_serves_the_workload_api(gang_plane):
    status, _ = gang_plane.http_get(f"/apis/{API_VERSION}")
    assert status == 200


def test_a_placeable_gang_binds_every_pod_where_planned(gang_plane, env):
    group = "train-pg"
    gang_job(env, "train", pods=4, gpus=2, group=group)
    plan, report = cycle(gang_plane, env)
    (admission,) = plan.admissions
    assert report.admitted and not report.conflicts
    pg = pod_group(env, group)
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert pg["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert pg["metadata"]["ownerReferences"][0]["name"] == "train"
    env.co.get_namespaced_custom_object(GROUP, VERSION, env.namespace, "workloads", group)
    pods = env.wait_bound("train", 4)
    assert per_node(pods) == admission.pod_sets[0].pods_per_node()
    for p in pods:
        assert p.spec.scheduling_group.pod_group_name == group
        assert p.spec.node_selector[HOSTNAME] == p.spec.node_name


def test_a_gang_with_one_unplaceable_pod_stays_all_pending(gang_plane, env):
    group = "wide-pg"
    gang_job(env, "wide", pods=4, gpus=2, group=group)
    blocker: dict[str, str] = {}

    def block(live, plan):
        # after planning, before any write: one node the plan uses fills up (a pod bound
        # there directly), so the pods pinned to it cannot be placed; the rest could be
        (admission,) = plan.admissions
        node = sorted(admission.pod_sets[0].pods_per_node())[0]
        blocker["node"] = node
        env.core.create_namespaced_pod(env.namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "blocker"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.invalid/x:1",
                                     "resources": {"requests": {GPU: "4"}, "limits": {GPU: "4"}}}]}})

    plan, report = cycle(gang_plane, env, before_apply=block)
    (admission,) = plan.admissions
    planned = admission.pod_sets[0].pods_per_node()
    assert set(planned) == set(env.nodes) and blocker["node"] in planned

    def refused():
        pods = env.pods("wide")
        return [p for p in pods if any(c.type == "PodScheduled" and c.status == "False"
                                       for c in (p.status.conditions or ()))]

    wait_for("kube-scheduler to find every pod of the gang unschedulable", lambda: len(refused()) == 4, 90)
    pods = env.pods("wide")
    assert len(pods) == 4
    # the pods pinned to the free node would fit on their own: the gang keeps them back
    assert [p.metadata.name for p in pods if p.spec.node_name] == []
    free = [p for p in pods if p.spec.node_selector[HOSTNAME] != blocker["node"]]
    assert free and all("waiting for minCount pods from a gang" in _scheduled(p).message for p in free)
    # and kube-scheduler says so on the PodGroup
    wait_for("the PodGroup's PodGroupScheduled=False", lambda: any(
        c["type"] == "PodGroupScheduled" and c["status"] == "False" and c["reason"] == "Unschedulable"
        for c in (pod_group(env, group).get("status") or {}).get("conditions") or ()), 60)

    # the blocker goes: the whole gang binds, where planned
    env.core.delete_namespaced_pod("blocker", env.namespace, grace_period_seconds=0)
    bound = env.wait_bound("wide", 4, timeout=120)
    assert per_node(bound) == planned
