"""The MILP's stages are one ordered list (planner.milp.stages.STAGES): a new stage is
one class and one line in that list, and nothing else of planner/milp changes. Each
test here defines a stage of its own and puts it in the list (monkeypatch, so the list
is the only thing touched); the cycle then runs it in its place, reports it among the
plan's stages, and holds what it reached for the stages after it.

Hand-computed case: two 4-GPU nodes, each full with a running priority-0 job started
at the same time (`x` on n1, `y` on n2), and a priority-100 job of 4 GPUs waiting in
the same ClusterQueue (LowerPriority preemption). Either victim frees the room, at the
same preemption cost: the stages up to the preemption cost cannot tell the two plans
apart, so a stage put after them decides which victim goes.
"""

from __future__ import annotations

import pytest

from builders import GPU, ago, cq, flavor, job, lq, node, running_job, snapshot
from models import Decisions
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.milp import stages
from planner.milp.rows import Formulation
from planner.milp.stages import Objective, Phase, Stage
from planner.verify import verify

QUOTA = {"default": {GPU: 1000, "cpu": 10_000, "memory": "100Ti"}}


def two_victims():
    started = ago(hours=1)
    return snapshot(
        nodes=[node("n1", gpu=4), node("n2", gpu=4)],
        flavors=[flavor("default")],
        cqs=[cq("cq", quotas=QUOTA, within="LowerPriority")],
        lqs=[lq("team", "lq", "cq")],
        workloads=[running_job("team", "x", nodes={"n1": 4}, gpu=1, priority=0, admitted=started),
                   running_job("team", "y", nodes={"n2": 4}, gpu=1, priority=0, admitted=started),
                   job("team", "high", pods=4, gpu=1, priority=100)],
    )


class Spare(Stage):
    """A tail stage of the test's own: evict `victim` as little as possible."""

    name = "spare"
    phase = Phase.TAIL

    def __init__(self, victim: str):
        self.victim = victim

    def objectives(self, form: Formulation) -> list[Objective]:
        terms = [(col, 1.0) for w, col in zip(form.victims, form.evict_col) if w.ref.name == self.victim]
        return [Objective(f"spare {self.victim}", terms, False, 0.0)] if terms else []


class TotalVolume(Stage):
    """A pass stage of the test's own: the volume over every tier, once each tier is held."""

    name = "total volume"
    phase = Phase.PASS
    solved_after: list[list[str]] = []     # the stages each pass had done when this one ran

    def objectives(self, form: Formulation) -> list[Objective]:
        terms = [term for tier in form.tiers for term in form.tier_volume[tier]]
        return [Objective(self.name, terms, True, sum(form.tier_max.values()))] if terms else []

    def solve(self, objective, step):
        TotalVolume.solved_after.append([s.name for s in step.done])
        return super().solve(objective, step)


def with_stage(monkeypatch, stage: Stage, before: str) -> None:
    """`stage` put in STAGES before the stage named `before`: the one line a new stage adds."""
    order = list(stages.STAGES)
    at = next(i for i, s in enumerate(order) if s.name == before)
    monkeypatch.setattr(stages, "STAGES", order[:at] + [stage] + order[at:])


def names(plan) -> list[str]:
    return [s["stage"] for s in plan.solver.stages]


def evicted(plan) -> set[str]:
    return {e.workload.name for e in plan.evictions}


@pytest.mark.parametrize("victim, other", [("x", "y"), ("y", "x")])
def test_a_new_tail_stage_runs_in_its_place_and_decides_what_the_stages_before_it_leave_open(
        monkeypatch, victim, other):
    snap = two_victims()
    with_stage(monkeypatch, Spare(victim), before="tie-breakers")
    plan = plan_snapshot(snap, SolveOptions(time_limit=30))
    assert evicted(plan) == {other} and {a.workload.name for a in plan.admissions} == {"high"}
    assert names(plan)[-3:] == ["preemption cost", f"spare {victim}", "tie-breakers"]
    spare = plan.solver.stages[-2]
    assert spare["objective"] == 0 and spare["status"] in ("optimal", "kept")
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []


def test_without_the_new_stage_the_list_is_as_it_was(monkeypatch):
    """The same snapshot with STAGES untouched: no stage of the test's, and the tail
    stages in the list's order."""
    plan = plan_snapshot(two_victims(), SolveOptions(time_limit=30))
    assert not any(n.startswith("spare") or n.startswith("total volume") for n in names(plan))
    assert names(plan)[-2:] == ["preemption cost", "tie-breakers"]
    assert len(evicted(plan)) == 1


def test_a_new_pass_stage_runs_in_every_pass_after_the_tiers_and_stands_in_the_plan(monkeypatch):
    monkeypatch.setattr(TotalVolume, "solved_after", [])
    with_stage(monkeypatch, TotalVolume(), before="preemption cost")
    plan = plan_snapshot(two_victims(), SolveOptions(time_limit=30))
    assert evicted(plan) and {a.workload.name for a in plan.admissions} == {"high"}
    # In each pass, after that pass's priority tiers (pass stages come before the tails).
    assert TotalVolume.solved_after and all(done and all(n.startswith("priority") for n in done)
                                            for done in TotalVolume.solved_after)
    reported = names(plan)
    assert "total volume (pass 1)" in reported
    # Where the chosen plan stands: after the tiers, before the preemption cost.
    standing = reported.index("total volume")
    assert reported[standing - 1].startswith("priority") and reported[standing + 1] == "preemption cost"
    tiers = [s for s in plan.solver.stages if s["stage"].startswith("priority") and "(pass" not in s["stage"]]
    assert plan.solver.stages[standing]["objective"] == pytest.approx(sum(s["objective"] for s in tiers))
