"""planner.restore: evictions a plan's admissions do not need are taken back, and only
those; the plan stays valid, no tier serves less, and where victims compete for the
same room the objective's order decides who runs again."""

import pytest

from builders import GPU, cq, flavor, job, lq, node, running_job, snapshot
from randomgen import random_snapshot
from models import Admission, Decisions, Eviction, PodSetAssignment
from planner import score
from planner.greedy import greedy
from planner.pipeline import plan_snapshot
from planner.restore import restore
from planner.verify import verify

HOST = "kubernetes.io/hostname"


def one_node(running):
    return snapshot(nodes=[node("n1", gpu=8)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 16, "cpu": 100, "memory": "1Ti"}},
                            within="LowerPriority")],
                    lqs=[lq("team", "lq", "cq")],
                    workloads=running + [job("team", "top", pods=4, gpu=1, priority=100)])


def top_on_n1(snap):
    top = next(w for w in snap.workloads if w.ref.name == "top")
    return Admission(top.ref, "cq", (PodSetAssignment("main", 4, {GPU: "default", "cpu": "default",
                                                                     "memory": "default"},
                                                      (HOST,), ((("n1",), 4),)),))


def evicted_all(snap, costs):
    return tuple(Eviction(w.ref, "Preempted", (next(x.ref for x in snap.workloads if x.ref.name == "top"),),
                          costs[w.ref.name]) for w in snap.workloads if w.ref.name in costs)


def test_the_victim_the_admission_does_not_need_runs_again_the_larger_first():
    """8 GPUs: small (2) and big (4) run at priority 0, top (4, priority 100) is admitted
    with both evicted. Room is left for one of them: the big one runs again (more volume
    comes before a costlier loss in the objective), the small one stays evicted."""
    snap = one_node([running_job("team", "small", nodes={"n1": 2}, gpu=1, priority=0),
                     running_job("team", "big", nodes={"n1": 4}, gpu=1, priority=0)])
    plan = Decisions(admissions=(top_on_n1(snap),), evictions=evicted_all(snap, {"small": 9.0, "big": 1.0}))
    assert verify(snap, plan) == []
    kept = restore(snap, plan)
    assert [e.workload.name for e in kept.evictions] == ["small"]
    assert verify(snap, kept) == []


def test_an_eviction_the_admission_needs_stays():
    snap = one_node([running_job("team", "big", nodes={"n1": 6}, gpu=1, priority=0)])
    plan = Decisions(admissions=(top_on_n1(snap),), evictions=evicted_all(snap, {"big": 1.0}))
    assert restore(snap, plan) == plan


@pytest.mark.parametrize("seed", range(12))
def test_restoring_keeps_plans_valid_and_no_tier_serves_less(seed):
    """Greedy's plans and the MILP's on seeded random clusters: what restore returns is a
    valid plan, evicts a subset of what it was given, and is no worse at any tier."""
    snap = random_snapshot(71_000 + seed, with_running=True, with_topology=seed % 2 == 0)
    plans = [greedy(snap).decisions]
    milp = plan_snapshot(snap, time_limit=5.0)
    plans.append(Decisions(admissions=milp.admissions, evictions=milp.evictions))
    for plan in plans:
        kept = restore(snap, plan)
        assert verify(snap, kept) == []
        assert set(kept.evictions) <= set(plan.evictions) and kept.admissions == plan.admissions
        before, after = score.tier_volumes(snap, plan), score.tier_volumes(snap, kept)
        assert all(after.get(t, 0.0) >= v - 1e-9 for t, v in before.items())


def test_the_cycle_takes_back_a_needless_eviction_and_counts_it_in_its_objective(monkeypatch):
    """Kueue's order evicts the newest first (big); the MILP serves more by evicting small.
    Should the stages' answer evict big too (as a stage cut short can leave it), the cycle
    takes that eviction back, and the plan reports its own objective, not the stages'."""
    from builders import ago
    from planner import run

    snap = one_node([running_job("team", "small", nodes={"n1": 2}, gpu=1, priority=0, admitted=ago(hours=3)),
                     running_job("team", "big", nodes={"n1": 4}, gpu=1, priority=0, admitted=ago(hours=1))])
    assert [e.workload.name for e in greedy(snap).decisions.evictions] == ["big"]
    real = run.solve

    def solve_leaving_a_needless_eviction(form, start, backend, *args, **kwargs):
        outcome = real(form, start, backend, *args, **kwargs)
        index = next(i for i, v in enumerate(form.victims) if v.ref.name == "big")
        assert outcome.values[form.evict_col[index]] == 0
        outcome.values = outcome.values.copy()
        outcome.values[form.evict_col[index]] = 1.0
        outcome.objective -= 4.0         # big's 4 GPUs, as the stages would have counted them
        return outcome

    monkeypatch.setattr(run, "solve", solve_leaving_a_needless_eviction)
    plan = plan_snapshot(snap, time_limit=10.0)
    final = Decisions(admissions=plan.admissions, evictions=plan.evictions)
    assert [e.workload.name for e in plan.evictions] == ["small"] and verify(snap, final) == []
    assert plan.solver.objective == pytest.approx(sum(score.tier_volumes(snap, final).values()))
    assert plan.solver.objective <= plan.solver.bound + 1e-6
