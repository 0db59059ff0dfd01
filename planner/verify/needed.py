"""The verifier's eviction rule: an eviction is needed by whom it is for (REFERENCE §3).

Kueue evicts a running workload only for a pending one that its policies let preempt
it and that does not fit otherwise. A plan that evicts work of priority p while its
preemptors had room anyway, and hands the freed room to work that could not have
preempted it (another priority-p job of the victim's queue, say), "launders" the
eviction through them: Kueue would have evicted nothing.

The rule checked, for each workload the plan evicts by preemption (Preempted or
Reclaimed): put back every victim of the plan (the room "already free" is the room
free before any eviction), and take out of the plan the admissions that may not
preempt it but queue behind one that may, in its ClusterQueue (of a lower priority:
Kueue tries them after it, so the victim's room must not go to them). If then

  - every quota (each ClusterQueue and cohort, per flavor/resource) still holds, and
  - every admission left on a node now overfull can be placed again, one by one (the
    admissions that may not preempt the victim first, as Kueue may have admitted them
    in an earlier cycle; then those that may, by priority), with the flavors the plan
    gave it, on nodes with room, inside one domain of its required topology level,

the victim was not needed: the plan is refused. The placement is a constructive
search, so a refusal always names a placement that proves it; where the search finds
none (or a workload has several pod sets, or slices, which it does not place), the
eviction is taken as needed.

Why every victim, not the victim alone: Kueue decides each preemption on the state
of its cycle, and a later eviction (of lower work, for another preemptor) may free
room that the first preemptor ends up using while lower work takes the first
victim's. Asking of each victim alone would refuse Kueue's own plans (the family of
generated shapes has such members). The price: of several victims, the rule asks
whether they all were unneeded, not each one. Other admissions stay (those of other
ClusterQueues, say): Kueue may admit them in a cycle before the preemptor is tried.

Like all of planner/verify, this module must not import the code that makes plans.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Mapping

from models import Decisions, ObjectRef, PodSet, ResourceFlavor, Snapshot, Workload, WorkloadState, is_gpu
from models.resources import dominant_units
from planner.verify.entries import plan_entries
from planner.verify.index import (
    FR, MAX_NAMED, PREEMPTION_REASONS, AdmittedEntry, SnapshotIndex, VerifierQuotaTree, pairs_usage, pod_set_of,
)
from planner.verify.preemption import borrows_alone, preemption_verdict
from planner.verify.stable import PlanState, pods_in
from planner.verify.violation import Rule, Violation

Key = tuple[str, str]


def unneeded(snapshot: Snapshot, decisions: Decisions) -> list[Violation]:
    """The evictions `decisions` makes although nobody needed their room (the rule alone:
    Rule.NEEDED, the victim first, then the admissions that fit without it)."""
    ix = SnapshotIndex(snapshot)
    admitted, evicted = plan_entries(ix, decisions)
    found: list[Violation] = []
    _check(ix, decisions, admitted, evicted, found)
    return found


def check_needed(ix: SnapshotIndex, decisions: Decisions, admitted: Mapping[ObjectRef, AdmittedEntry],
                 evicted: set[ObjectRef], out: list[Violation]) -> None:
    """Append a violation for each preemption the plan makes that nobody needed, and
    for each the policy's bounds on churn refuse."""
    _check(ix, decisions, admitted, evicted, out)
    _check_churn(ix, decisions, admitted, out)


def _check_churn(ix: SnapshotIndex, decisions: Decisions, admitted: Mapping[ObjectRef, AdmittedEntry],
                 out: list[Violation]) -> None:
    """PlannerPolicy's bounds: maxEvictionsPerCycle; minGainPerEviction (for each
    priority p of a victim, the volume admitted above p, less what is evicted above p,
    covers the volume evicted at or below p plus the gain per such eviction, in
    dominant-resource units); protectRunningAfterSeconds (past it, only reclaim evicts)."""
    policy = ix.snapshot.policy
    preempted = [e for e in decisions.evictions if e.reason in PREEMPTION_REASONS and e.workload in ix.workloads]
    if policy.max_evictions_per_cycle is not None and len(preempted) > policy.max_evictions_per_cycle:
        out.append(Violation(Rule.CHURN, f"{len(preempted)} evictions, more than maxEvictionsPerCycle {policy.max_evictions_per_cycle}",
                             workloads=tuple(e.workload for e in preempted)))
    after = policy.protect_running_after_seconds
    for eviction in preempted:
        victim = ix.workloads[eviction.workload]
        if after is not None and victim.admitted_at is not None and eviction.reason != "Reclaimed" \
                and ix.snapshot.now - victim.admitted_at >= after:
            out.append(Violation(Rule.CHURN, f"{victim.ref}: evicted ({eviction.reason}) after {ix.snapshot.now - victim.admitted_at:.0f}s "
                                 f"running; protectRunningAfterSeconds {after:g} lets only reclaim evict it",
                                 workloads=(victim.ref,)))
    gain = policy.min_gain_per_eviction
    if gain <= 0 or not preempted:
        return
    won = [(e.workload.priority, _volume(ix, e.workload, [(ps, psa.count) for ps, psa in e.pairs]))
           for e in admitted.values()]
    lost = [(v.priority, _volume(ix, v, [(ps, psa.count) for psa in v.assignment for ps in v.pod_sets
                                         if ps.name == psa.name]))
            for v in (ix.workloads[e.workload] for e in preempted)]
    for p in sorted({priority for priority, _ in lost}):
        above = sum(v for q, v in won if q > p) - sum(v for q, v in lost if q > p)
        paid = sum(v + gain for q, v in lost if q <= p)
        if above < paid - 1e-6:
            out.append(Violation(Rule.CHURN, f"evictions at or below priority {p} free {paid - gain * sum(q <= p for q, _ in lost):g} units "
                                 f"for {above:g} admitted above it, less than they cost plus minGainPerEviction {gain:g} each",
                                 workloads=tuple(e.workload for e in preempted)))


def _volume(ix: SnapshotIndex, w: Workload, counts: list[tuple[PodSet, int]]) -> float:
    """Dominant-resource units (REFERENCE §3): GPUs where the workload asks for GPUs in
    any pod set, else cores."""
    extra = ix.snapshot.policy.gpu_resources

    def gpus(ps: PodSet) -> int:
        return sum(v for k, v in ps.request.items() if is_gpu(k) or k in extra)

    if any(gpus(ps) for ps in w.pod_sets):
        return float(sum(count * gpus(ps) for ps, count in counts))
    return sum(count * dominant_units(ps.request) for ps, count in counts)


def _check(ix: SnapshotIndex, decisions: Decisions, admitted: Mapping[ObjectRef, AdmittedEntry],
           evicted: set[ObjectRef], out: list[Violation]) -> None:
    victims = [ix.workloads[e.workload] for e in decisions.evictions
               if e.reason in PREEMPTION_REASONS and e.workload in ix.workloads
               and ix.workloads[e.workload].state is WorkloadState.RUNNING
               and e.workload not in admitted]
    if not victims or not admitted:
        return
    after = PlanState(ix, admitted, evicted)
    tree = VerifierQuotaTree(ix)
    verdicts: dict[tuple[frozenset[ObjectRef], frozenset[ObjectRef]], list[ObjectRef] | None] = {}
    for victim in sorted(victims, key=lambda w: w.ref):
        preemptors, excluded = _sides(ix, admitted, victim)
        if not preemptors:
            continue   # the policy check reports it
        # Every victim is put back, so victims with the same sides share a verdict.
        key = (frozenset(e.workload.ref for e in preemptors), frozenset(e.workload.ref for e in excluded))
        if key not in verdicts:
            verdicts[key] = _fit_without(ix, after, tree, admitted, preemptors, excluded, victims)
        found = verdicts[key]
        if found is not None:
            out.append(Violation(Rule.NEEDED, f"{victim.ref}: evicted although nobody needed its room: with it and "
                                 f"every other victim kept, {_named(found)} still fit, where this plan "
                                 "places them or elsewhere (an eviction is needed by whom it is for)",
                                 workloads=(victim.ref, *found)))


def _named(refs: list[ObjectRef]) -> str:
    shown = ", ".join(str(r) for r in refs[:MAX_NAMED])
    return shown + (f" and {len(refs) - MAX_NAMED} more" if len(refs) > MAX_NAMED else "")


def _sides(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry],
           victim: Workload) -> tuple[list[AdmittedEntry], list[AdmittedEntry]]:
    """The admissions allowed to preempt `victim`; and those that are not but queue
    behind one that is, in its ClusterQueue (lower priority): Kueue tries them only
    after it, so the victim's room must not go to them."""
    preemptors: list[AdmittedEntry] = []
    others: list[AdmittedEntry] = []
    for entry in admitted.values():
        reason, _ = preemption_verdict(ix, entry.workload, entry.admission.cluster_queue, victim,
                                        borrows_alone(ix, entry))
        (preemptors if reason is not None else others).append(entry)
    top: dict[str, int] = {}
    for entry in preemptors:
        cq = entry.admission.cluster_queue
        top[cq] = max(top.get(cq, entry.workload.priority), entry.workload.priority)
    excluded = [e for e in others if e.workload.priority < top.get(e.admission.cluster_queue, e.workload.priority)]
    return preemptors, excluded


def _fit_without(ix: SnapshotIndex, after: PlanState, tree: VerifierQuotaTree,
                 admitted: Mapping[ObjectRef, AdmittedEntry], preemptors: list[AdmittedEntry],
                 excluded: list[AdmittedEntry], back: list[Workload]) -> list[ObjectRef] | None:
    """The preemptors, if they all fit with the `back` victims running and the excluded
    admissions gone (the proof that the victims were not needed); else None."""
    # Quota: the plan's usage, less the excluded admissions, plus the victims put back.
    usage: dict[str, dict[FR, int]] = {name: dict(per) for name, per in after.usage.items()}
    for entry in excluded:
        mine = usage.setdefault(entry.admission.cluster_queue, {})
        for fr, amount in _entry_usage(ix, entry).items():
            mine[fr] = mine.get(fr, 0) - amount
    grown: set[tuple[str, FR]] = set()
    for w in back:
        cq = w.cluster_queue or ""
        mine = usage.setdefault(cq, {})
        for fr, amount in _workload_usage(w, ix.coverage.get(cq, {})).items():
            mine[fr] = mine.get(fr, 0) + amount
            grown.add((cq, fr))
    if any(_over(tree, fr, usage, ("cq", cq)) for cq, fr in sorted(grown)):
        return None
    # Nodes: the plan's free room, the excluded admissions gone, the victims back.
    free: dict[str, dict[str, int]] = {}

    def room(node: str) -> dict[str, int]:
        if node not in free:
            free[node] = dict(after.free().get(node, {}))
        return free[node]

    def move(used: Mapping[str, Mapping[str, int]], sign: int) -> None:
        for node, amounts in used.items():
            if node in ix.nodes:
                here = room(node)
                for resource, amount in amounts.items():
                    here[resource] = here.get(resource, 0) + sign * amount

    for entry in excluded:
        move(_entry_on_nodes(entry), 1)
    for w in back:
        move(_on_nodes(w), -1)
    overfull = {n for n in list(free) if any(v < 0 for v in free[n].values())}
    gone = {id(e) for e in excluded}
    movers = [e for e in admitted.values() if id(e) not in gone and set(_entry_on_nodes(e)) & overfull]
    for entry in movers:
        move(_entry_on_nodes(entry), 1)
    if any(v < 0 for n in overfull for v in room(n).values()):
        return None   # running work does not fit back as it ran
    allowed = {id(e) for e in preemptors}
    order = sorted((e for e in movers if id(e) not in allowed), key=lambda e: e.workload.ref) + \
        sorted((e for e in movers if id(e) in allowed), key=lambda e: (-e.workload.priority, e.workload.ref))
    for entry in order:
        placed = _place(ix, after, entry, room)
        if placed is None:
            return None
        move(placed, -1)
    return sorted(e.workload.ref for e in preemptors)


def _over(tree: VerifierQuotaTree, fr: FR, usage: Mapping[str, Mapping[FR, int]], start: Key) -> bool:
    """Is some node on the way from `start` to its root over its limit (quota plus
    borrowingLimit below a cohort; the subtree's quota at the root)?"""
    subtree, guaranteed = tree.subtree_and_guaranteed(fr)
    used = tree.usage(fr, usage, guaranteed)
    key: Key | None = start
    while key is not None:
        parent = tree.parent.get(key)
        borrowing = tree.quota(key, fr)[1] if key in tree.limits else None
        if parent is None:
            if used.get(key, 0) > subtree.get(key, 0):
                return True
        elif borrowing is not None and used.get(key, 0) > subtree.get(key, 0) + borrowing:
            return True
        key = parent
    return False


def _workload_usage(w: Workload, coverage: Mapping[str, int]) -> dict[FR, int]:
    pairs = [(pod_set, psa) for psa in w.assignment if (pod_set := pod_set_of(w, psa.name)) is not None]
    return pairs_usage(pairs, coverage)


def _entry_usage(ix: SnapshotIndex, entry: AdmittedEntry) -> dict[FR, int]:
    return pairs_usage(entry.pairs, ix.coverage.get(entry.admission.cluster_queue, {}))


def _on_nodes(w: Workload) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for psa in w.assignment:
        pod_set = next((ps for ps in w.pod_sets if ps.name == psa.name), None)
        if pod_set is None:
            continue
        for node, count in psa.pods_per_node().items():
            for resource, amount in pod_set.request.items():
                out[node][resource] += count * amount
    return out


def _entry_on_nodes(entry: AdmittedEntry) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod_set, psa in entry.pairs:
        for node, count in psa.pods_per_node().items():
            for resource, amount in pod_set.request.items():
                out[node][resource] += count * amount
    return out


def _place(ix: SnapshotIndex, after: PlanState, entry: AdmittedEntry,
           room: Callable[[str], dict[str, int]]) -> dict[str, dict[str, int]] | None:
    """Node -> what the admission's pods use there, on nodes with room now, with its
    planned flavors, inside one domain of a required level; None when this search
    finds no place (one pod set, no slices: the others are not placed here)."""
    if len(entry.pairs) != 1:
        return None
    pod_set, psa = entry.pairs[0]
    request = pod_set.topology
    if request.slices:
        return None
    flavors = [ix.snapshot.flavors[f] for f in sorted(set(psa.flavors.values())) if f in ix.snapshot.flavors]
    eligible = _eligible(after, pod_set, flavors)
    fits = {n: pods_in(room(n), pod_set) for n in eligible}
    count = psa.count
    required = request.level if request.mode == "required" and request.level else None
    levels = next((lv for f in flavors if (lv := ix.flavor_levels(f)) is not None), None)
    nodes = sorted(n for n, k in fits.items() if k > 0)
    if required is not None:
        if levels is None or required not in levels:
            return None
        depth = levels.index(required) + 1
        domains: dict[tuple[str | None, ...], list[str]] = defaultdict(list)
        for n in nodes:
            domains[after.path(n, levels)[:depth]].append(n)
        fitting = sorted((sum(fits[n] for n in members), key) for key, members in domains.items()
                         if sum(fits[n] for n in members) >= count)
        if not fitting:
            return None
        nodes = domains[fitting[0][1]]   # the tightest domain that holds it
    out: dict[str, dict[str, int]] = {}
    left = count
    for n in nodes:
        take = min(left, fits[n])
        if take:
            out[n] = {r: take * a for r, a in pod_set.request.items()}
            left -= take
        if not left:
            return out
    return None


def _eligible(after: PlanState, pod_set: PodSet, flavors: list[ResourceFlavor]) -> list[str]:
    """Nodes the pod set may use with these flavors (the stability rule's own test)."""
    return sorted(after.pods_fitting(pod_set, flavors))
