"""`stowplan trace`: a trace for `simulate` from a cluster's finished Jobs."""

from __future__ import annotations

import datetime as dt
from typing import Sequence

import click

from planner.base.terminal import printable
from planner.cli.console import Progress
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import CONTEXT, RFC3339Type, SizeType
from planner.cli.outputs import check_writable, emit


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
@exits
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

    say = Progress(quiet)
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

