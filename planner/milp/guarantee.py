"""Nominal quota is a guarantee: the MILP's stability rows (REFERENCE §3).

Kueue lends a ClusterQueue's unused nominal quota to its cohort and takes it back
("reclamation within the cohort") as soon as the queue has work that fits inside
it. A plan that leaves such work waiting while borrowers its queue may reclaim run
is one Kueue undoes within a cycle. These rows keep every such plan out of the
model; the objective then ranks the plans that remain. The verifier checks the same
rule on its own (planner/verify/stable.py), and every plan these rows allow passes it.

For a waiting workload w of queue q (a pending class with members left out; a victim
the plan evicts is requeued and left to the next cycle) whose queue reclaims (BestEffortFIFO,
`reclaimWithinCohort` Any or LowerPriority), and each flavor choice f of w whose
request t(fr) could fit q's nominal quota, with F the flavor/resources of f:

    B[q,F,p] <= (w admitted) + sum over fr in F of psi[q,fr,t(fr)]

(for a class of several members, "w admitted" is a binary that is 1 only when all are)

    psi[q,fr,t] = 1 only if usage(q,fr) > nominal(q,fr) - t      ("no room for t")
    sigma[q',fr] = 1 if usage(q',fr) > nominal(q',fr)             ("q' borrows fr")
    kappa[q',F,p] = 1 if q' runs a workload w may reclaim         (some candidate)
    B[q,F,p] >= sigma[q',fr] + kappa[q',F,p] - 1 for every other queue q' of the
               tree and fr in F          (p: w's priority, for LowerPriority)

So: admit w, or leave q no room for it, or let nobody it could reclaim borrow what
it needs. Usage is each queue's own (running work, less evictions, plus admissions),
the same linear expression as the quota rows, held once per queue and flavor/resource
in a column U that the rows read.

The rows ask more than Kueue in two ways, never less: they need no node room (a
borrower that holds no node w could use still counts), and they ignore that Kueue
stops reclaiming from a queue once it is back within nominal. The first is eased by
leaving out choices w could not be placed under even if every evictable running
workload were gone (then no reclaim can help, in any plan).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from models import ClusterQueue, FlavorResource, ObjectRef, PodSet, Resources, Snapshot, Workload
from planner.kueue import capacity, semantics, topology
from planner.milp.arrays import INF, ModelArrays

from planner.milp.rows import Formulation, OptionColumns, queue_usage_terms, resource_steps, resource_units

if TYPE_CHECKING:
    from models import ResourceFlavor

Terms = list[tuple[int, float]]
MAX_CHOICES = 16    # flavor combinations per multi-pod-set workload


@dataclass
class Guarantee:
    """The columns the stability rows add, with what sets each in a start."""

    # whole: (column, a column, members): 1 when every member of a class is admitted.
    whole: list[tuple[int, int, float]] = field(default_factory=list)
    # U: (column, terms): a queue's usage less its running constant, where the plan moves it.
    usage: list[tuple[int, Terms]] = field(default_factory=list)
    # psi: (column, usage terms, constant, threshold): 1 when usage >= threshold ("no room").
    room: list[tuple[int, Terms, float, float]] = field(default_factory=list)
    # sigma: (column, usage terms, constant, nominal): 1 when usage > nominal ("borrows").
    borrows: list[tuple[int, Terms, float, float]] = field(default_factory=list)
    # kappa: (column, [(col, 1.0) admitted | (col, -1.0) evicted]): 1 when a candidate runs.
    present: list[tuple[int, Terms]] = field(default_factory=list)
    # B: (column, [(sigma or None, kappa or None)]): 1 when some pair is 1 (None: always 1).
    blocked: list[tuple[int, list[tuple[int | None, int | None]]]] = field(default_factory=list)
    rows: list[tuple[int, ObjectRef]] = field(default_factory=list)   # the stability rows, with their workloads


def reclaims(cq: ClusterQueue) -> bool:
    """Does Kueue try this queue's waiting work against its cohort's borrowers?"""
    return (cq.cohort is not None and cq.queueing_strategy != "StrictFIFO"
            and cq.preemption.reclaim_within_cohort in ("Any", "LowerPriority"))


def add_guarantee_rows(model: Formulation) -> None:
    """The stability rows of `model` (a planner.milp.rows.Formulation), in place."""
    snapshot = model.snapshot
    builder = _Builder(model, queue_usage_terms(model), resource_units(model), resource_steps(model))
    by_class: dict[int, dict[int, list[OptionColumns]]] = defaultdict(lambda: defaultdict(list))
    for choice in model.choices:
        by_class[choice.workload][choice.pod_set].append(choice)
    for w, (workload, members) in enumerate(zip(model.workloads, model.members)):
        if w in model.clones:
            continue   # a mover's re-admission: it runs whether it moves or not
        cq = snapshot.cluster_queues[workload.queue_name]
        if not reclaims(cq):
            continue
        per_pod_set = [[c.option for c in by_class[w][p]] for p in range(len(workload.pod_sets))]
        # "every member admitted": a itself for a class of one; for more, a binary
        # `whole` with members * whole <= a.
        whole = model.admit_col[w]
        if len(members) > 1:
            whole = model.arrays.add_binary(f"whole[{workload.ref}]")
            model.arrays.add_row(f"all[{workload.ref}]", [(whole, float(len(members))), (model.admit_col[w], -1.0)],
                                 -INF, 0.0)
            builder.guarantee.whole.append((whole, model.admit_col[w], float(len(members))))
        builder.add(workload, cq, per_pod_set, [(whole, -1.0)], 0.0)
    model.guarantee = builder.guarantee


class _Builder:
    """Columns shared between rows (psi per queue, flavor/resource and request; sigma per
    queue and flavor/resource; kappa and B per need), made on first use."""

    def __init__(self, model: Formulation, usage: dict[str, dict[FlavorResource, Terms]], units: dict[str, float],
                 steps: dict[str, int]):
        self.model, self.usage, self.units, self.steps = model, usage, units, steps
        self.snapshot: Snapshot = model.snapshot
        self.tree: semantics.QuotaTree = model.quota_tree
        self.running = capacity.cluster_queue_usage(self.snapshot)
        self.guarantee = Guarantee()
        self._psi: dict[tuple[str, FlavorResource, int], int | None] = {}
        self._sigma: dict[tuple[str, FlavorResource], int | None | bool] = {}
        self._kappa: dict[tuple[str, frozenset[FlavorResource], int | None], int | None] = {}
        self._blocked: dict[tuple[str, frozenset[FlavorResource], int | None], int | None | bool] = {}
        self._placeable: dict[tuple[Any, ...], bool] = {}
        self._beta: dict[tuple[str, FlavorResource], int | None | bool] = {}
        self._usage_cols: dict[tuple[str, FlavorResource], tuple[Terms, float, float, float, float]] = {}
        self._room = _reclaim_room(model)
        self._members = self._queue_members()

    # -- one waiting workload

    def add(self, workload: Workload, cq: ClusterQueue, per_pod_set: list[list[semantics.FlavorOption]],
            waiting: Terms, bound: float) -> None:
        """Rows for `workload` in `cq`: sum(B) ... each row is B - psi... + waiting <= bound."""
        if any(not options for options in per_pod_set):
            return  # some pod set has no flavor at all: it can never run
        key = f"cq:{cq.name}"
        threshold = None if cq.preemption.reclaim_within_cohort == "Any" else workload.priority
        for combo in itertools.islice(itertools.product(*per_pod_set), MAX_CHOICES):
            need: dict[FlavorResource, int] = defaultdict(int)
            for pod_set, option in zip(workload.pod_sets, combo):
                for fr, amount in semantics.quota_usage(pod_set, option, pod_set.minimum).items():
                    need[fr] += amount
            need = {fr: v for fr, v in need.items() if v > 0}
            if not need or not all(self._placeable_under(ps, option) for ps, option in zip(workload.pod_sets, combo)):
                continue
            psis: list[int] = []
            possible = True
            for fr, amount in sorted(need.items()):
                psi = self._psi_col(key, fr, amount)
                if psi is False:
                    possible = False  # usage already leaves no room for it, whatever the plan
                    break
                if psi is not None:
                    psis.append(psi)
            if not possible:
                continue
            blocked = self._blocked_col(key, frozenset(need), threshold)
            if blocked is None:
                continue  # nobody it could reclaim can borrow what it needs
            terms = waiting + [(p, -1.0) for p in psis]
            upper = bound
            if blocked is True:
                upper -= 1.0
            else:
                terms.append((blocked, 1.0))
            row = self.model.arrays.add_row(f"guarantee[{workload.ref},{'+'.join(option.flavors[0] for option in combo)}]",
                                            terms, -INF, upper)
            self.guarantee.rows.append((row, workload.ref))

    # -- psi: no room in the queue's nominal quota for `amount`

    def _scaled(self, key: str, fr: FlavorResource) -> tuple[Terms, float, float, float, float]:
        """usage(key, fr) / unit as (terms, constant, lowest, highest, unit). Where the plan
        can change it, the terms are one column U = usage - constant (defined once, so
        the rows that read it do not repeat the whole queue's admissions and evictions)."""
        cache = (key, fr)
        if cache in self._usage_cols:
            return self._usage_cols[cache]
        unit = float(self.units.get(fr[1], 1))
        terms = [(col, coef / unit) for col, coef in self.usage.get(key, {}).get(fr, [])]
        constant = self.running.get(key, {}).get(fr, 0) / unit
        upper = self.model.arrays.col_upper
        low = constant + sum(k * upper[c] for c, k in terms if k < 0)
        high = constant + sum(k * upper[c] for c, k in terms if k > 0)
        if len(terms) > 1:
            arrays = self.model.arrays
            col = arrays.add_col(f"U[{key},{fr[0]},{fr[1]}]", low - constant, high - constant)
            arrays.add_row(f"usage[{key},{fr[0]},{fr[1]}]", [(col, 1.0)] + [(c, -k) for c, k in terms], 0.0, 0.0)
            self.guarantee.usage.append((col, terms))
            terms = [(col, 1.0)]
        found = self._usage_cols[cache] = (terms, constant, low, high, unit)
        return found

    def _psi_col(self, key: str, fr: FlavorResource, amount: int) -> int | None | bool:
        """The psi column; None when the queue always has room (psi = 0), False when it never does."""
        cache = (key, fr, amount)
        if cache in self._psi:
            return self._psi[cache]
        terms, constant, low, high, unit = self._scaled(key, fr)
        # Usage moves in whole steps from its constant: the least value above nominal - amount.
        step = self.steps.get(fr[1], 1)
        native = self.running.get(key, {}).get(fr, 0)
        limit = self.tree.limits(key, fr)[0] - amount
        threshold = (native + step * ((limit - native) // step + 1)) / unit
        found: int | None | bool
        if low >= threshold:
            found = False
        elif high < threshold or not terms:
            found = None
        else:
            found = self.model.arrays.add_binary(f"psi[{key},{fr[0]},{fr[1]},{amount}]")
            # usage >= threshold * psi
            self.model.arrays.add_row(f"room[{key},{fr[0]},{fr[1]},{amount}]",
                                      terms + [(found, -threshold)], -constant, INF)
            self.guarantee.room.append((found, terms, constant, threshold))
        self._psi[cache] = found
        return found

    # -- sigma: another queue borrows

    def _sigma_col(self, key: str, fr: FlavorResource) -> int | None | bool:
        """The sigma column; None when the queue never borrows fr, True when it always does."""
        cache = (key, fr)
        if cache in self._sigma:
            return self._sigma[cache]
        terms, constant, low, high, unit = self._scaled(key, fr)
        nominal = self.tree.limits(key, fr)[0] / unit
        found: int | None | bool
        if high <= nominal + 1e-9:
            found = None
        elif low > nominal + 1e-9:
            found = True
        else:
            found = self.model.arrays.add_binary(f"sigma[{key},{fr[0]},{fr[1]}]")
            # usage <= nominal + (highest - nominal) * sigma
            self.model.arrays.add_row(f"borrows[{key},{fr[0]},{fr[1]}]",
                                      terms + [(found, -(high - nominal))], -INF, nominal - constant)
            self.guarantee.borrows.append((found, terms, constant, nominal))
        self._sigma[cache] = found
        return found

    # -- kappa: a workload `threshold` may reclaim runs in the queue

    def _queue_members(self) -> dict[str, list[tuple[Workload, Terms]]]:
        """Per queue, what may run there after the plan: (workload, its presence) where
        presence is [] for work that runs whatever the plan, [(e, -1)] for a victim
        (present unless evicted) and [(a, 1)] for a pending class (present if admitted).
        Only work that could be evicted counts: non-preemptible work and work younger
        than the minimum runtime (admissions of this plan are) are never candidates."""
        model, snapshot = self.model, self.snapshot
        out: dict[str, list[tuple[Workload, Terms]]] = defaultdict(list)
        victims = {v.ref: e for v, e in zip(model.victims, model.evict_col)}
        for w in capacity.running(snapshot):
            if semantics.evictable(w, snapshot) and w.cluster_queue is not None:
                presence = [(victims[w.ref], -1.0)] if w.ref in victims else []
                out[f"cq:{w.cluster_queue}"].append((w, presence))
        if snapshot.policy.minimum_runtime_seconds <= 0:
            for index, (workload, col) in enumerate(zip(model.workloads, model.admit_col)):
                if not workload.non_preemptible and index not in model.clones:
                    out[f"cq:{workload.cluster_queue}"].append((workload, [(col, 1.0)]))
        return out

    def _kappa_col(self, key: str, frs: frozenset[FlavorResource], threshold: int | None) -> int | None | bool:
        """The kappa column; None when no candidate can run there, True when one always does."""
        cache = (key, frs, threshold)
        if cache in self._kappa:
            return self._kappa[cache]
        presences: list[Terms] = []
        always = False
        for w, presence in self._members.get(key, ()):
            if threshold is not None and not w.priority < threshold:
                continue
            if not (self._uses(w) & frs):
                continue
            if not presence:
                always = True
                break
            presences.append(presence)
        found: int | None | bool
        if always:
            found = True
        elif not presences:
            found = None
        else:
            found = self.model.arrays.add_binary(f"kappa[{key},{len(self.guarantee.present)}]")
            upper = self.model.arrays.col_upper
            for presence in presences:
                (col, sign), = presence
                if sign > 0:   # kappa >= a / members
                    self.model.arrays.add_row(f"cand[{found},{col}]", [(found, 1.0), (col, -1.0 / upper[col])], 0.0, INF)
                else:          # kappa >= 1 - e
                    self.model.arrays.add_row(f"cand[{found},{col}]", [(found, 1.0), (col, 1.0)], 1.0, INF)
            self.guarantee.present.append((found, [p[0] for p in presences]))
        self._kappa[cache] = found
        return found

    def _uses(self, w: Workload) -> set[FlavorResource]:
        """Flavor/resources a workload uses (running) or might use (pending: any option)."""
        if w.assignment:
            return {fr for fr, v in capacity.quota_usage_of(w).items() if v > 0}
        cq = self.snapshot.cluster_queues[w.queue_name]
        out: set[FlavorResource] = set()
        for pod_set in w.pod_sets:
            options = semantics.flavor_options(self.snapshot, cq, pod_set)
            for option in [] if isinstance(options, str) else options:
                out.update(fr for fr, v in semantics.quota_usage(pod_set, option, 1).items() if v > 0)
        return out

    # -- B: someone the workload could reclaim borrows fr

    def _blocked_col(self, key: str, frs: frozenset[FlavorResource], threshold: int | None) -> int | None | bool:
        """B: 1 when some other queue of the tree borrows one of `frs` while running a
        workload the waiting one may reclaim (None: never; True: always).

        For `Any`, a queue that always runs a workload using fr that may be evicted
        (running, not a victim of the plan, evictable) is covered by one indicator per
        tree and flavor/resource, beta (some such queue borrows fr): few binaries that a
        search can branch on. The waiting workload's own queue is among them: when it is
        the one that borrows fr, it has no room for the workload in fr, so psi can be 1."""
        cache = (key, frs, threshold)
        if cache in self._blocked:
            return self._blocked[cache]
        root = self.tree.root_of(key)
        pairs: list[tuple[int | None, int | None]] = []
        always = False
        for fr in sorted(frs):
            beta = self._beta_col(root, fr) if threshold is None else None
            if beta is True:
                always = True
                break
            if beta is not None:
                pairs.append((beta, None))
        for other in [] if always else self.tree.nodes():
            if other == key or not other.startswith("cq:") or self.tree.root_of(other) != root:
                continue
            kappa = self._kappa_col(other, frs, threshold)
            if kappa is None:
                continue
            for fr in sorted(frs):
                if threshold is None and self._covered(other, fr):
                    continue   # held by beta
                sigma = self._sigma_col(other, fr)
                if sigma is None:
                    continue
                if sigma is True and kappa is True:
                    always = True
                    break
                pairs.append((None if sigma is True else sigma, None if kappa is True else kappa))
            if always:
                break
        found: int | None | bool
        if always:
            found = True
        elif not pairs:
            found = None
        else:
            found = self.model.arrays.add_col(f"B[{key},{len(self.guarantee.blocked)}]", 0.0, 1.0)
            for sigma, kappa in pairs:
                # B >= sigma + kappa - 1 (a constant 1 for the one that always holds)
                terms = [(found, 1.0)] + [(c, -1.0) for c in (sigma, kappa) if c is not None]
                lower = -1.0 + sum(1.0 for c in (sigma, kappa) if c is None)
                self.model.arrays.add_row(f"blocked[{found},{sigma},{kappa}]", terms, lower, INF)
            self.guarantee.blocked.append((found, pairs))
        self._blocked[cache] = found
        return found

    def _covered(self, key: str, fr: FlavorResource) -> bool:
        """Does queue `key` always run an evictable workload using fr, whatever the plan?"""
        return any(not presence and fr in self._uses(w) for w, presence in self._members.get(key, ()))

    def _beta_col(self, root: str, fr: FlavorResource) -> int | None | bool:
        """beta: 1 when some covered queue of the tree rooted at `root` borrows fr."""
        cache = (root, fr)
        if cache in self._beta:
            return self._beta[cache]
        rows: list[tuple[Terms, float, float, float]] = []
        found: int | None | bool = None
        for key in self.tree.nodes():
            if not key.startswith("cq:") or self.tree.root_of(key) != root or not self._covered(key, fr):
                continue
            terms, constant, low, high, unit = self._scaled(key, fr)
            nominal = self.tree.limits(key, fr)[0] / unit
            if high <= nominal + 1e-9:
                continue
            if low > nominal + 1e-9:
                found = True
                break
            rows.append((terms, constant, high, nominal))
        if found is None and rows:
            found = self.model.arrays.add_binary(f"beta[{root},{fr[0]},{fr[1]}]")
            for terms, constant, high, nominal in rows:
                # usage <= nominal + (highest - nominal) * beta, for every covered queue
                self.model.arrays.add_row(f"borrows[{root},{fr[0]},{fr[1]},{len(self.guarantee.borrows)}]",
                                          terms + [(found, -(high - nominal))], -INF, nominal - constant)
                self.guarantee.borrows.append((found, terms, constant, nominal))
        self._beta[cache] = found
        return found

    # -- could a reclaim ever make room on nodes?

    def _placeable_under(self, pod_set: PodSet, option: semantics.FlavorOption) -> bool:
        """Could `pod_set` run under `option` with every evictable running workload gone?
        (Per pod set, slices aside: a necessary condition, so leaving a choice out when it
        fails never lets an unstable plan through.)"""
        key = (pod_set.request, pod_set.tolerations, tuple(sorted(pod_set.node_selector.items())),
               option.flavors, pod_set.minimum, pod_set.topology.mode, pod_set.topology.level)
        if key not in self._placeable:
            self._placeable[key] = self._room.placeable(self.snapshot, pod_set, option)
        return self._placeable[key]


class _ReclaimRoom:
    """Free node capacity with every evictable running workload gone, as a nodes x
    resources matrix, with each shape's eligible nodes and their domains worked out once."""

    def __init__(self, snapshot: Snapshot, room: dict[str, Resources]):
        self.snapshot = snapshot
        self.nodes = sorted(room)
        self.resources = sorted({r for amounts in room.values() for r in amounts.names()})
        self.column = {r: j for j, r in enumerate(self.resources)}
        self.matrix = np.zeros((len(self.nodes), len(self.resources)), dtype=np.int64)
        for i, name in enumerate(self.nodes):
            for r, v in room[name].items():
                self.matrix[i, self.column[r]] = v
        by_name = {n.name: n for n in snapshot.nodes}
        self.node_objs = [by_name[n] for n in self.nodes]
        self._paths: dict[tuple[str, ...], list[tuple[str, ...] | None]] = {}
        self._domains: dict[tuple[Any, ...], np.ndarray] = {}

    def paths(self, levels: tuple[str, ...]) -> list[tuple[str, ...] | None]:
        if levels not in self._paths:
            self._paths[levels] = [topology.node_path(n, levels) for n in self.node_objs]
        return self._paths[levels]

    def domains(self, pod_set: PodSet, flavors: list[ResourceFlavor], levels: tuple[str, ...], level: int | None) -> np.ndarray:
        """Per node, the index of its domain at `level` (0 for all at the root), -1 where
        the pod set may not run."""
        key = (tuple(f.name for f in flavors), tuple(sorted(pod_set.node_selector.items())),
               pod_set.tolerations, levels, level)
        found = self._domains.get(key)
        if found is None:
            keys = sorted({k for f in flavors for k in f.node_labels} | set(pod_set.node_selector))
            allowed: dict[tuple[object, ...], bool] = {}
            index: dict[tuple[str, ...], int] = {}
            found = np.full(len(self.nodes), -1, dtype=np.int64)
            for i, (node, path) in enumerate(zip(self.node_objs, self.paths(levels))):
                kind = (node.usable, node.taints, *(node.labels.get(k) for k in keys))
                if kind not in allowed:
                    allowed[kind] = semantics.node_allows(node, flavors, pod_set)
                if allowed[kind] and path is not None:
                    found[i] = index.setdefault(path[: level + 1] if level is not None else (), len(index))
            self._domains[key] = found
        return found

    def placeable(self, snapshot: Snapshot, pod_set: PodSet, option: semantics.FlavorOption) -> bool:
        flavors = [snapshot.flavors[f] for f in option.flavors]
        levels = topology.levels_for(snapshot, flavors)
        request = pod_set.topology
        level = topology.level_index(levels, request.level) if request.mode == "required" else None
        if request.mode == "required" and level is None:
            return False
        counts = np.full(len(self.nodes), np.iinfo(np.int64).max, dtype=np.int64)
        for resource, amount in pod_set.request.items():
            if amount > 0:
                j = self.column.get(resource)
                here = self.matrix[:, j] // amount if j is not None else np.zeros(len(self.nodes), dtype=np.int64)
                counts = np.minimum(counts, np.maximum(here, 0))
        domains = self.domains(pod_set, flavors, levels, level)
        mine = domains >= 0
        if not mine.any():
            return False
        totals = np.bincount(domains[mine], weights=counts[mine].astype(np.float64))
        return bool((totals >= pod_set.minimum).any())


def _reclaim_room(model: Formulation) -> _ReclaimRoom:
    """The model's room (free capacity with every victim gone) plus what the evictable
    running workloads that are not victims use."""
    snapshot = model.snapshot
    room = dict(model.room)
    victims = {v.ref for v in model.victims}
    for w in capacity.running(snapshot):
        if w.ref not in victims and semantics.evictable(w, snapshot):
            for node, used in capacity.node_usage_of(w).items():
                if node in room and node not in model.overcommitted:
                    room[node] = room[node] + used
    return _ReclaimRoom(snapshot, room)


def fill_guarantee_columns(guarantee: Guarantee | None, values: np.ndarray) -> None:
    """psi, sigma, kappa and B as the decisions in `values` make them (a start)."""
    if guarantee is None:
        return

    def usage(terms: Terms, constant: float) -> float:
        return float(constant + sum(k * values[c] for c, k in terms))

    for col, admitted, members in guarantee.whole:
        values[col] = 1.0 if values[admitted] >= members - 1e-6 else 0.0
    for col, terms in guarantee.usage:
        values[col] = usage(terms, 0.0)
    for col, terms, constant, threshold in guarantee.room:
        values[col] = 1.0 if usage(terms, constant) >= threshold - 1e-6 else 0.0
    for col, _, _, _ in guarantee.borrows:
        values[col] = 0.0
    for col, terms, constant, nominal in guarantee.borrows:   # beta shares its column over queues
        if usage(terms, constant) > nominal + 1e-6:
            values[col] = 1.0
    for col, presence in guarantee.present:
        values[col] = 1.0 if any((values[c] > 0.5) == (k > 0) for c, k in presence) else 0.0
    for col, pairs in guarantee.blocked:
        values[col] = 1.0 if any(all(c is None or values[c] > 0.5 for c in pair) for pair in pairs) else 0.0


def lifted(arrays: ModelArrays, found: Guarantee | None) -> ModelArrays:
    """`arrays` (a ModelArrays) with the stability rows lifted: their columns stay and may
    take any value. A relaxation of the model, for the cycle's relaxed pass."""
    upper = list(arrays.row_upper)
    for row, _ in found.rows if found is not None else ():
        upper[row] = INF
    return replace(arrays, row_upper=upper)
