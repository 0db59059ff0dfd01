"""One piece of work computed in a forked child while this process goes on.

The machine the planner is measured on has two cores, and a cycle's steps are long
at scale (seconds at 16,384 nodes). Fork shares the snapshot without copying or
pickling it; only the result comes back. Where fork or a second CPU is not
available, or the child fails, the work runs here when its result is asked for:
the same result, one step after the other. Pure of the planner's own I/O: what
crosses is a pipe to the child.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Beside(Generic[T]):
    """`work()` started on the second core; `result()` waits for it."""

    def __init__(self, work: Callable[[], T]):
        self._work = work
        self._child = None
        if two_cpus() and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            self._receive, send = context.Pipe(duplex=False)
            self._child = context.Process(target=_run, args=(send, work), daemon=True)
            self._child.start()
            send.close()

    def result(self) -> T:
        """The child's answer; computed here if there is no child or it failed."""
        if self._child is not None:
            try:
                found = self._receive.recv()
            except EOFError:        # the child died (out of memory, killed)
                found = None
            finally:
                self._close()
            if isinstance(found, _Done):
                return found.value  # type: ignore[no-any-return]
        return self._work()

    def cancel(self) -> None:
        """The answer is not wanted: stop the child (a no-op once answered)."""
        if self._child is not None:
            self._child.kill()
            self._close()

    def __del__(self) -> None:     # dropped unanswered (an error on the way): no child left behind
        if getattr(self, "_child", None) is not None:
            self.cancel()

    def _close(self) -> None:
        self._receive.close()
        self._child.join()      # type: ignore[union-attr]
        self._child = None


class _Done:
    """A result that came back (an error comes back as its repr: this process redoes
    the work and meets the error itself)."""

    def __init__(self, value: object):
        self.value = value


def _run(send, work: Callable[[], object]) -> None:  # type: ignore[no-untyped-def]
    try:
        found: object = _Done(work())
    except Exception as error:
        found = repr(error)
    try:
        send.send(found)
    finally:
        send.close()


def two_cpus() -> bool:
    """May this process use a second CPU?"""
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except AttributeError:     # not on Linux
        return (os.cpu_count() or 1) >= 2
