"""The Kueue peer harness's pure parts (tools/peer): no cluster, no Kueue.

- compare: outcomes per workload, agreement, disagreements by category;
- workloads: Kueue Workload objects -> KueueWorkload, outcome rows, Decisions, the
  effective snapshot (and its file, read back by the project's own reader);
- objects: snapshot objects -> the bodies the harness creates (v1beta1 -> v1beta2,
  suspended and gated workloads, pinned running ones).
"""

from __future__ import annotations

import json

import pytest

from builders import NOW, cq, flavor, job, lq, node, running_job, snapshot, topology
from models import Admission, Decisions, Eviction, ObjectRef, PodSetAssignment, WorkloadState
from planner.snapshot import build_snapshot
from tools.peer import objects as bodies
from tools.peer.compare import Outcome, compare, decisions_from_plan, outcomes, report_lines
from tools.peer.workloads import (
    decode_topology, effective_objects, effective_snapshot, kueue_decisions, kueue_rows, parse_workload, rfc3339,
)

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"


def psa(name="main", count=1, flavor_name="f", nodes=None):
    nodes = nodes or {}
    return PodSetAssignment(name, count, {GPU: flavor_name}, (HOST,) if nodes else (),
                            tuple(((n,), c) for n, c in sorted(nodes.items())))


@pytest.fixture
def snap():
    return snapshot(
        nodes=[node("n1", gpu=8), node("n2", gpu=8)],
        flavors=[flavor("f"), flavor("g")],
        cqs=[cq("cq", quotas={"f": {GPU: 16}, "g": {GPU: 16}})],
        lqs=[lq("ns", "lq", "cq")],
        workloads=[job("ns", "a", gpu=4), job("ns", "b", gpu=4), job("ns", "c", gpu=4),
                   running_job("ns", "r", nodes={"n1": 1}, gpu=8, flavors={GPU: "f"}),
                   running_job("ns", "s", nodes={"n2": 1}, gpu=8, flavors={GPU: "f"})],
    )


def ref(name, kind="Job"):
    return ObjectRef(kind, "ns", name)


# ---------------------------------------------------------------- compare

def test_outcomes_name_every_pending_and_running_workload(snap):
    d = Decisions((Admission(ref("a"), "cq", (psa(),)), Admission(ref("r"), "cq", (psa(flavor_name="g"),))),
                  (Eviction(ref("r"), "Preempted"), Eviction(ref("s"), "Reclaimed")))
    got = outcomes(snap, d)
    assert got == {ref("a"): Outcome("admitted", (("main", ("f",)),)), ref("b"): Outcome("pending"),
                   ref("c"): Outcome("pending"), ref("r"): Outcome("moved", (("main", ("g",)),)),
                   ref("s"): Outcome("evicted")}


def test_agreement_counts_outcome_and_flavors_not_nodes(snap):
    kueue = Decisions((Admission(ref("a"), "cq", (psa(nodes={}),)), Admission(ref("b"), "cq", (psa(),))),
                      (Eviction(ref("s"), "Reclaimed"),))
    greedy = Decisions((Admission(ref("a"), "cq", (psa(nodes={"n1": 1}),)),
                        Admission(ref("b"), "cq", (psa(flavor_name="g", nodes={"n2": 1}),)),
                        Admission(ref("c"), "cq", (psa(nodes={"n2": 1}),))), ())
    c = compare(snap, kueue, greedy)
    assert (c.total, c.agreed) == (5, 2)           # a (nodes ignored) and r agree
    assert c.agreement == pytest.approx(0.4)
    assert [(d.ref.name, d.category()) for d in c.disagreements] == [
        ("b", "flavor"), ("c", "pending/admitted"), ("s", "evicted/running")]
    assert c.counts == {"kueue": {"admitted": 2, "pending": 1, "evicted": 1, "running": 1},
                        "greedy": {"admitted": 3, "running": 2}}
    lines = report_lines(c)
    assert lines[0] == "agreement kueue vs greedy: 0.4000 (2/5)"
    assert "Job/ns/c (priority 0, cq): kueue pending; greedy admitted (main: f)" in lines[-2]


def test_same_decisions_agree_fully_and_no_workloads_is_full_agreement(snap):
    d = Decisions((Admission(ref("a"), "cq", (psa(),)),), ())
    assert compare(snap, d, d).agreement == 1.0
    assert compare(snapshot(), Decisions(), Decisions()).agreement == 1.0


def test_plan_documents_give_their_decisions():
    data = {"admissions": [{"workload": {"kind": "Job", "namespace": "ns", "name": "a"}, "clusterQueue": "cq",
                            "podSets": [{"name": "main", "count": 2, "flavors": {GPU: "f"},
                                         "topologyAssignment": {"levels": [HOST],
                                                                "domains": [{"values": ["n1"], "count": 2}]}}]}],
            "evictions": [{"workload": {"kind": "Job", "namespace": "ns", "name": "r"}, "reason": "Preempted",
                           "for": [{"kind": "Job", "namespace": "ns", "name": "a"}], "cost": 3.5}]}
    d = decisions_from_plan(data)
    assert d.admissions == (Admission(ref("a"), "cq", (PodSetAssignment("main", 2, {GPU: "f"}, (HOST,),
                                                                           ((("n1",), 2),)),)),)
    assert d.evictions == (Eviction(ref("r"), "Preempted", (ref("a"),), 3.5),)


# ---------------------------------------------------------------- Kueue's Workloads

def workload(name, *, owner="a", uid=None, created="2026-12-05T10:00:01Z", admitted=False, flavor_name="f",
             topology=None, count=1, evicted=None, message="waiting"):
    conditions = []
    status = {}
    if admitted:
        conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-12-05T10:00:05Z",
                           "message": "Quota reserved"})
        entry = {"name": "main", "count": count, "flavors": {GPU: flavor_name}}
        if topology:
            entry["topologyAssignment"] = topology
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [entry]}
    else:
        conditions.append({"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message})
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "reason": "Preempted", "message": evicted[1]})
        conditions.append({"type": "Preempted", "status": "True", "reason": evicted[0], "message": evicted[1]})
    status["conditions"] = conditions
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "creationTimestamp": created,
                         "ownerReferences": [{"kind": "Job", "name": owner, "apiVersion": "batch/v1", "uid": "x"}]},
            "status": status}


def test_topology_assignments_decode_slices_universal_and_individual():
    ta = {"levels": ["rack", HOST], "slices": [
        {"domainCount": 2, "valuesPerLevel": [{"universal": "r1"}, {"individual": {"prefix": "h-", "roots": ["1", "2"]}}],
         "podCounts": {"individual": [3, 1]}},
        {"domainCount": 1, "valuesPerLevel": [{"universal": "r2"}, {"universal": "x"}], "podCounts": {"universal": 4}}]}
    levels, domains = decode_topology(ta, {"h-1": "node-1"})
    assert levels == ("rack", HOST)
    assert domains == ((("r1", "h-2"), 1), (("r1", "node-1"), 3), (("r2", "x"), 4))


def test_workloads_parse_admission_eviction_and_why_they_wait():
    ta = {"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "n1"}],
                                        "podCounts": {"universal": 2}}]}
    k = parse_workload(workload("w", admitted=True, topology=ta, count=2))
    assert (k.ref, k.admitted, k.cluster_queue, k.quota_only) == (ref("a"), True, "cq", False)
    assert k.pod_sets == (PodSetAssignment("main", 2, {GPU: "f"}, (HOST,), ((("n1",), 2),)),)
    assert k.created == pytest.approx(1796464801.0)
    quota = parse_workload(workload("q", admitted=True))
    assert quota.quota_only and quota.pod_sets[0].domains == ()
    message = "Preempted to accommodate a workload (UID: uid-p, JobUID: j) due to reclamation within the cohort"
    gone = parse_workload(workload("e", evicted=("InCohortReclamation", message), message="gone"))
    assert not gone.admitted and gone.evictions[0].reason == "InCohortReclamation"
    assert gone.evictions[0].preemptor_uid == "uid-p" and gone.message == "gone"
    assert parse_workload({**workload("x"), "metadata": {"name": "x", "namespace": "ns"}}) is None


def test_effective_snapshot_takes_kueues_order_placement_and_drops_what_it_did_not_admit(snap):
    ta = {"levels": [HOST], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "n2"}],
                                        "podCounts": {"universal": 1}}]}
    final = {ref("a"): parse_workload(workload("wa", owner="a", created="2026-12-05T10:00:01Z")),
             ref("b"): parse_workload(workload("wb", owner="b", created="2026-12-05T10:00:00Z"))}
    first = {ref("r"): parse_workload(workload("wr", owner="r", admitted=True, topology=ta)),
             ref("s"): parse_workload(workload("ws", owner="s", message="no room"))}
    shift = NOW - 1796464805.0
    eff = effective_snapshot(snap, final, first, shift)
    by = {w.ref: w for w in eff.snapshot.workloads}
    assert by[ref("a")].queued_at == by[ref("a")].created_at == NOW - 4 and by[ref("a")].uid == "uid-wa"
    assert by[ref("b")].queued_at == NOW - 5                 # Kueue's order: b before a now
    assert eff.missing == (ref("c"),) and by[ref("c")] == next(w for w in snap.workloads if w.ref == ref("c"))
    assert by[ref("r")].assignment == (PodSetAssignment("main", 1, {GPU: "f"}, (HOST,), ((("n2",), 1),)),)
    assert by[ref("r")].admitted_at == NOW and by[ref("r")].uid == "uid-wr"
    assert ref("s") not in by and eff.dropped == ((ref("s"), "Kueue did not admit it: no room"),)


def test_quota_only_running_work_keeps_its_nodes_with_kueues_flavor(snap):
    first = {ref("r"): parse_workload(workload("wr", owner="r", admitted=True, flavor_name="g")),
             ref("s"): parse_workload(workload("ws", owner="s", admitted=True))}
    eff = effective_snapshot(snap, {}, first, 0.0)
    r = next(w for w in eff.snapshot.workloads if w.ref == ref("r"))
    assert r.assignment == (PodSetAssignment("main", 1, {GPU: "g"}, (HOST,), ((("n1",), 1),)),)


def test_rows_and_decisions_say_what_kueue_did(snap):
    message = "Preempted to accommodate a workload (UID: uid-wa, JobUID: j) due to prioritization in the ClusterQueue"
    first = {ref("r"): parse_workload(workload("wr", owner="r", admitted=True)),
             ref("s"): parse_workload(workload("ws", owner="s", admitted=True))}
    final = {ref("a"): parse_workload(workload("wa", owner="a", admitted=True)),
             ref("b"): parse_workload(workload("wb", owner="b")),
             ref("c"): parse_workload(workload("wc", owner="c")),
             ref("r"): parse_workload(workload("wr", owner="r", evicted=("InClusterQueue", message))),
             ref("s"): parse_workload(workload("ws", owner="s", admitted=True))}
    eff = effective_snapshot(snap, final, first, 0.0)
    rows = {r.ref.name: r for r in kueue_rows(eff.snapshot, final, first)}
    assert {n: r.outcome for n, r in rows.items()} == {"a": "admitted", "b": "pending", "c": "pending",
                                                       "r": "evicted", "s": "running"}
    assert rows["a"].quota_only and rows["r"].preemptors == (ref("a"),) and rows["b"].message == "waiting"
    d = kueue_decisions(eff.snapshot, rows.values())
    assert [a.workload.name for a in d.admissions] == ["a"]
    assert [(e.workload.name, e.reason, e.for_) for e in d.evictions] == [("r", "Preempted", (ref("a"),))]
    assert d.evictions[0].cost > 0


def test_the_effective_snapshot_file_reads_back_as_the_effective_snapshot():
    objects = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {HOST: "n1"}},
         "status": {"allocatable": {GPU: "8", "cpu": "8", "pods": "110"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
             {"name": "f", "resources": [{"name": GPU, "nominalQuota": "8"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
         "spec": {"clusterQueue": "cq"}},
    ]

    def job_obj(name, running):
        meta = {"name": name, "namespace": "ns", "uid": f"job-{name}", "creationTimestamp": "2026-12-01T09:00:00Z",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": {"stowplan.io/evicted-at": rfc3339(NOW)}}
        if running:
            meta["annotations"]["stowplan.io/assignment"] = json.dumps([{"name": "main", "count": 1, "flavors": {GPU: "f"},
                "topologyAssignment": {"levels": [HOST], "domains": [{"values": ["n1"], "count": 1}]}}])
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                "spec": {"suspend": not running, "parallelism": 1, "template": {"spec": {"containers": [
                    {"name": "m", "image": "x", "resources": {"requests": {GPU: "2"}}}]}}}}

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "r-1", "namespace": "ns", "labels": {"job-name": "r"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "m", "image": "x", "resources": {"requests": {GPU: "2"}}}]},
           "status": {"phase": "Running"}}
    objects += [job_obj("p", False), job_obj("r", True), job_obj("d", True), pod]
    original = build_snapshot(objects, now=NOW)
    final = {ObjectRef("Job", "ns", "p"): parse_workload(workload("wp", owner="p"))}
    first = {ObjectRef("Job", "ns", "r"): parse_workload(workload("wr", owner="r", admitted=True))}
    eff = effective_snapshot(original, final, first, NOW - 1796464810.0)
    document = effective_objects(objects, original, eff)
    assert [o["metadata"]["name"] for o in document["items"] if o["kind"] in ("Job", "Pod")] == ["p", "r"]
    again = build_snapshot(document["items"], now=NOW)
    fields = ("ref", "state", "queued_at", "created_at", "uid", "assignment", "admitted_at", "priority")
    assert [tuple(getattr(w, f) for f in fields) for w in again.workloads] == \
           [tuple(getattr(w, f) for f in fields) for w in eff.snapshot.workloads]
    assert {w.ref.name: w.state for w in again.workloads} == {"p": WorkloadState.PENDING, "r": WorkloadState.RUNNING}


# ---------------------------------------------------------------- objects

def test_kueue_objects_become_v1beta2_as_kueues_own_conversion_does():
    notes: list[str] = []
    cq_v1 = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
             "metadata": {"name": "cq", "uid": "u", "resourceVersion": "5", "creationTimestamp": "t"},
             "spec": {"cohort": "c", "admissionChecks": ["prov"], "stopPolicy": "Hold",
                      "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}}
    out = bodies.kueue_body(cq_v1, notes)
    assert out == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                   "spec": {"cohortName": "c", "flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                                                                     "whenCanPreempt": "MayStopSearch"}}}
    assert notes == ["ClusterQueue/cq: spec.admissionChecks dropped (Stowplan plans without admission checks)"]
    cohort = bodies.kueue_body({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort",
                                "metadata": {"name": "c"}, "spec": {"parent": "root"}})
    assert cohort["spec"] == {"parentName": "root"}
    wpc = bodies.kueue_body({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
                             "metadata": {"name": "hi"}, "value": 10, "description": "d"})
    assert wpc == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                   "metadata": {"name": "hi"}, "value": 10, "description": "d"}
    held = bodies.held_spec({"preemption": {"withinClusterQueue": "LowerPriority"}}, preemption=False, hold=True)
    assert held == {"preemption": bodies.NO_PREEMPTION, "stopPolicy": "Hold"}


def test_workloads_are_created_suspended_gated_and_pinned_when_running():
    obj = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                        "ownerReferences": [{"kind": "X"}]},
           "spec": {"suspend": False, "selector": {"matchLabels": {"controller-uid": "u"}},
                    "template": {"metadata": {"labels": {"controller-uid": "u", "app": "t"}},
                                 "spec": {"schedulingGates": [{"name": "stowplan.io/topology"}],
                                          "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                              "nodeSelectorTerms": [{"matchExpressions": [
                                                  {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                                          "containers": [{"name": "m", "image": "x"}]}}},
           "status": {"active": 1}}
    out = bodies.workload_body(obj, {"main": ["n2", "n1"]})
    assert out["metadata"] == {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    assert "status" not in out and "selector" not in out["spec"] and out["spec"]["suspend"] is True
    template = out["spec"]["template"]
    assert template["metadata"] == {"labels": {"app": "t"}}
    assert template["spec"]["schedulingGates"] == [{"name": bodies.GATE}]
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                           {"key": HOST, "operator": "In", "values": ["n1", "n2"]}]}]
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "ns"},
              "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
                  "containers": [{"name": "m", "image": "x"}]}}}}}]}}
    out = bodies.workload_body(jobset)
    assert out["spec"]["suspend"] is True
    pod_spec = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod_spec["schedulingGates"] == [{"name": bodies.GATE}] and "affinity" not in pod_spec


def test_unmanaged_pods_and_nodes_keep_what_capacity_depends_on():
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "dcgm", "namespace": "kube-system", "ownerReferences": [{"kind": "DaemonSet"}]},
           "spec": {"nodeName": "n1", "tolerations": [{"operator": "Exists"}], "containers": [{"name": "c"}]}}
    out = bodies.unmanaged_pod_body(pod, {"cpu": 1500, "memory": 2**30, GPU: 2, "pods": 1})
    assert out["metadata"] == {"name": "dcgm", "namespace": "kube-system"}
    assert out["spec"]["nodeName"] == "n1" and out["spec"]["tolerations"] == [{"operator": "Exists"}]
    requests = {"cpu": "1500m", "memory": str(2**30), GPU: "2"}
    assert out["spec"]["containers"][0]["resources"] == {"requests": requests, "limits": requests}
    created, status = bodies.node_bodies({"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": "n1", "uid": "u", "labels": {"rack": "r1"}},
                                          "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule", "timeAdded": "t"}],
                                                   "unschedulable": True},
                                          "status": {"allocatable": {GPU: 8}}})
    assert created["metadata"]["labels"] == {"rack": "r1", HOST: "n1"}
    assert created["spec"] == {"taints": [{"key": "gpu", "effect": "NoSchedule"}], "unschedulable": True}
    assert status["status"]["allocatable"] == {GPU: "8", "pods": "110"}
    assert bodies.node_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}) is False
