"""planner.starts: greedy and the improved start on a forked second core give exactly
what they give in this process, and a child that fails costs nothing but time."""

import os
import time

import pytest

from randomgen import random_snapshot
from planner import starts as starts_module
from planner.starts import starts, starts_beside


@pytest.mark.parametrize("seed", range(5))
def test_beside_gives_what_in_process_gives(seed):
    snap = random_snapshot(50_000 + seed, with_running=True, with_topology=True)
    deadline = time.monotonic() + 60
    alone = starts(snap, 30.0, deadline)
    beside, result = starts_beside(snap, 30.0, deadline, lambda: os.getpid())
    assert beside == alone
    assert result == os.getpid()     # the work ran here, not in the child


def test_a_failing_child_is_made_up_for_here(monkeypatch):
    parent = os.getpid()
    real = starts_module.improve

    def improve_fails_in_the_child(*args, **kwargs):
        if os.getpid() != parent:
            raise MemoryError("the child ran out")
        return real(*args, **kwargs)

    monkeypatch.setattr(starts_module, "improve", improve_fails_in_the_child)
    snap = random_snapshot(50_100, with_running=True)
    deadline = time.monotonic() + 60
    beside, _ = starts_beside(snap, 30.0, deadline, lambda: None)
    assert beside == starts(snap, 30.0, deadline)


def test_without_improving_the_start_is_greedy_itself():
    snap = random_snapshot(50_200, with_running=True)
    plans, _ = starts_beside(snap, None, time.monotonic() + 60, lambda: None)
    assert plans.better == plans.baseline and plans.violations == []
