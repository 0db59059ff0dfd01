"""What a command says on stderr for a person: progress at a terminal, the input's
problems and warnings, the outcome line; and the solvers' own output kept off stdout,
which carries only the command's output.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import datetime as dt
import os
import sys
from typing import Any, Callable, Iterator, Sequence

import click

from models import Plan, Snapshot
from planner.base import progress
from planner.base.terminal import printable


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def stdout_is_a_terminal() -> bool:
    """Whether stdout is a terminal: a table and colours for a person, else a document
    (every command asks here, so that a test makes it one terminal in one place)."""
    return isatty(sys.stdout)


def progress_enabled(quiet: bool) -> bool:
    return not quiet and isatty(sys.stderr)


class Progress:
    """Progress for a person at a terminal: lines on stderr drawn by rich, each search stage
    as it finishes (objective, bound, gap) under a spinner, explain --all's i/n as a bar.
    Nothing at all when stderr is not a terminal or with --quiet, so pipes, files, CronJob
    logs and tests see only warnings and errors there."""

    def __init__(self, quiet: bool):
        self.console: Any = None
        if progress_enabled(quiet):
            from rich.console import Console

            self.console = Console(stderr=True, highlight=False, soft_wrap=True)

    def __call__(self, message: str) -> None:
        if self.console is not None:
            self.console.print(f"stowplan: {printable(message)}", markup=False)

    def stage(self, done: "progress.StageDone") -> None:
        gap = "" if done.status in ("optimal", "kept") else f", gap {done.gap:.2%}"
        self(f"stage {done.name}: {done.status}, objective {done.objective:g} of bound {done.bound:g}{gap} "
             f"({done.seconds:.2f}s)")

    @contextlib.contextmanager
    def planning(self, what: str = "planning", stages: bool = True) -> Iterator[None]:
        """A spinner while it runs; the search's stages reported as they finish (not explain's
        many short re-plans: `stages` False)."""
        if self.console is None:
            yield
            return
        with contextlib.ExitStack() as stack:
            if stages:
                stack.enter_context(progress.listening(self.stage))
            stack.enter_context(self.console.status(printable(what)))
            yield

    @contextlib.contextmanager
    def counting(self, what: str) -> Iterator[Callable[[int, int, str], None]]:
        """A bar of `what` i of n; yields the callback that moves it (i, n, name)."""
        if self.console is None:
            yield lambda i, n, name: None
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn(printable(what)), BarColumn(), TimeElapsedColumn(),
                       TextColumn("{task.description}"), console=self.console, transient=True)
        task = bar.add_task("", total=None)

        def step(i: int, n: int, name: str) -> None:
            bar.update(task, total=n, completed=i - 1, description=f"{i}/{n} {printable(name)}")
            bar.refresh()    # each item takes seconds: show it when it starts, not at the next tick

        with bar:
            yield step


def solver_log(verbose: bool) -> None:
    """HiGHS prints its banner and log only when asked (--verbose): solver chatter is not stderr's."""
    import planner.cluster.kube
    from planner.milp import show_solver_log

    show_solver_log(verbose)
    planner.cluster.kube.verbose = verbose   # an exec credential plugin's stderr, too


def outcome(plan: Plan) -> str:
    s = plan.solver
    return (f"{s.method} {s.status}: {len(plan.admissions)} admitted, {len(plan.evictions)} evicted, "
            f"{len(plan.pending)} pending in {float(s.seconds.get('total', 0.0)):.2f}s")


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers, so a solver's printf lands where fd 1 points now."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        libc.fflush(None)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def stdout_to_stderr(discard: bool = False) -> Iterator[None]:
    """Send everything written to fd 1 (C++ solvers included) to stderr, or nowhere.

    stdout carries only the plan; HiGHS and CBC print from native code, so
    replacing sys.stdout alone would not keep them off it.
    """
    target = open(os.devnull, "w") if discard else sys.stderr
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = os.dup(1)
        target_fd = target.fileno() if discard else 2
        os.dup2(target_fd, 1)
    except (OSError, ValueError):
        saved = -1  # no usable fd 1 or 2: nothing native can reach stdout anyway
    try:
        with contextlib.redirect_stdout(target):
            yield
    finally:
        _flush_c_stdio()
        with contextlib.suppress(Exception):
            target.flush()
        if saved >= 0:
            os.dup2(saved, 1)
            os.close(saved)
        if discard:
            target.close()


def report_problems(snapshot: Snapshot, extra: Sequence[str] = (), needs: Sequence[str] = ("Node", "ClusterQueue", "workload")) -> int:
    """Each problem once on stderr, in the reader's order, then what the snapshot lacks
    of `needs` and `extra`; returns how many (--strict fails on any)."""
    lacking = [m for m in _missing(snapshot) if any(f": no {kind} was read" in m for kind in needs)]
    problems = [str(p) for p in dict.fromkeys(snapshot.problems)] + lacking + list(extra)
    for problem in problems:
        click.echo(f"warning: {printable(problem)}", err=True)
    return len(problems)


def warn_early_now(snapshot: Snapshot, now: dt.datetime | None) -> int:
    """--now before every workload was created: every wait reads 0, nothing has aged and no
    work is lost; likely a mistyped date, so said (once, on stderr; an error under --strict)."""
    created = [w.created_at for w in snapshot.workloads if w.created_at]
    if now is None or not created or now.timestamp() >= min(created):
        return 0
    first = dt.datetime.fromtimestamp(min(created), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    click.echo(f"warning: --now {now.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ} is before every workload's "
               f"creation time (the first: {first}): waits read as 0, nothing has aged", err=True)
    return 1


def say_assumed_configuration(snapshot: Snapshot) -> None:
    """A snapshot file without Kueue's ConfigMap plans with Kueue's defaults: say which
    Configuration that is, as fair sharing or waitForPodsReady silently off changes plans.
    Informational (a snapshot without it is valid): not counted under --strict."""
    config = snapshot.kueue_config
    if "ConfigMap" in config.source:
        return
    policy = " and the PlannerPolicy's kueueConfiguration" if "PlannerPolicy" in config.source else ""

    def on(value: bool) -> str:
        return "on" if value else "off"

    click.echo(f"warning: {printable(snapshot.source or 'snapshot')}: no ConfigMap kueue-system/kueue-manager-config "
               f"in the snapshot: planning with Kueue's default Configuration{policy} "
               f"(fairSharing {on(config.fair_sharing.enabled)}, "
               f"admissionFairSharing {on(config.admission_fair_sharing is not None)}, "
               f"waitForPodsReady {on(config.wait_for_pods_ready.enabled)}); "
               "`stowplan snapshot` includes it", err=True)


def _missing(snapshot: Snapshot) -> list[str]:
    """An empty snapshot plans "optimal" with nothing in it: say what was not read, as a
    wrong file, a kubectl recipe that left a kind out or a wrong context would leave it."""
    lacks = [("Node", "nothing can be placed", snapshot.nodes),
             ("ClusterQueue", "no workload can be admitted", snapshot.cluster_queues),
             ("workload", "there is nothing to plan", snapshot.workloads)]
    return [f"{snapshot.source or 'snapshot'}: no {kind} was read: {why}" for kind, why, have in lacks if not have]


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, in MiB.

    Linux's VmHWM: getrusage's ru_maxrss survives execve, so a process started
    from a big parent would report the parent's size at fork."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux

