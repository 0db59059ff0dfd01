"""Work on the second core: a function run in a forked copy of this process, its answer
sent back through a pipe, or no answer by a deadline (the copy is then stopped).

The cycle runs Kueue's way (greedy) here while the MILP runs in the cycle's own
process: both cores work, and greedy's time stops being the cycle's. What the copy
computes depends only on its input; whether the answer arrives by the deadline depends
on the machine, and the caller says which happened.

A forked copy shares the parent's memory until either writes it, so the snapshot is
not copied or sent. Where fork is not available the function runs in this process
when its answer is first asked for (no second core, and no deadline either).

A copy never outlives what it was made for: `reaped()` (the cycle) stops and waits for
every copy made within it that is still running when it ends, an error or Ctrl-C
included; and a copy dies with the process (PR_SET_PDEATHSIG), should that die first.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import signal
import traceback
from typing import Any, Callable, Generic, Iterator, TypeVar

from planner.base import interrupt
from planner.base import progress
T = TypeVar("T")

# Linux's prctl(PR_SET_PDEATHSIG): the copy is killed when the cycle's process dies
# (Ctrl-C, a crash, the CronJob's deadline), never left running on its own.
_PR_SET_PDEATHSIG = 1


class BesideError(RuntimeError):
    """The function raised in the copy; the message carries its traceback."""


class Beside(Generic[T]):
    """`fn(*args)` running on the second core from the moment this object is made."""

    def __init__(self, fn: Callable[..., T], *args: Any):
        self._fn, self._args = fn, args
        self._done = False
        self._value: T | None = None
        self._process: Any = None
        self._conn: Any = None
        if "fork" not in multiprocessing.get_all_start_methods():
            return
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        self._process = context.Process(target=_child, args=(send, fn, args), daemon=True)
        self._process.start()
        send.close()
        self._conn = receive
        for made in _scopes:
            made.append(self)

    @property
    def forked(self) -> bool:
        return self._process is not None

    def ready(self) -> bool:
        """Has the answer arrived (without waiting)?"""
        return self._done or (self._conn is not None and self._conn.poll(0))

    def wait(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the answer, leaving the work running if it is
        not in by then; whether it is in."""
        if self._done or self._conn is None:
            return True
        return bool(self._conn.poll(max(0.0, timeout)))

    def result(self, timeout: float | None) -> T | None:
        """The answer, waiting at most `timeout` seconds (None: as long as it takes); None
        when it has not arrived by then, and the copy is stopped. Raises BesideError when
        the function raised."""
        if self._done:
            return self._value
        if self._process is None:
            self._value, self._done = self._fn(*self._args), True
            return self._value
        if not self._conn.poll(timeout):
            self.stop()
            return None
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            self.stop()
            raise BesideError("the second core's process ended without an answer") from None
        self._finish()
        if kind == "error":
            raise BesideError(payload)
        self._value, self._done = payload, True
        return self._value

    def stop(self) -> None:
        """Stop the copy (if still running) and forget it; result() is None from now on."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        self._finish()
        self._done = True

    def _finish(self) -> None:
        if self._process is not None:
            self._process.join()
            self._process.close()
            self._process = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None


_scopes: list[list[Beside[Any]]] = []    # the copies made within each reaped() block, innermost last


@contextlib.contextmanager
def reaped() -> Iterator[None]:
    """Every copy made within the block and still running at its end is stopped and waited
    for (none left running, none left a zombie), however the block ends."""
    made: list[Beside[Any]] = []
    _scopes.append(made)
    try:
        yield
    finally:
        _scopes.remove(made)
        with interrupt.deferred():     # a second Ctrl-C does not leave the rest running
            for beside in made:
                beside.stop()


def _child(send: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """In the copy: die with the parent, compute, send the answer or the error."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):   # not Linux: the daemon flag still ends it with the parent
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler (planner.base.interrupt): stop() may end it
    progress.silence()                              # the parent's terminal shows the parent's progress
    try:
        message: tuple[str, Any] = ("ok", fn(*args))
    except BaseException:   # noqa: BLE001 - any failure goes back to the parent, which raises it
        message = ("error", traceback.format_exc())
    try:
        send.send(message)
    except BaseException:   # noqa: BLE001 - an answer that cannot be sent is an error too
        send.send(("error", traceback.format_exc()))
    finally:
        send.close()        # multiprocessing ends the copy when this returns
