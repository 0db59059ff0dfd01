"""No unneeded eviction (REFERENCE §3, "an eviction is needed by whom it is for").

The case of the issue: one ClusterQueue of 32 GPUs, withinClusterQueue LowerPriority,
four 8-GPU nodes. a-running (priority 100, 1 x 8) runs on n1; h-urgent (priority
1,000, 1 x 8) and b-big (priority 100, 3 x 8) wait. h-urgent fits on a free node, so
Kueue evicts nothing; b-big, of a-running's own priority, may not take its room.
"""

from __future__ import annotations

from builders import GPU, cq, flavor, job, lq, node, running_job, snapshot
from models import Admission, Decisions, Eviction
from builders import assignment
from planner.cycle import plan_snapshot
from planner.greedy import greedy
from planner.verify import verify

QUOTA = {"default": {GPU: 32, "cpu": 1000, "memory": "10Ti"}}


def laundering_world():
    nodes = [node(f"n{i}", gpu=8) for i in range(1, 5)]
    workloads = [
        running_job("t", "a-running", nodes={"n1": 1}, gpu=8, priority=100),
        job("t", "h-urgent", pods=1, gpu=8, priority=1000),
        job("t", "b-big", pods=3, gpu=8, priority=100),
    ]
    return snapshot(nodes=nodes, flavors=[flavor("default")],
                    cqs=[cq("cq", quotas=QUOTA, within="LowerPriority")],
                    lqs=[lq("t", "lq", "cq")], workloads=workloads)


def by_name(snap, name):
    return next(w for w in snap.workloads if w.ref.name == name)


def admit(snap, name, nodes):
    w = by_name(snap, name)
    return Admission(w.ref, "cq", (assignment(w.pod_sets[0], nodes, "default"),))


def laundering_plan(snap, urgent_on=None, big_on=None):
    """h-urgent admitted on `urgent_on`, b-big on `big_on`, and a-running evicted for
    h-urgent; by default the issue's plan: h-urgent on n1 (a-running's node), b-big on n2-n4."""
    a, h = by_name(snap, "a-running"), by_name(snap, "h-urgent")
    urgent_on = urgent_on or {"n1": 1}
    big_on = big_on or {"n2": 1, "n3": 1, "n4": 1}
    return Decisions((admit(snap, "h-urgent", urgent_on), admit(snap, "b-big", big_on)),
                     (Eviction(a.ref, "Preempted", (h.ref,), cost=1.0),))


def test_the_laundering_plan_is_refused():
    snap = laundering_world()
    violations = verify(snap, laundering_plan(snap))
    assert any("a-running" in v and "nobody needed" in v for v in violations), violations
    # The same admissions placed the other way round are refused alike: the rule is about room, not nodes.
    swapped = laundering_plan(snap, urgent_on={"n4": 1}, big_on={"n1": 1, "n2": 1, "n3": 1})
    assert any("nobody needed" in v for v in verify(snap, swapped))


def test_an_eviction_the_preemptor_needs_is_accepted():
    # Every node busy: h-urgent needs a-running's node.
    snap = laundering_world()
    busy = [running_job("t", f"r{i}", nodes={f"n{i}": 1}, gpu=8, priority=500) for i in (2, 3, 4)]
    snap = snapshot(nodes=snap.nodes, flavors=[flavor("default")],
                    cqs=[cq("cq", quotas=QUOTA, within="LowerPriority")], lqs=[lq("t", "lq", "cq")],
                    workloads=[by_name(snap, "a-running"), by_name(snap, "h-urgent")] + busy)
    a, h = by_name(snap, "a-running"), by_name(snap, "h-urgent")
    plan = Decisions((admit(snap, "h-urgent", {"n1": 1}),), (Eviction(a.ref, "Preempted", (h.ref,), cost=1.0),))
    assert verify(snap, plan) == []


def test_the_milp_evicts_nothing_in_the_laundering_case():
    snap = laundering_world()
    plan = plan_snapshot(snap)
    assert not plan.evictions
    assert {a.workload.name for a in plan.admissions} == {"h-urgent"}
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []


def test_kueue_way_evicts_nothing_there_either():
    snap = laundering_world()
    decisions = greedy(snap).decisions
    assert not decisions.evictions and verify(snap, decisions) == []


# ---------------------------------------------------------------- bounds on churn

import dataclasses

import pytest

from builders import ago
from models import Policy
from planner.base.errors import InputError
from planner.snapshot.policy import parse_policy


def full_cluster(policy: Policy, *, ran_hours: float = 1.0):
    """Two 8-GPU nodes, each full with a priority-0 job; two priority-100 jobs of 8 GPUs wait."""
    nodes = [node("n1", gpu=8), node("n2", gpu=8)]
    workloads = [
        running_job("t", "low-1", nodes={"n1": 1}, gpu=8, priority=0, admitted=ago(hours=ran_hours)),
        running_job("t", "low-2", nodes={"n2": 1}, gpu=8, priority=0, admitted=ago(hours=ran_hours)),
        job("t", "high-1", pods=1, gpu=8, priority=100),
        job("t", "high-2", pods=1, gpu=8, priority=100),
    ]
    return snapshot(nodes=nodes, flavors=[flavor("default")], cqs=[cq("cq", quotas=QUOTA, within="LowerPriority")],
                    lqs=[lq("t", "lq", "cq")], workloads=workloads, policy=policy)


def both_evicted(snap):
    low1, low2, h1, h2 = (by_name(snap, n) for n in ("low-1", "low-2", "high-1", "high-2"))
    return Decisions((admit(snap, "high-1", {"n1": 1}), admit(snap, "high-2", {"n2": 1})),
                     (Eviction(low1.ref, "Preempted", (h1.ref,), cost=1.0),
                      Eviction(low2.ref, "Preempted", (h2.ref,), cost=1.0)))


def test_without_bounds_both_low_jobs_make_way():
    snap = full_cluster(Policy())
    assert verify(snap, both_evicted(snap)) == []
    plan = plan_snapshot(snap)
    assert len(plan.evictions) == 2 and len(plan.admissions) == 2


def test_max_evictions_per_cycle_bounds_the_plan_and_the_verifier():
    snap = full_cluster(Policy(max_evictions_per_cycle=1))
    assert any("maxEvictionsPerCycle 1" in v for v in verify(snap, both_evicted(snap)))
    plan = plan_snapshot(snap)
    assert len(plan.evictions) == 1 and len(plan.admissions) == 1
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []


def test_protect_running_after_keeps_long_runners_from_preemption():
    snap = full_cluster(Policy(protect_running_after_seconds=1800), ran_hours=1.0)
    assert any("protectRunningAfterSeconds" in v for v in verify(snap, both_evicted(snap)))
    plan = plan_snapshot(snap)
    assert not plan.evictions and not plan.admissions
    young = full_cluster(Policy(protect_running_after_seconds=7200), ran_hours=1.0)
    assert len(plan_snapshot(young).evictions) == 2


def test_min_gain_per_eviction_needs_more_than_a_swap():
    # Each eviction buys 8 GPUs for 8 GPUs lost: no gain in volume, only in priority.
    snap = full_cluster(Policy(min_gain_per_eviction=1))
    assert any("minGainPerEviction" in v for v in verify(snap, both_evicted(snap)))
    assert not plan_snapshot(snap).evictions
    # Two 8-GPU preemptors may evict one 8-GPU victim for a gain of 8 >= 1... if one node is free.
    spare = dataclasses.replace(snap, nodes=snap.nodes + (node("n3", gpu=8),))
    assert len(plan_snapshot(spare).evictions) == 1


def test_the_bounds_parse_and_bad_values_name_the_field():
    policy = parse_policy({"spec": {"maxEvictionsPerCycle": 5, "minGainPerEviction": 8,
                                    "protectRunningAfterSeconds": 3600}}, "p.yaml")
    assert (policy.max_evictions_per_cycle, policy.min_gain_per_eviction, policy.protect_running_after_seconds) == \
        (5, 8.0, 3600.0)
    assert Policy().max_evictions_per_cycle is None and Policy().min_gain_per_eviction == 0
    for spec, field in (({"maxEvictionsPerCycle": -1}, "spec.maxEvictionsPerCycle"),
                        ({"maxEvictionsPerCycle": 1.5}, "spec.maxEvictionsPerCycle"),
                        ({"minGainPerEviction": -2}, "spec.minGainPerEviction"),
                        ({"protectRunningAfterSeconds": "soon"}, "spec.protectRunningAfterSeconds")):
        with pytest.raises(InputError) as err:
            parse_policy({"spec": spec}, "p.yaml")
        assert field in str(err.value) and "p.yaml" in str(err.value)


# ---------------------------------------------------------------- the fixture variant

from pathlib import Path

from models import FlavorQuotas, Quota, ResourceGroup
from planner.snapshot import read_snapshot

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "multi-team-gpu.yaml"


def with_more(quota_of, more):
    """A resource group with `more` (flavor -> resource -> amount) added to its nominal quotas."""
    return ResourceGroup(quota_of.covered_resources, tuple(
        FlavorQuotas(fq.flavor, {r: Quota(q.nominal + more.get(fq.flavor, {}).get(r, 0), q.borrowing_limit,
                                          q.lending_limit) for r, q in fq.resources.items()})
        for fq in quota_of.flavors))


def test_explains_suggested_change_for_llm_pretrain_moe_evicts_nothing_needlessly():
    # explain's smallest change for team-llm/llm-pretrain-moe: 32 more h100 GPUs and 2 TiB
    # more memory in llm-cq's quota, and 4 nodes like h100-node-01. The plan once evicted
    # llm-pretrain-7b (257 GPU-hours) "for" llm-sft-70b, which had room anyway.
    snap = read_snapshot([str(FIXTURE)])
    more = {"h100": {GPU: 32}, "default-flavor": {"memory": 2 * 1024 ** 4}}
    cq = snap.cluster_queues["llm-cq"]
    grown = dataclasses.replace(cq, resource_groups=tuple(with_more(g, more) for g in cq.resource_groups))
    template = next(n for n in snap.nodes if n.name == "h100-node-01")
    extra = tuple(dataclasses.replace(template, name=f"h100-node-new-{i}",
                                      labels={**template.labels, "kubernetes.io/hostname": f"h100-node-new-{i}"})
                  for i in range(4))
    variant = dataclasses.replace(snap, nodes=snap.nodes + extra,
                                  cluster_queues={**snap.cluster_queues, "llm-cq": grown})
    plan = plan_snapshot(variant)
    assert "llm-pretrain-7b" not in {e.workload.name for e in plan.evictions}
    assert "llm-pretrain-moe" in {a.workload.name for a in plan.admissions}
    assert verify(variant, Decisions(plan.admissions, plan.evictions)) == []
