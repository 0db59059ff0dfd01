"""Progress events from deep inside a cycle, for whoever listens (the CLI on a terminal).

A stage of the search reports itself as it finishes; nothing is printed here and
nothing is decided by it: with no listener (the default, and always in tests of the
core) an event costs one context-variable read. The CLI installs a listener for the
length of a command (`listening`) and draws the events with rich.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator


@dataclass(frozen=True)
class StageDone:
    name: str            # "priority 1000", "preemption cost", ...
    status: str          # optimal | feasible | kept | failed
    objective: float
    bound: float
    seconds: float

    @property
    def gap(self) -> float:
        """Relative gap of the stage's answer to its bound (0 when proven)."""
        scale = max(abs(self.bound), abs(self.objective))
        return abs(self.bound - self.objective) / scale if scale > 0 else 0.0


Listener = Callable[[StageDone], None]
_listener: ContextVar[Listener | None] = ContextVar("stowplan_progress", default=None)


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def stage_done(name: str, status: str, objective: float, bound: float, seconds: float) -> None:
    listener = _listener.get()
    if listener is not None:
        listener(StageDone(name, status, objective, bound, seconds))


def silence() -> None:
    """No listener from here on in this context (a forked copy's work is not the parent's progress)."""
    _listener.set(None)
