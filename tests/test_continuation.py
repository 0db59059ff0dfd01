"""Kueue's cycle run on from a plan (planner/cycle/continuation.py), on hand-computed cases.

Two ClusterQueues in cohort `c`, 8 GPUs of nominal quota each, two 8-GPU nodes. A plan
that lets team-b borrow while team-a's work waits inside its nominal quota is one Kueue
undoes at once; carried on by Kueue's cycle it becomes a plan Kueue leaves as it is.
"""

from builders import GPU, ago, cohort, cq, flavor, job, lq, node, running_job, snapshot
from models import Admission, Decisions, Eviction, ObjectRef, PodSetAssignment, WorkloadState
from planner.cycle.continuation import after, continued, justified
from planner.kueue.preemption.victims import PreemptionRules
from planner.kueue.semantics import QuotaTree
from planner.verify import verify
from planner.verify import stability_violations

HOST = "kubernetes.io/hostname"
QUOTA = {"default": {GPU: 8, "cpu": 64, "memory": "512Gi"}}


def cluster(waiting_a: bool = True, priority_b: int = 0, within_b: str = "Never", more_priority: int | None = None):
    """team-b runs 8 GPUs on n1 (its nominal); b-more (8 GPUs) waits in team-b, and
    a-work (8 GPUs) in team-a when `waiting_a`."""
    workloads = [running_job("b", "b-run", nodes={"n1": 1}, gpu=8, priority=priority_b, admitted=ago(hours=2)),
                 job("b", "b-more", pods=1, gpu=8, priority=priority_b if more_priority is None else more_priority)]
    if waiting_a:
        workloads.append(job("a", "a-work", pods=1, gpu=8))
    return snapshot(
        nodes=[node("n1", gpu=8), node("n2", gpu=8)], flavors=[flavor("default")],
        cqs=[cq("team-a", cohort="c", quotas=QUOTA, reclaim="Any", within="Never"),
             cq("team-b", cohort="c", quotas=QUOTA, reclaim="Any", within=within_b)],
        cohorts=[cohort("c")], lqs=[lq("a", "lq", "team-a"), lq("b", "lq", "team-b")], workloads=workloads)


def ref(ns: str, name: str) -> ObjectRef:
    return ObjectRef("Job", ns, name)


def admit(ns: str, name: str, cluster_queue: str, host: str) -> Admission:
    psa = PodSetAssignment(name="main", count=1, flavors={GPU: "default", "cpu": "default", "memory": "default"},
                           levels=(HOST,), domains=(((host,), 1),))
    return Admission(ref(ns, name), cluster_queue, (psa,))


def rules(snap) -> PreemptionRules:
    return PreemptionRules(snap, QuotaTree(snap))


def test_after_runs_what_a_plan_admits_and_drops_what_it_evicts():
    snap = cluster()
    plan = Decisions(admissions=(admit("b", "b-more", "team-b", "n2"),),
                     evictions=(Eviction(ref("b", "b-run"), "Preempted", (ref("b", "b-more"),), 1.0),))
    state = {w.ref: w for w in after(snap, plan).workloads}
    assert ref("b", "b-run") not in state                       # requeued: the next cycle's
    more = state[ref("b", "b-more")]
    assert more.state is WorkloadState.RUNNING and more.assignment == plan.admissions[0].pod_sets
    assert more.admitted_at == snap.now
    assert state[ref("a", "a-work")].state is WorkloadState.PENDING


def test_a_borrowing_plan_is_carried_on_to_the_reclaim_kueue_makes():
    snap = cluster()
    borrowing = Decisions(admissions=(admit("b", "b-more", "team-b", "n2"),))   # team-b at 16 of 8
    assert stability_violations(snap, borrowing)                 # a-work waits inside nominal: unstable
    carried = continued(snap, borrowing, rules(snap))
    assert carried is not None
    assert [a.workload for a in carried.admissions] == [ref("a", "a-work")]   # b-more reclaimed at once
    assert carried.evictions == ()
    assert verify(snap, carried) == []                           # stable, and valid in every other way


def test_a_stable_plan_is_left_as_it_is():
    snap = cluster(waiting_a=False)
    plan = Decisions(admissions=(admit("b", "b-more", "team-b", "n2"),))   # nobody waits inside nominal
    assert verify(snap, plan) == []
    assert continued(snap, plan, rules(snap)) == plan


def test_an_eviction_left_without_its_preemptor_is_kept_for_an_admission_allowed_to_make_it():
    snap = cluster(priority_b=0)
    by_ref = {w.ref: w for w in snap.workloads}
    victim = by_ref[ref("b", "b-run")]
    # team-a's work may not evict it (team-b does not borrow before the plan) ...
    assert justified(victim, [admit("a", "a-work", "team-a", "n1")], by_ref, rules(snap)) is None
    # ... a higher-priority workload of its own queue may (withinClusterQueue LowerPriority).
    snap = cluster(priority_b=0, within_b="LowerPriority", more_priority=100)
    by_ref = {w.ref: w for w in snap.workloads}
    found = justified(by_ref[ref("b", "b-run")], [admit("a", "a-work", "team-a", "n2"),
                                                 admit("b", "b-more", "team-b", "n1")], by_ref, rules(snap))
    assert found is not None
    assert found.for_ == (ref("b", "b-more"),) and found.reason == "Preempted" and found.cost > 0
