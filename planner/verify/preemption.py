"""The eviction rules: what an eviction names (a running workload of the snapshot, once,
a known reason, a finite cost, admissions of this plan), Kueue's preemption policies
(who may evict whom, `preemption_verdict`), and waitForPodsReady's evictions (for
nobody, when Kueue's condition holds, with the next requeue and its backoff). Whether
an eviction was needed at all is planner/verify/needed.py's rule. Models and
planner.verify.index only, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

from models import Eviction, ObjectRef, Snapshot, Workload, WorkloadState
from planner.verify.index import (
    EVICTION_REASONS, FR, MAX_NAMED, READINESS_REASONS, AdmittedEntry, SnapshotIndex, charge, cohort_root, listed_once,
    pod_set_of, quota_table,
)
from planner.verify.violation import Rule, Violation


def check_evictions(ix: SnapshotIndex, evictions: tuple[Eviction, ...], admitted: Mapping[ObjectRef, AdmittedEntry],
                     out: list[Violation]) -> set[ObjectRef]:
    """Only running, preemptible workloads, once each, for admissions of this plan
    that Kueue's preemption policies allow to evict them."""
    evicted: set[ObjectRef] = set()
    for eviction in evictions:
        ref = eviction.workload
        workload = listed_once(ix, ref, evicted, Rule.EVICTION, "evicted", out)
        if workload is None:
            continue
        if workload.state is not WorkloadState.RUNNING:
            out.append(Violation(Rule.EVICTION, f"{ref}: evicted but it is {workload.state.value}, not running",
                                 workloads=(ref,)))
        else:
            evicted.add(ref)
        if ref in admitted:
            out.append(Violation(Rule.EVICTION, f"{ref}: both evicted and admitted in the same plan", workloads=(ref,)))
        if eviction.reason not in EVICTION_REASONS:
            out.append(Violation(Rule.EVICTION, f"{ref}: eviction reason {eviction.reason!r} is not one of {sorted(EVICTION_REASONS)}",
                                 workloads=(ref,)))
        if not (isinstance(eviction.cost, (int, float)) and 0 <= eviction.cost < float("inf")):
            out.append(Violation(Rule.EVICTION, f"{ref}: eviction cost {eviction.cost!r} is not a finite number >= 0",
                                 workloads=(ref,)))
        for target in eviction.for_:
            if target not in admitted:
                out.append(Violation(Rule.EVICTION, f"{ref}: evicted for {target}, which this plan does not admit",
                                     workloads=(ref, target)))
    ix.borrowing_after = _borrowing_with_victims(ix, admitted, evicted)
    for eviction in evictions:
        workload = ix.workloads.get(eviction.workload)
        if workload is None:
            continue
        if eviction.reason in READINESS_REASONS:
            _check_readiness(ix.snapshot, workload, eviction, out)
        else:
            _check_preemption_policy(ix, workload, eviction, admitted, out)
    return evicted


def _check_readiness(snapshot: Snapshot, workload: Workload, eviction: Eviction, out: list[Violation]) -> None:
    """A waitForPodsReady eviction only where Kueue's condition holds at the planning time:
    waitForPodsReady on; some pod set with fewer pods Ready or Succeeded than admitted;
    never seen Ready and `timeout` passed since admission, or seen Ready and then not,
    and `recoveryTimeout` (default: the timeout; 0: off) passed since. For nobody. The
    requeue it records is the next count with backoff base*2^(n-1) capped at max; past
    `backoffLimitCount` it must be Deactivated instead."""
    ref, config, now = workload.ref, snapshot.kueue_config.wait_for_pods_ready, snapshot.now
    if workload.state is not WorkloadState.RUNNING:
        return   # reported by the caller
    if eviction.reason == "Deactivated" and workload.deactivated is not None:
        if eviction.for_:
            out.append(Violation(Rule.READINESS, f"{ref}: a Deactivated eviction is for nobody, not for {eviction.for_[0]}",
                                 workloads=(ref,)))
        return   # deactivated by hand (stowplan.io/deactivated): evicted whatever its pods do
    if not config.enabled:
        out.append(Violation(Rule.READINESS, f"{ref}: evicted for {eviction.reason} but waitForPodsReady is off",
                             workloads=(ref,)))
        return
    if eviction.for_:
        out.append(Violation(Rule.READINESS, f"{ref}: a {eviction.reason} eviction is for nobody, not for {eviction.for_[0]}",
                             workloads=(ref,)))
    counts = workload.pods_ready
    if counts is None or all(ready >= admitted for ready, admitted in counts.values()):
        out.append(Violation(Rule.READINESS, f"{ref}: evicted for {eviction.reason} but its pods are "
                             f"{'not known' if counts is None else 'all Ready'}", workloads=(ref,)))
        return
    if workload.pods_ready_at is None:
        since, limit = workload.admitted_at, config.timeout_seconds
    else:
        since = workload.pods_not_ready_at
        limit = config.timeout_seconds if config.recovery_timeout_seconds is None else config.recovery_timeout_seconds
        if limit <= 0:
            since = None
    if since is None or now - since < limit:
        out.append(Violation(Rule.READINESS, f"{ref}: evicted for {eviction.reason} before its pods' time ran out "
                             f"({'no start time' if since is None else f'{now - since:.0f}s of {limit:g}s'})", workloads=(ref,)))
        return
    strategy = config.requeuing_strategy
    count = workload.requeue_count + 1
    if strategy.backoff_limit_count is not None and count > strategy.backoff_limit_count:
        if eviction.reason != "Deactivated":
            out.append(Violation(Rule.READINESS, f"{ref}: requeue {count} exceeds backoffLimitCount {strategy.backoff_limit_count}: "
                                 f"it must be Deactivated, not {eviction.reason}", workloads=(ref,)))
        return
    wait = min(strategy.backoff_base_seconds * 2 ** min(count - 1, 62), strategy.backoff_max_seconds)
    if eviction.reason != "PodsReadyTimeout":
        out.append(Violation(Rule.READINESS, f"{ref}: requeue {count} is within backoffLimitCount: the reason is PodsReadyTimeout, "
                             f"not {eviction.reason}", workloads=(ref,)))
    elif eviction.requeue_count != count or eviction.requeue_at is None or abs(eviction.requeue_at - (now + wait)) > 1e-6:
        out.append(Violation(Rule.READINESS, f"{ref}: PodsReadyTimeout must record requeue {count} at now + {wait:g}s, not "
                             f"{eviction.requeue_count} at {eviction.requeue_at}", workloads=(ref,)))


def _borrowing_with_victims(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry],
                            evicted: set[ObjectRef]) -> dict[str, dict[FR, int]]:
    """Per ClusterQueue, by how much it would use more than its nominal quota with every
    admission of the plan made and none of its evictions (flavor/resource -> amount
    above nominal): Kueue judges "borrowing" when it preempts, and some order of the
    plan's steps has the queue that full then."""
    snap = ix.snapshot
    usage: dict[str, dict[FR, int]] = defaultdict(lambda: defaultdict(int))
    for w in snap.workloads:
        if w.state is WorkloadState.RUNNING and w.cluster_queue in snap.cluster_queues:
            charge(usage, w.queue_name, ix.coverage[w.queue_name], w, w.assignment)
    for entry in admitted.values():
        name = entry.admission.cluster_queue
        if name in snap.cluster_queues:
            charge(usage, name, ix.coverage[name], entry.workload, [psa for _, psa in entry.pairs])
    out: dict[str, dict[FR, int]] = {}
    for name, per_fr in usage.items():
        table = quota_table(snap.cluster_queues[name].resource_groups)
        over = {fr: v - table.get(fr, (0, None, None))[0] for fr, v in per_fr.items()
                if v > table.get(fr, (0, None, None))[0]}
        if over:
            out[name] = over
    return out


def _check_preemption_policy(ix: SnapshotIndex, workload: Workload, eviction: Eviction,
                             admitted: Mapping[ObjectRef, AdmittedEntry], out: list[Violation]) -> None:
    """Who may be evicted, and for whom.

    Never non-preemptible work, never work younger than policy.minimum_runtime_seconds
    (measured from admitted_at; work with no admitted_at is not held back). And at
    least one workload of `for_` admitted by this plan must be allowed to evict it by
    its ClusterQueue's spec.preemption (see `preemption_verdict`), with the reason
    that rule gives: Preempted within the queue, Reclaimed across the cohort.
    """
    ref, snapshot = workload.ref, ix.snapshot
    if workload.non_preemptible:
        out.append(Violation(Rule.PREEMPTION, f"{ref}: evicted but it is non-preemptible", workloads=(ref,)))
    minimum = snapshot.policy.minimum_runtime_seconds
    if minimum > 0 and workload.admitted_at is not None:
        ran = snapshot.now - workload.admitted_at
        if ran < minimum:
            out.append(Violation(Rule.PREEMPTION, f"{ref}: evicted after {ran:.0f}s running, minimum runtime is {minimum:.0f}s",
                                 workloads=(ref,)))
    if workload.state is not WorkloadState.RUNNING:
        return  # reported above
    if not eviction.for_:
        out.append(Violation(Rule.PREEMPTION, f"{ref}: evicted for no workload; an eviction must make room for an admission of this plan",
                             workloads=(ref,)))
        return
    refusals: list[str] = []
    for target in eviction.for_:
        entry = admitted.get(target)
        if entry is None:
            continue  # reported by the caller
        reason, why = preemption_verdict(ix, entry.workload, entry.admission.cluster_queue, workload,
                                          borrows_alone(ix, entry))
        if reason is None:
            refusals.append(f"not for {target}: {why}")
        elif reason != eviction.reason:
            refusals.append(f"for {target} the reason is {reason}, not {eviction.reason}")
        else:
            return
    if refusals:
        out.append(Violation(Rule.PREEMPTION, f"{ref}: eviction not allowed by the preemption policies: " + "; ".join(refusals[:MAX_NAMED]),
                             workloads=(ref,)))


def preemption_verdict(ix: SnapshotIndex, preemptor: Workload, cq_name: str, victim: Workload,
                        borrows: bool) -> tuple[str | None, str]:
    """Kueue's rules on base priorities: ("Preempted" | "Reclaimed", "") or (None, why not).

    Same ClusterQueue, withinClusterQueue: LowerPriority (victim's priority below the
    preemptor's) or LowerOrNewerEqualPriority (below, or equal and the victim queued
    later). Another ClusterQueue of the same cohort tree: only one that was borrowing
    before the plan (using more than its nominal quota of some flavor/resource), and
    reclaimWithinCohort Any, or LowerPriority with a lower priority; when the preemptor
    borrows (its admission alone takes its queue above nominal), borrowWithinCohort
    must also be LowerPriority, with a lower priority at most maxPriorityThreshold,
    unless Kueue's Configuration turns fair sharing on: then a borrowing preemptor may
    reclaim too (Kueue's canPreemptWhileBorrowing), its shares deciding which victims.
    """
    cq = ix.snapshot.cluster_queues.get(cq_name)
    if cq is None:
        return None, f"ClusterQueue {cq_name} does not exist"
    policy = cq.preemption
    mine, theirs = preemptor.priority, victim.priority
    if victim.cluster_queue == cq.name:
        rule = policy.within_cluster_queue
        if rule in ("LowerPriority", "LowerOrNewerEqualPriority") and theirs < mine:
            return "Preempted", ""
        if rule == "LowerOrNewerEqualPriority" and theirs == mine and victim.queued_at > preemptor.queued_at:
            return "Preempted", ""
        if rule not in ("LowerPriority", "LowerOrNewerEqualPriority"):
            return None, f"withinClusterQueue of ClusterQueue {cq.name} is {rule}"
        newer = " nor equal and queued later" if rule == "LowerOrNewerEqualPriority" else ""
        return None, f"withinClusterQueue is {rule} and priority {theirs} is not below {mine}{newer}"
    other = ix.snapshot.cluster_queues.get(victim.cluster_queue or "")
    if (other is None or other.inactive_reason is not None or cq.inactive_reason is not None
            or cohort_root(ix, cq) is None or cohort_root(ix, cq) != cohort_root(ix, other)):
        return None, f"ClusterQueue {victim.cluster_queue} is not in the cohort tree of ClusterQueue {cq.name}"
    if other.name not in _borrowing_before(ix) and other.name not in (ix.borrowing_after or {}):
        return None, f"ClusterQueue {other.name} was not borrowing"
    reclaim, borrow = policy.reclaim_within_cohort, policy.borrow_within_cohort
    if not (reclaim == "Any" or (reclaim == "LowerPriority" and theirs < mine)):
        tail = f" and priority {theirs} is not below {mine}" if reclaim == "LowerPriority" else ""
        return None, f"reclaimWithinCohort is {reclaim}{tail} (ClusterQueue {cq.name})"
    if borrows and not ix.snapshot.kueue_config.fair_sharing.enabled:
        # (with fair sharing Kueue asks no borrowWithinCohort: its strategies judge, fair.py)
        threshold = policy.borrow_max_priority_threshold
        if borrow != "LowerPriority":
            return None, f"the preemptor borrows and borrowWithinCohort is {borrow} (ClusterQueue {cq.name})"
        if theirs >= mine:
            return None, f"borrowWithinCohort is LowerPriority but priority {theirs} is not below {mine}"
        if threshold is not None and theirs > threshold:
            return None, f"borrowWithinCohort: priority {theirs} is above maxPriorityThreshold {threshold}"
    return "Reclaimed", ""


def _borrowing_before(ix: SnapshotIndex) -> set[str]:
    """ClusterQueues whose running work (before the plan) uses more than their nominal
    quota of some flavor/resource. Every flavored resource of an assignment counts;
    one the queue does not list has nominal 0."""
    if ix.borrowing is None:
        usage: dict[str, dict[FR, int]] = defaultdict(lambda: defaultdict(int))
        for w in ix.snapshot.workloads:
            if w.state is not WorkloadState.RUNNING or w.cluster_queue is None:
                continue
            for psa in w.assignment:
                pod_set = pod_set_of(w, psa.name)
                if pod_set is None:
                    continue
                for resource, flavor in psa.flavors.items():
                    usage[w.cluster_queue][(flavor, resource)] += psa.count * pod_set.request.get(resource)
        borrowing = set()
        for name, per_fr in usage.items():
            cq = ix.snapshot.cluster_queues.get(name)
            table = quota_table(cq.resource_groups) if cq is not None else {}
            if any(amount > table.get(fr, (0, None, None))[0] for fr, amount in per_fr.items()):
                borrowing.add(name)
        ix.borrowing = borrowing
        ix.usage_before = {name: dict(per_fr) for name, per_fr in usage.items()}
    return ix.borrowing


def borrows_alone(ix: SnapshotIndex, entry: AdmittedEntry) -> bool:
    """Would this admission alone take its queue above nominal (running work before the
    plan plus its own charges, with the flavors it was given)?"""
    _borrowing_before(ix)
    name = entry.admission.cluster_queue
    cq = ix.snapshot.cluster_queues.get(name)
    table = quota_table(cq.resource_groups) if cq is not None else {}
    used = dict(ix.usage_before.get(name, {}))
    for pod_set, psa in entry.pairs:
        for resource, flavor in psa.flavors.items():
            used[(flavor, resource)] = used.get((flavor, resource), 0) + psa.count * pod_set.request.get(resource)
            if used[(flavor, resource)] > table.get((flavor, resource), (0, None, None))[0]:
                return True
    return False


