"""python -m tools.peer SNAPSHOT... : Kueue beside greedy on each snapshot.

For each snapshot file: run the real Kueue (tools/peer/harness.py), plan the
effective snapshot with greedy (and, with --milp, the MILP), print the agreement
and every disagreement, and the REFERENCE §5 metrics side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from tools.peer.compare import compare, decisions_of, metrics, report_lines
from tools.peer.harness import PeerOptions, available, run_kueue
from tools.peer.workloads import as_dict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.peer", description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshots", nargs="+", help="snapshot files")
    ap.add_argument("--milp", action="store_true", help="also plan with the MILP")
    ap.add_argument("--time-limit", type=float, default=None, help="the MILP's time limit")
    ap.add_argument("--effective", metavar="DIR", help="write each effective snapshot to DIR/<name>.effective.json")
    ap.add_argument("--json", metavar="FILE", help="write every result as JSON")
    ap.add_argument("--quiet-seconds", type=float, default=8.0, help="Kueue's fixed point: this long without change")
    ap.add_argument("--order", choices=("auto", "exact", "fast"), default="auto",
                    help="pending creation order (see harness.PeerOptions)")
    ap.add_argument("--keep", action="store_true", help="keep each control plane's work dir (logs)")
    ap.add_argument("--limit", type=int, default=None, help="show at most this many disagreements")
    args = ap.parse_args(argv)
    why = available()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    options = PeerOptions(quiet_seconds=args.quiet_seconds, order=args.order, keep=args.keep)
    results = []
    for path in args.snapshots:
        run = run_kueue(path, options, say=lambda m: print(f"peer: {m}", file=sys.stderr, flush=True))
        greedy = decisions_of(plan_snapshot(run.effective, SolveOptions(solver="greedy")))
        comparison = compare(run.effective, run.decisions, greedy)
        print(f"== {path}: settled {run.settled}, seconds {run.seconds}")
        for note in run.notes:
            print(f"  note: {note}")
        print("\n".join(report_lines(comparison, args.limit)))
        record = {"snapshot": path, "settled": run.settled, "seconds": run.seconds, "notes": run.notes,
                  "heads": run.heads, "agreement": comparison.agreement,
                  "disagreements": [{"workload": str(d.ref), "priority": d.priority, "clusterQueue": d.cluster_queue,
                                     "kueue": str(d.a), "greedy": str(d.b)} for d in comparison.disagreements],
                  "kueue": metrics(run.effective, run.decisions), "greedy": metrics(run.effective, greedy),
                  "rows": [as_dict(r) for r in run.rows]}
        if args.milp:
            milp = decisions_of(plan_snapshot(run.effective, SolveOptions(solver="milp", time_limit=args.time_limit)))
            record["milp"] = metrics(run.effective, milp)
        for name in ("kueue", "greedy", "milp"):
            if name in record:
                m = record[name]
                print(f"  {name}: served_gpus {m['served_gpus']} admitted {m['admitted']} evicted {m['evicted']} "
                      f"free_domains {m['free_domains']}")
        if args.effective:
            Path(args.effective).mkdir(parents=True, exist_ok=True)
            run.write_effective(Path(args.effective) / (Path(path).stem + ".effective.json"))
        results.append(record)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
