"""Reading solver values, shared by planner.milp.decode: counts, an elastic or preferred
pod set's demands per member, and each eviction with the admissions it is for."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import numpy as np

from models import HOSTNAME_LABEL, Admission, Decisions, Eviction, ObjectRef, PodSetAssignment, Workload
from planner.kueue import capacity, semantics
from planner.milp.rows import OptionColumns, Formulation, Path


class DecodeError(Exception):
    """The solver's values do not describe a placeable plan (a bug or numerical trouble)."""


def chosen(values: np.ndarray, col: int) -> bool:
    return bool(values[col] > 0.5)


def count(values: np.ndarray, col: int) -> int:
    return int(round(values[col]))


def member_demands(choice: OptionColumns, values: np.ndarray) -> list[list[tuple[Path, int]]]:
    """For each member of the class taking this choice: the (domain, pods) it must place.

    Members of a class are identical, so the counts per domain are handed out in
    order: the i-th member gets the i-th domain, and whole slices from its pool.
    """
    members = count(values, choice.use_col)
    if members == 0:
        return []
    if choice.mode == "preferred":
        # Preferred pod sets are classes of one: every domain's pods are that member's.
        taken = [(p, count(values, c)) for p, c in sorted(choice.domain_cols.items()) if count(values, c)]
        return [[piece for path, pods in taken for piece in slice_pieces(choice, values, path, pods)]]
    per_member = int(round(sum(k * values[c] for c, k in choice.pods))) // members
    if choice.mode == "required":
        containers: list[Path] = [p for p, c in sorted(choice.domain_cols.items()) for _ in range(count(values, c))]
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


def slice_pieces(choice: OptionColumns, values: np.ndarray, path: Path, pods: int) -> list[tuple[Path, int]]:
    """All of a container's pods, as whole slices when the pod set asks for slices."""
    if not choice.slice_layers:
        return [(path, pods)]
    return [piece for unit in slice_units(choice, values, 0, path) for piece in unit]


def slice_units(choice: OptionColumns, values: np.ndarray, layer: int, path: Path) -> list[list[tuple[Path, int]]]:
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


