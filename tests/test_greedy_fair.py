"""Greedy with Kueue's fair sharing (fairSharing.enable), hand-computed.

Pools are a cohort's own GPU quota; the ClusterQueues have nominal 0, so everything
they use is borrowed and a queue's dominant resource share (DRS) is its GPUs per
mille of the pool, divided by its weight. Kueue's scheduler takes one head per
ClusterQueue per cycle, so two queues fill an empty pool 1:1 whatever their weights;
fair-sharing preemption then moves it to the weighted split (each eviction allowed
while the preemptor's share with its workload stays at or below the victim queue's
share without the victim, LessThanOrEqualToFinalShare, or below its share before,
LessThanInitialShare).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from builders import GPU, ago, cohort, cq, flavor, job, node, running_job, snapshot
from planner.greedy import greedy
from planner.kueue.fairsharing import (
    LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, DRS, FairSharing, Shares, compare,
)
from planner.kueue.state import ClusterState
from planner.verify import verify

RESOURCES = {"cpu": 100_000, "memory": "100Ti"}


def pool(name: str, gpus: int, parent: str | None = None):
    return cohort(name, parent=parent, quotas={"default": {GPU: gpus, **RESOURCES}})


def queue(name: str, cohort_name: str, **kw):
    kw.setdefault("reclaim", "Any")
    return cq(name, cohort=cohort_name, quotas={"default": {GPU: 0, **RESOURCES}}, **kw)


def many(team: str, count: int, gpus: int = 1):
    return [job(f"team-{team}", f"{team}{i:02d}", cq=f"cq-{team}", pods=gpus, gpu=1,
                created=ago(minutes=500 - i)) for i in range(count)]


def per_queue(decisions) -> Counter:
    return Counter(a.cluster_queue for a in decisions.admissions)


def two_teams(a_jobs: int, b_jobs: int):
    return snapshot(nodes=[node(f"n{i}", gpu=8) for i in range(4)], flavors=[flavor("default")],
                    cohorts=[pool("pool", 32)], cqs=[queue("cq-a", "pool"), queue("cq-b", "pool")],
                    workloads=many("a", a_jobs) + many("b", b_jobs))


# ---------------------------------------------------------------- DRS

def test_drs_is_borrowed_per_mille_of_the_pool_over_the_weight() -> None:
    snap = two_teams(0, 0)
    state = ClusterState(snap)
    shares = Shares(state.quota, FairSharing({"cq:cq-a": 1.0, "cq:cq-b": 3.0}))
    fr = ("default", GPU)
    used = {"cq:cq-a": 8, "cq:cq-b": 24}

    def usage(node: str, f: tuple[str, str]) -> int:
        return used.get(node, 0) if f == fr else 0

    a, b = shares.drs("cq:cq-a", usage), shares.drs("cq:cq-b", usage)
    assert (a.ratio, a.weighted()) == (250.0, 250.0)         # 8 of 32
    assert (b.ratio, b.weighted()) == (750.0, 250.0)         # 24 of 32, weight 3
    assert compare(a, b) == 0 and a.resource == GPU and a.borrowed == (fr,)
    assert shares.drs("cohort:pool", usage).is_zero()         # a root never borrows


def test_weight_zero_borrowing_is_always_last() -> None:
    zero, big = DRS(0.0, ratio=1.0, borrowing=True), DRS(1.0, ratio=999.0, borrowing=True)
    assert compare(zero, big) == 1 and compare(big, zero) == -1
    assert compare(DRS(0.0), DRS(1.0)) == 0                   # not borrowing: share 0 either way


# ---------------------------------------------------------------- admission and preemption

def test_weights_1_to_3_split_a_32_gpu_pool_8_and_24() -> None:
    """One head per queue per cycle fills the pool 16/16; then cq-b (weight 3) preempts
    cq-a's workloads while (u_b + 1) / 3 <= u_a - 1: at u_a = 9, 24/3 <= 8 holds, at 8,
    25/3 <= 7 does not (nor 25/3 < 8): 8 and 24."""
    snap = two_teams(32, 32)
    fair = FairSharing({"cq:cq-a": 1.0, "cq:cq-b": 3.0})
    assert per_queue(greedy(snap, fair).decisions) == {"cq-a": 8, "cq-b": 24}
    assert per_queue(greedy(snap).decisions) == {"cq-a": 16, "cq-b": 16}      # fair sharing off


def test_weight_zero_gets_only_what_nobody_else_wants() -> None:
    fair = FairSharing({"cq:cq-a": 0.0})
    # cq-b wants everything: every workload of cq-a is preempted (its share, borrowing
    # with weight 0, is above any; the last one by LessThanInitialShare).
    assert per_queue(greedy(two_teams(32, 32), fair).decisions) == {"cq-b": 32}
    # cq-b wants 20: cq-a keeps the other 12.
    assert per_queue(greedy(two_teams(32, 20), fair).decisions) == {"cq-a": 12, "cq-b": 20}


def strategies_case():
    """Pool of 32 full: cq-a runs two 10-GPU jobs, cq-b 12 GPUs; cq-b wants 4 more.
    cq-b's share with it: 16/32 = 500; cq-a's now 20/32 = 625, without one job 10/32 = 312."""
    a1 = running_job("team-a", "a1", cq="cq-a", gpu=1, nodes={"n0": 8, "n1": 2}, admitted=ago(hours=3))
    a2 = running_job("team-a", "a2", cq="cq-a", gpu=1, nodes={"n1": 6, "n2": 4}, admitted=ago(hours=2))
    b1 = running_job("team-b", "b1", cq="cq-b", gpu=1, nodes={"n2": 4, "n3": 8}, admitted=ago(hours=1))
    want = job("team-b", "b2", cq="cq-b", pods=4, gpu=1)
    return snapshot(nodes=[node(f"n{i}", gpu=8) for i in range(4)], flavors=[flavor("default")],
                    cohorts=[pool("pool", 32)], cqs=[queue("cq-a", "pool"), queue("cq-b", "pool")],
                    workloads=[a1, a2, b1, want])


def test_less_than_or_equal_to_final_share_alone_does_not_preempt() -> None:
    # 500 <= 312 does not hold.
    d = greedy(strategies_case(), FairSharing(strategies=(LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))).decisions
    assert not d.admissions and not d.evictions


def test_less_than_initial_share_preempts_the_newest() -> None:
    # 500 < 625: the most recently admitted of cq-a goes.
    for strategies in ((LESS_THAN_INITIAL_SHARE,), (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)):
        d = greedy(strategies_case(), FairSharing(strategies=strategies)).decisions
        assert [e.workload.name for e in d.evictions] == ["a2"]
        assert [a.workload.name for a in d.admissions] == ["b2"]


def test_within_nominal_preemptor_takes_from_any_borrower() -> None:
    """FairSharingPreemptWithinNominal: a queue within its nominal quota with the
    workload preempts whatever its strategies say (here cq-b has nominal 16)."""
    snap = strategies_case()
    b = cq("cq-b", cohort="pool", quotas={"default": {GPU: 16, **RESOURCES}}, reclaim="Any")
    snap = snapshot(nodes=list(snap.nodes), flavors=[flavor("default")], cohorts=[pool("pool", 16)],
                    cqs=[queue("cq-a", "pool"), b], workloads=list(snap.workloads))
    d = greedy(snap, FairSharing(strategies=(LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))).decisions
    assert [e.workload.name for e in d.evictions] == ["a2"]


# ---------------------------------------------------------------- the tournament

def hierarchical():
    """org (24 GPUs) -> left {l1, l2}, right {r1}. l1 runs 8, l2 4, r1 8: 4 GPUs free;
    each queue has one 4-GPU head, l1's the oldest. At the root, left with its best
    head would use 16 of 24 (667), right 12 (500): r1's head wins. Flat, l2's head
    (8 of 24) would have won, and without fair sharing l1's (the oldest)."""
    run = [running_job("team-l1", "l1-run", cq="l1", gpu=1, nodes={"n0": 8}),
           running_job("team-l2", "l2-run", cq="l2", gpu=1, nodes={"n1": 4}),
           running_job("team-r1", "r1-run", cq="r1", gpu=1, nodes={"n1": 4, "n2": 4})]
    heads = [job(f"team-{q}", f"{q}-head", cq=q, pods=4, gpu=1, created=ago(minutes=m))
             for q, m in (("l1", 30), ("l2", 20), ("r1", 10))]
    return snapshot(nodes=[node(f"n{i}", gpu=8) for i in range(3)], flavors=[flavor("default")],
                    cohorts=[pool("org", 24), cohort("left", parent="org"), cohort("right", parent="org")],
                    cqs=[queue("l1", "left", reclaim="Never"), queue("l2", "left", reclaim="Never"),
                         queue("r1", "right", reclaim="Never")],
                    workloads=run + heads)


def test_tournament_compares_cohorts_at_each_level() -> None:
    snap = hierarchical()
    assert [a.workload.name for a in greedy(snap, FairSharing()).decisions.admissions] == ["r1-head"]
    assert [a.workload.name for a in greedy(snap).decisions.admissions] == ["l1-head"]


def test_cohort_weights_change_the_winner() -> None:
    # left weighted 2: 667 / 2 = 333 < 500, so left's best head (l2's, 8/24 = 333 < 12/24) wins.
    fair = FairSharing({"cohort:left": 2.0})
    assert [a.workload.name for a in greedy(hierarchical(), fair).decisions.admissions] == ["l2-head"]


# ---------------------------------------------------------------- from Kueue's Configuration

def fair_on(snap, strategies=None, weights=None):
    """The snapshot with Kueue's Configuration turning fair sharing on, and weights on its queues."""
    from models import FairSharingConfig, KueueConfig
    config = FairSharingConfig(enabled=True, **({"preemption_strategies": strategies} if strategies else {}))
    cqs = {name: dataclasses.replace(q, fair_weight=(weights or {}).get(name, 1.0))
           for name, q in snap.cluster_queues.items()}
    return dataclasses.replace(snap, cluster_queues=cqs, kueue_config=KueueConfig(fair_sharing=config))


def test_the_configuration_turns_it_on_and_plans_verify() -> None:
    snap = fair_on(two_teams(32, 32), weights={"cq-b": 3.0})
    decisions = greedy(snap).decisions
    assert per_queue(decisions) == {"cq-a": 8, "cq-b": 24}
    assert verify(snap, decisions) == []


def test_fair_reclaim_by_a_borrowing_preemptor_verifies() -> None:
    # cq-b borrows (nominal 0) and has no borrowWithinCohort: allowed under fair sharing only.
    snap = fair_on(strategies_case())
    decisions = greedy(snap).decisions
    assert [e.workload.name for e in decisions.evictions] == ["a2"]
    assert verify(snap, decisions) == []
    assert verify(strategies_case(), decisions) != []          # classical rules refuse it


def test_shares_are_compared_below_the_common_cohort() -> None:
    """org (32) -> left {l1}, right {r1, r2}; r1 and r2 run three 4-GPU jobs each, l1 8:
    full. l1 wants 4 more. Kueue compares left (with the job 12/32 = 375) to right
    (24/32 = 750; without r2's newest job 20/32 = 625): 375 <= 625, r2's newest job goes
    (r1 and r2 tie at 375; r2's candidate was admitted later). Queue to queue, l1's
    375 against r2's 250 after would have refused it: the verifier compares as Kueue."""
    def runs(q, hours):
        return [running_job(f"team-{q}", f"{q}-{i}", cq=q, gpu=1, nodes={f"{q}n{i}": 4},
                            admitted=ago(hours=hours - i)) for i in range(3)]
    nodes = [node(f"{q}n{i}", gpu=4) for q in ("r1", "r2") for i in range(3)] + [node("l1n0", gpu=8), node("free", gpu=4)]
    l1 = running_job("team-l1", "l1-0", cq="l1", gpu=1, nodes={"l1n0": 8}, admitted=ago(hours=9))
    want = job("team-l1", "l1-want", cq="l1", pods=4, gpu=1)
    snap = snapshot(nodes=nodes, flavors=[flavor("default")],
                    cohorts=[pool("org", 32), cohort("left", parent="org"), cohort("right", parent="org")],
                    cqs=[queue("l1", "left"), queue("r1", "right"), queue("r2", "right")],
                    workloads=runs("r1", 8) + runs("r2", 5) + [l1, want])
    snap = fair_on(snap)
    decisions = greedy(snap).decisions
    assert [e.workload.name for e in decisions.evictions] == ["r2-2"]
    assert [a.workload.name for a in decisions.admissions] == ["l1-want"]
    assert verify(snap, decisions) == []


def test_fairshare_table_reports_shares_against_the_weighted_target() -> None:
    from planner.tools.fairshare import markdown, share_rows
    snap = fair_on(two_teams(32, 32), weights={"cq-b": 3.0})
    rows = share_rows(snap, {"greedy": greedy(snap).decisions})
    got = {r.queue: (r.weight, r.demand, r.target, r.target_drs, r.held["greedy"], r.drs["greedy"]) for r in rows}
    # 8 and 24 of 32: 250 per mille each, after the weights (24/32 = 750 over 3).
    assert got == {"cq-a": (1.0, 32, 8.0, 250.0, 8, 250.0), "cq-b": (3.0, 32, 24.0, 250.0, 24, 250.0)}
    assert markdown(rows, ["greedy"])[2] == "| cq-a | 1 | 0 | 32 | 8.0 | 250 | 8 | 250 |"
