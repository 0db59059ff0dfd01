"""The greedy baseline: Kueue v0.17's scheduling cycles, replayed on a static snapshot.

`greedy()` runs KueueCycles (below) until nothing changes: each cycle pops the head
of every active ClusterQueue, nominates every head against the state at the start of
the cycle (planner.kueue.assigner: Kueue's flavor assigner, then node placement, then
its preemption, planner.kueue.preemption), orders them as Kueue's iterator does (lower borrowing
height first, then priority, then queue time), and processes them in order: admit,
issue preemptions and hold the room, hold quota, skip, or set aside. Stowplan plans the
end state; the KueueCycles docstring says how Kueue's requeues and evictions are
replayed and where a plan cannot follow Kueue.

Free capacity and quota usage live in `ClusterState` (planner.kueue.state), updated
in place per admission or eviction (never recomputed); Kueue's fit tests and victim
search, which the explainer uses too, live beside it in planner.kueue. This module is
the cycle loop only; it computes and writes nothing.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from models import Admission, ClusterQueue, Decisions, FlavorResource, Eviction, ObjectRef, Snapshot, Workload, WorkloadState
from planner.kueue import fairsharing
from planner.kueue.assigner import Rules
from planner.kueue.capacity import cluster_queue_usage, quota_usage_of
from planner.kueue.semantics import (
    admission_fair_sharing, borrowing_queues, effective_priority, eviction_cost, evictable, kueue_amounts,
    preemption_reason, queue_order_key,
)
from planner.kueue.fit import fits_fixed, place_fixed
from planner.kueue.flavors import FIT, NO_FIT, PREEMPT, Assignment
from planner.kueue.preemption import RECLAIMED, Target
from planner.kueue.registry import Admitted, Registry
from planner.kueue.state import ClusterState, PodSetChoice, admission_blocker


@dataclass(frozen=True)
class GreedyResult:
    decisions: Decisions
    reasons: dict[ObjectRef, str]   # pending, not admitted -> why, from greedy's last attempt
    cycles: int = 0                 # Kueue cycles replayed (the last replay)
    undone: int = 0                 # admissions of the replay evicted again later (Kueue would start and stop them)


# ---------------------------------------------------------------- the cycles

@dataclass(eq=False)
class _Pending:
    """A workload waiting in its ClusterQueue, with what Kueue keeps about its last try."""

    workload: Workload
    key: tuple[Any, ...]                         # queue order: priority, queue time, UID
    last: dict[tuple[int, str], int] | None = None   # LastAssignment: flavor tried per (pod set, resource)
    generation: int = 0                          # the queue's generation at that try
    reason: str = ""


class _Queue:
    """One ClusterQueue's pending workloads as Kueue's queue manager holds them: a heap
    in queue order (the workload that is preempting, the sticky one, first), and the
    inadmissible ones set aside until something leaves the cohort tree."""

    def __init__(self, cq: ClusterQueue):
        self.cq = cq
        self.heap: list[tuple[tuple[Any, ...], ObjectRef]] = []
        self.waiting: dict[ObjectRef, _Pending] = {}          # in the heap
        self.inadmissible: dict[ObjectRef, _Pending] = {}
        self.sticky: ObjectRef | None = None
        self.generation = 0    # Kueue's AllocatableResourceGeneration: moves on when a workload leaves

    def push(self, p: _Pending) -> None:
        ref = p.workload.ref
        if ref not in self.waiting:
            self.waiting[ref] = p
            heapq.heappush(self.heap, (p.key, ref))

    def pop(self) -> _Pending | None:
        if self.sticky is not None and self.sticky in self.waiting:
            return self.waiting.pop(self.sticky)   # its heap entry is skipped when it surfaces
        while self.heap:
            _, ref = heapq.heappop(self.heap)
            p = self.waiting.pop(ref, None)
            if p is not None:
                return p
        return None

    def rekey(self, key: Callable[[Workload], tuple[Any, ...]]) -> None:
        """The order keys changed (admission fair sharing's usage moved): re-sort."""
        for p in list(self.waiting.values()) + list(self.inadmissible.values()):
            p.key = key(p.workload)
        self.heap = [(p.key, ref) for ref, p in self.waiting.items()]
        heapq.heapify(self.heap)

    def requeue_inadmissible(self) -> None:
        for p in self.inadmissible.values():
            self.push(p)
        self.inadmissible.clear()


@dataclass(eq=False)
class _Entry:
    pending: _Pending
    cq: ClusterQueue
    assignment: Assignment
    targets: list[Target]
    order: tuple[Any, ...]


def greedy(snapshot: Snapshot, fair: "fairsharing.FairSharing | None" = None, *,
           shortcuts: bool = True) -> GreedyResult:
    """Kueue's scheduling cycles until nothing changes (planner.kueue.assigner decides
    for each head; KueueCycles runs the cycles), replayed again with more running work
    protected while the end state cannot support an eviction the replay made (see
    KueueCycles: "Stowplan plans the end state").

    `shortcuts=False` runs every search in full (the plain path): the same decisions,
    slower; tests hold the two paths equal."""
    protected: dict[ObjectRef, str] = {}
    if fair is None:
        fair = fairsharing.from_snapshot(snapshot)
    while True:
        cycles = KueueCycles(snapshot, protected=protected, fair=fair, shortcuts=shortcuts)
        result = cycles.run()
        more = {ref: kind for ref, kind in cycles.unsupported.items()
                if protected.get(ref) != kind and protected.get(ref) != ALL}
        if not more:
            return result
        protected = {**protected, **more}


# How running work is protected in a replay (KueueCycles.protected): not reclaimed by
# another queue's workload, or not evicted at all.
RECLAIM, ALL = "reclaim", "all"


# Cycles from a preemptor's evictions to their completion (its victims' quota and nodes
# free): 1, at the end of the cycle that issues them. In a cluster an eviction waits for
# the victim's pods to stop, and Kueue meanwhile runs more cycles: the preemptor stays
# its queue's head and issues the same evictions again, holding its room.
EVICTION_CYCLES = 1


class KueueCycles:
    """Kueue v0.17's scheduler loop (pkg/scheduler/scheduler.go schedule()), replayed on
    a static snapshot until its fixed point.

    Each cycle: 1. pop the head of every active ClusterQueue (the sticky preemptor
    first); 2. nominate every head against the state at the start of the cycle
    (planner.kueue.assigner: flavors, then nodes, then planner.kueue.preemption's targets); 3. order them: lower
    borrowing height first, then higher priority, then older; 4. process in order: a
    NoFit head, or one needing preemption with no targets, is set aside (in a queue
    whose reclaimWithinCohort is not Any the latter still holds what it could claim
    for the rest of the cycle); a head whose targets overlap an earlier preemptor's,
    or that no longer fits after the heads before it, is skipped (back in the heap);
    a preemptor's targets are evicted and its room held for the rest of the cycle,
    and it stays at the head of its queue; any other is admitted. 5. Between cycles
    the evictions complete: the victims' quota and nodes are free, every workload set
    aside in their cohort trees is back in its queue, and the victims' queues'
    generations move on (a requeued workload then tries every flavor again). The
    preemptor is admitted in a later cycle if it is then still the head that fits.

    At the fixed point every workload set aside is tried once more against the final
    state, and again while that changes anything: Kueue retries set-aside work when
    something leaves its cohort tree, and a cluster's next event (a finished job) would
    retry it there; without this a queue that started borrowing after a head was set
    aside would keep what that head may reclaim.

    Stowplan plans the end state. A workload admitted by this plan and later evicted
    goes back to its queue and may be admitted again; a workload running before the
    plan that is evicted stays evicted (a plan has no moves: Kueue would requeue it
    and might start it elsewhere). Nothing finishes.

    Each eviction must hold in the end state (planner.verify): it names an admission
    of the plan that the preemption policies allow to evict it, judging "borrowing" by
    the queue's usage before the plan or with all of the plan's admissions made. Kueue
    judges at the moment it preempts, and the two can part: a queue borrows through
    admissions that are themselves reclaimed later, or a preemptor loses its room to
    other heads and is never admitted. Such an eviction is first given to another
    admission of the plan allowed to make it; where none is, the victim is listed in
    `unsupported` and greedy() replays the cycles with it protected (`protected`: by
    reference, RECLAIM: no other queue's workload may take it, ALL: none may), as its
    Kueue counterpart would be requeued and started again.

    Where Kueue's loop would go round for ever (a workload this plan admitted, evicted,
    comes before its preemptor in the next cycle and takes its room back), greedy's
    preemptor does not evict the same workload twice (`taken_back`).
    """

    def __init__(self, snapshot: Snapshot, eviction_cycles: int | None = None,
                 protected: Mapping[ObjectRef, str] | None = None, fair: "fairsharing.FairSharing | None" = None,
                 shortcuts: bool = True):
        self.snapshot = snapshot
        self.state = ClusterState(snapshot)
        self.registry = Registry()
        self._empty: ClusterState | None = None
        tree = self.state.quota
        # Kueue's fair sharing (fairSharing.enable): heads by the tournament, fair preemption.
        self.shares = fairsharing.Shares(tree, fair) if fair is not None else None
        self.rules = Rules(snapshot, self.state, self.registry, place_fixed, fits_fixed, self.empty,
                           shortcuts=shortcuts, fair=self.shares)
        # Admission fair sharing: what admissions of this plan add to their LocalQueues'
        # usage (Kueue's entry penalties), on top of the snapshot's decayed usage.
        self.afs = admission_fair_sharing(snapshot)
        self.penalty: dict[tuple[str, str], float] = {}
        self.borrowing_before = borrowing_queues(snapshot, tree, cluster_queue_usage(snapshot))
        self.protected = dict(protected or {})
        self.unsupported: dict[ObjectRef, str] = {}   # set by run(): see the class docstring
        self.reasons: dict[ObjectRef, str] = {}
        self.queues: dict[str, _Queue] = {}
        self.pending: dict[ObjectRef, _Pending] = {}
        for w in sorted(snapshot.workloads, key=lambda w: w.ref):
            if w.state is WorkloadState.RUNNING and w.cluster_queue is not None \
                    and f"cq:{w.cluster_queue}" in tree.parent:
                kept = self.protected.get(w.ref)
                self.registry.add(Admitted(
                    w, w.cluster_queue, quota_usage_of(w), evictable(w, snapshot) and kept != ALL, False,
                    w.admitted_at if w.admitted_at is not None else snapshot.now, reclaimable=kept is None))
            if w.state is not WorkloadState.PENDING:
                continue
            blocker = admission_blocker(snapshot, w)
            if blocker is not None:
                self.reasons[w.ref] = blocker
                continue
            name = w.cluster_queue
            assert name is not None
            if name not in self.queues:
                self.queues[name] = _Queue(snapshot.cluster_queues[name])
            p = self.pending[w.ref] = _Pending(w, self._key(w))
            self.queues[name].push(p)
        self.names = sorted(self.queues)
        # Cohort tree root -> its queues: an eviction requeues what was set aside in all of them.
        self.tree_queues: dict[str, list[str]] = defaultdict(list)
        for name in self.names:
            self.tree_queues[self._root(name)].append(name)
        self.admitted: dict[ObjectRef, tuple[Admission, Admitted]] = {}
        self.evictions: dict[ObjectRef, Eviction] = {}
        # Evictions issued and not complete: victim -> (target, preemptor, the cycle at whose
        # end it completes). See EVICTION_CYCLES.
        self.evicting: dict[ObjectRef, tuple[Target, Workload, int]] = {}
        self.eviction_cycles = max(1, eviction_cycles if eviction_cycles is not None else EVICTION_CYCLES)
        self.cycle = 0
        self.undone = 0
        self.sequence = 0
        # (preemptor, victim) for each eviction of a workload this plan admitted: the victim
        # is pending again and, in a queue that does not borrow as high, comes before the
        # preemptor in the next cycle and takes its room back, the preemptor evicts it
        # again, and so on (Kueue's loop thrashes there). A preemptor never evicts the same
        # workload twice: it is set aside instead, and the workload keeps running.
        self.taken_back: set[tuple[ObjectRef, ObjectRef]] = set()

    def _key(self, w: Workload) -> tuple[Any, ...]:
        """queue_order_key, with this plan's admissions' penalties on the LocalQueue's usage."""
        key = queue_order_key(w, self.snapshot)
        extra = self.penalty.get((w.ref.namespace, w.local_queue))
        if extra and self.afs is not None and w.cluster_queue in self.afs.queues:
            key = (key[0], key[1] + extra) + key[2:]
        return key

    def empty(self) -> ClusterState:
        """The cluster with nothing admitted (Kueue's SimulateEmpty)."""
        if self._empty is None:
            self._empty = ClusterState(self.snapshot, evicted=[w.ref for w in self.snapshot.workloads
                                                               if w.state is WorkloadState.RUNNING])
        return self._empty

    def _root(self, name: str) -> str:
        key = f"cq:{name}"
        return self.state.quota.root_of(key) if key in self.state.quota.parent else key

    # -- the loop

    def run(self, cycles: int | None = None) -> GreedyResult:
        """The cycles to the fixed point (or only the first `cycles`, to see where a
        cluster stands after that many: evictions issued and not complete are left out)."""
        limit = 20 * (len(self.snapshot.workloads) + 10)   # a guard: Kueue's own loop could thrash
        if cycles is not None:
            limit = min(limit, cycles)
        swept: int | None = None
        while self.cycle < limit:
            if self.step():
                continue
            # The fixed point: try what was set aside once more, while anything changed since.
            if swept == self.registry.epoch:
                break
            swept = self.registry.epoch
            aside = [name for name in self.names if self.queues[name].inadmissible]
            if not aside:
                break
            for name in aside:
                self.queues[name].requeue_inadmissible()
        return self._result()

    def step(self) -> bool:
        """One cycle; False once there is nothing left to do (no heads, or only StrictFIFO
        heads that wait on a state that no longer changes)."""
        self.cycle += 1
        heads = [p for name in self.names if (p := self.queues[name].pop()) is not None]
        if not heads:
            return False
        self.rules.preemptor.steady = True     # nothing is held while nominating
        entries = [self._nominate(p) for p in heads]
        self.rules.preemptor.steady = False
        entries.sort(key=lambda e: e.order)
        if self.shares is not None:
            return self._process(self._tournament(entries))
        return self._process(entries)

    def _tournament(self, entries: list[_Entry]) -> Iterator[_Entry]:
        """Kueue's fairSharingIterator: each next head is the tournament's winner in
        its cohort tree, on the state as the heads before it left it. Kueue starts
        from any queue with a head (a map's order); this takes the first in the
        classical order, so that the same snapshot gives the same plan."""
        assert self.shares is not None
        heads = [fairsharing.Head(e.cq.name, e.assignment.usage, effective_priority(e.pending.workload, self.snapshot),
                                  e.pending.workload.queued_at, e) for e in entries]
        while heads:
            h = fairsharing.tournament_pop(self.state, self.shares, heads, heads[0])
            assert isinstance(h.item, _Entry)
            yield h.item

    def _nominate(self, p: _Pending) -> _Entry:
        w = p.workload
        queue = self.queues[w.queue_name]
        last = p.last if p.last is not None and p.generation >= queue.generation else None
        assignment, targets = self.rules.nominate(w, queue.cq, last, queue.generation)
        if assignment.mode != FIT and assignment.reason:
            p.reason = assignment.reason
        order = (assignment.borrowing, p.key[0]) + p.key[2:]   # across queues: no LocalQueue usage
        return _Entry(p, queue.cq, assignment, targets, order)

    def _process(self, entries: Iterable[_Entry]) -> bool:
        """Step 5 of schedule(), then the cycle's end; whether anything moved."""
        state = self.state
        preempted: dict[ObjectRef, Admitted] = {}
        held: list[tuple[str, list[PodSetChoice]]] = []            # room held until the cycle ends
        victims: list[tuple[Target, Workload]] = []
        moved = False
        for e in entries:
            a, cq, queue = e.assignment, e.cq, self.queues[e.cq.name]
            if e.targets and self.taken_back and any(
                    (e.pending.workload.ref, t.admitted.ref) in self.taken_back for t in e.targets):
                e.targets = []     # it would evict again what took its room back: see taken_back
            if a.mode == NO_FIT or (a.mode == PREEMPT and not e.targets):
                if a.mode == PREEMPT and cq.preemption.reclaim_within_cohort != "Any":
                    reserved = self._reserve(e, preempted)
                    if reserved:
                        held.append(reserved)
                moved |= self._set_aside(e)
                continue
            if any(t.admitted.ref in preempted for t in e.targets):
                self._skip(e)      # its targets overlap an earlier preemptor's
                moved = True
                continue
            mine = [t.admitted.view for t in e.targets]
            state.release_many(mine)
            if a.choices is None or not state.still_fits(cq.name, a.choices):
                state.release_many(mine, sign=-1)
                self._skip(e)      # no longer fits after the heads before it
                moved = True
                continue
            for t in e.targets:
                preempted[t.admitted.ref] = t.admitted
                if t.admitted.ref not in self.evicting:   # else its eviction is under way: nothing new
                    victims.append((t, e.pending.workload))
            state.commit(cq.name, a.choices)
            moved = True
            if a.mode == PREEMPT:
                held.append((cq.name, a.choices))
                e.pending.last = None
                queue.push(e.pending)
                if cq.queueing_strategy != "StrictFIFO":
                    queue.sticky = e.pending.workload.ref
                continue
            self._admit(e)
        for name, choices in reversed(held):
            self._give_back(name, choices)
        self._evict(victims, preempted)
        return moved

    def _evict(self, victims: Sequence[tuple[Target, Workload]],
               preempted: Mapping[ObjectRef, Admitted]) -> None:
        """Evictions issued this cycle start; those due complete. Until then a victim
        holds its quota and nodes (it was released only for the rest of this cycle's
        checks, as Kueue's fits() does) and is a candidate of its own kind: already
        evicted, first in every later search's order."""
        for target, preemptor in victims:
            self.evicting[target.admitted.ref] = (target, preemptor, self.cycle + self.eviction_cycles - 1)
            if self.eviction_cycles > 1:
                self.registry.mark_evicting(target.admitted)
        due = [ref for ref, (_, _, at) in self.evicting.items() if at <= self.cycle]
        for ref, (target, _, _) in self.evicting.items():
            if ref in preempted and ref not in due:
                self.state.release(target.admitted.view, sign=-1)     # back until its eviction completes
            elif ref not in preempted and ref in due:
                self.state.release(target.admitted.view)
        done = [self.evicting.pop(ref)[:2] for ref in sorted(due)]
        self._complete(done)

    def _set_aside(self, e: _Entry) -> bool:
        """requeueAndUpdate for a head that was not nominated: StrictFIFO keeps it at the
        head; BestEffortFIFO sets it aside, unless flavors are left to try. Whether the
        queue moved on."""
        p, a, queue = e.pending, e.assignment, self.queues[e.cq.name]
        p.last, p.generation = a.last, a.generation
        if e.cq.queueing_strategy == "StrictFIFO":
            queue.push(p)
            return a.pending_flavors()
        if a.pending_flavors():
            queue.push(p)
        else:
            queue.inadmissible[p.workload.ref] = p
        return True

    def _skip(self, e: _Entry) -> None:
        e.pending.last = None
        self.queues[e.cq.name].push(e.pending)

    def _reserve(self, e: _Entry, preempted: Mapping[ObjectRef, Admitted]) -> tuple[str, list[PodSetChoice]] | None:
        """resourcesToReserve: a head that needs preemption but has no targets holds, for
        the rest of the cycle, its nodes as placed on an empty cluster and the quota it
        could claim (up to nominal; up to the borrowing limit if it borrows)."""
        a, cq, state = e.assignment, e.cq, self.state
        picks = a.picks()
        placed = place_fixed(self.empty(), cq, e.pending.workload, picks)
        if isinstance(placed, tuple):
            return None
        # The queue's usage as Kueue's snapshot has it: victims of this cycle still count.
        gone: dict[FlavorResource, int] = defaultdict(int)
        for v in preempted.values():
            if v.cq == cq.name:
                for fr, amount in v.usage.items():
                    gone[fr] += amount
        charges: dict[FlavorResource, int] = {}
        for fr, usage in a.usage.items():
            used = state.used(cq.name, fr) + gone[fr]
            nominal, borrowing, _ = state.quota.limits(f"cq:{cq.name}", fr)
            if a.borrowing > 0:
                charges[fr] = usage if borrowing is None else min(usage, nominal + borrowing - used)
            else:
                charges[fr] = max(0, min(usage, nominal - used))
        choices = [PodSetChoice(c.pod_set, c.option, c.count, c.pods, {}) for c in placed]
        if choices:
            choices[0].charges = charges
        state.commit(cq.name, choices)
        return cq.name, choices

    def _give_back(self, name: str, choices: Sequence[PodSetChoice]) -> None:
        state = self.state
        state.version += 1
        for c in choices:
            state.take(c.pods, c.pod_set.request, sign=-1)
            for fr, v in c.charges.items():
                state.charge(name, fr, -v)

    def _admit(self, e: _Entry) -> None:
        w, cq = e.pending.workload, e.cq
        choices = e.assignment.choices
        assert choices is not None
        self.sequence += 1
        when = self.snapshot.now + self.cycle + self.sequence * 1e-9   # after everything running, in order
        assignment = tuple(c.assignment() for c in choices)
        view = replace(w, state=WorkloadState.RUNNING, assignment=assignment, admitted_at=when)
        minimum = self.snapshot.policy.minimum_runtime_seconds
        entry = Admitted(view, cq.name, quota_usage_of(view), not w.non_preemptible and minimum <= 0, True, when)
        self.registry.add(entry)
        self.admitted[w.ref] = (Admission(workload=w.ref, cluster_queue=cq.name, pod_sets=assignment), entry)
        self.pending.pop(w.ref, None)
        if self.afs is not None and cq.name in self.afs.queues:
            lq = (w.ref.namespace, w.local_queue)
            weight = self.afs.local_queue_weights.get(lq, 1.0)
            penalty = self.afs.entry_penalty(kueue_amounts(w, assignment))
            self.penalty[lq] = self.penalty.get(lq, 0.0) + (penalty / weight if weight > 0 else penalty)
            self.queues[cq.name].rekey(self._key)

    def _complete(self, victims: Sequence[tuple[Target, Workload]]) -> None:
        """The evictions complete: the victims leave the cache (already released), their
        queues' generations move on, a victim admitted by this plan is pending again,
        and everything set aside in their cohort trees goes back to its queue."""
        roots: set[str] = set()
        for target, preemptor in victims:
            v = target.admitted
            self.registry.remove(v)
            queue = self.queues.get(v.cq)
            if queue is not None:
                queue.generation += 1
            if v.planned:
                self.undone += 1
                self.taken_back.add((preemptor.ref, v.ref))
                del self.admitted[v.ref]
                original = self._originals[v.ref]
                p = self.pending[v.ref] = _Pending(original, self._key(original))
                if queue is not None:
                    queue.push(p)
            else:
                self.evictions[v.ref] = Eviction(workload=v.ref, reason=target.reason, for_=(preemptor.ref,),
                                                 cost=eviction_cost(v.view, self.snapshot))
            roots.add(self._root(v.cq))
        for root in sorted(roots):
            for name in self.tree_queues.get(root, ()):
                self.queues[name].requeue_inadmissible()

    @property
    def _originals(self) -> dict[ObjectRef, Workload]:
        found = getattr(self, "_by_ref", None)
        if found is None:
            found = self._by_ref = {w.ref: w for w in self.snapshot.workloads}
        return found

    # -- the answer

    def _result(self) -> GreedyResult:
        admissions = {ref: adm for ref, (adm, _) in self.admitted.items()}
        evictions = self._justified(admissions)
        for ref, p in self.pending.items():
            if ref not in admissions:
                self.reasons[ref] = p.reason or "not admitted"
        for name, queue in self.queues.items():
            if queue.cq.queueing_strategy != "StrictFIFO":
                continue
            waiting = sorted((p for p in list(queue.waiting.values()) + list(queue.inadmissible.values())),
                             key=lambda p: p.key)
            if waiting:
                head = waiting[0].workload.ref
                for p in waiting[1:]:
                    self.reasons[p.workload.ref] = f"waiting behind {head} (StrictFIFO)"
        for ref in admissions:
            self.reasons.pop(ref, None)
        decisions = Decisions(admissions=tuple(admissions[r] for r in sorted(admissions)),
                              evictions=tuple(evictions[r] for r in sorted(evictions)))
        return GreedyResult(decisions=decisions, reasons=dict(sorted(self.reasons.items())), cycles=self.cycle,
                            undone=self.undone)

    def _justified(self, admissions: Mapping[ObjectRef, Admission]) -> dict[ObjectRef, Eviction]:
        """Every eviction, naming an admission of the plan allowed to make it in the end
        state (planner.verify's rule: a Reclaimed victim's queue borrows before the plan
        or with all of its admissions made; a preemptor that borrows by its own admission
        needs borrowWithinCohort). Kueue's preemptor first, else the first admission
        allowed; where none is, the victim goes into `unsupported` (class docstring)."""
        snap, tree = self.snapshot, self.state.quota
        before = cluster_queue_usage(snap)
        with_all: dict[str, dict[FlavorResource, int]] = defaultdict(lambda: defaultdict(int))
        for key, usage in before.items():
            with_all[key].update(usage)
        for ref in admissions:
            entry = self.admitted[ref][1]
            for fr, v in entry.usage.items():
                with_all[f"cq:{entry.cq}"][fr] += v
        borrowing = self.borrowing_before | borrowing_queues(snap, tree, with_all)
        borrows: dict[ObjectRef, bool] = {}

        def reason(preemptor_ref: ObjectRef, victim: Workload) -> str | None:
            if preemptor_ref not in admissions:
                return None
            entry = self.admitted[preemptor_ref][1]
            if preemptor_ref not in borrows:
                used = before.get(f"cq:{entry.cq}", {})
                # Fair sharing lets a borrowing preemptor reclaim (canPreemptWhileBorrowing).
                borrows[preemptor_ref] = self.shares is None and any(used.get(fr, 0) + v > tree.limits(f"cq:{entry.cq}", fr)[0]
                                             for fr, v in entry.usage.items())
            return preemption_reason(snap, self._originals[preemptor_ref], victim, tree, borrowing,
                                     borrows[preemptor_ref])

        out: dict[ObjectRef, Eviction] = {}
        self.unsupported = {}
        ordered = sorted(admissions)
        for ref, e in sorted(self.evictions.items()):
            victim = self._originals[ref]
            if all(t in admissions for t in e.for_) and any(reason(t, victim) == e.reason for t in e.for_):
                out[ref] = e
                continue
            found = next((other for other in ordered if reason(other, victim) == e.reason), None)
            if found is not None:
                out[ref] = replace(e, for_=(found,))
            else:
                out[ref] = e
                self.unsupported[ref] = RECLAIM if e.reason == RECLAIMED else ALL
        return out
