"""Kueue v0.17's rules for one head workload, as its scheduler applies them.

What `pkg/scheduler/flavorassigner` decides for a workload (flavor by flavor and
resource group by resource group: Fit, Preempt or NoFit, how high in the cohort tree
it borrows, when flavorFungibility stops the search, where a requeued workload
resumes), what `pkg/scheduler/preemption` (classical) picks as victims (candidates
from the preemptor's queue and from borrowing queues of its cohort tree, in Kueue's
order, tried with and without borrowing, removed while their queue is above nominal,
then added back in reverse), and the quota arithmetic of `pkg/cache/scheduler` those
two need beyond `available()` (potential capacity, the height of the lowest subtree
that fits, quantities that fit a node's quota, "within nominal").

It works over the shared `ClusterState` (planner.kueue.state: quota usage and free
nodes) and a `Registry` of admitted workloads; node placement comes from the caller
(`place`), so this module never imports planner.greedy. It only computes: every change it makes
to the state while searching is undone before it returns. The cycle that asks these
questions, in Kueue's order, is planner.greedy.

Where Stowplan goes beyond Kueue, and why:
- Kueue places pods on nodes only for TAS flavors (a Topology); Stowplan places every
  pod set on named nodes. A flavor without a Topology is placed as Kueue places an
  implied TAS request (hostname level, LeastFreeCapacity); where the quota fits but the
  nodes do not, the pod set needs preemption as a TAS pod set would.
- `stowplan.io/non-preemptible` work and work younger than the policy's minimum runtime
  are never candidates (Kueue has neither).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from models import ClusterQueue, ObjectRef, PodSet, ResourceFlavor, Snapshot, Workload
from models.objects import tolerated
from models.resources import PODS
from planner.kueue import fairsharing
from planner.kueue.quota_arrays import QuotaArrays
from planner.kueue.semantics import FlavorOption, QuotaTree
from planner.kueue.state import Freed
from planner.kueue.topology import levels_for

if TYPE_CHECKING:
    from planner.kueue.state import PodSetChoice, ClusterState

FR = tuple[str, str]   # (flavor, resource)

# Kueue's FlavorAssignmentMode, worst first.
NO_FIT, PREEMPT, FIT = 0, 1, 2
# The flavor assigner's finer preemption mode (flavorassigner.go preemptionMode), worst first.
G_NO_FIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = 0, 1, 2, 3, 4
_TO_MODE = {G_NO_FIT: NO_FIT, G_NO_CANDIDATES: PREEMPT, G_PREEMPT: PREEMPT, G_RECLAIM: PREEMPT, G_FIT: FIT}
# How a candidate may be preempted (classical/hierarchical_preemption.go preemptionVariant).
WITHIN_CQ, HIERARCHICAL_RECLAIM, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = 1, 2, 3, 4

PREEMPTED = "Preempted"   # Stowplan's reason for a victim of the preemptor's own queue
RECLAIMED = "Reclaimed"   # ... and of another queue of its cohort tree



# ---------------------------------------------------------------- admitted workloads

@dataclass(eq=False)
class Admitted:
    """A workload holding quota: running before the plan, or admitted by it.

    `view` is the workload as running (its assignment: where it holds nodes and quota),
    which ClusterState releases and takes back. `order` is Kueue's candidate order
    within one queue: lower priority first, most recently admitted first, then UID.
    """

    view: Workload
    cq: str
    usage: dict[FR, int]
    evictable: bool
    planned: bool                   # admitted by this plan (not running before it)
    admitted_at: float
    order: tuple[Any, ...] = field(default=())
    evicting: bool = False          # its eviction is issued, not complete (Kueue: IsEvicted)
    # May another queue's workload reclaim it? Kueue's rule alone says yes (while its
    # queue borrows); greedy says no for running work whose reclaim an earlier replay
    # could not justify in its end state (planner.greedy: protected work).
    reclaimable: bool = True

    def __post_init__(self) -> None:
        w = self.view
        self.frs = frozenset(fr for fr, v in self.usage.items() if v > 0)
        self.order = (w.priority, -self.admitted_at, w.part_of is None, w.uid, str(w.ref))

    @property
    def ref(self) -> ObjectRef:
        return self.view.ref

    @property
    def priority(self) -> int:
        return self.view.priority


class Registry:
    """Admitted workloads per ClusterQueue, each queue's list in Kueue's candidate order."""

    def __init__(self) -> None:
        self.by_cq: dict[str, list[Admitted]] = {}
        self.by_ref: dict[ObjectRef, Admitted] = {}
        self.version: dict[str, int] = {}     # per queue: moves on with every change to its list
        self.epoch = 0                        # moves on with every change to any list
        # Per queue, its latest changes: (version after, "add" | "remove" | "mark", position,
        # workload), so that what is built from a queue's list can follow it (QueueView).
        self.changes: dict[str, list[tuple[int, str, int, Admitted]]] = {}

    def _changed(self, a: Admitted, what: str, at: int) -> None:
        version = self.version[a.cq] = self.version.get(a.cq, 0) + 1
        log = self.changes.setdefault(a.cq, [])
        log.append((version, what, at, a))
        if len(log) > 2 * self.KEPT:
            del log[:-self.KEPT]
        self.epoch += 1

    KEPT = 64

    def since(self, cq: str, version: int) -> list[tuple[int, str, int, Admitted]] | None:
        """The changes to `cq`'s list after `version`, or None if not all are kept."""
        log = self.changes.get(cq, [])
        if self.version.get(cq, 0) == version:
            return []
        if not log or log[0][0] > version + 1:
            return None
        return [c for c in log if c[0] > version]

    def add(self, a: Admitted) -> None:
        q = self.by_cq.setdefault(a.cq, [])
        lo, hi = 0, len(q)
        while lo < hi:                     # bisect on the order key
            mid = (lo + hi) // 2
            if q[mid].order < a.order:
                lo = mid + 1
            else:
                hi = mid
        q.insert(lo, a)
        self.by_ref[a.ref] = a
        self._changed(a, "add", lo)

    def mark_evicting(self, a: Admitted) -> None:
        """`a`'s eviction is under way: it sorts first among candidates from now on."""
        if not a.evicting:
            a.evicting = True
            self._changed(a, "mark", self.by_cq[a.cq].index(a))

    def remove(self, a: Admitted) -> None:
        q = self.by_cq[a.cq]
        at = q.index(a)
        del q[at]
        del self.by_ref[a.ref]
        self._changed(a, "remove", at)


# ---------------------------------------------------------------- quota arithmetic

Usage = Callable[[str, FR], int]   # tree node ("cq:NAME" | "cohort:NAME") -> usage of a flavor/resource


class UsageLookup(Protocol):
    """Usage of the cohort tree with some workloads taken away (Overlay, _Scratch)."""

    def get(self, node: str, fr: FR) -> int: ...


class Overlay:
    """Quota usage of a few flavor/resources with some workloads taken away (Kueue's
    snapshot.RemoveWorkload, for quota only): a copy that the real state never sees."""

    def __init__(self, state: "ClusterState", frs: Iterable[FR]):
        self.tree: QuotaTree = state.quota
        self.usage = {fr: dict(state._usage(fr)) for fr in frs}

    def get(self, node: str, fr: FR) -> int:
        return self.usage[fr].get(node, 0)

    def change(self, a: Admitted, sign: int) -> None:
        """Take `a` away (sign -1) or give it back (+1), carried up the cohort tree."""
        self.change_usage(a.cq, a.usage, sign)

    def release_many(self, admitted: Sequence[Admitted], sign: int = 1) -> None:
        """Take them away (sign 1) or give them back (-1), as ClusterState releases."""
        for a in admitted:
            self.change(a, -sign)

    def change_usage(self, cq: str, amounts: Mapping[FR, int], sign: int) -> None:
        key = f"cq:{cq}"
        if key not in self.tree.parent:
            return
        for fr, amount in amounts.items():
            usage = self.usage.get(fr)
            if usage is None or not amount:
                continue
            old = usage.get(key, 0)
            self.tree.move_usage(usage, key, fr, old, old + sign * amount)


class Quota:
    """Kueue's quota questions about the cohort tree (resource_node.go and friends),
    asked of the live state or of an Overlay."""

    def __init__(self, state: "ClusterState"):
        self.state = state
        self.tree: QuotaTree = state.quota
        self._height: dict[str, int] = {}
        self._potential: dict[tuple[str, FR], int] = {}

    def live(self, node: str, fr: FR) -> int:
        return self.state._usage(fr).get(node, 0)

    def available(self, cq: str, fr: FR, usage: Overlay | None = None) -> int:
        """Kueue's Available(): never below 0."""
        if usage is None:
            return max(0, self.state.available(cq, fr))
        return max(0, self.tree.available(f"cq:{cq}", fr, usage.usage[fr]))

    def potential_available(self, cq: str, fr: FR) -> int:
        """The most the queue could ever take, all else empty (potentialAvailable)."""
        key = (cq, fr)
        found = self._potential.get(key)
        if found is None:
            chain = self.tree.chain(f"cq:{cq}", fr)
            _, _, _, subtree = chain[-1]
            avail = subtree
            for i in range(len(chain) - 2, -1, -1):
                _, guaranteed, borrowing, subtree = chain[i]
                avail = guaranteed + avail
                if borrowing is not None:
                    avail = min(subtree + borrowing, avail)
            found = self._potential[key] = avail
        return found

    def local_available(self, node: str, fr: FR, usage: Usage) -> int:
        return max(0, self.tree.guaranteed(node, fr) - usage(node, fr))

    def borrowing_with(self, node: str, fr: FR, val: int, usage: Usage) -> bool:
        """usage + val above the node's subtree quota (a queue's: its nominal quota)."""
        return usage(node, fr) + val > self.tree.subtree_quota(node, fr)

    def height(self, node: str) -> int:
        """Distance to the furthest leaf (getNodeHeight): 1 for a cohort of queues only."""
        if node not in self._height:
            kids = self.tree.children.get(node, [])
            best = min(len(kids), 1)
            for kid in kids:
                if kid.startswith("cohort:"):
                    best = max(best, self.height(kid) + 1)
            self._height[node] = best
        return self._height[node]

    def lowest_fitting_subtree(self, cq: str, fr: FR, val: int, usage: Usage | None = None) -> tuple[int, bool]:
        """FindHeightOfLowestSubtreeThatFits: (height of the lowest subtree whose quota
        takes `val` more, whether that subtree is smaller than the whole tree)."""
        usage = usage or self.live
        key = f"cq:{cq}"
        parent = self.tree.parent.get(key)
        if parent is None or not self.borrowing_with(key, fr, val, usage):
            return 0, parent is not None
        remaining = val - self.local_available(key, fr, usage)
        node: str | None = parent
        top = parent
        while node is not None:
            if not self.borrowing_with(node, fr, remaining, usage):
                return self.height(node), self.tree.parent.get(node) is not None
            remaining -= self.local_available(node, fr, usage)
            top = node
            node = self.tree.parent.get(node)
        return self.height(top), False

    def within_nominal(self, node: str, frs: Iterable[FR], usage: Usage) -> bool:
        """IsWithinNominalInResources: usage at most the subtree quota for all of `frs`."""
        return all(usage(node, fr) <= self.tree.subtree_quota(node, fr) for fr in frs)

    def fits_in_quota(self, node: str, requests: Mapping[FR, int], usage: Usage) -> tuple[bool, dict[FR, int]]:
        """QuantitiesFitInQuota: do `requests` fit the node's subtree quota, and what is
        left for its parent beyond the node's own guaranteed quota."""
        fits = True
        remaining = {}
        for fr, v in requests.items():
            if usage(node, fr) + v > self.tree.subtree_quota(node, fr):
                fits = False
            remaining[fr] = max(0, v - self.local_available(node, fr, usage))
        return fits, remaining

    def ancestors(self, node: str) -> Iterator[str]:
        parent = self.tree.parent.get(node)
        while parent is not None:
            yield parent
            parent = self.tree.parent.get(parent)


# ---------------------------------------------------------------- flavor matching

def explicit_tas(pod_set: PodSet) -> bool:
    """IsExplicitlyRequestingTAS: the pod set carries a Kueue TAS annotation."""
    t = pod_set.topology
    return t.mode in ("required", "preferred", "unconstrained") or bool(t.slices)


def has_topology(snapshot: Snapshot, flavor: ResourceFlavor) -> bool:
    return bool(flavor.topology_name) and flavor.topology_name in snapshot.topologies


def tas_only(snapshot: Snapshot, cq: ClusterQueue) -> bool:
    """Every flavor of every resource group of the queue has a Topology (isTASOnly)."""
    return all(fq.flavor in snapshot.flavors and has_topology(snapshot, snapshot.flavors[fq.flavor])
               for rg in cq.resource_groups for fq in rg.flavors)


def _tas_mismatch(snapshot: Snapshot, cq: ClusterQueue, pod_set: PodSet, flavor: ResourceFlavor,
                  covered: Sequence[str]) -> str | None:
    """checkPodSetAndFlavorMatchForTAS."""
    if explicit_tas(pod_set):
        if flavor.topology_name is None:
            if not any(pod_set.request.get(r) > 0 for r in covered if r != PODS):
                return None   # a quota-only flavor beside the TAS one
            return f"flavor {flavor.name} does not support TopologyAwareScheduling"
        if not has_topology(snapshot, flavor):
            return f"flavor {flavor.name}: its Topology {flavor.topology_name} does not exist"
        levels = levels_for(snapshot, [flavor])
        t = pod_set.topology
        wanted = [t.level] if t.mode in ("required", "preferred") else []
        wanted += [t.slices[0].level] if t.slices else []
        if any(level not in levels for level in wanted):
            return f"flavor {flavor.name} does not contain the requested level"
        return None
    if flavor.topology_name is not None and not tas_only(snapshot, cq):
        return f"flavor {flavor.name} supports only TopologyAwareScheduling"
    return None


def flavor_mismatch(snapshot: Snapshot, cq: ClusterQueue, group: int, flavor_name: str,
                    pod_set: PodSet) -> str | None:
    """checkFlavorForPodSets for one pod set: why it cannot take this flavor, or None.

    TAS match, the flavor's nodeTaints against the pod set's tolerations plus the
    flavor's own, and the pod set's nodeSelector on the label keys the group's flavors
    use (Kueue's flavorSelector) against the flavor's nodeLabels.
    """
    flavor = snapshot.flavors.get(flavor_name)
    if flavor is None:
        return f"flavor {flavor_name} not found"
    rg = cq.resource_groups[group]
    tas = _tas_mismatch(snapshot, cq, pod_set, flavor, rg.covered_resources)
    if tas is not None:
        return tas
    if not tolerated(flavor.node_taints, pod_set.tolerations + flavor.tolerations):
        return f"the pod set does not tolerate the taints of flavor {flavor_name}"
    keys = {k for fq in rg.flavors if fq.flavor in snapshot.flavors for k in snapshot.flavors[fq.flavor].node_labels}
    if any(k in keys and flavor.node_labels.get(k) != v for k, v in pod_set.node_selector.items()):
        return f"flavor {flavor_name} doesn't match the pod set's node selector"
    return None


# ---------------------------------------------------------------- the assignment

@dataclass(eq=False)
class Assigned:
    """One pod set's flavors as the flavor assigner leaves them (PodSetAssignment)."""

    index: int
    pod_set: PodSet
    count: int
    flavors: dict[str, str] = field(default_factory=dict)     # resource -> flavor
    modes: dict[str, int] = field(default_factory=dict)       # resource -> FIT | PREEMPT | NO_FIT
    reasons: list[str] = field(default_factory=list)
    failed: bool = False                                       # no flavor at all
    option: FlavorOption | None = None

    def mode(self) -> int:
        if self.failed or not self.flavors:
            return NO_FIT if (self.failed or self.reasons) else FIT
        if not self.reasons:
            return FIT
        return min(self.modes.values())

    def set_modes(self, mode: int) -> None:
        for r in self.modes:
            self.modes[r] = mode


@dataclass(eq=False)
class Assignment:
    """A workload's flavor assignment (flavorassigner.Assignment)."""

    pod_sets: list[Assigned]
    borrowing: int = 0
    usage: dict[FR, int] = field(default_factory=dict)
    last: dict[tuple[int, str], int] = field(default_factory=dict)   # LastTriedFlavorIdx
    generation: int = 0
    mode: int = NO_FIT
    choices: list["PodSetChoice"] | None = None     # where it goes: Fit, or the preemptor once its targets are gone
    reason: str = ""                           # the first reason it does not fit, for people
    # Oracle questions not asked yet: (flavor/resource, quantity). Where the group had one
    # flavor to try, the oracle's answer cannot change the flavor, only how high the
    # workload borrows, which orders it among the heads only when it preempts (Rules.resolve).
    pending: list[tuple[FR, int]] = field(default_factory=list)

    def need_preemption(self) -> set[FR]:
        """flavorResourcesNeedPreemption: the flavor/resources assigned in Preempt mode."""
        return {(f, r) for a in self.pod_sets for r, f in a.flavors.items() if a.modes.get(r) == PREEMPT}

    def pending_flavors(self) -> bool:
        """PendingFlavors: the search stopped before the last flavor of some group."""
        return any(v != -1 for v in self.last.values())

    def counts(self) -> list[int]:
        return [a.count for a in self.pod_sets]

    def picks(self) -> list[tuple[PodSet, FlavorOption, int]]:
        """(pod set, its flavors, count) of every pod set, for an assignment with flavors."""
        out = []
        for p in self.pod_sets:
            assert p.option is not None
            out.append((p.pod_set, p.option, p.count))
        return out


@dataclass(frozen=True)
class _Group:
    """Pod sets of a workload that take their flavors together (a pod-set group, or one
    pod set), as the assigner reads them."""

    members: list[int]
    requests: dict[str, int]
    uncovered: str | None                                          # a resource the queue does not cover
    needs: list[tuple[int, tuple[str, ...], tuple[str | None, ...]]]   # (group, covered resources, mismatch per flavor)


Place = Callable[["ClusterState", ClusterQueue, Workload, Sequence[tuple[PodSet, FlavorOption, int]]],
                 "list[PodSetChoice] | tuple[int, str]"]


@dataclass
class Target:
    admitted: Admitted
    reason: str          # PREEMPTED | RECLAIMED


class Rules:
    """The flavor assigner and the classical preemptor over one ClusterState.

    `place(state, cq, workload, picks)`: node placement of every pod set with fixed
    flavors and counts, jointly (Kueue's TAS assignment for a workload), as choices or
    (pod set index, why not); `fits(...)`: whether `place` would place them. `empty` is
    the state with nothing admitted (Kueue's SimulateEmpty).
    """

    def __init__(self, snapshot: Snapshot, state: "ClusterState", registry: Registry, place: Place,
                 fits: Callable[["ClusterState", ClusterQueue, Workload, Sequence[tuple[PodSet, FlavorOption, int]]], bool],
                 empty: Callable[[], "ClusterState"], shortcuts: bool = True):
        self.snapshot = snapshot
        # Skip work whose answer is known without it (a search that cannot succeed); off,
        # every search runs in full: the plain path that tests compare the shortcuts with.
        self.shortcuts = shortcuts
        self.state = state
        self.registry = registry
        self.place = place
        self.fits = fits
        self._empty = empty
        self.quota = Quota(state)
        self._options: dict[tuple[str, tuple[tuple[str, str], ...]], FlavorOption] = {}
        self._tas_only: dict[str, bool] = {}
        self._groups: dict[tuple[str, str], int | None] = {}
        self._empty_fits: dict[tuple[Any, ...], tuple[object, "list[PodSetChoice] | tuple[int, str]"]] = {}
        self._layouts: dict[tuple[Any, ...], tuple[Workload, list[_Group]]] = {}
        self._ceilings: dict[tuple[Any, ...], dict[FR, int]] = {}
        self._ceilings_at: tuple[Any, ...] = ()
        self._above: dict[tuple[Any, ...], list[str]] = {}
        self._above_at: tuple[Any, ...] = ()
        self._epoch = 0        # moves on with every nomination
        # Set by a caller whose state is, while it nominates, what the admitted workloads
        # make it (nothing held): what depends on the state alone is then kept until one
        # comes or goes (Registry.epoch), not just for one nomination.
        self.steady = False
        # Kueue's fair sharing (Configuration fairSharing.enable): set by the caller; then
        # preemption is fairPreemptions and a borrowing preemptor may reclaim.
        self.fair: fairsharing.Shares | None = None
        self._wanted_frs: dict[tuple[str, int], tuple[Workload, frozenset[FR]]] = {}
        self._mismatches: dict[tuple[Any, ...], str | None] = {}
        self._views: dict[str, tuple[int, QueueView]] = {}
        # A search's candidates per queue, and what they could free at most, kept while the
        # queue's list (and so its usage, when nominating) stays the same.
        self._sources: dict[tuple[Any, ...], _Source] = {}
        self._reaches: dict[tuple[int, bool], tuple[_Source, _Reach]] = {}
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

    # -- small lookups

    def group_of(self, cq: ClusterQueue, resource: str) -> int | None:
        key = (cq.name, resource)
        if key not in self._groups:
            self._groups[key] = next((i for i, g in enumerate(cq.resource_groups)
                                      if resource in g.covered_resources), None)
        return self._groups[key]

    def is_tas_only(self, cq: ClusterQueue) -> bool:
        if cq.name not in self._tas_only:
            self._tas_only[cq.name] = tas_only(self.snapshot, cq)
        return self._tas_only[cq.name]

    def option(self, cq: ClusterQueue, flavors: Mapping[str, str]) -> FlavorOption:
        """The FlavorOption (one object per distinct choice, so placement caches hold)."""
        key = (cq.name, tuple(sorted(flavors.items())))
        found = self._options.get(key)
        if found is None:
            groups = sorted({g for r in flavors if (g := self.group_of(cq, r)) is not None})
            names: list[str] = []
            rank = []
            for g in groups:
                listed = [fq.flavor for fq in cq.resource_groups[g].flavors]
                chosen = next(f for r, f in sorted(flavors.items()) if self.group_of(cq, r) == g)
                rank.append(listed.index(chosen) if chosen in listed else 0)
                if chosen not in names:
                    names.append(chosen)
            found = self._options[key] = FlavorOption(dict(sorted(flavors.items())), tuple(names), tuple(rank))
        return found

    def on_topology(self, a: Assigned) -> bool:
        """Does the pod set's flavor have a Topology (Kueue places it), rather than
        Stowplan placing it on the flavor's nodes (see the module docstring)?"""
        return any(has_topology(self.snapshot, self.snapshot.flavors[f]) for f in a.flavors.values()
                   if f in self.snapshot.flavors)

    # -- the flavor assigner

    def assign(self, w: Workload, cq: ClusterQueue, counts: Sequence[int] | None = None,
               last: Mapping[tuple[int, str], int] | None = None, generation: int = 0) -> Assignment:
        """FlavorAssigner.Assign (then the TAS step) against the state as it is.

        `last` is the LastAssignment's tried flavor per (pod set, resource): the search
        resumes after it (the caller drops it when the queue's generation moved on).
        """
        counts = tuple(counts) if counts is not None else tuple(ps.count for ps in w.pod_sets)
        last = last or {}
        layout = self._layout(w, cq, counts)
        result = Assignment([Assigned(i, ps, counts[i]) for i, ps in enumerate(w.pod_sets)], generation=generation)
        failed = False
        for group in layout:
            if not self._assign_group(w, cq, group, result, last):
                failed = True
                break
        self._finish(w, cq, result, failed)
        return result

    def _layout(self, w: Workload, cq: ClusterQueue, counts: tuple[int, ...]) -> list["_Group"]:
        """What the assigner reads of a workload's shape, worked out once: its pod-set
        groups in order, each one's total request per resource (pods only where the
        queue covers pods), the resource groups it needs, and which of their flavors
        its pod sets may not take (and why)."""
        key = (cq.name, id(w), counts)
        found = self._layouts.get(key)
        if found is not None and found[0] is w:
            return found[1]
        by_name: dict[str, list[int]] = {}
        for i, ps in enumerate(w.pod_sets):
            by_name.setdefault(ps.topology.group or f"#{i}", []).append(i)
        groups = []
        for members in by_name.values():
            requests: dict[str, int] = {}
            for i in members:
                for r, v in w.pod_sets[i].request.items():
                    if v <= 0 or (r == PODS and self.group_of(cq, r) is None):
                        continue
                    requests[r] = requests.get(r, 0) + v * counts[i]
            uncovered = next((r for r in sorted(requests) if self.group_of(cq, r) is None), None)
            needs: list[tuple[int, tuple[str, ...], tuple[str | None, ...]]] = []
            if uncovered is None:
                for g in sorted({g for r in requests if (g := self.group_of(cq, r)) is not None}):
                    covered = tuple(r for r in cq.resource_groups[g].covered_resources if r in requests)
                    mismatch = tuple(self._mismatch(cq, g, fq.flavor, [w.pod_sets[i] for i in members])
                                     for fq in cq.resource_groups[g].flavors)
                    needs.append((g, covered, mismatch))
            groups.append(_Group(members, requests, uncovered, needs))
        self._layouts[key] = (w, groups)
        return groups

    def _mismatch(self, cq: ClusterQueue, g: int, flavor: str, members: Sequence[PodSet]) -> str | None:
        for ps in members:
            if ps.fixed_flavors is not None:
                # a growth slice (planner.cycle.elastic) keeps the flavors its running Job has
                covered = cq.resource_groups[g].covered_resources
                pinned = {f for r, f in ps.fixed_flavors.items() if r in covered}
                if pinned and flavor not in pinned:
                    return f"flavor {flavor} is not the one its running Job has ({', '.join(sorted(pinned))})"
            key = (cq.name, g, flavor, ps.tolerations, tuple(sorted(ps.node_selector.items())), ps.topology,
                   ps.request)
            if key not in self._mismatches:
                self._mismatches[key] = flavor_mismatch(self.snapshot, cq, g, flavor, ps)
            found = self._mismatches[key]
            if found is not None:
                return found
        return None

    def _assign_group(self, w: Workload, cq: ClusterQueue, group: "_Group", result: Assignment,
                      last: Mapping[tuple[int, str], int]) -> bool:
        members = [result.pod_sets[i] for i in group.members]
        if group.uncovered is not None:
            for a in members:
                a.failed = True
                a.reasons.append(f"resource {group.uncovered} is not covered by ClusterQueue {cq.name}")
            result.reason = result.reason or _prefixed(members[0].reasons[-1], members[0], w)
            return False
        reasons: list[object] = []
        chosen: dict[str, tuple[str, int, int]] = {}     # resource -> (flavor, mode, borrow)
        tried: dict[str, int] = {}
        for g, covered, mismatch in group.needs:
            found, why, idx = self._find_flavor(w, cq, g, members, covered, mismatch, group.requests,
                                                result.usage, last, result.pending)
            reasons += why
            if found is None:
                texts = [_text(r) for r in why]
                for a in members:
                    a.failed = True
                    a.reasons += texts
                result.reason = result.reason or _first(texts, members, w)
                return False
            for r in covered:
                chosen[r] = found[r]
                tried[r] = idx
        for a in members:
            request = a.pod_set.request
            for r, (flavor, mode, borrow) in chosen.items():
                amount = request.get(r)
                if amount > 0:
                    a.flavors[r] = flavor
                    a.modes[r] = mode
                    if borrow > result.borrowing:
                        result.borrowing = borrow
                    fr = (flavor, r)
                    result.usage[fr] = result.usage.get(fr, 0) + amount * a.count
                    result.last[(a.index, r)] = tried[r]
            if reasons:
                a.reasons += [_text(r) for r in reasons]
            a.option = self.option(cq, a.flavors)
        if reasons and not result.reason:
            result.reason = _first([_text(r) for r in reasons], members, w)
        return True

    def _find_flavor(self, w: Workload, cq: ClusterQueue, g: int, members: Sequence[Assigned],
                     covered: Sequence[str], mismatch: Sequence[str | None], requests: Mapping[str, int],
                     usage: Mapping[FR, int], last: Mapping[tuple[int, str], int],
                     pending: list[tuple[FR, int]],
                     ) -> tuple[dict[str, tuple[str, int, int]] | None, list[object], int]:
        """findFlavorForPodSets: (resource -> (flavor, mode, borrow) | None, reasons,
        the tried flavor index to resume after, -1 when the search reached the last)."""
        rg = cq.resource_groups[g]
        fung_borrow, fung_preempt = cq.when_can_borrow, cq.when_can_preempt
        start = 0
        if last:
            start = max((last.get((members[0].index, r), -1) for r in covered), default=-1) + 1
        reasons: list[object] = []
        best: dict[str, tuple[str, int, int]] | None = None
        best_mode = (G_NO_FIT, 1 << 60)
        attempted = -1
        for idx in range(start, len(rg.flavors)):
            attempted = idx
            name = rg.flavors[idx].flavor
            if mismatch[idx] is not None:
                reasons.append(mismatch[idx])
                continue
            found: dict[str, tuple[str, int, int]] = {}
            rep = (G_FIT, 0)
            alone = idx == len(rg.flavors) - 1 and idx == start    # the only flavor this search tries
            for r in covered:
                fr = (name, r)
                mode, borrow, why = self._fits_quota(w, cq, fr, usage.get(fr, 0), requests[r], alone, pending)
                if why is not None:
                    reasons.append(why)
                if _preferred(rep, (mode, borrow)):
                    rep = (mode, borrow)
                if rep[0] == G_NO_FIT:
                    break
                found[r] = (name, _TO_MODE[mode], borrow)
            if not _try_next(rep, fung_borrow, fung_preempt):
                best, best_mode = found, rep
                break
            if _preferred(rep, best_mode):
                best, best_mode = found, rep
        tried = -1 if attempted == len(rg.flavors) - 1 else attempted
        if best is not None and best_mode[0] == G_FIT:
            return best, [], tried
        return best, reasons, tried

    def _fits_quota(self, w: Workload, cq: ClusterQueue, fr: FR, assumed: int, request: int,
                    alone: bool = False, pending: list[tuple[FR, int]] | None = None) -> tuple[int, int, object | None]:
        """fitsResourceQuota: (mode, borrowing height, why it does not fit as things
        stand: a text, or the numbers of a quota shortfall, made a text when needed)."""
        state, quota = self.state, self.quota
        if not state.lists(cq.name, fr):
            flavor, resource = fr
            return G_NO_FIT, 0, f"ClusterQueue {cq.name} has no quota entry for {resource} in flavor {flavor}"
        available = quota.available(cq.name, fr)
        val = assumed + request
        if val > quota.potential_available(cq.name, fr):
            return G_NO_FIT, 0, (cq.name, fr, request, available - assumed)
        borrow, may_reclaim = quota.lowest_fitting_subtree(cq.name, fr, val)
        if val <= available:
            return G_FIT, borrow, None
        why = (cq.name, fr, request, available - assumed)
        policy = cq.preemption
        # canPreemptWhileBorrowing: borrowWithinCohort, or fair sharing with reclaim.
        while_borrowing = policy.borrow_within_cohort != "Never" or (
            self.fair is not None and policy.reclaim_within_cohort != "Never")
        if val <= state.nominal(cq.name, fr) or may_reclaim or while_borrowing:
            if alone and pending is not None:
                pending.append((fr, val))       # see Assignment.pending
                return G_PREEMPT, 0, why
            mode, borrow = self._oracle(w, cq, fr, val)
            return mode, borrow, why
        return G_NO_FIT, borrow, why

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
        at = ("steady", self.registry.epoch) if self.steady else ("one", self._epoch)
        if self._ceilings_at != at:
            self._ceilings.clear()
            self._ceilings_at = at
        found = self._ceilings.get(key)
        if found is None:
            frs = set(key[3])
            ctx = _Context(self, w, cq, frs, {fr: 0 for fr in frs})
            overlay = Overlay(state, frs)
            for s in ctx.same + ctx.hierarchy + ctx.priority:
                freed = ctx._most_freed(s, False)
                overlay.change_usage(s.name, {fr: int(freed[j]) for fr, j in self.columns.items() if freed[j]}, -1)
            found = self._ceilings[key] = {fr: self.quota.available(cq.name, fr, overlay) for fr in frs}
        return found

    def above_nominal(self, current: str, skip: str | None, frs: tuple[FR, ...]) -> list[str]:
        """The queues under `current` (not under `skip`) that, with every cohort between,
        use more than their quota of some of `frs`: where candidates of a cohort may be
        (collectCandidatesForHierarchicalReclaim). Kept as ceiling() keeps its answers."""
        at = ("steady", self.registry.epoch) if self.steady else ("one", self._epoch)
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
                    g = self.group_of(cq, r)
                    if v > 0 and g is not None:
                        frs.update((fq.flavor, r) for fq in cq.resource_groups[g].flavors)
            found = self._wanted_frs[key] = (w, frozenset(frs))
        return found[1]

    def _oracle(self, w: Workload, cq: ClusterQueue, fr: FR, val: int) -> tuple[int, int]:
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

    def _finish(self, w: Workload, cq: ClusterQueue, result: Assignment, failed: bool) -> None:
        """The representative mode, then Kueue's TAS step: a Fit needs its placement now,
        a Preempt needs one on an empty cluster (else NoFit), and then every TAS pod set
        needs preemption."""
        if failed:
            result.mode = NO_FIT
            return
        result.mode = min((a.mode() for a in result.pod_sets), default=NO_FIT)
        if result.mode == NO_FIT:
            return
        picks = result.picks()
        if result.mode == FIT:
            placed = self.place(self.state, cq, w, picks)
            if isinstance(placed, tuple):
                i, why = placed
                a = result.pod_sets[i]
                a.reasons.append(why)
                a.set_modes(PREEMPT)
                result.mode = PREEMPT
                result.reason = _prefixed(why, a, w)
            else:
                result.choices = placed
                return
        placed = self.empty_place(cq, w, picks)
        if isinstance(placed, tuple):
            i, why = placed
            result.pod_sets[i].set_modes(NO_FIT)
            result.mode = NO_FIT
            result.reason = result.reason or _prefixed(why, result.pod_sets[i], w)
            return
        for a in result.pod_sets:
            if self.on_topology(a):
                a.set_modes(PREEMPT)
                if not a.reasons:
                    a.reasons.append("needs preemption")

    def empty_place(self, cq: ClusterQueue, w: Workload,
                    picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> "list[PodSetChoice] | tuple[int, str]":
        """Placement with nothing admitted (SimulateEmpty); the same answer for the same
        request every time, so kept."""
        key = (cq.name, tuple((id(ps), id(opt), n) for ps, opt, n in picks))
        found = self._empty_fits.get(key)
        if found is None:
            found = self._empty_fits[key] = (picks, self.place(self._empty(), cq, w, picks))
        return found[1]

    # -- whole workloads

    def nominate(self, w: Workload, cq: ClusterQueue, last: Mapping[tuple[int, str], int] | None,
                 generation: int) -> tuple[Assignment, list[Target]]:
        """getAssignments: the full assignment; if it needs preemption, its targets; if
        none and the workload is elastic, the largest counts that fit or have targets
        (the PodSetReducer's binary search); then the preemptor's placement."""
        self._epoch += 1
        full = self.assign(w, cq, None, last, generation)
        if full.mode == FIT:
            return full, []
        if full.mode == PREEMPT:
            targets = self.targets_for(w, cq, full)
            if targets:
                return self.resolve(w, cq, full), targets
        if w.elastic:
            found = _reduce(w, lambda counts: self._partial(w, cq, counts, last, generation))
            if found is not None:
                partial, chosen = found
                return self.resolve(w, cq, partial), chosen
        if full.mode == PREEMPT and cq.preemption.reclaim_within_cohort != "Any":
            self.resolve(w, cq, full)      # it holds quota by how high it borrows
        return full, []

    def resolve(self, w: Workload, cq: ClusterQueue, a: Assignment) -> Assignment:
        """Ask the oracle the questions `a` left pending (Assignment.pending)."""
        for fr, val in a.pending:
            a.borrowing = max(a.borrowing, self._oracle(w, cq, fr, val)[1])
        a.pending = []
        return a

    def _partial(self, w: Workload, cq: ClusterQueue, counts: list[int],
                 last: Mapping[tuple[int, str], int] | None, generation: int) -> tuple[Assignment, list[Target]] | None:
        a = self.assign(w, cq, counts, last, generation)
        if a.mode == FIT:
            return a, []
        if a.mode == PREEMPT:
            targets = self.targets_for(w, cq, a)
            if targets:
                return a, targets
        return None

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

    # -- classical preemption

    def targets(self, w: Workload, cq: ClusterQueue, frs_need: set[FR], usage: Mapping[FR, int],
                nodes_fit: Callable[[], bool] | None,
                picks: Sequence[tuple[PodSet, FlavorOption, int]] = ()) -> tuple[list[Target], UsageLookup | None]:
        """classicalPreemptions: the victims that make room for `usage` (quota, and nodes
        where `nodes_fit` is given: whether `picks` fit), or []. Without `nodes_fit` (the
        oracle) also the quota with the victims gone."""
        if not frs_need:
            return [], None
        if self.fair is not None:
            return self.fair_targets(w, cq, frs_need, usage, nodes_fit)
        ctx = _Context(self, w, cq, frs_need, usage)
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

    # -- fair-sharing preemption

    def fair_candidates(self, w: Workload, cq: ClusterQueue, frs_need: set[FR]) -> list[Admitted]:
        """findCandidates: the preemptor's queue's workloads its withinClusterQueue allows,
        and, with reclaimWithinCohort, those of every queue of its cohort tree borrowing
        a flavor/resource that needs preemption; each using one of those. Kueue's
        candidate order: being evicted first, other queues first, lower priority first,
        most recently admitted first, then UID."""
        out: list[Admitted] = []
        key = f"cq:{cq.name}"
        tree = self.quota.tree

        def allowed(policy: str, a: Admitted) -> bool:
            if policy == "LowerPriority":
                return a.priority < w.priority
            if policy == "LowerOrNewerEqualPriority":
                return a.priority < w.priority or (a.priority == w.priority and w.queued_at < a.view.queued_at)
            return policy == "Any"

        def uses(a: Admitted) -> bool:
            return a.evictable and bool(a.frs & frs_need)

        if cq.preemption.within_cluster_queue != "Never":
            out += [a for a in self.registry.by_cq.get(cq.name, [])
                    if uses(a) and allowed(cq.preemption.within_cluster_queue, a)]
        reclaim = cq.preemption.reclaim_within_cohort
        if tree.parent.get(key) is not None and reclaim != "Never":
            root = tree.root_of(key)
            for node in tree.nodes():
                name = node[3:]
                if not node.startswith("cq:") or node == key or tree.root_of(node) != root:
                    continue
                if not any(self.state.used(name, fr) > self.state.nominal(name, fr) for fr in frs_need):
                    continue
                out += [a for a in self.registry.by_cq.get(name, [])
                        if uses(a) and a.reclaimable and allowed(reclaim, a)]
        out.sort(key=lambda a: self.fair_order(a, cq))
        return out

    def fair_order(self, a: Admitted, cq: ClusterQueue) -> tuple[bool, bool, int, float, int]:
        return (not a.evicting, a.cq == cq.name, a.priority, -a.admitted_at, self.tie.get(a.ref, 0))

    def fair_targets(self, w: Workload, cq: ClusterQueue, frs_need: set[FR], usage: Mapping[FR, int],
                     nodes_fit: Callable[[], bool] | None) -> tuple[list[Target], UsageLookup | None]:
        """fairPreemptions (planner.kueue.fairsharing) over this state: the victims, and
        the quota with them gone (for the oracle's borrowing height)."""
        assert self.fair is not None
        state = self.state
        candidates = self.fair_candidates(w, cq, frs_need)

        def fits() -> bool:
            for fr, v in usage.items():
                if v > max(0, state.available(cq.name, fr)):
                    return False
            return nodes_fit() if nodes_fit is not None else True

        found = fairsharing.fair_targets(state, self.fair, cq.name, usage, sorted(frs_need), candidates,
                                         lambda a: self.fair_order(a, cq), fits)
        if not found:
            return [], None
        victims = [a.view for a, _ in found]
        state.release_many(victims)
        try:
            overlay = Overlay(state, set(usage) | frs_need)
        finally:
            state.release_many(victims, sign=-1)
        return [Target(a, PREEMPTED if reason == fairsharing.PREEMPTED else RECLAIMED) for a, reason in found], overlay


def _preferred(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """isPreferred (BorrowingOverPreemption): a better preemption mode, then a lower
    borrowing height."""
    if a[0] == G_NO_FIT:
        return False
    if b[0] == G_NO_FIT:
        return True
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _try_next(rep: tuple[int, int], when_can_borrow: str, when_can_preempt: str) -> bool:
    """shouldTryNextFlavor."""
    mode, borrow = rep
    if mode in (G_NO_FIT, G_NO_CANDIDATES):
        return True
    if mode in (G_PREEMPT, G_RECLAIM) and when_can_preempt == "TryNextFlavor":
        return True
    return borrow != 0 and when_can_borrow == "TryNextFlavor"


_Found = TypeVar("_Found")


def _reduce(w: Workload, fits: Callable[[list[int]], _Found | None]) -> _Found | None:
    """PodSetReducer.Search: the first (largest) counts between the full ones and the
    minimums, all elastic pod sets shrinking together, for which `fits` answers."""
    full = [ps.count for ps in w.pod_sets]
    deltas = [ps.count - ps.minimum for ps in w.pod_sets]
    total = sum(deltas)
    if total <= 0:
        return None
    last_good, last = 0, None
    lo, hi = 0, total + 1
    while lo < hi:
        h = (lo + hi) // 2
        found = fits([f - d * h // total for f, d in zip(full, deltas)])
        if found is not None:
            last_good, last, hi = h, found, h
        else:
            lo = h + 1
    return last if lo == last_good else None


def _text(reason: object) -> str:
    """A reason as people read it (a quota shortfall is kept as numbers until then)."""
    if isinstance(reason, tuple):
        return _shortfall(*reason)
    return str(reason)


def _shortfall(cq: str, fr: FR, need: int, room: int) -> str:
    from planner.kueue.state import amount, quantity
    flavor, resource = fr
    return (f"insufficient quota for {resource} in flavor {flavor}: needs {quantity(resource, need)}, "
            f"{amount(resource, max(0, room))} available to ClusterQueue {cq}")


def _prefixed(why: str, a: Assigned, w: Workload) -> str:
    return f"pod set {a.pod_set.name}: {why}" if len(w.pod_sets) > 1 else why


def _first(reasons: Sequence[str], members: Sequence[Assigned], w: Workload) -> str:
    return _prefixed(reasons[0], members[0], w) if reasons else ""


# ---------------------------------------------------------------- one preemption search

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

    sources: list["_Source"]
    source: np.ndarray
    index: np.ndarray
    variant: np.ndarray
    use: np.ndarray

    def member(self, k: int) -> Admitted:
        return self.sources[int(self.source[k])].view.members[int(self.index[k])]


@dataclass(eq=False)
class _Source:
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

    def __init__(self, ctx: "_Context", borrowing: bool, removed: Sequence[Admitted], use: np.ndarray,
                 pick: tuple[PodSet, FlavorOption, int]):
        self.ctx, self.borrowing = ctx, borrowing
        self.arrays, live = ctx.rules.quota_now()
        self.usage = live.copy()
        self.rows = np.array([self.arrays.row[f"cq:{a.cq}"] for a in removed], dtype=np.int64)
        self.use = use
        self.views = [a.view for a in removed]
        state = ctx.rules.state
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
        return int(self.usage[self.arrays.row[node], self.ctx.rules.columns[fr]])


@dataclass(eq=False)
class _Reach:
    """The most a run could take from one source (its candidates up to the one that
    takes its queue to nominal: see _Context._could_fit), and what they hold."""

    source: _Source
    index: np.ndarray              # positions in source.view.members, in the search's order
    freed: np.ndarray              # their quota usage, summed (a row of QueueView.usage)
    _nodes: "Freed | None" = None

    def nodes(self, state: "ClusterState") -> "Freed":
        """Where they run (state.freed_by), gathered once."""
        if self._nodes is None:
            members = self.source.view.members
            self._nodes = state.nodes_of([members[int(i)].view for i in self.index])
        return self._nodes


class _Context:
    """One classical preemption search (preemptionCtx + candidateIterator)."""

    def __init__(self, rules: Rules, w: Workload, cq: ClusterQueue, frs_need: set[FR], usage: Mapping[FR, int]):
        self.rules, self.w, self.cq = rules, w, cq
        self.frs_need = frs_need
        self.usage = dict(usage)
        self.quota = rules.quota
        self.key = f"cq:{cq.name}"
        self.need_cols = np.array(sorted(rules.column(fr) for fr in frs_need), dtype=np.int64)
        self.need_key = tuple(sorted(frs_need))
        same, hierarchy, priority = self._collect()
        self.same = [s for s in (self._source(*x) for x in same) if len(s.index)]
        self.hierarchy = [s for s in (self._source(*x) for x in hierarchy) if len(s.index)]
        self.priority = [s for s in (self._source(*x) for x in priority) if len(s.index)]
        self._merged: _Order | None = None

    # -- who

    def _source(self, name: str, lca: str | None, advantage: bool) -> _Source:
        """getCandidatesFromCQ: the queue's workloads its policy lets the preemptor take
        that use a flavor/resource needing preemption, in the queue's order. (The same
        for every preemptor of the same queue, priority and needs while the queue's list
        stays the same: kept.)"""
        cq, w = self.cq, self.w
        equal = cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority" and name == cq.name
        key = (name, self.rules.registry.version.get(name, 0), lca, advantage, cq.name, w.priority,
               w.queued_at if equal else None, self.need_key)
        found = self.rules._sources.get(key)
        if found is None:
            found = self.rules._sources[key] = self._make_source(name, lca, advantage)
        return found

    def _make_source(self, name: str, lca: str | None, advantage: bool) -> _Source:
        view = self.rules.view(name)
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
        return _Source(name, lca, view, index, variant)

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
        into.extend((name, root, advantage) for name in self.rules.above_nominal(current, skip, self.need_key)
                    if name != self.cq.name)


    def none_from_other_queues(self) -> bool:
        return not self.hierarchy and not self.priority

    def none_hierarchical(self) -> bool:
        return not self.hierarchy

    def under_nominal(self) -> bool:
        """queueUnderNominalInResourcesNeedingPreemption: strictly below nominal."""
        state = self.rules.state
        return all(state.used(self.cq.name, fr) < state.nominal(self.cq.name, fr) for fr in self.frs_need)

    def _order(self) -> "_Order":
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
            self._merged = _Order(sources, empty, empty, empty, np.zeros((0, len(self.rules.columns)), dtype=np.int64))
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
        state, name = self.rules.state, self.cq.name
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
        overlay = Overlay(self.rules.state, frs)
        columns = self.rules.columns
        for sources in (self.same, self.hierarchy, self.priority):
            for s in sources:
                freed = self._most_freed(s, borrowing)
                overlay.change_usage(s.name, {fr: int(freed[j]) for fr, j in columns.items() if freed[j]}, -1)
        return self._quota_fits(borrowing, overlay)

    def _fits_usage(self, borrowing: bool, arrays: QuotaArrays, usage: np.ndarray) -> bool:
        """_quota_fits on a QuotaArrays usage."""
        available = arrays.available(usage, self.key)
        own = arrays.row[self.key]
        columns = self.rules.columns
        for fr, v in self.usage.items():
            j = columns[fr]
            if not borrowing and usage[own, j] + v > arrays.subtree[own, j]:
                return False
            if v > max(0, int(available[j])):
                return False
        return True

    def _most_freed(self, s: _Source, borrowing: bool) -> np.ndarray:
        return self._reach(s, borrowing).freed

    def _reach(self, s: _Source, borrowing: bool) -> "_Reach":
        """What a run could take from `s` at most (kept with the source: the same while
        its queue's list, and so its usage when nominating, stays the same)."""
        key = (id(s), borrowing)
        found = self.rules._reaches.get(key)
        if found is None or found[0] is not s:
            found = self.rules._reaches[key] = (s, self._make_reach(s, borrowing))
        return found[1]

    def _make_reach(self, s: _Source, borrowing: bool) -> "_Reach":
        index = s.index
        if borrowing and s.name != self.cq.name:
            index = index[s.variant != RECLAIM_WITHOUT_BORROWING]
        index = index[np.argsort(s.view.settled[index], kind="stable")]   # the search's order: evicted first
        usage = s.view.usage[index]
        if s.name == self.cq.name or not len(index):
            return _Reach(s, index, usage.sum(axis=0))
        # Another queue gives up candidates while it is above nominal in some resource
        # needing preemption: up to the one that takes the last of them to nominal.
        cum = np.cumsum(usage, axis=0)
        live = self.quota.live
        stop = 0
        for fr in self.frs_need:
            excess = live(f"cq:{s.name}", fr) - self.quota.tree.subtree_quota(f"cq:{s.name}", fr)
            if excess > 0:
                stop = max(stop, int(np.searchsorted(cum[:, self.rules.column(fr)], excess, side="left")) + 1)
        stop = min(stop, len(index))
        return _Reach(s, index[:stop], cum[stop - 1] if stop else usage[:0].sum(axis=0))

    def _nodes_could_fit(self, borrowing: bool, picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> bool:
        """The nodes' side of _could_fit: does each pod set, alone, fit with everything
        _could_fit counts as taken released? The walk releases a subset, and a pod set
        that does not fit alone does not fit beside the others: if not, no run fits."""
        state = self.rules.state
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
        if nodes_fit is not None and picks and self.rules.shortcuts and not self._nodes_could_fit(borrowing, picks):
            return None
        order = self._order()
        removed, first, taken = self._sequence(borrowing, order, sorted(frs))
        if first is None:
            return None
        if self.rules.shortcuts and nodes_fit is not None and len(picks) == 1:
            return self._attempt_on_copies(borrowing, removed, first, order.use[taken], picks[0])
        overlay = Overlay(self.rules.state, frs)
        from planner.kueue.victims import first_fitting_prefix, put_back
        if nodes_fit is None:
            for a in removed[:first]:
                overlay.change(a, -1)
            # Quota alone: add back, last removed but one first, what is not needed.
            if self.rules.shortcuts:   # a run at a time (victims.put_back: the same victims)
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
        state = self.rules.state
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
        from planner.kueue.victims import first_fitting_prefix, put_back
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
        rules, tree, live = self.rules, self.quota.tree, self.quota.live
        n = len(order.source)
        if n == 0:
            return [], None, np.zeros(0, dtype=np.int64)
        cols = np.array([rules.column(fr) for fr in frs], dtype=np.int64)
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
