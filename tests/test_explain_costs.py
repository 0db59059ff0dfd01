"""explain's changes say what they cost others (issue 35): every change that admits the
workload lists what the changed snapshot's plan no longer serves (evicted, with the
eviction's cost, or no longer admitted), changes that displace nothing are preferred,
and an evicted workload's explanation names its preemptor, the rule and the cost;
`explain --all` covers evicted workloads too."""

from __future__ import annotations

from pathlib import Path

import builders as b
from models import ObjectRef, WorkloadState
from planner.cycle import explain_all, explain_one, plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.snapshot import read_snapshot
from test_why import changed

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEARCH_LIMIT = 2.0


def served(plan, snapshot) -> set[ObjectRef]:
    evicted = {e.workload for e in plan.evictions}
    return {a.workload for a in plan.admissions} | {
        w.ref for w in snapshot.workloads if w.state is WorkloadState.RUNNING and w.ref not in evicted}


def test_tiny_changes_list_what_they_displace_and_the_smallest_displaces_nothing() -> None:
    """tiny: "+4 GPU quota" admits pretrain-small only by dropping eval-sweep, which the
    current plan admits; it says so, and a change that displaces nothing is preferred."""
    snapshot = read_snapshot([str(FIXTURES / "tiny.yaml")])
    plan = plan_snapshot(snapshot)
    e = explain_one(snapshot, "ml-research/pretrain-small", search_time_limit=SEARCH_LIMIT)
    before = served(plan, snapshot)
    admitting = [c for c in e.changes if c.amount is not None]
    assert admitting
    for change in admitting:
        after_snapshot = changed(snapshot, change)
        after = served(plan_snapshot(after_snapshot, SolveOptions(time_limit=SEARCH_LIMIT)), after_snapshot)
        lost = before - after - set(change.finishing) - {e.workload}
        assert {d.workload for d in change.displaces} == lost, change
    quota = next(c for c in e.changes if c.kind == "quota")
    assert [(d.workload.name, d.how) for d in quota.displaces] == [("eval-sweep", "not admitted")]
    smallest = e.smallest()
    assert smallest is not None and smallest.displaces == () and smallest.kind == "quota+nodes"
    from planner.describe.explain import as_dict, lines
    text = "\n".join(lines(e))
    assert "no longer admits Job/ml-research/eval-sweep (priority 100, 2 GPUs)" in text
    assert "smallest change found: [quota+nodes]" in text and "displaces nothing" in text.split("smallest")[-1]
    data = as_dict(e)
    assert data["smallestChange"]["displaces"] == [] and data["smallestChange"]["cost"] == 0   # type: ignore[index]


def preemption_snapshot():
    return b.snapshot(
        nodes=[b.node("n1", gpu=8)], flavors=[b.flavor("gpu")],
        cqs=[b.cq("cq", quotas={"gpu": {"nvidia.com/gpu": 8, "cpu": 100, "memory": "1Ti"}},
                  within="LowerPriority")],
        workloads=[b.running_job("t", "low", cq="cq", gpu=8, nodes={"n1": 1}, priority=0,
                                 admitted=b.ago(hours=2)),
                   b.job("t", "high", cq="cq", gpu=8, priority=10)])


def test_an_evicted_workload_names_its_preemptor_rule_and_cost() -> None:
    snapshot = preemption_snapshot()
    plan = plan_snapshot(snapshot)
    [eviction] = plan.evictions
    assert eviction.workload.name == "low"
    e = explain_one(snapshot, "t/low", search_time_limit=SEARCH_LIMIT)
    assert e.state == "evicted" and e.eviction is not None
    assert [r.name for r in e.eviction.preemptors] == ["high"]
    assert e.eviction.reason == "Preempted"
    assert "withinClusterQueue: LowerPriority of ClusterQueue cq" in e.eviction.rule
    assert e.eviction.cost == eviction.cost > 0
    from planner.describe.explain import lines
    assert any(line.startswith("  evicted (Preempted) for Job/t/high: withinClusterQueue: LowerPriority")
               and f"cost {eviction.cost:g}" in line for line in lines(e))


def test_explain_all_covers_evicted_workloads() -> None:
    snapshot = preemption_snapshot()
    plan, explanations = explain_all(snapshot, search_time_limit=SEARCH_LIMIT)
    assert {e.workload for e in explanations} >= {ev.workload for ev in plan.evictions}
    evicted = [e for e in explanations if e.state == "evicted"]
    assert evicted and all(e.eviction is not None for e in evicted)


def test_a_replan_that_ran_out_of_time_serves_nothing() -> None:
    """A changed snapshot's plan that changes nothing because the cycle ran out of time
    decides nothing: read as served, it kept every running workload, so an evicted one
    looked "admitted" by any change (seen on meta-like.json under load)."""
    from models import Plan, SolverReport
    from planner.describe.explain import Replans

    snapshot = preemption_snapshot()
    low = next(w for w in snapshot.workloads if w.ref.name == "low")
    out_of_time = Plan(source="s", digest="", object_count=0, solver=SolverReport(
        method="greedy", status="fallback", objective=0.0, bound=0.0, gap=0.0,
        message="Kueue's way did not finish within the time limit (2 s); nothing changes this cycle"))
    replans = Replans(lambda changed: out_of_time)
    assert replans.admits(("quota", "cq", ()), lambda: snapshot, low.ref) is False
    kept = Plan(source="s", digest="", object_count=0,
                solver=SolverReport(method="greedy", status="feasible", objective=0.0, bound=0.0, gap=0.0))
    assert Replans(lambda changed: kept).admits(("quota", "cq", ()), lambda: snapshot, low.ref) is True
