"""The live commands' flags against their --help, on the real control plane (issue 35,
item 8; tests/test_help_truth.py's table names these for what only a cluster shows):
plan's solver and table flags, apply's Lease, solver and release flags, snapshot's
format, file, --config and --policy."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.lease import Lease
from helpers import cli_on_a_tty
from live_kit import Env, wait_for

POLICY = """\
apiVersion: stowplan.io/v1alpha1
kind: PlannerPolicy
metadata: {name: starved}
spec: {timeLimitSeconds: 0.0001}
"""


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=1)
    yield made
    made.cleanup()


REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def process(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: HiGHS writes its log to the process's stderr, past click."""
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)


def admitted_here(plan: dict, env: Env) -> set[str]:
    return {a["workload"]["name"] for a in plan["admissions"] if a["workload"]["namespace"] == env.namespace}


def test_plan_policy_and_solver_flags_reach_the_live_plan(control_plane, env, tmp_path):
    """plan --solver (default milp), --time-limit, --policy and -v, each against the same cluster."""
    env.job("a", pods=1, gpus=2)
    base = ["plan", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json"]
    default = run(*base, "-q")
    assert default.exit_code == 0, default.output
    plan = json.loads(default.stdout)
    assert plan["solver"]["method"] == "milp" and admitted_here(plan, env) == {"a"}
    assert "HiGHS" not in default.stderr
    greedy = json.loads(run(*base, "-q", "--solver", "greedy").stdout)
    assert greedy["solver"]["method"] == "greedy" and admitted_here(greedy, env) == {"a"}
    starved = json.loads(run(*base, "-q", "--time-limit", "0.0001").stdout)
    assert starved["solver"]["status"] == "fallback"       # no search meets it: the fallback, whatever it admits
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    by_policy = json.loads(run(*base, "-q", "--policy", str(policy)).stdout)
    assert by_policy["solver"]["status"] == "fallback"
    # the flag wins over the policy's limit
    overridden = json.loads(run(*base, "-q", "--policy", str(policy), "--time-limit", "60").stdout)
    assert overridden["solver"]["status"] == "optimal" and admitted_here(overridden, env) == {"a"}
    loud = process(*base, "-v")
    assert loud.returncode == 0 and "HiGHS" in loud.stderr, loud.stderr
    json.loads(loud.stdout)
    assert "HiGHS" not in process(*base).stderr


def rows(table: str) -> list[str]:
    """The workload rows: the lines under the WORKLOAD header, up to the blank line (names may be cut
    to the terminal's width, so rows are told by their ClusterQueue)."""
    lines = table.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("WORKLOAD ")), None)
    if start is None:
        return []
    body = lines[start + 1:]
    return body[:body.index("")] if "" in body else body


def test_plan_table_flags_and_formats(control_plane, env, api_client):
    """plan -o (default yaml off a terminal; wide), --namespace, --queue, --summary-only."""
    env.job("a", pods=1, gpus=2)
    env.job("b", pods=1, gpus=2)
    base = ["plan", "--kubeconfig", str(control_plane.kubeconfig), "-q"]
    default = run(*base)
    assert default.exit_code == 0, default.output
    assert yaml.safe_load(default.stdout)["kind"] == "Plan"
    table = run(*base, "-o", "table").stdout
    assert table.startswith("Plan for ") and "WORKLOAD " in table
    wide = run(*base, "-o", "wide").stdout
    assert "LOCALQUEUE" in wide and "LOCALQUEUE" not in table
    only = run(*base, "-o", "table", "--namespace", env.namespace).stdout
    assert len(rows(only)) == 2 and all(env.cq in row for row in rows(only)), only
    queue = run(*base, "-o", "table", "--queue", env.cq).stdout
    assert len(rows(queue)) == 2 and all(env.cq in row for row in rows(queue)), queue
    elsewhere = run(*base, "-o", "table", "--namespace", "no-such-namespace").stdout
    admits = re.compile(r"admits (\d+)")
    assert rows(elsewhere) == [] and admits.search(elsewhere)[1] == admits.search(only)[1]   # the whole plan's
    other = run(*base, "-o", "table", "--queue", "no-such-queue").stdout
    assert rows(other) == []
    summary = run(*base, "-o", "table", "--summary-only").stdout
    assert rows(summary) == [] and "Summary:" in summary


def test_apply_lease_flags_and_solver(control_plane, env, tmp_path):
    """apply --namespace/--lease-name (the Lease), --identity (its holder: a Lease this identity
    holds is its own), --lease-duration (how long it lasts), --solver and -v, --release-wait."""
    env.job("a", pods=2, gpus=2)
    kube = Kube(connect(str(control_plane.kubeconfig)))
    held = Lease(kube, namespace=env.namespace, name="flags-lease", identity="me", duration=600)
    held.acquire()
    base = ["apply", "--kubeconfig", str(control_plane.kubeconfig), "--namespace", env.namespace,
            "--lease-name", "flags-lease", "-q"]
    refused = run(*base)
    assert refused.exit_code == 5 and "held by me" in refused.stderr, refused.output
    metrics = tmp_path / "m.prom"
    result = process(*base, "--identity", "me", "--lease-duration", "77", "--solver", "greedy", "-v",
                     "--release-wait", "60", "--metrics", str(metrics))
    assert result.returncode == 0, result.stderr
    assert "1 admitted" in result.stdout and "2 pods released" in result.stdout and "0 pods left gated" in result.stdout
    assert "HiGHS" not in result.stderr              # greedy: no solver to show
    assert 'method="greedy"' in metrics.read_text()
    lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{env.namespace}/leases/flags-lease")
    assert lease["spec"]["leaseDurationSeconds"] == 77 and not lease["spec"].get("holderIdentity")
    assert kube.get_or_none(f"/apis/coordination.k8s.io/v1/namespaces/{env.namespace}/leases/stowplan-planner") is None
    env.job("b", pods=2, gpus=2)
    quick = process(*base, "--release-wait", "0", "--time-limit", "60", "-v")
    assert quick.returncode == 0, quick.stderr
    # without waiting, what the job controller has not made yet is left gated for the next cycle
    released, gated = map(int, re.search(r"(\d+) pods released, .* (\d+) pods left gated", quick.stdout).groups())
    assert "1 admitted" in quick.stdout and released + gated == 2, quick.stdout
    assert "HiGHS" in quick.stderr                   # -v with milp: the solver's log
    starved = process(*base, "--dry-run", "--time-limit", "0.0001")
    assert starved.returncode == 0 and starved.stdout.startswith("stowplan: milp fallback"), starved.stdout


def test_snapshot_format_out_config_and_policy(control_plane, env, tmp_path):
    """snapshot -o (json on stdout by default, yaml for an --out not ending in .json), --out
    (0600), --config (a PlannerPolicy in it is kept), --policy (written in place of it)."""
    env.job("a", pods=1, gpus=1)
    base = ["snapshot", "--kubeconfig", str(control_plane.kubeconfig), "-q"]
    stdout = run(*base)
    assert stdout.exit_code == 0, stdout.output
    assert json.loads(stdout.stdout)["kind"] == "List"
    assert yaml.safe_load(run(*base, "-o", "yaml").stdout)["kind"] == "List"
    out = tmp_path / "snap.yaml"
    config = tmp_path / "config.yaml"
    config.write_text(POLICY.replace("starved", "from-config").replace("0.0001", "30"))
    result = run(*base, "--out", str(out), "--config", str(config))
    assert result.exit_code == 0 and result.stdout == "", result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and not out.read_text().startswith("{")
    policies = [i for i in yaml.safe_load(out.read_text())["items"] if i["kind"] == "PlannerPolicy"]
    assert [p["metadata"]["name"] for p in policies] == ["from-config"]
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    as_json = tmp_path / "snap.json"
    result = run(*base, "--out", str(as_json), "--config", str(config), "--policy", str(policy))
    assert result.exit_code == 0, result.output
    policies = [i for i in json.loads(as_json.read_text())["items"] if i["kind"] == "PlannerPolicy"]
    assert [p["metadata"]["name"] for p in policies] == ["starved"]
    planned = run("what-if", str(as_json), "-o", "json", "-q")
    assert json.loads(planned.stdout)["solver"]["status"] == "fallback"     # planned with that policy


def test_apply_and_snapshot_quiet_on_a_terminal(control_plane, env, tmp_path):
    """-q: no progress lines on a terminal's stderr (apply and snapshot show them without it)."""
    env.job("a", pods=1, gpus=1)
    kubeconfig = ["--kubeconfig", str(control_plane.kubeconfig)]
    for args in (["snapshot", *kubeconfig, "--out", str(tmp_path / "s.json")],
                 ["apply", *kubeconfig, "--namespace", env.namespace, "--dry-run"]):
        code, loud = cli_on_a_tty(args, tmp_path, tmp_path / "stdout")
        assert code == 0 and "stowplan: read " in loud, loud
        code, quiet = cli_on_a_tty([*args, "-q"], tmp_path, tmp_path / "stdout")
        assert code == 0 and "stowplan: " not in quiet, quiet


LWS_CRD = "leaderworkersets.leaderworkerset.x-k8s.io"


def test_snapshot_skips_a_kind_the_server_does_not_serve(control_plane, env, api_client, tmp_path):
    """Issue 35, item 5: one resource type the server does not serve made the recommended
    `kubectl get a,b,c` write nothing. `stowplan snapshot` lists each kind on its own and
    skips one the server does not serve (here LeaderWorkerSet, its CRD removed), writing the rest."""
    from kubernetes import client

    env.job("a", pods=1, gpus=1)
    ext = client.ApiextensionsV1Api(api_client)
    ext.delete_custom_resource_definition(LWS_CRD)
    try:
        wait_for("LeaderWorkerSet's API to go", lambda: control_plane.http_get(
            "/apis/leaderworkerset.x-k8s.io/v1")[0] == 404, 60)
        out = tmp_path / "snap.json"
        result = run("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "--out", str(out), "-q")
        assert result.exit_code == 0, result.output
        items = json.loads(out.read_text())["items"]
        assert not any(i["kind"] == "LeaderWorkerSet" for i in items)
        assert any(i["kind"] == "Job" and i["metadata"]["name"] == "a" and i["metadata"]["namespace"] == env.namespace
                   for i in items)
        assert any(i["kind"] == "ClusterQueue" and i["metadata"]["name"] == env.cq for i in items)
        planned = run("what-if", str(out), "-o", "json", "-q")
        assert admitted_here(json.loads(planned.stdout), env) == {"a"}
    finally:
        control_plane.install_crds()
