"""Kueue's TAS placement: how many pods go on which node, for one pod set.

A faithful port of `pkg/cache/scheduler/tas_flavor_snapshot.go` (findTopologyAssignment):

1. count how many pods fit on every leaf (node), floor(min over resources free/req),
   and sum the counts up the domain tree once (slice counts at the slice level);
2. find the level and domains: BestFit at the requested level (most slices first,
   then fewest pods, then name; take the *smallest* domain that still fits);
   required fails when none fits, preferred climbs one level at a time and at the
   top takes domains in order until covered; unconstrained (and no request) uses
   LeastFreeCapacity (fullest first) at the hostname level;
3. descend level by level, filling as few children as possible, slices kept whole.

Pure: no snapshot, no quota, no I/O. Node eligibility is the caller's business: it
passes only the nodes a pod may use. The work is on numpy arrays over a `DomainTree`
the caller can cache, so one call costs a few passes over the eligible nodes.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from models import HOSTNAME_LABEL, Resources, TopologyRequest

Path = tuple[str, ...]


@dataclass(frozen=True)
class Placement:
    """The answer for one pod set: pods per node, or why not.

    `needed` and `fit` are in pods; `level` is the level of a failed single-domain
    requirement (None: the failure is about the eligible nodes as a whole).
    """

    pods: Mapping[str, int] | None
    reason: str = ""
    needed: int = 0
    fit: int = 0
    level: str | None = None

    @property
    def ok(self) -> bool:
        return self.pods is not None


def level_noun(level: str) -> str:
    """A short human name for a level: `cloud.provider.com/topology-rack` -> `rack`."""
    if level == HOSTNAME_LABEL:
        return "node"
    name = level.rsplit("/", 1)[-1]
    for prefix in ("topology-", "topology."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name or level


class DomainTree:
    """The domains of a set of nodes, level by level, as flat arrays.

    Leaves are the nodes, sorted by their path so the children of every domain are
    contiguous and index order is Kueue's `levelValues` order at every level.
    """

    def __init__(self, levels: tuple[str, ...], paths: Mapping[str, Path] | Sequence[tuple[str, Path]]):
        items = paths.items() if isinstance(paths, Mapping) else paths
        ordered = sorted(((tuple(p), n) for n, p in items), key=lambda x: (x[0], x[1]))
        self.levels = tuple(levels)
        self.names: list[str] = [n for _, n in ordered]
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        depth = len(self.levels)
        self.values: list[list[Path]] = [[] for _ in range(depth)]
        node_domain = [np.zeros(len(ordered), dtype=np.int64) for _ in range(depth)]
        parents: list[list[int]] = [[] for _ in range(depth)]
        for leaf, (path, _) in enumerate(ordered):
            for lvl in range(depth):
                prefix = path[: lvl + 1]
                vals = self.values[lvl]
                if not vals or vals[-1] != prefix:
                    vals.append(prefix)
                    parents[lvl].append(int(node_domain[lvl - 1][leaf]) if lvl else 0)
                node_domain[lvl][leaf] = len(vals) - 1
        self.node_domain = node_domain
        # first_child[l][d]: index at level l+1 of the first child of domain d at level l.
        self.first_child: list[np.ndarray] = [
            np.searchsorted(np.array(parents[lvl + 1], dtype=np.int64), np.arange(len(self.values[lvl])))
            for lvl in range(depth - 1)
        ]
        self._value_index = [{v: i for i, v in enumerate(vals)} for vals in self.values]

    def __len__(self) -> int:
        return len(self.names)

    def domain_index(self, lvl: int, values: Path) -> int | None:
        return self._value_index[lvl].get(tuple(values))

    def children(self, lvl: int, domain: int) -> range:
        start = int(self.first_child[lvl][domain])
        end = int(self.first_child[lvl][domain + 1]) if domain + 1 < len(self.values[lvl]) else len(self.values[lvl + 1])
        return range(start, end)

    def fill(self, counts: np.ndarray, slice_level: int, slice_size: int,
             inner: Mapping[int, int], top: int = 0,
             sums: Sequence[np.ndarray] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Pods (state) and slices (sliceState) that fit in every domain (Kueue fillInCounts),
        for the levels from `top` down (the levels above are left empty: not asked for).

        `sums`: `level_sums(counts)`, when the caller keeps them: without inner slices
        they are the pods that fit at every level.
        """
        depth = len(self.levels)
        empty = np.zeros(0, dtype=np.int64)
        state: list[np.ndarray] = [empty] * depth
        if sums is not None and not inner:
            state = list(sums)
        else:
            state[depth - 1] = counts.astype(np.int64, copy=False)
            for lvl in range(depth - 2, top - 1, -1):
                child = state[lvl + 1]
                if lvl + 1 in inner:  # children only contribute whole inner slices
                    child = child // inner[lvl + 1] * inner[lvl + 1]
                state[lvl] = np.add.reduceat(child, self.first_child[lvl])
        slices: list[np.ndarray] = [empty] * depth
        if slice_size == 1 and not inner:  # a slice is a pod: the slice sums are the pod sums
            slices[top:slice_level + 1] = state[top:slice_level + 1]
            return state, slices
        slices[slice_level] = state[slice_level] // slice_size if slice_size > 1 else state[slice_level]
        for lvl in range(slice_level - 1, top - 1, -1):
            slices[lvl] = np.add.reduceat(slices[lvl + 1], self.first_child[lvl])
        return state, slices

    def level_sums(self, counts: np.ndarray) -> list[np.ndarray]:
        """Pods fitting in every domain at every level, given the pods fitting on each leaf
        (the last level is `counts` itself)."""
        sums = [counts]
        for lvl in range(len(self.levels) - 2, -1, -1):
            sums.insert(0, np.add.reduceat(sums[0], self.first_child[lvl]))
        return sums


def leaf_counts(free: np.ndarray, request: np.ndarray) -> np.ndarray:
    """Pods of `request` fitting in each row of `free` (rows: nodes, columns: resources)."""
    need = request > 0
    if not need.any():
        return np.zeros(free.shape[0], dtype=np.int64)
    return pods_fitting(free[:, need], request[need])


def pods_fitting(room: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    """Pods fitting in each row of `room` (rows: nodes; columns: the resources a pod asks
    for, `amounts` of each, all > 0): the least whole number over the columns, never
    below 0 (an overcommitted node takes none). The one count of pods on free capacity,
    here and in planner.kueue.state."""
    counts: np.ndarray = np.maximum((room // amounts).min(axis=1), 0)
    return counts


# ---------------------------------------------------------------- the algorithm

@dataclass(frozen=True)
class _Request:
    level_idx: int
    required: bool
    unconstrained: bool
    slice_idx: int
    slice_size: int
    inner: Mapping[int, int]


def _resolve(levels: tuple[str, ...], topology: TopologyRequest | None, count: int) -> _Request | str:
    """Kueue's levelKey / slice level rules for one pod set on one topology."""
    topo = topology or TopologyRequest()
    deepest = len(levels) - 1
    if topo.mode in ("required", "preferred"):
        if topo.level not in levels:
            return f"the flavor's topology has no level {topo.level}"
        level_idx, required, unconstrained = levels.index(topo.level), topo.mode == "required", False
    elif topo.slices:  # a slice-only request places from the top, unconstrained
        level_idx, required, unconstrained = 0, False, True
    else:              # unconstrained, or implied (no request): capacity only
        level_idx, required, unconstrained = deepest, False, True
    slice_idx, slice_size, inner = deepest, 1, {}
    if topo.slices:
        outer = topo.slices[0]
        if outer.level not in levels:
            return f"the flavor's topology has no slice level {outer.level}"
        slice_idx, slice_size = levels.index(outer.level), max(1, outer.size)
        if level_idx > slice_idx:
            return f"slice level {outer.level} is above the requested level {levels[level_idx]}"
        prev_idx, prev_size = slice_idx, slice_size
        for layer in topo.slices[1:]:
            if layer.level not in levels or levels.index(layer.level) <= prev_idx:
                return f"slice layer {layer.level} must be a finer level than {levels[prev_idx]}"
            if layer.size <= 0 or prev_size % layer.size:
                return f"slice layer size {layer.size} must divide {prev_size}"
            idx = levels.index(layer.level)
            for lvl in range(prev_idx + 1, idx + 1):
                inner[lvl] = layer.size
            prev_idx, prev_size = idx, layer.size
        if count % slice_size:
            return f"{count} pods is not a multiple of the slice size {slice_size}"
    return _Request(level_idx, required, unconstrained, slice_idx, slice_size, inner)


def _sorted(domains: np.ndarray, state: np.ndarray, slices: np.ndarray, lfc: bool) -> np.ndarray:
    """BestFit: slices desc, pods asc, name; LeastFreeCapacity: slices asc, pods asc, name."""
    sl = slices[domains]
    return domains[np.lexsort((domains, state[domains], sl if lfc else -sl))]


def _best_fit(vals: np.ndarray, needed: int) -> int:
    """Position of the first domain with the fewest slices still >= needed (findBestFitDomainBy).

    `vals` are the candidates' slice counts in sorted order; when none fits, the first.
    """
    fitting = np.where(vals >= needed, vals, np.iinfo(np.int64).max)
    best = int(np.argmin(fitting))
    return best if vals[best] >= needed else 0


def _fill(order: np.ndarray, vals: np.ndarray, remaining: int, unit: int, best_fit: bool) -> dict[int, int] | None:
    """Kueue updateCountsToMinimum: take domains in order, the last one best-fitted.

    Domain i of the order is the last one taken when the running total first reaches
    `remaining`; BestFit then swaps it for the smallest later domain that covers the rest.
    """
    order = order[vals[order] > 0]
    v = vals[order]
    total = np.cumsum(v)
    last = int(np.searchsorted(total, remaining))
    if last >= len(order):
        return None
    out = {int(d): int(c) * unit for d, c in zip(order[:last], v[:last])}
    rest = remaining - (int(total[last - 1]) if last else 0)
    pick = last + (_best_fit(v[last:], rest) if best_fit else 0)
    out[int(order[pick])] = rest * unit
    return out


def _fail(req: _Request, levels: tuple[str, ...], count: int, fit_slices: int, single: bool) -> Placement:
    size = req.slice_size
    needed = count // size
    what = "pods" if size == 1 else f"slices of {size} pods"
    if single:
        level = levels[req.level_idx]
        where = f"in one {level_noun(level)} ({level})"
    else:
        level = None
        where = "on the eligible nodes" if size == 1 else f"in whole {level_noun(levels[req.slice_idx])}s"
    if needed == 1:
        head = "the pod does not fit" if size == 1 else f"the slice of {size} pods does not fit"
    elif fit_slices == 0:
        head = f"none of the {needed} {what} fit"
    else:
        head = f"only {fit_slices} of {needed} {what} fit"
    return Placement(None, f"{head} {where}", needed=count, fit=fit_slices * size, level=level)


class FitIndex:
    """The leaves grouped by how many pods fit on them, for LeastFreeCapacity at the
    node level: the fullest leaf that still takes `count` pods, found without a pass
    over every leaf (`fullest_fitting_node` is the same answer by one argmin).

    For a caller that keeps one `counts` array up to date across many placements: it
    reports each change with `update`. Built on the first question; until then
    updates cost nothing. Per pod count a min-heap of leaves, cleaned lazily (an
    entry whose leaf no longer has that count is dropped when it reaches the top),
    and the sorted list of the counts some leaf has. Leaves with no room are left out.
    """

    def __init__(self) -> None:
        self._heaps: dict[int, list[int]] | None = None
        self._population: dict[int, int] = {}
        self._values: list[int] = []

    def _build(self, counts: np.ndarray) -> None:
        leaves = np.flatnonzero(counts > 0)
        order = leaves[np.lexsort((leaves, counts[leaves]))]   # by count, then leaf
        self._heaps = {}
        if len(order):
            for chunk in np.split(order, np.flatnonzero(np.diff(counts[order])) + 1):
                value = int(counts[chunk[0]])
                self._heaps[value] = chunk.tolist()     # sorted, so already a heap
                self._population[value] = len(chunk)
        self._values = sorted(self._heaps)

    def update(self, leaves: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        """Leaves whose count changed from `old` to `new` (a leaf may be listed twice, the same change)."""
        if self._heaps is None:
            return
        moved = old != new
        if not moved.any():
            return
        leaves, first = np.unique(leaves[moved], return_index=True)
        for leaf, was, now in zip(leaves.tolist(), old[moved][first].tolist(), new[moved][first].tolist()):
            if was > 0:
                self._population[was] -= 1
                if self._population[was] == 0:
                    del self._values[bisect.bisect_left(self._values, was)]
            if now > 0:
                if self._population.get(now, 0) == 0:
                    bisect.insort(self._values, now)
                self._population[now] = self._population.get(now, 0) + 1
                heapq.heappush(self._heaps.setdefault(now, []), leaf)

    def fullest_fitting(self, counts: np.ndarray, count: int) -> int | None:
        """The leaf with the fewest pods fitting that is still >= `count` (first among
        equals), or None; `counts` is the array the updates describe."""
        if self._heaps is None:
            self._build(counts)
        assert self._heaps is not None
        i = bisect.bisect_left(self._values, count)
        if i == len(self._values):
            return None
        value = self._values[i]
        heap = self._heaps[value]
        while counts[heap[0]] != value:  # moved away since; some leaf is still there
            heapq.heappop(heap)
        return heap[0]


class LeafCounts:
    """Pods fitting on each leaf of a tree, for a caller that places on it many times
    and changes a few leaves in between (`update`), with what placement derives from
    them kept in step: the FitIndex and the per-level sums, each built on first use.
    """

    def __init__(self, tree: DomainTree, counts: np.ndarray):
        self.tree = tree
        self.counts = counts.astype(np.int64, copy=False)
        self.index = FitIndex()
        self._sums: list[np.ndarray] | None = None

    def sums(self) -> list[np.ndarray]:
        if self._sums is None:
            self._sums = self.tree.level_sums(self.counts)
        return self._sums

    def update(self, leaves: np.ndarray, new: np.ndarray, distinct: bool = False) -> None:
        """New counts for `leaves` (a leaf may be listed twice, with the same count,
        unless the caller says they are `distinct`)."""
        old = self.counts[leaves]
        moved = old != new
        if not moved.any():
            return
        leaves, old, new = leaves[moved], old[moved], new[moved]
        if not distinct:
            leaves, first = np.unique(leaves, return_index=True)
            old, new = old[first], new[first]
        self.index.update(leaves, old, new)
        if self._sums is not None:
            for lvl in range(len(self.tree.levels) - 1):
                np.add.at(self._sums[lvl], self.tree.node_domain[lvl][leaves], new - old)
        self.counts[leaves] = new   # also the last level of the sums


def place_counts(tree: DomainTree, counts: np.ndarray, count: int, topology: TopologyRequest | None,
                 leaves: LeafCounts | None = None) -> Placement:
    """Place `count` pods given how many fit on each leaf of `tree` (in tree order).

    `leaves`: `counts` as a LeafCounts kept up to date by the caller, so that its
    index and sums spare the passes over every leaf.
    """
    levels = tree.levels
    if count <= 0:
        return Placement({}, needed=0)
    req = _resolve(levels, topology, count)
    if isinstance(req, str):
        return Placement(None, req, needed=count)
    if len(tree) == 0:
        return Placement(None, "no eligible nodes", needed=count)
    if req.unconstrained and req.level_idx == len(levels) - 1 and req.slice_size == 1:
        node = leaves.index.fullest_fitting(counts, count) if leaves else fullest_fitting_node(counts, count)
        if node is not None:
            return Placement({tree.names[node]: count}, needed=count, fit=count)
    # Only a preferred request may climb above its level; nothing reads the levels above.
    top = 0 if not (req.required or req.unconstrained) else req.level_idx
    state, slices = tree.fill(counts, req.slice_idx, req.slice_size, req.inner, top,
                              leaves.sums() if leaves and not req.inner else None)
    found = _find_level(tree, req, state, slices, count, req.level_idx)
    if isinstance(found, Placement):
        return found
    fit_level, chosen = found
    lfc, best_fit = req.unconstrained, not req.unconstrained
    size = req.slice_size
    chosen_order = np.array(chosen, dtype=np.int64)
    current = _fill(chosen_order, slices[fit_level], count // size, size, best_fit)
    if current is None:
        return _fail(req, levels, count, int(slices[fit_level][chosen_order].sum()), False)
    lvl = fit_level
    depth = len(levels)
    # Down to the slice level the children of all chosen domains are pooled (as Kueue does).
    while lvl < min(depth - 1, req.slice_idx):
        kids = np.concatenate([np.arange(tree.children(lvl, d).start, tree.children(lvl, d).stop) for d in current])
        order = _sorted(kids, state[lvl + 1], slices[lvl + 1], lfc)
        nxt = _fill(order, slices[lvl + 1], count // size, size, best_fit)
        if nxt is None:
            return Placement(None, "internal: pooled descent lost pods", needed=count)
        current, lvl = nxt, lvl + 1
    # Below it each domain splits its own pods among its children, inner slices whole.
    while lvl < depth - 1:
        unit = req.inner.get(lvl + 1, 1)
        vals = state[lvl + 1] // unit
        nxt = {}
        for d, pods in current.items():
            span = tree.children(lvl, d)
            kids = np.arange(span.start, span.stop)
            order = _sorted(kids, state[lvl + 1], vals, lfc)
            part = _fill(order, vals, pods // unit, unit, best_fit)
            if part is None:
                return Placement(None, "internal: descent lost pods", needed=count)
            nxt.update(part)
        current, lvl = nxt, lvl + 1
    per_node = {tree.names[i]: c for i, c in sorted(current.items(), key=lambda kv: tree.names[kv[0]]) if c > 0}
    return Placement(per_node, needed=count, fit=count)


def fits_counts(tree: DomainTree, counts: np.ndarray, count: int, topology: TopologyRequest | None,
                leaves: LeafCounts | None = None) -> bool:
    """Would `place_counts` place the pod set? The same answer without building the
    placement (a search for victims asks it after every change): one domain at a
    required level holding every slice, else enough slices in all (at the top level,
    where a preferred request and an unconstrained one end up). Inner slice layers
    take the full placement."""
    if count <= 0:
        return True
    req = _resolve(tree.levels, topology, count)
    if isinstance(req, str) or len(tree) == 0:
        return False
    if req.inner:
        return place_counts(tree, counts, count, topology, leaves).ok
    needed = count // req.slice_size
    if req.slice_size == 1:
        sums = leaves.sums() if leaves is not None else tree.level_sums(counts)
        if req.required:
            return bool(sums[req.level_idx].max(initial=0) >= needed)
        return bool(sums[-1].sum() >= needed)
    top = req.level_idx if req.required else 0
    state, slices = tree.fill(counts, req.slice_idx, req.slice_size, req.inner, top,
                              leaves.sums() if leaves is not None else None)
    if req.required:
        return bool(slices[req.level_idx].max(initial=0) >= needed)
    return bool(slices[top].sum() >= needed)


def fullest_fitting_node(counts: np.ndarray, count: int) -> int | None:
    """LeastFreeCapacity at the node level when one node takes every pod (count >= 1):
    the node with the fewest pods that still fit, first in tree order among equals
    (what `_find_level` and `_fill` pick, without building the domain arrays); None
    when no node takes all."""
    room = np.where(counts >= count, counts, np.iinfo(np.int64).max)
    best = int(np.argmin(room))
    return best if counts[best] >= count else None


def _find_level(tree: DomainTree, req: _Request, state: list[np.ndarray], slices: list[np.ndarray],
                count: int, lvl: int) -> tuple[int, list[int]] | Placement:
    """Kueue findLevelWithFitDomains: the level and the domains that take the pod set."""
    levels = tree.levels
    needed = count // req.slice_size
    sl, st = slices[lvl], state[lvl]
    # One domain that takes every slice: LeastFreeCapacity and BestFit both take the
    # one with the fewest slices still enough, then the fewest pods, then the first
    # (BestFit's sorted order, slices desc / pods asc / index, and _best_fit pick the
    # same one): a min over the domains, no need to sort.
    fitting = np.flatnonzero(sl >= needed)
    if len(fitting):
        fitting = fitting[sl[fitting] == sl[fitting].min()]
        fitting = fitting[st[fitting] == st[fitting].min()]
        return lvl, [int(fitting[0])]
    if req.unconstrained:
        nonzero = np.flatnonzero(sl > 0)
        order = _sorted(nonzero, st, sl, True)
    else:
        if req.required:
            return _fail(req, levels, count, int(sl.max()), True)
        if lvl > 0:
            return _find_level(tree, req, state, slices, count, lvl - 1)
        order = _sorted(np.arange(len(sl)), st, sl, False)
    # At the top (or unconstrained): take domains in order until covered.
    taken = _fill(order, sl, needed, 1, not req.unconstrained)
    if taken is None:
        return _fail(req, levels, count, int(sl.sum()), False)
    return lvl, list(taken)


def place(
    free: Mapping[str, Resources],
    request: Resources,
    count: int,
    paths: Mapping[str, Path],
    levels: tuple[str, ...],
    topology: TopologyRequest | None = None,
) -> Placement:
    """Place `count` pods of `request` on the eligible nodes (`paths`: node -> domain path).

    `free` is each node's free capacity; nodes missing from it have none.
    """
    tree = DomainTree(levels, paths)
    names = sorted({r for r, v in request.items() if v > 0})
    req = np.array([request.get(r) for r in names], dtype=np.int64)
    matrix = np.array([[free.get(n, Resources()).get(r) for r in names] for n in tree.names],
                      dtype=np.int64).reshape(len(tree), len(names))
    return place_counts(tree, leaf_counts(matrix, req), count, topology)
