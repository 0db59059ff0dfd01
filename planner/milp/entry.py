"""The MILP's one way in: formulate a snapshot, then solve the formulation within a
budget, with the backend and settings of one Options. The cycle (planner.cycle) uses
only this; what lies behind it (the passes of planner.milp.search, the stages of
planner.milp.stages, the backends of planner.milp.backends) can change without it knowing.
"""

from __future__ import annotations

from dataclasses import dataclass

from models import Policy
from planner.budget import Budget
from planner.milp.arrays import ModelArrays
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


def solve(form: Formulation, budget: Budget, judge: Judge, options: Options) -> Found:
    """The best plan the search finds for `form` within `budget` (planner.milp.search)."""
    return search(form, lambda arrays: make_backend(arrays, options), budget, options.gap, judge, search=options.rins)
