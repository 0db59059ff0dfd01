"""In-house Job kinds without code (issue 37, item 2): spec.customKinds decoded strictly,
its objects read into workloads with the pod sets the paths name, planned, written (admit:
scheduling fields, pod-set label, unsuspend; evict: suspend), their pods found, and the
RBAC it needs printed. The live admission and eviction are in
tests/cluster/test_live_custom_kinds.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from models import ObjectRef, WorkloadState
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions
from planner import kinds
from planner.cycle import plan_snapshot
from planner.base.errors import InputError
from planner.kinds.custom import PODSET_LABEL, CustomAdapter, guessed_plural
from planner.snapshot import build_snapshot
from planner.snapshot.policy import parse_policy
from test_kinds_read import GPU, NS, Q, T, tmpl, world

RUN = {"apiVersion": "example.com/v1", "kind": "TrainingRun", "suspendPath": "spec.suspend",
       "podSets": [{"name": "driver", "templatePath": "spec.driver.template", "countPath": "spec.driver.replicas"},
                   {"name": "workers", "templatePath": "spec.workers.template",
                    "countPath": "spec.workers.replicas"}]}


def policy(*custom: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
            "spec": {"customKinds": list(custom)}}


def run(name: str, workers: int = 2, gpus: int = 4, suspend: Any = True, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": {"replicas": 1, "template": tmpl(cpu="2")},
                            "workers": {"replicas": workers, "template": tmpl(gpus)}, **spec}
    if suspend is not None:
        body["suspend"] = suspend
    return {"apiVersion": "example.com/v1", "kind": "TrainingRun",
            "metadata": {"name": name, "namespace": NS, "labels": Q, "creationTimestamp": T, "uid": f"uid-{name}"},
            "spec": body}


def snap(*objects: dict[str, Any], custom: tuple[dict[str, Any], ...] = (RUN,)) -> Any:
    return build_snapshot([{"apiVersion": "v1", "kind": "List", "items": world(policy(*custom), *objects)}])


@pytest.fixture(autouse=True)
def _no_custom_kinds_after():
    yield
    kinds.use_custom(())   # the registry is process-wide: leave it as other tests expect


def test_a_custom_kind_is_read_planned_and_admitted_like_a_job() -> None:
    s = snap(run("r1", workers=2, gpus=4), run("big", workers=5, gpus=8))
    by = {w.ref.name: w for w in s.workloads}
    r1 = by["r1"]
    assert r1.ref == ObjectRef("TrainingRun", NS, "r1") and r1.state is WorkloadState.PENDING
    assert [(p.name, p.count) for p in r1.pod_sets] == [("driver", 1), ("workers", 2)]
    assert next(p for p in r1.pod_sets if p.name == "workers").request.get(GPU) == 4
    plan = plan_snapshot(s, SolveOptions(solver="greedy"))
    assert [a.workload.name for a in plan.admissions] == ["r1"]    # 8 GPUs of 16; big asks 40
    assert {ps.name for ps in plan.admissions[0].pod_sets} == {"driver", "workers"}


def test_without_the_policy_entry_the_kind_is_not_planned() -> None:
    s = snap(run("r1"), custom=())
    assert not s.workloads
    assert any("kind TrainingRun is not planned" in p.message for p in s.problems)


def test_a_path_that_does_not_resolve_is_a_problem_naming_the_object_and_the_workload_waits() -> None:
    broken = run("r2")
    del broken["spec"]["workers"]["replicas"]
    s = snap(broken)
    (problem,) = [p for p in s.problems if p.ref == ObjectRef("TrainingRun", NS, "r2")]
    assert problem.field == "spec.workers.replicas" and "does not resolve" in problem.message
    (w,) = s.workloads
    assert w.blocked_reason and "spec.workers.replicas" in w.blocked_reason
    assert not plan_snapshot(s, SolveOptions(solver="greedy")).admissions


def test_admitted_by_stowplan_it_runs_and_its_pods_are_found_by_owner_and_pod_set_label() -> None:
    from planner.k8s.annotations import ADMITTED_AT, ASSIGNMENT, encode_assignment

    (admission,) = plan_snapshot(snap(run("r3")), SolveOptions(solver="greedy")).admissions
    obj = run("r3", suspend=False)
    obj["metadata"]["annotations"] = {ASSIGNMENT: encode_assignment(admission.pod_sets), ADMITTED_AT: T}
    pods = []
    for ps in admission.pod_sets:
        for node, count in ps.pods_per_node().items():
            for i in range(count):
                spec = tmpl(GPU_PER[ps.name])["spec"]
                spec.update(nodeName=node)
                pods.append({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": f"r3-{ps.name}-{node}-{i}", "namespace": NS,
                                          "labels": {PODSET_LABEL: ps.name},
                                          "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "TrainingRun",
                                                               "name": "r3", "uid": "uid-r3", "controller": True}]},
                             "spec": spec, "status": {"phase": "Running",
                                                      "conditions": [{"type": "Ready", "status": "True"}]}})
    (w,) = snap(obj, *pods).workloads
    assert w.state is WorkloadState.RUNNING
    assert w.pods_ready == {"driver": (1, 1), "workers": (2, 2)}    # its pods, counted per pod set
    labels = pods[-1]["metadata"]["labels"]
    assert next(kinds.pod_owners(NS, pods[-1]["metadata"], labels)) == (ObjectRef("TrainingRun", NS, "r3"),
                                                                        "workers")
    assert not list(kinds.pod_owners(NS, {**pods[-1]["metadata"], "ownerReferences": []}, labels))


GPU_PER = {"driver": 0, "workers": 4}


def test_admission_and_eviction_write_the_paths_the_policy_names() -> None:
    spec = parse_policy(policy(RUN), "p.yaml").custom_kinds[0]
    adapter = CustomAdapter(spec)
    obj = run("r4")
    before = copy.deepcopy(obj)
    assert adapter.read_suspended(obj) and adapter.plural == "trainingruns" and adapter.api_version == "example.com/v1"
    why = adapter.write_admission(obj, {"workers": {"nodeSelector": {"pool": "a"}}, "driver": {}})
    assert why is None and obj["spec"]["suspend"] is False
    assert obj["spec"]["workers"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    assert obj["spec"]["workers"]["template"]["metadata"]["labels"][PODSET_LABEL] == "workers"
    assert obj["spec"]["driver"]["template"]["metadata"]["labels"][PODSET_LABEL] == "driver"
    assert obj["spec"]["workers"]["replicas"] == before["spec"]["workers"]["replicas"]
    adapter.write_eviction(obj)
    assert obj["spec"]["suspend"] is True
    assert adapter.write_admission(obj, {"ps": {}}) == "it has no pod set ps"
    # a suspend field deeper down is made where absent, as Kueue's runPolicy.suspend
    deep = CustomAdapter(parse_policy(policy({**RUN, "suspendPath": "spec.runPolicy.suspend"}), "p").custom_kinds[0])
    deep.write_eviction(obj)
    assert obj["spec"]["runPolicy"] == {"suspend": True}


@pytest.mark.parametrize("change, field, words", [
    ({"apiVersion": "v1"}, "spec.customKinds[0].apiVersion", "GROUP/VERSION"),
    ({"apiVersion": "example/v1"}, "spec.customKinds[0].apiVersion", "a group with a dot"),
    ({"apiVersion": "example.com/version1"}, "spec.customKinds[0].apiVersion", "GROUP/VERSION"),
    ({"kind": "trainingRun"}, "spec.customKinds[0].kind", "CamelCase"),
    ({"kind": "Job"}, "spec.customKinds[0].kind", "already reads"),
    ({"kind": "Pod"}, "spec.customKinds[0].kind", "already reads"),
    ({"suspendPath": None}, "spec.customKinds[0].suspendPath", "dotted field path"),
    ({"suspendPath": "spec..suspend"}, "spec.customKinds[0].suspendPath", "segment"),
    ({"podSets": []}, "spec.customKinds[0].podSets", "non-empty list"),
    ({"podSets": [{"name": "w", "templatePath": "spec.t"}]}, "spec.customKinds[0].podSets[0].countPath",
     "dotted field path"),
    ({"podSets": [{"name": "w", "templatePath": "metadata.t", "countPath": "spec.n"}]},
     "spec.customKinds[0].podSets[0].templatePath", "under spec"),
    ({"podSets": [{"name": "W", "templatePath": "spec.t", "countPath": "spec.n"}]},
     "spec.customKinds[0].podSets[0].name", "DNS label"),
    ({"podSets": [{"name": "w", "templatePath": "spec.t", "countPath": "spec.n"}] * 2},
     "spec.customKinds[0].podSets[1].name", "named twice"),
    ({"podSets": [{"name": "w", "templatePath": "spec.t", "countPath": "spec.n", "min": 1}]},
     "spec.customKinds[0].podSets[0].min", "unknown field"),
    ({"suspend": "spec.suspend"}, "spec.customKinds[0].suspend", "unknown field"),
    # issue 40: a path, a key and the pod sets are bounded, each error naming the limit
    ({"suspendPath": "spec." + ".".join(["a"] * 10_000)}, "spec.customKinds[0].suspendPath", "limit of 32"),
    ({"podSets": [{"name": "w", "templatePath": "spec." + "t" * 100_000, "countPath": "spec.n"}]},
     "spec.customKinds[0].podSets[0].templatePath", "limit of 253 characters"),
    ({"podSets": [{"name": f"w{i}", "templatePath": "spec.t", "countPath": "spec.n"} for i in range(9)]},
     "spec.customKinds[0].podSets", "limit of 8"),
])
def test_bad_custom_kinds_are_input_errors_naming_the_field(change: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InputError) as bad:
        parse_policy(policy({**RUN, **change}), "p.yaml")
    assert bad.value.field == field and words in bad.value.detail and bad.value.exit_code == 2
    assert bad.value.file == "p.yaml" and "PlannerPolicy" in str(bad.value)


def test_a_kind_declared_twice_is_refused() -> None:
    with pytest.raises(InputError) as bad:
        parse_policy(policy(RUN, {**RUN, "apiVersion": "example.com/v2"}), "p.yaml")
    assert bad.value.field == "spec.customKinds[1].kind" and "declared twice" in bad.value.detail


def test_more_custom_kinds_than_the_limit_are_refused() -> None:
    many = [{**RUN, "kind": f"Run{i}"} for i in range(101)]
    with pytest.raises(InputError) as bad:
        parse_policy(policy(*many), "p.yaml")
    assert bad.value.field == "spec.customKinds" and "limit of 100" in bad.value.detail


def test_plural_guessed_as_kubernetes_guesses_it_or_given() -> None:
    assert [guessed_plural(k) for k in ("TrainingRun", "Policy", "Mass")] == ["trainingruns", "policies", "masses"]
    (kind,) = parse_policy(policy({**RUN, "plural": "runs"}), "p").custom_kinds
    assert kind.plural == "runs"


def test_what_if_plans_a_custom_kind_and_a_bad_entry_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": world(policy(RUN), run("r1"))}))
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(path), "-o", "yaml", "-q"])
    assert result.exit_code == 0, result.output
    plan = yaml.safe_load(result.stdout)
    assert [a["workload"] for a in plan["admissions"]] == [{"kind": "TrainingRun", "namespace": NS, "name": "r1"}]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": world(policy({**RUN, "apiVersion": "v1"}), run("r1"))}))
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(path), "-q"])
    assert result.exit_code == 2 and "spec.customKinds[0].apiVersion" in result.stderr and result.stdout == ""


def test_rbac_prints_the_rules_for_the_custom_kinds(tmp_path: Path) -> None:
    other = {**RUN, "apiVersion": "batch.example.org/v1beta1", "kind": "Sweep"}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy(RUN, other, {**RUN, "kind": "Eval", "plural": "evals"})))
    result = CliRunner().invoke(cli_module.cli, ["rbac", "--policy", str(path)])
    assert result.exit_code == 0, result.output
    role, binding = yaml.safe_load(result.stdout)["items"]
    assert role["kind"] == "ClusterRole" and role["rules"] == [
        {"apiGroups": ["batch.example.org"], "resources": ["sweeps"], "verbs": ["get", "list", "update"]},
        {"apiGroups": ["example.com"], "resources": ["evals", "trainingruns"], "verbs": ["get", "list", "update"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "stowplan", "namespace": "stowplan-system"}]
    other_account = CliRunner().invoke(cli_module.cli, ["rbac", "--policy", str(path), "--service-account", "ops/runner"])
    assert yaml.safe_load(other_account.stdout)["items"][1]["subjects"] == [
        {"kind": "ServiceAccount", "name": "runner", "namespace": "ops"}]
    assert CliRunner().invoke(cli_module.cli, ["rbac", "--policy", str(path), "--service-account", "x"]).exit_code == 2
    path.write_text(yaml.safe_dump(policy({**RUN, "podSets": "x"})))
    bad = CliRunner().invoke(cli_module.cli, ["rbac", "--policy", str(path)])
    assert bad.exit_code == 2 and "spec.customKinds[0].podSets" in bad.stderr and bad.stdout == ""
