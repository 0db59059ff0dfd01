"""Kueue's classical preemption: who may evict whom, and which running workloads to evict.

The victim search's primitives: `minimal_victims` (remove candidates in order until
the preemptor fits, then put back what it does not need), built of
`first_fitting_prefix` and `put_back`, which greedy's search
(planner.kueue.preemption.search) runs on its own copies too.
`PreemptionRules` takes a snapshot and answers who may evict whom under its
ClusterQueues' policies (the MILP's victim columns and the continuation ask it).
Which victims Kueue's search picks for a preemptor is greedy's preemptor's answer
(planner.kueue.preemption.preemptor; the explainer asks it through after_plan).
Deciding which workloads to evict only computes; nothing here issues an eviction.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Protocol, Sequence, TypeVar

from models import Snapshot, Workload
from planner.kueue import capacity, semantics
from planner.kueue.semantics import QuotaTree
from planner.kueue.state import ClusterState


# ---------------------------------------------------------------- preemption

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
