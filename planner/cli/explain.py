"""`stowplan explain`: why a workload waits, and the smallest change that admits it."""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Sequence

import click

from planner.base.errors import InputError
from planner.cli.console import (
    Progress, report_problems, say_assumed_configuration, solver_log, stdout_is_a_terminal, stdout_to_stderr,
    warn_early_now,
)
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import (
    CONTEXT, RFC3339Type, cluster_options, connect_kube, solve_options, solver_options, time_limit_type,
)
from planner.cli.outputs import write_stdout
from planner.output.document import FORMATS, explain_limits_help, render_explanation, render_explanations


@cli.command("explain", context_settings=CONTEXT, epilog=explain_limits_help() + "\n\n" + exit_codes_help("explain"))
@click.argument("workload", metavar="WORKLOAD", required=False)
@click.argument("snapshots", metavar="[SNAPSHOT...]", nargs=-1,
                type=click.Path(exists=True, dir_okay=True, readable=True, allow_dash=True))
@click.option("--all", "every", is_flag=True, show_envvar=True,
              help="Explain every workload the plan leaves waiting (no WORKLOAD), each up to its smallest "
                   "change; the plans of changed snapshots are shared between them.")
@click.option("--live", is_flag=True, show_envvar=True,
              help="Read the live cluster (as `stowplan plan` does) instead of SNAPSHOT files.")
@cluster_options
@solver_options
@click.option("--search-time-limit", "search_time_limit", metavar="SECONDS", show_envvar=True,
              type=time_limit_type(), default=2.0, show_default=True,
              help="Time limit of each plan of a changed snapshot while searching for the smallest change "
                   "(the number of those plans is bounded: see Limits of the search below).")
@click.option("--now", "now", type=RFC3339Type(), show_envvar=True,
              help="Planning time (SNAPSHOT files only). Default: the snapshot's.")
@click.option("-o", "--output", "output", type=click.Choice([f for f in FORMATS if f != "wide"]), show_envvar=True,
              help="Output format. Default: table when stdout is a terminal, else yaml.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines and no solver output.")
@exits
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

    say = Progress(quiet)
    solver_log(verbose)
    options = solve_options(solver, time_limit, gap)
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

        snapshot = read_cluster(connect_kube(kubeconfig, context), config_files=config, policy_file=policy,
                                say=say).snapshot
    else:
        from planner.snapshot import read_snapshot

        say(f"reading {', '.join(snapshots)}")
        snapshot = read_snapshot(list(snapshots), policy_file=policy, now=now.timestamp() if now else None)
        say_assumed_configuration(snapshot)
    report_problems(snapshot)
    warn_early_now(snapshot, now)
    say(f"planning with {solver}, then searching for the smallest change ({search_time_limit:g}s a plan)")
    fmt = output or ("table" if stdout_is_a_terminal() else "yaml")
    if workload is None:
        with stdout_to_stderr(discard=not verbose), say.counting("explaining") as step:
            _, explanations = explain_all(snapshot, options, search_time_limit=search_time_limit,
                                          read_seconds=time.monotonic() - started,
                                          on_each=lambda i, n, ref: step(i, n, str(ref)))
        say(f"explained {len(explanations)} workloads")
        write_stdout(render_explanations(explanations, fmt))
        return
    with stdout_to_stderr(discard=not verbose), say.planning("planning, then re-planning each change", stages=False):
        explanation = explain_one(snapshot, workload, options, search_time_limit=search_time_limit,
                                  read_seconds=time.monotonic() - started)
    write_stdout(render_explanation(explanation, fmt))

