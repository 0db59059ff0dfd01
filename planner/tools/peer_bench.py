"""`stowplan bench --peer kueue`: the real Kueue beside greedy and the MILP.

For each snapshot (every fixture, and small generated scenarios of 128 to 1,024
nodes) the Kueue peer harness (tools/peer, README "Kueue as a peer") runs Kueue
v0.17.0 on the test control plane and returns the effective snapshot (what Kueue
saw) with Kueue's decisions on it. That effective snapshot is written to a file and
planned by greedy and by the MILP, each in its own process as a user runs it
(planner.tools.bench.plan_in_subprocess). Reported per planner: served GPUs per priority,
admitted, evicted, free domains (REFERENCE §5, planner.describe.metrics for Kueue's
decisions), and each planner's agreement with Kueue (tools/peer/compare.py), with
greedy's disagreements listed.

This is an edge: it needs a checkout (tools/, tests/controlplane) and the binaries
tests/controlplane/build.sh builds, and imports them only when run. Kueue admits
quota-only flavors (no Topology) without looking at nodes: its free domains count
only what TAS placed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import click

from planner.tools.bench import plan_in_subprocess, write_benchmarks
from planner.tools.generate import generate, preset, to_json

REPO = Path(__file__).resolve().parent.parent.parent

# Generated scenarios: the S preset's cluster shape and job mix on fewer nodes, with
# more work than fits (evictions and waiting work, so decisions differ).
PEER_SCENARIOS: dict[str, dict[str, Any]] = {
    "P128": dict(fanout=(2, 4, 16), pending=200, running=100),
    "P512": dict(fanout=(4, 8, 16), pending=400, running=300),
    "P1024": dict(fanout=(4, 16, 16), pending=600, running=400),
}
DEFAULT_PEER_SCENARIOS = ("P128", "P512")
LIMIT_DISAGREEMENTS = 12

Say = Callable[[str], None]


def peer_modules() -> Any:
    """tools.peer's harness and comparison, from this checkout (not part of the package)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        from tools.peer import compare, harness
    except ImportError as err:
        raise click.ClickException(
            f"--peer kueue needs a Stowplan checkout with tools/peer and tests/controlplane ({err})") from None
    return harness, compare


def scenario_spec(name: str) -> Any:

    return preset("S", **PEER_SCENARIOS[name])


def _record(summary: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("served_gpus", "admitted", "evicted", "pending", "preemption_cost", "free_domains", "utilization")
    return {k: summary.get(k) for k in keys}


def peer_snapshot(name: str, path: Path, workdir: Path, time_limit: float | None, say: Say) -> dict[str, Any]:
    """Kueue, greedy and the MILP on one snapshot; one row (see the module doc)."""

    harness, compare = peer_modules()
    started = time.monotonic()
    try:
        run = harness.run_kueue(path, harness.PeerOptions(), say=lambda m: say(f"{name}: {m}"))
    except Exception as err:  # noqa: BLE001 - one failed snapshot is a row, not a crash
        return {"snapshot": name, "error": f"{type(err).__name__}: {err}"}
    wall = round(time.monotonic() - started, 2)
    effective = workdir / f"{Path(name).stem}.effective.json"
    run.write_effective(effective)
    kueue = _record(compare.metrics(run.effective, run.decisions))
    kueue.update(seconds=wall, settled=run.settled, quota_only=len(run.quota_only), notes=list(run.notes),
                 dropped=len(run.dropped))
    row: dict[str, Any] = {"snapshot": name, "nodes": len(run.snapshot.nodes),
                           "pending": sum(1 for w in run.effective.workloads if w.state.value == "pending"),
                           "running": sum(1 for w in run.effective.workloads if w.state.value == "running"),
                           "kueue": kueue}
    why = {r.ref: _why(r) for r in run.rows}
    for solver in ("greedy", "milp"):
        record = plan_in_subprocess(effective, solver, time_limit, keep_plan=True)
        plan = record.pop("plan", None)
        if plan is not None:
            comparison = compare.compare(run.effective, run.decisions, compare.decisions_from_plan(plan),
                                         ("kueue", solver))
            record["agreement"] = {"value": comparison.agreement, "agreed": comparison.agreed,
                                   "total": comparison.total, "categories": comparison.categories(),
                                   "disagreements": [{"workload": str(d.ref), "priority": d.priority,
                                                      "clusterQueue": d.cluster_queue, "kueue": str(d.a),
                                                      solver: str(d.b), "why": why.get(d.ref, "")}
                                                     for d in comparison.disagreements]}
        row[solver] = record
        say(f"{name}: {solver} {_agreement(record)}")
    return row


def _why(row: Any) -> str:
    """Kueue's side of a row in a few words: its eviction reason and preemptors, or why it waits."""
    if row.eviction_reason:
        by = ", ".join(str(r) for r in row.preemptors)
        return f"{row.eviction_reason}" + (f" by {by}" if by else "")
    message: str = row.message
    return message[:160]


def _agreement(record: Mapping[str, Any]) -> str:
    if "error" in record:
        return f"FAILED {record['error']}"
    a = record.get("agreement")
    return "—" if not a else f"{a['value']:.4f} ({a['agreed']}/{a['total']})"


def run_peer_bench(scenarios: Sequence[str], fixtures: Sequence[Path], out: Path | None, say: Say,
                   workdir: Path, time_limit: float | None, meta: dict[str, Any]) -> dict[str, Any]:

    rows = []
    for path in fixtures:
        rows.append(peer_snapshot(path.name, path, workdir, None, say))
    for name in scenarios:
        path = workdir / f"peer-{name}.json"
        path.write_text(to_json(generate(scenario_spec(name))), encoding="utf-8")
        rows.append(peer_snapshot(name, path, workdir, time_limit, say))
    return peer_report(meta, rows, out)


def peer_report(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], out: Path | None) -> dict[str, Any]:

    body = "\n".join(peer_markdown(rows, meta))
    heading = "## Kueue v0.17.0 beside greedy and the MILP (peer)"
    if out is not None:
        write_benchmarks(out, {"peer": (heading, body)})
    return {"meta": meta, "peer": list(rows), "markdown": f"{heading}\n\n{body}\n"}


# ---------------------------------------------------------------- markdown

def _served(served: Mapping[Any, Any]) -> str:
    return "; ".join(f"{p}: {v}" for p, v in sorted(((int(k), v) for k, v in served.items()), reverse=True))


def _free(free: Mapping[str, Any]) -> str:
    return "; ".join(f"{k.rsplit('/', 1)[-1].removeprefix('topology-')} {v}" for k, v in sorted(free.items()))


def peer_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> list[str]:
    out = [f"Measured {meta.get('date', '?')} at commit `{meta.get('commit', '?')}`: Kueue v0.17.0 (built from its Go "
           "module) on the test control plane; greedy and the MILP plan the *effective* snapshot (Kueue's queue "
           "order and UIDs, Kueue's own placement of running work), each in its own process. `agreement` is the "
           "share of pending and running workloads with Kueue's outcome (admitted with the same flavors, left "
           "pending, evicted, kept running). Kueue admits quota-only flavors without nodes: its free domains count "
           "only TAS placements.", ""]
    header = ["snapshot", "nodes", "pending + running", "planner", "served GPUs by priority", "admitted", "evicted",
              "free domains", "agreement with Kueue", "seconds"]
    table = []
    for row in rows:
        if "error" in row:
            table.append([row["snapshot"], "—", "—", "kueue", f"FAILED: {row['error']}"] + ["—"] * 5)
            continue
        k = row["kueue"]
        settled = "" if k.get("settled") else " (no fixed point)"
        table.append([row["snapshot"], str(row["nodes"]), f"{row['pending']} + {row['running']}", "kueue",
                      _served(k["served_gpus"]), str(k["admitted"]), str(k["evicted"]), _free(k["free_domains"]),
                      "—", f"{k['seconds']:.1f} (harness){settled}"])
        for solver in ("greedy", "milp"):
            r = row.get(solver) or {}
            if "error" in r or not r:
                table.append(["", "", "", solver, f"FAILED: {r.get('error', 'no record')}"] + ["—"] * 5)
                continue
            table.append(["", "", "", solver, _served(r["served_gpus"]), str(r["admitted"]), str(r["evicted"]),
                          _free(r["free_domains"]), _agreement(r), f"{r['seconds']['total']:.2f}"])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table]
    out += lines
    notes = []
    for row in rows:
        g = (row.get("greedy") or {}).get("agreement")
        if g and g["disagreements"]:
            cats = ", ".join(f"{c} {n}" for c, n in g["categories"].items())
            notes.append(f"- **{row['snapshot']}**: {len(g['disagreements'])} of {g['total']} (kueue/greedy: {cats})")
            for d in g["disagreements"][:LIMIT_DISAGREEMENTS]:
                why = f" [{d['why']}]" if d.get("why") else ""
                notes.append(f"  - `{d['workload']}` (priority {d['priority']}, {d['clusterQueue']}): "
                             f"Kueue {d['kueue']}{why}; greedy {d['greedy']}")
            if len(g["disagreements"]) > LIMIT_DISAGREEMENTS:
                notes.append(f"  - … and {len(g['disagreements']) - LIMIT_DISAGREEMENTS} more")
        for note in (row.get("kueue") or {}).get("notes", []):
            notes.append(f"- {row['snapshot']}: {note}")
    if notes:
        out += ["", "Where greedy decides otherwise than Kueue, and what the harness noted:", ""] + notes
    return out


def load_peer_results(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["meta"], list(data.get("peer", []))
