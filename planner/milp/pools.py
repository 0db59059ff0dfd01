"""Node pools: capacity rows that grow with pools of nodes, not with nodes.

A pool is a set of nodes in one leaf domain (a rack, say) on which exactly the same
pod shapes may run. Where a pool's pods are GPU pods whose GPU counts divide one
another (1, 2, 4, 8: the usual sizes on 8-GPU hosts) and every other resource is
*dominated* (no set of those pods that fits a node's GPUs can exhaust its CPU,
memory or pod slots), one supply column per shape and pool replaces one per shape
and node, and the pool's capacity is exact:

    pods of sizes s1 | s2 | ... fit on nodes with free GPUs c_n  iff, for every size s,
        sum over pods of size >= s of their GPUs  <=  sum over nodes of s * floor(c_n / s)

(largest pods first: each node takes floor(c_n/s) pods of size s, and what is left,
counted in the next size down, is exactly the right side less what was placed, since
every larger size is a multiple of the smaller). So these "ladder" rows hold exactly
when the pods can be given nodes, and `place` gives them nodes, never failing.

Evictions free GPUs on their nodes. A node with no victim adds a constant to each
row; one whose floors move linearly with its evictions (a single victim, or sizes
that divide all it frees) adds their terms; any other adds an integer column per
size, the whole slots of that size its evictions leave: s * z <= free + freed.

Pods without GPUs (launchers, CPU jobs) on a GPU pool are held by one aggregate row
per resource they ask for: a relaxation, so `place` may find no node for one (it
reports it; the caller repairs). Every other pool (sizes that do not divide, a
resource that is not dominated, a pod set that must share one node, a pool of CPU
nodes) keeps a supply column per shape and node and one row per node and resource:
exact, as before.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from models import Resources
from models.resources import is_gpu
from planner.milp.arrays import INF, ModelArrays

Path = tuple[str, ...]


@dataclass
class ShapeView:
    """What pools need of a formulation's shape: its per-pod request, its eligible
    nodes with their domain paths (ending with the node), and the pods that fit on
    each node were every victim gone."""

    request: Resources
    paths: Mapping[str, Path]
    fits: Mapping[str, int]


@dataclass
class Victim:
    """A running workload the plan may evict: its eviction column and what it uses per node."""

    col: int
    usage: Mapping[str, Resources]


@dataclass
class Pool:
    index: int
    nodes: tuple[str, ...]                  # sorted
    shapes: tuple[int, ...]                 # shapes that may run here
    domain: dict[int, Path]                 # shape -> the pool's leaf domain under that shape's levels
    aggregated: bool
    gpu: str = ""                           # the ladder's resource (aggregated pools)
    ladder: tuple[int, ...] = ()            # GPU sizes, ascending, each dividing the next
    supply: dict[int, int] = field(default_factory=dict)                  # shape -> y column
    node_supply: dict[int, dict[str, int]] = field(default_factory=dict)  # per-node pools: shape -> node -> y
    slots: dict[tuple[str, int], int] = field(default_factory=dict)       # (node, size) -> z column
    relaxed: tuple[str, ...] = ()           # resources held by an aggregate row only (pods without GPUs)
    whole: int = 0                          # GPUs of an idle node (every idle node of the pool has as many)
    kept: int | None = None                 # w: idle nodes the plan keeps whole (tie-breakers), or None


def gpu_count(request: Resources, gpu_names: Iterable[str] = ()) -> tuple[str, int]:
    """(resource, count) of the GPUs one pod asks for; ("", 0) without any; ("*", n)
    when it asks for more than one kind."""
    extra = set(gpu_names)
    found = [(r, v) for r, v in request.items() if v > 0 and (is_gpu(r) or r in extra)]
    if not found:
        return "", 0
    if len(found) > 1:
        return "*", sum(v for _, v in found)
    return found[0]


def divisible(sizes: Sequence[int]) -> bool:
    return all(b % a == 0 for a, b in zip(sizes, sizes[1:]))


class Pools:
    """The pools of a formulation and their columns and rows."""

    def __init__(self, shapes: Sequence[ShapeView], free: Mapping[str, Resources],
                 victims: Sequence[Victim], overcommitted: set[str], node_level_shapes: set[int],
                 gpu_names: Iterable[str] = ()):
        self.shapes, self.free, self.victims = shapes, free, victims
        self.gpu_names = tuple(gpu_names)
        self.on_node: dict[str, list[tuple[int, Resources]]] = defaultdict(list)   # node -> (e col, usage)
        for victim in victims:
            for node, used in victim.usage.items():
                if node not in overcommitted:
                    self.on_node[node].append((victim.col, used))
        members: dict[tuple[tuple[int, Path], ...], list[str]] = defaultdict(list)
        eligible: dict[str, list[int]] = defaultdict(list)
        for k, shape in enumerate(shapes):
            for node, pods in shape.fits.items():
                if pods > 0:
                    eligible[node].append(k)
        for node, shape_ids in eligible.items():
            key = tuple((k, shapes[k].paths[node][:-1]) for k in shape_ids)
            members[key].append(node)
        self.pools: list[Pool] = []
        self.pool_of: dict[str, int] = {}
        for key in sorted(members):
            nodes = tuple(sorted(members[key]))
            ks = tuple(k for k, _ in key)
            pool = Pool(len(self.pools), nodes, ks, {k: d for k, d in key}, aggregated=False)
            self._decide(pool, node_level_shapes)
            self.pools.append(pool)
            for node in nodes:
                self.pool_of[node] = pool.index

    # -- which pools aggregate

    def _decide(self, pool: Pool, node_level_shapes: set[int]) -> None:
        """Aggregate the pool where its capacity rows are then exact (module docstring)."""
        if any(k in node_level_shapes for k in pool.shapes):
            return   # a demand sits on one node: node by node
        gpus = [gpu_count(self.shapes[k].request, self.gpu_names) for k in pool.shapes]
        names = {r for r, g in gpus if g > 0}
        if len(names) != 1 or "*" in names:
            return   # no GPU pods (CPU nodes), or several kinds of GPU
        gpu = names.pop()
        ladder = tuple(sorted({g for _, g in gpus if g > 0}))
        if not divisible(ladder):
            return
        with_gpu = [k for k, (_, g) in zip(pool.shapes, gpus) if g > 0]
        # Per other resource, the most a GPU pod asks for per GPU (as a fraction num/den).
        ratio: dict[str, Fraction] = {}
        for k in with_gpu:
            request = self.shapes[k].request
            g = request.get(gpu)
            for r, v in request.items():
                if r != gpu and v > 0:
                    ratio[r] = max(ratio.get(r, Fraction(0)), Fraction(v, g))
        ratio_ints = {r: (f.numerator, f.denominator) for r, f in ratio.items()}
        for node in pool.nodes:
            if not self._dominated(node, gpu, ratio_ints):
                return
        pool.aggregated, pool.gpu, pool.ladder = True, gpu, ladder
        relaxed: set[str] = set()
        for k, (_, g) in zip(pool.shapes, gpus):
            if g == 0:
                relaxed.update(r for r, v in self.shapes[k].request.items() if v > 0)
        pool.relaxed = tuple(sorted(relaxed))

    def _dominated(self, node: str, gpu: str, ratio: Mapping[str, tuple[int, int]]) -> bool:
        """Can GPU pods that fit the node's GPUs never exhaust another of its resources,
        whichever of its victims are evicted? (Free r minus ratio x free GPUs, plus the
        worst each victim's eviction can do to that margin, stays >= 0; in integers:
        everything times the ratio's denominator.)"""
        free = self.free[node]
        victims = self.on_node.get(node, ())
        for r, (num, den) in ratio.items():
            margin = free.get(r) * den - num * free.get(gpu)
            for _, used in victims:
                margin += min(0, used.get(r) * den - num * used.get(gpu))
            if margin < 0:
                return False
        return True

    # -- columns and rows

    def add(self, arrays: ModelArrays, units: Mapping[str, float]) -> None:
        """Supply columns and capacity rows of every pool."""
        for pool in self.pools:
            if pool.aggregated:
                self._add_aggregated(arrays, pool, units)
            else:
                self._add_per_node(arrays, pool, units)

    def idle_nodes(self, pool: Pool, busy: set[str]) -> list[str]:
        """The pool's nodes no Stowplan workload uses now and whose GPUs are all free."""
        return [n for n in pool.nodes if n not in busy and not self.on_node.get(n)]

    def reserve_whole_nodes(self, pool: Pool, busy: set[str]) -> None:
        """Let the tie-breakers keep idle nodes whole: w whole-node items in the ladder
        rows (added by `add`), where the idle nodes share one GPU count that every size
        of the ladder divides (the ladder then stays divisible)."""
        idle = self.idle_nodes(pool, busy)
        sizes = {self.free[n].get(pool.gpu) for n in idle}
        if not pool.aggregated or not idle or len(sizes) != 1:
            return
        whole = sizes.pop()
        if whole <= 0 or any(whole % s for s in pool.ladder) or whole < max(pool.ladder):
            return
        pool.whole = whole

    def _add_aggregated(self, arrays: ModelArrays, pool: Pool, units: Mapping[str, float]) -> None:
        shapes = self.shapes
        if pool.whole:
            idle = sum(1 for n in pool.nodes if self.free[n].get(pool.gpu) >= pool.whole)
            pool.kept = arrays.add_col(f"w[p{pool.index}]", 0.0, idle, integer=True)
        for k in pool.shapes:
            room = sum(shapes[k].fits.get(n, 0) for n in pool.nodes)
            if room > 0:
                pool.supply[k] = arrays.add_col(f"y[{k},p{pool.index}]", 0.0, room, integer=True)
        gpu = pool.gpu
        sizes = {k: shapes[k].request.get(gpu) for k in pool.supply}
        unit = units.get(gpu, 1)
        ladder = pool.ladder + ((pool.whole,) if pool.whole and pool.whole > max(pool.ladder) else ())
        for s in ladder:
            terms = [(col, sizes[k] / unit) for k, col in pool.supply.items() if sizes[k] >= s]
            if pool.kept is not None:
                terms.append((pool.kept, pool.whole / unit))   # kept nodes count as pods of their size
            if not terms:
                continue
            constant = 0
            for node in pool.nodes:
                c, node_terms = self._slots(arrays, pool, node, s)
                constant += c
                terms += [(col, -coef / unit) for col, coef in node_terms]
            arrays.add_row(f"ladder[p{pool.index},{s}]", terms, -INF, constant / unit)
        for r in pool.relaxed:
            unit = units.get(r, 1)
            terms = [(col, shapes[k].request.get(r) / unit) for k, col in pool.supply.items()
                     if shapes[k].request.get(r)]
            have = sum(max(0, self.free[n].get(r)) for n in pool.nodes)
            for node in pool.nodes:
                terms += [(e, -used.get(r) / unit) for e, used in self.on_node.get(node, ()) if used.get(r)]
            arrays.add_row(f"pool[p{pool.index},{r}]", terms, -INF, have / unit)

    def _slots(self, arrays: ModelArrays, pool: Pool, node: str, s: int) -> tuple[int, list[tuple[int, float]]]:
        """Node `node`'s whole slots of size `s`, in GPUs: constant + terms (evictions or z)."""
        free = max(0, self.free[node].get(pool.gpu))
        victims = [(e, used.get(pool.gpu)) for e, used in self.on_node.get(node, ()) if used.get(pool.gpu) > 0]
        if not victims:
            return s * (free // s), []
        if free % s == 0 and all(g % s == 0 for _, g in victims):
            return free, [(e, float(g)) for e, g in victims]
        if len(victims) == 1:
            (e, g), = victims
            low, high = s * (free // s), s * ((free + g) // s)
            return low, [(e, float(high - low))] if high > low else []
        most = (free + sum(g for _, g in victims)) // s
        z = arrays.add_col(f"z[{node},{s}]", 0.0, most, integer=True)
        # s * z <= free + sum of g * e: the whole slots of size s the evictions leave
        arrays.add_row(f"slots[{node},{s}]", [(z, float(s))] + [(e, -float(g)) for e, g in victims], -INF, free)
        pool.slots[(node, s)] = z
        return 0, [(z, float(s))]

    def _add_per_node(self, arrays: ModelArrays, pool: Pool, units: Mapping[str, float]) -> None:
        """One supply column per shape and node and one row per node and resource that
        can bind: the exact model, for pools that do not aggregate."""
        shapes = self.shapes
        for node in pool.nodes:
            entries = []
            for k in pool.shapes:
                room = shapes[k].fits.get(node, 0)
                if room > 0:
                    col = arrays.add_col(f"y[{k},{node}]", 0.0, room, integer=True)
                    pool.node_supply.setdefault(k, {})[node] = col
                    entries.append((col, shapes[k].request, room))
            freed = self.on_node.get(node, ())
            if len(entries) < 2 and not freed:
                continue  # y <= its own fit already respects the node
            have = self.free[node]
            for r in sorted({r for _, req, _ in entries for r in req.names()}):
                most = sum(req.get(r) * room for _, req, room in entries)
                if most <= have.get(r):
                    continue
                unit = units.get(r, 1)
                terms = [(col, req.get(r) / unit) for col, req, _ in entries if req.get(r)]
                terms += [(e, -used.get(r) / unit) for e, used in freed if used.get(r)]
                arrays.add_row(f"node[{node},{r}]", terms, -INF, have.get(r) / unit)

    # -- reading them

    def supply_columns(self, shape: int) -> list[tuple[Path, int]]:
        """(domain path below which it lies, y column) for every supply of `shape`:
        a pool's leaf domain, or a node's full path in per-node pools."""
        out = []
        view = self.shapes[shape]
        for pool in self.pools:
            if shape in pool.supply:
                out.append((pool.domain[shape], pool.supply[shape]))
            for node, col in pool.node_supply.get(shape, {}).items():
                out.append((view.paths[node], col))
        return out

    def columns(self) -> list[int]:
        """Every column the pools added (supply and slots)."""
        out: list[int] = []
        for pool in self.pools:
            out.extend(pool.supply.values())
            out.extend(c for per_node in pool.node_supply.values() for c in per_node.values())
            out.extend(pool.slots.values())
            if pool.kept is not None:
                out.append(pool.kept)
        return out

    def slot_values(self, evicted: set[int], values: dict[int, float]) -> None:
        """z at what evictions `evicted` (e columns) leave: whole slots per node and size."""
        for pool in self.pools:
            for (node, s), col in pool.slots.items():
                free = max(0, self.free[node].get(pool.gpu))
                freed = sum(used.get(pool.gpu) for e, used in self.on_node.get(node, ()) if e in evicted)
                values[col] = float((free + freed) // s)


# ---------------------------------------------------------------- giving pods nodes

@dataclass
class Item:
    """`count` pods of one pod set (`owner`) of shape `shape`, to be given nodes of a pool."""

    owner: object
    shape: int
    count: int


def place(pools: Pools, pool: Pool, items: Sequence[Item], evicted_cols: set[int],
          keep: int = 0) -> tuple[dict[object, dict[str, int]], list[object]]:
    """Give every pod of `items` a node of aggregated `pool`: first `keep` nodes with a
    whole node's GPUs free are set aside (the tie-breakers' whole nodes: the largest
    items), then GPU pods largest first, each owner's pods where its others are, then
    the fullest node that holds one (never failing when the pool's ladder rows hold);
    pods without GPUs last. Returns owner -> node -> pods, and the owners some pod of
    which found no node."""
    shapes = pools.shapes
    have: dict[str, dict[str, int]] = {}
    for node in pool.nodes:
        left = pools.free[node].as_dict()
        for e, used in pools.on_node.get(node, ()):
            if e in evicted_cols:
                for r, v in used.items():
                    left[r] = left.get(r, 0) + v
        have[node] = left
    if keep:
        whole = [n for n in sorted(have) if have[n].get(pool.gpu, 0) >= pool.whole]
        # Idle nodes first: those are the ones the reward is for.
        whole.sort(key=lambda n: (bool(pools.on_node.get(n)), n))
        for node in whole[:keep]:
            del have[node]
    placed: dict[object, dict[str, int]] = defaultdict(dict)
    failed: list[object] = []
    gpu = pool.gpu

    def size(item: Item) -> int:
        return shapes[item.shape].request.get(gpu)

    order = sorted(range(len(items)), key=lambda i: (-size(items[i]), i))
    for i in order:
        item = items[i]
        request = shapes[item.shape].request
        remaining = item.count
        # Pod by pod, the next pod goes where the last one went while it still fits there
        # (that node is the owner's first that fits: the ones before it were full already),
        # so a node takes its run of pods at once: a search per node used, not per pod.
        while remaining > 0:
            best = _best_node(have, request, placed[item.owner], gpu)
            if best is None:
                failed.append(item.owner)
                break
            run = min(remaining, _pods_fitting(have[best], request))
            for r, v in request.items():
                have[best][r] = have[best].get(r, 0) - v * run
            placed[item.owner][best] = placed[item.owner].get(best, 0) + run
            remaining -= run
    return dict(placed), failed


def _pods_fitting(left: Mapping[str, int], request: Resources) -> int:
    """How many pods of `request` fit in `left` (at least one: the caller found it fits)."""
    counts = [left.get(r, 0) // v for r, v in request.items() if v > 0]
    return max(1, min(counts)) if counts else 1 << 62


def _best_node(have: Mapping[str, Mapping[str, int]], request: Resources, mine: Mapping[str, int],
               gpu: str) -> str | None:
    """A node the pod fits: one the owner already uses, else the one with the fewest GPUs
    left that holds it (BestFit), then by name."""
    def fits(node: str) -> bool:
        left = have[node]
        return all(left.get(r, 0) >= v for r, v in request.items())

    for node in sorted(mine):
        if fits(node):
            return node
    best: tuple[int, str] | None = None
    for node, left in have.items():
        if fits(node):
            key = (left.get(gpu, 0), node)
            if best is None or key < best:
                best = key
    return None if best is None else best[1]
