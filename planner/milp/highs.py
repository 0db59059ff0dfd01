"""A ModelArrays handed to HiGHS in one call (passModel with numpy arrays), quietly.

Used by the MILP backend (planner.milp.backends), its LP relaxation included.
Every highspy.Highs is made here (`new_highs`), silent unless `log_to_console` is set
(the CLI's --verbose): HiGHS prints its "Running HiGHS ... Copyright" banner from the
constructor of a process's first instance, before any option can be set, so that
construction runs with file descriptor 1 pointed at /dev/null.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from typing import Any, Iterator

import numpy as np

from planner.base import interrupt
from planner.milp.arrays import ModelArrays


def merged(terms: list[tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """A row's terms with repeated columns added up, columns ascending, as HiGHS takes them."""
    total: dict[int, float] = {}
    for col, coef in terms:
        total[col] = total.get(col, 0.0) + coef
    cols = sorted(total)
    return np.asarray(cols, dtype=np.int32), np.asarray([total[c] for c in cols], dtype=np.float64)


def dense(terms: list[tuple[int, float]], num_cols: int) -> np.ndarray:
    """An objective's terms as a cost per column (repeated columns added up)."""
    cost = np.zeros(num_cols)
    for col, coef in terms:
        cost[col] += coef
    return cost


log_to_console = False   # HiGHS's banner and log on the console: set by the CLI's --verbose


def show_solver_log(on: bool) -> None:
    """HiGHS's banner and log on the console from now on (the CLI's --verbose), or not."""
    global log_to_console
    log_to_console = on
_first = threading.Lock()
_made = False


@contextlib.contextmanager
def _fd1_to_devnull() -> Iterator[None]:
    """Native writes to stdout go nowhere meanwhile (C's buffers flushed on both sides)."""
    libc: Any = None
    with contextlib.suppress(OSError):
        libc = ctypes.CDLL(None)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    if libc is not None:
        libc.fflush(None)
    try:
        saved = os.dup(1)
    except OSError:
        yield          # no fd 1 at all: nothing can be printed on it
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        if libc is not None:
            libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def new_highs() -> Any:
    """A highspy.Highs whose output is off unless `log_to_console` (its banner too)."""
    import highspy

    global _made
    with _first:
        if _made or log_to_console:
            h = highspy.Highs()   # type: ignore[no-untyped-call]  # highspy leaves Highs() unannotated
        else:
            with _fd1_to_devnull():
                h = highspy.Highs()   # type: ignore[no-untyped-call]  # highspy leaves Highs() unannotated
        _made = True
    h.setOptionValue("output_flag", bool(log_to_console))
    h.setOptionValue("log_to_console", bool(log_to_console))
    return h


def set_time_limit(h: Any, seconds: float) -> None:
    """Let the next run of `h` take `seconds`. HiGHS's time_limit is checked against the
    instance's run time summed over all its runs so far, so a limit set as is would cut
    every run after the first short (and stop it at once once the sum passes it)."""
    h.setOptionValue("time_limit", float(h.getRunTime()) + max(0.0, float(seconds)))


def highs_from(arrays: ModelArrays, threads: int, integral: bool = True) -> Any:
    """A quiet highspy.Highs holding `arrays` (as an LP when not `integral`), zero objective.

    `threads` is set on every instance: HiGHS keeps one thread scheduler per process,
    sized by the first run, and refuses to run an instance asking for another size."""
    import highspy

    h = new_highs()
    h.setOptionValue("threads", max(1, threads))
    lp = highspy.HighsLp()
    lp.num_col_ = arrays.num_cols
    lp.num_row_ = arrays.num_rows
    lp.col_cost_ = np.zeros(arrays.num_cols)
    lp.col_lower_ = np.asarray(arrays.col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(arrays.col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(arrays.row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(arrays.row_upper, dtype=np.float64)
    start, index, value = arrays.csr()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    lp.a_matrix_.num_col_ = arrays.num_cols
    lp.a_matrix_.num_row_ = arrays.num_rows
    if integral:
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in arrays.col_integer]
    h.passModel(lp)
    return h


def stop_on_signal(event: Any) -> None:
    """A HiGHS interrupt callback: stop the run once SIGINT or SIGTERM has arrived
    (planner.base.interrupt; the run is then deferred's, which raises as it returns)."""
    if interrupt.requested():
        event.interrupt(True)


class LpRelaxation:
    """The model's LP relaxation in its own HiGHS instance, kept between solves so that
    each starts from the last basis (planner.milp.neighbourhood solves it once per stage).

    A row may be *assumed* ahead of time (a guess at a hold the stages will add, so the
    LP can be solved before they run); it stays only if a row with the same columns and
    at least its lower bound is added before the next solve, and is dropped otherwise."""

    def __init__(self, arrays: ModelArrays, threads: int):
        import highspy

        self._hs = highspy
        self.num_cols = arrays.num_cols
        self.h = highs_from(arrays, threads, integral=False)
        # Presolve reduces these LPs little and costs more than it saves (BENCHMARKS.md,
        # "Numbers behind design choices").
        self.h.setOptionValue("presolve", "off")
        self._assumed: dict[tuple[int, ...], tuple[int, float]] = {}   # columns -> (row, lower)
        self._confirmed: set[tuple[int, ...]] = set()
        self.out_of_time = False
        self.h.cbSimplexInterrupt.subscribe(stop_on_signal)

    def add_row(self, lower: float, upper: float, cols: np.ndarray, vals: np.ndarray) -> None:
        key = tuple(int(c) for c in cols)
        if key in self._assumed and lower >= self._assumed[key][1] - 1e-9:
            self._confirmed.add(key)
        self.h.addRow(lower, upper, len(cols), cols, vals)

    def assume_row(self, lower: float, upper: float, cols: np.ndarray, vals: np.ndarray) -> None:
        self._assumed[tuple(int(c) for c in cols)] = (self.h.getNumRow(), lower)
        self.h.addRow(lower, upper, len(cols), cols, vals)

    def set_objective(self, cost: np.ndarray, maximize: bool) -> None:
        """A new objective, solved from scratch: after a stage's hold is added and the
        objective changes, dual simplex from a fresh start takes a fraction of the
        iterations the last basis needs (BENCHMARKS.md)."""
        hs = self._hs
        self.h.clearSolver()
        self.h.changeColsCost(self.num_cols, np.arange(self.num_cols, dtype=np.int32), cost)
        self.h.changeObjectiveSense(hs.ObjSense.kMaximize if maximize else hs.ObjSense.kMinimize)

    def settle(self) -> None:
        """Drop the assumed rows that were not confirmed (the guess was wrong)."""
        for key, (row, _) in self._assumed.items():
            if key not in self._confirmed:
                self.h.changeRowBounds(row, -self._hs.kHighsInf, self._hs.kHighsInf)
        self._assumed.clear()

    def solve(self, time_limit: float) -> tuple[np.ndarray, float] | None:
        """Its solution and optimum, or None when not solved (`out_of_time` says whether
        for want of time, rather than an infeasible or failed LP)."""
        self.out_of_time = time_limit <= 0
        if self.out_of_time:
            return None
        set_time_limit(self.h, time_limit)
        with interrupt.deferred():     # Ctrl-C stops the solve (the callback), then the cycle
            self.h.run()
        status = self.h.getModelStatus()
        self.out_of_time = status == self._hs.HighsModelStatus.kTimeLimit
        if status != self._hs.HighsModelStatus.kOptimal:
            return None
        return (np.asarray(self.h.getSolution().col_value, dtype=np.float64),
                float(self.h.getInfo().objective_function_value))
