"""A simulation's result (planner/whatif/simulate.py, as plain data) -> JSON, YAML, a table, a picture.

An edge module (output side): it decides nothing. The JSON keeps the shape the outside
checks read: `planners.<solver>` with `utilization_useful`, `wait_seconds` (per priority
value: p50, p95, p99), `evictions`, `lost_gpu_hours`, `admitted`, `cycles` and
`cycle_seconds` (p50, max). matplotlib is imported only when a picture is asked for.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Callable, Mapping

import yaml

from planner.base.terminal import printable
from planner.output.files import write_whole

API_VERSION = "stowplan.io/v1alpha1"
FORMATS = ("table", "yaml", "json")
PICTURES = (".svg", ".png")


def document(planners: Mapping[str, Mapping[str, Any]], **about: Any) -> dict[str, Any]:
    """The simulation as one document: what was run (`about`), then each planner's metrics."""
    return {"apiVersion": API_VERSION, "kind": "Simulation", **about,
            "planners": {name: dict(summary) for name, summary in planners.items()}}


def render(doc: Mapping[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=False, allow_unicode=True, width=4096))
    if fmt == "table":
        return to_table(doc)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _rows(planners: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    names = list(planners)
    rows: list[tuple[str, ...]] = []

    def row(label: str, fn: Any) -> None:
        rows.append((label, *(fn(planners[n]) for n in names)))

    row("useful GPU utilisation", lambda s: f"{s['utilization_useful']:.3f}")
    row("allocated GPU utilisation", lambda s: f"{s['utilization_allocated']:.3f}")
    row("admitted", lambda s: str(s["admitted"]))
    row("admissions per minute", lambda s: f"{s['admissions_per_minute']:.2f}")
    row("evictions", lambda s: f"{s['evictions']} ({s['evictions_per_hour']:.2f}/h)")
    row("lost GPU-hours", lambda s: f"{s['lost_gpu_hours']:.2f}")
    row("evictions by priority", lambda s: ", ".join(f"{p}: {n}" for p, n in s["evictions_by_priority"].items())
        or "-")
    row("workloads evicted more than once", lambda s: str(s["evicted_more_than_once"]))
    row("trace jobs never started", lambda s: f"{s['unstarted']} of {s['trace_jobs']}")
    row("snapshot's pending work started (GPUs)", lambda s: (
        f"{s['backlog']['started']} of {s['backlog']['pending_at_start']} "
        f"({s['backlog']['gpus_started']} of {s['backlog']['gpus_at_start']})"))
    priorities = sorted({p for s in planners.values() for p in s["wait_seconds"]},
                        key=lambda p: -int(p) if p.lstrip("-").isdigit() else 0)
    for p in priorities:
        row(f"wait p50/p95/p99, priority {p}", lambda s, p=p: "/".join(
            _hours(s["wait_seconds"].get(p, {}).get(k, 0.0)) for k in ("p50", "p95", "p99")))
    queues = sorted({q for s in planners.values() for q in s["wait_seconds_by_cluster_queue"]})
    for q in queues:
        row(f"wait p50/p95, {q}", lambda s, q=q: "/".join(
            _hours(s["wait_seconds_by_cluster_queue"].get(q, {}).get(k, 0.0)) for k in ("p50", "p95")))
    required = sorted({lv for s in planners.values() for lv in s["wait_seconds_topology_required"]})
    for lv in required:
        row(f"wait p50/max (never started), requiring one {lv.rsplit('/', 1)[-1]}", lambda s, lv=lv: (
            lambda w: f"{_hours(w['p50'])}/{_hours(w['max'])} ({w['unstarted']})" if w else "-")(
            s["wait_seconds_topology_required"].get(lv)))
    levels = sorted({lv for s in planners.values() for lv in s["smallest_largest_free_gpus"]})
    for lv in levels:
        row(f"largest free {lv.rsplit('/', 1)[-1]} (least seen), GPUs",
            lambda s, lv=lv: str(s["smallest_largest_free_gpus"].get(lv, "-")))
    if any("fair_distance" in s for s in planners.values()):
        row("fair-share distance mean/max/last, GPUs", lambda s: "/".join(
            f"{s['fair_distance'][k]:g}" for k in ("mean", "max", "last")) if "fair_distance" in s else "-")
    row("cycles", lambda s: str(s["cycles"]))
    row("cycle seconds p50/max", lambda s: f"{s['cycle_seconds']['p50']:.2f}/{s['cycle_seconds']['max']:.2f}")
    row("plan status", lambda s: ", ".join(f"{k} {v}" for k, v in s["plan_status"].items()))
    return rows


def to_table(doc: Mapping[str, Any]) -> str:
    planners = doc["planners"]
    header = ("metric", *planners)
    rows = [tuple(printable(c) for c in r) for r in _rows(planners)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"simulated {doc.get('hours', '?')} h of {printable(str(doc.get('trace', '')))} from "
             f"{printable(str(doc.get('snapshot', '')))}, a cycle every {doc.get('interval', '?')} s "
             f"(seed {doc.get('seed', 0)})"]
    for r in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines) + "\n"


def check_picture(path: str) -> None:
    """ValueError unless `path` ends in a picture format."""
    if os.path.splitext(path)[1].lower() not in PICTURES:
        raise ValueError(f"{path}: a picture is .svg or .png")


def draw(doc: Mapping[str, Any], path: str) -> None:
    """The time series, one line per planner: allocated GPUs, pending workloads, the largest
    free domain of each level, and each cycle's seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planners: Mapping[str, Mapping[str, Any]] = doc["planners"]
    levels = sorted({lv for s in planners.values() for p in s["series"] for lv in p["largest_free"]})
    def key(name: str) -> Callable[[Mapping[str, Any]], float]:
        return lambda point: float(point[name])

    def free(level: str) -> Callable[[Mapping[str, Any]], float]:
        return lambda point: float(point["largest_free"].get(level, 0))

    panels = [("allocated GPUs", key("allocated_gpus")), ("pending workloads", key("pending"))]
    panels += [(f"largest free {lv.rsplit('/', 1)[-1]}, GPUs", free(lv)) for lv in levels]
    panels.append(("cycle seconds", key("cycle_seconds")))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.0 * len(panels)), sharex=True)
    for ax, (title, value) in zip(axes, panels):
        for name, summary in planners.items():
            xs = [p["t"] / 3600 for p in summary["series"]]
            ax.plot(xs, [value(p) for p in summary["series"]], label=name, linewidth=1)
        ax.set_ylabel(title, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("simulated hours")
    fig.suptitle(f"{os.path.basename(str(doc.get('trace', '')))}: a cycle every {doc.get('interval')} s", fontsize=9)
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buffer, format=os.path.splitext(path)[1][1:].lower(), bbox_inches="tight", dpi=100)
    plt.close(fig)
    write_whole(path, buffer.getvalue(), mode=0o644)
