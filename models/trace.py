"""A trace: the jobs a simulation feeds to the cluster over time (docs/simulate.md).

The reader (planner/snapshot/trace.py) turns each line of a trace file into an
`Arrival`: a pending `Workload` read exactly as the snapshot reader reads a Job or
JobSet (queue, priority class, requests, topology annotations), with when it is
submitted and how long it must run.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.objects import Workload


@dataclass(frozen=True)
class Arrival:
    """One trace entry: `workload` (pending) is submitted `submit` seconds after the
    simulation starts and finishes once it has run `duration` seconds in all; it saves
    its progress every `checkpoint_interval` seconds of running (None: never, so an
    eviction loses everything since it last started)."""

    workload: Workload
    submit: float
    duration: float
    checkpoint_interval: float | None = None
    line: int = 0                     # the trace line it came from, for messages


@dataclass(frozen=True)
class Trace:
    """The arrivals, in submit order, and the simulated span (`hours`, from the
    header line; None: until the last arrival)."""

    source: str
    arrivals: tuple[Arrival, ...]
    hours: float | None = None
