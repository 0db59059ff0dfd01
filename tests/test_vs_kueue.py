"""Kueue's way in every plan (issue 27, item 3): the `vs_kueue` block of the summary
carries greedy's summary beside the plan's and the difference, the same numbers a
separate `--solver greedy` run reports."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner import cli as cli_module
from planner.describe import vs_kueue
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def what_if(*args: str) -> dict:
    result = CliRunner().invoke(cli_module.cli, ["what-if", *args, "-o", "json", "--quiet"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("fixture", ["hierarchical-cohorts.yaml", "multi-team-gpu.yaml"])
def test_block_equals_a_separate_greedy_runs_summary(fixture):
    milp = what_if(str(FIXTURES / fixture))
    greedy = what_if(str(FIXTURES / fixture), "--solver", "greedy")
    block = milp["summary"]["vs_kueue"]
    base = block["baseline"]
    for key in ("served_gpus", "served_cores", "admitted", "evicted", "pending", "preemption_cost"):
        assert base[key] == greedy["summary"][key], key
    summary = milp["summary"]
    for priority, served in summary["served_gpus"].items():
        assert block["difference"]["served_gpus"][priority] == served - greedy["summary"]["served_gpus"][priority]
    for key in ("admitted", "evicted", "pending", "preemption_cost"):
        assert block["difference"][key] == summary[key] - greedy["summary"][key]


def test_where_they_differ_it_says_so_per_priority():
    """hierarchical-cohorts: priority first gives 6 GPUs more at priority 100 (from the
    priority-0 elastic job) than Kueue's cycle does."""
    block = what_if(str(FIXTURES / "hierarchical-cohorts.yaml"))["summary"]["vs_kueue"]
    assert block["difference"]["served_gpus"] == {"0": -6, "100": 6, "1000": 0}
    assert block["says"] == "+6 GPUs at priority 100, -6 GPUs at priority 0"


def test_greedy_plan_is_its_own_baseline():
    block = what_if(str(FIXTURES / "tiny.yaml"), "--solver", "greedy")["summary"]["vs_kueue"]
    assert set(block["difference"]["served_gpus"].values()) == {0}
    assert block["says"] == "same as Kueue's way"


def test_table_shows_the_block():
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(FIXTURES / "hierarchical-cohorts.yaml"),
                                                 "-o", "table", "--quiet"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Kueue's way (greedy) beside this plan: +6 GPUs at priority 100, -6 GPUs at priority 0" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("GPUs at priority 100 "))
    assert row.split()[-3:] == ["28", "22", "+6"]
    assert "vs_kueue" not in text


def test_says_counts_and_cores():
    plan = {"served_gpus": {1: 10, 0: 0}, "served_cores": {1: 0, 0: 2}, "admitted": 5, "evicted": 0,
            "pending": 1, "preemption_cost": 0}
    base = {"served_gpus": {1: 2, 0: 0}, "served_cores": {1: 0, 0: 0}, "admitted": 3, "evicted": 3,
            "pending": 3, "preemption_cost": 7.5}
    block = vs_kueue.compare(plan, base)
    assert block["says"] == ("+8 GPUs at priority 1, +2 cores at priority 0, 2 more admitted, "
                             "3 fewer evictions, preemption cost -7.5")
    assert vs_kueue.gain_gpus(block) == {1: 8.0, 0: 0.0}     # GPUs only: the 2 cores are not GPUs
    assert block["difference"]["served_cores"] == {0: 2, 1: 0}
    one = vs_kueue.compare({**plan, "evicted": 4}, base)
    assert "1 more eviction" in one["says"]


def test_equal_within_tolerance_is_the_same_as_kueues_way():
    """Issue 39: identical plans read `preemption cost -2e-06` (one sum added in another order)."""
    plan = {"served_gpus": {100: 8}, "served_cores": {100: 0}, "admitted": 3, "evicted": 2, "pending": 1,
            "preemption_cost": 797.830554}
    base = {**plan, "preemption_cost": 797.830556}
    block = vs_kueue.compare(plan, base)
    assert block["says"] == "same as Kueue's way"
    assert block["difference"]["preemption_cost"] == 0
    assert vs_kueue.compare({**plan, "preemption_cost": 798.0}, base)["says"] == "preemption cost +0.169444"


def test_served_gpus_are_gpus_and_cores_are_apart_in_plan_and_table():
    """Issue 35: multi-team-gpu reported 0=112, 100=224, 1000=100 "served GPUs" on a
    144-GPU cluster (cores of CPU-only work added in); its GPUs are 12/72/36."""
    plan = what_if(str(FIXTURES / "multi-team-gpu.yaml"))
    assert plan["summary"]["served_gpus"] == {"0": 12, "100": 72, "1000": 36}
    assert plan["summary"]["served_cores"] == {"0": 100, "100": 152, "1000": 64}
    assert plan["summary"]["vs_kueue"]["baseline"]["served_gpus"] == {"0": 12, "100": 72, "1000": 36}
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(FIXTURES / "multi-team-gpu.yaml"),
                                                 "-o", "table", "--quiet"])
    assert result.exit_code == 0, result.output
    rows = {" ".join(line.split()[:4]): line.split()[4:] for line in result.stdout.splitlines()
            if line.strip().startswith(("GPUs at priority", "cores at priority"))}
    assert rows["GPUs at priority 100"] == ["72", "72", "0"]
    assert rows["cores at priority 100"] == ["152", "152", "0"]
