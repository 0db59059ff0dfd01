"""Greedy's preemptor: Kueue's classical preemptor (and its fair-sharing one) over one
`ClusterState` and `Registry`, built once per run.

What `pkg/scheduler/preemption` decides for a head workload the flavor assigner
(planner.kueue.assigner.Rules) left in Preempt mode: its targets (`targets_for`,
Kueue's GetTargets; `targets` given what needs preemption), and for the assigner the
oracle (`oracle`, SimulatePreemption: may preemption make a quantity fit, and how high
would the workload borrow then). One search at a time runs in
planner.kueue.preemption.search (classical) or planner.kueue.preemption.fair; this
object keeps what searches share while the admitted workloads stay the same: each
queue's workloads as arrays, each source's candidates, and the bound no search can
beat (`ceiling`, which spares searches that cannot succeed).

It only computes: every change it makes to the state while searching is undone before
it returns, but for the victims `targets_for` reports, which it leaves as found too.

`stowplan.io/non-preemptible` work and work younger than the policy's minimum runtime
are never candidates (Kueue has neither): `Admitted.evictable` says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from models import ClusterQueue, FlavorResource as FR, PodSet, Snapshot, Workload
from planner.kueue import fairsharing
from planner.kueue.flavors import G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, Assignment, Fits, Place, resource_group
from planner.kueue.preemption import Target, fair
from planner.kueue.preemption.search import QueueView, Reach, Search, Source
from planner.kueue.quota import Overlay, Quota, UsageLookup
from planner.kueue.quota_arrays import QuotaArrays
from planner.kueue.registry import Admitted, Registry
from planner.kueue.semantics import FlavorOption

if TYPE_CHECKING:
    from planner.kueue.state import ClusterState


class Preemptor:
    """Kueue's preemptor over one ClusterState and Registry (see the module docstring).

    `place` and `fits` are the flavor assigner's (planner.kueue.flavors.Place, Fits);
    `quota` its quota questions, shared so that their caches are. `fair`: Kueue's fair
    sharing (Configuration fairSharing.enable): preemption is then fairPreemptions and
    a borrowing preemptor may reclaim.
    """

    def __init__(self, snapshot: Snapshot, state: "ClusterState", registry: Registry, quota: Quota, place: Place,
                 fits: Fits, fair: fairsharing.Shares | None = None, shortcuts: bool = True):
        self.state = state
        self.registry = registry
        self.quota = quota
        self.place = place
        self.fits = fits
        self.fair = fair
        # Skip work whose answer is known without it (a search that cannot succeed); off,
        # every search runs in full: the plain path that tests compare the shortcuts with.
        self.shortcuts = shortcuts
        self._ceilings: dict[tuple[Any, ...], dict[FR, int]] = {}
        self._ceilings_at: tuple[Any, ...] = ()
        self._above: dict[tuple[Any, ...], list[str]] = {}
        self._above_at: tuple[Any, ...] = ()
        self.epoch = 0         # moves on with every nomination (Rules.nominate)
        # Set by a caller whose state is, while it nominates, what the admitted workloads
        # make it (nothing held): what depends on the state alone is then kept until one
        # comes or goes (Registry.epoch), not just for one nomination.
        self.steady = False
        self._wanted_frs: dict[tuple[str, int], tuple[Workload, frozenset[FR]]] = {}
        self._views: dict[str, tuple[int, QueueView]] = {}
        # A search's candidates per queue, and what they could free at most, kept while the
        # queue's list (and so its usage, when nominating) stays the same.
        self.sources: dict[tuple[Any, ...], Source] = {}
        self.reaches: dict[tuple[int, bool], tuple[Source, Reach]] = {}
        self._quota_arrays: QuotaArrays | None = None
        self._usage = np.zeros((0, 0), dtype=np.int64)
        self._usage_at = -1
        frs = {(fq.flavor, r) for q in snapshot.cluster_queues.values() for rg in q.resource_groups
               for fq in rg.flavors for r in fq.resources}
        frs |= {fr for q in registry.by_cq.values() for a in q for fr in a.usage}
        self.columns: dict[FR, int] = {fr: j for j, fr in enumerate(sorted(frs))}
        # Kueue breaks ties between candidates by UID: a rank per workload (then by name).
        # UID order; an elastic Job's releasable pods (planner.cycle.elastic) before the Job: a shrink loses less
        self.tie = {w.ref: k for k, w in enumerate(sorted(snapshot.workloads,
                                                          key=lambda w: (w.part_of is None, w.uid, str(w.ref))))}

    def quota_now(self) -> tuple[QuotaArrays, np.ndarray]:
        """The quota tree as arrays over `columns`, and its usage now (a row per tree
        node; kept until a charge moves it). Read-only: a search copies it."""
        arrays = self._quota_arrays
        if arrays is None or arrays.width != len(self.columns):
            arrays = self._quota_arrays = QuotaArrays(self.state.quota, self.columns)
            self._usage_at = -1
        if self._usage_at != self.state.charges:
            usage = np.zeros((len(arrays.nodes), arrays.width), dtype=np.int64)
            for key, per_fr in self.state.cq_usage.items():
                row = arrays.row.get(key)
                if row is not None:
                    for fr, amount in per_fr.items():
                        j = self.columns.get(fr)
                        if j is not None:
                            usage[row, j] = amount
            arrays.roll_up(usage)
            self._usage, self._usage_at = usage, self.state.charges
        return arrays, self._usage

    def column(self, fr: FR) -> int:
        j = self.columns.get(fr)
        if j is None:   # a flavor/resource no queue lists: a column of its own, from now on
            j = self.columns[fr] = len(self.columns)
            self._views.clear()
        return j

    def view(self, name: str) -> QueueView:
        """The queue's admitted workloads as arrays: kept while its list stays the same,
        followed through its changes (Registry.since) where it changes a little."""
        version = self.registry.version.get(name, 0)
        found = self._views.get(name)
        if found is not None and found[0] == version:
            return found[1]
        members = self.registry.by_cq.get(name, [])
        changes = self.registry.since(name, found[0]) if found is not None else None
        view = None
        if changes is not None and found is not None:
            for _, what, _, a in changes:
                if what == "add":
                    for fr in a.usage:
                        self.column(fr)
            if name in self._views:     # no new column (that drops every view)
                view = found[1].changed(changes, members, self.columns, self.tie)
        if view is None:
            for a in members:
                for fr in a.usage:
                    self.column(fr)
            view = QueueView(list(members), self.columns, self.tie)
        self._views[name] = (version, view)
        return view


    # -- the bound, and the oracle

    def ceiling(self, w: Workload, cq: ClusterQueue) -> Mapping[FR, int]:
        """What the queue would have available of each flavor/resource `w` may use if
        every workload any of its preemption searches could take were gone: its own
        queue's candidates, and those of every other queue of the tree above nominal,
        up to the one that takes that queue to nominal (a search stops there). Any search
        asking for more finds no targets, so it need not run. The same all through one
        nomination (kept for it: searches change the state only to put it back)."""
        if self.fair is not None:
            return {}      # fair preemption takes from any borrowing queue: no bound kept
        state = self.state
        equal = cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority"
        key = (cq.name, w.priority, w.queued_at if equal else None, self._wanted(w, cq))
        # When nominating, the state is what the admitted workloads make it: kept while
        # none comes or goes (the heads of later cycles ask again).
        at = ("steady", self.registry.epoch) if self.steady else ("one", self.epoch)
        if self._ceilings_at != at:
            self._ceilings.clear()
            self._ceilings_at = at
        found = self._ceilings.get(key)
        if found is None:
            frs = set(key[3])
            ctx = Search(self, w, cq, frs, {fr: 0 for fr in frs})
            overlay = Overlay(state, frs)
            for s in ctx.same + ctx.hierarchy + ctx.priority:
                freed = ctx.most_freed(s, False)
                overlay.change_usage(s.name, {fr: int(freed[j]) for fr, j in self.columns.items() if freed[j]}, -1)
            found = self._ceilings[key] = {fr: self.quota.available(cq.name, fr, overlay) for fr in frs}
        return found

    def above_nominal(self, current: str, skip: str | None, frs: tuple[FR, ...]) -> list[str]:
        """The queues under `current` (not under `skip`) that, with every cohort between,
        use more than their quota of some of `frs`: where candidates of a cohort may be
        (collectCandidatesForHierarchicalReclaim). Kept as ceiling() keeps its answers."""
        at = ("steady", self.registry.epoch) if self.steady else ("one", self.epoch)
        if self._above_at != at:
            self._above.clear()
            self._above_at = at
        key = (current, skip, frs)
        found = self._above.get(key)
        if found is None:
            found = self._above[key] = []
            need = set(frs)
            tree, live = self.quota.tree, self.quota.live
            for child in tree.children.get(current, []):
                if child == skip or self.quota.within_nominal(child, need, live):
                    continue   # not borrowing what the preemptor needs
                if child.startswith("cohort:"):
                    found.extend(self.above_nominal(child, skip, frs))
                else:
                    found.append(child.removeprefix("cq:"))
        return found

    def _wanted(self, w: Workload, cq: ClusterQueue) -> frozenset[FR]:
        """Every flavor/resource `w` could charge in `cq`."""
        key = (cq.name, id(w))
        found = self._wanted_frs.get(key)
        if found is None or found[0] is not w:
            frs: set[FR] = set()
            for ps in w.pod_sets:
                for r, v in ps.request.items():
                    g = resource_group(cq, r)
                    if v > 0 and g is not None:
                        frs.update((fq.flavor, r) for fq in cq.resource_groups[g].flavors)
            found = self._wanted_frs[key] = (w, frozenset(frs))
        return found[1]

    def oracle(self, w: Workload, cq: ClusterQueue, fr: FR, val: int) -> tuple[int, int]:
        """PreemptionOracle.SimulatePreemption: may preemption make `val` of one
        flavor/resource fit (quota only), and how high would it borrow then."""
        if val > self.ceiling(w, cq).get(fr, val):
            return G_NO_CANDIDATES, self.quota.lowest_fitting_subtree(cq.name, fr, val)[0]
        targets, overlay = self.targets(w, cq, {fr}, {fr: val}, None)
        if not targets or overlay is None:
            return G_NO_CANDIDATES, self.quota.lowest_fitting_subtree(cq.name, fr, val)[0]
        borrow = self.quota.lowest_fitting_subtree(cq.name, fr, val, overlay.get)[0]
        own = any(t.admitted.cq == cq.name for t in targets)
        return (G_PREEMPT if own else G_RECLAIM), borrow


    # -- targets

    def targets_for(self, w: Workload, cq: ClusterQueue, a: Assignment) -> list[Target]:
        """Preemptor.GetTargets for an assignment in Preempt mode; on success the
        assignment's choices are its placement once the targets are gone."""
        ceiling = self.ceiling(w, cq)
        if any(v > ceiling.get(fr, v) for fr, v in a.usage.items()):
            return []
        picks = a.picks()
        state = self.state

        def nodes_fit() -> bool:
            return self.fits(state, cq, w, picks)

        targets, _ = self.targets(w, cq, a.need_preemption(), a.usage, nodes_fit, picks)
        if targets:
            victims = [t.admitted.view for t in targets]
            state.release_many(victims)
            try:
                placed = self.place(state, cq, w, picks)
            finally:
                state.release_many(victims, sign=-1)
            if isinstance(placed, tuple):     # cannot happen: the search just saw it fit
                return []
            a.choices = placed
        return targets

    def candidates(self, w: Workload, cq: ClusterQueue, a: Assignment) -> list[Admitted]:
        """The candidates targets_for's search walks for `a` (an assignment of `w` in
        Preempt mode), in Kueue's order: the classical search's, or fair sharing's
        findCandidates. [] where that search would not run: nothing needs preemption, or
        the request is above what the queue may ever take (`ceiling`)."""
        ceiling = self.ceiling(w, cq)
        frs = a.need_preemption()
        if not frs or any(v > ceiling.get(fr, v) for fr, v in a.usage.items()):
            return []
        if self.fair is not None:
            return fair.candidates(self, w, cq, frs)
        order = Search(self, w, cq, frs, a.usage).order()
        return [order.member(k) for k in range(len(order.index))]

    def targets(self, w: Workload, cq: ClusterQueue, frs_need: set[FR], usage: Mapping[FR, int],
                nodes_fit: Callable[[], bool] | None,
                picks: Sequence[tuple[PodSet, FlavorOption, int]] = ()) -> tuple[list[Target], UsageLookup | None]:
        """Preemptor.GetTargets, quota and nodes, given what needs preemption:
        classicalPreemptions (or fairPreemptions where `fair` is set): the victims that make room for `usage` (quota, and nodes
        where `nodes_fit` is given: whether `picks` fit), or []. Without `nodes_fit` (the
        oracle) also the quota with the victims gone."""
        if not frs_need:
            return [], None
        if self.fair is not None:
            return fair.targets(self, w, cq, frs_need, usage, nodes_fit)
        ctx = Search(self, w, cq, frs_need, usage)
        if not (ctx.same or ctx.hierarchy or ctx.priority):
            return [], None
        forbidden = cq.preemption.borrow_within_cohort == "Never"
        if ctx.none_from_other_queues() or (forbidden and not ctx.under_nominal()):
            attempts = [True]
        elif forbidden and ctx.none_hierarchical():
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            found = ctx.attempt(borrowing, nodes_fit, picks)
            if found is not None:
                return found
        return [], None
