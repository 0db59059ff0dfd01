"""Elastic Ray clusters (Kueue v0.17's workload slices for RayCluster and RayJob): read from
objects, grown and shrunk by the plan per worker group, and the pure edits apply makes
(KubeRay's `replicas` and `scaleStrategy.workersToDelete`). The live writes are in
tests/cluster/test_live_ray_elastic.py."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from models import ObjectRef, PodSetAssignment, Resize
from planner import kinds
from planner.base.solve_options import SolveOptions
from planner.cluster import apply
from planner.cycle import plan_snapshot
from planner.kinds import ray
from planner.snapshot import build_snapshot
from planner.k8s.fields import Bad
from planner.verify import check_resizes, messages
from planner.verify.resize import resizable, resizable_pod_sets

NS = "ml"
GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
T = "2026-12-01T10:00:00Z"
ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}


def tmpl(gpus: int = 0) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": "1"}
    if gpus:
        requests[GPU] = gpus
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}


def world(*objects: dict[str, Any], gpus: int = 8) -> list[dict[str, Any]]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {HOST: f"n{i}"}},
              "status": {"allocatable": {"cpu": "32", "memory": "256Gi", GPU: str(gpus), "pods": "110"}}}
             for i in (1, 2)]
    kueue = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
                      {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                  {"name": GPU, "nominalQuota": "16"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS},
         "spec": {"clusterQueue": "cq"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
         "value": 1000},
    ]
    return nodes + kueue + list(objects)


def read(*objects: dict[str, Any], gpus: int = 8) -> Any:
    return build_snapshot([{"apiVersion": "v1", "kind": "List", "items": world(*objects, gpus=gpus)}], source="test")


def entry(name: str, per_node: dict[str, int], gpus: bool) -> dict[str, Any]:
    flavors = {"cpu": "f", GPU: "f"} if gpus else {"cpu": "f"}
    return {"name": name, "count": sum(per_node.values()), "flavors": flavors,
            "topologyAssignment": {"levels": [HOST], "domains": [{"values": [n], "count": c}
                                                                 for n, c in sorted(per_node.items())]}}


def group(replicas: int, low: int | None = 1, high: int | None = 6, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"groupName": "GPU", "replicas": replicas, "template": tmpl(1), **extra}
    if low is not None:
        out["minReplicas"] = low
    if high is not None:
        out["maxReplicas"] = high
    return out


def cluster_spec(*groups: dict[str, Any], autoscale: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"headGroupSpec": {"template": tmpl()}, "workerGroupSpecs": list(groups)}
    if autoscale:
        spec["enableInTreeAutoscaling"] = True
    return spec


def raycluster(name: str, *groups: dict[str, Any], running: dict[str, dict[str, int]] | None = None,
               elastic_job: bool = True, **meta: Any) -> dict[str, Any]:
    notes = dict(ELASTIC) if elastic_job else {}
    if running is not None:
        notes["stowplan.io/assignment"] = json.dumps([entry(n, where, n != "head") for n, where in running.items()])
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": notes, "creationTimestamp": T, "uid": f"uid-{name}", **meta},
            "spec": {"suspend": running is None, **cluster_spec(*groups)}}


def job(name: str, pods: int, priority: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "lq"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": labels, "creationTimestamp": T},
            "spec": {"suspend": True, "parallelism": pods, "template": tmpl(1)}}


def by_name(snap: Any) -> dict[str, Any]:
    return {w.ref.name: w for w in snap.workloads}


# ---------------------------------------------------------------- reading

def test_a_running_elastic_raycluster_reads_its_worker_group_as_resizable() -> None:
    snap = read(raycluster("rc", group(3, low=2, high=6), running={"head": {"n1": 1}, "gpu": {"n1": 3}}))
    (rc,) = snap.workloads
    sets = {ps.name: ps for ps in rc.pod_sets}
    assert rc.elastic_job and resizable(rc)
    assert (sets["gpu"].count, sets["gpu"].min_count) == (6, 2)     # maxReplicas the most, minReplicas the floor
    assert (sets["head"].count, sets["head"].min_count) == (1, None)
    assert {a.name: a.count for a in rc.assignment} == {"gpu": 3, "head": 1}   # replicas, as admitted
    assert resizable_pod_sets(rc) == ("gpu",)
    assert not snap.problems


def test_a_pending_elastic_raycluster_is_a_gang_at_its_replicas() -> None:
    # Kueue admits a Ray cluster's first slice at replicas, with no partial admission: 3 of
    # 2..6 with only 2 GPUs free (the other 14 taken by a running Job) waits
    running_job = job("big", 14)
    running_job["spec"]["suspend"] = False
    running_job["metadata"]["annotations"] = {"stowplan.io/assignment": json.dumps(
        [entry("main", {"n1": 8, "n2": 6}, True)])}
    snap = read(raycluster("rc", group(3, low=2, high=6)), running_job)
    rc = by_name(snap)["rc"]
    assert {(ps.name, ps.count, ps.min_count) for ps in rc.pod_sets} == {("gpu", 3, None), ("head", 1, None)}
    plan = plan_snapshot(snap)
    assert [p.workload.name for p in plan.pending] == ["rc"] and not plan.admissions


def test_when_a_worker_group_cannot_be_resized() -> None:
    # KubeRay's default maxReplicas (none given): no growth, and at its floor no shrink either;
    # several hosts a replica: never (a slice here is of single pods); minReplicas above maxReplicas: refused
    entries = ray.cluster_entries(cluster_spec(group(2, low=2, high=None)), "spec", True, True)
    assert [(e.name, e.size, e.floor) for e in entries] == [("head", 1, None), ("gpu", 2, None)]
    entries = ray.cluster_entries(cluster_spec(group(2, low=1, high=None)), "spec", True, True)
    assert [(e.name, e.size, e.floor) for e in entries][1] == ("gpu", 2, 1)       # it may still shrink
    entries = ray.cluster_entries(cluster_spec(group(2, numOfHosts=2)), "spec", True, True)
    assert [(e.name, e.size, e.floor) for e in entries][1] == ("gpu", 4, None)
    entries = ray.cluster_entries(cluster_spec(group(2)), "spec", False, True)   # not elastic
    assert [(e.name, e.size, e.floor) for e in entries][1] == ("gpu", 2, None)
    with pytest.raises(Bad) as err:
        ray.cluster_entries(cluster_spec(group(2, low=7, high=6)), "spec", True, True)
    assert err.value.field == "spec.workerGroupSpecs[0].minReplicas"
    # admitted below its minReplicas (Kueue admits replicas): it keeps its floor, and only grows
    entries = ray.cluster_entries(cluster_spec(group(1, low=3, high=6)), "spec", True, True)
    assert [(e.name, e.size, e.floor) for e in entries][1] == ("gpu", 6, 3)


def test_a_group_running_below_its_floor_only_grows() -> None:
    snap = read(raycluster("rc", group(1, low=3, high=4), running={"head": {"n1": 1}, "gpu": {"n1": 1}}),
                job("urgent", 16, priority="high"))
    plan = plan_snapshot(snap)
    # 16 GPUs, the cluster holds 1: the urgent Job cannot have it by a shrink (below the floor
    # already), only by evicting the whole cluster
    assert [e.workload.name for e in plan.evictions] == ["rc"] and not plan.resizes
    snap = read(raycluster("rc", group(1, low=3, high=4), running={"head": {"n1": 1}, "gpu": {"n1": 1}}))
    (resize,) = plan_snapshot(snap).resizes
    assert (resize.from_count, resize.to_count) == (1, 4)


def rayjob(name: str, autoscale: bool, running: dict[str, dict[str, int]]) -> dict[str, Any]:
    notes = {**ELASTIC, "stowplan.io/assignment": json.dumps(
        [entry(n, where, n == "gpu") for n, where in running.items()])}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": notes, "creationTimestamp": T, "uid": f"uid-{name}"},
            "spec": {"suspend": False, "shutdownAfterJobFinishes": True, "submitterPodTemplate": tmpl(),
                     "rayClusterSpec": cluster_spec(group(2, low=1, high=4), autoscale=autoscale)}}


def test_a_rayjob_is_elastic_only_with_in_tree_autoscaling_and_other_kinds_never() -> None:
    placed = {"head": {"n1": 1}, "gpu": {"n1": 2}, "submitter": {"n1": 1}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                           "annotations": dict(ELASTIC), "creationTimestamp": T},
              "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                  "parallelism": 2, "completions": 2, "template": tmpl(1)}}}]}}
    snap = read(rayjob("scaled", True, placed), rayjob("fixed", False, placed), jobset)
    got = by_name(snap)
    assert got["scaled"].elastic_job and resizable_pod_sets(got["scaled"]) == ("gpu",)
    assert {ps.name: ps.count for ps in got["scaled"].pod_sets}["gpu"] == 4
    assert not got["fixed"].elastic_job and {ps.name: ps.count for ps in got["fixed"].pod_sets}["gpu"] == 2
    assert not got["js"].elastic_job
    why = {p.ref.name: p for p in snap.problems if p.field == "metadata.annotations[kueue.x-k8s.io/elastic-job]"}
    assert sorted(why) == ["fixed", "js"]
    assert "enableInTreeAutoscaling" in why["fixed"].message and "not elastic" in why["fixed"].message
    assert "not a JobSet" in why["js"].message


# ---------------------------------------------------------------- planning

@pytest.mark.parametrize("solver", ["milp", "greedy"])
def test_the_plan_grows_a_worker_group_by_a_slice_and_never_the_head(solver: str) -> None:
    snap = read(raycluster("rc", group(3, low=1, high=6), running={"head": {"n1": 1}, "gpu": {"n1": 3}}))
    plan = plan_snapshot(snap, SolveOptions(solver=solver))
    assert not plan.admissions and not plan.evictions
    (resize,) = plan.resizes
    assert (resize.pod_set, resize.from_count, resize.to_count) == ("gpu", 3, 6)
    assert resize.slice is not None and resize.slice.count == 3 and not resize.release
    assert dict(resize.slice.flavors) == {"cpu": "f", GPU: "f"}   # the flavors it runs under


@pytest.mark.parametrize("solver", ["milp", "greedy"])
def test_releasing_workers_replaces_evicting_the_cluster(solver: str) -> None:
    # 8 GPUs: the cluster runs 6 workers (floor 2), 2 GPUs are free; a high-priority Job of 4
    # needs 2 more: releasing 2 workers is enough, evicting the cluster would lose it all
    snap = read(raycluster("rc", group(6, low=2, high=6), running={"head": {"n1": 1}, "gpu": {"n1": 3, "n2": 3}}),
                job("urgent", 4, priority="high"), gpus=4)
    plan = plan_snapshot(snap, SolveOptions(solver=solver))
    assert [a.workload.name for a in plan.admissions] == ["urgent"] and not plan.evictions
    (resize,) = plan.resizes
    assert (resize.pod_set, resize.from_count, resize.to_count) == ("gpu", 6, 4)
    assert sum(c for _, c in resize.release) == 2 and resize.slice is None
    assert resize.reason == "Preempted" and [r.name for r in resize.for_] == ["urgent"]


def test_the_verifier_refuses_a_resize_of_the_head_and_below_the_floor() -> None:
    snap = read(raycluster("rc", group(4, low=2, high=6), running={"head": {"n1": 1}, "gpu": {"n1": 4}}))
    plan = plan_snapshot(snap)
    ref = snap.workloads[0].ref
    head = Resize(ref, "cq", "head", 1, 2, slice=PodSetAssignment("head", 1, {"cpu": "f"}, (HOST,), ((("n2",), 1),)))
    found = messages(check_resizes(snap, dataclasses.replace(plan, resizes=(head,))))
    assert any("pod set head is not one it may resize (gpu)" in v for v in found)
    low = Resize(ref, "cq", "gpu", 4, 1, release=(("n1", 3),), reason="Preempted")
    found = messages(check_resizes(snap, dataclasses.replace(plan, resizes=(low,))))
    assert any("1 pods of gpu is below its minimum 2" in v for v in found)


# ---------------------------------------------------------------- what apply writes (pure parts)

def test_write_resize_sets_replicas_and_names_the_workers_kuberay_deletes() -> None:
    cluster = raycluster("rc", group(6), {**group(2), "groupName": "Small"})
    cluster["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": ["old"]}
    assert ray.resize_refusal(cluster, {"gpu": (6, 4)}) is None
    ray.write_resize(cluster, {"gpu": 4}, {"gpu": ["rc-gpu-a", "old"]})
    gpu, small = cluster["spec"]["workerGroupSpecs"]
    assert gpu["replicas"] == 4 and gpu["scaleStrategy"]["workersToDelete"] == ["old", "rc-gpu-a"]
    assert small["replicas"] == 2 and "scaleStrategy" not in small
    # someone else changed it since the plan: refused, naming the group
    assert ray.resize_refusal(cluster, {"gpu": (4, 6)}) is None    # at its new size already: a retry
    assert "has 4 replicas, not 5" in (ray.resize_refusal(cluster, {"gpu": (5, 6)}) or "")
    assert "has no worker group cpu" in (ray.resize_refusal(cluster, {"cpu": (1, 2)}) or "")
    hosts = raycluster("rh", group(2, numOfHosts=2))
    assert "numOfHosts 2" in (ray.resize_refusal(hosts, {"gpu": (4, 6)}) or "")


def pod(name: str, node: str, ready: bool, created: str, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_the_pods_a_shrink_releases_not_ready_first_then_the_newest() -> None:
    pods = [pod("a", "n1", True, "2026-01-01T00:00:01Z"), pod("b", "n1", True, "2026-01-01T00:00:03Z"),
            pod("c", "n1", False, "2026-01-01T00:00:00Z"), pod("d", "n2", True, "2026-01-01T00:00:09Z"),
            pod("e", "n1", True, "2026-01-01T00:00:05Z", phase="Succeeded")]
    assert [p["metadata"]["name"] for p in apply.pods_to_release(pods, (("n1", 2),))] == ["c", "b"]
    assert [p["metadata"]["name"] for p in apply.pods_to_release(pods, (("n1", 1), ("n2", 5)))] == ["c", "d"]


def test_one_write_per_object_and_which_templates_stay_unpinned() -> None:
    a, b = ObjectRef("RayCluster", NS, "a"), ObjectRef("Job", NS, "b")
    resizes = [Resize(a, "cq", "gpu", 2, 3), Resize(b, "cq", "main", 2, 1), Resize(a, "cq", "cpu", 1, 2)]
    assert [[r.pod_set for r in g] for g in apply.resize_groups(resizes)] == [["gpu", "cpu"], ["main"]]
    rc, rj = kinds.by_kind("RayCluster"), kinds.by_kind("RayJob")
    assert rc is not None and rj is not None
    assert apply.elastic_object(rc, raycluster("a", group(2)))
    assert not apply.elastic_object(rc, raycluster("b", group(2), elastic_job=False))
    placed = {"head": {"n1": 1}, "gpu": {"n1": 2}, "submitter": {"n1": 1}}
    assert apply.elastic_object(rj, rayjob("s", True, placed)) and not apply.elastic_object(rj, rayjob("f", False, placed))

