"""ProvisioningRequest admission checks (issue 36 item 4): the policy field, the gate, the
requests a cycle wants (chosen by the capacity what-if), their cleanup, the plan's
section, and the verifier's rule. Snapshots are real Kubernetes objects read by the
real reader; every expected answer is worked out by hand below."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from models import ObjectRef
from models.plan import Admission
from models.objects import PodSetAssignment
from planner.base.errors import InputError
from planner.base.solve_options import SolveOptions
from planner.output.document import plan_to_dict
from planner.whatif.provisioning import plan_cycle, pod_template_name, request_name
from planner.snapshot import build_snapshot
from planner.verify import verify
from models.plan import Decisions

NS = "team-a"
POOL = "example.com/pool"
TEMPLATE = {"name": "big", "cost": 1, "labels": {POOL: "big"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "max": 4}


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, POOL: "small"}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def kueue(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": metadata, "spec": spec}


def job(name: str, pods: int, cpu: str = "2", created: str = "2026-12-01T09:00:00Z", priority: int = 0,
        suspend: bool = True, assignment: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}",
                                "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "creationTimestamp": created}
    if assignment:
        metadata["annotations"] = {"stowplan.io/assignment": assignment}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"suspend": suspend, "parallelism": pods, "completions": pods,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}}


def request(workload: str, attempt: int = 1, conditions: tuple[str, ...] = (), check: str = "prov") -> dict[str, Any]:
    name = request_name(ObjectRef("Job", NS, workload), check, attempt)
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"stowplan.io/managed": "true", "stowplan.io/admission-check": check},
                         "annotations": {"stowplan.io/workload": f"Job/{NS}/{workload}"}},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": pod_template_name(name, "main")}, "count": 1}]},
            "status": {"conditions": [{"type": c, "status": "True", "reason": "R", "message": "m",
                                       "lastTransitionTime": "2026-12-01T10:00:00Z"} for c in conditions]}}


def policy(**provisioning: Any) -> dict[str, Any]:
    spec = {"enabled": True, "templates": [TEMPLATE], **provisioning}
    return {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
            "spec": {"provisioning": spec}}


def cluster(*extra: dict[str, Any], checked: bool = True, enabled: bool = True,
            **provisioning: Any) -> list[dict[str, Any]]:
    """One 4-core node (pool small), quota for 100 cores, a ClusterQueue behind check `prov`."""
    cq: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": "any", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}
    if checked:
        cq["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    objects = [
        node("n1"), kueue("ResourceFlavor", "any", {}), kueue("ClusterQueue", "cq", cq),
        kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace=NS),
        kueue("AdmissionCheck", "prov", {"controllerName": "kueue.x-k8s.io/provisioning-request",
                                         "parameters": {"apiGroup": "kueue.x-k8s.io",
                                                        "kind": "ProvisioningRequestConfig", "name": "prc"}}),
        kueue("ProvisioningRequestConfig", "prc", {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                                                   "parameters": {"ValidUntilSeconds": "600"}}),
    ]
    if enabled:
        objects.append(policy(**provisioning))
    return objects + list(extra)


def snap(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    return build_snapshot([{"apiVersion": "v1", "kind": "List",
                            "metadata": {"annotations": {"stowplan.io/snapshot-time": "2026-12-01T12:00:00Z"}},
                            "items": objects}], source="test.yaml")


def run(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    return plan_cycle(snap(objects), SolveOptions(solver="greedy"))


# ---------------------------------------------------------------- the policy field

@pytest.mark.parametrize("spec, field", [
    ({"enabled": "yes", "templates": [TEMPLATE]}, "spec.provisioning.enabled"),
    ({"enabled": True, "templates": [TEMPLATE], "maxNodesPerCycle": -1}, "spec.provisioning.maxNodesPerCycle"),
    ({"enabled": True, "templates": [TEMPLATE], "maxNodes": 3}, "spec.provisioning.maxNodes"),
    ({"enabled": True}, "spec.provisioning.templates"),
    ({"enabled": True, "templates": [{**TEMPLATE, "cost": 0}]}, "spec.provisioning.templates[0].cost"),
    ("on", "spec.provisioning"),
])
def test_a_bad_provisioning_policy_is_an_input_error_naming_the_field(spec: Any, field: str) -> None:
    bad = {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
           "spec": {"provisioning": spec}}
    with pytest.raises(InputError) as err:
        snap(cluster(enabled=False) + [bad])
    assert err.value.field == field and err.value.exit_code == 2


def test_the_policy_reads_enabled_the_bound_and_the_templates() -> None:
    s = snap(cluster(maxNodesPerCycle=3))
    p = s.policy.provisioning
    assert p.enabled and p.max_nodes_per_cycle == 3 and [t.name for t in p.templates] == ["big"]


# ---------------------------------------------------------------- the gate and the choice

def test_a_workload_too_big_for_the_cluster_gets_one_request_for_the_nodes_the_what_if_adds() -> None:
    # 3 pods x 2 cores = 6 cores; n1 has 4: no plan places it today. One 8-core "big"
    # node holds 4 such pods: the what-if adds 1 node, and the gate keeps it pending.
    plan = run(cluster(job("train", 3)))
    assert plan.admissions == ()
    (pending,) = plan.pending
    assert "waits for a ProvisioningRequest (admission check prov)" in pending.reason
    assert plan.provisioning is not None
    (req,) = plan.provisioning.requests
    assert req.create and req.name == "job-train-prov-1" and req.namespace == NS
    assert req.class_name == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert dict(req.parameters) == {"ValidUntilSeconds": "600"}
    assert dict(req.nodes) == {"big": 1}
    (ps,) = req.pod_sets
    assert (ps.name, ps.pod_template, ps.count) == ("main", "ppt-job-train-prov-1-main", 3)
    assert dict(ps.requests) == {"cpu": 2000}
    assert dict(ps.node_selector) == {POOL: "big"}     # all 3 pods on the new node: its template's labels


def test_the_milp_cycle_makes_the_same_request() -> None:
    plan = plan_cycle(snap(cluster(job("train", 3))), SolveOptions(solver="milp", time_limit=10))
    assert plan.solver.method == "milp" and plan.admissions == ()
    assert plan.provisioning is not None
    assert [(r.name, dict(r.nodes)) for r in plan.provisioning.requests] == [("job-train-prov-1", {"big": 1})]


def test_a_workload_that_fits_today_still_needs_its_request_and_asks_for_no_node() -> None:
    # 1 pod of 2 cores fits n1, but its queue's check must be Ready first (as in Kueue)
    plan = run(cluster(job("small", 1)))
    assert plan.admissions == ()
    assert plan.provisioning is not None
    (req,) = plan.provisioning.requests
    assert req.name == "job-small-prov-1" and dict(req.nodes) == {}
    assert dict(req.pod_sets[0].node_selector) == {}     # on today's node: no template to name


def test_max_nodes_per_cycle_keeps_the_later_workload_for_a_later_cycle() -> None:
    # a (older) needs 1 big node (3 x 2 cores), b too; the bound 1 admits a's request only
    plan = run(cluster(job("a", 3, created="2026-12-01T08:00:00Z"), job("b", 3), maxNodesPerCycle=1))
    assert plan.provisioning is not None
    assert [r.name for r in plan.provisioning.requests] == ["job-a-prov-1"]
    assert any("job-b" not in n and "team-a/b" in n and "maxNodesPerCycle" in n
               for n in plan.provisioning.notes), plan.provisioning.notes


def test_no_request_for_a_workload_no_template_can_hold() -> None:
    # one pod of 16 cores: neither n1 (4) nor a big node (8) holds it
    plan = run(cluster(job("huge", 1, cpu="16")))
    assert plan.provisioning is not None and plan.provisioning.requests == ()
    assert any("team-a/huge" in n for n in plan.provisioning.notes)


def test_a_provisioned_request_opens_the_gate_and_the_plan_admits_on_the_snapshot_nodes() -> None:
    plan = run(cluster(job("small", 1), request("small", conditions=("Accepted", "Provisioned"))))
    assert [a.workload.name for a in plan.admissions] == ["small"]
    assert plan.provisioning is not None
    (req,) = plan.provisioning.requests
    assert not req.create and req.name == "job-small-prov-1"


def test_provisioned_but_the_nodes_not_yet_in_the_snapshot_waits_for_them() -> None:
    # the plan never admits against promised capacity: 6 cores on a 4-core cluster wait
    plan = run(cluster(job("train", 3), request("train", conditions=("Provisioned",))))
    assert plan.admissions == ()
    assert plan.provisioning is not None and [r.create for r in plan.provisioning.requests] == [False]


def test_an_accepted_request_keeps_the_workload_waiting_and_is_not_made_again() -> None:
    plan = run(cluster(job("train", 3), request("train", conditions=("Accepted",))))
    assert plan.admissions == ()
    assert "to report Provisioned=True (Accepted)" in plan.pending[0].reason
    assert plan.provisioning is not None
    assert [(r.name, r.create) for r in plan.provisioning.requests] == [("job-train-prov-1", False)]


def test_a_failed_request_is_replaced_by_the_next_attempt() -> None:
    plan = run(cluster(job("train", 3), request("train", conditions=("Failed",))))
    assert plan.provisioning is not None
    assert [(r.name, r.create, r.attempt) for r in plan.provisioning.requests] == [("job-train-prov-2", True, 2)]
    (gone,) = plan.provisioning.deletions
    assert gone.name == "job-train-prov-1" and gone.reason == "it reports Failed: a new attempt replaces it"
    assert gone.pod_templates == ("ppt-job-train-prov-1-main",)


@pytest.mark.parametrize("condition", ["BookingExpired", "CapacityRevoked"])
def test_an_expired_or_revoked_request_of_a_waiting_workload_is_replaced(condition: str) -> None:
    plan = run(cluster(job("train", 3), request("train", conditions=("Provisioned", condition))))
    assert plan.admissions == ()
    assert plan.provisioning is not None
    assert [(r.name, r.create) for r in plan.provisioning.requests] == [("job-train-prov-2", True)]
    assert [d.reason for d in plan.provisioning.deletions] == [f"it reports {condition}: a new attempt replaces it"]


def test_after_the_retries_no_new_request_is_made_and_a_note_says_so() -> None:
    failed = [request("train", attempt=n, conditions=("Failed",)) for n in (1, 2, 3, 4)]
    plan = run(cluster(job("train", 3), *failed))
    assert plan.provisioning is not None
    assert [(r.name, r.create) for r in plan.provisioning.requests] == [("job-train-prov-4", False)]
    assert any("3 retries" in n and "team-a/train" in n for n in plan.provisioning.notes)
    # the older attempts go; the last stays as the record (else attempt 1 would start over)
    assert sorted(d.name for d in plan.provisioning.deletions) == [f"job-train-prov-{n}" for n in (1, 2, 3)]
    assert "waits for ProvisioningRequest team-a/job-train-prov-4" in plan.pending[0].reason


def test_a_long_name_is_cut_with_a_hash_and_its_attempt_read_from_the_label() -> None:
    long = "x" * 250
    name = request_name(ObjectRef("Job", NS, long), "prov", 2)
    assert len(name) == 253 and name != request_name(ObjectRef("Job", NS, long), "prov", 3)
    assert len(pod_template_name(name, "main")) == 253
    obj = request(long, attempt=2, conditions=("Failed",))
    obj["metadata"]["labels"]["stowplan.io/provisioning-attempt"] = "2"
    s = snap(cluster(obj))
    assert [(r.name, r.attempt) for r in s.provisioning_requests] == [(name, 2)]
    plan = plan_cycle(s, SolveOptions(solver="greedy"))      # no Job of that name: its request goes
    assert plan.provisioning is not None and [d.name for d in plan.provisioning.deletions] == [name]


def test_requests_no_longer_needed_are_deleted() -> None:
    # gone: its Job was deleted; admitted-elsewhere: runs, admitted without a Provisioned request
    running = job("elsewhere", 1, suspend=False, assignment='[{"name":"main","count":1,"flavors":{"cpu":"any"},'
                  '"topologyAssignment":{"levels":["kubernetes.io/hostname"],"domains":[{"values":["n1"],"count":1}]}}]')
    plan = run(cluster(running, request("gone", conditions=("Accepted",)), request("elsewhere")))
    assert plan.provisioning is not None
    reasons = {d.name: d.reason for d in plan.provisioning.deletions}
    assert reasons == {"job-gone-prov-1": "its workload is gone",
                       "job-elsewhere-prov-1": "its workload runs, admitted without it"}


def test_a_running_workload_keeps_its_provisioned_request() -> None:
    running = job("done", 1, suspend=False, assignment='[{"name":"main","count":1,"flavors":{"cpu":"any"},'
                  '"topologyAssignment":{"levels":["kubernetes.io/hostname"],"domains":[{"values":["n1"],"count":1}]}}]')
    plan = run(cluster(running, request("done", conditions=("Provisioned",))))
    assert plan.provisioning is not None and plan.provisioning.deletions == ()
    assert [r.name for r in plan.provisioning.requests] == ["job-done-prov-1"]


def test_the_request_of_a_workload_the_plan_evicts_is_deleted() -> None:
    from models.plan import Eviction
    from planner.whatif.provisioning import plan_provisioning

    running = job("done", 1, suspend=False, assignment='[{"name":"main","count":1,"flavors":{"cpu":"any"},'
                  '"topologyAssignment":{"levels":["kubernetes.io/hostname"],"domains":[{"values":["n1"],"count":1}]}}]')
    s = snap(cluster(running, request("done", conditions=("Provisioned",))))
    plan = plan_cycle(s, SolveOptions(solver="greedy"))
    evicting = replace(plan, evictions=(Eviction(ObjectRef("Job", NS, "done"), "Preempted"),))
    section = plan_provisioning(s, evicting, lambda snapshot: plan_cycle(snapshot, SolveOptions(solver="greedy")))
    assert section is not None
    assert [(d.name, d.reason) for d in section.deletions] == [("job-done-prov-1", "its workload is evicted by this plan")]


def test_without_the_policy_the_check_is_ignored_and_reported() -> None:
    s = snap(cluster(job("small", 1), enabled=False))
    (problem,) = [p for p in s.problems if "ProvisioningRequest admission check" in p.message]
    assert (problem.file, problem.ref, problem.field) == ("test.yaml", ObjectRef("ClusterQueue", "", "cq"),
                                                          "spec.admissionChecksStrategy")
    plan = plan_cycle(s, SolveOptions(solver="greedy"))
    assert [a.workload.name for a in plan.admissions] == ["small"] and plan.provisioning is None


def test_a_queue_without_the_check_is_not_gated() -> None:
    plan = run(cluster(job("small", 1), checked=False))
    assert [a.workload.name for a in plan.admissions] == ["small"]
    assert plan.provisioning is not None and plan.provisioning.requests == ()


def test_a_check_whose_config_is_missing_holds_its_workloads_with_that_reason() -> None:
    objects = [o for o in cluster(job("small", 1)) if o["kind"] != "ProvisioningRequestConfig"]
    plan = run(objects)
    assert plan.admissions == ()
    assert "ProvisioningRequestConfig prc not found" in plan.pending[0].reason
    assert plan.provisioning is not None and plan.provisioning.requests == ()


def test_the_same_snapshot_plans_the_same_section() -> None:
    objects = cluster(job("a", 3, created="2026-12-01T08:00:00Z"), job("b", 1), request("c"))
    assert plan_to_dict(run(objects))["provisioning"] == plan_to_dict(run(objects))["provisioning"]


# ---------------------------------------------------------------- the plan section

def test_the_plan_section_lists_requests_deletions_and_notes() -> None:
    out = plan_to_dict(run(cluster(job("train", 3), request("gone"))))
    section = out["provisioning"]
    assert list(out).index("provisioning") == list(out).index("pending") + 1
    (req,) = section["requests"]
    assert req == {
        "namespace": NS, "name": "job-train-prov-1", "workload": {"kind": "Job", "namespace": NS, "name": "train"},
        "admissionCheck": "prov", "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "parameters": {"ValidUntilSeconds": "600"}, "attempt": 1, "action": "create", "nodes": {"big": 1},
        "podSets": [{"name": "main", "podTemplate": "ppt-job-train-prov-1-main", "count": 3,
                     "requests": {"cpu": "2000m"}, "nodeSelector": {POOL: "big"}, "tolerations": []}]}
    assert section["deletions"] == [{"namespace": NS, "name": "job-gone-prov-1",
                                     "workload": {"kind": "Job", "namespace": NS, "name": "gone"},
                                     "reason": "its workload is gone",
                                     "podTemplates": ["ppt-job-gone-prov-1-main"]}]


def test_the_table_lists_the_requests() -> None:
    from planner.output.document import render

    text = render(run(cluster(job("train", 3), request("gone"))), "table")
    assert "ProvisioningRequests: 1 to create, 0 kept, 1 to delete" in text
    assert "create team-a/job-train-prov-1 for train (best-effort-atomic-scale-up.autoscaling.x-k8s.io; big x1)" in text
    assert "delete team-a/job-gone-prov-1: its workload is gone" in text


def test_a_plan_without_the_policy_has_no_section() -> None:
    assert "provisioning" not in plan_to_dict(run(cluster(job("small", 1), enabled=False)))


# ---------------------------------------------------------------- the verifier

def _admit_small(conditions: tuple[str, ...] | None) -> list[str]:
    extra = [request("small", conditions=conditions)] if conditions is not None else []
    s = snap(cluster(job("small", 1), *extra))
    # lift the reader's gate: the rule must hold from the requests alone
    s = replace(s, workloads=tuple(replace(w, blocked_reason=None) for w in s.workloads))
    admission = Admission(ObjectRef("Job", NS, "small"), "cq", (PodSetAssignment(
        "main", 1, {"cpu": "any"}, ("kubernetes.io/hostname",), ((("n1",), 1),)),))
    return verify(s, Decisions(admissions=(admission,)))


@pytest.mark.parametrize("conditions, wanted", [
    (None, "with no request"),
    ((), "is not Provisioned (no condition)"),
    (("Accepted",), "is not Provisioned (Accepted)"),
    (("Provisioned", "CapacityRevoked"), "is not Provisioned (CapacityRevoked, Provisioned)"),
    (("Provisioned", "BookingExpired"), "is not Provisioned (BookingExpired, Provisioned)"),
])
def test_the_verifier_refuses_an_admission_through_a_check_whose_request_is_not_provisioned(
        conditions: tuple[str, ...] | None, wanted: str) -> None:
    violations = _admit_small(conditions)
    assert any("admission check prov" in v and wanted in v for v in violations), violations


def test_the_verifier_accepts_it_once_provisioned() -> None:
    assert _admit_small(("Accepted", "Provisioned")) == []


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_a_saved_plan_keeps_its_provisioning_section(tmp_path: Any, fmt: str) -> None:
    from planner.cluster.planfile import load_plan, render_saved

    plan = run(cluster(job("train", 3), request("gone")))
    assert plan.provisioning is not None and plan.provisioning.requests and plan.provisioning.deletions
    path = tmp_path / f"plan.{fmt}"
    path.write_text(render_saved(plan, {}, fmt))
    loaded, _ = load_plan(str(path))
    assert loaded.provisioning == plan.provisioning


def test_a_malformed_admission_check_is_a_problem_naming_it_and_its_field() -> None:
    bad = kueue("AdmissionCheck", "broken", {"controllerName": "kueue.x-k8s.io/provisioning-request",
                                             "parameters": "prc"})
    s = snap(cluster(job("small", 1), bad))
    (problem,) = [p for p in s.problems if p.ref == ObjectRef("AdmissionCheck", "", "broken")]
    assert problem.field == "spec.parameters" and "mapping" in problem.message
    assert list(s.provisioning_checks) == ["prov"]      # the good check is still read


def test_a_malformed_request_is_a_problem_and_ignored() -> None:
    obj = request("small")
    obj["metadata"]["annotations"]["stowplan.io/workload"] = "not-a-ref"
    s = snap(cluster(job("small", 1), obj))
    (problem,) = [p for p in s.problems if p.ref is not None and p.ref.kind == "ProvisioningRequest"]
    assert problem.field == "metadata.annotations.stowplan.io/workload"
    assert s.provisioning_requests == ()
