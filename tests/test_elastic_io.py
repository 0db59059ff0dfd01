"""The elastic and gang edges that touch objects (pure parts): reading an elastic Job and
its most, apply's parallelism write, and the Workload/PodGroup pair apply creates."""

from __future__ import annotations

import json
from typing import Any

from models import Admission, NodePins, ObjectRef, PodSetAssignment
from planner.cluster import apply, podgroups
from planner.snapshot import build_snapshot
from test_kinds_read import NS, Q, T, world

GPU = "nvidia.com/gpu"


def job(name: str, parallelism: int, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": Q, "creationTimestamp": T,
                         "annotations": annotations},
            "spec": {"suspend": True, "parallelism": parallelism, **spec,
                     "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]}}}}


def read(*objects: dict[str, Any]) -> Any:
    return build_snapshot([{"apiVersion": "v1", "kind": "List", "items": world(*objects)}], source="test")


def test_an_elastic_job_reads_its_most_from_the_recorded_annotation() -> None:
    snap = read(job("e", 4, {"kueue.x-k8s.io/elastic-job": "true", "kueue.x-k8s.io/job-min-parallelism": "2",
                             "stowplan.io/max-parallelism": "6"}),
                job("plain", 4, {"stowplan.io/max-parallelism": "6"}),
                job("capped", 4, {"kueue.x-k8s.io/elastic-job": "true", "stowplan.io/max-parallelism": "6"},
                    completions=5))
    by_name = {w.ref.name: w for w in snap.workloads}
    assert by_name["e"].elastic_job and by_name["e"].pod_sets[0].count == 6
    assert by_name["e"].pod_sets[0].min_count == 2
    assert not by_name["plain"].elastic_job and by_name["plain"].pod_sets[0].count == 4   # not elastic: ignored
    assert by_name["capped"].pod_sets[0].count == 5                                       # completions cap it


def test_a_bad_elastic_annotation_is_reported_and_read_as_false() -> None:
    snap = read(job("e", 4, {"kueue.x-k8s.io/elastic-job": "yes"}))
    assert not snap.workloads[0].elastic_job
    assert any("kueue.x-k8s.io/elastic-job" in p.field for p in snap.problems)


def test_set_parallelism_keeps_the_first_most() -> None:
    obj: dict[str, Any] = {"spec": {"parallelism": 6}}
    annotations: dict[str, str] = {}
    apply.set_parallelism(obj, annotations, 4)
    apply.set_parallelism(obj, annotations, 5)
    assert obj["spec"]["parallelism"] == 5 and annotations[apply.MAX_PARALLELISM] == "6"


def test_an_elastic_admission_does_not_pin_the_template_to_nodes() -> None:
    ps = PodSetAssignment("main", 2, {GPU: "f"}, ("kubernetes.io/hostname",), ((("n1",), 2),))
    pinned = apply.admitted_template_spec({}, ps, {}, pins=NodePins())
    free = apply.admitted_template_spec({}, ps, {}, pins=NodePins(), pin=False)
    assert "kubernetes.io/hostname" in json.dumps(pinned["affinity"])
    assert "affinity" not in free and {"name": apply.GATE} in free["schedulingGates"]


def test_the_pod_group_is_a_gang_of_the_admitted_pods_with_its_required_level() -> None:
    obj = {"metadata": {"name": "train", "namespace": NS, "uid": "u1"},
           "spec": {"template": {"metadata": {"annotations": {podgroups.REQUIRED: "rack"}},
                                 "spec": {"schedulingGroup": {"podGroupName": "train-pg"}}}}}
    admission = Admission(ObjectRef("Job", NS, "train"), "cq",
                          (PodSetAssignment("main", 3, {}, ("kubernetes.io/hostname",), ((("n1",), 3),)),))
    assert podgroups.group_name(obj) == "train-pg"
    workload, group = podgroups.objects(obj, admission, "train-pg")
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2" and group["kind"] == "PodGroup"
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": "rack"}]}
    assert group["spec"]["podGroupTemplateRef"] == {"workload": {"workloadName": "train-pg",
                                                                 "podGroupTemplateName": "main"}}
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert group["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert podgroups.group_name({"spec": {"template": {"spec": {}}}}) is None
