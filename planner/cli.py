"""The `stowplan` command: a thin click layer over read -> plan -> render -> write.

The only place that turns errors into exit codes (planner/errors.py lists them).
Every flag also reads an environment variable (STOWPLAN_<COMMAND>_<FLAG>), so a
CronJob configures everything through env. Nothing here decides anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import datetime as dt
import functools
import math
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from importlib import metadata
from typing import Any, Callable, Iterator, Sequence, TypeVar, cast

import click

from models import Plan, Problem, Snapshot
from planner import interrupt, progress
from planner.errors import InputError, StowplanError, VerificationError
from planner.output import (FORMATS, explain_limits_help, render, render_explanation, render_explanations,
                             render_what_if)
from planner.terminal import printable, printable_lines

_INTERNAL = "unexpected internal error (STOWPLAN_DEBUG=1 shows the traceback)"
_API = "cluster API error (unreachable, forbidden, ...); no credentials are shown"
_UNVERIFIED = "the plan failed independent verification; nothing is written"
# What each command's exit codes mean: its --help prints its own block from here, and
# tests/test_exit_codes.py provokes the codes a test can reach without a cluster.
EXIT_CODES: dict[str, tuple[tuple[int, str], ...]] = {
    "what-if": ((0, "plan written (warnings, if any, on stderr)"), (1, _INTERNAL),
                (2, "bad input: unreadable or malformed file, malformed policy, bad flag, or any reported "
                    "problem under --strict; nothing is written"),
                (3, _UNVERIFIED)),
    "snapshot": ((0, "snapshot written (warnings, if any, on stderr)"), (1, _INTERNAL),
                 (2, "bad input: a bad flag, an unreadable or malformed --config or --policy file; "
                     "nothing is written"),
                 (4, _API)),
    "plan": ((0, "plan shown, or saved with --out (warnings, if any, on stderr)"), (1, _INTERNAL),
             (2, "bad input: a bad flag, an unreadable or malformed --config or --policy file; "
                 "nothing is written"),
             (3, _UNVERIFIED), (4, _API),
             (7, "with --worker or --multikueue-config: a worker cluster could not be reached (each is named); "
                 "nothing is written")),
    "explain": ((0, "explanation written (warnings, if any, on stderr)"), (1, _INTERNAL),
                (2, "bad input: a bad flag, an unreadable or malformed snapshot, or WORKLOAD not in it"),
                (3, "the plan it explains failed independent verification; nothing is written"),
                (4, "with --live: " + _API)),
    "apply": ((0, "plan applied (objects skipped as conflicts, if any, named on stderr)"), (1, _INTERNAL),
              (2, "bad input: a bad flag, an unreadable or malformed --plan, --config or --policy file; "
                  "nothing applied"),
              (3, "the plan failed independent verification; nothing applied"), (4, _API),
              (5, "another planner holds the Lease; nothing applied"),
              (6, "the saved plan is stale (an object it touches changed); nothing applied"),
              (7, "with --worker: a worker cluster could not be reached; the rest is applied, and what that "
                  "worker should get waits, suspended on the manager, for the next cycle"),
              (8, "Kueue's controller manager is active on the cluster (its leader Lease held and renewed, or "
                  "its Deployment ready); nothing applied (override: --allow-kueue-controller)")),
    "generate": ((0, "snapshot written"), (1, _INTERNAL),
                 (2, "bad argument (the flag is named) or an unwritable --out; nothing is written")),
    "simulate": ((0, "simulation written"), (1, _INTERNAL),
                 (2, "bad input: unreadable or malformed snapshot or trace (the message names the file, line "
                     "and field), malformed policy, bad flag; nothing is written"),
                 (3, "a cycle's plan failed independent verification; nothing is written")),
    "rbac": ((0, "RBAC objects written to stdout"), (1, _INTERNAL),
             (2, "bad input: an unreadable or malformed --policy file (the message names the field); "
                 "nothing is written")),
    "trace": ((0, "trace written"), (1, _INTERNAL),
              (2, "bad input: unreadable or malformed history files, bad flag; nothing is written")),
}
# Every command stops on SIGINT and SIGTERM (planner/interrupt.py), writing nothing.
_SIGNALS = ((130, "stopped by Ctrl-C (SIGINT); nothing is written"),
            (143, "stopped by SIGTERM (kill, a CronJob's deadline); nothing is written"))
for _command in EXIT_CODES:
    EXIT_CODES[_command] += _SIGNALS if _command != "apply" else tuple(
        (code, meaning.replace("nothing is written", "the write in flight finishes, no other starts; the line "
                                                     "says how many were made")) for code, meaning in _SIGNALS)


def exit_codes_help(command: str) -> str:
    """The `Exit codes:` block of `command`'s --help, from EXIT_CODES (kept as laid out: \\b)."""
    import textwrap

    lines = ["\b", "Exit codes:"]
    for code, meaning in EXIT_CODES[command]:
        lines += textwrap.wrap(meaning, 76, initial_indent=f"  {code}  ", subsequent_indent="     ")
    return "\n".join(lines)


EXIT_CODES_HELP = exit_codes_help("what-if")

F = TypeVar("F", bound=Callable[..., Any])


class StowplanFailure(click.ClickException):
    """A StowplanError on its way out: `Error: ...` on stderr and its exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click types exit_code a ClassVar, yet reads it per instance


def _debug() -> bool:
    return os.environ.get("STOWPLAN_DEBUG", "") not in ("", "0", "false", "no")


def _exits(command: F) -> F:
    """Map Stowplan's errors to their exit codes and anything unexpected to exit 1; Ctrl-C
    and SIGTERM stop the command (planner.interrupt): exit 130 / 143, one line on stderr."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with interrupt.handling():
            return _run_command(command, *args, **kwargs)

    return cast(F, wrapper)


def _run_command(command: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    before = children()
    try:
        return command(*args, **kwargs)
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except (interrupt.Interrupted, KeyboardInterrupt) as stop:
        end_children(children() - before)
        raise click.exceptions.Exit(_stopped(stop)) from None
    except StowplanError as error:
        if _debug():
            traceback.print_exc()
        # names from the input may hold control characters: shown escaped, on the lines
        # the message itself chose (a verification error lists one violation a line)
        text = printable_lines(error) if isinstance(error, VerificationError) else printable(error)
        raise StowplanFailure(text, error.exit_code) from error
    except Exception as error:  # noqa: BLE001 - the last line of defence
        if _debug():
            traceback.print_exc()
        hint = "" if _debug() else " (run with STOWPLAN_DEBUG=1 for the traceback)"
        raise StowplanFailure(printable(f"internal error: {type(error).__name__}: {error}{hint}"), 1) from error


def _stopped(stop: BaseException) -> int:
    """The one line saying a signal stopped the command, and its exit code (130, 143)."""
    signum = stop.signum if isinstance(stop, interrupt.Interrupted) else int(signal.SIGINT)
    how = "terminated" if signum == signal.SIGTERM else "interrupted"
    note = getattr(stop, "note", "") or "nothing written"
    click.echo(f"stowplan: {how} ({signal.Signals(signum).name}); {note}", err=True)
    return 128 + signum


def children() -> set[int]:
    """This process's child processes, running or zombies (Linux: read from /proc; elsewhere none)."""
    me = str(os.getpid()).encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    found = set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                fields = stat_file.read().rsplit(b")", 1)[1].split()   # after the name, which may hold anything
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == me:
            found.add(int(entry))
    return found


def end_children(pids: set[int]) -> None:
    """Kill and wait for these children, so that none outlives a stopped command, running or a
    zombie. The cycle stops its own copies (planner.beside); this is for what a library
    started and was waiting for when Ctrl-C ended the wait (PuLP's solver process)."""
    for pid in sorted(pids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


# ---------------------------------------------------------------- parameter types

class SolverType(click.ParamType[str]):
    """milp | greedy | pulp:NAME, where NAME is a solver PuLP can run on this machine."""

    name = "milp|greedy|pulp:NAME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        if text in ("milp", "greedy"):
            return text
        if text.startswith("pulp:") and text[len("pulp:"):].strip():
            name = text[len("pulp:"):].strip()
            problem = pulp_solver_problem(name)
            if problem:
                self.fail(problem, param, ctx)
            return "pulp:" + name
        self.fail(f"{value!r} is not a solver: use milp, greedy or pulp:NAME (e.g. pulp:CBC)", param, ctx)


def pulp_solver_problem(name: str) -> str:
    """Why `pulp:NAME` cannot run here ("" when it can), naming the solvers that can."""
    import pulp

    from planner.milp import PulpBackend

    resolved = PulpBackend.ALIASES.get(name.upper(), name)
    available = pulp.listSolvers(onlyAvailable=True)
    if resolved in available:
        return ""
    short = {full: alias for alias, full in PulpBackend.ALIASES.items()}
    listed = ", ".join(f"pulp:{short.get(s, s)}" for s in available) or "none"
    why = "is not installed here" if resolved in pulp.listSolvers() else "is not a solver PuLP knows"
    return f"pulp:{printable(name)} {why}; solvers available here: milp, greedy, {listed}"


class WorkerType(click.ParamType[tuple[str, str]]):
    """NAME=KUBECONFIG: a worker cluster of a multi-cluster plan or apply (NAME as the plan's `cluster`)."""

    name = "NAME=KUBECONFIG"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, str]:
        import re

        if isinstance(value, tuple):
            return value
        name, sep, path = str(value).partition("=")
        if not sep or not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name):
            self.fail(f"{printable(value)}: give NAME=KUBECONFIG, NAME a DNS label (the plan's cluster name)",
                      param, ctx)
        if not os.path.isfile(path):
            self.fail(f"{printable(value)}: kubeconfig {printable(path)} is not a readable file", param, ctx)
        return name, path


class CheckedFloat(click.ParamType[float]):
    """A number checked by one function, the same for a flag, its environment variable and
    the policy (nan, inf and out-of-range values are refused, with why)."""

    def __init__(self, name: str, check: Callable[[object], float]):
        self.name = name
        self.check = check

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return self.check(value)
        except ValueError as error:
            self.fail(f"{printable(value)}: {error}", param, ctx)


def _time_limit_type() -> CheckedFloat:
    from planner.snapshot.policy import check_time_limit

    return CheckedFloat("SECONDS", check_time_limit)


def _gap_type() -> CheckedFloat:
    from planner.snapshot.policy import check_gap

    return CheckedFloat("GAP", check_gap)


def _bounded(low: float, high: float) -> Callable[[object], float]:
    def check(value: Any) -> float:   # a flag's text, or a default
        number = float(value)
        if not math.isfinite(number) or not low <= number <= high:
            raise ValueError(f"must be a finite number from {low:g} to {high:g}")
        return number
    return check


class SizeType(click.ParamType[int]):
    """A size in bytes, plain or with a Kubernetes suffix: 2Gi, 500Mi, 10M."""

    name = "BYTES"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from planner.k8s.quantity import QuantityError, parse_quantity

        try:
            size = parse_quantity(str(value).strip(), "bytes")
        except QuantityError as error:
            self.fail(f"{printable(value)}: {error}", param, ctx)
        if not 1 <= size <= 2**50:
            self.fail(f"{printable(value)}: must be from 1 byte to 1Pi", param, ctx)
        return size


class RFC3339Type(click.ParamType[dt.datetime]):
    """An RFC 3339 timestamp with a zone, e.g. 2026-12-01T09:30:00Z."""

    name = "RFC3339"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dt.datetime:
        if isinstance(value, dt.datetime):
            return value
        text = str(value).strip()
        try:
            parsed = dt.datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            self.fail(f"{value!r} is not an RFC 3339 time (e.g. 2026-12-01T09:30:00Z)", param, ctx)
        if parsed.tzinfo is None:
            self.fail(f"{value!r} has no time zone: add Z or an offset such as +01:00", param, ctx)
        return parsed


# ---------------------------------------------------------------- I/O helpers

def _progress_enabled(quiet: bool) -> bool:
    return not quiet and _isatty(sys.stderr)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


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


FILE_FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def out_format(output: str | None, out: str | None, formats: Sequence[str], default: str) -> str:
    """The format to write: -o when given, else the one --out's extension names (.json,
    .yaml/.yml), else `default`. An --out FILE whose extension names another format than
    -o is refused (exit 2): `--out plan.json -o yaml` would write YAML into a .json file."""
    named = FILE_FORMATS.get(os.path.splitext(out or "")[1].lower()) if out not in (None, "-") else None
    if output is not None:
        if named is not None and named != output and named in formats:
            raise InputError(f"--out {out} names {named} but -o is {output}: give one of them, or make them agree",
                             field="--out")
        return output
    return named if named is not None and named in formats else default


def check_distinct(out: str | None, **others: str | None) -> None:
    """--out and --metrics (or --picture) on one path would overwrite each other: refused."""
    if out in (None, "-"):
        return
    assert out is not None
    for flag, path in others.items():
        if path is not None and os.path.realpath(path) == os.path.realpath(out):
            raise InputError(f"--out and --{flag.replace('_', '-')} name the same file {out!r}", field="--out")


def check_writable(path: str, field: str = "--out") -> None:
    """The plan's folder exists and takes new files (the temp file of write_atomically),
    and `path` is a regular file if it exists: replacing /dev/null (or a link to a
    device, a FIFO, a folder) with a regular file would break whatever it was."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"cannot write the plan: folder {folder} does not exist", file=path, field=field)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the plan: folder {folder} is not writable", file=path, field=field)
    _regular_or_absent(path, field)


def _regular_or_absent(path: str, field: str = "--out") -> None:
    from planner.snapshot.loader import file_kind

    try:
        mode = os.stat(path).st_mode     # follows a symbolic link: its target is what would be lost
    except FileNotFoundError:
        return
    except OSError as error:
        raise InputError(f"cannot write there: {error.strerror}", file=path, field=field) from None
    if not stat.S_ISREG(mode):
        stdout = " (or - for stdout)" if field == "--out" else ""
        raise InputError(f"is {file_kind(mode)}: the output must be a regular file{stdout}", file=path, field=field)


AFTER_WRITING = "it came during the final write, which was finished: the output is complete"


def write_stdout(text: str) -> None:
    """The plan on stdout, whole: Ctrl-C meanwhile stops the command once it is written. A
    reader that went away (`| head`) ends us quietly with exit 1. A closed stdout (`>&-`)
    or a full one (/dev/full, a full disk) is exit 2, one line."""
    if sys.stdout is None:      # Python's stdout when fd 1 was closed at start
        raise InputError("stdout is closed: nothing was written (give --out FILE)", field="stdout")
    try:
        with interrupt.deferred():
            click.echo(text, nl=False)
            sys.stdout.flush()
    except interrupt.Interrupted as stop:
        stop.note = stop.note or AFTER_WRITING
        raise
    except BrokenPipeError:
        _stdout_to_devnull()
        raise click.exceptions.Exit(1) from None
    except (OSError, ValueError) as error:    # ENOSPC, EBADF; ValueError: a closed file object
        _stdout_to_devnull()
        reason = getattr(error, "strerror", None) or str(error)
        raise InputError(f"cannot write to stdout: {reason}; the output is incomplete", field="stdout") from None


def _stdout_to_devnull() -> None:
    """What is still buffered is dropped at exit, not retried (a second error, exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def write_atomically(path: str, text: str, mode: int | None = None, field: str = "--out") -> None:
    """Write the whole file or nothing: a temp file in the same folder, then os.replace.

    `mode`: the file's permissions (default: an existing file's, else 0666 minus the umask).
    A failed write (a full disk, a quota) is an InputError naming the file, and leaves
    neither the temp file nor a partial target; so do Ctrl-C and SIGTERM (exit 130 / 143)."""
    with Outputs() as outputs:
        outputs.file(path, text, mode, field)
        outputs.commit()


class Outputs:
    """A command's outputs, written together at its end, all or none: each file first to a
    temp file beside it (an error, Ctrl-C or SIGTERM meanwhile: every temp file removed,
    nothing written), then, with signals deferred (planner.interrupt), all renamed into
    place and the text for stdout written. A signal during that last step stops the command
    once it is done, and says so. Use as `with Outputs() as out: ...; out.commit()`."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, str, str]] = []     # (temp, path, field)
        self._stdout: str | None = None

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, *exc: Any) -> None:
        for temp, _, _ in self._staged:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        self._staged = []

    def stdout(self, text: str) -> None:
        self._stdout = text

    def file(self, path: str, text: str, mode: int | None = None, field: str = "--out") -> None:
        """Stage `text` for `path` (see write_atomically for `mode`)."""
        folder = os.path.dirname(os.path.abspath(path))
        _regular_or_absent(path, field)
        if mode is None:
            try:
                mode = os.stat(path).st_mode & 0o777
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
        try:
            fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        except OSError as error:
            raise InputError(f"cannot write: {error.strerror}", file=path, field=field) from None
        self._staged.append((temp, path, field))
        try:
            os.fchmod(fd, mode)     # before any byte is written: a 0600 file is never readable by others
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
        except OSError as error:
            raise InputError(f"cannot write: {error.strerror or error}; nothing was written", file=path,
                             field=field) from None

    def staged(self, temp: str, path: str, field: str) -> None:
        """A file already written whole at `temp` (beside `path`), to be renamed with the others."""
        self._staged.append((temp, path, field))

    def commit(self) -> None:
        interrupt.check()     # a signal before this point: nothing is written
        try:
            with interrupt.deferred():
                while self._staged:
                    temp, path, field = self._staged[0]
                    try:
                        os.replace(temp, path)
                    except OSError as error:
                        raise InputError(f"cannot write: {error.strerror or error}; nothing was written",
                                         file=path, field=field) from None
                    self._staged.pop(0)
                if self._stdout is not None:
                    write_stdout(self._stdout)
        except interrupt.Interrupted as stop:
            stop.note = AFTER_WRITING
            raise


def _report_problems(snapshot: Snapshot, extra: Sequence[str] = (), needs: Sequence[str] = ("Node", "ClusterQueue", "workload")) -> int:
    """Each problem once on stderr, in the reader's order, then what the snapshot lacks
    of `needs` and `extra`; returns how many (--strict fails on any)."""
    lacking = [m for m in _missing(snapshot) if any(f": no {kind} was read" in m for kind in needs)]
    problems = [str(p) for p in dict.fromkeys(snapshot.problems)] + lacking + list(extra)
    for problem in problems:
        click.echo(f"warning: {printable(problem)}", err=True)
    return len(problems)


def _warn_early_now(snapshot: Snapshot, now: dt.datetime | None) -> int:
    """--now before every workload was created: every wait reads 0, nothing has aged and no
    work is lost; likely a mistyped date, so said (once, on stderr; an error under --strict)."""
    created = [w.created_at for w in snapshot.workloads if w.created_at]
    if now is None or not created or now.timestamp() >= min(created):
        return 0
    first = dt.datetime.fromtimestamp(min(created), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    click.echo(f"warning: --now {now.astimezone(dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ} is before every workload's "
               f"creation time (the first: {first}): waits read as 0, nothing has aged", err=True)
    return 1


def _say_assumed_configuration(snapshot: Snapshot) -> None:
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


def _versions() -> str:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    python = ".".join(str(n) for n in sys.version_info[:3])
    return (
        f"stowplan {version('stowplan')} (python {python}, highspy {version('highspy')}, "
        f"pulp {version('pulp')}, click {version('click')}, pyyaml {version('pyyaml')})"
    )


# ---------------------------------------------------------------- commands

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _table_options(command: F) -> F:
    """The table's filters (-o table / -o wide): which rows a person sees."""
    for option in reversed([
        click.option("--namespace", "namespace", metavar="NS", show_envvar=True,
                     help="Table: only the workloads of namespace NS (the headline stays the whole plan's)."),
        click.option("--queue", "queue", metavar="Q", show_envvar=True,
                     help="Table: only the workloads of ClusterQueue or LocalQueue Q."),
        click.option("--summary-only", "summary_only", is_flag=True, show_envvar=True,
                     help="Table: the headline, counts and summary, no workload rows."),
    ]):
        command = option(command)
    return command


def table_view(namespace: str | None, queue: str | None, summary_only: bool, time_limit: float | None,
               to_stdout: bool = True) -> Any:
    """What the table shows: the filters, the terminal's width and colour (a terminal only,
    NO_COLOR honoured; off a terminal, or into --out, $COLUMNS, else 120 columns)."""
    from planner.table import DEFAULT_WIDTH, View

    tty = to_stdout and _isatty(sys.stdout)
    width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns if tty else 0
    if not width:
        try:
            width = int(os.environ.get("COLUMNS", "")) or DEFAULT_WIDTH
        except ValueError:
            width = DEFAULT_WIDTH
    color = tty and os.environ.get("NO_COLOR", "") == "" and os.environ.get("TERM") != "dumb"
    return View(namespace=namespace, queue=queue, summary_only=summary_only, width=width, color=color,
                time_limit=time_limit)


def _metrics_option(command: F) -> F:
    return click.option("--metrics", "metrics", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
                        help="Also write the cycle's metrics to FILE in Prometheus text format (atomically), "
                             "e.g. for node_exporter's textfile collector.")(command)


class PushgatewayType(click.ParamType[str]):
    name = "URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from planner.promtext import check_pushgateway

        try:
            return check_pushgateway(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


def write_metrics(path: str | None, push_url: str | None, plan: Plan, queues: Any,
                  say: Callable[[str], None], outputs: "Outputs | None" = None, **extra: Any) -> None:
    """--metrics FILE and --pushgateway URL: the cycle's metrics (planner.promtext); the file
    staged with the command's other `outputs` where given. A failed push is a warning: the
    cycle itself is done."""
    if path is None and push_url is None:
        return
    from planner import promtext

    registry = promtext.registry_for(plan, queues, **extra)
    if path is not None:
        if outputs is None:
            write_atomically(path, promtext.text(registry), field="--metrics")
        else:
            outputs.file(path, promtext.text(registry), field="--metrics")
        say(f"wrote metrics to {path}")
    if push_url is not None:
        try:
            promtext.push(push_url, registry)
            say(f"pushed metrics to {promtext.redacted(push_url)}")
        except OSError as error:
            click.echo(f"warning: {printable(str(error))}", err=True)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_versions())
        ctx.exit()


@click.group(context_settings=CONTEXT)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print Stowplan's version and those of its solver libraries, and exit (as `stowplan version`).")
def cli() -> None:
    """Stowplan: batch admission planning for Kubernetes with Kueue's semantics.

    Decides which pending workloads start, where every pod goes and which running
    workloads are evicted, all at once, as one mixed-integer program (HiGHS),
    checked by an independent verifier before anything is written.

    Every flag can also be set through an environment variable, named
    STOWPLAN_<COMMAND>_<FLAG> (shown in each command's --help).
    """


@cli.command("what-if", context_settings=CONTEXT, epilog=EXIT_CODES_HELP)
@click.argument("snapshots", metavar="SNAPSHOT...", nargs=-1, required=False,
                type=click.Path(exists=True, dir_okay=True, readable=True, allow_dash=True))
@click.option("--cluster", "clusters", metavar="NAME=SNAPSHOT", multiple=True, show_envvar=True,
              help="Plan across MultiKueue worker clusters: one snapshot per worker, in the "
                   "MultiKueueConfig's order (repeat the flag); replaces SNAPSHOT. Each admission "
                   "says its cluster; a workload's pods are all on one cluster (docs/multicluster.md).")
@click.option("--manager", "manager", metavar="SNAPSHOT", show_envvar=True,
              help="With --cluster: the MultiKueue manager's snapshot (its workloads and ClusterQueues' "
                   "quota). Default: the first --cluster's snapshot.")
@click.option("--policy", "policy", metavar="FILE", show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="PlannerPolicy YAML (stowplan.io/v1alpha1) to use instead of one in the snapshot.")
@click.option("-o", "--output", "output", type=click.Choice(FORMATS), show_envvar=True,
              help="Output format (wide: the table with every flavor and node, and the running work). "
                   "Default: the format --out's extension names (.json, .yaml/.yml), else table when stdout "
                   "is a terminal, else yaml.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the plan to FILE (atomically: all or nothing) instead of stdout; an -o its extension "
                   "contradicts, or the path of --metrics or --picture, is refused.")
@click.option("--solver", type=SolverType(), default="milp", metavar="milp|greedy|pulp:NAME",
              show_default=True, show_envvar=True,
              help="milp (HiGHS), greedy (Kueue-like baseline) or pulp:NAME (any solver PuLP drives).")
@click.option("--time-limit", "time_limit", metavar="SECONDS", show_envvar=True, type=_time_limit_type(),
              help="Time limit in seconds for the whole cycle (reading the snapshot, greedy, "
                   "start, model, solve, verify), above 0 and at most a week. Default: the policy's (20).")
@click.option("--gap", "gap", metavar="GAP", show_envvar=True, type=_gap_type(),
              help="Relative MIP gap each priority stage stops at, 0 to 1 (0.01 = 1%; the preemption-cost and "
              "tie-breaker stages stop at this or 0.5%, the larger). Default: the policy's (0.001).")
@click.option("--now", "now", type=RFC3339Type(), show_envvar=True,
              help="Planning time for waiting, aging and lost work. Default: the snapshot's "
                   "stowplan.io/snapshot-time, else its newest timestamp.")
@click.option("--strict", is_flag=True, show_envvar=True,
              help="Treat every reported input problem as an error (exit 2, nothing written).")
@click.option("--max-file-size", "max_file_size", metavar="BYTES", show_envvar=True, type=SizeType(),
              default="512Mi", show_default=True,
              help="Refuse (exit 2) any input file larger than this, checked before reading it.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True,
              help="No progress lines (warnings and errors still go to stderr).")
@click.option("-v", "--verbose", is_flag=True, show_envvar=True,
              help="Show the solvers' own output (HiGHS's banner and log, CBC's) on stderr.")
@_metrics_option
@click.option("--picture", "picture", metavar="FILE.svg|FILE.png", show_envvar=True, type=click.Path(dir_okay=False),
              help="Also draw the plan: the topology as a grid (blocks, racks, hosts; racks only above 2,048 "
                   "hosts), each host's GPUs (cores where it has none) coloured by team (ClusterQueue) and "
                   "shaded by priority, this plan's admissions hatched, evictions marked with a red x, "
                   "migrations as arrows from -> to, free racks and blocks outlined; the legend lists only "
                   "what is drawn. In SVG each cell has a title (its host and what fills it) a viewer shows "
                   "on hover; a PNG keeps the picture's title in its metadata.")
@click.option("--picture-before", "picture_before", metavar="FILE.svg|FILE.png", show_envvar=True,
              type=click.Path(dir_okay=False),
              help="Also draw the cluster before the plan, the same way (with --picture: a before/after pair).")
@click.option("--add-nodes", "add_nodes", metavar="SPEC", show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="Capacity what-if: SPEC is a YAML file of node templates (labels, taints, allocatable, "
                   "a cost each; per: rack for whole racks or blocks). Answers the least-cost units that "
                   "admit every target more nodes can admit (a target its ClusterQueue's quota blocks is "
                   "named as such), and shows the plan with them.")
@click.option("--priority", "min_priority", metavar="P", type=int, show_envvar=True,
              help="With --add-nodes: the targets are the pending workloads at priority P or above "
                   "(default: every pending workload).")
@click.option("--workloads", "workload_names", metavar="NAMES", show_envvar=True,
              help="With --add-nodes: the targets are these pending workloads (comma-separated NAME or NAMESPACE/NAME).")
@click.option("--remove-nodes", "remove_nodes", metavar="SELECTOR", show_envvar=True,
              help="Drain what-if: plan without the nodes this label selector matches, parsed as kubectl -l "
                   "parses it (k=v, k==v, k!=v, 'k in (a,b)', 'k notin (a)', k, !k, comma-separated; a "
                   "malformed one exits 2); their running workloads wait again, and the answer says where "
                   "each goes or why it waits. A selector matching no node is a warning (--strict: exit 2).")
@_table_options
@_exits
def what_if(
    snapshots: Sequence[str],
    clusters: Sequence[str],
    manager: str | None,
    policy: str | None,
    output: str | None,
    out: str | None,
    solver: str,
    time_limit: float | None,
    gap: float | None,
    now: dt.datetime | None,
    strict: bool,
    max_file_size: int,
    quiet: bool,
    verbose: bool,
    metrics: str | None = None,
    picture: str | None = None,
    picture_before: str | None = None,
    add_nodes: str | None = None,
    min_priority: int | None = None,
    workload_names: str | None = None,
    remove_nodes: str | None = None,
    namespace: str | None = None,
    queue: str | None = None,
    summary_only: bool = False,
) -> None:
    """Plan a snapshot offline: what would start, where, and what would be evicted.

    SNAPSHOT is Kubernetes objects as `kubectl get -o yaml` prints them: a
    `kind: List`, a stream of YAML documents, or a folder of such files (- reads
    stdin); several are read as one snapshot. Nothing touches a cluster: this is
    how a platform team asks "what happens if..." (a new quota, a bigger job, a
    lost rack). Only regular files are read, each at most --max-file-size.

    Input problems that affect only some objects (an unknown LocalQueue, a
    ClusterQueue naming a missing flavor, an unparsable request) are reported
    once on stderr as "warning: FILE: KIND/NAMESPACE/NAME: FIELD: MESSAGE" and
    the affected workloads wait with that reason; --strict makes them errors.

    Take the snapshot with `stowplan snapshot --out snap.yaml`: it lists every
    kind Stowplan reads, Kueue's kueue-manager-config ConfigMap (fair sharing,
    waitForPodsReady) included, and skips kinds the server does not serve. A
    hand-made `kubectl get` recipe must list every kind too (docs/snapshots.md:
    "Taking a snapshot"); a snapshot without the ConfigMap is planned with Kueue's default
    Configuration, and a warning on stderr says so.

    \b
    Examples:
      stowplan snapshot --out snap.yaml
      stowplan what-if snap.yaml
      stowplan what-if snap.yaml --policy policy.yaml --time-limit 60 --out plan.json
      STOWPLAN_WHAT_IF_SOLVER=greedy stowplan what-if snapshots/
      stowplan what-if snap.yaml --add-nodes racks.yaml --priority 100
      stowplan what-if snap.yaml --remove-nodes example.com/rack=r7
      stowplan what-if --cluster east=east.yaml --cluster west=west.yaml --manager mgr.yaml
    """
    if clusters or manager is not None:
        if snapshots:
            raise InputError("give SNAPSHOT or --cluster NAME=SNAPSHOT, not both", field="--cluster")
        if any(v is not None for v in (add_nodes, remove_nodes, picture, picture_before, metrics)):
            raise InputError("--add-nodes, --remove-nodes, --picture, --picture-before and --metrics plan one "
                             "cluster; not with --cluster", field="--cluster")
        _what_if_fleet(clusters, manager, policy, output, out, solver, time_limit, gap, now, strict,
                       max_file_size, quiet, verbose, table_view(namespace, queue, summary_only, time_limit,
                                                                 out in (None, "-")))
        return
    if not snapshots:
        raise InputError("give a SNAPSHOT (or --cluster NAME=SNAPSHOT per worker cluster)", field="SNAPSHOT")
    from planner.cycle import plan_snapshot
    from planner.snapshot import read_snapshot
    from planner.snapshot.loader import Limits

    say = _progress(quiet)
    _solver_log(verbose)
    from planner.snapshot.loader import refuse_overwriting

    refuse_overwriting([("--out", out), ("--metrics", metrics), ("--picture", picture),
                        ("--picture-before", picture_before)], [*snapshots, policy, add_nodes])
    to_stdout = out in (None, "-")
    fmt = out_format(output, out, FORMATS, default="table" if to_stdout and _isatty(sys.stdout) else "yaml")
    check_distinct(out, metrics=metrics, picture=picture, picture_before=picture_before)
    if not to_stdout:
        assert out is not None
        check_writable(out)  # fail before a long solve, not after it
    if metrics is not None:
        check_writable(metrics, "--metrics")
    if picture is not None:
        _check_picture(picture)
    if picture_before is not None:
        _check_picture(picture_before, "--picture-before")
        if picture is not None and os.path.realpath(picture) == os.path.realpath(picture_before):
            raise InputError("names the file --picture names: one picture would overwrite the other",
                             file=picture_before, field="--picture-before")
    if add_nodes is not None and remove_nodes is not None:
        raise InputError("give --add-nodes or --remove-nodes, not both", field="--remove-nodes")
    if add_nodes is None and (min_priority is not None or workload_names is not None):
        raise InputError("--priority and --workloads choose the targets of --add-nodes", field="--add-nodes")
    if min_priority is not None and workload_names is not None:
        raise InputError("give --priority or --workloads, not both", field="--workloads")
    templates = None
    selector = None
    if add_nodes is not None:
        from planner.snapshot.node_templates import read_templates

        templates = read_templates(add_nodes)   # a bad SPEC fails before the snapshot is read
    if remove_nodes is not None:
        from planner.capacity_plan import parse_selector

        selector = parse_selector(remove_nodes)
    started = time.monotonic()
    say(f"reading {', '.join(snapshots)}")
    snapshot = read_snapshot(list(snapshots), policy_file=policy, now=now.timestamp() if now else None,
                             limits=Limits(max_file_bytes=max_file_size))
    extra: list[str] = []
    if selector is not None:
        from planner.capacity_plan import drained_nodes

        if not drained_nodes(snapshot, selector):
            extra.append(f"--remove-nodes: {remove_nodes!r} matches no node of the snapshot's "
                         f"{len(snapshot.nodes)}: nothing is drained")
    problems = _report_problems(snapshot, extra) + _warn_early_now(snapshot, now)
    _say_assumed_configuration(snapshot)
    if strict and problems:
        raise InputError(f"{problems} input problem(s) reported above and --strict is set; no plan written")
    read_seconds = time.monotonic() - started
    say(f"read {snapshot.object_count} objects, {len(snapshot.workloads)} workloads, "
        f"{len(snapshot.nodes)} nodes in {read_seconds:.2f}s; planning with {solver}")

    answer: dict[str, object] | None = None
    lines: list[str] = []
    with stdout_to_stderr(discard=not verbose), say.planning(f"planning with {solver}"):
        if templates is None and selector is None:
            from planner.provisioning import plan_cycle

            plan = plan_cycle(snapshot, solver=solver, time_limit=time_limit, gap=gap, read_seconds=read_seconds)
        else:
            from planner import capacity_plan

            def planner(snap: Snapshot) -> Plan:
                return plan_snapshot(snap, solver=solver, time_limit=time_limit, gap=gap, read_seconds=read_seconds)

            if templates is not None:
                names = [n.strip() for n in (workload_names or "").split(",") if n.strip()]
                if workload_names is not None and not names:
                    raise InputError("names no workload", field="--workloads")
                targets = capacity_plan.select_targets(snapshot, min_priority, names)
                say(f"sizing {len(templates)} node templates for {len(targets)} target workloads")
                added = capacity_plan.plan_additions(snapshot, templates, targets, planner)
                plan = added.plan
                answer = capacity_plan.capacity_to_dict(added, templates)
                lines = capacity_plan.capacity_lines(added, templates)
            else:
                assert selector is not None
                drained = capacity_plan.plan_drain(snapshot, selector, planner)
                plan = drained.plan
                answer = capacity_plan.drain_to_dict(drained)
                lines = capacity_plan.drain_lines(drained)
    plan = replace(plan, solver=replace(plan.solver, peak_rss_mib=peak_rss_mib()))
    say(_outcome(plan))

    view = table_view(namespace, queue, summary_only, time_limit, to_stdout)
    text = render(plan, fmt, snapshot, view) if answer is None else render_what_if(plan, fmt, answer, lines, snapshot, view)
    from planner.promtext import queues_of

    done: list[str] = []
    with Outputs() as outputs:     # the plan, its metrics and pictures: all written, or none
        emit(text, None if to_stdout else out, done.append, outputs)
        write_metrics(metrics, None, plan, queues_of(snapshot), done.append, outputs)
        if picture is not None:
            drawn = time.monotonic()
            mode = _draw(outputs, snapshot, plan, picture, "--picture")
            done.append(f"drew {picture} (one cell per {mode[:-1]}) in {time.monotonic() - drawn:.2f}s")
        if picture_before is not None:
            _draw(outputs, snapshot, plan, picture_before, "--picture-before", before=True)
            done.append(f"drew {picture_before}")
        outputs.commit()
    for line in done:
        say(line)


def parse_clusters(clusters: Sequence[str], manager: str | None) -> list[tuple[str, str]]:
    """--cluster NAME=SNAPSHOT values -> (name, path), checked before anything is read."""
    out: list[tuple[str, str]] = []
    for value in clusters:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise InputError(f"{value!r} is not NAME=SNAPSHOT", field="--cluster")
        if any(name == seen for seen, _ in out):
            raise InputError(f"names cluster {name!r} twice", field="--cluster")
        if path != "-" and not os.path.exists(path):
            raise InputError(f"cluster {name}: no such file or folder", file=path, field="--cluster")
        out.append((name, path))
    if not out:
        raise InputError("--manager plans a fleet: give its workers with --cluster NAME=SNAPSHOT", field="--cluster")
    if manager is not None and manager != "-" and not os.path.exists(manager):
        raise InputError("no such file or folder", file=manager, field="--manager")
    return out


def _for_manager(snapshot: Snapshot) -> Snapshot:
    """The manager's problems without those its workers decide: its flavors have no
    Topology, so a workload's topology levels are checked on each worker instead."""
    def worker_decides(p: Problem) -> bool:
        return "topology" in p.field and "not in the Topology" in p.message or "not all in the Topology" in p.message
    return replace(snapshot, problems=tuple(p for p in snapshot.problems if not worker_decides(p)))


def _what_if_fleet(clusters: Sequence[str], manager: str | None, policy: str | None, output: str | None,
                   out: str | None, solver: str, time_limit: float | None, gap: float | None,
                   now: dt.datetime | None, strict: bool, max_file_size: int, quiet: bool, verbose: bool,
                   view: Any) -> None:
    """what-if --cluster: read each worker's snapshot and the manager's, plan the fleet."""
    from planner.snapshot import read_snapshot
    from planner.snapshot.loader import Limits

    say = _progress(quiet)
    _solver_log(verbose)
    named = parse_clusters(clusters, manager)
    to_stdout = out in (None, "-")
    fmt = out_format(output, out, FORMATS, default="table" if to_stdout and _isatty(sys.stdout) else "yaml")
    if not to_stdout:
        assert out is not None
        check_writable(out)

    def read(paths: list[str]) -> Snapshot:
        return read_snapshot(paths, policy_file=policy, now=now.timestamp() if now else None,
                             limits=Limits(max_file_bytes=max_file_size))

    started = time.monotonic()
    workers: list[tuple[str, Snapshot]] = []
    for name, path in named:
        say(f"reading cluster {name}: {path}")
        workers.append((name, read([path])))
    boss = None
    if manager is not None:
        say(f"reading the manager: {manager}")
        boss = read([manager])
    problems = _fleet_problems(workers, boss)
    if strict and problems:
        raise InputError(f"{problems} input problem(s) reported above and --strict is set; no plan written")
    boss = workers[0][1] if boss is None else boss
    plan = _plan_fleet(workers, boss, solver, time_limit, gap, time.monotonic() - started, verbose, say)
    text = render(plan, fmt, boss, view)
    done: list[str] = []
    with Outputs() as outputs:
        emit(text, None if to_stdout else out, done.append, outputs)
        outputs.commit()
    for line in done:
        say(line)


def _fleet_problems(workers: Sequence[tuple[str, Snapshot]], manager: Snapshot | None) -> int:
    """Report the fleet's input problems (what-if --cluster, plan --worker): a worker's
    workloads come from the manager, so of a worker only its nodes and queues are needed;
    without a manager the first worker is the manager too."""
    problems = 0
    for i, (_, snap) in enumerate(workers):
        problems += _report_problems(snap, needs=("Node", "ClusterQueue") if manager is not None or i else
                                     ("Node", "ClusterQueue", "workload"))
    if manager is not None:
        problems += _report_problems(_for_manager(manager), needs=("ClusterQueue", "workload"))
    return problems


def _plan_fleet(workers: Sequence[tuple[str, Snapshot]], manager: Snapshot, solver: str, time_limit: float | None,
                gap: float | None, read_seconds: float, verbose: bool, say: "_Progress") -> Plan:
    """One plan over the worker clusters (planner.fleet.plan_fleet_cycle), the same for
    what-if --cluster and plan --worker."""
    from planner import fleet as fleet_module

    with stdout_to_stderr(discard=not verbose), say.planning(f"planning {len(workers)} clusters with {solver}"):
        result = fleet_module.plan_fleet_cycle(fleet_module.Fleet(tuple(workers), manager), solver, time_limit,
                                               gap, read_seconds)
    plan = replace(result.plan, solver=replace(result.plan.solver, peak_rss_mib=peak_rss_mib()))
    say(f"{_outcome(plan)} (chosen: {result.chosen})")
    return plan


def _draw(outputs: "Outputs", snapshot: Snapshot, plan: Plan, path: str, field: str, before: bool = False) -> str:
    """Draw the picture into a temp file beside `path`, renamed with the other outputs; the mode drawn."""
    from planner.picture import draw

    folder, name = os.path.split(os.path.abspath(path))
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=os.path.splitext(name)[1])
    except OSError as error:
        raise InputError(f"cannot write: {error.strerror}", file=path, field=field) from None
    os.close(fd)
    outputs.staged(temp, path, field)
    return draw(snapshot, plan, temp, before=before)


def _check_picture(path: str, field: str = "--picture") -> None:
    from planner.picture import check_path

    try:
        check_path(path)
    except ValueError as error:
        raise InputError(str(error), field=field) from None
    check_writable(path, field)


def emit(text: str, out: str | None, say: Callable[[str], None], outputs: "Outputs | None" = None) -> None:
    """Write `text` to stdout, or atomically to `out` (staged with the command's other
    `outputs` where given)."""
    if outputs is None:
        done: list[str] = []
        with Outputs() as alone:
            emit(text, out, done.append, alone)
            alone.commit()
        for line in done:
            say(line)
        return
    if out is None:
        outputs.stdout(text)
        return
    outputs.file(out, text)
    say(f"wrote {out}")


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


class _Progress:
    """Progress for a person at a terminal: lines on stderr drawn by rich, each search stage
    as it finishes (objective, bound, gap) under a spinner, explain --all's i/n as a bar.
    Nothing at all when stderr is not a terminal or with --quiet, so pipes, files, CronJob
    logs and tests see only warnings and errors there."""

    def __init__(self, quiet: bool):
        self.console: Any = None
        if _progress_enabled(quiet):
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


def _progress(quiet: bool) -> _Progress:
    return _Progress(quiet)


def _solver_log(verbose: bool) -> None:
    """HiGHS prints its banner and log only when asked (--verbose): solver chatter is not stderr's."""
    import planner.cluster.kube
    from planner.milp import show_solver_log

    show_solver_log(verbose)
    planner.cluster.kube.verbose = verbose   # an exec credential plugin's stderr, too


def _outcome(plan: Plan) -> str:
    s = plan.solver
    return (f"{s.method} {s.status}: {len(plan.admissions)} admitted, {len(plan.evictions)} evicted, "
            f"{len(plan.pending)} pending in {float(s.seconds.get('total', 0.0)):.2f}s")


# ---------------------------------------------------------------- live cluster



def _cluster_options(command: F, policy_help: str = "PlannerPolicy YAML (stowplan.io/v1alpha1).") -> F:
    """--kubeconfig, --context, --config, --policy: where the live commands read from."""
    options = [
        click.option("--kubeconfig", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
                     help="Kubeconfig to use. Default: $KUBECONFIG, ~/.kube/config, else the in-cluster "
                          "service account (the CronJob)."),
        click.option("--context", metavar="NAME", show_envvar=True, help="Kubeconfig context to use."),
        click.option("--config", "config", metavar="FILE", multiple=True, show_envvar=True,
                     type=click.Path(exists=True, dir_okay=True, readable=True),
                     help="YAML files or folders of Kueue objects (ClusterQueue, ResourceFlavor, ...), used when "
                          "the cluster does not serve Kueue's API; a PlannerPolicy in them is used too. Repeatable."),
        click.option("--policy", "policy", metavar="FILE", show_envvar=True,
                     type=click.Path(exists=True, dir_okay=False, readable=True), help=policy_help),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _worker_options(command: F, name: str = "worker", what: str = "") -> F:
    """--worker, --multikueue-config, --kueue-namespace: the worker clusters of a MultiKueue
    fleet, the same for `plan` (read and planned live) and `apply` (a saved plan dispatched);
    `name` is the Python name of --worker's value, `what` what the command does with them."""
    options = [
        click.option("--worker", name, metavar="NAME=KUBECONFIG", multiple=True, show_envvar=True,
                     type=WorkerType(),
                     help="A MultiKueue worker cluster, NAME as the plan's `cluster` (a DNS label); this cluster "
                          "(--kubeconfig/--context) is the manager. Repeatable, in the MultiKueueConfig's order. "
                          + what),
        click.option("--multikueue-config", "multikueue_config", metavar="NAME", show_envvar=True,
                     help="Take the worker clusters from this MultiKueueConfig on the manager: its "
                          "MultiKueueClusters and their kubeconfig Secrets, as MultiKueue does (a --worker of the "
                          "same name wins, in the config's place; the other --worker clusters follow it)."),
        click.option("--kueue-namespace", "kueue_namespace", metavar="NS", default="kueue-system",
                     show_default=True, show_envvar=True,
                     help="Where the MultiKueueClusters' kubeconfig Secrets are (Kueue's namespace)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def worker_kubes(manager: Any, workers: Sequence[tuple[str, str]], multikueue_config: str | None,
                 kueue_namespace: str, dry_run: bool = False) -> dict[str, Any]:
    """Worker name -> a Kube on it, in the MultiKueueConfig's order then --worker's; a --worker
    of a config's name takes its place."""
    kubes: dict[str, Any] = {}
    if multikueue_config:
        from planner.cluster.multikueue import workers_from_config

        kubes.update(workers_from_config(manager, multikueue_config, kueue_namespace, dry_run=dry_run))
    kubes.update({name: _kube(path, None, dry_run=dry_run) for name, path in workers})
    return kubes


def check_workers(workers: Sequence[tuple[str, str]]) -> None:
    names = [name for name, _ in workers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"worker {', '.join(twice)} named twice", field="--worker")


def _solver_options(command: F) -> F:
    options = [
        click.option("--solver", type=SolverType(), default="milp", metavar="milp|greedy|pulp:NAME",
                     show_default=True, show_envvar=True, help="milp (HiGHS), greedy or pulp:NAME."),
        click.option("--time-limit", "time_limit", metavar="SECONDS", show_envvar=True, type=_time_limit_type(),
                     help="Time limit for the whole cycle (reading the cluster included), above 0 and at most a "
                          "week. Default: the policy's (20)."),
        click.option("--gap", "gap", metavar="GAP", show_envvar=True, type=_gap_type(),
                     help="Relative MIP gap each priority stage stops at, 0 to 1 (0.01 = 1%; the "
                          "preemption-cost and tie-breaker stages stop at this or 0.5%, the larger). "
                          "Default: the policy's (0.001)."),
        click.option("-v", "--verbose", is_flag=True, show_envvar=True,
                     help="Show the solvers' own output (HiGHS's banner and log, CBC's) on stderr."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _write_status(kube: Any, namespace: str, plan: Plan, report: Any, say: Callable[[str], None]) -> None:
    """ConfigMap stowplan-status in the planner's namespace (planner.cluster.status); a
    failure is a warning: the cycle itself is done."""
    from planner.cluster.status import NAME, status_data, write_status

    try:
        write_status(kube, namespace, status_data(plan, report, time.time()))
        say(f"wrote ConfigMap {namespace}/{NAME}")
    except StowplanError as error:
        click.echo(f"warning: status ConfigMap {namespace}/{NAME} not written: {printable(str(error))}", err=True)


def _kube(kubeconfig: str | None, context: str | None, dry_run: bool = False) -> Any:
    from planner.cluster import Kube, connect

    return Kube(connect(kubeconfig, context), dry_run=dry_run)


@cli.command("snapshot", context_settings=CONTEXT, epilog=exit_codes_help("snapshot"))
@click.option("-o", "--output", "output", type=click.Choice(["yaml", "json"]), show_envvar=True,
              help="Output format, as kubectl's -o. Default: json for an --out FILE ending in .json, "
                   "else yaml; json on stdout.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the snapshot to FILE instead of stdout (a .json FILE with -o yaml is refused).")
@functools.partial(_cluster_options, policy_help="PlannerPolicy YAML (stowplan.io/v1alpha1), written into the "
                   "snapshot in place of any other, so that what-if plans with it.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@_exits
def snapshot_command(output: str | None, out: str | None, kubeconfig: str | None, context: str | None,
                     config: Sequence[str], policy: str | None, quiet: bool) -> None:
    """Read the live cluster into a snapshot file that `what-if` plans exactly as `plan` would.

    Lists every kind Stowplan reads (paginated), as one `kind: List` with a
    stowplan.io/snapshot-time annotation (the planning time). What planning never
    reads is left out: managedFields, annotations other than stowplan.io/* and
    kueue.x-k8s.io/*, and of each container all but name, image, resources and
    restartPolicy (no env, command, args or probes), and at any depth of any kind's
    spec its env, args, command, entrypoint, runtimeEnvYAML and rayStartParams. The
    file is written 0600.

    \b
    Examples:
      stowplan snapshot --out snap.json && stowplan what-if snap.json
      stowplan snapshot --config kueue-objects.yaml --out snap.yaml
      stowplan snapshot -o yaml | less
    """
    import json

    import yaml

    from planner.cluster import read_cluster
    from planner.cluster.reader import pruned
    from planner.snapshot.loader import refuse_overwriting

    say = _progress(quiet)
    refuse_overwriting([("--out", out)], [*config, policy, kubeconfig])
    fmt = out_format(output, out, ("yaml", "json"), default="json" if out in (None, "-") else "yaml")
    if out not in (None, "-"):
        assert out is not None
        check_writable(out)
    live = read_cluster(_kube(kubeconfig, context), config_files=config, policy_file=policy, say=say)
    _report_problems(live.snapshot)
    say(f"read {live.snapshot.object_count} objects in {live.seconds:.2f}s")
    document = with_policy(pruned(live.document), policy)
    if fmt == "json" and out not in (None, "-"):
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n"
    elif fmt == "yaml":
        text = yaml.dump(document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                         allow_unicode=True, width=4096)
    else:
        text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    if out in (None, "-"):
        write_stdout(text)
    else:
        assert out is not None
        write_atomically(out, text, mode=0o600)   # a snapshot describes the whole cluster: its owner's only
        say(f"wrote {out}")


def with_policy(document: dict[str, Any], policy: str | None) -> dict[str, Any]:
    """The snapshot with --policy's PlannerPolicy in place of any other (from --config), so that
    `what-if` of the file plans with the policy `plan --policy` would (read_cluster checked it)."""
    if policy is None:
        return document
    from planner.snapshot.loader import load
    from planner.snapshot.policy import is_policy

    (policy_object,) = [obj for _, obj in load([policy]).objects if is_policy(obj)]
    items = [item for item in document["items"] if not is_policy(item)]
    return {**document, "items": [*items, policy_object]}


@cli.command("plan", context_settings=CONTEXT, epilog=exit_codes_help("plan"))
@_cluster_options
@functools.partial(_worker_options, what="The manager and every worker are read live and planned as one fleet: "
                   "each admission says its cluster (docs: multicluster); --out saves it for `apply --plan FILE "
                   "--worker ...`.")
@_solver_options
@click.option("-o", "--output", "output", type=click.Choice(FORMATS), show_envvar=True,
              help="Output format (wide: the table with every flavor and node, and the running work). "
                   "Default: table on a terminal, else yaml.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Save the plan to FILE (yaml, or json for *.json; an -o the extension contradicts is "
                   "refused) with snapshot.resourceVersions, for `stowplan apply --plan FILE`.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines and no solver output.")
@_metrics_option
@_table_options
@_exits
def plan_command(kubeconfig: str | None, context: str | None, config: Sequence[str], policy: str | None,
                 solver: str, time_limit: float | None, gap: float | None, verbose: bool, output: str | None,
                 out: str | None, quiet: bool, metrics: str | None = None, namespace: str | None = None,
                 queue: str | None = None, summary_only: bool = False, worker: Sequence[tuple[str, str]] = (),
                 multikueue_config: str | None = None, kueue_namespace: str = "kueue-system") -> None:
    """Plan the live cluster and show the plan; nothing is written to the cluster.

    With --worker or --multikueue-config, this cluster is a MultiKueue manager: it and
    its worker clusters are read live and planned as one fleet, as `what-if --cluster`
    plans their snapshots.

    \b
    Examples:
      stowplan plan
      stowplan plan --out plan.yaml && stowplan apply --plan plan.yaml
      stowplan plan --worker east=east.kubeconfig --worker west=west.kubeconfig --out fleet.yaml
      stowplan apply --plan fleet.yaml --worker east=east.kubeconfig --worker west=west.kubeconfig
    """
    from planner.cluster import plan_live, resource_versions
    from planner.cluster.cycle import fingerprints
    from planner.cluster.planfile import render_saved

    say = _progress(quiet)
    from planner.snapshot.loader import refuse_overwriting

    refuse_overwriting([("--out", out), ("--metrics", metrics)],
                       [*config, policy, kubeconfig, *(path for _, path in worker)])
    if worker or multikueue_config:
        check_workers(worker)
        if metrics is not None:
            raise InputError("--metrics plans one cluster; not with --worker or --multikueue-config",
                             field="--metrics")
    fmt = out_format(output, out, FORMATS, default="table" if out in (None, "-") and _isatty(sys.stdout) else "yaml")
    check_distinct(out, metrics=metrics)
    if out not in (None, "-"):
        assert out is not None
        check_writable(out)
    if metrics is not None:
        check_writable(metrics, "--metrics")
    _solver_log(verbose)
    kube = _kube(kubeconfig, context)
    if worker or multikueue_config:
        _plan_fleet_live(kube, worker_kubes(kube, worker, multikueue_config, kueue_namespace), config, policy,
                         solver, time_limit, gap, verbose, fmt, out, say,
                         table_view(namespace, queue, summary_only, time_limit))
        return
    with stdout_to_stderr(discard=not verbose), say.planning(f"reading the cluster and planning with {solver}"):
        live, plan = plan_live(kube, config_files=config, policy_file=policy, solver=solver,
                               time_limit=time_limit, gap=gap, say=say)
    _report_problems(live.snapshot)
    say(_outcome(plan))
    from planner.promtext import queues_of

    done: list[str] = []
    with Outputs() as outputs:     # the plan and its metrics: both written, or neither
        if out in (None, "-"):
            outputs.stdout(render(plan, fmt, live.snapshot, table_view(namespace, queue, summary_only, time_limit)))
        else:
            assert out is not None
            fmt = fmt if fmt in ("yaml", "json") else "yaml"   # a saved plan is a document apply reads back
            outputs.file(out, render_saved(plan, resource_versions(plan, live), fmt, fingerprints(plan, live)))
            done.append(f"wrote {out}")
        write_metrics(metrics, None, plan, queues_of(live.snapshot), done.append, outputs)
        outputs.commit()
    for line in done:
        say(line)


def _plan_fleet_live(manager: Any, kubes: dict[str, Any], config: Sequence[str], policy: str | None, solver: str,
                     time_limit: float | None, gap: float | None, verbose: bool, fmt: str, out: str | None,
                     say: "_Progress", view: Any) -> None:
    """`plan --worker ...`: the manager and every worker read live, planned as one fleet
    (planner.fleet, as what-if --cluster), shown or saved for `apply --plan FILE --worker ...`."""
    from planner.cluster import read_cluster
    from planner.cluster.fleet_live import manager_versions, read_workers
    from planner.cluster.planfile import render_saved

    started = time.monotonic()
    say(f"reading the manager ({manager.host})")
    boss = read_cluster(manager, config_files=config, policy_file=policy, say=say)
    read = read_workers(kubes, policy_file=policy, say=say)
    _fleet_problems([(name, live.snapshot) for name, live in read], boss.snapshot)
    plan = _plan_fleet([(name, live.snapshot) for name, live in read], boss.snapshot, solver, time_limit, gap,
                       time.monotonic() - started, verbose, say)
    done: list[str] = []
    with Outputs() as outputs:
        if out in (None, "-"):
            outputs.stdout(render(plan, fmt, boss.snapshot, view))
        else:
            assert out is not None
            versions, prints = manager_versions(plan, boss)
            outputs.file(out, render_saved(plan, versions, fmt if fmt in ("yaml", "json") else "yaml", prints))
            done.append(f"wrote {out}")
        outputs.commit()
    for line in done:
        say(line)


@cli.command("explain", context_settings=CONTEXT, epilog=explain_limits_help() + "\n\n" + exit_codes_help("explain"))
@click.argument("workload", metavar="WORKLOAD", required=False)
@click.argument("snapshots", metavar="[SNAPSHOT...]", nargs=-1,
                type=click.Path(exists=True, dir_okay=True, readable=True, allow_dash=True))
@click.option("--all", "every", is_flag=True, show_envvar=True,
              help="Explain every workload the plan leaves waiting (no WORKLOAD), each up to its smallest "
                   "change; the plans of changed snapshots are shared between them.")
@click.option("--live", is_flag=True, show_envvar=True,
              help="Read the live cluster (as `stowplan plan` does) instead of SNAPSHOT files.")
@_cluster_options
@_solver_options
@click.option("--search-time-limit", "search_time_limit", metavar="SECONDS", show_envvar=True,
              type=_time_limit_type(), default=2.0, show_default=True,
              help="Time limit of each plan of a changed snapshot while searching for the smallest change "
                   "(the number of those plans is bounded: see Limits of the search below).")
@click.option("--now", "now", type=RFC3339Type(), show_envvar=True,
              help="Planning time (SNAPSHOT files only). Default: the snapshot's.")
@click.option("-o", "--output", "output", type=click.Choice([f for f in FORMATS if f != "wide"]), show_envvar=True,
              help="Output format. Default: table when stdout is a terminal, else yaml.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines and no solver output.")
@_exits
def explain_command(workload: str | None, snapshots: Sequence[str], every: bool, live: bool, kubeconfig: str | None,
                    context: str | None, config: Sequence[str], policy: str | None, solver: str,
                    time_limit: float | None, gap: float | None, verbose: bool, search_time_limit: float,
                    now: dt.datetime | None, output: str | None, quiet: bool) -> None:
    """Why one workload waits, with the numbers, and the smallest change that admits it.

    WORKLOAD is NAMESPACE/NAME or KIND/NAMESPACE/NAME (as plans print it). The
    snapshot (SNAPSHOT files as for what-if, or --live) is planned as what-if
    plans it; then for the workload: its state in the plan (admitted where,
    evicted or waiting, and why), its position in its LocalQueue and ClusterQueue,
    the quota of each flavor/resource it could use, the room at its required
    topology level, which running work the preemption rules protect from it and
    why, and what is ahead of it. The smallest changes are computed: more nominal
    quota, or more nodes like an eligible one, both (nodes and their worth of
    quota), or running work finishing, each amount tried by planning the changed
    snapshot again (--search-time-limit each). Where no such change can admit it
    (a resource its ClusterQueue does not cover, no eligible node), it says why.
    The search is bounded in work (the limits below): where a limit cuts it, the
    output says so, `stopped early: ...`.
    --all explains every waiting workload, each up to its smallest change.

    \b
    Examples:
      stowplan explain team-a/train-42 snap.yaml
      stowplan explain Job/team-a/train-42 --live -o json
      stowplan explain --all snap.yaml -o table
    """
    from planner.cycle import explain_all, explain_one

    say = _progress(quiet)
    _solver_log(verbose)
    if every and workload is not None:     # no WORKLOAD: the first argument is a snapshot
        if workload != "-" and not os.path.exists(workload):
            raise InputError(f"with --all there is no WORKLOAD; SNAPSHOT {workload!r} does not exist",
                             field="SNAPSHOT")
        snapshots, workload = (workload, *snapshots), None
    if workload is None and not every:
        raise InputError("give WORKLOAD (NAMESPACE/NAME or KIND/NAMESPACE/NAME), or --all", field="WORKLOAD")
    if live == bool(snapshots):
        raise InputError("give SNAPSHOT files or --live (one of them)", field="SNAPSHOT")
    started = time.monotonic()
    if live:
        from planner.cluster import read_cluster

        snapshot = read_cluster(_kube(kubeconfig, context), config_files=config, policy_file=policy,
                                say=say).snapshot
    else:
        from planner.snapshot import read_snapshot

        say(f"reading {', '.join(snapshots)}")
        snapshot = read_snapshot(list(snapshots), policy_file=policy, now=now.timestamp() if now else None)
        _say_assumed_configuration(snapshot)
    _report_problems(snapshot)
    _warn_early_now(snapshot, now)
    say(f"planning with {solver}, then searching for the smallest change ({search_time_limit:g}s a plan)")
    fmt = output or ("table" if _isatty(sys.stdout) else "yaml")
    if workload is None:
        with stdout_to_stderr(discard=not verbose), say.counting("explaining") as step:
            _, explanations = explain_all(snapshot, solver=solver, time_limit=time_limit, gap=gap,
                                          search_time_limit=search_time_limit,
                                          read_seconds=time.monotonic() - started,
                                          on_each=lambda i, n, ref: step(i, n, str(ref)))
        say(f"explained {len(explanations)} workloads")
        write_stdout(render_explanations(explanations, fmt))
        return
    with stdout_to_stderr(discard=not verbose), say.planning("planning, then re-planning each change", stages=False):
        explanation = explain_one(snapshot, workload, solver=solver, time_limit=time_limit, gap=gap,
                                  search_time_limit=search_time_limit, read_seconds=time.monotonic() - started)
    write_stdout(render_explanation(explanation, fmt))


@cli.command("apply", context_settings=CONTEXT, epilog=exit_codes_help("apply"))
@click.option("--plan", "plan", metavar="FILE", show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="Apply this saved plan (from `plan --out`) instead of planning now; refused (exit 6) if "
                   "anything it touches changed since.")
@click.option("--dry-run", "dry_run", is_flag=True, show_envvar=True,
              help="Server-side dry run (dryRun=All): every write is checked, nothing changes, no Lease.")
@functools.partial(_worker_options, name="workers_", what="Each Job of the saved plan (admissions with "
                   "`cluster: NAME`) is dispatched to its worker and kept in step (docs: dispatch). Needs --plan.")
@_cluster_options
@_solver_options
@click.option("--namespace", "namespace", default="stowplan-system", show_default=True, show_envvar=True,
              help="Namespace of the Lease that keeps two planners from applying at once.")
@click.option("--lease-name", "lease_name", default="stowplan-planner", show_default=True, show_envvar=True,
              help="Name of that Lease.")
@click.option("--lease-duration", "lease_duration", default=60, show_default=True, show_envvar=True,
              type=click.IntRange(min=1, max=86400), metavar="SECONDS",
              help="How long the Lease lasts; longer than a cycle.")
@click.option("--identity", "identity", show_envvar=True, metavar="NAME",
              help="Holder identity in the Lease. Default: hostname-pid.")
@click.option("--release-wait", "release_wait", default=5.0, show_default=True, show_envvar=True,
              type=CheckedFloat("SECONDS", _bounded(0, 3600)), metavar="SECONDS",
              help="How long to wait for admitted workloads' pods to release their gates; later pods are "
                   "released by the next cycle.")
@click.option("--workers", "workers", default=8, show_default=True, show_envvar=True,
              type=click.IntRange(min=1, max=64),
              metavar="N", help="Writes in flight at once (each still optimistic on its own object).")
@click.option("--allow-kueue-controller", "allow_kueue_controller", is_flag=True, show_envvar=True,
              help="Apply even while Kueue's own controller manager is active (its leader Lease held, or its "
                   "Deployment ready); logged on stderr. Two admitters undo each other's work: default refuses "
                   "(exit 8).")
@click.option("--pod-groups", "pod_groups", is_flag=True, show_envvar=True,
              help="Kubernetes' gang scheduling (Workload API, scheduling.k8s.io/v1alpha2, v1.36): for each "
                   "admitted Job whose template names spec.schedulingGroup.podGroupName, create that PodGroup "
                   "(a gang of the admitted pods, its required topology level as constraint) so kube-scheduler "
                   "binds all its pods or none. Needs the GenericWorkload and GangScheduling feature gates.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines and no solver output.")
@_metrics_option
@click.option("--pushgateway", "pushgateway", metavar="URL", show_envvar=True, type=PushgatewayType(),
              help="Push the cycle's metrics to this Prometheus Pushgateway (job=stowplan) after applying; "
                   "a failed push is a warning. Default: no push.")
@_exits
def apply_command(plan: str | None, dry_run: bool, workers_: Sequence[tuple[str, str]],
                  multikueue_config: str | None, kueue_namespace: str, kubeconfig: str | None, context: str | None,
                  config: Sequence[str], policy: str | None, solver: str, time_limit: float | None,
                  gap: float | None, verbose: bool, namespace: str, lease_name: str, lease_duration: int,
                  identity: str | None, release_wait: float, workers: int, quiet: bool,
                  allow_kueue_controller: bool = False,
                  metrics: str | None = None, pushgateway: str | None = None, pod_groups: bool = False) -> None:
    """Plan the live cluster and apply one cycle (or apply a saved plan).

    Takes the Lease, finishes what the last cycle started (gated pods), evicts,
    admits (one update per Job: node selector, tolerations, node affinity,
    scheduling gate, stowplan.io/assignment, unsuspend), releases the admitted
    pods' gates onto the planned nodes, and releases the Lease. Conflicting
    workloads are skipped and reported; the next cycle repairs them. The result
    is one line on stdout.

    \b
    Examples:
      stowplan apply
      stowplan apply --dry-run
      stowplan plan --out plan.yaml && stowplan apply --plan plan.yaml
    """
    from planner.cluster import apply_live

    say = _progress(quiet)
    if metrics is not None:
        check_writable(metrics, "--metrics")
    _solver_log(verbose)
    if workers_ or multikueue_config:
        return _dispatch(plan, dry_run, workers_, multikueue_config, kueue_namespace, kubeconfig, context,
                         namespace, lease_name, identity, lease_duration, release_wait, say)
    kube = _kube(kubeconfig, context, dry_run=dry_run)
    seen: list[Any] = []     # the snapshot the plan was made from (its workloads' ClusterQueues)
    try:
        with stdout_to_stderr(discard=not verbose), say.planning(f"planning with {solver}"):
            made, report = apply_live(kube, plan_file=plan, config_files=config, policy_file=policy,
                                      solver=solver, time_limit=time_limit, gap=gap, lease_namespace=namespace,
                                      lease_name=lease_name, identity=identity, lease_duration=lease_duration,
                                      release_wait=release_wait, workers=workers, pod_groups=pod_groups, say=say,
                                      allow_kueue_controller=allow_kueue_controller,
                                      warn=lambda line: click.echo(printable(line), err=True),
                                      before_apply=lambda live, _plan: seen.append(live))
        for ref, why in report.conflicts:
            click.echo(f"warning: skipped {printable(ref)}: {printable(why)} (the next cycle repairs it)", err=True)
        write_stdout(f"stowplan: {_outcome(made)}; {report.summary()} in {report.seconds.get('total', 0.0):.2f}s\n")
        _write_status(kube, namespace, made, report, say)
        from planner.promtext import queues_of

        write_metrics(metrics, pushgateway, made, queues_of(seen[0].snapshot) if seen else {}, say,
                      apply_seconds=report.seconds.get("apply"), conflicts=len(report.conflicts))
    except interrupt.Interrupted as stop:
        stop.note = stop.note or _stopped_applying(kube)
        raise


def _dispatch(plan: str | None, dry_run: bool, workers: Sequence[tuple[str, str]], multikueue_config: str | None,
              kueue_namespace: str, kubeconfig: str | None, context: str | None, namespace: str, lease_name: str,
              identity: str | None, lease_duration: int, release_wait: float, say: Callable[[str], None]) -> None:
    """`apply --worker ...`: this cluster is the manager; the plan's Jobs go to their workers."""
    from planner.cluster.dispatch import dispatch_live
    from planner.errors import WorkerUnreachableError

    check_workers(workers)
    if plan is None:
        raise InputError("--worker and --multikueue-config apply a saved multi-cluster plan: give --plan FILE (from "
                         "`plan --worker NAME=KUBECONFIG ... --out FILE` or `what-if --cluster NAME=SNAPSHOT ... "
                         "--out FILE`)", field="--plan")
    manager = _kube(kubeconfig, context, dry_run=dry_run)
    kubes = worker_kubes(manager, workers, multikueue_config, kueue_namespace, dry_run=dry_run)
    made, report = dispatch_live(manager, kubes, plan, lease_namespace=namespace, lease_name=lease_name,
                                 identity=identity, lease_duration=lease_duration, release_wait=release_wait,
                                 say=say)
    for ref, why in report.conflicts:
        click.echo(f"warning: skipped {printable(ref)}: {printable(why)} (the next cycle repairs it)", err=True)
    write_stdout(f"stowplan: {len(made.admissions)} admissions, {len(made.evictions)} evictions; "
                 f"{report.summary()} in {report.seconds.get('total', 0.0):.2f}s\n")
    if report.unreachable:
        raise WorkerUnreachableError(
            "unreachable worker clusters: " + "; ".join(f"{n}: {why}" for n, why in sorted(report.unreachable.items()))
            + ". Their workloads stay suspended on the manager (none lost); the next apply repairs them")


def _stopped_applying(kube: Any) -> str:
    """What an interrupted apply did to the cluster, for its one line."""
    if kube.writes == 0:
        return "nothing applied"
    dry = " (dry run: nothing changed)" if kube.dry_run else ""
    return (f"stopped after {kube.writes} write(s) to the cluster{dry}, none cut in half; "
            "the next cycle plans from there")


def _generate_help_epilog() -> str:
    """Presets and every GeneratorSpec field with its default, for `generate --help`."""
    from dataclasses import fields

    from planner.tools.generate import PRESETS, GeneratorSpec, format_value

    lines = ["\b", "Presets (fields not named keep the defaults below):"]
    for name, overrides in PRESETS.items():
        shape = "x".join(str(f) for f in overrides.get("fanout", GeneratorSpec().fanout))
        rest = ", ".join(f"{k}={format_value(v)}" for k, v in overrides.items() if k != "fanout")
        lines.append(f"  {name:<11} fanout={shape}, {rest}")
    lines += ["", "\b", "Parameters (--set KEY=VALUE; default in brackets):"]
    for f in fields(GeneratorSpec):
        lines.append(f"  {f.name} [{format_value(f.default)}]")
        lines.append(f"      {f.metadata['doc']}")
    from planner.tools.family import help_lines

    lines += ["", *help_lines()]
    lines += ["", exit_codes_help("generate")]
    return "\n".join(lines)


class _LazyEpilogCommand(click.Command):
    """Builds the long parameter list only when --help asks for it."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.epilog = _generate_help_epilog()
        super().format_epilog(ctx, formatter)


@cli.command("generate", cls=_LazyEpilogCommand, context_settings=CONTEXT)
@click.option("--preset", type=click.Choice(["S", "M", "L", "XL", "meta-like", "nvl72", "four-level", "fragmented", "fair",
                                            "family", "kueue-baseline"]),
              default="S", show_default=True, show_envvar=True,
              help="Starting shape: S/M/L/XL (512/4,096/16,384/65,536 nodes, the scale benchmark's) or a "
                   "topology fixture's (meta-like, nvl72, four-level); fair: four weighted teams with fair sharing on; "
                   "family: the seed draws the shape (issue 32's family; --set scale=S|M|L|XL|tiny); "
                   "kueue-baseline: Kueue's scheduler performance baseline (docs/simulate.md; --set scale=X).")
@click.option("--seed", type=int, show_envvar=True,
              help="Random seed (default: the preset's). The same seed and parameters give the same bytes.")
@click.option("--nodes", "nodes", metavar="AxBx...", show_envvar=True,
              help="Fan-out per topology level, coarse to fine, e.g. 4x16x16 = 4 blocks x 16 racks x 16 "
                   "nodes. With a different number of levels than the preset, the standard levels of "
                   "that depth are used (hostname; rack; block; datacenter).")
@click.option("--set", "settings", metavar="KEY=VALUE", multiple=True, show_envvar=True, envvar="STOWPLAN_GENERATE_SET",
              help="Set any parameter listed below (repeatable), e.g. --set pending=500 --set teams=12.")
@click.option("-o", "--output", "output", type=click.Choice(["json", "yaml"]), show_envvar=True,
              help="json (compact, the reader's fast path) or yaml (libyaml's CSafeDumper). Default: yaml for "
                   "an --out FILE ending in .yaml or .yml, else json.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the snapshot to FILE (atomically: all or nothing) instead of stdout.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@click.option("--trace", "trace", is_flag=True, show_envvar=True,
              help="Write a trace (JSON lines, docs/simulate.md) of jobs arriving on the preset's cluster "
                   "instead of a snapshot: the snapshot's job mix, Philly's durations, Poisson arrivals.")
@click.option("--hours", "hours", type=click.FloatRange(min=0, max=24 * 366, min_open=True), show_envvar=True,
              help="With --trace: the hours of arrivals (default 24).")
@click.option("--load", "load", type=click.FloatRange(min=0, max=100, min_open=True), show_envvar=True,
              help="With --trace: offered GPU-time per hour as a multiple of the cluster's GPUs (default 1).")
@click.option("--fleet", "fleet", metavar="DIR", show_envvar=True, type=click.Path(file_okay=False),
              help="Write a MultiKueue fleet instead (docs/multicluster.md): DIR/manager.yaml (the queues and "
                   "pending Jobs) and one snapshot per worker (east, west, north, south: different sizes and "
                   "GPU types), for what-if --cluster. Takes --seed.")
@_exits
def generate_command(preset: str, seed: int | None, nodes: str | None, settings: Sequence[str],
                     output: str | None, out: str | None, quiet: bool, trace: bool = False,
                     hours: float | None = None, load: float | None = None, fleet: str | None = None) -> None:
    """Generate a realistic synthetic snapshot (seeded, deterministic) to plan with what-if.

    A GPU cluster with a Kueue Topology (nodes labelled by level), flavors,
    ClusterQueues of several teams in a cohort (or a cohort tree of up to three levels) with
    borrowing and lending limits, WorkloadPriorityClasses, and Jobs and JobSets:
    small jobs after the Philly trace's size mix, multi-node training of 16 to
    2,048 GPUs with Kueue TAS annotations (required / preferred rack or block,
    slices, pod-set groups), pending ones suspended and running ones placed within
    node capacity and quota with stowplan.io/assignment, admitted-at and
    checkpointed-at. REFERENCE section 2 form, planning time in
    stowplan.io/snapshot-time.

    \b
    Examples:
      stowplan generate --preset M --out m.json && stowplan what-if m.json
      stowplan generate --preset meta-like --seed 7 --set pending=400 -o yaml --out meta.yaml
      stowplan generate --nodes 2x8x18 --set gpus_per_node=4 --set running=50 --out small.json
      stowplan generate --preset family --seed 7 --set scale=M --out family-7-m.json
      stowplan generate --preset S --trace --hours 4 --seed 7 --out trace.jsonl
      stowplan generate --fleet fleet/ --seed 7
    """
    if fleet is not None:
        _generate_fleet(fleet, 1 if seed is None else seed, _progress(quiet))
        return
    from planner.tools.generate import generate, generate_trace, to_json, to_json_lines, to_yaml
    from planner.tools.spec_options import spec_from_options

    say = _progress(quiet)
    output = out_format(output, out, ("json", "yaml"), default="json")
    to_stdout = out in (None, "-")
    if not to_stdout:
        assert out is not None
        check_writable(out)
    if not trace and (hours is not None or load is not None):
        raise InputError("--hours and --load shape a trace: give --trace too", field="--hours" if hours else "--load")
    if preset == "kueue-baseline":
        _kueue_baseline(trace, settings, out, say)
        return
    try:
        spec = spec_from_options(preset, seed, nodes, settings)
    except ValueError as error:
        raise InputError(str(error)) from None
    started = time.monotonic()
    if trace:
        hours = 24.0 if hours is None else hours
        lines = generate_trace(spec, hours, 1.0 if load is None else load)
        say(f"generated a trace of {len(lines) - 1} jobs over {hours:g} h for {spec.nodes} nodes "
            f"in {time.monotonic() - started:.2f}s")
        emit(to_json_lines(lines), None if to_stdout else out, say)
        return
    document = generate(spec)
    text = to_json(document) if output == "json" else to_yaml(document)
    meta = document["metadata"]["annotations"]["stowplan.io/generator"]
    say(f"generated {len(document['items'])} objects ({meta}) in {time.monotonic() - started:.2f}s")
    emit(text, None if to_stdout else out, say)


def _generate_fleet(folder: str, seed: int, say: Callable[[str], None]) -> None:
    """generate --fleet DIR: the manager's and each worker's snapshot, all written or none."""
    from planner.output import dump_yaml
    from planner.tools import fleet_gen

    if os.path.exists(folder) and not os.path.isdir(folder):
        raise InputError("is not a folder", file=folder, field="--fleet")
    os.makedirs(folder, exist_ok=True)
    files = fleet_gen.fleet(seed)
    with Outputs() as outputs:
        for stem, data in files.items():
            outputs.file(os.path.join(folder, f"{stem}.yaml"), dump_yaml(data), field="--fleet")
        outputs.commit()
    say(f"wrote {', '.join(f'{s}.yaml' for s in files)} in {folder}")


def _kueue_baseline(trace: bool, settings: Sequence[str], out: str | None, say: Callable[[str], None]) -> None:
    """`generate --preset kueue-baseline`: Kueue's performance baseline (planner/tools/kueue_perf.py),
    the cluster or (--trace) its 15,000 workloads; --set scale=X keeps that share of them,
    --set nodes_per_queue=N sizes the cluster."""
    from planner.tools.generate import to_json, to_json_lines
    from planner.tools.kueue_perf import baseline_snapshot, baseline_trace

    values = {"scale": 1.0, "nodes_per_queue": 1.0}
    for setting in settings:
        key, _, text = setting.partition("=")
        if key.strip() not in values:
            raise InputError(f"--set {setting!r}: kueue-baseline takes scale and nodes_per_queue", field="--set")
        try:
            values[key.strip()] = float(text)
        except ValueError:
            raise InputError(f"--set {setting!r}: not a number", field="--set") from None
    if not 0 < values["scale"] <= 1 or not 1 <= values["nodes_per_queue"] <= 64:
        raise InputError("scale: above 0 and at most 1; nodes_per_queue: 1 to 64", field="--set")
    text = to_json_lines(baseline_trace(values["scale"])) if trace else \
        to_json(baseline_snapshot(int(values["nodes_per_queue"])))
    emit(text, None if out in (None, "-") else out, say)


SIMULATE_EXIT_CODES_HELP = exit_codes_help("simulate")


@cli.command("simulate", context_settings=CONTEXT, epilog=SIMULATE_EXIT_CODES_HELP)
@click.argument("snapshots", metavar="SNAPSHOT...", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=True, readable=True))
@click.option("--trace", "trace", metavar="FILE", required=True, show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="The jobs to feed in (JSON lines, docs/simulate.md; `stowplan generate --trace` writes one).")
@click.option("--interval", "interval", type=click.FloatRange(min=1, max=86400), default=60.0, show_default=True,
              show_envvar=True, help="Simulated seconds between planning cycles (the CronJob's schedule).")
@click.option("--hours", "hours", type=click.FloatRange(min=0, max=24 * 366, min_open=True), show_envvar=True,
              help="Simulated hours. Default: the trace header's, else until the last arrival.")
@click.option("--solver", type=click.Choice(["milp", "greedy"]), default="milp", show_default=True,
              show_envvar=True, help="The planner under test: milp (Stowplan) or greedy (Kueue's way).")
@click.option("--compare", is_flag=True, show_envvar=True,
              help="Run both planners on the same trace and seed, side by side.")
@click.option("--drain", is_flag=True, show_envvar=True,
              help="After the trace's end, keep planning until every trace job has finished.")
@click.option("--policy", "policy", metavar="FILE", show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="PlannerPolicy YAML (stowplan.io/v1alpha1) to use instead of one in the snapshot.")
@click.option("--time-limit", "time_limit", metavar="SECONDS", show_envvar=True, type=_time_limit_type(),
              help="Each cycle's time limit in seconds (default: the policy's, 20). A short one keeps a long "
                   "simulation quick; each plan says how far its search got.")
@click.option("--gap", "gap", metavar="GAP", show_envvar=True, type=_gap_type(),
              help="Relative MIP gap each priority stage stops at, 0 to 1 (0.01 = 1%; the preemption-cost and "
              "tie-breaker stages stop at this or 0.5%, the larger). Default: the policy's (0.001).")
@click.option("--seed", "seed", type=int, default=0, show_default=True, show_envvar=True,
              help="Draws the durations of the snapshot's own workloads (no trace line describes them).")
@click.option("-o", "--output", "output", type=click.Choice(["table", "yaml", "json"]), show_envvar=True,
              help="Output format. Default: table when stdout is a terminal, else json.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the result to FILE (atomically) instead of stdout.")
@click.option("--picture", "picture", metavar="FILE.svg|FILE.png", show_envvar=True, type=click.Path(dir_okay=False),
              help="Also draw the time series: allocated GPUs, pending work, the largest free rack/block, "
                   "cycle seconds, one line per planner.")
@click.option("--max-file-size", "max_file_size", metavar="BYTES", show_envvar=True, type=SizeType(),
              default="2Gi", show_default=True, help="Refuse (exit 2) any input file larger than this.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@_exits
def simulate_command(snapshots: Sequence[str], trace: str, interval: float, hours: float | None, solver: str,
                     compare: bool, drain: bool, policy: str | None, time_limit: float | None, gap: float | None, seed: int,
                     output: str | None, out: str | None, picture: str | None, max_file_size: int,
                     quiet: bool) -> None:
    """Replay a trace of jobs through repeated planning cycles, in simulated time.

    Starts from SNAPSHOT (nodes, quotas, running and pending work), feeds the trace's
    jobs as they are submitted, runs a planning cycle every --interval simulated seconds
    with the planner under test (each plan verified), applies it (admitted work starts
    on its planned nodes, evicted work loses its progress since its last checkpoint and
    waits again, finished work frees its room) and reports what the users lived
    through: useful GPU utilisation, queueing delay per priority and ClusterQueue,
    admissions, evictions, lost GPU-hours, the largest free rack or block, and each
    cycle's seconds. Simulated time never reads the clock: the same inputs and --seed
    give the same decisions, except where a cycle's search stops at its time limit.

    \b
    Examples:
      stowplan generate --preset S -o json --out snap.json
      stowplan generate --preset S --trace --hours 4 --seed 7 --out trace.jsonl
      stowplan simulate snap.json --trace trace.jsonl --compare --time-limit 5
      stowplan simulate snap.json --trace trace.jsonl --compare -o json --out sim.json --picture sim.svg
    """
    from planner.cycle import plan_snapshot
    from planner.sim_output import check_picture, document, draw, render
    from planner.simulate import simulate
    from planner.snapshot.loader import Limits
    from planner.snapshot.trace import read_with_snapshot

    say = _progress(quiet)
    to_stdout = out in (None, "-")
    if not to_stdout:
        assert out is not None
        check_writable(out)
    if picture is not None:
        try:
            check_picture(picture)
        except ValueError as error:
            raise InputError(str(error), field="--picture") from None
        check_writable(picture, "--picture")
    say(f"reading {', '.join(snapshots)} and {trace}")
    snapshot, jobs = read_with_snapshot(trace, list(snapshots), policy_file=policy,
                                        limits=Limits(max_file_bytes=max_file_size))
    _report_problems(snapshot)
    solvers = ["milp", "greedy"] if compare else [solver]
    results: dict[str, dict[str, object]] = {}
    for name in solvers:
        say(f"simulating {len(jobs.arrivals)} trace jobs with {name}, a cycle every {interval:g} s")
        step = max(1, int(3600 // interval))

        def planner(snap: Snapshot, name: str = name) -> Plan:
            return plan_snapshot(snap, solver=name, time_limit=time_limit, gap=gap)

        def progress(done: int, total: int, name: str = name) -> None:
            if done % step == 0 or done == total:
                say(f"{name}: cycle {done} of {total}")

        with stdout_to_stderr(discard=True):
            result = simulate(snapshot, jobs, planner, interval=interval, seed=seed, solver=name, hours=hours,
                              drain=drain, progress=progress)
        results[name] = result.as_dict()
    doc = document(results, snapshot=",".join(snapshots), trace=trace, interval=interval, seed=seed,
                   hours=max(float(str(r["hours"])) for r in results.values()), time_limit=time_limit, gap=gap,
                   drain=drain)
    fmt = output or ("table" if to_stdout and _isatty(sys.stdout) else "json")
    emit(render(doc, fmt), None if to_stdout else out, say)
    if picture is not None:
        draw(doc, picture)
        say(f"drew {picture}")


@cli.command("trace", context_settings=CONTEXT, epilog=exit_codes_help("trace"))
@click.argument("snapshots", metavar="SNAPSHOT...", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=True, readable=True))
@click.option("--since", "since", type=RFC3339Type(), show_envvar=True,
              help="Only Jobs created at or after this time; submit times count from it. "
                   "Default: the first finished Job's creation.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the trace to FILE (atomically) instead of stdout.")
@click.option("--max-file-size", "max_file_size", metavar="BYTES", show_envvar=True, type=SizeType(),
              default="2Gi", show_default=True, help="Refuse (exit 2) any input file larger than this.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@_exits
def trace_command(snapshots: Sequence[str], since: dt.datetime | None, out: str | None, max_file_size: int,
                  quiet: bool) -> None:
    """Write a trace (docs/simulate.md) from a cluster's history: its finished Jobs.

    Every batch/v1 Job queued through Kueue whose status has a startTime and a
    completionTime becomes one line: submitted at its creation, running for
    completionTime - startTime, with its queue, priority class, pods, effective
    request and topology annotations. Others (failed, running, never started) are
    counted on stderr. Replay it with `stowplan simulate SNAPSHOT --trace FILE`.

    \b
    Examples:
      kubectl get jobs -A -o yaml > history.yaml
      stowplan trace history.yaml --since 2026-12-01T00:00:00Z --out week.jsonl
    """
    from planner.snapshot.history import trace_from_history
    from planner.snapshot.loader import Limits
    from planner.tools.generate import to_json_lines

    say = _progress(quiet)
    to_stdout = out in (None, "-")
    if not to_stdout:
        assert out is not None
        check_writable(out)
    history = trace_from_history(list(snapshots), since.timestamp() if since else None,
                                 Limits(max_file_bytes=max_file_size))
    for reason, count in sorted(history.skipped.items()):
        click.echo(printable(f"warning: left out {count} queued Job(s): {reason}"), err=True)
    say(f"{len(history.lines) - 1} finished Jobs in the trace")
    emit(to_json_lines(history.lines), None if to_stdout else out, say)


@cli.command("rbac", context_settings=CONTEXT, epilog=exit_codes_help("rbac"))
@click.option("--policy", "policy", metavar="FILE", required=True, show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="The PlannerPolicy whose spec.customKinds need rights.")
@click.option("--service-account", "service_account", default="stowplan-system/stowplan", show_default=True,
              show_envvar=True, metavar="NAMESPACE/NAME", help="Who gets the rights (the CronJob's ServiceAccount).")
@_exits
def rbac_command(policy: str, service_account: str) -> None:
    """Print the RBAC a cycle needs for the policy's in-house kinds (spec.customKinds).

    A ClusterRole `stowplan-planner-custom-kinds` (get, list and update on each custom
    kind's resource, as cronjob/rbac.yaml grants the built-in kinds; nothing else) and its
    ClusterRoleBinding, as YAML for `kubectl apply -f -`. With no custom kinds, an empty
    List.

    \b
    Examples:
      stowplan rbac --policy policy.yaml | kubectl apply -f -
    """
    import yaml

    from planner.kinds.custom import role_rules
    from planner.snapshot.policy import read_policy_file

    kinds = read_policy_file(policy).custom_kinds
    namespace, _, name = service_account.partition("/")
    if not namespace or not name:
        raise click.BadParameter(f"must be NAMESPACE/NAME, got {service_account!r}", param_hint="--service-account")
    objects: list[dict[str, Any]] = []
    if kinds:
        labels = {"app.kubernetes.io/name": "stowplan"}
        role = "stowplan-planner-custom-kinds"
        objects = [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": role, "labels": labels}, "rules": role_rules(kinds)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": role, "labels": labels},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        ]
    write_stdout(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False))


@cli.command("version", context_settings=CONTEXT)
def version() -> None:
    """Print Stowplan's version and those of its solver libraries."""
    click.echo(_versions())


from planner.tools.bench_command import bench_command  # noqa: E402 - the benchmark lives in its own module
cli.add_command(bench_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: `stowplan` (every flag also from STOWPLAN_* env)."""
    with interrupt.handling():     # from the start: reading the flags and importing count too
        try:
            cli.main(args=list(argv) if argv is not None else None, prog_name="stowplan",
                     auto_envvar_prefix="STOWPLAN")
        except interrupt.Interrupted as stop:     # outside a command's own handling (_exits): flags, bench
            stop.note = stop.note or "stopped where it was"
            sys.exit(_stopped(stop))


if __name__ == "__main__":
    main()


def _envvars_by_the_rule(group: click.Group) -> None:
    """Every option's environment variable is STOWPLAN_<COMMAND>_<FLAG>: the long flag, dashes
    as underscores, as the README documents. click's automatic name comes from the parameter's
    Python name instead (`--priority` was STOWPLAN_WHAT_IF_MIN_PRIORITY, `--all`
    STOWPLAN_EXPLAIN_EVERY); where that differs it stays readable as a second name, so
    configurations that use it keep working. Options that name their own variable keep it."""
    for name, command in group.commands.items():
        prefix = "STOWPLAN_" + name.upper().replace("-", "_")
        for param in command.params:
            if not isinstance(param, click.Option) or param.envvar is not None or param.name is None:
                continue
            longs = [o for o in param.opts if o.startswith("--")]
            if not longs:
                continue
            rule = f"{prefix}_{longs[0][2:].upper().replace('-', '_')}"
            old = f"{prefix}_{param.name.upper()}"
            param.envvar = rule if old == rule else [rule, old]


_envvars_by_the_rule(cli)
