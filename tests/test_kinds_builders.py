"""Pod sets of Ray, LeaderWorkerSet and plain pods, as Kueue v0.17's integrations build them.

Each expectation is worked out by hand from Kueue's source (raycluster.BuildPodSets,
rayjob.PodSets, leaderworkerset.podSets, pod.constructGroupPodSets).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planner.kinds import leaderworkerset as lws
from planner.kinds import pods, ray
from planner.k8s.fields import Bad
from planner.k8s.podsets import build_pod_set


def template(cpu: str, gpu: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}


def cluster_spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "headGroupSpec": {"template": template("2")},
        "workerGroupSpecs": [
            {"groupName": "GPU-Workers", "replicas": 3, "minReplicas": 1, "maxReplicas": 5,
             "template": template("4", 1, {"kueue.x-k8s.io/podset-required-topology": "example.com/rack"})},
            {"groupName": "multihost", "replicas": 2, "numOfHosts": 4, "template": template("1")},
            {"groupName": "default-one", "template": template("1")},
        ],
    }
    spec.update(extra)
    return spec


def counts(entries: list[ray.Entry]) -> list[tuple[str, int]]:
    return [(e.name, e.size) for e in entries]


# ---------------------------------------------------------------- RayCluster

def test_raycluster_head_then_each_worker_group_replicas_times_hosts() -> None:
    entries = ray.ray_cluster_entries(cluster_spec(), {})
    # head 1; GPU-Workers lowercased, replicas 3 (minReplicas 1 not used); 2 x 4 hosts = 8; replicas absent = 1
    assert counts(entries) == [("head", 1), ("gpu-workers", 3), ("multihost", 8), ("default-one", 1)]
    assert entries[1].field == "spec.workerGroupSpecs[0].template"


def test_raycluster_pod_set_carries_request_and_topology_request() -> None:
    entry = ray.ray_cluster_entries(cluster_spec(), {})[1]
    pod_set = build_pod_set(entry.name, entry.size, entry.template, entry.field)
    assert dict(pod_set.request.items()) == {"cpu": 4000, "nvidia.com/gpu": 1, "pods": 1}
    assert pod_set.min_count is None                     # no partial admission for Ray
    assert (pod_set.topology.mode, pod_set.topology.level) == ("required", "example.com/rack")


def test_raycluster_zero_replica_group_is_dropped() -> None:
    spec = cluster_spec()
    spec["workerGroupSpecs"][2]["replicas"] = 0
    assert [e.name for e in ray.ray_cluster_entries(spec, {})] == ["head", "gpu-workers", "multihost"]


def test_raycluster_autoscaling_waits_unless_workload_slicing() -> None:
    with pytest.raises(Bad) as err:
        ray.ray_cluster_entries(cluster_spec(enableInTreeAutoscaling=True), {})
    assert err.value.field == "spec.enableInTreeAutoscaling"
    sliced = ray.ray_cluster_entries(cluster_spec(enableInTreeAutoscaling=True), {ray.ELASTIC: "true"})
    assert counts(sliced)[1] == ("gpu-workers", 3)       # planned at replicas, as Kueue sizes a slice


@pytest.mark.parametrize("change, field", [
    (lambda s: s["workerGroupSpecs"].__setitem__(0, {**s["workerGroupSpecs"][0], "groupName": "Head"}),
     "spec.workerGroupSpecs[0].groupName"),
    (lambda s: s["workerGroupSpecs"].__setitem__(2, {**s["workerGroupSpecs"][2], "groupName": "MultiHost"}),
     "spec.workerGroupSpecs[2].groupName"),
    (lambda s: s.__setitem__("workerGroupSpecs", [{"groupName": f"g{i}", "template": template("1")}
                                                  for i in range(8)]), "spec.workerGroupSpecs"),
    (lambda s: s.pop("headGroupSpec"), "spec.headGroupSpec"),
    (lambda s: s["workerGroupSpecs"][1].__setitem__("replicas", "two"), "spec.workerGroupSpecs[1].replicas"),
])
def test_raycluster_what_kueue_refuses_names_the_field(change: Any, field: str) -> None:
    spec = cluster_spec()
    change(spec)
    with pytest.raises(Bad) as err:
        ray.ray_cluster_entries(spec, {})
    assert err.value.field == field


def test_raycluster_template_paths_point_into_the_object() -> None:
    paths = ray.template_paths("RayCluster", cluster_spec())
    assert paths == {"head": ("spec", "headGroupSpec", "template"),
                     "gpu-workers": ("spec", "workerGroupSpecs", "0", "template"),
                     "multihost": ("spec", "workerGroupSpecs", "1", "template"),
                     "default-one": ("spec", "workerGroupSpecs", "2", "template")}


# ---------------------------------------------------------------- RayJob

def job_spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                            "rayClusterSpec": cluster_spec()}
    spec.update(extra)
    return spec


def test_rayjob_default_mode_adds_kuberays_default_submitter() -> None:
    entries = ray.ray_job_entries(job_spec(), {})
    assert entries is not None
    assert counts(entries)[-1] == ("submitter", 1)
    assert entries[1].field == "spec.rayClusterSpec.workerGroupSpecs[0].template"
    submitter = build_pod_set("submitter", 1, entries[-1].template, entries[-1].field)
    assert dict(submitter.request.items()) == {"cpu": 500, "memory": 200 * 2**20, "pods": 1}


def test_rayjob_own_submitter_template_and_other_modes() -> None:
    own = ray.ray_job_entries(job_spec(submitterPodTemplate=template("250m")), {})
    assert own is not None and own[-1].field == "spec.submitterPodTemplate"
    assert dict(build_pod_set("s", 1, own[-1].template, own[-1].field).request.items()) == {"cpu": 250, "pods": 1}
    for mode in ("HTTPMode", "InteractiveMode", "SidecarMode"):
        entries = ray.ray_job_entries(job_spec(submissionMode=mode), {})
        assert entries is not None and [e.name for e in entries] == ["head", "gpu-workers", "multihost",
                                                                     "default-one"]
    paths = ray.template_paths("RayJob", job_spec(submitterPodTemplate=template("1")))
    assert paths["head"] == ("spec", "rayClusterSpec", "headGroupSpec", "template")
    assert paths["submitter"] == ("spec", "submitterPodTemplate")
    assert "submitter" not in ray.template_paths("RayJob", job_spec())   # the default one: nothing to write


def test_rayjob_on_an_existing_cluster_is_not_kueues() -> None:
    assert ray.ray_job_entries({"clusterSelector": {"ray.io/cluster": "shared"}}, {}) is None


@pytest.mark.parametrize("spec, field", [
    (job_spec(clusterSelector={"ray.io/cluster": "shared"}), "spec.clusterSelector"),
    ({"shutdownAfterJobFinishes": True}, "spec.rayClusterSpec"),
    (job_spec(shutdownAfterJobFinishes=False), "spec.shutdownAfterJobFinishes"),
    (job_spec(rayClusterSpec=cluster_spec(enableInTreeAutoscaling=True)),
     "spec.rayClusterSpec.enableInTreeAutoscaling"),
])
def test_rayjob_what_kueue_refuses_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(Bad) as err:
        ray.ray_job_entries(spec, {})
    assert err.value.field == field


# ---------------------------------------------------------------- LeaderWorkerSet

def lws_spec(size: int | None, leader: bool, replicas: int | None = 2) -> dict[str, Any]:
    lwt: dict[str, Any] = {"workerTemplate": template("8", 8)}
    if size is not None:
        lwt["size"] = size
    if leader:
        lwt["leaderTemplate"] = template("2")
    spec: dict[str, Any] = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


def test_lws_with_leader_is_leader_plus_size_minus_one_workers() -> None:
    entries = lws.group_entries(lws_spec(4, leader=True))
    assert counts(entries) == [("leader", 1), ("worker", 3)]
    assert entries[0].field == "spec.leaderWorkerTemplate.leaderTemplate"
    assert lws.groups(lws_spec(4, leader=True)) == 2


def test_lws_without_leader_is_main_of_size_and_defaults() -> None:
    assert counts(lws.group_entries(lws_spec(4, leader=False))) == [("main", 4)]
    assert counts(lws.group_entries(lws_spec(None, leader=False, replicas=None))) == [("main", 1)]
    assert lws.groups(lws_spec(None, leader=False, replicas=None)) == 1
    assert counts(lws.group_entries(lws_spec(1, leader=True))) == [("leader", 1)]   # worker set of 0 dropped


def test_lws_roles_of_pods_and_paths() -> None:
    labels = {lws.NAME_LABEL: "serve", lws.GROUP_INDEX_LABEL: "1"}
    assert lws.role_of({**labels, lws.WORKER_INDEX_LABEL: "0"}, leader=True) == "leader"
    assert lws.role_of({**labels, lws.WORKER_INDEX_LABEL: "3"}, leader=True) == "worker"
    assert lws.role_of({**labels, lws.WORKER_INDEX_LABEL: "0"}, leader=False) == "main"
    assert lws.template_paths(lws_spec(2, leader=True))["worker"] == ("spec", "leaderWorkerTemplate",
                                                                       "workerTemplate")
    assert lws.group_name("serve", 1) == "serve-1"


def test_lws_bad_size_names_the_field() -> None:
    with pytest.raises(Bad) as err:
        lws.group_entries(lws_spec(0, leader=True))
    assert err.value.field == "spec.leaderWorkerTemplate.size"


# ---------------------------------------------------------------- pods

def member(name: str, cpu: str, total: str | None = "3", phase: str = "Pending", role: str | None = None,
           deleting: bool = False) -> pods.Member:
    annotations = {} if total is None else {pods.TOTAL_COUNT: total}
    if role:
        annotations[pods.ROLE_HASH] = role
    spec = template(cpu)["spec"]
    spec["schedulingGates"] = [{"name": pods.GATE}]
    return pods.Member(name, annotations, spec, phase, deleting)


def test_pod_group_roles_by_spec_shape() -> None:
    entries, active, total = pods.group_entries([member("w2", "4"), member("driver", "1"), member("w1", "4")])
    assert (active, total) == (3, 3)
    by_count = sorted((e.size, e.field) for e in entries)
    # the two 4-cpu pods share a role whose template is the first by name (w1)
    assert by_count == [(1, "pods[driver]"), (2, "pods[w1]")]
    assert all(len(e.name) == 8 for e in entries)


def test_pod_group_role_hash_annotation_wins_and_gates_are_not_shape() -> None:
    a, b = member("a", "4", role="leader"), member("b", "4", role="worker")
    entries, _, _ = pods.group_entries([a, b, member("c", "4", role="worker")])
    assert counts(entries) == [("leader", 1), ("worker", 2)]
    ungated = copy.deepcopy(b.spec)
    ungated.pop("schedulingGates")
    assert pods.role_hash(ungated) == pods.role_hash(b.spec)


def test_pod_group_counts_only_runnable_pods() -> None:
    entries, active, total = pods.group_entries([member("a", "1"), member("b", "1", phase="Failed"),
                                                 member("c", "1", deleting=True)])
    assert (active, total) == (1, 3) and counts(entries)[0][1] == 1


def test_pod_group_total_count_must_agree_and_be_positive() -> None:
    with pytest.raises(Bad) as err:
        pods.group_entries([member("a", "1", total="2"), member("b", "1", total="3")])
    assert err.value.field == f"metadata.annotations[{pods.TOTAL_COUNT}]"
    with pytest.raises(Bad) as err:
        pods.group_entries([member("a", "1", total="zero")])
    assert err.value.field == f"pods[a].metadata.annotations[{pods.TOTAL_COUNT}]"
    with pytest.raises(Bad):
        pods.group_entries([member("a", "1", total=None)])


def test_pod_group_of_nine_roles_is_refused() -> None:
    with pytest.raises(Bad):
        pods.group_entries([member(f"p{i}", f"{i + 1}", total="9") for i in range(9)])


def test_gate() -> None:
    assert pods.is_gated({"schedulingGates": [{"name": pods.GATE}]})
    assert not pods.is_gated({"schedulingGates": [{"name": "other"}]})
    assert not pods.is_gated({})


# ---------------------------------------------------------------- pods: placement and the admission patch

def test_pod_workload_refs_and_pod_sets() -> None:
    assert pods.workload_of("ns", "p", {pods.GROUP_NAME_LABEL: "g"}) == pods.ObjectRef("PodGroup", "ns", "g")
    assert pods.workload_of("ns", "p", {}) == pods.ObjectRef("Pod", "ns", "p")
    assert pods.pod_set_of(pods.ObjectRef("Pod", "ns", "p"), {pods.ROLE_HASH: "x"}) == "main"
    assert pods.pod_set_of(pods.ObjectRef("PodGroup", "ns", "g"), {pods.ROLE_HASH: "x"}) == "x"
    assert pods.pod_set_of(pods.ObjectRef("PodGroup", "ns", "g"), {pods.ROLE_HASH: "x", pods.ROLE: "y"}) == "y"


def test_placement_keeps_placed_pods_and_fills_by_name() -> None:
    # role w: 2 on n1, 1 on n2; "w-b" already sits on n1, so n1 has one place left
    got = pods.placement([("w-c", None, "w"), ("w-a", None, "w"), ("w-b", "n1", "w"), ("d", None, "d"),
                          ("w-d", None, "w")], {"w": {"n2": 1, "n1": 2}, "d": {"n3": 1}})
    assert got == {"w-a": "n1", "w-c": "n2", "d": "n3"}    # "w-d" (last by name) has no place left


def test_admission_patch_pins_adds_tolerations_annotations_and_removes_the_gate() -> None:
    pod = {"metadata": {"name": "p", "resourceVersion": "7", "annotations": {"a": "b"}},
           "spec": {"schedulingGates": [{"name": "other"}, {"name": pods.GATE}], "nodeSelector": {"disk": "ssd"}}}
    ops = pods.admission_patch(pod, "n1", [{"key": "gpu", "operator": "Exists"}], {"stowplan.io/assignment": "[]"})
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1hostname", "value": "n1"},
        {"op": "add", "path": "/spec/tolerations", "value": [{"key": "gpu", "operator": "Exists"}]},
        {"op": "add", "path": "/metadata/annotations/stowplan.io~1assignment", "value": "[]"},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]
    bare = {"metadata": {"resourceVersion": "1"}, "spec": {"schedulingGates": [{"name": pods.GATE}],
                                                           "tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    ops = pods.admission_patch(bare, "n2", [{"key": "gpu", "operator": "Exists"}], {"k": "v"})
    assert ops[1:] == [{"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "n2"}},
                       {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
                       {"op": "remove", "path": "/spec/schedulingGates/0"}]
