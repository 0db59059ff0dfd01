"""A proven bound per priority tier, from a small relaxation of the model.

The full model's LP relaxation is as large as the model (at M its root LP alone takes
longer than the cycle), so a stage cut short by the time limit used to report only
"every pending workload of the tier admitted". This relaxation keeps every row of
the model that does not place pods (gang, quota, preemption, elastic counts) and
replaces placement (domain and node columns, Hall and node rows) by one capacity
row per set of eligible nodes and resource: the pods of every shape whose nodes lie
within the set need at most what the set has free, plus what evictions give back
there; and one fit row per shape: no more of its pods than fit node by node (free
capacity scattered over nodes holds fewer whole pods). Integrality is dropped. Every plan the model allows satisfies these rows, so
for each tier, with the tiers above held at what the plan achieved, the LP optimum
bounds what any plan can achieve: the same statement as a MILP stage's bound.
It has as many columns as the model has classes, options and victims, and solves in
a fraction of a second. Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from planner import capacity
from planner.formulate import Choice, Formulation, resource_units
from planner.highs import dense, highs_from, merged
from planner.model_arrays import INF, ModelArrays

# Higher tiers are held this far below what they achieved (as the stages hold them),
# and the bound is rounded up by as much: LP tolerances never make it too small.
HOLD_SLACK = 1e-6


def relaxation(form: Formulation) -> tuple[ModelArrays, np.ndarray]:
    """The model's non-placement rows and columns, plus aggregate capacity rows, as an LP
    over the non-placement columns only, and each model column's index in it (-1: gone)."""
    arrays = form.arrays
    placing_mask = np.zeros(arrays.num_cols, dtype=bool)
    placing_mask[placement_columns(form)] = True
    # Rows are added in the model's column indexes; compacted() then drops the placement
    # columns, which no kept row uses.
    out = ModelArrays(col_lower=list(arrays.col_lower), col_upper=list(arrays.col_upper),
                      col_integer=[False] * arrays.num_cols, col_names=arrays.col_names)  # shared: no column is added
    # Rows touching a placement column go; the rest keep their indexes' order.
    entry_row, entry_col, entry_val = arrays.entries()
    dropped = np.zeros(arrays.num_rows, dtype=bool)
    dropped[entry_row[placing_mask[entry_col]]] = True
    kept_rows = np.flatnonzero(~dropped)
    renumber = np.full(arrays.num_rows, -1, dtype=np.int64)
    renumber[kept_rows] = np.arange(len(kept_rows))
    keep = ~dropped[entry_row]
    out.entry_row = renumber[entry_row[keep]].tolist()
    out.entry_col = entry_col[keep].tolist()
    out.entry_val = entry_val[keep].tolist()
    out.row_lower = [arrays.row_lower[r] for r in kept_rows]
    out.row_upper = [arrays.row_upper[r] for r in kept_rows]
    out.row_names = [arrays.row_names[r] for r in kept_rows]
    for choice in form.choices:
        if unplaceable(choice):
            out.col_upper[choice.use_col] = 0.0
    demand = shape_demands(form)
    table = NodeTable.of(form, sorted({r for k in demand for r in form.shapes[k].request.names()}))
    add_capacity_rows(form, out, table, demand)
    add_fit_rows(form, out, table, demand)
    return compacted(out, ~placing_mask)


def compacted(arrays: ModelArrays, kept: np.ndarray) -> tuple[ModelArrays, np.ndarray]:
    """`arrays` with only the `kept` columns (no row may use another), renumbered, and the
    map from old column indexes to new ones (-1: dropped). At XL the placement columns
    are 5M of 5.3M: without them the LP solves in a fraction of the time."""
    keep = np.flatnonzero(kept)
    column = np.full(arrays.num_cols, -1, dtype=np.int64)
    column[keep] = np.arange(len(keep))
    rows, cols, vals = arrays.entries()
    assert (column[cols] >= 0).all(), "a relaxation row uses a dropped column"
    out = ModelArrays(col_lower=np.asarray(arrays.col_lower)[keep].tolist(),
                      col_upper=np.asarray(arrays.col_upper)[keep].tolist(),
                      col_integer=[False] * len(keep), col_names=[arrays.col_names[c] for c in keep],
                      row_lower=arrays.row_lower, row_upper=arrays.row_upper, row_names=arrays.row_names,
                      entry_row=rows.tolist(), entry_col=column[cols].tolist(), entry_val=vals.tolist())
    return out, column


def unplaceable(choice: Choice) -> bool:
    """A required or sliced pod set with no domain that could take it (the model's only
    way to place it): it cannot be admitted under this flavor option at all. (A choice
    whose placement a size cap left unbuilt is not known to be unplaceable.)"""
    if not choice.placed:
        return False
    if choice.slice_layers:
        return not all(choice.slice_cols)
    return choice.mode == "required" and not choice.domain_cols


def placement_columns(form: Formulation) -> np.ndarray:
    """Every column that places pods: supply per node, domains, counts, slices, spans."""
    tables = [shape.supply for shape in form.shapes]
    for choice in form.choices:
        tables += [choice.domain_cols, choice.count_cols, choice.span_cols, choice.upper_cols, *choice.slice_cols]
    cols = itertools.chain((col for table in tables for col in table.values()),
                           (col for col, _ in form.free_domain_cols))
    return np.fromiter(cols, dtype=np.int64)


@dataclass
class NodeTable:
    """Nodes x resources, as arrays: free now, free were every victim gone, and what each
    victim uses on each node (one entry per (victim, node) pair)."""

    nodes: list[str]
    row_of: dict[str, int]
    resources: list[str]
    free: np.ndarray          # nodes x resources
    room: np.ndarray          # nodes x resources
    victim_of: np.ndarray     # per pair
    node_of: np.ndarray       # per pair
    used: np.ndarray          # pairs x resources

    @classmethod
    def of(cls, form: Formulation, resources: list[str]) -> "NodeTable":
        nodes = sorted(form.room)
        row_of = {n: i for i, n in enumerate(nodes)}
        width = len(resources)
        free = np.array([[form.free[n].get(r) for r in resources] for n in nodes], dtype=np.int64)
        room = np.array([[form.room[n].get(r) for r in resources] for n in nodes], dtype=np.int64)
        pairs = [(v, row_of[n], [u.get(r) for r in resources]) for v, victim in enumerate(form.victims)
                 for n, u in capacity.node_usage_of(victim).items()
                 if n in row_of and n not in form.overcommitted]   # an overcommitted node frees nothing
        return cls(nodes, row_of, resources, free.reshape(len(nodes), width), room.reshape(len(nodes), width),
                   np.array([v for v, _, _ in pairs], dtype=np.int64),
                   np.array([n for _, n, _ in pairs], dtype=np.int64),
                   np.array([u for _, _, u in pairs], dtype=np.int64).reshape(len(pairs), width))

    def per_victim(self, per_pair: np.ndarray, count: int) -> np.ndarray:
        """Sum a per-(victim, node) quantity over each victim's nodes."""
        if not len(self.victim_of):
            return np.zeros(count)
        return np.bincount(self.victim_of, weights=per_pair, minlength=count)


def shape_demands(form: Formulation) -> dict[int, list[tuple[int, float]]]:
    """Per shape, the expression of its pods over every choice placing it."""
    demand: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for choice in form.choices:
        demand[choice.shape].extend(choice.pods)
    return demand


def add_capacity_rows(form: Formulation, out: ModelArrays, table: NodeTable,
                      demand: dict[int, list[tuple[int, float]]]) -> None:
    """Per eligible node set E and resource: pods of shapes confined to E <= free in E + freed in E."""
    eligible = [frozenset(n for n in shape.paths if n in table.row_of) for shape in form.shapes]
    units = resource_units(form)
    for nodes in sorted(set(eligible), key=lambda s: (len(s), sorted(s)[:1])):
        inside = [k for k, e in enumerate(eligible) if e <= nodes and demand.get(k)]
        if not inside:
            continue
        mask = np.zeros(len(table.nodes), dtype=bool)
        mask[[table.row_of[n] for n in nodes]] = True
        pair_inside = mask[table.node_of] if len(table.node_of) else np.zeros(0, dtype=bool)
        needed = {r for k in inside for r in form.shapes[k].request.names()}
        for j, resource in enumerate(table.resources):
            if resource not in needed:
                continue
            unit = units.get(resource, 1)
            terms = [(col, coef * form.shapes[k].request.get(resource) / unit)
                     for k in inside for col, coef in demand[k] if form.shapes[k].request.get(resource)]
            given = table.per_victim(np.where(pair_inside, table.used[:, j], 0), len(form.victims))
            terms += [(form.evict_col[v], -float(given[v]) / unit) for v in np.flatnonzero(given > 0)]
            out.add_row(f"capacity[{len(nodes)},{resource}]", terms, -INF, float(table.free[mask, j].sum()) / unit)


def add_fit_rows(form: Formulation, out: ModelArrays, table: NodeTable,
                 demand: dict[int, list[tuple[int, float]]]) -> None:
    """Per shape: its pods <= how many fit on its nodes as they are free now, plus, per
    eviction, what all of the victim's nodes would add were everything on them evicted.

    This catches fragmentation the capacity rows cannot see (8 free GPUs spread over
    nodes hold no 8-GPU pod). Valid: a node fits more only if some victim on it goes,
    and then at most its fit with every victim gone."""
    for k in sorted(demand):
        request = np.array([form.shapes[k].request.get(r) for r in table.resources], dtype=np.int64)
        used = request > 0
        eligible = np.array(sorted(table.row_of[n] for n in form.shapes[k].paths if n in table.row_of),
                            dtype=np.int64)
        if not used.any() or not len(eligible):
            continue
        fits_now = np.zeros(len(table.nodes), dtype=np.int64)
        fits_all = np.zeros(len(table.nodes), dtype=np.int64)
        fits_now[eligible] = np.maximum(0, (table.free[eligible][:, used] // request[used]).min(axis=1))
        fits_all[eligible] = np.maximum(0, (table.room[eligible][:, used] // request[used]).min(axis=1))
        gain = table.per_victim((fits_all - fits_now)[table.node_of], len(form.victims))
        terms = list(demand[k]) + [(form.evict_col[v], -float(gain[v])) for v in np.flatnonzero(gain > 0)]
        out.add_row(f"fit[{k}]", terms, -INF, float(fits_now.sum()))


class TierBounds:
    """The relaxation, built and handed to HiGHS once (a cycle does it while the start is
    computed: at XL that takes seconds), then solved tier by tier on request."""

    def __init__(self, form: Formulation):
        import highspy

        self.form = form
        self._hs = highspy
        arrays, self.column = relaxation(form)
        self.num_cols = arrays.num_cols
        self.h = highs_from(arrays, form.snapshot.policy.threads, integral=False)
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self._used = False

    def __call__(self, achieved: dict[int, float], tiers: list[int]) -> dict[int, float]:
        """For each of `tiers`: the most its volume can be with every higher tier at least at
        `achieved` (the relaxation's LP optimum, rounded up). Missing where the LP fails.
        Once per instance: the holds it adds stay."""
        assert not self._used, "TierBounds answers once"
        self._used = True
        form, h = self.form, self.h
        out: dict[int, float] = {}
        for tier in form.tiers:
            # In the LP's columns; placement columns are not among a tier's volume terms.
            terms = [(int(self.column[col]), coef) for col, coef in form.tier_volume[tier]]
            assert all(col >= 0 for col, _ in terms)
            if tier in tiers:
                h.changeColsCost(self.num_cols, np.arange(self.num_cols, dtype=np.int32), dense(terms, self.num_cols))
                h.run()
                if h.getModelStatus() == self._hs.HighsModelStatus.kOptimal:
                    found = float(h.getInfo().objective_function_value)
                    out[tier] = found + HOLD_SLACK * (1.0 + abs(found))
            if tier not in achieved:
                break
            cols, vals = merged(terms)
            h.addRow(achieved[tier] - HOLD_SLACK, INF, len(cols), cols, vals)
        return out


def tier_bounds(form: Formulation, achieved: dict[int, float], tiers: list[int]) -> dict[int, float]:
    """TierBounds(form)(achieved, tiers): the relaxation built and solved at once."""
    return TierBounds(form)(achieved, tiers)
