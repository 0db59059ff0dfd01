"""In-house Job kinds without code (issue 37, item 2) on the real control plane.

The test defines its own kind, TrainingRun (an apiextensions.k8s.io/v1 CRD with a
`spec.suspend` field and two pod templates, `spec.driver` and `spec.workers`, each with
`replicas`), and declares it in a PlannerPolicy's spec.customKinds. No controller exists
for it: the test makes its pods as such a controller would (from the admitted templates,
with a controller owner reference, and deletes them when the run is suspended). Real
cycles of `stowplan apply` admit one run (the API server takes the writes against the
CRD's schema: read back), place its pods on the planned nodes (kube-scheduler binds
them), then evict it for a run of higher priority by setting `spec.suspend` back.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner import kinds
from planner.cluster import Kube, apply_live, connect
from planner.cluster.apply import ASSIGNMENT, GATE
from planner.cluster.kube import ApiStatus, path_of
from planner.kinds.custom import PODSET_LABEL
from live_kit import GPU, POOL, Env, wait_for
from test_live_cronjob import installed  # noqa: F401  (fixture: cronjob/ applied)

GROUP = "runs.stowplan-test.io"
VERSION = "v1"
PLURAL = "trainingruns"
KIND = "TrainingRun"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def crd() -> dict[str, Any]:
    template = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    role = {"type": "object", "required": ["replicas", "template"],
            "properties": {"replicas": {"type": "integer", "minimum": 0}, "template": template}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{PLURAL}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": PLURAL, "singular": "trainingrun", "kind": KIND, "listKind": f"{KIND}List"},
                     "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {
                             "type": "object", "properties": {"suspend": {"type": "boolean"},
                                                              "driver": role, "workers": role}}}}}}]}}


POLICY = {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "custom"},
          "spec": {"customKinds": [{
              "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "suspendPath": "spec.suspend",
              "podSets": [{"name": "driver", "templatePath": "spec.driver.template", "countPath": "spec.driver.replicas"},
                          {"name": "workers", "templatePath": "spec.workers.template",
                           "countPath": "spec.workers.replicas"}]}]}}


@pytest.fixture(scope="module")
def kind_installed(control_plane):
    kube = Kube(connect(str(control_plane.kubeconfig)))
    try:
        kube.request("POST", path_of("apiextensions.k8s.io/v1", "customresourcedefinitions"), body=crd())
    except ApiStatus as err:
        if err.status != 409:
            raise

    def served() -> bool:
        try:
            kube.get(path_of(f"{GROUP}/{VERSION}", PLURAL, "default"))
            return True
        except ApiStatus:
            return False

    wait_for("the TrainingRun CRD served", served, timeout=60)
    yield kube
    kinds.use_custom(())


@pytest.fixture
def kube(kind_installed):
    return kind_installed


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=1, gpus=8,
               preemption={"withinClusterQueue": "LowerPriority"})
    yield made
    made.cleanup()


def container(gpus: int) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}}
    if gpus:
        resources["requests"][GPU] = str(gpus)
        resources["limits"] = {GPU: str(gpus)}
    return {"name": "c", "image": "registry.invalid/train:1", "resources": resources}


def run(env: Env, name: str, workers: int, gpus: int, priority: str) -> dict[str, Any]:
    def template(g: int) -> dict[str, Any]:
        return {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [container(g)]}}

    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": env.namespace, "labels": {QUEUE: env.lq, PRIORITY: priority}},
            "spec": {"suspend": True, "driver": {"replicas": 1, "template": template(0)},
                     "workers": {"replicas": workers, "template": template(gpus)}}}
    return env.co.create_namespaced_custom_object(GROUP, VERSION, env.namespace, PLURAL, body)


def read(env: Env, name: str) -> dict[str, Any]:
    return env.co.get_namespaced_custom_object(GROUP, VERSION, env.namespace, PLURAL, name)


def make_pods(env: Env, obj: dict[str, Any]) -> None:
    """What a TrainingRun controller does once the run is unsuspended: its pods, from its templates."""
    owner = [{"apiVersion": obj["apiVersion"], "kind": KIND, "name": obj["metadata"]["name"],
              "uid": obj["metadata"]["uid"], "controller": True}]
    for role in ("driver", "workers"):
        template = obj["spec"][role]["template"]
        for i in range(obj["spec"][role]["replicas"]):
            meta = copy.deepcopy(template.get("metadata") or {})
            meta.update(name=f"{obj['metadata']['name']}-{role}-{i}", namespace=env.namespace, ownerReferences=owner)
            env.core.create_namespaced_pod(env.namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                                           "spec": copy.deepcopy(template["spec"])})


def delete_pods(env: Env, name: str) -> None:
    """What the controller does when the run is suspended: its pods go."""
    for pod in env.core.list_namespaced_pod(env.namespace, label_selector=PODSET_LABEL).items:
        if any(o.name == name for o in pod.metadata.owner_references or ()):
            env.core.delete_namespaced_pod(pod.metadata.name, env.namespace, grace_period_seconds=0)


def placed(env: Env, name: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for pod in env.core.list_namespaced_pod(env.namespace, label_selector=PODSET_LABEL).items:
        if any(o.name == name for o in pod.metadata.owner_references or ()) and pod.spec.node_name \
                and not pod.metadata.deletion_timestamp:
            per = out.setdefault(pod.metadata.labels[PODSET_LABEL], {})
            per[pod.spec.node_name] = per.get(pod.spec.node_name, 0) + 1
    return out


def test_a_custom_kind_is_admitted_placed_and_evicted_by_apply(kind_installed, kube, env, tmp_path: Path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    low, high = env.priority_class("low", 100), env.priority_class("high", 1000)
    ns = env.namespace

    def cycle(**kw: Any) -> Any:
        return apply_live(kube, policy_file=str(policy), lease_namespace=ns, identity="test-planner", **kw)

    run(env, "small", workers=2, gpus=4, priority=low)
    plan, report = cycle(release_wait=0)
    assert [a.workload.name for a in plan.admissions] == ["small"] and report.conflicts == []
    small = read(env, "small")                        # the writes the CRD's schema took
    assert small["spec"]["suspend"] is False
    planned = {e["name"]: {d["values"][-1]: d["count"] for d in e["topologyAssignment"]["domains"]}
               for e in json.loads(small["metadata"]["annotations"][ASSIGNMENT])}
    assert planned == {"driver": {env.nodes[0]: 1}, "workers": {env.nodes[0]: 2}}
    for role in ("driver", "workers"):
        template = small["spec"][role]["template"]
        assert template["metadata"]["labels"][PODSET_LABEL] == role
        assert template["spec"]["nodeSelector"][POOL] == env.s and {"name": GATE} in template["spec"]["schedulingGates"]
    assert small["spec"]["workers"]["replicas"] == 2             # nothing else changed

    make_pods(env, small)
    wait_for("the run's pods on their planned nodes",
             lambda: cycle(release_wait=2) and placed(env, "small") == planned, timeout=180, interval=1)

    # a run of higher priority that needs the node: apply evicts the running one by suspending it
    run(env, "urgent", workers=2, gpus=4, priority=high)
    plan, report = cycle(release_wait=0)
    assert [e.workload.name for e in plan.evictions] == ["small"], plan
    small = read(env, "small")
    assert small["spec"]["suspend"] is True and ASSIGNMENT not in small["metadata"].get("annotations", {})
    delete_pods(env, "small")

    def urgent_admitted() -> bool:
        cycle(release_wait=0)
        return read(env, "urgent")["spec"]["suspend"] is False

    wait_for("the urgent run admitted", urgent_admitted, timeout=120, interval=1)
    assert read(env, "small")["spec"]["suspend"] is True


def test_a_path_that_does_not_resolve_is_reported_naming_the_object(kind_installed, kube, env, tmp_path: Path):
    from planner.cluster.reader import read_cluster

    bad = dict(POLICY, spec={"customKinds": [dict(POLICY["spec"]["customKinds"][0], podSets=[
        {"name": "workers", "templatePath": "spec.workers.template", "countPath": "spec.workers.count"}])]})
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(bad))
    run(env, "r", workers=1, gpus=1, priority=env.priority_class("p", 1))
    snapshot = read_cluster(kube, policy_file=str(policy)).snapshot
    (problem,) = [p for p in snapshot.problems if p.ref is not None and p.ref.kind == KIND
                  and p.ref.namespace == env.namespace]   # (other tests' runs lack the path too)
    assert problem.ref.name == "r"
    assert problem.field == "spec.workers.count" and "does not resolve" in problem.message
    (w,) = [w for w in snapshot.workloads if w.ref.kind == KIND and w.ref.namespace == env.namespace]
    assert w.blocked_reason and "spec.workers.count" in w.blocked_reason


def test_the_generated_rbac_lets_the_cronjobs_service_account_plan_the_kind(
        kind_installed, installed, control_plane, env, tmp_path: Path):
    """`stowplan rbac --policy FILE` applied beside cronjob/rbac.yaml: without it the
    ServiceAccount may not list the kind (the cycle stops, exit 4); with it, a cycle as the
    ServiceAccount admits a TrainingRun. (It also reads Kueue's Lease and Deployment, the
    guard's rights, without a warning.)"""
    from click.testing import CliRunner

    from planner.cli import cli
    from test_live_cronjob import NAMESPACE, create, sa_kubeconfig

    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    printed = CliRunner().invoke(cli, ["rbac", "--policy", str(policy)])
    assert printed.exit_code == 0, printed.output
    role, binding = yaml.safe_load(printed.stdout)["items"]
    assert role["rules"] == [{"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "update"]}]
    for obj in (role, binding):   # no leftovers of an earlier run: the first cycle must see no rights
        path = path_of("rbac.authorization.k8s.io/v1", obj["kind"].lower() + "s", "", obj["metadata"]["name"])
        if installed.get_or_none(path) is not None:
            installed.request("DELETE", path)
    run(env, "as-sa", workers=1, gpus=2, priority=env.priority_class("p", 1))
    kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
    args = ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--policy", str(policy),
            "--release-wait", "0", "-q"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 4 and PLURAL in refused.stderr and "403" in refused.stderr, refused.output
    try:
        for obj in (role, binding):
            create(installed, obj)

        def admitted() -> bool:
            result = CliRunner().invoke(cli, args)
            return result.exit_code == 0 and "may not read" not in result.stderr and \
                read(env, "as-sa")["spec"]["suspend"] is False

        wait_for("a cycle as the ServiceAccount admitting the TrainingRun", admitted, timeout=120, interval=1)
    finally:
        for obj in (binding, role):
            installed.request("DELETE", path_of("rbac.authorization.k8s.io/v1", obj["kind"].lower() + "s", "",
                                                obj["metadata"]["name"]))
