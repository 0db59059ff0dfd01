"""The verifier's preemption rules, one hand-computed case per policy value, allowed
and forbidden (Kueue's spec.preemption on base priorities, REFERENCE §3).

The world: one node; ClusterQueues cq-a (the preemptor's) and cq-b in cohort
`org`, each with 8 cores nominal; cq-c alone, outside any cohort. The preemptor p
(1 pod, 1 core; 9 pods when it must borrow) is admitted to cq-a; the victim v runs 10 pods of 1 core in the
queue the case names, which makes cq-b borrowing (10 > 8); with `borrowing=False`
it runs 4 pods, within nominal. Quota is ample, and the node holds the victim and
all but one of the preemptor's pods: the eviction is needed (planner/verify/needed.py),
so every violation reported is about preemption.
"""

from __future__ import annotations

import pytest

from builders import NOW, assignment, cq, job, running_job, snapshot, node, flavor
from models import Admission, Decisions, Eviction, Policy
from planner.verify import verify

QUOTA = {"default": {"cpu": 8, "memory": "64Gi"}}


def world(*, within: str = "Never", reclaim: str = "Never", borrow: str = "Never",
          threshold: int | None = None, victim_cq: str = "cq-b", victim_priority: int = 0,
          preemptor_priority: int = 10, borrowing: bool = True, victim_queued: float = NOW - 7200,
          preemptor_queued: float = NOW - 3600, preemptor_pods: int = 1, **victim_kw: object):
    queues = [
        cq("cq-a", cohort="org", quotas=QUOTA, within=within, reclaim=reclaim, borrow_within=borrow,
           borrow_max_priority=threshold),
        cq("cq-b", cohort="org", quotas=QUOTA),
        cq("cq-c", quotas=QUOTA),
    ]
    ns = {"cq-a": "team-a", "cq-b": "team-b", "cq-c": "team-c"}[victim_cq]
    pods = 10 if borrowing else 4
    victim = running_job(ns, "v", nodes={"n1": pods}, cq=victim_cq, priority=victim_priority,
                         created=victim_queued, **victim_kw)
    preemptor = job("team-a", "p", cq="cq-a", priority=preemptor_priority, created=preemptor_queued,
                    pods=preemptor_pods)
    # The node holds the victim and all but one of the preemptor's pods: the eviction is needed.
    snap = snapshot(nodes=[node("n1", cpu=pods + preemptor_pods - 1)], flavors=[flavor("default")], cqs=queues,
                    workloads=[victim, preemptor])
    return snap, victim, preemptor


def admit(snap, w) -> Admission:
    ps = w.pod_sets[0]
    return Admission(w.ref, w.cluster_queue, (assignment(ps, {"n1": ps.count}, "default"),))


def check(snap, victim, preemptor, reason: str, for_=None) -> list[str]:
    eviction = Eviction(victim.ref, reason, (preemptor.ref,) if for_ is None else for_, cost=1.0)
    return verify(snap, Decisions((admit(snap, preemptor),), (eviction,)))


def allowed(reason: str, **kw: object) -> None:
    snap, v, p = world(**kw)
    assert check(snap, v, p, reason) == []


def forbidden(reason: str, *fragments: str, **kw: object) -> list[str]:
    snap, v, p = world(**kw)
    violations = check(snap, v, p, reason)
    assert any(str(v.ref) in x and "preemption policies" in x and all(f in x for f in fragments)
               for x in violations), violations
    return violations


# ---------------------------------------------------------------- withinClusterQueue

def test_within_never() -> None:
    forbidden("Preempted", "withinClusterQueue of ClusterQueue cq-a is Never", victim_cq="cq-a", within="Never")


def test_within_lower_priority() -> None:
    allowed("Preempted", victim_cq="cq-a", within="LowerPriority", victim_priority=0, preemptor_priority=10)
    forbidden("Preempted", "priority 10 is not below 10", victim_cq="cq-a", within="LowerPriority",
              victim_priority=10, preemptor_priority=10)
    # Equal priority, victim newer: only LowerOrNewerEqualPriority allows it.
    forbidden("Preempted", victim_cq="cq-a", within="LowerPriority", victim_priority=10,
              victim_queued=NOW - 60)


def test_within_lower_or_newer_equal_priority() -> None:
    allowed("Preempted", victim_cq="cq-a", within="LowerOrNewerEqualPriority", victim_priority=0)
    # Equal priority, queued after the preemptor (60 s ago vs an hour ago): allowed.
    allowed("Preempted", victim_cq="cq-a", within="LowerOrNewerEqualPriority", victim_priority=10,
            victim_queued=NOW - 60)
    # Equal priority, queued before it: forbidden; higher priority: forbidden.
    forbidden("Preempted", "nor equal and queued later", victim_cq="cq-a",
              within="LowerOrNewerEqualPriority", victim_priority=10, victim_queued=NOW - 7200)
    forbidden("Preempted", victim_cq="cq-a", within="LowerOrNewerEqualPriority", victim_priority=11,
              victim_queued=NOW - 60)


def test_same_queue_eviction_is_preempted_not_reclaimed() -> None:
    forbidden("Reclaimed", "the reason is Preempted", victim_cq="cq-a", within="LowerPriority")


# ---------------------------------------------------------------- reclaimWithinCohort

def test_reclaim_never() -> None:
    forbidden("Reclaimed", "reclaimWithinCohort is Never", reclaim="Never")


def test_reclaim_lower_priority() -> None:
    allowed("Reclaimed", reclaim="LowerPriority", victim_priority=0)
    forbidden("Reclaimed", "priority 10 is not below 10", reclaim="LowerPriority", victim_priority=10)
    # cq-b within its nominal quota (4 of 8 cores) is not borrowing: nothing to reclaim.
    forbidden("Reclaimed", "ClusterQueue cq-b was not borrowing", reclaim="LowerPriority", victim_priority=0,
              borrowing=False)


def test_reclaim_any() -> None:
    allowed("Reclaimed", reclaim="Any", victim_priority=100, preemptor_priority=10)
    forbidden("Reclaimed", "was not borrowing", reclaim="Any", victim_priority=0, borrowing=False)


def test_cross_queue_eviction_is_reclaimed_not_preempted() -> None:
    forbidden("Preempted", "the reason is Reclaimed", reclaim="Any")


def test_no_reclaiming_outside_the_cohort_tree() -> None:
    forbidden("Reclaimed", "not in the cohort tree", reclaim="Any", within="LowerPriority", victim_cq="cq-c")


# ---------------------------------------------------------------- borrowWithinCohort
# A preemptor of 9 pods takes cq-a above its nominal 8: it borrows, and then Kueue
# reclaims only where borrowWithinCohort allows. Victims must still be borrowing.

def test_borrow_within_cohort_never() -> None:
    forbidden("Reclaimed", "borrowWithinCohort is Never", reclaim="LowerPriority", borrow="Never",
              preemptor_pods=9)
    allowed("Reclaimed", reclaim="LowerPriority", borrow="Never", preemptor_pods=1)


def test_borrow_within_cohort_lower_priority() -> None:
    allowed("Reclaimed", reclaim="LowerPriority", borrow="LowerPriority", victim_priority=0, preemptor_pods=9)
    forbidden("Reclaimed", "borrowWithinCohort is LowerPriority", reclaim="Any",
              borrow="LowerPriority", victim_priority=10, preemptor_pods=9)
    forbidden("Reclaimed", "was not borrowing", reclaim="LowerPriority", borrow="LowerPriority",
              victim_priority=0, preemptor_pods=9, borrowing=False)


def test_borrow_within_cohort_threshold() -> None:
    allowed("Reclaimed", reclaim="LowerPriority", borrow="LowerPriority", threshold=5, victim_priority=5,
            preemptor_pods=9)
    forbidden("Reclaimed", "maxPriorityThreshold 5", reclaim="LowerPriority", borrow="LowerPriority",
              threshold=5, victim_priority=6, preemptor_pods=9)


# ---------------------------------------------------------------- for whom

def test_one_allowed_preemptor_is_enough_and_each_must_be_admitted() -> None:
    snap, v, p = world(victim_cq="cq-a", within="LowerPriority", victim_priority=0)
    low = job("team-a", "low", cq="cq-a", priority=0)
    snap = snapshot(nodes=snap.nodes, flavors=snap.flavors.values(), cqs=snap.cluster_queues.values(),
                    workloads=list(snap.workloads) + [low])
    both = Eviction(v.ref, "Preempted", (low.ref, p.ref))
    # `low` may not evict v (equal priority), `p` may: the eviction stands.
    assert verify(snap, Decisions((admit(snap, p), admit(snap, low)), (both,))) == []
    only_low = Eviction(v.ref, "Preempted", (low.ref,))
    violations = verify(snap, Decisions((admit(snap, p), admit(snap, low)), (only_low,)))
    assert any("not for Job/team-a/low" in x for x in violations), violations
    # p named but not admitted.
    violations = verify(snap, Decisions((admit(snap, low),), (both,)))
    assert any("which this plan does not admit" in x for x in violations), violations


def test_non_preemptible_and_minimum_runtime_hold_even_when_the_policy_allows() -> None:
    forbidden_np = world(victim_cq="cq-a", within="LowerPriority", non_preemptible=True)
    assert any("non-preemptible" in x for x in check(*forbidden_np, "Preempted"))
    snap, v, p = world(victim_cq="cq-a", within="LowerPriority", admitted=NOW - 100)
    young = snapshot(nodes=snap.nodes, flavors=snap.flavors.values(), cqs=snap.cluster_queues.values(),
                     workloads=snap.workloads, policy=Policy(minimum_runtime_seconds=600))
    assert any("minimum runtime" in x for x in check(young, v, p, "Preempted"))
    old = snapshot(nodes=snap.nodes, flavors=snap.flavors.values(), cqs=snap.cluster_queues.values(),
                   workloads=snap.workloads, policy=Policy(minimum_runtime_seconds=60))
    assert check(old, v, p, "Preempted") == []


@pytest.mark.parametrize("cost", [-0.5, float("nan"), float("inf")])
def test_cost_must_be_a_finite_non_negative_number(cost: float) -> None:
    snap, v, p = world(victim_cq="cq-a", within="LowerPriority")
    eviction = Eviction(v.ref, "Preempted", (p.ref,), cost=cost)
    violations = verify(snap, Decisions((admit(snap, p),), (eviction,)))
    assert any("cost" in x for x in violations), violations
