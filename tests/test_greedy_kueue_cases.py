"""Kueue v0.17.0's own test cases, asked of greedy (planner.greedy, planner.kueue.assigner).

Each case restates a case of Kueue's unit tests (named in its comment: the file
under pkg/scheduler and the case's name) with Stowplan's builders, and asserts what
Kueue's test expects. Kueue's scheduler tests run one cycle; where the case is about
that one cycle, the test steps greedy's KueueCycles once and looks at that cycle;
otherwise it asserts the end state Kueue's cycles reach (the plan greedy returns),
which the comment works out from the one-cycle expectation.

Kueue's quota-only flavors place no pods; Stowplan places every pod, so each flavor
here gets one large node of its own (its label) that never binds. Every plan is also
checked by the independent verifier.
"""

from __future__ import annotations

from builders import (
    GPU, HOSTNAME_LABEL, NOW, ago, cohort, cq, flavor, job, node, pod_set, preferred, required, running,
    running_job, snapshot, topology, unconstrained, workload,
)
from planner.greedy import KueueCycles, greedy
from planner.verify import verify

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"


def pool(*names: str, cpu: int = 1000, gpu: int = 0, extra: dict | None = None):
    """A flavor per name, selecting one big node labelled with it."""
    flavors = [flavor(n, node_labels={"pool": n}) for n in names]
    nodes = [node(f"{n}-node", cpu=cpu, gpu=gpu, memory="4Ti", pods=1000, labels={"pool": n}, extra=extra)
             for n in names]
    return flavors, nodes


def plan(snap):
    decisions = greedy(snap).decisions
    assert verify(snap, decisions) == []
    return decisions


def admitted(decisions) -> dict[str, set[str]]:
    """workload name -> the flavors it was given."""
    return {a.workload.name: {f for ps in a.pod_sets for f in ps.flavors.values()} for a in decisions.admissions}


def evicted(decisions) -> dict[str, str]:
    return {e.workload.name: e.reason for e in decisions.evictions}


def cpu_job(ns: str, name: str, queue: str, cpu: int, *, pods: int = 1, **kw):
    """A Job of `pods` pods of `cpu` cores in ClusterQueue `queue` (LocalQueue of the same name)."""
    return job(ns, name, queue, cq=queue, pods=pods, cpu=str(cpu), memory=0, **kw)


# ---------------------------------------------------------------- scheduler_test.go: flavors

def test_second_flavor_when_the_first_has_no_candidates_may_stop_search() -> None:
    # scheduler_test.go "use second flavor when the first has no preemption candidates;
    # WhenCanPreempt: MayStopSearch": on-demand is full with an equal-priority workload
    # (no candidate), so the search goes on to spot even though MayStopSearch.
    flavors, nodes = pool("on-demand", "spot")
    queue = cq("other-alpha", quotas={"on-demand": {"cpu": (50, 50)}, "spot": {"cpu": 100}},
               within="LowerPriority", when_can_preempt="MayStopSearch")
    old = running_job("eng-alpha", "admitted", cq="other-alpha", cpu="50", memory=0,
                      nodes={"on-demand-node": 1}, flavors="on-demand")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[queue],
                      workloads=[old, cpu_job("eng-alpha", "new", "other-alpha", 20)]))
    assert admitted(d) == {"new": {"spot"}} and not d.evictions


def test_fall_back_to_the_next_flavor_when_borrowing_is_short() -> None:
    # scheduler_test.go "not enough resources to borrow, fallback to next flavor;
    # WhenCanPreempt: TryNextFlavor": eng-beta uses 45 of the cohort's 100 on-demand, so
    # eng-alpha's 60 (nominal 50, borrowing 50) fits on-demand only by reclaiming, which
    # its policy never does; spot (100) takes it.
    flavors, nodes = pool("on-demand", "spot")
    alpha = cq("eng-alpha", cohort="eng", quotas={"on-demand": {"cpu": (50, 50)}, "spot": {"cpu": 100}})
    beta = cq("eng-beta", cohort="eng", quotas={"on-demand": {"cpu": (50, 10)}, "spot": {"cpu": (0, 100)}},
              reclaim="Any", within="LowerPriority")
    existing = running_job("eng-beta", "existing", cq="eng-beta", pods=45, cpu="1", memory=0,
                           nodes={"on-demand-node": 45}, flavors="on-demand")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[alpha, beta],
                      workloads=[existing, cpu_job("eng-alpha", "new", "eng-alpha", 1, pods=60)]))
    assert admitted(d) == {"new": {"spot"}} and not d.evictions


def test_admit_to_the_second_flavor_when_the_first_needs_preemption() -> None:
    # scheduler_test.go "admit to second flavor when first needs preemption; WhenCanPreempt:
    # TryNextFlavor": the first flavor has a lower-priority victim, the second has room;
    # TryNextFlavor takes the second without preempting.
    flavors, nodes = pool("on-demand", "spot")
    queue = cq("cq", quotas={"on-demand": {"cpu": 10}, "spot": {"cpu": 10}}, within="LowerPriority")
    low = running_job("ns", "low", cq="cq", cpu="10", memory=0, priority=0,
                      nodes={"on-demand-node": 1}, flavors="on-demand")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[queue],
                      workloads=[low, cpu_job("ns", "high", "cq", 5, priority=10)]))
    assert admitted(d) == {"high": {"spot"}} and not d.evictions


def test_may_stop_search_preempts_in_the_first_flavor() -> None:
    # flavorassigner_test.go "preempt before try next flavor": with whenCanPreempt:
    # MayStopSearch the first flavor that needs preemption (and has a candidate) is taken.
    flavors, nodes = pool("on-demand", "spot")
    queue = cq("cq", quotas={"on-demand": {"cpu": 10}, "spot": {"cpu": 10}}, within="LowerPriority",
               when_can_preempt="MayStopSearch")
    low = running_job("ns", "low", cq="cq", cpu="10", memory=0, priority=0,
                      nodes={"on-demand-node": 1}, flavors="on-demand")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[queue],
                      workloads=[low, cpu_job("ns", "high", "cq", 5, priority=10)]))
    assert admitted(d) == {"high": {"on-demand"}} and evicted(d) == {"low": "Preempted"}


def test_when_can_borrow_may_stop_search_borrows_in_the_first_flavor() -> None:
    # flavorassigner_test.go "borrow before try next flavor": whenCanBorrow MayStopSearch
    # (the default) takes the first flavor that fits by borrowing; TryNextFlavor goes on
    # to a later flavor that fits without.
    flavors, nodes = pool("first", "second")
    for policy, want in (("MayStopSearch", "first"), ("TryNextFlavor", "second")):
        team = cq("team", cohort="c", quotas={"first": {"cpu": 0}, "second": {"cpu": 10}}, when_can_borrow=policy)
        lender = cq("lender", cohort="c", quotas={"first": {"cpu": 10}, "second": {"cpu": 0}})
        d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[team, lender],
                          workloads=[cpu_job("t", "w", "team", 5)]))
        assert admitted(d) == {"w": {want}}, policy


def test_resource_groups_take_their_flavors_independently() -> None:
    # scheduler_test.go "assign multiple resources and flavors": pod set one (cpu and
    # example.com/gpu) takes on-demand and model-a; pod set two takes spot once on-demand
    # has no quota left for it. (Each node carries a cpu flavor's label and the gpu
    # flavor's: a pod set's flavors select its nodes together.)
    flavors = [flavor("on-demand", node_labels={"cpu-pool": "on-demand"}),
               flavor("spot", node_labels={"cpu-pool": "spot"}),
               flavor("model-a", node_labels={"gpu-pool": "model-a"})]
    nodes = [node(f"{p}-node", cpu=1000, memory="4Ti", pods=1000, extra={"example.com/gpu": 100},
                  labels={"cpu-pool": p, "gpu-pool": "model-a"}) for p in ("on-demand", "spot")]
    beta = cq("eng-beta", quotas={"on-demand": {"cpu": 60}, "spot": {"cpu": 100},
                                  "model-a": {"example.com/gpu": 20}},
              groups=[["cpu"], ["example.com/gpu"]])
    w = workload("eng-beta", "new", cq="eng-beta", pod_sets=[
        pod_set("one", 10, cpu="6", memory=0, extra={"example.com/gpu": 1}),
        pod_set("two", 40, cpu="1", memory=0)])
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[beta], workloads=[w]))
    (a,) = d.admissions
    assert {ps.name: dict(ps.flavors) for ps in a.pod_sets} == {
        "one": {"cpu": "on-demand", "example.com/gpu": "model-a"}, "two": {"cpu": "spot"}}


# ---------------------------------------------------------------- scheduler_test.go: the cycle

def test_both_heads_fit_in_one_cycle_without_borrowing() -> None:
    # scheduler_test.go "admit in same cohort with no borrowing": two heads of one cohort
    # each fit their own nominal quota and are admitted in the same cycle.
    flavors, nodes = pool("on-demand")
    alpha = cq("eng-alpha", cohort="eng", quotas={"on-demand": {"cpu": 50}})
    beta = cq("eng-beta", cohort="eng", quotas={"on-demand": {"cpu": 50}})
    snap = snapshot(nodes=nodes, flavors=flavors, cqs=[alpha, beta],
                    workloads=[cpu_job("eng-alpha", "new", "eng-alpha", 1, pods=40),
                               cpu_job("eng-beta", "new", "eng-beta", 1, pods=40)])
    cycles = KueueCycles(snap)
    cycles.step()
    assert sorted(r.namespace for r in cycles.admitted) == ["eng-alpha", "eng-beta"]


def test_cannot_borrow_what_an_earlier_head_of_the_cycle_took() -> None:
    # scheduler_test.go "cannot borrow if cohort was assigned and would result in
    # overadmission" and "can borrow if cohort was assigned and will not result in
    # overadmission": heads not borrowing go first; the borrower is re-checked after them.
    flavors, nodes = pool("on-demand", "spot")
    alpha = cq("eng-alpha", cohort="eng", quotas={"on-demand": {"cpu": (50, 50)}, "spot": {"cpu": 100}})
    beta = cq("eng-beta", cohort="eng", quotas={"on-demand": {"cpu": (50, 10)}, "spot": {"cpu": (0, 100)}},
              reclaim="Any", within="LowerPriority")
    for beta_pods, admitted_in_cycle in ((56, False), (55, True)):
        snap = snapshot(nodes=nodes, flavors=flavors, cqs=[alpha, beta],
                        workloads=[cpu_job("eng-alpha", "alpha-new", "eng-alpha", 1, pods=45),
                                   cpu_job("eng-beta", "beta-new", "eng-beta", 1, pods=beta_pods)])
        cycles = KueueCycles(snap)
        cycles.step()
        assert (any(r.name == "beta-new" for r in cycles.admitted)) is admitted_in_cycle
        # Later cycles: 56 no longer fit on-demand (55 left), and eng-beta may not reclaim
        # while it borrows: it takes spot, borrowed from eng-alpha's 100.
        want = {"alpha-new": {"on-demand"}, "beta-new": {"on-demand" if admitted_in_cycle else "spot"}}
        assert admitted(plan(snap)) == want


def test_lending_limit_caps_the_borrower() -> None:
    # scheduler_test.go "workload exceeds lending limit when borrow in cohort": lend-a
    # (3, lending limit 2) and lend-b (2, lending 2); lend-b uses 2, so its "b" (3)
    # need... : lend-b's "b" (3) needs 3 beyond its 2 in use; lend-a lends at most 2.
    flavors, nodes = pool("default")
    lend_a = cq("lend-a", cohort="lend", quotas={"default": {"cpu": (3, None, 2)}})
    lend_b = cq("lend-b", cohort="lend", quotas={"default": {"cpu": (2, None, 2)}})
    a = running_job("lend", "a", cq="lend-b", cpu="2", memory=0, nodes={"default-node": 1}, flavors="default")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[lend_a, lend_b],
                      workloads=[a, cpu_job("lend", "b", "lend-b", 3)]))
    assert admitted(d) == {}


def test_a_borrowing_limit_too_small_with_a_lending_limit_waits() -> None:
    # scheduler_test.go "hierarchical cohort respects lending limit when borrowing":
    # cq-lender lends at most 1 of its 5; cq-borrower (0 nominal) uses 5 already... here
    # reduced to its rule: a borrower never takes more than the lender's lending limit.
    flavors, nodes = pool("on-demand")
    root = cohort("root")
    child = cohort("child", parent="root")
    lender = cq("cq-lender", cohort="child", quotas={"on-demand": {"cpu": (5, None, 1)}})
    borrower = cq("cq-borrower", cohort="child", quotas={"on-demand": {"cpu": 0}})
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[lender, borrower], cohorts=[root, child],
                      workloads=[cpu_job("b", "two", "cq-borrower", 2), cpu_job("b", "one", "cq-borrower", 1,
                                                                                created=ago(hours=2))]))
    assert admitted(d) == {"one": {"on-demand"}}


def test_capacity_held_for_a_lender_that_may_not_reclaim() -> None:
    # scheduler_test.go "capacity not blocked when lending clusterqueue can reclaim
    # (ReclaimWithinCohort=Any)" and "capacity blocked when lending clusterqueue not
    # guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)": A (2 GPUs, 1 used) has a
    # head needing 2 with no victim; B (0 GPUs) has a head of 1. Under Any, B borrows in
    # the same cycle; under LowerPriority, A holds its quota for that cycle and B waits
    # for the next (A's head is then set aside, so B gets the GPU in the end either way).
    flavors, nodes = pool("on-demand", gpu=8)
    for reclaim, b_in_first_cycle in (("Any", True), ("LowerPriority", False)):
        a = cq("ClusterQueueA", cohort="root", quotas={"on-demand": {GPU: 2}}, reclaim=reclaim)
        b = cq("ClusterQueueB", cohort="root", quotas={"on-demand": {GPU: 0}})
        a1 = running_job("eng-alpha", "a1-admitted", cq="ClusterQueueA", gpu=1, cpu="1", memory=0,
                         nodes={"on-demand-node": 1}, flavors="on-demand")
        snap = snapshot(nodes=nodes, flavors=flavors, cqs=[a, b], workloads=[
            a1, job("eng-alpha", "a2-pending", cq="ClusterQueueA", gpu=2, cpu=0, memory=0),
            job("eng-beta", "b1-pending", cq="ClusterQueueB", gpu=1, cpu=0, memory=0)])
        cycles = KueueCycles(snap)
        cycles.step()
        assert (any(r.name == "b1-pending" for r in cycles.admitted)) is b_in_first_cycle, reclaim
        assert set(admitted(plan(snap))) == {"b1-pending"}


def test_in_a_hierarchical_cohort_the_head_borrowing_less_goes_first() -> None:
    # scheduler_test.go "in a hierarchical cohort, workload borrowing less is scheduled
    # first": cohort "guaranteed" (4 cpu) under root holds queue "guaranteed" (0); queue
    # "best-effort" (0) sits at the root. Both heads ask 4 and borrow: "guaranteed" from
    # its own cohort (height 1), "best-effort" from the root (height 2), so "guaranteed"
    # goes first although its priority is lower, and "best-effort" no longer fits.
    flavors, nodes = pool("on-demand")
    root = cohort("root")
    guaranteed_cohort = cohort("guaranteed", parent="root", quotas={"on-demand": {"cpu": 4}})
    guaranteed = cq("guaranteed", cohort="guaranteed", quotas={"on-demand": {"cpu": 0}})
    best_effort = cq("best-effort", cohort="root", quotas={"on-demand": {"cpu": 0}})
    snap = snapshot(nodes=nodes, flavors=flavors, cqs=[guaranteed, best_effort], cohorts=[root, guaranteed_cohort],
                    workloads=[cpu_job("eng-alpha", "guaranteed", "guaranteed", 4, priority=0),
                               cpu_job("eng-alpha", "best-effort", "best-effort", 4, priority=3)])
    cycles = KueueCycles(snap)
    cycles.step()
    assert {r.name for r in cycles.admitted} == {"guaranteed"}
    assert set(admitted(plan(snap))) == {"guaranteed"}


# ---------------------------------------------------------------- scheduler_test.go: preemption

def test_partial_admission_preempts_for_what_it_can_get() -> None:
    # scheduler_test.go "partial admission single variable pod set, preempt first": 20
    # pods (at least 10) of 1 GPU, quota 20, a lower-priority workload holds 10: the full
    # count fits by preempting it, so the full count is asked and the victim goes.
    flavors, nodes = pool("model-a", gpu=100)
    beta = cq("eng-beta", quotas={"model-a": {GPU: 20}}, within="LowerPriority")
    old = running_job("eng-beta", "old", cq="eng-beta", pods=10, gpu=1, cpu=0, memory=0, priority=-4,
                      nodes={"model-a-node": 10}, flavors="model-a")
    new = job("eng-beta", "new", cq="eng-beta", pods=20, min_pods=10, gpu=1, cpu=0, memory=0, priority=4)
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[beta], workloads=[old, new]))
    assert evicted(d) == {"old": "Preempted"}
    assert [ps.count for ps in d.admissions[0].pod_sets] == [20]
    # "... preempt with partial admission": 30 pods cannot be had even by preempting: the
    # reducer finds 20, which preempts.
    new30 = job("eng-beta", "new", cq="eng-beta", pods=30, min_pods=10, gpu=1, cpu=0, memory=0, priority=4)
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[beta], workloads=[old, new30]))
    assert evicted(d) == {"old": "Preempted"}
    assert [ps.count for ps in d.admissions[0].pod_sets] == [20]


def test_a_preemptor_is_admitted_a_cycle_after_its_targets_are_evicted() -> None:
    # scheduler_test.go "preempt workloads in ClusterQueue and cohort" (its cycle): the
    # preemptor issues the evictions and waits; Kueue admits it in a later cycle.
    flavors, nodes = pool("default")
    queue = cq("cq", quotas={"default": {"cpu": 10}}, within="LowerPriority")
    low = running_job("ns", "low", cq="cq", cpu="10", memory=0, priority=0, nodes={"default-node": 1},
                      flavors="default")
    snap = snapshot(nodes=nodes, flavors=flavors, cqs=[queue],
                    workloads=[low, cpu_job("ns", "high", "cq", 10, priority=10)])
    cycles = KueueCycles(snap)
    cycles.step()
    assert not cycles.admitted and set(cycles.evictions) == {low.ref}
    cycles.step()
    assert {r.name for r in cycles.admitted} == {"high"}


def test_overlapping_preemption_targets_skip_the_second_preemptor() -> None:
    # scheduler_test.go "multiple preemptions skip overlapping preemption targets" (there
    # with fair sharing; the rule is the cycle's): other-gamma (0 cpu) borrows 9 of the
    # 3 + 3 + 3 its cohort lends; other-alpha's and other-beta's heads each fit their own 3
    # and would reclaim the same workload c1. The first in order (priority 100) preempts;
    # the second is skipped for this cycle. In the next cycle both fit.
    flavors, nodes = pool("default")
    alpha = cq("other-alpha", cohort="other", quotas={"default": {"cpu": 3}}, within="LowerPriority", reclaim="Any")
    beta = cq("other-beta", cohort="other", quotas={"default": {"cpu": 3}}, within="LowerPriority", reclaim="Any")
    gamma = cq("other-gamma", cohort="other", quotas={"default": {"cpu": 0}})
    bank = cq("resource-bank", cohort="other", quotas={"default": {"cpu": 3}})
    c1 = running_job("eng-gamma", "c1", cq="other-gamma", cpu="9", memory=0, nodes={"default-node": 1},
                     flavors="default")
    snap = snapshot(nodes=nodes, flavors=flavors, cqs=[alpha, beta, gamma, bank], workloads=[
        c1, cpu_job("eng-alpha", "preemptor", "other-alpha", 3, priority=100),
        cpu_job("eng-beta", "pretending-preemptor", "other-beta", 3, priority=99)])
    cycles = KueueCycles(snap)
    cycles.step()
    assert set(cycles.evictions) == {c1.ref}
    assert [e.for_[0].name for e in cycles.evictions.values()] == ["preemptor"]
    d = plan(snap)
    assert evicted(d) == {"c1": "Reclaimed"}
    assert set(admitted(d)) == {"preemptor", "pretending-preemptor"}


def test_no_flavor_is_taken_without_preemption_candidates() -> None:
    # scheduler_test.go "don't assign flavor if there are no candidates for preemption":
    # the queue is full of work it may not preempt: the head waits, nothing is evicted.
    flavors, nodes = pool("default")
    queue = cq("cq", quotas={"default": {"cpu": 10}}, within="LowerPriority")
    same = running_job("ns", "same", cq="cq", cpu="10", memory=0, priority=10, nodes={"default-node": 1},
                       flavors="default")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[queue],
                      workloads=[same, cpu_job("ns", "new", "cq", 5, priority=10)]))
    assert not d.admissions and not d.evictions


# ---------------------------------------------------------------- preemption_test.go

def preemption_snapshot(*workloads, within="LowerPriority", reclaim="Never", borrow="Never",
                        threshold=None, a_quota=6, b_quota=6, standalone=False, b_within="LowerPriority"):
    """preemption_test.go's shapes: "standalone" (one queue, no cohort), or "c1" and "c2"
    of one cohort; 6 cpu each, one flavor."""
    flavors, nodes = pool("default")
    c1 = cq("c1", cohort=None if standalone else "cohort", quotas={"default": {"cpu": a_quota}}, within=within,
            reclaim=reclaim, borrow_within=borrow, borrow_max_priority=threshold)
    c2 = cq("c2", cohort="cohort", quotas={"default": {"cpu": b_quota}}, within=b_within)
    return snapshot(nodes=nodes, flavors=flavors, cqs=[c1, c2], workloads=workloads)


def run_cpu(name, queue, cpu, priority=0, admitted_at=None):
    ns = {"c1": "one", "c2": "two"}[queue]
    return running_job(ns, name, cq=queue, cpu=str(cpu), memory=0, priority=priority,
                       nodes={"default-node": 1}, flavors="default", admitted=admitted_at)


def test_preempt_lowest_priority() -> None:
    # preemption_test.go "preempt lowest priority": of three running in c1 (low -1, mid
    # 0, high 1, 2 cpu each), a priority-1 workload of 2 cpu evicts the lowest.
    snap = preemption_snapshot(run_cpu("low", "c1", 2, -1), run_cpu("mid", "c1", 2, 0),
                               run_cpu("high", "c1", 2, 1), cpu_job("one", "in", "c1", 2, priority=1), standalone=True)
    assert evicted(plan(snap)) == {"low": "Preempted"}


def test_preempt_more_than_one() -> None:
    # preemption_test.go "preempt multiple": 4 cpu needed, the two lowest go.
    snap = preemption_snapshot(run_cpu("low", "c1", 2, -1), run_cpu("mid", "c1", 2, 0),
                               run_cpu("high", "c1", 2, 1), cpu_job("one", "in", "c1", 4, priority=1), standalone=True)
    assert evicted(plan(snap)) == {"low": "Preempted", "mid": "Preempted"}


def test_preempt_newer_workloads_first_among_equal_priority() -> None:
    # preemption_test.go "preempt newer workloads with the same priority": the most
    # recently admitted goes first.
    snap = preemption_snapshot(run_cpu("old", "c1", 3, 0, ago(hours=3)), run_cpu("new", "c1", 3, 0, ago(hours=1)),
                               cpu_job("one", "in", "c1", 3, priority=1), standalone=True)
    assert evicted(plan(snap)) == {"new": "Preempted"}


def test_minimal_set_keeps_what_need_not_go() -> None:
    # preemption_test.go "minimal set excludes low priority": removing in order until it
    # fits takes low (1) then mid (5); putting low back still fits.
    snap = preemption_snapshot(run_cpu("low", "c1", 1, -1), run_cpu("mid", "c1", 5, 0),
                               cpu_job("one", "in", "c1", 5, priority=1), standalone=True)
    assert evicted(plan(snap)) == {"mid": "Preempted"}


def test_reclaim_quota_from_a_borrower() -> None:
    # preemption_test.go "reclaim quota from borrower": c2 borrows 4 of c1's quota; c1's
    # workload fitting its nominal reclaims it whatever the priority (reclaim Any).
    c2_a = run_cpu("c2-a", "c2", 6, 10, ago(hours=2))
    c2_b = run_cpu("c2-b", "c2", 4, 10, ago(hours=1))    # the more recently admitted goes first
    c1_a = run_cpu("c1-a", "c1", 2, 0)
    for reclaim, want in (("Any", {"c2-b": "Reclaimed"}), ("LowerPriority", {}), ("Never", {})):
        snap = preemption_snapshot(c2_a, c2_b, c1_a, cpu_job("one", "in", "c1", 4, priority=0), reclaim=reclaim)
        assert evicted(plan(snap)) == want, reclaim


def test_no_reclaim_from_a_queue_within_its_quota() -> None:
    # preemption_test.go "can't reclaim quota from a queue that is not borrowing":
    # (c2 uses 6 of its 6, c1's other 6 are all used by its own higher-priority work).
    snap = preemption_snapshot(run_cpu("c2-a", "c2", 6, 0), run_cpu("c1-a", "c1", 6, 10),
                               cpu_job("one", "in", "c1", 2, priority=5), reclaim="Any")
    d = plan(snap)
    assert not d.evictions and not d.admissions


def test_borrow_within_cohort_below_the_threshold_only() -> None:
    # preemption_test.go "use BorrowWithinCohort; allow preempting a lower-priority
    # workload from another ClusterQueue while borrowing" and "... don't allow preempting
    # a lower-priority workload with priority above MaxPriorityThreshold".
    def snap(threshold):
        return preemption_snapshot(run_cpu("c2-a", "c2", 10, 1), cpu_job("one", "in", "c1", 8, priority=10),
                                   reclaim="LowerPriority", borrow="LowerPriority", threshold=threshold)
    assert evicted(plan(snap(None))) == {"c2-a": "Reclaimed"}
    assert evicted(plan(snap(0))) == {}


def test_other_queues_candidates_go_before_the_preemptors_own() -> None:
    # preemption_test.go "preempt from other queues first" (CandidatesOrdering): c2 borrows
    # 4; its workload goes before c1's own of lower priority, and suffices.
    snap = preemption_snapshot(run_cpu("own-low", "c1", 2, -5), run_cpu("c2-a", "c2", 6, 0, ago(hours=2)),
                               run_cpu("c2-b", "c2", 4, 0, ago(hours=1)), cpu_job("one", "in", "c1", 4, priority=10),
                               reclaim="Any")
    assert evicted(plan(snap)) == {"c2-b": "Reclaimed"}
    # ... and is taken back (Kueue's add-back, in reverse) where the preemptor's own is
    # what makes room: c2 borrowing 2 frees too little before c2 is back at nominal.
    snap = preemption_snapshot(run_cpu("own-low", "c1", 4, -5), run_cpu("c2-a", "c2", 6, 0),
                               run_cpu("c2-b", "c2", 2, 0), cpu_job("one", "in", "c1", 4, priority=10),
                               reclaim="Any")
    assert evicted(plan(snap)) == {"own-low": "Preempted"}


# ---------------------------------------------------------------- preemption_hierarchical_test.go

def test_hierarchical_advantage_reclaims_without_borrow_within_cohort() -> None:
    # preemption_hierarchical_test.go "preempt with hierarchical advantage": the
    # preemptor fits its own nominal quota, so it has the advantage over a borrower in
    # another subtree and reclaims from it with borrowWithinCohort Never; the reclaim
    # policy (LowerPriority) still decides who may go.
    flavors, nodes = pool("default")
    root = cohort("r")
    left = cohort("left", parent="r")
    right = cohort("right", parent="r")
    preemptor_cq = cq("p", cohort="left", quotas={"default": {"cpu": 4}}, reclaim="LowerPriority")
    other = cq("o", cohort="right", quotas={"default": {"cpu": 0}})
    for theirs, want in ((0, {"borrower": "Reclaimed"}), (100, {})):
        victim = running_job("o", "borrower", cq="o", cpu="4", memory=0, priority=theirs,
                             nodes={"default-node": 1}, flavors="default")
        d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[preemptor_cq, other], cohorts=[root, left, right],
                          workloads=[victim, cpu_job("p", "mine", "p", 4, priority=10)]))
        assert evicted(d) == want, theirs
        assert set(admitted(d)) == ({"mine"} if want else set()), theirs


def test_no_hierarchical_advantage_then_priority_decides() -> None:
    # preemption_hierarchical_test.go "avoid queues within nominal quota" / priority
    # candidates: a preemptor that must borrow reclaims only lower priority, and only
    # where borrowWithinCohort allows.
    flavors, nodes = pool("default")
    root = cohort("r", quotas={"default": {"cpu": 4}})
    preemptor_cq = cq("p", cohort="r", quotas={"default": {"cpu": 0}}, reclaim="LowerPriority",
                      borrow_within="LowerPriority")
    other = cq("o", cohort="r", quotas={"default": {"cpu": 0}})
    for theirs, want in ((100, {}), (0, {"borrower": "Reclaimed"})):
        victim = running_job("o", "borrower", cq="o", cpu="4", memory=0, priority=theirs,
                             nodes={"default-node": 1}, flavors="default")
        d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[preemptor_cq, other], cohorts=[root],
                          workloads=[victim, cpu_job("p", "mine", "p", 4, priority=10)]))
        assert evicted(d) == want, theirs


# ---------------------------------------------------------------- scheduler_tas_test.go

def tas(nodes_per_rack: dict[str, list[int]]):
    nodes = [node(f"{r}-n{i}", gpu=g, cpu="64", memory="1Ti", labels={RACK: r, BLOCK: "b1"})
             for r, gpus in nodes_per_rack.items() for i, g in enumerate(gpus)]
    return nodes, [flavor("tas", topology="topo")], [topology("topo", BLOCK, RACK, HOSTNAME_LABEL)]


def tas_job(name, pods, gpu, topo, **kw):
    return job("ns", name, cq="cq", pods=pods, gpu=gpu, cpu="1", memory=0, topology=topo, **kw)


def test_tas_required_rack_best_fit() -> None:
    # scheduler_tas_test.go "workload required to fit in rack; BestFit": the smallest rack
    # that still takes every pod.
    nodes, flavors, topos = tas({"r1": [8, 8, 8], "r2": [8, 8]})
    snap = snapshot(nodes=nodes, flavors=flavors, topologies=topos, cqs=[cq("cq", quotas={"tas": {GPU: 64, "cpu": 640}})],
                    workloads=[tas_job("j", 2, 8, required(RACK))])
    (a,) = plan(snap).admissions
    assert set(a.pod_sets[0].pods_per_node()) == {"r2-n0", "r2-n1"}


def test_tas_unconstrained_least_free_capacity() -> None:
    # scheduler_tas_test.go "workload with unconstrained topology; LeastFreeCapacity":
    # the fullest node that still fits.
    nodes, flavors, topos = tas({"r1": [8, 2], "r2": [4]})
    snap = snapshot(nodes=nodes, flavors=flavors, topologies=topos, cqs=[cq("cq", quotas={"tas": {GPU: 64, "cpu": 640}})],
                    workloads=[tas_job("j", 1, 2, unconstrained())])
    (a,) = plan(snap).admissions
    assert set(a.pod_sets[0].pods_per_node()) == {"r1-n1"}


def test_tas_preferred_rack_spreads_when_no_rack_fits() -> None:
    # scheduler_tas_test.go "workload with preferred topology; fit in block, not in rack":
    # no rack takes all 4; the block does, over the fewest racks.
    nodes, flavors, topos = tas({"r1": [8, 8], "r2": [8, 8], "r3": [8]})
    snap = snapshot(nodes=nodes, flavors=flavors, topologies=topos, cqs=[cq("cq", quotas={"tas": {GPU: 64, "cpu": 640}})],
                    workloads=[tas_job("j", 3, 8, preferred(RACK))])
    (a,) = plan(snap).admissions
    racks = {n.split("-")[0] for n in a.pod_sets[0].pods_per_node()}
    assert len(racks) == 2


def test_tas_quota_fits_but_nodes_do_not_then_preempt_for_nodes() -> None:
    # scheduler_tas_test.go "preempt workload to fit in a rack": quota is ample, but no
    # rack has 2 free nodes; a lower-priority workload in the smaller rack goes, and the
    # preemptor takes that rack.
    nodes, flavors, topos = tas({"r1": [8, 8, 8], "r2": [8, 8]})
    blockers = [running(tas_job(f"b{i}", 1, 8, None, priority=0), nodes={n: 1})
                for i, n in enumerate(["r1-n0", "r1-n1", "r2-n0"])]
    queue = cq("cq", quotas={"tas": {GPU: 64, "cpu": 640}}, within="LowerPriority")
    d = plan(snapshot(nodes=nodes, flavors=flavors, topologies=topos, cqs=[queue],
                      workloads=blockers + [tas_job("rack-job", 2, 8, required(RACK), priority=10)]))
    assert set(admitted(d)) == {"rack-job"}
    assert len(d.evictions) == 1


def test_tas_no_preemption_when_even_an_empty_cluster_lacks_the_room() -> None:
    # scheduler_tas_test.go "workload does not fit in the topology even if empty": NoFit,
    # nothing evicted.
    nodes, flavors, topos = tas({"r1": [8, 8], "r2": [8]})
    queue = cq("cq", quotas={"tas": {GPU: 64, "cpu": 640}}, within="LowerPriority")
    low = running(tas_job("low", 1, 8, None, priority=0), nodes={"r1-n0": 1})
    d = plan(snapshot(nodes=nodes, flavors=flavors, topologies=topos, cqs=[queue],
                      workloads=[low, tas_job("too-big", 3, 8, required(RACK), priority=10)]))
    assert not d.admissions and not d.evictions


def test_a_topology_request_on_a_flavor_without_a_topology_waits() -> None:
    # flavorassigner_test.go / tas_flavorassigner.go "does not support TopologyAwareScheduling".
    flavors, nodes = pool("plain")
    d = plan(snapshot(nodes=nodes, flavors=flavors, cqs=[cq("cq", quotas={"plain": {"cpu": 10}})],
                      workloads=[job("ns", "j", cq="cq", cpu="1", memory=0, topology=required(HOSTNAME_LABEL))]))
    assert not d.admissions


def test_reclaim_from_a_queue_that_borrows_only_after_the_plans_admissions() -> None:
    # Kueue reclaims from a queue that borrows when the preemptor is tried, whatever it did
    # before (preemption.go: candidates of queues above nominal now). c1's first head
    # ("huge") never fits, so "borrower" is admitted (c2 at 10 of its nominal 6) a cycle
    # before "late" (c1, 4 <= its nominal 6) is tried and reclaims: candidates in Kueue's
    # order, lower priority first, so c2's running "old" (priority 0) goes before the
    # borrower (priority 5), and c2 is back within nominal. The end state supports it
    # (planner.verify: c2 borrows with the plan's admissions made), so greedy keeps it.
    snap = preemption_snapshot(run_cpu("old", "c2", 6, 0, ago(hours=2)),
                               cpu_job("two", "borrower", "c2", 4, priority=5, created=ago(hours=3)),
                               cpu_job("one", "huge", "c1", 100, priority=9),
                               cpu_job("one", "late", "c1", 4, priority=0), reclaim="Any", b_within="Never")
    cycles = KueueCycles(snap)
    cycles.step()
    assert {r.name for r in cycles.admitted} == {"borrower"}
    d = plan(snap)
    assert evicted(d) == {"old": "Reclaimed"}
    assert set(admitted(d)) == {"late", "borrower"}
