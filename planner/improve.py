"""A stronger MIP start than Kueue's greedy: large jobs first, victims chosen by topology.

Kueue's preemption takes candidates in a fixed order (lowest priority, newest
first) and stops at a short prefix, so a job that needs whole racks or blocks
cleared rarely gets them: the evictions land scattered over the cluster. And it
admits in queue order, so small jobs admitted first hold the racks and blocks that
the large jobs of their tier need. Two searches start from greedy's plan:

- growing it (admit_more): every workload still waiting is tried once more, highest
  priority first and, within a priority, largest first (first-fit decreasing: volume
  comes before age in the objective). What it may displace is ordered domain by
  domain: the domains (at the finest level the workload must keep its pods
  together) whose work frees the most room for the least lost work come first, so
  the shortest prefix that fits clears a few whole domains; Kueue's minimal-set
  search then puts back every victim not needed.
- packing it again (repacked): the admissions below its highest tier are withdrawn
  and placed again the same way, largest first, with the rest of the waiting work.

A search may displace admissions of lower tiers that were never started (they wait
again, and get their turn), running work of lower tiers that its queue's policies
let it evict or that they let some admitted workload evict (as the model allows:
an eviction names an admitted workload allowed to make it), and equal-priority
work its policies allow only for a net gain in its tier. So each step raises the
objective's first term that it changes, and the better plan of the two is never
worse than greedy's. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import heapq
import time
from collections import defaultdict
from dataclasses import replace
from typing import Callable, Collection, Sequence, overload

from models import HOSTNAME_LABEL, Admission, Decisions, Eviction, ObjectRef, Resources, Snapshot, Workload, is_gpu
from planner import capacity, score
from planner.formulate import Preemption, candidates
from planner.greedy import Choice, ClusterState, Freed, evaluate, minimal_victims, try_counts
from planner.semantics import (
    QuotaTree, assigned_volume, effective_priority, evictable, eviction_cost, pod_volume,
    queue_order_key, running_volume,
)
from planner.restore import taken_back
from planner.topology import levels_for, node_path

# How long putting back and sending a packed plan take, per second of its search's
# setup (which grows with the snapshot alike, and runs as fast or slow).
FINISHING_PER_SETUP = 1.0

Domain = tuple[str, ...]
DomainKey = tuple[tuple[str, ...], int]            # a topology's levels, and the depth of its domains
Spot = tuple[Domain, list[tuple[Domain, float]]]   # where a candidate is counted, and what it frees where


def improve(snapshot: Snapshot, decisions: Decisions, deadline: float | Callable[[], float] = float("inf"),
            grow: Callable[[], bool] = lambda: True, searched: Callable[[], bool] = lambda: False) -> Decisions:
    """`decisions` packed again below their highest tier (`repacked`) and, if time is
    left and `grow()` (asked once packed) says so, grown as they are (`admit_more`): the
    better of the two or, where the MILP's stages will search from it (`searched()`),
    `for_the_stages`. Stops trying (keeping what it has) at `deadline`, a
    time.monotonic() instant or a function giving it (asked again for each workload: the
    cycle may move it later). Its setup (seconds at scale) gives up at `deadline` too."""
    until = deadline if callable(deadline) else _fixed(deadline)
    packed = repacked(snapshot, decisions, until)
    if time.monotonic() > until() or not grow():
        return packed
    grown = admit_more(snapshot, decisions, until)
    return for_the_stages(snapshot, packed, grown) if searched() else better_of(snapshot, packed, grown)


def for_the_stages(snapshot: Snapshot, packed: Decisions, grown: Decisions) -> Decisions:
    """The start for the MILP's stages to search from: `packed` where it serves some tier
    above the lowest better than `grown`, else `grown`. The stages settle the lowest tier
    themselves, and search better from the grown plan, nearer their LP's point: at S they
    prove the optimum from it in 0.25 s, and stall 1.5% short from a packed plan better
    at priority 0 only."""
    volumes = score.tier_volumes(snapshot, packed), score.tier_volumes(snapshot, grown)
    lowest = min((t for v in volumes for t in v), default=0)
    packed_above, grown_above = ({t: x for t, x in v.items() if t > lowest} for v in volumes)
    return packed if score.compare(packed_above, grown_above) > 0 else grown


def repacked(snapshot: Snapshot, decisions: Decisions, until: Callable[[], float]) -> Decisions:
    """`decisions` with their tiers below the highest packed again, highest tier and
    largest first (admit_more from top_tier_only), if every eviction it keeps is made for
    an admission it keeps and it serves the objective better; else `decisions`. (The
    cycle verifies the start it takes: planner.run.start_for.)

    Greedy's plan holds its admissions of every tier in queue order, and the small jobs
    it admitted first can hold the racks and blocks a tier's large jobs need: at M,
    9,344 GPUs of priority 100 packed again, 8,416 grown as they were (the bound is
    9,354). Left out and not placed again when time runs out, an admission goes back as
    it was where it still fits."""
    top = top_tier_only(snapshot, decisions)
    if top is None:
        return decisions
    kept = {a.workload for a in top.admissions}
    again = admit_more(snapshot, top, until, {a.workload: a for a in decisions.admissions if a.workload not in kept})
    admitted = {a.workload for a in again.admissions}
    settled = all(ref in admitted for e in again.evictions for ref in e.for_)
    return again if settled and better_of(snapshot, decisions, again) is again else decisions


def better_of(snapshot: Snapshot, plan: Decisions, other: Decisions) -> Decisions:
    """`other` if it serves the objective's tiers better than `plan`, else `plan`."""
    better = score.compare(score.tier_volumes(snapshot, other), score.tier_volumes(snapshot, plan)) > 0
    return other if better else plan


def top_tier_only(snapshot: Snapshot, decisions: Decisions) -> Decisions | None:
    """`decisions` with only the admissions of their highest tier, and all their
    evictions (the work stays out; admit_more settles those made for admissions left
    out); None when that leaves out nothing."""
    if not decisions.admissions:
        return None
    tier = {w.ref: effective_priority(w, snapshot) for w in snapshot.workloads}
    top = max(tier[a.workload] for a in decisions.admissions)
    kept = tuple(a for a in decisions.admissions if tier[a.workload] >= top)
    if len(kept) == len(decisions.admissions):
        return None
    return Decisions(admissions=kept, evictions=decisions.evictions)


def admit_more(snapshot: Snapshot, decisions: Decisions, until: Callable[[], float],
               left_out: dict[ObjectRef, Admission] | None = None) -> Decisions:
    """`decisions` with more waiting work admitted, highest tier and largest first, where
    it fits or evicting (or withdrawing) lower-priority work by domain makes room.
    `left_out`: admissions of an earlier plan that wait again here; those that never had
    their turn (out of time) go back as they were where they still fit. Evictions made
    for admissions no longer in the plan are settled (Victims.settle)."""
    left_out = left_out or {}
    evicted = {e.workload: e for e in decisions.evictions}
    admitted = {a.workload: a for a in decisions.admissions}
    began = time.monotonic()
    if began > until():
        return decisions
    state = ClusterState.after(snapshot, decisions)
    if time.monotonic() > until():
        return decisions
    victims = Victims(state, evicted, admitted)
    waiting = [(_turn(w, snapshot), w) for w in candidates(snapshot, {}) if w.ref not in admitted]
    heapq.heapify(waiting)          # work set back returns here
    failed: set[object] = set()     # requests that found no room: only freeing adds room
    # Putting back what was left out and sending the plan take about as long as this
    # setup (at M: 0.2-0.3 s, after 0.25-0.3 s): the search leaves them that much.
    finishing = FINISHING_PER_SETUP * (time.monotonic() - began) if left_out else 0.0
    while waiting and time.monotonic() <= until() - finishing:
        _, w = heapq.heappop(waiting)
        request = _request_key(w, snapshot)
        if request in failed:
            continue
        minimum = [ps.minimum for ps in w.pod_sets]

        tested: list[tuple[int, list[Choice] | str]] = []     # the last fit test, and when

        def fits() -> bool:
            tested[:] = [(state.changes, try_counts(state, w, minimum))]
            return not isinstance(tested[0][1], str)

        # What fits as things stand displaces nothing (and needs no victim order, the
        # costly part of a turn).
        fit = fits()
        ordered = [] if fit else victims.ordered(w)
        if fit:
            chosen: list[int] | None = []
        elif not victims.room_with_all(ordered, fits):
            chosen = None
        else:
            chosen = minimal_victims(state, ordered, fits, until(), misfit=True)
        if not w.elastic and chosen is not None and tested[0][0] == state.changes:
            # evaluate's answer (its full counts are these): nothing changed since that test
            choices: list[Choice] | str = tested[0][1]
        else:
            choices = evaluate(state, w) if chosen is not None else "no room"
        picked = [ordered[i] for i in chosen or []]
        if not isinstance(choices, str) and not (victims.gains(w, choices, picked) and victims.justified(w, picked)):
            choices = "no gain"
        if isinstance(choices, str):
            for i in chosen or []:   # put them back
                state.release(ordered[i], sign=-1)
            failed.add(request)
            continue
        state.commit(w.cluster_queue, choices)  # type: ignore[arg-type]
        victims.admit(w)
        for v in sorted(picked, key=lambda v: v.ref not in victims.unstarted):   # withdrawals first
            dropped = victims.take(w, v)
            if dropped is not None:
                heapq.heappush(waiting, (_turn(dropped, snapshot), dropped))
        admitted[w.ref] = _admission(w, choices)
        if chosen:
            failed.clear()
    cut_short = bool(waiting)
    # Work left out that never had its turn goes back as it was, where it still fits (one
    # that had its turn and found no room would not fit there either).
    for _, w in sorted(waiting):
        if w.ref in left_out and w.ref not in admitted and victims.put_back(left_out[w.ref]):
            admitted[w.ref] = left_out[w.ref]
    if cut_short:
        # The room freed for the turns taken that they did not use (a rack cleared for a
        # job placed elsewhere, a victim larger than the need) would stay idle: the work
        # that never had its turn takes what fits as it stands, highest tier and largest
        # first, without displacing anything (a fit test each, no victim search), until
        # due; then the evictions whose work fits back are undone. At XL, cut short, a
        # packing left 4,840 GPUs idle.
        for _, w in sorted(waiting):
            if time.monotonic() > until():
                break
            request = _request_key(w, snapshot)
            if w.ref in admitted or request in failed:
                continue
            choices = evaluate(state, w)
            if isinstance(choices, str):
                failed.add(request)
                continue
            state.commit(w.cluster_queue, choices)  # type: ignore[arg-type]
            victims.admit(w)
            admitted[w.ref] = _admission(w, choices)
    victims.settle()
    if cut_short:
        victims.restore()
    return Decisions(admissions=tuple(admitted[r] for r in sorted(admitted)),
                     evictions=tuple(evicted[r] for r in sorted(evicted)))


def _admission(w: Workload, choices: list[Choice]) -> Admission:
    return Admission(workload=w.ref, cluster_queue=w.cluster_queue,  # type: ignore[arg-type]
                     pod_sets=tuple(c.assignment() for c in choices))


def _fixed(instant: float) -> Callable[[], float]:
    return lambda: instant


def _turn(w: Workload, snapshot: Snapshot) -> tuple:
    """Highest effective priority first (the objective's first term); within a priority
    the largest first, as in first-fit decreasing packing (volume comes before age in
    the objective); then queue order."""
    volume = sum(ps.count * pod_volume(w, ps, snapshot) for ps in w.pod_sets)
    return (-effective_priority(w, snapshot), -volume) + queue_order_key(w, snapshot)[1:]


def _request_key(w: Workload, snapshot: Snapshot) -> object:
    """What decides whether a workload finds room: its queue, priorities (the effective
    one sets what it may displace) and pod sets; its queue time only where it matters
    (elastic counts, or a queue that may evict newer work of equal priority)."""
    cq = snapshot.cluster_queues[w.cluster_queue]  # type: ignore[index]
    timed = w.elastic or cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority"
    return (w.cluster_queue, w.priority, effective_priority(w, snapshot), w.queued_at if timed else None,
            tuple((ps.count, ps.minimum, ps.request, ps.topology, ps.tolerations,
                   tuple(sorted(ps.node_selector.items()))) for ps in w.pod_sets))


class Victims:
    """What a waiting workload may displace (unstarted admissions, running work), and
    its order for one preemptor."""

    def __init__(self, state: ClusterState, evicted: dict[ObjectRef, Eviction], admitted: dict[ObjectRef, Admission]):
        snapshot = state.snapshot
        self.state, self.evicted, self.admitted = state, evicted, admitted
        self.rules = Preemption(snapshot, QuotaTree(snapshot))
        # Admissions of the plan being improved, seen as running where they were put: a
        # higher tier may take their place for free (they were never started). Not those
        # an eviction names: that eviction would then be for nothing.
        self.named = {ref for e in evicted.values() for ref in e.for_}
        by_ref = {w.ref: w for w in snapshot.workloads}
        self.original = by_ref
        self.unstarted = {ref: replace(by_ref[ref], assignment=a.pod_sets, cluster_queue=a.cluster_queue)
                          for ref, a in sorted(admitted.items())}
        # Those a higher tier may take the place of, by tier (asked for every waiting workload).
        self.displaceable: dict[int, dict[ObjectRef, Workload]] = defaultdict(dict)
        for ref, v in self.unstarted.items():
            if ref not in self.named:
                self.displaceable[effective_priority(v, snapshot)][ref] = v
        # Admitted workloads by preemptor class (queue, priority, must borrow): an eviction
        # may be made for any of them that the rules let evict it (as in the model).
        self.admitted_by_class: dict[tuple[str, int, bool], list[Workload]] = defaultdict(list)
        self._evictors: dict[tuple[str | None, int], tuple[str, int, bool] | None] = {}
        # ordered() by what it depends on, while the candidates stay the same (at L, 1,435
        # waiting workloads asked for 579 different lists).
        self._orders: dict[tuple, Order] = {}
        for ref in sorted(admitted):
            self.admit(by_ref[ref])
        # By (queue, priority): the rules judge such a group alike, but for the
        # equal-priority rule within one queue, which looks at each one.
        self.groups: dict[tuple[str, int], list[Workload]] = defaultdict(list)
        for v in sorted(capacity.running(snapshot), key=lambda v: v.ref):
            if v.ref not in evicted and evictable(v, snapshot):
                self.groups[(v.cluster_queue or "", v.priority)].append(v)
        every = [*self.unstarted.values(), *(v for group in self.groups.values() for v in group)]
        self._usage: dict[ObjectRef, dict[str, Resources]] = {}    # node_usage_of, for candidates placed
        self.cost = {v.ref: eviction_cost(v, snapshot) for group in self.groups.values() for v in group}
        self.cost.update((ref, 0.0) for ref in self.unstarted)
        # Kueue's order within a domain: lower priority, then most recently admitted.
        self.rank = {v.ref: (v.priority, -(v.admitted_at or 0.0), v.uid, str(v.ref)) for v in every}
        self._domains: dict[DomainKey, dict[str, Domain]] = {}
        # Each candidate's spot among the domains of a key, in a resource (fixed while it is one).
        self._spots: dict[tuple[DomainKey, str], dict[ObjectRef, Spot | None]] = defaultdict(dict)

    def admit(self, w: Workload) -> None:
        members = self.admitted_by_class[(w.cluster_queue or "", w.priority, self.rules.borrows(w))]
        if not members:
            # A class that may evict what no other could: orders may now hold more.
            self._evictors.clear()
            self._orders.clear()
        members.append(w)

    def take(self, preemptor: Workload, victim: Workload) -> Workload | None:
        """Record that `victim` gives way to `preemptor`: an unstarted admission is
        withdrawn (and returned, to wait again), running work is evicted for `preemptor`
        or, where its policies do not allow that, for an admitted workload they allow."""
        self._leave(victim.ref)
        if victim.ref in self.unstarted:
            original = self.original[victim.ref]
            del self.unstarted[victim.ref], self.admitted[victim.ref]
            self.displaceable[effective_priority(original, self.state.snapshot)].pop(victim.ref, None)
            members = self.admitted_by_class[(original.cluster_queue or "", original.priority,
                                              self.rules.borrows(original))]
            members.remove(original)
            if not members:
                self._evictors.clear()
                self._orders.clear()   # what only that class could evict is no candidate now
            return original
        self.groups[(victim.cluster_queue or "", victim.priority)].remove(victim)
        evictor = preemptor if self.rules.reason(preemptor, victim) else self.other_evictor(victim)
        assert evictor is not None
        self.named.add(evictor.ref)
        if self.displaceable[effective_priority(evictor, self.state.snapshot)].pop(evictor.ref, None) is not None:
            self._leave(evictor.ref)
        self.evicted[victim.ref] = Eviction(workload=victim.ref, reason=self.rules.reason(evictor, victim) or "",
                                            for_=(evictor.ref,), cost=self.cost[victim.ref])
        return None

    def put_back(self, admission: Admission) -> bool:
        """Admit `admission` of an earlier plan as it was, if it still fits there."""
        w = self.original[admission.workload]
        placed = replace(w, assignment=admission.pod_sets, cluster_queue=admission.cluster_queue)
        if not self.state.fits_back(placed):
            return False
        self.state.release(placed, sign=-1)
        self.admit(w)
        return True

    def settle(self) -> None:
        """Evictions made for admissions no longer in the plan (top_tier_only withdraws
        them): the work goes back where it fits back, else the eviction is made for an
        admitted workload the rules let evict it. (One that neither fixes is left as it
        is, and repacked keeps the plan it was given.)"""
        for ref, eviction in sorted(self.evicted.items()):
            if all(r in self.admitted for r in eviction.for_):
                continue
            victim = self.original[ref]
            if self.state.fits_back(victim):
                self.state.release(victim, sign=-1)
                del self.evicted[ref]
                continue
            evictor = self.other_evictor(victim)
            if evictor is not None:
                self.evicted[ref] = replace(eviction, for_=(evictor.ref,),
                                            reason=self.rules.reason(evictor, victim) or eviction.reason)

    def restore(self) -> None:
        """Undo the evictions whose work fits back as it ran, with every admission in
        place: no admission needs them (REFERENCE §3: never evict to gain nothing)."""
        for ref in taken_back(self.state, list(self.evicted.values()), self.original):
            del self.evicted[ref]

    def other_evictor(self, victim: Workload, leaving: Collection[ObjectRef] = frozenset()) -> Workload | None:
        """An admitted workload (not `leaving`) the rules let evict `victim`, judged class by
        class (not within the victim's own queue and priority, where each is judged alone).
        Without `leaving`, the class found is kept per victim group until classes change."""
        if not leaving:
            group = (victim.cluster_queue, victim.priority)
            if group not in self._evictors:
                found = self._other_evictor(victim, leaving)
                self._evictors[group] = None if found is None else \
                    (found.cluster_queue or "", found.priority, self.rules.borrows(found))
            key = self._evictors[group]
            return None if key is None else self.admitted_by_class[key][0]
        return self._other_evictor(victim, leaving)

    def _other_evictor(self, victim: Workload, leaving: Collection[ObjectRef]) -> Workload | None:
        for (queue, priority, _), members in self.admitted_by_class.items():
            if (queue, priority) == (victim.cluster_queue, victim.priority):
                continue
            staying = next((m for m in members if m.ref not in leaving), None)
            if staying is not None and self.rules.reason(staying, victim):
                return staying
        return None

    def justified(self, w: Workload, picked: list[Workload]) -> bool:
        """Is each running victim still evictable for someone once the withdrawals are made?"""
        leaving = {v.ref for v in picked if v.ref in self.unstarted}
        return all(v.ref in leaving or self.rules.reason(w, v) or self.other_evictor(v, leaving)
                   for v in picked)

    def gains(self, w: Workload, choices: list[Choice], victims: list[Workload]) -> bool:
        """Does admitting `w` as `choices` in place of `victims` serve its tier more? (Lower
        tiers come after it in the objective; equal-tier victims must be outweighed.)"""
        snapshot = self.state.snapshot
        tier = effective_priority(w, snapshot)
        lost = sum(running_volume(v, snapshot) for v in victims if effective_priority(v, snapshot) >= tier)
        return lost == 0 or assigned_volume(w, [c.assignment() for c in choices], snapshot) > lost

    def allowed(self, w: Workload) -> list[Workload]:
        """Work `w` may displace: unstarted admissions of a lower tier; running work of its
        tier or lower that its queue's policies let it evict, or of a lower tier that
        they let an admitted workload evict."""
        snapshot = self.state.snapshot
        tier = effective_priority(w, snapshot)
        out = [v for below, members in self.displaceable.items() if below < tier for v in members.values()]
        for (_, priority), group in self.groups.items():
            if priority > tier or not group:
                continue
            if priority == w.priority and group[0].cluster_queue == w.cluster_queue:
                out.extend(v for v in group if self.rules.reason(w, v))
            elif self.rules.reason(w, group[0]) or (priority < tier and self.other_evictor(group[0])):
                out.extend(group)
        return out

    def ordered(self, w: Workload) -> list[Workload]:
        """`allowed(w)` domain by domain, best first: most room freed per unit of lost work,
        at the finest level where some pod set of `w` must keep its pods (or a slice) together.
        Workloads alike in what the rules and the order read get the same list."""
        snapshot = self.state.snapshot
        domains = self._domain_key(w)
        resource = _dominant_resource(w, snapshot)
        cq = snapshot.cluster_queues[w.cluster_queue]  # type: ignore[index]
        timed = cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority"
        key = (w.cluster_queue, w.priority, effective_priority(w, snapshot), self.rules.borrows(w),
               w.queued_at if timed else None, domains, resource)
        if key not in self._orders:
            self._orders[key] = self._order(w, self._spots[(domains, resource)], self._domains[domains], resource)
        return self._orders[key].workloads()

    def room_with_all(self, ordered: "Candidates", fits: Callable[[], bool]) -> bool:
        """Would the preemptor fit with every candidate in `ordered` gone? Tested with
        what they free gathered once per order (at L, two thirds of the victim searches
        find no room, and searching released and took back hundreds of candidates a few
        at a time: 8.5 s of a packing's 20 s)."""
        if not len(ordered):
            return False
        freed = ordered.all_freed(self.state)
        self.state.release_freed(freed)
        try:
            return fits()
        finally:
            self.state.release_freed(freed, sign=-1)

    def _leave(self, ref: ObjectRef) -> None:
        """`ref` is no candidate any more: the kept orders let it go."""
        for order in self._orders.values():
            order.remove(ref)

    def _ordered(self, w: Workload, spots: dict[ObjectRef, Spot | None], domain_of: dict[str, Domain],
                 resource: str) -> list[Workload]:
        return self._order(w, spots, domain_of, resource).workloads()

    def _order(self, w: Workload, spots: dict[ObjectRef, Spot | None], domain_of: dict[str, Domain],
               resource: str) -> "Order":
        entries: list[tuple[Workload, Spot, float]] = []
        tier = effective_priority(w, self.state.snapshot)
        for v in self.allowed(w):
            if v.ref in spots:
                spot = spots[v.ref]
            else:
                spot = spots[v.ref] = self._spot(v, domain_of, resource)
            if spot is None:
                continue   # on nodes `w` cannot use
            # +1: fewer evictions, all else equal; work of w's own tier only as the last resort.
            same_tier = v.priority >= tier and v.ref not in self.unstarted
            entries.append((v, spot, self.cost[v.ref] + 1.0 + (1e9 if same_tier else 0.0)))
        return Order(entries, self.rank)

    def _spot(self, v: Workload, domain_of: dict[str, Domain], resource: str) -> Spot | None:
        """Where candidate `v` sits among the domains of `domain_of`: the domain it is
        counted in (the first it uses) and how much of `resource` it frees in each;
        None where it uses none of them. Fixed while `v` is a candidate."""
        usage = self._usage.get(v.ref)
        if usage is None:
            usage = self._usage[v.ref] = capacity.node_usage_of(v)
        shares = [(domain_of[node], float(used.get(resource))) for node, used in usage.items() if node in domain_of]
        return (min(domain for domain, _ in shares), shares) if shares else None

    def _domain_key(self, w: Workload) -> DomainKey:
        """The levels of `w`'s topology and the depth at which it shares a domain; the map
        of each node to its domain there is kept in `_domains` under that key."""
        snapshot = self.state.snapshot
        levels: tuple[str, ...] = (HOSTNAME_LABEL,)
        cq = snapshot.cluster_queues[w.cluster_queue]  # type: ignore[index]
        for ps in w.pod_sets:
            options = self.state.options(cq, ps)
            if not isinstance(options, str) and options:
                levels = levels_for(snapshot, [snapshot.flavors[f] for f in options[0].flavors])
                break
        wanted = [layer.level for ps in w.pod_sets for layer in ps.topology.slices]
        wanted += [ps.topology.level for ps in w.pod_sets if ps.topology.level]
        depth = max((levels.index(lvl) + 1 for lvl in wanted if lvl in levels), default=len(levels))
        key = (levels, depth)
        if key not in self._domains:
            paths = {n.name: node_path(n, levels) for n in self.state.node_objs}
            self._domains[key] = {name: path[:depth] for name, path in paths.items() if path is not None}
        return key


class Order:
    """One preemptor's candidates domain by domain, best first: most room freed per unit
    of lost work. Kept while candidates leave (each turn that evicts makes some leave):
    only the domains they touched are summed again, in the order they were first summed,
    and moved to their new place in the order, so the list is the one computed from
    scratch. Handed out as a Candidates view, read only as far as a search looks: a
    small job's search looks at a few of a cluster's thousands of domains."""

    def __init__(self, entries: list[tuple[Workload, Spot, float]], rank: dict[ObjectRef, tuple]):
        # Per domain: the cost of each candidate counted there and the room each
        # candidate frees there, in the order given (sums are taken in that order), and
        # the candidates counted there in rank order.
        self.costs: dict[Domain, list[tuple[ObjectRef, float]]] = defaultdict(list)
        self.frees: dict[Domain, list[tuple[ObjectRef, float]]] = defaultdict(list)
        self.members: dict[Domain, list[Workload]] = defaultdict(list)
        self.spots: dict[ObjectRef, Spot] = {}
        for v, spot, cost in entries:
            home, shares = spot
            self.spots[v.ref] = spot
            self.costs[home].append((v.ref, cost))
            self.members[home].append(v)
            for domain, amount in shares:
                self.frees[domain].append((v.ref, amount))
        self.cost = {d: _sum(c) for d, c in self.costs.items()}
        self.freed = {d: _sum(f) for d, f in self.frees.items()}
        for members in self.members.values():
            members.sort(key=lambda v: rank[v.ref])
        self.keys = {d: self._key(d) for d in self.members}
        self.sorted = sorted((key, d) for d, key in self.keys.items())   # the domains, best first
        self.count = len(self.spots)
        self.version = 0
        self._view: Candidates | None = None
        self._all_freed: Freed | None = None    # what all the candidates free (ClusterState.freed_by)

    def _key(self, domain: Domain) -> tuple[float, Domain]:
        return (self.cost[domain] / max(self.freed[domain], 1e-9), domain)

    def remove(self, ref: ObjectRef) -> None:
        spot = self.spots.pop(ref, None)
        if spot is None:
            return
        home, shares = spot
        self.count -= 1
        self.members[home] = [v for v in self.members[home] if v.ref != ref]
        self.costs[home] = [c for c in self.costs[home] if c[0] != ref]
        if self.members[home]:
            self.cost[home] = _sum(self.costs[home])
        else:
            del self.members[home], self.costs[home], self.cost[home]
        touched = {d for d, _ in shares} | {home}
        for domain in touched:
            if domain in self.frees:
                self.frees[domain] = [f for f in self.frees[domain] if f[0] != ref]
                self.freed[domain] = _sum(self.frees[domain])
            old = self.keys.pop(domain, None)
            if old is not None:
                del self.sorted[bisect.bisect_left(self.sorted, (old, domain))]
            if domain in self.members:
                self.keys[domain] = self._key(domain)
                bisect.insort(self.sorted, (self.keys[domain], domain))
        self.version += 1
        self._view = None
        self._all_freed = None

    def all_freed(self, state: ClusterState) -> Freed:
        if self._all_freed is None:
            self._all_freed = state.freed_by([v for members in self.members.values() for v in members])
        return self._all_freed

    def workloads(self) -> "Candidates":
        if self._view is None:
            self._view = Candidates(self)
        return self._view


class Candidates(Sequence[Workload]):
    """An Order's list as it stands, read lazily: domains are taken in order only as far
    as an index asks. Valid until the order changes (reading it later is an error)."""

    def __init__(self, order: Order):
        self.order, self.version = order, order.version
        self.read: list[Workload] = []
        self.domains = 0     # how many of order.sorted are in `read`

    def __len__(self) -> int:
        return self.order.count

    def all_freed(self, state: ClusterState) -> Freed:
        """What every candidate frees, gathered once per order as it stands."""
        return self._current().all_freed(state)

    def _current(self) -> Order:
        if self.order.version != self.version:
            raise RuntimeError("a victim order read after it changed")
        return self.order

    def _upto(self, n: int) -> None:
        order = self._current()
        while len(self.read) < n and self.domains < len(order.sorted):
            self.read.extend(order.members[order.sorted[self.domains][1]])
            self.domains += 1

    @overload
    def __getitem__(self, index: int) -> Workload: ...
    @overload
    def __getitem__(self, index: slice) -> list[Workload]: ...

    def __getitem__(self, index: int | slice) -> Workload | list[Workload]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            self._upto(stop)
            return self.read[start:stop:step]
        if index < 0:
            index += len(self)
        self._upto(index + 1)
        return self.read[index]


def _sum(terms: list[tuple[ObjectRef, float]]) -> float:
    """The amounts added up in their order (as the order from scratch adds them)."""
    total = 0.0
    for _, amount in terms:
        total += amount
    return total


def _dominant_resource(w: Workload, snapshot: Snapshot) -> str:
    """The resource a workload's volume is counted in: its GPU resource, else cpu."""
    extra = snapshot.policy.gpu_resources
    for ps in w.pod_sets:
        for resource, value in ps.request.items():
            if value > 0 and (is_gpu(resource) or resource in extra):
                return resource
    return "cpu"
