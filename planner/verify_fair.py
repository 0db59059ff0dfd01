"""The verifier's fair-sharing rule: evictions across queues as Kueue's strategies allow.

With fair sharing on (Kueue's Configuration), Kueue preempts a workload of another
ClusterQueue Q for a preemptor of queue P only when its configured strategy allows it,
comparing dominant resource shares (Kueue's `dominantResourceShare`, recomputed here
on its own: per resource, what a node uses above its subtree's nominal quota summed
over flavors, x 1000 over what its parent's tree could lend, the largest such ratio,
divided by the node's weight; weight 0 while borrowing is above every other share):

  LessThanOrEqualToFinalShare   share(P) after the plan <= share(Q) after the plan
  LessThanInitialShare          share(P) after the plan <  share(Q) before the plan

A list of both allows what either allows. Every cross-queue eviction of the plan is
checked against every preemptor it names in another queue. Like planner.verify, this
module must not import the code that makes plans.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Mapping, Sequence

from models import Decisions, ObjectRef, PodSet, PodSetAssignment, Snapshot, WorkloadState
from models.kueue_config import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from planner.verify import FR, AdmittedEntry, SnapshotIndex, VerifierQuotaTree

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
                          evicted: set[ObjectRef], out: list[str]) -> None:
    snap: Snapshot = ix.snapshot
    config = snap.kueue_config.fair_sharing
    if not config.enabled or not decisions.evictions:
        return
    tree = VerifierQuotaTree(ix)
    before_usage, after_usage = usage_before_after(ix, admitted, evicted)
    before, after = Shares(ix, tree, before_usage), Shares(ix, tree, after_usage)
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
            share_p, final_q, initial_q = after.share(p), after.share(q), before.share(q)
            allowed = ((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE in config.preemption_strategies
                        and compare(share_p, final_q) <= 0)
                       or (LESS_THAN_INITIAL_SHARE in config.preemption_strategies
                           and compare(share_p, initial_q) < 0))
            if not allowed:
                out.append(f"{eviction.workload} evicted for {ref} against fair sharing "
                           f"({', '.join(config.preemption_strategies)}): ClusterQueue {p[1]}'s share after the plan "
                           f"{_shown(share_p)}, ClusterQueue {q[1]}'s {_shown(final_q)} after, "
                           f"{_shown(initial_q)} before")


def _shown(share: tuple[float, float]) -> str:
    weight, ratio = share
    if ratio == 0:
        return "0"
    return "infinite (weight 0)" if weight == 0 else f"{ratio / weight:.1f}"
