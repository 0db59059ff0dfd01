"""The table for people (issue 39): kubectl/squeue columns, order, filters, width, colour,
and a headline that states the objective in its order."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from models import Admission, Eviction, ObjectRef, PendingEntry, Plan, SolverReport, WorkloadState
from planner.describe import board
from planner.k8s.annotations import decode_entries
from planner.output.document import render
from planner.snapshot import read_snapshot
from planner.output.table import View, age

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def golden_plan(stem: str) -> Plan:
    """A fixture's checked-in plan as a Plan (no solve): decisions, stages and summary."""
    data = yaml.safe_load((FIXTURES / f"{stem}.plan.yaml").read_text())

    def ref(d: dict[str, str]) -> ObjectRef:
        return ObjectRef(d["kind"], d["namespace"], d["name"])

    s = data["solver"]
    return Plan(
        source=f"fixtures/{data['snapshot']['source']}", digest="", object_count=data["snapshot"]["objects"],
        solver=SolverReport(s["method"], s["status"], s["objective"], s["bound"], s["gap"],
                            seconds={"total": 14.1}, message=s.get("message", ""), stages=tuple(s.get("stages", ()))),
        admissions=tuple(Admission(ref(a["workload"]), a["clusterQueue"], tuple(decode_entries(a["podSets"])))
                         for a in data["admissions"]),
        evictions=tuple(Eviction(ref(e["workload"]), e["reason"], tuple(ref(r) for r in e["for"]), e["cost"])
                        for e in data["evictions"]),
        pending=tuple(PendingEntry(ref(p["workload"]), p["reason"]) for p in data["pending"]),
        summary=data["summary"],
    )


@pytest.fixture(scope="module")
def meta_like() -> tuple[Plan, object]:
    return golden_plan("meta-like"), read_snapshot([str(FIXTURES / "meta-like.json")])


def header(text: str) -> list[str]:
    return next(line for line in text.splitlines() if line.startswith("WORKLOAD")).split()


def body(text: str) -> list[str]:
    """The workload rows: the lines after the header up to the first blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("WORKLOAD")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i] or lines[i].startswith("Running")), len(lines))
    return lines[start:end]


def test_meta_like_fits_120_columns_with_priority_wait_and_position(meta_like) -> None:
    plan, snapshot = meta_like
    text = render(plan, "table", snapshot, View(width=120))
    assert max(len(line) for line in text.splitlines()) <= 120
    assert header(text)[:9] == ["WORKLOAD", "QUEUE", "PRIORITY", "WAIT", "POSITION", "PODS", "FLAVOR", "DECISION",
                                "NODES"]
    # FLAVOR is the GPU flavor, not cpu=...,memory=...,nvidia.com/gpu=... on every row
    assert "cpu=h100" not in text and "nvidia.com/gpu=h100" not in text
    rows = body(text)
    assert len(rows) == len(plan.admissions) + len(plan.evictions) + len(plan.pending)   # running: counted, not listed
    assert re.search(r"^Running and unchanged: \d+ workloads, \d+ GPUs \(listed with -o wide\)$", text, re.M)


def test_rows_sorted_by_decision_then_priority_then_queue_position(meta_like) -> None:
    plan, snapshot = meta_like
    rows = board.rows(plan, snapshot)
    rank = {d: i for i, d in enumerate(board.DECISIONS)}
    keys = [(rank[r.decision], -(r.priority or 0), r.position or 0) for r in rows]
    assert keys == sorted(keys)
    admitted = [r for r in rows if r.decision == "admit"]
    assert admitted[0].priority == max(r.priority or 0 for r in admitted) and admitted[0].position == 1
    # WAIT is from creation to the snapshot's now; POSITION is the place in the ClusterQueue's queue
    by_ref = {w.ref: w for w in snapshot.workloads}
    first = admitted[0]
    assert first.wait == snapshot.now - by_ref[first.ref].created_at
    queue = sorted((w for w in snapshot.workloads
                    if w.state is WorkloadState.PENDING and w.cluster_queue == first.queue),
                   key=lambda w: (-w.priority, w.queued_at))
    assert queue[0].ref == first.ref


def test_headline_states_each_tier_against_its_bound(meta_like) -> None:
    plan, snapshot = meta_like
    text = render(plan, "table", snapshot, View(time_limit=20))
    head = text.split("\n\n")[0]
    assert "milp optimal in 14.1s of a 20s limit" in head
    assert re.search(r"priority 1000 +701 GPUs served +proven best", head)
    assert re.search(r"priority 100 +\d+ GPUs served +proven best", head)
    assert "objective 3496" not in text    # the plain sum over tiers is not the headline
    assert re.search(r"evicts \d+, preemption cost [\d.]+", head)


def test_an_open_tier_shows_its_bound_and_the_tiers_below_are_not_compared(meta_like) -> None:
    plan, snapshot = meta_like
    stages = tuple({**s, "bound": s["bound"] + 11} if s["stage"] == "priority 100" else s for s in plan.solver.stages)
    open_plan = Plan(plan.source, "", plan.object_count,
                     SolverReport("milp", "feasible", 0, 0, 0, {"total": 1.2}, stages=stages),
                     plan.admissions, plan.evictions, plan.pending, summary=plan.summary)
    head = render(open_plan, "table", snapshot, View(time_limit=0.5)).split("\n\n")[0]
    served = next(t for t in board.tiers(open_plan, snapshot) if t.priority == 100).served
    assert f"bound {served + 11:g} (" in head and "gap; tiers below not compared" in head
    assert re.search(r"priority 0 .*not compared \(a tier above is not proven\)", head)
    assert "in 1.2s of a 0.5s limit" in head


def test_namespace_and_queue_filters_and_summary_only(meta_like) -> None:
    plan, snapshot = meta_like
    rows = body(render(plan, "table", snapshot, View(namespace="team-llm")))
    assert rows and all(line.startswith(("team-llm/", "JobSet/team-llm/")) for line in rows)
    rows = body(render(plan, "table", snapshot, View(queue="team-ads-cq", width=200)))
    assert rows and all(line.split()[1] == "team-ads-cq" for line in rows)
    text = render(plan, "table", snapshot, View(summary_only=True))
    assert "WORKLOAD" not in text and "team-llm/" not in text and "Workloads: admit" in text


def test_wide_lists_running_work_and_every_flavor(meta_like) -> None:
    plan, snapshot = meta_like
    text = render(plan, "wide", snapshot)
    running = [line for line in body(text) if " running " in line]
    assert len(running) == sum(1 for w in snapshot.workloads if w.state is WorkloadState.RUNNING and w.assignment) \
        - len(plan.evictions)
    assert "cpu=h100,memory=h100,nvidia.com/gpu=h100" in text and "LOCALQUEUE" in header(text)


def test_noise_rows_are_left_out(meta_like) -> None:
    plan, snapshot = meta_like
    summary = {**plan.summary, "served_cores": {"0": 0, "100": 0},
               "locality": {"mean_domains": 0, "one_domain_share": 0, "pod_sets": 0}}
    text = render(Plan(plan.source, "", 1, plan.solver, plan.admissions, summary=summary), "table", snapshot)
    assert "served_cores" not in text and "locality" not in text and "served_gpus" in text


def test_colour_only_when_asked_and_names_are_never_markup(meta_like) -> None:
    plan, snapshot = meta_like
    plain = render(plan, "table", snapshot, View())
    assert "\x1b" not in plain
    coloured = render(plan, "table", snapshot, View(color=True))
    assert "\x1b[" in coloured
    assert [line.rstrip() for line in ANSI.sub("", coloured).splitlines()] == plain.splitlines()
    marked = Plan("[bold]x[/bold]:smile:", "", 1, plan.solver,
                  pending=(PendingEntry(ObjectRef("Job", "ns", "[red]j[/red]"), ":smile: [b]why[/b]"),))
    text = render(marked, "table", None, View(color=True))
    assert "[red]j[/red]" in text and ":smile: [b]why[/b]" in text and "[bold]x[/bold]:smile:" in text


@pytest.mark.parametrize("names, text", [
    (["n01", "n02", "n03", "n04"], "n01-n04"),
    (["n01", "n02", "n04", "x"], "n01-n02,n04,x"),
    (["node-9", "node-10"], "node-9-node-10"),
])
def test_host_ranges(names: list[str], text: str) -> None:
    assert board.host_ranges(names) == text


def test_nodes_grouped_by_the_rack_above_them() -> None:
    per_node = {f"b1-r02-n0{i}": 1 for i in range(1, 5)} | {"b1-r03-n07": 2}
    parents = {host: host.rsplit("-", 1)[0] for host in per_node}
    assert board.nodes_text(per_node, parents) == "b1-r02 x4 (n01-n04), b1-r03 x1 (n07)"
    assert board.nodes_text({"h100-node-03": 1, "h100-node-04": 1}, {}) == "h100-node-[03-04]"


@pytest.mark.parametrize("seconds, text", [(None, "-"), (45, "45s"), (600, "10m"), (7200, "2h"), (8100, "2h15m"),
                                           (40 * 3600, "40h"), (3 * 86400 + 7200, "3d2h"), (20 * 86400, "20d")])
def test_wait_reads_like_kubectl_age(seconds: float | None, text: str) -> None:
    assert age(seconds) == text


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=300)


def test_cli_table_header_namespace_and_summary_only() -> None:
    snap = str(FIXTURES / "multi-team-gpu.yaml")
    table = run("what-if", snap, "-o", "table", "-q", "--solver", "greedy")
    assert table.returncode == 0, table.stderr
    assert {"PRIORITY", "WAIT", "POSITION"} <= set(header(table.stdout))
    only = run("what-if", snap, "-o", "table", "-q", "--solver", "greedy", "--namespace", "team-llm")
    rows = body(only.stdout)
    assert rows and all(line.startswith("team-llm/") for line in rows)
    summary = run("what-if", snap, "-o", "table", "-q", "--solver", "greedy", "--summary-only")
    assert summary.returncode == 0 and "WORKLOAD" not in summary.stdout and "team-llm/" not in summary.stdout


def test_colour_on_a_terminal_only_and_no_color_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.cli import console, outputs

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(console, "isatty", lambda stream: True)
    assert outputs.table_view(None, None, False, None).color
    monkeypatch.setenv("NO_COLOR", "1")
    assert not outputs.table_view(None, None, False, None).color
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr(console, "isatty", lambda stream: False)
    monkeypatch.setenv("COLUMNS", "150")
    view = outputs.table_view("ns", "q", True, 7.0)
    assert not view.color and view.width == 150 and (view.namespace, view.queue, view.summary_only) == ("ns", "q", True)
    monkeypatch.delenv("COLUMNS")
    assert outputs.table_view(None, None, False, None).width == 120      # off a terminal, no COLUMNS
