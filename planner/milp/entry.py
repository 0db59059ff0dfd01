"""The MILP's one way in: `plan(snapshot, judge, budget, options) -> Outcome`.

It holds the whole of the MILP's part of a cycle: the model built once
(planner.milp.model), the backend `options` (planner.base.solve_options, merged with
the policy by the cycle) choose (make_backend), and the search
(planner.milp.search: the passes with the stability rows off and put back where the
judge's rule flags them, then the tails; the stages of planner.milp.stages in each).
The cycle (planner.cycle) calls only this, and keeps what is its own: Kueue's way
first, verifying, the fallback, the Plan.

The judge is the cycle's: the verifier's rules and Kueue's cycle, and Kueue's own plan
(the baseline, waited for from the second core) are all outside this layer, which may
import none of them (tests/test_layers.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models import Decisions, ObjectRef, Snapshot
from planner.base.budget import Budget, Stopwatch
from planner.base.solve_options import SolveOptions
from planner.milp.arrays import ModelArrays
from planner.milp.model import formulate
from planner.milp.rows import Formulation
from planner.milp.search import Found, Judge
from planner.milp.search import solve as search
from planner.milp.backends import Backend, HighsBackend, PulpBackend


def make_backend(arrays: ModelArrays, options: SolveOptions) -> Backend:
    if options.solver == "milp":
        return HighsBackend(arrays, threads=options.thread_count, seed=options.random_seed)
    if options.solver.startswith("pulp:"):
        return PulpBackend(arrays, options.solver.split(":", 1)[1], threads=options.thread_count)
    raise ValueError(f"unknown solver {options.solver!r}")


@dataclass(frozen=True)
class Outcome:
    """What the MILP found, as the cycle reports it: the plan (None: none, `message` says
    why), its status, bound (volume over the tiers, summed) and gap, every stage in the
    order it ran, notes on how the plan was found, the model's size, the workloads the
    model left out and why, and how long building the model took (reported only)."""

    decisions: Decisions | None
    status: str                                    # optimal | feasible | failed
    bound: float
    gap: float
    stages: tuple[dict[str, object], ...]
    notes: tuple[str, ...] = ()
    message: str = ""
    model: dict[str, int] = field(default_factory=dict)
    excluded: dict[ObjectRef, str] = field(default_factory=dict)
    build_seconds: float = 0.0


def plan(snapshot: Snapshot, judge: Judge, budget: Budget, options: SolveOptions, rins: bool = True) -> Outcome:
    """The best plan the MILP finds for `snapshot` within `budget` (made from `options`'
    time limit), `options` merged with the policy: the backend they choose, the gap each
    stage stops at, threads and seed. `rins`: the search around each tier's LP point
    (off only to measure what it adds)."""
    watch = Stopwatch()     # reported only
    form = formulate(snapshot, locality=True)
    built = watch.seconds()
    found = search(form, lambda arrays: make_backend(arrays, options), budget, options.stage_gap, judge,
                   search=rins)
    return Outcome(found.decisions, found.status, found.bound, found.gap, tuple(s.as_dict() for s in found.stages),
                   notes(form, found), found.message, model_size(form), dict(form.excluded), built)


def notes(form: Formulation, found: Found) -> tuple[str, ...]:
    """How the plan was found, where it says more than its stages do."""
    out = []
    if found.rows_on:
        out.append(f"stability rows put back for {found.rows_on} workload(s) in {found.passes} passes; "
                   f"plan from {found.origin}")
    if form.eased:
        out.append(f"{form.eased} stability row(s) eased where a plan Kueue keeps breaks them; the verifier "
                   "checks the rule itself")
    return tuple(out)


def model_size(form: Formulation) -> dict[str, int]:
    arrays = form.arrays
    return {"columns": arrays.num_cols, "rows": arrays.num_rows, "nonzeros": len(arrays.entry_val)}
