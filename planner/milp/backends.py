"""Solver backends and the pieces every stage uses.

Backends: HiGHS through highspy (default; the model handed over once as arrays) or any
solver PuLP drives ("pulp:CBC"), fed from the same arrays; neither prints to stdout.
A stage's honest outcome (StageResult) and a pass's (PassOutcome), and the lexicographic
helpers (the nudge that keeps lower tiers' work among equal answers, a tier's bound from
its stage's) the stages of planner.milp.stages use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from planner.base import interrupt

from planner.base import progress
from planner.base.budget import now
from planner.milp.rows import Formulation
from planner.milp.highs import LpRelaxation, dense, highs_from, merged, set_time_limit
from planner.milp.arrays import INF, ModelArrays

# Volumes are held at (achieved - this) so solver tolerances never make a stage infeasible.
HOLD_SLACK = 1e-6
# A stage whose bound is within this (relative) of its answer is proven optimal.
PROVEN_TOLERANCE = 1e-5
# The preemption cost and tie-breakers order plans whose volumes are settled: at least this gap.
TAIL_GAP = 0.005


@dataclass
class StageResult:
    name: str
    status: str             # optimal | feasible | kept (start already best) | failed
    objective: float
    bound: float
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {"stage": self.name, "status": self.status, "objective": round(self.objective, 6),
                "bound": round(self.bound, 6), "seconds": round(self.seconds, 3)}


def record(stages: list[StageResult], result: StageResult) -> None:
    """Keep a finished stage, and tell whoever listens (planner.base.progress: the CLI's progress)."""
    stages.append(result)
    progress.stage_done(result.name, result.status, result.objective, result.bound, result.seconds)


@dataclass
class PassOutcome:
    """One pass of the stages (planner.milp.stages `solve_pass`): its plan and where it stands."""

    values: np.ndarray
    status: str                              # optimal | feasible
    objective: float                         # admitted volume over all tiers
    bound: float                             # sum of per-tier proven bounds
    stages: list[StageResult] = field(default_factory=list)
    message: str = ""

    @property
    def gap(self) -> float:
        if self.bound <= 0:
            return 0.0
        return max(0.0, (self.bound - self.objective) / abs(self.bound))


class Backend(Protocol):
    def set_objective(self, terms: list[tuple[int, float]], maximize: bool) -> None: ...
    def add_row(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None: ...
    def run(self, time_limit: float, gap: float, start: np.ndarray) -> tuple[np.ndarray | None, str, float | None]: ...
    # Could a stage of this many seconds do anything (a solver not built yet needs time
    # to read the model)?
    def worth_starting(self, seconds: float) -> bool: ...
    # For planner.milp.neighbourhood: the LP relaxation (None where the backend has none), and a run
    # with some columns fixed at the start's values.
    def relax(self, time_limit: float, cost: np.ndarray | None = None) -> tuple[np.ndarray, float] | None: ...
    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]: ...


def value_of(terms: list[tuple[int, float]], values: np.ndarray) -> float:
    return float(sum(coef * values[col] for col, coef in terms))


def nudge(form: Formulation, tier: int) -> list[tuple[int, float]]:
    """Lower tiers' volume, scaled so that all of it together is worth less than half the
    smallest step of this tier's volume: the stage still maximises its own tier first,
    but among equal answers keeps the lower tiers' work (no eviction for nothing), so a
    stage cut short by the time limit leaves the next ones little to repair."""
    own = [abs(k) for _, k in form.tier_volume[tier] if k]
    lower = [(c, k) for t in form.tiers if t < tier for c, k in form.tier_volume[t]]
    if not own or not lower:
        return []
    total = sum(abs(k) * form.arrays.col_upper[c] for c, k in lower)
    scale = 0.5 * min(own) / (1.0 + total)
    return [(c, scale * k) for c, k in lower]


def stage_bound(form: Formulation, tier: int, objective_bound: float) -> float:
    """A bound on the tier's volume from one on its stage's objective (volume plus nudge):
    less the least the nudge can be, rounded down to the volume's step where it has one
    (integer columns, whole coefficients: the volume is a multiple of their gcd, and the
    nudge is less than half the smallest of them)."""
    arrays = form.arrays
    least = sum(min(coef * arrays.col_lower[col], coef * arrays.col_upper[col]) for col, coef in nudge(form, tier))
    bound = objective_bound - least
    terms = form.tier_volume[tier]
    if not all(arrays.col_integer[col] and float(coef).is_integer() for col, coef in terms):
        return bound
    step = math.gcd(*(int(abs(coef)) for _, coef in terms)) or 1
    return float(np.floor(bound / step + 1e-9) * step)


# ---------------------------------------------------------------- HiGHS

# HiGHS's presolve runs before its interrupt callback can stop it: a full MILP run needs
# about this long per nonzero of the model before it can search (BENCHMARKS.md), and
# one given less overruns its deadline by that.
PRESOLVE_SECONDS_PER_NONZERO = 5e-6


class HighsBackend:
    """highspy: the model is handed over once as arrays (passModel); stages add rows."""

    def __init__(self, arrays: ModelArrays, threads: int = 1, seed: int = 0,
                 relaxation: LpRelaxation | None = None, searches: bool = True):
        import highspy

        self._hs = highspy
        self.arrays, self.threads = arrays, threads
        self.h = highs_from(arrays, threads)
        self.h.setOptionValue("random_seed", seed)
        self.num_cols = arrays.num_cols
        self._cost = np.zeros(arrays.num_cols)
        self._maximize = True
        # The LP relaxation (planner.milp.neighbourhood), built on first use unless one is handed over
        # (solved ahead by the caller). The rows the stages add are kept: the relaxation
        # built later needs them, and so does each sub-MIP (run_fixed).
        self.relaxation, self.searches = relaxation, searches
        self._added: list[tuple[float, float, np.ndarray, np.ndarray]] = []
        self._seed = seed
        # HiGHS checks its time limit only now and then (long root cut rounds overrun
        # it by seconds); the MIP interrupt callback holds the stage to its deadline.
        self._deadline = float("inf")
        self.h.cbMipInterrupt.subscribe(self._interrupt_when_late)

    def _interrupt_when_late(self, event: Any) -> None:
        # Set both ways: HiGHS keeps the flag from one run to the next, so a run after one
        # that was interrupted would stop at its first callback. Ctrl-C and SIGTERM stop it
        # too (planner.base.interrupt): the run returns, and `_solve` raises Interrupted.
        event.interrupt(now() > self._deadline or interrupt.requested())

    def set_objective(self, terms: list[tuple[int, float]], maximize: bool) -> None:
        cost = dense(terms, self.num_cols)
        self.h.changeColsCost(self.num_cols, np.arange(self.num_cols, dtype=np.int32), cost)
        self._cost = cost
        self._maximize = maximize
        sense = self._hs.ObjSense.kMaximize if maximize else self._hs.ObjSense.kMinimize
        self.h.changeObjectiveSense(sense)

    def add_row(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None:
        cols, vals = merged(terms)
        self.h.addRow(lower, upper, len(cols), cols, vals)
        self._added.append((lower, upper, cols, vals))
        if self.relaxation is not None:
            self.relaxation.add_row(lower, upper, cols, vals)

    def worth_starting(self, seconds: float) -> bool:
        """Is there time for presolve and some search (the model is in HiGHS already)?"""
        return seconds >= 2 * PRESOLVE_SECONDS_PER_NONZERO * len(self.arrays.entry_val)

    def relax(self, time_limit: float, cost: np.ndarray | None = None) -> tuple[np.ndarray, float] | None:
        """The LP relaxation of the model as it stands (rows added; the objective, or `cost`
        where given): its solution and optimum, or None when not solved within
        `time_limit` or not searching."""
        if not self.searches:
            return None
        began = now()
        if self.relaxation is None:
            self.relaxation = LpRelaxation(self.arrays, self.threads)
            for lower, upper, cols, vals in self._added:
                self.relaxation.add_row(lower, upper, cols, vals)
        self.relaxation.settle()
        self.relaxation.set_objective(self._cost if cost is None else cost, self._maximize)
        return self.relaxation.solve(time_limit - (now() - began))

    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        """`run` with the `fixed` columns held at their values in `start`; its status and
        bound speak of that restricted model only. HiGHS gets the smaller model over the
        other columns (ModelArrays.restricted): its presolve takes longer to find that
        model by itself than the search in it does."""
        free = np.ones(self.num_cols, dtype=bool)
        free[np.asarray(fixed, dtype=np.int64)] = False
        sub = self.arrays.restricted(free, start, self._added)
        h = highs_from(sub, self.threads)
        h.setOptionValue("random_seed", self._seed)
        h.cbMipInterrupt.subscribe(self._interrupt_when_late)
        cost = self._cost[free]
        h.changeColsCost(len(cost), np.arange(len(cost), dtype=np.int32), cost)
        h.changeObjectiveSense(self._hs.ObjSense.kMaximize if self._maximize else self._hs.ObjSense.kMinimize)
        values, status, bound = self._run(h, cost, time_limit, gap, start[free])
        if values is None:
            return None, status, None
        whole = start.copy()
        whole[free] = values
        held = float(np.dot(self._cost[~free], start[~free]))
        return whole, status, None if bound is None else bound + held

    def run(self, time_limit: float, gap: float, start: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        return self._run(self.h, self._cost, time_limit, gap, start)

    def _run(self, h: Any, cost: np.ndarray, time_limit: float, gap: float,
             start: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        """Solve the MILP in `h` (objective `cost`) from `start`: values, status, bound."""
        hs = self._hs
        began = now()
        self._deadline = began + max(0.01, time_limit)
        h.setOptionValue("mip_rel_gap", float(gap))
        set_time_limit(h, max(0.01, time_limit))
        solution = hs.HighsSolution()
        solution.col_value = list(map(float, start))
        solution.value_valid = True
        h.setSolution(solution)
        self._solve(h)
        result = self._result(h)
        if result[0] is not None and not self._consistent(h, cost, result[0]):
            # Seen with HiGHS 1.16: after a re-solve from a start, the reported objective
            # can be right while col_value still holds the start; and a run interrupted
            # at its deadline reports the start's objective in presolve's reduced space.
            # Either way col_value is a solution (callers value it themselves) and the
            # reported numbers are not to be trusted: with half the time left, solve
            # again without the start; else keep col_value, with no bound.
            left = time_limit - (now() - began)
            if left < 0.5 * time_limit:
                return result[0], "feasible", None
            h.clearSolver()
            set_time_limit(h, left)
            self._solve(h)
            result = self._result(h)
            if result[0] is not None and not self._consistent(h, cost, result[0]):
                return None, "failed", None
        return result

    @staticmethod
    def _solve(h: Any) -> None:
        """h.run(), a signal deferred meanwhile: raised inside one of HiGHS's callbacks it
        would end only this run, as a solver error, and the cycle would go on; so the
        callback stops the run (`_interrupt_when_late`) and Interrupted is raised here."""
        with interrupt.deferred():
            h.run()

    @staticmethod
    def _consistent(h: Any, cost: np.ndarray, values: np.ndarray) -> bool:
        reported = float(h.getInfo().objective_function_value)
        actual = float(np.dot(cost, values))
        return abs(reported - actual) <= 1e-6 * (1.0 + abs(reported))

    def _result(self, h: Any) -> tuple[np.ndarray | None, str, float | None]:
        """Values, status and bound of the last run. Only kOptimal is `optimal`: an
        interrupted run (kInterrupt: the deadline, or a signal) is at best `feasible`. The
        dual bound is read only where HiGHS stopped searching with one (optimal, a limit,
        an interrupt); after a solver error it holds nothing proven (0, or an old run's),
        and a stage that took it would call its start optimal."""
        hs = self._hs
        model_status = h.getModelStatus()
        info = h.getInfo()
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_solution else None
        if model_status == hs.HighsModelStatus.kOptimal:
            status = "optimal"
        elif has_solution:
            status = "feasible"  # time limit or interrupted with a solution: bound below is real
        else:
            status = "failed"
        bounded = model_status in (hs.HighsModelStatus.kOptimal, hs.HighsModelStatus.kInterrupt,
                                   hs.HighsModelStatus.kTimeLimit, hs.HighsModelStatus.kIterationLimit,
                                   hs.HighsModelStatus.kSolutionLimit)
        bound = float(info.mip_dual_bound) if bounded and np.isfinite(info.mip_dual_bound) else None
        return values, status, bound


# ---------------------------------------------------------------- PuLP

class PulpBackend:
    """Any solver PuLP drives, fed from the same arrays (the bridge, not a second model)."""

    # Short names people type, mapped to PuLP's solver classes.
    ALIASES = {"CBC": "PULP_CBC_CMD", "HIGHS": "HiGHS", "GUROBI": "GUROBI", "CPLEX": "CPLEX_CMD", "SCIP": "SCIP_CMD"}

    def __init__(self, arrays: ModelArrays, solver_name: str, threads: int = 1):
        import pulp

        self._pulp = pulp
        self.solver_name = self.ALIASES.get(solver_name.upper(), solver_name)
        self.threads = threads
        self.prob = pulp.LpProblem("stowplan", pulp.LpMaximize)
        self.vars = [
            self.prob.add_variable(f"c{i}", lowBound=lo if lo > -INF else None, upBound=up if up < INF else None,
                                   cat=pulp.LpInteger if integer else pulp.LpContinuous)
            for i, (lo, up, integer) in enumerate(zip(arrays.col_lower, arrays.col_upper, arrays.col_integer))
        ]
        rows: list[list[tuple[int, float]]] = [[] for _ in range(arrays.num_rows)]
        for r, c, v in zip(arrays.entry_row, arrays.entry_col, arrays.entry_val):
            rows[r].append((c, v))
        for r, terms in enumerate(rows):
            self.add_row(terms, arrays.row_lower[r], arrays.row_upper[r])

    def _expr(self, terms: list[tuple[int, float]]) -> Any:   # a pulp.LpAffineExpression
        return self._pulp.lpSum(coef * self.vars[col] for col, coef in terms)

    def set_objective(self, terms: list[tuple[int, float]], maximize: bool) -> None:
        self.prob.sense = self._pulp.LpMaximize if maximize else self._pulp.LpMinimize
        self.prob.setObjective(self._expr(terms) if terms else self._pulp.LpAffineExpression())

    def add_row(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None:
        expr = self._expr(terms)
        if lower == upper:
            self.prob += expr == lower
            return
        if lower > -INF:
            self.prob += expr >= lower
        if upper < INF:
            self.prob += expr <= upper

    def run(self, time_limit: float, gap: float, start: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        pulp = self._pulp
        for var, value in zip(self.vars, start):
            var.setInitialValue(round(value) if var.cat == pulp.LpInteger else value)
        solver = pulp.getSolver(self.solver_name, msg=False, timeLimit=max(1, int(np.ceil(time_limit))),
                                gapRel=gap, warmStart=True, threads=self.threads)
        self.prob.solve(solver)
        # PuLP's "Optimal" can follow a time limit: the solution status tells them apart.
        solved = self.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        if not solved:
            return None, "failed", None
        values = np.asarray([v.value() if v.value() is not None else 0.0 for v in self.vars], dtype=np.float64)
        if self.prob.sol_status == pulp.LpSolutionOptimal:
            objective = float(pulp.value(self.prob.objective) or 0.0)
            return values, "optimal", objective
        return values, "feasible", None

    def worth_starting(self, seconds: float) -> bool:
        return True     # PuLP hands the model over on each run, whatever its size

    def relax(self, time_limit: float, cost: np.ndarray | None = None) -> tuple[np.ndarray, float] | None:
        """No LP relaxation through PuLP here: stages go straight to `run`."""
        return None

    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        raise NotImplementedError("relax() gives no LP point to search around")
