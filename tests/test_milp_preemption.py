"""Preemption in the MILP: only what Kueue's policies allow, only when it pays, the
cheapest victims, chosen where they free the domain the preemptor needs."""

import dataclasses

from builders import (
    GPU, NOW, ago, cohort, cq, flavor, job, lq, node, required, running_job, snapshot, topology,
)
from models import Decisions, Policy, WorkloadState
from planner.cycle import plan_snapshot
from planner.verify import verify

RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
QUOTA = {"default": {GPU: 1000, "cpu": 10_000, "memory": "100Ti"}}


def queue_snapshot(nodes, workloads, within="LowerPriority", policy=None, **kw):
    return snapshot(nodes=nodes, flavors=[flavor("default")], cqs=[cq("cq", quotas=QUOTA, within=within)],
                    lqs=[lq("team", "lq", "cq")], workloads=workloads, policy=policy, **kw)


def evicted(plan):
    return {e.workload.name for e in plan.evictions}


def admitted(plan):
    return {a.workload.name for a in plan.admissions}


def test_lower_priority_victim_is_evicted_for_a_higher_priority_job():
    snap = queue_snapshot([node("n1", gpu=8)], [
        running_job("team", "low", nodes={"n1": 8}, gpu=1, priority=0),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    plan = plan_snapshot(snap)
    assert admitted(plan) == {"high"} and evicted(plan) == {"low"}
    (eviction,) = plan.evictions
    assert eviction.reason == "Preempted" and [r.name for r in eviction.for_] == ["high"]
    assert eviction.cost > 0
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []


def test_never_means_never():
    snap = queue_snapshot([node("n1", gpu=8)], [
        running_job("team", "low", nodes={"n1": 8}, gpu=1, priority=0),
        job("team", "high", pods=4, gpu=1, priority=100),
    ], within="Never")
    plan = plan_snapshot(snap)
    assert not plan.evictions and not plan.admissions


def test_equal_priority_is_not_evicted_under_lower_priority():
    snap = queue_snapshot([node("n1", gpu=8)], [
        running_job("team", "peer", nodes={"n1": 8}, gpu=1, priority=100),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    assert not plan_snapshot(snap).evictions


def test_the_cheapest_victim_is_chosen():
    # Two identical low-priority jobs; one checkpointed a minute ago loses almost nothing.
    snap = queue_snapshot([node("n1", gpu=4), node("n2", gpu=4)], [
        running_job("team", "fresh-ckpt", nodes={"n1": 4}, gpu=1, admitted=ago(hours=10), checkpointed=ago(minutes=1)),
        running_job("team", "no-ckpt", nodes={"n2": 4}, gpu=1, admitted=ago(hours=10)),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    plan = plan_snapshot(snap)
    assert evicted(plan) == {"fresh-ckpt"}


def test_the_preemption_cost_annotation_overrides_the_model():
    snap = queue_snapshot([node("n1", gpu=4), node("n2", gpu=4)], [
        running_job("team", "a", nodes={"n1": 4}, gpu=1, admitted=ago(hours=1), preemption_cost=500.0),
        running_job("team", "b", nodes={"n2": 4}, gpu=1, admitted=ago(hours=9)),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    assert evicted(plan_snapshot(snap)) == {"b"}


def test_no_eviction_when_it_gains_nothing():
    # LowerOrNewerEqualPriority allows evicting the newer equal-priority job, but
    # the pending one has the same volume: evicting would only throw work away.
    snap = queue_snapshot([node("n1", gpu=4)], [
        running_job("team", "newer", nodes={"n1": 4}, gpu=1, priority=5, created=ago(minutes=10)),
        job("team", "older", pods=4, gpu=1, priority=5, created=ago(hours=2)),
    ], within="LowerOrNewerEqualPriority")
    plan = plan_snapshot(snap)
    assert not plan.evictions and not plan.admissions


def test_newer_equal_priority_is_evicted_when_it_admits_more():
    snap = queue_snapshot([node("n1", gpu=4)], [
        running_job("team", "newer", nodes={"n1": 2}, gpu=1, priority=5, created=ago(minutes=10)),
        job("team", "older", pods=4, gpu=1, priority=5, created=ago(hours=2)),
    ], within="LowerOrNewerEqualPriority")
    plan = plan_snapshot(snap)
    assert evicted(plan) == {"newer"} and admitted(plan) == {"older"}


def test_non_preemptible_and_too_young_work_stays():
    policy = Policy(minimum_runtime_seconds=3600)
    snap = queue_snapshot([node("n1", gpu=4), node("n2", gpu=4)], [
        running_job("team", "pinned", nodes={"n1": 4}, gpu=1, non_preemptible=True, admitted=ago(hours=5)),
        running_job("team", "young", nodes={"n2": 4}, gpu=1, admitted=ago(minutes=5)),
        job("team", "high", pods=4, gpu=1, priority=100),
    ], policy=policy)
    plan = plan_snapshot(snap)
    assert not plan.evictions and not plan.admissions


def test_victims_are_chosen_where_they_free_a_whole_rack():
    # Rack r0 holds one victim (old, but checkpointed 5 minutes ago: cheap to stop);
    # rack r1 holds two recently admitted ones. A required-rack job of 8 GPUs needs a
    # whole rack. Kueue's order (most recently admitted first) empties r1; the plan
    # evicts only r0's victim, the cheaper way to free a rack.
    nodes = [node("r0-n0", gpu=4, labels={RACK: "r0"}), node("r0-n1", gpu=4, labels={RACK: "r0"}),
             node("r1-n0", gpu=4, labels={RACK: "r1"}), node("r1-n1", gpu=4, labels={RACK: "r1"})]
    snap = snapshot(
        nodes=nodes, flavors=[flavor("default", topology="topo")], topologies=[topology("topo", RACK, HOST)],
        cqs=[cq("cq", quotas=QUOTA, within="LowerPriority")], lqs=[lq("team", "lq", "cq")],
        workloads=[
            running_job("team", "r0-small", nodes={"r0-n0": 2}, gpu=1, admitted=ago(hours=5),
                        checkpointed=ago(minutes=5)),
            running_job("team", "r1-a", nodes={"r1-n0": 1}, gpu=1, admitted=ago(minutes=30)),
            running_job("team", "r1-b", nodes={"r1-n1": 1}, gpu=1, admitted=ago(minutes=20)),
            job("team", "train", pods=8, gpu=1, priority=100, topology=required(RACK)),
        ])
    plan = plan_snapshot(snap)
    assert admitted(plan) == {"train"}
    assert evicted(plan) == {"r0-small"}
    assert {n for v, _ in plan.admissions[0].pod_sets[0].domains for n in v} == {"r0-n0", "r0-n1"}


def test_reclaim_from_a_borrowing_queue():
    # team-b borrows team-a's quota; team-a's more important job reclaims it (Reclaimed).
    quotas_a = {"default": {GPU: 8, "cpu": 1000, "memory": "10Ti"}}
    quotas_b = {"default": {GPU: 0, "cpu": 1000, "memory": "10Ti"}}
    snap = snapshot(
        nodes=[node("n1", gpu=8)], flavors=[flavor("default")],
        cqs=[cq("a", cohort="org", quotas=quotas_a, reclaim="Any"), cq("b", cohort="org", quotas=quotas_b)],
        cohorts=[cohort("org")],
        lqs=[lq("ta", "lq", "a"), lq("tb", "lq", "b")],
        workloads=[running_job("tb", "borrower", nodes={"n1": 8}, gpu=1, priority=100, admitted=ago(hours=2)),
                   job("ta", "owner", pods=8, gpu=1, priority=200)])
    plan = plan_snapshot(snap)
    (eviction,) = plan.evictions
    assert eviction.workload.name == "borrower" and eviction.reason == "Reclaimed"
    assert admitted(plan) == {"owner"}


def test_nominal_quota_is_reclaimed_even_at_equal_priority():
    # Nominal quota is a guarantee (REFERENCE §3): the lender's 8-GPU job fits its
    # queue's nominal quota and reclaimWithinCohort is Any, so Kueue evicts the borrower
    # even though the volume served stays the same and work is lost. The plan does too.
    quotas_a = {"default": {GPU: 8, "cpu": 1000, "memory": "10Ti"}}
    quotas_b = {"default": {GPU: 0, "cpu": 1000, "memory": "10Ti"}}
    snap = snapshot(
        nodes=[node("n1", gpu=8)], flavors=[flavor("default")],
        cqs=[cq("a", cohort="org", quotas=quotas_a, reclaim="Any"), cq("b", cohort="org", quotas=quotas_b)],
        cohorts=[cohort("org")], lqs=[lq("ta", "lq", "a"), lq("tb", "lq", "b")],
        workloads=[running_job("tb", "borrower", nodes={"n1": 8}, gpu=1, priority=100, admitted=ago(hours=2)),
                   job("ta", "owner", pods=8, gpu=1, priority=100)])
    plan = plan_snapshot(snap)
    assert [(e.workload.name, e.reason) for e in plan.evictions] == [("borrower", "Reclaimed")]
    assert admitted(plan) == {"owner"}


def apply_plan(snap, plan, hours):
    """The end state a cluster reaches by applying `plan`, `hours` later."""
    by_ref = {w.ref: w for w in snap.workloads}
    gone = {e.workload for e in plan.evictions}
    out = []
    for w in snap.workloads:
        if w.ref in gone:
            w = dataclasses.replace(w, state=WorkloadState.PENDING, assignment=(), admitted_at=None, queued_at=snap.now)
        out.append(w)
    for a in plan.admissions:
        w = by_ref[a.workload]
        out[out.index(w)] = dataclasses.replace(w, state=WorkloadState.RUNNING, assignment=a.pod_sets,
                                                admitted_at=snap.now)
    return dataclasses.replace(snap, workloads=tuple(out), now=snap.now + hours * 3600)


def test_a_steady_mix_settles_without_thrash():
    """Cycles of plan, apply, advance time: evictions per cycle go to zero, and no
    workload is ever evicted to admit one that had evicted it."""
    nodes = [node(f"n{i}", gpu=8) for i in range(4)]
    work = [running_job("team", f"low-{i}", nodes={f"n{i}": 8}, gpu=1, priority=0, admitted=ago(hours=3))
            for i in range(4)]
    work += [job("team", f"mid-{i}", pods=4, gpu=1, priority=50, created=ago(minutes=10 + i)) for i in range(4)]
    work += [job("team", f"high-{i}", pods=8, gpu=1, priority=100, created=ago(minutes=i)) for i in range(2)]
    snap = queue_snapshot(nodes, work, within="LowerOrNewerEqualPriority",
                          policy=Policy(aging_per_hour=10))
    history = []
    evicted_for: dict[str, set[str]] = {}
    for _ in range(6):
        plan = plan_snapshot(snap)
        assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []
        for e in plan.evictions:
            for f in e.for_:
                assert e.workload.name not in evicted_for.get(f.name, set()), "ping-pong eviction"
                evicted_for.setdefault(e.workload.name, set()).add(f.name)
        history.append(len(plan.evictions))
        snap = apply_plan(snap, plan, hours=1)
    assert history[0] > 0
    assert history[-3:] == [0, 0, 0], history
