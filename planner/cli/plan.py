"""`stowplan plan`: plan the live cluster (or a MultiKueue fleet) and show or save the plan."""

from __future__ import annotations

import functools
import time
from typing import Any, Sequence

import click

from planner.base.errors import InputError
from planner.base.solve_options import SolveOptions
from planner.cli.console import Progress, outcome, report_problems, solver_log, stdout_is_a_terminal, stdout_to_stderr
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.multicluster import fleet_problems, plan_fleet
from planner.cli.options import (
    CONTEXT, check_workers, cluster_options, connect_kube, metrics_option, solve_options, solver_options,
    table_options, worker_kubes, worker_options,
)
from planner.cli.outputs import Outputs, check_distinct, check_writable, out_format, table_view, write_metrics
from planner.output.document import FORMATS, render


@cli.command("plan", context_settings=CONTEXT, epilog=exit_codes_help("plan"))
@cluster_options
@functools.partial(worker_options, what="The manager and every worker are read live and planned as one fleet: "
                   "each admission says its cluster (docs: multicluster); --out saves it for `apply --plan FILE "
                   "--worker ...`.")
@solver_options
@click.option("-o", "--output", "output", type=click.Choice(FORMATS), show_envvar=True,
              help="Output format (wide: the table with every flavor and node, and the running work). "
                   "Default: table on a terminal, else yaml.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Save the plan to FILE (yaml, or json for *.json; an -o the extension contradicts is "
                   "refused) with snapshot.resourceVersions, for `stowplan apply --plan FILE`.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines and no solver output.")
@metrics_option
@table_options
@exits
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

    say = Progress(quiet)
    from planner.snapshot.loader import refuse_overwriting

    refuse_overwriting([("--out", out), ("--metrics", metrics)],
                       [*config, policy, kubeconfig, *(path for _, path in worker)])
    if worker or multikueue_config:
        check_workers(worker)
        if metrics is not None:
            raise InputError("--metrics plans one cluster; not with --worker or --multikueue-config",
                             field="--metrics")
    fmt = out_format(output, out, FORMATS, default="table" if out in (None, "-") and stdout_is_a_terminal() else "yaml")
    check_distinct(out, metrics=metrics)
    if out not in (None, "-"):
        assert out is not None
        check_writable(out)
    if metrics is not None:
        check_writable(metrics, "--metrics")
    solver_log(verbose)
    options = solve_options(solver, time_limit, gap)
    kube = connect_kube(kubeconfig, context)
    if worker or multikueue_config:
        _plan_fleet_live(kube, worker_kubes(kube, worker, multikueue_config, kueue_namespace), config, policy,
                         options, verbose, fmt, out, say,
                         table_view(namespace, queue, summary_only, options.time_limit))
        return
    with stdout_to_stderr(discard=not verbose), say.planning(f"reading the cluster and planning with {solver}"):
        live, plan = plan_live(kube, config_files=config, policy_file=policy, options=options, say=say)
    report_problems(live.snapshot)
    say(outcome(plan))
    from planner.output.promtext import queues_of

    done: list[str] = []
    with Outputs() as outputs:     # the plan and its metrics: both written, or neither
        if out in (None, "-"):
            view = table_view(namespace, queue, summary_only, options.time_limit)
            outputs.stdout(render(plan, fmt, live.snapshot, view))
        else:
            assert out is not None
            fmt = fmt if fmt in ("yaml", "json") else "yaml"   # a saved plan is a document apply reads back
            outputs.file(out, render_saved(plan, resource_versions(plan, live), fmt, fingerprints(plan, live)))
            done.append(f"wrote {out}")
        write_metrics(metrics, None, plan, queues_of(live.snapshot), done.append, outputs)
        outputs.commit()
    for line in done:
        say(line)


def _plan_fleet_live(manager: Any, kubes: dict[str, Any], config: Sequence[str], policy: str | None,
                     options: SolveOptions, verbose: bool, fmt: str, out: str | None,
                     say: "Progress", view: Any) -> None:
    """`plan --worker ...`: the manager and every worker read live, planned as one fleet
    (planner.fleet, as what-if --cluster), shown or saved for `apply --plan FILE --worker ...`."""
    from planner.cluster import read_cluster
    from planner.cluster.fleet_live import manager_versions, read_workers
    from planner.cluster.planfile import render_saved

    started = time.monotonic()
    say(f"reading the manager ({manager.host})")
    boss = read_cluster(manager, config_files=config, policy_file=policy, say=say)
    read = read_workers(kubes, policy_file=policy, say=say)
    fleet_problems([(name, live.snapshot) for name, live in read], boss.snapshot)
    plan = plan_fleet([(name, live.snapshot) for name, live in read], boss.snapshot, options,
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

