"""The MILP's one way in: `plan(snapshot, judge, budget, options) -> Outcome`.

It holds the whole of the MILP's part of a cycle: the model built once
(planner.milp.model), the backend `options` choose (make_backend), and the search
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

from models import Decisions, ObjectRef, Policy, Snapshot
from planner.base.budget import Budget, Stopwatch
from planner.milp.arrays import ModelArrays
from planner.milp.model import formulate
from planner.milp.rows import Formulation
from planner.milp.search import Found, Judge
from planner.milp.search import solve as search
from planner.milp.backends import Backend, HighsBackend, PulpBackend


@dataclass(frozen=True)
class Options:
    """How to solve: the backend (`milp`: HiGHS through highspy; `pulp:NAME`: any solver
    PuLP drives), the relative gap each stage stops at, threads and seed (a fixed seed
    and thread count: the same snapshot, the same plan), and the search around each
    tier's LP point (RINS; off only to measure what it adds)."""

    solver: str = "milp"
    gap: float = 1e-4
    threads: int = 1
    seed: int = 0
    rins: bool = True

    @classmethod
    def of(cls, policy: Policy, solver: str = "milp", rins: bool = True) -> "Options":
        return cls(solver=solver, gap=policy.mip_gap, threads=policy.threads, seed=policy.seed, rins=rins)


def make_backend(arrays: ModelArrays, options: Options) -> Backend:
    if options.solver == "milp":
        return HighsBackend(arrays, threads=options.threads, seed=options.seed)
    if options.solver.startswith("pulp:"):
        return PulpBackend(arrays, options.solver.split(":", 1)[1], threads=options.threads)
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


def plan(snapshot: Snapshot, judge: Judge, budget: Budget, options: Options) -> Outcome:
    """The best plan the MILP finds for `snapshot` within `budget`."""
    watch = Stopwatch()     # reported only
    form = formulate(snapshot, locality=True)
    built = watch.seconds()
    found = search(form, lambda arrays: make_backend(arrays, options), budget, options.gap, judge,
                   search=options.rins)
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
