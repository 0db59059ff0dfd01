"""`stowplan bench`'s family section: issue 32's targets on members of the generated family.

For each scale and seed, the family's member (planner/tools/family.py) is written to
JSON and planned three times, each in its own process as a user runs it
(`bench.plan_in_subprocess`): the MILP at the scale's time limit (its target less 5%, as
the scale section: S 1.9 s, M 4.75 s, L 28.5 s, XL 114 s) and at half of it, greedy
once. Each target is then judged per member from the JSON plans alone:

- verified: every plan was written (what-if exits 3 when the plan fails the verifier);
- in time: the MILP's `seconds.total` within its limit + 5%;
- Kueue's way: the MILP's served GPUs per priority at least greedy's at the first
  priority where they differ (REFERENCE §5 `served_gpus`, highest priority first);
- tiers: every priority tier's stage objective within the target share of its bound
  (the plan's `solver.stages` named `priority P`; M 0.98, L 0.95);
- greedy's `seconds.total` (M 1 s, L 10 s) and the peak RSS of the three processes
  (M 1 GiB, L 4 GiB).

The section renders from the records alone, so `bench --from-json` re-renders it.
Nothing is asserted here: a member that misses a target is marked ✗ with what missed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from planner.tools import bench
from planner.tools.family import describe, family, running_share
from planner.tools.generate import generate, to_json

# Seeds no one tuned on (change them, never pick them by their results).
FAMILY_SEEDS: dict[str, tuple[int, ...]] = {
    "tiny": (1101, 1102),
    "S": (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008),
    "M": (2001, 2002, 2003),
    "L": (3001, 3002),
    "XL": (4001,),
}
DEFAULT_FAMILY_SCALES = ("S", "M")
RUNS = (("milp", "at the limit"), ("milp_half", "at half"))
TOLERANCE = 1e-6


@dataclass(frozen=True)
class FamilyTarget:
    """Issue 32's targets for one scale (None: no target); the time limit is the scale
    section's (bench.TARGETS: the target less 5%)."""

    limit: bench.Target
    tier_ratio: float | None      # each priority tier's objective at least this share of its bound
    greedy_seconds: float | None
    rss_mib: float | None


FAMILY_TARGETS: dict[str, FamilyTarget] = {
    "tiny": FamilyTarget(bench.TARGETS["S"], None, None, None),     # for tests: S's limit, no other target
    "S": FamilyTarget(bench.TARGETS["S"], None, None, None),
    "M": FamilyTarget(bench.TARGETS["M"], 0.98, 1.0, 1024.0),
    "L": FamilyTarget(bench.TARGETS["L"], 0.95, 10.0, 4096.0),
    "XL": FamilyTarget(bench.TARGETS["XL"], None, None, bench.TARGETS["XL"].rss_mib),
}


# ---------------------------------------------------------------- measuring

def bench_member(scale: str, seed: int, workdir: Path, factor: float = 1.0,
                 say: bench.Say = bench.silent) -> dict[str, Any]:
    """Generate the member, plan it three times; its row (plain values only, for --json)."""

    spec = family(seed, scale)
    document = generate(spec)
    path = workdir / f"family-{scale}-{seed}.json"
    path.write_text(to_json(document), encoding="utf-8")
    shape = bench.snapshot_shape(document)
    share = running_share(document)
    del document
    target = FAMILY_TARGETS[scale]
    limit = target.limit.time_limit(factor)
    say(f"family {scale} seed {seed}: {describe(spec)}; running share {share:.2f}; time limit {limit:g} s")
    timeout = max(600.0, 20 * target.limit.seconds + 120.0)
    runs = {}
    for key, solver, seconds in (("milp", "milp", limit), ("milp_half", "milp", round(limit / 2, 3)),
                                 ("greedy", "greedy", limit)):
        started = time.monotonic()
        runs[key] = bench.plan_in_subprocess(path, solver, seconds, timeout)
        say(f"family {scale} seed {seed} {key} ({time.monotonic() - started:.1f} s): {bench.brief(runs[key])}")
    return {"scale": scale, "seed": seed, "shape": describe(spec), **shape, "running_share": round(share, 4),
            "time_limit": limit, "tier_ratio": target.tier_ratio, "greedy_seconds": target.greedy_seconds,
            "rss_mib": target.rss_mib, **runs}


def run_family(scales: Sequence[str], seeds: Sequence[int] | None, workdir: Path, factor: float = 1.0,
               say: bench.Say = bench.silent) -> list[dict[str, Any]]:
    """Every member of `scales` (each scale's FAMILY_SEEDS unless `seeds`)."""
    return [bench_member(scale, seed, workdir, factor, say)
            for scale in scales for seed in (seeds or FAMILY_SEEDS[scale])]


# ---------------------------------------------------------------- judging (records only)

Result = tuple[bool, str]          # passed, and what missed when not


def tiers_of(record: Mapping[str, Any]) -> list[tuple[int, float, float]]:
    """(priority, stage objective, stage bound) of each priority tier, highest first: the
    stages named `priority P` alone, where the chosen plan stands (the search's passes,
    `priority P (pass k)`, are how it got there)."""
    out = []
    for stage in record.get("stages", []):
        name = str(stage.get("stage", ""))
        words = name.split()
        if len(words) == 2 and words[0] == "priority" and words[1].lstrip("-").isdigit() \
                and isinstance(stage.get("objective"), (int, float)) and isinstance(stage.get("bound"), (int, float)):
            out.append((int(name.split()[1]), float(stage["objective"]), float(stage["bound"])))
    return sorted(out, reverse=True)


def tier_holds(objective: float, bound: float, ratio: float) -> bool:
    """objective >= ratio x bound, read for any sign: short of the bound by at most
    (1 - ratio) of its size (a tier that evicts more than it admits has a negative bound)."""
    return objective >= bound - (1.0 - ratio) * abs(bound) - TOLERANCE


def _limit(row: Mapping[str, Any], key: str) -> float:
    limit = float(row["time_limit"])
    return limit / 2 if key == "milp_half" else limit


def judge_verified(row: Mapping[str, Any]) -> list[Result]:
    return [("error" not in row[key], f"seed {row['seed']} {key}: {row[key].get('error')}")
            for key in ("milp", "milp_half", "greedy")]


def judge_in_time(row: Mapping[str, Any]) -> list[Result]:
    out = []
    for key, label in RUNS:
        record, allowed = row[key], _limit(row, key) * (1 + bench.ALLOWANCE)
        if "error" in record:
            out.append((False, f"seed {row['seed']} {label}: no plan"))
            continue
        total = record["seconds"]["total"]
        out.append((total <= allowed, f"seed {row['seed']} {label}: {total:.2f} s > {allowed:.4g} s"))
    return out


def judge_kueue(row: Mapping[str, Any]) -> list[Result]:
    greedy, out = row["greedy"], []
    for key, label in RUNS:
        record = row[key]
        if "error" in record or "error" in greedy:
            out.append((False, f"seed {row['seed']} {label}: no plan to compare"))
            continue
        order = bench.served_order(record["served_gpus"], greedy["served_gpus"])
        first = _first_difference(record["served_gpus"], greedy["served_gpus"])
        out.append((order != "WORSE", f"seed {row['seed']} {label}: {first}"))
    return out


def _first_difference(milp: Mapping[int, float], greedy: Mapping[int, float]) -> str:
    for priority in sorted(set(milp) | set(greedy), reverse=True):
        a, b = milp.get(priority, 0), greedy.get(priority, 0)
        if a != b:
            return f"priority {priority}: {bench.fmt(a)} GPUs against greedy's {bench.fmt(b)}"
    return "equal"


def judge_tiers(row: Mapping[str, Any]) -> list[Result] | None:
    ratio = row.get("tier_ratio")
    if ratio is None:
        return None
    out = []
    for key, label in RUNS:
        record = row[key]
        if "error" in record:
            out.append((False, f"seed {row['seed']} {label}: no plan"))
            continue
        tiers = tiers_of(record)
        short = [f"{p}: {_ratio(o, b)}" for p, o, b in tiers if not tier_holds(o, b, ratio)]
        out.append((bool(tiers) and not short,
                    f"seed {row['seed']} {label}: " + (", ".join(short) or "no priority stages")))
    return out


def judge_greedy(row: Mapping[str, Any]) -> list[Result] | None:
    target, greedy = row.get("greedy_seconds"), row["greedy"]
    if target is None:
        return None
    if "error" in greedy:
        return [(False, f"seed {row['seed']}: no plan")]
    total = greedy["seconds"]["total"]
    return [(total <= target, f"seed {row['seed']}: {total:.2f} s")]


def judge_rss(row: Mapping[str, Any]) -> list[Result] | None:
    target = row.get("rss_mib")
    if target is None:
        return None
    peak = peak_rss(row)
    if peak is None:
        return [(False, f"seed {row['seed']}: not measured")]
    return [(peak <= target, f"seed {row['seed']}: {peak:,.0f} MiB")]


def peak_rss(row: Mapping[str, Any]) -> float | None:
    values = [row[k].get("peak_rss_mib") for k in ("milp", "milp_half", "greedy")]
    measured = [float(v) for v in values if isinstance(v, (int, float))]
    return max(measured) if measured else None


def _ratio(objective: float, bound: float) -> str:
    if abs(bound - objective) <= TOLERANCE:
        return f"{bench.fmt(objective)}/{bench.fmt(bound)} (1)"
    shown = f" ({objective / bound:.3f})" if bound > 0 else ""
    return f"{bench.fmt(round(objective, 1), 1)}/{bench.fmt(round(bound, 1), 1)}{shown}"


Judge = Callable[[Mapping[str, Any]], "list[Result] | None"]
CHECKS: tuple[tuple[str, Judge], ...] = (
    ("every plan verified (MILP at the limit and at half, greedy)", judge_verified),
    ("returned within the limit + 5% (at the limit and at half)", judge_in_time),
    ("serves at least Kueue's way at the first priority where they differ", judge_kueue),
    ("every priority tier within its target of its valid bound (M 0.98, L 0.95)", judge_tiers),
    ("greedy (Kueue's way) in time (M 1 s, L 10 s)", judge_greedy),
    ("peak RSS (M 1 GiB, L 4 GiB)", judge_rss),
)


def verdicts(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per target across the family: per scale ✓ or ✗ with what missed."""
    scales = list(dict.fromkeys(row["scale"] for row in rows))
    lines = []
    for title, judge in CHECKS:
        parts = []
        for scale in scales:
            results = [r for row in rows if row["scale"] == scale for r in (judge(row) or [])]
            if not any(judge(row) is not None for row in rows if row["scale"] == scale):
                parts.append(f"{scale} — (no target)")
                continue
            passed = sum(ok for ok, _ in results)
            missed = [why for ok, why in results if not ok]
            mark = "✓" if not missed else "✗"
            parts.append(f"{scale} {mark} {passed} of {len(results)}" + (f" ({'; '.join(missed)})" if missed else ""))
        lines.append(f"- **{title}**: " + "; ".join(parts))
    return lines


# ---------------------------------------------------------------- markdown

def _cell(results: list[Result] | None, shown: str) -> str:
    if results is None:
        return shown
    return f"{shown} {'✓' if all(ok for ok, _ in results) else '✗'}"


def _seconds(row: Mapping[str, Any], key: str) -> str:
    record = row[key]
    if "error" in record:
        return f"FAILED: {record['error']}"
    allowed = _limit(row, key) * (1 + bench.ALLOWANCE)
    total = record["seconds"]["total"]
    return f"{total:.2f} {'✓' if total <= allowed else '✗'}"


def _tiers(row: Mapping[str, Any], key: str) -> str:
    record = row[key]
    if "error" in record:
        return "—"
    ratio = row.get("tier_ratio")
    shown = "; ".join(f"{p}: {_ratio(o, b)}" + ("" if ratio is None else (" ✓" if tier_holds(o, b, ratio) else " ✗"))
                      for p, o, b in tiers_of(record))
    return f"{record['status']}: {shown}" if shown else f"{bench.status_text(record)}: no priority stages"


def _versus(row: Mapping[str, Any]) -> str:
    greedy = row["greedy"]
    parts = []
    for key, _ in RUNS:
        record = row[key]
        if "error" in record or "error" in greedy:
            parts.append("—")
            continue
        order = bench.served_order(record["served_gpus"], greedy["served_gpus"])
        parts.append(f"{order} {'✗' if order == 'WORSE' else '✓'}")
    return " / ".join(parts)


def family_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> list[str]:
    out = [f"Measured {meta['date']} at commit `{meta['commit']}` on {meta['machine']}; load average "
           f"{meta['load_start']} at start, {meta.get('load_end', '?')} at the end. Command: `{meta['command']}`.",
           "", "Verdict across the family (each target, per scale):", ""]
    out += verdicts(rows)
    for scale in dict.fromkeys(row["scale"] for row in rows):
        members = [row for row in rows if row["scale"] == scale]
        limit = float(members[0]["time_limit"])
        target = members[0]
        out += ["", f"### {scale}: time limit {limit:g} s (≤ {limit * (1 + bench.ALLOWANCE):.4g} s), at half "
                    f"{limit / 2:g} s (≤ {limit / 2 * (1 + bench.ALLOWANCE):.4g} s)", ""]
        table = []
        for row in members:
            greedy = row["greedy"]
            table.append([
                str(row["seed"]), row["shape"],
                f"{row['nodes']:,} / {row['gpus']:,}; {row['pending']:,} + {row['running']:,}; "
                f"{row['running_share']:.0%}",
                " / ".join("✓" if ok else "✗" for ok, _ in judge_verified(row)),
                _seconds(row, "milp"), _seconds(row, "milp_half"), _versus(row),
                bench.served_text(row["milp"], greedy) if "error" not in row["milp"] and "error" not in greedy else "—",
                _tiers(row, "milp"), _tiers(row, "milp_half"),
                "FAILED" if "error" in greedy else _cell(judge_greedy(row), f"{greedy['seconds']['total']:.2f}"),
                _cell(judge_rss(row), bench.fmt(peak_rss(row), 0)),
            ])
        greedy_target = "—" if target.get("greedy_seconds") is None else f"≤ {target['greedy_seconds']:g}"
        rss_target = "—" if target.get("rss_mib") is None else f"≤ {target['rss_mib']:,.0f}"
        tier_target = "" if target.get("tier_ratio") is None else f" (≥ {target['tier_ratio']:g})"
        out += bench.markdown_table(["seed", "shape (what the seed drew)", "nodes / GPUs; pending + running; GPUs running",
                             "verified milp / half / greedy", "milp total s", "at half s",
                             "≥ Kueue's way, limit / half", "served GPUs by priority, milp/greedy",
                             f"tiers objective/bound{tier_target}", "at half",
                             f"greedy s ({greedy_target})", f"peak RSS MiB ({rss_target})"], table)
    return out
