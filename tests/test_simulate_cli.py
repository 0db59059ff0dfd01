"""Traces and `stowplan simulate` end to end: the trace reader's errors (exit 2 naming file,
line and field), `stowplan generate --trace`, and the command the outside checks run, on a
small generated cluster and a short trace so it stays a few cycles."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from models import TopologyRequest, WorkloadState
from planner.cli import cli
from planner.base.errors import InputError
from planner.snapshot.trace import parse_trace, read_with_snapshot
from planner.tools.spec_options import spec_from_options
from planner.tools import generate as g

SMALL = ("--nodes", "2x2x4", "--set", "teams=3", "--set", "pending=6", "--set", "running=6",
         "--set", "max_job_gpus=32", "--set", "multi_node_sizes=16:2,32:1")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), auto_envvar_prefix="STOWPLAN")


def write(path: Path, *lines: object) -> str:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


JOB = {"submit": 10, "namespace": "team-llm", "queue": "team-llm-queue", "name": "a", "priorityClass": "standard",
       "podSets": [{"count": 2, "requests": {"nvidia.com/gpu": 8, "cpu": "16", "memory": "64Gi"},
                    "topology": {"required": "cloud.provider.com/topology-rack"}}],
       "duration": 3600, "checkpointInterval": 600}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sim")
    snap, trace = folder / "snap.json", folder / "trace.jsonl"
    assert run("generate", "--preset", "S", *SMALL, "-o", "json", "--out", str(snap), "-q").exit_code == 0
    result = run("generate", "--preset", "S", *SMALL, "--trace", "--hours", "0.5", "--load", "3", "--seed", "7",
                 "--out", str(trace), "-q")
    assert result.exit_code == 0, result.output
    return snap, trace


# ---------------------------------------------------------------- the trace reader

def test_a_trace_line_reads_as_the_job_it_stands_for(tmp_path: Path, cluster: tuple[Path, Path]) -> None:
    trace = write(tmp_path / "t.jsonl", {"apiVersion": "stowplan.io/v1alpha1", "kind": "Trace", "hours": 2}, JOB)
    snapshot, read = read_with_snapshot(trace, [str(cluster[0])])
    assert read.hours == 2.0 and len(read.arrivals) == 1
    a = read.arrivals[0]
    w = a.workload
    assert (a.submit, a.duration, a.checkpoint_interval) == (10.0, 3600.0, 600.0)
    assert w.state is WorkloadState.PENDING and w.cluster_queue == "team-llm-cq" and w.priority == 100
    assert w.pod_sets[0].count == 2 and w.pod_sets[0].request["nvidia.com/gpu"] == 8
    assert w.pod_sets[0].topology == TopologyRequest("required", "cloud.provider.com/topology-rack")
    assert all(x.ref != w.ref for x in snapshot.workloads)        # the trace's jobs are not in the snapshot


@pytest.mark.parametrize(("line", "field", "says"), [
    ({k: v for k, v in JOB.items() if k != "duration"}, "duration", "is required"),
    ({**JOB, "duration": -5}, "duration", "above 0"),
    ({**JOB, "submit": "soon"}, "submit", "must be a number"),
    ({**JOB, "name": "Not_A_Name"}, "name", "not a Kubernetes name"),
    ({**JOB, "kind": "Deployment"}, "kind", "is not one of"),
    ({**JOB, "podSets": []}, "podSets", "1 to 8"),
    ({**JOB, "podSets": [{"count": 1, "requests": {"cpu": "lots"}}]}, "podSets[0].requests[cpu]", "cpu"),
    ({**JOB, "podSets": [{"count": 0, "requests": {"cpu": "1"}}]}, "podSets[0].count", "whole number"),
    ({**JOB, "podSets": [{"count": 1, "requests": {"cpu": "1"}, "topology": {"required": "r", "preferred": "r"}}]},
     "podSets[0].topology", "not required and preferred"),
    ({**JOB, "colour": "blue"}, "colour", "is not a trace field"),
])
def test_a_wrong_line_names_the_file_the_line_and_the_field(tmp_path: Path, line: dict[str, object], field: str,
                                                            says: str) -> None:
    path = write(tmp_path / "bad.jsonl", {**JOB, "name": "first"}, "", line)
    with pytest.raises(InputError) as caught:
        parse_trace(path, Path(path).read_bytes())
    assert caught.value.file == f"{path}: line 3" and caught.value.field == field
    assert says in str(caught.value)


def test_malformed_json_a_late_header_and_a_name_twice_are_errors(tmp_path: Path) -> None:
    cases = [("{not json", "line 1", "is not JSON"),
             (json.dumps(JOB) + "\n" + json.dumps({"apiVersion": "stowplan.io/v1alpha1", "kind": "Trace"}),
              "line 2", "first line"),
             (json.dumps(JOB) + "\n" + json.dumps(JOB), "line 2", "already on line 1"),
             ('{"submit": ' + "9" * 5000 + "}", "line 1", "is not JSON (Exceeds the limit"),   # issue 40: was exit 1
             ("[" * 100_000 + "]" * 100_000, "line 1", "nested too deeply")]
    for text, where, says in cases:
        path = tmp_path / "t.jsonl"
        path.write_text(text + "\n")
        with pytest.raises(InputError) as caught:
            parse_trace(str(path), path.read_bytes())
        assert where in str(caught.value) and says in str(caught.value)


def test_the_cli_exits_2_on_a_bad_trace_and_writes_nothing(tmp_path: Path, cluster: tuple[Path, Path]) -> None:
    trace = write(tmp_path / "bad.jsonl", {**JOB, "duration": "long"})
    out = tmp_path / "sim.json"
    result = run("simulate", str(cluster[0]), "--trace", trace, "--solver", "greedy", "-q", "--out", str(out))
    assert result.exit_code == 2
    assert f"{trace}: line 1: duration: must be a number" in result.stderr
    assert not out.exists()


# ---------------------------------------------------------------- generate --trace

def test_generated_traces_are_deterministic_and_read_back(cluster: tuple[Path, Path]) -> None:
    spec = spec_from_options("S", 7, "2x2x4", ["teams=3", "max_job_gpus=32", "multi_node_sizes=16:2,32:1"])
    first, again = g.generate_trace(spec, 2.0, 2.0), g.generate_trace(spec, 2.0, 2.0)
    assert first == again and first[0]["kind"] == "Trace" and first[0]["hours"] == 2.0
    submits = [line["submit"] for line in first[1:]]
    assert submits == sorted(submits) and all(0 <= s < 7200 for s in submits)
    snapshot, trace = read_with_snapshot(str(cluster[1]), [str(cluster[0])])
    assert trace.arrivals and not [p for p in snapshot.problems if "trace" in p.file]
    assert all(a.workload.cluster_queue for a in trace.arrivals)


def test_hours_and_load_without_trace_are_a_bad_flag() -> None:
    result = run("generate", "--preset", "S", "--hours", "4", "-q")
    assert result.exit_code == 2 and "give --trace too" in result.stderr


def test_philly_durations_follow_the_mix() -> None:
    import random

    rng = random.Random(1)
    draws = [g.philly_duration(rng) for _ in range(4000)]
    short = sum(1800 <= d <= 17 * 3600 for d in draws) / len(draws)
    assert 0.77 < short < 0.83 and all(1800 <= d <= 7 * 86400 for d in draws)


# ---------------------------------------------------------------- simulate, end to end

def test_the_outside_checks_command_writes_both_planners(tmp_path: Path, cluster: tuple[Path, Path]) -> None:
    snap, trace = cluster
    out = tmp_path / "sim.json"
    result = run("simulate", str(snap), "--trace", str(trace), "--compare", "-o", "json", "--out", str(out),
                 "--hours", "0.25", "--interval", "300", "--time-limit", "5", "-q")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    assert set(doc["planners"]) == {"milp", "greedy"}
    for summary in doc["planners"].values():
        assert 0.0 <= summary["utilization_useful"] <= 1.0
        assert summary["wait_seconds"], "trace jobs arrived, so waits per priority are reported"
        for waits in summary["wait_seconds"].values():
            assert {"p50", "p95", "p99"} <= set(waits) and waits["p50"] <= waits["p95"] <= waits["p99"]
        for key in ("evictions", "admitted", "cycles"):
            assert isinstance(summary[key], int) and summary[key] >= 0
        assert isinstance(summary["lost_gpu_hours"], float) or summary["lost_gpu_hours"] == 0
        assert summary["cycles"] == 4                      # t = 0, 300, 600, 900
        assert {"p50", "max"} <= set(summary["cycle_seconds"])
        assert summary["cycle_seconds"]["p50"] <= summary["cycle_seconds"]["max"]


def test_a_table_and_a_picture(tmp_path: Path, cluster: tuple[Path, Path]) -> None:
    snap, trace = cluster
    picture = tmp_path / "sim.svg"
    result = run("simulate", str(snap), "--trace", str(trace), "--solver", "greedy", "-o", "table",
                 "--hours", "0.1", "--interval", "300", "--picture", str(picture), "-q")
    assert result.exit_code == 0, result.stderr
    assert "useful GPU utilisation" in result.stdout and "greedy" in result.stdout
    assert picture.read_text().lstrip().startswith("<?xml")


# ---------------------------------------------------------------- a cluster's history

def finished_job(name: str, created: str, started: str | None, completed: str | None, **extra: object) -> dict:
    status: dict[str, object] = {}
    if started:
        status["startTime"] = started
    if completed:
        status["completionTime"] = completed
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team-llm", "creationTimestamp": created,
                         "labels": {"kueue.x-k8s.io/queue-name": "team-llm-queue",
                                    "kueue.x-k8s.io/priority-class": "standard"}},
            "spec": {"parallelism": 2, "suspend": False, "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology":
                                             "cloud.provider.com/topology-rack"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {
                    "cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "8"}}}]}}},
            "status": status, **extra}


def test_finished_jobs_of_a_history_become_a_trace_that_simulates(tmp_path: Path, cluster: tuple[Path, Path]) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        finished_job("done-2", "2026-12-01T12:10:00Z", "2026-12-01T12:12:00Z", "2026-12-01T13:12:00Z"),
        finished_job("done-1", "2026-12-01T12:00:00Z", "2026-12-01T12:01:00Z", "2026-12-01T12:31:00Z"),
        finished_job("still-running", "2026-12-01T12:05:00Z", "2026-12-01T12:06:00Z", None),
    ]}))
    out = tmp_path / "trace.jsonl"
    result = run("trace", str(history), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["kind"] == "Trace" and [line["name"] for line in lines[1:]] == ["done-1", "done-2"]
    first, second = lines[1], lines[2]
    assert (first["submit"], first["duration"], second["submit"], second["duration"]) == (0.0, 1800.0, 600.0, 3600.0)
    assert first["podSets"] == [{"name": "main", "count": 2,
                                 "requests": {"cpu": "500m", "memory": str(2**30), "nvidia.com/gpu": "8"},
                                 "topology": {"required": "cloud.provider.com/topology-rack"}}]
    assert "left out 1 queued Job(s): not finished" in result.stderr
    # it reads back as a trace for the generated cluster, whose queues it names
    snapshot, trace = read_with_snapshot(str(out), [str(cluster[0])])
    assert [a.workload.ref.name for a in trace.arrivals] == ["done-1", "done-2"]
    assert all(a.workload.cluster_queue == "team-llm-cq" and a.workload.priority == 100 for a in trace.arrivals)


# ---------------------------------------------------------------- Kueue's performance baseline

def test_kueues_baseline_reads_as_its_30_queues_and_streams(tmp_path: Path) -> None:
    snap, trace = tmp_path / "kb.json", tmp_path / "kb.jsonl"
    assert run("generate", "--preset", "kueue-baseline", "--out", str(snap), "-q").exit_code == 0
    result = run("generate", "--preset", "kueue-baseline", "--trace", "--set", "scale=0.02", "--out", str(trace), "-q")
    assert result.exit_code == 0, result.stderr
    snapshot, read = read_with_snapshot(str(trace), [str(snap)])
    assert len(snapshot.cluster_queues) == 30 and not snapshot.problems
    assert {cq.cohort for cq in snapshot.cluster_queues.values()} == {f"cohort-{c}" for c in range(5)}
    # per queue: 7 small (1 cpu, priority 50), 2 medium (5 cpu, 100), 1 large (20 cpu, 200)
    by_class = Counter((a.workload.priority, a.workload.pod_sets[0].request["cpu"], a.duration) for a in read.arrivals)
    assert by_class == {(50, 1000, 0.2): 30 * 7, (100, 5000, 0.5): 30 * 2, (200, 20000, 1.0): 30 * 1}
    assert run("generate", "--preset", "kueue-baseline", "--set", "scale=2", "-q").exit_code == 2


def test_kueues_baseline_drains_through_both_planners(tmp_path: Path) -> None:
    snap, trace, out = tmp_path / "kb.json", tmp_path / "kb.jsonl", tmp_path / "sim.json"
    run("generate", "--preset", "kueue-baseline", "--out", str(snap), "-q")
    run("generate", "--preset", "kueue-baseline", "--trace", "--set", "scale=0.01", "--out", str(trace), "-q")
    result = run("simulate", str(snap), "--trace", str(trace), "--compare", "--interval", "1", "--drain",
                 "--time-limit", "5", "-o", "json", "--out", str(out), "-q")
    assert result.exit_code == 0, result.stderr
    for summary in json.loads(out.read_text())["planners"].values():
        # per queue at scale 0.01: 4 small, 1 medium, 1 large (each stream rounded up)
        assert summary["finished"] == summary["trace_jobs"] == 30 * 6 and summary["unstarted"] == 0
        assert summary["admissions_per_planner_second"] > 0
