"""Kueue's way beside the plan: the greedy baseline's summary and the difference.

Pure: no I/O, no solver. The cycle has greedy's plan already (Kueue's own cycle, the
baseline, the MIP start and the fallback); this turns its summary and the plan's into
the `vs_kueue` block the plan's `summary` ends with:

    vs_kueue:
      baseline: {served_gpus: {...}, served_cores: {...}, admitted, evicted, pending, preemption_cost}
      difference: {served_gpus: {priority: plan - baseline}, served_cores: {...}, admitted, evicted,
                   pending, preemption_cost}
      says: "+384 GPUs at priority 100, 3 fewer evictions"

`difference` is the plan minus the baseline, so a positive `served_gpus` is what the
plan serves beyond Kueue's way. `says` reads it for a person, highest priority first,
GPUs and cores apart: `served_gpus` is GPUs only and `served_cores` the cores of
CPU-only work (REFERENCE section 5), never summed.
"""

from __future__ import annotations

from typing import Any, Mapping

KEY = "vs_kueue"
COUNTS = ("admitted", "evicted", "pending", "preemption_cost")
# Relative: two plans whose costs differ in the sixth digit (sums of the same evictions'
# costs added in another order) are the same plan, not "preemption cost -2e-06".
TOLERANCE = 1e-6


def _minus(a: float, b: float) -> int | float:
    """a - b, 0 when the two agree within TOLERANCE (relative to the larger)."""
    difference = float(a) - float(b)
    return 0 if abs(difference) <= TOLERANCE * max(1.0, abs(float(a)), abs(float(b))) else _num(difference)


def _num(value: float) -> int | float:
    rounded = round(float(value), 6) + 0.0
    return int(rounded) if rounded.is_integer() else rounded


def _per_priority(summary: Mapping[str, Any], key: str) -> dict[int, float]:
    return {int(p): float(v) for p, v in dict(summary.get(key) or {}).items()}


def baseline_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a summary the comparison keeps (greedy's, as the block's `baseline`)."""
    out: dict[str, Any] = {
        "served_gpus": {p: _num(v) for p, v in sorted(_per_priority(summary, "served_gpus").items())},
        "served_cores": {p: _num(v) for p, v in sorted(_per_priority(summary, "served_cores").items())},
    }
    for key in COUNTS:
        out[key] = _num(float(summary.get(key) or 0))
    fair = summary.get("fair_sharing")
    if isinstance(fair, Mapping):   # with fair sharing on: greedy's share per queue
        out["fair_sharing"] = {name: q.get("share") for name, q in dict(fair.get("queues") or {}).items()}
    return out


def compare(plan_summary: Mapping[str, Any], baseline_summary: Mapping[str, Any]) -> dict[str, Any]:
    """The `vs_kueue` block: `baseline_summary` (greedy's) and the plan's minus it."""
    plan, base = baseline_of(plan_summary), baseline_of(baseline_summary)
    priorities = sorted(set(plan["served_gpus"]) | set(base["served_gpus"]))
    served = {p: _minus(plan["served_gpus"].get(p, 0), base["served_gpus"].get(p, 0)) for p in priorities}
    cores = {p: _minus(plan["served_cores"].get(p, 0), base["served_cores"].get(p, 0)) for p in priorities}
    difference: dict[str, Any] = {"served_gpus": served, "served_cores": cores}
    for key in COUNTS:
        difference[key] = _minus(plan[key], base[key])
    return {"baseline": base, "difference": difference, "says": says(served, cores, difference)}


def gain_gpus(block: Mapping[str, Any]) -> dict[int, float]:
    """GPUs the plan serves beyond Kueue's way, per priority (GPUs only)."""
    return {int(p): float(v) for p, v in dict(block.get("difference", {}).get("served_gpus", {})).items()}


def _signed(value: float) -> str:
    text = f"{abs(value):g}"
    return ("+" if value > 0 else "-") + text


def _fewer_more(value: float, noun: str, plural: str) -> str:
    amount = abs(value)
    word = noun if amount == 1 else plural
    return f"{amount:g} {'more' if value > 0 else 'fewer'} {word}"


def says(served: Mapping[int, float], cores: Mapping[int, float], difference: Mapping[str, Any]) -> str:
    """`+384 GPUs at priority 100, 2 more admitted, 3 fewer evictions`, or `same as Kueue's way`.
    `served` is GPUs per priority, `cores` the cores of CPU-only work per priority."""
    parts = []
    for priority in sorted(set(served) | set(cores), reverse=True):
        core_delta = float(cores.get(priority, 0))
        gpu_delta = float(served.get(priority, 0))
        if round(gpu_delta, 6):
            parts.append(f"{_signed(_num(gpu_delta))} GPUs at priority {priority}")
        if round(core_delta, 6):
            parts.append(f"{_signed(_num(core_delta))} cores at priority {priority}")
    if difference.get("admitted"):
        parts.append(_fewer_more(difference["admitted"], "admitted", "admitted"))
    if difference.get("evicted"):
        parts.append(_fewer_more(difference["evicted"], "eviction", "evictions"))
    if difference.get("preemption_cost"):
        parts.append(f"preemption cost {_signed(difference['preemption_cost'])}")
    return ", ".join(parts) if parts else "same as Kueue's way"


def table_lines(summary: Mapping[str, Any]) -> list[str]:
    """The block for the table output: per priority plan / Kueue's way / difference, then
    the counts, then what it says. Empty when the summary has no block."""
    block = summary.get(KEY)
    if not isinstance(block, Mapping):
        return []
    base, diff = block["baseline"], block["difference"]
    rows = [("", "PLAN", "KUEUE", "DIFF")]
    for key, unit in (("served_gpus", "GPUs"), ("served_cores", "cores")):
        plan_served = dict(summary.get(key) or {})
        based = dict(base.get(key) or {})
        priorities = sorted(set(plan_served) | set(based), key=lambda p: -int(p))
        if unit == "cores" and not any(plan_served.get(p) or based.get(p) for p in priorities):
            continue   # no CPU-only work on either side: GPU rows only, as before
        for priority in priorities:
            rows.append((f"{unit} at priority {priority}", _text(plan_served.get(priority, 0)),
                         _text(based.get(priority, 0)),
                         _delta(float(plan_served.get(priority, 0)) - float(based.get(priority, 0)))))
    for key in COUNTS:
        rows.append((key, _text(summary.get(key, 0)), _text(base[key]), _delta(diff[key])))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["Kueue's way (greedy) beside this plan: " + str(block["says"])]
    for row in rows:
        lines.append("  " + "  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]))
    return lines


def _text(value: Any) -> str:
    return f"{float(value):g}"


def _delta(value: Any) -> str:
    value = float(value)
    return f"{value:+g}" if value else "0"
