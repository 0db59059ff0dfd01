"""Greedy's plan and the improved start, computed on the second core while the model is built.

Both are long at scale (seconds each at 16,384 nodes) and independent of the
model, so the cycle forks: the child runs greedy and improves on it, the parent
formulates meanwhile, and the child sends back the two plans (greedy's is verified
where it is used: as the plan, or as the fallback; planner.run). Fork
shares the snapshot without copying or pickling it; only the plans come back.
Where fork is not available, only one CPU is, or the child fails, the same work
runs in this process, one step after the other, with the same result.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from models import Decisions, Snapshot
from planner.greedy import greedy
from planner.improve import improve

T = TypeVar("T")


class Due:
    """When the starts are due (a time.monotonic() instant). The cycle moves it later
    (`extend`) once it knows that the model cannot be solved in a cycle: the improved
    start is then the plan, and the stages' time is the start's too. Kept in shared
    memory, so that a forked child sees the change while it improves."""

    def __init__(self, at: float):
        self._at = multiprocessing.RawValue("d", at)
        self._extended = multiprocessing.RawValue("b", False)

    @property
    def at(self) -> float:
        return self._at.value

    def extend(self, until: float) -> None:
        """Due at `until` if that is later, and improving no longer held to its own share."""
        self._at.value = max(self._at.value, until)
        self._extended.value = True

    def improving_until(self, began: float, seconds: float) -> Callable[[], float]:
        """Until when improving may go on: `seconds` after `began`, no later than due;
        once extended, until due."""
        return lambda: self._at.value if self._extended.value else min(self._at.value, began + seconds)


@dataclass(frozen=True)
class Starts:
    baseline: Decisions          # greedy's plan: the fallback and the yardstick
    better: Decisions            # the improved start (the baseline itself when not improving)


def starts(snapshot: Snapshot, improve_seconds: float | None, due: Due) -> Starts:
    """Greedy's plan, and it improved for up to `improve_seconds` (None: not at all)
    until `due`."""
    baseline = greedy(snapshot).decisions
    if improve_seconds is None or time.monotonic() >= due.at:
        # Not improving, or no time left to: improve's own setup alone takes seconds at
        # scale (2 s at L), spent for nothing past its deadline.
        return Starts(baseline, baseline)
    better = improve(snapshot, baseline, due.improving_until(time.monotonic(), improve_seconds))
    return Starts(baseline, better)


def starts_beside(snapshot: Snapshot, improve_seconds: float | None, due: Due,
                  work: Callable[[Callable[[], bool]], T]) -> tuple[Starts, T]:
    """`starts(...)` in a forked child while `work(done)` runs here; both results.
    `done()` says whether the starts are ready (work that only fills idle time can stop)."""
    if not _two_cpus() or "fork" not in multiprocessing.get_all_start_methods():
        return starts(snapshot, improve_seconds, due), work(lambda: True)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, snapshot, improve_seconds, due), daemon=True)
    child.start()
    send.close()
    try:
        result = work(receive.poll)
    except BaseException:
        child.kill()
        raise
    try:
        found = receive.recv()
    except EOFError:      # the child died (out of memory, killed): do it here
        found = None
    finally:
        receive.close()
        child.join()
    if not isinstance(found, Starts):
        found = starts(snapshot, improve_seconds, due)
    return found, result


def _child(send, snapshot: Snapshot, improve_seconds: float | None, due: Due) -> None:  # type: ignore[no-untyped-def]
    try:
        send.send(starts(snapshot, improve_seconds, due))
    except Exception as error:   # the parent redoes the work and meets the error itself
        send.send(repr(error))
    finally:
        send.close()


def _two_cpus() -> bool:
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except AttributeError:     # not on Linux
        return (os.cpu_count() or 1) >= 2
