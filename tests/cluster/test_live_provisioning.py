"""ProvisioningRequest admission checks on the real control plane (issue 36 item 4), with
Kueue's CRDs and the cluster autoscaler's ProvisioningRequest CRD (autoscaling.x-k8s.io/v1,
from its Go module) installed. No autoscaler runs here: where one would answer a request,
the test writes the request's status itself and adds the KWOK nodes the autoscaler would
add, and says so where it does."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from kubernetes import client

from planner.cluster import Kube, apply_live
from planner.whatif.provisioning import pod_template_name
from live_kit import (
    BLOCK, GPU, HOSTNAME, POOL, PROVISIONING_CLASS as CLASS, RACK, Env, behind_a_provisioning_check,
    drop_provisioning_check, policy_file, wait_for,
)

AUTOSCALING = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=1, gpus=8, quota=64)
    yield made
    made.cleanup()
    drop_provisioning_check(made)


def cycle(kube: Kube, env: Env, policy: str, **kw: Any) -> Any:
    return apply_live(kube, policy_file=policy, lease_namespace=env.namespace, identity="test-planner",
                      release_wait=kw.pop("release_wait", 2), **kw)


def requests_of(env: Env) -> dict[str, dict[str, Any]]:
    group, version, plural = AUTOSCALING
    items = env.co.list_namespaced_custom_object(group, version, env.namespace, plural)["items"]
    return {o["metadata"]["name"]: o for o in items}


def set_status(env: Env, name: str, *conditions: str) -> None:
    """What the cluster autoscaler would write: the request's conditions, each True."""
    group, version, plural = AUTOSCALING
    env.co.patch_namespaced_custom_object_status(group, version, env.namespace, plural, name, {"status": {
        "conditions": [{"type": c, "status": "True", "reason": "ByTheTest", "message": "written by the test",
                        "lastTransitionTime": "2026-12-01T10:00:00Z"} for c in conditions]}})


def test_apply_creates_the_request_and_admits_once_provisioned_then_cleans_up(kube, env, tmp_path):
    check = behind_a_provisioning_check(env)
    policy = policy_file(env, tmp_path)
    # small and gone queue ahead of big (Kueue's order: priority, then age, then uid): the
    # apiserver stamps creation to the second, so big is made once that second has passed
    # (in one second the random uids would order them, and which request carries the new
    # nodes with them: tests/test_provisioning_tie.py)
    older = [env.job("small", pods=1, gpus=1),   # fits today, but its queue's check must be Ready first
             env.job("gone", pods=1, gpus=1)]
    stamped = max(j.metadata.creation_timestamp for j in older)
    wait_for("the second small and gone were made in to pass",
             lambda: datetime.now(timezone.utc) >= stamped + timedelta(seconds=1, milliseconds=100))
    made_big = env.job("big", pods=2, gpus=8)      # 16 GPUs on an 8-GPU cluster: no plan places it today
    assert made_big.metadata.creation_timestamp > stamped

    # cycle 1: nothing admitted; one request per workload, with its PodTemplate
    plan, report = cycle(kube, env, policy)
    assert plan.admissions == ()
    assert plan.provisioning is not None
    wanted = {r.workload.name: r for r in plan.provisioning.requests}
    assert sorted(wanted) == ["big", "gone", "small"] and all(r.create for r in wanted.values())
    # the what-if plans all three at once, in queue order: small and gone take 2 GPUs of the
    # one node, so big's two 8-GPU pods need two new nodes
    assert dict(wanted["big"].nodes) == {f"gpu8-{env.s}": 2}
    assert dict(wanted["small"].nodes) == {} and dict(wanted["gone"].nodes) == {}
    big = f"job-big-{check}-1"
    assert sorted(report.requests_created) == sorted(f"{env.namespace}/job-{n}-{check}-1" for n in wanted)
    made = requests_of(env)
    assert sorted(made) == sorted(f"job-{n}-{check}-1" for n in wanted)
    spec = made[big]["spec"]
    assert spec["provisioningClassName"] == CLASS and spec["parameters"] == {"ValidUntilSeconds": "600"}
    assert spec["podSets"] == [{"podTemplateRef": {"name": pod_template_name(big, "main")}, "count": 2}]
    assert made[big]["metadata"]["labels"]["stowplan.io/managed"] == "true"
    (owner,) = made[big]["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Job", "big")
    template = env.core.read_namespaced_pod_template(pod_template_name(big, "main"), env.namespace)
    pod = template.template.spec
    assert pod.containers[0].resources.requests[GPU] == "8"
    assert pod.node_selector == {POOL: env.s}       # the flavor's node labels, as Kueue's controller sets
    assert env.batch.read_namespaced_job("big", env.namespace).spec.suspend is True

    # a second cycle with no answer from the autoscaler makes nothing again
    plan, report = cycle(kube, env, policy)
    assert plan.admissions == () and report.requests_created == [] and report.requests_deleted == []

    # The test stands in for the cluster autoscaler: it marks big's request Provisioned=True
    # and adds the nodes it would have added (two, with the labels of the policy's template); small's
    # request Failed. And gone's Job is deleted (orphaning its dependents, so that only
    # the cycle, not the garbage collector, can remove its request).
    set_status(env, big, "Accepted", "Provisioned")
    set_status(env, f"job-small-{check}-1", "Failed")
    added = [f"n-{env.s}-added-{i}" for i in range(2)]
    for i, name in enumerate(added):
        env.nodes.append(name)
        env.cp.make_node(name, labels={POOL: env.s, BLOCK: f"b-{env.s}-new{i}", RACK: f"r-{env.s}-new{i}"},
                         allocatable={GPU: "8", "cpu": "96", "memory": "1Ti", "pods": "110"}, wait_ready=False)
    env.batch.delete_namespaced_job("gone", env.namespace, propagation_policy="Orphan")
    wait_for("the Job gone to go", lambda: "gone" not in {j.metadata.name for j in
                                                          env.batch.list_namespaced_job(env.namespace).items})

    # cycle 3: big is admitted on the nodes this snapshot holds; small's failed request is
    # replaced by attempt 2; gone's request and its PodTemplate are deleted
    plan, report = cycle(kube, env, policy, release_wait=10)
    assert [a.workload.name for a in plan.admissions] == ["big"]
    hosts = set(plan.admissions[0].pod_sets[0].pods_per_node())
    assert len(hosts) == 2 and hosts <= set(env.nodes)
    assert sorted(report.requests_deleted) == sorted(f"{env.namespace}/job-{n}-{check}-1" for n in ("gone", "small"))
    assert report.requests_created == [f"{env.namespace}/job-small-{check}-2"]
    left = requests_of(env)
    assert sorted(left) == sorted([big, f"job-small-{check}-2"])     # big's is kept while big runs
    with pytest.raises(client.ApiException) as err:
        env.core.read_namespaced_pod_template(pod_template_name(f"job-gone-{check}-1", "main"), env.namespace)
    assert err.value.status == 404
    pods = env.wait_bound("big", 2, timeout=120)
    assert {p.spec.node_name for p in pods} == hosts
    assert all(p.spec.node_selector[HOSTNAME] == p.spec.node_name for p in pods)
