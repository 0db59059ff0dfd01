"""Defragmentation measured (BENCHMARKS.md, issue 28): one generated fragmented snapshot
planned twice, with the policy's `defragment` off and on, and what each plan leaves
running of the work that requires a rack or a block, the moves and their lost work.

    .venv/bin/python -m planner.tools.defrag_bench [--preset fragmented] [--seed N]
        [--time-limit SECONDS] [--budget N]

Beside the product (like bench): it generates the snapshot (planner.tools.generate),
writes it to a temporary JSON file, reads it as `what-if` does and plans it in this
process with planner.cycle.plan_snapshot. Prints one Markdown table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import Any

import click

from models import Plan, Snapshot, WorkloadState, is_gpu
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.snapshot.reader import read_snapshot
from planner.tools.generate import BLOCK, RACK, generate, preset, to_json


def required_gpus(snapshot: Snapshot, plan: Plan) -> int:
    """GPUs of workloads with a pod set that requires a rack or a block, running after the plan."""
    evicted = {e.workload for e in plan.evictions}
    admitted = {a.workload: a.pod_sets for a in plan.admissions}
    total = 0
    for w in snapshot.workloads:
        if not any(ps.topology.mode == "required" and ps.topology.level in (RACK, BLOCK) for ps in w.pod_sets):
            continue
        if w.state is WorkloadState.RUNNING and w.ref not in evicted:
            assigned = w.assignment
        elif w.ref in admitted:
            assigned = admitted[w.ref]
        else:
            continue
        per_pod = {ps.name: sum(v for r, v in ps.request.items() if is_gpu(r)) for ps in w.pod_sets}
        total += sum(a.count * per_pod.get(a.name, 0) for a in assigned)
    return total


def measure(snapshot: Snapshot, defragment: bool, budget: int, time_limit: float) -> dict[str, Any]:
    policy = dataclasses.replace(snapshot.policy, defragment=defragment, max_migrations_per_cycle=budget)
    plan = plan_snapshot(dataclasses.replace(snapshot, policy=policy), SolveOptions(time_limit=time_limit))
    served = plan.summary.get("served_gpus", {})
    return {
        "defragment": "on" if defragment else "off",
        "status": plan.solver.status,
        "required_gpus": required_gpus(snapshot, plan),
        "served_gpus": sum(served.values()) if isinstance(served, dict) else 0,
        "admitted": len(plan.admissions),
        "evicted": len(plan.evictions),
        "preemption_cost": round(sum(e.cost for e in plan.evictions), 2),
        "migrated": len(plan.migrations),
        "migration_cost": round(sum(m.cost for m in plan.migrations), 2),
        "seconds": round(float(plan.solver.seconds.get("total", 0.0)), 2),
    }


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--preset", "name", default="fragmented", show_default=True, help="generator preset")
@click.option("--seed", type=int, default=None, help="override the preset's seed")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=20.0, show_default=True)
@click.option("--budget", type=click.IntRange(min=0), default=16, show_default=True,
              help="maxMigrationsPerCycle when defragment is on")
def main(name: str, seed: int | None, time_limit: float, budget: int) -> None:
    spec = preset(name) if seed is None else preset(name, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.json")
        with open(path, "w", encoding="utf-8") as out:
            out.write(to_json(generate(spec)))
        snapshot = read_snapshot([path])
    rows = [measure(snapshot, on, budget, time_limit) for on in (False, True)]
    keys = list(rows[0])
    click.echo(f"preset {name}, seed {spec.seed}, {spec.nodes} nodes, time limit {time_limit:g} s, "
               f"budget {budget}")
    click.echo("| " + " | ".join(keys) + " |")
    click.echo("|" + "---|" * len(keys))
    for row in rows:
        click.echo("| " + " | ".join(str(row[k]) for k in keys) + " |")
    click.echo(json.dumps({"more_required_gpus": rows[1]["required_gpus"] - rows[0]["required_gpus"]}))


if __name__ == "__main__":
    main()
