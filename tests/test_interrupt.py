"""Ctrl-C and SIGTERM stop a run (issue 33 item 3): exit 130 / 143, one line on stderr,
nothing written, no helper process left, and no solve a signal cut short reported optimal.

The command tests send a real signal to a real `stowplan` process, once its HiGHS log
(-v, on stderr) shows that it is solving: no test depends on how fast the machine is,
only on the cycle not being over by the time the first lines of its log are out (meta-like
takes several seconds past them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.base import interrupt
from planner.milp.arrays import INF, ModelArrays
from planner.milp.backends import HighsBackend

REPO = Path(__file__).resolve().parent.parent
META = REPO / "fixtures" / "meta-like.json"
STOWPLAN = [sys.executable, "-c", "from planner.cli import main; main()"]
GENEROUS = 300.0     # seconds: only a hang reaches it


# -- the mechanism, in this process

def test_a_signal_raises_interrupted_with_the_shells_exit_code() -> None:
    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)    # the handler runs at once: never reached
        assert interrupt.requested() and interrupt.received() == signal.SIGTERM
    assert caught.value.exit_code == 143 and caught.value.name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL    # put back as it was
    assert not interrupt.requested()     # and forgotten: later work in this process runs as before


def test_a_deferred_block_finishes_then_raises() -> None:
    finished = False
    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted) as caught:
            with interrupt.deferred():
                with interrupt.deferred():        # the inner block's end does not raise: the outer one's does
                    os.kill(os.getpid(), signal.SIGINT)
                    assert interrupt.requested()
                finished = True
    assert finished and caught.value.exit_code == 130


def _knapsack(n: int = 120, m: int = 40) -> ModelArrays:
    """A MIP HiGHS works on for a while (binary knapsack rows), as the model's arrays."""
    rng = np.random.default_rng(1)
    arrays = ModelArrays()
    cols = [arrays.add_col(f"x{i}", 0.0, 1.0, integer=True) for i in range(n)]
    for r in range(m):
        weights = rng.integers(1, 50, n).astype(float)
        arrays.add_row(f"r{r}", [(c, float(w)) for c, w in zip(cols, weights)], -INF, float(weights.sum()) / 3)
    return arrays


def test_a_solve_cut_short_by_a_signal_stops_the_cycle_and_is_never_optimal() -> None:
    import highspy

    arrays = _knapsack()
    backend = HighsBackend(arrays)
    rng = np.random.default_rng(2)
    backend.set_objective([(c, float(v)) for c, v in enumerate(rng.integers(10, 100, arrays.num_cols))],
                          maximize=True)
    calls = [0]

    def signal_once(event: Any) -> None:     # a real signal, while HiGHS is in its search
        calls[0] += 1
        if calls[0] == 20:
            os.kill(os.getpid(), signal.SIGINT)

    backend.h.cbMipInterrupt.subscribe(signal_once)
    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted):
            backend.run(60.0, 0.0, np.zeros(arrays.num_cols))
    assert calls[0] >= 20
    assert backend.h.getModelStatus() == highspy.HighsModelStatus.kInterrupt
    values, status, bound = backend._result(backend.h)   # what a stage would have been told
    assert status != "optimal"


def test_a_run_that_fails_reports_no_bound() -> None:
    """A solver error (here an exception in a callback, as Ctrl-C raised inside one was) leaves
    HiGHS's dual bound at 0: taken as proven, it made the stage `optimal` at its start."""
    arrays = _knapsack(60, 20)
    backend = HighsBackend(arrays)
    backend.set_objective([(c, 1.0) for c in range(arrays.num_cols)], maximize=True)

    def fail(event: Any) -> None:
        raise ValueError("a callback that fails")

    backend.h.cbMipInterrupt.subscribe(fail)
    values, status, bound = backend.run(60.0, 0.0, np.zeros(arrays.num_cols))
    assert status == "failed" and bound is None


# -- the second core's copy

BESIDE = textwrap.dedent("""
    import os, sys, time
    from planner.base import interrupt
    from planner.cycle.beside import Beside, reaped

    def forever(marker):
        open(marker, "w").write(str(os.getpid()))
        while True:
            time.sleep(0.1)

    with interrupt.handling():
        try:
            with reaped():
                Beside(forever, sys.argv[1]).result(timeout=None)
        except interrupt.Interrupted as stop:
            sys.exit(stop.exit_code)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_second_cores_copy_is_stopped_and_reaped(tmp_path: Path, signum: int) -> None:
    marker = tmp_path / "child.pid"
    proc = subprocess.Popen([sys.executable, "-c", BESIDE, str(marker)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _wait_for(lambda: marker.exists() and marker.read_text(), proc)
        child = int(marker.read_text())
        proc.send_signal(signum)
        assert proc.wait(GENEROUS) == 128 + signum
    finally:
        proc.kill()
    assert not Path(f"/proc/{child}").exists()     # neither running nor a zombie


# -- the commands

def _wait_for(ready: Any, proc: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + GENEROUS
    while not ready():
        assert proc.poll() is None, "the command ended before it was signalled"
        assert time.monotonic() < deadline, "no marker"
        time.sleep(0.05)


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                found.add(int(entry))
    return found


def _signalled_while_solving(args: list[str], signum: int, cwd: Path) -> tuple[int, str, str, set[int]]:
    """Run `stowplan ARGS -v`, send `signum` once HiGHS's log shows a solve; exit code, stdout,
    stderr, and the children it had then."""
    err_path, out_path = cwd / "stderr.txt", cwd / "stdout.txt"
    with open(err_path, "wb") as err, open(out_path, "wb") as out:
        proc = subprocess.Popen([*STOWPLAN, *args, "-v"], cwd=cwd, stdout=out, stderr=err,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            _wait_for(lambda: b"Solving" in err_path.read_bytes(), proc)
            children = _children(proc.pid)
            proc.send_signal(signum)
            code = proc.wait(GENEROUS)
        finally:
            proc.kill()
    return code, out_path.read_text(), err_path.read_text(), children


def _one_line(stderr: str, signum: int) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("stowplan: ")]
    assert len(lines) == 1, lines
    assert "Traceback" not in stderr
    how = "terminated" if signum == signal.SIGTERM else "interrupted"
    assert lines[0].startswith(f"stowplan: {how} ({signal.Signals(signum).name})"), lines[0]
    return lines[0]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_what_if_stops_and_writes_nothing(tmp_path: Path, signum: int) -> None:
    code, stdout, stderr, children = _signalled_while_solving(
        ["what-if", str(META), "--time-limit", "600", "--out", "plan.yaml", "--metrics", "m.prom",
         "--picture", "p.svg"], signum, tmp_path)
    assert code == 128 + signum, stderr[-2000:]
    assert _one_line(stderr, signum).endswith("; nothing written")
    assert stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stderr.txt", "stdout.txt"]   # no temp file either
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)


def test_what_if_to_stdout_prints_nothing(tmp_path: Path) -> None:
    code, stdout, stderr, _ = _signalled_while_solving(["what-if", str(META), "--time-limit", "600", "-o", "json"],
                                                      signal.SIGINT, tmp_path)
    assert code == 130 and stdout == "", stderr[-2000:]
    _one_line(stderr, signal.SIGINT)


def test_explain_stops(tmp_path: Path) -> None:
    code, stdout, stderr, children = _signalled_while_solving(
        ["explain", "team-ads/ads-ablation-00376", str(META), "--time-limit", "600", "-o", "json"],
        signal.SIGINT, tmp_path)
    assert code == 130, stderr[-2000:]
    assert _one_line(stderr, signal.SIGINT).endswith("; nothing written")
    assert stdout == ""
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)


# -- the outputs: all or none

def write_plan_and_metrics(folder: Path) -> None:
    """What the CLI's outputs do for a plan and its metrics file: stage both, then commit."""
    from planner.cli import outputs as writing

    with writing.Outputs() as outputs:
        outputs.file(str(folder / "plan.yaml"), "plan\n")
        outputs.file(str(folder / "m.prom"), "metrics\n", field="--metrics")
        outputs.commit()


def test_a_signal_while_staging_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.cli import outputs as writing

    real = os.fsync
    fsyncs = [0]

    def fsync(fd: int) -> None:
        fsyncs[0] += 1
        if fsyncs[0] == 2:                       # the second file: the first is staged already
            os.kill(os.getpid(), signal.SIGINT)
        real(fd)

    monkeypatch.setattr(writing.os, "fsync", fsync)
    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted) as caught:
            write_plan_and_metrics(tmp_path)
    assert caught.value.note == "" and list(tmp_path.iterdir()) == []


def test_a_signal_during_the_final_renames_is_honoured_once_they_are_done(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.cli import outputs as writing

    real = os.replace

    def replace(src: str, dst: str) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        real(src, dst)

    monkeypatch.setattr(writing.os, "replace", replace)
    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted) as caught:
            write_plan_and_metrics(tmp_path)
    assert caught.value.exit_code == 143 and "output is complete" in caught.value.note
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.prom", "plan.yaml"]
    assert (tmp_path / "plan.yaml").read_text() == "plan\n"


def test_a_solver_process_pulp_started_is_ended_too(tmp_path: Path) -> None:
    """PuLP runs CBC as a process of its own; SIGTERM sent to stowplan alone (as kill or a
    CronJob's deadline does) must not leave it running."""
    proc = subprocess.Popen([*STOWPLAN, "what-if", str(META), "--solver", "pulp:CBC", "--time-limit", "600",
                             "--out", "plan.yaml"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        def solver() -> set[int]:
            found = set()
            for pid in _children(proc.pid):
                try:
                    if "cbc" in Path(f"/proc/{pid}/comm").read_text(errors="replace"):
                        found.add(pid)
                except OSError:
                    pass     # ended meanwhile
            return found

        _wait_for(solver, proc)
        started = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=GENEROUS)
    finally:
        proc.kill()
    assert proc.returncode == 143, stderr[-2000:]
    _one_line(stderr, signal.SIGTERM)
    assert not any(Path(f"/proc/{pid}").exists() for pid in started)
    assert list(tmp_path.iterdir()) == []


# -- apply's writes, several at a time

def test_writes_in_flight_finish_and_no_other_starts() -> None:
    """Applier._each with 4 workers: the signal comes while 4 writes are in flight (each
    holds until it has come); those finish, and none of the other 96 starts (each asks
    first, as Kube.write does)."""
    import threading

    from planner.cluster.apply import Applier

    class NoKube:
        dry_run = False

    applier = Applier(NoKube(), flavors={}, planned_versions={}, workers=4)   # type: ignore[arg-type]
    started: list[int] = []
    finished: list[int] = []
    lock = threading.Lock()

    def write(item: int) -> None:
        interrupt.check()
        with lock:
            started.append(item)
            if len(started) == 4:
                os.kill(os.getpid(), signal.SIGINT)   # a real signal, delivered to the main thread
        deadline = time.monotonic() + GENEROUS
        while not interrupt.requested() and time.monotonic() < deadline:
            time.sleep(0.01)
        with lock:
            finished.append(item)

    with interrupt.handling():
        with pytest.raises(interrupt.Interrupted):
            applier._each(write, list(range(100)))
    assert sorted(started) == [0, 1, 2, 3] and sorted(finished) == [0, 1, 2, 3]
