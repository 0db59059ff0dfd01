"""Beside: work on the second core, the same answer as here."""

from __future__ import annotations

import os

import pytest

from planner import beside as beside_module
from planner.beside import Beside


def test_the_work_runs_in_a_child_and_its_answer_comes_back():
    here = os.getpid()
    found = Beside(lambda: (os.getpid(), [1, 2, 3])).result()
    assert found[1] == [1, 2, 3]
    assert found[0] != here or not beside_module.two_cpus()


def test_a_failing_child_is_made_up_for_here():
    """The work raises in the child only (say, it ran out of memory there): this process
    computes the answer itself."""
    here = os.getpid()

    def work() -> int:
        if os.getpid() != here:
            raise MemoryError("child")
        return 7

    assert Beside(work).result() == 7


def test_an_error_in_the_work_is_met_here_too():
    def work() -> int:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        Beside(work).result()


def test_one_cpu_works_here(monkeypatch):
    monkeypatch.setattr(beside_module, "two_cpus", lambda: False)
    here = os.getpid()
    assert Beside(lambda: os.getpid()).result() == here


def test_cancelled_work_leaves_no_child():
    import time

    slow = Beside(lambda: time.sleep(30))
    child = slow._child
    slow.cancel()
    assert child is None or not child.is_alive()
