"""One classical preemption search (Kueue's preemptionCtx and candidateIterator).

`Search` is one preemptor's search for victims: the candidates (from its own queue,
and from queues of its cohort tree above nominal in what it needs, with or without
its hierarchical advantage), in Kueue's order, removed while their queue is above
nominal until the preemptor fits, tried with and without borrowing, then added back
in reverse (planner.kueue.preemption.victims: first_fitting_prefix, put_back). Each
queue's admitted workloads are read as arrays (`QueueView`), and a search that cannot
succeed is cut short (`Search._could_fit`, `_nodes_could_fit`); a workload of one pod
set is searched on copies (`_Scratch`), the live state untouched. The preemptor that
runs searches and keeps what they share is planner.kueue.preemption.preemptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from models import ClusterQueue, FlavorResource as FR, ObjectRef, PodSet, Workload
from planner.kueue.preemption import PREEMPTED, RECLAIMED, Target
from planner.kueue.preemption.victims import first_fitting_prefix, put_back
from planner.kueue.quota import Overlay, UsageLookup
from planner.kueue.quota_arrays import QuotaArrays
from planner.kueue.registry import Admitted
from planner.kueue.semantics import FlavorOption
from planner.kueue.state import Freed

if TYPE_CHECKING:
    from planner.kueue.preemption.preemptor import Preemptor
    from planner.kueue.state import ClusterState

# How a candidate may be preempted (classical/hierarchical_preemption.go preemptionVariant).
WITHIN_CQ, HIERARCHICAL_RECLAIM, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = 1, 2, 3, 4


class QueueView:
    """One queue's admitted workloads as arrays, in its candidate order (built once per
    version of the queue's list): what a search reads for every candidate."""

    def __init__(self, members: list[Admitted], columns: Mapping[FR, int], tie: Mapping[ObjectRef, int]):
        n = len(members)
        self.members = members
        self.priority = np.fromiter((a.priority for a in members), dtype=np.int64, count=n)
        self.queued = np.fromiter((a.view.queued_at for a in members), dtype=np.float64, count=n)
        self.evictable = np.fromiter((a.evictable for a in members), dtype=bool, count=n)
        self.reclaimable = np.fromiter((a.reclaimable for a in members), dtype=bool, count=n)
        # Kueue's candidate order as numbers: priority, newest admitted first, UID (a rank).
        self.newest = np.fromiter((-a.admitted_at for a in members), dtype=np.float64, count=n)
        self.tie = np.fromiter((tie[a.ref] for a in members), dtype=np.int64, count=n)
        self.settled = np.fromiter((not a.evicting for a in members), dtype=np.int64, count=n)
        self.usage = np.zeros((n, len(columns)), dtype=np.int64)
        for i, a in enumerate(members):
            for fr, amount in a.usage.items():
                self.usage[i, columns[fr]] = amount

    def changed(self, changes: Sequence[tuple[int, str, int, Admitted]], members: list[Admitted],
                columns: Mapping[FR, int], tie: Mapping[ObjectRef, int]) -> "QueueView":
        """A new view: this one with the queue's changes applied (this one unchanged)."""
        new = object.__new__(QueueView)
        priority, queued, evictable, reclaimable = self.priority, self.queued, self.evictable, self.reclaimable
        newest, ranks, settled, usage = self.newest, self.tie, self.settled.copy(), self.usage
        for _, what, at, a in changes:
            if what == "add":
                row = np.zeros(usage.shape[1], dtype=np.int64)
                for fr, amount in a.usage.items():
                    row[columns[fr]] = amount
                priority = np.insert(priority, at, a.priority)
                queued = np.insert(queued, at, a.view.queued_at)
                evictable = np.insert(evictable, at, a.evictable)
                reclaimable = np.insert(reclaimable, at, a.reclaimable)
                newest = np.insert(newest, at, -a.admitted_at)
                ranks = np.insert(ranks, at, tie[a.ref])
                settled = np.insert(settled, at, not a.evicting)
                usage = np.insert(usage, at, row, axis=0)
            elif what == "remove":
                priority, queued, evictable = np.delete(priority, at), np.delete(queued, at), np.delete(evictable, at)
                reclaimable, newest = np.delete(reclaimable, at), np.delete(newest, at)
                ranks, settled = np.delete(ranks, at), np.delete(settled, at)
                usage = np.delete(usage, at, axis=0)
            else:
                settled[at] = 0
        new.members = list(members)
        new.priority, new.queued, new.evictable, new.reclaimable = priority, queued, evictable, reclaimable
        new.newest, new.tie, new.settled, new.usage = newest, ranks, settled, usage
        return new


@dataclass(eq=False)
class _Order:
    """Candidates of a search in Kueue's order, one row each: its source (an index into
    `sources`), its position in the source's queue view, its variant, its usage."""

    sources: list["Source"]
    source: np.ndarray
    index: np.ndarray
    variant: np.ndarray
    use: np.ndarray

    def member(self, k: int) -> Admitted:
        return self.sources[int(self.source[k])].view.members[int(self.index[k])]


@dataclass(eq=False)
class Source:
    """Candidates of one queue for one search, in the queue's order."""

    name: str
    lca: str | None                # the cohort where it was found (None: the preemptor's queue)
    view: QueueView
    index: np.ndarray              # positions in view.members
    variant: np.ndarray


class _Scratch:
    """A search's releases on copies, for a workload of one pod set: the quota tree's
    usage (QuotaArrays) and the pod set's eligible nodes (state.ReleasedView). Its fit
    test is _state_fits and the nodes' fits() of the live state with the same workloads
    released; the live state never moves, so no kept node count has to catch up with a
    search's tries. Candidates are indexes into `removed` (victims.Freeing)."""

    def __init__(self, ctx: "Search", borrowing: bool, removed: Sequence[Admitted], use: np.ndarray,
                 pick: tuple[PodSet, FlavorOption, int]):
        self.ctx, self.borrowing = ctx, borrowing
        self.arrays, live = ctx.preemptor.quota_now()
        self.usage = live.copy()
        self.rows = np.array([self.arrays.row[f"cq:{a.cq}"] for a in removed], dtype=np.int64)
        self.use = use
        self.views = [a.view for a in removed]
        state = ctx.preemptor.state
        self.state = state
        pod_set, option, count = pick
        self.nodes = state.released_view(option, pod_set, count)

    def freed_by(self, indexes: Sequence[int]) -> np.ndarray:
        return np.asarray(indexes, dtype=np.int64)

    def release_freed(self, indexes: np.ndarray, sign: int = 1) -> None:
        if not len(indexes):
            return
        width = self.use.shape[1]
        np.subtract.at(self.usage[:, :width], self.rows[indexes], sign * self.use[indexes])
        self.arrays.roll_up(self.usage)
        self.nodes.release(self.state.nodes_of([self.views[int(i)] for i in indexes]), sign)

    def release_many(self, indexes: Sequence[int], sign: int = 1) -> None:
        self.release_freed(self.freed_by(indexes), sign)

    def fits(self) -> bool:
        return self.ctx._fits_usage(self.borrowing, self.arrays, self.usage) and self.nodes.fits()

    def get(self, node: str, fr: FR) -> int:
        """Usage of `fr` by tree node `node` with what is released gone (Overlay.get)."""
        return int(self.usage[self.arrays.row[node], self.ctx.preemptor.columns[fr]])


@dataclass(eq=False)
class Reach:
    """The most a run could take from one source (its candidates up to the one that
    takes its queue to nominal: see Search._could_fit), and what they hold."""

    source: Source
    index: np.ndarray              # positions in source.view.members, in the search's order
    freed: np.ndarray              # their quota usage, summed (a row of QueueView.usage)
    _nodes: "Freed | None" = None

    def nodes(self, state: "ClusterState") -> "Freed":
        """Where they run (state.freed_by), gathered once."""
        if self._nodes is None:
            members = self.source.view.members
            self._nodes = state.nodes_of([members[int(i)].view for i in self.index])
        return self._nodes


class Search:
    """One classical preemption search (preemptionCtx + candidateIterator)."""

    def __init__(self, preemptor: "Preemptor", w: Workload, cq: ClusterQueue, frs_need: set[FR], usage: Mapping[FR, int]):
        self.preemptor, self.w, self.cq = preemptor, w, cq
        self.frs_need = frs_need
        self.usage = dict(usage)
        self.quota = preemptor.quota
        self.key = f"cq:{cq.name}"
        self.need_cols = np.array(sorted(preemptor.column(fr) for fr in frs_need), dtype=np.int64)
        self.need_key = tuple(sorted(frs_need))
        same, hierarchy, priority = self._collect()
        self.same = [s for s in (self._source(*x) for x in same) if len(s.index)]
        self.hierarchy = [s for s in (self._source(*x) for x in hierarchy) if len(s.index)]
        self.priority = [s for s in (self._source(*x) for x in priority) if len(s.index)]
        self._merged: _Order | None = None

    # -- who

    def _source(self, name: str, lca: str | None, advantage: bool) -> Source:
        """getCandidatesFromCQ: the queue's workloads its policy lets the preemptor take
        that use a flavor/resource needing preemption, in the queue's order. (The same
        for every preemptor of the same queue, priority and needs while the queue's list
        stays the same: kept.)"""
        cq, w = self.cq, self.w
        equal = cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority" and name == cq.name
        key = (name, self.preemptor.registry.version.get(name, 0), lca, advantage, cq.name, w.priority,
               w.queued_at if equal else None, self.need_key)
        found = self.preemptor.sources.get(key)
        if found is None:
            found = self.preemptor.sources[key] = self._make_source(name, lca, advantage)
        return found

    def _make_source(self, name: str, lca: str | None, advantage: bool) -> Source:
        view = self.preemptor.view(name)
        cq, w = self.cq, self.w
        other = name != cq.name
        policy = cq.preemption.reclaim_within_cohort if other else cq.preemption.within_cluster_queue
        if policy == "LowerPriority":
            end = int(np.searchsorted(view.priority, w.priority, side="left"))
        elif policy == "LowerOrNewerEqualPriority":
            end = int(np.searchsorted(view.priority, w.priority, side="right"))
        else:
            end = len(view.members)
        mask = view.evictable[:end] & (view.usage[:end][:, self.need_cols] > 0).any(axis=1)
        if policy == "LowerOrNewerEqualPriority":
            mask &= (view.priority[:end] < w.priority) | (view.queued[:end] > w.queued_at)
        if other:
            mask &= view.reclaimable[:end]
        index = np.flatnonzero(mask)
        if not other:
            variant = np.full(len(index), WITHIN_CQ, dtype=np.int64)
        elif advantage:
            variant = np.full(len(index), HIERARCHICAL_RECLAIM, dtype=np.int64)
        else:
            p = view.priority[index]
            threshold = cq.preemption.borrow_max_priority_threshold
            without = p >= w.priority
            if cq.preemption.borrow_within_cohort == "Never":
                without |= True
            if threshold is not None:
                without |= p > threshold
            variant = np.where(without, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING)
        return Source(name, lca, view, index, variant)

    def _collect(self) -> tuple[list[tuple[str, str | None, bool]], list[tuple[str, str | None, bool]],
                                list[tuple[str, str | None, bool]]]:
        """The queues to take candidates from: the preemptor's own (withinClusterQueue),
        and, up the cohort tree, the queues above nominal in what the preemptor needs,
        with or without its hierarchical advantage (collectCandidatesForHierarchicalReclaim)."""
        cq, quota = self.cq, self.quota
        same: list[tuple[str, str | None, bool]] = \
            [(cq.name, None, False)] if cq.preemption.within_cluster_queue != "Never" else []
        hierarchy: list[tuple[str, str | None, bool]] = []
        priority: list[tuple[str, str | None, bool]] = []
        if self.quota.tree.parent.get(self.key) is None or cq.preemption.reclaim_within_cohort == "Never":
            return same, hierarchy, priority
        live = quota.live
        advantage, remaining = quota.fits_in_quota(self.key, self.usage, live)
        previous: str | None = None
        for root in list(quota.ancestors(self.key)):
            into = hierarchy if advantage else priority
            self._subtree(root, root, previous, advantage, into)
            fits, remaining = quota.fits_in_quota(root, remaining, live)
            advantage = advantage or fits
            previous = root
        return same, hierarchy, priority

    def _subtree(self, current: str, root: str, skip: str | None, advantage: bool,
                 into: list[tuple[str, str | None, bool]]) -> None:
        into.extend((name, root, advantage) for name in self.preemptor.above_nominal(current, skip, self.need_key)
                    if name != self.cq.name)


    def none_from_other_queues(self) -> bool:
        return not self.hierarchy and not self.priority

    def none_hierarchical(self) -> bool:
        return not self.hierarchy

    def under_nominal(self) -> bool:
        """queueUnderNominalInResourcesNeedingPreemption: strictly below nominal."""
        state = self.preemptor.state
        return all(state.used(self.cq.name, fr) < state.nominal(self.cq.name, fr) for fr in self.frs_need)

    def order(self) -> "_Order":
        """Every candidate in Kueue's order: those already being evicted first, then the
        hierarchy candidates, the priority ones, the preemptor's own queue's; within each,
        merged across queues by priority, newest admitted first, UID. As arrays (one row
        per candidate)."""
        if self._merged is not None:
            return self._merged
        sources = self.hierarchy + self.priority + self.same
        parts = []
        for kind, members in ((0, self.hierarchy), (1, self.priority), (2, self.same)):
            for s in members:
                parts.append((kind, s))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            self._merged = _Order(sources, empty, empty, empty, np.zeros((0, len(self.preemptor.columns)), dtype=np.int64))
            return self._merged
        which = np.concatenate([np.full(len(s.index), k, dtype=np.int64) for k, (_, s) in enumerate(parts)])
        category = np.concatenate([np.full(len(s.index), c, dtype=np.int64) for c, s in parts])
        index = np.concatenate([s.index for _, s in parts])
        variant = np.concatenate([s.variant for _, s in parts])
        prio = np.concatenate([s.view.priority[s.index] for _, s in parts])
        newest = np.concatenate([s.view.newest[s.index] for _, s in parts])
        tie = np.concatenate([s.view.tie[s.index] for _, s in parts])
        settled = np.concatenate([s.view.settled[s.index] for _, s in parts])
        use = np.vstack([s.view.usage[s.index] for _, s in parts])
        order = np.lexsort((tie, newest, prio, category, settled))   # already evicted first
        self._merged = _Order([s for _, s in parts], which[order], index[order], variant[order], use[order])
        return self._merged

    # -- the search

    def _quota_fits(self, borrowing: bool, overlay: Overlay) -> bool:
        """workloadFits, quota part, on the overlay."""
        quota, name = self.quota, self.cq.name
        for fr, v in self.usage.items():
            if not borrowing and quota.borrowing_with(self.key, fr, v, overlay.get):
                return False
            if v > quota.available(name, fr, overlay):
                return False
        return True

    def _state_fits(self, borrowing: bool) -> bool:
        """workloadFits, quota part, on the live state (candidates released there)."""
        state, name = self.preemptor.state, self.cq.name
        for fr, v in self.usage.items():
            if not borrowing and state.used(name, fr) + v > state.nominal(name, fr):
                return False
            if v > max(0, state.available(name, fr)):
                return False
        return True

    def _could_fit(self, borrowing: bool, frs: set[FR]) -> bool:
        """A necessary condition, before walking the candidates: does the workload fit
        with every candidate of its own queue gone, and from each other queue every
        candidate up to the one that takes that queue down to its nominal quota (the
        walk stops taking from a queue there)? The walk removes a subset of these."""
        overlay = Overlay(self.preemptor.state, frs)
        columns = self.preemptor.columns
        for sources in (self.same, self.hierarchy, self.priority):
            for s in sources:
                freed = self.most_freed(s, borrowing)
                overlay.change_usage(s.name, {fr: int(freed[j]) for fr, j in columns.items() if freed[j]}, -1)
        return self._quota_fits(borrowing, overlay)

    def _fits_usage(self, borrowing: bool, arrays: QuotaArrays, usage: np.ndarray) -> bool:
        """_quota_fits on a QuotaArrays usage."""
        available = arrays.available(usage, self.key)
        own = arrays.row[self.key]
        columns = self.preemptor.columns
        for fr, v in self.usage.items():
            j = columns[fr]
            if not borrowing and usage[own, j] + v > arrays.subtree[own, j]:
                return False
            if v > max(0, int(available[j])):
                return False
        return True

    def most_freed(self, s: Source, borrowing: bool) -> np.ndarray:
        return self._reach(s, borrowing).freed

    def _reach(self, s: Source, borrowing: bool) -> "Reach":
        """What a run could take from `s` at most (kept with the source: the same while
        its queue's list, and so its usage when nominating, stays the same)."""
        key = (id(s), borrowing)
        found = self.preemptor.reaches.get(key)
        if found is None or found[0] is not s:
            found = self.preemptor.reaches[key] = (s, self._make_reach(s, borrowing))
        return found[1]

    def _make_reach(self, s: Source, borrowing: bool) -> "Reach":
        index = s.index
        if borrowing and s.name != self.cq.name:
            index = index[s.variant != RECLAIM_WITHOUT_BORROWING]
        index = index[np.argsort(s.view.settled[index], kind="stable")]   # the search's order: evicted first
        usage = s.view.usage[index]
        if s.name == self.cq.name or not len(index):
            return Reach(s, index, usage.sum(axis=0))
        # Another queue gives up candidates while it is above nominal in some resource
        # needing preemption: up to the one that takes the last of them to nominal.
        cum = np.cumsum(usage, axis=0)
        live = self.quota.live
        stop = 0
        for fr in self.frs_need:
            excess = live(f"cq:{s.name}", fr) - self.quota.tree.subtree_quota(f"cq:{s.name}", fr)
            if excess > 0:
                stop = max(stop, int(np.searchsorted(cum[:, self.preemptor.column(fr)], excess, side="left")) + 1)
        stop = min(stop, len(index))
        return Reach(s, index[:stop], cum[stop - 1] if stop else usage[:0].sum(axis=0))

    def _nodes_could_fit(self, borrowing: bool, picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> bool:
        """The nodes' side of _could_fit: does each pod set, alone, fit with everything
        _could_fit counts as taken released? The walk releases a subset, and a pod set
        that does not fit alone does not fit beside the others: if not, no run fits."""
        state = self.preemptor.state
        parts = [self._reach(s, borrowing).nodes(state) for sources in (self.same, self.hierarchy, self.priority)
                 for s in sources]
        freed = Freed(np.concatenate([p.rows for p in parts]), np.concatenate([p.used for p in parts]),
                      np.zeros(0, dtype=np.int64), ())
        return all(state.fits_released(option, ps, count, freed) for ps, option, count in picks)

    def attempt(self, borrowing: bool, nodes_fit: Callable[[], bool] | None,
                picks: Sequence[tuple[PodSet, FlavorOption, int]] = ()) -> tuple[list[Target], UsageLookup] | None:
        """One run over the candidates: remove each valid one until the workload fits,
        then add back, in reverse, every one it still fits without."""
        frs = set(self.usage) | self.frs_need
        if not self._could_fit(borrowing, frs):
            return None
        if nodes_fit is not None and picks and self.preemptor.shortcuts and not self._nodes_could_fit(borrowing, picks):
            return None
        order = self.order()
        removed, first, taken = self._sequence(borrowing, order, sorted(frs))
        if first is None:
            return None
        if self.preemptor.shortcuts and nodes_fit is not None and len(picks) == 1:
            return self._attempt_on_copies(borrowing, removed, first, order.use[taken], picks[0])
        overlay = Overlay(self.preemptor.state, frs)
        if nodes_fit is None:
            for a in removed[:first]:
                overlay.change(a, -1)
            # Quota alone: add back, last removed but one first, what is not needed.
            if self.preemptor.shortcuts:   # a run at a time (victims.put_back: the same victims)
                chosen = put_back(overlay, removed[:first], lambda: self._quota_fits(borrowing, overlay))
                return [self._target(removed[i]) for i in chosen], overlay
            keep = [True] * first
            for k in range(first - 2, -1, -1):
                overlay.change(removed[k], +1)
                if self._quota_fits(borrowing, overlay):
                    keep[k] = False
                else:
                    overlay.change(removed[k], -1)
            return [self._target(a) for a, k in zip(removed, keep) if k], overlay
        # Nodes too: the quota fits from `first` on; the first prefix of the removal order
        # (which goes on past it) where the nodes fit as well, then the add-back.
        state = self.preemptor.state
        views: list[Workload] = [a.view for a in removed]

        def fits() -> bool:
            return self._state_fits(borrowing) and nodes_fit()

        fitting = first_fitting_prefix(state, views, first, lambda n: len(views), fits, probe_whole=True)
        if fitting is None:
            return None
        chosen = put_back(state, views[:fitting], fits)
        state.release_many([views[i] for i in chosen], sign=-1)
        return [self._target(removed[i]) for i in chosen], overlay

    def _attempt_on_copies(self, borrowing: bool, removed: Sequence[Admitted], first: int, use: np.ndarray,
                           pick: tuple[PodSet, FlavorOption, int]) -> tuple[list[Target], "_Scratch"] | None:
        """attempt()'s walk and add-back for a workload of one pod set, on a _Scratch:
        the same victims, and the live state untouched."""
        scratch = _Scratch(self, borrowing, removed, use, pick)
        indexes = list(range(len(removed)))
        fitting = first_fitting_prefix(scratch, indexes, first, lambda n: len(indexes), scratch.fits,
                                       probe_whole=True)
        if fitting is None:
            return None
        chosen = put_back(scratch, indexes[:fitting], scratch.fits)
        return [self._target(removed[i]) for i in chosen], scratch

    def _sequence(self, borrowing: bool, order: _Order,
                  frs: Sequence[FR]) -> tuple[list[Admitted], int | None, np.ndarray]:
        """The candidates Kueue's run removes, in order, were it never to stop, and how
        many it removes before the quota fits (None: never), computed at once.

        A candidate of another queue is removed only while its queue, and each cohort
        between it and the preemptor's branch, uses more than its quota of some
        flavor/resource needing preemption; usage only falls during a run, so each such
        node has a position after which nothing under it is removed. Those positions
        are found bottom-up with running sums (a node's usage is what its children pass
        up beyond their guaranteed quota), then the preemptor's queue's available()
        after every prefix of what is removed, in one pass down its chain.
        """
        preemptor, tree, live = self.preemptor, self.quota.tree, self.quota.live
        n = len(order.source)
        if n == 0:
            return [], None, np.zeros(0, dtype=np.int64)
        cols = np.array([preemptor.column(fr) for fr in frs], dtype=np.int64)
        need = np.array([fr in self.frs_need for fr in frs], dtype=bool)
        own = self.cq.name
        names = [src.name for src in order.sources]
        queue_of = order.source
        own_sources = np.array([name == own for name in names], dtype=bool)
        use = order.use[:, cols]                                              # n x F
        variant = order.variant
        mine = own_sources[queue_of]
        kept = mine | ~(borrowing & (variant == RECLAIM_WITHOUT_BORROWING))
        path = {self.key, *self.quota.ancestors(self.key)}

        def vector(node: str, what: Callable[[str, FR], int]) -> np.ndarray:
            return np.array([what(node, fr) for fr in frs], dtype=np.int64)

        # Events per node off the preemptor's branch: (positions, usage it loses at each).
        events: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        cut: dict[str, float] = {}
        by_queue: dict[str, np.ndarray] = {}
        others = np.flatnonzero(kept & ~mine)
        for j, name in enumerate(names):
            if name != own:
                rows = others[queue_of[others] == j]
                if len(rows):
                    by_queue[name] = rows
        children: dict[str, set[str]] = {}
        depth: dict[str, int] = {}
        for name in by_queue:
            node = f"cq:{name}"
            d = 0
            while node not in path:
                depth[node] = max(depth.get(node, 0), d)
                parent = tree.parent.get(node)
                if parent is None:
                    break
                if parent not in path:
                    children.setdefault(parent, set()).add(node)
                node, d = parent, d + 1
        for node in sorted(depth, key=lambda x: (depth[x], x)):
            if node.startswith("cq:"):
                at = by_queue[node[3:]]
                loss = use[at]
            else:
                parts = []
                for child in sorted(children.get(node, ())):
                    c_at, c_loss = events[child]
                    if not len(c_at):
                        continue
                    g = vector(child, tree.guaranteed)
                    before = vector(child, live) - np.vstack([np.zeros(len(frs), dtype=np.int64),
                                                              np.cumsum(c_loss, axis=0)[:-1]])
                    after = before - c_loss
                    parts.append((c_at, np.maximum(0, before - g) - np.maximum(0, after - g)))
                if parts:
                    at = np.concatenate([p[0] for p in parts])
                    loss = np.vstack([p[1] for p in parts])
                    order_at = np.argsort(at, kind="stable")
                    at, loss = at[order_at], loss[order_at]
                else:
                    at, loss = np.zeros(0, dtype=np.int64), np.zeros((0, len(frs)), dtype=np.int64)
            quota = vector(node, tree.subtree_quota)
            usage = vector(node, live)
            if not (usage[need] > quota[need]).any():
                cut[node] = 0          # within its quota already: nothing under it is taken
                events[node] = (at[:0], loss[:0])
                continue
            left = usage - np.cumsum(loss, axis=0)
            within = (left[:, need] <= quota[need]).all(axis=1)
            hit = np.flatnonzero(within)
            if len(hit):
                last = int(hit[0])
                cut[node] = float(at[last] + 1)
                events[node] = (at[:last + 1], loss[:last + 1])
            else:
                cut[node] = float("inf")
                events[node] = (at, loss)
        # What is removed: every kept candidate of the preemptor's queue; another's while
        # every node between it and the preemptor's branch is above its quota.
        limit = {}
        for name in by_queue:
            up: str | None = f"cq:{name}"
            lowest = float("inf")
            while up is not None and up not in path:
                lowest = min(lowest, cut[up])
                up = tree.parent.get(up)
            limit[name] = lowest
        bound = np.array([float("inf") if name == own else limit.get(name, 0.0) for name in names])
        taken_at = np.flatnonzero(kept & (mine | (np.arange(n) < bound[queue_of])))
        if not len(taken_at):
            return [], None, taken_at
        m = len(taken_at)
        # Usage along the preemptor's chain after each prefix of `taken` (row j: j removed).
        rank = np.searchsorted(taken_at, np.arange(n))         # position -> prefix where it is gone

        def timeline(node: str) -> np.ndarray:
            start = vector(node, live)
            out = np.zeros((m + 1, len(frs)), dtype=np.int64)
            if node == self.key:
                own_rows = taken_at[mine[taken_at]]
                lose = np.zeros((m + 1, len(frs)), dtype=np.int64)
                lose[rank[own_rows] + 1] = use[own_rows]
                return start - np.cumsum(lose, axis=0)
            for child in tree.children.get(node, []):
                if child in path:
                    u = timeline(child)
                elif child in events:
                    c_at, c_loss = events[child]
                    lose = np.zeros((m + 1, len(frs)), dtype=np.int64)
                    inside = c_at < n
                    np.add.at(lose, rank[c_at[inside]] + 1, c_loss[inside])
                    u = vector(child, live) - np.cumsum(lose, axis=0)
                else:
                    continue
                g = vector(child, tree.guaranteed)
                out += np.maximum(0, u[0] - g) - np.maximum(0, u - g)
            return start - out

        chain = [self.key, *self.quota.ancestors(self.key)]
        usage_of = {node: timeline(node) for node in chain}
        available = vector(chain[-1], tree.subtree_quota) - usage_of[chain[-1]]
        for j in range(len(chain) - 2, -1, -1):
            node = chain[j]
            u = usage_of[node]
            sub = vector(node, tree.subtree_quota)
            g = vector(node, tree.guaranteed)
            local = np.maximum(0, g - u)
            from_parent = available
            limits = [tree.limits(node, fr)[1] for fr in frs]
            if any(b is not None for b in limits):
                borrow = np.array([b if b is not None else np.iinfo(np.int64).max // 4 for b in limits],
                                  dtype=np.int64)
                from_parent = np.minimum(from_parent, sub - g - np.maximum(0, u - g) + borrow)
            available = np.where(from_parent > 0, local + from_parent, local)
        wanted = np.array([self.usage.get(fr, 0) for fr in frs], dtype=np.int64)
        asked = np.array([fr in self.usage for fr in frs], dtype=bool)
        fits = (wanted[asked] <= np.maximum(0, available[:, asked])).all(axis=1)
        if not borrowing:
            nominal = np.array([tree.limits(self.key, fr)[0] for fr in frs], dtype=np.int64)
            own_u = usage_of[self.key]
            fits &= (own_u[:, asked] + wanted[asked] <= nominal[asked]).all(axis=1)
        hits = np.flatnonzero(fits[1:])
        return [order.member(int(k)) for k in taken_at], (int(hits[0]) + 1 if len(hits) else None), taken_at

    def _target(self, a: Admitted) -> Target:
        return Target(a, PREEMPTED if a.cq == self.cq.name else RECLAIMED)
