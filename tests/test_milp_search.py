"""The MILP's cut loop (planner.milp.search): the tiers solved with the stability rows
off, the rows put back only for what the verifier's rule flags.

Hand-computed case: two ClusterQueues in cohort `c`, team-a with 8 GPUs of nominal
quota, team-b with none (it can only borrow); one 8-GPU node. team-b (priority 100) and
team-a (priority 0) each wait with an 8-GPU job. With the rows off, the best plan admits
team-b's job by borrowing team-a's quota (priority first); team-a's job then fits its
queue's nominal quota while a reclaimable borrower runs, which Kueue would undo. The
loop puts team-a's rows back and the next pass admits team-a's job instead: priority
100 serves 0, and its bound, from that pass, is 0 too.
"""

from builders import GPU, cohort, cq, flavor, job, lq, node, snapshot
from models import Decisions
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.verify import verify
from planner.verify import stability_violations

QUOTA = {"default": {GPU: 8, "cpu": 64, "memory": "512Gi"}}
NONE = {"default": {GPU: 0, "cpu": 0, "memory": 0}}


def contested(with_borrower: bool = True):
    workloads = [job("a", "mine", pods=1, gpu=8, priority=0)]
    if with_borrower:
        workloads.append(job("b", "borrower", pods=1, gpu=8, priority=100))
    return snapshot(
        nodes=[node("n1", gpu=8)],
        flavors=[flavor("default")],
        cqs=[cq("team-a", cohort="c", quotas=QUOTA, reclaim="Any"), cq("team-b", cohort="c", quotas=NONE, reclaim="Any")],
        cohorts=[cohort("c")],
        lqs=[lq("a", "lq", "team-a"), lq("b", "lq", "team-b")],
        workloads=workloads,
    )


def test_the_rows_are_put_back_for_what_the_relaxed_plan_leaves_unstable():
    snap = contested()
    plan = plan_snapshot(snap, SolveOptions(time_limit=30))
    decisions = Decisions(plan.admissions, plan.evictions)
    assert verify(snap, decisions) == [] and stability_violations(snap, decisions) == []
    assert [a.workload.name for a in plan.admissions] == ["mine"]
    assert "stability rows put back for 1 workload(s)" in plan.solver.message
    stages = {s["stage"]: s for s in plan.solver.stages}
    assert stages["priority 100 (pass 1)"]["objective"] == 8      # the relaxation admits the borrower
    assert stages["priority 100"]["objective"] == 0 and stages["priority 100"]["bound"] == 0
    assert stages["priority 0"]["objective"] == 8
    assert plan.solver.status == "optimal"


def test_a_plan_the_relaxation_keeps_takes_one_pass():
    plan = plan_snapshot(contested(with_borrower=False), SolveOptions(time_limit=30))
    assert [a.workload.name for a in plan.admissions] == ["mine"]
    assert "stability rows put back" not in plan.solver.message
    assert not any("pass 2" in s["stage"] for s in plan.solver.stages)
