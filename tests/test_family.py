"""The generated family of shapes (planner/tools/family.py) and `generate --preset family`.

Determinism, that a fixed parameter leaves the other draws alone, that the draws stay
in (and cover) issue 32's ranges, that members read without problems, and the CLI.
Planning the members is tests/test_family_property.py's job.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.snapshot import build_snapshot
from planner.tools import generate as g
from planner.tools.family import DRAWN, DRAWS, SCALES, describe, family, running_share

COVERAGE_SEEDS = range(300)     # draws only (no snapshot): cheap


def depth(spec: g.GeneratorSpec) -> int:
    return 1 + bool(spec.cohort_groups) + bool(spec.cohort_subgroups)


def test_same_seed_same_bytes_other_seed_other_bytes():
    first = g.to_json(g.generate(family(11, "tiny")))
    assert first == g.to_json(g.generate(family(11, "tiny")))
    assert first != g.to_json(g.generate(family(12, "tiny")))
    assert family(11, "S").seed == 11                    # the seed drives the jobs too


def test_a_fixed_parameter_leaves_the_other_draws_alone():
    drawn, fixed = family(7, "S"), family(7, "S", borrowing_limit=0.75, multi_node_share=0.5)
    assert (fixed.borrowing_limit, fixed.multi_node_share) == (0.75, 0.5)
    assert dataclasses.replace(fixed, borrowing_limit=drawn.borrowing_limit,
                               multi_node_share=drawn.multi_node_share) == drawn
    few = family(7, "S", teams=4)                        # what must fit the teams follows them
    assert few.teams == 4 and few.cohort_groups * max(1, few.cohort_subgroups) <= 4
    few.validate()


def test_the_scales_are_the_presets_sizes():
    for name in ("S", "M", "L", "XL"):
        spec, preset = family(1, name), g.preset(name)
        assert (spec.levels, spec.fanout, spec.pending, spec.running) == \
            (preset.levels, preset.fanout, preset.pending, preset.running)
    with pytest.raises(ValueError, match="unknown family scale"):
        family(1, "XXL")


def test_the_draws_stay_in_issue_32s_ranges_and_cover_them():
    specs = [family(seed, "S") for seed in COVERAGE_SEEDS]
    for spec in specs:
        spec.validate()
        assert 1 <= len(spec.gpu_flavor_list()) <= 4
        assert 4 <= spec.teams <= 64
        assert 2 <= len(spec.priorities) <= 5
        assert spec.idle_teams < spec.teams
        assert spec.subset_share == 0 or len(spec.gpu_flavor_list()) > 1
    assert set(Counter(len(s.gpu_flavor_list()) for s in specs)) == {1, 2, 3, 4}
    assert set(Counter(depth(s) for s in specs)) == {1, 2, 3}
    assert set(Counter(len(s.priorities) for s in specs)) == {2, 3, 4, 5}
    teams = [s.teams for s in specs]
    assert min(teams) == 4 and max(teams) >= 56                   # many small queues too
    nasty = {"flavors some queues lack": [s for s in specs if s.subset_share > 0],
             "flavors in each queue's own order": [s for s in specs if s.flavor_order == "shuffled"],
             "deep cohorts with borrowing limits": [s for s in specs if depth(s) == 3 and s.cohort_limit_share],
             "StrictFIFO queues": [s for s in specs if s.strict_fifo_share],
             "drawn preemption policies": [s for s in specs if s.policy_mix > 0.5],
             "queues that never borrow": [s for s in specs if s.borrowing_limit == 0 and s.borrowing_share],
             "queues that lend nothing": [s for s in specs if s.lending_limit == 0 and s.lending_share],
             "quota at the root": [s for s in specs if s.root_quota_share]}
    assert all(nasty.values()), [name for name, found in nasty.items() if not found]


def test_the_family_runs_from_half_empty_to_nearly_full():
    shares = [running_share(g.generate(family(seed, "S"))) for seed in range(30)]
    assert min(shares) < 0.4 and max(shares) > 0.85


@pytest.mark.parametrize("seed", range(8))
def test_members_read_without_problems(seed):
    spec = family(seed, "tiny")
    document = g.generate(spec)
    snapshot = build_snapshot([document], source=f"family-{seed}")
    assert snapshot.problems == (), [str(p) for p in snapshot.problems[:5]]
    assert all(cq.active for cq in snapshot.cluster_queues.values())
    assert sorted(snapshot.flavors) == sorted(name for name, _, _ in spec.gpu_flavor_list())
    assert len(snapshot.cluster_queues) == spec.teams
    assert {w.priority for w in snapshot.workloads} <= {value for _, value, _ in spec.priorities}
    assert describe(spec).startswith(f"{len(spec.gpu_flavor_list())} flavor")


def test_generate_preset_family_writes_the_member(tmp_path):
    out = tmp_path / "f.json"
    args = ["generate", "--preset", "family", "--seed", "7", "--set", "scale=tiny", "--set", "teams=5",
            "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert out.read_text() == g.to_json(g.generate(family(7, "tiny", teams=5)))
    for bad in (["--set", "scale=huge"], ["--set", "bogus=1"], ["--set", "teams=2", "--set", "cohort_groups=2",
                                                                "--set", "cohort_subgroups=2"]):
        result = CliRunner().invoke(cli, ["generate", "--preset", "family", *bad, "--out", str(out)])
        assert result.exit_code == 2, (bad, result.output)


def test_generate_help_documents_the_family():
    result = CliRunner().invoke(cli, ["generate", "--help"])
    assert result.exit_code == 0
    assert "--preset family --seed N" in result.output
    for draw in DRAWS:
        assert f"  {draw.field}: " in result.output, draw.field
    for name in SCALES:
        assert f"  {name} " in result.output
    assert set(DRAWN) <= {f.name for f in dataclasses.fields(g.GeneratorSpec)}
