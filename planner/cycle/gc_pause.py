"""Python's cyclic garbage collector, tuned for one planning cycle.

A cycle builds millions of small objects that live until it ends (the model's terms,
greedy's state) on top of the snapshot's millions, and makes almost no cyclic
garbage. With the default thresholds the collector runs thousands of times and
rescans all of them, a large share of formulating's time (BENCHMARKS.md). So for the
cycle, what exists already
(the snapshot) is frozen out of collection and the young generation collects 100,000
allocations at a time rather than 700; cycles are still collected. Both undone after.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

YOUNG = 100_000     # allocations between collections of the youngest generation (default 700)
MIDDLE = 50         # of those between collections of the middle one (default 10)
OLDEST = 1_000      # of those between full collections (default 10)


@contextlib.contextmanager
def cycle_collector() -> Iterator[None]:
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLDEST)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
