"""`stowplan what-if`: plan snapshot files offline (one cluster, or a fleet with
--cluster), with the capacity (--add-nodes) and drain (--remove-nodes) questions.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import time
from dataclasses import replace
from typing import Any, Sequence

import click

from models import Plan, Snapshot
from planner.base.errors import InputError
from planner.base.solve_options import SolveOptions
from planner.cli.console import (
    Progress, outcome, peak_rss_mib, report_problems, say_assumed_configuration, solver_log, stdout_is_a_terminal,
    stdout_to_stderr, warn_early_now,
)
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.multicluster import fleet_problems, plan_fleet
from planner.cli.options import (
    CONTEXT, RFC3339Type, SizeType, SolverType, gap_type, metrics_option, solve_options, table_options,
    time_limit_type,
)
from planner.cli.outputs import (
    Outputs, check_distinct, check_writable, emit, out_format, table_view, write_metrics,
)
from planner.output.document import FORMATS, render, render_what_if


@cli.command("what-if", context_settings=CONTEXT, epilog=exit_codes_help("what-if"))
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
@click.option("--time-limit", "time_limit", metavar="SECONDS", show_envvar=True, type=time_limit_type(),
              help="Time limit in seconds for the whole cycle (reading the snapshot, greedy, "
                   "start, model, solve, verify), above 0 and at most a week. Default: the policy's (20).")
@click.option("--gap", "gap", metavar="GAP", show_envvar=True, type=gap_type(),
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
@metrics_option
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
@table_options
@exits
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
    options = solve_options(solver, time_limit, gap)
    if clusters or manager is not None:
        if snapshots:
            raise InputError("give SNAPSHOT or --cluster NAME=SNAPSHOT, not both", field="--cluster")
        if any(v is not None for v in (add_nodes, remove_nodes, picture, picture_before, metrics)):
            raise InputError("--add-nodes, --remove-nodes, --picture, --picture-before and --metrics plan one "
                             "cluster; not with --cluster", field="--cluster")
        _what_if_fleet(clusters, manager, policy, output, out, options, now, strict,
                       max_file_size, quiet, verbose, table_view(namespace, queue, summary_only, options.time_limit,
                                                                 out in (None, "-")))
        return
    if not snapshots:
        raise InputError("give a SNAPSHOT (or --cluster NAME=SNAPSHOT per worker cluster)", field="SNAPSHOT")
    from planner.cycle import plan_snapshot
    from planner.snapshot import read_snapshot
    from planner.snapshot.loader import Limits

    say = Progress(quiet)
    solver_log(verbose)
    from planner.snapshot.loader import refuse_overwriting

    refuse_overwriting([("--out", out), ("--metrics", metrics), ("--picture", picture),
                        ("--picture-before", picture_before)], [*snapshots, policy, add_nodes])
    to_stdout = out in (None, "-")
    fmt = out_format(output, out, FORMATS, default="table" if to_stdout and stdout_is_a_terminal() else "yaml")
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
        from planner.whatif.capacity import parse_selector

        selector = parse_selector(remove_nodes)
    started = time.monotonic()
    say(f"reading {', '.join(snapshots)}")
    snapshot = read_snapshot(list(snapshots), policy_file=policy, now=now.timestamp() if now else None,
                             limits=Limits(max_file_bytes=max_file_size))
    extra: list[str] = []
    if selector is not None:
        from planner.whatif.capacity import drained_nodes

        if not drained_nodes(snapshot, selector):
            extra.append(f"--remove-nodes: {remove_nodes!r} matches no node of the snapshot's "
                         f"{len(snapshot.nodes)}: nothing is drained")
    problems = report_problems(snapshot, extra) + warn_early_now(snapshot, now)
    say_assumed_configuration(snapshot)
    if strict and problems:
        raise InputError(f"{problems} input problem(s) reported above and --strict is set; no plan written")
    read_seconds = time.monotonic() - started
    say(f"read {snapshot.object_count} objects, {len(snapshot.workloads)} workloads, "
        f"{len(snapshot.nodes)} nodes in {read_seconds:.2f}s; planning with {solver}")

    answer: dict[str, object] | None = None
    lines: list[str] = []
    with stdout_to_stderr(discard=not verbose), say.planning(f"planning with {solver}"):
        if templates is None and selector is None:
            from planner.whatif.provisioning import plan_cycle

            plan = plan_cycle(snapshot, options, read_seconds=read_seconds)
        else:
            from planner.whatif import capacity as capacity_plan
            def planner(snap: Snapshot) -> Plan:
                return plan_snapshot(snap, options, read_seconds=read_seconds)

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
    say(outcome(plan))

    view = table_view(namespace, queue, summary_only, options.time_limit, to_stdout)
    text = render(plan, fmt, snapshot, view) if answer is None else render_what_if(plan, fmt, answer, lines, snapshot, view)
    from planner.output.promtext import queues_of

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


def _what_if_fleet(clusters: Sequence[str], manager: str | None, policy: str | None, output: str | None,
                   out: str | None, options: SolveOptions, now: dt.datetime | None, strict: bool,
                   max_file_size: int, quiet: bool, verbose: bool, view: Any) -> None:
    """what-if --cluster: read each worker's snapshot and the manager's, plan the fleet."""
    from planner.snapshot import read_snapshot
    from planner.snapshot.loader import Limits

    say = Progress(quiet)
    solver_log(verbose)
    named = parse_clusters(clusters, manager)
    to_stdout = out in (None, "-")
    fmt = out_format(output, out, FORMATS, default="table" if to_stdout and stdout_is_a_terminal() else "yaml")
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
    problems = fleet_problems(workers, boss)
    if strict and problems:
        raise InputError(f"{problems} input problem(s) reported above and --strict is set; no plan written")
    boss = workers[0][1] if boss is None else boss
    plan = plan_fleet(workers, boss, options, time.monotonic() - started, verbose, say)
    text = render(plan, fmt, boss, view)
    done: list[str] = []
    with Outputs() as outputs:
        emit(text, None if to_stdout else out, done.append, outputs)
        outputs.commit()
    for line in done:
        say(line)


def _draw(outputs: "Outputs", snapshot: Snapshot, plan: Plan, path: str, field: str, before: bool = False) -> str:
    """Draw the picture into a temp file beside `path`, renamed with the other outputs; the mode drawn."""
    from planner.output.picture import draw

    folder, name = os.path.split(os.path.abspath(path))
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=os.path.splitext(name)[1])
    except OSError as error:
        raise InputError(f"cannot write: {error.strerror}", file=path, field=field) from None
    os.close(fd)
    outputs.staged(temp, path, field)
    return draw(snapshot, plan, temp, before=before)


def _check_picture(path: str, field: str = "--picture") -> None:
    from planner.output.picture import check_path

    try:
        check_path(path)
    except ValueError as error:
        raise InputError(str(error), field=field) from None
    check_writable(path, field)

