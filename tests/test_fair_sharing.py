"""Fair sharing in the MILP (issue 25): the borrowable pool of a cohort shared by weighted
max-min of the dominant resource share, hierarchically, in one cycle; preemption for
fairness under Kueue's strategies. Every expectation is computed by hand in its test."""

from __future__ import annotations

import dataclasses

import pytest

from models import Decisions, FairSharingConfig, KueueConfig, Snapshot, WorkloadState
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.verify import verify
from planner.kueue.shares import Share, shares, targets, water_fill
from planner.kueue.semantics import QuotaTree
from tests.builders import GPU, cohort, cq, flavor, job, lq, node, running_job, snapshot

FAIR = KueueConfig(fair_sharing=FairSharingConfig(True))


def fair(snap: Snapshot, strategies: tuple[str, ...] | None = None) -> Snapshot:
    config = FAIR if strategies is None else KueueConfig(fair_sharing=FairSharingConfig(True, strategies))
    return dataclasses.replace(snap, kueue_config=config)


def weighted(queue, weight):
    return dataclasses.replace(queue, fair_weight=weight)


def gpus_by_queue(snap: Snapshot, plan) -> dict[str, int]:
    """GPUs each ClusterQueue runs after the plan."""
    evicted = {e.workload for e in plan.evictions}
    admitted = {a.workload for a in plan.admissions}
    out: dict[str, int] = {}
    for w in snap.workloads:
        runs = (w.state is WorkloadState.RUNNING and w.ref not in evicted) or w.ref in admitted
        if runs:
            out[w.cluster_queue] = out.get(w.cluster_queue, 0) + sum(ps.count * ps.request.get(GPU) for ps in w.pod_sets)
    return out


def pool(weights: dict[str, float], jobs: dict[str, int], *, gpus_per_job: int = 1, nodes: int = 4,
         priorities: dict[str, int] | None = None, extra=()) -> Snapshot:
    """A cohort `org` holding 8 x `nodes` GPUs of its own; queues of nominal 0 that borrow all they use."""
    queues = [weighted(cq(name, cohort="org", quotas={"default": {GPU: 0, "cpu": 0}}), w) for name, w in weights.items()]
    workloads = [job(name, f"{name}-{i:02d}", cq=name, gpu=gpus_per_job, cpu=1, memory=0,
                     priority=(priorities or {}).get(name, 0), created=f"2026-12-01T10:{i:02d}:00Z")
                 for name, count in jobs.items() for i in range(count)]
    return snapshot(nodes=[node(f"n{i}", gpu=8, cpu=64) for i in range(nodes)], flavors=[flavor("default")],
                    cqs=queues, cohorts=[cohort("org", quotas={"default": {GPU: 8 * nodes, "cpu": 64 * nodes}})],
                    lqs=[lq(name, "lq", name) for name in weights], workloads=list(workloads) + list(extra))


# ---------------------------------------------------------------- the arithmetic

def test_water_fill_by_weight_and_weight_zero_last():
    assert water_fill(32, {"a": 100, "b": 100}, {"a": 1, "b": 3}) == {"a": 8, "b": 24}
    # a wants only 4: b takes the rest
    assert water_fill(32, {"a": 4, "b": 100}, {"a": 1, "b": 3}) == {"a": 4, "b": 28}
    # weight 0 gets only what nobody else wants
    assert water_fill(32, {"a": 100, "b": 100, "z": 50}, {"a": 1, "b": 3, "z": 0}) == {"a": 8, "b": 24, "z": 0}
    assert water_fill(32, {"a": 4, "b": 8, "z": 50}, {"a": 1, "b": 3, "z": 0}) == {"a": 4, "b": 8, "z": 20}


def test_kueue_drs_weighted_by_the_parents_lendable():
    # 32 GPUs lendable in org; a borrows 8 with weight 1: 8 x 1000 / 32 = 250; b 24 / 3 -> 250
    snap = pool({"a": 1, "b": 3}, {})
    tree = QuotaTree(snap)
    got = shares(snap, tree, {"cq:a": {("default", GPU): 8}, "cq:b": {("default", GPU): 24}})
    assert got["cq:a"] == Share(1, 250.0, GPU) and got["cq:b"] == Share(3, 750.0, GPU)
    assert got["cq:a"].weighted == got["cq:b"].weighted == 250.0
    zero = shares(dataclasses.replace(snap, cluster_queues={**snap.cluster_queues,
                                                            "a": weighted(snap.cluster_queues["a"], 0)}),
                  tree, {"cq:a": {("default", GPU): 1}})
    assert zero["cq:a"].weighted == float("inf")


# ---------------------------------------------------------------- one cycle reaches the split

def test_weighted_split_one_to_three_is_8_and_24_of_32():
    snap = fair(pool({"a": 1, "b": 3}, {"a": 32, "b": 32}))
    plan = plan_snapshot(snap, SolveOptions(time_limit=60))
    assert plan.solver.method == "milp" and plan.solver.status in ("optimal", "feasible")
    assert gpus_by_queue(snap, plan) == {"a": 8, "b": 24}


def test_without_fair_sharing_priority_decides_as_today():
    snap = pool({"a": 1, "b": 3}, {"a": 32, "b": 32}, priorities={"a": 100})
    assert gpus_by_queue(snap, plan_snapshot(snap, SolveOptions(time_limit=60))) == {"a": 32}
    # with fair sharing the weights decide across queues, whatever the priorities
    assert gpus_by_queue(fair(snap), plan_snapshot(fair(snap), SolveOptions(time_limit=60))) == {"a": 8, "b": 24}


def test_hierarchical_weights_level_by_level():
    # org holds 32 GPUs: cohort research (weight 3) and queue prod (weight 1) split them
    # 24 : 8; inside research, r1 (weight 1) and r2 (weight 3) split its 24 as 6 : 18.
    snap = pool({"prod": 1}, {"prod": 32, "r1": 32, "r2": 32}, gpus_per_job=1)
    research = [weighted(cq(n, cohort="research", quotas={"default": {GPU: 0, "cpu": 0}}), w)
                for n, w in (("r1", 1), ("r2", 3))]
    snap = dataclasses.replace(
        snap, cluster_queues={**snap.cluster_queues, **{q.name: q for q in research}},
        cohorts={**snap.cohorts, "research": dataclasses.replace(cohort("research", parent="org"), fair_weight=3)},
        local_queues={**snap.local_queues, **{(n, "lq"): lq(n, "lq", n) for n in ("r1", "r2")}})
    snap = fair(snap)
    tree = QuotaTree(snap)
    want = {f"cq:{n}": {("default", GPU): 32.0} for n in ("prod", "r1", "r2")}
    goal = targets(snap, tree, want)
    assert {n: goal[f"cq:{n}"][("default", GPU)] for n in ("prod", "r1", "r2")} == {"prod": 8, "r1": 6, "r2": 18}
    assert gpus_by_queue(snap, plan_snapshot(snap, SolveOptions(time_limit=60))) == {"prod": 8, "r1": 6, "r2": 18}


def test_weight_zero_gets_only_what_nobody_else_wants():
    snap = fair(pool({"a": 1, "z": 0}, {"a": 32, "z": 32}))
    assert gpus_by_queue(snap, plan_snapshot(snap, SolveOptions(time_limit=60))) == {"a": 32}
    snap = fair(pool({"a": 1, "z": 0}, {"a": 20, "z": 32}))
    assert gpus_by_queue(snap, plan_snapshot(snap, SolveOptions(time_limit=60))) == {"a": 20, "z": 12}


def contested(strategies: tuple[str, ...]) -> Snapshot:
    """b (weight 1) borrows the whole pool (4 running 8-GPU jobs); a (weight 2,
    reclaimWithinCohort Any) wants one 24-GPU job (3 pods x 8)."""
    running = [running_job("b", f"b-{i}", cq="b", nodes={f"n{i}": 1}, gpu=8, cpu=1, memory=0,
                           created=f"2026-12-01T09:0{i}:00Z") for i in range(4)]
    snap = pool({"a": 2, "b": 1}, {}, extra=running + [job("a", "a-big", cq="a", pods=3, gpu=8, cpu=1, memory=0)])
    a = dataclasses.replace(snap.cluster_queues["a"],
                            preemption=dataclasses.replace(snap.cluster_queues["a"].preemption,
                                                           reclaim_within_cohort="Any"))
    return fair(dataclasses.replace(snap, cluster_queues={**snap.cluster_queues, "a": a}), strategies)


def test_less_than_or_equal_to_final_share_refuses_what_would_leave_a_above_b():
    # Kueue removes b's jobs one at a time; a with a-big: 24 x 1000 / 32 / 2 = 375. b's
    # share after each removal: 750, 500, 250. LessThanOrEqualToFinalShare allows the
    # first two (375 <= 750, 375 <= 500), not the third (375 <= 250): a-big does not fit.
    snap = contested(("LessThanOrEqualToFinalShare",))
    plan = plan_snapshot(snap, SolveOptions(time_limit=60))
    assert plan.evictions == () and plan.admissions == ()
    assert gpus_by_queue(snap, plan) == {"b": 32}


def test_less_than_initial_share_allows_it_below_bs_share_before():
    # LessThanInitialShare compares with b's share before each removal: 375 < 1000,
    # 375 < 750, 375 < 500: all three go, a-big fits. Listed second, it takes the third
    # removal the first strategy refused (S2-b). Any three of b's equal jobs.
    for strategies in (("LessThanInitialShare",), ("LessThanOrEqualToFinalShare", "LessThanInitialShare")):
        snap = contested(strategies)
        plan = plan_snapshot(snap, SolveOptions(time_limit=60))
        assert [a.workload.name for a in plan.admissions] == ["a-big"]
        assert len(plan.evictions) == 3 and {e.workload.namespace for e in plan.evictions} == {"b"}
        assert gpus_by_queue(snap, plan) == {"a": 24, "b": 8}
        assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []


def test_equal_shares_after_are_allowed_by_final_share():
    # a wants two 8-GPU jobs: with both, a = 16 (500) and b = 16 (500): 500 <= 500, allowed.
    running = [running_job("b", f"b-{i}", cq="b", nodes={f"n{i}": 1}, gpu=8, cpu=1, memory=0,
                           created=f"2026-12-01T09:0{i}:00Z") for i in range(4)]
    pending = [job("a", f"a-{i}", cq="a", pods=1, gpu=8, cpu=1, memory=0) for i in range(3)]
    snap = pool({"a": 1, "b": 1}, {}, extra=running + pending)
    a = dataclasses.replace(snap.cluster_queues["a"], preemption=dataclasses.replace(
        snap.cluster_queues["a"].preemption, reclaim_within_cohort="Any"))
    snap = fair(dataclasses.replace(snap, cluster_queues={**snap.cluster_queues, "a": a}),
                ("LessThanOrEqualToFinalShare",))
    plan = plan_snapshot(snap, SolveOptions(time_limit=60))
    assert len(plan.admissions) == 2 and len(plan.evictions) == 2
    assert gpus_by_queue(snap, plan) == {"a": 16, "b": 16}


def test_the_verifier_refuses_evictions_the_strategy_forbids():
    # The plan LessThanInitialShare allows (a-big for three of b's jobs), checked against
    # LessThanOrEqualToFinalShare: a's share after, 375, is above b's after, 250.
    allowed = contested(("LessThanInitialShare",))
    plan = plan_snapshot(allowed, SolveOptions(time_limit=60))
    decisions = Decisions(plan.admissions, plan.evictions)
    assert verify(allowed, decisions) == []
    strict = contested(("LessThanOrEqualToFinalShare",))
    problems = verify(strict, decisions)
    assert len(problems) == 3 and all("against fair sharing" in p and "375.0" in p and "250.0" in p
                                      for p in problems), problems


# ---------------------------------------------------------------- many cycles

def hand_fair(pool_gpus: int, wants: dict[str, int], weights: dict[str, float]) -> dict[str, float]:
    """Weighted max-min of `pool_gpus` over what each queue wants (nominal 0), by hand:
    raise a common level; a queue that wants less than weight x level keeps what it wants."""
    fair = {q: 0.0 for q in wants}
    left, active = float(pool_gpus), {q for q in wants if wants[q] > 0}
    while active and left > 1e-9:
        level = left / sum(weights[q] for q in active)
        full = {q for q in active if wants[q] - fair[q] <= weights[q] * level}
        if not full:
            for q in active:
                fair[q] += weights[q] * level
            break
        for q in full:
            left -= wants[q] - fair[q]
            fair[q] = wants[q]
        active -= full
    return fair


def applied(snap: Snapshot, plan, now: float) -> Snapshot:
    """The snapshot after the plan: admissions run where the plan put them, evictions wait again."""
    admitted = {a.workload: a for a in plan.admissions}
    evicted = {e.workload for e in plan.evictions}
    out = []
    for w in snap.workloads:
        if w.ref in admitted:
            w = dataclasses.replace(w, state=WorkloadState.RUNNING, assignment=admitted[w.ref].pod_sets,
                                    admitted_at=now)
        elif w.ref in evicted:
            w = dataclasses.replace(w, state=WorkloadState.PENDING, assignment=(), admitted_at=None, queued_at=now)
        out.append(w)
    return dataclasses.replace(snap, workloads=tuple(out))


def test_twenty_cycles_of_arrivals_stay_within_one_workload_of_the_fair_share():
    weights = {"a": 1, "b": 3, "c": 1}
    snap = fair(pool(weights, {}), ("LessThanOrEqualToFinalShare",))
    queues = {n: dataclasses.replace(q, preemption=dataclasses.replace(q.preemption, reclaim_within_cohort="Any"))
              for n, q in snap.cluster_queues.items()}
    snap = dataclasses.replace(snap, cluster_queues=queues)
    now = snap.now
    finishes: dict = {}
    evicted_from: list[tuple[str, str]] = []     # (victim's queue, preemptor's queue)
    seen_evicted: set = set()
    for cycle in range(20):
        now += 600.0
        # arrivals: a and b from the start, c joins at cycle 8 with a burst; 2-GPU jobs
        arrivals = {"a": 2, "b": 3, "c": 6 if cycle == 8 else (1 if cycle > 8 else 0)}
        new = [job(q, f"{q}-{cycle:02d}-{i}", cq=q, gpu=2, cpu=1, memory=0, created=now - 1 - i)
               for q, n in arrivals.items() for i in range(n)]
        # work finishes after 8 to 11 cycles of running
        alive = tuple(w for w in snap.workloads if not (w.state is WorkloadState.RUNNING and finishes.get(w.ref, 1e18) <= now))
        snap = dataclasses.replace(snap, workloads=alive + tuple(new), now=now)
        plan = plan_snapshot(snap, SolveOptions(time_limit=20))
        assert plan.solver.method == "milp", plan.solver.message
        by_ref = {w.ref: w for w in snap.workloads}
        for e in plan.evictions:
            assert e.workload not in seen_evicted, f"cycle {cycle}: {e.workload} evicted twice"
            seen_evicted.add(e.workload)
            for ref in e.for_:
                evicted_from.append((by_ref[e.workload].cluster_queue, by_ref[ref].cluster_queue))
        snap = applied(snap, plan, now)
        for a in plan.admissions:
            finishes[a.workload] = now + 600.0 * (8 + sum(map(ord, a.workload.name)) % 4)
        used = gpus_by_queue(snap, type("P", (), {"evictions": (), "admissions": ()})())
        wants = {q: used.get(q, 0) + sum(2 for w in snap.workloads
                                         if w.cluster_queue == q and w.state is WorkloadState.PENDING)
                 for q in weights}
        share = hand_fair(32, wants, weights)
        for q in weights:
            assert abs(used.get(q, 0) - share[q]) <= 2 + 1e-6, (cycle, q, used, share)
    # the pool stays full (work runs 8 to 11 cycles): c's burst got its share by preemption
    assert ("b", "c") in evicted_from or ("a", "c") in evicted_from, evicted_from
    # never back and forth: no pair of queues evicts in both directions
    pairs = set(evicted_from)
    assert not any((b, a) in pairs for a, b in pairs if a != b), pairs


def test_the_verifier_refuses_a_plan_leaving_a_fair_share_kueue_would_take():
    # b borrows the whole quota of 32 (4 running 8-GPU jobs); a fifth node is free but
    # outside the quota. a's one 8-GPU job: with it a is at 250, b without one job at
    # 750: Kueue's fair preemption (LessThanOrEqualToFinalShare) would evict one of b's.
    running = [running_job("b", f"b-{i}", cq="b", nodes={f"n{i}": 1}, gpu=8, cpu=1, memory=0,
                           created=f"2026-12-01T09:0{i}:00Z") for i in range(4)]
    snap = pool({"a": 1, "b": 1}, {}, extra=running + [job("a", "a-1", cq="a", pods=1, gpu=8, cpu=1, memory=0)])
    a = dataclasses.replace(snap.cluster_queues["a"], preemption=dataclasses.replace(
        snap.cluster_queues["a"].preemption, reclaim_within_cohort="Any"))
    snap = fair(dataclasses.replace(snap, cluster_queues={**snap.cluster_queues, "a": a},
                                    nodes=snap.nodes + (node("n4", gpu=8, cpu=64),)),
                ("LessThanOrEqualToFinalShare",))
    problems = verify(snap, Decisions())
    assert len(problems) == 1 and "Job/a/a-1 waits though Kueue's fair sharing would admit it" in problems[0], problems
    plan = plan_snapshot(snap, SolveOptions(time_limit=60))
    assert plan.solver.method == "milp" and [a.workload.name for a in plan.admissions] == ["a-1"]
    assert len(plan.evictions) == 1
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []
    # a 24-GPU job instead, with three free nodes: a would be at 750; b's share after
    # each removal 750, 500, 250: the strategy stops at the second victim, and Kueue
    # would not admit it either
    big = job("a", "a-1", cq="a", pods=3, gpu=8, cpu=1, memory=0)
    snap = dataclasses.replace(snap, nodes=snap.nodes + (node("n5", gpu=8, cpu=64), node("n6", gpu=8, cpu=64)),
                               workloads=tuple(w for w in snap.workloads if w.ref.name != "a-1") + (big,))
    assert verify(snap, Decisions()) == []
    # nor with LessThanInitialShare: b's share before each removal, 1000 then 750: 750 < 750 fails
    assert verify(dataclasses.replace(snap, kueue_config=KueueConfig(fair_sharing=FairSharingConfig(
        True, ("LessThanInitialShare",)))), Decisions()) == []


def test_targets_keep_a_lending_limit_reserved():
    # a: nominal 10, lendingLimit 4 (6 reserved for a alone); b: nominal 10; org owns nothing.
    # Both want 30: each gets its nominal, nothing is left to share. a wants only 5: it
    # keeps its reserved part, lends 4, and b gets 10 + 4 = 14 (a's 6th reserved GPU idles).
    snap = snapshot(flavors=[flavor("default")], cohorts=[cohort("org")],
                    cqs=[cq("a", cohort="org", quotas={"default": {GPU: (10, None, 4)}}),
                         cq("b", cohort="org", quotas={"default": {GPU: 10}})])
    tree = QuotaTree(snap)
    fr = ("default", GPU)
    both = targets(snap, tree, {"cq:a": {fr: 30.0}, "cq:b": {fr: 30.0}})
    assert (both["cq:a"][fr], both["cq:b"][fr]) == (10, 10)
    less = targets(snap, tree, {"cq:a": {fr: 5.0}, "cq:b": {fr: 30.0}})
    assert (less["cq:a"][fr], less["cq:b"][fr]) == (5, 14)


def test_greedy_stays_the_fallback_when_it_is_fairer():
    # The cycle's guard with fair sharing on: shares first (least fraction of its target
    # any queue reaches, then their sum), then priority. The 8/24 plan against one that
    # gives a (priority 100) all 32: b reaches 0 of its 24, so the first is fairer.
    from planner.cycle import better
    snap = pool({"a": 1, "b": 3}, {"a": 32, "b": 32}, priorities={"a": 100})
    unfair = plan_snapshot(snap, SolveOptions(time_limit=60))
    fair_plan = plan_snapshot(fair(snap), SolveOptions(time_limit=60))
    assert gpus_by_queue(snap, unfair) == {"a": 32} and gpus_by_queue(snap, fair_plan) == {"a": 8, "b": 24}
    as_decisions = [Decisions(p.admissions, p.evictions) for p in (unfair, fair_plan)]
    assert better(fair(snap), as_decisions[1], as_decisions[0]) > 0    # greedy fairer: fall back
    assert better(fair(snap), as_decisions[0], as_decisions[1]) < 0
