"""Relaxation-induced neighbourhood search (RINS): how a stage gets past its start in time.

On these models the LP relaxation is tight and nearly integral: the stage's LP
optimum is often its proven MILP optimum, and all but a few integer columns come out
integral. HiGHS finds that answer with its own neighbourhood search, but only after
its presolve and rounds of cuts, which can take longer than a cycle (numbers in
BENCHMARKS.md). So a stage first solves the LP itself, fixes every integer column
where the LP and the incumbent agree, and solves what is left (a MILP of a few
thousand columns) from the incumbent; then again from each better answer, the LP
point kept. The LP optimum also bounds the stage. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from planner.base.budget import now

# The LP may take at most this share of a stage's time; the rest is for the sub-MIPs
# (and the plain MILP search after them).
LP_SHARE = 0.8
# A sub-MIP answer must beat the incumbent by this much (relative) to count.
IMPROVEMENT = 1e-9
# Each better answer moves the neighbourhood; a few moves reach what one LP point offers.
MAX_ROUNDS = 4
# Columns within this of each other count as agreeing.
AGREE = 1e-6
# The dive (search below) may take this share of the time the LP leaves.
DIVE_SHARE = 0.5


class Searchable(Protocol):
    def relax(self, time_limit: float, cost: np.ndarray | None = None) -> tuple[np.ndarray, float] | None: ...
    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]: ...


@dataclass
class Neighbourhood:
    values: np.ndarray            # the best answer found (the incumbent if none better)
    lp_optimum: float | None      # of the stage's objective; None when the LP was not solved
    rounds: int                   # sub-MIPs that found a better answer


def search(backend: Searchable, incumbent: np.ndarray, objective: Callable[[np.ndarray], float],
           integer: np.ndarray, deadline: float, gap: float, maximize: bool = True,
           widen: Callable[[np.ndarray], np.ndarray] | None = None,
           lp_cost: np.ndarray | None = None) -> Neighbourhood:
    """Improve `incumbent` under the backend's current objective before `deadline`.

    `objective` evaluates that objective; `integer` marks the integer columns. The LP
    gets LP_SHARE of the time; an LP not solved by then means no search. `lp_cost`: the
    LP's objective where it differs (a stage's own volume without its nudge: the same
    optimum bound on the volume, found in a fraction of the iterations). `widen` gives
    more columns to free around the disagreeing ones (the other columns of their nodes):
    once a neighbourhood finds nothing better, the search goes on in
    the wider one."""
    sign = 1.0 if maximize else -1.0
    lp_limit = LP_SHARE * (deadline - now())
    relaxed = backend.relax(lp_limit, lp_cost) if lp_limit > 0 else None
    if relaxed is None:
        return Neighbourhood(incumbent, None, 0)
    point, optimum = relaxed
    best = sign * objective(incumbent)
    rounds, wide = 0, False
    # A dive first: every integer column that both the LP and the incumbent leave at
    # zero held there, the rest searched from the incumbent's values. Far from the
    # incumbent (nothing new, or a start from another method) the two supports make a
    # small model where the incumbent's neighbourhood would be the whole one, and the
    # incumbent stays in it. (Holding every column the LP sets to a whole number is
    # smaller still, but is seldom feasible.)
    zero = integer & (np.abs(point) <= AGREE) & (np.abs(incumbent) <= AGREE)
    left = deadline - now()
    if left > 0 and best < sign * optimum - IMPROVEMENT * (1.0 + abs(optimum)) and zero.any():
        values, _, _ = backend.run_fixed(DIVE_SHARE * left, gap, incumbent, np.flatnonzero(zero))
        if values is not None and sign * objective(values) > best + IMPROVEMENT * (1.0 + abs(best)):
            incumbent, best, rounds = values, sign * objective(values), 1
    for _ in range(MAX_ROUNDS):
        left = deadline - now()
        if left <= 0 or best >= sign * optimum - IMPROVEMENT * (1.0 + abs(optimum)):
            break
        free = integer & (np.abs(point - incumbent) > AGREE)
        if not free.any():
            break    # the LP point is the incumbent: nothing to search
        if wide and widen is not None:
            free[widen(np.flatnonzero(free))] = True
        values, _, _ = backend.run_fixed(left, gap, incumbent, np.flatnonzero(integer & ~free))
        if values is None or sign * objective(values) <= best + IMPROVEMENT * (1.0 + abs(best)):
            if wide or widen is None:
                break
            wide = True      # nothing better this close: free the rest of the nodes it touches
            continue
        incumbent, best, rounds = values, sign * objective(values), rounds + 1
    return Neighbourhood(incumbent, optimum, rounds)
