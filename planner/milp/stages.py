"""Solve the model lexicographically, each stage within the deadline the Budget gives it.

Stages, always all of them, in the objective's order: each priority tier (highest
first) maximises its volume with every tier above held at what it reached; then the
preemption cost is minimised with all volumes held. Each stage starts from the
answer before it (the first from greedy's plan, when the model allows it), so no
stage makes the plan worse. A stage that reaches its deadline keeps the best it
found and reports its bound and gap: only how far a stage gets depends on time.

Pure: no I/O.
"""

from __future__ import annotations

import numpy as np

from planner.milp import neighbourhood
from planner.budget import Budget
from planner.milp.rows import Formulation
from planner.milp.arrays import INF
from planner.milp.highs import dense
from planner.milp.fairness import FairStage
from planner.milp.backends import (
    HOLD_SLACK, PROVEN_TOLERANCE, TAIL_GAP, Backend, Outcome, StageResult, minimise_stage, nudge, record, stage_bound,
    value_of,
)

MIN_STAGE = 0.01    # seconds a stage with time left is given at least (HiGHS's own floor)
RINS_SHARE = 0.75   # of a tier stage's time, for the search around the LP point


def solve(form: Formulation, start: np.ndarray | None, backend: Backend, budget: Budget, gap: float,
          floor_at_start: bool = False, search: bool = True, tails: bool = True,
          relaxed: list[StageResult] | None = None) -> Outcome:
    """Run every stage (with `tails` False, the priority tiers only); `start` may be None
    (no plan the model allows is known yet). `relaxed`: the tiers' results on a
    relaxation of this model; a tier's bound there holds here too while every tier
    above it serves here at least what it served there."""
    relaxed_by_name = {r.name: r for r in relaxed or ()}
    budget.open_stages()
    incumbent = None if start is None else start.copy()
    stages: list[StageResult] = []
    if floor_at_start and incumbent is not None:
        for tier in form.tiers:   # the greedy floor: every tier keeps what the start serves it
            backend.add_row(form.tier_volume[tier], value_of(form.tier_volume[tier], incumbent) - HOLD_SLACK, INF)
    tiers = [t for t in form.tiers if form.tier_volume[t]]
    tail_count = int(bool(form.cost_terms)) + int(bool(form.secondary))
    fair = form.fairness.stages if form.fairness is not None else []
    for index, stage in enumerate(fair):
        began = budget.now()
        deadline = budget.tier_deadline(index, len(fair) + len(tiers))
        incumbent = fair_stage(stage, backend, incumbent, max(MIN_STAGE, deadline - began), gap, stages, began,
                               budget, form.arrays.num_cols)
        if incumbent is None:
            return Outcome(np.zeros(form.arrays.num_cols), "failed", 0.0, 0.0, stages,
                           message="no plan the model allows was found within the time limit")
    for index, tier in enumerate(tiers):
        terms = form.tier_volume[tier]
        deadline = budget.tier_deadline(len(fair) + index, len(fair) + len(tiers))
        began = budget.now()
        ceiling = form.tier_max[tier]
        outer = relaxed_by_name.get(f"priority {tier}")
        if outer is not None and all(s.objective >= relaxed_by_name[s.name].objective - HOLD_SLACK
                                     for s in stages if s.name in relaxed_by_name):
            ceiling = min(ceiling, outer.bound)
        if incumbent is not None and value_of(terms, incumbent) >= ceiling - HOLD_SLACK:
            achieved = value_of(terms, incumbent)
            record(stages, StageResult(f"priority {tier}", "kept", achieved, max(achieved, ceiling), 0.0))
        elif incumbent is not None and deadline <= began:
            # Out of time: the plan in hand stands for this tier (whatever does not
            # finish gives way to the best plan already found).
            achieved = value_of(terms, incumbent)
            record(stages, StageResult(f"priority {tier}", "feasible", achieved, max(achieved, ceiling), 0.0))
        else:
            objective = terms + nudge(form, tier)
            backend.set_objective(objective, maximize=True)
            bound = None
            if incumbent is not None and search:
                # The LP point first: columns where it and the incumbent agree held, the
                # rest searched (planner.milp.neighbourhood); the LP optimum bounds the stage.
                integer = np.asarray(form.arrays.col_integer, dtype=bool)
                found = neighbourhood.search(backend, incumbent, lambda v: value_of(objective, v), integer,
                                             began + RINS_SHARE * max(MIN_STAGE, deadline - began), gap,
                                             lp_cost=dense(terms, form.arrays.num_cols))
                incumbent = found.values
                if found.lp_optimum is not None:
                    bound = found.lp_optimum
            guess = incumbent if incumbent is not None else np.zeros(form.arrays.num_cols)
            left = max(MIN_STAGE, deadline - budget.now())
            reached = bound is not None and incumbent is not None and \
                value_of(terms, incumbent) >= stage_bound(form, tier, bound) - HOLD_SLACK
            if not reached and (incumbent is None or backend.worth_starting(left)):
                values, status, found_bound = backend.run(left, gap, guess)
                if found_bound is not None:
                    bound = found_bound if bound is None else min(bound, found_bound)
                if values is not None and (incumbent is None or
                                           value_of(terms, values) >= value_of(terms, incumbent) - HOLD_SLACK):
                    incumbent = values
            if incumbent is None:
                record(stages, StageResult(f"priority {tier}", "failed", 0.0, form.tier_max[tier], budget.now() - began))
                return Outcome(np.zeros(form.arrays.num_cols), "failed", 0.0, 0.0, stages,
                               message="no plan the model allows was found within the time limit")
            achieved = value_of(terms, incumbent)
            upper = max(achieved, ceiling) if bound is None else min(ceiling,
                                                                    max(achieved, stage_bound(form, tier, bound)))
            proven = achieved >= upper - PROVEN_TOLERANCE * (1.0 + abs(upper))
            record(stages, StageResult(f"priority {tier}", "optimal" if proven else "feasible", achieved, upper,
                                      budget.now() - began))
        backend.add_row(terms, achieved - HOLD_SLACK, INF)
    if incumbent is None:   # no tier at all: the empty plan is the start
        incumbent = np.zeros(form.arrays.num_cols)
    if form.cost_terms and tails:
        incumbent = minimise_stage(form.cost_terms, "preemption cost", backend, incumbent,
                                   max(budget.now() + MIN_STAGE, budget.tail_deadline(0, tail_count)),
                                   max(gap, TAIL_GAP), stages, floor=0.0)
        backend.add_row(form.cost_terms, -INF, value_of(form.cost_terms, incumbent) + HOLD_SLACK)
    volume = [s for s in stages if s.name.startswith("priority")]
    served = sum(s.objective for s in volume)
    served_bound = sum(s.bound for s in volume)
    proven = all(s.status in ("optimal", "kept") for s in stages)
    return Outcome(incumbent, "optimal" if proven else "feasible", served, max(served_bound, served), stages)


def fair_stage(stage: FairStage, backend: Backend, incumbent: np.ndarray | None, seconds: float, gap: float,
               stages: list[StageResult], began: float, budget: Budget, columns: int) -> np.ndarray | None:
    """A fair-sharing stage (planner.milp.fairness): maximise its terms from `incumbent`, keep
    the better answer, and hold what it reached for every stage after it."""
    if incumbent is not None and value_of(stage.terms, incumbent) >= stage.ceiling - HOLD_SLACK:
        achieved = value_of(stage.terms, incumbent)
        record(stages, StageResult(stage.name, "kept", achieved, max(achieved, stage.ceiling), 0.0))
    else:
        backend.set_objective(stage.terms, maximize=True)
        guess = incumbent if incumbent is not None else np.zeros(columns)
        values, status, bound = backend.run(seconds, gap, guess)
        if values is not None and (incumbent is None or
                                   value_of(stage.terms, values) >= value_of(stage.terms, incumbent) - HOLD_SLACK):
            incumbent = values
        if incumbent is None:
            record(stages, StageResult(stage.name, "failed", 0.0, stage.ceiling, budget.now() - began))
            return None
        achieved = value_of(stage.terms, incumbent)
        upper = stage.ceiling if bound is None else min(stage.ceiling, max(achieved, bound))
        proven = achieved >= upper - PROVEN_TOLERANCE * (1.0 + abs(upper))
        record(stages, StageResult(stage.name, "optimal" if proven else "feasible", achieved, upper,
                                  budget.now() - began))
    backend.add_row(stage.terms, value_of(stage.terms, incumbent) - HOLD_SLACK, INF)
    return incumbent

