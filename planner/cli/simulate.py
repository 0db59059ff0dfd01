"""`stowplan simulate`: a trace replayed through repeated planning cycles in simulated time."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import click

from models import Plan, Snapshot
from planner.base.errors import InputError
from planner.cli.console import Progress, report_problems, stdout_is_a_terminal, stdout_to_stderr
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import CONTEXT, SizeType, gap_type, solve_options, time_limit_type
from planner.cli.outputs import check_writable, emit


@cli.command("simulate", context_settings=CONTEXT, epilog=exit_codes_help("simulate"))
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
@click.option("--time-limit", "time_limit", metavar="SECONDS", show_envvar=True, type=time_limit_type(),
              help="Each cycle's time limit in seconds (default: the policy's, 20). A short one keeps a long "
                   "simulation quick; each plan says how far its search got.")
@click.option("--gap", "gap", metavar="GAP", show_envvar=True, type=gap_type(),
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
@exits
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
    from planner.output.simulation import check_picture, document, draw, render
    from planner.whatif.simulate import simulate
    from planner.snapshot.loader import Limits
    from planner.snapshot.trace import read_with_snapshot

    say = Progress(quiet)
    options = solve_options(solver, time_limit, gap)
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
    report_problems(snapshot)
    solvers = ["milp", "greedy"] if compare else [options.solver]
    results: dict[str, dict[str, object]] = {}
    for name in solvers:
        say(f"simulating {len(jobs.arrivals)} trace jobs with {name}, a cycle every {interval:g} s")
        step = max(1, int(3600 // interval))

        def planner(snap: Snapshot, name: str = name) -> Plan:
            return plan_snapshot(snap, replace(options, solver=name))

        def progress(done: int, total: int, name: str = name) -> None:
            if done % step == 0 or done == total:
                say(f"{name}: cycle {done} of {total}")

        with stdout_to_stderr(discard=True):
            result = simulate(snapshot, jobs, planner, interval=interval, seed=seed, solver=name, hours=hours,
                              drain=drain, progress=progress)
        results[name] = result.as_dict()
    doc = document(results, snapshot=",".join(snapshots), trace=trace, interval=interval, seed=seed,
                   hours=max(float(str(r["hours"])) for r in results.values()), time_limit=options.time_limit,
                   gap=options.gap, drain=drain)
    fmt = output or ("table" if to_stdout and stdout_is_a_terminal() else "json")
    emit(render(doc, fmt), None if to_stdout else out, say)
    if picture is not None:
        draw(doc, picture)
        say(f"drew {picture}")

