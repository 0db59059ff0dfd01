"""A picture of the plan: the topology as a grid (blocks -> racks -> hosts), each host's
GPUs coloured by the team (ClusterQueue, else namespace) of what runs there after the
plan and shaded by its priority (lighter is lower), this plan's admissions hatched,
its evictions marked, whole free racks and blocks outlined, racks and blocks named
where the names fit.

An edge module (output side, matplotlib); the core never imports it. Above
MAX_HOSTS hosts each rack is drawn as one cell (its GPUs summed), so a 16,384-node
cluster stays readable and quick. Nodes without GPUs count their cores instead.
"""

from __future__ import annotations

import io
import math
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

from models import Decisions, Node, Plan, Snapshot, Workload, WorkloadState, is_gpu
from planner.terminal import printable_lines

FORMATS = (".svg", ".png")
MAX_HOSTS = 2048
HOSTNAME = "kubernetes.io/hostname"
OUTSIDE = "(no topology)"
PSEUDO = "\x00hosts "          # a column of hosts where there is no Topology: not a domain
UNMANAGED, FREE = "#262626", "#ececec"
MAX_RACK_NAMES = 160          # above this many racks drawn, their names would not be readable
Key = tuple[str, int]         # (team, priority)


@dataclass
class Cell:
    """One host (or one rack, aggregated): capacity and what fills it, in GPUs."""

    name: str
    capacity: float = 0.0
    unmanaged: float = 0.0
    kept: dict[Key, float] = field(default_factory=lambda: defaultdict(float))       # (team, priority) -> running
    admitted: dict[Key, float] = field(default_factory=lambda: defaultdict(float))   # (team, priority) -> this plan's
    evicted: float = 0.0                                                              # freed by this plan

    def used(self) -> float:
        return self.unmanaged + sum(self.kept.values()) + sum(self.admitted.values())


def check_path(path: str) -> None:
    """ValueError unless `path` ends in .svg or .png (the CLI: exit 2 naming --picture)."""
    if os.path.splitext(path)[1].lower() not in FORMATS:
        raise ValueError(f"the picture must end in {' or '.join(FORMATS)}: {path}")


def _units(node: Node, gpu_names: set[str]) -> tuple[float, set[str]]:
    gpus = {r for r in node.allocatable if is_gpu(r) or r in gpu_names}
    if gpus and sum(node.allocatable.get(r) for r in gpus) > 0:
        return float(sum(node.allocatable.get(r) for r in gpus)), gpus
    return node.allocatable.get("cpu") / 1000.0, {"cpu"}


def _levels(snapshot: Snapshot) -> tuple[str | None, str | None]:
    """The outer (block) and inner (rack) label: the deepest Topology's first level and
    the level just above the host."""
    deepest = max(snapshot.topologies.values(), key=lambda t: (len(t.levels), t.name), default=None)
    if deepest is None:
        return None, None
    levels = [lv for lv in deepest.levels if lv != HOSTNAME]
    if not levels:
        return None, None
    return levels[0], levels[-1]


def cells(snapshot: Snapshot, decisions: Decisions,
          before: bool = False) -> tuple[dict[str, dict[str, list[Cell]]], dict[str, Cell]]:
    """block -> rack -> host cells, and host name -> cell: after the plan, or `before` it
    (what runs now; the plan's victims still run there, marked, and nothing is admitted)."""
    gpu_names = set(snapshot.policy.gpu_resources)
    outer, inner = _levels(snapshot)
    grid: dict[str, dict[str, list[Cell]]] = defaultdict(lambda: defaultdict(list))
    hosts: dict[str, Cell] = {}
    units: dict[str, set[str]] = {}
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        if not node.ready or node.unschedulable:
            continue
        capacity, names = _units(node, gpu_names)
        units[node.name] = names
        per_unit = 1000.0 if names == {"cpu"} else 1.0
        cell = Cell(node.name, capacity, unmanaged=min(capacity, sum(node.unmanaged.get(r) for r in names) / per_unit))
        hosts[node.name] = cell
        labels = node.labels
        block = labels.get(outer, OUTSIDE) if outer else ""
        rack = labels.get(inner, OUTSIDE) if inner else ""
        if outer and (outer not in labels or inner not in labels):
            block, rack = OUTSIDE, OUTSIDE
        grid[block][rack].append(cell)
    if outer is None and "" in grid:      # no Topology: columns of hosts, no domains to outline
        flat = grid.pop("")[""]
        size = max(4, math.ceil(math.sqrt(len(flat))))
        for start in range(0, len(flat), size):
            grid[""][f"{PSEUDO}{start // size:05d}"] = flat[start:start + size]
    evicted = {e.workload for e in decisions.evictions}
    by_ref = {w.ref: w for w in snapshot.workloads}

    def add(workload, assignments, where: str) -> None:  # type: ignore[no-untyped-def]
        pod_sets = {ps.name: ps for ps in workload.pod_sets}
        for psa in assignments:
            pod_set = pod_sets.get(psa.name)
            if pod_set is None:
                continue
            for values, count in psa.domains:
                cell = hosts.get(values[-1]) if values else None
                if cell is None:
                    continue
                names = units[cell.name]
                amount = sum(pod_set.request.get(r) for r in names) * count / (1000.0 if names == {"cpu"} else 1.0)
                key = (team(workload), workload.priority)
                if where == "evicted":
                    cell.evicted += amount
                    if before:
                        cell.kept[key] += amount
                elif where == "admitted":
                    cell.admitted[key] += amount
                else:
                    cell.kept[key] += amount

    moved = {m.workload: m.to for m in decisions.migrations}
    for workload in snapshot.workloads:
        if workload.state is WorkloadState.RUNNING:
            # a moved workload: kept where it goes (after), where it runs (before)
            where = workload.assignment if before else moved.get(workload.ref, workload.assignment)
            add(workload, where, "evicted" if workload.ref in evicted else "kept")
    for admission in () if before else decisions.admissions:
        if admission.workload in by_ref:
            add(by_ref[admission.workload], admission.pod_sets, "admitted")
    return grid, hosts


def team(workload: Workload) -> str:
    """The team a workload counts for: its ClusterQueue, else its namespace."""
    return workload.cluster_queue or workload.ref.namespace


def colours(keys: list[Key]) -> tuple[dict[str, Any], dict[int, float], dict[Key, Any]]:
    """A colour per team (qualitative palettes, teams in name order, distinct up to 60), a shade per priority
    (1.0 for the highest, down to 0.35 for the lowest: mixed with white), and their mix per key."""
    import matplotlib

    teams = sorted({t for t, _ in keys})
    priorities = sorted({p for _, p in keys})
    names = ["tab10"] if len(teams) <= 10 else ["tab20"] if len(teams) <= 20 else ["tab20", "tab20b", "tab20c"]
    palette = [matplotlib.colormaps[name](i) for name in names for i in range(matplotlib.colormaps[name].N)]
    team_colour = {t: palette[i % len(palette)] for i, t in enumerate(teams)}    # distinct up to 60 teams
    shade = {p: 0.35 + 0.65 * (i / max(1, len(priorities) - 1)) if len(priorities) > 1 else 1.0
             for i, p in enumerate(priorities)}

    def mix(t: str, p: int) -> tuple[float, float, float, float]:
        r, g, b, _ = team_colour[t]
        k = shade[p]
        return (1 - k + k * r, 1 - k + k * g, 1 - k + k * b, 1.0)

    return team_colour, shade, {(t, p): mix(t, p) for t, p in keys}


def _aggregate(name: str, members: list[Cell]) -> Cell:
    out = Cell(name, sum(c.capacity for c in members), sum(c.unmanaged for c in members))
    for c in members:
        for p, v in c.kept.items():
            out.kept[p] += v
        for p, v in c.admitted.items():
            out.admitted[p] += v
        out.evicted += c.evicted
    return out


def draw(snapshot: Snapshot, plan: Plan, path: str, before: bool = False) -> str:
    """Write the picture to `path` (.svg or .png), atomically; returns the mode drawn.
    `before`: the cluster as it is, the plan's victims marked (the pair's first half)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.lines import Line2D
    from matplotlib.text import Text

    check_path(path)
    decisions = Decisions(plan.admissions, plan.evictions)
    grid, hosts = cells(snapshot, decisions, before)
    by_rack = len(hosts) > MAX_HOSTS
    keys = sorted({k for c in hosts.values() for k in (*c.kept, *c.admitted)})
    team_colour, shade, colour = colours(keys)

    # Layout: racks are columns (hosts stacked) or cells; blocks follow each other, wrapped into rows.
    blocks = sorted(grid)
    racks_per_block = {b: sorted(grid[b]) for b in blocks}
    tallest = 1 if by_rack else max((len(grid[b][r]) for b in blocks for r in grid[b]), default=1)
    block_rows = 1 if by_rack else tallest
    if by_rack:
        per_line = max(1, math.ceil(math.sqrt(max(len(racks_per_block[b]) for b in blocks) * 2)))
    else:
        per_line = max(len(racks_per_block[b]) for b in blocks)
    width_of = {b: min(per_line, len(racks_per_block[b])) for b in blocks}
    named = not by_rack and sum(len(r) for r in racks_per_block.values()) <= MAX_RACK_NAMES
    gap = 0.2 if by_rack else (1.4 if named else 0.6)     # below a row of racks: room for their names
    height_of = {b: math.ceil(len(racks_per_block[b]) / per_line) * (block_rows + gap)
                 for b in blocks}
    blocks_per_line = max(1, min(len(blocks), math.ceil(math.sqrt(len(blocks) * max(1.0, max(height_of.values()) / max(1, per_line))))))
    groups: dict[tuple[Any, ...], list[Rectangle]] = defaultdict(list)
    outlines: list[tuple[float, float, float, float, str]] = []
    marks: list[tuple[float, float]] = []
    labels: list[tuple[float, float, str]] = []
    rack_names: list[tuple[float, float, str]] = []
    x0 = y0 = 0.0
    line_height = 0.0
    total_w = 0.0
    for index, block in enumerate(blocks):
        if index and index % blocks_per_line == 0:
            x0, y0, line_height = 0.0, y0 - line_height - 1.2, 0.0
        racks = racks_per_block[block]
        block_free = True
        for r_index, rack in enumerate(racks):
            col, row = r_index % per_line, r_index // per_line
            rx, ry = x0 + col * 1.15, y0 - row * (block_rows + gap)
            members = grid[block][rack]
            shown = [_aggregate(rack, members)] if by_rack else members
            rack_free = all(c.used() == 0 for c in members) and not rack.startswith(PSEUDO) \
                and rack != OUTSIDE
            block_free = block_free and rack_free
            for h_index, cell in enumerate(shown):
                cy = ry - h_index - 1
                if cell.capacity <= 0:
                    continue
                x = rx
                segments: list[tuple[str, Key | None, float]] = [("unmanaged", None, cell.unmanaged)]
                segments += [("kept", k, cell.kept[k]) for k in sorted(cell.kept)]
                segments += [("admitted", k, cell.admitted[k]) for k in sorted(cell.admitted)]
                for kind, p, amount in segments:
                    w = min(amount / cell.capacity, rx + 1 - x)
                    if w <= 0:
                        continue
                    groups[(kind, p)].append(Rectangle((x, cy + 0.08), w, 0.84))
                    x += w
                if x < rx + 1:
                    groups[("free", None)].append(Rectangle((x, cy + 0.08), rx + 1 - x, 0.84))
                if cell.evicted > 0:
                    marks.append((rx + 0.5, cy + 0.5))
            if rack and not rack.startswith(PSEUDO):
                rack_names.append((rx + 0.5, ry - len(shown) - 0.08, rack))
            if rack_free:
                outlines.append((rx - 0.04, ry - len(shown) - 0.02, 1.08, len(shown) + 0.04, "rack"))
        bw = width_of[block] * 1.15
        bh = height_of[block]
        if block:
            labels.append((x0, y0 + 0.25, block))
        if block_free and block:
            outlines.append((x0 - 0.12, y0 - bh - 0.1, bw + 0.1, bh + 0.35, "block"))
        x0 += bw + 0.8
        total_w = max(total_w, x0)
        line_height = max(line_height, bh)
    total_h = -(y0 - line_height) + 1.0

    scale = 0.22 if not by_rack else 0.35
    fig_w = min(60.0, max(8.0, total_w * scale + 3.5))
    fig_h = min(60.0, max(4.0, total_h * scale + 1.5))
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    for (kind, p), rects in groups.items():
        style: dict[str, Any]
        if kind == "unmanaged":
            style = {"facecolor": UNMANAGED, "hatch": "xxxx", "edgecolor": "#9a9a9a"}
        elif kind == "free":
            style = {"facecolor": FREE}
        else:
            style = {"facecolor": colour[p]}
            if kind == "admitted":
                style.update(hatch="////", edgecolor="white")
        ax.add_collection(PatchCollection(rects, linewidth=0, match_original=False,
                                          **({"edgecolor": "none"} | style)))
    for x, y, w, h, what in outlines:
        ax.add_patch(Rectangle((x, y), w, h, fill=False, linestyle="--" if what == "rack" else "-",
                               edgecolor="#1a9850", linewidth=1.6 if what == "block" else 1.0))
    if marks:
        xs, ys = zip(*marks)
        ax.scatter(xs, ys, marker="x", color="#d73027", s=14 if not by_rack else 30, linewidths=1.2, zorder=5)
    fontsize = 7 if len(labels) < 40 else 5
    for x, y, text in labels:
        ax.text(x, y, text, fontsize=fontsize, va="bottom", ha="left", fontweight="bold")
    if named:
        # Below each rack's column, turned (a column is narrow); without its block's prefix
        # when the rack's name starts with it (b3-r03 under block b3 reads r03).
        short = {name: name for _, _, name in rack_names}
        for block in blocks:
            for rack in racks_per_block[block]:
                if block and rack.startswith(block) and len(rack) > len(block):
                    short[rack] = rack[len(block):].lstrip("-_./") or rack
        for x, y, name in rack_names:
            ax.text(x, y, short[name], fontsize=4.5, rotation=90, va="top", ha="center", color="#333333")
    ax.set_xlim(-0.5, total_w)
    ax.set_ylim(-total_h, 1.2)
    ax.set_aspect("auto")
    ax.axis("off")
    beside = plan.summary.get("vs_kueue")
    says = str(beside.get("says", "")) if isinstance(beside, Mapping) else ""
    unit = "rack" if by_rack else "host"
    if before:
        title = (f"{os.path.basename(plan.source) or 'snapshot'} before the plan: {len(hosts)} hosts, one cell "
                 f"per {unit}; the {len(plan.evictions)} workload(s) the plan evicts marked")
    else:
        title = (f"{os.path.basename(plan.source) or 'plan'}: {len(hosts)} hosts, one cell per {unit}; "
                 f"{len(plan.admissions)} admitted, {len(plan.evictions)} evicted"
                 + (f"; vs Kueue's way: {says}" if says else ""))
    ax.set_title(title, fontsize=9, loc="left")
    legend: list[Any] = [Patch(facecolor=team_colour[t], label=t) for t in sorted(team_colour)]
    legend += [Patch(facecolor=(1 - shade[p] + shade[p] * 0.3,) * 3, label=f"priority {p}")
               for p in sorted(shade, reverse=True)]
    legend += [Patch(facecolor="#999999", hatch="////", edgecolor="white", label="admitted by this plan"),
               Patch(facecolor=UNMANAGED, hatch="xxxx", edgecolor="#9a9a9a", label="not Stowplan's"), Patch(facecolor=FREE, label="free"),
               Line2D([], [], marker="x", color="#d73027", linestyle="", label="eviction"),
               Patch(fill=False, edgecolor="#1a9850", linestyle="--", label="whole rack free"),
               Patch(fill=False, edgecolor="#1a9850", label="whole block free")]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False,
              title="colour: team (ClusterQueue)\nshade: priority", title_fontsize=7, alignment="left")
    # names come from input: `$x^2$` must not reach mathtext (a malformed one raises), nor
    # a control character the SVG or the font; every text is drawn as the literal it is
    for artist in fig.findobj(Text):
        artist.set_parse_math(False)
        artist.set_text(printable_lines(artist.get_text()))
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):     # SVG text stays text (searchable, smaller)
        fig.savefig(buffer, format=os.path.splitext(path)[1][1:].lower(), bbox_inches="tight", dpi=110)
    plt.close(fig)
    _write_bytes(path, buffer.getvalue())
    return "racks" if by_rack else "hosts"


def _write_bytes(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    umask = os.umask(0)
    os.umask(umask)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask)      # as any new file (mkstemp makes it 0600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
