"""ConfigMap stowplan-status on the real control plane (issue 27, item 5): each apply
writes it in the planner's namespace, with the CronJob ServiceAccount's least rights
(patch on that one ConfigMap, create in stowplan-system), and those rights reach no
other ConfigMap."""

from __future__ import annotations

import itertools
import time

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.kube import ApiStatus, MERGE_PATCH, path_of
from test_live_cronjob import NAMESPACE, installed, sa_kubeconfig  # noqa: F401  (fixture)
from live_kit import Env
from test_promtext import Gateway, gateway, samples  # noqa: F401  (fixture: a real HTTP server on localhost)

STATUS = path_of("v1", "configmaps", NAMESPACE, "stowplan-status")


def mounted_config(installed, tmp_path):  # noqa: F811
    cm = installed.get(path_of("v1", "configmaps", NAMESPACE, "stowplan-config"))
    mount = tmp_path / "etc"
    mount.mkdir()
    for key, value in cm["data"].items():
        (mount / key).write_text(value)
    return mount


def test_each_cycle_writes_the_status_configmap_as_the_service_account(installed, control_plane, api_client,  # noqa: F811
                                                                       namespace, tmp_path, gateway):  # noqa: F811
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        if installed.get_or_none(STATUS) is not None:
            installed.request("DELETE", STATUS)
        env.job("a", pods=2, gpus=4)
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        mount = mounted_config(installed, tmp_path)
        args = ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--policy",
                str(mount / "policy.yaml"), "--config", str(mount / "kueue.yaml"), "--release-wait", "0", "-q",
                "--metrics", str(tmp_path / "m.prom"), "--pushgateway", f"http://127.0.0.1:{gateway.server_port}"]
        before = time.time()
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "warning" not in result.output, result.output      # created with `create`, no other right
        first = installed.get(STATUS)
        data = first["data"]
        assert data["admitted"] == "1" and data["evicted"] == "0" and data["conflicts"] == "0"
        assert data["status"] in ("optimal", "feasible") and data["method"] == "milp"
        assert float(data["gap"]) >= 0 and data["dryRun"] == "false"
        assert data["vsKueue"] and data["gainOverGreedyGpus"].startswith("{")
        assert "1 admitted" in data["applied"]
        stamp = time.mktime(time.strptime(data["time"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        assert stamp >= int(before) - 1
        assert first["metadata"]["labels"] == {"app.kubernetes.io/name": "stowplan"}
        assert "stowplan_admitted_workloads_total" in (tmp_path / "m.prom").read_text()
        (pushed,) = Gateway.received              # the CronJob's path: one push per cycle
        assert pushed[1] == "/metrics/job/stowplan"
        admitted = samples(pushed[3])["stowplan_admitted_workloads_total"]
        assert sum(s.value for s in admitted) == 1 and {s.labels["cluster_queue"] for s in admitted} == {env.cq}

        # the next cycle patches it (its own rights: patch on that one name)
        time.sleep(1.1)
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0 and "warning" not in result.output, result.output
        second = installed.get(STATUS)
        assert second["data"]["admitted"] == "0" and second["data"]["time"] >= data["time"]
        assert second["metadata"]["uid"] == first["metadata"]["uid"]

        # and nothing more: no other ConfigMap, no read, no delete, nothing outside stowplan-system
        sa = Kube(connect(str(kubeconfig)))
        attempts = [
            ("PATCH", path_of("v1", "configmaps", NAMESPACE, "stowplan-config"), {"data": {"x": "y"}}),
            ("GET", STATUS, None),
            ("GET", path_of("v1", "configmaps", NAMESPACE), None),
            ("DELETE", STATUS, None),
            ("PUT", STATUS, second),
            ("POST", path_of("v1", "configmaps", namespace),
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stowplan-status"}}),
            ("PATCH", path_of("v1", "configmaps", namespace, "stowplan-status"), {"data": {"x": "y"}}),
        ]
        for method, path, body in attempts:
            with pytest.raises(ApiStatus) as denied:
                sa.request(method, path, body=body, content_type=MERGE_PATCH if method == "PATCH" else "application/json")
            assert denied.value.status == 403, (method, path)

        # RBAC cannot limit `create` by name: the admission policy refuses any other name
        # (a policy just installed takes a moment to be enforced: tried again until then)
        deadline = time.monotonic() + 60
        for n in itertools.count():
            name = f"not-the-status-{n}"
            try:
                sa.request("POST", path_of("v1", "configmaps", NAMESPACE),
                           body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
            except ApiStatus as err:
                assert err.status == 403 and "stowplan-planner-configmaps" in str(err), err
                break
            installed.request("DELETE", path_of("v1", "configmaps", NAMESPACE, name))
            assert time.monotonic() < deadline, "the policy never refused another ConfigMap"
            time.sleep(0.5)
    finally:
        env.cleanup()


def test_plan_writes_metrics_and_no_status(installed, control_plane, api_client, namespace, tmp_path):  # noqa: F811
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        if installed.get_or_none(STATUS) is not None:
            installed.request("DELETE", STATUS)
        env.job("c", pods=1, gpus=2)
        mount = mounted_config(installed, tmp_path)
        prom = tmp_path / "plan.prom"
        result = CliRunner().invoke(cli, ["plan", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json",
                                          "--policy", str(mount / "policy.yaml"), "--config",
                                          str(mount / "kueue.yaml"), "-q", "--metrics", str(prom)])
        assert result.exit_code == 0, result.output
        got = samples(prom.read_text())
        assert {s.labels["cluster_queue"]: s.value for s in got["stowplan_admitted_workloads_total"]}[env.cq] == 1
        assert installed.get_or_none(STATUS) is None          # plan writes nothing to the cluster
    finally:
        env.cleanup()


def test_a_dry_run_changes_no_status(installed, control_plane, api_client, namespace, tmp_path):  # noqa: F811
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        if installed.get_or_none(STATUS) is not None:
            installed.request("DELETE", STATUS)
        env.job("b", pods=1, gpus=1)
        mount = mounted_config(installed, tmp_path)
        result = CliRunner().invoke(cli, ["apply", "--dry-run", "--kubeconfig", str(control_plane.kubeconfig),
                                          "--namespace", NAMESPACE, "--policy", str(mount / "policy.yaml"),
                                          "--config", str(mount / "kueue.yaml"), "-q"])
        assert result.exit_code == 0 and "warning" not in result.output, result.output
        assert installed.get_or_none(STATUS) is None
    finally:
        env.cleanup()
