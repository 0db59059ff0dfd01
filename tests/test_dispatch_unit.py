"""The pure parts of planner/cluster/dispatch.py (no cluster): the worker's copy of a Job,
the status note, the plan's `cluster` both ways, the dispatch marks kept out of the
fingerprint, the single-cluster Applier refusing a dispatched Job, and --worker's checks.
The cluster behaviour is tested on two control planes in tests/cluster/test_live_dispatch.py."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from models import Admission, NodePins, ObjectRef, Plan, PodSetAssignment, ResourceFlavor, SolverReport
from planner.cli import cli
from planner.cluster.apply import ASSIGNMENT, DISPATCHED_TO, GATE, WORKER_STATUS, Applier, fingerprint
from planner.cluster.dispatch import ORIGIN_LABEL, ORIGIN_UID, status_note, worker_copy
from planner.cluster.planfile import load_plan_with_fingerprints, render_saved
from planner.output.document import plan_to_dict

HOST = "kubernetes.io/hostname"
PS = PodSetAssignment("main", 2, {"nvidia.com/gpu": "h100"}, (HOST,), ((("w1",), 2),))
FLAVORS = {"h100": ResourceFlavor("h100", {"pool": "h100"})}
REF = ObjectRef("Job", "team", "train")


def manager_job(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    uid_labels = {"batch.kubernetes.io/controller-uid": "m-uid", "controller-uid": "m-uid",
                  "batch.kubernetes.io/job-name": "train", "job-name": "train"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team", "uid": "m-uid", "resourceVersion": "7",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq", **uid_labels},
                         "annotations": {"stowplan.io/evicted-at": "x", "team/own": "kept", **(annotations or {})}},
            "spec": {"suspend": True, "parallelism": 2, "managedBy": "kueue.x-k8s.io/multikueue",
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "m-uid"}},
                     "template": {"metadata": {"labels": dict(uid_labels)},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


def test_worker_copy_is_the_managers_job_admitted_at_the_plans_place_with_its_origin():
    body = worker_copy(manager_job(), Admission(REF, "cq", (PS,), cluster="east"), FLAVORS, NodePins(), 0.0)
    meta, spec = body["metadata"], body["spec"]
    assert meta["labels"] == {"kueue.x-k8s.io/queue-name": "lq", ORIGIN_LABEL: "stowplan"}
    assert meta["annotations"][ORIGIN_UID] == "m-uid" and meta["annotations"]["team/own"] == "kept"
    assert "stowplan.io/evicted-at" not in meta["annotations"]              # the manager's own notes stay there
    assert json.loads(meta["annotations"][ASSIGNMENT])[0]["count"] == 2
    assert "managedBy" not in spec and "selector" not in spec and spec["suspend"] is False
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"] == {}
    assert pod["nodeSelector"] == {"pool": "h100"} and {"name": GATE} in pod["schedulingGates"]
    pin = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert pin[0]["matchExpressions"][-1] == {"key": HOST, "operator": "In", "values": ["w1"]}


def test_status_note_counts_and_true_conditions():
    note = json.loads(status_note("east", {"status": {"active": 1, "succeeded": 2, "conditions": [
        {"type": "Complete", "status": "True"}, {"type": "Failed", "status": "False"}]}}))
    assert note == {"cluster": "east", "active": 1, "ready": 0, "succeeded": 2, "failed": 0,
                    "conditions": ["Complete"]}


def test_cluster_is_written_only_when_set_and_read_back(tmp_path):
    plain = Admission(REF, "cq", (PS,))
    placed = Admission(ObjectRef("Job", "team", "other"), "cq", (PS,), cluster="east")
    plan = Plan("s", "", 0, SolverReport("milp", "optimal", 0, 0, 0), (plain, placed))
    entries = plan_to_dict(plan)["admissions"]
    assert "cluster" not in entries[0] and entries[1]["cluster"] == "east"
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {plain.workload: "1", placed.workload: "1"}, "yaml"))
    loaded = load_plan_with_fingerprints(str(path))[0]
    assert [a.cluster for a in loaded.admissions] == [None, "east"]


def test_a_plan_without_resource_versions_is_taken_only_for_a_multi_cluster_apply(tmp_path):
    import pytest

    from planner.base.errors import InputError

    plan = Plan("s", "", 0, SolverReport("milp", "optimal", 0, 0, 0), (Admission(REF, "cq", (PS,), cluster="east"),))
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {REF: "1"}, "yaml").replace("resourceVersions", "other"))
    with pytest.raises(InputError):
        load_plan_with_fingerprints(str(path))
    assert load_plan_with_fingerprints(str(path), require_versions=False)[0].admissions[0].cluster == "east"


def test_dispatch_marks_and_status_do_not_change_the_fingerprint():
    job = manager_job()
    marked = manager_job({DISPATCHED_TO: "east", WORKER_STATUS: "{}"})
    assert fingerprint(job) == fingerprint(marked)
    assert fingerprint(job) != fingerprint(manager_job({"stowplan.io/assignment": "[]"}))


class Api:
    """Just enough of Kube for the Applier's admission of one Job."""

    dry_run = False
    writes = 0

    def __init__(self, obj: dict[str, Any]):
        self.obj = obj
        self.put: list[Any] = []

    def get_or_none(self, path: str) -> dict[str, Any]:
        return json.loads(json.dumps(self.obj))

    def write(self, method: str, path: str, body: Any, content_type: str = "") -> Any:
        self.put.append((method, path))
        return body


def test_the_single_cluster_applier_never_admits_a_dispatched_job():
    api = Api(manager_job({DISPATCHED_TO: "east"}))
    applier = Applier(api, flavors=FLAVORS, planned_versions={})   # type: ignore[arg-type]
    assert applier.admit(Admission(REF, "cq", (PS,))) is False
    assert api.put == [] and "dispatched to worker cluster east" in applier.report.conflicts[0][1]


def test_worker_flag_is_checked(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    plan = tmp_path / "p.yaml"
    plan.write_text("kind: Plan\n")
    run = lambda *a: CliRunner().invoke(cli, ["apply", "--plan", str(plan), *a])  # noqa: E731
    assert run("--worker", "East=" + str(kc)).exit_code == 2                 # not a DNS label
    assert run("--worker", "east").exit_code == 2                            # no kubeconfig
    assert run("--worker", f"east={tmp_path / 'missing'}").exit_code == 2
    twice = run("--worker", f"east={kc}", "--worker", f"east={kc}")
    assert twice.exit_code == 2 and "named twice" in twice.output
    no_plan = CliRunner().invoke(cli, ["apply", "--worker", f"east={kc}"])
    assert no_plan.exit_code == 2 and "--plan" in no_plan.output


class FakeKube:
    """Jobs and ResourceFlavors in memory, answering as the API server would (404, 409 AlreadyExists)."""

    dry_run = False

    def __init__(self, jobs: dict[str, dict[str, Any]] | None = None, nodes: list[dict[str, Any]] | None = None):
        self.jobs = jobs or {}
        self.nodes = nodes
        self.calls: list[tuple[str, str]] = []
        self.writes = 0
        self.host = "https://fake"

    def _name(self, path: str) -> str:
        return path.rsplit("/", 1)[-1]

    def get_or_none(self, path: str) -> Any:
        found = self.jobs.get(self._name(path))
        return json.loads(json.dumps(found)) if found is not None else None

    def get(self, path: str) -> Any:
        return self.get_or_none(path)

    def list(self, path: str, label_selector: str | None = None) -> Any:
        if path.endswith("resourceflavors"):
            return iter([{"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"pool": "h100"}}}])
        if path == "/api/v1/nodes":
            if self.nodes is None:   # the least-rights worker identity (cronjob/multicluster/worker.yaml)
                from planner.cluster.kube import ApiStatus

                raise ApiStatus("GET", path, 403, "nodes is forbidden")
            return iter(self.nodes)
        return iter([j for j in self.jobs.values() if ORIGIN_LABEL in (j["metadata"].get("labels") or {})])

    def write(self, method: str, path: str, body: Any, content_type: str = "") -> Any:
        from planner.cluster.kube import ApiStatus

        self.calls.append((method, path))
        self.writes += 1
        if path.endswith("/events"):
            return body
        if method == "POST":
            name = body["metadata"]["name"]
            if name in self.jobs:
                raise ApiStatus(method, path, 409, "already exists")
            self.jobs[name] = {**body, "metadata": {**body["metadata"], "uid": "w-" + name}}
            return self.jobs[name]
        if method == "PUT":
            self.jobs[self._name(path)] = body
            return body
        if method == "DELETE":
            self.jobs.pop(self._name(path), None)
        return body


def dispatch_plan(cluster: str = "east") -> Plan:
    return Plan("s", "", 0, SolverReport("milp", "optimal", 0, 0, 0), (Admission(REF, "cq", (PS,), cluster=cluster),))


def test_a_confirmed_dispatch_whose_copy_is_gone_is_not_made_again():
    """Finished and removed by its TTL, or deleted there: creating it again would run the Job twice."""
    from planner.cluster.dispatch import Dispatcher

    manager = FakeKube({"train": manager_job({DISPATCHED_TO: "east"})})
    east = FakeKube()
    report = Dispatcher(manager, {"east": east}).run(dispatch_plan(), 0.0)   # type: ignore[dict-item, arg-type]
    assert not [c for c in east.calls if c[0] == "POST"]
    assert "is gone; not dispatched again" in report.conflicts[0][1]


def test_a_reservation_moves_only_once_its_worker_answers_without_a_copy():
    from planner.cluster.apply import DISPATCHING_TO
    from planner.cluster.dispatch import Dispatcher

    manager = FakeKube({"train": manager_job({DISPATCHING_TO: "east"})})
    east, west = FakeKube(), FakeKube()
    report = Dispatcher(manager, {"east": east, "west": west}).run(dispatch_plan("west"), 0.0)  # type: ignore[dict-item, arg-type]
    assert report.dispatched == [(REF, "west")] and "train" in west.jobs and "train" not in east.jobs
    assert manager.jobs["train"]["metadata"]["annotations"][DISPATCHED_TO] == "west"

    # a copy on east (the create had landed before east went away): the reservation stays
    manager = FakeKube({"train": manager_job({DISPATCHING_TO: "east"})})
    east = FakeKube({"train": {"metadata": {"name": "train", "uid": "w", "annotations": {ORIGIN_UID: "m-uid"},
                                            "labels": {ORIGIN_LABEL: "stowplan"}}, "spec": {}}})
    west = FakeKube()
    report = Dispatcher(manager, {"east": east, "west": west}).run(dispatch_plan("west"), 0.0)  # type: ignore[dict-item, arg-type]
    assert "train" not in west.jobs and "already has a copy on east" in report.conflicts[0][1]


def test_a_copy_is_pinned_by_the_workers_hostname_labels():
    """REFERENCE §2: the worker's node w1 is labelled w1-host, which its scheduler matches."""
    from planner.cluster.dispatch import Dispatcher

    manager = FakeKube({"train": manager_job()})
    east = FakeKube(nodes=[{"metadata": {"name": "w1", "labels": {HOST: "w1-host"}}},
                           {"metadata": {"name": "w2", "labels": {HOST: "w2"}}}])
    report = Dispatcher(manager, {"east": east}).run(dispatch_plan(), 0.0)   # type: ignore[dict-item, arg-type]
    assert report.dispatched == [(REF, "east")]
    pod = east.jobs["train"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][-1] == {"key": HOST, "operator": "In", "values": ["w1-host"]}
    assert json.loads(east.jobs["train"]["metadata"]["annotations"][ASSIGNMENT])[0]["topologyAssignment"][
        "domains"] == [{"values": ["w1"], "count": 2}]


def test_a_worker_whose_nodes_may_not_be_listed_is_pinned_by_node_name_and_said_so():
    from planner.cluster.dispatch import Dispatcher

    said: list[str] = []
    manager, east = FakeKube({"train": manager_job()}), FakeKube()
    report = Dispatcher(manager, {"east": east}, say=said.append).run(dispatch_plan(), 0.0)  # type: ignore[dict-item, arg-type]
    assert report.dispatched == [(REF, "east")] and not report.unreachable
    pod = east.jobs["train"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][-1]["values"] == ["w1"]
    assert [line for line in said if "cannot list the nodes of worker east (403)" in line]


def test_a_second_dispatch_finds_its_copy_and_creates_nothing():
    from planner.cluster.dispatch import Dispatcher

    manager, east = FakeKube({"train": manager_job()}), FakeKube()
    first = Dispatcher(manager, {"east": east}).run(dispatch_plan(), 0.0)    # type: ignore[dict-item, arg-type]
    assert first.dispatched == [(REF, "east")]
    posts = [c for c in east.calls if c[0] == "POST"]
    second = Dispatcher(manager, {"east": east}).run(dispatch_plan(), 0.0)   # type: ignore[dict-item, arg-type]
    assert second.dispatched == [] and second.unchanged == [REF]
    assert [c for c in east.calls if c[0] == "POST"] == posts


def test_multikueue_cluster_without_a_kubeconfig_is_bad_input():
    import pytest

    from planner.cluster.multikueue import workers_from_config
    from planner.base.errors import InputError

    class Manager:
        host = "https://manager"

        def get(self, path: str) -> Any:
            if "multikueueconfigs" in path:
                return {"spec": {"clusters": ["east"]}}
            return {"spec": {"clusterSource": {"clusterProfileRef": {"name": "p"}}}}

    with pytest.raises(InputError) as bad:
        workers_from_config(Manager(), "cfg")   # type: ignore[arg-type]
    assert bad.value.exit_code == 2 and "MultiKueueCluster east" in str(bad.value)
    assert "spec.clusterSource.kubeConfig" in str(bad.value)


def test_kueue_namespace_is_where_the_kubeconfig_secret_is_read():
    """`apply --kueue-namespace NS` (default kueue-system): the MultiKueueCluster's Secret is read there."""
    import pytest

    from planner.cluster.multikueue import workers_from_config
    from planner.base.errors import InputError

    class Manager:
        host = "https://manager"
        paths: list[str] = []

        def get(self, path: str) -> Any:
            self.paths.append(path)
            if "multikueueconfigs" in path:
                return {"spec": {"clusters": ["east"]}}
            if "multikueueclusters" in path:
                return {"spec": {"clusterSource": {"kubeConfig": {"location": "east-kc"}}}}
            return {"data": {}}                       # a Secret without the key: stop there

    for namespace in ("kueue-system", "ops"):
        manager = Manager()
        manager.paths = []
        with pytest.raises(InputError) as bad:
            workers_from_config(manager, "cfg", namespace)   # type: ignore[arg-type]
        assert manager.paths[-1] == f"/api/v1/namespaces/{namespace}/secrets/east-kc"
        assert f"Secret {namespace}/east-kc" in str(bad.value)
    from planner.cli.apply import apply_command

    flag = next(p for p in apply_command.params if p.name == "kueue_namespace")
    assert flag.default == "kueue-system"


def test_plan_worker_flags_are_checked_as_applys(tmp_path):
    """`plan --worker` shares apply's option: the same checks, before any cluster is reached;
    --metrics (one cluster's) is refused with it."""
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    run = lambda *a: CliRunner().invoke(cli, ["plan", "-q", *a])  # noqa: E731
    assert run("--worker", "East=" + str(kc)).exit_code == 2                 # not a DNS label
    assert run("--worker", f"east={tmp_path / 'missing'}").exit_code == 2
    twice = run("--worker", f"east={kc}", "--worker", f"east={kc}")
    assert twice.exit_code == 2 and "named twice" in twice.output
    metrics = run("--worker", f"east={kc}", "--metrics", str(tmp_path / "m.prom"))
    assert metrics.exit_code == 2 and "--metrics" in metrics.output
    from planner.cli.apply import apply_command
    from planner.cli.plan import plan_command

    def shape(command: Any) -> list[tuple[Any, ...]]:
        return [(p.opts, type(p.type).__name__, p.multiple, p.default) for p in command.params
                if p.opts[0] in ("--worker", "--multikueue-config", "--kueue-namespace")]
    assert shape(plan_command) == shape(apply_command) and len(shape(plan_command)) == 3


def unreachable_kubeconfig(path: Any, port: int) -> str:
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: abc}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return str(path)


def test_read_workers_names_every_worker_that_does_not_answer(tmp_path):
    """No plan of part of the fleet: every worker is tried, each that does not answer is named, exit 7."""
    import pytest

    from planner.cluster import Kube, connect
    from planner.cluster.fleet_live import read_workers
    from planner.base.errors import WorkerUnreachableError

    workers = {name: Kube(connect(unreachable_kubeconfig(tmp_path / name, port)), timeout=5)
               for name, port in (("east", 1), ("west", 2))}
    tried: list[str] = []
    with pytest.raises(WorkerUnreachableError) as lost:
        read_workers(workers, say=tried.append)
    assert lost.value.exit_code == 7
    assert "east: " in str(lost.value) and "west: " in str(lost.value) and "Nothing planned" in str(lost.value)
    assert [line.split()[3] for line in tried if line.startswith("reading worker")] == ["east", "west"]


def test_a_fleet_plan_records_only_the_managers_objects():
    """The saved plan's versions are the manager's Jobs' (dispatched or evicted there); a worker's
    own workload the plan evicts has no object on the manager, so no version the apply would
    find missing and call stale."""
    from types import SimpleNamespace

    from models import Eviction
    from planner.cluster.fleet_live import manager_versions

    own = ObjectRef("Job", "team", "worker-own")
    plan = Plan("s", "", 0, SolverReport("milp", "optimal", 0, 0, 0), (Admission(REF, "cq", (PS,), cluster="east"),),
                (Eviction(own, "Preempted"),))
    job = manager_job()
    live = SimpleNamespace(snapshot=SimpleNamespace(workloads=[SimpleNamespace(ref=REF, resource_version="7")]),
                           document={"items": [job]})
    versions, prints = manager_versions(plan, live)   # type: ignore[arg-type]
    assert versions == {REF: "7"} and prints == {REF: fingerprint(job)}
