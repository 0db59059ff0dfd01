"""Ray and Kueue's pod integration read from a snapshot and planned: which objects are
workloads, their pod sets, their states, and a plan that admits them (hand-counted)."""

from __future__ import annotations

import json
from typing import Any

from models import ObjectRef, WorkloadState
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.kinds import pods as kind
from planner.snapshot import build_snapshot

NS = "ml"
GPU = "nvidia.com/gpu"
Q = {"kueue.x-k8s.io/queue-name": "lq"}
T = "2026-12-01T10:00:00Z"


def tmpl(gpus: int = 0, cpu: str = "1") -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpus:
        requests[GPU] = gpus
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}


def cluster(workers: int, gpus: int) -> dict[str, Any]:
    return {"headGroupSpec": {"template": tmpl()},
            "workerGroupSpecs": [{"groupName": "GPU", "replicas": workers, "minReplicas": 0, "maxReplicas": 8,
                                  "template": tmpl(gpus)}]}


def pod(name: str, gpus: int, *, group: str | None = None, total: int | None = None, gated: bool = True,
        node: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = dict(Q)
    notes = dict(annotations or {})
    if group:
        labels[kind.GROUP_NAME_LABEL] = group
        notes[kind.TOTAL_COUNT] = str(total)
    spec: dict[str, Any] = tmpl(gpus)["spec"]
    if gated:
        spec["schedulingGates"] = [{"name": kind.GATE}]
    if node:
        spec["nodeName"] = node
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels,
                                                          "annotations": notes, "creationTimestamp": T},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def world(*objects: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
              "status": {"allocatable": {"cpu": "32", "memory": "256Gi", GPU: "8", "pods": "110"}}} for i in (1, 2)]
    kueue = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [
             {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "512Gi"},
                                         {"name": GPU, "nominalQuota": "16"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS},
         "spec": {"clusterQueue": "cq"}},
    ]
    return nodes + kueue + list(objects)


def ray(kind_name: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": kind_name,
            "metadata": {"name": name, "namespace": NS, "labels": Q, "creationTimestamp": T, **meta}, "spec": spec}


def snapshot() -> Any:
    return build_snapshot([{"apiVersion": "v1", "kind": "List", "items": world(
        ray("RayCluster", "rc", {"suspend": True, **cluster(2, 2)}),
        ray("RayJob", "rj", {"suspend": True, "shutdownAfterJobFinishes": True, "rayClusterSpec": cluster(1, 4)}),
        ray("RayJob", "shared", {"clusterSelector": {"ray.io/cluster": "rc"}}),
        ray("RayCluster", "rj-abcde", cluster(1, 4),
            ownerReferences=[{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "u"}]),
        pod("solo", 1),
        pod("g-0", 2, group="g", total=2), pod("g-1", 2, group="g", total=2),
        pod("h-0", 2, group="h", total=3),
    )}], source="test")


def test_which_objects_are_workloads_and_their_pod_sets() -> None:
    snap = snapshot()
    by_ref = {str(w.ref): w for w in snap.workloads}
    # the RayJob on an existing cluster is not Kueue's; the RayJob's own RayCluster is the RayJob's
    assert sorted(by_ref) == [f"Pod/{NS}/solo", f"PodGroup/{NS}/g", f"PodGroup/{NS}/h", f"RayCluster/{NS}/rc",
                              f"RayJob/{NS}/rj"]
    rc = by_ref[f"RayCluster/{NS}/rc"]
    assert [(p.name, p.count, p.request.get(GPU)) for p in rc.pod_sets] == [("gpu", 2, 2), ("head", 1, 0)]
    rj = by_ref[f"RayJob/{NS}/rj"]
    assert [(p.name, p.count) for p in rj.pod_sets] == [("gpu", 1), ("head", 1), ("submitter", 1)]
    assert rj.pod_sets[2].request.get("cpu") == 500
    (g,) = by_ref[f"PodGroup/{NS}/g"].pod_sets
    assert g.count == 2 and g.request.get(GPU) == 2
    assert all(w.state is WorkloadState.PENDING for w in snap.workloads)
    assert "1 of 3 pods" in (by_ref[f"PodGroup/{NS}/h"].blocked_reason or "")


def test_the_plan_admits_every_complete_workload() -> None:
    # (the default submitter asks 200Mi of memory: a queue that does not cover memory keeps the
    # RayJob waiting, as in Kueue; this one covers it)
    plan = plan_snapshot(snapshot(), SolveOptions(time_limit=10))
    # GPUs: rc 2 x 2, rj 1 x 4, solo 1, g 2 x 2 = 13 of 16; h waits for its pods
    assert sorted(str(a.workload) for a in plan.admissions) == [
        f"Pod/{NS}/solo", f"PodGroup/{NS}/g", f"RayCluster/{NS}/rc", f"RayJob/{NS}/rj"]
    assert [str(p.workload) for p in plan.pending] == [f"PodGroup/{NS}/h"]


def test_an_admitted_pod_group_reads_as_running_where_its_pods_are() -> None:
    entry = {"name": "r1", "count": 2, "flavors": {"cpu": "f", GPU: "f"},
             "topologyAssignment": {"levels": ["kubernetes.io/hostname"],
                                    "domains": [{"values": ["n1"], "count": 1}, {"values": ["n2"], "count": 1}]}}
    notes = {"stowplan.io/assignment": json.dumps([entry]), kind.ROLE: "r1"}
    snap = build_snapshot([{"apiVersion": "v1", "kind": "List", "items": world(
        pod("g-0", 2, group="g", total=2, gated=False, node="n2", annotations=notes),
        pod("g-1", 2, group="g", total=2, gated=False, node="n2", annotations=notes))}], source="test")
    (w,) = snap.workloads
    assert w.ref == ObjectRef("PodGroup", NS, "g") and w.state is WorkloadState.RUNNING
    # bound pods are the truth: both run on n2, whatever the annotation planned
    assert w.assignment[0].pods_per_node() == {"n2": 2}
    n2 = next(n for n in snap.nodes if n.name == "n2")
    assert n2.unmanaged.get(GPU) == 0          # its pods are the workload's, not unmanaged usage


# ---------------------------------------------------------------- LeaderWorkerSet: a workload per group

def lws(name: str, *, gated: bool = True, groups: dict[str, Any] | None = None) -> dict[str, Any]:
    worker, leader = tmpl(2), tmpl(0, "2")
    if gated:
        for t in (worker, leader):
            t["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    notes = {"stowplan.io/group-assignments": json.dumps(groups)} if groups else {}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": NS, "labels": Q, "annotations": notes, "creationTimestamp": T},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "leaderTemplate": leader,
                                                             "workerTemplate": worker}}}


def test_each_group_of_a_leaderworkerset_is_a_workload() -> None:
    admitted = {"podSets": [
        {"name": "leader", "count": 1, "flavors": {"cpu": "f"}, "topologyAssignment": {
            "levels": ["kubernetes.io/hostname"], "domains": [{"values": ["n1"], "count": 1}]}},
        {"name": "worker", "count": 2, "flavors": {"cpu": "f", GPU: "f"}, "topologyAssignment": {
            "levels": ["kubernetes.io/hostname"], "domains": [{"values": ["n1"], "count": 2}]}}],
        "admittedAt": T}
    snap = build_snapshot([{"apiVersion": "v1", "kind": "List", "items": world(
        lws("serve", groups={"0": admitted}), lws("free", gated=False))}], source="test")
    by_ref = {str(w.ref): w for w in snap.workloads}
    assert sorted(by_ref) == [f"LeaderWorkerSet/{NS}/free-0", f"LeaderWorkerSet/{NS}/free-1",
                              f"LeaderWorkerSet/{NS}/serve-0", f"LeaderWorkerSet/{NS}/serve-1"]
    s0, s1 = by_ref[f"LeaderWorkerSet/{NS}/serve-0"], by_ref[f"LeaderWorkerSet/{NS}/serve-1"]
    assert [(p.name, p.count, p.request.get(GPU)) for p in s1.pod_sets] == [("leader", 1, 0), ("worker", 2, 2)]
    assert s0.state is WorkloadState.RUNNING and s0.assignment[1].pods_per_node() == {"n1": 2}
    assert s1.state is WorkloadState.PENDING
    # templates that hold no pods: the groups run outside Stowplan, and that is said
    assert by_ref[f"LeaderWorkerSet/{NS}/free-0"].state is WorkloadState.EXTERNAL
    assert any("runs outside Stowplan" in p.message for p in snap.problems)
    plan = plan_snapshot(snap, SolveOptions(time_limit=10))
    assert [str(a.workload) for a in plan.admissions] == [f"LeaderWorkerSet/{NS}/serve-1"]
