"""Why one workload waits, with the numbers, and the smallest change that admits it.

`explain_workload` takes the plan of the snapshot (made by planner.cycle as `what-if`
makes it) and a way to plan a changed snapshot (the same cycle, handed in by the
caller: this layer does not import the cycle), then reads the state after the plan: the workload's place in the plan, every quota its flavor
options could charge, the room at its required topology level, the running work it
could preempt (and what protects the rest), its position in Kueue's queue order.

The changes are computed, not guessed: each candidate change (more nominal quota on
one flavor/resource of its ClusterQueue; more nodes shaped like an eligible node; both,
k nodes and their worth of quota; running work finishing) is applied to a copy of the
snapshot and that copy is planned by the same cycle, with a short time limit; a search
on the amount (the estimate first, then one below it, doubling upwards when it does not
admit: three times, or up to a ceiling where every waiting or running pod has a node of
its own) keeps the smallest amount that admits. What no such change can undo (a
resource the ClusterQueue does not cover, no eligible node, a missing queue) is said
instead. The plans of changed snapshots are kept per change (Replans), so explaining
every waiting workload of one snapshot plans each change once.

The search is bounded in work, never in clock time (a plan is a function of its input;
only how far each plan's solver gets depends on the time limit): every count that grows
with the input has a limit below (LIMITS), and where one cuts the search the explanation
says so ("stopped early: ...", `stoppedEarly` in data). So explaining one workload costs
at most MAX_PLANS plans of changed snapshots, each within the search time limit, each
with at most MAX_ADDED_NODES nodes more than the snapshot; the numbers here are counts,
never lists of pods.
Pure: no I/O; every decision comes from the snapshot and the cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from models import (ClusterQueue, Decisions, FlavorResource, Node, ObjectRef, Plan, PodSet, PodSetAssignment, ResourceFlavor,
                    ResourceGroup, Resources, Snapshot, Workload, WorkloadState, is_gpu)
from models.plan import HOSTNAME_LABEL
from planner.base.errors import InputError, VerificationError
from planner.kueue.semantics import FlavorOption, node_allows, queue_order_key
from planner.kueue.state import ClusterState, admission_blocker, amount
from planner.describe.protected import MAX_LOWER, Protected
from planner.kueue.preemption.after_plan import AfterPlan

Planner = Callable[[Snapshot], Plan]

# ---------------------------------------------------------------- the limits of the search
#
# Each caps a count that grows with the input; LIMITS names them for `explain --help` and
# docs/output.md. Explaining a workload plans at most MAX_PLANS changed snapshots, so its
# time is at most MAX_PLANS times --search-time-limit (and the work around each plan).
MAX_PLANS = 64               # changed snapshots planned for one workload: solver calls, each within the limit
MAX_PLANS_PER_CHANGE = 32    # of those, for one kind of change (its search, the search for an amount that
                             # displaces nothing, and quota+nodes' quota search down)
MAX_ADDED_NODES = 1024       # nodes one change adds (each a node object every plan of it holds)
MAX_QUOTA_TARGETS = 3        # flavors whose quota is searched
MAX_FINISHING = 64           # running workloads considered for finishing, lowest priority first
MAX_VICTIMS = MAX_LOWER      # running workloads looked at as victims, per list, in Kueue's order
MAX_DOUBLINGS = 3            # upwards from the estimate, where no ceiling is known: x2, x4, x8
MAX_CANDIDATES_SHOWN = 10    # victims shown
MAX_AHEAD_SHOWN = 5          # workloads ahead shown

LIMITS: tuple[tuple[str, int, str], ...] = (
    ("plans per workload", MAX_PLANS,
     "changed snapshots planned for one workload (each a plan within --search-time-limit)"),
    ("plans per change", MAX_PLANS_PER_CHANGE, "amounts planned for one kind of change"),
    ("nodes per change", MAX_ADDED_NODES, "nodes one change adds"),
    ("quota flavors", MAX_QUOTA_TARGETS, "flavors whose quota is searched"),
    ("workloads finishing", MAX_FINISHING, "running workloads considered for finishing"),
    ("candidate victims", MAX_VICTIMS, "running workloads looked at as victims"),
)


class UnknownWorkload(InputError):
    """The asked-for workload is not in the snapshot (exit 2)."""

    def __init__(self, message: str):
        super().__init__(message, field="WORKLOAD")


@dataclass(frozen=True)
class QuotaFact:
    flavor: str
    resource: str
    nominal: int
    borrowing_limit: int | None
    used: int            # by the ClusterQueue after the plan
    available: int       # what the ClusterQueue could still take (nominal left and borrowable)
    needs: int           # what the workload would charge (minimum counts)
    own: int = 0         # the part of `available` that is its own nominal quota left; the rest the cohort lends

    @property
    def short(self) -> bool:
        return self.needs > self.available


@dataclass(frozen=True)
class CapacityFact:
    pod_set: str
    flavors: tuple[str, ...]
    fits: bool
    needed: int          # pods
    room: int            # pods the best place (the best domain at `level`, or all eligible nodes) takes
    level: str | None    # the required level, when the failure is about one domain
    reason: str


@dataclass(frozen=True)
class VictimFact:
    workload: ObjectRef
    cluster_queue: str
    priority: int
    allowed: bool        # the preemption rules allow evicting it for this workload
    why: str             # what protects it, or "allowed" when it is not protected


@dataclass(frozen=True)
class AheadFact:
    workload: ObjectRef
    priority: int
    state: str           # admitted | waiting


@dataclass(frozen=True)
class Displaced:
    """What a change costs others: a workload the current plan serves that the changed
    snapshot's plan does not (`how`: "evicted", with the eviction's preemption cost, or
    "not admitted": the current plan admits it, the changed one leaves it waiting)."""

    workload: ObjectRef
    priority: int
    how: str
    volume: str          # what it runs: "8 GPUs", or cores for CPU-only work
    cost: float = 0.0    # the eviction's preemption cost (0 when an admission is withheld)


@dataclass(frozen=True)
class EvictionFact:
    """Why the plan evicts the workload: Kueue's rule that allows it, who needs the room,
    and what the eviction throws away."""

    reason: str                        # Preempted | Reclaimed | PodsReadyTimeout | Deactivated
    preemptors: tuple[ObjectRef, ...]
    rule: str
    cost: float


@dataclass(frozen=True)
class Change:
    """One kind of change and the search on its amount.

    kind "quota": `quota` (flavor, resource, amount) more nominal quota in `cluster_queue`, the
    amounts `amount` pods' worth of the workload's request; kind "nodes": `amount` more nodes
    shaped like `template` (its labels and allocatable); kind "quota+nodes": `amount` more nodes
    and `quota` (their worth, or less: `quota_tried` in the workload's pods' worth); kind "finishing": the first `amount` of
    the running workloads on flavors it could use, lowest priority first, finish (`finishing`). `amount` is the smallest found that
    admits (None: none tried admits); `tried` maps each amount planned to whether it admitted.
    """

    kind: str
    cluster_queue: str
    quota: tuple[tuple[str, str, int], ...] = ()
    template: str = ""
    nodes: int = 0
    finishing: tuple[ObjectRef, ...] = ()
    quota_tried: tuple[tuple[int, bool], ...] = ()   # quota+nodes: pods' worth of quota tried with the nodes
    amount: int | None = None
    tried: tuple[tuple[int, bool], ...] = ()
    # What the changed snapshot's plan no longer serves (at `amount`), and, when a larger
    # amount was preferred because it displaces nothing, the smallest amount that admits.
    displaces: tuple[Displaced, ...] = ()
    displacing_amount: int | None = None
    stopped: str = ""    # what limit cut this change's search, and where ("": it ran its course)

    @property
    def cost(self) -> float:
        """The summed preemption cost of the evictions this change brings."""
        return sum(d.cost for d in self.displaces)


@dataclass(frozen=True)
class Explanation:
    workload: ObjectRef
    cluster_queue: str
    local_queue: str
    priority: int
    state: str                         # admitted | running | evicted | waiting | external
    reason: str                        # the plan's pending reason ("" when served)
    plan_status: str
    assignment: tuple[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, int], ...]], ...] = ()
    local_position: tuple[int, int] = (0, 0)      # 1-based among the LocalQueue's waiting workloads; of how many
    cluster_position: tuple[int, int] = (0, 0)
    ahead: tuple[AheadFact, ...] = ()
    quota: tuple[QuotaFact, ...] = ()
    capacity: tuple[CapacityFact, ...] = ()
    victims: tuple[VictimFact, ...] = ()
    changes: tuple[Change, ...] = ()
    search_time_limit: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    blocker: str = ""                  # what no change of quota or nodes undoes (then quota is not what is short)
    eviction: EvictionFact | None = None
    plans: int = 0                     # changed snapshots planned for it (at most MAX_PLANS)
    victims_found: int = 0             # candidate victims found (`victims` shows the first few)
    stopped: tuple[str, ...] = ()      # each limit that cut the search, said plainly

    @property
    def served(self) -> bool:
        return self.state in ("admitted", "running")

    def smallest(self) -> Change | None:
        """The first change found that admits the workload and displaces nothing (quota, then
        nodes, then both, then work finishing); else the first that admits at all."""
        admitting = [c for c in self.changes if c.amount is not None]
        return next((c for c in admitting if not c.displaces), admitting[0] if admitting else None)


# ---------------------------------------------------------------- finding the workload

def find_workload(snapshot: Snapshot, text: str) -> Workload:
    """`namespace/name` or `Kind/namespace/name` (as ObjectRef prints) -> the workload."""
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise UnknownWorkload(f"workload {text!r}: expected NAMESPACE/NAME or KIND/NAMESPACE/NAME")
    matches = [w for w in snapshot.workloads
               if (w.ref.namespace, w.ref.name) == tuple(parts[-2:])
               and (len(parts) == 2 or w.ref.kind.lower() == parts[0].lower())]
    if not matches:
        groups = _groups_of(snapshot, parts[-2], parts[-1])
        if groups:   # a LeaderWorkerSet is planned as one workload per group, NAME-0, NAME-1, ...
            shown = ", ".join(groups[:4]) + (f" +{len(groups) - 4} more" if len(groups) > 4 else "")
            raise UnknownWorkload(f"workload {text} is not in the snapshot; its groups are: {shown} "
                                  "(a LeaderWorkerSet is planned one group at a time)")
        raise UnknownWorkload(f"workload {text} is not in the snapshot")
    if len(matches) > 1:
        kinds = ", ".join(sorted(str(w.ref) for w in matches))
        raise UnknownWorkload(f"workload {text} is ambiguous ({kinds}): name it as KIND/NAMESPACE/NAME")
    return matches[0]


def _groups_of(snapshot: Snapshot, namespace: str, name: str) -> list[str]:
    """`namespace/NAME-0`, `namespace/NAME-1`, ...: the workloads named as groups of `name`, in index order."""
    found = [(int(w.ref.name[len(name) + 1:]), f"{w.ref.namespace}/{w.ref.name}") for w in snapshot.workloads
             if w.ref.namespace == namespace and w.ref.name.startswith(name + "-")
             and w.ref.name[len(name) + 1:].isdigit()]
    return [text for _, text in sorted(found)]


def served(plan: Plan, snapshot: Snapshot, ref: ObjectRef) -> bool:
    """Admitted by the plan, or running and not evicted by it."""
    if any(a.workload == ref for a in plan.admissions):
        return True
    if any(e.workload == ref for e in plan.evictions):
        return False
    return any(w.ref == ref and w.state is WorkloadState.RUNNING for w in snapshot.workloads)


# ---------------------------------------------------------------- the explanation

def explain_workload(snapshot: Snapshot, w: Workload, plan: Plan, replan: Planner | Replans,
                     search_time_limit: float = 0.0, first_only: bool = False) -> Explanation:
    """Explain `w` in `plan` (of `snapshot`); `replan` plans a changed snapshot (the cycle, with
    the short `search_time_limit` the explanation reports), or is a Replans shared by the
    explanations of one snapshot. `first_only`: stop at the first kind of change that admits it
    (the smallest change is the same; the kinds after it are not tried)."""
    state_name = _state_of(plan, w)
    base = Explanation(
        workload=w.ref, cluster_queue=w.cluster_queue or "", local_queue=w.local_queue, priority=w.priority,
        state=state_name, reason=next((p.reason for p in plan.pending if p.workload == w.ref), ""),
        plan_status=f"{plan.solver.method} {plan.solver.status}", assignment=_assignment(plan, w),
        search_time_limit=search_time_limit)
    local, cluster, ahead = _positions(snapshot, plan, w)
    base = replace(base, local_position=local, cluster_position=cluster, ahead=ahead,
                   eviction=_eviction_fact(snapshot, plan, w))
    if base.served:
        return base
    if w.state is WorkloadState.EXTERNAL:
        return replace(base, state="external",
                       notes=("it was unsuspended outside Stowplan: its pods run unmanaged, no change is proposed",))
    cq = snapshot.cluster_queues.get(w.cluster_queue or "")
    if cq is None:
        return replace(base, notes=("its ClusterQueue is unknown: no change to quota or nodes can admit it",))
    decisions = Decisions(plan.admissions, plan.evictions, plan.migrations)
    state = ClusterState.after(snapshot, decisions)
    quota = _quota_facts(state, cq, w)
    capacity = _capacity_facts(state, cq, w)
    victims, victims_found, victims_cut = _victim_facts(snapshot, decisions, state, w)
    replans = replan if isinstance(replan, Replans) else Replans(replan)
    tries = Tries(replans, w.ref)
    if victims_cut:
        tries.stopped.append(f"candidate victims: the first {MAX_VICTIMS:,} running workloads in Kueue's order "
                             f"were looked at, more may be there (limit: {MAX_VICTIMS:,} candidate victims)")
    # What no change of quota, nodes or work finishing can undo: Stowplan's reading of the workload
    # (a LocalQueue or ClusterQueue missing or inactive, a namespace not selected), or a pod set no
    # flavor of its ClusterQueue can take (a resource not covered, no flavor's nodes match it).
    blocker = admission_blocker(snapshot, w) or next(
        (f"pod set {ps.name}: {found}" for ps in w.pod_sets
         if isinstance(found := state.options(cq, ps), str)), None) or _no_node(snapshot, state, cq, w)
    changes, notes = ([], [f"no change of quota, nodes or work finishing can admit it: {blocker}"]) \
        if blocker is not None else \
        _changes(snapshot, plan, cq, w, quota, capacity, tries, _waiting_ahead(snapshot, plan, w), first_only)
    return replace(base, quota=tuple(quota), capacity=tuple(capacity), victims=tuple(victims),
                   victims_found=victims_found, changes=tuple(changes), notes=tuple(notes), blocker=blocker or "",
                   plans=len(tries.keys), stopped=tuple(tries.stopped))


def _eviction_fact(snapshot: Snapshot, plan: Plan, w: Workload) -> EvictionFact | None:
    """When the plan evicts `w`: who needs its room, the preemption rule of the preemptor's
    ClusterQueue that allows it (Kueue's spec.preemption), and the eviction's cost."""
    eviction = next((e for e in plan.evictions if e.workload == w.ref), None)
    if eviction is None:
        return None
    by_ref = {v.ref: v for v in snapshot.workloads}
    admitted = {a.workload: a.cluster_queue for a in plan.admissions}
    rule = eviction.message or eviction.reason
    for preemptor in eviction.for_:
        queue = admitted.get(preemptor) or (by_ref[preemptor].cluster_queue if preemptor in by_ref else None)
        cq = snapshot.cluster_queues.get(queue or "")
        theirs = by_ref[preemptor].priority if preemptor in by_ref else None
        if cq is None:
            continue
        if eviction.reason == "Preempted":
            rule = (f"withinClusterQueue: {cq.preemption.within_cluster_queue} of ClusterQueue {cq.name} "
                    f"(priority {theirs} preempts priority {w.priority})")
        elif eviction.reason == "Reclaimed":
            rule = (f"reclaimWithinCohort: {cq.preemption.reclaim_within_cohort} of ClusterQueue {cq.name} "
                    f"(ClusterQueue {w.cluster_queue} borrows from the cohort; priority {theirs} reclaims from "
                    f"priority {w.priority})")
        break
    return EvictionFact(eviction.reason, tuple(eviction.for_), rule, float(eviction.cost))


def _no_node(snapshot: Snapshot, state: ClusterState, cq: ClusterQueue, w: Workload) -> str | None:
    """Why a pod set has no eligible node at all (nodes are added only like an eligible one), or None."""
    for ps in w.pod_sets:
        flavors = [[snapshot.flavors[f] for f in option.flavors] for option in _options(state, cq, ps)]
        if not any(node_allows(n, fs, ps) and _pods_on(n.allocatable, ps) > 0
                   for fs in flavors for n in snapshot.nodes if n.ready):
            return (f"pod set {ps.name}: no ready node is eligible for it with any flavor of ClusterQueue {cq.name} "
                    "(the flavors' labels, its node selector and tolerations, a pod within a node's allocatable), "
                    "so there is no node to add more of")
    return None


def _state_of(plan: Plan, w: Workload) -> str:
    if any(a.workload == w.ref for a in plan.admissions):
        return "admitted"
    if any(e.workload == w.ref for e in plan.evictions):
        return "evicted"
    return "running" if w.state is WorkloadState.RUNNING else "waiting"


def _assignment(plan: Plan, w: Workload) -> tuple[tuple[str, tuple[tuple[str, str], ...],
                                                        tuple[tuple[str, int], ...]], ...]:
    pod_sets = next((a.pod_sets for a in plan.admissions if a.workload == w.ref), None)
    if pod_sets is None and w.state is WorkloadState.RUNNING:
        pod_sets = w.assignment
    return tuple((psa.name, tuple(sorted(psa.flavors.items())), tuple(sorted(psa.pods_per_node().items())))
                 for psa in pod_sets or ())


def _positions(snapshot: Snapshot, plan: Plan,
               w: Workload) -> tuple[tuple[int, int], tuple[int, int], tuple[AheadFact, ...]]:
    """Kueue's order among the workloads waiting before the plan (its own LocalQueue, its ClusterQueue)."""
    admitted = {a.workload for a in plan.admissions}
    evicted = {e.workload for e in plan.evictions}
    waiting = [v for v in snapshot.workloads
               if (v.state is WorkloadState.PENDING or v.ref in evicted or v.ref == w.ref)
               and v.cluster_queue == w.cluster_queue]
    waiting.sort(key=lambda v: queue_order_key(v, snapshot))
    local = [v for v in waiting if v.ref.namespace == w.ref.namespace and v.local_queue == w.local_queue]
    in_cq = [v.ref for v in waiting]
    in_lq = [v.ref for v in local]
    ahead = [AheadFact(v.ref, v.priority, "admitted" if v.ref in admitted else "waiting")
             for v in waiting[:in_cq.index(w.ref)]]
    return ((in_lq.index(w.ref) + 1, len(in_lq)), (in_cq.index(w.ref) + 1, len(in_cq)),
            tuple(ahead[:MAX_AHEAD_SHOWN]))


def _waiting_ahead(snapshot: Snapshot, plan: Plan, w: Workload) -> list[Workload]:
    """The workloads of its ClusterQueue before it in Kueue's order that the plan leaves waiting:
    more quota goes to them first."""
    admitted = {a.workload for a in plan.admissions}
    mine = queue_order_key(w, snapshot)
    return [v for v in snapshot.workloads
            if v.cluster_queue == w.cluster_queue and v.state is WorkloadState.PENDING and v.ref != w.ref
            and v.ref not in admitted and not v.blocked_reason and queue_order_key(v, snapshot) < mine]


def _options(state: ClusterState, cq: ClusterQueue, ps: PodSet) -> list[FlavorOption]:
    options = state.options(cq, ps)
    return [] if isinstance(options, str) else options


def _quota_facts(state: ClusterState, cq: ClusterQueue, w: Workload) -> list[QuotaFact]:
    needs: dict[FlavorResource, int] = {}
    for ps in w.pod_sets:
        for option in _options(state, cq, ps):
            for resource, flavor in option.by_resource.items():
                per_pod = ps.request.get(resource)
                if per_pod > 0:
                    fr = (flavor, resource)
                    needs[fr] = max(needs.get(fr, 0), per_pod * ps.minimum)
    facts = []
    for fr in sorted(needs, key=lambda fr: (not is_gpu(fr[1]), fr)):
        flavor, resource = fr
        nominal, borrowing, _ = state.quota.limits(f"cq:{cq.name}", fr)
        available = max(0, state.available(cq.name, fr)) if state.lists(cq.name, fr) else 0
        used = state.used(cq.name, fr)
        own = min(available, max(0, nominal - used))
        facts.append(QuotaFact(flavor, resource, nominal, borrowing, used, available, needs[fr], own))
    return facts


def _capacity_facts(state: ClusterState, cq: ClusterQueue, w: Workload) -> list[CapacityFact]:
    facts = []
    for ps in w.pod_sets:
        for option in _options(state, cq, ps)[:1]:
            where = state.place(option, ps, ps.minimum)
            facts.append(CapacityFact(ps.name, option.flavors, where.ok, where.needed or ps.minimum,
                                      ps.minimum if where.ok else where.fit, where.level,
                                      where.reason))
    return facts


def _victim_facts(snapshot: Snapshot, decisions: Decisions, state: ClusterState,
                  w: Workload) -> tuple[list[VictimFact], int, bool]:
    """The candidate victims shown (MAX_CANDIDATES_SHOWN), how many were found, and whether a
    list of them was cut at MAX_VICTIMS. The allowed ones are greedy's search's candidates
    (planner.kueue.after_plan: the victims greedy would pick come from them, in this
    order); then lower-priority work the policies or that search leave alone, and why."""
    candidates = AfterPlan(snapshot, decisions, state).candidates(w)
    allowed = [a.view for a in candidates[:MAX_VICTIMS]]
    gone = {e.workload for e in decisions.evictions} | {m.workload for m in decisions.migrations}
    protection = Protected(state, gone, MAX_VICTIMS)
    lower = protection.lower(w)
    seen = {v.ref for v in allowed}
    protected = [v for v in lower if v.ref not in seen]
    facts = [VictimFact(v.ref, v.cluster_queue or "", v.priority, True, "allowed") for v in allowed]
    for v in protected[:max(0, MAX_CANDIDATES_SHOWN - len(facts))]:   # why_not only for those shown
        facts.append(VictimFact(v.ref, v.cluster_queue or "", v.priority, False, protection.why_not(w, v)))
    cut = len(candidates) > MAX_VICTIMS or len(lower) >= MAX_VICTIMS
    return facts[:MAX_CANDIDATES_SHOWN], len(allowed) + len(protected), cut


# ---------------------------------------------------------------- the changes, by re-planning

def with_more_quota(snapshot: Snapshot, cluster_queue: str,
                    amounts: Iterable[tuple[str, str, int]]) -> Snapshot:
    """`snapshot` with more nominal quota in `cluster_queue`: each (flavor, resource, amount)."""
    cq = snapshot.cluster_queues[cluster_queue]
    more = {(flavor, resource): amount for flavor, resource, amount in amounts}

    def group(g: ResourceGroup) -> ResourceGroup:
        return replace(g, flavors=tuple(
            replace(fq, resources={r: replace(q, nominal=q.nominal + more.get((fq.flavor, r), 0))
                                   for r, q in fq.resources.items()})
            for fq in g.flavors))

    changed = replace(cq, resource_groups=tuple(group(g) for g in cq.resource_groups))
    return replace(snapshot, cluster_queues={**snapshot.cluster_queues, cluster_queue: changed})


def with_more_nodes(snapshot: Snapshot, template: str, count: int) -> Snapshot:
    """`snapshot` with `count` more nodes shaped like `template` (same labels, so the same topology
    domains, and the same allocatable), named `<template>-more-<i>`."""
    node = next(n for n in snapshot.nodes if n.name == template)
    taken = {n.name for n in snapshot.nodes}
    added: list[Node] = []
    i = 0
    while len(added) < count:
        i += 1
        name = f"{template}-more-{i}"
        if name in taken:
            continue
        labels = dict(node.labels)
        if HOSTNAME_LABEL in labels:
            labels[HOSTNAME_LABEL] = name
        added.append(Node(name=name, labels=labels, allocatable=node.allocatable, taints=node.taints))
    return replace(snapshot, nodes=snapshot.nodes + tuple(added))


class Replans:
    """Plans changed snapshots of one base snapshot, each change once: a change is named by a
    key (its kind and amounts), and what the plan of that changed snapshot serves is kept, so
    the explanations of many workloads of one snapshot (`explain --all`) share their plans.
    A plan of a changed snapshot is the cycle's own (`replan`), a function of that snapshot."""

    def __init__(self, replan: Planner):
        self.replan = replan
        self.served: dict[tuple[object, ...], frozenset[ObjectRef]] = {}
        self.evicted: dict[tuple[object, ...], dict[ObjectRef, float]] = {}   # key -> evicted -> cost
        self.planned = 0

    def admits(self, key: tuple[object, ...], change: Callable[[], Snapshot], ref: ObjectRef) -> bool:
        if key not in self.served:
            changed = change()
            self.planned += 1
            try:
                plan = self.replan(changed)
            except VerificationError:   # no plan of the changed snapshot passes the rules: none served
                self.served[key] = frozenset()
                self.evicted[key] = {}
            else:
                if undecided(plan):
                    # out of time before any plan (the cycle's "nothing changes"): that decides
                    # nothing, so it shows nothing served; read as served, it would keep every
                    # running workload, the ones the plan evicts included, and "admit" them
                    self.served[key] = frozenset()
                    self.evicted[key] = {}
                    return False
                evicted = {e.workload: e.cost for e in plan.evictions}
                self.evicted[key] = evicted
                self.served[key] = frozenset(
                    {a.workload for a in plan.admissions}
                    | {v.ref for v in changed.workloads if v.state is WorkloadState.RUNNING and v.ref not in evicted})
        return ref in self.served[key]

    def displaced(self, key: tuple[object, ...], snapshot: Snapshot, base: frozenset[ObjectRef],
                  ref: ObjectRef) -> tuple[Displaced, ...]:
        """What the plan of change `key` no longer serves of `base` (what the current plan
        serves), `ref` and the work a "finishing" change lets finish aside; evictions first."""
        if key not in self.served:
            return ()
        finished = set(key[1]) if key and key[0] == "finishing" and isinstance(key[1], tuple) else set()
        lost = base - self.served[key] - finished - {ref}
        by_ref = {w.ref: w for w in snapshot.workloads}
        evicted = self.evicted.get(key, {})
        out = [Displaced(r, by_ref[r].priority, "evicted" if r in evicted else "not admitted",
                         _volume(by_ref[r]), float(evicted.get(r, 0.0)))
               for r in lost if r in by_ref]
        return tuple(sorted(out, key=lambda d: (d.how != "evicted", -d.priority, str(d.workload))))


def undecided(plan: Plan) -> bool:
    """The cycle's plan that changes nothing because it ran out of time (planner.cycle's
    nothing_new: status fallback, "nothing changes this cycle")."""
    return plan.solver.status == "fallback" and plan.solver.message.endswith("nothing changes this cycle") \
        and not plan.admissions and not plan.evictions


def _volume(w: Workload) -> str:
    """What `w` runs at full size, for people: its GPUs, or its cores when it asks for none."""
    gpus = sum(v * ps.count for ps in w.pod_sets for r, v in ps.request.items() if is_gpu(r))
    if gpus:
        return f"{gpus} GPU{'' if gpus == 1 else 's'}"
    return amount("cpu", sum(ps.request.get("cpu") * ps.count for ps in w.pod_sets)) + " cpu"


def served_by(plan: Plan, snapshot: Snapshot) -> frozenset[ObjectRef]:
    """What `plan` serves: its admissions and the running work it does not evict."""
    evicted = {e.workload for e in plan.evictions}
    return frozenset({a.workload for a in plan.admissions}
                     | {v.ref for v in snapshot.workloads if v.state is WorkloadState.RUNNING and v.ref not in evicted})


class LimitReached(Exception):
    """A limit of the search is reached: the search stops where it is; `text` says which."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


Key = tuple[object, ...]
ChangeOf = Callable[[int], tuple[Key, Callable[[], Snapshot]]]   # amount -> (the change's key, the changed snapshot)


class Tries:
    """The changed snapshots one workload's explanation plans, counted against MAX_PLANS and,
    per kind of change (`begin`), MAX_PLANS_PER_CHANGE. A change counts once, whether its plan
    is new or kept by Replans from another workload's search, so what a workload is told does
    not depend on which were explained before it. `stopped` collects what the limits cut."""

    def __init__(self, replans: Replans, ref: ObjectRef):
        self.replans, self.ref = replans, ref
        self.keys: set[Key] = set()
        self.of_change: set[Key] = set()
        self.stopped: list[str] = []

    def begin(self) -> None:
        """A new kind of change: its own count of plans starts."""
        self.of_change = set()

    @property
    def spent(self) -> bool:
        return len(self.keys) >= MAX_PLANS

    def admits(self, key: Key, change: Callable[[], Snapshot]) -> bool:
        """Does the plan of change `key` serve the workload? Raises LimitReached instead of
        planning one change more than a limit allows."""
        if key not in self.of_change:
            if key not in self.keys and len(self.keys) >= MAX_PLANS:
                raise LimitReached(f"{len(self.keys):,} changed snapshots planned for this workload "
                                   f"(limit: {MAX_PLANS:,} plans per workload)")
            if len(self.of_change) >= MAX_PLANS_PER_CHANGE:
                raise LimitReached(f"{len(self.of_change):,} amounts planned for this change "
                                   f"(limit: {MAX_PLANS_PER_CHANGE:,} plans per change)")
            self.keys.add(key)
            self.of_change.add(key)
        return self.replans.admits(key, change, self.ref)

    def displaced(self, key: Key, snapshot: Snapshot, base: frozenset[ObjectRef]) -> tuple[Displaced, ...]:
        return self.replans.displaced(key, snapshot, base, self.ref)


def nodes_cut(cap: int) -> str:
    return f"no amount above {cap:,} nodes planned (limit: {MAX_ADDED_NODES:,} nodes per change)"


def _settle(found: int | None, tried: list[tuple[int, bool]], change: ChangeOf, snapshot: Snapshot,
            base: frozenset[ObjectRef], tries: Tries, ceiling: int | None = None, cap: int | None = None
            ) -> tuple[int | None, list[tuple[int, bool]], tuple[Displaced, ...], int | None, str]:
    """Prefer a change that displaces nothing: when the smallest amount `found` that admits the
    workload displaces others, look upwards (doubling, MAX_DOUBLINGS times or up to `ceiling`,
    never above `cap`) for an amount that admits it and displaces nothing, then bisect down to
    the smallest such. Returns the amount chosen, the amounts tried, what it displaces, the
    smaller displacing amount when a clean one was preferred, and what limit cut the search
    for a clean one ("" when none did)."""
    if found is None:
        return None, tried, (), None, ""
    effects = tries.displaced(change(found)[0], snapshot, base)
    if not effects:
        return found, tried, (), None, ""
    seen = dict(tried)
    clean_at: int | None = None

    def clean(k: int) -> bool:
        key, make = change(k)
        ok = tries.admits(key, make)
        seen[k] = ok
        return ok and not tries.displaced(key, snapshot, base)

    lo, hi = found, found
    try:
        for _ in range(MAX_DOUBLINGS):
            wanted = hi * 2 if ceiling is None else min(ceiling, hi * 2)
            nxt = wanted if cap is None else min(cap, wanted)
            if nxt <= hi:
                if wanted > hi:   # the cap, not the ceiling, ends it
                    return found, sorted(seen.items()), effects, None, \
                        nodes_cut(hi) + ", looking for an amount that displaces nothing"
                break
            hi = nxt
            if clean(hi):
                clean_at = hi
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if clean(mid):
                        hi = clean_at = mid
                    else:
                        lo = mid
                return hi, sorted(seen.items()), (), found, ""
            lo = hi
    except LimitReached as limit:
        text = limit.text + ", looking for an amount that displaces nothing"
        if clean_at is not None:
            return clean_at, sorted(seen.items()), (), found, text
        return found, sorted(seen.items()), effects, None, text
    return found, sorted(seen.items()), effects, None, ""


def _stops(*texts: str) -> str:
    return "; then ".join(t for t in texts if t)


def _changes(snapshot: Snapshot, plan: Plan, cq: ClusterQueue, w: Workload, quota: list[QuotaFact],
             capacity: list[CapacityFact], tries: Tries, ahead: list[Workload],
             first_only: bool) -> tuple[list[Change], list[str]]:
    """The changes tried and, when none admits, why (notes). What the limits cut goes to
    `tries.stopped`."""
    out: list[Change] = []
    notes: list[str] = []
    base = served_by(plan, snapshot)
    skipped: list[str] = []   # kinds of change not tried: the workload's plans were spent

    def done() -> bool:   # a change that admits it and displaces nothing ends a first-only search
        return first_only and any(c.amount is not None and not c.displaces for c in out)

    def may_try(kind: str) -> bool:
        if done():
            return False
        if tries.spent:
            skipped.append(kind)
            return False
        tries.begin()
        return True

    targets = _quota_targets(cq, quota)
    if len(targets) > MAX_QUOTA_TARGETS and not done():
        tries.stopped.append(f"[quota] {MAX_QUOTA_TARGETS} of {len(targets)} flavors searched "
                             f"(limit: {MAX_QUOTA_TARGETS} quota flavors)")
    for option in targets[:MAX_QUOTA_TARGETS]:
        units = {(f.flavor, f.resource): _unit(w, f.resource) for f in option}
        # The estimates: what it lacks; and that plus what the waiting work ahead of it would take first.
        first = max(1, max(math.ceil(max(0, f.needs - f.available) / units[(f.flavor, f.resource)]) for f in option))
        hint = max(1, max(math.ceil((max(0, f.needs - f.available) + _needs_of(ahead, f.resource))
                                    / units[(f.flavor, f.resource)]) for f in option))

        def amounts(k: int, option: list[QuotaFact] = option,
                    units: dict[FlavorResource, int] = units) -> tuple[tuple[str, str, int], ...]:
            return tuple((f.flavor, f.resource, k * units[(f.flavor, f.resource)]) for f in option)

        def more_quota(k: int, amounts: Callable[[int], tuple[tuple[str, str, int], ...]] = amounts
                       ) -> tuple[Key, Callable[[], Snapshot]]:
            return ("quota", cq.name, amounts(k)), lambda: with_more_quota(snapshot, cq.name, amounts(k))

        if not may_try("quota"):
            continue
        smallest, tried, stopped = _search(first, more_quota, tries, hint=hint)
        smallest, tried, displaces, smaller, still = _settle(smallest, tried, more_quota, snapshot, base, tries)
        if tried:
            out.append(Change("quota", cq.name, quota=amounts(smallest if smallest is not None else max(tried)[0]),
                              amount=smallest, tried=tuple(tried), displaces=displaces, displacing_amount=smaller,
                              stopped=_stops(stopped, still)))
    template = _template(snapshot, plan, cq, w)
    if template is None and not done():
        notes.append("no node is eligible for it (its flavors' labels, its node selector and tolerations, "
                     "and a pod's request within a node's allocatable): no nodes to add like one")
    if template is not None and may_try("nodes"):
        node, per_node = template
        short = sum(max(0, c.needed - c.room) for c in capacity) or sum(ps.minimum for ps in w.pod_sets)
        first = max(1, math.ceil(short / max(1, per_node)))

        def more_nodes(k: int) -> tuple[Key, Callable[[], Snapshot]]:
            return ("nodes", node.name, k), lambda: with_more_nodes(snapshot, node.name, k)

        smallest, tried, stopped = _search(first, more_nodes, tries, cap=MAX_ADDED_NODES)
        smallest, tried, displaces, smaller, still = _settle(smallest, tried, more_nodes, snapshot, base, tries,
                                                             cap=MAX_ADDED_NODES)
        out.append(Change("nodes", cq.name, template=node.name, nodes=smallest or 0, amount=smallest,
                          tried=tuple(tried), displaces=displaces, displacing_amount=smaller,
                          stopped=_stops(stopped, still)))
        if not any(c.amount is not None and not c.displaces for c in out) and may_try("quota+nodes"):
            change, note = _both(snapshot, plan, cq, w, quota, node, first, tries)
            # the GPUs' worth was not enough: every resource's worth
            if change.amount is None and may_try("quota+nodes (every resource's worth)"):
                wider, wide_note = _both(snapshot, plan, cq, w, quota, node, first, tries, wide=True)
                if len(wider.quota) > len(change.quota):
                    change, note = wider, wide_note
            out.append(change)
            notes += note
    running = _finishing(snapshot, plan, quota)
    finishing = running[:MAX_FINISHING]
    if finishing and may_try("finishing"):
        if len(running) > len(finishing):
            tries.stopped.append(f"[finishing] the first {len(finishing)} of {len(running):,} running workloads on "
                                 f"its flavors considered (limit: {MAX_FINISHING} workloads finishing)")
        gpu_short = max((f.needs - f.available for f in quota if f.short and is_gpu(f.resource)), default=0)
        freed, first = 0, len(finishing)
        for k, v in enumerate(finishing, 1):   # the estimate: the first prefix that frees its GPU shortfall
            freed += sum(quota_of(v).get(f.resource) for f in quota[:1]) if quota else 0
            if freed >= gpu_short:
                first = k
                break

        def gone(k: int) -> tuple[Key, Callable[[], Snapshot]]:
            prefix = finishing[:min(k, len(finishing))]
            return ("finishing", tuple(v.ref for v in prefix)), lambda: without(snapshot, prefix)

        smallest, tried, stopped = _search(first, gone, tries, ceiling=len(finishing))
        smallest, tried, displaces, smaller, still = _settle(smallest, tried, gone, snapshot, base, tries,
                                                             ceiling=len(finishing))
        if tried:
            out.append(Change("finishing", cq.name, finishing=tuple(v.ref for v in finishing[:smallest or 0]),
                              amount=smallest, tried=tuple(tried), displaces=displaces, displacing_amount=smaller,
                              stopped=_stops(stopped, still)))
    tries.stopped += [f"[{c.kind}] {c.stopped}" for c in out if c.stopped]
    if skipped:
        tries.stopped.append(f"{len(tries.keys):,} changed snapshots planned (limit: {MAX_PLANS:,} plans per "
                             f"workload); not tried: {', '.join(skipped)}")
    if not any(c.amount is not None for c in out) and not notes:
        notes.append("none of the changes tried admits it")
    return out, notes


def _both(snapshot: Snapshot, plan: Plan, cq: ClusterQueue, w: Workload, quota: list[QuotaFact], node: Node,
          first: int, tries: Tries, wide: bool = False) -> tuple[Change, list[str]]:
    """k more nodes like `node` and their worth of nominal quota (k times the node's allocatable of
    the GPUs and of what is short, on the flavor the workload would use) together: the search on k
    goes up to a ceiling where every waiting workload's pods have a node of their own and their
    requests quota, so nothing waiting can take all of it first (never above MAX_ADDED_NODES).
    Then the quota is searched again down in the workload's pods' worth, with those nodes there.
    `wide`: the nodes' worth of every resource the workload requests (cpu and memory too: the
    others admitted with the GPUs use them)."""
    # The quota of the flavors the node's flavor option gives each resource: its GPUs and what is short.
    state = ClusterState.after(snapshot, Decisions(plan.admissions, plan.evictions))
    options = _options(state, cq, main_pod_set(w))
    flavor_of = dict(options[0].by_resource) if options else {}
    option = [f for f in quota if flavor_of.get(f.resource) == f.flavor and (wide or f.short or is_gpu(f.resource))
              and node.allocatable.get(f.resource) > 0]
    per_node = {(f.flavor, f.resource): node.allocatable.get(f.resource) for f in option}

    def worth(k: int) -> tuple[tuple[str, str, int], ...]:
        return tuple((f.flavor, f.resource, k * per_node[(f.flavor, f.resource)]) for f in option)

    def both(k: int, quota_of: Callable[[int], tuple[tuple[str, str, int], ...]] = worth,
             q: int | None = None) -> tuple[Key, Callable[[], Snapshot]]:
        amounts = quota_of(k if q is None else q)
        return (("quota+nodes", cq.name, amounts, node.name, k),
                lambda: with_more_nodes(with_more_quota(snapshot, cq.name, amounts), node.name, k))

    # Every workload that could take the room first: waiting, or running (a plan may evict it and
    # it waits again), unless it can never be admitted. Counted, never listed pod by pod.
    others = [v for v in snapshot.workloads if v.state in (WorkloadState.PENDING, WorkloadState.RUNNING)
              and not v.blocked_reason]
    pods = sum(ps.count for v in others for ps in v.pod_sets)
    demand = [math.ceil(sum(ps.request.get(f.resource) * ps.count for v in others for ps in v.pod_sets)
                        / per_node[(f.flavor, f.resource)]) for f in option]
    ceiling = max(first, pods, *demand)
    smallest, tried, stopped = _search(first, both, tries, ceiling=ceiling, cap=MAX_ADDED_NODES)
    base = served_by(plan, snapshot)
    smallest, tried, _, smaller, still = _settle(smallest, tried, both, snapshot, base, tries, ceiling=ceiling,
                                                 cap=MAX_ADDED_NODES)
    notes = []
    amounts = worth(smallest if smallest is not None else min(ceiling, MAX_ADDED_NODES))
    quota_tried: list[tuple[int, bool]] = []
    down = ""
    if smallest is None and not stopped:
        notes.append(f"even {ceiling} more nodes like {node.name} (a node for each of the {pods} pods of the "
                     f"workloads waiting or running) with their worth of nominal quota do not admit it")
    elif smallest is not None and option:
        main = main_pod_set(w)
        unit = {f.resource: main.request.get(f.resource) or _unit(w, f.resource) for f in option}

        def amounts_of(j: int) -> tuple[tuple[str, str, int], ...]:
            return tuple((f.flavor, f.resource, j * unit[f.resource]) for f in option)

        estimate = max(1, max(math.ceil(max(0, f.needs - f.available) / unit[f.resource]) for f in option))
        units = max(1, max(math.ceil(a / unit[r]) for _, r, a in amounts))

        def fewer(j: int) -> tuple[Key, Callable[[], Snapshot]]:
            return both(smallest or 0, amounts_of, j)

        least, quota_tried, down = _search(min(estimate, units), fewer, tries, ceiling=units)
        down = down and down + ", searching the quota down"
        if least is not None and sum(a for _, _, a in amounts_of(least)) < sum(a for _, _, a in amounts):
            amounts = amounts_of(least)
    displaces: tuple[Displaced, ...] = ()
    if smallest is not None:
        displaces = tries.displaced(("quota+nodes", cq.name, amounts, node.name, smallest), snapshot, base)
        whole = worth(smallest)
        if displaces and amounts != whole and \
                not tries.displaced(("quota+nodes", cq.name, whole, node.name, smallest), snapshot, base):
            amounts, displaces = whole, ()   # less quota admits it only by displacing others: keep the nodes' worth
    return (Change("quota+nodes", cq.name, quota=amounts, template=node.name, nodes=smallest or 0, amount=smallest,
                   tried=tuple(tried), quota_tried=tuple(quota_tried), displaces=displaces,
                   displacing_amount=smaller, stopped=_stops(stopped, still, down)), notes)


def without(snapshot: Snapshot, finished: Iterable[Workload]) -> Snapshot:
    """`snapshot` with `finished` gone (as if they had completed)."""
    gone = {v.ref for v in finished}
    return replace(snapshot, workloads=tuple(v for v in snapshot.workloads if v.ref not in gone))


def quota_of(v: Workload) -> Resources:
    """What a running workload holds: its pod sets' requests times their assigned counts."""
    requests = {ps.name: ps.request for ps in v.pod_sets}
    total = Resources()
    for psa in v.assignment:
        request = requests.get(psa.name)
        if request is not None:
            total = total + Resources.of({r: a * psa.count for r, a in request.items()})
    return total


def _finishing(snapshot: Snapshot, plan: Plan, quota: list[QuotaFact]) -> list[Workload]:
    """Running workloads the plan keeps, on a flavor the workload could use, in the order they
    would best finish for it: lowest priority first, then the most recently admitted (all of
    them: the caller takes the first MAX_FINISHING and says when there were more)."""
    evicted = {e.workload for e in plan.evictions}
    flavors = {f.flavor for f in quota}
    running = [v for v in snapshot.workloads
               if v.state is WorkloadState.RUNNING and v.ref not in evicted
               and any(f in flavors for psa in v.assignment for f in psa.flavors.values())]
    running.sort(key=lambda v: (v.priority, -(v.admitted_at or 0.0), str(v.ref)))
    return running


def _needs_of(workloads: list[Workload], resource: str) -> int:
    return sum(ps.request.get(resource) * ps.minimum for v in workloads for ps in v.pod_sets)


def _unit(w: Workload, resource: str) -> int:
    """The smallest per-pod request of `resource` among the pod sets: the step of a quota search."""
    return max(1, min((ps.request.get(resource) for ps in w.pod_sets if ps.request.get(resource) > 0), default=1))


def _quota_targets(cq: ClusterQueue, quota: list[QuotaFact]) -> list[list[QuotaFact]]:
    """Per flavor, the flavor/resources worth more quota, listed by the queue: the short ones,
    else the GPUs (all of them: the caller searches the first MAX_QUOTA_TARGETS)."""
    listed = {(fq.flavor, r) for g in cq.resource_groups for fq in g.flavors for r in fq.resources}
    mine = [f for f in quota if (f.flavor, f.resource) in listed]
    wanted = [f for f in mine if f.short] or [f for f in mine if is_gpu(f.resource)]
    by_flavor: dict[str, list[QuotaFact]] = {}
    for f in wanted:
        by_flavor.setdefault(f.flavor, []).append(f)
    # Short resources of flavors the workload does not use together are still separate options;
    # a flavor short only in cpu/memory goes with its GPU flavor's change when one is short.
    return [by_flavor[name] for name in sorted(by_flavor, key=lambda n: (not any(is_gpu(f.resource)
                                                                              for f in by_flavor[n]), n))]


def _search(first: int, change: ChangeOf, tries: Tries, ceiling: int | None = None, hint: int | None = None,
            cap: int | None = None) -> tuple[int | None, list[tuple[int, bool]], str]:
    """The smallest k (of those planned) whose changed snapshot admits the workload.

    The estimate `first` (then one below it, when it admits); when it does not admit, the
    larger estimate `hint` (then one below it) and, when that one admits too, doubling from
    `first` up to it; else doubling from the last amount that did not admit (MAX_DOUBLINGS
    times, or up to `ceiling` when there is one: the ceiling itself is tried last). Then a
    bisection between the largest amount that did not admit and the smallest that did. No
    amount above `cap` is planned (MAX_ADDED_NODES, for changes that add nodes).

    Returns that amount (None: none planned admits), every amount planned with its answer,
    and what limit stopped the search ("" when it ran its course); a stopped search gives
    the smallest amount planned that admits, and says where the smallest may lie."""
    tried: dict[int, bool] = {}

    def admits(k: int) -> bool:
        if k not in tried:
            key, changed = change(k)
            tried[k] = tries.admits(key, changed)
        return tried[k]

    try:
        return _amounts(first, admits, ceiling, hint, cap), sorted(tried.items()), ""
    except LimitReached as limit:
        found = min((k for k, ok in tried.items() if ok), default=None)
        below = max((k for k, ok in tried.items() if not ok and found is not None and k < found), default=0)
        where = f"; the smallest that admits is between {below + 1:,} and {found:,}" \
            if found is not None and below + 1 < found else ""
        return found, sorted(tried.items()), limit.text + where


def _amounts(first: int, admits: Callable[[int], bool], ceiling: int | None, hint: int | None,
             cap: int | None) -> int | None:
    """_search's order of amounts (see there); raises LimitReached where a limit stops it."""
    def bisect(lo: int, hi: int) -> int:   # lo does not admit, hi does
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if admits(mid):
                hi = mid
            else:
                lo = mid
        return hi

    top = min(k for k in (ceiling, cap) if k is not None) if ceiling is not None or cap is not None else None
    estimate, first = first, max(1, first if top is None else min(first, top))
    if admits(first):
        if first == 1 or not admits(first - 1):
            return first
        return bisect(0, first - 1)
    lo = first
    if hint is not None and hint > first and (top is None or hint <= top):
        if admits(hint):
            if not admits(hint - 1):
                return hint
            hi, k = hint - 1, first * 2
            while k < hi:
                if admits(k):
                    hi = k
                    break
                lo, k = k, k * 2
            return bisect(lo, hi)
        lo = hint
    hi, doublings = lo, 0
    while True:
        if ceiling is None:
            doublings += 1
            if doublings > MAX_DOUBLINGS:
                return None
            nxt = hi * 2
        elif hi >= ceiling:
            return None
        else:
            nxt = min(ceiling, hi * 2)
        if cap is not None and nxt > cap:
            if hi >= cap:
                raise LimitReached(nodes_cut(cap) + (f"; the estimate was {estimate:,}" if estimate > cap else ""))
            nxt = cap
        hi = nxt
        if admits(hi):
            return bisect(lo, hi)
        lo = hi


def _template(snapshot: Snapshot, plan: Plan, cq: ClusterQueue,
              w: Workload) -> tuple[Node, int] | None:
    """An eligible node of the main pod set's first flavor option, in the topology domain (at its
    required level, if any) with the most free room after the plan; and pods of it a node holds."""
    state = ClusterState.after(snapshot, Decisions(plan.admissions, plan.evictions))
    ps = main_pod_set(w)
    options = _options(state, cq, ps)
    if not options:
        return None
    flavors = [snapshot.flavors[f] for f in options[0].flavors]
    eligible = [n for n in snapshot.nodes if node_allows(n, flavors, ps) and _pods_on(n.allocatable, ps) > 0]
    if not eligible:
        return None
    free = _free_pods(snapshot, plan, ps, eligible)
    levels = _levels_to(snapshot, flavors, ps.topology.level)
    room: dict[tuple[str, ...], int] = {}
    for n in eligible:
        key = tuple(n.labels.get(level, "") for level in levels)
        room[key] = room.get(key, 0) + free[n.name]
    best = max(sorted(room), key=lambda key: room[key])
    node = min((n for n in eligible if tuple(n.labels.get(level, "") for level in levels) == best),
               key=lambda n: n.name)
    return node, _pods_on(node.allocatable, ps)


def main_pod_set(w: Workload) -> PodSet:
    """The pod set that asks for the most GPUs (then the most pods; the first of equals): the
    one nodes are added for (a launcher beside GPU workers is not)."""
    def gpus(ps: PodSet) -> int:
        return sum(v for r, v in ps.request.items() if is_gpu(r)) * ps.count

    return max(w.pod_sets, key=lambda ps: (gpus(ps), ps.count, -w.pod_sets.index(ps)))


def _levels_to(snapshot: Snapshot, flavors: Iterable[ResourceFlavor], level: str | None) -> tuple[str, ...]:
    if level is None:
        return ()
    for flavor in flavors:
        topology = snapshot.topologies.get(flavor.topology_name or "")
        if topology is not None and level in topology.levels:
            return topology.levels[:topology.levels.index(level) + 1]
    return (level,)


def _pods_on(free: Resources, ps: PodSet) -> int:
    counts = [free.get(r) // v for r, v in ps.request.items() if v > 0]
    return max(0, min(counts)) if counts else 0


def _free_pods(snapshot: Snapshot, plan: Plan, ps: PodSet, nodes: list[Node]) -> dict[str, int]:
    """Pods of `ps` each node could still take after the plan."""
    evicted = {e.workload for e in plan.evictions}
    by_ref = {w.ref: w for w in snapshot.workloads}
    used: dict[str, dict[str, int]] = {}

    def charge(w: Workload, pod_sets: Iterable[PodSetAssignment]) -> None:
        requests = {p.name: p.request for p in w.pod_sets}
        for psa in pod_sets:
            request = requests.get(psa.name)
            if request is None:
                continue
            for node, n in psa.pods_per_node().items():
                row = used.setdefault(node, {})
                for r, v in request.items():
                    row[r] = row.get(r, 0) + v * n

    for w in snapshot.workloads:
        if w.state is WorkloadState.RUNNING and w.ref not in evicted:
            charge(w, w.assignment)
    for a in plan.admissions:
        if a.workload in by_ref:
            charge(by_ref[a.workload], a.pod_sets)
    out = {}
    for n in nodes:
        row = used.get(n.name, {})
        counts = [(n.free.get(r) - row.get(r, 0)) // v for r, v in ps.request.items() if v > 0]
        out[n.name] = max(0, min(counts)) if counts else 0
    return out


# ---------------------------------------------------------------- as data and as text

def as_dict(e: Explanation) -> dict[str, object]:
    """The facts as plain data (for -o yaml|json); integers in Kubernetes' base units."""
    def ref(r: ObjectRef) -> dict[str, str]:
        return {"kind": r.kind, "namespace": r.namespace, "name": r.name}

    def change(c: Change) -> dict[str, object]:
        out: dict[str, object] = {"kind": c.kind, "clusterQueue": c.cluster_queue, "admits": c.amount is not None}
        if c.quota:
            out["quota"] = [{"flavor": f, "resource": r, "more": a} for f, r, a in c.quota]
        if c.template:
            out["nodesLike"] = c.template
            out["nodes"] = c.nodes
        if c.finishing:
            out["finishing"] = [ref(r) for r in c.finishing]
        out["tried"] = [{"amount": k, "admits": ok} for k, ok in c.tried]
        if c.amount is not None:
            out["displaces"] = [{"workload": ref(d.workload), "priority": d.priority, "how": d.how,
                                 "volume": d.volume, "cost": d.cost} for d in c.displaces]
            out["cost"] = c.cost
            if c.displacing_amount is not None:
                out["smallerAmountDisplaces"] = c.displacing_amount
        if c.quota_tried:
            out["quotaTried"] = [{"podsWorth": k, "admits": ok} for k, ok in c.quota_tried]
        if c.stopped:
            out["stoppedEarly"] = c.stopped
        return out

    smallest = e.smallest()
    return {
        "workload": ref(e.workload), "clusterQueue": e.cluster_queue, "localQueue": e.local_queue,
        "priority": e.priority, "state": e.state, "reason": e.reason, "plan": e.plan_status,
        "assignment": [{"podSet": name, "flavors": dict(flavors), "nodes": dict(nodes)}
                       for name, flavors, nodes in e.assignment],
        "position": {"localQueue": list(e.local_position), "clusterQueue": list(e.cluster_position)},
        "ahead": [{"workload": ref(a.workload), "priority": a.priority, "state": a.state} for a in e.ahead],
        "quota": [{"flavor": q.flavor, "resource": q.resource, "nominal": q.nominal,
                   "borrowingLimit": q.borrowing_limit, "usedAfterPlan": q.used, "available": q.available,
                   "availableOwn": q.own, "availableFromCohort": q.available - q.own,
                   "needs": q.needs, "short": q.short and not e.blocker} for q in e.quota],
        "capacity": [{"podSet": c.pod_set, "flavors": list(c.flavors), "fits": c.fits, "neededPods": c.needed,
                      "bestRoomPods": c.room, "level": c.level, "reason": c.reason} for c in e.capacity],
        "victims": [{"workload": ref(v.workload), "clusterQueue": v.cluster_queue, "priority": v.priority,
                     "preemptible": v.allowed, "why": v.why} for v in e.victims],
        "victimsFound": max(e.victims_found, len(e.victims)),
        "changes": [change(c) for c in e.changes],
        "smallestChange": None if smallest is None else change(smallest),
        "searchTimeLimitSeconds": e.search_time_limit,
        "plansTried": e.plans,
        "stoppedEarly": [f"stopped early: {text}" for text in e.stopped],
        "notes": list(e.notes),
        "eviction": None if e.eviction is None else {
            "reason": e.eviction.reason, "for": [ref(r) for r in e.eviction.preemptors],
            "rule": e.eviction.rule, "cost": e.eviction.cost},
    }


def lines(e: Explanation) -> list[str]:
    """The facts for people, one line each."""
    out = [f"{e.workload} (priority {e.priority}, LocalQueue {e.local_queue}, ClusterQueue {e.cluster_queue or '-'})",
           f"  plan: {e.plan_status}"]
    if e.state in ("admitted", "running"):
        verb = "admitted by this plan" if e.state == "admitted" else "running, and the plan keeps it"
        out.append(f"  state: {verb}")
        for name, flavors, nodes in e.assignment:
            shown = ", ".join(f"{node}×{n}" for node, n in nodes[:4]) + (f" +{len(nodes) - 4} more"
                                                                        if len(nodes) > 4 else "")
            out.append(f"    pod set {name}: flavors {', '.join(sorted({f for _, f in flavors})) or '-'}; "
                       f"nodes {shown}")
        out.append("  no change needed")
        return out
    out.append(f"  state: {e.state}" + (f": {e.reason}" if e.reason else ""))
    if e.eviction is not None:
        who = ", ".join(str(r) for r in e.eviction.preemptors) or "no admission"
        out.append(f"  evicted ({e.eviction.reason}) for {who}: {e.eviction.rule}; "
                   f"cost {e.eviction.cost:g} (work thrown away)")
    if e.state == "external":
        return out + [f"  note: {note}" for note in e.notes]
    out.append(f"  position: {e.local_position[0]} of {e.local_position[1]} in LocalQueue {e.local_queue}, "
               f"{e.cluster_position[0]} of {e.cluster_position[1]} in ClusterQueue {e.cluster_queue} "
               "(Kueue's order: priority, then queue time)")
    for a in e.ahead:
        out.append(f"    ahead: {a.workload} priority {a.priority} ({a.state})")
    if e.quota:
        out.append("  quota (after the plan)" + (": not what keeps it waiting" if e.blocker else "") + ":")
        for q in e.quota:
            limit = "none" if q.borrowing_limit is None else amount(q.resource, q.borrowing_limit)
            lent = q.available - q.own
            split = f" ({amount(q.resource, q.own)} its own, {amount(q.resource, lent)} lent by the cohort)" if lent else ""
            out.append(f"    {q.flavor}/{q.resource}: nominal {amount(q.resource, q.nominal)}, borrowing limit "
                       f"{limit}, used {amount(q.resource, q.used)}, available {amount(q.resource, q.available)}{split}, "
                       f"needs {amount(q.resource, q.needs)}" + ("  <- short" if q.short and not e.blocker else ""))
    for c in e.capacity:
        where = f"in one {c.level}" if c.level else "on eligible nodes"
        state_text = "fits" if c.fits else f"room for {c.room}" + (f" ({c.reason})" if c.reason else "")
        out.append(f"  capacity: pod set {c.pod_set} on {'/'.join(c.flavors)} needs {c.needed} "
                   f"{'pod' if c.needed == 1 else 'pods'} {where}: "
                   f"{state_text}")
    for v in e.victims:
        verdict = "preemptible (the plan chose not to)" if v.allowed else f"protected: {v.why}"
        out.append(f"  candidate victim: {v.workload} (ClusterQueue {v.cluster_queue}, priority {v.priority}): "
                   f"{verdict}")
    if e.victims_found > len(e.victims):
        out.append(f"  +{e.victims_found - len(e.victims)} more candidate victims not shown")
    if e.changes:
        plans = f"; {e.plans} {'plan' if e.plans == 1 else 'plans'}, at most {MAX_PLANS}" if e.plans else ""
        out.append(f"  changes tried (each planned again by the cycle, time limit {e.search_time_limit:g}s a plan"
                   f"{plans}):")
    for ch in e.changes:
        unit = {"quota": ("pod's worth", "pods' worth"), "finishing": ("workload", "workloads")}.get(
            ch.kind, ("node", "nodes"))
        out.append(f"    {_change_text(ch)}: {tried_text(ch.tried, unit)}")
        if ch.quota_tried:
            out.append("      then, with those nodes, quota: " + tried_text(ch.quota_tried, ("pod's worth", "pods' worth")))
        if ch.amount is not None:
            out.append(f"      {_displaces_text(ch)}")
    for text in e.stopped:
        out.append(f"  stopped early: {text}")
    for note in e.notes:
        out.append(f"  note: {note}")
    smallest = e.smallest()
    if smallest is not None:
        out.append(f"  smallest change found: {_change_text(smallest)}; {_displaces_text(smallest)}")
    elif e.changes:
        out.append("  smallest change found: none of those tried admits it")
    return out


def tried_text(tried: Iterable[tuple[int, bool]], unit: tuple[str, str]) -> str:
    """`admits from 4 pods' worth, not 3 (tried 1, 2, 3, 4, 24)`: the answer first, the
    amounts planned after it."""
    tried = sorted(tried)
    if not tried:
        return "not tried"

    def many(k: int) -> str:
        return f"{k} {unit[0] if k == 1 else unit[1]}"

    yes = [k for k, ok in tried if ok]
    amounts = ", ".join(str(k) for k, _ in tried)
    if not yes:
        return f"none admits, up to {many(tried[-1][0])} (tried {amounts})"
    below = [k for k, ok in tried if not ok and k < yes[0]]
    return f"admits from {many(yes[0])}" + (f", not {below[-1]}" if below else "") + f" (tried {amounts})"


def _displaces_text(c: Change) -> str:
    """What the change costs others, in one clause."""
    if not c.displaces:
        text = "displaces nothing the current plan serves"
        if c.displacing_amount is not None:
            text += f" (a smaller amount, {c.displacing_amount}, admits it too but displaces others)"
        return text
    shown = [f"{'evicts' if d.how == 'evicted' else 'no longer admits'} {d.workload} (priority {d.priority}, "
             f"{d.volume}" + (f", cost {d.cost:g}" if d.how == "evicted" else "") + ")" for d in c.displaces[:4]]
    more = f" +{len(c.displaces) - 4} more" if len(c.displaces) > 4 else ""
    return "; ".join(shown) + more + f"; eviction cost {c.cost:g}"


def _change_text(c: Change) -> str:
    parts = []
    if c.quota:
        upto = "up to " if c.amount is None else ""
        parts.append(" and ".join(f"{upto}+{amount(r, a)} {r} nominal quota on flavor {f}" for f, r, a in c.quota)
                     + f" in ClusterQueue {c.cluster_queue}")
    if c.template:
        if c.amount is not None:
            parts.append(f"+{c.nodes} {'node' if c.nodes == 1 else 'nodes'} like {c.template}")
        else:   # none admitted: the most tried, not a placeholder
            most = max((k for k, _ in c.tried), default=0)
            parts.append(f"up to +{most} {'node' if most == 1 else 'nodes'} like {c.template}" if most
                         else f"more nodes like {c.template}")
    if c.kind == "finishing":
        names = [str(r) for r in c.finishing]
        shown = ", ".join(names[:4]) + (f" +{len(names) - 4} more" if len(names) > 4 else "")
        parts.append(f"{len(names)} running {'workload' if len(names) == 1 else 'workloads'} finishing: {shown}" if names
                     else "running workloads finishing, lowest priority first")
    return f"[{c.kind}] " + " with ".join(parts)
