"""planner.kinds: the registry, the Job and JobSet adapters, and kinds that are not planned.

Each adapter is checked on plain objects as the API server returns them: the pod sets
Kueue's integration builds, how its pods point back to it, and what admission and
eviction write (the live writes are tested in tests/cluster/)."""

from __future__ import annotations

import copy
from typing import Any

from models import ObjectRef, Resources
from planner import kinds
from planner.kinds.job import JobAdapter
from planner.kinds.jobset import JobSetAdapter
from planner.snapshot import build_snapshot

QUEUE = "kueue.x-k8s.io/queue-name"


def attempt(fn: Any, *args: Any, default: Any) -> Any:
    return fn(*args)


def no_lookup(kind: str, namespace: str, name: str) -> None:
    return None


def container(cpu: str = "1", gpu: int = 0) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    return {"name": "c", "resources": {"requests": requests}}


def test_registry_has_one_adapter_per_kind_and_finds_it_by_name() -> None:
    names = [a.kind for a in kinds.ADAPTERS]
    assert len(names) == len(set(names))
    assert {"Job", "JobSet"} <= set(names)
    job = kinds.by_kind("Job")
    assert job is not None and job.api_version == "batch/v1" and job.plural == "jobs"
    assert kinds.by_kind("Deployment") is None and kinds.by_kind(None) is None


def test_job_pod_set_is_main_with_parallelism_capped_by_completions() -> None:
    spec = {"parallelism": 4, "completions": 3, "template": {"spec": {"containers": [container()]}}}
    sources = JobAdapter().pod_sets(spec, {}, attempt, no_lookup, "ns")
    assert [(s.name, s.count, s.field, s.min_count) for s in sources] == [("main", 3, "spec.template", None)]
    assert JobAdapter().completions(spec) == 3


def test_jobset_pod_sets_are_replicated_jobs_with_replicas_times_parallelism() -> None:
    spec = {"replicatedJobs": [
        {"name": "launcher", "template": {"spec": {"template": {"spec": {"containers": [container()]}}}}},
        {"name": "workers", "replicas": 2,
         "template": {"spec": {"parallelism": 4, "template": {"spec": {"containers": [container(gpu=8)]}}}}},
    ]}
    sources = JobSetAdapter().pod_sets(spec, {}, attempt, no_lookup, "ns")
    assert [(s.name, s.count) for s in sources] == [("launcher", 1), ("workers", 8)]
    assert sources[1].field == "spec.replicatedJobs[1].template.spec.template"


def test_a_jobset_pod_belongs_to_the_jobset_before_its_child_job() -> None:
    meta = {"ownerReferences": [{"kind": "Job", "name": "js-workers-0"}]}
    labels = {"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
              "batch.kubernetes.io/job-name": "js-workers-0"}
    owners = list(kinds.pod_owners("ns", meta, labels))
    assert owners[0] == (ObjectRef("JobSet", "ns", "js"), "workers")
    assert (ObjectRef("Job", "ns", "js-workers-0"), "main") in owners


def test_suspend_absent_reads_as_suspended_and_admission_writes_fields_and_unsuspends() -> None:
    adapter = JobAdapter()
    obj: dict[str, Any] = {"kind": "Job", "spec": {"template": {"spec": {
        "containers": [container()], "nodeSelector": {"old": "x"}}}}}
    assert adapter.suspended(obj) and adapter.read_suspended(obj)
    fields = {"nodeSelector": {"pool": "a"}, "schedulingGates": [{"name": "g"}]}
    assert adapter.write_admission(obj, {"main": fields}) is None
    assert obj["spec"]["suspend"] is False
    assert obj["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    assert obj["spec"]["template"]["spec"]["schedulingGates"] == [{"name": "g"}]
    assert adapter.write_admission(copy.deepcopy(obj), {"other": fields}) == "it has no pod set other"
    adapter.write_eviction(obj)
    assert obj["spec"]["suspend"] is True


def test_jobset_prune_keeps_the_object_read_unchanged() -> None:
    obj = {"kind": "JobSet", "spec": {"replicatedJobs": [{"name": "w", "template": {
        "metadata": {"annotations": {"a": "1"}}, "spec": {"template": {"spec": {"containers": [container()]}}}}}]}}
    before = copy.deepcopy(obj)
    out = JobSetAdapter().prune(obj, lambda t: {"pruned": True}, lambda m: {"meta": "pruned"})
    assert obj == before
    rj = out["spec"]["replicatedJobs"][0]
    assert rj["template"]["spec"]["template"] == {"pruned": True}
    assert rj["template"]["metadata"] == {"meta": "pruned"}


def _objects(extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [
             {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu",
                                                                                    "nominalQuota": "8"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
         "spec": {"clusterQueue": "cq"}},
        *extra,
    ]


def test_queued_objects_of_unplanned_kinds_are_counted_and_reported_once_per_kind() -> None:
    def xgb(name: str) -> dict[str, Any]:
        return {"apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob",
                "metadata": {"name": name, "namespace": "ns", "labels": {QUEUE: "lq"}}, "spec": {}}

    unqueued = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}}
    snap = build_snapshot([{"apiVersion": "v1", "kind": "List", "items": _objects([xgb("a"), xgb("b"), unqueued])}],
                          source="snap.yaml")
    reported = [p for p in snap.problems if "not planned" in p.message]
    assert len(reported) == 1
    assert reported[0].message.startswith("kind XGBoostJob is not planned (kubeflow.org/v1): 2 object(s)")
    assert reported[0].file == "snap.yaml"
    assert snap.ignored_kinds == {"kubeflow.org/v1/XGBoostJob": 2, "apps/v1/Deployment": 1}
    assert snap.workloads == ()


def test_a_job_reads_through_its_adapter_into_a_workload() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "labels": {QUEUE: "lq"}},
           "spec": {"parallelism": 2, "template": {"spec": {"containers": [container("2")]}}}}
    snap = build_snapshot([{"apiVersion": "v1", "kind": "List", "items": _objects([job])}], source="s")
    (w,) = snap.workloads
    assert w.ref == ObjectRef("Job", "ns", "j")
    assert [(p.name, p.count, p.request) for p in w.pod_sets] == [("main", 2, Resources.of(cpu=2000, pods=1))]


# ---------------------------------------------------------------- Kubeflow kinds

from planner.kinds.mpijob import MPIJobAdapter  # noqa: E402
from planner.kinds.pytorchjob import PyTorchJobAdapter  # noqa: E402
from planner.kinds.trainjob import MANAGER, TrainJobAdapter  # noqa: E402


def replica(replicas: int | None, gpu: int = 0, pcn: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container("4", gpu)]}
    if pcn:
        spec["priorityClassName"] = pcn
    out: dict[str, Any] = {"template": {"spec": spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def test_pytorchjob_pod_sets_are_master_then_worker_in_lower_case_as_kueue_names_them() -> None:
    spec = {"pytorchReplicaSpecs": {"Worker": replica(3, gpu=8), "Master": replica(None, gpu=8)}}
    sources = PyTorchJobAdapter().pod_sets(spec, {}, attempt, no_lookup, "ns")
    assert [(s.name, s.count, s.field) for s in sources] == [
        ("master", 1, "spec.pytorchReplicaSpecs.Master.template"),
        ("worker", 3, "spec.pytorchReplicaSpecs.Worker.template")]


def test_kubeflow_priority_class_comes_from_the_run_policy_first() -> None:
    spec: dict[str, Any] = {"runPolicy": {"schedulingPolicy": {"priorityClass": "high"}},
                            "pytorchReplicaSpecs": {"Master": replica(1, pcn="low")}}
    adapter = PyTorchJobAdapter()
    sources = adapter.pod_sets(spec, {}, attempt, no_lookup, "ns")
    assert adapter.priority_class(spec, sources) == ("high", "spec.runPolicy.schedulingPolicy.priorityClass")
    del spec["runPolicy"]
    assert adapter.priority_class(spec, sources) == (
        "low", "spec.pytorchReplicaSpecs.Master.template.spec.priorityClassName")


def test_pytorchjob_admission_edits_each_replica_template_and_run_policy_suspend() -> None:
    obj: dict[str, Any] = {"kind": "PyTorchJob", "spec": {"runPolicy": {"suspend": True},
                           "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}}
    adapter = PyTorchJobAdapter()
    assert adapter.suspended(obj)
    assert adapter.write_admission(obj, {"master": {"nodeSelector": {"a": "1"}},
                                         "worker": {"nodeSelector": {"b": "2"}}}) is None
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["template"]["spec"]["nodeSelector"] == {"a": "1"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] == {"b": "2"}
    assert obj["spec"]["runPolicy"]["suspend"] is False and "suspend" not in obj["spec"]
    adapter.write_eviction(obj)
    assert obj["spec"]["runPolicy"]["suspend"] is True


def test_pytorchjob_pods_point_back_by_name_and_replica_type() -> None:
    labels = {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker",
              "training.kubeflow.org/operator-name": "pytorchjob-controller"}
    assert list(kinds.pod_owners("ns", {}, labels)) == [(ObjectRef("PyTorchJob", "ns", "bert"), "worker")]


def test_mpijob_pod_sets_are_launcher_then_worker_and_its_launcher_job_is_not_a_workload() -> None:
    spec = {"mpiReplicaSpecs": {"Worker": replica(2, gpu=4), "Launcher": replica(1)}}
    sources = MPIJobAdapter().pod_sets(spec, {}, attempt, no_lookup, "ns")
    assert [(s.name, s.count) for s in sources] == [("launcher", 1), ("worker", 2)]
    assert JobAdapter().is_child({"ownerReferences": [{"kind": "MPIJob", "name": "mpi"}]})
    launcher_pod = {"ownerReferences": [{"kind": "Job", "name": "mpi-launcher"}]}
    labels = {"training.kubeflow.org/job-name": "mpi", "training.kubeflow.org/job-role": "launcher",
              "batch.kubernetes.io/job-name": "mpi-launcher"}
    assert next(kinds.pod_owners("ns", launcher_pod, labels)) == (ObjectRef("MPIJob", "ns", "mpi"), "launcher")


RUNTIME = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
           "metadata": {"name": "torch"},
           "spec": {"mlPolicy": {"numNodes": 3, "torch": {}}, "template": {"spec": {"replicatedJobs": [
               {"name": "dataset-initializer", "template": {
                   "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
                   "spec": {"template": {"spec": {"containers": [container("2")]}}}}},
               {"name": "node", "template": {
                   "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                   "spec": {"template": {"spec": {
                       "containers": [{"name": "node", "resources": {"requests": {"cpu": "1"}}}],
                       "tolerations": [{"key": "gpu", "operator": "Exists"}]}}}}}]}}}}


def runtime_lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    return copy.deepcopy(RUNTIME) if (kind, namespace, name) == ("ClusterTrainingRuntime", "", "torch") else None


def test_trainjob_pod_sets_are_its_runtimes_replicated_jobs_with_the_trainers_size() -> None:
    adapter = TrainJobAdapter()
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch"}}
    sources = adapter.pod_sets(spec, {}, attempt, runtime_lookup, "ns")
    # the runtime's mlPolicy.numNodes sizes the trainer; the initializer runs its parallelism (1)
    assert [(s.name, s.count) for s in sources] == [("dataset-initializer", 1), ("node", 3)]
    spec["trainer"] = {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "64", "nvidia.com/gpu": "8"}}}
    sources = adapter.pod_sets(spec, {}, attempt, runtime_lookup, "ns")
    assert [(s.name, s.count) for s in sources] == [("dataset-initializer", 1), ("node", 2)]
    node = sources[1].template["spec"]["containers"][0]
    assert node["resources"] == {"requests": {"cpu": "64", "nvidia.com/gpu": "8"}}
    assert RUNTIME["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"][
        "containers"][0]["resources"] == {"requests": {"cpu": "1"}}   # the runtime read is left alone


def test_a_trainjob_whose_runtime_is_missing_waits_with_that_reason() -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "t", "namespace": "ns", "labels": {QUEUE: "lq"}},
           "spec": {"runtimeRef": {"name": "absent"}, "suspend": True}}
    snap = build_snapshot([{"apiVersion": "v1", "kind": "List", "items": _objects([job])}], source="s")
    (w,) = snap.workloads
    assert "ClusterTrainingRuntime absent does not exist" in (w.blocked_reason or "")
    assert any(p.field == "spec.runtimeRef" and p.ref == ObjectRef("TrainJob", "ns", "t") for p in snap.problems)


def test_a_trainjob_reads_its_cluster_runtime_from_the_snapshot() -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "t", "namespace": "ns", "labels": {QUEUE: "lq"}},
           "spec": {"runtimeRef": {"name": "torch", "kind": "ClusterTrainingRuntime"}, "suspend": True,
                    "trainer": {"numNodes": 2}}}
    snap = build_snapshot([{"apiVersion": "v1", "kind": "List", "items": _objects([job, RUNTIME])}], source="s")
    (w,) = snap.workloads
    assert [(p.name, p.count) for p in w.pod_sets] == [("dataset-initializer", 1), ("node", 2)]
    assert w.blocked_reason is None


def test_trainjob_admission_writes_its_own_runtime_patch_and_eviction_removes_it() -> None:
    adapter = TrainJobAdapter()
    other = {"manager": "someone-else", "trainingRuntimeSpec": {}}
    obj: dict[str, Any] = {"kind": "TrainJob", "metadata": {"namespace": "ns"},
                           "spec": {"suspend": True, "runtimeRef": {"name": "torch"}, "runtimePatches": [other]}}
    original = adapter.original_scheduling(obj, runtime_lookup)
    assert original == {"dataset-initializer": {}, "node": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    fields = {"nodeSelector": {"pool": "h100"}, "schedulingGates": [{"name": "stowplan.io/topology"}]}
    assert adapter.write_admission(obj, {"node": fields}) is None
    assert obj["spec"]["suspend"] is False
    assert obj["spec"]["runtimePatches"] == [other, {"manager": MANAGER, "trainingRuntimeSpec": {"template": {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": fields}}}}]}}}}]
    adapter.write_eviction(obj)
    assert obj["spec"]["suspend"] is True and obj["spec"]["runtimePatches"] == [other]


def test_a_trainjobs_pods_are_its_jobsets_and_that_jobset_is_not_a_workload() -> None:
    labels = {"jobset.sigs.k8s.io/jobset-name": "t", "jobset.sigs.k8s.io/replicatedjob-name": "node"}
    assert (ObjectRef("TrainJob", "ns", "t"), "node") in list(kinds.pod_owners("ns", {}, labels))
    assert JobSetAdapter().is_child({"ownerReferences": [{"kind": "TrainJob", "name": "t"}]})


def test_a_snapshot_file_keeps_no_env_or_command_of_a_trainjob_or_its_runtime() -> None:
    from planner.cluster.reader import pruned

    runtime = copy.deepcopy(RUNTIME)
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    node["containers"][0].update(env=[{"name": "TOKEN", "value": "secret"}], command=["torchrun"])
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
           "spec": {"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2, "image": "x", "env": [
               {"name": "TOKEN", "value": "secret"}]}, "runtimePatches": [
               {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                   {"name": "node", "template": {"spec": {"template": {"spec": {
                       "nodeSelector": {"a": "b"}, "containers": [{"name": "node", "env": [
                           {"name": "TOKEN", "value": "secret"}]}]}}}}}]}}}}]}}
    document = {"apiVersion": "v1", "kind": "List", "items": [job, runtime]}
    before = copy.deepcopy(document)
    out = pruned(document)
    assert document == before
    assert "secret" not in repr(out) and "torchrun" not in repr(out)
    kept_job, kept_runtime = out["items"]
    assert kept_job["spec"]["trainer"] == {"numNodes": 2}
    patch_spec = kept_job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert patch_spec == {"nodeSelector": {"a": "b"}}
    kept_node = kept_runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert kept_node["tolerations"] == node["tolerations"]


def test_under_an_mpi_policy_the_trainjobs_size_goes_to_the_node_job_less_the_launcher() -> None:
    runtime = copy.deepcopy(RUNTIME)
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, "mpi": {"runLauncherAsNode": True}}
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["name"] = "launcher"
    jobs[0]["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer"
    jobs[1]["name"] = "node"
    del jobs[1]["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"]
    jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "node"

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(runtime) if name == "torch" else None

    spec = {"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 4, "resourcesPerNode": {
        "requests": {"nvidia.com/gpu": "8"}}}}
    sources = TrainJobAdapter().pod_sets(spec, {}, attempt, lookup, "ns")
    # Trainer v2.2.0: the launcher keeps mlPolicy.numNodes (1); `node` runs numNodes - 1 = 3
    assert [(s.name, s.count) for s in sources] == [("launcher", 1), ("node", 3)]
    for source in sources:   # both run the trainer's resources (launcher: trainer job; node: launcher-as-node)
        assert source.template["spec"]["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "8"}}
