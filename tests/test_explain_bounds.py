"""`explain` bounded in work (issue 40, item 2): a job of a million pods is explained in the
memory of a small one, every count of the search has a named limit (planner.describe.explain.LIMITS,
listed in `explain --help` and docs/output.md), a limit that cuts the search is said
plainly ("stopped early: ...") and the same on every run, and the solver calls per
workload stay within the documented bound, each given --search-time-limit.

Nothing here reads the clock: memory is capped in the child process (RLIMIT_AS), solver
calls are counted with a spy around the cycle's plan_snapshot, and a subprocess timeout
only stops a hang."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

import planner.cycle as cycle
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions
from planner.describe import explain as why

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "fixtures" / "tiny.yaml"
MEMORY = 3 * 2**30 // 2     # 1.5 GiB of address space for the whole child (Python, numpy, HiGHS included)
HANG = 900                  # seconds: only to stop a hang, never a speed check
MILLION = "ml-research/million"


def million_pods(tmp_path: Path) -> Path:
    """tiny.yaml and a pending JobSet of 8 replicated Jobs of 125,000 one-GPU pods each: one
    workload of 1,000,000 pods (each pod set within the reader's per-pod-set limit)."""
    document = yaml.safe_load(TINY.read_text())
    pods = {"spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "x", "resources": {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}
    document["items"].append({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "million", "namespace": "ml-research", "uid": "u-million",
                     "creationTimestamp": "2026-12-01T09:10:00Z", "labels": {"kueue.x-k8s.io/queue-name": "research-queue"}},
        "spec": {"suspend": True, "replicatedJobs": [
            {"name": f"part-{i}", "replicas": 1,
             "template": {"spec": {"parallelism": 125_000, "completions": 125_000, "template": pods}}}
            for i in range(8)]}})
    path = tmp_path / "million.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def capped(*args: str) -> subprocess.CompletedProcess[str]:
    """`stowplan ARGS` in a child process whose address space is capped at MEMORY: past it,
    allocations fail and the command does not exit 0."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    return subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=HANG, preexec_fn=limit, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_million_pod_job_is_explained_within_a_memory_cap(tmp_path: Path) -> None:
    snapshot = million_pods(tmp_path)
    done = capped("explain", MILLION, str(snapshot), "--search-time-limit", "1", "-o", "json", "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["state"] == "waiting"
    assert sum(c["neededPods"] for c in data["capacity"]) == 1_000_000
    assert 0 < data["plansTried"] <= why.MAX_PLANS
    # nodes for a million pods are more than one change adds: the search says where it stopped
    nodes = next(c for c in data["changes"] if c["kind"] == "nodes")
    assert max(t["amount"] for t in nodes["tried"]) == why.MAX_ADDED_NODES
    assert f"(limit: {why.MAX_ADDED_NODES:,} nodes per change)" in nodes["stoppedEarly"]
    assert any(s.startswith("stopped early: [nodes] ") for s in data["stoppedEarly"])


def test_a_plain_job_past_a_clusters_size_is_explained_within_the_cap(tmp_path: Path) -> None:
    document = yaml.safe_load(TINY.read_text())
    job = next(o for o in document["items"] if o["kind"] == "Job" and o["metadata"]["name"] == "eval-sweep")
    job["spec"]["parallelism"] = job["spec"]["completions"] = 10**6
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    done = capped("explain", "ml-research/eval-sweep", str(path), "--search-time-limit", "1", "-o", "json", "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["state"] == "waiting" and "1,000,000 pods" in data["notes"][0]


# ---------------------------------------------------------------- a limit hit: said, and the same every time

def run(*args: str) -> Result:
    return CliRunner().invoke(cli_module.cli, list(args))


def test_the_node_limit_says_stopped_early_and_the_same_on_two_runs(tmp_path: Path) -> None:
    snapshot = str(million_pods(tmp_path))
    args = ("explain", MILLION, snapshot, "--solver", "greedy", "--search-time-limit", "30", "-q")
    first, second = capped(*args, "-o", "json"), capped(*args, "-o", "json")
    assert first.returncode == second.returncode == 0, first.stderr[-3000:]
    assert first.stdout == second.stdout
    data = json.loads(first.stdout)
    assert data["stoppedEarly"] and all(s.startswith("stopped early: ") for s in data["stoppedEarly"])
    text = capped(*args, "-o", "table")
    assert text.returncode == 0
    assert f"  stopped early: [nodes] no amount above {why.MAX_ADDED_NODES:,} nodes planned " \
           f"(limit: {why.MAX_ADDED_NODES:,} nodes per change); the estimate was " in text.stdout


class Spy:
    """Counts the cycle's plans (the first is the snapshot's own; the rest, changed snapshots')
    and the time limit each was given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.limits: list[float | None] = []
        self.plan_snapshot = cycle.plan_snapshot
        monkeypatch.setattr(cycle, "plan_snapshot", self)

    def __call__(self, snapshot: Any, options: SolveOptions = SolveOptions(), **rest: Any) -> Any:
        self.limits.append(options.time_limit)
        return self.plan_snapshot(snapshot, options, **rest)


def test_the_plan_limit_says_what_it_left_untried_the_same_on_two_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiny.yaml's pretrain-small plans 9 changed snapshots unbounded (quota, nodes, then both);
    at a limit of 5 it stops after 5, says so and names the kinds it did not try."""
    monkeypatch.setattr(why, "MAX_PLANS", 5)
    spy = Spy(monkeypatch)
    args = ("explain", "ml-research/pretrain-small", str(TINY), "--search-time-limit", "1", "-q")
    first, second = run(*args, "-o", "yaml"), run(*args, "-o", "yaml")
    assert first.exit_code == second.exit_code == 0, first.output
    assert first.stdout == second.stdout
    assert len(spy.limits) == 2 * (1 + 5)
    data = yaml.safe_load(first.stdout)
    assert data["plansTried"] == 5
    assert "stopped early: 5 changed snapshots planned (limit: 5 plans per workload); not tried: quota+nodes" \
        in data["stoppedEarly"]
    assert "stopped early: 5 changed snapshots planned (limit: 5 plans per workload)" in run(*args, "-o", "table").stdout


def test_a_search_cut_in_the_middle_keeps_what_admits_and_says_where_the_smallest_lies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With two plans a change, the quota search of tiny's pretrain-small (1 admits; 2 is
    what it plans first when 1 displaces others) stops, keeps what it found and says so."""
    monkeypatch.setattr(why, "MAX_PLANS_PER_CHANGE", 2)
    result = run("explain", "ml-research/pretrain-small", str(TINY), "--search-time-limit", "1", "-q", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for change in data["changes"]:
        assert len(change["tried"]) + len(change.get("quotaTried", [])) <= 2, change
    cut = [c for c in data["changes"] if "stoppedEarly" in c]
    assert cut and all("(limit: 2 plans per change)" in c["stoppedEarly"] for c in cut)
    assert [s for s in data["stoppedEarly"] if "plans per change" in s] == \
        [f"stopped early: [{c['kind']}] {c['stoppedEarly']}" for c in cut]


# ---------------------------------------------------------------- solver calls per workload

def test_solver_calls_per_workload_stay_within_the_documented_bound(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """A million pods: every changed plan is given --search-time-limit, and there are at most
    MAX_PLANS of them (the number the help and the docs give)."""
    spy = Spy(monkeypatch)
    result = run("explain", MILLION, str(million_pods(tmp_path)), "--solver", "greedy", "--search-time-limit",
                 "30", "-q", "-o", "json")
    assert result.exit_code == 0, result.output
    changed = spy.limits[1:]
    assert changed and set(changed) == {30.0}
    assert len(changed) == json.loads(result.stdout)["plansTried"] <= why.MAX_PLANS


def test_explain_all_plans_at_most_the_bound_per_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(why, "MAX_PLANS", 3)
    spy = Spy(monkeypatch)
    result = run("explain", "--all", str(TINY), "--search-time-limit", "1", "-q", "-o", "json")
    assert result.exit_code == 0, result.output
    explained = json.loads(result.stdout)["explanations"]
    assert len(explained) == 2 and all(e["plansTried"] <= 3 for e in explained)
    assert len(spy.limits) - 1 <= 3 * len(explained)
    assert set(spy.limits[1:]) == {1.0}


# ---------------------------------------------------------------- the limits are documented where they are used

def test_every_limit_is_in_the_help_and_the_docs() -> None:
    help_text = " ".join(run("explain", "--help").stdout.split())
    docs = (REPO / "docs" / "output.md").read_text()
    for name, value, _ in why.LIMITS:
        assert f"{value:,} {name}:" in help_text, name
        assert f"| {name} | {value:,} |" in docs, name
    assert f"at most {why.MAX_PLANS} times --search-time-limit" in help_text
