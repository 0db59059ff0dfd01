"""planner.cycle.beside: work on the second core, its answer back, or none by a deadline."""

from __future__ import annotations

import os
import time

import pytest

from planner.cycle.beside import Beside, BesideError


def square(x: int) -> int:
    return x * x


def pid_of_worker() -> int:
    return os.getpid()


def sleep_then(value: int, seconds: float) -> int:
    time.sleep(seconds)
    return value


def fail() -> None:
    raise ValueError("wrong shape")


def test_the_answer_comes_back_from_another_process() -> None:
    job = Beside(pid_of_worker)
    assert job.forked
    assert job.result(timeout=60) != os.getpid()
    assert Beside(square, 7).result(timeout=60) == 49


def test_no_answer_by_the_deadline_stops_the_work() -> None:
    job = Beside(sleep_then, 1, 30.0)
    began = time.monotonic()
    assert job.result(timeout=0.2) is None
    assert time.monotonic() - began < 20          # it did not wait for the 30 s job
    assert job.result(timeout=60) is None         # stopped: no late answer either


def test_an_error_in_the_work_is_raised_with_its_traceback() -> None:
    with pytest.raises(BesideError, match="ValueError: wrong shape"):
        Beside(fail).result(timeout=60)


def test_ready_says_whether_the_answer_is_in() -> None:
    job = Beside(square, 3)
    deadline = time.monotonic() + 60
    while not job.ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job.ready()
    assert job.result(timeout=0) == 9


def test_waiting_leaves_the_work_running() -> None:
    job = Beside(sleep_then, 5, 0.5)
    assert not job.wait(0.0)                      # not in yet, and not stopped
    assert job.result(timeout=60) == 5
