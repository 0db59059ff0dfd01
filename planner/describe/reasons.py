"""Why each pending workload waits, in one sentence a user can act on.

Computed against the state *after* the decisions (evictions gone, admissions in),
whoever made them (greedy or MILP). Order of causes: what can never be admitted
(blocked, inactive queue, namespace), then quota, then capacity or topology, then
queue rules (StrictFIFO), and last "fits, but was not chosen". Quota and capacity
are explained for the first flavor option, as a user reads the ClusterQueue.

When it does not fit, one clause says what preemption could do: evicting running
work its policies allow would make room (and the plan chose not to), or lower
priority work would make room but may not be evicted, and why (the policy value,
non-preemptible, minimum runtime). Whether preemption would make room, and by evicting
whom, is greedy's own search's answer (planner.kueue.preemption.after_plan), so a
reason never claims what greedy would not do; the state is restored afterwards, and one
hint is computed per shape of request (cached), as that search is most of the cost.
Pure: no I/O, no clock; deterministic.
"""

from __future__ import annotations

from models import ClusterQueue, Decisions, FlavorResource, ObjectRef, PodSet, Snapshot, Workload, WorkloadState, is_gpu
from planner.kueue.fit import Tentative, try_counts
from planner.kueue.state import PodSetChoice, ClusterState, admission_blocker, amount, pod_shape, pods, quantity
from planner.describe.protected import Protected
from planner.kueue.preemption.after_plan import AfterPlan
from planner.kueue.preemption.victims import minimal_victims
from planner.kueue.placement import Placement
from planner.kueue.semantics import FlavorOption, node_allows, queue_order_key, quota_usage



def pending_reasons(snapshot: Snapshot, decisions: Decisions) -> dict[ObjectRef, str]:
    """Every PENDING workload not admitted by `decisions` -> why, after the decisions."""
    state = ClusterState.after(snapshot, decisions)
    chosen = {a.workload for a in decisions.admissions}
    waiting = [w for w in sorted(snapshot.workloads, key=lambda w: w.ref)
               if w.state is WorkloadState.PENDING and w.ref not in chosen]
    heads = _strict_fifo_heads(snapshot, waiting)
    hints = _Hints(snapshot, decisions, state)
    out: dict[ObjectRef, str] = {}
    for w in sorted(waiting, key=lambda w: -w.priority):
        out[w.ref] = _reason(state, w, heads, hints)
    return dict(sorted(out.items()))


class _Hints:
    """The preemption clause of a reason, built lazily and cached per shape of request."""

    def __init__(self, snapshot: Snapshot, decisions: Decisions, state: ClusterState):
        self.snapshot, self.decisions, self.state = snapshot, decisions, state
        self.search: AfterPlan | None = None
        self.protected: Protected | None = None
        self.cache: dict[object, str] = {}

    def clause(self, w: Workload, counts: list[int]) -> str:
        cq = self.snapshot.cluster_queues[w.queue_name]
        key: object = None
        if cq.preemption.within_cluster_queue != "LowerOrNewerEqualPriority":  # else queue time matters
            key = (cq.name, w.priority, tuple(counts),
                   tuple((ps.request, ps.count, ps.minimum, ps.topology, tuple(sorted(ps.node_selector.items())),
                          ps.tolerations) for ps in w.pod_sets))
            if key in self.cache:
                return self.cache[key]
        text = self._clause(w, counts)
        if key is not None:
            self.cache[key] = text
        return text

    def _clause(self, w: Workload, counts: list[int]) -> str:
        if self.search is None:
            self.search = AfterPlan(self.snapshot, self.decisions, self.state)
        targets = self.search.targets(w)
        if targets:
            return f"; preempting {_room([t.admitted.view for t in targets])} would make room, which this plan did not choose"
        if self.protected is None:
            gone = {e.workload for e in self.decisions.evictions} | {m.workload for m in self.decisions.migrations}
            self.protected = Protected(self.state, gone)
        state = self.state

        def fits() -> bool:
            return not isinstance(try_counts(state, w, counts), str)

        lower = self.protected.lower(w)
        found = minimal_victims(state, lower, fits) if lower else None
        if not found:
            return ""
        victims = [lower[i] for i in found]
        for v in victims:
            state.release(v, sign=-1)
        why = sorted({self.protected.why_not(w, v) for v in victims})
        return f"; evicting {_room(victims, 'lower-priority ')} would make room, but {' and '.join(why[:2])}"


def _room(victims: list[Workload], lower: str = "") -> str:
    n = sum(psa.count for v in victims for psa in v.assignment)
    return f"{len(victims)} {lower}running workload{'' if len(victims) == 1 else 's'} ({pods(n)})"


def _strict_fifo_heads(snapshot: Snapshot, waiting: list[Workload]) -> dict[str, Workload]:
    """The first waiting workload of every StrictFIFO queue: it holds back the rest."""
    heads: dict[str, Workload] = {}
    for w in sorted(waiting, key=lambda w: queue_order_key(w, snapshot)):
        cq = snapshot.cluster_queues.get(w.cluster_queue or "")
        if cq is None or cq.queueing_strategy != "StrictFIFO" or admission_blocker(snapshot, w):
            continue
        heads.setdefault(cq.name, w)
    return heads


def _reason(state: ClusterState, w: Workload, heads: dict[str, Workload], hints: _Hints) -> str:
    blocker = admission_blocker(state.snapshot, w)
    if blocker is not None:
        return blocker
    cq = state.snapshot.cluster_queues[w.queue_name]
    counts = [ps.minimum for ps in w.pod_sets]
    if isinstance(try_counts(state, w, counts), str):
        return _why_not(state, cq, w, counts) + hints.clause(w, counts)
    head = heads.get(cq.name)
    if head is not None and head.ref != w.ref:
        return f"waiting behind {head.ref} (StrictFIFO)"
    return "fits in what is left, but was not chosen: the plan admitted other workloads instead"


def _why_not(state: ClusterState, cq: ClusterQueue, w: Workload, counts: list[int]) -> str:
    """Quota first, then capacity, for the first flavor option of each pod set in turn."""
    many = len(w.pod_sets) > 1
    tent = Tentative(state)
    try:
        for ps, n in zip(w.pod_sets, counts):
            prefix = f"pod set {ps.name}: " if many else ""
            options = state.options(cq, ps)
            if isinstance(options, str):
                return prefix + options
            # A node the state can place on answers at once (cached per flavor choice);
            # only where there is none are all nodes looked at.
            nowhere = None if any(len(state.eligible(o, ps).rows) for o in options) else \
                _no_node_sentence(state.snapshot, ps, options)
            if nowhere is not None:
                return prefix + nowhere
            option = options[0]
            charges = quota_usage(ps, option, n)
            short = _quota_sentence(state, cq, ps, n, charges, tent.pending)
            if short is not None:
                return prefix + short
            where = state.place(option, ps, n)
            if not where.ok:
                return prefix + _capacity_sentence(ps, n, "/".join(option.flavors), where)
            tent.add(PodSetChoice(ps, option, n, dict(where.pods or {}), charges))
    finally:
        tent.rollback()
    # The first options fit one by one; what fails is their combination (or a group).
    result = try_counts(state, w, counts)
    return result if isinstance(result, str) else "does not fit together with its other pod sets"


def _no_node_sentence(snapshot: Snapshot, ps: PodSet, options: list[FlavorOption]) -> str | None:
    """When no ready node could ever take a pod of `ps` under any flavor, say what excludes them
    (before quota: waiting for quota would not help)."""
    for option in options:
        flavors = [snapshot.flavors[f] for f in option.flavors]
        if any(node_allows(node, flavors, ps) for node in snapshot.nodes):
            return None
    names = ", ".join(sorted({f for o in options for f in o.flavors}))
    selector = ", ".join(f"{k}={v}" for k, v in sorted(ps.node_selector.items()))
    what = f"its node selector {selector}" if selector else "its tolerations"
    return f"no ready node matches {what} with any of its flavors ({names})"


def _quota_sentence(state: ClusterState, cq: ClusterQueue, ps: PodSet, n: int,
                    charges: dict[FlavorResource, int], pending: dict[FlavorResource, int]) -> str | None:
    at_least = "at least " if n < ps.count else ""
    # GPUs first: they are what people wait for.
    for fr in sorted(charges, key=lambda fr: (not is_gpu(fr[1]), fr)):
        flavor, resource = fr
        need = charges[fr] + pending.get(fr, 0)
        if not state.lists(cq.name, fr):
            return f"ClusterQueue {cq.name} has no quota for {resource} in flavor {flavor}"
        if charges[fr] <= 0:
            continue
        available = max(0, state.available(cq.name, fr))
        if need <= available:
            continue
        within = min(available, max(0, state.nominal(cq.name, fr) - state.used(cq.name, fr)))
        sentence = (f"needs {at_least}{quantity(resource, need)} of flavor {flavor} in ClusterQueue {cq.name}; "
                    f"{amount(resource, within)} within nominal quota are free")
        if cq.cohort:
            more = available - within
            sentence += (f", {amount(resource, more)} more borrowable from cohort {cq.cohort}" if more > 0
                         else f", none borrowable from cohort {cq.cohort}")
        return sentence
    return None


def _capacity_sentence(ps: PodSet, n: int, flavors: str, where: Placement) -> str:
    at_least = "at least " if n < ps.count else ""
    slices = ps.topology.slices
    if where.level is not None:
        shape = f" in slices of {slices[0].size} per {slices[0].level}" if slices else ""
        return f"needs {at_least}{pods(n)}{shape} in one {where.level}; largest has room for {where.fit}"
    if where.reason == "no eligible nodes":
        return (f"needs {at_least}{pods(n)} of {pod_shape(ps.request)} on flavor {flavors} nodes; "
                "no node matches the flavor's labels, the pod set's node selector and tolerations")
    if where.reason.startswith(("only", "none", "the pod", "the slice")):
        return f"needs {at_least}{pods(n)} of {pod_shape(ps.request)} on flavor {flavors} nodes; room for {where.fit}"
    return where.reason
