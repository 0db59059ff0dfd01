"""Snapshot -> one MILP whose size follows the decisions, not the nodes.

Columns beyond planner.milp.rows's (classes a, options u, elastic counts c, victims e,
preemptor classes g, quota b, the guarantee's psi/sigma/kappa/B):

  X[d,D]     members of demand class d placed in domain D of its required level
  k[d,m,l,E] slices of member m of demand class d in domain E (slice layer l)
  v[g]       members of a class taking one combination of flavors for a pod-set group
  y[K,P]     pods of shape K in node pool P (planner.milp.pools), or y[K,node] in a
             pool kept node by node
  z[n,s]     whole slots of size s on node n once its evictions are made (pools)

Demand classes. Required (or sliced) pod sets of any workloads that need the same
pods (shapes, counts, slices) in one domain of the same level are interchangeable
for placement: one column per (class, domain) counts how many of them go there, and
sum over D of X[d,D] = the members of the class's choices that are admitted. A
pod-set group (pod sets sharing a required domain, as a JobSet's launcher and
workers) is one composite demand: each member's pods in the same domain, so no row
ties the members' domains together. Elastic pod sets keep columns of their own per
domain (their pods per domain are not a whole number of members).

Placement stays exact without a column per (workload, node): within one shape,
demands sit at domains of a tree and supply at its leaves (pools, or nodes), and a
transportation problem on a laminar family is feasible iff every subtree holds the
demand placed inside it (Hall's condition); the pools' rows then make each pool's
pods fit its nodes (planner.milp.pools). `planner.milp.decode` gives every pod a node.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from models import HOSTNAME_LABEL, PodSet, Snapshot, Workload, WorkloadState
from planner.kueue import capacity, semantics, topology
from planner.milp import fairness, guarantee
from planner.milp.rows import (
    OptionColumns, Demand, Formulation, Path, RoomTable, Shape, ShapeKey, add_container, add_objectives,
    add_churn_rows, add_preemption_rows, add_quota_rows, add_required_domains, add_victims, candidates,
    FREE_WEIGHT, domain_room, domains_at, domains_within, free_volume, resource_units, workload_classes,
)
from planner.milp.pools import Pools, ShapeView, Victim
from planner.milp.arrays import INF, ModelArrays
from planner.kueue.semantics import FlavorOption, QuotaTree

MAX_COMBINATIONS = 16    # flavor combinations per pod-set group


@dataclass
class Member:
    """One pod set of a demand: its shape, pods per workload, and slice layers
    (level index, size), outer to inner."""

    shape: int
    count: int
    slices: tuple[tuple[int, int], ...] = ()


@dataclass
class DemandClass:
    index: int
    level: str | None                          # the required level; None: anywhere (slices only)
    members: tuple[Member, ...]
    links: list[int] = field(default_factory=list)         # u or v columns whose members it places
    domain_cols: dict[Path, int] = field(default_factory=dict)                 # X per domain
    slice_cols: dict[tuple[int, int], dict[Path, int]] = field(default_factory=dict)  # (member, layer) -> k


@dataclass
class GroupChoice:
    """Members of a class whose grouped pod sets take one combination of flavors."""

    workload: int
    pod_sets: tuple[int, ...]
    choices: tuple[int, ...]        # indexes into Formulation.choices, one per pod set
    col: int                        # the v column (or the first choice's u when it is the only combination)
    demand_class: int = -1


def formulate(snapshot: Snapshot, locality: bool = False) -> Formulation:
    """Build the MILP for one cycle (compact: volumes, preemption cost; with `locality`
    the tie-breakers' columns too: preferred domains, age, flavor order)."""
    model = Formulation(
        arrays=ModelArrays(), snapshot=snapshot, workloads=[], admit_col=[], choices=[],
        shapes=[], tiers=[], tier_volume={}, tier_max={}, secondary=[], quota_cols={},
        quota_tree=QuotaTree(snapshot), excluded={}, free=capacity.free_capacity(snapshot),
        locality=locality,
    )
    pending = candidates(snapshot, model.excluded)
    add_victims(model, pending)
    add_movers(model, pending)
    room = RoomTable(model.room)
    shape_index: dict[ShapeKey, int] = {}
    classes: dict[tuple[Any, ...], DemandClass] = {}
    for members in workload_classes(snapshot, pending, locality):
        add_workload(model, members, room, shape_index, classes)
    add_reentries(model, room, shape_index)
    for demand_class in model.demand_classes:
        add_demand_class(model, demand_class)
    add_preemption_rows(model)
    add_migration_rows(model)
    add_placement(model)
    add_quota_rows(model)
    guarantee.add_guarantee_rows(model)
    fairness.add_fairness(model)
    add_objectives(model)
    add_churn_rows(model)
    model.secondary += [(w, -reward) for w, reward in model.kept_cols]
    return model


# ---------------------------------------------------------------- workloads

def add_workload(model: Formulation, members: list[Workload], room: RoomTable,
                 shape_index: dict[ShapeKey, int], classes: dict[tuple[Any, ...], DemandClass],
                 keep: Sequence[Mapping[str, str]] | None = None) -> bool:
    """a[w] for a class, per pod set its flavor options (sum_f u[p,f] = a[w]: gang), and
    each option's demand: a demand class, its own domains, or anywhere. `keep`: per pod
    set, the only flavors it may take (a mover's, which keeps its quota). False when the
    class cannot be admitted at all (then `excluded` says why)."""
    snapshot = model.snapshot
    workload = members[0]
    cq = snapshot.cluster_queues[workload.cluster_queue or ""]
    per_pod_set: list[list[tuple[FlavorOption, int]]] = []
    for p, pod_set in enumerate(workload.pod_sets):
        options = semantics.flavor_options(snapshot, cq, pod_set)
        if isinstance(options, str):
            model.excluded.update({m.ref: options for m in members})
            return False
        if keep is not None:
            options = [o for o in options if dict(o.by_resource) == dict(keep[p])]
        usable = [(o, s) for o in options if (s := shape_for(model, pod_set, o, room, shape_index)) is not None]
        if not usable:
            model.excluded.update({m.ref: f"no node can take a pod of pod set {pod_set.name}" for m in members})
            return False
        per_pod_set.append(usable)
    w = len(model.workloads)
    model.workloads.append(workload)
    model.members.append(members)
    admit = model.arrays.add_col(f"a[{workload.ref}]", 0.0, len(members), integer=True)
    model.admit_col.append(admit)
    grouped = grouped_pod_sets(workload)
    mine: dict[int, list[int]] = defaultdict(list)      # pod set -> its choices
    for p, (pod_set, usable) in enumerate(zip(workload.pod_sets, per_pod_set)):
        uses = []
        for option, shape in usable:
            index = add_choice(model, w, p, pod_set, option, shape, classes, p in grouped)
            if index is not None:
                uses.append(model.choices[index].use_col)
                mine[p].append(index)
        # sum_f u[p,f] - a[w] = 0: every pod set placed exactly when the workload is.
        model.arrays.add_row(f"gang[{workload.ref},{pod_set.name}]",
                             [(c, 1.0) for c in uses] + [(admit, -1.0)], 0.0, 0.0)
    for group in sorted(set(grouped.values())):
        pod_sets = tuple(p for p in sorted(grouped) if grouped[p] == group)
        add_group(model, w, pod_sets, mine, classes)
    return True


# ---------------------------------------------------------------- defragmentation

def add_movers(model: Formulation, pending: list[Workload]) -> None:
    """m[r] for running workloads defragmentation may move (policy.defragment): movable
    (semantics.movable), wholly placed, and of a priority some pending workload asking
    for a required domain reaches. A move frees its nodes as an eviction does."""
    snapshot = model.snapshot
    if not snapshot.policy.defragment or snapshot.policy.max_migrations_per_cycle <= 0:
        return
    wanting = [w.priority for w in pending if any(ps.topology.mode == "required" and ps.topology.level
                                                   for ps in w.pod_sets)]
    if not wanting:
        return
    victims = {v.ref for v in model.victims}
    for workload in sorted(capacity.running(snapshot), key=lambda w: w.ref):
        if workload.priority > max(wanting) or not semantics.movable(workload, snapshot):
            continue
        placed = {a.name: a.count for a in workload.assignment}
        if any(placed.get(ps.name, 0) <= 0 for ps in workload.pod_sets):
            continue
        model.movers.append(workload)
        model.move_col.append(model.arrays.add_binary(f"m[{workload.ref}]"))
        if workload.ref in victims:
            continue    # its room is counted already
        for node, used in capacity.node_usage_of(workload).items():
            if node in model.room and node not in model.overcommitted:
                model.room[node] = model.room[node] + used


def reentry(workload: Workload) -> Workload:
    """A running workload as a pending one that takes exactly the pods it runs now."""
    placed = {a.name: a.count for a in workload.assignment}
    pod_sets = tuple(replace(ps, count=placed[ps.name], min_count=None) for ps in workload.pod_sets)
    return replace(workload, state=WorkloadState.PENDING, pod_sets=pod_sets, assignment=())


def add_reentries(model: Formulation, room: RoomTable, shape_index: dict[ShapeKey, int]) -> None:
    """Each mover's re-admission, a class of its own under its current flavors (demand
    classes of their own too, so no pending work's domain is ever counted as a move's)."""
    classes: dict[tuple[Any, ...], DemandClass] = {}
    for mover, m in zip(model.movers, model.move_col):
        w = len(model.workloads)
        keep = [next(dict(a.flavors) for a in mover.assignment if a.name == ps.name) for ps in mover.pod_sets]
        if add_workload(model, [reentry(mover)], room, shape_index, classes, keep):
            model.clones.add(w)
            model.mover_class.append(w)
        else:
            model.excluded.pop(mover.ref, None)
            model.arrays.col_upper[m] = 0.0        # nowhere to go: it stays
            model.mover_class.append(-1)
    model.clone_demand_classes = {c.index for c in classes.values()}


def add_migration_rows(model: Formulation) -> None:
    """a[copy of r] = m[r] (a moved workload is re-admitted in the same plan); e[r] + m[r]
    <= 1; sum m <= the policy's budget; and m[r] <= the members of pending classes of at
    least r's priority placed in a required domain that holds one of r's nodes (a move
    only frees room for required-topology work that may claim it)."""
    if not model.movers:
        return
    arrays, snapshot = model.arrays, model.snapshot
    victims = dict(zip((v.ref for v in model.victims), model.evict_col))
    for mover, m, w in zip(model.movers, model.move_col, model.mover_class):
        if w >= 0:
            arrays.add_row(f"move[{mover.ref}]", [(model.admit_col[w], 1.0), (m, -1.0)], 0.0, 0.0)
        if mover.ref in victims:
            arrays.add_row(f"once[{mover.ref}]", [(victims[mover.ref], 1.0), (m, 1.0)], -INF, 1.0)
    arrays.add_row("budget[migrations]", [(m, 1.0) for m in model.move_col],
                   -INF, float(snapshot.policy.max_migrations_per_cycle))
    nodes = {n.name: n for n in snapshot.nodes}
    claims = required_claims(model)
    for mover, m in zip(model.movers, model.move_col):
        mine = set(capacity.node_usage_of(mover))
        terms: list[tuple[int, float]] = []
        for priority, levels, depth, path, col in claims:
            if priority < mover.priority:
                continue
            if any((p := topology.node_path(nodes[n], levels)) is not None and p[: depth + 1] == path
                   for n in mine if n in nodes):
                terms.append((col, -1.0))
        arrays.add_row(f"frees[{mover.ref}]", [(m, 1.0)] + terms, -INF, 0.0)


def required_claims(model: Formulation) -> list[tuple[int, tuple[str, ...], int, Path, int]]:
    """(least base priority of the work it places, levels, level index, domain, column) for
    each column that places pending work in one domain of a required level: the demand
    classes' X (pending work only) and elastic pod sets' x."""
    least: dict[int, int] = {}
    for index, d in model.choice_class.items():
        priority = model.workloads[model.choices[index].workload].priority
        least[d] = min(least.get(d, priority), priority)
    for group in model.groups:
        priority = model.workloads[group.workload].priority
        least[group.demand_class] = min(least.get(group.demand_class, priority), priority)
    out = []
    for demand_class in model.demand_classes:
        if demand_class.level is None or demand_class.index in model.clone_demand_classes:
            continue
        shape = model.shapes[demand_class.members[0].shape]
        depth = topology.level_index(shape.levels, demand_class.level)
        if depth is None or demand_class.index not in least:
            continue
        for path, col in sorted(demand_class.domain_cols.items()):
            out.append((least[demand_class.index], shape.levels, depth, path, col))
    for choice in model.choices:
        if choice.workload in model.clones or choice.mode != "required" or not choice.count_cols:
            continue
        shape = model.shapes[choice.shape]
        assert choice.level is not None
        for path, col in sorted(choice.domain_cols.items()):
            out.append((model.workloads[choice.workload].priority, shape.levels, choice.level, path, col))
    return out


def grouped_pod_sets(workload: Workload) -> dict[int, str]:
    """Pod sets of a pod-set group that share a required domain (two or more, none elastic)."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for p, pod_set in enumerate(workload.pod_sets):
        request = pod_set.topology
        if request.group and request.mode == "required" and request.level and pod_set.min_count is None:
            groups[(request.group, request.level)].append(p)
    return {p: f"{name}@{level}" for (name, level), ps in groups.items() if len(ps) > 1 for p in ps}


def shape_for(model: Formulation, pod_set: PodSet, option: FlavorOption, room: RoomTable,
              shape_index: dict[ShapeKey, int]) -> int | None:
    """The shape of pod_set's pods under `option`: eligible nodes with room for a pod were
    every victim gone, and their paths; None if none."""
    key: ShapeKey = (pod_set.request, tuple(sorted(pod_set.node_selector.items())),
                     pod_set.tolerations, option.flavors)
    if key in shape_index:
        index = shape_index[key]
        return index if model.shapes[index].paths else None
    levels, eligible = eligible_paths(model, pod_set, option)
    fits = room.fits(pod_set.request)
    paths = {n: p for n, p in eligible.items() if fits.get(n, 0) > 0}
    shape_index[key] = len(model.shapes)
    model.shapes.append(Shape(key, pod_set.request, levels, paths, {n: fits[n] for n in paths}))
    return shape_index[key] if paths else None


def eligible_paths(model: Formulation, pod_set: PodSet, option: FlavorOption) -> tuple[tuple[str, ...], dict[str, Path]]:
    """The levels of a flavor choice and the nodes it allows the pod set, with their paths;
    the same for every request with these flavors, selector and tolerations (cached)."""
    cache: dict[tuple[Any, ...], tuple[tuple[str, ...], dict[str, Path]]] = model.__dict__.setdefault("_eligible", {})
    key = (option.flavors, tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations)
    if key not in cache:
        snapshot = model.snapshot
        flavors = [snapshot.flavors[f] for f in option.flavors]
        levels = topology.levels_for(snapshot, flavors)
        # Whether a node allows the pod set depends only on these labels, its taints and
        # whether it is usable: judged once per distinct combination, not per node.
        keys = sorted({k for f in flavors for k in f.node_labels} | set(pod_set.node_selector))
        allowed: dict[tuple[object, ...], bool] = {}
        paths: dict[str, Path] = {}
        for node in snapshot.nodes:
            kind = (node.usable, node.taints, *(node.labels.get(k) for k in keys))
            if kind not in allowed:
                allowed[kind] = semantics.node_allows(node, flavors, pod_set)
            path = topology.node_path(node, levels) if allowed[kind] else None
            if path is not None:
                paths[node.name] = path
        cache[key] = (levels, paths)
    return cache[key]


def slice_layers(shape: Shape, pod_set: PodSet, level: int | None) -> tuple[tuple[int, int], ...] | None:
    """The pod set's slice layers as (level index, size), outer to inner; None when the
    shape's topology cannot express them (a missing level, or one above the layer before)."""
    layers: list[tuple[int, int]] = []
    for layer in pod_set.topology.slices:
        index = topology.level_index(shape.levels, layer.level)
        floor = layers[-1][0] if layers else level
        if index is None or (floor is not None and index < floor) or layer.size < 1:
            return None
        layers.append((index, layer.size))
    return tuple(layers)


def add_choice(model: Formulation, w: int, p: int, pod_set: PodSet, option: FlavorOption, shape_id: int,
               classes: dict[tuple[Any, ...], DemandClass], grouped: bool) -> int | None:
    """u (and c) for one (pod set, flavor option), and where its pods go; the choice's index."""
    arrays = model.arrays
    shape = model.shapes[shape_id]
    request = pod_set.topology
    level = topology.level_index(shape.levels, request.level) if request.mode in ("required", "preferred") else None
    if request.mode in ("required", "preferred") and level is None:
        return None  # this flavor's topology lacks the level: the option is unusable
    layers = slice_layers(shape, pod_set, level)
    if layers is None:
        return None
    if request.mode == "preferred" and not model.locality:
        level = None  # preferred is no constraint: the compact model places it anywhere
    ref = model.workloads[w].ref
    tag = f"{ref},{pod_set.name},{'+'.join(option.flavors)}"
    use = arrays.add_col(f"u[{tag}]", 0.0, len(model.members[w]), integer=True)
    if pod_set.min_count is None:
        pods = [(use, float(pod_set.count))]
    else:
        count = arrays.add_col(f"c[{tag}]", 0.0, pod_set.count, integer=True)
        arrays.add_row(f"min[{tag}]", [(count, 1.0), (use, -float(pod_set.minimum))], 0.0, INF)
        arrays.add_row(f"max[{tag}]", [(count, 1.0), (use, -float(pod_set.count))], -INF, 0.0)
        pods = [(count, 1.0)]
    mode = "root" if level is None else request.mode or "root"
    choice = OptionColumns(w, p, option, shape_id, use, pods, mode, level, slice_layers=list(layers),
                    slice_cols=[{} for _ in layers])
    index = len(model.choices)
    model.choices.append(choice)
    if grouped:
        return index                     # placed with its group (add_group)
    if pod_set.min_count is not None:
        if mode == "required":
            add_required_domains(model, choice, pod_set, tag)   # elastic: columns of its own per domain
        else:
            choice.mode = "root"   # an elastic preferred pod set is placed anywhere
            add_container(model, choice, pod_set, (), pods, tag)
    elif mode == "preferred" and not layers:
        add_preferred(model, choice, pod_set, tag)
    elif mode in ("required", "preferred") or layers:
        # (A preferred pod set in slices is placed as its slices ask, anywhere.)
        choice.mode = "required" if mode == "required" else "root"
        name = request.level if mode == "required" else None
        demand_class = class_for(model, classes, name, (Member(shape_id, pod_set.count, layers),))
        demand_class.links.append(use)
        model.choice_class[index] = demand_class.index
    else:
        model.demands.append(Demand(shape_id, (), use, float(pod_set.count)))
    return index


PREFERRED_DOMAINS = 8   # domains a preferred pod set may gather in, beside anywhere (tie-breakers)


def add_preferred(model: Formulation, choice: OptionColumns, pod_set: PodSet, tag: str) -> None:
    """A preferred pod set in the tie-breakers' model: pods per domain n (and z: the domain
    is used) for the PREFERRED_DOMAINS domains of its level with the most room, and the
    rest anywhere (n and z at the root, `overflow`): the pod set is placed whatever
    happens, and the tie-breakers gather it where they can."""
    arrays = model.arrays
    shape = model.shapes[choice.shape]
    level = choice.level
    assert level is not None
    ns = []
    for path in sorted(roomiest(shape, level)[:PREFERRED_DOMAINS]) + [()]:
        name = f"{tag},{'/'.join(path) or '*'}"
        n = arrays.add_col(f"n[{name}]", 0.0, pod_set.count, integer=True)
        z = arrays.add_binary(f"z[{name}]")
        arrays.add_row(f"nz[{name}]", [(n, 1.0), (z, -float(pod_set.count))], -INF, 0.0)
        choice.domain_cols[path] = n
        choice.span_cols[path] = z
        ns.append(n)
        add_container(model, choice, pod_set, path, [(n, 1.0)], name)
    arrays.add_row(f"spread[{tag}]", [(n, 1.0) for n in ns] + [(c, -k) for c, k in choice.pods], 0.0, 0.0)


def roomiest(shape: Shape, level: int) -> list[Path]:
    """The shape's domains at `level`, most room first (then by name): the same for every
    preferred pod set of the shape, so sorted once."""
    if level not in shape.roomiest:
        shape.roomiest[level] = sorted(domains_at(shape, level), key=lambda d: (-domain_room(shape, level, d), d))
    return shape.roomiest[level]


def class_for(model: Formulation, classes: dict[tuple[Any, ...], DemandClass], level: str | None,
              members: tuple[Member, ...]) -> DemandClass:
    key = (level, tuple((m.shape, m.count, m.slices) for m in members))
    if key not in classes:
        classes[key] = DemandClass(len(model.demand_classes), level, members)
        model.demand_classes.append(classes[key])
    return classes[key]


def add_group(model: Formulation, w: int, pod_sets: tuple[int, ...], mine: dict[int, list[int]],
              classes: dict[tuple[Any, ...], DemandClass]) -> None:
    """A pod-set group: one combination of flavors per member count (v), each combination a
    composite demand class whose members all go to one domain."""
    arrays = model.arrays
    workload = model.workloads[w]
    level = workload.pod_sets[pod_sets[0]].topology.level
    combos = list(itertools.islice(itertools.product(*(mine[p] for p in pod_sets)), MAX_COMBINATIONS))
    if len(combos) == 1:
        (combo,) = combos
        first = model.choices[combo[0]].use_col
        for index in combo[1:]:   # every member takes its only option exactly when the first does
            arrays.add_row(f"together[{workload.ref},{index}]",
                           [(model.choices[index].use_col, 1.0), (first, -1.0)], 0.0, 0.0)
        cols = [first]
    else:
        cols = [arrays.add_col(f"v[{workload.ref},{i}]", 0.0, len(model.members[w]), integer=True)
                for i in range(len(combos))]
        for index in sorted({i for combo in combos for i in combo}):   # u[p,f] = its combinations' v
            terms = [(v, 1.0) for v, combo in zip(cols, combos) if index in combo]
            arrays.add_row(f"combos[{workload.ref},{index}]", terms + [(model.choices[index].use_col, -1.0)], 0.0, 0.0)
    for col, combo in zip(cols, combos):
        choices = [model.choices[i] for i in combo]
        members = tuple(Member(c.shape, workload.pod_sets[c.pod_set].count, tuple(c.slice_layers)) for c in choices)
        demand_class = class_for(model, classes, level, members)
        demand_class.links.append(col)
        model.groups.append(GroupChoice(w, pod_sets, combo, col, demand_class.index))


# ---------------------------------------------------------------- demand classes

def add_demand_class(model: Formulation, demand_class: DemandClass) -> None:
    """X per domain where every member fits (sum_D X = the class's admitted members), and
    each member's pods (or slices) placed inside the domain."""
    arrays = model.arrays
    first = model.shapes[demand_class.members[0].shape]
    level = topology.level_index(first.levels, demand_class.level) if demand_class.level else None
    total = int(sum(arrays.col_upper[c] for c in demand_class.links))
    domains: list[Path]
    if level is None:
        domains = [()]
    else:
        domains = [d for d in domains_at(first, level)
                   if all(room_of(model, m, level, d) >= m.count for m in demand_class.members)]
    tag = f"d{demand_class.index}"
    for path in domains:
        most = total if level is None else min(room_of(model, m, level, path) // m.count for m in demand_class.members)
        x = arrays.add_col(f"X[{tag},{'/'.join(path)}]", 0.0, max(0, min(total, most)), integer=True)
        demand_class.domain_cols[path] = x
        for i, member in enumerate(demand_class.members):
            add_member_pods(model, demand_class, i, member, path, [(x, float(member.count))], 0)
    arrays.add_row(f"place[{tag}]", [(x, 1.0) for x in demand_class.domain_cols.values()]
                   + [(c, -1.0) for c in demand_class.links], 0.0, 0.0)


def room_of(model: Formulation, member: Member, level: int, path: Path) -> int:
    shape = model.shapes[member.shape]
    return domain_room(shape, level, path) if path in domains_at(shape, level) else 0


def add_member_pods(model: Formulation, demand_class: DemandClass, i: int, member: Member, path: Path,
                    pods: list[tuple[int, float]], layer: int) -> None:
    """Place `pods` of member i inside `path`: directly, or as whole slices of each layer,
    outer to inner (size * sum of the layer's slices in the subdomains = the pods)."""
    if layer == len(member.slices):
        for col, coef in pods:
            model.demands.append(Demand(member.shape, path, col, coef))
        return
    arrays = model.arrays
    shape = model.shapes[member.shape]
    level, size = member.slices[layer]
    cols = model.demand_classes[demand_class.index].slice_cols.setdefault((i, layer), {})
    ks = []
    for sub in domains_within(shape, level, path):
        name = f"d{demand_class.index},m{i},L{layer},{'/'.join(sub)}"
        bound = sum(arrays.col_upper[c] * k for c, k in pods)
        k = arrays.add_col(f"k[{name}]", 0.0, math.ceil(bound / size), integer=True)
        cols[sub] = k
        ks.append(k)
        add_member_pods(model, demand_class, i, member, sub, [(k, float(size))], layer + 1)
    arrays.add_row(f"slices[d{demand_class.index},m{i},L{layer},{'/'.join(path)}]",
                   [(k, float(size)) for k in ks] + [(c, -coef) for c, coef in pods], 0.0, 0.0)


# ---------------------------------------------------------------- placement

def add_placement(model: Formulation) -> None:
    """Pools (supply and capacity rows) and, per shape and domain with demand inside it,
    Hall's row: demand inside D <= supply inside D."""
    arrays = model.arrays
    node_level = {d.shape for d in model.demands if len(d.path) == len(model.shapes[d.shape].levels)}
    views = [ShapeView(s.request, s.paths, s.fits) for s in model.shapes]
    victims = [Victim(e, capacity.node_usage_of(v)) for v, e in zip(model.victims, model.evict_col)]
    victims += [Victim(m, capacity.node_usage_of(v)) for v, m in zip(model.movers, model.move_col)]
    model.pools = Pools(views, model.free, victims, model.overcommitted, node_level,
                        model.snapshot.policy.gpu_resources)
    busy = {n for w in capacity.running(model.snapshot) for n in capacity.node_usage_of(w)}
    if model.locality:
        for pool in model.pools.pools:
            model.pools.reserve_whole_nodes(pool, busy)
    model.pools.add(arrays, resource_units(model))
    if model.locality:
        add_free_domain_rows(model, busy)
    by_shape: dict[int, list[Demand]] = defaultdict(list)
    for demand in model.demands:
        by_shape[demand.shape].append(demand)
    for shape_id, demands in sorted(by_shape.items()):
        inside: dict[Path, list[tuple[int, float]]] = defaultdict(list)
        for demand in demands:
            for depth in range(len(demand.path) + 1):
                inside[demand.path[:depth]].append((demand.col, demand.coef))
        supply: dict[Path, list[int]] = defaultdict(list)
        for path, col in model.pools.supply_columns(shape_id):
            for depth in range(len(path) + 1):
                if path[:depth] in inside:
                    supply[path[:depth]].append(col)
        for path in sorted(inside):
            arrays.add_row(f"hall[{shape_id},{'/'.join(path)}]",
                           inside[path] + [(col, -1.0) for col in supply.get(path, ())], -INF, 0.0)


# ---------------------------------------------------------------- free domains (tie-breakers)

def add_free_domain_rows(model: Formulation, busy: set[str]) -> None:
    """Whole free domains kept for the big jobs to come, rewarded in the tie-breakers in
    proportion to the free volume they keep: f[D] = 1 only if no new pod lands in domain
    D (a rack, a block: every node idle now), and, inside an aggregated pool, w whole
    idle nodes kept (planner.milp.pools). Per-node pools' idle nodes count as domains of
    their own."""
    snapshot, arrays, pools = model.snapshot, model.arrays, model.pools
    assert pools is not None
    cols_of: dict[str, list[int]] = defaultdict(list)       # node -> supply columns that may land on it
    for pool in pools.pools:
        for per_node in pool.node_supply.values():
            for node, col in per_node.items():
                cols_of[node].append(col)
    supplied = {n for pool in pools.pools for n in pool.nodes}
    volume = {n: free_volume(model.free[n], snapshot) for n in supplied}
    total = sum(volume.values())
    if total <= 0:
        return
    layouts = sorted({tuple(t.levels[:-1]) if t.levels and t.levels[-1] == HOSTNAME_LABEL else tuple(t.levels)
                      for t in snapshot.topologies.values()})
    weight = FREE_WEIGHT / (1 + sum(len(levels) for levels in layouts))   # each level's share
    for pool in pools.pools:
        if pool.kept is not None:
            model.kept_cols.append((pool.kept, weight * pool.whole / total))
        for node in pools.idle_nodes(pool, busy) if not pool.aggregated else ():
            if cols_of[node]:
                add_free(model, f"h[{node}]", cols_of[node], weight * volume[node] / total)
    nodes = {n.name: n for n in snapshot.nodes}
    for levels in layouts:
        members: dict[Path, list[str]] = defaultdict(list)
        for name in sorted(supplied):
            path = topology.node_path(nodes[name], levels)
            if path is None:
                continue
            for depth in range(1, len(levels) + 1):
                members[path[:depth]].append(name)
        for path, inside in sorted(members.items()):
            if any(n in busy for n in inside):
                continue  # busy now: not a candidate
            ids = {pools.pool_of[n] for n in inside}
            if any(not set(pools.pools[i].nodes) <= set(inside) for i in ids):
                continue  # a pool reaching outside the domain (another topology's layout)
            cols = [c for i in sorted(ids) for c in pools.pools[i].supply.values()]
            cols += [c for n in inside for c in cols_of[n]]
            if cols:
                add_free(model, f"f[{'/'.join(levels)}:{'/'.join(path)}]", cols,
                         weight * sum(volume[n] for n in inside) / total)


def add_free(model: Formulation, name: str, cols: list[int], reward: float) -> None:
    """A binary that is 1 only if every column in `cols` is 0: sum + U * f <= U."""
    arrays = model.arrays
    f = arrays.add_binary(name)
    most = sum(arrays.col_upper[c] for c in cols)
    arrays.add_row(f"free[{name}]", [(c, 1.0) for c in cols] + [(f, most)], -INF, most)
    model.free_domain_cols.append((f, reward))
    model.free_domain_supply.append(cols)
