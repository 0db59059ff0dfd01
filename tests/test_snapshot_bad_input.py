"""Bad input: errors for what the planner cannot run without, Problems for the rest.

Every case checks that the message names the file, the object (kind/namespace/name)
and the field, and that a Problem only affects what depends on it.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from models import HOSTNAME_LABEL, ObjectRef, Problem, WorkloadState
from planner.base.errors import InputError
from planner.snapshot import read_snapshot
from planner.snapshot.loader import Limits
from tests.test_snapshot import assignment, base, cluster_queue, job, kueue, node, pod, read, workload, write

JOB = ObjectRef("Job", "team-a", "j")


def problems_of(snapshot, ref):
    return [p for p in snapshot.problems if p.ref == ref]


def the_problem(snapshot, ref, field):
    found = [p for p in snapshot.problems if p.ref == ref and p.field == field]
    assert len(found) == 1, f"expected one problem on {ref} {field}, got {snapshot.problems}"
    assert found[0].file.endswith("snap.yaml")
    assert str(ref) in str(found[0]) and field in str(found[0])
    return found[0]


def blocked_job(tmp_path, objects, field, *, name="j"):
    """Read base() + objects; the Job `name` must be blocked, with one Problem naming `field`."""
    snap = read(tmp_path, base() + objects)
    ref = ObjectRef("Job", "team-a", name)
    problem = the_problem(snap, ref, field)
    w = workload(snap, name)
    assert w.blocked_reason, "the workload should wait with a reason"
    return snap, problem, w


# ---------------------------------------------------------------- fatal: InputError

def test_missing_file():
    with pytest.raises(InputError) as err:
        read_snapshot(["/no/such/snapshot.yaml"])
    assert err.value.file == "/no/such/snapshot.yaml" and "no such file" in str(err.value)


def test_unreadable_file(tmp_path):
    path = tmp_path / "dir.yaml"
    path.mkdir()
    (path / "x.txt").write_text("")
    with pytest.raises(InputError, match="no \\*.yaml"):
        read_snapshot([str(path)])


def test_broken_yaml_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {a: [}\n")
    with pytest.raises(InputError) as err:
        read_snapshot([str(path)])
    assert err.value.file == str(path)
    assert "malformed YAML at line 5" in str(err.value)


def test_broken_json_names_the_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n "apiVersion": "v1",\n "kind": "List",\n "items": [,]\n}\n')
    with pytest.raises(InputError) as err:
        read_snapshot([str(path)])
    assert err.value.file == str(path) and "malformed JSON at line 4" in str(err.value)


def test_document_not_a_mapping(tmp_path):
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}},
                                        "just a string"]))
    with pytest.raises(InputError) as err:
        read_snapshot([str(path)])
    assert err.value.file == str(path) and "document 2 is not an object" in str(err.value)


def test_item_without_kind(tmp_path):
    path = write(tmp_path, [node("a"), {"apiVersion": "v1", "metadata": {"name": "b"}}])
    with pytest.raises(InputError) as err:
        read_snapshot([path])
    assert err.value.file == path and err.value.field == "kind"
    assert "item 2 has no kind" in str(err.value)


def test_object_without_api_version(tmp_path):
    path = write(tmp_path, [{"kind": "Node", "metadata": {"name": "b"}}], form="multi")
    with pytest.raises(InputError) as err:
        read_snapshot([path])
    assert err.value.field == "apiVersion" and "Node/b" in str(err.value) and path in str(err.value)


def test_duplicate_object_names_both_files(tmp_path):
    first = write(tmp_path, [node("n1")], "one.yaml")
    second = write(tmp_path, [node("n2"), node("n1")], "two.yaml")
    with pytest.raises(InputError) as err:
        read_snapshot([first, second])
    message = str(err.value)
    assert first in message and second in message and "Node/n1" in message
    assert err.value.ref == ObjectRef("Node", "", "n1")


def test_same_name_in_other_namespace_or_kueue_version_is_not_duplicate_but_versions_are(tmp_path):
    lq2 = kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="team-b")
    assert len(read(tmp_path, base() + [lq2]).local_queues) == 2
    again = kueue("ResourceFlavor", "default", {}, version="v1beta1")   # same object, older spelling
    with pytest.raises(InputError, match="duplicate"):
        read(tmp_path, base() + [again])


@pytest.mark.parametrize("spec, field", [
    ({"timeLimitSecs": 5}, "spec.timeLimitSecs"),            # unknown key
    ({"timeLimitSeconds": "fast"}, "spec.timeLimitSeconds"),  # wrong type
    ({"timeLimitSeconds": 0}, "spec.timeLimitSeconds"),       # out of range
    ({"gap": -0.1}, "spec.gap"),
    ({"threads": 1.5}, "spec.threads"),
    ({"seed": True}, "spec.seed"),
    ({"gpuResources": "nvidia.com/gpu"}, "spec.gpuResources"),
    ({"greedyFloor": "yes"}, "spec.greedyFloor"),
])
def test_bad_policy_in_snapshot(tmp_path, spec, field):
    policy = {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"}, "spec": spec}
    path = write(tmp_path, [policy])
    with pytest.raises(InputError) as err:
        read_snapshot([path])
    assert err.value.file == path and err.value.field == field
    assert err.value.ref == ObjectRef("PlannerPolicy", "", "p")
    assert f"PlannerPolicy/p: {field}" in str(err.value)


def test_bad_policy_file(tmp_path):
    snap = write(tmp_path, [node("n")])
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: stowplan.io/v1alpha1\nkind: PlannerPolicy\nmetadata: {name: p}\n"
                      "spec: {agingPerHour: lots}\n")
    with pytest.raises(InputError) as err:
        read_snapshot([snap], policy_file=str(policy))
    assert err.value.file == str(policy) and err.value.field == "spec.agingPerHour"
    policy.write_text(yaml.safe_dump(node("n")))
    with pytest.raises(InputError, match="exactly one stowplan.io/v1alpha1 PlannerPolicy"):
        read_snapshot([snap], policy_file=str(policy))


def test_policy_of_another_version(tmp_path):
    policy = {"apiVersion": "stowplan.io/v1", "kind": "PlannerPolicy", "metadata": {"name": "p"}}
    path = write(tmp_path, [policy])
    with pytest.raises(InputError) as err:
        read_snapshot([path])
    assert err.value.file == path and err.value.field == "apiVersion" and "stowplan.io/v1alpha1" in str(err.value)


def test_two_policies_in_snapshot(tmp_path):
    policies = [{"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": n}}
                for n in ("a", "b")]
    with pytest.raises(InputError, match="more than one PlannerPolicy"):
        read(tmp_path, policies)


# ---------------------------------------------------------------- Problems on workloads

def test_unknown_local_queue(tmp_path):
    snap, problem, w = blocked_job(tmp_path, [job("j", queue="nope")], "metadata.labels[kueue.x-k8s.io/queue-name]")
    assert "LocalQueue nope does not exist in namespace team-a" in problem.message
    assert w.cluster_queue is None and "nope" in w.blocked_reason


def test_local_queue_pointing_to_missing_cluster_queue(tmp_path):
    lq = kueue("LocalQueue", "orphan", {"clusterQueue": "ghost"}, namespace="team-a")
    snap = read(tmp_path, base() + [lq, job("j", queue="orphan"), job("ok")])
    problem = the_problem(snap, ObjectRef("LocalQueue", "team-a", "orphan"), "spec.clusterQueue")
    assert "ClusterQueue ghost does not exist" in problem.message
    w = workload(snap, "j")
    assert w.cluster_queue is None and "points to ClusterQueue ghost, which does not exist" in w.blocked_reason
    assert workload(snap, "ok").blocked_reason is None        # only what depends on it


@pytest.mark.parametrize("requests, field, words", [
    ({"cpu": "-2"}, "spec.template.spec.containers[0].resources.requests.cpu", "negative"),
    ({"memory": "64 GiB"}, "spec.template.spec.containers[0].resources.requests.memory", "not a quantity"),
    ({"nvidia.com/gpu": True}, "spec.template.spec.containers[0].resources.requests.nvidia.com/gpu", "not a quantity"),
])
def test_bad_request_blocks_the_job(tmp_path, requests, field, words):
    snap, problem, w = blocked_job(tmp_path, [job("j", requests=requests), job("ok")], field)
    assert words in problem.message
    assert field in w.blocked_reason
    assert workload(snap, "ok").blocked_reason is None


@pytest.mark.parametrize("value", ["0", "9", "two", "-1"])
def test_bad_min_parallelism(tmp_path, value):
    field = "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"
    _, problem, w = blocked_job(tmp_path, [job("j", parallelism=4,
                                               annotations={"kueue.x-k8s.io/job-min-parallelism": value})], field)
    assert value in problem.message


@pytest.mark.parametrize("annotations, field", [
    ({"kueue.x-k8s.io/podset-slice-required-topology": "rack", "kueue.x-k8s.io/podset-slice-size": "0"},
     "kueue.x-k8s.io/podset-slice-size"),
    ({"kueue.x-k8s.io/podset-slice-required-topology": "rack", "kueue.x-k8s.io/podset-slice-size": "four"},
     "kueue.x-k8s.io/podset-slice-size"),
    ({"kueue.x-k8s.io/podset-slice-required-topology": "rack"}, "kueue.x-k8s.io/podset-slice-size"),
    ({"kueue.x-k8s.io/podset-slice-size": "4"}, "kueue.x-k8s.io/podset-slice-size"),
    ({"kueue.x-k8s.io/podset-slice-required-topology-constraints": '[{"topology": "rack", "size": 4}'},
     "kueue.x-k8s.io/podset-slice-required-topology-constraints"),
    ({"kueue.x-k8s.io/podset-slice-required-topology-constraints": '[{"topology": "rack", "size": 0}]'},
     "kueue.x-k8s.io/podset-slice-required-topology-constraints"),
    ({"kueue.x-k8s.io/podset-slice-required-topology-constraints":
          json.dumps([{"topology": f"l{i}", "size": 1} for i in range(4)])},
     "kueue.x-k8s.io/podset-slice-required-topology-constraints"),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "yes"}, "kueue.x-k8s.io/podset-unconstrained-topology"),
])
def test_bad_topology_annotations(tmp_path, annotations, field):
    full = f"spec.template.metadata.annotations[{field}]"
    _, problem, w = blocked_job(tmp_path, [job("j", parallelism=8, template_annotations=annotations)], full)
    assert full in w.blocked_reason


def test_two_topology_modes(tmp_path):
    annotations = {"kueue.x-k8s.io/podset-required-topology": "rack",
                   "kueue.x-k8s.io/podset-preferred-topology": "block"}
    _, problem, _ = blocked_job(tmp_path, [job("j", template_annotations=annotations)],
                                "spec.template.metadata.annotations")
    assert "at most one" in problem.message


@pytest.mark.parametrize("text, words", [
    ("[{not json", "not valid JSON"),
    ('{"name": "main"}', "JSON list"),
    ('[{"name": "other", "count": 1}]', "not one of"),
    ('[{"name": "main", "count": 2, "topologyAssignment": {"levels": ["kubernetes.io/hostname"], '
     '"domains": [{"values": ["n1"], "count": 1}]}}]', "add up to 1"),
    ('[{"name": "main", "count": 1, "topologyAssignment": {"levels": ["kubernetes.io/hostname", "rack"], '
     '"domains": [{"values": ["n1", "r1"], "count": 1}]}}]', "last level must be kubernetes.io/hostname"),
    ('[{"name": "main", "count": 1}]', "topologyAssignment"),
])
def test_bad_assignment_annotation(tmp_path, text, words):
    field = "metadata.annotations[stowplan.io/assignment]"
    objects = base() + [node("n1"), job("j", suspend=False, parallelism=2, requests={"cpu": "2"},
                                        annotations={"stowplan.io/assignment": text}),
                        pod("j-0", "n1", owner_job="j", requests={"cpu": "2"})]
    snap = read(tmp_path, objects)
    messages = [p.message for p in problems_of(snap, JOB) if p.field == field]
    assert any(words in m for m in messages), messages
    w = workload(snap, "j")
    assert w.state is WorkloadState.EXTERNAL          # where it runs is unknown: its pods are unmanaged
    assert snap.nodes[0].unmanaged.get("cpu") == 2000


def test_assignment_with_more_levels_than_hostname_is_kept(tmp_path):
    text = json.dumps([{"name": "main", "count": 2, "flavors": {},
                        "topologyAssignment": {"levels": ["rack", "kubernetes.io/hostname"],
                                               "domains": [{"values": ["r1", "n1"], "count": 2}]}}])
    snap = read(tmp_path, base() + [job("j", suspend=False, parallelism=2,
                                        annotations={"stowplan.io/assignment": text})])
    w = workload(snap, "j")
    assert w.state is WorkloadState.RUNNING
    assert w.assignment[0].levels == ("rack", "kubernetes.io/hostname")
    assert w.assignment[0].pods_per_node() == {"n1": 2}


@pytest.mark.parametrize("where, field", [
    ("creationTimestamp", "metadata.creationTimestamp"),
    ("stowplan.io/admitted-at", "metadata.annotations[stowplan.io/admitted-at]"),
    ("stowplan.io/checkpointed-at", "metadata.annotations[stowplan.io/checkpointed-at]"),
    ("stowplan.io/evicted-at", "metadata.annotations[stowplan.io/evicted-at]"),
])
def test_bad_timestamp_is_reported_not_blocking(tmp_path, where, field):
    if where == "creationTimestamp":
        bad = job("j", created="yesterday")
    else:
        bad = job("j", annotations={where: "12/01/2026"})
    snap = read(tmp_path, base() + [bad])
    problem = the_problem(snap, JOB, field)
    assert "RFC 3339" in problem.message
    assert workload(snap, "j").blocked_reason is None


def test_bad_stowplan_annotations(tmp_path):
    snap = read(tmp_path, base() + [job("j", annotations={"stowplan.io/preemption-cost": "cheap",
                                                          "stowplan.io/non-preemptible": "yes"})])
    assert "not a number" in the_problem(snap, JOB, "metadata.annotations[stowplan.io/preemption-cost]").message
    the_problem(snap, JOB, "metadata.annotations[stowplan.io/non-preemptible]")
    w = workload(snap, "j")
    assert w.preemption_cost is None and w.non_preemptible is False


def test_unknown_priority_class(tmp_path):
    _, problem, w = blocked_job(tmp_path, [job("j", labels={"kueue.x-k8s.io/priority-class": "vip"})],
                                "metadata.labels[kueue.x-k8s.io/priority-class]")
    assert "WorkloadPriorityClass vip does not exist" in problem.message and "vip" in w.blocked_reason
    (tmp_path / "b").mkdir()
    _, problem, w = blocked_job(tmp_path / "b", [job("j", priorityClassName="urgent")],
                                "spec.template.spec.priorityClassName")
    assert "PriorityClass urgent does not exist" in problem.message


@pytest.mark.parametrize("mutate, field", [
    (lambda j: j["spec"].update(parallelism="4"), "spec.parallelism"),
    (lambda j: j["spec"].update(suspend="yes"), "spec.suspend"),
    (lambda j: j["spec"]["template"]["spec"].update(containers={"name": "c"}), "spec.template.spec.containers"),
    (lambda j: j["spec"]["template"]["spec"].update(nodeSelector={"gpu": True}),
     "spec.template.spec.nodeSelector[gpu]"),
    (lambda j: j["spec"]["template"]["spec"].update(tolerations=[{"key": "a", "operator": "Maybe"}]),
     "spec.template.spec.tolerations[0].operator"),
    (lambda j: j["metadata"].update(annotations=["a"]), "metadata.annotations"),
    (lambda j: j["spec"].update(parallelism=0), "spec.parallelism"),
])
def test_wrong_types_in_a_job(tmp_path, mutate, field):
    bad = job("j")
    mutate(bad)
    blocked_job(tmp_path, [bad, job("ok")], field)


# ---------------------------------------------------------------- Problems on Kueue objects and nodes

def test_cluster_queue_with_missing_flavor_is_inactive(tmp_path):
    objects = base() + [cluster_queue("cq2", flavor="ghost"),
                        kueue("LocalQueue", "lq2", {"clusterQueue": "cq2"}, namespace="team-a"),
                        job("j", queue="lq2"), job("ok")]
    snap = read(tmp_path, objects)
    cq = snap.cluster_queues["cq2"]
    assert cq.inactive_reason == "flavor ghost not found"
    problem = the_problem(snap, ObjectRef("ClusterQueue", "", "cq2"), "spec.resourceGroups")
    assert "flavor ghost not found" in problem.message
    assert "ClusterQueue cq2 is inactive: flavor ghost not found" in workload(snap, "j").blocked_reason
    assert snap.cluster_queues["cq"].active and workload(snap, "ok").blocked_reason is None


def test_cohort_cycle(tmp_path):
    objects = base() + [
        kueue("Cohort", "a", {"parentName": "b"}), kueue("Cohort", "b", {"parentName": "a"}),
        kueue("Cohort", "leaf", {"parentName": "a"}), kueue("Cohort", "fine", {}),
        cluster_queue("in-cycle", cohort="a"), cluster_queue("under", cohort="leaf"),
        cluster_queue("outside", cohort="fine"),
    ]
    snap = read(tmp_path, objects)
    for name in ("a", "b"):
        problem = the_problem(snap, ObjectRef("Cohort", "", name), "spec.parentName")
        assert "a -> b -> a" in problem.message
        assert "cycle" in snap.cohorts[name].inactive_reason
    assert "cohort a is inactive" in snap.cohorts["leaf"].inactive_reason
    assert "cycle" in snap.cluster_queues["in-cycle"].inactive_reason
    assert "cycle" in snap.cluster_queues["under"].inactive_reason
    assert snap.cluster_queues["outside"].active and snap.cohorts["fine"].inactive_reason is None
    assert snap.cluster_queues["cq"].active


@pytest.mark.parametrize("resource, quota, field, words", [
    ("cpu", {"nominalQuota": "-1"}, "nominalQuota", "negative"),
    ("cpu", {"nominalQuota": "ten"}, "nominalQuota", "not a quantity"),
    ("cpu", {}, "nominalQuota", "required"),
    ("cpu", {"nominalQuota": "4", "lendingLimit": "5"}, "lendingLimit", "more than nominalQuota"),
    ("cpu", {"nominalQuota": "4", "borrowingLimit": "-5"}, "borrowingLimit", "negative"),
])
def test_invalid_quota_makes_the_queue_inactive(tmp_path, resource, quota, field, words):
    cq = cluster_queue("cq", cohort="org")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] = {"name": resource, **quota}
    snap = read(tmp_path, base()[:1] + [cq, base()[2], job("j")])
    full = f"spec.resourceGroups[0].flavors[0].resources[0].{field}"
    problem = the_problem(snap, ObjectRef("ClusterQueue", "", "cq"), full)
    assert words in problem.message
    assert not snap.cluster_queues["cq"].active
    assert "ClusterQueue cq is inactive" in workload(snap, "j").blocked_reason


def test_invalid_cohort_quota_makes_its_queues_inactive(tmp_path):
    cohort = kueue("Cohort", "org", {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1x"}]}]}]})
    snap = read(tmp_path, base()[:1] + [cohort, cluster_queue("cq", cohort="org")])
    the_problem(snap, ObjectRef("Cohort", "", "org"), "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota")
    assert snap.cohorts["org"].inactive_reason
    assert "cohort org is inactive" in snap.cluster_queues["cq"].inactive_reason


@pytest.mark.parametrize("spec_patch, field", [
    ({"queueingStrategy": "Fastest"}, "spec.queueingStrategy"),
    ({"preemption": {"withinClusterQueue": "Always"}}, "spec.preemption.withinClusterQueue"),
    ({"preemption": {"borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": "high"}}},
     "spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
    ({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Near"}]}},
     "spec.namespaceSelector.matchExpressions[0].operator"),
])
def test_invalid_cluster_queue_fields(tmp_path, spec_patch, field):
    cq = cluster_queue("cq")
    cq["spec"].update(spec_patch)
    snap = read(tmp_path, base()[:1] + [cq])
    the_problem(snap, ObjectRef("ClusterQueue", "", "cq"), field)
    assert field in snap.cluster_queues["cq"].inactive_reason


def test_missing_namespace_selector_matches_nothing_and_is_reported(tmp_path):
    cq = cluster_queue("cq")
    del cq["spec"]["namespaceSelector"]
    snap = read(tmp_path, base()[:1] + [cq])
    problem = the_problem(snap, ObjectRef("ClusterQueue", "", "cq"), "spec.namespaceSelector")
    assert "matches no namespace" in problem.message
    assert snap.cluster_queues["cq"].namespace_selector is None
    assert snap.cluster_queues["cq"].active          # Kueue keeps it active; it just admits nobody


def test_flavor_naming_missing_topology(tmp_path):
    objects = [kueue("ResourceFlavor", "default", {"topologyName": "dc"}), cluster_queue()]
    snap = read(tmp_path, objects)
    assert snap.cluster_queues["cq"].inactive_reason == "flavor default names Topology dc, which does not exist"


def test_invalid_flavor(tmp_path):
    objects = [kueue("ResourceFlavor", "default", {"nodeTaints": [{"key": "gpu", "effect": "Sometimes"}]}),
               cluster_queue()]
    snap = read(tmp_path, objects)
    the_problem(snap, ObjectRef("ResourceFlavor", "", "default"), "spec.nodeTaints[0].effect")
    assert snap.cluster_queues["cq"].inactive_reason == "flavor default is invalid"


def test_bad_node_allocatable_skips_the_node(tmp_path):
    snap = read(tmp_path, [node("bad", cpu="many"), node("good")])
    problem = the_problem(snap, ObjectRef("Node", "", "bad"), "status.allocatable.cpu")
    assert "node skipped" in problem.message
    assert [n.name for n in snap.nodes] == ["good"]


def test_node_with_unquoted_label_value(tmp_path):
    n = node("n")
    n["metadata"]["labels"]["gpu"] = True
    snap = read(tmp_path, [n])
    assert "quote it" in the_problem(snap, ObjectRef("Node", "", "n"), "metadata.labels[gpu]").message
    assert snap.nodes == ()


def test_pod_with_bad_request_counts_only_its_slot(tmp_path):
    snap = read(tmp_path, [node("n1"), pod("p", "n1", namespace="default", requests={"cpu": "x"})])
    the_problem(snap, ObjectRef("Pod", "default", "p"), "spec.containers[0].resources.requests.cpu")
    assert snap.nodes[0].unmanaged.as_dict() == {"pods": 1}


def test_invalid_priority_class_value(tmp_path):
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": "10"}
    snap = read(tmp_path, base() + [pc, job("j", priorityClassName="low")])
    the_problem(snap, ObjectRef("PriorityClass", "", "low"), "value")
    assert "PriorityClass low is invalid" in workload(snap, "j").blocked_reason


def test_object_without_name_and_unsupported_version(tmp_path):
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {}},
               kueue("ClusterQueue", "old", {}, version="v1alpha1")]
    snap = read(tmp_path, objects)
    fields = sorted(p.field for p in snap.problems)
    assert fields == ["apiVersion", "metadata.name"]
    assert snap.ignored_kinds == {"kueue.x-k8s.io/v1alpha1/ClusterQueue": 1}
    old = next(p for p in snap.problems if p.field == "apiVersion")
    assert old.ref == ObjectRef("ClusterQueue", "", "old") and "v1alpha1 is not supported" in old.message
    assert snap.nodes == ()


def test_bad_snapshot_time_falls_back(tmp_path):
    path = write(tmp_path, [job("j", queue=None)], annotations={"stowplan.io/snapshot-time": "noon"})
    snap = read_snapshot([path])
    assert any(p.field == "metadata.annotations[stowplan.io/snapshot-time]" and p.file == path
               for p in snap.problems)
    assert snap.now == 1796119200.0


def test_problems_are_sorted_and_deduplicated(tmp_path):
    objects = base() + [job("b", queue="nope"), job("a", queue="nope"), node("z", cpu="x"), node("y", cpu="x")]
    snap = read(tmp_path, objects)
    keys = [(p.file, str(p.ref), p.field, p.message) for p in snap.problems]
    assert keys == sorted(keys) and len(set(keys)) == len(keys) == 4


def test_bad_jobset_blocks_only_itself(tmp_path):
    from tests.test_snapshot import jobset, replicated_job
    bad = jobset("js", replicated=[replicated_job("w", 0, 1, {"cpu": "1"})])
    dup = jobset("dup", replicated=[replicated_job("w", 1, 1, {"cpu": "1"}), replicated_job("w", 1, 1, {"cpu": "1"})])
    snap = read(tmp_path, base() + [bad, dup, job("ok")])
    the_problem(snap, ObjectRef("JobSet", "team-a", "js"), "spec.replicatedJobs[0].replicas")
    the_problem(snap, ObjectRef("JobSet", "team-a", "dup"), "spec.replicatedJobs[1].name")
    assert workload(snap, "js", kind="JobSet").blocked_reason
    assert workload(snap, "dup", kind="JobSet").blocked_reason
    assert workload(snap, "ok").blocked_reason is None


# ---------------------------------------------------------------- issue 23: hostile files, refused unread

def test_only_regular_files_are_read(tmp_path):
    fifo = tmp_path / "snap.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):      # opened without blocking, refused unread
        read_snapshot([str(fifo)])
    with pytest.raises(InputError, match="is a character device"):
        read_snapshot(["/dev/zero"])
    folder = tmp_path / "folder"
    folder.mkdir()
    os.mkfifo(folder / "x.yaml")
    with pytest.raises(InputError, match="x.yaml: is a FIFO"):
        read_snapshot([str(folder)])


def test_the_size_limit_is_checked_before_reading(tmp_path):
    path = write(tmp_path, base())
    size = os.path.getsize(path)
    assert read_snapshot([path], limits=Limits(max_file_bytes=size)).cluster_queues
    with pytest.raises(InputError) as err:
        read_snapshot([path], limits=Limits(max_file_bytes=size - 1))
    assert err.value.file == path and f"is {size:,} bytes, more than the limit of {size - 1:,}" in str(err.value)


@pytest.mark.parametrize("depth", [5_000, 200_000])
def test_json_nested_too_deep_is_refused_like_yaml(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text('{"a": ' * depth + "1" + "}" * depth)
    with pytest.raises(InputError, match="exceeded maximum nesting depth"):
        read_snapshot([str(path)])
    yaml_path = tmp_path / "deep.yaml"
    yaml_path.write_text("a: " + "[" * 5_000 + "]" * 5_000 + "\n")
    with pytest.raises(InputError, match="exceeded maximum nesting depth"):
        read_snapshot([str(yaml_path)])


def test_alias_expansion_is_bounded(tmp_path):
    anchors = ["apiVersion: v1", "kind: List", "a0: &a0 {apiVersion: v1, kind: Node, metadata: {name: x}}"]
    for i in range(1, 8):
        anchors.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(anchors + ["items: [*a7]"]) + "\n")          # 9**7 = 4.8 million nodes
    with pytest.raises(InputError, match="aliases expand to more than 1,000,000 extra nodes"):
        read_snapshot([str(path)])
    with pytest.raises(InputError, match="more than 100 extra nodes"):
        read_snapshot([str(path)], limits=Limits(max_alias_nodes=100))
    recursive = tmp_path / "recursive.yaml"
    recursive.write_text("apiVersion: v1\nkind: List\nitems:\n- &n {apiVersion: v1, kind: Node, metadata: {name: x}, "
                         "spec: {self: *n}}\n")
    with pytest.raises(InputError, match="refers to a node that contains it"):
        read_snapshot([str(recursive)])


# ---------------------------------------------------------------- issue 23: a key given twice

def _twice(text, key, first, second):
    """`text` (JSON) with `"key": "first"` given again as `second`."""
    needle = json.dumps({key: first})[1:-1]
    assert needle in text
    return text.replace(needle, f"{needle}, {json.dumps({key: second})[1:-1]}", 1)


@pytest.mark.parametrize("form", ["yaml", "json"])
def test_a_node_with_a_key_given_twice_is_ignored_and_reported(tmp_path, form):
    objects = base() + [node("n1", gpus="8"), node("n2", gpus="8")]
    objects[-1]["status"]["allocatable"]["nvidia.com/gpu"] = "DUP"
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    text = _twice(text, "nvidia.com/gpu", "DUP", "800").replace('"DUP"', '"8"')
    path = tmp_path / f"snap.{form}"
    path.write_text(text if form == "json" else text.replace("{", "{ ").replace("}", " }"))   # JSON is YAML too
    snap = read_snapshot([str(path)])
    assert [n.name for n in snap.nodes] == ["n1"]
    problem = next(p for p in snap.problems if p.ref == ObjectRef("Node", "", "n2"))
    assert problem.field == "status.allocatable" and problem.file == str(path)
    assert "'nvidia.com/gpu' given twice" in problem.message and "the node is ignored" in problem.message


def test_a_job_with_a_key_given_twice_waits(tmp_path):
    objects = base() + [job("j", requests={"cpu": "1"}), job("ok")]
    text = _twice(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), "cpu", "1", "100")
    path = tmp_path / "snap.json"
    path.write_text(text)
    snap = read_snapshot([str(path)])
    w = workload(snap, "j")
    assert w.blocked_reason.startswith("invalid spec.template.spec.containers[0].resources.requests: key 'cpu' "
                                       "given twice")
    assert workload(snap, "ok").blocked_reason is None
    assert [p.field for p in snap.problems if p.ref == JOB] == ["spec.template.spec.containers[0].resources.requests"]


@pytest.mark.parametrize("kind, effect", [
    ("ClusterQueue", "the ClusterQueue is inactive"),
    ("ResourceFlavor", "the flavor is invalid"),
    ("LocalQueue", "the LocalQueue is invalid"),
])
def test_a_queue_object_with_a_key_given_twice_is_invalid_and_its_workloads_wait(tmp_path, kind, effect):
    objects = base() + [job("j")]
    target = next(o for o in objects if o["kind"] == kind)
    target["metadata"]["labels"] = {"team": "DUP"}
    text = _twice(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), "team", "DUP", "b")
    path = tmp_path / "snap.json"
    path.write_text(text)
    snap = read_snapshot([str(path)])
    problem = next(p for p in snap.problems if p.ref and p.ref.kind == kind)
    assert problem.field == "metadata.labels" and effect in problem.message
    assert workload(snap, "j").blocked_reason


def test_a_list_with_items_given_twice_is_reported_on_the_file(tmp_path):
    path = tmp_path / "snap.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems: []\nitems:\n- {apiVersion: v1, kind: Namespace, "
                    "metadata: {name: a}}\n")
    snap = read_snapshot([str(path)])
    assert Problem(str(path), None, "", "key 'items' given twice outside any object (the earlier value was "
                                        "dropped)") in snap.problems


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    path = tmp_path / "snap.yaml"
    path.write_text("apiVersion: v1\nkind: List\nbase: &labels {a: '1', b: '2'}\nitems:\n"
                    "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: team-a\n"
                    "    labels: {<<: *labels, b: '3'}\n")
    snap = read_snapshot([str(path)])
    assert snap.problems == () and snap.namespace_labels["team-a"] == {"a": "1", "b": "3"}


# ---------------------------------------------------------------- issue 23: accepted, reported, effect stated

def _gpu_queue():
    return [kueue("ResourceFlavor", "default", {}),
            cluster_queue(resources=(("cpu", "100"), ("nvidia.com/gpu", "16"))),
            kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="team-a")]


GPU = {"cpu": "1", "nvidia.com/gpu": "8"}


def test_running_work_on_an_unknown_flavor_is_charged_to_the_queue(tmp_path):
    flavors = {"cpu": "ghost", "nvidia.com/gpu": "ghost"}
    snap = read(tmp_path, _gpu_queue() + [node("n1", gpus="8"), job("a", suspend=False, requests=GPU, annotations={
        "stowplan.io/assignment": assignment({"n1": 1}, flavors)})])
    w = workload(snap, "a")
    assert w.assignment[0].flavors == {"cpu": "default", "nvidia.com/gpu": "default"}
    problem = the_problem(snap, ObjectRef("Job", "team-a", "a"), "metadata.annotations[stowplan.io/assignment]")
    assert "flavor ghost does not exist" in problem.message and "charged to the queue's first flavor" in problem.message


def test_running_work_on_an_unknown_node_is_reported(tmp_path):
    snap = read(tmp_path, _gpu_queue() + [node("n1", gpus="8"), job("a", suspend=False, requests=GPU, annotations={
        "stowplan.io/assignment": assignment({"gone": 1}, {"cpu": "default", "nvidia.com/gpu": "default"})})])
    problem = the_problem(snap, ObjectRef("Job", "team-a", "a"), "metadata.annotations[stowplan.io/assignment]")
    assert "node(s) gone, not in the snapshot" in problem.message and "quota is still charged" in problem.message


def test_over_committed_node_is_reported(tmp_path):
    on_n1 = {"stowplan.io/assignment": assignment({"n1": 1}, {"cpu": "default", "nvidia.com/gpu": "default"})}
    snap = read(tmp_path, _gpu_queue() + [node("n1", gpus="8"), job("a", suspend=False, requests=GPU, annotations=on_n1),
                                          job("b", suspend=False, requests=GPU, annotations=on_n1)])
    problem = the_problem(snap, ObjectRef("Node", "", "n1"), "status.allocatable")
    assert "nvidia.com/gpu 16 of 8" in problem.message and "Job/team-a/a, Job/team-a/b" in problem.message


def test_tas_level_missing_from_the_topology_blocks_with_that_reason(tmp_path):
    levels = {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOSTNAME_LABEL}]}
    objects = [kueue("ResourceFlavor", "default", {"topologyName": "t"}), kueue("Topology", "t", levels), *base()[1:]]
    annotations = {"kueue.x-k8s.io/podset-required-topology": "block"}
    snap = read(tmp_path, objects + [job("j", template_annotations=annotations)])
    problem = the_problem(snap, JOB, "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]")
    w = workload(snap, "j")
    assert "level block is not in the Topology of any flavor ClusterQueue cq offers (flavor default: rack, " \
           "kubernetes.io/hostname)" in problem.message
    assert w.blocked_reason == "topology level block is in no flavor's Topology of ClusterQueue cq"
    ok = read(tmp_path, objects + [job("k", template_annotations={"kueue.x-k8s.io/podset-required-topology": "rack"})])
    assert workload(ok, "k").blocked_reason is None


@pytest.mark.parametrize("value, expected, reported", [("1e308", 1e9, True), ("1e9", 1e9, False), ("12.5", 12.5, False)])
def test_preemption_cost_is_bounded(tmp_path, value, expected, reported):
    snap = read(tmp_path, base() + [job("j", annotations={"stowplan.io/preemption-cost": value})])
    assert workload(snap, "j").preemption_cost == expected
    assert bool(problems_of(snap, JOB)) == reported
