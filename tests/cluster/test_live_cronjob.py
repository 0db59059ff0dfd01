"""cronjob/ on the real control plane: the manifests apply cleanly, and one cycle run
with only the CronJob ServiceAccount's rights (a TokenRequest token for it, in a
kubeconfig of its own) admits, while the same token cannot read Secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.kube import ApiStatus, path_of
from test_live_kit import Env

CRONJOB_DIR = Path(__file__).resolve().parents[2] / "cronjob"
PLURALS = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "ConfigMap": "configmaps", "CronJob": "cronjobs"}
NAMESPACE = "stowplan-system"


def manifests():
    kustomization = yaml.safe_load((CRONJOB_DIR / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((CRONJOB_DIR / name).read_text()):
            if doc:
                yield doc


def create(kube, doc, dry_run=False):
    meta = doc["metadata"]
    path = path_of(doc["apiVersion"], PLURALS[doc["kind"]], meta.get("namespace", ""))
    query = [("dryRun", "All")] if dry_run else []
    try:
        kube.request("POST", path, body=doc, query=query)
    except ApiStatus as err:
        if err.status != 409:
            raise


@pytest.fixture(scope="module")
def installed(control_plane):
    kube = Kube(connect(str(control_plane.kubeconfig)))
    docs = list(manifests())
    assert sorted({d["kind"] for d in docs}) == sorted(PLURALS)
    for doc in docs:
        if doc["kind"] == "CronJob":
            create(kube, doc, dry_run=True)            # exactly as written: the server validates it
            doc = {**doc, "spec": {**doc["spec"], "suspend": True}}   # no fake planner pods in the tests
        create(kube, doc)
    return kube


def sa_kubeconfig(control_plane, kube, tmp_path):
    answer = kube.request("POST", path_of("v1", "serviceaccounts", NAMESPACE, "stowplan") + "/token",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 600}})
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": answer["status"]["token"]}
    path = tmp_path / "sa.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_manifests_apply_cleanly(installed):
    cron = installed.get(path_of("batch/v1", "cronjobs", NAMESPACE, "stowplan"))
    spec = cron["spec"]
    assert spec["schedule"] == "* * * * *" and spec["concurrencyPolicy"] == "Forbid"
    assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] < 60
    env = {e["name"] for e in spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert all(name.startswith("STOWPLAN_APPLY_") for name in env)
    role = installed.get(path_of("rbac.authorization.k8s.io/v1", "clusterroles", "", "stowplan-planner"))
    assert not any("secrets" in rule.get("resources", ()) or "*" in rule.get("resources", ())
                   or "*" in rule.get("verbs", ()) for rule in role["rules"])


def test_cycle_as_the_service_account(installed, control_plane, api_client, namespace, tmp_path):
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        env.job("a", pods=2, gpus=4)
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        cm = installed.get(path_of("v1", "configmaps", NAMESPACE, "stowplan-config"))
        mount = tmp_path / "etc"
        mount.mkdir()
        for key, value in cm["data"].items():
            (mount / key).write_text(value)
        args = ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--policy",
                str(mount / "policy.yaml"), "--config", str(mount / "kueue.yaml"), "--release-wait", "10", "-q"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "1 admitted" in result.output and "0 conflicts" in result.output
        # the job controller may create the pods after the release window: the next cycle releases them
        for _ in range(30):
            if len([p for p in env.pods("a") if p.spec.node_name]) == 2:
                break
            import time
            time.sleep(1)
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, result.output
        env.wait_bound("a", 2)
        # the same rights cannot read Secrets, here or anywhere
        sa = Kube(connect(str(kubeconfig)))
        for path in (path_of("v1", "secrets", NAMESPACE), path_of("v1", "secrets")):
            with pytest.raises(ApiStatus) as denied:
                sa.get(path)
            assert denied.value.status == 403
        # nor write a Lease outside its namespace
        with pytest.raises(ApiStatus) as denied:
            sa.get(path_of("coordination.k8s.io/v1", "leases", namespace, "stowplan-planner"))
        assert denied.value.status == 403
    finally:
        env.cleanup()
