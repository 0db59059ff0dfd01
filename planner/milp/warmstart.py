"""Filling a start's columns that follow from its decisions (preemptor classes, quota,
free domains), a pod set's own domain columns, and the check that a start is feasible:
shared by planner.milp.start."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from models import Decisions
from planner.milp.rows import OptionColumns, Formulation

TOLERANCE = 1e-6


def fill_free_domain_columns(form: Formulation, values: np.ndarray) -> None:
    """f[D] = 1 for every candidate domain no pod lands in."""
    for (f, _), cols in zip(form.free_domain_cols, form.free_domain_supply):
        values[f] = float(all(values[c] < 0.5 for c in cols))


def fill_class_columns(form: Formulation, values: np.ndarray) -> None:
    """g[c] = 1 when some workload of preemptor class c is admitted (one pass over the
    admitted: asking every class about every workload grows as classes x workloads)."""
    for col in form.class_cols.values():
        values[col] = 0.0
    if form.preemption is None:
        return
    for w, workload in enumerate(form.workloads):
        if values[form.admit_col[w]] > 0.5 and w not in form.clones:
            key = (workload.cluster_queue or "", workload.priority, form.preemption.borrows(workload))
            class_col = form.class_cols.get(key)
            if class_col is not None:
                values[class_col] = 1.0


def place(form: Formulation, choice: OptionColumns, per_node: dict[str, int], values: np.ndarray,
          supply: bool = True) -> bool:
    """Set u, c, x/n/z, k and (unless not `supply`: the caller sets supply) y for one pod
    set placed as `per_node` says."""
    shape = form.shapes[choice.shape]
    count = sum(per_node.values())
    values[choice.use_col] += 1.0
    for col, coef in choice.pods:
        if col != choice.use_col:
            values[col] = count / coef  # elastic: a class of one
    if not form.complete:
        return True     # no placement to set: the model is never solved
    by_domain: dict[tuple[str, ...], int] = defaultdict(int)
    by_slice: list[dict[tuple[str, ...], int]] = [defaultdict(int) for _ in choice.slice_layers]
    for node, pods in per_node.items():
        if supply:
            if node not in shape.supply:
                return False
            values[shape.supply[node]] += pods
        elif node not in shape.paths:
            return False
        path = shape.paths[node]
        if choice.level is not None:
            by_domain[path[: choice.level + 1]] += pods
        for layer, (level, _) in enumerate(choice.slice_layers):
            by_slice[layer][path[: level + 1]] += pods
    if choice.mode == "required":
        if len(by_domain) != 1:
            return False
        (domain, pods), = by_domain.items()
        if domain not in choice.domain_cols:
            return False
        values[choice.domain_cols[domain]] += 1.0
        if choice.count_cols:
            values[choice.count_cols[domain]] = pods
    elif choice.mode == "preferred":
        for domain, pods in by_domain.items():
            if domain not in choice.domain_cols:
                return False
            values[choice.domain_cols[domain]] = pods
            values[choice.span_cols[domain]] = 1.0
            for depth in range(1, len(domain)):
                values[choice.upper_cols[domain[:depth]]] = 1.0
    for layer, (_, size) in enumerate(choice.slice_layers):
        for domain, pods in by_slice[layer].items():
            if domain not in choice.slice_cols[layer] or pods % size:
                return False
            values[choice.slice_cols[layer][domain]] += pods // size
    return True


def fill_quota_columns(form: Formulation, values: np.ndarray) -> None:
    """b = max(0, usage - guaranteed), computed from each b's own row, children first."""
    arrays = form.arrays
    rows_of = dict(form.quota_cols.values())
    for _ in range(len(rows_of) + 1):
        activity = arrays.evaluate_rows(values)
        changed = False
        for col, row in rows_of.items():
            without = activity[row] - values[col]
            needed = max(0.0, arrays.row_lower[row] - without)
            if abs(needed - values[col]) > TOLERANCE:
                values[col] = needed
                changed = True
        if not changed:
            return


def feasible(form: Formulation, values: np.ndarray) -> bool:
    arrays = form.arrays
    activity = arrays.evaluate_rows(values)
    lower = np.asarray(arrays.row_lower)
    upper = np.asarray(arrays.row_upper)
    cols_ok = np.all(values >= np.asarray(arrays.col_lower) - TOLERANCE) and \
        np.all(values <= np.asarray(arrays.col_upper) + TOLERANCE)
    return bool(cols_ok and np.all(activity >= lower - TOLERANCE) and np.all(activity <= upper + TOLERANCE))
