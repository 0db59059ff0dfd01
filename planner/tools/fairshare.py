"""Each ClusterQueue's share against its weighted max-min target, after a plan.

    python -m planner.tools.fairshare SNAPSHOT... [--solver greedy] [--solver milp] [--time-limit S]
                                      [--fair-sharing as-read|on|off] [--cycles N]...

For every ClusterQueue of a snapshot: its fairSharing.weight, nominal GPUs, demand
(GPUs of its running and admissible pending workloads, planner.kueue.shares.demand), and, per solver, the GPUs it holds
after the plan and its dominant resource share (Kueue's DRS, per mille of what its
parent can lend, over its weight), beside the target: the weighted max-min
allocation of the cohort tree's GPUs (planner.kueue.shares.targets, the one the
MILP aims at and the plan's report shows: each queue's own quota first, then what is
left shared by weight, level by level, per flavor) and the DRS that allocation gives. Prints a Markdown table (BENCHMARKS.md keeps one).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from models import Decisions, FlavorResource as FR, Snapshot
from models.resources import is_gpu
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.greedy import KueueCycles, greedy
from planner.kueue import shares as fair_share
from planner.kueue.fairsharing import Shares, from_snapshot, live_usage, weights_of
from planner.kueue.state import ClusterState


@dataclass
class Row:
    queue: str
    weight: float
    nominal: int
    demand: int
    target: float
    target_drs: float
    held: dict[str, int] = field(default_factory=dict)       # solver -> GPUs after the plan
    drs: dict[str, float] = field(default_factory=dict)      # solver -> DRS after the plan


def gpu_frs(snapshot: Snapshot, state: ClusterState) -> list[FR]:
    extra = snapshot.policy.gpu_resources
    return sorted({fr for table in state.quota.quota.values() for fr in table if is_gpu(fr[1]) or fr[1] in extra})


def share_rows(snapshot: Snapshot, plans: Mapping[str, Decisions]) -> list[Row]:
    state = ClusterState(snapshot)
    tree = state.quota
    weights = weights_of(snapshot)
    shares = Shares(tree, weights)
    frs = gpu_frs(snapshot, state)
    wanted = fair_share.demand(snapshot)
    goals = fair_share.targets(snapshot, tree, wanted)
    aimed = {k: {fr: v for fr, v in goals[k].items() if fr in frs} for k in goals if k.startswith("cq:")}
    target_shares = fair_share.shares(snapshot, tree, aimed)
    rows: dict[str, Row] = {}
    for node in tree.nodes():
        if not node.startswith("cq:"):
            continue
        nominal = sum(tree.subtree_quota(node, fr) for fr in frs)
        demand = round(sum(wanted.get(node, {}).get(fr, 0.0) for fr in frs))
        target = sum(aimed.get(node, {}).values())
        target_drs = target_shares[node].weighted if node in target_shares else 0.0
        rows[node] = Row(node[3:], weights.weight(node), nominal, demand, target, target_drs)
    for solver, decisions in plans.items():
        after = ClusterState.after(snapshot, decisions)
        usage = live_usage(after)
        for node, row in rows.items():
            row.held[solver] = sum(after.used(row.queue, fr) for fr in frs)
            row.drs[solver] = shares.drs(node, usage).weighted()
    return [rows[k] for k in sorted(rows)]


def _num(value: float, digits: int = 0) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}"


def markdown(rows: Sequence[Row], solvers: Sequence[str]) -> list[str]:
    header = ["ClusterQueue", "weight", "nominal GPUs", "demand GPUs", "target GPUs", "target DRS"]
    for s in solvers:
        header += [f"{s} GPUs", f"{s} DRS"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [r.queue, f"{r.weight:g}", str(r.nominal), str(r.demand), _num(r.target, 1), _num(r.target_drs)]
        for s in solvers:
            cells += [str(r.held.get(s, 0)), _num(r.drs.get(s, 0.0))]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    from planner.snapshot import read_snapshot
    parser = argparse.ArgumentParser(prog="python -m planner.tools.fairshare", description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", nargs="+")
    parser.add_argument("--solver", action="append", choices=["greedy", "milp"])
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--cycles", type=int, action="append", default=[],
                        help="also show greedy after only this many Kueue cycles (repeatable)")
    parser.add_argument("--fair-sharing", choices=["as-read", "on", "off"], default="as-read",
                        help="override the Configuration's fairSharing.enable (weights stay)")
    args = parser.parse_args(argv)
    snapshot = read_snapshot(args.snapshot)
    if args.fair_sharing != "as-read":
        config = snapshot.kueue_config
        fair = replace(config.fair_sharing, enabled=args.fair_sharing == "on")
        snapshot = replace(snapshot, kueue_config=replace(config, fair_sharing=fair))
    solvers = args.solver or ["greedy"]
    plans = {}
    how: dict[str, str] = {}
    for solver in solvers:
        plan = plan_snapshot(snapshot, SolveOptions(solver=solver, time_limit=args.time_limit))
        plans[solver] = Decisions(admissions=plan.admissions, evictions=plan.evictions)
        how[solver] = f" ({plan.solver.method}, {plan.solver.status})"
    for n in args.cycles:
        early = KueueCycles(snapshot, fair=from_snapshot(snapshot)).run(cycles=n)
        plans[f"greedy@{n}"] = early.decisions
    columns = list(plans)
    print("\n".join(markdown(share_rows(snapshot, plans), columns)))
    baseline = greedy(snapshot)
    print(f"\nfair sharing {'on' if from_snapshot(snapshot) else 'off'}; greedy: {baseline.cycles} Kueue cycles, "
          f"{len(baseline.decisions.admissions)} admitted, {len(baseline.decisions.evictions)} running evicted, "
          f"{baseline.undone} admissions evicted again within the replay")
    for solver, d in plans.items():
        print(f"{solver}{how.get(solver, '')}: {len(d.admissions)} admitted, {len(d.evictions)} evicted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
