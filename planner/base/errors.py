"""Errors that carry what went wrong and the exit code the CLI turns them into.

Exit codes (documented in the README):
  0 ok · 1 unexpected internal error · 2 bad input (file, policy, flag, or any
  problem under --strict) · 3 a plan failed verification (never written) ·
  4 cluster API error · 5 another planner holds the lease · 6 saved plan is stale ·
  7 a worker cluster of a multi-cluster apply was unreachable (the rest applied) ·
  8 Kueue's controller manager is active (planner.cluster.kueue_guard) ·
  130 / 143 stopped by SIGINT / SIGTERM (planner.base.interrupt.Interrupted: nothing written,
  no cluster write started after it).
"""

from __future__ import annotations

from models import ObjectRef
from planner.base.terminal import printable


class StowplanError(Exception):
    exit_code = 1


class InputError(StowplanError):
    """Input the planner cannot run without: names the file, object and field."""

    exit_code = 2

    def __init__(self, message: str, file: str = "", ref: ObjectRef | None = None, field: str = ""):
        self.file, self.ref, self.field, self.detail = file, ref, field, message
        parts = [p for p in (file, str(ref) if ref else "", field) if p]
        super().__init__(": ".join(parts + [message]))


class VerificationError(StowplanError):
    """A plan broke a rule; it is never written or applied."""

    exit_code = 3

    def __init__(self, violations: list[str]):
        self.violations = violations
        # one line per violation: names inside them are escaped, the line breaks are the message's own
        shown = "\n  ".join(printable(v) for v in violations[:20])
        more = f"\n  ... and {len(violations) - 20} more" if len(violations) > 20 else ""
        super().__init__(f"plan failed verification ({len(violations)} violations):\n  {shown}{more}")


class ClusterError(StowplanError):
    exit_code = 4


class LeaseHeldError(StowplanError):
    exit_code = 5


class StalePlanError(StowplanError):
    exit_code = 6


class WorkerUnreachableError(StowplanError):
    """A multi-cluster apply finished, but a worker cluster did not answer: what it should
    have received waits, suspended on the manager, for the next cycle (planner.cluster.dispatch)."""

    exit_code = 7


class KueueActiveError(StowplanError):
    """Kueue's own controller manager is admitting on this cluster: two admitters would fight."""

    exit_code = 8
