"""Greedy's plan and the improved start, computed on the second core while the model is built.

Both are long at scale (seconds each at 16,384 nodes) and independent of the
model, so the cycle forks: the child runs greedy and improves on it, the parent
formulates meanwhile, and the child sends back the two plans (greedy's is verified
where it is used: as the plan, or as the fallback; planner.run). Fork
shares the snapshot without copying or pickling it; only the plans come back.
Where fork is not available, only one CPU is, or the child fails, the same work
runs in this process, one step after the other, with the same result.

Improving is two searches (planner.improve): packing greedy's plan again below its
top tier, and growing it as it is. Where the model leaves the start the stages'
time (Due.extend), this process has nothing left to build once the model is, so
the child sends greedy's plan as soon as it has it and packs it again, while this
process grows it; the better of the two is the start.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from models import Decisions, Snapshot
from planner.beside import two_cpus
from planner.greedy import greedy
from planner.improve import admit_more, better_of, improve

T = TypeVar("T")

# Packing greedy's plan again (planner.improve.repacked) is started only with this many
# times greedy's own time left until due: it takes 1.4-1.9 times as long (M: 2.1 s after
# greedy's 1.1-1.5 s; L: 19 s after 12.5-14 s), and cut short at L it serves less than
# growing the plan (24,424 GPUs of priority 100 after 9 s, against 25,467), where at M
# it serves more after three quarters of its time.
REPACK_PER_GREEDY = 1.4


class Due:
    """When the starts are due (a time.monotonic() instant). The cycle moves it later
    (`extend`) once it knows that the model cannot be solved in a cycle: the improved
    start is then the plan, and the stages' time is the start's too. Kept in shared
    memory, so that a forked child sees the change while it improves."""

    def __init__(self, at: float):
        self._at = multiprocessing.RawValue("d", at)
        self._extended = multiprocessing.RawValue("b", False)
        self._decided = multiprocessing.RawValue("b", False)

    @property
    def at(self) -> float:
        return self._at.value

    @property
    def extended(self) -> bool:
        return bool(self._extended.value)

    @property
    def decided(self) -> bool:
        """Has the cycle said whether it extends (`extend` or `keep`)?"""
        return bool(self._decided.value)

    def extend(self, until: float) -> None:
        """Due at `until` if that is later, and improving no longer held to its own share."""
        self._at.value = max(self._at.value, until)
        self._extended.value = True
        self._decided.value = True

    def keep(self) -> None:
        """Decided: not extended (the stages will search)."""
        self._decided.value = True

    def improving_until(self, began: float, seconds: float) -> Callable[[], float]:
        """Until when improving may go on: `seconds` after `began`, no later than due;
        once extended, until due."""
        return lambda: self._at.value if self._extended.value else min(self._at.value, began + seconds)


@dataclass(frozen=True)
class Starts:
    baseline: Decisions          # greedy's plan: the fallback and the yardstick
    better: Decisions            # the improved start (the baseline itself when not improving)


def starts(snapshot: Snapshot, improve_seconds: float | None, due: Due,
           tell: Callable[[Decisions | None], None] | None = None) -> Starts:
    """Greedy's plan, and it improved for up to `improve_seconds` (None: not at all)
    until `due`: packed again if there is time for that, then grown; only grown if not.
    `tell` (the forked child's) hears greedy's plan as soon as it is made, where it is
    packed again (None where it is not): where the due is extended, the parent grows it
    beside, and the plan packed here is all this returns."""
    began = time.monotonic()
    baseline = greedy(snapshot).decisions
    took = time.monotonic() - began
    if improve_seconds is None or time.monotonic() >= due.at:
        # Not improving, or no time left to: improve's own setup alone takes seconds at
        # scale (2 s at L), spent for nothing past its deadline.
        if tell is not None:
            tell(None)
        return Starts(baseline, baseline)
    until = due.improving_until(time.monotonic(), improve_seconds)
    # Packing again takes about 1.5 times as long as greedy (which measures the snapshot
    # and this machine's speed of the moment), and cut short it may serve less than
    # growing: it is tried only with the time for it, unless the parent grows the plan
    # beside it (an extended due, when told). Then a packing cut short costs little, and
    # its first turns serve the top tier fast: at XL priority 1000 whole (objective/bound
    # 0.926), where growing alone reached 0.839. Where the parent has not yet decided
    # (its model still building), it is likely to extend: a limit that greedy's time
    # makes short for packing is short for the stages too. (At M, deciding by the time
    # rule then lost the packing in half the runs: 0.88-0.91 where packing gives 0.999.)
    beside = tell is not None and (due.extended or not due.decided)
    packing = beside or until() - time.monotonic() >= REPACK_PER_GREEDY * took
    if tell is not None:
        tell(baseline if packing else None)
    if not packing:
        return Starts(baseline, admit_more(snapshot, baseline, until))
    # Where the due is extended the stages will not search from the start, and a parent
    # told of greedy's plan grows it beside (starts_beside); else the stages will
    # (planner.improve.for_the_stages). Asked once packed: the parent may extend meanwhile.
    return Starts(baseline, improve(snapshot, baseline, until, grow=lambda: tell is None or not due.extended,
                                    searched=lambda: not due.extended))


def starts_beside(snapshot: Snapshot, improve_seconds: float | None, due: Due,
                  work: Callable[[Callable[[], bool]], T]) -> tuple[Starts, T]:
    """`starts(...)` in a forked child while `work(done)` runs here; both results.
    `done()` says whether the starts are ready (work that only fills idle time can stop).
    Where `work` extended `due`, this process grows greedy's plan once `work` is done,
    while the child packs it again; the start is the better of the two."""
    if not two_cpus() or "fork" not in multiprocessing.get_all_start_methods():
        return starts(snapshot, improve_seconds, due), work(lambda: True)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, snapshot, improve_seconds, due), daemon=True)
    child.start()
    send.close()
    inbox = _Inbox(receive)
    try:
        result = work(inbox.done)
        grown = None
        if improve_seconds is not None and due.extended:
            baseline = inbox.baseline()
            if baseline is not None:
                grown = admit_more(snapshot, baseline, lambda: due.at)
        found = inbox.final()
    except BaseException:
        child.kill()
        raise
    finally:
        receive.close()
        child.join()
    if not isinstance(found, Starts):      # the child failed (out of memory, killed, an error)
        return starts(snapshot, improve_seconds, due), result
    if grown is not None:
        found = Starts(found.baseline, better_of(snapshot, found.better, grown))
    return found, result


class _Inbox:
    """The child's two messages: greedy's plan, then its Starts (or why it failed)."""

    def __init__(self, receive):  # type: ignore[no-untyped-def]
        self.receive = receive
        self.messages: list[object] = []
        self.closed = False

    def _take(self) -> None:
        try:
            self.messages.append(self.receive.recv())
        except EOFError:      # the child died
            self.closed = True

    def done(self) -> bool:
        """Are the starts ready (or will they never come)?"""
        while not self.closed and len(self.messages) < 2 and self.receive.poll():
            self._take()
        return self.closed or len(self.messages) >= 2

    def baseline(self) -> Decisions | None:
        while not self.closed and not self.messages:
            self._take()
        return self.messages[0] if self.messages and isinstance(self.messages[0], Decisions) else None

    def final(self) -> object:
        while not self.closed and len(self.messages) < 2:
            self._take()
        return self.messages[1] if len(self.messages) >= 2 else None


def _child(send, snapshot: Snapshot, improve_seconds: float | None, due: Due) -> None:  # type: ignore[no-untyped-def]
    # Greedy's plan goes out from a thread: the parent reads it only once its model is
    # built, and a send waits for that where the plan outgrows the pipe (0.4 s at M).
    telling: list[threading.Thread] = []

    def tell(baseline: Decisions | None) -> None:
        telling.append(threading.Thread(target=send.send, args=(baseline,), daemon=True))
        telling[0].start()

    try:
        found: object = starts(snapshot, improve_seconds, due, tell=tell)
    except Exception as error:   # the parent redoes the work and meets the error itself
        found = repr(error)
    try:
        for thread in telling:
            thread.join()
        send.send(found)
    finally:
        send.close()

