"""A MultiKueue fleet planned from the command line: what `what-if --cluster` (snapshot
files) and `plan --worker` (live clusters) share once their snapshots are read.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from models import Plan, Problem, Snapshot
from planner.base.solve_options import SolveOptions
from planner.cli.console import Progress, outcome, peak_rss_mib, report_problems, stdout_to_stderr


def fleet_problems(workers: Sequence[tuple[str, Snapshot]], manager: Snapshot | None) -> int:
    """Report the fleet's input problems (what-if --cluster, plan --worker): a worker's
    workloads come from the manager, so of a worker only its nodes and queues are needed;
    without a manager the first worker is the manager too."""
    problems = 0
    for i, (_, snap) in enumerate(workers):
        problems += report_problems(snap, needs=("Node", "ClusterQueue") if manager is not None or i else
                                     ("Node", "ClusterQueue", "workload"))
    if manager is not None:
        problems += report_problems(_for_manager(manager), needs=("ClusterQueue", "workload"))
    return problems


def _for_manager(snapshot: Snapshot) -> Snapshot:
    """The manager's problems without those its workers decide: its flavors have no
    Topology, so a workload's topology levels are checked on each worker instead."""
    def worker_decides(p: Problem) -> bool:
        return "topology" in p.field and "not in the Topology" in p.message or "not all in the Topology" in p.message
    return replace(snapshot, problems=tuple(p for p in snapshot.problems if not worker_decides(p)))


def plan_fleet(workers: Sequence[tuple[str, Snapshot]], manager: Snapshot, options: SolveOptions,
                read_seconds: float, verbose: bool, say: "Progress") -> Plan:
    """One plan over the worker clusters (planner.fleet.plan_fleet_cycle), the same for
    what-if --cluster and plan --worker."""
    from planner import fleet as fleet_module

    with stdout_to_stderr(discard=not verbose), say.planning(f"planning {len(workers)} clusters with {options.solver}"):
        result = fleet_module.plan_fleet_cycle(fleet_module.Fleet(tuple(workers), manager), options, read_seconds)
    plan = replace(result.plan, solver=replace(result.plan.solver, peak_rss_mib=peak_rss_mib()))
    say(f"{outcome(plan)} (chosen: {result.chosen})")
    return plan

