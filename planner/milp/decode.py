"""Solver values -> Decisions: which workloads start, with which flavors, on which nodes.

The model counts members per option, per demand class and domain, slices per domain
and pods per (shape, pool). Here each admitted member (the oldest of its class first)
takes an option and a domain in a fixed order; its pods are then served from the
supply inside their domain, deepest demand first (by Hall's condition, which every
solution satisfies, that never runs short), most supply first so a workload lands
on few pools; and within each aggregated pool the pods get nodes (planner.milp.pools:
exact for GPU pods). A pod without GPUs that finds no node (the one relaxation)
leaves its workload out of the plan: counted in `Decoded.repaired`.

Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import cast

import numpy as np

from models import HOSTNAME_LABEL, Admission, Decisions, Domain, Migration, ObjectRef, PodSetAssignment, Workload
from planner.kueue import capacity, semantics, topology
from planner.milp.solution import DecodeError, count, decode_evictions, member_demands
from planner.milp.rows import Formulation
from planner.milp.model import DemandClass, GroupChoice
from planner.milp.pools import Item, place

Path = tuple[str, ...]
Owner = tuple[int, int, int]          # (workload class, member, pod set)


@dataclass
class Decoded:
    decisions: Decisions
    repaired: int = 0       # workloads left out because a pod without GPUs found no node


def decode(form: Formulation, values: np.ndarray) -> Decoded:
    choice_of, group_of = member_choices(form, values)
    demands = own_demands(form, values, choice_of)
    demands.update(class_demands(form, values, choice_of, group_of))
    placed, failed = transport(form, values, choice_of, demands)
    admissions, repaired = admissions_of(form, choice_of, placed, failed)
    refs = form.moved_refs(values)
    moved = [a for a in admissions if a.workload in refs]
    admissions = [a for a in admissions if a.workload not in refs]
    evictions = decode_evictions(form, values, admissions)
    migrations = tuple(migration(form, a, admissions) for a in moved)
    return Decoded(Decisions(tuple(admissions), evictions, migrations), repaired)


def member_choices(form: Formulation, values: np.ndarray) -> tuple[dict[Owner, int], dict[tuple[int, int], list[GroupChoice]]]:
    """(class, member, pod set) -> choice index, the oldest members admitted, handed out
    over the options in order; and per (class, member) the groups (flavor combinations)
    its grouped pod sets took."""
    out: dict[Owner, int] = {}
    group_of: dict[tuple[int, int], list[GroupChoice]] = defaultdict(list)
    by_pod_set: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, choice in enumerate(form.choices):
        by_pod_set[(choice.workload, choice.pod_set)].append(index)
    grouped = {(g.workload, p) for g in form.groups for p in g.pod_sets}
    for w in range(len(form.workloads)):
        admitted = count(values, form.admit_col[w])
        for p in range(len(form.workloads[w].pod_sets)):
            if (w, p) in grouped:
                continue
            order = [i for i in by_pod_set[(w, p)] for _ in range(count(values, form.choices[i].use_col))]
            if len(order) != admitted:
                raise DecodeError(f"{form.workloads[w].ref}: {admitted} admitted, pod set {p} has {len(order)} options")
            for member, index in enumerate(order):
                out[(w, member, p)] = index
    combos: dict[tuple[int, tuple[int, ...]], list[GroupChoice]] = defaultdict(list)
    for each in form.groups:
        combos[(each.workload, each.pod_sets)].append(each)
    for (w, _), groups in sorted(combos.items(), key=lambda kv: kv[0]):
        admitted = count(values, form.admit_col[w])
        placed = [g for g in groups for _ in range(count(values, g.col))]
        if len(placed) != admitted:
            raise DecodeError(f"{form.workloads[w].ref}: {admitted} admitted, its group is placed {len(placed)} times")
        for member, group in enumerate(placed):
            group_of[(w, member)].append(group)
            for p, index in zip(group.pod_sets, group.choices):
                out[(w, member, p)] = index
    return out, group_of


def own_demands(form: Formulation, values: np.ndarray, choice_of: dict[Owner, int]) -> dict[Owner, list[tuple[Path, int]]]:
    """Demands of choices with columns of their own (elastic, preferred) or none (anywhere)."""
    grouped = {(g.workload, p) for g in form.groups for p in g.pod_sets}
    owners_of: dict[int, list[Owner]] = defaultdict(list)
    for owner, index in sorted(choice_of.items()):
        if index not in form.choice_class and (owner[0], owner[2]) not in grouped:
            owners_of[index].append(owner)
    out: dict[Owner, list[tuple[Path, int]]] = {}
    for index, owners in owners_of.items():
        choice = form.choices[index]
        if choice.mode == "root" and not choice.slice_layers and choice.pods[0][0] == choice.use_col:
            pods = form.workloads[choice.workload].pod_sets[choice.pod_set].count
            out.update({owner: [((), pods)] for owner in owners})
        else:   # members of one choice share its columns: handed out in member order
            out.update(zip(owners, member_demands(choice, values)))
    return out


def class_demands(form: Formulation, values: np.ndarray, choice_of: dict[Owner, int],
                  group_of: dict[tuple[int, int], list[GroupChoice]]) -> dict[Owner, list[tuple[Path, int]]]:
    """Per demand class: its admitted members (in choice order) take its domains in
    order, and within a domain, their slices."""
    entries: dict[int, list[tuple[tuple[int, tuple[int, ...]], list[Owner]]]] = defaultdict(list)   # class -> (order, owners)
    for owner, index in choice_of.items():
        if index in form.choice_class:
            entries[form.choice_class[index]].append(((index, owner), [owner]))
    for (w, member), groups in group_of.items():
        for group in groups:
            entries[group.demand_class].append(((group.choices[0], (w, member)),
                                                [(w, member, p) for p in group.pod_sets]))
    out: dict[Owner, list[tuple[Path, int]]] = {}
    for index, members in sorted(entries.items()):
        members.sort(key=lambda entry: entry[0])
        demand_class = form.demand_classes[index]
        domains = [d for d, col in sorted(demand_class.domain_cols.items()) for _ in range(count(values, col))]
        if len(domains) != len(members):
            raise DecodeError(f"demand class {index}: {len(members)} members, {len(domains)} domain places")
        units: dict[tuple[int, Path], list[list[tuple[Path, int]]]] = {}
        for (_, owners), domain in zip(members, domains):
            for m, owner in enumerate(owners):
                spec = demand_class.members[m]
                if not spec.slices:
                    out[owner] = [(domain, spec.count)]
                    continue
                key = (m, domain)
                if key not in units:
                    units[key] = slice_units(demand_class, values, m, 0, domain)
                needed = spec.count // spec.slices[0][1]
                mine, units[key] = units[key][:needed], units[key][needed:]
                if len(mine) != needed:
                    raise DecodeError(f"demand class {index}: too few slices in {'/'.join(domain) or 'root'}")
                out[owner] = [piece for unit in mine for piece in unit]
    return out


def slice_units(demand_class: DemandClass, values: np.ndarray, m: int, layer: int, path: Path) -> list[list[tuple[Path, int]]]:
    """The slices of `layer` inside `path` for member m, each as its innermost (domain, pods)."""
    spec = demand_class.members[m]
    level, size = spec.slices[layer]
    last = layer == len(spec.slices) - 1
    out: list[list[tuple[Path, int]]] = []
    for sub, col in sorted(demand_class.slice_cols.get((m, layer), {}).items()):
        if sub[: len(path)] != path or count(values, col) == 0:
            continue
        if last:
            out.extend([[(sub, size)] for _ in range(count(values, col))])
            continue
        inner = slice_units(demand_class, values, m, layer + 1, sub)
        ratio = size // spec.slices[layer + 1][1]
        for i in range(count(values, col)):
            out.append([piece for unit in inner[i * ratio:(i + 1) * ratio] for piece in unit])
    return out


def transport(form: Formulation, values: np.ndarray, choice_of: dict[Owner, int],
              demands: dict[Owner, list[tuple[Path, int]]]) -> tuple[dict[Owner, dict[str, int]], set[Owner]]:
    """Serve every demand from the supply inside its domain (deepest first), then give
    pooled pods nodes. Returns owner -> node -> pods, and the owners a pod of which
    found no node."""
    pools = form.pools
    assert pools is not None
    # Supply per shape: key ("pool", index) or ("node", name) -> (path, pods).
    supply: dict[int, dict[tuple[str, object], int]] = defaultdict(dict)
    paths: dict[int, dict[tuple[str, object], Path]] = defaultdict(dict)
    for pool in pools.pools:
        for shape, col in pool.supply.items():
            if count(values, col):
                supply[shape][("pool", pool.index)] = count(values, col)
                paths[shape][("pool", pool.index)] = pool.domain[shape]
        for shape, per_node in pool.node_supply.items():
            for node, col in per_node.items():
                if count(values, col):
                    supply[shape][("node", node)] = count(values, col)
                    paths[shape][("node", node)] = form.shapes[shape].paths[node]
    index: dict[tuple[int, Path], list[tuple[str, object]]] = {}
    jobs = sorted((-len(path), owner, path, pods) for owner, pieces in demands.items() for path, pods in pieces)
    taken: dict[Owner, dict[tuple[str, object], int]] = defaultdict(lambda: defaultdict(int))
    for _, owner, path, pods in jobs:
        shape = form.choices[choice_of[owner]].shape
        key = (shape, path)
        if key not in index:
            index[key] = sorted((k for k, p in paths[shape].items() if p[: len(path)] == path),
                                key=lambda k: (-supply[shape][k], str(k[1])))
        left = pods
        for k in index[key]:
            take = min(left, supply[shape][k])
            if take:
                supply[shape][k] -= take
                taken[owner][k] += take
                left -= take
            if not left:
                break
        if left:
            raise DecodeError(f"{form.members[owner[0]][owner[1]].ref}: {left} pods found no supply in "
                              f"{'/'.join(path) or 'root'}")
    placed: dict[Owner, dict[str, int]] = defaultdict(dict)
    items: dict[int, list[Item]] = defaultdict(list)
    for owner in sorted(taken):
        shape = form.choices[choice_of[owner]].shape
        for (kind, where), pods in sorted(taken[owner].items(), key=lambda kv: str(kv[0])):
            if kind == "node":
                node = cast(str, where)
                placed[owner][node] = placed[owner].get(node, 0) + pods
            else:
                items[cast(int, where)].append(Item(owner, shape, pods))
    evicted = {c for c in form.evict_col + form.move_col if values[c] > 0.5}
    failed: set[Owner] = set()
    for pool_index, pool_items in sorted(items.items()):
        got, missed = place(pools, pools.pools[pool_index], pool_items, evicted)
        for got_owner, per_node in got.items():   # the owners given in pool_items
            for node, pods in per_node.items():
                placed[cast(Owner, got_owner)][node] = placed[cast(Owner, got_owner)].get(node, 0) + pods
        failed.update(cast(list[Owner], missed))
    return placed, failed


def admissions_of(form: Formulation, choice_of: dict[Owner, int], placed: dict[Owner, dict[str, int]],
                  failed: set[Owner]) -> tuple[list[Admission], int]:
    by_member: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    for (w, member, p), index in choice_of.items():
        by_member[(w, member)][p] = index
    admissions = []
    repaired = 0
    for (w, member), pod_sets in sorted(by_member.items()):
        workload = form.members[w][member]
        if any((w, member, p) in failed for p in pod_sets):
            repaired += 1
            continue
        out = []
        for p, pod_set in enumerate(workload.pod_sets):
            nodes = placed.get((w, member, p), {})
            choice = form.choices[pod_sets[p]]
            out.append(PodSetAssignment(
                name=pod_set.name, count=sum(nodes.values()),
                flavors=dict(sorted(choice.option.by_resource.items())),
                levels=(HOSTNAME_LABEL,),
                domains=tuple(((node,), n) for node, n in sorted(nodes.items()) if n > 0)))
        admissions.append(Admission(workload.ref, workload.cluster_queue or "", tuple(out)))
    admissions.sort(key=lambda a: a.workload)
    return admissions, repaired


# ---------------------------------------------------------------- migrations

def migration(form: Formulation, moved: Admission, admissions: list[Admission]) -> Migration:
    """A mover's re-admission as a Migration: where it was, where it goes, the domains it
    frees and the admitted work it lets in (freed_for), and its cost."""
    mover = next(w for w in form.movers if w.ref == moved.workload)
    by_ref = {m.ref: m for w, members in enumerate(form.members) if w not in form.clones for m in members}
    frees, for_ = freed_for(form, mover, [(by_ref[a.workload], a) for a in admissions])
    return Migration(mover.ref, moved.cluster_queue, mover.assignment, moved.pod_sets, frees, for_,
                     round(semantics.eviction_cost(mover, form.snapshot), 6))


def freed_for(form: Formulation, mover: Workload,
              admitted: list[tuple[Workload, Admission]]) -> tuple[tuple[Domain, ...], tuple[ObjectRef, ...]]:
    """Domains of a required level, holding a node `mover` ran on, where admitted work of
    at least its priority now runs; and that work."""
    snapshot = form.snapshot
    nodes = {n.name: n for n in snapshot.nodes}
    mine = [nodes[n] for n in sorted(capacity.node_usage_of(mover)) if n in nodes]
    domains: set[Domain] = set()
    refs: set[ObjectRef] = set()
    for workload, admission in admitted:
        if workload.priority < mover.priority:
            continue
        for pod_set, psa in zip(workload.pod_sets, admission.pod_sets):
            request = pod_set.topology
            if request.mode != "required" or not request.level or not psa.domains:
                continue
            flavors = [snapshot.flavors[f] for f in sorted(set(psa.flavors.values())) if f in snapshot.flavors]
            levels = topology.levels_for(snapshot, flavors)
            depth = topology.level_index(levels, request.level)
            first = nodes.get(psa.domains[0][0][-1])
            if depth is None or first is None:
                continue
            where = topology.node_path(first, levels)
            if where is None:
                continue
            if any((p := topology.node_path(n, levels)) is not None and p[: depth + 1] == where[: depth + 1]
                   for n in mine):
                domains.add(Domain(levels[: depth + 1], where[: depth + 1]))
                refs.add(workload.ref)
    return tuple(sorted(domains, key=lambda d: (d.levels, d.values))), tuple(sorted(refs))
