"""`stowplan apply`: plan the live cluster and apply one cycle, or apply a saved plan
(to a MultiKueue fleet's workers with --worker)."""

from __future__ import annotations

import functools
import math
import time
from typing import Any, Callable, Sequence

import click

from models import Plan
from planner.base import interrupt
from planner.base.errors import InputError, StowplanError
from planner.base.terminal import printable
from planner.cli.console import Progress, outcome, solver_log, stdout_to_stderr
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import (
    CONTEXT, CheckedFloat, check_workers, cluster_options, connect_kube, metrics_option, solve_options,
    solver_options, worker_kubes, worker_options,
)
from planner.cli.outputs import check_writable, write_metrics, write_stdout


def _bounded(low: float, high: float) -> Callable[[object], float]:
    def check(value: Any) -> float:   # a flag's text, or a default
        number = float(value)
        if not math.isfinite(number) or not low <= number <= high:
            raise ValueError(f"must be a finite number from {low:g} to {high:g}")
        return number
    return check


class PushgatewayType(click.ParamType[str]):
    name = "URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from planner.output.promtext import check_pushgateway

        try:
            return check_pushgateway(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


@cli.command("apply", context_settings=CONTEXT, epilog=exit_codes_help("apply"))
@click.option("--plan", "plan", metavar="FILE", show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="Apply this saved plan (from `plan --out`) instead of planning now; refused (exit 6) if "
                   "anything it touches changed since.")
@click.option("--dry-run", "dry_run", is_flag=True, show_envvar=True,
              help="Server-side dry run (dryRun=All): every write is checked, nothing changes, no Lease.")
@functools.partial(worker_options, name="workers_", what="Each Job of the saved plan (admissions with "
                   "`cluster: NAME`) is dispatched to its worker and kept in step (docs: dispatch). Needs --plan.")
@cluster_options
@solver_options
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
@metrics_option
@click.option("--pushgateway", "pushgateway", metavar="URL", show_envvar=True, type=PushgatewayType(),
              help="Push the cycle's metrics to this Prometheus Pushgateway (job=stowplan) after applying; "
                   "a failed push is a warning. Default: no push.")
@exits
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

    say = Progress(quiet)
    if metrics is not None:
        check_writable(metrics, "--metrics")
    solver_log(verbose)
    if workers_ or multikueue_config:
        return _dispatch(plan, dry_run, workers_, multikueue_config, kueue_namespace, kubeconfig, context,
                         namespace, lease_name, identity, lease_duration, release_wait, say)
    options = solve_options(solver, time_limit, gap)
    kube = connect_kube(kubeconfig, context, dry_run=dry_run)
    seen: list[Any] = []     # the snapshot the plan was made from (its workloads' ClusterQueues)
    try:
        with stdout_to_stderr(discard=not verbose), say.planning(f"planning with {solver}"):
            made, report = apply_live(kube, plan_file=plan, config_files=config, policy_file=policy,
                                      options=options, lease_namespace=namespace,
                                      lease_name=lease_name, identity=identity, lease_duration=lease_duration,
                                      release_wait=release_wait, workers=workers, pod_groups=pod_groups, say=say,
                                      allow_kueue_controller=allow_kueue_controller,
                                      warn=lambda line: click.echo(printable(line), err=True),
                                      before_apply=lambda live, _plan: seen.append(live))
        for ref, why in report.conflicts:
            click.echo(f"warning: skipped {printable(ref)}: {printable(why)} (the next cycle repairs it)", err=True)
        write_stdout(f"stowplan: {outcome(made)}; {report.summary()} in {report.seconds.get('total', 0.0):.2f}s\n")
        _write_status(kube, namespace, made, report, say)
        from planner.output.promtext import queues_of

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
    from planner.base.errors import WorkerUnreachableError

    check_workers(workers)
    if plan is None:
        raise InputError("--worker and --multikueue-config apply a saved multi-cluster plan: give --plan FILE (from "
                         "`plan --worker NAME=KUBECONFIG ... --out FILE` or `what-if --cluster NAME=SNAPSHOT ... "
                         "--out FILE`)", field="--plan")
    manager = connect_kube(kubeconfig, context, dry_run=dry_run)
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


def _write_status(kube: Any, namespace: str, plan: Plan, report: Any, say: Callable[[str], None]) -> None:
    """ConfigMap stowplan-status in the planner's namespace (planner.cluster.status); a
    failure is a warning: the cycle itself is done."""
    from planner.cluster.status import NAME, status_data, write_status

    try:
        write_status(kube, namespace, status_data(plan, report, time.time()))
        say(f"wrote ConfigMap {namespace}/{NAME}")
    except StowplanError as error:
        click.echo(f"warning: status ConfigMap {namespace}/{NAME} not written: {printable(str(error))}", err=True)

