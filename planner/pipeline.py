"""One planning cycle on a snapshot: greedy start, MILP, decode, verify, assemble.

Pure: takes a models.Snapshot, returns a models.Plan or raises. The CLI and the
CronJob call this; they do the reading and writing around it.
"""

from __future__ import annotations

from dataclasses import replace

from models import Plan, Snapshot
from planner.collector import cycle_collector


def plan_snapshot(
    snapshot: Snapshot,
    *,
    solver: str = "milp",
    time_limit: float | None = None,
    gap: float | None = None,
    read_seconds: float = 0.0,
) -> Plan:
    """Plan one cycle. Raises VerificationError if the chosen plan breaks a rule.

    `time_limit` and `gap` override the snapshot's policy; `read_seconds` is how long
    reading took, reported in the plan's timings.
    """
    if time_limit is not None or gap is not None:
        policy = snapshot.policy
        policy = replace(
            policy,
            time_limit_seconds=policy.time_limit_seconds if time_limit is None else time_limit,
            mip_gap=policy.mip_gap if gap is None else gap,
        )
        snapshot = replace(snapshot, policy=policy)
    from planner.cycle import run_cycle
    with cycle_collector():
        return run_cycle(snapshot, solver, read_seconds)
