"""Planning a fleet with only the rights of cronjob/multicluster/worker-reader.yaml, on two
real control planes: the session's plane is the manager, a second one (its own etcd and
kube-apiserver, started for this module) is the worker `w1`.

Both sides run as the ServiceAccount stowplan-system/stowplan-dispatch, its TokenRequest
token in a kubeconfig of its own: manager.yaml + worker-reader.yaml on the manager,
worker.yaml + worker-reader.yaml on the worker. `plan --worker w1=KUBECONFIG` plans with
those rights; once the worker's role loses `list` on nodes, the same command is exit 4,
naming the worker and what was forbidden. (Nodes, not pods: worker.yaml grants the same
ServiceAccount `list` on pods for dispatch; only worker-reader.yaml grants nodes.) The
file-level checks, every read the reader makes against the role, are tests/test_fleet_rbac.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import rig
from live_kit import Env, wait_for
from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.kube import ApiStatus, path_of
from test_live_dispatch import MULTI, install, manager_job, token_kubeconfig

READER = MULTI / "worker-reader.yaml"
ROLE = "stowplan-plan-worker"
KUEUE_SYSTEM = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
RBAC = "rbac.authorization.k8s.io/v1"


def reader_docs() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(READER.read_text()) if d]


def remove_reader(kube: Kube) -> None:
    """worker-reader.yaml's roles and bindings off the manager again (the session's plane is
    shared: other modules check what the dispatch identity may not do there)."""
    plurals = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
               "RoleBinding": "rolebindings"}
    for doc in reader_docs():
        if doc["kind"] in plurals:
            meta = doc["metadata"]
            try:
                kube.request("DELETE", path_of(RBAC, plurals[doc["kind"]], meta.get("namespace", ""), meta["name"]))
            except ApiStatus as err:
                if err.status != 404:
                    raise


def may_list(kubeconfig: Path, plural: str) -> bool:
    """Whether the token may list `plural` (core group) now (RBAC's authorizer follows role changes from a cache)."""
    try:
        Kube(connect(str(kubeconfig))).request("GET", path_of("v1", plural), query=[("limit", 1)])
    except ApiStatus as err:
        if err.status == 403:
            return False
        raise
    return True


@pytest.fixture(scope="module")
def fleet(control_plane, tmp_path_factory):
    """The manager (the session's plane) and worker w1, each with the dispatch and the
    planning rights installed, and a least-privilege kubeconfig for each."""
    worker = rig.ControlPlane(manifest=rig.build())
    worker.start()
    admin_m = Kube(connect(str(control_plane.kubeconfig)))
    try:
        admin_w = Kube(connect(str(worker.kubeconfig)))
        for admin, dispatch in ((admin_m, "manager.yaml"), (admin_w, "worker.yaml")):
            install(admin, Path("-"), docs=[KUEUE_SYSTEM])
            install(admin, MULTI / dispatch)
            install(admin, READER)
        tmp = tmp_path_factory.mktemp("fleetrbac")
        yield {"manager": control_plane, "worker": worker, "m": admin_m, "w": admin_w,
               "m_kc": token_kubeconfig(control_plane, admin_m, tmp / "manager.kubeconfig"),
               "w_kc": token_kubeconfig(worker, admin_w, tmp / "worker.kubeconfig")}
    finally:
        remove_reader(admin_m)
        worker.stop()


def plan(fleet: Any, *args: str) -> Any:
    return CliRunner().invoke(cli, ["plan", "--kubeconfig", str(fleet["m_kc"]), "--worker", f"w1={fleet['w_kc']}",
                                    *args], auto_envvar_prefix="STOWPLAN")


def test_worker_reader_rights_plan_the_fleet_and_less_is_exit_4(fleet, control_plane, api_client, namespace):
    """With worker-reader.yaml on both sides, `plan --worker w1=...` as the dispatch
    ServiceAccount plans the manager's Job onto w1's nodes, reading Kueue's Configuration
    allowed; with `list` on nodes taken from the worker's role it is exit 4, naming w1, nodes
    and the refusal, with no plan on stdout."""
    m, w = fleet["m"], fleet["w"]
    w.request("POST", path_of("v1", "namespaces"), body={"metadata": {"name": namespace}})
    boss = Env(control_plane, api_client, namespace, nodes=0, quota=64)   # the manager's queues, no nodes
    w1 = Env(fleet["worker"], fleet["worker"].api_client(), namespace, nodes=2, gpus=8)
    try:
        manager_job(m, namespace, "train", 2, gpus=4)
        wait_for("the dispatch identity's read rights on both planes",
                 lambda: may_list(fleet["m_kc"], "nodes") and may_list(fleet["w_kc"], "nodes"))

        made = plan(fleet, "-o", "json")
        assert made.exit_code == 0, made.output
        document = json.loads(made.stdout)
        assert {a["workload"]["name"]: a["cluster"] for a in document["admissions"]} == {"train": "w1"}
        nodes = {d["values"][-1] for a in document["admissions"] for ps in a["podSets"]
                 for d in ps["topologyAssignment"]["domains"]}
        assert nodes and nodes <= set(w1.nodes)
        assert "may not read ConfigMap" not in made.output          # kueue-manager-config's get is granted

        role_path = path_of(RBAC, "clusterroles", "", ROLE)
        role = w.get(role_path)
        narrowed = copy.deepcopy(role)
        for rule in narrowed["rules"]:
            rule["resources"] = [r for r in rule["resources"] if r != "nodes"]
        assert narrowed["rules"] != role["rules"]
        w.request("PUT", role_path, body=narrowed)
        wait_for("nodes' list refused on the worker", lambda: not may_list(fleet["w_kc"], "nodes"))

        refused = plan(fleet, "-o", "json")
        assert refused.exit_code == 4, refused.output
        assert "worker cluster w1" in refused.output and "nodes" in refused.output, refused.output
        assert "403" in refused.output and "forbidden" in refused.output, refused.output
        assert refused.stdout == ""
    finally:
        boss.cleanup()
        w1.cleanup()
