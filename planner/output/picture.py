"""A picture of the plan: the topology as a grid (blocks -> racks -> hosts), each host's
GPUs coloured by the team (ClusterQueue, else namespace) of what runs there after the
plan and shaded by its priority (lighter is lower), this plan's admissions hatched,
its evictions marked, its migrations drawn as arrows (from -> to), whole free racks and
blocks outlined, racks and blocks named where the names fit. In SVG every cell carries
a <title> (host, what fills it), so a viewer shows it on hover; the legend lists only
what the picture shows; the title's numbers are the plan's, and a PNG keeps the title
in its metadata (so a test can check a committed picture against its golden plan).

An edge module (output side, matplotlib); the core never imports it. Above
MAX_HOSTS hosts each rack is drawn as one cell (its GPUs summed), so a 16,384-node
cluster stays readable and quick. Nodes without GPUs count their cores instead.
"""

from __future__ import annotations

import io
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

from models import Decisions, Node, Plan, Snapshot, Workload, WorkloadState, is_gpu
from planner.base.terminal import printable_lines
from planner.output.files import write_whole

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


EVICTION, MIGRATION, OUTLINE = "#d73027", "#3f007d", "#1a9850"
RED_ARC = 25.0     # degrees either side of red no team takes: red is the eviction mark's


def team_palette(n: int) -> list[tuple[float, float, float, float]]:
    """`n` team colours, distinct past 10 teams, that collide with neither the priority
    shading (which pales a colour towards white: every team colour is saturated and
    mid-dark, never pale or grey) nor the red eviction mark (no hue within RED_ARC of
    red). Hues are spread evenly over the rest of the circle; past 12 teams a second
    ring, darker and at hues halfway between the first's, and so on."""
    import colorsys

    rings = max(1, math.ceil(n / 12))
    per_ring = math.ceil(n / rings)
    arc = 360.0 - 2 * RED_ARC
    out: list[tuple[float, float, float, float]] = []
    for i in range(n):
        ring, k = divmod(i, per_ring)
        step = arc / per_ring
        hue = (RED_ARC + step * (k + ring / rings + 0.5 / rings)) % 360.0
        value = (0.82, 0.55, 0.68, 0.42)[ring % 4]
        saturation = (0.80, 0.90, 0.65, 0.95)[ring % 4]
        r, g, b = colorsys.hsv_to_rgb(hue / 360.0, saturation, value)
        out.append((r, g, b, 1.0))
    return out


def colours(keys: list[Key]) -> tuple[dict[str, Any], dict[int, float], dict[Key, Any]]:
    """A colour per team (team_palette, teams in name order), a shade per priority (1.0 for
    the highest, down to 0.35 for the lowest: mixed with white), and their mix per key."""
    teams = sorted({t for t, _ in keys})
    priorities = sorted({p for _, p in keys})
    palette = team_palette(len(teams))
    team_colour = {t: palette[i] for i, t in enumerate(teams)}
    shade = {p: 0.35 + 0.65 * (i / max(1, len(priorities) - 1)) if len(priorities) > 1 else 1.0
             for i, p in enumerate(priorities)}

    def mix(t: str, p: int) -> tuple[float, float, float, float]:
        r, g, b, _ = team_colour[t]
        k = shade[p]
        return (1 - k + k * r, 1 - k + k * g, 1 - k + k * b, 1.0)

    return team_colour, shade, {(t, p): mix(t, p) for t, p in keys}


def cell_title(cell: "Cell", unit: str) -> str:
    """What a viewer shows over a cell: the host (or rack), how full, and with what."""
    parts = [f"{cell.name}: {cell.used():g} of {cell.capacity:g} {unit} used"]
    for (team_name, priority), amount in sorted({**cell.kept}.items()):
        parts.append(f"{team_name} priority {priority}: {amount:g} running")
    for (team_name, priority), amount in sorted(cell.admitted.items()):
        parts.append(f"{team_name} priority {priority}: {amount:g} admitted by this plan")
    if cell.unmanaged:
        parts.append(f"not Stowplan's: {cell.unmanaged:g}")
    if cell.evicted:
        parts.append(f"evicted by this plan: {cell.evicted:g}")
    return "; ".join(parts)


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
    decisions = Decisions(plan.admissions, plan.evictions, plan.migrations)
    grid, hosts = cells(snapshot, decisions, before)
    by_rack = len(hosts) > MAX_HOSTS
    keys = sorted({k for c in hosts.values() for k in (*c.kept, *c.admitted)})
    team_colour, shade, colour = colours(keys)
    gpu_names = set(snapshot.policy.gpu_resources)
    unit_of = {n.name: "cores" if _units(n, gpu_names)[1] == {"cpu"} else "GPUs" for n in snapshot.nodes}

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
    titled: list[tuple[float, float, str]] = []          # (x, y, title) of every cell, for SVG <title>s
    centre: dict[str, tuple[float, float]] = {}            # host -> where its cell is drawn
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
                titled.append((rx, cy, cell_title(cell, unit_of.get(members[0].name if by_rack else cell.name,
                                                                      "GPUs"))))
                for member in (members if by_rack else [cell]):
                    centre[member.name] = (rx + 0.5, cy + 0.5)
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
                               edgecolor=OUTLINE, linewidth=1.6 if what == "block" else 1.0))
    if marks:
        xs, ys = zip(*marks)
        ax.scatter(xs, ys, marker="x", color=EVICTION, s=14 if not by_rack else 30, linewidths=1.2, zorder=5)
    arrows = 0
    for migration in () if before else plan.migrations:
        start = _centroid([centre[v[-1]] for psa in migration.from_ for v, _ in psa.domains if v and v[-1] in centre])
        end = _centroid([centre[v[-1]] for psa in migration.to for v, _ in psa.domains if v and v[-1] in centre])
        if start is None or end is None or start == end:
            continue
        ax.annotate("", xy=end, xytext=start, zorder=6,
                    arrowprops={"arrowstyle": "-|>", "color": MIGRATION, "linewidth": 1.2,
                                "shrinkA": 2, "shrinkB": 2, "connectionstyle": "arc3,rad=0.2"})
        arrows += 1
    svg = path.lower().endswith(".svg")
    if svg:   # an invisible rectangle per cell, its <title> added below: the host's name on hover
        for i, (x, y, _) in enumerate(titled):
            ax.add_patch(Rectangle((x, y), 1.0, 1.0, fill=False, linewidth=0, alpha=0.0, gid=f"stowplan-cell-{i}"))
    fontsize = 8 if len(labels) < 40 else 6
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
            ax.text(x, y, short[name], fontsize=6, rotation=90, va="top", ha="center", color="#333333")
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
    if len(shade) > 1:     # one priority: no shading to explain
        legend += [Patch(facecolor=(1 - shade[p] + shade[p] * 0.3,) * 3, label=f"priority {p}")
                   for p in sorted(shade, reverse=True)]
    elif shade:
        legend += [Patch(facecolor=(0.3, 0.3, 0.3), label=f"priority {next(iter(shade))}")]
    shown_kinds = {kind for kind, _ in groups}
    if "admitted" in shown_kinds:
        legend.append(Patch(facecolor="#999999", hatch="////", edgecolor="white", label="admitted by this plan"))
    if "unmanaged" in shown_kinds:
        legend.append(Patch(facecolor=UNMANAGED, hatch="xxxx", edgecolor="#9a9a9a", label="not Stowplan's"))
    if "free" in shown_kinds:
        legend.append(Patch(facecolor=FREE, label="free"))
    if marks:
        legend.append(Line2D([], [], marker="x", color=EVICTION, linestyle="", label="eviction"))
    if arrows:
        legend.append(Line2D([], [], color=MIGRATION, marker=">", markersize=4, label="migration (from -> to)"))
    if any(what == "rack" for *_, what in outlines):
        legend.append(Patch(fill=False, edgecolor=OUTLINE, linestyle="--", label="whole rack free"))
    if any(what == "block" for *_, what in outlines):
        legend.append(Patch(fill=False, edgecolor=OUTLINE, label="whole block free"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False,
              title="colour: team (ClusterQueue)\nshade: priority", title_fontsize=7, alignment="left")
    # names come from input: `$x^2$` must not reach mathtext (a malformed one raises), nor
    # a control character the SVG or the font; every text is drawn as the literal it is
    for artist in fig.findobj(Text):
        artist.set_parse_math(False)
        artist.set_text(printable_lines(artist.get_text()))
    buffer = io.BytesIO()
    kind = os.path.splitext(path)[1][1:].lower()
    metadata = {"Title": title}     # PNG: a tEXt chunk; SVG: <dc:title>
    with matplotlib.rc_context({"svg.fonttype": "none"}):     # SVG text stays text (searchable, smaller)
        fig.savefig(buffer, format=kind, bbox_inches="tight", dpi=110, metadata=metadata)
    plt.close(fig)
    data = buffer.getvalue()
    if svg:
        data = _with_titles(data.decode("utf-8"), [t for _, _, t in titled]).encode("utf-8")
    write_whole(path, data)
    return "racks" if by_rack else "hosts"


def _centroid(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    if not points:
        return None
    return (sum(x for x, _ in points) / len(points), sum(y for _, y in points) / len(points))


def _with_titles(svg: str, titles: list[str]) -> str:
    """Each cell's group (gid stowplan-cell-N) gets its <title>, which SVG viewers show on hover."""
    from xml.sax.saxutils import escape

    for i, text in enumerate(titles):
        anchor = f'<g id="stowplan-cell-{i}">'
        svg = svg.replace(anchor, f"{anchor}<title>{escape(text)}</title>", 1)
    return svg


def png_title(path: str) -> str | None:
    """The title a PNG drawn here keeps in its metadata (tEXt "Title"), or None."""
    import struct
    import zlib

    data = open(path, "rb").read()
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Title\x00"):
            return body[6:].decode("latin-1")
        if kind == b"zTXt" and body.startswith(b"Title\x00"):
            return zlib.decompress(body[7:]).decode("latin-1")
        if kind == b"iTXt" and body.startswith(b"Title\x00"):
            return body.split(b"\x00", 5)[-1].decode("utf-8")
        at += 12 + length
    return None
