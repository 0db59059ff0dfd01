"""Stowplan's joint fleet plan against first-fit dispatch (Kueue's incremental dispatcher),
on generated fleets of four clusters (planner.tools.fleet_gen): served GPUs per priority,
rack-requiring jobs placed, free racks left. Prints a markdown table for BENCHMARKS.md.

    .venv/bin/python -m planner.tools.fleet_bench [SEED ...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping

import yaml

from models import Plan
from planner import fleet as F
from planner.base.solve_options import SolveOptions
from planner.cycle import plan_snapshot
from planner.snapshot import read_snapshot
from planner.tools import fleet_gen


def read_fleet(seed: int, folder: Path, load: float = 1.3) -> F.Fleet:
    files = fleet_gen.fleet(seed, load=load)
    for stem, data in files.items():
        (folder / f"{stem}.yaml").write_text(yaml.safe_dump(data))
    workers = tuple((n, read_snapshot([str(folder / f"{n}.yaml")])) for n in files if n != "manager")
    return F.Fleet(workers, read_snapshot([str(folder / "manager.yaml")]))


def rack_jobs(fleet: F.Fleet, plan_admissions: set[str]) -> tuple[int, int]:
    """(rack-requiring jobs placed, rack-requiring jobs in all)."""
    racked = {w.ref.name for w in fleet.manager.workloads
              if any(ps.topology.mode == "required" and ps.topology.level == fleet_gen.RACK for ps in w.pod_sets)}
    return len(racked & plan_admissions), len(racked)


def row(name: str, fleet: F.Fleet, summary: Mapping[str, object], admitted: set[str], seconds: float) -> str:
    served = F.served(summary)
    placed, total = rack_jobs(fleet, admitted)
    free = summary.get("free_domains") or {}
    assert isinstance(free, Mapping)
    return (f"| {name} | {served.get(1000, 0):.0f} | {served.get(100, 0):.0f} | {placed}/{total} | "
            f"{free.get(fleet_gen.RACK, 0)} | {summary.get('admitted')} | {seconds:.1f} |")


def bench(seed: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        fleet = read_fleet(seed, Path(tmp))
        began = time.monotonic()
        result = F.plan_fleet(fleet, lambda s: plan_snapshot(s, SolveOptions(time_limit=10)))
        seconds = time.monotonic() - began
        ff_began = time.monotonic()
        ff = F.first_fit(fleet)
        greedy = SolveOptions(solver="greedy")
        ff_plans: dict[str, Plan] = F.plan_assignment(fleet, ff, lambda s: plan_snapshot(s, greedy))
        ff_seconds = time.monotonic() - ff_began
        ff_admitted = {a.workload.name for p in ff_plans.values() for a in p.admissions}
        joint = {a.workload.name for a in result.plan.admissions}
        gpus = sum(F.volume(w, fleet.manager) for w in F.fleet_pending(fleet))
        return [f"| seed {seed}: {len(fleet.manager.workloads)} jobs, {gpus:.0f} GPUs asked | | | | | | |",
                row("first-fit (Kueue's dispatcher)", fleet, result.candidates["first-fit"], ff_admitted, ff_seconds),
                row(f"Stowplan joint ({result.chosen})", fleet, result.plan.summary, joint, seconds)]


def main(argv: list[str]) -> None:
    seeds = [int(a) for a in argv] or [1, 2, 3, 4, 5]
    print("| plan | served GPUs p1000 | served GPUs p100 | rack jobs placed | free racks | admitted | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for seed in seeds:
        for line in bench(seed):
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
