"""what-if --picture (issue 27, item 2): renders for every fixture, aggregates to racks
above MAX_HOSTS, counts what the plan places, and refuses a wrong file name."""

from pathlib import Path
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

from models import Decisions, WorkloadState
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions
from planner.output import picture
from planner.describe.metrics import summarize
from planner.cycle import plan_snapshot
from planner.snapshot import read_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
YAML = sorted(p.name for p in FIXTURES.glob("*.yaml") if not p.name.endswith(".plan.yaml"))
JSON = sorted(p.name for p in FIXTURES.glob("*.json"))


@pytest.mark.parametrize("fixture", YAML)
def test_what_if_draws_every_fixture_as_png(fixture, tmp_path):
    out = tmp_path / "plan.png"
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(FIXTURES / fixture), "-o", "json", "--quiet",
                                                 "--picture", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000


@pytest.mark.parametrize("fixture", JSON)
def test_topology_fixtures_draw_as_svg(fixture, tmp_path):
    snapshot = read_snapshot([str(FIXTURES / fixture)])
    plan = plan_snapshot(snapshot, SolveOptions(solver="greedy"))
    out = tmp_path / "plan.svg"
    assert picture.draw(snapshot, plan, str(out)) == "hosts"
    root = ElementTree.fromstring(out.read_bytes())
    assert root.tag.endswith("svg")
    assert not list(tmp_path.glob(".*.tmp"))


def test_cells_hold_what_the_plan_serves():
    snapshot = read_snapshot([str(FIXTURES / "hierarchical-cohorts.yaml")])
    plan = plan_snapshot(snapshot)
    decisions = Decisions(plan.admissions, plan.evictions)
    grid, hosts = picture.cells(snapshot, decisions)
    served = summarize(snapshot, decisions)["served_gpus"]
    drawn = {}
    for cell in hosts.values():
        for (_, p), v in (*cell.kept.items(), *cell.admitted.items()):
            drawn[p] = drawn.get(p, 0) + v
        assert cell.used() <= cell.capacity
    assert {p: v for p, v in drawn.items() if v} == {p: v for p, v in served.items() if v}
    assert sorted(grid) == ["rack-1", "rack-2"]


def test_many_hosts_are_drawn_per_rack(tmp_path, monkeypatch):
    snapshot = read_snapshot([str(FIXTURES / "nvl72.json")])
    plan = plan_snapshot(snapshot, SolveOptions(solver="greedy"))
    monkeypatch.setattr(picture, "MAX_HOSTS", 16)
    assert picture.draw(snapshot, plan, str(tmp_path / "racks.png")) == "racks"


@pytest.mark.parametrize("name,why", [("plan.jpg", "must end in .svg or .png"), ("missing/plan.png", "does not exist")])
def test_bad_picture_path_is_exit_2_naming_the_option(name, why, tmp_path):
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(FIXTURES / "tiny.yaml"), "--quiet",
                                                 "--picture", str(tmp_path / name)])
    assert result.exit_code == 2
    assert "--picture" in result.output and why in result.output


def test_before_holds_what_runs_now_and_marks_the_victims(tmp_path):
    snapshot = read_snapshot([str(FIXTURES / "nvl72.json")])
    plan = plan_snapshot(snapshot, SolveOptions(solver="greedy"))
    assert plan.evictions
    _, hosts = picture.cells(snapshot, Decisions(plan.admissions, plan.evictions), before=True)
    now = summarize(snapshot, Decisions())["served_gpus"]
    drawn = {}
    for cell in hosts.values():
        assert not cell.admitted
        for (_, p), v in cell.kept.items():
            drawn[p] = drawn.get(p, 0) + v
    assert {p: v for p, v in drawn.items() if v} == {p: v for p, v in now.items() if v}
    assert any(cell.evicted for cell in hosts.values())


def test_what_if_draws_a_before_after_pair(tmp_path):
    after, before = tmp_path / "after.svg", tmp_path / "before.png"
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(FIXTURES / "hierarchical-cohorts.yaml"), "--quiet",
                                                 "-o", "json", "--picture", str(after), "--picture-before", str(before)])
    assert result.exit_code == 0, result.output
    assert b"before the plan" not in after.read_bytes() and before.read_bytes().startswith(b"\x89PNG")
    bad = CliRunner().invoke(cli_module.cli, ["what-if", str(FIXTURES / "tiny.yaml"), "--quiet",
                                              "--picture-before", str(tmp_path / "b.gif")])
    assert bad.exit_code == 2 and "--picture-before" in bad.output


def test_gpus_are_coloured_by_team_shaded_by_priority_and_racks_are_named(tmp_path):
    """Each host's GPUs count for the ClusterQueue of what runs there (its team) at its
    priority; the legend names every team and priority; racks and blocks are named."""
    snapshot = read_snapshot([str(FIXTURES / "hierarchical-cohorts.yaml")])
    plan = plan_snapshot(snapshot)
    _, hosts = picture.cells(snapshot, Decisions(plan.admissions, plan.evictions))
    by_ref = {w.ref: w for w in snapshot.workloads}
    evicted = {e.workload for e in plan.evictions}
    served = [by_ref[a.workload] for a in plan.admissions] + \
        [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING and w.ref not in evicted]
    keys = {k for cell in hosts.values() for k in (*cell.kept, *cell.admitted)}
    assert keys == {(w.cluster_queue, w.priority) for w in served}
    team_colour, shade, colour = picture.colours(sorted(keys))
    assert len(set(team_colour.values())) == len(team_colour)          # one colour per team
    priorities = sorted(shade)
    assert shade[priorities[-1]] == 1.0 and all(shade[a] < shade[b] for a, b in zip(priorities, priorities[1:]))
    out = tmp_path / "plan.svg"
    picture.draw(snapshot, plan, str(out))
    text = out.read_text()
    for team in team_colour:
        assert f">{team}<" in text
    for p in priorities:
        assert f">priority {p}<" in text
    assert ">rack-1<" in text and ">rack-2<" in text
    many, _, _ = picture.colours([(f"team-{i:02d}", 0) for i in range(32)])   # the L preset has 32 teams
    assert len(set(many.values())) == 32


def test_the_16384_node_L_cluster_draws_per_rack_in_under_10_seconds(tmp_path):
    """The generator's L preset (16,384 hosts): what runs there drawn (the before picture:
    every running workload, per rack), both formats, each in under 10 s of CPU time."""
    import time

    from models import Plan, SolverReport
    from planner.tools.generate import generate, preset, to_json

    path = tmp_path / "L.json"
    path.write_text(to_json(generate(preset("L"))))
    snapshot = read_snapshot([str(path)])
    assert len(snapshot.nodes) == 16384
    as_it_is = Plan(source=str(path), digest="", object_count=0,
                    solver=SolverReport(method="greedy", status="feasible", objective=0.0, bound=0.0, gap=0.0))
    for name in ("L.png", "L.svg"):
        started = time.process_time()
        assert picture.draw(snapshot, as_it_is, str(tmp_path / name), before=True) == "racks"
        assert time.process_time() - started < 10.0, name
        assert (tmp_path / name).stat().st_size > 2000
