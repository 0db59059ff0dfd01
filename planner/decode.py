"""Solver values -> Decisions: which workloads start, with which flavors, on which nodes.

The MILP decides pods per domain and pods per (shape, node); here each workload's
pods get concrete nodes. Demands are served deepest domain first, each from the
nodes of its own domain with the most supply left (so a workload lands on as few
nodes as possible). By Hall's condition on the domain tree, which every solution
satisfies, this never runs out of supply.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import numpy as np

from models import HOSTNAME_LABEL, Admission, Decisions, Eviction, ObjectRef, PodSetAssignment, Workload
from planner import capacity, semantics
from planner.formulate import Choice, Formulation, Path


class DecodeError(Exception):
    """The solver's values do not describe a placeable plan (a bug or numerical trouble)."""


def chosen(values: np.ndarray, col: int) -> bool:
    return values[col] > 0.5


def count(values: np.ndarray, col: int) -> int:
    return int(round(values[col]))


def member_demands(choice: Choice, values: np.ndarray) -> list[list[tuple[Path, int]]]:
    """For each member of the class taking this choice: the (domain, pods) it must place.

    Members of a class are identical, so the counts per domain are handed out in
    order: the i-th member gets the i-th domain, and whole slices from its pool.
    """
    members = count(values, choice.use_col)
    if members == 0:
        return []
    if choice.mode == "preferred":
        # Preferred pod sets are classes of one: every domain's pods are that member's.
        containers = [(p, count(values, c)) for p, c in sorted(choice.domain_cols.items()) if count(values, c)]
        return [[piece for path, pods in containers for piece in slice_pieces(choice, values, path, pods)]]
    per_member = int(round(sum(k * values[c] for c, k in choice.pods))) // members
    if choice.mode == "required":
        containers = [p for p, c in sorted(choice.domain_cols.items()) for _ in range(count(values, c))]
    else:
        containers = [()] * members
    if not choice.slice_layers:
        return [[(path, per_member)] for path in containers]
    pools = {path: slice_units(choice, values, 0, path) for path in set(containers)}
    needed = per_member // choice.slice_layers[0][1]
    out = []
    for path in containers:
        units, pools[path] = pools[path][:needed], pools[path][needed:]
        out.append([piece for unit in units for piece in unit])
    return out


def slice_pieces(choice: Choice, values: np.ndarray, path: Path, pods: int) -> list[tuple[Path, int]]:
    """All of a container's pods, as whole slices when the pod set asks for slices."""
    if not choice.slice_layers:
        return [(path, pods)]
    return [piece for unit in slice_units(choice, values, 0, path) for piece in unit]


def slice_units(choice: Choice, values: np.ndarray, layer: int, path: Path) -> list[list[tuple[Path, int]]]:
    """The slices of `layer` inside `path`, each as its innermost (domain, pods) pieces.
    A slice of an outer layer is made of size/inner-size whole slices of the next."""
    level, size = choice.slice_layers[layer]
    last = layer == len(choice.slice_layers) - 1
    out: list[list[tuple[Path, int]]] = []
    for sub, col in sorted(choice.slice_cols[layer].items()):
        if sub[: len(path)] != path or count(values, col) == 0:
            continue
        if last:
            out.extend([[(sub, size)] for _ in range(count(values, col))])
            continue
        inner = slice_units(choice, values, layer + 1, sub)
        ratio = size // choice.slice_layers[layer + 1][1]
        for i in range(count(values, col)):
            out.append([piece for unit in inner[i * ratio:(i + 1) * ratio] for piece in unit])
    return out


def decode(form: Formulation, values: np.ndarray) -> Decisions:
    """Admit the oldest members of each class; give every pod a node."""
    supply: dict[int, dict[str, int]] = {
        s: {node: count(values, col) for node, col in shape.supply.items()}
        for s, shape in enumerate(form.shapes)
    }
    by_pod_set: dict[tuple[int, int], list[tuple[Choice, list[tuple[Path, int]]]]] = defaultdict(list)
    for choice in form.choices:
        for demands in member_demands(choice, values):
            by_pod_set[(choice.workload, choice.pod_set)].append((choice, demands))
    jobs = []      # (deepest first, member, pod set, domain, pods)
    slots: dict[tuple[int, int, int], Choice] = {}
    for w, members in enumerate(form.members):
        admitted = count(values, form.admit_col[w])
        for p in range(len(form.workloads[w].pod_sets)):
            entries = by_pod_set.get((w, p), [])
            if len(entries) != admitted:
                raise DecodeError(f"{form.workloads[w].ref}: {admitted} admitted but pod set {p} placed {len(entries)} times")
            for i, (choice, demands) in enumerate(entries):
                slots[(w, i, p)] = choice
                jobs.extend((-len(path), w, i, p, path, pods) for path, pods in demands)
    placed: dict[tuple[int, int, int], dict[str, int]] = defaultdict(dict)
    order = NodeOrder(form, supply)
    for _, w, i, p, path, pods in sorted(jobs):
        choice = slots[(w, i, p)]
        take_from_domain(order, choice.shape, path, pods, supply[choice.shape], placed[(w, i, p)],
                         form.members[w][i].ref)
    admissions = []
    for w, members in enumerate(form.members):
        for i in range(count(values, form.admit_col[w])):
            workload = members[i]
            pod_sets = []
            for p, pod_set in enumerate(workload.pod_sets):
                choice, nodes = slots[(w, i, p)], placed[(w, i, p)]
                pod_sets.append(PodSetAssignment(
                    name=pod_set.name,
                    count=sum(nodes.values()),
                    flavors=dict(sorted(choice.option.by_resource.items())),
                    levels=(HOSTNAME_LABEL,),
                    domains=tuple(((node,), n) for node, n in sorted(nodes.items()) if n > 0),
                ))
            admissions.append(Admission(workload.ref, workload.cluster_queue or "", tuple(pod_sets)))
    admissions.sort(key=lambda a: a.workload)
    evictions = decode_evictions(form, values, admissions)
    return Decisions(tuple(admissions), evictions)


def decode_evictions(form: Formulation, values: np.ndarray, admissions: list[Admission]) -> tuple[Eviction, ...]:
    """Each evicted workload, the admitted workloads it makes way for, and its cost.

    `for` lists the admitted workloads allowed to evict it that use its nodes, or,
    when none does, the first (by name) of those allowed at all.
    """
    snapshot = form.snapshot
    rules = form.preemption
    assert rules is not None
    by_ref = {m.ref: m for members in form.members for m in members}
    on_node: dict[str, list[int]] = defaultdict(list)   # node -> admissions (by index) placed there
    for i, a in enumerate(admissions):
        for node in {v[-1] for ps in a.pod_sets for v, _ in ps.domains}:
            on_node[node].append(i)

    def allowed(indexes: Iterable[int], victim: Workload) -> list[tuple[ObjectRef, str]]:
        judged = ((admissions[i].workload, rules.reason(by_ref[admissions[i].workload], victim)) for i in indexes)
        return [(ref, reason) for ref, reason in judged if reason]

    classes = rules.classes([by_ref[a.workload] for a in admissions])   # admissions are sorted by name
    out = []
    for victim, col in zip(form.victims, form.evict_col):
        if not chosen(values, col):
            continue
        # Those using its nodes first (few, found by index); else one allowed at all,
        # judged class by class (the rules look at queues and priorities).
        near = sorted({i for node in capacity.node_usage_of(victim) for i in on_node.get(node, ())})
        sharing = allowed(near, victim)
        if not sharing:
            first = min((permitted[0].ref for permitted in (rules.allowed(members, victim)
                                                            for members in classes.values()) if permitted), default=None)
            sharing = [] if first is None else [(first, rules.reason(by_ref[first], victim) or "")]
        if not sharing:
            raise DecodeError(f"{victim.ref}: evicted but no admitted workload may evict it")
        out.append(Eviction(victim.ref, sharing[0][1], tuple(sorted(ref for ref, _ in sharing)),
                            round(semantics.eviction_cost(victim, snapshot), 6)))
    return tuple(sorted(out, key=lambda e: e.workload))


class NodeOrder:
    """Per (shape, domain): its nodes, most supply first, then by name, computed once.

    Demands are served in this order, so each workload lands on as few nodes as
    possible; a cursor skips nodes already used up, keeping decode near-linear.
    """

    def __init__(self, form: Formulation, supply: dict[int, dict[str, int]]):
        self.form, self.supply = form, supply
        self.lists: dict[tuple[int, Path], list[str]] = {}
        self.cursor: dict[tuple[int, Path], int] = {}
        self.by_prefix: dict[int, dict[Path, list[str]]] = {}

    def nodes(self, shape: int, path: Path) -> tuple[list[str], int]:
        key = (shape, path)
        if key not in self.lists:
            if shape not in self.by_prefix:
                index: dict[Path, list[str]] = defaultdict(list)
                for node, node_path in self.form.shapes[shape].paths.items():
                    if self.supply[shape].get(node, 0) > 0:
                        for depth in range(len(node_path) + 1):
                            index[node_path[:depth]].append(node)
                self.by_prefix[shape] = index
            members = self.by_prefix[shape].get(path, [])
            self.lists[key] = sorted(members, key=lambda n: (-self.supply[shape][n], n))
            self.cursor[key] = 0
        return self.lists[key], self.cursor[key]


def take_from_domain(order: NodeOrder, shape: int, path: Path, pods: int,
                     supply: dict[str, int], placed: dict[str, int], ref: object) -> None:
    """Give `pods` pods nodes inside `path`, in the domain's node order."""
    nodes, start = order.nodes(shape, path)
    left = pods
    index = start
    while left and index < len(nodes):
        node = nodes[index]
        take = min(left, supply[node])
        if take:
            supply[node] -= take
            placed[node] = placed.get(node, 0) + take
            left -= take
        if supply[node] == 0 and index == order.cursor[(shape, path)]:
            order.cursor[(shape, path)] = index + 1
        index += 1
    if left:
        raise DecodeError(f"{ref}: {left} pods found no node in domain {'/'.join(path) or 'root'}")
