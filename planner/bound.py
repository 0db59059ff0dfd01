"""A proven bound per priority tier, from a small relaxation of the model.

The full model's LP relaxation is as large as the model (at M its root LP alone takes
longer than the cycle), so a stage cut short by the time limit used to report only
"every pending workload of the tier admitted". This relaxation keeps every row of
the model that does not place pods (gang, quota, preemption, elastic counts) and
replaces placement (domain and node columns, Hall and node rows) by one capacity
row per set of eligible nodes and resource: the pods of every shape whose nodes lie
within the set need at most what the set has free, plus what evictions give back
there. Integrality is dropped. Every plan the model allows satisfies these rows, so
for each tier, with the tiers above held at what the plan achieved, the LP optimum
bounds what any plan can achieve: the same statement as a MILP stage's bound.
It has as many columns as the model has classes, options and victims, and solves in
a fraction of a second. Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from planner import capacity
from planner.formulate import Choice, Formulation, resource_units
from planner.highs import highs_from
from planner.model_arrays import INF, ModelArrays

# Higher tiers are held this far below what they achieved (as the stages hold them),
# and the bound is rounded up by as much: LP tolerances never make it too small.
HOLD_SLACK = 1e-6


def relaxation(form: Formulation) -> ModelArrays:
    """The model's non-placement rows and columns, plus aggregate capacity rows, as an LP."""
    arrays = form.arrays
    placing = placement_columns(form)
    out = ModelArrays(col_lower=list(arrays.col_lower), col_upper=list(arrays.col_upper),
                      col_integer=[False] * arrays.num_cols, col_names=list(arrays.col_names))
    for col in placing:   # kept as (unused) columns so that indexes stay the model's
        out.col_upper[col] = 0.0
        out.col_lower[col] = 0.0
    # Rows touching a placement column go; the rest keep their indexes' order.
    entry_row = np.asarray(arrays.entry_row, dtype=np.int64)
    entry_col = np.asarray(arrays.entry_col, dtype=np.int64)
    placing_mask = np.zeros(arrays.num_cols, dtype=bool)
    placing_mask[list(placing)] = True
    dropped = np.zeros(arrays.num_rows, dtype=bool)
    dropped[entry_row[placing_mask[entry_col]]] = True
    kept_rows = np.flatnonzero(~dropped)
    renumber = np.full(arrays.num_rows, -1, dtype=np.int64)
    renumber[kept_rows] = np.arange(len(kept_rows))
    keep = ~dropped[entry_row]
    out.entry_row = renumber[entry_row[keep]].tolist()
    out.entry_col = entry_col[keep].tolist()
    out.entry_val = np.asarray(arrays.entry_val, dtype=np.float64)[keep].tolist()
    out.row_lower = [arrays.row_lower[r] for r in kept_rows]
    out.row_upper = [arrays.row_upper[r] for r in kept_rows]
    out.row_names = [arrays.row_names[r] for r in kept_rows]
    for choice in form.choices:
        if unplaceable(choice):
            out.col_upper[choice.use_col] = 0.0
    add_capacity_rows(form, out)
    add_fit_rows(form, out)
    return out


def unplaceable(choice: Choice) -> bool:
    """A required or sliced pod set with no domain that could take it (the model's only
    way to place it): it cannot be admitted under this flavor option at all."""
    if choice.slice_layers:
        return not all(choice.slice_cols)
    return choice.mode == "required" and not choice.domain_cols


def placement_columns(form: Formulation) -> set[int]:
    cols: set[int] = set()
    for shape in form.shapes:
        cols.update(shape.supply.values())
    for choice in form.choices:
        for table in (choice.domain_cols, choice.count_cols, choice.span_cols, choice.upper_cols,
                      *choice.slice_cols):
            cols.update(table.values())
    cols.update(col for col, _ in form.free_domain_cols)
    return cols


def add_capacity_rows(form: Formulation, out: ModelArrays) -> None:
    """Per eligible node set E and resource: pods of shapes confined to E <= free in E + freed in E."""
    eligible = [frozenset(n for n in shape.paths if n in form.room) for shape in form.shapes]
    demand: dict[int, list[tuple[int, float]]] = defaultdict(list)   # shape -> pods expression
    for choice in form.choices:
        demand[choice.shape].extend(choice.pods)
    units = resource_units(form)
    usage = [capacity.node_usage_of(v) for v in form.victims]
    for nodes in sorted(set(eligible), key=lambda s: (len(s), sorted(s)[:1])):
        inside = [k for k, e in enumerate(eligible) if e <= nodes and demand.get(k)]
        if not inside:
            continue
        resources = sorted({r for k in inside for r in form.shapes[k].request.names()})
        for resource in resources:
            unit = units.get(resource, 1)
            free = sum(form.free[n].get(resource) for n in nodes if n in form.free)
            terms = [(col, coef * form.shapes[k].request.get(resource) / unit)
                     for k in inside for col, coef in demand[k] if form.shapes[k].request.get(resource)]
            for e, used in zip(form.evict_col, usage):
                given = sum(u.get(resource) for n, u in used.items() if n in nodes and n not in form.overcommitted)
                if given:
                    terms.append((e, -given / unit))
            out.add_row(f"capacity[{len(nodes)},{resource}]", terms, -INF, free / unit)


def add_fit_rows(form: Formulation, out: ModelArrays) -> None:
    """Per shape: its pods <= how many fit on its nodes as they are free now, plus, per
    eviction, what all of the victim's nodes would add were everything on them evicted.

    This catches fragmentation the capacity rows cannot see (8 free GPUs spread over
    nodes hold no 8-GPU pod). Valid: a node fits more only if some victim on it goes,
    and then at most its fit with every victim gone."""
    demand: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for choice in form.choices:
        demand[choice.shape].extend(choice.pods)
    nodes = sorted(form.room)
    row_of = {n: i for i, n in enumerate(nodes)}
    resources = sorted({r for k in demand for r in form.shapes[k].request.names()})
    if not nodes or not resources:
        return
    free = np.array([[form.free[n].get(r) for r in resources] for n in nodes], dtype=np.int64).reshape(-1, len(resources))
    room = np.array([[form.room[n].get(r) for r in resources] for n in nodes], dtype=np.int64).reshape(-1, len(resources))
    pairs = sorted({(v, row_of[n]) for v, victim in enumerate(form.victims)
                    for n in capacity.node_usage_of(victim) if n in row_of and n not in form.overcommitted})
    victim_of = np.array([v for v, _ in pairs], dtype=np.int64)
    node_of = np.array([n for _, n in pairs], dtype=np.int64)
    for k in sorted(demand):
        request = np.array([form.shapes[k].request.get(r) for r in resources], dtype=np.int64)
        used = request > 0
        eligible = np.array(sorted(row_of[n] for n in form.shapes[k].paths if n in row_of), dtype=np.int64)
        if not used.any() or not len(eligible):
            continue
        fits_now = np.zeros(len(nodes), dtype=np.int64)
        fits_all = np.zeros(len(nodes), dtype=np.int64)
        fits_now[eligible] = np.maximum(0, (free[eligible][:, used] // request[used]).min(axis=1))
        fits_all[eligible] = np.maximum(0, (room[eligible][:, used] // request[used]).min(axis=1))
        gain = np.bincount(victim_of, weights=(fits_all - fits_now)[node_of], minlength=len(form.victims)) \
            if len(pairs) else np.zeros(len(form.victims))
        terms = list(demand[k]) + [(form.evict_col[v], -float(gain[v])) for v in np.flatnonzero(gain > 0)]
        out.add_row(f"fit[{k}]", terms, -INF, float(fits_now.sum()))


def tier_bounds(form: Formulation, achieved: dict[int, float], tiers: list[int]) -> dict[int, float]:
    """For each of `tiers`: the most its volume can be with every higher tier at least at
    `achieved` (the relaxation's LP optimum, rounded up). Missing where the LP fails."""
    import highspy

    lp_arrays = relaxation(form)
    h = highs_from(lp_arrays, form.snapshot.policy.threads, integral=False)
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    out: dict[int, float] = {}
    for tier in form.tiers:
        terms = form.tier_volume[tier]
        if tier in tiers:
            cost = np.zeros(lp_arrays.num_cols)
            for col, coef in terms:
                cost[col] += coef
            h.changeColsCost(lp_arrays.num_cols, np.arange(lp_arrays.num_cols, dtype=np.int32), cost)
            h.run()
            if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
                found = float(h.getInfo().objective_function_value)
                out[tier] = found + HOLD_SLACK * (1.0 + abs(found))
        if tier not in achieved:
            break
        cols = sorted({c for c, _ in terms})
        merged: dict[int, float] = defaultdict(float)
        for col, coef in terms:
            merged[col] += coef
        h.addRow(achieved[tier] - HOLD_SLACK, INF, len(cols), np.asarray(cols, dtype=np.int32),
                 np.asarray([merged[c] for c in cols], dtype=np.float64))
    return out
