"""The `stowplan` group: the click group every command joins, `main()` (the console
script), --version, and the one place that turns errors into exit codes (EXIT_CODES:
what each command's codes mean, printed in its --help).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import traceback
from importlib import metadata
from typing import Any, Callable, Sequence, cast

import click

from planner.base import interrupt
from planner.base.errors import StowplanError, VerificationError
from planner.base.terminal import printable, printable_lines
from planner.cli.options import CONTEXT, F
from planner.cli.outputs import write_stdout


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
# Every command stops on SIGINT and SIGTERM (planner/base/interrupt.py), writing nothing.
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


class StowplanFailure(click.ClickException):
    """A StowplanError on its way out: `Error: ...` on stderr and its exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click types exit_code a ClassVar, yet reads it per instance


MAX_USAGE_ERROR_CHARS = 400   # a flag's error echoes its value: 5,000 digits would fill a screen


def short_error(message: str, limit: int = MAX_USAGE_ERROR_CHARS) -> str:
    """An error's message on one line of at most about `limit` characters, every control
    character escaped: a value echoed whole (5,000 digits, a 100 KB name) is cut in the middle."""
    text = printable(message)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 100]}... ({len(text):,} characters) ...{text[-60:]}"


def _debug() -> bool:
    return os.environ.get("STOWPLAN_DEBUG", "") not in ("", "0", "false", "no")


def exits(command: F) -> F:
    """Map Stowplan's errors to their exit codes and anything unexpected to exit 1; Ctrl-C
    and SIGTERM stop the command (planner.base.interrupt): exit 130 / 143, one line on stderr."""

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
        text = printable_lines(error) if isinstance(error, VerificationError) else short_error(str(error), 1000)
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
    zombie. The cycle stops its own copies (planner.cycle.beside); this is for what a library
    started and was waiting for when Ctrl-C ended the wait (PuLP's solver process)."""
    for pid in sorted(pids):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def versions() -> str:
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


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        echo_versions()
        ctx.exit()


def echo_versions() -> None:
    """The versions on stdout as any output is written: a full or closed stdout is exit 2, one line."""
    try:
        write_stdout(versions() + "\n")
    except StowplanError as error:
        raise StowplanFailure(printable(error), error.exit_code) from None


class StowplanGroup(click.Group):
    """click's own types (int, Choice, ranges) echo a bad value whole in their error:
    the message is shortened and escaped here, once for every flag and argument."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            error.message = short_error(error.message)  # type: ignore[misc]  # click types it Final, yet shows it
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            error.message = short_error(error.message)  # type: ignore[misc]  # click types it Final, yet shows it
            raise


@click.group(cls=StowplanGroup, context_settings=CONTEXT)
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


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: `stowplan` (every flag also from STOWPLAN_* env)."""
    with interrupt.handling():     # from the start: reading the flags and importing count too
        try:
            cli.main(args=list(argv) if argv is not None else None, prog_name="stowplan",
                     auto_envvar_prefix="STOWPLAN")
        except interrupt.Interrupted as stop:     # outside a command's own handling (exits): flags, bench
            stop.note = stop.note or "stopped where it was"
            sys.exit(_stopped(stop))

