"""Capacity what-if: the cheapest nodes to add so that given workloads run, and what a drain does.

Pure: a Snapshot and node templates in, answers out (the CLI reads and prints).

Adding nodes (`plan_additions`), in order:
  1. plan the snapshot as it is; targets admitted already need nothing;
  2. targets their ClusterQueue's quota cannot hold (even with every node free) are
     set apart: nodes cannot help them, and the answer names the queue and flavor;
  3. a small MILP picks integer units per template at least cost (`size_units`):
       min  sum_t cost_t n_t
       s.t. per group of pod sets with the same eligible templates S, per resource r:
              sum_{t in S} n_t hosts_t alloc_t[r] >= demand_G[r] - free_G[r]
            per pod set p: sum_{t in S_p} n_t hosts_t fit_t(p) >= count_p - freefit_p
            per required-topology pod set j no existing domain can hold, one new domain
            of its own: sum_t d_jt = 1, sum_j d_jt <= domains_t n_t   (d binary)
            0 <= n_t <= max_t integer
  4. the real cycle plans the snapshot with those nodes added; while a target still
     waits, one more unit of the cheapest template that could hold it is added and
     the cycle runs again (bounded), and the answer says so.

Steps 1-3 and the order of the tries depend on the input alone. What each try admits
is the cycle's (`planner`'s) answer: where the planner's search was cut short (a
solve stopped by its time limit or gap, Kueue's way not finished by its deadline)
that answer, and so which try is chosen, may depend on time, and a note says which
tries were (`_cut_short`). A planner bounded by work, not time (the provisioning
what-if's), makes the whole answer a function of the input.

Draining (`plan_drain`): nodes matching a label selector are removed, their running
workloads become pending, and the cycle shows where each goes or why it waits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Sequence

from models import (
    HOSTNAME_LABEL, ClusterQueue, Node, ObjectRef, PodSet, PodSetAssignment, Plan, Resources, Snapshot, Workload,
    WorkloadState,
)
from models.capacity import NodeTemplate
from planner.base.errors import InputError
from planner.base import label_selector
from planner.kueue.capacity import free_capacity
from planner.kueue.semantics import QuotaTree, eviction_cost, flavor_options, node_allows, quota_usage

Planner = Callable[[Snapshot], Plan]

MAX_EXTRA_ROUNDS = 8       # tries after the capacity model's answer, at most
MAX_STALE_ROUNDS = 2       # tries in a row that admit no more targets before giving up


@dataclass(frozen=True)
class QuotaBlock:
    """A target that nodes cannot help: its queue's quota (or the queue itself) holds it back."""

    workload: ObjectRef
    cluster_queue: str
    flavor: str
    resource: str
    need: int
    available: int
    reason: str


@dataclass(frozen=True)
class CapacityAnswer:
    targets: tuple[ObjectRef, ...]
    units: Mapping[str, int]            # template -> units added (the final answer)
    milp_units: Mapping[str, int]       # what the capacity MILP chose before the cycle checked it
    cost: float
    added_nodes: tuple[str, ...]
    plan: Plan
    admitted: tuple[ObjectRef, ...]     # targets the final plan admits
    waiting: tuple[ObjectRef, ...]      # targets it does not (quota-blocked or beyond the bound)
    quota_blocked: tuple[QuotaBlock, ...]
    notes: tuple[str, ...]
    tried: tuple[Mapping[str, int], ...] = ()   # the units planned with, in order (the answer among them)


@dataclass(frozen=True)
class Displaced:
    workload: ObjectRef
    outcome: str                        # "admitted on n1 x4, n2 x4" | "waits: REASON"
    from_: tuple[tuple[str, int], ...] = ()    # (node, pods) it ran on
    to: tuple[tuple[str, int], ...] = ()       # (node, pods) the plan admits it on; () when it waits
    cost: float = 0.0                          # the work its eviction throws away (the preemption cost model)
    reason: str = ""                           # why it waits, when it does


@dataclass(frozen=True)
class DrainAnswer:
    removed_nodes: tuple[str, ...]
    displaced: tuple[Displaced, ...]
    plan: Plan


# ---------------------------------------------------------------- targets

def select_targets(snapshot: Snapshot, min_priority: int | None, names: Sequence[str]) -> tuple[Workload, ...]:
    """Pending workloads at priority >= `min_priority`, or those named (NAME or NAMESPACE/NAME).

    Raises InputError for a name that is not a pending workload."""
    pending = [w for w in snapshot.workloads if w.state == WorkloadState.PENDING]
    if names:
        chosen: list[Workload] = []
        for name in names:
            hits = [w for w in pending if name in (w.ref.name, f"{w.ref.namespace}/{w.ref.name}")]
            if not hits:
                raise InputError(f"{name!r} is not a pending workload in the snapshot", field="--workloads")
            chosen.extend(h for h in hits if h not in chosen)
        return tuple(chosen)
    floor = min_priority if min_priority is not None else min((w.priority for w in pending), default=0)
    return tuple(w for w in pending if w.priority >= floor)


# ---------------------------------------------------------------- quota

def _cq_usage(workloads: Iterable[Workload], snapshot: Snapshot) -> dict[str, dict[tuple[str, str], int]]:
    usage: dict[str, dict[tuple[str, str], int]] = {}
    for w in workloads:
        if w.cluster_queue is None:
            continue
        table = usage.setdefault(f"cq:{w.cluster_queue}", {})
        requests = {ps.name: ps.request for ps in w.pod_sets}
        for a in w.assignment:
            request = requests.get(a.name, Resources())
            for resource, flavor in a.flavors.items():
                key = (flavor, resource)
                table[key] = table.get(key, 0) + a.count * request.get(resource)
    return usage


def quota_block(snapshot: Snapshot, workload: Workload, ahead: Sequence[Workload] = ()) -> QuotaBlock | None:
    """Why `workload` cannot fit its queue's quota however many nodes there are, or None.

    Quota that running workloads of the same or higher priority hold (they cannot be
    preempted for it) counts as used, and so does what the targets `ahead` of it take
    (each pod set at its first flavor that fits); lower-priority work counts as free."""
    queue = snapshot.cluster_queues.get(workload.cluster_queue or "")
    if queue is None or workload.blocked_reason:
        return QuotaBlock(workload.ref, workload.cluster_queue or "", "", "", 0, 0,
                          workload.blocked_reason or "no ClusterQueue")
    if not queue.active:
        return QuotaBlock(workload.ref, queue.name, "", "", 0, 0,
                          f"ClusterQueue {queue.name} is inactive: {queue.inactive_reason}")
    tree = QuotaTree(snapshot)
    holders = [w for w in snapshot.workloads
               if w.state == WorkloadState.RUNNING and w.priority >= workload.priority]
    cq_usage = _cq_usage(holders, snapshot)
    for other in ahead:
        _charge(snapshot, tree, other, cq_usage)
    first: QuotaBlock | None = None
    for ps in workload.pod_sets:
        options = flavor_options(snapshot, queue, ps)
        if isinstance(options, str):
            return QuotaBlock(workload.ref, queue.name, "", "", 0, 0, options)
        fitting = False
        for option in options:
            short = _short(tree, queue, option_usage=quota_usage(ps, option, ps.min_count or ps.count),
                           cq_usage=cq_usage, ref=workload.ref)
            if short is None:
                fitting = True
                break
            first = first or short
        if not fitting:
            return first
    return None


def _charge(snapshot: Snapshot, tree: QuotaTree, workload: Workload,
            cq_usage: dict[str, dict[tuple[str, str], int]]) -> None:
    """Add to `cq_usage` what `workload` takes: each pod set at its first flavor option that fits."""
    queue = snapshot.cluster_queues.get(workload.cluster_queue or "")
    if queue is None or not queue.active:
        return
    table = cq_usage.setdefault(f"cq:{queue.name}", {})
    for ps in workload.pod_sets:
        options = flavor_options(snapshot, queue, ps)
        if isinstance(options, str) or not options:
            continue
        chosen = options[0]
        for option in options:
            if _short(tree, queue, quota_usage(ps, option, ps.min_count or ps.count), cq_usage, workload.ref) is None:
                chosen = option
                break
        for fr, amount in quota_usage(ps, chosen, ps.min_count or ps.count).items():
            table[fr] = table.get(fr, 0) + amount


def _short(tree: QuotaTree, queue: ClusterQueue, option_usage: Mapping[tuple[str, str], int],
           cq_usage: Mapping[str, Mapping[tuple[str, str], int]], ref: ObjectRef) -> QuotaBlock | None:
    for fr, need in sorted(option_usage.items()):
        if need <= 0:
            continue
        available = tree.available(f"cq:{queue.name}", fr, tree.tree_usage(cq_usage, fr))
        if need > available:
            flavor, resource = fr
            return QuotaBlock(ref, queue.name, flavor, resource, need, max(0, available),
                              f"ClusterQueue {queue.name} flavor {flavor}: {resource} needs {need}, "
                              f"quota leaves {max(0, available)}")
    return None


# ---------------------------------------------------------------- nodes from templates

def unit_nodes(template: NodeTemplate, unit: int) -> tuple[Node, ...]:
    """The nodes of unit number `unit` (from 1) of `template`: fresh hostnames and topology values."""
    domain = f"{template.name}-{unit}"
    nodes = []
    for host in range(template.hosts):
        name = f"{domain}-{host}" if template.per == "rack" else domain
        labels = {**template.labels, **{key: domain for key in template.topology}, HOSTNAME_LABEL: name}
        nodes.append(Node(name=name, labels=labels, allocatable=template.allocatable, taints=template.taints))
    return tuple(nodes)


def added_nodes(snapshot: Snapshot, templates: Sequence[NodeTemplate], units: Mapping[str, int]) -> tuple[Node, ...]:
    taken = {n.name for n in snapshot.nodes}
    out: list[Node] = []
    for template in templates:
        made, unit = 0, 0
        while made < units.get(template.name, 0):
            unit += 1
            nodes = unit_nodes(template, unit)
            if any(n.name in taken for n in nodes):
                continue    # a name (and so a domain) the cluster already has: skip to a fresh one
            out.extend(nodes)
            made += 1
    return tuple(out)


def _eligible(snapshot: Snapshot, workload: Workload, ps: PodSet, node: Node) -> bool:
    queue = snapshot.cluster_queues.get(workload.cluster_queue or "")
    if queue is None:
        return False
    options = flavor_options(snapshot, queue, ps)
    if isinstance(options, str):
        return False
    for option in options:
        flavors = [snapshot.flavors[f] for f in option.flavors if f in snapshot.flavors]
        if node_allows(node, flavors, ps):
            return True
    return False


def _free_by_node(snapshot: Snapshot) -> dict[str, Resources]:
    """Each usable node's room: allocatable less unmanaged usage less running workloads'
    pods (planner.kueue.capacity.free_capacity), never below zero."""
    return {k: v.clipped() for k, v in free_capacity(snapshot).items()}


# ---------------------------------------------------------------- the capacity MILP

@dataclass(frozen=True)
class _Need:
    workload: Workload
    pod_set: PodSet
    templates: tuple[int, ...]          # indices of templates that can hold its pods
    free_fit: int                       # its pods existing free room could hold
    new_domain: tuple[int, ...] | None  # required topology not fitting anywhere now: templates that can give one


def _needs(snapshot: Snapshot, templates: Sequence[NodeTemplate], targets: Sequence[Workload],
           free: Mapping[str, Resources], fresh: frozenset[ObjectRef]) -> tuple[list[_Need], list[tuple[ObjectRef, str]]]:
    nodes = [n for n in snapshot.nodes if n.name in free]
    out: list[_Need] = []
    problems: list[tuple[ObjectRef, str]] = []
    for w in targets:
        for ps in w.pod_sets:
            samples = [unit_nodes(t, 1)[0] for t in templates]
            usable = tuple(i for i, t in enumerate(templates)
                           if ps.request.pods_fitting(t.allocatable) > 0 and _eligible(snapshot, w, ps, samples[i]))
            if not usable:
                problems.append((w.ref, f"no template can hold a pod of {w.ref} pod set {ps.name}"))
            eligible = [n for n in nodes if _eligible(snapshot, w, ps, n)]
            free_fit = sum(ps.request.pods_fitting(free[n.name]) for n in eligible)
            new_domain: tuple[int, ...] | None = None
            level = ps.topology.level if ps.topology.mode == "required" else None
            if level is not None:
                room: dict[str, int] = {}
                for n in eligible:
                    value = n.labels.get(level)
                    if value is not None:
                        room[value] = room.get(value, 0) + ps.request.pods_fitting(free[n.name])
                wanted = ps.min_count or ps.count
                if w.ref in fresh or max(room.values(), default=0) < wanted:
                    new_domain = tuple(i for i in usable if _domain_pods(templates[i], ps, level) >= wanted)
                    if not new_domain:
                        problems.append((w.ref, f"no template gives one {level} domain that holds "
                                                f"{w.ref} pod set {ps.name}"))
            out.append(_Need(w, ps, usable, free_fit, new_domain))
    return out, problems


def _domain_pods(template: NodeTemplate, ps: PodSet, level: str) -> int:
    per_host = ps.request.pods_fitting(template.allocatable)
    if level == HOSTNAME_LABEL:
        return per_host
    return per_host * template.hosts if level in template.topology else 0


def _domains_per_unit(template: NodeTemplate, level: str) -> int:
    return template.hosts if level == HOSTNAME_LABEL else 1


def size_units(snapshot: Snapshot, templates: Sequence[NodeTemplate], targets: Sequence[Workload],
               threads: int = 1, fresh: frozenset[ObjectRef] = frozenset(),
               noted: frozenset[ObjectRef] | None = None) -> tuple[dict[str, int], list[str]]:
    """The least-cost units per template the aggregate capacity model asks for, and notes
    (pod sets no template can hold, or an infeasible model). Required-topology pod sets
    of workloads in `fresh` get a new domain even where one existing domain has room
    (the cycle found that room taken by another target)."""
    import highspy
    import numpy as np

    from planner.base import interrupt
    from planner.milp import new_highs, stop_on_signal

    free = _free_by_node(snapshot)
    needs, problems = _needs(snapshot, templates, targets, free, fresh)
    notes = [text for ref, text in problems if noted is None or ref in noted]
    h = new_highs()
    h.setOptionValue("threads", max(1, threads))
    inf = highspy.kHighsInf
    count = len(templates)
    for t in templates:
        h.addVar(0.0, float(t.max_units))
    h.changeColsCost(count, np.arange(count, dtype=np.int32), np.array([t.cost for t in templates], dtype=float))
    integer = [i for i in range(count)]

    def row(lower: float, columns: Sequence[int], values: Sequence[float]) -> None:
        h.addRow(lower, inf, len(columns), np.array(columns, dtype=np.int32), np.array(values, dtype=float))

    # per group of pod sets sharing eligible templates, per resource: the group's demand beyond free room
    groups: dict[tuple[int, ...], list[_Need]] = {}
    for need in needs:
        if need.templates:
            groups.setdefault(need.templates, []).append(need)
    nodes = {n.name: n for n in snapshot.nodes if n.name in free}
    for members, group in sorted(groups.items()):
        demand: dict[str, int] = {}
        for need in group:
            for r, v in need.pod_set.request.items():
                demand[r] = demand.get(r, 0) + v * need.pod_set.count
        room: dict[str, int] = {}
        for name, node in nodes.items():
            if any(_eligible(snapshot, need.workload, need.pod_set, node) for need in group):
                for r, v in free[name].items():
                    room[r] = room.get(r, 0) + v
        for r, amount in sorted(demand.items()):
            short = amount - room.get(r, 0)
            if short > 0:
                row(float(short), members, [float(templates[i].hosts * templates[i].allocatable.get(r)) for i in members])
    # per pod set: whole pods, not just resource totals
    for need in needs:
        short = need.pod_set.count - need.free_fit
        if need.templates and short > 0:
            row(float(short), need.templates,
                [float(templates[i].hosts * need.pod_set.request.pods_fitting(templates[i].allocatable))
                 for i in need.templates])
    # a required-topology pod set with no domain free enough today gets a new domain of its own
    claims: dict[int, list[int]] = {}
    for need in needs:
        if not need.new_domain:
            continue
        columns = []
        for i in need.new_domain:
            h.addVar(0.0, 1.0)
            column = h.getNumCol() - 1
            integer.append(column)
            columns.append(column)
            claims.setdefault(i, []).append(column)
        h.addRow(1.0, 1.0, len(columns), np.array(columns, dtype=np.int32), np.ones(len(columns)))
    for i, columns in sorted(claims.items()):
        level = next(n.pod_set.topology.level for n in needs if n.new_domain and i in n.new_domain)
        assert level is not None
        # sum_j d_jt - domains_t n_t <= 0
        h.addRow(-inf, 0.0, len(columns) + 1, np.array(columns + [i], dtype=np.int32),
                 np.array([1.0] * len(columns) + [-float(_domains_per_unit(templates[i], level))]))
    h.changeColsIntegrality(len(integer), np.array(integer, dtype=np.int32),
                            np.array([highspy.HighsVarType.kInteger] * len(integer)))
    h.cbMipInterrupt.subscribe(stop_on_signal)
    with interrupt.deferred():      # Ctrl-C stops the solve (the callback), then the command
        h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        notes.append(f"the capacity model has no answer within the templates' max counts ({h.modelStatusToString(status)})")
        return {t.name: 0 for t in templates}, notes
    values = h.getSolution().col_value
    return {t.name: int(round(values[i])) for i, t in enumerate(templates)}, notes


# ---------------------------------------------------------------- adding nodes

def plan_additions(snapshot: Snapshot, templates: Sequence[NodeTemplate], targets: Sequence[Workload],
                   planner: Planner, max_rounds: int = MAX_EXTRA_ROUNDS) -> CapacityAnswer:
    """The least-cost units of `templates` that let the cycle (`planner`) admit every target."""
    refs = tuple(w.ref for w in targets)
    notes: list[str] = []
    baseline = planner(snapshot)
    admitted = {a.workload for a in baseline.admissions}
    missing = [w for w in targets if w.ref not in admitted]
    blocked: list[QuotaBlock] = []
    ahead: list[Workload] = []
    # in queue order: a target takes the quota those before it leave
    for w in sorted(targets, key=lambda w: (-w.priority, w.queued_at, w.ref.namespace, w.ref.name)):
        block = None if w.ref in admitted else quota_block(snapshot, w, ahead)
        if block is None:
            ahead.append(w)
        else:   # said once, in quota_blocked
            blocked.append(block)
    blocked_refs = {b.workload for b in blocked}
    zero = {t.name: 0 for t in templates}
    cut: list[str] = [f"no nodes ({why})" for why in [_cut_short(baseline)] if why]
    if not [w for w in missing if w.ref not in blocked_refs]:
        if not missing:
            notes.append("every target is admitted without new nodes")
        notes.extend(_cut_notes(cut))
        return _answer(refs, zero, zero, templates, (), baseline, blocked, notes)
    # sized for every target nodes can help, the ones admitted today too: they need room as well
    wanted = [w for w in targets if w.ref not in blocked_refs]
    # notes only on targets the cycle leaves waiting today: on the others they are noise
    units, size_notes = size_units(snapshot, templates, wanted, threads=snapshot.policy.threads,
                                   noted=frozenset(w.ref for w in missing))
    notes.extend(size_notes)
    chosen = dict(units)
    tried = [dict(chosen)]
    fresh: frozenset[ObjectRef] = frozenset()
    best: tuple[int, float, dict[str, int], tuple[Node, ...], Plan] | None = None
    stale = 0
    for round_ in range(max_rounds + 1):
        nodes = added_nodes(snapshot, templates, chosen)
        plan = planner(replace(snapshot, nodes=tuple(sorted(snapshot.nodes + nodes, key=lambda n: n.name))))
        why = _cut_short(plan)
        if why:
            cut.append(f"{_units_text(chosen)} ({why})")
        admitted = {a.workload for a in plan.admissions}
        still = [w for w in wanted if w.ref not in admitted]
        cost = sum(t.cost * chosen.get(t.name, 0) for t in templates)
        if best is None or len(wanted) - len(still) > best[0] or \
                (len(wanted) - len(still) == best[0] and cost < best[1]):
            best, stale = (len(wanted) - len(still), cost, dict(chosen), nodes, plan), 0
        else:
            stale += 1
        if not still:
            break
        if round_ == max_rounds or stale >= MAX_STALE_ROUNDS:
            notes.append(f"stopped after {round_} more tries: {', '.join(str(w.ref) for w in still)} still wait; "
                         f"the answer is the cheapest tried that admits the most targets")
            break
        waiting = ", ".join(str(w.ref) for w in still)
        # first: the capacity model again, the waiting required-topology targets on new domains
        fresh = fresh | {w.ref for w in still if any(ps.topology.mode == "required" for ps in w.pod_sets)}
        again, _ = size_units(snapshot, templates, wanted, threads=snapshot.policy.threads, fresh=fresh)
        if again not in tried and any(again.values()):
            notes.append(f"the cycle still left {waiting} waiting with {_units_text(chosen)}: "
                         f"sized again with a new domain for each waiting required-topology target: "
                         f"{_units_text(again)}")
            chosen = again
            tried.append(dict(chosen))
            continue
        # else: one more unit of the cheapest template that could hold a waiting target
        extra = _cheapest_for(snapshot, templates, still, chosen)
        if extra is None:
            notes.append(f"no template can take more units for {waiting}")
            break
        notes.append(f"the cycle still left {waiting} waiting with {_units_text(chosen)}: tried one more {extra}")
        chosen[extra] = chosen.get(extra, 0) + 1
        tried.append(dict(chosen))
    notes.extend(_cut_notes(cut))
    assert best is not None
    _, _, chosen, nodes, plan = best
    return replace(_answer(refs, chosen, units, templates, nodes, plan, blocked, notes),
                   tried=tuple(t for t in tried if any(t.values())))


def _cut_short(plan: Plan) -> str:
    """Why `plan`'s search stopped before it was complete, or "" when it did not: a MILP
    plan not proven optimal (a time limit or gap), or a fallback (the MILP's plan not
    used, or Kueue's way not finished by its deadline: `message` says which). Kueue's
    way that finished is complete: it is a replay bounded by its work."""
    report = plan.solver
    if report.status == "optimal" or (report.method == "greedy" and report.status != "fallback"):
        return ""
    return f"{report.method} {report.status}" + (f": {report.message}" if report.message else "")


def _cut_notes(cut: Sequence[str]) -> list[str]:
    """The note that says which tries a cut-short search planned (none when none was)."""
    if not cut:
        return []
    return [f"the cycle's search was cut short planning with {'; '.join(cut)}: what those tries admit, "
            f"and so the answer, may change with more time"]


def _units_text(units: Mapping[str, int]) -> str:
    return ", ".join(f"{n} x{c}" for n, c in sorted(units.items()) if c) or "no units"


def _cheapest_for(snapshot: Snapshot, templates: Sequence[NodeTemplate], still: Sequence[Workload],
                  chosen: Mapping[str, int]) -> str | None:
    """The cheapest template with units left that can hold a pod of a waiting target (a
    whole required-topology pod set, for those)."""
    best: NodeTemplate | None = None
    for t in templates:
        if chosen.get(t.name, 0) >= t.max_units:
            continue
        sample = unit_nodes(t, 1)[0]
        useful = any(_holds(t, ps) and _eligible(snapshot, w, ps, sample) for w in still for ps in w.pod_sets)
        if useful and (best is None or t.cost < best.cost):
            best = t
    return best.name if best else None


def _holds(template: NodeTemplate, ps: PodSet) -> bool:
    if ps.topology.mode == "required" and ps.topology.level is not None:
        return _domain_pods(template, ps, ps.topology.level) >= (ps.min_count or ps.count)
    return ps.request.pods_fitting(template.allocatable) > 0


def _answer(refs: tuple[ObjectRef, ...], units: Mapping[str, int], milp_units: Mapping[str, int],
            templates: Sequence[NodeTemplate], nodes: Sequence[Node], plan: Plan,
            blocked: Sequence[QuotaBlock], notes: Sequence[str]) -> CapacityAnswer:
    admitted = {a.workload for a in plan.admissions}
    cost = sum(t.cost * units.get(t.name, 0) for t in templates)
    return CapacityAnswer(
        targets=refs, units=dict(units), milp_units=dict(milp_units), cost=cost,
        added_nodes=tuple(n.name for n in nodes), plan=plan,
        admitted=tuple(r for r in refs if r in admitted),
        waiting=tuple(r for r in refs if r not in admitted),
        quota_blocked=tuple(blocked), notes=tuple(notes))


# ---------------------------------------------------------------- draining

def parse_selector(text: str) -> label_selector.Selector:
    """A `--remove-nodes` label selector, parsed exactly as kubectl parses `-l`
    (equality, set-based `in`/`notin`, `KEY`, `!KEY`, commas); InputError (exit 2)
    naming the flag when it is malformed."""
    return label_selector.parse(text, field="--remove-nodes")


def selects(selector: label_selector.Selector, labels: Mapping[str, str]) -> bool:
    return label_selector.matches(selector, labels)


def drained_nodes(snapshot: Snapshot, selector: label_selector.Selector) -> tuple[str, ...]:
    """The names of the nodes `selector` matches, sorted."""
    return tuple(sorted(n.name for n in snapshot.nodes if selects(selector, n.labels)))


def plan_drain(snapshot: Snapshot, selector: label_selector.Selector, planner: Planner) -> DrainAnswer:
    """Remove the nodes `selector` matches; their running workloads wait again; plan."""
    removed = {n.name for n in snapshot.nodes if selects(selector, n.labels)}
    displaced: list[Workload] = []
    workloads: list[Workload] = []
    for w in snapshot.workloads:
        if w.state == WorkloadState.RUNNING and _runs_on(w) & removed:
            moved = replace(w, state=WorkloadState.PENDING, assignment=(), admitted_at=None)
            displaced.append(moved)
            workloads.append(moved)
        else:
            workloads.append(w)
    drained = replace(snapshot, nodes=tuple(n for n in snapshot.nodes if n.name not in removed),
                      workloads=tuple(workloads))
    plan = planner(drained)
    admissions = {a.workload: a for a in plan.admissions}
    waits = {p.workload: p.reason for p in plan.pending}
    outcomes = []
    before = {w.ref: w for w in snapshot.workloads}
    for w in displaced:
        admission = admissions.get(w.ref)
        ran = before[w.ref]
        cost = eviction_cost(ran, snapshot)
        if admission is not None:
            to = tuple(_hosts(admission.pod_sets))
            outcome = "admitted on " + ", ".join(f"{host} x{count}" for host, count in to)
            outcomes.append(Displaced(w.ref, outcome, tuple(_hosts(ran.assignment)), to, cost))
        else:
            reason = waits.get(w.ref, "not admitted")
            outcomes.append(Displaced(w.ref, f"waits: {reason}", tuple(_hosts(ran.assignment)), (), cost, reason))
    return DrainAnswer(tuple(sorted(removed)), tuple(outcomes), plan)


def _runs_on(w: Workload) -> set[str]:
    return {host for host, _ in _hosts(w.assignment)}


def _hosts(assignments: Iterable[PodSetAssignment]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for a in assignments:
        if HOSTNAME_LABEL not in a.levels:
            continue
        at = a.levels.index(HOSTNAME_LABEL)
        for values, count in a.domains:
            counts[values[at]] = counts.get(values[at], 0) + count
    return sorted(counts.items())


# ---------------------------------------------------------------- the answers as plain data and lines

def capacity_to_dict(answer: CapacityAnswer, templates: Sequence[NodeTemplate]) -> dict[str, object]:
    return {
        "addNodes": [
            {"template": t.name, "per": t.per, "units": answer.units.get(t.name, 0),
             "nodes": answer.units.get(t.name, 0) * t.hosts, "cost": t.cost * answer.units.get(t.name, 0)}
            for t in templates],
        "cost": answer.cost,
        "capacityModel": dict(answer.milp_units),
        "addedNodes": list(answer.added_nodes),
        "targets": [str(r) for r in answer.targets],
        "admitted": [str(r) for r in answer.admitted],
        "waiting": [str(r) for r in answer.waiting],
        "quotaBlocked": [
            {"workload": str(b.workload), "clusterQueue": b.cluster_queue, "flavor": b.flavor,
             "resource": b.resource, "need": b.need, "available": b.available, "reason": b.reason}
            for b in answer.quota_blocked],
        "notes": list(answer.notes),
    }


def _plural(count: int, noun: str, plural: str = "") -> str:
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"


def capacity_lines(answer: CapacityAnswer, templates: Sequence[NodeTemplate]) -> list[str]:
    added = [f"{answer.units[t.name]} x {t.name} ({t.per}, {_plural(answer.units[t.name] * t.hosts, 'node')}, "
             f"cost {t.cost * answer.units[t.name]:g})" for t in templates if answer.units.get(t.name)]
    if added:
        head = ", ".join(added)
    elif answer.tried:   # additions were planned with, and none admitted more targets than none
        head = (f"none: no addition tried admits more targets "
                f"(tried {'; '.join(_units_text(t) for t in answer.tried)})")
    else:
        head = "none"
    lines = [f"Add nodes: {head}; total cost {answer.cost:g}",
             f"Targets: {len(answer.targets)}, admitted with them: {len(answer.admitted)}, "
             f"still waiting: {len(answer.waiting)}"]
    lines += [f"  quota, not nodes: {b.workload}: {b.reason}" for b in answer.quota_blocked]
    lines += [f"  waits: {r}" for r in answer.waiting if r not in {b.workload for b in answer.quota_blocked}]
    lines += [f"  note: {n}" for n in answer.notes]
    return lines


def _displaced_to_dict(d: Displaced) -> dict[str, object]:
    out: dict[str, object] = {
        "workload": {"kind": d.workload.kind, "namespace": d.workload.namespace, "name": d.workload.name},
        "from": [{"node": host, "count": count} for host, count in d.from_],
        "to": [{"node": host, "count": count} for host, count in d.to] if d.to else None,
        "cost": d.cost,
        "outcome": d.outcome,
    }
    if d.reason:
        out["reason"] = d.reason
    return out


def drain_to_dict(answer: DrainAnswer) -> dict[str, object]:
    return {"removedNodes": list(answer.removed_nodes),
            "displaced": [_displaced_to_dict(d) for d in answer.displaced]}


def drain_lines(answer: DrainAnswer) -> list[str]:
    lines = [f"Removed {_plural(len(answer.removed_nodes), 'node')}: {', '.join(answer.removed_nodes) or 'none'}",
             f"Displaced: {_plural(len(answer.displaced), 'running workload')}"]
    lines += [f"  {d.workload}: {d.outcome}" for d in answer.displaced]
    return lines
