"""The cycle's time, split in one place.

A CronJob has a cycle, not a solver budget: the time limit (SolveOptions: --time-limit,
else the policy's) holds everything from reading the snapshot to the plan. This object
is made once, by the cycle, from that limit and hands each step its deadline. This
module is the one reader of the clock for everything that decides (tests/test_layers.py
holds every other deciding module to it): `now()` for a deadline, `Stopwatch` for the
seconds a step took (reported only).
Steps always run in the same order whatever the machine's speed: only how far a
solver gets before its deadline depends on time.

The split, as shares of the limit:
- reading takes what it takes; Kueue's way (greedy) runs beside the cycle on the
  second core (planner.cycle.beside) and is waited for until the stages' end at the latest;
- FINISH_SHARE is kept at the end for decoding, verifying, explaining and writing;
- the MILP's passes (planner.milp.search) each take a share of what lies between
  (`part`), their priority tiers in turn (each tier may use the time the ones before
  it left); then the preemption cost and the tie-breakers what is left, half each.
"""

from __future__ import annotations

import time
from typing import Callable

FINISH_SHARE = 0.25
TIER_SHARE = 0.7


def now() -> float:
    """Monotonic seconds: the time deadlines are measured in (only how far a solver
    gets may depend on it)."""
    return time.monotonic()


class Stopwatch:
    """Seconds since it was made, or since the last lap: for reports only."""

    def __init__(self) -> None:
        self.began = self.mark = now()

    def seconds(self) -> float:
        return now() - self.began

    def lap(self) -> float:
        """Seconds since the last lap (or the start); starts the next one."""
        at = now()
        lapped, self.mark = at - self.mark, at
        return lapped


class Budget:
    def __init__(self, limit: float, spent: float = 0.0, clock: Callable[[], float] = now,
                 finish_share: float = FINISH_SHARE, tier_share: float = TIER_SHARE):
        self.limit = max(0.0, limit)
        self.clock = clock
        self.finish_share, self.tier_share = finish_share, tier_share
        self.began = clock() - spent
        self.end = self.began + self.limit
        self._window: tuple[float, float] | None = None

    def now(self) -> float:
        return self.clock()

    def left(self) -> float:
        """Seconds until the end of the cycle (never negative)."""
        return max(0.0, self.end - self.clock())

    def spent(self) -> float:
        return self.clock() - self.began

    @property
    def stages_end(self) -> float:
        return self.end - self.finish_share * self.limit

    def until_stages_end(self) -> float:
        """Seconds until the finish reserve begins (never negative): how long the cycle
        waits for work running beside it (planner.cycle.beside)."""
        return max(0.0, self.stages_end - self.clock())

    def part(self, share: float) -> "Budget":
        """A budget for one pass of priority tiers that may take `share` of what is left
        before the finish reserve: its tiers split all of it; it keeps no reserve of its
        own (what follows it in the cycle does)."""
        return Budget(share * max(0.0, self.stages_end - self.clock()), clock=self.clock, finish_share=0.0,
                      tier_share=1.0)

    def open_stages(self) -> None:
        """Fix the stages' window: from now to the finish reserve."""
        now = self.clock()
        self._window = (now, max(now, self.stages_end))

    def tier_deadline(self, index: int, tiers: int) -> float:
        """Tier `index` of `tiers` may run until here: an even share of what is left of
        the tiers' part of the window (so time a tier does not use passes on)."""
        start, end = self._window or (self.clock(), self.stages_end)
        tiers_end = start + self.tier_share * (end - start)
        now = max(self.clock(), start)
        return now + max(0.0, tiers_end - now) / max(1, tiers - index)

    def tail_deadline(self, index: int, tails: int) -> float:
        """Tail stage `index` of `tails` (preemption cost, tie-breakers): an even share of
        what is left of the window."""
        _, end = self._window or (self.clock(), self.stages_end)
        now = self.clock()
        return now + max(0.0, end - now) / max(1, tails - index)
