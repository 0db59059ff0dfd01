"""Kueue v0.17's flavor assigner for one head workload, as its scheduler applies it.

What `pkg/scheduler/flavorassigner` decides for a workload (flavor by flavor and
resource group by resource group: Fit, Preempt or NoFit, how high in the cohort tree
it borrows, when flavorFungibility stops the search, where a requeued workload
resumes), then Kueue's TAS step, and the scheduler's getAssignments around it: the
full assignment, its preemption targets, an elastic workload's largest counts that
fit (`Rules.nominate`).

`Rules` works over the shared `ClusterState` (planner.kueue.state: quota usage and
free nodes) and a `Registry` of admitted workloads (planner.kueue.registry), with
Kueue's quota arithmetic (planner.kueue.quota), flavor matching and the assignment's
types (planner.kueue.flavors), and a `Preemptor` (planner.kueue.preemption.preemptor)
for the targets and the oracle the assigner asks. Node placement comes from the
caller (`place`), so this module never imports planner.greedy. It only computes:
every change it makes to the state while searching is undone before it returns. The
cycle that asks these questions, in Kueue's order, is planner.greedy; the way in for
other code that asks greedy's preemption of a state is `Rules(...).assign(w, cq)`, then
`Rules.targets_for(w, cq, assignment)`.

Where Stowplan goes beyond Kueue, and why:
- Kueue places pods on nodes only for TAS flavors (a Topology); Stowplan places every
  pod set on named nodes. A flavor without a Topology is placed as Kueue places an
  implied TAS request (hostname level, LeastFreeCapacity); where the quota fits but the
  nodes do not, the pod set needs preemption as a TAS pod set would.
- Who may be a preemption candidate: planner.kueue.preemption.preemptor says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

from models import ClusterQueue, FlavorResource as FR, PodSet, Snapshot, Workload
from models.resources import PODS
from planner.kueue import fairsharing
from planner.kueue.flavors import (
    FIT, G_FIT, G_NO_CANDIDATES, G_NO_FIT, G_PREEMPT, G_RECLAIM, NO_FIT, PREEMPT, Assigned, Assignment, Fits, Place,
    flavor_mismatch, has_topology, resource_group, tas_only,
)
from planner.kueue.preemption import Target
from planner.kueue.preemption.preemptor import Preemptor
from planner.kueue.quota import Quota
from planner.kueue.registry import Admitted, Registry
from planner.kueue.semantics import FlavorOption

if TYPE_CHECKING:
    from planner.kueue.state import PodSetChoice, ClusterState

_TO_MODE = {G_NO_FIT: NO_FIT, G_NO_CANDIDATES: PREEMPT, G_PREEMPT: PREEMPT, G_RECLAIM: PREEMPT, G_FIT: FIT}


@dataclass(frozen=True)
class _Group:
    """Pod sets of a workload that take their flavors together (a pod-set group, or one
    pod set), as the assigner reads them."""

    members: list[int]
    requests: dict[str, int]
    uncovered: str | None                                          # a resource the queue does not cover
    needs: list[tuple[int, tuple[str, ...], tuple[str | None, ...]]]   # (group, covered resources, mismatch per flavor)


class Rules:
    """The flavor assigner over one ClusterState, with its preemptor (`preemptor`).

    `place(state, cq, workload, picks)`: node placement of every pod set with fixed
    flavors and counts, jointly (Kueue's TAS assignment for a workload), as choices or
    (pod set index, why not); `fits(...)`: whether `place` would place them. `empty` is
    the state with nothing admitted (Kueue's SimulateEmpty). `fair`: Kueue's fair
    sharing (Configuration fairSharing.enable), for the preemptor and for whether a
    borrowing workload may preempt.
    """

    def __init__(self, snapshot: Snapshot, state: "ClusterState", registry: Registry, place: Place, fits: Fits,
                 empty: Callable[[], "ClusterState"], shortcuts: bool = True, fair: fairsharing.Shares | None = None):
        self.snapshot = snapshot
        self.state = state
        self.registry = registry
        self.place = place
        self._empty = empty
        self.quota = Quota(state)
        # Targets and the oracle; `shortcuts` are the preemptor's (see Preemptor).
        self.preemptor = Preemptor(snapshot, state, registry, self.quota, place, fits, fair, shortcuts)
        self._options: dict[tuple[str, tuple[tuple[str, str], ...]], FlavorOption] = {}
        self._tas_only: dict[str, bool] = {}
        self._groups: dict[tuple[str, str], int | None] = {}
        self._empty_fits: dict[tuple[Any, ...], tuple[object, "list[PodSetChoice] | tuple[int, str]"]] = {}
        self._layouts: dict[tuple[Any, ...], tuple[Workload, list[_Group]]] = {}
        self._mismatches: dict[tuple[Any, ...], str | None] = {}

    # -- small lookups

    def group_of(self, cq: ClusterQueue, resource: str) -> int | None:
        key = (cq.name, resource)
        if key not in self._groups:
            self._groups[key] = resource_group(cq, resource)
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
            self.preemptor.fair is not None and policy.reclaim_within_cohort != "Never")
        if val <= state.nominal(cq.name, fr) or may_reclaim or while_borrowing:
            if alone and pending is not None:
                pending.append((fr, val))       # see Assignment.pending
                return G_PREEMPT, 0, why
            mode, borrow = self.preemptor.oracle(w, cq, fr, val)
            return mode, borrow, why
        return G_NO_FIT, borrow, why

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
        self.preemptor.epoch += 1
        full = self.assign(w, cq, None, last, generation)
        if full.mode == FIT:
            return full, []
        if full.mode == PREEMPT:
            targets = self.preemptor.targets_for(w, cq, full)
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
            a.borrowing = max(a.borrowing, self.preemptor.oracle(w, cq, fr, val)[1])
        a.pending = []
        return a

    def _partial(self, w: Workload, cq: ClusterQueue, counts: list[int],
                 last: Mapping[tuple[int, str], int] | None, generation: int) -> tuple[Assignment, list[Target]] | None:
        a = self.assign(w, cq, counts, last, generation)
        if a.mode == FIT:
            return a, []
        if a.mode == PREEMPT:
            targets = self.preemptor.targets_for(w, cq, a)
            if targets:
                return a, targets
        return None


    def candidates(self, w: Workload, cq: ClusterQueue) -> list[Admitted]:
        """The candidates nominate()'s search walks for `w`'s full request, in Kueue's
        order (Preemptor.candidates); [] unless that request needs preemption."""
        self.preemptor.epoch += 1
        a = self.assign(w, cq)
        return self.preemptor.candidates(w, cq, a) if a.mode == PREEMPT else []

    def targets_for(self, w: Workload, cq: ClusterQueue, a: Assignment) -> list[Target]:
        """The preemptor's targets for `a`, an assignment of `w` in Preempt mode
        (Preemptor.targets_for: Kueue's GetTargets; on success `a.choices` is its
        placement once the targets are gone). With assign(), the way in for code that
        asks greedy's preemption of a ClusterState and Registry (the explainer)."""
        return self.preemptor.targets_for(w, cq, a)


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
