"""What the commands' flags share: the parameter types (a solver, a size, a time, a
checked number), the option groups several commands take (cluster, workers, solver,
table, metrics), what --kubeconfig and --worker turn into, the solver flags as the one
SolveOptions handed down (solve_options), and the naming rule of every flag's environment
variable (STOWPLAN_<COMMAND>_<FLAG>).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any, Callable, Sequence, TypeVar

import click

from planner.base.errors import InputError
from planner.base.solve_options import SolveOptions
from planner.base.terminal import printable


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
F = TypeVar("F", bound=Callable[..., Any])


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


def time_limit_type() -> CheckedFloat:
    from planner.snapshot.policy import check_time_limit

    return CheckedFloat("SECONDS", check_time_limit)


def gap_type() -> CheckedFloat:
    from planner.snapshot.policy import check_gap

    return CheckedFloat("GAP", check_gap)


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


def table_options(command: F) -> F:
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


def metrics_option(command: F) -> F:
    return click.option("--metrics", "metrics", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
                        help="Also write the cycle's metrics to FILE in Prometheus text format (atomically), "
                             "e.g. for node_exporter's textfile collector.")(command)


def cluster_options(command: F, policy_help: str = "PlannerPolicy YAML (stowplan.io/v1alpha1).") -> F:
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


def worker_options(command: F, name: str = "worker", what: str = "") -> F:
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


def solver_options(command: F) -> F:
    options = [
        click.option("--solver", type=SolverType(), default="milp", metavar="milp|greedy|pulp:NAME",
                     show_default=True, show_envvar=True, help="milp (HiGHS), greedy or pulp:NAME."),
        click.option("--time-limit", "time_limit", metavar="SECONDS", show_envvar=True, type=time_limit_type(),
                     help="Time limit for the whole cycle (reading the cluster included), above 0 and at most a "
                          "week. Default: the policy's (20)."),
        click.option("--gap", "gap", metavar="GAP", show_envvar=True, type=gap_type(),
                     help="Relative MIP gap each priority stage stops at, 0 to 1 (0.01 = 1%; the "
                          "preemption-cost and tie-breaker stages stop at this or 0.5%, the larger). "
                          "Default: the policy's (0.001)."),
        click.option("-v", "--verbose", is_flag=True, show_envvar=True,
                     help="Show the solvers' own output (HiGHS's banner and log, CBC's) on stderr."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def solve_options(solver: str, time_limit: float | None, gap: float | None) -> SolveOptions:
    """--solver, --time-limit and --gap (each its flag's, else its STOWPLAN_<COMMAND>_<FLAG>
    variable's: click reads both) as the one object the command hands down. A flag left
    unset stays None: the policy's, merged by the cycle once the policy is read
    (SolveOptions.merged); threads and seed have no flag and are always the policy's."""
    return SolveOptions(solver=solver, time_limit=time_limit, gap=gap)


def connect_kube(kubeconfig: str | None, context: str | None, dry_run: bool = False) -> Any:
    """A Kube on the cluster --kubeconfig and --context name (dry_run: apply --dry-run's)."""
    from planner.cluster import Kube, connect

    return Kube(connect(kubeconfig, context), dry_run=dry_run)


def worker_kubes(manager: Any, workers: Sequence[tuple[str, str]], multikueue_config: str | None,
                 kueue_namespace: str, dry_run: bool = False) -> dict[str, Any]:
    """Worker name -> a Kube on it, in the MultiKueueConfig's order then --worker's; a --worker
    of a config's name takes its place."""
    kubes: dict[str, Any] = {}
    if multikueue_config:
        from planner.cluster.multikueue import workers_from_config

        kubes.update(workers_from_config(manager, multikueue_config, kueue_namespace, dry_run=dry_run))
    kubes.update({name: connect_kube(path, None, dry_run=dry_run) for name, path in workers})
    return kubes


def check_workers(workers: Sequence[tuple[str, str]]) -> None:
    names = [name for name, _ in workers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"worker {', '.join(twice)} named twice", field="--worker")


def envvars_by_the_rule(group: click.Group) -> None:
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

