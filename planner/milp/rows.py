"""Snapshot -> one MILP, as arrays. One function per constraint family.

Identical pending workloads (same queue, priority, pod sets and topology requests)
form one class w of N members, decided by counts: the oldest members are the ones
admitted. Most classes have one member, where the integers below are binaries.

Variables (no (workload, node) pairs, so the model grows with shapes and domains):
  a[w]        integer members of class w admitted (gang: all pod sets of each, or none)
  u[p,f]      integer members whose pod set p takes flavor option f
  c[p,f]      integer pods of p under f (elastic pod sets only; else count * u)
  x[p,f,d]    integer members placed in domain d at p's required level
  n[p,f,d]    integer pods of p in domain d (preferred level, or elastic in a required domain)
  k[p,f,e]    integer slices of p in domain e at its slice level
  z[p,f,d]    binary  p uses domain d (preferred: counts domains spanned)
  y[K,node]   integer pods of shape K put on a node (shape = request, node constraints, flavors)
  b[q,fr]     continuous quota a queue/cohort draws from its parent, max(0, usage - guaranteed)
  e[r]        binary  running workload r is evicted (only where Kueue's policies allow it)
  g[c]        binary  some workload of preemptor class c (queue, priority, borrows) is admitted
  h[node]     binary  no new pod lands on an idle node; f[D]: none in an idle domain D

Two models can be built from this: a compact one (no z, h, f; preferred placed like
unconstrained, which it is, hard-constraint-wise) that decides volumes and
preemption cost, and the full one with the tie-breakers' columns too (locality, free
domains). A cycle builds the full one, once (planner.milp.entry), and runs every stage
on it (planner.milp.stages); the compact one is for tests of the volumes alone.

An eviction gives back its nodes' capacity and its quota (e[r] terms in those rows),
takes its volume from its own priority tier, and costs its lost work.

Placement is exact although no variable names a (workload, node) pair: within one
shape K, demands sit at domains of a tree and supply y at its leaves, and a
transportation problem on a laminar family is feasible iff every subtree holds at
least the demand placed inside it (Hall's condition). Node rows couple the shapes:
sum over K of y[K,node] * request_K <= free(node). `decode` turns y back into nodes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from models import HOSTNAME_LABEL, FlavorResource, ObjectRef, PodSet, Resources, Snapshot, Workload, WorkloadState, is_gpu
from models.objects import Toleration
from planner.kueue import capacity, semantics, topology
from planner.kueue.preemption.victims import PreemptionRules
from planner.milp.arrays import INF, ModelArrays
from planner.kueue.semantics import FlavorOption, QuotaTree

if TYPE_CHECKING:   # their rows are added after these (planner.milp.model), from what this module defines
    from planner.milp import guarantee
    from planner.milp.fairness import Fairness
    from planner.milp.model import DemandClass, GroupChoice
    from planner.milp.pools import Pools

Path = tuple[str, ...]
ShapeKey = tuple[Resources, tuple[tuple[str, str], ...], tuple[Toleration, ...], tuple[str, ...]]

# Tie-breaker weights (the final stage, once every priority tier's volume and the
# preemption cost are held at their optimum), in the order of REFERENCE §3: spent
# on what is left to choose once volumes and cost are fixed.
EVICTION_WEIGHT = 2.0    # per eviction: even a free one (cost 0) is never made for nothing
SPAN_WEIGHT = 1.0        # per extra domain a preferred pod set spans
FREE_WEIGHT = 1.0        # all domains kept entirely free, weighted by the volume they keep
AGE_WEIGHT = 0.5         # spread over workloads: older first
FLAVOR_WEIGHT = 0.25     # spread over pod sets: earlier flavor first


@dataclass
class Shape:
    """Pods that are interchangeable for placement: same request, node constraints, flavors."""

    key: ShapeKey
    request: Resources
    levels: tuple[str, ...]
    paths: dict[str, Path]                 # eligible node -> domain path (ends with node)
    fits: dict[str, int] = field(default_factory=dict)     # eligible node -> pods that fit were every victim gone
    supply: dict[str, int] = field(default_factory=dict)   # node -> y column
    domains: dict[int, dict[Path, list[str]]] = field(default_factory=dict)   # level -> domain -> nodes
    rooms: dict[tuple[int, Path], int] = field(default_factory=dict)          # (level, domain) -> pods
    within: dict[tuple[int, int], dict[Path, list[Path]]] = field(default_factory=dict)  # see domains_within
    roomiest: dict[int, list[Path]] = field(default_factory=dict)   # level -> domains, most room first


@dataclass
class Demand:
    """A column (times coef) that places pods of a shape inside the domain `path`."""

    shape: int
    path: Path
    col: int
    coef: float


@dataclass
class OptionColumns:
    """Pod set `pod_set` of workload `workload` under flavor option `option`."""

    workload: int
    pod_set: int
    option: FlavorOption
    shape: int
    use_col: int                            # u[p,f]
    pods: list[tuple[int, float]]           # linear expression of the pod count
    mode: str                               # "root" | "required" | "preferred"
    level: int | None = None                # index into the shape's levels
    slice_layers: list[tuple[int, int]] = field(default_factory=list)  # (level index, size), outer to inner
    domain_cols: dict[Path, int] = field(default_factory=dict)   # x (required) or n (preferred) per domain
    count_cols: dict[Path, int] = field(default_factory=dict)    # n per domain, elastic + required
    slice_cols: list[dict[Path, int]] = field(default_factory=list)  # per layer: k per domain
    span_cols: dict[Path, int] = field(default_factory=dict)     # z per domain
    upper_cols: dict[Path, int] = field(default_factory=dict)    # z per domain above the preferred level
    placed: bool = True                     # its placement columns were built (see `complete`)

    @property
    def slice_level(self) -> int | None:
        """The innermost slice layer's level: where the pods' demands finally sit."""
        return self.slice_layers[-1][0] if self.slice_layers else None

    @property
    def slice_size(self) -> int:
        return self.slice_layers[-1][1] if self.slice_layers else 1


@dataclass
class Formulation:
    """The model, and what decoding it needs. Per class w: `workloads[w]` is its
    representative (oldest member), `members[w]` all of them, `admit_col[w]` its count."""

    arrays: ModelArrays
    snapshot: Snapshot
    workloads: list[Workload]
    admit_col: list[int]
    choices: list[OptionColumns]
    shapes: list[Shape]
    tiers: list[int]                                       # effective priorities, high first
    tier_volume: dict[int, list[tuple[int, float]]]        # tier -> volume expression
    tier_max: dict[int, float]
    secondary: list[tuple[int, float]]                     # minimised in the last stage
    quota_cols: dict[tuple[str, FlavorResource], tuple[int, int]]   # b[q,fr] -> (column, its row)
    quota_tree: QuotaTree
    excluded: dict[ObjectRef, str]                         # candidates left out, and why
    members: list[list[Workload]] = field(default_factory=list)  # per class, oldest first
    free: dict[str, Resources] = field(default_factory=dict)   # node -> free before the plan
    room: dict[str, Resources] = field(default_factory=dict)   # node -> free if every victim left
    demands: list[Demand] = field(default_factory=list)     # filled while adding pod sets
    victims: list[Workload] = field(default_factory=list)  # running workloads the plan may evict
    evict_col: list[int] = field(default_factory=list)     # e[r]
    cost_terms: list[tuple[int, float]] = field(default_factory=list)   # preemption cost, minimised
    class_cols: dict[tuple[str, int, bool], int] = field(default_factory=dict)  # g[c] per preemptor class
    preemption: "PreemptionRules | None" = None               # the eviction rules of this snapshot
    overcommitted: set[str] = field(default_factory=set)  # nodes running work already overfills
    free_domain_cols: list[tuple[int, float]] = field(default_factory=list)  # f[D] and its reward
    free_domain_supply: list[list[int]] = field(default_factory=list)  # the y columns inside each D
    locality: bool = True                                  # the full model, with tie-breakers
    class_tier: list[int] = field(default_factory=list)     # effective priority of each class
    # False: the model grew past its size cap, and placement (domain, slice and node
    # columns, Hall and node rows) stopped there. Such a model cannot be solved, started
    # or decoded; its volume, quota and preemption rows still give an LP bound.
    complete: bool = True
    max_nonzeros: int | None = None
    # Nonzeros the Hall and node rows will add for the shapes and demands so far (from
    # above): most of a large model's, and written last, so the cap looks ahead by them.
    deferred_nonzeros: int = 0
    # Nominal quota as a guarantee: the stability rows' columns (planner.milp.guarantee).
    guarantee: "guarantee.Guarantee | None" = None
    # Defragmentation (policy.defragment): running workloads the plan may move, their
    # move column m[r], and the class of their re-admission (a pending copy of each).
    movers: list[Workload] = field(default_factory=list)
    move_col: list[int] = field(default_factory=list)
    mover_class: list[int] = field(default_factory=list)
    clones: set[int] = field(default_factory=set)     # class indexes that re-admit a mover
    # Fair sharing's columns and stages, when the Configuration turns it on (planner.milp.fairness).
    fairness: "Fairness | None" = None
    # The exact capacity rows of node pools, and the classes of interchangeable demand
    # they serve (planner.milp.model, planner.milp.pools).
    pools: "Pools | None" = None
    demand_classes: "list[DemandClass]" = field(default_factory=list)
    choice_class: dict[int, int] = field(default_factory=dict)     # choice index -> demand class (ungrouped)
    groups: "list[GroupChoice]" = field(default_factory=list)
    eased: int = 0          # stability rows eased for the start (planner.milp.start.ease_rows)
    clone_demand_classes: set[int] = field(default_factory=set)   # demand classes of movers' re-admissions
    kept_cols: list[tuple[int, float]] = field(default_factory=list)   # w (whole idle nodes kept) and reward

    def moved_refs(self, values: "np.ndarray") -> set[ObjectRef]:
        """The movers `values` moves."""
        return {w.ref for w, m in zip(self.movers, self.move_col) if values[m] > 0.5}

    def own_workloads(self) -> list[Workload]:
        """The pending classes' representatives, movers' re-admissions left out."""
        return [w for i, w in enumerate(self.workloads) if i not in self.clones]


# ---------------------------------------------------------------- candidates

def candidates(snapshot: Snapshot, excluded: dict[ObjectRef, str]) -> list[Workload]:
    """Pending workloads that may be admitted at all; the rest wait with a reason."""
    out = []
    for workload in sorted(snapshot.workloads, key=lambda w: w.ref):
        if workload.state is not WorkloadState.PENDING:
            continue
        reason = admissibility(snapshot, workload)
        if reason:
            excluded[workload.ref] = reason
        else:
            out.append(workload)
    return out


def admissibility(snapshot: Snapshot, workload: Workload) -> str | None:
    if workload.blocked_reason:
        return workload.blocked_reason
    cq = snapshot.cluster_queues.get(workload.cluster_queue or "")
    if cq is None:
        return f"ClusterQueue {workload.cluster_queue} does not exist"
    if not cq.active:
        return f"ClusterQueue {cq.name} is inactive: {cq.inactive_reason}"
    if not semantics.namespace_allowed(snapshot, cq, workload.ref.namespace):
        return f"ClusterQueue {cq.name}'s namespaceSelector does not admit namespace {workload.ref.namespace}"
    return None


def workload_classes(snapshot: Snapshot, pending: list[Workload], locality: bool = True) -> list[list[Workload]]:
    """Pending workloads that are interchangeable, oldest (queue order) first.

    Same ClusterQueue, priority (base and effective) and pod sets (counts, requests,
    constraints, topology requests). Elastic pod sets and preferred topology stay
    alone: their pods per domain are not a whole number of workloads (without
    locality, preferred pod sets are placed like unconstrained ones and may join).
    """
    classes: dict[object, list[Workload]] = defaultdict(list)
    for workload in pending:
        # (a growth slice, pinned to its Job's flavors, is never interchangeable with other work)
        alone = any(ps.min_count is not None or ps.fixed_flavors is not None
                    or (locality and ps.topology.mode == "preferred") for ps in workload.pod_sets)
        key: object = workload.ref if alone else (
            workload.cluster_queue, workload.priority, semantics.effective_priority(workload, snapshot),
            tuple((ps.name, ps.count, ps.request, tuple(sorted(ps.node_selector.items())), ps.tolerations,
                   ps.topology) for ps in workload.pod_sets))
        classes[key].append(workload)
    out = [sorted(members, key=lambda w: semantics.queue_order_key(w, snapshot)) for members in classes.values()]
    return sorted(out, key=lambda members: members[0].ref)


# ---------------------------------------------------------------- victims


def add_victims(model: Formulation, pending: list[Workload]) -> None:
    """e[r] for running workloads some pending workload may evict under Kueue's rules.

    `room` is what each node would have free if every victim left; it bounds where
    pods may go. Nodes already overcommitted by running work free nothing.
    """
    snapshot = model.snapshot
    rules = model.preemption = PreemptionRules(snapshot, model.quota_tree)
    classes = rules.classes(pending)
    wide: dict[tuple[str | None, int], list[tuple[str, int, bool]]] = {}
    model.room = dict(model.free)
    overcommitted = {n for n, free in model.free.items() if any(v < 0 for _, v in free.items())}
    for workload in sorted(capacity.running(snapshot), key=lambda w: w.ref):
        if not semantics.evictable(workload, snapshot):
            continue
        keys, own = _preemptor_classes(rules, classes, workload, wide)
        if not (keys or any(own.values())):
            continue
        model.victims.append(workload)
        model.evict_col.append(model.arrays.add_binary(f"e[{workload.ref}]"))
        for node, used in capacity.node_usage_of(workload).items():
            if node in model.room and node not in overcommitted:
                model.room[node] = model.room[node] + used
    model.free = {n: f.clipped() for n, f in model.free.items()}
    model.room = {n: r.clipped() for n, r in model.room.items()}
    model.overcommitted = overcommitted
    add_part_rows(model)


def add_part_rows(model: Formulation) -> None:
    """e[part] >= e[job]: evicting an elastic Job's core evicts the pods split off it
    (planner.cycle.elastic), so its whole room is freed and its whole cost paid."""
    index = {w.ref: e for w, e in zip(model.victims, model.evict_col)}
    for victim, e in zip(model.victims, model.evict_col):
        core = index.get(victim.part_of) if victim.part_of is not None else None
        if core is not None:
            model.arrays.add_row(f"part[{victim.ref}]", [(e, 1.0), (core, -1.0)], 0.0, INF)


def add_preemption_rows(model: Formulation) -> None:
    """e[r] <= sum of g[c] over preemptor classes allowed to evict r, g[c] <= sum of a[w in c]:
    nothing is evicted unless a workload that may evict it is admitted."""
    if not model.victims:
        return
    rules = model.preemption
    assert rules is not None   # victims come with the rules that name them
    index = {w.ref: i for i, w in enumerate(model.workloads) if i not in model.clones}
    classes = rules.classes(model.own_workloads())
    wide: dict[tuple[str | None, int], list[tuple[str, int, bool]]] = {}
    for key, members in classes.items():
        g = model.arrays.add_binary(f"g[{key}]")
        model.class_cols[key] = g
        model.arrays.add_row(f"class[{key}]",
                             [(g, 1.0)] + [(model.admit_col[index[w.ref]], -1.0) for w in members], -INF, 0.0)
    for victim, e in zip(model.victims, model.evict_col):
        terms: list[tuple[int, float]] = [(e, 1.0)]
        keys, own = _preemptor_classes(rules, classes, victim, wide)
        terms += [(model.class_cols[key], -1.0) for key in keys]
        for members in own.values():
            terms.extend((model.admit_col[index[w.ref]], -1.0) for w in members)
        model.arrays.add_row(f"preempt[{victim.ref}]", terms, -INF, 0.0)


def protected(victim: Workload, snapshot: Snapshot) -> bool:
    """Has `victim` run long enough (policy protectRunningAfterSeconds) to be evicted
    only by reclaim?"""
    after = snapshot.policy.protect_running_after_seconds
    return after is not None and victim.admitted_at is not None and snapshot.now - victim.admitted_at >= after


def _preemptor_classes(rules: PreemptionRules, classes: dict[tuple[str, int, bool], list[Workload]],
                       victim: Workload, wide: dict[tuple[str | None, int], list[tuple[str, int, bool]]]
                       ) -> tuple[list[tuple[str, int, bool]], dict[tuple[str, int, bool], list[Workload]]]:
    """The classes that may evict `victim` as a whole, and per class of its own queue and
    priority the members that may; only reclaimers where the policy protects it."""
    keys = rules.wide_classes(classes, victim, wide)
    own = {k: rules.allowed(classes[k], victim) for k in rules.own_classes(classes, victim)}
    if protected(victim, rules.snapshot):
        keys = [k for k in keys if rules.reason(classes[k][0], victim) == "Reclaimed"]
        own = {}   # the victim's own queue preempts, it never reclaims
    return keys, own


def add_churn_rows(model: Formulation) -> None:
    """The policy's bounds on churn: at most maxEvictionsPerCycle evictions; and for
    each priority p of a victim, the volume admitted above p, less what is evicted
    above p, at least the volume evicted at or below p plus minGainPerEviction for
    each such eviction (every eviction pays for itself and buys the gain, in the tiers
    it makes way for)."""
    policy = model.snapshot.policy
    if not model.victims:
        return
    if policy.max_evictions_per_cycle is not None:
        model.arrays.add_row("evictions", [(e, 1.0) for e in model.evict_col], -INF,
                             float(policy.max_evictions_per_cycle))
    if policy.min_gain_per_eviction <= 0:
        return
    snapshot = model.snapshot
    admitted: list[tuple[int, int, float]] = []   # (base priority, column, volume per unit)
    for choice in model.choices:
        if choice.workload in model.clones:
            continue
        workload = model.workloads[choice.workload]
        per_pod = semantics.pod_volume(workload, workload.pod_sets[choice.pod_set], snapshot)
        admitted.extend((workload.priority, c, k * per_pod) for c, k in choice.pods)
    lost = [(v.priority, e, semantics.running_volume(v, snapshot)) for v, e in zip(model.victims, model.evict_col)]
    for p in sorted({priority for priority, _, _ in lost}):
        terms = [(c, k) for priority, c, k in admitted if priority > p]
        terms += [(e, -volume) for priority, e, volume in lost if priority > p]
        terms += [(e, -(volume + policy.min_gain_per_eviction)) for priority, e, volume in lost if priority <= p]
        model.arrays.add_row(f"gain[{p}]", terms, 0.0, INF)


# ---------------------------------------------------------------- workloads and pod sets

class RoomTable:
    """Nodes x resources of what each node has room for, to count at once how many pods of
    a request fit on every node (per shape: one numpy step instead of a loop over nodes)."""

    def __init__(self, room: dict[str, Resources]):
        self.nodes = list(room)
        resources = sorted({r for amounts in room.values() for r in amounts.names()})
        self.column = {r: j for j, r in enumerate(resources)}
        self.matrix = np.zeros((len(self.nodes), len(resources)), dtype=np.int64)
        for i, name in enumerate(self.nodes):
            for r, v in room[name].items():
                self.matrix[i, self.column[r]] = v

    def fits(self, request: Resources) -> dict[str, int]:
        """Node -> how many pods of `request` fit in its room (Resources.pods_fitting)."""
        counts: np.ndarray | None = None
        for resource, amount in request.items():
            if amount <= 0:
                continue
            j = self.column.get(resource)
            here = self.matrix[:, j] // amount if j is not None else np.zeros(len(self.nodes), dtype=np.int64)
            counts = here if counts is None else np.minimum(counts, here)
        if counts is None:
            return dict.fromkeys(self.nodes, 0)
        return dict(zip(self.nodes, np.maximum(counts, 0).tolist()))


def domains_at(shape: Shape, level: int) -> dict[Path, list[str]]:
    """The shape's eligible nodes grouped by their domain at `level` (computed once)."""
    if level not in shape.domains:
        out: dict[Path, list[str]] = defaultdict(list)
        for node, path in shape.paths.items():
            out[path[: level + 1]].append(node)
        shape.domains[level] = dict(sorted(out.items()))
    return shape.domains[level]


def domains_within(shape: Shape, level: int, path: Path) -> list[Path]:
    """The shape's domains at `level` inside domain `path` (indexed once per pair of levels)."""
    key = (level, len(path))
    if key not in shape.within:
        index: dict[Path, list[Path]] = defaultdict(list)
        for sub in domains_at(shape, level):
            index[sub[: len(path)]].append(sub)
        shape.within[key] = dict(index)
    return shape.within[key].get(path, [])


def domain_room(shape: Shape, level: int, path: Path) -> int:
    """Pods of this shape the domain could hold if nothing else were placed there (cached)."""
    key = (level, path)
    if key not in shape.rooms:
        shape.rooms[key] = sum(shape.fits[n] for n in domains_at(shape, level)[path])
    return shape.rooms[key]


def add_required_domains(model: Formulation, choice: OptionColumns, pod_set: PodSet, tag: str,
                         within: set[Path] | None = None) -> None:
    """x[p,f,d] for domains d at the required level: sum_d x = u (one domain or none).
    `within` limits the domains (a pod-set group's common ones)."""
    arrays = model.arrays
    shape = model.shapes[choice.shape]
    assert choice.level is not None
    elastic = pod_set.min_count is not None
    members = len(model.members[choice.workload])
    for path in domains_at(shape, choice.level):
        room = domain_room(shape, choice.level, path)
        if room < pod_set.minimum:
            continue  # the domain could never hold the pod set: no column for it
        if within is not None and path not in within:
            continue
        name = f"{tag},{'/'.join(path)}"
        most = min(members, room // pod_set.count)
        x = arrays.add_col(f"x[{name}]", 0.0, max(1, most), integer=True)
        choice.domain_cols[path] = x
        if not elastic:
            add_container(model, choice, pod_set, path, [(x, float(pod_set.count))], name)
            continue
        # Elastic in a required domain: n[d] <= count * x[d], and sum_d n[d] = c.
        n = arrays.add_col(f"n[{name}]", 0.0, pod_set.count, integer=True)
        arrays.add_row(f"nx[{name}]", [(n, 1.0), (x, -float(pod_set.count))], -INF, 0.0)
        choice.count_cols[path] = n
        add_container(model, choice, pod_set, path, [(n, 1.0)], name)
    arrays.add_row(f"one[{tag}]", [(x, 1.0) for x in choice.domain_cols.values()] + [(choice.use_col, -1.0)], 0.0, 0.0)
    if elastic:
        arrays.add_row(f"nsum[{tag}]", [(n, 1.0) for n in choice.count_cols.values()]
                       + [(c, -k) for c, k in choice.pods], 0.0, 0.0)


def add_container(model: Formulation, choice: OptionColumns, pod_set: PodSet, path: Path,
                  pods: list[tuple[int, float]], tag: str, layer: int = 0) -> None:
    """Place `pods` inside domain `path`: directly, or as whole slices of each layer.

    Layer by layer (outer to inner): k[e] slices of `size` pods in each subdomain e
    at the layer's level, with size * sum_e k[e] = the pods of the enclosing domain.
    """
    if layer == len(choice.slice_layers):
        for col, coef in pods:
            model.demands.append(Demand(choice.shape, path, col, coef))
            model.deferred_nonzeros += len(path) + 1     # in the Hall row of each enclosing domain
        return
    arrays = model.arrays
    shape = model.shapes[choice.shape]
    level, size = choice.slice_layers[layer]
    ks = []
    for sub in domains_within(shape, level, path):
        name = f"{tag},L{layer},{'/'.join(sub)}"
        k = arrays.add_col(f"k[{name}]", 0.0, math.ceil(pod_set.count / size), integer=True)
        choice.slice_cols[layer][sub] = k
        ks.append(k)
        add_container(model, choice, pod_set, sub, [(k, float(size))], name, layer + 1)
    arrays.add_row(f"slices[{tag},L{layer}]",
                   [(k, float(size)) for k in ks] + [(c, -coef) for c, coef in pods], 0.0, 0.0)


def free_volume(free: Resources, snapshot: Snapshot) -> float:
    """Free GPUs on a node (policy GPU names included), else free cores."""
    gpus = sum(v for k, v in free.items() if is_gpu(k) or k in snapshot.policy.gpu_resources)
    return float(gpus) if gpus > 0 else free.get("cpu") / 1000.0


# ---------------------------------------------------------------- quota rows

def add_quota_rows(model: Formulation) -> None:
    """Kueue's hierarchical quota, linear: b[q] >= usage(q) - guaranteed(q), b >= 0;
    usage(cohort) = sum of children's b; usage <= subtree + borrowingLimit below the
    root; usage(root) <= subtree(root). Rows already broken by running work alone
    are relaxed to what is used now, so nothing new may add to them."""
    tree = model.quota_tree
    running = capacity.cluster_queue_usage(model.snapshot)
    new_usage = queue_usage_terms(model)
    frs = sorted({fr for table in new_usage.values() for fr in table})
    units = resource_units(model)
    for fr in frs:
        # Rows of one resource are written in its unit (e.g. 16Gi of memory) so that
        # byte counts never reach the solver; every row of the family shares it, so
        # the quota arithmetic is unchanged.
        unit = units.get(fr[1], 1)
        now = tree.tree_usage(running, fr)
        active = {n for q in new_usage if fr in new_usage[q] for n in tree.path(q)}
        expr: dict[str, tuple[list[tuple[int, float]], float]] = {}
        for node in sorted(active, key=lambda n: (-len(tree.path(n)), n)):
            terms, constant = quota_usage_expr(model, node, fr, running, new_usage, expr, now, unit)
            expr[node] = terms, constant
        for node in sorted(active):
            terms, constant = expr[node]
            parent = tree.parent[node]
            if parent is None:
                cap = tree.subtree_quota(node, fr)
            else:
                limit = tree.limits(node, fr)[1]
                if limit is None:
                    continue
                cap = tree.subtree_quota(node, fr) + limit
            cap = max(cap, now.get(node, 0))
            model.arrays.add_row(f"quota[{node},{fr[0]},{fr[1]}]", terms, -INF, cap / unit - constant)


def queue_usage_terms(model: Formulation) -> dict[str, dict[FlavorResource, list[tuple[int, float]]]]:
    """What the plan changes in each queue's quota usage, per `cq:NAME` and flavor/resource:
    admissions add pods x request, evictions take their usage back (-e[r] x usage), for
    the flavor/resources pending work could use. Running usage is the constant on top."""
    new_usage: dict[str, dict[FlavorResource, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for choice in model.choices:
        if choice.workload in model.clones:
            continue   # a move keeps its quota: evicted and re-admitted under the same flavors
        workload = model.workloads[choice.workload]
        pod_set = workload.pod_sets[choice.pod_set]
        for resource, flavor in choice.option.by_resource.items():
            per_pod = pod_set.request.get(resource)
            for col, coef in choice.pods:
                new_usage[f"cq:{workload.cluster_queue}"][(flavor, resource)].append((col, coef * per_pod))
    frs = {fr for table in new_usage.values() for fr in table}
    for victim, e in zip(model.victims, model.evict_col):
        queue = f"cq:{victim.cluster_queue}"
        if queue not in model.quota_tree.parent:
            continue
        for fr, amount in capacity.quota_usage_of(victim).items():
            if amount and fr in frs:
                new_usage[queue][fr].append((e, -float(amount)))
    return new_usage


def resource_steps(model: Formulation) -> dict[str, int]:
    """Per resource, the greatest common divisor of what pending pods and victims request:
    the step in which the plan moves any usage of it."""
    steps: dict[str, int] = {}
    requests = [ps.request for w in model.workloads for ps in w.pod_sets]
    requests += [ps.request for w in model.victims for ps in w.pod_sets]
    for request in requests:
        for resource, amount in request.items():
            if amount > 0:
                steps[resource] = math.gcd(steps.get(resource, 0), amount)
    return steps


def resource_units(model: Formulation) -> dict[str, float]:
    cached = model.__dict__.get("_units")
    if cached is None:
        cached = model.__dict__["_units"] = _resource_units(model)
    return cached


def _resource_units(model: Formulation) -> dict[str, float]:
    """Per resource, the unit its capacity and quota rows are written in: its step (see
    resource_steps) times the power of two nearest to how many steps a node holds per
    unit of its dominant resource (GPUs, else cores), so a row of memory in bytes and
    one of GPUs carry numbers of the same size (HiGHS solves badly scaled rows slowly).
    A power of two keeps whole numbers exact."""
    steps = resource_steps(model)
    nodes = model.snapshot.nodes
    if not nodes:
        return {r: float(s) for r, s in steps.items()}
    dominant = next((r for r in steps if is_gpu(r) or r in model.snapshot.policy.gpu_resources), "cpu")
    most = max((n.allocatable.get(dominant) for n in nodes), default=0)
    units: dict[str, float] = {}
    for resource, step in steps.items():
        per_node = max((n.allocatable.get(resource) for n in nodes), default=0)
        if resource == dominant or most <= 0 or per_node <= 0:
            units[resource] = float(step)
            continue
        share = per_node / most / step             # steps per unit of the dominant resource
        units[resource] = float(step) * 2.0 ** max(0, round(math.log2(share))) if share >= 1 else float(step)
    return units


def quota_usage_expr(model: Formulation, node: str, fr: FlavorResource,
                     running: dict[str, dict[FlavorResource, int]],
                     new_usage: dict[str, dict[FlavorResource, list[tuple[int, float]]]],
                     expr: dict[str, tuple[list[tuple[int, float]], float]],
                     now: dict[str, int], unit: float) -> tuple[list[tuple[int, float]], float]:
    """usage(node) / unit as terms + constant; adds b[child] columns for children with demand."""
    tree = model.quota_tree
    if node.startswith("cq:"):
        return ([(c, k / unit) for c, k in new_usage.get(node, {}).get(fr, [])],
                running.get(node, {}).get(fr, 0) / unit)
    terms: list[tuple[int, float]] = []
    constant = 0.0
    for child in tree.children.get(node, []):
        if child not in expr:
            constant += max(0, now.get(child, 0) - tree.guaranteed(child, fr)) / unit
            continue
        child_terms, child_const = expr[child]
        b = model.arrays.add_col(f"b[{child},{fr[0]},{fr[1]}]", 0.0, INF)
        # b >= usage(child) - guaranteed(child)
        row = model.arrays.add_row(f"borrow[{child},{fr[0]},{fr[1]}]", [(b, 1.0)] + [(c, -k) for c, k in child_terms],
                             child_const - tree.guaranteed(child, fr) / unit, INF)
        model.quota_cols[(child, fr)] = (b, row)
        terms.append((b, 1.0))
    return terms, constant


# ---------------------------------------------------------------- objectives

def add_objectives(model: Formulation) -> None:
    """Volume per priority tier (maximised tier by tier), then the tie-breakers."""
    snapshot = model.snapshot
    volume: dict[int, list[tuple[int, float]]] = defaultdict(list)
    most: dict[int, float] = defaultdict(float)
    for choice in model.choices:
        if choice.workload in model.clones:
            continue   # a moved workload runs before and after: no volume gained or lost
        workload = model.workloads[choice.workload]
        pod_set = workload.pod_sets[choice.pod_set]
        tier = semantics.effective_priority(workload, snapshot)
        per_pod = semantics.pod_volume(workload, pod_set, snapshot)
        if per_pod:     # a GPU job's CPU-only launcher adds no volume
            volume[tier].extend((c, k * per_pod) for c, k in choice.pods)
    for w, (workload, members) in enumerate(zip(model.workloads, model.members)):
        if w in model.clones:
            continue
        tier = semantics.effective_priority(workload, snapshot)
        most[tier] += len(members) * sum(ps.count * semantics.pod_volume(workload, ps, snapshot) for ps in workload.pod_sets)
    for victim, e in zip(model.victims, model.evict_col):
        # Evicting takes the victim's volume away from its own tier, and costs lost work.
        volume[victim.priority].append((e, -semantics.running_volume(victim, snapshot)))
        most.setdefault(victim.priority, 0.0)
        model.cost_terms.append((e, semantics.eviction_cost(victim, snapshot)))
    for mover, m in zip(model.movers, model.move_col):
        # A move throws away what an eviction would: lost work plus the restart cost.
        model.cost_terms.append((m, semantics.eviction_cost(mover, snapshot)))
    model.class_tier = [semantics.effective_priority(w, snapshot) for w in model.workloads]
    model.tiers = sorted(volume, reverse=True)
    model.tier_volume = dict(volume)
    model.tier_max = dict(most)
    model.secondary = secondary_terms(model) if model.locality else []


def secondary_terms(model: Formulation) -> list[tuple[int, float]]:
    """No needless eviction, fewer domains spanned, older workloads, earlier flavors (minimised)."""
    terms: list[tuple[int, float]] = [(e, EVICTION_WEIGHT) for e in model.evict_col + model.move_col]
    terms.extend((f, -reward) for f, reward in model.free_domain_cols)
    for choice in model.choices:
        if choice.mode == "preferred":
            terms.extend((z, SPAN_WEIGHT) for z in choice.span_cols.values())
            # A domain spanned one level up weighs half as much, two levels up a quarter...
            assert choice.level is not None
            terms.extend((z, SPAN_WEIGHT * 0.5 ** (choice.level + 1 - len(path)))
                         for path, z in choice.upper_cols.items())
    # The oldest workload gets the largest reward; all rewards together stay below
    # AGE_WEIGHT. A class earns its members' mean reward per member admitted (its
    # oldest members are the ones admitted, so this slightly favours large classes).
    everyone = sorted(((m, w) for w, members in enumerate(model.members) if w not in model.clones for m in members),
                      key=lambda pair: semantics.queue_order_key(pair[0], model.snapshot)[1:])
    count = max(1, len(everyone))
    reward: dict[int, list[float]] = defaultdict(list)
    for rank, (_, w) in enumerate(everyone):
        reward[w].append(AGE_WEIGHT * (count - rank) / (count * count))
    for w, rewards in sorted(reward.items()):
        terms.append((model.admit_col[w], -sum(rewards) / len(rewards)))
    prefs = [c for c in model.choices if c.option.preference > 0 and c.workload not in model.clones]
    scale = FLAVOR_WEIGHT / (1 + sum(c.option.preference for c in prefs))
    terms.extend((c.use_col, scale * c.option.preference) for c in prefs)
    return terms
