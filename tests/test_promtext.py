"""Metrics in Prometheus text format (issue 27, item 4): `--metrics FILE`, the push to a
Pushgateway (against a real HTTP server on localhost), and the Grafana dashboard."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from models import Admission, Eviction, ObjectRef, PendingEntry, Plan, SolverReport
from planner import cli as cli_module
from planner.cli import outputs
from planner.output import promtext
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def by(samples_, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples_}


def run(*args: str):
    return CliRunner().invoke(cli_module.cli, list(args))


def test_what_if_metrics_file_parses_and_matches_the_plan(tmp_path):
    out, prom = tmp_path / "plan.json", tmp_path / "m.prom"
    result = run("what-if", str(FIXTURES / "hierarchical-cohorts.yaml"), "-o", "json", "--out", str(out),
                 "--metrics", str(prom), "--quiet")
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    got = samples(prom.read_text())
    summary = plan["summary"]
    assert by(got["stowplan_served_gpus"], "priority") == {k: float(v) for k, v in summary["served_gpus"].items()}
    assert by(got["stowplan_served_cores"], "priority") == {k: float(v) for k, v in summary["served_cores"].items()}
    assert by(got["stowplan_gain_over_greedy_gpus"], "priority") == \
        {k: float(v) for k, v in summary["vs_kueue"]["difference"]["served_gpus"].items()}
    assert by(got["stowplan_gain_over_greedy_gpus"], "priority")["100"] == 6.0
    assert sum(s.value for s in got["stowplan_admitted_workloads_total"]) == summary["admitted"]
    per_queue = {a["clusterQueue"] for a in plan["admissions"]}
    assert set(by(got["stowplan_admitted_workloads_total"], "cluster_queue")) >= per_queue
    assert by(got["stowplan_pending_workloads"], "cluster_queue")["recommendations-cq"] == 1.0
    assert sum(s.value for s in got["stowplan_pending_workloads"]) == summary["pending"]
    assert sum(s.value for s in got["stowplan_evicted_workloads_total"]) == summary["evicted"] == 0
    assert set(by(got["stowplan_cycle_seconds"], "phase")) == {"read", "build", "solve", "verify", "total"}
    assert got["stowplan_plan_gap"][0].value == plan["solver"]["gap"]
    assert got["stowplan_plan_info"][0].labels == {"method": "milp", "status": "optimal"}
    assert not any(name.endswith("_created") for name in got)


def test_evictions_are_counted_per_queue_and_reason():
    ref = lambda name, ns="a": ObjectRef("Job", ns, name)  # noqa: E731
    plan = Plan("s", "d", 1, SolverReport("milp", "feasible", 10.0, 12.0, 1 / 6, {"total": 1.5}),
                admissions=(Admission(ref("new"), "cq-a", ()),),
                evictions=(Eviction(ref("old", "b"), "Reclaimed", (ref("new"),), 3.0),
                           Eviction(ref("older", "b"), "Reclaimed", (ref("new"),), 1.0),
                           Eviction(ref("low"), "Preempted", (ref("new"),), 2.0)),
                pending=(PendingEntry(ref("wait"), "quota"),),
                summary={"served_gpus": {0: 8}, "preemption_cost": 6.0})
    queues = {ref("new"): "cq-a", ref("old", "b"): "cq-b", ref("older", "b"): "cq-b", ref("low"): "cq-a",
              ref("wait"): "cq-a"}
    got = samples(promtext.text(promtext.registry_for(plan, queues, apply_seconds=0.25, conflicts=2, now=5.0)))
    evicted = {(s.labels["cluster_queue"], s.labels["reason"]): s.value for s in got["stowplan_evicted_workloads_total"]}
    assert evicted == {("cq-a", "Preempted"): 1.0, ("cq-a", "Reclaimed"): 0.0,
                       ("cq-b", "Preempted"): 0.0, ("cq-b", "Reclaimed"): 2.0}
    assert by(got["stowplan_pending_workloads"], "cluster_queue") == {"cq-a": 1.0, "cq-b": 0.0}
    assert by(got["stowplan_cycle_seconds"], "phase")["apply"] == 0.25
    assert got["stowplan_apply_conflicts"][0].value == 2.0
    assert got["stowplan_preemption_cost"][0].value == 6.0
    assert got["stowplan_last_cycle_timestamp_seconds"][0].value == 5.0
    assert "stowplan_gain_over_greedy_gpus" not in got      # no vs_kueue block: nothing to compare


@pytest.mark.parametrize("target,why", [("/dev/null", "character device"), ("/nonexistent/m.prom", "does not exist")])
def test_bad_metrics_path_is_exit_2_naming_the_option(target, why):
    result = run("what-if", str(FIXTURES / "tiny.yaml"), "--metrics", target, "--quiet")
    assert result.exit_code == 2
    assert "--metrics" in result.output and why in result.output


@pytest.mark.parametrize("url,why", [("ftp://gw:9091", "http(s)"), ("http://user:secret@gw:9091", "user-info"),
                                     ("gw:9091", "http(s)")])
def test_bad_pushgateway_is_exit_2_and_never_echoes_a_password(url, why):
    result = run("apply", "--pushgateway", url)
    assert result.exit_code == 2
    assert "--pushgateway" in result.output and why in result.output
    assert "secret" not in result.output


class Gateway(BaseHTTPRequestHandler):
    """A Pushgateway's push endpoint, enough to receive one push: records it."""

    received: list = []
    status = 200

    def do_PUT(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(("PUT", self.path, self.headers.get("Content-Type"), body.decode()))
        self.send_response(type(self).status)
        self.end_headers()

    do_POST = do_PUT  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    Gateway.received, Gateway.status = [], 200
    server = HTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def a_plan() -> tuple[Plan, dict]:
    from planner.cycle import plan_snapshot
    from planner.snapshot import read_snapshot

    snapshot = read_snapshot([str(FIXTURES / "hierarchical-cohorts.yaml")])
    return plan_snapshot(snapshot), promtext.queues_of(snapshot)


def test_push_reaches_a_real_http_server(gateway, capsys):
    plan, queues = a_plan()
    url = f"http://127.0.0.1:{gateway.server_port}"
    outputs.write_metrics(None, url, plan, queues, lambda _: None, conflicts=0)
    assert len(Gateway.received) == 1
    method, path, content_type, body = Gateway.received[0]
    assert method == "PUT" and path == "/metrics/job/stowplan"
    assert content_type.startswith("text/plain")
    got = samples(body)
    assert by(got["stowplan_gain_over_greedy_gpus"], "priority")["100"] == 6.0
    assert "warning" not in capsys.readouterr().err


def test_a_failed_push_is_a_warning_without_credentials(gateway, capsys):
    Gateway.status = 500
    plan, queues = a_plan()
    outputs.write_metrics(None, f"http://127.0.0.1:{gateway.server_port}/", plan, queues, lambda _: None)
    err = capsys.readouterr().err
    assert err.startswith("warning: push to Pushgateway http://127.0.0.1:") and "500" in err
    assert promtext.redacted("http://u:pw@h:1/x") == "http://h:1/x"


def test_grafana_dashboard_panels_name_metrics_we_emit():
    dashboard = json.loads((ROOT / "cronjob" / "grafana-dashboard.json").read_text())
    plan, queues = a_plan()
    emitted = set(samples(promtext.text(promtext.registry_for(plan, queues, apply_seconds=1.0, conflicts=0))))
    assert dashboard["panels"]
    wanted = {"stowplan_pending_workloads", "stowplan_admitted_workloads_total", "stowplan_evicted_workloads_total",
              "stowplan_cycle_seconds", "stowplan_plan_gap", "stowplan_served_gpus", "stowplan_served_cores",
              "stowplan_gain_over_greedy_gpus"}
    shown = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"\bstowplan_[a-z_]+", target["expr"]))
            assert names, (panel["title"], target["expr"])
            assert names <= emitted, (panel["title"], names - emitted)
            shown |= names
    assert wanted <= shown
