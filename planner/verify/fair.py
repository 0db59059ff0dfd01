"""The verifier's fair-sharing rule: evictions across queues as Kueue's strategies allow.

With fair sharing on (Kueue's Configuration), Kueue preempts a workload of another
ClusterQueue Q for a preemptor of queue P only when its configured strategy allows it,
comparing dominant resource shares (Kueue's `dominantResourceShare`, recomputed here
on its own: per resource, what a node uses above its subtree's nominal quota summed
over flavors, x 1000 over what its parent's tree could lend, the largest such ratio,
divided by the node's weight; weight 0 while borrowing is above every other share):

  LessThanOrEqualToFinalShare   share(P) after the plan <= share(Q) after the plan
  LessThanInitialShare          share(P) after the plan <  share(Q) before this eviction
                                (after the plan, with this victim back: Kueue removes
                                victims one at a time, this one possibly the last)

A list of both allows what either allows; a preemptor whose queue borrows nothing
after the plan preempts regardless (Kueue v0.17's FairSharingPreemptWithinNominal,
on by default). Every cross-queue eviction of the plan is checked against every
preemptor it names in another queue. Like all of planner/verify, this
module must not import the code that makes plans.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Mapping, Sequence

from models import Decisions, ObjectRef, PodSet, PodSetAssignment, Snapshot, Workload, WorkloadState
from models.kueue_config import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from planner.verify.index import FR, AdmittedEntry, SnapshotIndex, VerifierQuotaTree, node_problems
from planner.verify.violation import Rule, Violation

Key = tuple[str, str]


def _charged(ix: SnapshotIndex, cq: str, pairs: Sequence[tuple[PodSet, PodSetAssignment]],
             usage: dict[str, dict[FR, int]], sign: int) -> None:
    covered = ix.coverage.get(cq, {})
    target = usage.setdefault(cq, defaultdict(int))
    for pod_set, psa in pairs:
        for resource, flavor in psa.flavors.items():
            if resource in covered:
                target[(flavor, resource)] += sign * pod_set.request.get(resource) * psa.count


def usage_before_after(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry],
                       evicted: set[ObjectRef]) -> tuple[dict[str, dict[FR, int]], dict[str, dict[FR, int]]]:
    """Quota usage per ClusterQueue before the plan (running work) and after it."""
    snap = ix.snapshot
    before: dict[str, dict[FR, int]] = {}
    after: dict[str, dict[FR, int]] = {}
    for w in snap.workloads:
        if w.state is not WorkloadState.RUNNING or w.cluster_queue not in snap.cluster_queues:
            continue
        by_name = {ps.name: ps for ps in w.pod_sets}
        pairs = [(by_name[a.name], a) for a in w.assignment if a.name in by_name]
        _charged(ix, w.cluster_queue or "", pairs, before, 1)
        if w.ref not in evicted:
            _charged(ix, w.cluster_queue or "", pairs, after, 1)
    for entry in admitted.values():
        _charged(ix, entry.admission.cluster_queue, entry.pairs, after, 1)
    return before, after


class Shares:
    """Kueue's weighted dominant resource shares of every tree node, for one usage."""

    def __init__(self, ix: SnapshotIndex, tree: VerifierQuotaTree, usage: Mapping[str, Mapping[FR, int]]):
        self.ix, self.tree = ix, tree
        frs = sorted({fr for table in tree.limits.values() for fr in table})
        self.subtree: dict[FR, dict[Key, int]] = {}
        self.guaranteed: dict[FR, dict[Key, int]] = {}
        self.used: dict[FR, dict[Key, int]] = {}
        for fr in frs:
            self.subtree[fr], self.guaranteed[fr] = tree.subtree_and_guaranteed(fr)
            self.used[fr] = tree.usage(fr, usage, self.guaranteed[fr])
        self.frs = frs

    def weight(self, key: Key) -> float:
        snap = self.ix.snapshot
        if key[0] == "cq":
            cq = snap.cluster_queues.get(key[1])
            return cq.fair_weight if cq is not None else 1.0
        cohort = snap.cohorts.get(key[1])
        return cohort.fair_weight if cohort is not None else 1.0

    def potential(self, key: Key, fr: FR) -> float:
        parent = self.tree.parent.get(key)
        subtree = self.subtree[fr].get(key, 0)
        if parent is None:
            return float(subtree)
        available = self.guaranteed[fr].get(key, 0) + self.potential(parent, fr)
        limit = self.tree.quota(key, fr)[1]
        return float(min(available, subtree + limit) if limit is not None else available)

    def share(self, key: Key) -> tuple[float, float]:
        """(weight, unweighted ratio) of `key`; ratio 0 when it borrows nothing."""
        parent = self.tree.parent.get(key)
        if parent is None:
            return self.weight(key), 0.0
        borrowed: dict[str, int] = defaultdict(int)
        for fr in self.frs:
            above = self.used[fr].get(key, 0) - self.subtree[fr].get(key, 0)
            if above > 0:
                borrowed[fr[1]] += above
        lendable: dict[str, float] = defaultdict(float)
        for fr in self.frs:
            lendable[fr[1]] += self.potential(parent, fr)
        ratio = 0.0
        for resource, amount in borrowed.items():
            if lendable.get(resource, 0) > 0:
                ratio = max(ratio, amount * 1000.0 / lendable[resource])
        return self.weight(key), ratio


def compare(a: tuple[float, float], b: tuple[float, float]) -> int:
    """Kueue's CompareDRS: a weight-0 borrower above everything, else ratio / weight."""
    (wa, ra), (wb, rb) = a, b
    za, zb = wa == 0 and ra > 0, wb == 0 and rb > 0
    if za and zb:
        return (ra > rb) - (ra < rb)
    if za or zb:
        return 1 if za else -1
    sa = 0.0 if ra == 0 else ra / wa
    sb = 0.0 if rb == 0 else rb / wb
    if math.isclose(sa, sb, rel_tol=1e-9, abs_tol=1e-9):
        return 0
    return (sa > sb) - (sa < sb)


def check_fair_preemption(ix: SnapshotIndex, decisions: Decisions, admitted: Mapping[ObjectRef, AdmittedEntry],
                          evicted: set[ObjectRef], out: list[Violation]) -> None:
    snap: Snapshot = ix.snapshot
    config = snap.kueue_config.fair_sharing
    if not config.enabled or not decisions.evictions:
        return
    tree = VerifierQuotaTree(ix)
    before_usage, after_usage = usage_before_after(ix, admitted, evicted)
    after = Shares(ix, tree, after_usage)
    del before_usage
    with_victim: dict[tuple[Key, Key], dict[ObjectRef, tuple[float, float]]] = {}
    for eviction in decisions.evictions:
        victim = ix.workloads.get(eviction.workload)
        if victim is None or victim.cluster_queue is None:
            continue
        q: Key = ("cq", victim.cluster_queue)
        if q not in tree.parent:
            continue
        for ref in eviction.for_:
            preemptor = admitted.get(ref)
            if preemptor is None:
                continue
            p: Key = ("cq", preemptor.admission.cluster_queue)
            if p == q or p not in tree.parent:
                continue
            if after.share(p)[1] == 0:
                continue     # within its nominal quota: Kueue preempts regardless (FairSharingPreemptWithinNominal)
            # Kueue compares the two nodes just below the cohort the queues share (their
            # almost-least-common ancestors), not the queues themselves.
            p_node, q_node = _almost_lcas(tree, p, q)
            if p_node is None or q_node is None:
                continue
            share_p, final_q = after.share(p_node), after.share(q_node)
            q_key = (q, q_node)
            if q_key not in with_victim:
                with_victim[q_key] = {}
            if eviction.workload not in with_victim[q_key]:
                usage: dict[str, dict[FR, int]] = {k: defaultdict(int, t) for k, t in after_usage.items()}
                by_name = {ps.name: ps for ps in victim.pod_sets}
                _charged(ix, victim.cluster_queue, [(by_name[a.name], a) for a in victim.assignment
                                                     if a.name in by_name], usage, 1)
                with_victim[q_key][eviction.workload] = Shares(ix, tree, usage).share(q_node)
            last_q = with_victim[q_key][eviction.workload]
            allowed = ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE in config.preemption_strategies
                        and compare(share_p, final_q) <= 0)
                       or (LESS_THAN_INITIAL_SHARE in config.preemption_strategies
                           and compare(share_p, last_q) < 0))
            if not allowed:
                out.append(Violation(Rule.FAIRNESS, f"{eviction.workload} evicted for {ref} against fair sharing "
                                     f"({', '.join(config.preemption_strategies)}): {_named(p_node)}'s share after the plan "
                                     f"{_shown(share_p)}, {_named(q_node)}'s {_shown(final_q)} after, "
                                     f"{_shown(last_q)} before this eviction",
                                     workloads=(eviction.workload, ref), queue=victim.cluster_queue))


def _named(key: Key) -> str:
    return f"{'ClusterQueue' if key[0] == 'cq' else 'Cohort'} {key[1]}"


def _path(tree: VerifierQuotaTree, key: Key) -> list[Key]:
    out = [key]
    seen = {key}
    while (up := tree.parent.get(out[-1])) is not None and up not in seen:
        out.append(up)
        seen.add(up)
    return out


def _almost_lcas(tree: VerifierQuotaTree, p: Key, q: Key) -> tuple[Key | None, Key | None]:
    """The nodes just below the lowest cohort above both `p` and `q` (Kueue's getAlmostLCAs)."""
    p_path, q_path = _path(tree, p), _path(tree, q)
    mine = set(p_path[1:])
    lca = next((a for a in q_path[1:] if a in mine), None)
    if lca is None:
        return None, None
    return p_path[p_path.index(lca) - 1], q_path[q_path.index(lca) - 1]


def _shown(share: tuple[float, float]) -> str:
    weight, ratio = share
    if ratio == 0:
        return "0"
    return "infinite (weight 0)" if weight == 0 else f"{ratio / weight:.1f}"


# ---------------------------------------------------------------- a fair share left unmet

def _free_after(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef]) -> dict[str, dict[str, int]]:
    """Per node, what is free after the plan (allocatable - unmanaged - running kept - admitted)."""
    free: dict[str, dict[str, int]] = {}
    for node in ix.snapshot.nodes:
        free[node.name] = {r: v for r, v in (node.allocatable - node.unmanaged).items()}

    def take(workload_pod_sets: Mapping[str, PodSet], assignments: Sequence[PodSetAssignment]) -> None:
        for psa in assignments:
            pod_set = workload_pod_sets.get(psa.name)
            if pod_set is None:
                continue
            for values, count in psa.domains:
                if values and values[-1] in free:
                    table = free[values[-1]]
                    for resource, amount in pod_set.request.items():
                        table[resource] = table.get(resource, 0) - amount * count

    for w in ix.snapshot.workloads:
        if w.state is WorkloadState.RUNNING and w.ref not in evicted:
            take({ps.name: ps for ps in w.pod_sets}, w.assignment)
    for entry in admitted.values():
        take({ps.name: ps for ps, _ in entry.pairs}, [psa for _, psa in entry.pairs])
    return free


def _available(tree: VerifierQuotaTree, shares: Shares, key: Key, fr: FR) -> int:
    """Kueue's available(): what `key` may still take of `fr` under `shares`' usage."""
    used = shares.used[fr].get(key, 0)
    subtree = shares.subtree[fr].get(key, 0)
    parent = tree.parent.get(key)
    if parent is None:
        return subtree - used
    guaranteed = shares.guaranteed[fr].get(key, 0)
    local = max(0, guaranteed - used)
    above = _available(tree, shares, parent, fr)
    limit = tree.quota(key, fr)[1]
    if limit is not None:
        above = min(above, subtree - guaranteed - max(0, used - guaranteed) + limit)
    return local + max(0, above)


def check_fair_shares(ix: SnapshotIndex, decisions: Decisions, admitted: Mapping[ObjectRef, AdmittedEntry],
                      evicted: set[ObjectRef], out: list[Violation]) -> None:
    """No workload waits that Kueue's fair-sharing preemption would admit at once: one pod
    set, no topology request, in a BestEffortFIFO queue of a cohort with reclaimWithinCohort
    Any or LowerPriority, whose pods fit on nodes already free after the plan (on its
    queue's first flavors) and whose quota a strategy-allowed eviction of borrowers of
    other queues would make room for. Narrow on purpose: where the rule speaks, Kueue
    would act in its next cycle."""
    snap = ix.snapshot
    config = snap.kueue_config.fair_sharing
    if not config.enabled:
        return
    tree = VerifierQuotaTree(ix)
    _, after_usage = usage_before_after(ix, admitted, evicted)
    free: dict[str, dict[str, int]] | None = None
    after = Shares(ix, tree, after_usage)
    for w in sorted(snap.workloads, key=lambda w: w.ref):
        if w.state is not WorkloadState.PENDING or w.ref in admitted or w.blocked_reason or len(w.pod_sets) != 1:
            continue
        cq = snap.cluster_queues.get(w.cluster_queue or "")
        pod_set = w.pod_sets[0]
        if (cq is None or cq.inactive_reason is not None or cq.cohort is None or pod_set.topology.mode is not None
                or pod_set.topology.slices or cq.queueing_strategy != "BestEffortFIFO"
                or cq.preemption.reclaim_within_cohort == "Never" or ("cq", cq.name) not in tree.parent):
            continue
        flavors = {}
        for group in cq.resource_groups:
            if group.flavors and any(pod_set.request.get(r) > 0 for r in group.covered_resources):
                for r in group.covered_resources:
                    flavors[r] = group.flavors[0].flavor
        need = {(flavors[r], r): pod_set.request.get(r) * pod_set.count for r in flavors if pod_set.request.get(r) > 0}
        if not need or any(r not in flavors for r, v in pod_set.request.items() if v > 0 and r != "pods"):
            continue
        if free is None:
            free = _free_after(ix, admitted, evicted)
        if not _fits_free(ix, free, pod_set, sorted(set(flavors.values()))):
            continue
        p: Key = ("cq", cq.name)
        if all(_available(tree, after, p, fr) >= amount for fr, amount in need.items()):
            continue      # quota alone would admit it: not a question of fair sharing
        victims = _fair_victims(ix, tree, after_usage, cq.name, w, need, admitted, evicted)
        if victims:
            out.append(Violation(Rule.FAIR_SHARE, f"{w.ref} waits though Kueue's fair sharing would admit it by evicting "
                                 f"{', '.join(str(v) for v in victims)} (ClusterQueue {cq.name} share "
                                 f"{_shown(after.share(p))} after the plan)", workloads=(w.ref, *victims), queue=cq.name))


def _fits_free(ix: SnapshotIndex, free: Mapping[str, Mapping[str, int]], pod_set: PodSet, flavor_names: list[str]) -> bool:
    flavors = [ix.snapshot.flavors[f] for f in flavor_names if f in ix.snapshot.flavors]
    if len(flavors) != len(flavor_names):
        return False
    pods = 0
    for node in ix.snapshot.nodes:
        if node_problems(ix, node, pod_set, flavors):
            continue
        table = free.get(node.name, {})
        fit = min((table.get(r, 0) // v for r, v in pod_set.request.items() if v > 0), default=0)
        pods += max(0, fit)
        if pods >= pod_set.count:
            return True
    return False


def _fair_victims(ix: SnapshotIndex, tree: VerifierQuotaTree, usage: Mapping[str, Mapping[FR, int]], queue: str,
                  w: Workload, need: Mapping[FR, int], admitted: Mapping[ObjectRef, AdmittedEntry],
                  evicted: set[ObjectRef]) -> list[ObjectRef]:
    """Kueue's fair preemption for `w` (candidates in order, each kept only if its strategy
    allows it), or [] when it does not make room: the victims it would take."""
    snap = ix.snapshot
    cq = snap.cluster_queues[queue]
    config = snap.kueue_config.fair_sharing
    p: Key = ("cq", queue)
    root = p
    while tree.parent.get(root) is not None:
        root = tree.parent[root]   # type: ignore[assignment]
    current = {q: defaultdict(int, t) for q, t in usage.items()}
    with_w = {q: defaultdict(int, t) for q, t in usage.items()}
    with_w.setdefault(queue, defaultdict(int))
    for fr, amount in need.items():
        with_w[queue][fr] += amount
    candidates = []
    minimum = snap.policy.minimum_runtime_seconds
    for v in snap.workloads:
        if (v.state is not WorkloadState.RUNNING or v.ref in evicted or v.cluster_queue in (None, queue)
                or v.non_preemptible or (v.admitted_at is not None and snap.now - v.admitted_at < minimum)):
            continue
        q: Key = ("cq", v.cluster_queue or "")
        if q not in tree.parent:
            continue
        top = q
        while tree.parent.get(top) is not None:
            top = tree.parent[top]   # type: ignore[assignment]
        if top != root:
            continue
        if cq.preemption.reclaim_within_cohort == "LowerPriority" and v.priority >= w.priority:
            continue
        uses = {fr for a in v.assignment for r, f in a.flavors.items() for fr in [(f, r)] if fr in need}
        if uses:
            candidates.append(v)
    candidates.sort(key=lambda v: (v.priority, -(v.admitted_at or 0.0), v.uid, v.ref))
    victims: list[ObjectRef] = []
    nominal = Shares(ix, tree, with_w).share(p)[1] == 0    # within nominal with w: strategies waived
    for v in candidates:
        q = ("cq", v.cluster_queue or "")
        before = Shares(ix, tree, current)
        if before.share(q)[1] == 0:
            continue        # its queue no longer borrows
        without = {k: defaultdict(int, t) for k, t in current.items()}
        mine = without.setdefault(v.cluster_queue or "", defaultdict(int))
        for a in v.assignment:
            ps = next((s for s in v.pod_sets if s.name == a.name), None)
            if ps is None:
                continue
            for r, f in a.flavors.items():
                mine[(f, r)] -= ps.request.get(r) * a.count
        preemptor = Shares(ix, tree, {**without, queue: with_w[queue]}).share(p)
        final_q = Shares(ix, tree, without).share(q)
        allowed = (nominal or (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE in config.preemption_strategies
                               and compare(preemptor, final_q) <= 0)
                   or (LESS_THAN_INITIAL_SHARE in config.preemption_strategies
                       and compare(preemptor, before.share(q)) < 0))
        if not allowed:
            continue
        current = without
        victims.append(v.ref)
        room = Shares(ix, tree, current)
        if all(_available(tree, room, p, fr) >= amount for fr, amount in need.items()):
            return victims
    return []
