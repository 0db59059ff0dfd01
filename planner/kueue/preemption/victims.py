"""Kueue's classical preemption: who may evict whom, and which running workloads to evict.

The victim search's primitives: `minimal_victims` (remove candidates in order until
the preemptor fits, then put back what it does not need), built of
`first_fitting_prefix` and `put_back`, which greedy's search
(planner.kueue.preemption.search) runs on its own copies too.
`PreemptionRules` takes a snapshot and answers who may evict whom under its
ClusterQueues' policies (the MILP's victim columns and the continuation ask it).
`Preemption` takes a `ClusterState` and a preemptor; gives the candidates
(`Candidate`) in Kueue's order and the minimal set whose eviction lets it fit
(`minimal_victims`); the explainer asks it.
Deciding which workloads to evict only computes; nothing here issues an eviction.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence, TypeVar

import numpy as np

from models import ClusterQueue, Eviction, FlavorResource, ObjectRef, PodSet, Snapshot, Workload, WorkloadState
from planner.kueue import capacity, semantics
from planner.kueue.capacity import cluster_queue_usage, quota_usage_of
from planner.kueue.semantics import (
    QuotaTree, borrowing_queues, eviction_cost, evictable, must_borrow, preemption_reason, quota_usage,
)
from planner.kueue.fit import evaluate, fits_at
from planner.kueue.state import ClusterState, Freed, PodSetChoice


# ---------------------------------------------------------------- preemption

MAX_CANDIDATES = 256   # per attempt, after Kueue's ordering: bounds the work one head can cost


def _fixed(pod_set: PodSet) -> tuple[tuple[str, str], ...] | None:
    """A growth slice's pinned flavors (planner.cycle.elastic), part of what makes two requests the same."""
    return tuple(sorted(pod_set.fixed_flavors.items())) if pod_set.fixed_flavors is not None else None


def may_preempt(cq: ClusterQueue) -> bool:
    """Does the queue's spec.preemption let its workloads evict anything at all?"""
    p = cq.preemption
    return "Never" != p.within_cluster_queue or "Never" != p.reclaim_within_cohort or "Never" != p.borrow_within_cohort


def minimal_victims(state: ClusterState, candidates: Sequence[Workload], fits: Callable[[], bool],
                    misfit: bool = False) -> list[int] | None:
    """Kueue's classical search: remove candidates in order until `fits()`, then add
    each back in reverse (all but the last removed), keeping it where it still fits.

    Returns the indexes of the victims, left released in `state`; None, with `state`
    as found, when even removing every candidate does not make it fit. Freeing more
    never turns a fit into a misfit (quota and capacity only grow), so the shortest
    fitting prefix is found by galloping then bisection, and what it need not lose
    is put back a run at a time: Kueue's answer in O(v log n) fit tests for v victims
    among n candidates, rather than n. (Were some placement not monotone, the victims
    found still make room.)

    `misfit`: the caller has just found that it does not fit as things stand (a fit
    test spared).
    """
    n = len(candidates)
    if misfit and n == 0:
        return None
    hi = first_fitting_prefix(state, list(candidates), 1 if misfit else 0, lambda k: n, fits, doubling=True)
    if hi is None:
        return None
    return put_back(state, candidates[:hi], fits)


Item = TypeVar("Item", contravariant=True)
Token = TypeVar("Token")


class Freeing(Protocol[Item, Token]):
    """What first_fitting_prefix releases prefixes in: a ClusterState, or a search's copies."""

    def freed_by(self, workloads: Sequence[Item]) -> Token: ...

    def release_freed(self, freed: Token, sign: int = 1) -> None: ...


def first_fitting_prefix(state: Freeing[Item, Token], candidates: Sequence[Item], known: int,
                         extend: Callable[[int], int], fits: Callable[[], bool], doubling: bool = False,
                         probe_whole: bool = False) -> int | None:
    """The shortest prefix of `candidates`, at least `known` long (nothing shorter fits),
    whose release makes `fits()` true; left released in `state`. None, with `state` as
    found, when no prefix does. `extend(k)` may grow `candidates` to k (it returns
    the length there is), so that a lazily computed order is read only as far as needed.
    Galloping then bisection (fits() is monotone in what is released): steps that
    double from `known` (the answer is usually just past it), or, `doubling`, prefixes
    that double in length. `probe_whole`: after the first miss, test every candidate
    released at once, and give up there if even that does not fit (one test where
    galloping to the end takes a few; worth it where misses are common)."""
    removed = 0
    chunks: list[tuple[int, Token]] = []   # what each release gave, to take back as it was

    def prefix(k: int) -> None:
        nonlocal removed
        while removed > k:
            start, freed = chunks.pop()
            state.release_freed(freed, sign=-1)
            removed = start
        if removed < k:
            freed = state.freed_by(candidates[removed:k])
            state.release_freed(freed)
            chunks.append((removed, freed))
        removed = k

    bad, k, step = known - 1, known, 1
    while True:
        k = min(k, extend(k))
        prefix(k)
        if fits():
            break
        bad = k
        if extend(k + 1) <= k:
            prefix(0)
            return None
        if probe_whole and k == known:
            whole = extend(len(candidates) + (1 << 40))
            prefix(whole)
            if not fits():
                prefix(0)
                return None
        k, step = (max(1, 2 * k) if doubling else k + step), 2 * step
    lo, hi = bad + 1, k
    while lo < hi:
        mid = (lo + hi) // 2
        prefix(mid)
        if fits():
            hi = mid
        else:
            lo = mid + 1
    prefix(hi)
    return hi


class Releases(Protocol[Item]):
    """What put_back releases workloads in: a ClusterState, or a search's quota overlay."""

    def release_many(self, workloads: Sequence[Item], sign: int = 1) -> None: ...


def put_back(state: Releases[Item], released: Sequence[Item], fits: Callable[[], bool]) -> list[int]:
    """Kueue's fill-back over `released` (all released in `state`, the preemptor fits):
    each but the last, from the last but one down, is taken back where the preemptor
    still fits. Returns the indexes still released (the victims), left so in `state`.

    A run that fits back all together would fit back one at a time too (each step
    leaves at least as much free as the run's test), so runs are tried whole and halved
    where they do not fit, the later half first: the same victims in O(v log k) fit
    tests for v victims rather than k (k reaches hundreds)."""
    hi = len(released)
    victims = set(range(hi))
    runs = [(0, hi - 1)]   # half-open, the next to decide last
    while runs:
        first, end = runs.pop()
        if first >= end:
            continue
        run = released[first:end]
        state.release_many(run, sign=-1)
        if fits():
            victims.difference_update(range(first, end))
            continue
        state.release_many(run)
        if end - first > 1:
            middle = (first + end) // 2
            runs += [(first, middle), (middle, end)]
    return sorted(victims)


def class_wide(members: list[Workload], victim: Workload) -> bool:
    """Whether the whole class is judged alike (all but the same-queue equal-priority case)."""
    return not (members[0].cluster_queue == victim.cluster_queue and members[0].priority == victim.priority)


class PreemptionRules:
    """Who may evict whom in this snapshot (Kueue's rules, semantics.preemption_reason),
    with what the rules need computed once: queues borrowing now, and whether each
    preemptor must borrow."""

    def __init__(self, snapshot: Snapshot, tree: QuotaTree):
        self.snapshot, self.tree = snapshot, tree
        self.usage = capacity.cluster_queue_usage(snapshot)
        self.borrowing = semantics.borrowing_queues(snapshot, tree, self.usage)
        self._borrows: dict[object, bool] = {}
        self._class_verdicts: dict[tuple[object, ...], bool] = {}

    def borrows(self, preemptor: Workload) -> bool:
        """semantics.must_borrow, decided once per queue and shape of request (it reads
        only those: flavor options by request and tolerations, counts, this usage)."""
        key = (preemptor.cluster_queue, tuple((ps.request, ps.tolerations, ps.count) for ps in preemptor.pod_sets))
        if key not in self._borrows:
            self._borrows[key] = semantics.must_borrow(self.snapshot, preemptor, self.tree, self.usage)
        return self._borrows[key]

    def reason(self, preemptor: Workload, victim: Workload) -> str | None:
        return semantics.preemption_reason(self.snapshot, preemptor, victim, self.tree, self.borrowing,
                                           self.borrows(preemptor))

    def classes(self, pending: list[Workload]) -> dict[tuple[str, int, bool], list[Workload]]:
        """Pending workloads by (ClusterQueue, base priority, must borrow): the rules differ
        only by these, except the equal-priority "newer" rule, which looks at each one."""
        out: dict[tuple[str, int, bool], list[Workload]] = defaultdict(list)
        for workload in pending:
            out[(workload.cluster_queue or "", workload.priority, self.borrows(workload))].append(workload)
        return dict(sorted(out.items()))

    def wide_classes(self, classes: dict[tuple[str, int, bool], list[Workload]], victim: Workload,
                     cache: dict[tuple[str | None, int], list[tuple[str, int, bool]]]) -> list[tuple[str, int, bool]]:
        """Classes judged as a whole (not the victim's own queue and priority) that may
        evict `victim`: the same for every victim of its queue and priority, so kept in
        `cache` (one per `classes`)."""
        key = (victim.cluster_queue, victim.priority)
        if key not in cache:
            cache[key] = [k for k, members in classes.items()
                          if class_wide(members, victim) and self.allowed(members, victim)]
        return cache[key]

    @staticmethod
    def own_classes(classes: dict[tuple[str, int, bool], list[Workload]],
                    victim: Workload) -> list[tuple[str, int, bool]]:
        """Classes of the victim's own queue and priority: each member is judged alone."""
        return [k for k in ((victim.cluster_queue or "", victim.priority, b) for b in (False, True)) if k in classes]

    def allowed(self, members: list[Workload], victim: Workload) -> list[Workload]:
        """Members of one class that may evict `victim`."""
        if not class_wide(members, victim):
            # Same queue, same priority: only withinClusterQueue LowerOrNewerEqualPriority
            # lets any member evict it (by queue time, each on its own); asking member by
            # member otherwise costs victims x members calls at scale for nothing.
            cq = self.snapshot.cluster_queues.get(victim.cluster_queue or "")
            if cq is None or cq.preemption.within_cluster_queue != "LowerOrNewerEqualPriority":
                return []
            return [w for w in members if self.reason(w, victim)]
        first = members[0]
        # Across a class the rules look only at queues, priorities and borrowing.
        key = (first.cluster_queue, first.priority, self.borrows(first), victim.cluster_queue, victim.priority)
        if key not in self._class_verdicts:
            self._class_verdicts[key] = self.reason(first, victim) is not None
        return members if self._class_verdicts[key] else []


@dataclass(frozen=True)
class Candidate:
    workload: Workload
    reason: str            # Preempted | Reclaimed, from semantics.preemption_reason


class Preemption:
    """Kueue's classical preemption over a `ClusterState`, built once per run.

    Candidates for a preemptor: running, evictable workloads not evicted yet, that
    its ClusterQueue's policies allow it to evict (`semantics.preemption_reason`, on
    base priorities) and that do not hold the same right over it (no thrash: a
    victim of equal or higher priority that could reclaim from the preemptor's queue
    once it borrows is left alone); only those using a flavor/resource the
    preemptor could charge or sitting on a node it could use. Reclaiming needs the
    victim's queue borrowing both before the plan (what the verifier checks) and
    now. Order (Kueue's candidatesOrdering): other queues first, lower priority
    first, most recently admitted first, then UID; at most MAX_CANDIDATES.
    """

    def __init__(self, state: ClusterState, gone: Iterable[ObjectRef] = ()):
        """`gone`: workloads already released from `state` (evicted by decisions being explained)."""
        snap = state.snapshot
        skip = set(gone)
        self.state = state
        self.tree = state.quota
        self.before = borrowing_queues(snap, self.tree, cluster_queue_usage(snap))
        self.by_queue: dict[str, list[Workload]] = defaultdict(list)     # evictable; never changes
        self.all_by_queue: dict[str, list[Workload]] = defaultdict(list)   # evictable or not
        for w in sorted(snap.workloads, key=lambda w: w.ref):
            if w.state is WorkloadState.RUNNING and w.cluster_queue is not None and w.ref not in skip:
                self.all_by_queue[w.cluster_queue].append(w)
                if evictable(w, snap):
                    self.by_queue[w.cluster_queue].append(w)
        for q in list(self.by_queue.values()) + list(self.all_by_queue.values()):
            q.sort(key=self._order)  # Kueue's order within a queue: priority, newest admitted, UID
        # Every evictable workload's place in that order (by id(): by_queue holds them all): merging
        # queues compares these ints instead of the order's tuples.
        self._rank = {id(v): r for r, v in enumerate(sorted((v for q in self.by_queue.values() for v in q),
                                                            key=self._order))}
        self._candidates: dict[tuple[int, str], Candidate] = {}   # (id, reason) -> the one object
        self.root = {name: self.tree.root_of(f"cq:{name}") for name in snap.cluster_queues
                     if f"cq:{name}" in self.tree.parent}
        self.evicted: dict[ObjectRef, Eviction] = {}
        self._failed: dict[object, int] = {}   # shape of a failed attempt -> state version then
        self._frs: dict[ObjectRef, set[FlavorResource]] = {}
        self._rows: dict[ObjectRef, np.ndarray] = {}
        # What each evictable workload charges to quota, a row per workload (by id():
        # workloads live as long as the snapshot; hashing refs shows in profiles) and a
        # column per flavor/resource, so that a candidate list's sum is one array sum.
        evictable_now = [v for q in self.by_queue.values() for v in q]
        used = [quota_usage_of(v) for v in evictable_now]
        self._usage_col = {fr: j for j, fr in enumerate(sorted({fr for u in used for fr in u}))}
        self._usage_row = {id(v): i for i, v in enumerate(evictable_now)}
        self._usage = np.zeros((len(used), len(self._usage_col)), dtype=np.int64)
        for i, u in enumerate(used):
            for fr, amount in u.items():
                self._usage[i, self._usage_col[fr]] = amount
        # Shape of a preemptor's request -> what it could use (see _needs), and the first
        # shape with the same needs: shapes that need the same share candidate lists.
        self._needed: dict[object, tuple[set[FlavorResource], np.ndarray, object]] = {}
        self._same_needs: dict[tuple[frozenset[FlavorResource], bytes], object] = {}
        # (needs, queue) -> that queue's candidates for the needs (see _matching), and per
        # queue every such list, so that an eviction can be taken out of all of them.
        self._lists: dict[tuple[object, str], list[tuple[int, Workload]]] = {}
        self._lists_of_queue: dict[str, list[list[tuple[int, Workload]]]] = defaultdict(list)
        # (queue, priority, needs, evictions so far) -> lower(): explaining asks it per request shape.
        self._lower: dict[tuple[str, int, object, int], list[Workload]] = {}

    @staticmethod
    def _order(w: Workload) -> tuple[int, float, bool, str, str]:
        # an elastic Job's releasable pods (planner.cycle.elastic) before the Job: a shrink loses less
        return (w.priority, -(w.admitted_at or 0.0), w.part_of is None, w.uid, str(w.ref))

    def candidates(self, w: Workload) -> list[Candidate]:
        snap, tree = self.state.snapshot, self.tree
        cq = snap.cluster_queues[w.queue_name]
        policy = cq.preemption
        borrowing = self.before & self.state.borrowing()
        borrows = must_borrow(snap, w, tree, self.state.cq_usage, self.state.options)
        back = borrowing | {cq.name}
        limits: dict[str, float] = {}   # queue -> highest victim priority worth asking about
        if policy.within_cluster_queue != "Never":
            limits[cq.name] = w.priority - (policy.within_cluster_queue == "LowerPriority")
        if (policy.reclaim_within_cohort != "Never" or policy.borrow_within_cohort != "Never") and \
                tree.parent.get(f"cq:{cq.name}") is not None:
            root = self.root.get(cq.name)
            for name in self.by_queue:
                if name != cq.name and self.root.get(name) == root:
                    anyone = policy.reclaim_within_cohort == "Any" and name in borrowing
                    limits[name] = math.inf if anyone else w.priority - 1
        if not limits:
            return []
        shape = self._needs(cq, w)[0]
        # The rules look only at queues, priorities and (equal priority) queue order:
        # decide each combination once, not once per running workload.
        verdicts: dict[tuple[str | None, int, bool, bool], tuple[str | None, bool]] = {}

        def allowed(name: str) -> Iterator[tuple[int, Candidate]]:
            """One queue's candidates in Kueue's order, with their ranks in it."""
            limit = limits[name]
            for key, v in self._matching(shape, name):
                if v.priority > limit:
                    return  # sorted by priority
                vkey = (v.cluster_queue, v.priority, v.queued_at > w.queued_at, w.queued_at > v.queued_at)
                if vkey not in verdicts:
                    back_again = v.priority >= w.priority and preemption_reason(snap, v, w, tree, back) is not None
                    verdicts[vkey] = (preemption_reason(snap, w, v, tree, borrowing, borrows), back_again)
                reason, back_again = verdicts[vkey]
                if reason is not None and not back_again:
                    candidate = self._candidates.get((id(v), reason))
                    if candidate is None:
                        candidate = self._candidates[(id(v), reason)] = Candidate(v, reason)
                    yield key, candidate

        # Another queue gives up nothing unless it is borrowing (preemption_reason). Other
        # queues come first, merged in Kueue's order, then the preemptor's own queue; only the
        # first MAX_CANDIDATES in all are wanted, so each queue is read only as far as it
        # contributes to them. (Ranks are unique: no ties.)
        others = [allowed(name) for name in sorted(limits) if name != cq.name and name in borrowing]
        own = allowed(cq.name) if cq.name in limits else iter(())
        merged = itertools.chain(heapq.merge(*others), own)
        return [c for _, c in itertools.islice(merged, MAX_CANDIDATES)]

    def _matching(self, shape: object, name: str) -> list[tuple[int, Workload]]:
        """Queue `name`'s evictable running workloads, not evicted yet, that a preemptor of
        `shape` could use the room of (a flavor/resource it could charge, or a node it could
        use), with their ranks, in Kueue's order.

        What a workload uses never changes, so the list is built once per (needs, queue)
        and evictions are taken out of it as they happen (`_evict`).
        """
        found = self._lists.get((shape, name))
        if found is None:
            needs, rows, _ = self._needed[shape]
            found = [(self._rank[id(v)], v) for v in self.by_queue.get(name, ())
                     if v.ref not in self.evicted and (self._frs_of(v) & needs or rows[self._rows_of(v)].any())]
            self._lists[(shape, name)] = found
            self._lists_of_queue[name].append(found)
        return found

    def _evict(self, c: Candidate, preemptor: Workload) -> None:
        v = c.workload
        self.evicted[v.ref] = Eviction(workload=v.ref, reason=c.reason, for_=(preemptor.ref,),
                                       cost=eviction_cost(v, self.state.snapshot))
        rank = self._rank[id(v)]
        for found in self._lists_of_queue[v.queue_name]:
            i = bisect.bisect_left(found, (rank,))  # (rank,) sorts just before (rank, v)
            if i < len(found) and found[i][1] is v:
                del found[i]

    def lower(self, w: Workload) -> list[Workload]:
        """Running work of lower base priority in `w`'s queue or cohort tree that it could
        use the room of, whatever the policies say (for explaining), in Kueue's order."""
        snap = self.state.snapshot
        cq = snap.cluster_queues[w.queue_name]
        same, needs, rows = self._needs(cq, w)
        key = (cq.name, w.priority, same, len(self.evicted))
        if key not in self._lower:
            self._lower[key] = self._lower_for(cq, w.priority, needs, rows)
        return list(self._lower[key])

    def _lower_for(self, cq: ClusterQueue, priority: int, needs: set[FlavorResource],
                   rows: np.ndarray) -> list[Workload]:
        root = self.root.get(cq.name)
        queues = [n for n in self.all_by_queue
                  if n == cq.name or (root is not None and root != f"cq:{cq.name}" and self.root.get(n) == root)]
        out = []
        for name in sorted(queues):
            taken = 0
            for v in self.all_by_queue[name]:
                if v.priority >= priority or taken >= MAX_CANDIDATES:
                    break
                if v.ref in self.evicted or not (self._frs_of(v) & needs or rows[self._rows_of(v)].any()):
                    continue
                out.append(v)
                taken += 1
        out.sort(key=lambda v: (v.cluster_queue == cq.name,) + self._order(v))
        return out[:MAX_CANDIDATES]

    def why_not(self, w: Workload, v: Workload) -> str:
        """Why `w` may not evict `v`, in a few words (for explaining)."""
        snap = self.state.snapshot
        if v.non_preemptible:
            return "some of it is non-preemptible"
        if not evictable(v, snap):
            return "some of it has run less than the minimum runtime"
        cq = snap.cluster_queues[w.queue_name]
        policy = cq.preemption
        if v.cluster_queue == cq.name:
            return f"withinClusterQueue is {policy.within_cluster_queue}"
        if policy.reclaim_within_cohort == "Never" and policy.borrow_within_cohort == "Never":
            return "reclaimWithinCohort is Never"
        borrowing = self.before & borrowing_queues(snap, self.tree, self.state.cq_usage)
        if policy.borrow_within_cohort == "Never" and v.cluster_queue not in borrowing:
            return f"ClusterQueue {v.cluster_queue} is not borrowing"
        if preemption_reason(snap, w, v, self.tree, borrowing) is not None:
            return f"ClusterQueue {v.cluster_queue} could reclaim it back"
        return f"the preemption policy of ClusterQueue {cq.name} does not allow it"

    def _needs(self, cq: ClusterQueue, w: Workload) -> tuple[object, set[FlavorResource], np.ndarray]:
        """Flavor/resources `w` could charge and the node rows it could use, over all flavor
        options (cached per shape of request), with the first shape seen that needs the same."""
        shape = (cq.name, tuple((ps.request, ps.tolerations, tuple(sorted(ps.node_selector.items())), _fixed(ps))
                                for ps in w.pod_sets))
        if shape not in self._needed:
            frs: set[FlavorResource] = set()
            rows = np.zeros(len(self.state.node_objs), dtype=bool)
            for ps in w.pod_sets:
                options = self.state.options(cq, ps)
                if isinstance(options, str):
                    continue
                for option in options:
                    frs.update((f, r) for r, f in option.by_resource.items() if ps.request.get(r) > 0)
                    rows[self.state.eligible(option, ps).rows] = True
            same = self._same_needs.setdefault((frozenset(frs), rows.tobytes()), shape)
            self._needed[shape] = (frs, rows, same)
        frs, rows, same = self._needed[shape]
        return same, frs, rows

    def _frs_of(self, v: Workload) -> set[FlavorResource]:
        if v.ref not in self._frs:
            self._frs[v.ref] = {fr for fr, amount in quota_usage_of(v).items() if amount > 0}
        return self._frs[v.ref]

    def _rows_of(self, v: Workload) -> np.ndarray:
        if v.ref not in self._rows:
            nodes = {n for psa in v.assignment for n in psa.pods_per_node()}
            self._rows[v.ref] = np.array(sorted(self.state.row[n] for n in nodes if n in self.state.row),
                                         dtype=np.int64)
        return self._rows[v.ref]

    def attempt(self, w: Workload) -> tuple[list[PodSetChoice], list[Candidate]] | None:
        """Victims and choices that admit `w`, victims left released in the state; or None.

        Full counts first; an elastic workload that cannot get them preempts for its
        minimum, then takes the largest count the freed room allows.
        """
        snap = self.state.snapshot
        cq = snap.cluster_queues[w.queue_name]
        key: object = None
        if cq.preemption.within_cluster_queue != "LowerOrNewerEqualPriority":  # else queue time matters
            key = (cq.name, w.priority, tuple((ps.count, ps.minimum, ps.request, ps.topology, ps.tolerations,
                                               tuple(sorted(ps.node_selector.items())), _fixed(ps))
                                              for ps in w.pod_sets))
            if self._failed.get(key) == self.state.version:
                return None  # the same request failed and nothing has changed since
        found = self._attempt(cq, w)
        if found is None and key is not None:
            self._failed[key] = self.state.version
        return found

    def _quota_could_fit(self, cq: ClusterQueue, w: Workload, candidates: Sequence[Candidate]) -> bool:
        """A cheap necessary test before any search: with every candidate's quota given
        back (each unit raises what the queue may take by at most one), does some
        flavor option of every pod set fit its minimum?"""
        rows = np.fromiter((self._usage_row[id(c.workload)] for c in candidates), dtype=np.int64,
                           count=len(candidates))
        given_back = self._usage[rows].sum(axis=0)
        freed = {fr: int(given_back[j]) for fr, j in self._usage_col.items()}
        for ps in w.pod_sets:
            options = self.state.options(cq, ps)
            if isinstance(options, str):
                return False
            if not any(all(self.state.lists(cq.name, fr)
                           and need <= max(0, self.state.available(cq.name, fr)) + freed.get(fr, 0)
                           for fr, need in quota_usage(ps, option, ps.minimum).items())
                       for option in options):
                return False
        return True

    def _attempt(self, cq: ClusterQueue, w: Workload) -> tuple[list[PodSetChoice], list[Candidate]] | None:
        candidates = self.candidates(w)
        if not candidates or not self._quota_could_fit(cq, w, candidates):
            return None
        victims = [c.workload for c in candidates]
        targets = [[ps.count for ps in w.pod_sets]]
        if w.elastic:
            targets.append([ps.minimum for ps in w.pod_sets])
        for counts in targets:
            chosen = minimal_victims(self.state, victims, lambda: fits_at(self.state, w, counts))
            if chosen is None:
                continue
            result = evaluate(self.state, w)
            if isinstance(result, str):  # cannot happen (the fit test just passed); stay safe
                for i in chosen:
                    self.state.release(victims[i], sign=-1)
                continue
            self.state.version += 1
            for i in chosen:
                self._evict(candidates[i], w)
            return result, [candidates[i] for i in chosen]
        return None
