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
    owners = kinds.pod_owners("ns", meta, labels)
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
    assert reported[0].message.startswith("kind XGBoostJob is not planned (kubeflow.org/v1/XGBoostJob): 2 object(s)")
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
