"""Ctrl-C (SIGINT) and SIGTERM stop the cycle: nothing is written, nothing applied past
the write in flight, exit 130 / 143 (planner/cli/group.py says so in one line).

`handling()` (the CLI, for a whole command) makes either signal raise Interrupted in the
main thread, wherever Python code runs, so the cycle unwinds through its `finally`s (the
second core's copy stopped, temp files removed, the Lease given back). Two kinds of work
must not be cut in the middle, and run `deferred()`: native code that would swallow the
exception (a HiGHS solve: raised inside one of its callbacks, it only ends that solve,
reported as a solver error, and the cycle would go on), and a write that has to land whole
or not at all (an API write in flight, the final rename of the outputs). There the signal
is only recorded; the solver's interrupt callbacks read `requested()` and stop it, and
Interrupted is raised as the deferred block ends. Worker threads (the applier's) never see
a signal: they ask `requested()` before each write.

Base layer: the deciding code may ask `requested()` and `check()`; only the CLI installs
the handlers. Without them (a library caller) nothing here changes
anything: `requested()` stays False.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: int | None = None     # the first signal seen within handling()
_deferring = 0                   # depth of deferred() blocks in the main thread


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: the command stops (a BaseException, as KeyboardInterrupt, so
    that no `except Exception` on the way takes it for an error of its own)."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        self.note = ""      # what was done before it stopped, when not "nothing" (the CLI's one line)
        super().__init__(self.name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention, as a process killed by the signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


def requested() -> bool:
    """Has SIGINT or SIGTERM arrived (from any thread: a solver's callback, an applier's worker)?"""
    return _received is not None


def received() -> int | None:
    """The signal that arrived first, if any."""
    return _received


def check() -> None:
    """Raise Interrupted if a signal has arrived (the way out of a deferred stretch, or a
    point where a long step may stop)."""
    if _received is not None:
        raise Interrupted(_received)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block, a signal is recorded and not raised (in the main thread; other threads
    never receive one); at its end (the outermost block's), Interrupted is raised if one
    arrived, before or during it."""
    global _deferring
    main = _main_thread()
    if main:
        _deferring += 1
    try:
        yield
    finally:
        if main:
            _deferring -= 1
    if main and _deferring == 0:     # a block within another: the outer one raises, as it ends
        check()


def _on_signal(signum: int, frame: Any) -> None:
    global _received
    if _received is None:
        _received = signum
    if _deferring == 0:
        raise Interrupted(_received)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """SIGINT and SIGTERM raise Interrupted while the block runs (their handlers restored after,
    and the signal forgotten; a signal this process was started ignoring stays ignored).
    Outside the main thread, where no handler can be set, nothing changes."""
    global _received
    if not _main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    if any(handler is _on_signal for handler in previous.values()):
        yield       # already handled by an enclosing block
        return
    try:
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:    # ignored (nohup, a background job's SIGINT): left so
                signal.signal(sig, _on_signal)
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _received = None     # the command that saw it is over: later work in this process runs as before

