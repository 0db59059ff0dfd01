"""The greedy pass after the MILP: admits what still fits, evicts nothing more."""

from builders import GPU, cq, flavor, job, lq, node, running_job, snapshot
from models import Decisions, Eviction
from planner.fill import fill
from planner.greedy import greedy
from planner.verify import verify

QUOTA = {"default": {GPU: 100, "cpu": 100, "memory": "1Ti"}}


def world(*workloads):
    return snapshot(nodes=[node("n1", gpu=8)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas=QUOTA, within="LowerPriority")], lqs=[lq("team", "lq", "cq")],
                    workloads=workloads)


def test_fill_admits_what_still_fits_on_top_of_a_plan():
    snap = world(job("team", "a", pods=4, gpu=1), job("team", "b", pods=4, gpu=1), job("team", "c", pods=4, gpu=1))
    only_a = Decisions(tuple(a for a in greedy(snap).decisions.admissions if a.workload.name == "a"), ())
    filled = fill(snap, only_a)
    names = {a.workload.name for a in filled.admissions}
    assert "a" in names and len(names) == 2      # 8 GPUs: one more 4-GPU job fits, not two
    assert verify(snap, filled) == []


def test_fill_never_evicts_and_never_readmits_what_the_plan_evicted():
    snap = world(running_job("team", "low", nodes={"n1": 8}, gpu=1, priority=0),
                 job("team", "high", pods=8, gpu=1, priority=100))
    evicting = Decisions((), (Eviction(snap.workloads[0].ref, "Preempted", (), 1.0),))
    filled = fill(snap, evicting)
    assert filled.evictions == evicting.evictions
    assert {a.workload.name for a in filled.admissions} == {"high"}
    # Without the eviction nothing fits, and fill does not preempt on its own.
    assert fill(snap, Decisions()).admissions == ()
