"""How to solve a cycle: one object, made once where a command reads its flags
(planner.cli.options.solve_options) and handed down whole: the CLI, the cycle
(planner.cycle), the MILP's way in (planner.milp `plan`), the what-ifs, the fleet.

A field left None is the policy's (PlannerPolicy: read from --policy, the --config
files or the cluster); `merged` is the one place a flag and the policy meet: a flag,
or its STOWPLAN_<COMMAND>_<FLAG> variable, wins over the policy, the policy over its
defaults. The policy is known only once the snapshot is read, so the cycle merges
when it starts; everything below it sees every field set.

The time limit here is a number of seconds, not a clock: planner.base.budget's Budget,
made from it by the cycle, is the one reader of the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from models import Policy

T = TypeVar("T")


@dataclass(frozen=True)
class SolveOptions:
    """The solver (`milp`: HiGHS; `greedy`: Kueue's way alone; `pulp:NAME`: any solver
    PuLP drives), the whole cycle's time limit in seconds, the relative gap each priority
    stage stops at, and the solver's threads and seed (a fixed seed and thread count: the
    same snapshot, the same plan)."""

    solver: str = "milp"
    time_limit: float | None = None
    gap: float | None = None
    threads: int | None = None
    seed: int | None = None

    def merged(self, policy: Policy) -> "SolveOptions":
        """Every field set: this object's where set, else the policy's."""
        return replace(
            self,
            time_limit=policy.time_limit_seconds if self.time_limit is None else self.time_limit,
            gap=policy.mip_gap if self.gap is None else self.gap,
            threads=policy.threads if self.threads is None else self.threads,
            seed=policy.seed if self.seed is None else self.seed,
        )

    @property
    def seconds(self) -> float:
        """The merged time limit (merged first: a field left None is a bug of the caller)."""
        return _set(self.time_limit, "time_limit")

    @property
    def stage_gap(self) -> float:
        return _set(self.gap, "gap")

    @property
    def thread_count(self) -> int:
        return _set(self.threads, "threads")

    @property
    def random_seed(self) -> int:
        return _set(self.seed, "seed")


def _set(value: T | None, name: str) -> T:
    if value is None:
        raise ValueError(f"SolveOptions.{name} read before merging with the policy")
    return value
