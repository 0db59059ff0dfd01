"""`stowplan bench`: the scale benchmark (issue 6), the fixture comparison (issues 3, 4) and the family (issue 32).

For each scenario (the generator's presets S, M, L and, with --xl, XL; fixed seed),
the snapshot is generated to a JSON file, then planned three times (the MILP at the
time limit and at half of it, greedy once), each plan in its own process exactly as a
user runs it:

    python -m planner.cli what-if FILE -o json --quiet --time-limit T --solver milp|greedy

The JSON plans are parsed for the solver report (seconds read/build/solve/verify/
total, objective, bound, gap, status, stages, peak_rss_mib) and the REFERENCE §5
summary metrics. Every fixture in fixtures/ (snapshots *.yaml and *.json, not the
golden *.plan.yaml) is planned the same way, with the policy's own time limit.

Time limit: the issue's targets are end to end (read, build, solve, verify), and so
is `--time-limit`. Each scenario gets its target less an allowance of ALLOWANCE (5%)
for the steps that must finish past the limit (greedy's last cycle, the plan's last
metrics) and writing the plan (S 1.9 s, M 4.75 s, L 28.5 s, XL 114 s), times
--time-limit-factor.

The family section (planner/tools/family_bench.py) plans members of the generated
family of shapes (issue 32) the same way and judges each of that issue's targets.

Results go to stdout (markdown tables) and into BENCHMARKS.md between marker
comments (`<!-- bench:scale -->` ... `<!-- /bench:scale -->`, `bench:fixtures`, `bench:family`);
everything outside the markers is left as it is, so the hand-written text stays.
Nothing is asserted about speed here: rows that miss a target say by how much.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence


REPO = Path(__file__).resolve().parent.parent.parent
ALLOWANCE = 0.05
SECONDS_KEYS = ("read", "build", "solve", "verify", "total")
DEFAULT_SCENARIOS = ("S", "M", "L")


@dataclass(frozen=True)
class Target:
    """Issue 6's targets for one scenario (None: no target)."""

    seconds: float
    ratio: float | None          # objective / bound at least this; None: >= greedy, gap reported
    rss_mib: float | None

    def time_limit(self, factor: float = 1.0) -> float:
        return round(max(0.2, self.seconds * (1.0 - ALLOWANCE)) * factor, 3)


TARGETS: dict[str, Target] = {
    "S": Target(2.0, 0.999, None),
    "M": Target(5.0, 0.995, 1024.0),
    "L": Target(30.0, 0.99, 4096.0),
    "XL": Target(120.0, None, 12288.0),
}

Say = Callable[[str], None]


def silent(_: str) -> None:
    pass


# ---------------------------------------------------------------- one plan, one process

def plan_in_subprocess(path: Path | str, solver: str, time_limit: float | None = None,
                       timeout: float = 900.0, keep_plan: bool = False) -> dict[str, Any]:
    """Plan `path` with `solver` in a fresh interpreter; the record of that plan
    (with the JSON plan itself under "plan" when `keep_plan`).

    A failed or timed-out run gives {"error": ...} (and whatever was measured), so one
    bad scenario does not lose the others."""
    args = [sys.executable, "-m", "planner.cli", "what-if", str(path), "-o", "json", "--quiet", "--solver", solver]
    if time_limit is not None:
        args += ["--time-limit", f"{time_limit:g}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    env.pop("STOWPLAN_WHAT_IF_SOLVER", None)
    env.pop("STOWPLAN_WHAT_IF_TIME_LIMIT", None)
    started = time.monotonic()
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(REPO))
    except subprocess.TimeoutExpired:
        return {"method": solver, "error": f"no plan within {timeout:.0f} s (killed)",
                "wall": round(time.monotonic() - started, 3)}
    wall = round(time.monotonic() - started, 3)
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return {"method": solver, "error": f"exit {done.returncode}: {message}", "wall": wall}
    plan = json.loads(done.stdout)
    record = plan_record(plan, wall)
    if keep_plan:
        record["plan"] = plan
    return record


def plan_record(plan: Mapping[str, Any], wall: float | None = None) -> dict[str, Any]:
    """The measured numbers of one JSON plan (solver report + REFERENCE §5 summary)."""
    solver = plan["solver"]
    summary = plan.get("summary", {})
    objective, bound = solver.get("objective"), solver.get("bound")
    ratio = None
    if isinstance(objective, (int, float)) and isinstance(bound, (int, float)) and bound > 0:
        ratio = round(objective / bound, 6)
    return {
        "method": solver["method"],
        "status": solver["status"],
        "message": solver.get("message", ""),
        "objective": objective,
        "bound": bound,
        "ratio": ratio,
        "gap": solver.get("gap"),
        "seconds": {key: float(solver.get("seconds", {}).get(key, 0.0)) for key in SECONDS_KEYS},
        "wall": wall,
        "stages": [dict(stage) for stage in solver.get("stages", [])],
        "peak_rss_mib": solver.get("peak_rss_mib"),
        "model": dict(solver.get("model", {})),
        "served_gpus": {int(k): v for k, v in summary.get("served_gpus", {}).items()},
        "served_cores": {int(k): v for k, v in summary.get("served_cores", {}).items()},
        "utilization": dict(summary.get("utilization", {})),
        "admitted": summary.get("admitted"),
        "evicted": summary.get("evicted"),
        "pending": summary.get("pending"),
        "preemption_cost": summary.get("preemption_cost"),
        "locality": dict(summary.get("locality", {})),
        "free_domains": dict(summary.get("free_domains", {})),
    }


# ---------------------------------------------------------------- scenarios and fixtures

def snapshot_shape(document: Mapping[str, Any]) -> dict[str, int]:
    """Nodes, GPUs, pending and running workloads of a generated snapshot."""
    nodes = gpus = pending = running = 0
    for item in document.get("items", []):
        kind = item.get("kind")
        if kind == "Node":
            nodes += 1
            allocatable = item.get("status", {}).get("allocatable", {})
            gpus += sum(int(v) for k, v in allocatable.items() if k.endswith("/gpu"))
        elif kind in ("Job", "JobSet"):
            if item.get("spec", {}).get("suspend"):
                pending += 1
            else:
                running += 1
    return {"nodes": nodes, "gpus": gpus, "pending": pending, "running": running}


def bench_scenario(name: str, spec: Any, target: Target, workdir: Path, factor: float = 1.0,
                   say: Say = silent) -> dict[str, Any]:
    """Generate `spec` to JSON in `workdir`, plan it with milp and with greedy; one row."""
    from planner.tools.generate import generate, to_json

    started = time.monotonic()
    document = generate(spec)
    path = workdir / f"bench-{name}.json"
    path.write_text(to_json(document), encoding="utf-8")
    shape = snapshot_shape(document)
    del document
    generated = round(time.monotonic() - started, 3)
    limit = target.time_limit(factor)
    say(f"{name}: {shape['nodes']} nodes, {shape['pending']} pending + {shape['running']} running "
        f"(generated in {generated:.1f} s, {path.stat().st_size / 2**20:.1f} MiB); time limit {limit:g} s")
    timeout = max(600.0, 20 * target.seconds + 120.0)  # a safety net, far above any target
    runs = {}
    # The MILP at the limit and at half of it (targets must hold with margin against the
    # machine's speed), greedy once: it has no limit of its own.
    for key, solver, seconds in (("milp", "milp", limit), ("milp_half", "milp", round(limit / 2, 3)),
                                 ("greedy", "greedy", limit)):
        runs[key] = plan_in_subprocess(path, solver, seconds, timeout)
        say(f"{name} {solver} at {seconds:g} s: {brief(runs[key])}")
    return {"scenario": name, "levels": len(spec.levels), **shape, "generate_seconds": generated,
            "time_limit": limit, "target": target, **runs}


def fixture_paths(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and (p.suffix == ".json" or (p.suffix == ".yaml" and not p.name.endswith(".plan.yaml"))))


def bench_fixture(path: Path, say: Say = silent) -> dict[str, Any]:
    runs = {solver: plan_in_subprocess(path, solver) for solver in ("milp", "greedy")}
    say(f"{path.name}: milp {brief(runs['milp'])}; greedy {brief(runs['greedy'])}")
    return {"fixture": path.name, "milp": runs["milp"], "greedy": runs["greedy"]}


def brief(record: Mapping[str, Any]) -> str:
    if "error" in record:
        return f"FAILED {record['error']}"
    return (f"{record['status']} in {record['seconds']['total']:.2f} s (process {record['wall']:.2f} s), "
            f"obj/bound {fmt(record['ratio'], 4)}, gap {fmt(record['gap'], 4)}, "
            f"{record['admitted']} admitted, {record['evicted']} evicted, peak RSS {fmt(record['peak_rss_mib'], 0)} MiB")


# ---------------------------------------------------------------- analysis

def growth_exponent(points: Iterable[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(time) against log(size); None with < 2 sizes."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def shortfalls(milp: Mapping[int, float], greedy: Mapping[int, float]) -> list[int]:
    """Priorities (highest first) at which the MILP serves fewer GPUs than greedy."""
    return [p for p in sorted(set(milp) | set(greedy), reverse=True) if milp.get(p, 0) < greedy.get(p, 0)]


def versus(milp: Mapping[int, float], greedy: Mapping[int, float]) -> str:
    """`better`/`equal`/`WORSE` (priority first), and where the MILP serves less than greedy."""
    less = shortfalls(milp, greedy)
    return served_order(milp, greedy) + (f"; less at {', '.join(map(str, less))}" if less else "; ≥ at every priority")


def served_order(milp: Mapping[int, float], greedy: Mapping[int, float]) -> str:
    """Lexicographic, highest priority first (the objective's order): better, equal or WORSE."""
    for priority in sorted(set(milp) | set(greedy), reverse=True):
        a, b = milp.get(priority, 0), greedy.get(priority, 0)
        if a != b:
            return "better" if a > b else "WORSE"
    return "equal"


# ---------------------------------------------------------------- markdown

def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if value.is_integer() and digits <= 3:
            return str(int(value))
        return f"{value:.{digits}f}"
    return str(value)


def _level(name: str) -> str:
    short = name.rsplit("/", 1)[-1]
    return short.removeprefix("topology-")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def served_text(milp: Mapping[str, Any], greedy: Mapping[str, Any]) -> str:
    a, b = milp.get("served_gpus", {}), greedy.get("served_gpus", {})
    parts = []
    for priority in sorted(set(a) | set(b), reverse=True):
        x, y = a.get(priority, 0), b.get(priority, 0)
        ratio = f" ({x / y:.2f})" if y else ""
        parts.append(f"{priority}: {fmt(x)}/{fmt(y)}{ratio}")
    return "; ".join(parts)


def _pair(milp: Mapping[str, Any], greedy: Mapping[str, Any], key: str, digits: int = 1) -> str:
    return f"{fmt(_round(milp.get(key), digits), digits)} / {fmt(_round(greedy.get(key), digits), digits)}"


def _round(value: Any, digits: int) -> Any:
    return round(float(value), digits) if isinstance(value, (int, float)) else value


def _check_max(value: float | None, target: float | None, unit: str) -> str:
    if value is None:
        return "—"
    shown = f"{value:.2f}" if unit == "s" else f"{value:.0f}"
    if target is None:
        return shown
    if value <= target:
        return f"{shown} ✓"
    return f"{shown} ✗ (+{value - target:.2f} {unit}, {value / target:.1f}×)" if unit == "s" else \
        f"{shown} ✗ (+{value - target:.0f} {unit})"


def _check_ratio(record: Mapping[str, Any], target: Target, greedy: Mapping[str, Any]) -> str:
    ratio, gap = record.get("ratio"), record.get("gap")
    shown = f"{fmt(ratio, 4)} (gap {fmt(gap, 4)})"
    if target.ratio is None:
        order = served_order(record.get("served_gpus", {}), greedy.get("served_gpus", {}))
        return f"{shown}, served vs greedy: {order}"
    if ratio is None:
        return f"{shown} ✗"
    if ratio >= target.ratio:
        return f"{shown} ✓"
    return f"{shown} ✗ (−{target.ratio - ratio:.4f})"


def _half(row: Mapping[str, Any], target: Target, greedy: Mapping[str, Any]) -> str:
    """The MILP at half the limit: its total seconds and its objective/bound."""
    half = row.get("milp_half") or {"error": "not run"}
    if "error" in half:
        return f"FAILED: {half['error']}"
    limit = target.seconds / 2
    return f"{_check_max(half['seconds']['total'], limit, 's')}; {_check_ratio(half, target, greedy)}"


def _ratio_target(target: Target) -> str:
    return "≥ greedy, gap reported" if target.ratio is None else f"≥ {target.ratio:g}"


def scale_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> list[str]:
    out = [f"Measured {meta['date']} at commit `{meta['commit']}` on {meta['machine']}; "
           f"load average {meta['load_start']} at start, {meta['load_end']} at the end "
           f"(a shared machine: other processes ran beside the benchmark). Command: `{meta['command']}`.", ""]
    table = []
    for row in rows:
        m, g, t = row["milp"], row["greedy"], row["target"]
        failed = "error" in m
        table.append([
            row["scenario"],
            f"{row['nodes']:,} / {row['gpus']:,}",
            str(row["levels"]),
            f"{row['pending']:,} + {row['running']:,}",
            f"{row['time_limit']:g}",
            f"FAILED: {m['error']}" if failed else _check_max(m["seconds"]["total"], t.seconds, "s"),
            f"≤ {t.seconds:g} s",
            "—" if failed else f"{status_text(m)}: {_check_ratio(m, t, g)}",
            _half(row, t, g),
            _ratio_target(t),
            "—" if failed else _check_max(m.get("peak_rss_mib"), t.rss_mib, "MiB"),
            "—" if t.rss_mib is None else f"≤ {t.rss_mib:,.0f}",
            f"FAILED: {g['error']}" if "error" in g else f"{g['seconds']['total']:.2f}",
            "—" if failed or "error" in g else served_text(m, g),
            "—" if failed or "error" in g else versus(m["served_gpus"], g["served_gpus"]),
            "—" if failed or "error" in g else _pair(m, g, "evicted", 0),
            "—" if failed or "error" in g else _pair(m, g, "preemption_cost", 1),
        ])
    out += markdown_table(["scenario", "nodes / GPUs", "levels", "pending + running", "time limit s", "total s (milp)",
                   "target", "objective / bound", "at half the limit", "target", "peak RSS MiB (milp)", "target", "greedy total s",
                   "served GPUs by priority, milp/greedy", "milp vs greedy (priority first; where less)",
                   "evictions milp / greedy", "preemption cost milp / greedy"], table)
    out += ["", "`total s` is the plan's own `seconds.total` (read to verified plan, one process); the process, "
            "interpreter start and imports included, took:", ""]
    out += markdown_table(["scenario", "milp process s", "greedy process s", "milp peak RSS MiB", "greedy peak RSS MiB",
                   "generate s"],
                  [[r["scenario"], fmt(r["milp"].get("wall"), 2), fmt(r["greedy"].get("wall"), 2),
                    fmt(r["milp"].get("peak_rss_mib"), 1), fmt(r["greedy"].get("peak_rss_mib"), 1),
                    fmt(r["generate_seconds"], 2)] for r in rows])

    out += ["", "The model the stages solve (planner.milp.model):", ""]
    out += markdown_table(["scenario", "columns", "rows", "nonzeros"],
                  [[r["scenario"]] + [fmt(r["milp"].get("model", {}).get(k)) for k in ("columns", "rows", "nonzeros")]
                   for r in rows if "error" not in r["milp"]])

    out += ["", "### Where the time goes (milp)", ""]
    shares = []
    for row in rows:
        m = row["milp"]
        if "error" in m:
            continue
        s = m["seconds"]
        total = s["total"] or 1.0
        shares.append([row["scenario"]] + [f"{s[k]:.2f} ({100 * s[k] / total:.0f}%)" for k in SECONDS_KEYS[:-1]]
                      + [f"{s['total']:.2f}",
                         "; ".join(f"{st.get('stage')}: {st.get('status')} {fmt(st.get('seconds'), 2)} s"
                                   for st in m["stages"]) or f"— ({status_text(m)})"])
    out += markdown_table(["scenario", "read s", "build s", "solve s", "verify s", "total s", "solve stages"], shares)

    out += ["", "### Growth", ""]
    measured = [r for r in rows if "error" not in r["milp"]]
    names = ", ".join(r["scenario"] for r in measured)
    growth = []
    for label, solver, key in (("milp total", "milp", "total"), ("milp read", "milp", "read"),
                               ("milp build", "milp", "build"), ("milp solve", "milp", "solve"),
                               ("milp verify", "milp", "verify"), ("greedy total", "greedy", "total")):
        kept = [r for r in measured if "error" not in r[solver]]
        points = [(r["nodes"], r[solver]["seconds"][key]) for r in kept]
        steps = "; ".join(f"{a['scenario']}→{b['scenario']} {fmt(growth_exponent([p, q]), 2)}"
                          for (a, p), (b, q) in zip(zip(kept, points), zip(kept[1:], points[1:])))
        growth.append([label, fmt(growth_exponent(points), 2), steps or "—",
                       " → ".join(f"{y:.2f}" for _, y in points)])
    out += [f"Exponent k in time ∝ nodes^k, least squares on log–log over {names or 'nothing'} "
            "(node counts grow with workloads: each preset scales both):", ""]
    out += markdown_table(["time", "exponent k", "k per step", "seconds per scenario"], growth)

    out += ["", "### Summary metrics (REFERENCE §5), milp / greedy", ""]
    metrics = []
    for row in rows:
        m, g = row["milp"], row["greedy"]
        if "error" in m or "error" in g:
            continue
        loc_m, loc_g = m["locality"], g["locality"]
        metrics.append([
            row["scenario"],
            f"{fmt(m['utilization'].get('gpu'), 4)} / {fmt(g['utilization'].get('gpu'), 4)}",
            f"{m['admitted']} / {g['admitted']}",
            f"{m['pending']} / {g['pending']}",
            f"{fmt(loc_m.get('one_domain_share'), 3)}, {fmt(loc_m.get('mean_domains'), 3)} ({loc_m.get('pod_sets')}) / "
            f"{fmt(loc_g.get('one_domain_share'), 3)}, {fmt(loc_g.get('mean_domains'), 3)} ({loc_g.get('pod_sets')})",
            _free(m["free_domains"], g["free_domains"]),
        ])
    out += markdown_table(["scenario", "GPU utilization", "admitted", "pending",
                   "locality: one-domain share, mean domains (pod sets)", "free domains by level"], metrics)
    return out


def status_text(record: Mapping[str, Any]) -> str:
    return str(record["status"]) + (f" ({record['message']})" if record.get("message") else "")


def _free(milp: Mapping[str, Any], greedy: Mapping[str, Any]) -> str:
    return "; ".join(f"{_level(level)} {milp.get(level, 0)}/{greedy.get(level, 0)}"
                     for level in sorted(set(milp) | set(greedy)))


def fixtures_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> list[str]:
    out = [f"Measured {meta['date']} at commit `{meta['commit']}`, each plan in its own process with the "
           "snapshot's policy (time limit 20 s unless the fixture sets one).", ""]
    table = []
    for row in rows:
        g = row["greedy"]
        for solver in ("milp", "greedy"):
            r = row[solver]
            if "error" in r:
                table.append([row["fixture"], solver, f"FAILED: {r['error']}"] + ["—"] * 10)
                continue
            loc = r["locality"]
            compared = "—"
            if solver == "milp" and "error" not in g:
                compared = versus(r["served_gpus"], g["served_gpus"])
            table.append([
                row["fixture"] if solver == "milp" else "",
                solver,
                status_text(r),
                str(r["admitted"]),
                "; ".join(f"{p}: {fmt(v)}" for p, v in sorted(r["served_gpus"].items(), reverse=True)),
                "; ".join(f"{p}: {fmt(v)}" for p, v in sorted(r.get("served_cores", {}).items(), reverse=True)),
                compared,
                f"{fmt(loc.get('one_domain_share'), 3)}, {fmt(loc.get('mean_domains'), 3)} ({loc.get('pod_sets')})",
                "; ".join(f"{_level(k)} {v}" for k, v in sorted(r["free_domains"].items())),
                str(r["evicted"]),
                fmt(_round(r["preemption_cost"], 2), 2),
                f"{r['seconds']['total']:.2f}",
                fmt(r.get("peak_rss_mib"), 0),
            ])
    out += markdown_table(["fixture", "solver", "status", "admitted", "served GPUs by priority",
                   "served cores (CPU-only work) by priority", "milp vs greedy",
                   "locality: one-domain share, mean domains (pod sets)", "free domains by level", "evictions",
                   "preemption cost", "total s", "peak RSS MiB"], table)
    out += ["", "`milp vs greedy` compares served GPUs per priority, highest first (the objective's order): "
            "`better` means the MILP serves more at the first priority where they differ; `less at P` names "
            "the priorities where it serves fewer GPUs than greedy (the price of serving more above them)."]
    return out


# ---------------------------------------------------------------- BENCHMARKS.md

INTRO = """# Benchmarks

How fast Stowplan plans, how close to optimal, and what the MILP buys over greedy
(Kueue's way: heads of queues by priority, one at a time, BestFit domains).
Regenerate everything between the `bench:` markers with

```sh
.venv/bin/stowplan bench --out BENCHMARKS.md   # S, M, L and every fixture; --xl adds XL
.venv/bin/stowplan bench --scenario S --no-fixtures    # one scenario, quick
.venv/bin/stowplan bench --json results.json           # every measured record as JSON too
.venv/bin/stowplan bench --from-json results.json      # re-render the tables, measure nothing
```

Method: each scenario is the generator's preset (`stowplan generate --preset S`,
fixed seed) written to JSON; each plan runs in its own process as
`stowplan what-if FILE -o json --quiet --time-limit T --solver milp|greedy`, and the
numbers are read from the JSON plan (`solver.seconds`, `objective`, `bound`, `gap`,
`status`, `peak_rss_mib` and the REFERENCE §5 `summary`). The targets are
end to end, and so is `--time-limit` (reading included); each plan gets its target
less 5% for what must finish past the limit and for writing the plan (S 1.9 s,
M 4.75 s, L 28.5 s, XL 114 s). A
row that misses a target is marked ✗ with the measured distance. Objective and
bound are those of the plan's own report: for greedy the bound is "every pending
workload admitted", so objective/bound compares only within a method; the
comparison between methods is the summary metrics.
"""


def marker(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def replace_section(text: str, name: str, body: str, heading: str = "") -> str:
    """`text` with the part between bench:`name`'s markers replaced by `body`.

    Without the markers, the section (heading, markers, body) is appended at the end;
    nothing outside the markers changes."""
    begin, end = marker(name)
    block = f"{begin}\n{body.rstrip()}\n{end}"
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    if start >= 0 and stop >= 0:
        return text[:start] + block + text[stop + len(end):]
    prefix = text.rstrip("\n")
    lead = f"\n\n{heading}\n\n" if heading else "\n\n"
    return (prefix + lead if prefix else (heading + "\n\n" if heading else "")) + block + "\n"


def write_benchmarks(path: Path, sections: Mapping[str, tuple[str, str]]) -> None:
    """Refresh `sections` {name: (heading, body)} in `path` (created with INTRO if missing)."""
    text = path.read_text(encoding="utf-8") if path.exists() else INTRO
    for name, (heading, body) in sections.items():
        text = replace_section(text, name, body, heading)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    os.replace(temp, path)


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages * size / 2**30:.0f} GiB RAM"
    except (ValueError, OSError):
        pass
    from importlib import metadata
    try:
        highs = metadata.version("highspy")
    except metadata.PackageNotFoundError:
        highs = "?"
    return (f"{os.cpu_count()} cores ({model or platform.machine()}){memory}, Python "
            f"{platform.python_version()}, highspy {highs}")


def commit_of_checkout() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "planner", "models"],
                               cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("STOWPLAN_BENCH_COMMIT", "unknown")
    if not sha:
        return os.environ.get("STOWPLAN_BENCH_COMMIT", "unknown")
    return sha + (" + uncommitted changes in planner/ or models/" if dirty else "")


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def jsonable(value: Any) -> Any:
    if isinstance(value, Target):
        return {"seconds": value.seconds, "ratio": value.ratio, "rss_mib": value.rss_mib}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items() if k != "markdown"}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
