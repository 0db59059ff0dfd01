"""The solver flags travel as one SolveOptions, from the CLI edge to the MILP's way in.

A real `what-if` run (reading, the cycle, the MILP): planner.milp's `plan` is wrapped
only to record what it receives, then called through. A flag (or its
STOWPLAN_<COMMAND>_<FLAG> variable) wins over the policy; a flag left unset is the
policy's; threads and seed have no flag and are the policy's. The Budget the MILP gets
is made from the same time limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import planner.milp
from models import Policy
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions

TINY = str(Path(__file__).resolve().parent.parent / "fixtures" / "tiny.yaml")
POLICY = """apiVersion: stowplan.io/v1alpha1
kind: PlannerPolicy
metadata: {name: default}
spec:
  timeLimitSeconds: 13
  gap: 0.02
  threads: 2
  seed: 5
"""


class Recorder:
    """planner.milp.plan, called through; each call's options and budget limit kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.calls: list[tuple[SolveOptions, float]] = []
        self.plan = planner.milp.plan
        monkeypatch.setattr(planner.milp, "plan", self)

    def __call__(self, snapshot: Any, judge: Any, budget: Any, options: SolveOptions, **rest: Any) -> Any:
        self.calls.append((options, budget.limit))
        return self.plan(snapshot, judge, budget, options, **rest)


@pytest.fixture
def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


def what_if(*args: str, env: dict[str, str] | None = None) -> None:
    result = CliRunner().invoke(cli_module.cli, ["what-if", TINY, "-o", "json", "-q", *args], env=env)
    assert result.exit_code == 0, result.output


def test_flags_arrive_in_the_object_the_milp_entry_receives(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    seen = Recorder(monkeypatch)
    what_if("--policy", policy, "--time-limit", "7.5", "--gap", "0.05")
    assert seen.calls == [(SolveOptions(solver="milp", time_limit=7.5, gap=0.05, threads=2, seed=5), 7.5)]


def test_the_policy_is_used_where_a_flag_is_absent(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    seen = Recorder(monkeypatch)
    what_if("--policy", policy)
    assert seen.calls == [(SolveOptions(solver="milp", time_limit=13.0, gap=0.02, threads=2, seed=5), 13.0)]
    seen.calls.clear()
    what_if("--policy", policy, "--gap", "0.05")           # one flag: the other fields stay the policy's
    assert seen.calls == [(SolveOptions(solver="milp", time_limit=13.0, gap=0.05, threads=2, seed=5), 13.0)]


def test_environment_variables_arrive_as_the_flags_do(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    seen = Recorder(monkeypatch)
    what_if("--policy", policy, env={"STOWPLAN_WHAT_IF_TIME_LIMIT": "9", "STOWPLAN_WHAT_IF_GAP": "0.03"})
    assert seen.calls == [(SolveOptions(solver="milp", time_limit=9.0, gap=0.03, threads=2, seed=5), 9.0)]


def test_without_flags_or_policy_the_policy_defaults_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = Recorder(monkeypatch)
    what_if()
    default = Policy()
    assert seen.calls == [(SolveOptions(solver="milp", time_limit=default.time_limit_seconds, gap=default.mip_gap,
                                        threads=default.threads, seed=default.seed), default.time_limit_seconds)]


def test_merged_takes_each_unset_field_from_the_policy() -> None:
    policy = Policy(time_limit_seconds=13.0, mip_gap=0.02, threads=2, seed=5)
    assert SolveOptions(solver="greedy", gap=0.5).merged(policy) == \
        SolveOptions(solver="greedy", time_limit=13.0, gap=0.5, threads=2, seed=5)
    merged = SolveOptions(time_limit=1.0, gap=0.1, threads=3, seed=7)
    assert merged.merged(policy) == merged
    with pytest.raises(ValueError):
        _ = SolveOptions().seconds           # read before merging: a caller's bug, said
