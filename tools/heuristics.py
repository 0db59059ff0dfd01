"""What each heuristic around the stages adds: the cycle with all of them, then with
each one switched off (planner.cycle.Heuristics), each plan in its own process.

    python -m tools.heuristics SNAPSHOT... [--time-limit SECONDS]

Prints a markdown table (BENCHMARKS.md keeps the measured one): per snapshot and
setting, the plan's status, volume per priority tier (the objective's order), its
objective/bound, evictions and seconds. Nothing here is part of a plan's path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

SETTINGS = {
    "all": {},
    "no RINS": {"rins": False},
}


def one(path: str, setting: str, time_limit: float | None) -> dict[str, object]:
    """Plan `path` in this process with `setting`; the numbers the table shows."""
    from planner.cycle import tiers
    from planner.base.solve_options import SolveOptions
    from planner.cycle import Heuristics, run_cycle
    from planner.snapshot import read_snapshot
    from models import Decisions

    snapshot = read_snapshot([path])
    plan = run_cycle(snapshot, SolveOptions(time_limit=time_limit), heuristics=Heuristics(**SETTINGS[setting]))
    volumes = tiers.tier_volumes(snapshot, Decisions(admissions=plan.admissions, evictions=plan.evictions))
    solver = plan.solver
    return {"status": solver.status, "volumes": {str(k): v for k, v in sorted(volumes.items(), reverse=True)},
            "objective": solver.objective, "bound": solver.bound, "evicted": len(plan.evictions),
            "seconds": solver.seconds.get("total")}


@click.command()
@click.argument("snapshots", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--time-limit", type=float, default=None, help="Override the snapshots' policy limit.")
@click.option("--one", "single", default=None, hidden=True)
def main(snapshots: tuple[str, ...], time_limit: float | None, single: str | None) -> None:
    if single is not None:
        click.echo(json.dumps(one(snapshots[0], single, time_limit)))
        return
    click.echo("| snapshot | setting | status | volume by priority | objective / bound | evicted | seconds |")
    click.echo("|---|---|---|---|---|---|---|")
    for path in snapshots:
        for setting in SETTINGS:
            args = [sys.executable, "-m", "tools.heuristics", path, "--one", setting]
            if time_limit is not None:
                args += ["--time-limit", str(time_limit)]
            done = subprocess.run(args, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
            if done.returncode != 0:
                click.echo(f"| {Path(path).name} | {setting} | FAILED: {done.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(done.stdout)
            ratio = r["objective"] / r["bound"] if r["bound"] else 1.0
            volumes = ", ".join(f"{k}: {v:g}" for k, v in r["volumes"].items())
            click.echo(f"| {Path(path).name} | {setting} | {r['status']} | {volumes} | {ratio:.4f} | {r['evicted']} "
                       f"| {r['seconds']:.2f} |")


if __name__ == "__main__":
    main()
