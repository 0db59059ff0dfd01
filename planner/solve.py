"""Solve a Formulation lexicographically and say honestly how well it went.

Stages: for each priority tier, highest first, maximise that tier's admitted volume
with every higher tier held at what it already achieved; then, with all tiers held,
minimise the tie-breakers (locality, age, flavor order). Each stage starts from the
previous stage's answer (the first from the greedy plan), so the answer never gets
worse than the start under the objective. A tier whose start already admits all of
its work is held without a solve.

Backends: HiGHS through highspy (default), or any solver PuLP drives ("pulp:CBC").
Neither prints to stdout.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from planner import rins, warmstart
from planner.bound import TierBounds
from planner.formulate import Formulation
from planner.highs import LpRelaxation, dense, highs_from, merged
from planner.model_arrays import INF, ModelArrays
from planner.places import NodeColumns

# Volumes are held at (achieved - this) so solver tolerances never make a stage infeasible.
HOLD_SLACK = 1e-6
# Preemption cost and tie-breakers: at most this share of the time limit each, and
# at least this relative gap (they order plans whose volumes are already settled).
TAIL_SHARE = 0.15
# Each stage leaves this share of the time limit to each stage after it.
RESERVE_SHARE = 0.1
# A stage whose bound is within this (relative) of its answer is proven optimal.
PROVEN_TOLERANCE = 1e-5
TAIL_GAP = 0.005
# HiGHS's own search is not started with less than this left of a stage (seconds).
MIN_RUN = 0.05
# Handing a model to HiGHS (passModel, then its presolve) takes about this long per
# nonzero here (measured: L, 3.1M nonzeros, 0.9 s to hand over); a stage starts a
# solver it has not built yet only with HANDOVER_MARGIN times that ahead of it.
HANDOVER_SECONDS_PER_NONZERO = 3e-7
HANDOVER_MARGIN = 4.0
# Models with more nonzeros are not solved in a cycle: their LP takes longer than a
# cycle on this machine (measured: 0.33M at M, 1.2 s; 3.1M at L, 37-60 s), and HiGHS's
# own search, which begins with that LP, overruns its time limit (at L, a stage given
# 95 s ran 450 s and found nothing). Their stages keep the start; the small relaxation
# (planner.bound) gives the bound.
MAX_NONZEROS = 1_000_000


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


@dataclass
class Outcome:
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
    # For planner.rins: the LP relaxation (None where the backend has none), and a run
    # with some columns fixed at the start's values.
    def relax(self, time_limit: float) -> tuple[np.ndarray, float] | None: ...
    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]: ...


def value_of(terms: list[tuple[int, float]], values: np.ndarray) -> float:
    return float(sum(coef * values[col] for col, coef in terms))


def solve(form: Formulation, start: np.ndarray, backend: Backend, time_limit: float, gap: float,
          polish: Callable[[np.ndarray], np.ndarray] | None = None,
          floor_at_start: bool = False, bounds: TierBounds | None = None) -> Outcome:
    """Run the stages within `time_limit` seconds; `start` must be feasible.

    `floor_at_start` holds every tier at least at the start's volume (the greedy floor).
    `polish` rewrites a solution in its cleanest equivalent form (no spare supply, no
    domain marked used that is not); it runs before the tail stages, whose objectives
    the earlier stages left unconstrained. `bounds`: the relaxation for stages cut
    short, if built ahead (else built when needed).
    """
    deadline = time.monotonic() + time_limit
    if form.complete and not warmstart.feasible(form, start):
        # No plan to start from (the stability rows can rule out even the empty plan, where
        # borrowers must make room): the first tier's stage must find one by itself.
        found = first_feasible(form, start, backend, deadline - time_limit * RESERVE_SHARE * (len(form.tiers) - 1),
                               gap)
        if found is None:
            return Outcome(start, "failed", 0.0, 0.0, [StageResult("first plan", "failed", 0.0, 0.0,
                                                                   time_limit - (deadline - time.monotonic()))],
                           message="no plan satisfies the model within the time limit")
        start = found
    # Stages in the objective's order: a tier's stage may take all the time left but
    # RESERVE_SHARE of the limit for each lower tier's stage and TAIL_SHARE for each tail
    # stage (preemption cost, tie-breakers), which refine a plan whose volumes are
    # settled and take at most TAIL_SHARE each.
    tail_stages = bool(form.cost_terms) + bool(form.secondary)
    incumbent = start.copy()
    stages: list[StageResult] = []
    if floor_at_start:
        # Every tier keeps at least what the start (the greedy plan) serves it.
        for tier in form.tiers:
            backend.add_row(form.tier_volume[tier], value_of(form.tier_volume[tier], start) - HOLD_SLACK, INF)
    tiers_left = [t for t in form.tiers if form.tier_volume[t]]
    integer = np.asarray(form.arrays.col_integer, dtype=bool)
    nodes = LazyNodeColumns(form)
    reached: dict[int, float] = {}             # tier -> volume held from its stage on
    stage_of: dict[int, StageResult] = {}
    for index, tier in enumerate(tiers_left):
        terms = form.tier_volume[tier]
        achieved = value_of(terms, incumbent)
        began = time.monotonic()
        if achieved >= form.tier_max[tier] - HOLD_SLACK:
            stages.append(StageResult(f"priority {tier}", "kept", achieved, form.tier_max[tier], 0.0))
        elif (stage_end := deadline - time_limit * (RESERVE_SHARE * (len(tiers_left) - index - 1)
                                                     + TAIL_SHARE * tail_stages)) \
                < began + MIN_RUN or not backend.worth_starting(deadline - began):
            # Out of time (HiGHS can overrun a limit in its root cut loop), or too little
            # left for any stage to hand a large model over: hold the answer.
            stages.append(StageResult(f"priority {tier}", "skipped", achieved, form.tier_max[tier], 0.0))
        else:
            objective = terms + nudge(form, tier)
            backend.set_objective(objective, maximize=True)
            # The neighbourhood of the LP point first (planner.rins); HiGHS's own search
            # with what is left, unless the LP's bound already proves the answer.
            found = rins.search(backend, incumbent, lambda v: value_of(objective, v), integer, stage_end, gap,
                                widen=nodes.on_same_nodes)
            if value_of(terms, found.values) >= achieved - HOLD_SLACK:
                incumbent, achieved = found.values, value_of(terms, found.values)
            bound = None if found.lp_optimum is None else stage_bound(form, tier, found.lp_optimum)
            status = "feasible"
            if bound is not None and achieved >= bound - PROVEN_TOLERANCE * (1.0 + abs(bound)):
                status = "optimal"
            elif stage_end - time.monotonic() >= MIN_RUN:
                values, status, found_bound = backend.run(stage_end - time.monotonic(), gap, incumbent)
                if found_bound is not None:
                    found_bound = stage_bound(form, tier, found_bound)
                    bound = found_bound if bound is None else min(bound, found_bound)
                if values is not None and value_of(terms, values) >= achieved - HOLD_SLACK:
                    incumbent, achieved = values, value_of(terms, values)
                else:
                    status = "feasible" if status != "failed" else status
            upper = form.tier_max[tier] if bound is None else min(form.tier_max[tier], max(bound, achieved))
            stages.append(StageResult(f"priority {tier}", status, achieved, upper, time.monotonic() - began))
        backend.add_row(terms, achieved - HOLD_SLACK, INF)
        reached[tier] = achieved
        stage_of[tier] = stages[-1]
    tighten_bounds(form, stage_of, reached, bounds)

    def no_time() -> bool:
        left = min(deadline, time.monotonic() + TAIL_SHARE * time_limit) - time.monotonic()
        return left <= 0 or not backend.worth_starting(left)

    # Polishing serves only the tail stages (it takes seconds at scale: a decode and an
    # encode), so only where one has its whole share of the time left: at M, polishing
    # in the last tenths took the time the preemption cost stage then did not have.
    if polish is not None and (form.cost_terms or form.secondary) and not no_time() \
            and deadline - time.monotonic() >= TAIL_SHARE * time_limit:
        incumbent = polish(incumbent)
    if form.cost_terms and no_time():
        stages.append(StageResult("preemption cost", "skipped", value_of(form.cost_terms, incumbent),
                                  0.0, 0.0))
    elif form.cost_terms:
        incumbent = minimise_stage(form.cost_terms, "preemption cost", backend, incumbent,
                                   min(deadline, time.monotonic() + TAIL_SHARE * time_limit), max(gap, TAIL_GAP),
                                   stages, floor=0.0)
        backend.add_row(form.cost_terms, -INF, value_of(form.cost_terms, incumbent) + HOLD_SLACK)
    if form.secondary and no_time():
        stages.append(StageResult("tie-breakers", "skipped", value_of(form.secondary, incumbent), 0.0, 0.0))
    elif form.secondary:
        if polish is not None:
            incumbent = polish(incumbent)
        incumbent = minimise_stage(form.secondary, "tie-breakers", backend, incumbent,
                                   min(deadline, time.monotonic() + TAIL_SHARE * time_limit), max(gap, TAIL_GAP),
                                   stages)
    volume_stages = [s for s in stages if s.name.startswith("priority")]
    objective = sum(s.objective for s in volume_stages)
    bound = sum(s.bound for s in volume_stages)
    # "optimal" only when every stage, tie-breakers included, was proven; objective,
    # bound and gap measure the volume stages (the `stages` list shows each one).
    proven = all(s.status in ("optimal", "kept") for s in stages)
    return Outcome(incumbent, "optimal" if proven else "feasible", objective, max(bound, objective), stages)


def first_feasible(form: Formulation, start: np.ndarray, backend: Backend, deadline: float,
                   gap: float) -> np.ndarray | None:
    """A plan the model allows, searched for with the top tier's objective, or None."""
    tiers = [t for t in form.tiers if form.tier_volume[t]]
    objective = (form.tier_volume[tiers[0]] + nudge(form, tiers[0])) if tiers else []
    backend.set_objective(objective, maximize=True)
    left = deadline - time.monotonic()
    if left < MIN_RUN or not backend.worth_starting(left):
        return None
    values, _, _ = backend.run(left, gap, start)
    return values if values is not None and warmstart.feasible(form, values) else None


class LazyNodeColumns:
    """planner.places.NodeColumns of `form`, built when a stage first widens its search."""

    def __init__(self, form: Formulation):
        self.form = form
        self._built: NodeColumns | None = None

    def on_same_nodes(self, cols: np.ndarray) -> np.ndarray:
        if self._built is None:
            self._built = NodeColumns(self.form)
        return self._built.on_same_nodes(cols)


def tighten_bounds(form: Formulation, stage_of: dict[int, StageResult], reached: dict[int, float],
                   bounds: TierBounds | None = None) -> None:
    """Tier stages the time limit cut short keep the better of their own bound and the
    small relaxation's (planner.bound); one whose bound then meets its answer is proven."""
    open_stages = {t: s for t, s in stage_of.items() if s.status not in ("optimal", "kept")}
    if not open_stages:
        return
    relaxed = (bounds or TierBounds(form))(reached, list(open_stages))
    for tier, stage in open_stages.items():
        if tier in relaxed:
            stage.bound = max(stage.objective, min(stage.bound, relaxed[tier]))
            if stage.bound <= stage.objective + PROVEN_TOLERANCE * (1.0 + abs(stage.objective)):
                stage.status = "optimal"


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


def relaxation_ahead(form: Formulation, threads: int, time_limit: float) -> LpRelaxation | None:
    """The LP the first stage most likely needs, solved before the stages run (while the
    start is computed on the other core): the top tier held whole (every benchmark
    start serves it whole; where one does not, the stage drops that row and solves
    again from this basis) and the next tier maximised, as its stage will. None when
    the model cannot be solved in a cycle (planner.rins then does not search) or the LP
    was not solved within `time_limit` (HiGHS does not simply go on from where a time
    limit stopped it: at M, resumed after 0.5 s it took 2.7 s more, where solving it
    whole takes 1.6 s); an LP the guess made infeasible is kept (its stage solves it
    without the guess)."""
    if not solvable(form):
        return None
    tiers = [t for t in form.tiers if form.tier_volume[t]]
    if not tiers:
        return None
    relaxation = LpRelaxation(form.arrays, threads)
    if len(tiers) > 1:
        cols, vals = merged(form.tier_volume[tiers[0]])
        relaxation.assume_row(form.tier_max[tiers[0]] - HOLD_SLACK, INF, cols, vals)
    tier = tiers[min(1, len(tiers) - 1)]
    relaxation.set_objective(dense(form.tier_volume[tier] + nudge(form, tier), form.arrays.num_cols), maximize=True)
    relaxation.solve(time_limit)
    return None if relaxation.out_of_time else relaxation


def solvable(form: Formulation) -> bool:
    """Can the model be solved in a cycle at all: built whole, and within MAX_NONZEROS?"""
    return form.complete and len(form.arrays.entry_val) <= MAX_NONZEROS


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


def refine(form: Formulation, start: np.ndarray, backend: Backend, time_limit: float,
           gap: float) -> tuple[np.ndarray, StageResult]:
    """The tie-breaker stage on the full model: every tier's volume and the preemption
    cost held at what `start` achieves, locality, free domains, age and flavor order
    minimised. Never worse than `start`."""
    for tier in form.tiers:
        backend.add_row(form.tier_volume[tier], value_of(form.tier_volume[tier], start) - HOLD_SLACK, INF)
    if form.cost_terms:
        backend.add_row(form.cost_terms, -INF, value_of(form.cost_terms, start) + HOLD_SLACK)
    stages: list[StageResult] = []
    values = minimise_stage(form.secondary, "tie-breakers", backend, start, time.monotonic() + time_limit,
                            max(gap, TAIL_GAP), stages)
    return values, stages[0]


def minimise_stage(terms: list[tuple[int, float]], name: str, backend: Backend, incumbent: np.ndarray,
                   deadline: float, gap: float, stages: list[StageResult],
                   floor: float | None = None) -> np.ndarray:
    """Minimise `terms` from `incumbent`; keep the incumbent unless the answer is no worse.
    With a known `floor` (a cost is never negative) an incumbent already there is kept unsolved."""
    began = time.monotonic()
    before = value_of(terms, incumbent)
    if floor is not None and before <= floor + HOLD_SLACK:
        stages.append(StageResult(name, "kept", before, before, 0.0))
        return incumbent
    backend.set_objective(terms, maximize=False)
    values, status, bound = backend.run(max(0.05, deadline - began), gap, incumbent)
    if values is not None and value_of(terms, values) <= before + 1e-9:
        incumbent = values
    after = value_of(terms, incumbent)
    stages.append(StageResult(name, status, after, after if bound is None else min(bound, after),
                              time.monotonic() - began))
    return incumbent


class LazyBackend:
    """A backend built on its first run: rows and objectives given before are replayed
    then. Handing a model of millions of columns to a solver takes seconds, wasted in a
    cycle whose time is gone before any stage runs (the stages are then skipped), or
    whose stage would end before the solver has read it (`worth_starting`)."""

    def __init__(self, build: Callable[[], Backend], nonzeros: int = 0, solvable: bool = True):
        self._build = build
        self._backend: Backend | None = None
        self._calls: list[Callable[[Backend], None]] = []
        self._nonzeros = nonzeros
        self._solvable = solvable

    def worth_starting(self, seconds: float) -> bool:
        """Could a stage of `seconds` do anything? Not if the model cannot be solved in a
        cycle (`solvable`), nor if building the backend (about HANDOVER_SECONDS_PER_NONZERO
        each) would take more than 1/HANDOVER_MARGIN of it."""
        return self._backend is not None or (
            self._solvable and HANDOVER_MARGIN * HANDOVER_SECONDS_PER_NONZERO * self._nonzeros <= seconds)

    def _do(self, call: Callable[[Backend], None]) -> None:
        if self._backend is None:
            self._calls.append(call)
        else:
            call(self._backend)

    def set_objective(self, terms: list[tuple[int, float]], maximize: bool) -> None:
        self._do(lambda b: b.set_objective(terms, maximize))

    def add_row(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None:
        self._do(lambda b: b.add_row(terms, lower, upper))

    def _ready(self, time_limit: float) -> tuple[Backend, float]:
        """The backend, built now if need be, and what is left of `time_limit`."""
        if self._backend is None:
            began = time.monotonic()
            self._backend = self._build()
            for call in self._calls:
                call(self._backend)
            self._calls.clear()
            time_limit = max(0.01, time_limit - (time.monotonic() - began))
        return self._backend, time_limit

    def run(self, time_limit: float, gap: float, start: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        backend, time_limit = self._ready(time_limit)
        return backend.run(time_limit, gap, start)

    def relax(self, time_limit: float) -> tuple[np.ndarray, float] | None:
        backend, time_limit = self._ready(time_limit)
        return backend.relax(time_limit)

    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        backend, time_limit = self._ready(time_limit)
        return backend.run_fixed(time_limit, gap, start, fixed)


# ---------------------------------------------------------------- HiGHS

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
        # The LP relaxation (planner.rins), built on first use unless one is handed over
        # (solved ahead, planner.run). The rows the stages add are kept: the relaxation
        # built later needs them, and so does each sub-MIP (run_fixed).
        self.relaxation, self.searches = relaxation, searches
        self._added: list[tuple[float, float, np.ndarray, np.ndarray]] = []
        self._seed = seed
        # HiGHS checks its time limit only now and then (long root cut rounds overrun
        # it by seconds); the MIP interrupt callback holds the stage to its deadline.
        self._deadline = float("inf")
        self.h.cbMipInterrupt.subscribe(self._interrupt_when_late)

    def _interrupt_when_late(self, event) -> None:  # type: ignore[no-untyped-def]
        # Set both ways: HiGHS keeps the flag from one run to the next, so a run after one
        # that was interrupted would stop at its first callback.
        event.interrupt(time.monotonic() > self._deadline)

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
        return True     # the model is in HiGHS already

    def relax(self, time_limit: float) -> tuple[np.ndarray, float] | None:
        """The LP relaxation of the model as it stands (rows added, objective): its
        solution and optimum, or None when not solved within `time_limit` or not searching."""
        if not self.searches:
            return None
        began = time.monotonic()
        if self.relaxation is None:
            self.relaxation = LpRelaxation(self.arrays, self.threads)
            for lower, upper, cols, vals in self._added:
                self.relaxation.add_row(lower, upper, cols, vals)
        self.relaxation.settle()
        self.relaxation.set_objective(self._cost, self._maximize)
        return self.relaxation.solve(time_limit - (time.monotonic() - began))

    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        """`run` with the `fixed` columns held at their values in `start`; its status and
        bound speak of that restricted model only. HiGHS gets the smaller model over the
        other columns (ModelArrays.restricted): its presolve took 0.6 s at M to find that
        model by itself, more than the search in it (0.5 s)."""
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

    def _run(self, h, cost: np.ndarray, time_limit: float, gap: float,  # type: ignore[no-untyped-def]
             start: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        """Solve the MILP in `h` (objective `cost`) from `start`: values, status, bound."""
        hs = self._hs
        began = time.monotonic()
        self._deadline = began + max(0.01, time_limit)
        h.setOptionValue("mip_rel_gap", float(gap))
        h.setOptionValue("time_limit", float(max(0.01, time_limit)))
        solution = hs.HighsSolution()
        solution.col_value = list(map(float, start))
        solution.value_valid = True
        h.setSolution(solution)
        h.run()
        result = self._result(h)
        if result[0] is not None and not self._consistent(h, cost, result[0]):
            # Seen with HiGHS 1.16: after a re-solve from a start, the reported objective
            # can be right while col_value still holds the start; and a run interrupted
            # at its deadline reports the start's objective in presolve's reduced space.
            # Either way col_value is a solution (callers value it themselves) and the
            # reported numbers are not to be trusted: with half the time left, solve
            # again without the start; else keep col_value, with no bound.
            left = time_limit - (time.monotonic() - began)
            if left < 0.5 * time_limit:
                return result[0], "feasible", None
            h.clearSolver()
            h.setOptionValue("time_limit", float(left))
            h.run()
            result = self._result(h)
            if result[0] is not None and not self._consistent(h, cost, result[0]):
                return None, "failed", None
        return result

    @staticmethod
    def _consistent(h, cost: np.ndarray, values: np.ndarray) -> bool:  # type: ignore[no-untyped-def]
        reported = float(h.getInfo().objective_function_value)
        actual = float(np.dot(cost, values))
        return abs(reported - actual) <= 1e-6 * (1.0 + abs(reported))

    def _result(self, h) -> tuple[np.ndarray | None, str, float | None]:  # type: ignore[no-untyped-def]
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
        bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
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

    def _expr(self, terms: list[tuple[int, float]]):  # type: ignore[no-untyped-def]
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

    def relax(self, time_limit: float) -> tuple[np.ndarray, float] | None:
        """No LP relaxation through PuLP here: stages go straight to `run`."""
        return None

    def run_fixed(self, time_limit: float, gap: float, start: np.ndarray,
                  fixed: np.ndarray) -> tuple[np.ndarray | None, str, float | None]:
        raise NotImplementedError("relax() gives no LP point to search around")
