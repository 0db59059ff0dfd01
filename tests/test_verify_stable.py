"""The verifier's stability rule (planner/verify/stable.py): nominal quota is a guarantee.

Hand-computed cases. Two ClusterQueues in cohort `c`, 8 GPUs of nominal quota each;
`team-b` borrows from `team-a` by running 16 GPUs. A plan that leaves `team-a`'s work
waiting while reclaiming `team-b`'s borrowing would let it run is one Kueue undoes.
"""

import dataclasses

from builders import GPU, NOW, ago, cohort, cq, flavor, job, lq, node, required, running_job, snapshot, topology
from models import Admission, Decisions, Eviction, ObjectRef, PodSetAssignment
from planner.verify import verify
from planner.verify import stability_violations

RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
QUOTA = {"default": {GPU: 8, "cpu": 64, "memory": "512Gi"}}


def queues(reclaim: str = "Any", within: str = "Never", **kw: object):
    return [cq("team-a", cohort="c", quotas=QUOTA, reclaim=reclaim, within=within, **kw),
            cq("team-b", cohort="c", quotas=QUOTA, reclaim=reclaim, within=within)]


def borrowed(reclaim: str = "Any", waiting_gpus: int = 4, b_priority: int = 0, a_priority: int = 0, **kw: object):
    """team-b runs 8 + 8 GPUs on n1, n2 (the second one borrowed); team-a waits for `waiting_gpus`."""
    return snapshot(
        nodes=[node("n1", gpu=8), node("n2", gpu=8)],
        flavors=[flavor("default")],
        cqs=queues(reclaim, **kw), cohorts=[cohort("c")],
        lqs=[lq("a", "lq", "team-a"), lq("b", "lq", "team-b")],
        workloads=[
            running_job("b", "b-old", nodes={"n1": 1}, gpu=8, priority=b_priority, admitted=ago(hours=3)),
            running_job("b", "b-new", nodes={"n2": 1}, gpu=8, priority=b_priority, admitted=ago(hours=1)),
            job("a", "waiting", pods=1, gpu=waiting_gpus, priority=a_priority),
        ],
    )


def ref(ns: str, name: str) -> ObjectRef:
    return ObjectRef("Job", ns, name)


def admit(ns: str, name: str, cluster_queue: str, nodes: dict[str, int], flavor: str = "default") -> Admission:
    psa = PodSetAssignment(name="main", count=sum(nodes.values()), flavors={GPU: flavor, "cpu": flavor,
                                                                             "memory": flavor},
                           levels=(HOST,), domains=tuple(((n,), c) for n, c in sorted(nodes.items())))
    return Admission(ref(ns, name), cluster_queue, (psa,))


def stability(snap, decisions=Decisions()) -> list[str]:
    found = stability_violations(snap, decisions)
    assert [v for v in verify(snap, decisions) if v not in found] == []  # valid in every other way
    assert [v for v in verify(snap, decisions) if v in found] == found   # verify() checks the rule too
    return found


def test_waiting_inside_nominal_while_a_reclaimable_borrower_runs_is_unstable():
    snap = borrowed()
    found = stability(snap)
    assert len(found) == 1
    assert "Job/a/waiting" in found[0] and "team-a" in found[0] and "Job/b/b-new" in found[0]
    assert "Job/b/b-old" not in found[0]  # once b-new is gone team-b no longer borrows


def test_reclaiming_the_borrower_makes_the_plan_stable():
    snap = borrowed()
    plan = Decisions(admissions=(admit("a", "waiting", "team-a", {"n2": 1}),),
                     evictions=(Eviction(ref("b", "b-new"), "Reclaimed", (ref("a", "waiting"),), 1.0),))
    assert verify(snap, plan) == [] and stability_violations(snap, plan) == []


def test_reclaim_never_lends_without_taking_back():
    assert stability(borrowed(reclaim="Never")) == []


def test_lower_priority_reclaims_only_lower_priority_borrowers():
    assert stability(borrowed(reclaim="LowerPriority", b_priority=100, a_priority=100)) == []
    assert len(stability(borrowed(reclaim="LowerPriority", b_priority=0, a_priority=100))) == 1


def test_work_beyond_nominal_quota_is_no_guarantee():
    # 12 GPUs do not fit team-a's 8 of nominal quota: it would have to borrow.
    snap = borrowed(waiting_gpus=12)
    assert stability(snap) == []


def test_strict_fifo_queues_are_not_judged():
    assert stability(borrowed(strategy="StrictFIFO")) == []


def test_non_preemptible_and_young_borrowers_are_not_candidates():
    snap = borrowed()
    keep = tuple(dataclasses.replace(w, non_preemptible=True) if w.ref.namespace == "b" else w for w in snap.workloads)
    assert stability(dataclasses.replace(snap, workloads=keep)) == []
    young = dataclasses.replace(snap, policy=dataclasses.replace(snap.policy, minimum_runtime_seconds=2 * 3600))
    # b-new has run 1 h of the 2 h minimum: not a candidate. b-old has run 3 h and team-b
    # still borrows, so reclaim removes b-old instead and frees n1.
    found = stability(young)
    assert len(found) == 1 and "Job/b/b-old" in found[0]


def test_a_borrower_admitted_by_the_plan_is_reclaimable_too():
    snap = snapshot(
        nodes=[node("n1", gpu=8), node("n2", gpu=8)], flavors=[flavor("default")],
        cqs=queues(), cohorts=[cohort("c")], lqs=[lq("a", "lq", "team-a"), lq("b", "lq", "team-b")],
        workloads=[job("b", "b1", gpu=8, created=ago(hours=2)), job("b", "b2", gpu=8, priority=100, created=ago(hours=2)),
                   job("a", "waiting", gpu=4, created=ago(hours=1))],
    )
    greedy_like = Decisions(admissions=(admit("b", "b1", "team-b", {"n1": 1}), admit("b", "b2", "team-b", {"n2": 1})))
    found = stability(snap, greedy_like)
    # The lower priority goes first: b1 is reclaimed, and team-b is then within nominal.
    assert len(found) == 1 and "Job/a/waiting" in found[0] and "Job/b/b1" in found[0]
    assert "Job/b/b2" not in found[0]
    fair = Decisions(admissions=(admit("b", "b1", "team-b", {"n1": 1}), admit("a", "waiting", "team-a", {"n2": 1})))
    assert verify(snap, fair) == [] and stability_violations(snap, fair) == []


def two_racks(b_gpus: int, workloads):
    """Racks r1 (n1, n2) and r2 (n3, n4) of 8-GPU nodes, one flavor of their topology;
    team-a (24 GPUs nominal) and team-b (`b_gpus`) in cohort c, both reclaiming from Any."""
    quotas = {"tas": {GPU: 24, "cpu": 256, "memory": "2Ti"}}
    b_quotas = {"tas": {GPU: b_gpus, "cpu": 256, "memory": "2Ti"}}
    nodes = [node(f"n{i}", gpu=8, labels={RACK: "r1" if i <= 2 else "r2"}) for i in range(1, 5)]
    return snapshot(
        nodes=nodes, flavors=[flavor("tas", topology="topo")], topologies=[topology("topo", RACK, HOST)],
        cqs=[cq("team-a", cohort="c", quotas=quotas, reclaim="Any"),
             cq("team-b", cohort="c", quotas=b_quotas, reclaim="Any")],
        cohorts=[cohort("c")], lqs=[lq("a", "lq", "team-a"), lq("b", "lq", "team-b")],
        workloads=workloads,
    )


def plan_borrowers_across_racks(b1_priority: int):
    """team-a's rack job needs rack r1 or r2 whole; this plan admits team-b's b2 on n1 (r1;
    n2 is free) and b1 on n3 (r2; n4 runs team-a's own work). team-b is then over its
    nominal quota by one of them: reclaim removes one, which frees a rack only if it is b2
    (the first of the two by UID)."""
    snap = two_racks(b_gpus=8, workloads=[
        running_job("a", "mine", nodes={"n4": 1}, gpu=8, admitted=ago(hours=1)),
        job("b", "b1", gpu=8, priority=b1_priority, created=ago(hours=3)),
        job("b", "b2", gpu=8, created=ago(hours=3)),
        job("a", "rack-job", pods=2, gpu=8, topology=required(RACK), created=ago(hours=2)),
    ])
    plan = Decisions(admissions=(admit("b", "b2", "team-b", {"n1": 1}, "tas"), admit("b", "b1", "team-b", {"n3": 1}, "tas")))
    return snap, plan


def test_which_of_the_plans_own_admissions_reclaim_takes_is_its_order_and_not_the_verifiers_to_pick():
    # b1 and b2 share a priority: Kueue takes the one it admitted last, and a plan does not
    # say which that is (the real Kueue admits a few a second; greedy's replay, one cycle a
    # second; a plan applied at once, by UID). Kueue may keep this plan: it stands.
    snap, plan = plan_borrowers_across_racks(b1_priority=0)
    assert stability(snap, plan) == []


def test_reclaim_of_the_plans_own_admissions_in_priority_order_is_owed():
    snap, plan = plan_borrowers_across_racks(b1_priority=100)   # b2 first, whatever the times
    found = stability(snap, plan)
    assert len(found) == 1 and "Job/a/rack-job" in found[0] and "Job/b/b2" in found[0]


def rack_job_beside_team_b(b_gpus: int):
    """team-a waits with a job of 16 GPUs in one rack, running 8 on n3 and n4 (rack r2);
    team-b runs b-old on n1 and b-new on n2 (rack r1), 8 GPUs each."""
    return two_racks(b_gpus=b_gpus, workloads=[
        running_job("b", "b-old", nodes={"n1": 1}, gpu=8, admitted=ago(hours=3)),
        running_job("b", "b-new", nodes={"n2": 1}, gpu=8, admitted=ago(hours=1)),
        running_job("a", "mine", nodes={"n3": 1, "n4": 1}, pods=2, gpu=4, admitted=ago(hours=1)),
        job("a", "rack-job", pods=2, gpu=8, topology=required(RACK)),
    ])


def test_reclaim_that_cannot_free_the_required_rack_is_not_owed():
    # team-a's job needs 16 GPUs in one rack; team-b runs b-old on n1 and b-new on n2, both in
    # rack r1 (r2 is full of team-a's own work). Reclaim may remove b-new only (team-b is then
    # within nominal), which frees half a rack: Kueue cannot reclaim enough, the plan stands.
    snap = rack_job_beside_team_b(b_gpus=8)
    # team-a uses 8 of 24: the 16-GPU job fits its nominal quota. Removing both of
    # team-b's workloads would free rack r1, but Kueue stops once team-b is within nominal.
    assert stability(snap) == []


def test_reclaim_that_frees_the_required_rack_is_owed():
    snap = rack_job_beside_team_b(b_gpus=0)
    # team-b borrows all 16 of its GPUs: reclaim removes both and frees rack r1.
    found = stability(snap)
    assert len(found) == 1 and "Job/a/rack-job" in found[0]
    assert "b-old" in found[0] and "b-new" in found[0]
