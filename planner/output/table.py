"""The plan for people (`-o table`, `-o wide`), shaped like `kubectl get` and `squeue`.

An edge module: it renders planner.describe.board's rows with rich (columns measured and cut
to the terminal's width with a visible `…`; colour only when the caller says the
output is a terminal and NO_COLOR is unset) and decides nothing. Every text that came
from input is escaped (planner.base.terminal) and handed to rich as plain Text, never as
markup, so a name with `[bold]` or `:smile:` in it prints as written.

Layout: the headline (the objective in its order: served volume per priority tier
against its bound, evictions and their cost, time taken against the limit), Kueue's
way beside it, one table of workloads sorted by decision, priority and queue order,
the running work summarised, then the summary metrics that say something.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from models import Plan, Snapshot
from planner.describe import board
from planner.describe import fair_report
from planner.describe import vs_kueue
from planner.base.terminal import printable

DEFAULT_WIDTH = 120   # when the output is not a terminal and COLUMNS is unset
_STYLES = {"admit": "green", "move": "cyan", "resize": "cyan", "evict": "red", "pending": "yellow", "running": "dim"}


@dataclass(frozen=True)
class View:
    """What the reader asked to see and how the output is read."""

    wide: bool = False                    # -o wide: every flavor and node, the running work listed, no cutting
    namespace: str | None = None          # --namespace: only this namespace's rows
    queue: str | None = None              # --queue: only this ClusterQueue's or LocalQueue's rows
    summary_only: bool = False            # --summary-only: no workload rows
    width: int = DEFAULT_WIDTH            # the terminal's columns
    color: bool = False                   # a terminal, and NO_COLOR unset
    time_limit: float | None = None       # the cycle's limit (--time-limit, else the policy's)


# ---------------------------------------------------------------- small texts

def age(seconds: float | None) -> str:
    """kubectl's AGE: `45s`, `12m`, `3h12m`, `5d3h`, `200d`."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 3600 * 3:
        hours, minutes = divmod(s // 60, 60)
        return f"{minutes}m" if not hours else (f"{hours}h{minutes}m" if minutes else f"{hours}h")
    if s < 86400 * 2:
        return f"{s // 3600}h"
    if s < 86400 * 8:
        days, hours = divmod(s // 3600, 24)
        return f"{days}d{hours}h" if hours else f"{days}d"
    return f"{s // 86400}d"


def _num(value: float) -> str:
    return f"{value:.6g}"


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"


def _workload(row: board.Row, wide: bool) -> str:
    """NAMESPACE/NAME; the kind only when it is not a Job (always with -o wide)."""
    ref = row.ref
    return f"{ref.namespace}/{ref.name}" if ref.kind == "Job" and not wide else f"{ref.kind}/{ref.namespace}/{ref.name}"


# ---------------------------------------------------------------- headline

def headline(plan: Plan, snapshot: Snapshot | None, view: View) -> list[str]:
    """What was solved, how well, and in what time: the objective as its order."""
    s = plan.solver
    total = float(s.seconds.get("total", 0.0))
    limit = view.time_limit if view.time_limit is not None else (
        snapshot.policy.time_limit_seconds if snapshot is not None else None)
    when = f" at {datetime.fromtimestamp(snapshot.now, timezone.utc):%Y-%m-%dT%H:%M:%SZ}" if snapshot and snapshot.now else ""
    took = f"{total:.1f}s" + (f" of a {limit:g}s limit" if limit is not None else "")
    lines = [f"Plan for {printable(plan.source or '-')} ({plan.object_count} objects{when}): "
             f"{s.method} {s.status} in {took}"]
    if s.message:
        lines.append(f"  solver: {printable(s.message)}")
    if snapshot is None:   # a plan read back alone: the solver's numbers, said for what they are
        bound = "-" if not math.isfinite(s.bound) else _num(s.bound)
        lines.append(f"  objective summed over the stages {_num(s.objective)}, bound {bound}")
    else:
        tiers = board.tiers(plan, snapshot)
        if tiers:
            lines.append("  objective, in order (higher priority first, then volume, then less preemption cost):")
            lines += _tier_lines(plan, tiers)
    cost = sum(e.cost for e in plan.evictions)
    lines.append(f"  evicts {len(plan.evictions)}, preemption cost {_num(cost)}; admits {len(plan.admissions)}, "
                 f"{len(plan.pending)} wait")
    block = plan.summary.get(vs_kueue.KEY)
    if isinstance(block, Mapping):
        lines.append(f"  beside Kueue's way (greedy): {printable(block.get('says', ''))}")
    return lines


def _tier_lines(plan: Plan, tiers: list[board.Tier]) -> list[str]:
    proven_method = plan.solver.method not in ("greedy",) and plan.solver.status != "fallback"
    rows = []
    open_seen = False
    for tier in tiers:
        served = " + ".join(part for part in (
            f"{_num(tier.gpus)} GPUs" if tier.gpus or not tier.cores else "",
            f"{_num(tier.cores)} cores" if tier.cores else "") if part) + " served"
        if not proven_method:
            bound = "no bound (greedy)"
        elif tier.bound is None:
            bound = "not compared (a tier above is not proven)" if open_seen else "no bound"
        elif tier.bound - tier.served <= board.TOLERANCE * max(1.0, abs(tier.bound)):
            bound = "proven best"
        else:
            gap = (tier.bound - tier.served) / max(1.0, abs(tier.bound))
            bound = f"bound {_num(tier.bound)} ({gap:.2%} gap; tiers below not compared)"
            open_seen = True
        rows.append((f"priority {tier.priority}", served, bound))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return [f"    {a.ljust(widths[0])}  {b.rjust(widths[1])}   {c}" for a, b, c in rows]


# ---------------------------------------------------------------- the workloads

COLUMNS = ("WORKLOAD", "QUEUE", "PRIORITY", "WAIT", "POSITION", "PODS", "FLAVOR", "DECISION", "NODES (REASON)")
WIDE_COLUMNS = ("WORKLOAD", "QUEUE", "LOCALQUEUE", "PRIORITY", "WAIT", "POSITION", "PODS", "GPUS", "FLAVOR", "DECISION",
                "NODES (REASON)")
_NUMBERS = {"PRIORITY", "WAIT", "POSITION", "PODS", "GPUS"}
# Cut in this order when the terminal is narrow, each down to its floor (the rest is never cut).
# Every floor is at least its header's length: a narrow terminal wraps lines, never cuts a header.
_CUTS = (("NODES (REASON)", 48), ("WORKLOAD", 32), ("FLAVOR", 9), ("WORKLOAD", 28), ("NODES (REASON)", 24),
         ("QUEUE", 10), ("WORKLOAD", 16), ("NODES (REASON)", 14), ("FLAVOR", 6))
_GUTTER = 2


def fitted(header: tuple[str, ...], cells: list[list[str]], width: int | None) -> dict[str, int]:
    """Each column's width: its widest cell, then, while the line is wider than `width`,
    the cuttable columns narrowed in turn (None: never cut, as `-o wide`)."""
    widths = {name: max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(header)}
    if width is None:
        return widths
    for name, floor in _CUTS:
        over = sum(widths.values()) + _GUTTER * (len(widths) - 1) - width
        if over <= 0:
            break
        if name in widths:
            widths[name] = max(min(widths[name], floor), widths[name] - over)
    return widths


def _cells(row: board.Row, wide: bool) -> list[str]:
    where = (row.nodes_wide if wide else row.nodes) if row.decision in ("admit", "move", "resize", "running") else ""
    if row.note:
        where = f"{where} ({row.note})" if where and where != "-" else f"({row.note})"
    if row.cluster:   # planned across clusters: the nodes are the worker's
        where = f"{row.cluster}: {where}"
    value = {
        "WORKLOAD": _workload(row, wide), "QUEUE": row.queue, "LOCALQUEUE": row.local_queue,
        "PRIORITY": "-" if row.priority is None else str(row.priority), "WAIT": age(row.wait),
        "POSITION": "-" if row.position is None else str(row.position), "PODS": str(row.pods),
        "GPUS": str(row.gpus), "FLAVOR": row.flavors if wide else row.flavor, "DECISION": row.decision,
        "NODES (REASON)": where or "-",
    }
    return [printable(value[name]) for name in (WIDE_COLUMNS if wide else COLUMNS)]


def _table(rows: list[board.Row], view: View) -> Table:
    header = WIDE_COLUMNS if view.wide else COLUMNS
    cells = [_cells(row, view.wide) for row in rows]
    widths = fitted(header, cells, None if view.wide else view.width)
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, _GUTTER // 2), collapse_padding=False,
                  header_style="bold" if view.color else "", expand=False)
    for name in header:
        table.add_column(name, width=widths[name], no_wrap=True, overflow="ellipsis",
                         justify="right" if name in _NUMBERS else "left")
    for row, texts in zip(rows, cells):
        style = _STYLES.get(row.decision, "") if view.color else ""
        table.add_row(*(Text(text) for text in texts), style=style)
    return table


def _selected(rows: list[board.Row], view: View) -> list[board.Row]:
    return [r for r in rows
            if (view.namespace is None or r.ref.namespace == view.namespace)
            and (view.queue is None or view.queue in (r.queue, r.local_queue))]


def _counts(rows: list[board.Row]) -> str:
    parts = []
    for decision in board.DECISIONS:
        chosen = [r for r in rows if r.decision == decision]
        if chosen:
            gpus = sum(r.gpus for r in chosen)
            parts.append(f"{decision} {len(chosen)}" + (f" ({gpus} GPUs)" if gpus else ""))
    return ", ".join(parts) or "none"


# ---------------------------------------------------------------- summary

def _summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The section-5 metrics that say something: a per-priority map of zeros (no CPU-only
    work) and locality with no pod set preferring a topology are left out."""
    lines = []
    for key, value in summary.items():
        if key in (vs_kueue.KEY, fair_report.KEY):
            continue
        if isinstance(value, Mapping):
            if key == "locality" and not value.get("pod_sets"):
                continue
            if key.startswith("served_") and not any(float(v or 0) for v in value.values()):
                continue
            shown = ", ".join(f"{k}={_scalar(v)}" for k, v in value.items()) or "-"
        elif isinstance(value, list):
            shown = ", ".join(_scalar(v) for v in value) or "-"
        else:
            shown = _scalar(value)
        lines.append(printable(f"  {key}: {shown}"))
    return lines


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return _num(value)
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


# ---------------------------------------------------------------- all of it

def render(plan: Plan, snapshot: Snapshot | None = None, view: View = View(), before: list[str] | None = None,
           summary: Mapping[str, Any] | None = None) -> str:
    """The plan for a person. `snapshot` gives priorities, waits, queue positions and the
    running work (without it those columns print `-`); `before` are lines to print first
    (a what-if's answer); `summary` is the plan's summary as plain data (string keys)."""
    summary = plan.summary if summary is None else summary
    width = 100_000 if view.wide else max(40, view.width)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=view.color, no_color=not view.color,
                      color_system="standard" if view.color else None, highlight=False, emoji=False,
                      markup=False, soft_wrap=False, legacy_windows=False)

    def say(line: str = "", style: str = "") -> None:   # prose wraps at the width; table cells are cut
        # every line escaped here, once: a flag's value (--namespace, --queue) is echoed too
        console.print(Text(printable(line), style=style if view.color else ""))

    for line in before or ():
        say(printable(line))
    if before:
        say()
    for i, line in enumerate(headline(plan, snapshot, view)):
        say(line, "bold" if i == 0 else "")
    every = board.rows(plan, snapshot)
    chosen = _selected(every, view)
    filters = ", ".join(f"{k} {v}" for k, v in (("namespace", view.namespace), ("queue", view.queue)) if v)
    say()
    say(f"Workloads{f' ({filters})' if filters else ''}: {_counts(chosen)}")
    shown = [r for r in chosen if view.wide or r.decision != "running"]
    if not view.summary_only and shown:
        grid = _table(shown, view)
        # never narrower than the columns' floors: below them the terminal wraps, the header stays whole
        needed = sum(c.width or 0 for c in grid.columns) + _GUTTER * (len(grid.columns) - 1)
        console.width = max(width, needed)
        console.print(grid)
        console.width = width
    running = [r for r in chosen if r.decision == "running"]
    if running and not view.wide and not view.summary_only:
        say(f"Running and unchanged: {_plural(len(running), 'workload')}, {sum(r.gpus for r in running)} GPUs "
            "(listed with -o wide)")
    if summary:
        lines = _summary_lines(summary)
        if lines:
            say()
            say("Summary:")
            for line in lines:
                say(line)
        beside = vs_kueue.table_lines(dict(summary))
        if beside:
            say()
            for line in beside:
                say(printable(line))
        block = summary.get(vs_kueue.KEY)
        fair = fair_report.table_lines(dict(summary), block.get("baseline") if isinstance(block, Mapping) else None)
        if fair:
            say()
            for line in fair:
                say(printable(line))
    if plan.provisioning is not None and not view.summary_only:
        lines = provisioning_lines(plan)
        if lines:
            say()
            for line in lines:
                say(printable(line))
    return "\n".join(line.rstrip() for line in buffer.getvalue().split("\n")).rstrip("\n") + "\n"


def provisioning_lines(plan: Plan) -> list[str]:
    """The plan's ProvisioningRequests for a person: what is made, kept and deleted, and why not."""
    section = plan.provisioning
    if section is None or not (section.requests or section.deletions or section.notes):
        return []
    made = [r for r in section.requests if r.create]
    kept = [r for r in section.requests if not r.create]
    lines = [f"ProvisioningRequests: {len(made)} to create, {len(kept)} kept, {len(section.deletions)} to delete"]
    for r in made:
        nodes = ", ".join(f"{n} x{c}" for n, c in sorted(r.nodes.items())) or "no new node"
        lines.append(f"  create {r.namespace}/{r.name} for {r.workload.name} ({r.class_name}; {nodes})")
    lines += [f"  keep   {r.namespace}/{r.name}" for r in kept]
    lines += [f"  delete {d.namespace}/{d.name}: {d.reason}" for d in section.deletions]
    lines += [f"  note: {n}" for n in section.notes]
    return lines
