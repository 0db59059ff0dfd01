"""Pictures that answer (issue 35 item 7): host names reachable (an SVG <title> per
cell), migrations drawn (from -> to), legend entries only for what the picture shows,
team colours distinct past 10 teams and apart from the priority shading and the red
eviction mark, and the README's picture current: its title (kept in the PNG) gives the
numbers of the golden plan."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import yaml
from click.testing import CliRunner

import builders as b
from models import Plan, SolverReport
from models.plan import Migration
from planner import cli as cli_module
from planner.output import picture
from planner.cycle import plan_snapshot
from planner.snapshot import read_snapshot

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


def test_every_host_has_a_title_in_svg(tmp_path: Path) -> None:
    snapshot = read_snapshot([str(FIXTURES / "hierarchical-cohorts.yaml")])
    plan = plan_snapshot(snapshot)
    out = tmp_path / "plan.svg"
    picture.draw(snapshot, plan, str(out))
    titles = re.findall(r"<title>([^<]*)</title>", out.read_text())
    for node in snapshot.nodes:
        assert any(t.startswith(f"{node.name}: ") and " GPUs used" in t for t in titles), node.name
    assert any("admitted by this plan" in t for t in titles)


def migration_setup():
    snapshot = b.snapshot(nodes=[b.node("n1", gpu=8), b.node("n2", gpu=8)], flavors=[b.flavor("gpu")],
                          cqs=[b.cq("cq", quotas={"gpu": {"nvidia.com/gpu": 16, "cpu": 100, "memory": "1Ti"}})],
                          workloads=[b.running_job("t", "moved", cq="cq", gpu=4, nodes={"n1": 1})])
    [moved] = snapshot.workloads
    to = (b.assignment(moved.pod_sets[0], {"n2": 1}),)
    migration = Migration(moved.ref, "cq", moved.assignment, to)
    plan = Plan(source="m.yaml", digest="", object_count=0, migrations=(migration,),
                solver=SolverReport(method="milp", status="optimal", objective=0.0, bound=0.0, gap=0.0))
    return snapshot, plan


def test_migrations_are_drawn_and_in_the_legend(tmp_path: Path) -> None:
    snapshot, plan = migration_setup()
    out = tmp_path / "plan.svg"
    picture.draw(snapshot, plan, str(out))
    text = out.read_text()
    assert ">migration (from -&gt; to)<" in text
    titles = re.findall(r"<title>([^<]*)</title>", text)
    assert any(t.startswith("n2: 4 of 8 GPUs used") for t in titles)     # drawn where it goes
    assert any(t.startswith("n1: 0 of 8 GPUs used") for t in titles)


def test_legend_lists_only_what_is_shown(tmp_path: Path) -> None:
    snapshot = read_snapshot([str(FIXTURES / "tiny.yaml")])
    plan = plan_snapshot(snapshot)
    assert not plan.evictions and not plan.migrations
    out = tmp_path / "plan.svg"
    picture.draw(snapshot, plan, str(out))
    text = out.read_text()
    for absent in (">eviction<", ">migration", ">whole block free<", ">not Stowplan's<"):
        assert absent not in text, absent
    assert ">admitted by this plan<" in text


def distance(a, b) -> float:
    return sum((x - y) ** 2 for x, y in zip(a[:3], b[:3])) ** 0.5


def test_team_colours_stay_distinct_and_apart_from_shading_and_the_eviction_mark() -> None:
    red = tuple(int(picture.EVICTION[i:i + 2], 16) / 255 for i in (1, 3, 5))
    for n in (11, 12, 13, 20, 32, 48):
        keys = [(f"team-{i:02d}", p) for i in range(n) for p in (0, 100)]
        team_colour, shade, mix = picture.colours(keys)
        full = list(team_colour.values())
        assert min(distance(a, c) for a, c in itertools.combinations(full, 2)) > 0.06, n
        assert all(distance(c, red) > 0.25 for c in full), n
        assert all(max(c[:3]) - min(c[:3]) >= 0.3 for c in full), n      # saturated: never a grey or a pale one
        pale = {t: mix[(t, 0)] for t in team_colour}                       # the lowest priority's shading
        for t, c in team_colour.items():
            assert all(distance(c, pale[u]) > 0.1 for u in team_colour), (n, t)
    many, _, _ = picture.colours([(f"team-{i:02d}", 0) for i in range(60)])
    assert len(set(many.values())) == 60


def test_picture_help_describes_what_is_drawn() -> None:
    text = CliRunner().invoke(cli_module.cli, ["what-if", "--help"]).stdout
    block = " ".join(text[text.index("--picture FILE"):text.index("--picture-before")].split())
    for said in ("team", "priority", "hatched", "evictions", "migrations", "free racks", "title"):
        assert said in block, said


def test_the_readme_picture_is_current() -> None:
    """docs/meta-like.png (`make picture`) keeps its title in the PNG: the counts in it are
    the golden plan's."""
    title = picture.png_title(str(REPO / "docs" / "meta-like.png"))
    assert title is not None, "docs/meta-like.png has no title: regenerate it with `make picture`"
    golden = yaml.safe_load((FIXTURES / "meta-like.plan.yaml").read_text())
    hosts = len(read_snapshot([str(FIXTURES / "meta-like.json")]).nodes)
    assert title.startswith(f"meta-like.json: {hosts} hosts, one cell per host; "
                            f"{len(golden['admissions'])} admitted, {len(golden['evictions'])} evicted"), title
    assert golden["summary"]["vs_kueue"]["says"] in title
