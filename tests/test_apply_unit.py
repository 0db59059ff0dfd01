"""The pure parts of planner/cluster: what an admitted pod template looks like, the
assignment annotation, saved plans, staleness, and the Applier's decisions against
an in-memory API (no cluster)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from models import (
    Admission, Domain, Eviction, Migration, NodePins, ObjectRef, Plan, PodSetAssignment, ResourceFlavor, SolverReport,
    Toleration,
)
from planner.cluster.apply import (
    ASSIGNMENT, GATE, MIGRATING_TO, ORIGINAL, Applier, admitted_template_spec, moving_assignments,
    running_assignments,
)
from planner.cluster.cycle import stale_objects
from planner.cluster.planfile import load_plan, render_saved
from planner.cluster.kube import ApiStatus
from planner.cluster.reader import LiveSnapshot
from planner.base.errors import InputError
from planner.k8s.annotations import assignment_entry, decode_assignment, decode_entries, encode_assignment

HOST = "kubernetes.io/hostname"
PS = PodSetAssignment("main", 3, {"nvidia.com/gpu": "h100"}, (HOST,), ((("n1",), 2), (("n2",), 1)))
FLAVORS = {"h100": ResourceFlavor("h100", {"pool": "h100"}, tolerations=(Toleration("gpu", "Exists", "", "NoSchedule"),))}
REF = ObjectRef("Job", "team", "train")


def job(rv: str = "1", suspend: bool = True, annotations: dict[str, str] | None = None,
        spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team", "resourceVersion": rv, "uid": "u1",
                         "annotations": dict(annotations or {})},
            "spec": {"suspend": suspend, "parallelism": 3,
                     "template": {"spec": spec if spec is not None else {"containers": [{"name": "c"}]}}}}


def plan_of(admissions=(), evictions=()) -> Plan:
    return Plan("s", "d", 1, SolverReport("milp", "optimal", 0, 0, 0), tuple(admissions), tuple(evictions))


class FakeKube:
    """Objects by path; PUT checks resourceVersion like the API server; pods listed per namespace."""

    def __init__(self, objects: dict[str, dict[str, Any]], dry_run: bool = False):
        self.objects, self.dry_run, self.writes, self.calls = objects, dry_run, 0, []
        self.before_write = None
        self.rv = 100

    def get_or_none(self, path):
        obj = self.objects.get(path)
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, path, label_selector=None, page_size=500):
        prefix = path + "/"
        return [copy.deepcopy(o) for p, o in sorted(self.objects.items()) if p.startswith(prefix)]

    def write(self, method, path, body, content_type="application/json"):
        self.calls.append((method, path))
        self.writes += 1
        if method == "PUT":
            current = self.objects[path]
            if current["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
                raise ApiStatus(method, path, 409, "the object has been modified")
            self.rv += 1
            body = copy.deepcopy(body)
            body["metadata"]["resourceVersion"] = str(self.rv)
            if not self.dry_run:
                self.objects[path] = body
            return body
        if method == "PATCH":
            pod = copy.deepcopy(self.objects[path])
            for op in body:
                if op["op"] == "test":
                    if pod["metadata"]["resourceVersion"] != op["value"]:
                        raise ApiStatus(method, path, 422, "test failed")
                elif op["op"] == "add" and op["path"] == "/spec/nodeSelector":
                    pod["spec"]["nodeSelector"] = op["value"]
                elif op["op"] == "add":
                    pod["spec"]["nodeSelector"][op["path"].rsplit("/", 1)[1].replace("~1", "/")] = op["value"]
                elif op["op"] == "remove":
                    del pod["spec"]["schedulingGates"][int(op["path"].rsplit("/", 1)[1])]
            if not self.dry_run:
                self.objects[path] = pod
            return pod
        return {}


JOB_PATH = "/apis/batch/v1/namespaces/team/jobs/train"


def pod(name: str, node: str | None = None, gated: bool = True, phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": {"pool": "h100"}}
    if gated:
        spec["schedulingGates"] = [{"name": "other"}, {"name": GATE}]
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "team", "resourceVersion": "7",
                         "labels": {"batch.kubernetes.io/job-name": "train"}},
            "spec": spec, "status": {"phase": phase}}


# ---------------------------------------------------------------- pure

def test_assignment_annotation_is_exactly_the_plans_pod_sets_entries():
    assert json.loads(encode_assignment([PS])) == [assignment_entry(PS)]
    assert decode_entries(json.loads(encode_assignment([PS]))) == [PS]


def test_admitted_template_adds_flavor_nodes_and_gate_keeping_the_users_own():
    base = {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "x", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]},
                {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]}]}},
                "podAffinity": {"x": 1}},
            "schedulingGates": [{"name": "user"}]}
    before = copy.deepcopy(base)
    out = admitted_template_spec(base, PS, FLAVORS, pins=NodePins())
    assert base == before   # pure
    assert out["nodeSelector"] == {"zone": "a", "pool": "h100"}
    assert out["tolerations"] == [{"key": "x", "operator": "Exists"},
                                  {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    terms = out["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pin = {"key": HOST, "operator": "In", "values": ["n1", "n2"]}
    assert [t["matchExpressions"][-1] for t in terms] == [pin, pin] and len(terms[0]["matchExpressions"]) == 2
    assert out["affinity"]["podAffinity"] == {"x": 1}
    assert out["schedulingGates"] == [{"name": "user"}, {"name": GATE}]
    again = admitted_template_spec(base, PS, FLAVORS, pins=NodePins())
    assert again == out


def test_running_assignments_reads_unsuspended_annotated_workloads_only():
    doc = {"items": [job(suspend=False, annotations={ASSIGNMENT: encode_assignment([PS])}),
                     {**job(), "metadata": {**job()["metadata"], "name": "pending"}},
                     {**job(suspend=False), "metadata": {**job()["metadata"], "name": "external"}}]}
    assert running_assignments(doc) == {REF: [PS]}


def test_moving_assignments_reads_suspended_jobs_with_a_new_place_only():
    doc = {"items": [job(annotations={MIGRATING_TO: encode_assignment([PS])}),
                     {**job(suspend=False, annotations={MIGRATING_TO: encode_assignment([PS])}),
                      "metadata": {**job()["metadata"], "name": "running"}},
                     {**job(), "metadata": {**job()["metadata"], "name": "pending"}}]}
    assert moving_assignments(doc) == {REF: Admission(REF, "", (PS,))}


def test_saved_plan_keeps_its_migrations(tmp_path):
    old = PodSetAssignment("main", 3, {"nvidia.com/gpu": "h100"}, (HOST,), ((("n9",), 3),))
    move = Migration(REF, "cq", (old,), (PS,), (Domain(("rack",), ("r1",)),), (ObjectRef("Job", "team", "big"),), 1.5)
    plan = Plan("s", "d", 1, SolverReport("milp", "optimal", 0, 0, 0), migrations=(move,))
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {REF: "7"}, "yaml"))
    loaded, versions = load_plan(str(path))
    assert loaded.migrations == (move,) and versions == {REF: "7"}


def test_saved_plan_round_trip_and_refusals(tmp_path):
    plan = plan_of([Admission(REF, "cq", (PS,))], [Eviction(ObjectRef("Job", "team", "old"), "Preempted", (REF,), 2.5)])
    versions = {REF: "11", ObjectRef("Job", "team", "old"): "12"}
    for fmt in ("yaml", "json"):
        path = tmp_path / f"plan.{fmt}"
        path.write_text(render_saved(plan, versions, fmt))
        loaded, got = load_plan(str(path))
        assert got == versions
        assert loaded.admissions == plan.admissions and loaded.evictions == plan.evictions
    bare = tmp_path / "bare.yaml"
    bare.write_text("apiVersion: stowplan.io/v1alpha1\nkind: Plan\nsnapshot: {source: x}\nadmissions: []\n")
    with pytest.raises(InputError, match="resourceVersions"):
        load_plan(str(bare))


def live_of(*objects: dict[str, Any]) -> LiveSnapshot:
    return LiveSnapshot({"items": list(objects)}, b"", None, "v1beta2", {}, 0.0)  # type: ignore[arg-type]


def test_stale_names_the_changed_object_but_not_one_already_as_planned():
    plan = plan_of([Admission(REF, "cq", (PS,))])
    assert stale_objects(plan, {REF: "1"}, live_of(job("1"))) == []
    assert stale_objects(plan, {REF: "1"}, live_of(job("2"))) == ["Job/team/train changed (resourceVersion 1 -> 2)"]
    done = job("5", suspend=False, annotations={ASSIGNMENT: encode_assignment([PS])})
    assert stale_objects(plan, {REF: "1"}, live_of(done)) == []
    assert stale_objects(plan, {REF: "1"}, live_of()) == ["Job/team/train no longer exists"]


# ---------------------------------------------------------------- the Applier, in memory

def test_admission_is_one_update_then_idempotent():
    kube = FakeKube({JOB_PATH: job("1", spec={"containers": [{"name": "c"}], "nodeSelector": {"zone": "a"}})})
    applier = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"}, clock=lambda: 0.0)  # type: ignore[arg-type]
    report = applier.run(plan_of([Admission(REF, "cq", (PS,))]), {}, release_wait=0)
    assert report.admitted == [REF]
    assert [c for c in kube.calls if c[0] == "PUT"] == [("PUT", JOB_PATH)]
    stored = kube.objects[JOB_PATH]
    assert stored["spec"]["suspend"] is False
    assert json.loads(stored["metadata"]["annotations"][ASSIGNMENT]) == [assignment_entry(PS)]
    assert stored["metadata"]["annotations"]["stowplan.io/admitted-at"] == "1970-01-01T00:00:00Z"
    assert json.loads(stored["metadata"]["annotations"][ORIGINAL]) == {"main": {"nodeSelector": {"zone": "a"}}}
    assert stored["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "a", "pool": "h100"}

    writes = kube.writes
    again = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"})  # type: ignore[arg-type]
    report = again.run(plan_of([Admission(REF, "cq", (PS,))]), {}, release_wait=0)
    assert report.unchanged == [REF] and report.admitted == [] and kube.writes == writes


def test_changed_since_planning_is_a_conflict_without_writes():
    kube = FakeKube({JOB_PATH: job("2")})
    report = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"}).run(  # type: ignore[arg-type]
        plan_of([Admission(REF, "cq", (PS,))]), {}, release_wait=0)
    assert report.admitted == [] and report.conflicts == [(REF, "changed since the plan was made (resourceVersion 1 -> 2)")]
    assert kube.writes == 0


def test_readmission_starts_from_the_recorded_original_template():
    original = {"main": {"nodeSelector": {"zone": "a"}}}
    stale = {"containers": [{"name": "c"}], "nodeSelector": {"zone": "a", "pool": "old"},
             "schedulingGates": [{"name": GATE}],
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                 {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n9"]}]}]}}}}
    kube = FakeKube({JOB_PATH: job("1", annotations={ORIGINAL: json.dumps(original)}, spec=stale)})
    Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"}).run(  # type: ignore[arg-type]
        plan_of([Admission(REF, "cq", (PS,))]), {}, release_wait=0)
    spec = kube.objects[JOB_PATH]["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"zone": "a", "pool": "h100"}
    assert spec["schedulingGates"] == [{"name": GATE}]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n1", "n2"]}]}]


def test_eviction_suspends_and_drops_the_assignment_once():
    kube = FakeKube({JOB_PATH: job("1", suspend=False, annotations={ASSIGNMENT: encode_assignment([PS])})})
    ev = Eviction(REF, "Reclaimed", (ObjectRef("Job", "other", "big"),), 3.0)
    report = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"}).run(plan_of(evictions=[ev]), {})  # type: ignore[arg-type]
    stored = kube.objects[JOB_PATH]
    assert report.evicted == [REF] and stored["spec"]["suspend"] is True
    assert ASSIGNMENT not in stored["metadata"]["annotations"]
    assert stored["metadata"]["annotations"]["stowplan.io/eviction-reason"] == "Reclaimed for Job/other/big"
    report = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"}).run(plan_of(evictions=[ev]), {})  # type: ignore[arg-type]
    assert report.unchanged == [REF] and report.evicted == []


def test_gate_release_fills_the_planned_nodes_minus_pods_already_there():
    pods = {f"/api/v1/namespaces/team/pods/{p['metadata']['name']}": p for p in (
        pod("a", node="n1", gated=False, phase="Running"),      # already on n1
        pod("b"), pod("c"), pod("d"),                           # three gated, two places left
        pod("e", node="n2", gated=False, phase="Failed"))}      # a failed pod gives its place back
    kube = FakeKube(pods)
    applier = Applier(kube, flavors=FLAVORS, planned_versions={})  # type: ignore[arg-type]
    applier.assignments[REF] = [PS]
    missing = applier.release_gates({REF})
    placed = {p["metadata"]["name"]: p["spec"]["nodeSelector"].get(HOST) for p in kube.objects.values()
              if p["metadata"]["name"] in "bcd"}
    assert placed == {"b": "n1", "c": "n2", "d": None}
    assert kube.objects["/api/v1/namespaces/team/pods/b"]["spec"]["schedulingGates"] == [{"name": "other"}]
    assert kube.objects["/api/v1/namespaces/team/pods/d"]["spec"]["schedulingGates"][-1] == {"name": GATE}
    assert missing == 0 and applier.report.released == 2


def test_only_workloads_with_gated_pods_are_revisited():
    running = job(suspend=False, annotations={ASSIGNMENT: encode_assignment([PS])})
    other = copy.deepcopy(running)
    other["metadata"]["name"] = "done"
    gated = {**pod("x"), "kind": "Pod"}
    placed = {**pod("y", node="n1", gated=False), "kind": "Pod"}
    placed["metadata"]["labels"] = {"batch.kubernetes.io/job-name": "done"}
    doc = {"items": [running, other, gated, placed]}
    assert set(running_assignments(doc)) == {REF, ObjectRef("Job", "team", "done")}
    assert running_assignments(doc, only_gated=True) == {REF: [PS]}


def test_status_only_change_is_not_a_conflict_but_a_spec_change_is():
    planned = job("1")
    from planner.cluster.apply import fingerprint

    status_only = job("2")
    status_only["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    kube = FakeKube({JOB_PATH: status_only})
    report = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"},  # type: ignore[arg-type]
                     fingerprints={REF: fingerprint(planned)}).run(plan_of([Admission(REF, "cq", (PS,))]), {},
                                                                   release_wait=0)
    assert report.admitted == [REF] and report.conflicts == []
    relabelled = job("2")
    relabelled["metadata"]["labels"] = {"x": "y"}
    kube = FakeKube({JOB_PATH: relabelled})
    report = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"},  # type: ignore[arg-type]
                     fingerprints={REF: fingerprint(planned)}).run(plan_of([Admission(REF, "cq", (PS,))]), {},
                                                                   release_wait=0)
    assert report.admitted == [] and kube.writes == 0
    plan = plan_of([Admission(REF, "cq", (PS,))])
    assert stale_objects(plan, {REF: "1"}, live_of(status_only), {REF: fingerprint(planned)}) == []
    assert stale_objects(plan, {REF: "1"}, live_of(relabelled), {REF: fingerprint(planned)}) != []


def test_a_conflicting_put_is_re_read_and_retried():
    kube = FakeKube({JOB_PATH: job("1")})
    from planner.cluster.apply import fingerprint

    prints = {REF: fingerprint(job("1"))}
    real_write = kube.write
    bumped = []

    def racing_write(method, path, body, content_type="application/json"):
        if method == "PUT" and not bumped:     # the job controller writes status first
            bumped.append(1)
            kube.objects[JOB_PATH]["metadata"]["resourceVersion"] = "5"
        return real_write(method, path, body, content_type)

    kube.write = racing_write  # type: ignore[method-assign]
    report = Applier(kube, flavors=FLAVORS, planned_versions={REF: "1"},  # type: ignore[arg-type]
                     fingerprints=prints).run(plan_of([Admission(REF, "cq", (PS,))]), {}, release_wait=0)
    assert report.admitted == [REF] and report.conflicts == []
    assert [c[0] for c in kube.calls].count("PUT") == 2


def test_quota_objects_come_from_config_only_without_kueue_api():
    from planner.cluster.reader import list_objects

    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    policy = {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"}}

    class Discovery:
        def __init__(self, kueue):
            self.kueue, self.listed = kueue, []

        def get_or_none(self, path):
            if path == "/apis/kueue.x-k8s.io" and self.kueue:
                return {"versions": [{"version": "v1beta2"}]}
            return None

        def list(self, path):
            self.listed.append(path)
            return [{"kind": "ResourceFlavor", "apiVersion": "kueue.x-k8s.io/v1beta2",
                     "metadata": {"name": "cluster", "managedFields": [{}]}}] if path.endswith("resourceflavors") else []

    without = Discovery(kueue=False)
    items, version, _ = list_objects(without, config_objects=[flavor, policy])  # type: ignore[arg-type]
    assert version is None and items == [flavor, policy]
    assert not any("kueue" in p or "jobset" in p for p in without.listed)
    with_api = Discovery(kueue=True)
    items, version, _ = list_objects(with_api, config_objects=[flavor, policy])  # type: ignore[arg-type]
    assert version == "v1beta2"
    assert [i["metadata"]["name"] for i in items] == ["cluster", "p"]       # the cluster's own win
    assert "managedFields" not in items[0]["metadata"]


def test_one_codec_reads_the_annotation_and_the_plan_and_names_what_is_wrong(tmp_path):
    """The annotation apply reads back and a saved plan's podSets go through the same
    checks as the snapshot reader's (planner.k8s.annotations), so a count the domains do not
    add up to is refused wherever it is read, naming where."""
    from planner.cluster.planfile import load_plan_with_fingerprints, render_saved
    from planner.base.errors import InputError
    from planner.k8s.fields import Bad

    assert decode_assignment(encode_assignment([PS])) == (PS,)
    wrong = encode_assignment([PS]).replace('"count":3', '"count":4')
    with pytest.raises(Bad) as bad:
        decode_assignment(wrong)
    assert bad.value.field == f"metadata.annotations[{ASSIGNMENT}]" and "add up to 3, not count 4" in bad.value.message
    plan = Plan("s", "", 0, SolverReport("milp", "optimal", 0, 0, 0), (Admission(REF, "cq", (PS,)),))
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {REF: "1"}, "json").replace('"count": 3', '"count": 4'))
    with pytest.raises(InputError) as err:
        load_plan_with_fingerprints(str(path))
    assert err.value.field == "admissions[].podSets" and "not count 4" in str(err.value)
