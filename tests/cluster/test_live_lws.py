"""LeaderWorkerSet on the real control plane (LWS's CRD from its Go module, the version
Kueue v0.17.0's go.mod names): each group is a workload, as Kueue admits each group.

LWS's controller does not run on the rig: building it from its module pulls its own
controller-runtime and Kubernetes versions beside the rig's. The tests check
Stowplan's writes (the API server takes them against the CRD's structural schema, and
every field is read back: a field the schema does not know would be pruned) and then
make the pods LWS would make for a group (its labels, the admitted template's gate
and role annotation) so that the real scheduler binds them: they land where the plan
placed their group.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner.cluster import apply_live
from live_kit import GPU, HOSTNAME, POOL, Env, per_node, wait_for

GROUP = "leaderworkerset.x-k8s.io"
KUEUE_GATE = "kueue.x-k8s.io/admission"
GATE = "stowplan.io/topology"


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=4, gpus=8, per_rack=2)
    yield made
    made.cleanup()


def cycle(kube, env):
    return apply_live(kube, lease_namespace=env.namespace, identity="test-planner", release_wait=0)


def template(cpu: str, gpus: int = 0) -> dict[str, Any]:
    requests = {"cpu": cpu, **({GPU: str(gpus)} if gpus else {})}
    return {"spec": {"schedulingGates": [{"name": KUEUE_GATE}], "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "serve", "image": "registry.invalid/serve:1",
                                     "resources": {"requests": requests, "limits": {GPU: str(gpus)} if gpus else {}}}]}}


def read(env: Env, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = env.co.get_namespaced_custom_object(GROUP, "v1", env.namespace, "leaderworkersets", name)
    return obj


def lws_pod(env: Env, obj: dict[str, Any], group: int, worker: int) -> str:
    """The pod LWS would make: the admitted template, LWS's labels."""
    lwt = obj["spec"]["leaderWorkerTemplate"]
    source = lwt["leaderTemplate"] if worker == 0 else lwt["workerTemplate"]
    name = f"serve-{group}" + (f"-{worker}" if worker else "")
    env.core.create_namespaced_pod(env.namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": env.namespace, "annotations": source["metadata"]["annotations"],
                     "labels": {"leaderworkerset.sigs.k8s.io/name": "serve",
                                "leaderworkerset.sigs.k8s.io/group-index": str(group),
                                "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}},
        "spec": source["spec"]})
    return name


def test_each_group_is_admitted_and_its_pods_land_where_planned(kube, env):
    env.co.create_namespaced_custom_object(GROUP, "v1", env.namespace, "leaderworkersets", {
        "apiVersion": f"{GROUP}/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": env.namespace, "labels": {"kueue.x-k8s.io/queue-name": env.lq}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "leaderTemplate": template("1"),
                                                          "workerTemplate": template("2", 4)}}})
    plan, report = cycle(kube, env)
    admitted = {a.workload.name: a for a in plan.admissions}
    assert sorted(admitted) == ["serve-0", "serve-1"] and report.conflicts == []
    assert sorted(r.name for r in report.admitted) == ["serve-0", "serve-1"]

    obj = read(env, "serve")
    groups = json.loads(obj["metadata"]["annotations"]["stowplan.io/group-assignments"])
    assert sorted(groups) == ["0", "1"]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
        spec = lwt[key]["spec"]
        assert lwt[key]["metadata"]["annotations"]["stowplan.io/role"] == role
        assert spec["schedulingGates"] == [{"name": GATE}]          # LWS makes its pods held by Stowplan's gate
        assert spec["nodeSelector"] == {POOL: env.s}
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        nodes = {n for a in admitted.values() for ps in a.pod_sets if ps.name == role for n in ps.pods_per_node()}
        assert sorted(term["matchExpressions"][0]["values"]) == sorted(nodes)   # every admitted group's nodes

    # group 1's pods, as LWS makes them: the next cycle pins each to its group's nodes and ungates it
    names = [lws_pod(env, obj, 1, w) for w in range(3)]
    again, report = cycle(kube, env)
    assert again.admissions == () and again.evictions == () and report.released == 3

    def bound() -> list[Any] | None:
        pods = [env.core.read_namespaced_pod(n, env.namespace) for n in names]
        return pods if all(p.spec.node_name for p in pods) else None

    pods = wait_for("group 1 bound", bound, 90)
    want: dict[str, int] = {}
    for ps in admitted["serve-1"].pod_sets:
        for node, count in ps.pods_per_node().items():
            want[node] = want.get(node, 0) + count
    assert per_node(pods) == want
    for p in pods:
        assert p.spec.node_selector[HOSTNAME] == p.spec.node_name and not p.spec.scheduling_gates


def test_an_evicted_group_loses_its_entry_and_its_pods(kube, control_plane, api_client, namespace):
    small = Env(control_plane, api_client, namespace, nodes=1, gpus=8, quota=8,
                preemption={"withinClusterQueue": "LowerPriority"})
    try:
        low, high = small.priority_class("low", 10), small.priority_class("high", 1000)
        small.co.create_namespaced_custom_object(GROUP, "v1", namespace, "leaderworkersets", {
            "apiVersion": f"{GROUP}/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": namespace,
                         "labels": {"kueue.x-k8s.io/queue-name": small.lq, "kueue.x-k8s.io/priority-class": low}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "leaderTemplate": template("1"),
                                                              "workerTemplate": template("2", 8)}}})
        plan, _ = cycle(kube, small)
        assert [a.workload.name for a in plan.admissions] == ["serve-0"]
        names = [lws_pod(small, read(small, "serve"), 0, w) for w in range(2)]
        small.batch.create_namespaced_job(namespace, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "urgent", "namespace": namespace,
                         "labels": {"kueue.x-k8s.io/queue-name": small.lq, "kueue.x-k8s.io/priority-class": high}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "registry.invalid/c:1",
                 "resources": {"requests": {GPU: "8", "cpu": "1"}, "limits": {GPU: "8"}}}]}}}})
        plan, report = cycle(kube, small)
        assert [e.workload.name for e in plan.evictions] == ["serve-0"] and [r.name for r in report.evicted] == ["serve-0"]
        obj = read(small, "serve")
        assert json.loads(obj["metadata"]["annotations"]["stowplan.io/group-assignments"]) == {}

        def gone() -> bool:
            left = {p.metadata.name for p in small.core.list_namespaced_pod(namespace).items
                    if not p.metadata.deletion_timestamp}
            return not left & set(names)

        wait_for("the group's pods deleted", gone, 60)
    finally:
        small.cleanup()
