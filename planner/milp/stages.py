"""The stages: the objective's criteria, in its order, each one class; STAGES lists them.

A plan is judged lexicographically (REFERENCE section 3): fair shares where they are on,
then volume per priority tier (highest first), then the preemption cost, then the
tie-breakers. Each criterion is a `Stage`: the objectives it sets (one or several: a
stage per tier, two for fair sharing; none where the snapshot gives it nothing to do),
how it solves one from the plan before it, and what it fixes for the stages after it
(its objective held at what it reached: a row). STAGES is the one ordered list;
adding a stage is one class here and one line in it.

Two phases, by where the search (planner.milp.search) runs a stage:

  PASS  in every pass of the search, on a model with some stability rows off (a
        relaxation: a bound proven there holds for the whole model); candidates are
        compared on these (planner.milp.search `_better`), and each tier's bound is
        carried from pass to pass. The time of a pass is split over them
        (Budget.tier_deadline).
  TAIL  once, from the chosen plan with every PASS objective held: what orders plans
        whose volumes are settled (each at least TAIL_GAP; Budget.tail_deadline).

Each stage starts from the answer before it (the first from greedy's plan, when the
model allows it), so no stage makes the plan worse. A stage that reaches its deadline
keeps the best it found and reports its bound and gap: only how far a stage gets
depends on time.

Pure: no I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

import numpy as np

from planner.base.budget import Budget
from planner.milp import neighbourhood
from planner.milp.arrays import INF
from planner.milp.backends import (
    HOLD_SLACK, PROVEN_TOLERANCE, TAIL_GAP, Backend, PassOutcome, StageResult, nudge, record, stage_bound, value_of,
)
from planner.milp.highs import dense
from planner.milp.rows import Formulation

MIN_STAGE = 0.01    # seconds a stage with time left is given at least (HiGHS's own floor)
MIN_RUN = 0.05      # seconds a minimising run is given at least
RINS_SHARE = 0.75   # of a tier stage's time, for the search around the LP point


class Phase(Enum):
    PASS = "pass"      # in every pass of the search (module docstring)
    TAIL = "tail"      # once, from the chosen plan


@dataclass(eq=False)
class Objective:
    """One objective a stage sets: its name in the plan's stages, its terms, its sense,
    and the best it could be before any solve (maximise: at most `ceiling`; minimise:
    at least, -INF where nothing is known)."""

    name: str
    terms: list[tuple[int, float]]
    maximize: bool
    ceiling: float


@dataclass(eq=False)
class TierObjective(Objective):
    tier: int = 0


@dataclass
class Step:
    """What a stage solves one objective with: the model and its backend (the rows the
    stages before it fixed already in), the plan so far (None: none the model allows is
    known yet), its deadline and gap, the stages done so far (its own result goes
    there), whether to search around the LP point, and each objective's result on a
    relaxation of this model (an earlier pass), by name."""

    form: Formulation
    backend: Backend
    incumbent: np.ndarray | None
    deadline: float
    gap: float
    budget: Budget
    done: list[StageResult]
    search: bool = True
    relaxed: dict[str, StageResult] = field(default_factory=dict)


class Stage(ABC):
    """One criterion of the objective. A new one says its `name` and `phase` and gives
    its `objectives`; `solve` (maximise or minimise from the plan before it, never
    worse) and `hold` (its objective fixed at what it reached) serve most as they are."""

    name: ClassVar[str]
    phase: ClassVar[Phase]

    @abstractmethod
    def objectives(self, form: Formulation) -> list[Objective]:
        """What this stage optimises in `form`, in order (none: nothing to do here)."""

    def solve(self, objective: Objective, step: Step) -> np.ndarray | None:
        """The plan after this objective (its StageResult recorded in step.done), or None
        when no plan the model allows is found."""
        return maximise(objective, step) if objective.maximize else minimise(objective, step)

    def hold(self, objective: Objective, values: np.ndarray, backend: Backend) -> None:
        """Fix for every stage after this one: never worse than `values` on `objective`."""
        achieved = value_of(objective.terms, values)
        if objective.maximize:
            backend.add_row(objective.terms, achieved - HOLD_SLACK, INF)
        else:
            backend.add_row(objective.terms, -INF, achieved + HOLD_SLACK)


class FairShares(Stage):
    """Kueue's fair sharing (planner.milp.fairness): the least fraction of its fair
    allocation any queue reaches, then their sum; only where fair sharing is on."""

    name = "fair shares"
    phase = Phase.PASS

    def objectives(self, form: Formulation) -> list[Objective]:
        fair = form.fairness.stages if form.fairness is not None else []
        return [Objective(stage.name, stage.terms, True, stage.ceiling) for stage in fair]


class PriorityTiers(Stage):
    """Volume per priority tier, highest first, each with the lower tiers' volume as a
    nudge (planner.milp.backends `nudge`); the search around the LP point first
    (planner.milp.neighbourhood), whose LP optimum bounds the stage."""

    name = "priority"
    phase = Phase.PASS

    def objectives(self, form: Formulation) -> list[Objective]:
        return [TierObjective(f"priority {tier}", form.tier_volume[tier], True, form.tier_max[tier], tier=tier)
                for tier in form.tiers if form.tier_volume[tier]]

    def solve(self, objective: Objective, step: Step) -> np.ndarray | None:
        assert isinstance(objective, TierObjective)
        form, backend, budget, incumbent = step.form, step.backend, step.budget, step.incumbent
        tier, terms, deadline = objective.tier, objective.terms, step.deadline
        began = budget.now()
        ceiling = self.ceiling(objective, step)
        if incumbent is not None and value_of(terms, incumbent) >= ceiling - HOLD_SLACK:
            achieved = value_of(terms, incumbent)
            record(step.done, StageResult(objective.name, "kept", achieved, max(achieved, ceiling), 0.0))
            return incumbent
        if incumbent is not None and deadline <= began:
            # Out of time: the plan in hand stands for this tier (whatever does not
            # finish gives way to the best plan already found).
            achieved = value_of(terms, incumbent)
            record(step.done, StageResult(objective.name, "feasible", achieved, max(achieved, ceiling), 0.0))
            return incumbent
        goal = terms + nudge(form, tier)
        backend.set_objective(goal, maximize=True)
        bound = None
        if incumbent is not None and step.search:
            # The LP point first: columns where it and the incumbent agree held, the
            # rest searched (planner.milp.neighbourhood); the LP optimum bounds the stage.
            integer = np.asarray(form.arrays.col_integer, dtype=bool)
            found = neighbourhood.search(backend, incumbent, lambda v: value_of(goal, v), integer,
                                         began + RINS_SHARE * max(MIN_STAGE, deadline - began), step.gap,
                                         lp_cost=dense(terms, form.arrays.num_cols))
            incumbent = found.values
            if found.lp_optimum is not None:
                bound = found.lp_optimum
        guess = incumbent if incumbent is not None else np.zeros(form.arrays.num_cols)
        left = max(MIN_STAGE, deadline - budget.now())
        reached = bound is not None and incumbent is not None and \
            value_of(terms, incumbent) >= stage_bound(form, tier, bound) - HOLD_SLACK
        if not reached and (incumbent is None or backend.worth_starting(left)):
            values, status, found_bound = backend.run(left, step.gap, guess)
            if found_bound is not None:
                bound = found_bound if bound is None else min(bound, found_bound)
            if values is not None and (incumbent is None or
                                       value_of(terms, values) >= value_of(terms, incumbent) - HOLD_SLACK):
                incumbent = values
        if incumbent is None:
            record(step.done, StageResult(objective.name, "failed", 0.0, objective.ceiling, budget.now() - began))
            return None
        achieved = value_of(terms, incumbent)
        upper = max(achieved, ceiling) if bound is None else min(ceiling, max(achieved, stage_bound(form, tier, bound)))
        proven = achieved >= upper - PROVEN_TOLERANCE * (1.0 + abs(upper))
        record(step.done, StageResult(objective.name, "optimal" if proven else "feasible", achieved, upper,
                                      budget.now() - began))
        return incumbent

    @staticmethod
    def ceiling(objective: Objective, step: Step) -> float:
        """The most the tier can serve: all of it, or its bound on a relaxation of this
        model while every stage above it serves here at least what it served there."""
        outer = step.relaxed.get(objective.name)
        if outer is not None and all(s.objective >= step.relaxed[s.name].objective - HOLD_SLACK
                                     for s in step.done if s.name in step.relaxed):
            return min(objective.ceiling, outer.bound)
        return objective.ceiling


class PreemptionCost(Stage):
    """The lost work of what the plan evicts (never below 0: a plan that evicts nothing is kept)."""

    name = "preemption cost"
    phase = Phase.TAIL

    def objectives(self, form: Formulation) -> list[Objective]:
        return [Objective(self.name, form.cost_terms, False, 0.0)] if form.cost_terms else []


class TieBreakers(Stage):
    """Locality, free domains, age and flavor order (planner.milp.rows `secondary_terms`)."""

    name = "tie-breakers"
    phase = Phase.TAIL

    def objectives(self, form: Formulation) -> list[Objective]:
        return [Objective(self.name, form.secondary, False, -INF)] if form.secondary else []


# The objective's order. A new stage: its class above, and its place here.
STAGES: list[Stage] = [FairShares(), PriorityTiers(), PreemptionCost(), TieBreakers()]


def objectives(form: Formulation, phase: Phase) -> list[tuple[Stage, Objective]]:
    """Every objective of `phase`'s stages in `form`, in STAGES' order."""
    return [(stage, objective) for stage in STAGES if stage.phase is phase for objective in stage.objectives(form)]


def maximise(objective: Objective, step: Step) -> np.ndarray | None:
    """Maximise `objective` from the incumbent and keep the better answer; an incumbent
    already at the ceiling is kept unsolved."""
    began = step.budget.now()
    terms, incumbent = objective.terms, step.incumbent
    if incumbent is not None and value_of(terms, incumbent) >= objective.ceiling - HOLD_SLACK:
        achieved = value_of(terms, incumbent)
        record(step.done, StageResult(objective.name, "kept", achieved, max(achieved, objective.ceiling), 0.0))
        return incumbent
    step.backend.set_objective(terms, maximize=True)
    guess = incumbent if incumbent is not None else np.zeros(step.form.arrays.num_cols)
    values, status, bound = step.backend.run(max(MIN_STAGE, step.deadline - began), step.gap, guess)
    if values is not None and (incumbent is None or value_of(terms, values) >= value_of(terms, incumbent) - HOLD_SLACK):
        incumbent = values
    if incumbent is None:
        record(step.done, StageResult(objective.name, "failed", 0.0, objective.ceiling, step.budget.now() - began))
        return None
    achieved = value_of(terms, incumbent)
    upper = objective.ceiling if bound is None else min(objective.ceiling, max(achieved, bound))
    proven = achieved >= upper - PROVEN_TOLERANCE * (1.0 + abs(upper))
    record(step.done, StageResult(objective.name, "optimal" if proven else "feasible", achieved, upper,
                                  step.budget.now() - began))
    return incumbent


def minimise(objective: Objective, step: Step) -> np.ndarray | None:
    """Minimise `objective` from the incumbent; keep the incumbent unless the answer is no
    worse. An incumbent already at the objective's least (a cost is never negative) is
    kept unsolved."""
    began = step.budget.now()
    incumbent = step.incumbent if step.incumbent is not None else np.zeros(step.form.arrays.num_cols)
    terms = objective.terms
    before = value_of(terms, incumbent)
    if before <= objective.ceiling + HOLD_SLACK:
        record(step.done, StageResult(objective.name, "kept", before, before, 0.0))
        return incumbent
    step.backend.set_objective(terms, maximize=False)
    values, status, bound = step.backend.run(max(MIN_RUN, step.deadline - began), step.gap, incumbent)
    if values is not None and value_of(terms, values) <= before + 1e-9:
        incumbent = values
    after = value_of(terms, incumbent)
    record(step.done, StageResult(objective.name, status, after, after if bound is None else min(bound, after),
                                  step.budget.now() - began))
    return incumbent


def is_volume(result: StageResult) -> bool:
    """Is this a priority tier's result (what the plan's objective and bound add up)?"""
    return result.name.startswith(PriorityTiers.name)


FAILED = "no plan the model allows was found within the time limit"


def solve_pass(form: Formulation, start: np.ndarray | None, backend: Backend, budget: Budget, gap: float,
               search: bool = True, relaxed: list[StageResult] | None = None) -> PassOutcome:
    """One pass: every PASS objective in order, each held for the ones after it; `start`
    may be None (no plan the model allows is known yet). `relaxed`: the results on a
    relaxation of this model (planner.milp.search's earlier pass)."""
    budget.open_stages()
    incumbent = None if start is None else start.copy()
    done: list[StageResult] = []
    relaxed_by_name = {r.name: r for r in relaxed or ()}
    todo = objectives(form, Phase.PASS)
    for index, (stage, objective) in enumerate(todo):
        deadline = budget.tier_deadline(index, len(todo))
        step = Step(form, backend, incumbent, deadline, gap, budget, done, search, relaxed_by_name)
        incumbent = stage.solve(objective, step)
        if incumbent is None:
            return PassOutcome(np.zeros(form.arrays.num_cols), "failed", 0.0, 0.0, done, message=FAILED)
        stage.hold(objective, incumbent, backend)
    if incumbent is None:   # nothing to maximise at all: the empty plan is the start
        incumbent = np.zeros(form.arrays.num_cols)
    volume = [s for s in done if is_volume(s)]
    served = sum(s.objective for s in volume)
    served_bound = sum(s.bound for s in volume)
    proven = all(s.status in ("optimal", "kept") for s in done)
    return PassOutcome(incumbent, "optimal" if proven else "feasible", served, max(served_bound, served), done)


def solve_tails(form: Formulation, start: np.ndarray, backend: Backend, budget: Budget, gap: float,
                done: list[StageResult], attempt: int, attempts: int) -> np.ndarray:
    """Every PASS objective held at what `start` reaches, then each TAIL objective in
    order from it, never worse than where it starts. Attempt `attempt` of `attempts`:
    each objective's deadline is an even share of the window left to it and to the
    attempts after this one; a stage with nothing to do in `form` keeps its place in that
    count (its time goes to the stages after it)."""
    values = start
    for stage, objective in objectives(form, Phase.PASS):
        stage.hold(objective, values, backend)
    slots = tail_slots(form)
    count = len(slots) * (attempts - attempt)
    for index, (place, stage, objective) in enumerate(slots):
        deadline = max(budget.now() + MIN_STAGE, budget.tail_deadline(0, count - place))
        found = stage.solve(objective, Step(form, backend, values, deadline, max(gap, TAIL_GAP), budget, done))
        if found is None:
            break       # no better plan: `values` stands
        values = found
        if index + 1 < len(slots):
            stage.hold(objective, values, backend)
    return values


def tail_slots(form: Formulation) -> list[tuple[int, Stage, Objective]]:
    """The TAIL objectives, each with its place among the TAIL stages' (a stage with no
    objective in `form` still takes one)."""
    out: list[tuple[int, Stage, Objective]] = []
    place = 0
    for stage in (s for s in STAGES if s.phase is Phase.TAIL):
        found = stage.objectives(form)
        out.extend((place + i, stage, objective) for i, objective in enumerate(found))
        place += max(1, len(found))
    return out
