"""Decisions -> a column vector of the model: the MIP start (greedy's plan), or None
when the model does not allow it.

Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from models import Admission, Decisions, ObjectRef, PodSetAssignment
from planner.milp.rows import OptionColumns
from planner.milp.rows import Formulation
from planner.milp.fairness import fill_fairness_columns
from planner.milp.guarantee import Guarantee, fill_guarantee_columns
from planner.milp.warmstart import feasible, fill_class_columns, fill_free_domain_columns, fill_quota_columns, place

Path = tuple[str, ...]


def empty_start(form: Formulation) -> np.ndarray:
    values = np.zeros(form.arrays.num_cols)
    finish(form, values)
    return values


def start_from(form: Formulation, decisions: Decisions, ease: bool = False,
               unstable: frozenset[ObjectRef] = frozenset()) -> np.ndarray | None:
    """The decisions as a feasible column vector, or None if the model does not allow them.

    With `ease`, stability rows that alone keep the decisions out are eased (planner.
    guarantee asks more than Kueue where no node could take a workload even after the
    reclaim; greedy's plan, Kueue's own, shows where), but never for a workload in
    `unstable` (one the verifier finds Kueue would reclaim for in these decisions): the
    eased workloads are left to the verifier, which checks the rule exactly.
    `form.eased` counts them."""
    values = np.zeros(form.arrays.num_cols)
    member_of = {m.ref: (w, i) for w, members in enumerate(form.members) for i, m in enumerate(members)}
    choices_of: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, choice in enumerate(form.choices):
        choices_of[(choice.workload, choice.pod_set)].append(i)
    group_of = {(g.workload, p): g for g in form.groups for p in g.pod_sets}
    taken: dict[tuple[int, int], int] = {}             # (workload class, pod set) -> choice index
    pods_of: dict[int, list[dict[str, int]]] = defaultdict(list)   # shape -> pods per node, per pod set placed
    moves = [Admission(m.workload, m.cluster_queue, m.to) for m in decisions.migrations]
    for admission in list(decisions.admissions) + moves:
        found = member_of.get(admission.workload)
        if found is None:
            return None
        w, _ = found
        workload = form.workloads[w]
        values[form.admit_col[w]] += 1.0
        by_name = {psa.name: psa for psa in admission.pod_sets}
        picked: dict[int, int] = {}
        for p, pod_set in enumerate(workload.pod_sets):
            psa = by_name.get(pod_set.name)
            if psa is None:
                return None
            index = next((i for i in choices_of[(w, p)]
                          if dict(form.choices[i].option.by_resource) == dict(psa.flavors)), None)
            if index is None:
                return None
            picked[p] = index
            pods_of[form.choices[index].shape].append(psa.pods_per_node())
        for p, index in picked.items():
            choice = form.choices[index]
            psa = by_name[workload.pod_sets[p].name]
            if (w, p) in group_of:
                continue
            if index in form.choice_class:
                values[choice.use_col] += 1.0
                if not place_in_class(form, form.choice_class[index], [(0, psa)], values):
                    return None
            elif choice.mode == "preferred":
                place_preferred(form, choice, psa.pods_per_node(), values)
            elif not place(form, choice, psa.pods_per_node(), values, supply=False):
                return None
        for group in {id(g): g for (gw, _), g in group_of.items() if gw == w}.values():
            combo = tuple(picked[p] for p in group.pod_sets)
            match = next((g for g in form.groups if g.workload == w and g.choices == combo), None)
            if match is None:
                return None
            values[match.col] += 1.0 if match.col not in (form.choices[i].use_col for i in combo) else 0.0
            for index in combo:
                values[form.choices[index].use_col] += 1.0
            members = [(m, by_name[form.workloads[w].pod_sets[p].name]) for m, p in enumerate(group.pod_sets)]
            if not place_in_class(form, match.demand_class, members, values):
                return None
    pools = form.pools
    assert pools is not None
    for shape, placements in pods_of.items():
        for per_node in placements:
            for node, pods in per_node.items():
                pool_index = pools.pool_of.get(node)
                if pool_index is None:
                    return None
                pool = pools.pools[pool_index]
                col = pool.supply.get(shape) if pool.aggregated else pool.node_supply.get(shape, {}).get(node)
                if col is None:
                    return None
                values[col] += pods
    victim_index = {w.ref: i for i, w in enumerate(form.victims)}
    for eviction in decisions.evictions:
        if eviction.workload not in victim_index:
            return None
        values[form.evict_col[victim_index[eviction.workload]]] = 1.0
    mover_index = {w.ref: i for i, w in enumerate(form.movers)}
    for move in decisions.migrations:
        if move.workload not in mover_index:
            return None
        values[form.move_col[mover_index[move.workload]]] = 1.0
    finish(form, values)
    if ease and form.guarantee is not None and not feasible(form, values):
        ease_rows(form, form.guarantee, values, unstable)
    return values if feasible(form, values) else None


def ease_rows(form: Formulation, found: Guarantee, values: np.ndarray, unstable: frozenset[ObjectRef]) -> None:
    """Drop the stability rows `values` breaks, if no other row is broken and none is a
    workload's in `unstable`."""
    arrays = form.arrays
    activity = arrays.evaluate_rows(values)
    lower, upper = np.asarray(arrays.row_lower), np.asarray(arrays.row_upper)
    broken = np.flatnonzero((activity < lower - 1e-6) | (activity > upper + 1e-6))
    stability = {row: ref for row, ref in found.rows}
    if len(broken) and all(int(r) in stability and stability[int(r)] not in unstable for r in broken):
        for r in broken:
            arrays.row_upper[int(r)] = float("inf")
        form.eased = len(broken)


def place_preferred(form: Formulation, choice: OptionColumns, per_node: dict[str, int], values: np.ndarray) -> None:
    """A preferred pod set: pods per candidate domain, the rest anywhere."""
    shape = form.shapes[choice.shape]
    assert choice.level is not None   # a preferred pod set has its level
    values[choice.use_col] += 1.0
    for node, pods in per_node.items():
        domain = shape.paths[node][: choice.level + 1]
        where = domain if domain in choice.domain_cols else ()
        values[choice.domain_cols[where]] += pods
        values[choice.span_cols[where]] = 1.0


def place_in_class(form: Formulation, index: int, members: list[tuple[int, PodSetAssignment]],
                   values: np.ndarray) -> bool:
    """Count one workload in its demand class: the domain its pods share (X) and, per
    member pod set, its slices per domain (k)."""
    demand_class = form.demand_classes[index]
    nodes = {n for _, psa in members for n in psa.pods_per_node()}
    if demand_class.level is None:
        domain: Path = ()
    else:
        shape = form.shapes[demand_class.members[0].shape]
        depth = shape.levels.index(demand_class.level) + 1
        domains = {shape.paths[n][:depth] for n in nodes if n in shape.paths}
        if len(domains) != 1 or len(nodes) != sum(1 for n in nodes if n in shape.paths):
            return False
        (domain,) = domains
    col = demand_class.domain_cols.get(domain)
    if col is None:
        return False
    values[col] += 1.0
    for m, psa in members:
        member = demand_class.members[m]
        shape = form.shapes[member.shape]
        for layer, (level, size) in enumerate(member.slices):
            per_domain: dict[Path, int] = defaultdict(int)
            for node, pods in psa.pods_per_node().items():
                if node not in shape.paths:
                    return False
                per_domain[shape.paths[node][: level + 1]] += pods
            cols = demand_class.slice_cols.get((m, layer), {})
            for sub, pods in per_domain.items():
                if pods % size or sub not in cols:
                    return False
                values[cols[sub]] += pods // size
    return True


def finish(form: Formulation, values: np.ndarray) -> None:
    """Columns that follow from the decisions: slots, preemptor classes, quota, guarantee."""
    evicted = {c for c in form.evict_col + form.move_col if values[c] > 0.5}
    slots: dict[int, float] = {}
    assert form.pools is not None
    form.pools.slot_values(evicted, slots)
    for col, value in slots.items():
        values[col] = value
    fill_class_columns(form, values)
    fill_free_domain_columns(form, values)
    fill_quota_columns(form, values)
    fill_guarantee_columns(form.guarantee, values)
    fill_fairness_columns(form.fairness, values)
