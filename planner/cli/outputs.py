"""How a command writes: the format --out and -o choose, the checks before a long
run (--out writable, distinct from --metrics), stdout written whole, files written
atomically and all together or none (Outputs), the table's view, the metrics.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from typing import Any, Callable, Sequence

import click

from models import Plan
from planner.base import interrupt
from planner.base.errors import InputError
from planner.base.terminal import printable
from planner.cli.console import stdout_is_a_terminal


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
    reader that went away (`| head`), a closed stdout (`>&-`) or a full one (/dev/full, a
    full disk) is exit 2 with one line: the output is incomplete."""
    if sys.stdout is None:      # Python's stdout when fd 1 was closed at start
        raise InputError("stdout is closed: nothing was written (give --out FILE)", field="stdout")
    try:
        with interrupt.deferred():
            click.echo(text, nl=False)
            sys.stdout.flush()
    except interrupt.Interrupted as stop:
        stop.note = stop.note or AFTER_WRITING
        raise
    except (OSError, ValueError) as error:    # EPIPE, ENOSPC, EBADF; ValueError: a closed file object
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
    nothing written), then, with signals deferred (planner.base.interrupt), all renamed into
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


def table_view(namespace: str | None, queue: str | None, summary_only: bool, time_limit: float | None,
               to_stdout: bool = True) -> Any:
    """What the table shows: the filters, the terminal's width and colour (a terminal only,
    NO_COLOR honoured; off a terminal, or into --out, $COLUMNS, else 120 columns)."""
    from planner.output.table import DEFAULT_WIDTH, View

    tty = to_stdout and stdout_is_a_terminal()
    width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns if tty else 0
    if not width:
        try:
            width = int(os.environ.get("COLUMNS", "")) or DEFAULT_WIDTH
        except ValueError:
            width = DEFAULT_WIDTH
    color = tty and os.environ.get("NO_COLOR", "") == "" and os.environ.get("TERM") != "dumb"
    return View(namespace=namespace, queue=queue, summary_only=summary_only, width=width, color=color,
                time_limit=time_limit)


def write_metrics(path: str | None, push_url: str | None, plan: Plan, queues: Any,
                  say: Callable[[str], None], outputs: "Outputs | None" = None, **extra: Any) -> None:
    """--metrics FILE and --pushgateway URL: the cycle's metrics (planner.output.promtext); the file
    staged with the command's other `outputs` where given. A failed push is a warning: the
    cycle itself is done."""
    if path is None and push_url is None:
        return
    from planner.output import promtext
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

