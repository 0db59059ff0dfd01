"""Greedy's classical preemption (Kueue's pkg/scheduler/preemption), hand-computed.

Each case is small enough to follow by hand: nodes of 8 GPUs, 1-GPU pods unless
said otherwise, ClusterQueues with GPU quota (cpu and memory ample). Every plan is
also checked by the independent verifier.
"""

from __future__ import annotations


from builders import (
    GPU, HOSTNAME_LABEL, NOW, ago, cq, flavor, job, node, required, running_job, snapshot, topology,
)
from models import Policy
from planner.greedy import greedy
from planner.verify import verify

RACK = "cloud.provider.com/topology-rack"


def quotas(gpus: int, borrowing: int | None = None) -> dict:
    return {"default": {GPU: (gpus, borrowing), "cpu": 100_000, "memory": "100Ti"}}


def plan(snap):
    decisions = greedy(snap).decisions
    assert verify(snap, decisions) == []
    return decisions


def evicted(decisions) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {e.workload.name: (e.reason, tuple(r.name for r in e.for_)) for e in decisions.evictions}


def admitted(decisions) -> set[str]:
    return {a.workload.name for a in decisions.admissions}


def one_queue(within: str, *workloads, gpus: int = 8, nodes=None, **kw):
    return snapshot(nodes=nodes or [node("n1", gpu=8)], flavors=[flavor("default")],
                    cqs=[cq("cq-a", quotas=quotas(gpus), within=within)], workloads=workloads, **kw)


def run(name: str, gpus: int, priority: int = 0, queue: str = "cq-a", ns: str | None = None,
        nodes: dict[str, int] | None = None, **kw):
    return running_job(ns or {"cq-a": "team-a", "cq-b": "team-b"}[queue], name, cq=queue, gpu=1,
                       nodes=nodes or {"n1": gpus}, priority=priority, **kw)


def want(name: str, gpus: int, priority: int = 10, queue: str = "cq-a", **kw):
    ns = {"cq-a": "team-a", "cq-b": "team-b"}[queue]
    return job(ns, name, cq=queue, pods=gpus, gpu=1, priority=priority, **kw)


# ---------------------------------------------------------------- withinClusterQueue

def test_within_never_does_not_preempt() -> None:
    d = plan(one_queue("Never", run("low", 8, priority=0), want("high", 4)))
    assert not d.evictions and not d.admissions


def test_within_lower_priority() -> None:
    d = plan(one_queue("LowerPriority", run("low", 8, priority=0), want("high", 4, priority=10)))
    assert evicted(d) == {"low": ("Preempted", ("high",))}
    assert admitted(d) == {"high"}
    assert d.evictions[0].cost > 0
    # Equal priority: LowerPriority does not allow it.
    d = plan(one_queue("LowerPriority", run("same", 8, priority=10), want("high", 4, priority=10)))
    assert not d.evictions and not d.admissions


def test_within_lower_or_newer_equal_priority() -> None:
    newer = run("newer", 8, priority=10, created=ago(minutes=10))
    d = plan(one_queue("LowerOrNewerEqualPriority", newer, want("high", 4, created=ago(hours=2))))
    assert evicted(d) == {"newer": ("Preempted", ("high",))}
    older = run("older", 8, priority=10, created=ago(hours=3))
    d = plan(one_queue("LowerOrNewerEqualPriority", older, want("high", 4, created=ago(hours=2))))
    assert not d.evictions


# ---------------------------------------------------------------- cohort

def cohort_snap(*workloads, reclaim: str = "Never", borrow: str = "Never", threshold: int | None = None,
                within: str = "Never", b_reclaim: str = "Never", b_nominal: int = 4, a_nominal: int = 4,
                nodes=None):
    """cq-a (the preemptor's) and cq-b share one 8-GPU node in cohort `org`, 4 GPUs nominal each."""
    return snapshot(
        nodes=nodes or [node("n1", gpu=8)], flavors=[flavor("default")],
        cqs=[cq("cq-a", cohort="org", quotas=quotas(a_nominal), within=within, reclaim=reclaim,
                borrow_within=borrow, borrow_max_priority=threshold),
             cq("cq-b", cohort="org", quotas=quotas(b_nominal), reclaim=b_reclaim)],
        workloads=workloads)


def test_reclaim_lower_priority_takes_back_what_was_lent() -> None:
    # cq-b borrows 4 of cq-a's GPUs (8 > nominal 4): cq-a reclaims them for its own job.
    snap = cohort_snap(run("lender", 8, priority=0, queue="cq-b"), want("mine", 4, priority=10),
                       reclaim="LowerPriority")
    d = plan(snap)
    assert evicted(d) == {"lender": ("Reclaimed", ("mine",))}
    # Same priority: LowerPriority does not reclaim.
    snap = cohort_snap(run("lender", 8, priority=10, queue="cq-b"), want("mine", 4, priority=10),
                       reclaim="LowerPriority")
    assert not plan(snap).evictions


def test_reclaim_only_from_borrowing_queues() -> None:
    # cq-b uses its own 4 (not borrowing); the node is full with an unmanaged neighbour.
    n1 = node("n1", gpu=8, unmanaged={GPU: 4, "pods": 1})
    snap = cohort_snap(run("owner", 4, priority=0, queue="cq-b"), want("mine", 4, priority=10),
                       reclaim="Any", nodes=[n1])
    d = plan(snap)
    assert not d.evictions and not d.admissions


def test_reclaim_any_ignores_priority() -> None:
    snap = cohort_snap(run("lender", 8, priority=100, queue="cq-b"), want("mine", 4, priority=10),
                       reclaim="Any")
    assert evicted(plan(snap)) == {"lender": ("Reclaimed", ("mine",))}
    # Kueue does not ask whether cq-b could reclaim right back: once "lender" is gone
    # cq-a is within its nominal quota, so nothing of it can be reclaimed (no loop).
    snap = cohort_snap(run("lender", 8, priority=100, queue="cq-b"), want("mine", 4, priority=10),
                       reclaim="Any", b_reclaim="Any")
    assert evicted(plan(snap)) == {"lender": ("Reclaimed", ("mine",))}


def test_borrow_within_cohort_lower_priority_and_threshold() -> None:
    # cq-b borrows (8 of nominal 4); "mine" wants 6, more than cq-a's nominal 4, so it
    # must borrow too: Kueue then reclaims only where borrowWithinCohort allows it.
    base = dict(reclaim="LowerPriority", borrow="LowerPriority")
    snap = cohort_snap(run("theirs", 8, priority=5, queue="cq-b"), want("mine", 6, priority=10), **base)
    assert evicted(plan(snap)) == {"theirs": ("Reclaimed", ("mine",))}
    snap = cohort_snap(run("theirs", 8, priority=5, queue="cq-b"), want("mine", 6, priority=10),
                       threshold=4, **base)
    assert not plan(snap).evictions
    snap = cohort_snap(run("theirs", 8, priority=5, queue="cq-b"), want("mine", 6, priority=10),
                       reclaim="LowerPriority")
    assert not plan(snap).evictions


def test_borrow_within_cohort_never_evicts_from_a_queue_within_its_quota() -> None:
    # cq-b within nominal (8 of 8) is not borrowing: nothing of it can be reclaimed.
    snap = cohort_snap(run("theirs", 8, priority=5, queue="cq-b"), want("mine", 4, priority=10),
                       reclaim="LowerPriority", borrow="LowerPriority", b_nominal=8, a_nominal=0)
    assert not plan(snap).evictions


# ---------------------------------------------------------------- order and minimal set

def test_order_other_queues_first_then_lower_priority_then_newest() -> None:
    nodes = [node(f"n{i}", gpu=4) for i in range(1, 5)]
    own = run("own-low", 4, priority=0, nodes={"n1": 4})
    b_mid = run("b-mid", 4, priority=5, queue="cq-b", nodes={"n2": 4}, admitted=ago(hours=3))
    b_old = run("b-old", 4, priority=1, queue="cq-b", nodes={"n3": 4}, admitted=ago(hours=5))
    b_new = run("b-new", 4, priority=1, queue="cq-b", nodes={"n4": 4}, admitted=ago(hours=1))
    snap = cohort_snap(own, b_mid, b_old, b_new, want("mine", 4, priority=10), reclaim="Any",
                       within="LowerPriority", a_nominal=12, b_nominal=4, nodes=nodes)
    # The cohort's 16 GPUs are all used; cq-b borrows (12 > 4), so all of it is fair game before cq-a's own job;
    # lowest priority first (1 < 5), newest first among equals: b-new.
    assert evicted(plan(snap)) == {"b-new": ("Reclaimed", ("mine",))}


def test_minimal_set_adds_back_what_was_not_needed() -> None:
    # Order: small (priority 0) then big (priority 1). Removing small is not enough,
    # removing big too is; adding small back still fits, so only big goes.
    nodes = [node("n1", gpu=8), node("n2", gpu=8)]
    small = run("small", 2, priority=0, nodes={"n1": 2})
    big = run("big", 8, priority=1, nodes={"n2": 8})
    filler = run("filler", 6, priority=50, nodes={"n1": 6})
    # A topology request needs a flavor with a Topology (Kueue: "does not support TopologyAwareScheduling").
    snap = snapshot(nodes=nodes, flavors=[flavor("default", topology="hosts")],
                    topologies=[topology("hosts", HOSTNAME_LABEL)],
                    cqs=[cq("cq-a", quotas=quotas(24), within="LowerPriority")],
                    workloads=[small, big, filler, want("high", 8, topology=required(HOSTNAME_LABEL))])
    d = plan(snap)
    assert evicted(d) == {"big": ("Preempted", ("high",))}


def rack_nodes():
    """r1: n1 n2, r2: n3 n4; 4 GPUs each."""
    return [node(n, gpu=4, labels={RACK: r}) for n, r in (("n1", "r1"), ("n2", "r1"), ("n3", "r2"), ("n4", "r2"))]


def rack_snap(*workloads, gpus: int = 16):
    return snapshot(nodes=rack_nodes(), flavors=[flavor("default", topology="topo")],
                    topologies=[topology("topo", RACK, HOSTNAME_LABEL)],
                    cqs=[cq("cq-a", quotas=quotas(gpus), within="LowerPriority")], workloads=workloads)


def test_victims_scattered_over_racks_are_not_enough() -> None:
    """8 GPUs in one rack. Kueue's order frees n1 (r1) then n3 (r2): 8 GPUs free, but
    4 per rack, so it must go on to n4; then n1's job is added back. Priority and age
    pick the victims, not where they sit."""
    a = run("a", 4, priority=0, nodes={"n1": 4}, admitted=ago(hours=1))
    b = run("b", 4, priority=1, nodes={"n3": 4}, admitted=ago(hours=1))
    c = run("c", 4, priority=1, nodes={"n4": 4}, admitted=ago(hours=2))
    keep = run("keep", 4, priority=20, nodes={"n2": 4})
    d = plan(rack_snap(a, b, c, keep, want("rack-job", 8, topology=required(RACK))))
    assert evicted(d) == {"b": ("Preempted", ("rack-job",)), "c": ("Preempted", ("rack-job",))}
    placed = {n for ps in d.admissions[0].pod_sets for n in ps.pods_per_node()}
    assert placed == {"n3", "n4"}


def test_quota_keeps_a_victim_whose_gpus_stay_idle_in_another_rack() -> None:
    """Quota 12 GPUs, all used; the job needs 8 GPUs of quota and 8 in one rack. Kueue's
    order evicts a (r1) then b (r2): quota is free and r1 (a's node + the empty n2)
    takes the job; b cannot be added back (quota), so its 4 GPUs in r2 stay idle."""
    a = run("a", 4, priority=0, nodes={"n1": 4}, admitted=ago(hours=1))
    b = run("b", 4, priority=0, nodes={"n3": 4}, admitted=ago(hours=2))
    c = run("c", 4, priority=1, nodes={"n4": 4})
    d = plan(rack_snap(a, b, c, want("rack-job", 8, topology=required(RACK)), gpus=12))
    assert set(evicted(d)) == {"a", "b"}
    placed = {n for ps in d.admissions[0].pod_sets for n in ps.pods_per_node()}
    assert placed == {"n1", "n2"}


# ---------------------------------------------------------------- who is never a victim

def test_non_preemptible_and_too_young_work_is_not_evicted() -> None:
    nodes = [node("n1", gpu=4), node("n2", gpu=4), node("n3", gpu=4)]
    pinned = run("pinned", 4, priority=0, nodes={"n1": 4}, non_preemptible=True)
    young = run("young", 4, priority=0, nodes={"n2": 4}, admitted=ago(minutes=5))
    old = run("old", 4, priority=5, nodes={"n3": 4}, admitted=ago(hours=3))
    policy = Policy(minimum_runtime_seconds=1800)
    d = plan(one_queue("LowerPriority", pinned, young, old, want("high", 4), gpus=12, nodes=nodes, policy=policy))
    assert evicted(d) == {"old": ("Preempted", ("high",))}
    d = plan(one_queue("LowerPriority", pinned, young, want("high", 4), gpus=12, nodes=nodes[:2], policy=policy))
    assert not d.evictions and not d.admissions


def test_each_victim_once_and_admitted_work_is_never_a_victim() -> None:
    nodes = [node("n1", gpu=4), node("n2", gpu=4)]
    v1 = run("v1", 4, priority=0, nodes={"n1": 4})
    v2 = run("v2", 4, priority=0, nodes={"n2": 4})
    d = plan(one_queue("LowerPriority", v1, v2, want("p1", 4, priority=10, created=ago(hours=2)),
                       want("p2", 4, priority=10, created=ago(hours=1)),
                       want("p3", 4, priority=20, created=ago(hours=1)), gpus=8, nodes=nodes))
    # p3 first (highest), then p1 (older); p2 may not evict p1 or p3 (admitted in this plan).
    assert admitted(d) == {"p3", "p1"}
    assert sorted(evicted(d)) == ["v1", "v2"]
    assert len(d.evictions) == 2


def test_deterministic() -> None:
    nodes = [node(f"n{i}", gpu=4) for i in range(1, 5)]
    ws = [run(f"r{i}", 4, priority=i % 3, nodes={f"n{i}": 4}, admitted=ago(hours=i)) for i in range(1, 5)]
    snap = one_queue("LowerPriority", *ws, want("p", 8, priority=10), want("q", 4, priority=5), gpus=16, nodes=nodes)
    assert greedy(snap) == greedy(snap)


def test_preemption_at_scale_evicts_and_verifies() -> None:
    """2,000 running 1-GPU jobs on 256 nodes, 2,000 pending at higher priority: greedy
    evicts for each head that does not fit, and the end state verifies. (How long it
    takes is the benchmark's to say, not a test's: BENCHMARKS.md.)"""
    nodes = [node(f"n{i:04d}", gpu=8) for i in range(256)]
    running = [running_job("team-a", f"r{i:05d}", cq="cq-a", gpu=1, nodes={f"n{i % 256:04d}": 1},
                           priority=i % 3, admitted=NOW - 3600 - i) for i in range(2000)]
    pending = [job("team-a", f"p{i:05d}", cq="cq-a", pods=1 + i % 4, gpu=1, priority=10 + i % 2,
                   created=NOW - i) for i in range(2000)]
    snap = snapshot(nodes=nodes, flavors=[flavor("default")],
                    cqs=[cq("cq-a", quotas=quotas(2048), within="LowerPriority")], workloads=running + pending)
    d = greedy(snap).decisions
    assert d.evictions and d.admissions
    assert verify(snap, d) == []


# ---------------------------------------------------------------- seeded random instances

def test_random_running_work_respects_every_quota_level() -> None:
    """Running work in random snapshots is what Kueue could have admitted: replaying it
    one workload at a time through the quota tree's available() never runs short
    (seed 67 once put 6 l4 GPUs in a cohort with quota 5)."""
    from randomgen import random_snapshot
    from planner.kueue.capacity import quota_usage_of
    from planner.kueue.semantics import QuotaTree

    for seed in list(range(120)) + [67]:
        for with_topology in (False, True):
            snap = random_snapshot(seed, with_running=True, with_topology=with_topology)
            tree = QuotaTree(snap)
            usage: dict[str, dict] = {}
            for w in snap.workloads:
                if w.state.value != "running":
                    continue
                key = f"cq:{w.cluster_queue}"
                for fr, amount in quota_usage_of(w).items():
                    assert tree.available(key, fr, tree.tree_usage(usage, fr)) >= amount, (seed, w.ref, fr)
                for fr, amount in quota_usage_of(w).items():
                    usage.setdefault(key, {})[fr] = usage.get(key, {}).get(fr, 0) + amount


def test_random_instances_with_running_work_preempt_and_verify() -> None:
    from randomgen import random_snapshot

    evictions = reasons = 0
    seen: set[str] = set()
    for seed in range(200):
        snap = random_snapshot(30_000 + seed, with_running=True, with_topology=seed % 2 == 0)
        decisions = greedy(snap).decisions
        assert verify(snap, decisions) == [], seed
        assert greedy(snap).decisions == decisions
        evictions += len(decisions.evictions)
        seen.update(e.reason for e in decisions.evictions)
        reasons += bool(decisions.evictions)
    assert evictions > 10 and seen == {"Preempted", "Reclaimed"}, (evictions, seen)


def test_elastic_preemptor_preempts_for_its_minimum_when_the_full_count_cannot_be_had() -> None:
    nodes = [node("n1", gpu=8)]
    pinned = run("pinned", 4, priority=0, nodes={"n1": 4}, non_preemptible=True, admitted=ago(hours=2))
    loose = run("loose", 4, priority=0, nodes={"n1": 4}, admitted=ago(hours=1))
    d = plan(one_queue("LowerPriority", pinned, loose, want("elastic", 8, min_pods=2), nodes=nodes))
    assert evicted(d) == {"loose": ("Preempted", ("elastic",))}
    assert [ps.count for ps in d.admissions[0].pod_sets] == [4]   # the most the freed room allows
