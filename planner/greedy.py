"""The greedy baseline: Kueue v0.17's scheduling cycles, replayed on a static snapshot.

`greedy()` runs KueueCycles (below) until nothing changes: each cycle pops the head
of every active ClusterQueue, nominates every head against the state at the start of
the cycle (planner.kueue_rules: Kueue's flavor assigner, then node placement, then
its classical preemption), orders them as Kueue's iterator does (lower borrowing
height first, then priority, then queue time), and processes them in order: admit,
issue preemptions and hold the room, hold quota, skip, or set aside. Stowplan plans the
end state; the KueueCycles docstring says how Kueue's requeues and evictions are
replayed and where a plan cannot follow Kueue.

Free capacity and quota usage live in `ClusterState`, updated in place per admission
or eviction (never recomputed), and what greedy and other passes (planner.improve,
planner.explain) need of Kueue's fit tests lives beside it: placement with fixed
flavors (`place_fixed`), the minimal-set search (`minimal_victims`), and the older
whole-snapshot evaluators (`evaluate`, `try_counts`, `Preemption`) those passes use.
This module only computes; it writes nothing.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from models import (
    HOSTNAME_LABEL, Admission, ClusterQueue, Decisions, Eviction, Node, ObjectRef, PodSet, PodSetAssignment,
    Resources, Snapshot, Workload, WorkloadState, is_gpu,
)
from planner import kueue_rules, placement
from planner.capacity import cluster_queue_usage, pod_set_by_name, quota_usage_of
from planner.placement import DomainTree, Placement, level_noun
from planner.semantics import (
    FlavorOption, QuotaTree, borrowing_queues, effective_priority, eviction_cost, evictable,
    flavor_options, must_borrow, namespace_allowed, node_allows, preemption_reason, queue_order_key, quota_usage,
)
from planner.topology import levels_for, node_path

FlavorResource = tuple[str, str]
GIB = 1 << 30


@dataclass(frozen=True)
class GreedyResult:
    decisions: Decisions
    reasons: dict[ObjectRef, str]   # pending, not admitted -> why, from greedy's last attempt


# ---------------------------------------------------------------- words for quantities

def amount(resource: str, value: int) -> str:
    """A bare amount in the unit people use: cores for cpu, Gi for memory, units otherwise."""
    if resource == "cpu":
        return f"{value / 1000:g}"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        if value % GIB == 0 or value >= 10 * GIB:
            return f"{value / GIB:g}Gi"
        return f"{value / (1 << 20):g}Mi"
    return str(value)


def quantity(resource: str, value: int) -> str:
    """An amount with its resource named: `16 nvidia.com/gpu`, `4 cpu cores`, `64Gi memory`."""
    if resource == "cpu":
        return f"{amount(resource, value)} cpu core{'' if value == 1000 else 's'}"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{amount(resource, value)} {resource}"
    if resource == "pods":
        return f"{value} pod{'' if value == 1 else 's'}"
    return f"{value} {resource}"


def pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def pod_shape(request: Resources) -> str:
    """One pod in a few words: its GPUs if it asks for any, else its cpu."""
    gpus = [(r, v) for r, v in request.items() if is_gpu(r) and v > 0]
    if gpus:
        return " + ".join(quantity(r, v) for r, v in gpus)
    if request.get("cpu") > 0:
        return quantity("cpu", request.get("cpu"))
    other = [(r, v) for r, v in request.items() if r != "pods" and v > 0]
    return quantity(*other[0]) if other else "no resources"


def admission_blocker(snapshot: Snapshot, workload: Workload) -> str | None:
    """Why a workload can never be admitted in this snapshot, or None."""
    if workload.blocked_reason:
        return workload.blocked_reason
    if workload.cluster_queue is None:
        return f"LocalQueue {workload.ref.namespace}/{workload.local_queue} does not exist"
    cq = snapshot.cluster_queues.get(workload.cluster_queue)
    if cq is None:
        return f"ClusterQueue {workload.cluster_queue} does not exist"
    if not cq.active:
        return f"ClusterQueue {cq.name} is inactive: {cq.inactive_reason}"
    if not namespace_allowed(snapshot, cq, workload.ref.namespace):
        return f"namespace {workload.ref.namespace} is not allowed by the namespaceSelector of ClusterQueue {cq.name}"
    return None


# ---------------------------------------------------------------- cluster state

@dataclass
class Choice:
    """One pod set's flavor, count and nodes, with what it charges to quota."""

    pod_set: PodSet
    option: FlavorOption
    count: int
    pods: dict[str, int]
    charges: dict[FlavorResource, int]

    def assignment(self) -> PodSetAssignment:
        return PodSetAssignment(
            name=self.pod_set.name,
            count=self.count,
            flavors=dict(sorted(self.option.by_resource.items())),
            levels=(HOSTNAME_LABEL,),
            domains=tuple(((node,), c) for node, c in sorted(self.pods.items()) if c > 0),
        )


@dataclass(frozen=True)
class _Eligible:
    key: object
    tree: DomainTree
    rows: np.ndarray            # matrix row of each leaf, in tree order
    leaf_of_row: np.ndarray     # matrix row -> leaf index, -1 when not eligible


def _free_matrix(snapshot: Snapshot, nodes: Sequence[Node], row: Mapping[str, int],
                 gone: set[ObjectRef]) -> tuple[np.ndarray, dict[str, int]]:
    """`capacity.free_capacity` as a nodes x resources matrix, by array updates: each
    node's allocatable less unmanaged (never negative), less the pods of running
    workloads not `gone`. Its resources: every one some node has free and every one
    some pod set requests, in name order."""
    requested = {r for w in snapshot.workloads for ps in w.pod_sets for r in ps.request.names()}
    every = sorted(requested.union(*(n.allocatable.names() + n.unmanaged.names() for n in nodes)))
    at = {r: j for j, r in enumerate(every)}

    def matrix(per_node: Sequence[Resources]) -> np.ndarray:
        """A row per node; nodes mostly share a few shapes, so a vector per distinct one."""
        kind: dict[Resources, int] = {}
        kinds = np.array([kind.setdefault(r, len(kind)) for r in per_node], dtype=np.int64)
        vectors = np.array([[shape.get(r) for r in every] for shape in kind], dtype=np.int64)
        return vectors.reshape(len(kind), len(every))[kinds]

    base = np.maximum(0, matrix([n.allocatable for n in nodes]) - matrix([n.unmanaged for n in nodes]))
    keep = sorted(requested | {r for r in every if (base[:, at[r]] > 0).any()})
    # (node row, pods, request) per node a running workload uses; one array update for all.
    rows: list[int] = []
    counts: list[int] = []
    kinds: list[int] = []
    kind: dict[Resources, int] = {}
    for w in snapshot.workloads:
        if w.state is not WorkloadState.RUNNING or w.ref in gone:
            continue
        for psa in w.assignment:
            ps = pod_set_by_name(w, psa.name)
            if ps is None:
                continue
            k = kind.setdefault(ps.request, len(kind))
            for node, count in psa.pods_per_node().items():
                if node in row:
                    rows.append(row[node])
                    counts.append(count)
                    kinds.append(k)
    if rows:
        vectors = np.array([[request.get(r) for r in every] for request in kind], dtype=np.int64)
        used = np.array(counts, dtype=np.int64)[:, None] * vectors[np.array(kinds, dtype=np.int64)]
        np.subtract.at(base, np.array(rows, dtype=np.int64), used)
    return base[:, [at[r] for r in keep]], {r: j for j, r in enumerate(keep)}


@dataclass(frozen=True)
class Freed:
    """What releasing a set of running workloads gives back (ClusterState.freed_by): node
    rows (repeated where workloads share a node) with what is used on each, the distinct
    rows, and the quota charges per (queue, flavor/resource)."""

    rows: np.ndarray
    used: np.ndarray
    distinct: np.ndarray
    charges: tuple[tuple[str, FlavorResource, int], ...]


@dataclass
class _LeafCounts:
    """Pods of one request fitting on each node of one eligible set, as of `seen`
    chunks of the changed-rows log."""

    leaves: placement.LeafCounts
    seen: int


class ClusterState:
    """Free node capacity (a nodes x resources matrix) and quota usage, updated in place."""

    def __init__(self, snapshot: Snapshot, evicted: Iterable[ObjectRef] = ()):
        gone = set(evicted)
        self.snapshot = snapshot
        self.node_objs = sorted((n for n in snapshot.nodes if n.usable), key=lambda n: n.name)
        self.row = {n.name: i for i, n in enumerate(self.node_objs)}
        self.free, self.col = _free_matrix(snapshot, self.node_objs, self.row, gone)
        self.quota = QuotaTree(snapshot)
        self.cq_usage: dict[str, dict[FlavorResource, int]] = defaultdict(dict)
        for key, usage in cluster_queue_usage(snapshot, gone).items():
            self.cq_usage[key].update(usage)
        # Per queue, how many flavor/resources it uses above nominal quota (kept by charge).
        self._over: dict[str, int] = {key: sum(v > self.quota.limits(key, fr)[0] for fr, v in usage.items())
                                      for key, usage in self.cq_usage.items()}
        self._tree_usage: dict[FlavorResource, dict[str, int]] = {}
        # available() per flavor/resource and queue, until a charge to that flavor/resource:
        # fit tests ask it far more often than charges change it.
        self._available: dict[FlavorResource, dict[str, int]] = {}
        self._trees: dict[object, _Eligible] = {}
        self._vectors: dict[Resources, np.ndarray] = {}
        self._request_columns: dict[Resources, tuple[np.ndarray, np.ndarray]] = {}
        # Rows whose free capacity changed, a chunk per update, in order, and how many rows
        # before each chunk: cached leaf counts catch up from here.
        self._changed: list[np.ndarray] = []
        self._changed_before: list[int] = [0]
        self._counts: dict[int, _LeafCounts] = {}   # by _count_keys of (eligible key, request)
        self._placed: dict[tuple[Any, ...], Placement] = {}   # place() answers since the last node change
        self._placed_at = 0
        self._options: dict[tuple[str, Resources, tuple[Any, ...]], list[FlavorOption] | str] = {}
        # Memos by object identity, for the hot paths: hashing requests and tolerations
        # (dataclasses) on every fit test shows in profiles. Each entry holds the objects
        # it is keyed by, so their ids cannot be reused while it exists.
        self._options_of: dict[tuple[str, int], tuple[PodSet, list[FlavorOption] | str]] = {}
        self._placing_of: dict[tuple[int, int], tuple[FlavorOption, PodSet, _Eligible, int]] = {}
        self._count_keys: dict[tuple[object, Resources], int] = {}
        self._domain_unions: dict[object, tuple[list[tuple[str, ...]], list[np.ndarray]]] = {}
        # By id() (hashing refs shows in profiles); each entry holds its workload, so the id stays its own.
        self._footprints: dict[int, tuple[Workload, tuple[np.ndarray, np.ndarray, tuple[tuple[FlavorResource, int], ...]]]] = {}
        self.version = 0   # bumped by every commit and eviction: "has anything changed since?"
        self.changes = 0   # bumped by every change to free capacity or quota usage

    def options(self, cq: ClusterQueue, pod_set: PodSet) -> list[FlavorOption] | str:
        """`semantics.flavor_options`, cached: it reads only the queue, the pod set's request
        and tolerations, and the flavors, none of which change during a run."""
        seen = self._options_of.get((cq.name, id(pod_set)))
        if seen is not None and seen[0] is pod_set:
            return seen[1]
        key = (cq.name, pod_set.request, pod_set.tolerations)
        found = self._options.get(key)
        if found is None:
            found = self._options[key] = flavor_options(self.snapshot, cq, pod_set)
        self._options_of[(cq.name, id(pod_set))] = (pod_set, found)
        return found

    # -- quota

    def _usage(self, fr: FlavorResource) -> dict[str, int]:
        if fr not in self._tree_usage:
            self._tree_usage[fr] = self.quota.tree_usage(self.cq_usage, fr)
        return self._tree_usage[fr]

    def available(self, cq: str, fr: FlavorResource) -> int:
        known = self._available.get(fr)
        if known is None:
            known = self._available[fr] = {}
        found = known.get(cq)
        if found is None:
            found = known[cq] = self.quota.available(f"cq:{cq}", fr, self._usage(fr))
        return found

    def lists(self, cq: str, fr: FlavorResource) -> bool:
        return self.quota.lists(f"cq:{cq}", fr)

    def used(self, cq: str, fr: FlavorResource) -> int:
        return self.cq_usage.get(f"cq:{cq}", {}).get(fr, 0)

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        return self.quota.limits(f"cq:{cq}", fr)[0]

    def borrowing(self) -> set[str]:
        """`semantics.borrowing_queues` of the current usage, kept up to date by charge."""
        return {key.removeprefix("cq:") for key, over in self._over.items() if over > 0}

    def charge(self, cq: str, fr: FlavorResource, delta: int) -> None:
        """Add usage to a queue and carry the change up the cohort tree incrementally."""
        key = f"cq:{cq}"
        self._available.pop(fr, None)
        self.changes += 1
        old = self.cq_usage[key].get(fr, 0)
        self.cq_usage[key][fr] = old + delta
        nominal = self.quota.limits(key, fr)[0]
        self._over[key] = self._over.get(key, 0) + (old + delta > nominal) - (old > nominal)
        usage = self._tree_usage.get(fr)
        if usage is None or key not in self.quota.parent:
            return
        self.quota.move_usage(usage, key, fr, old, old + delta)

    def quota_shortfall(self, cq: str, charges: Mapping[FlavorResource, int],
                        pending: Mapping[FlavorResource, int]) -> str | None:
        """None when the queue can take `charges` on top of `pending`, else why not."""
        for fr, need in sorted(charges.items()):
            flavor, resource = fr
            if not self.lists(cq, fr):
                return f"ClusterQueue {cq} has no quota entry for {resource} in flavor {flavor}"
            if need <= 0:
                continue
            room = self.available(cq, fr) - pending.get(fr, 0)
            if room < need:
                return (f"insufficient quota for {resource} in flavor {flavor}: needs "
                        f"{quantity(resource, need)}, {amount(resource, max(0, room))} available to ClusterQueue {cq}")
        return None

    def borrows(self, cq: str, charges: Mapping[FlavorResource, int]) -> bool:
        """Kueue's Borrows(): some flavor/resource would go above the queue's nominal quota."""
        return any(self.used(cq, fr) + v > self.nominal(cq, fr) for fr, v in charges.items() if v > 0)

    # -- nodes

    def vector(self, request: Resources) -> np.ndarray:
        vec = self._vectors.get(request)
        if vec is None:
            vec = np.zeros(len(self.col), dtype=np.int64)
            for r, v in request.items():
                vec[self.col[r]] = v
            self._vectors[request] = vec
        return vec

    def eligible(self, option: FlavorOption, pod_set: PodSet) -> _Eligible:
        """The nodes a flavor choice allows a pod set, as a domain tree over matrix rows."""
        key = (option.flavors, tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations)
        cached = self._trees.get(key)
        if cached is None:
            flavors = [self.snapshot.flavors[f] for f in option.flavors]
            levels = levels_for(self.snapshot, flavors)
            paths = {}
            for node in self.node_objs:
                if node_allows(node, flavors, pod_set):
                    path = node_path(node, levels)
                    if path is not None:
                        paths[node.name] = path
            tree = DomainTree(levels, paths)
            rows = np.array([self.row[n] for n in tree.names], dtype=np.int64)
            leaf_of_row = np.full(len(self.node_objs), -1, dtype=np.int64)
            leaf_of_row[rows] = np.arange(len(rows))
            cached = self._trees[key] = _Eligible(key, tree, rows, leaf_of_row)
        return cached

    def leaf_counts(self, eligible: _Eligible, request: Resources) -> np.ndarray:
        """Pods of `request` fitting on each eligible node now (read-only; cached, caught up by rows)."""
        return self._leaves(eligible, request).counts

    def _leaves(self, eligible: _Eligible, request: Resources, key: int | None = None) -> placement.LeafCounts:
        if key is None:
            key = self._count_keys.setdefault((eligible.key, request), len(self._count_keys))
        cached = self._counts.get(key)
        seen = len(self._changed)
        if cached is None:
            counts = self._fit_counts(eligible.rows, request)
            cached = self._counts[key] = _LeafCounts(placement.LeafCounts(eligible.tree, counts), seen)
        elif cached.seen < seen:
            # One chunk lists each row once; more may list a row twice (the same count).
            distinct = seen - cached.seen == 1
            if self._changed_before[seen] - self._changed_before[cached.seen] > len(eligible.rows) // 4:
                leaves = np.arange(len(eligible.rows))  # cheaper to recount every node
                rows = eligible.rows
                distinct = True
            else:
                rows = self._changed[cached.seen] if distinct else np.concatenate(self._changed[cached.seen:])
                leaves = eligible.leaf_of_row[rows]
                mine = leaves >= 0
                leaves, rows = leaves[mine], rows[mine]
            cached.leaves.update(leaves, self._fit_counts(rows, request), distinct)
            cached.seen = seen
        return cached.leaves

    def _fit_counts(self, rows: np.ndarray, request: Resources) -> np.ndarray:
        """`placement.leaf_counts` of these rows of the free matrix, reading only the
        columns the request needs."""
        need, amounts = self._columns(request)
        if not len(need):
            return np.zeros(len(rows), dtype=np.int64)
        counts: np.ndarray = np.maximum((self.free[rows][:, need] // amounts).min(axis=1), 0)
        return counts

    def place(self, option: FlavorOption, pod_set: PodSet, count: int) -> Placement:
        seen = self._placing_of.get((id(option), id(pod_set)))
        if seen is None or seen[0] is not option or seen[1] is not pod_set:
            eligible = self.eligible(option, pod_set)
            key = self._count_keys.setdefault((eligible.key, pod_set.request), len(self._count_keys))
            seen = self._placing_of[(id(option), id(pod_set))] = (option, pod_set, eligible, key)
        eligible = seen[2]
        # The same shape asks again while no node changed (Kueue's heads of one cycle,
        # many of one shape): the same answer.
        if self._placed_at != len(self._changed):
            self._placed.clear()
            self._placed_at = len(self._changed)
        memo = (seen[3], count, pod_set.topology)
        found = self._placed.get(memo)
        if found is None:
            leaves = self._leaves(eligible, pod_set.request, seen[3])
            found = self._placed[memo] = placement.place_counts(eligible.tree, leaves.counts, count,
                                                                pod_set.topology, leaves)
        return found

    def fits(self, option: FlavorOption, pod_set: PodSet, count: int) -> bool:
        """Would place() place it? (placement.fits_counts: no placement built.)"""
        seen = self._placing_of.get((id(option), id(pod_set)))
        if seen is None or seen[0] is not option or seen[1] is not pod_set:
            self.place(option, pod_set, 0)
            seen = self._placing_of[(id(option), id(pod_set))]
        leaves = self._leaves(seen[2], pod_set.request, seen[3])
        return placement.fits_counts(seen[2].tree, leaves.counts, count, pod_set.topology, leaves)

    def take(self, pods: Mapping[str, int], request: Resources, sign: int = 1) -> None:
        vec = self.vector(request)
        rows = []
        for node, count in pods.items():
            row = self.row[node]
            self.free[row] -= sign * count * vec
            rows.append(row)
        self._log(np.array(rows, dtype=np.int64))

    def _log(self, rows: np.ndarray) -> None:
        """Note rows whose free capacity changed (distinct)."""
        self.changes += 1
        if len(rows):
            self._changed.append(rows)
            self._changed_before.append(self._changed_before[-1] + len(rows))

    def nodes_fit(self, pods: Mapping[str, int], request: Resources) -> bool:
        """Room on each node for its pods, in the resources the pods request (a node
        over-committed in something else still takes them, as Kueue's Fits counts)."""
        need, amounts = self._columns(request)
        return all(bool((self.free[self.row[n], need] >= c * amounts).all()) for n, c in pods.items())

    def _columns(self, request: Resources) -> tuple[np.ndarray, np.ndarray]:
        found = self._request_columns.get(request)
        if found is None:
            vec = self.vector(request)
            need = np.flatnonzero(vec > 0)
            found = self._request_columns[request] = (need, vec[need])
        return found

    # -- whole decisions

    def commit(self, cq: str, choices: Sequence[Choice]) -> None:
        self.version += 1
        for choice in choices:
            self.take(choice.pods, choice.pod_set.request)
            for fr, v in choice.charges.items():
                self.charge(cq, fr, v)

    def still_fits(self, cq: str, choices: Sequence[Choice]) -> bool:
        """Does a nomination made earlier in the cycle still fit (Kueue re-checks, it does not redo)?"""
        charges: dict[FlavorResource, int] = defaultdict(int)
        for choice in choices:
            for fr, v in choice.charges.items():
                charges[fr] += v
        if self.quota_shortfall(cq, charges, {}) is not None:
            return False
        if len(choices) == 1:
            return self.nodes_fit(choices[0].pods, choices[0].pod_set.request)
        taken: list[Choice] = []
        try:
            for choice in choices:  # pod sets of one workload may share nodes
                if not self.nodes_fit(choice.pods, choice.pod_set.request):
                    return False
                self.take(choice.pods, choice.pod_set.request)
                taken.append(choice)
            return True
        finally:
            for choice in taken:
                self.take(choice.pods, choice.pod_set.request, sign=-1)

    def fits_back(self, workload: Workload) -> bool:
        """Would a released running workload fit again as it was placed: room on its
        nodes and quota in its ClusterQueue (as greedy checks an admission)?"""
        rows, used, charges = self._footprint(workload)
        if not bool((self.free[rows] >= used).all()):
            return False
        return workload.cluster_queue is None or \
            self.quota_shortfall(workload.cluster_queue, dict(charges), {}) is None

    def release(self, workload: Workload, sign: int = 1) -> None:
        """Give back a running workload's nodes and quota (sign=1), or take them again (-1)."""
        self.release_many([workload], sign)

    def release_many(self, workloads: Sequence[Workload], sign: int = 1) -> None:
        """release() of several workloads in one update: the same end state, as node
        capacity adds up and cohort usage moves by the sum of the charges (see charge)."""
        if workloads:
            self.release_freed(self.freed_by(workloads), sign)

    def freed_by(self, workloads: Sequence[Workload]) -> Freed:
        """What releasing `workloads` gives back, gathered once (release_freed applies it):
        a search that releases the same set again and again gathers it once."""
        prints = [self._footprint(w) for w in workloads]
        charges: dict[tuple[str, FlavorResource], int] = defaultdict(int)
        for w, (_, _, usage) in zip(workloads, prints):
            if w.cluster_queue is not None:
                for fr, amount in usage:
                    charges[(w.cluster_queue, fr)] += amount
        quota = tuple((cq, fr, amount) for (cq, fr), amount in charges.items())
        if len(prints) == 1:  # distinct rows
            return Freed(prints[0][0], prints[0][1], prints[0][0], quota)
        if not prints:
            empty = np.zeros(0, dtype=np.int64)
            return Freed(empty, np.zeros((0, len(self.col)), dtype=np.int64), empty, quota)
        rows = np.concatenate([p[0] for p in prints])
        return Freed(rows, np.concatenate([p[1] for p in prints]), np.unique(rows), quota)

    def release_freed(self, freed: Freed, sign: int = 1) -> None:
        """Give back what `freed` gathered (sign=1), or take it again (-1)."""
        if freed.rows is freed.distinct:  # no need for np.add.at
            self.free[freed.rows] += sign * freed.used
        else:
            np.add.at(self.free, freed.rows, sign * freed.used)
        self._log(freed.distinct)  # each chunk of the log lists a row once
        for cq, fr, amount in freed.charges:
            self.charge(cq, fr, -sign * amount)

    def _footprint(self, workload: Workload) -> tuple[np.ndarray, np.ndarray, tuple[tuple[FlavorResource, int], ...]]:
        """A running workload's matrix rows (distinct), what it uses on each, and its quota
        charges; cached, as preemption releases and takes back the same workloads often.
        (Charges summed per flavor/resource move the cohort usage exactly as one by one.)"""
        seen = self._footprints.get(id(workload))
        if seen is None or seen[0] is not workload:
            used: dict[int, np.ndarray] = {}
            for psa in workload.assignment:
                ps = pod_set_by_name(workload, psa.name)
                if ps is None:
                    continue
                for node, count in psa.pods_per_node().items():
                    if node in self.row:
                        row = self.row[node]
                        used[row] = used.get(row, 0) + count * self.vector(ps.request)
            rows = np.array(sorted(used), dtype=np.int64)
            matrix = np.array([used[r] for r in sorted(used)], dtype=np.int64).reshape(len(rows), len(self.col))
            seen = self._footprints[id(workload)] = (workload, (rows, matrix, tuple(quota_usage_of(workload).items())))
        return seen[1]

    @classmethod
    def after(cls, snapshot: Snapshot, decisions: Decisions) -> "ClusterState":
        """The state a plan leaves: its evictions gone, its admissions in place."""
        state = cls(snapshot, evicted=[e.workload for e in decisions.evictions])
        by_ref = {w.ref: w for w in snapshot.workloads}
        for a in sorted(decisions.admissions, key=lambda a: a.workload):
            if a.workload in by_ref:
                state.apply_admission(by_ref[a.workload], a)
        return state

    def apply_admission(self, workload: Workload, admission: Admission) -> None:
        """Account for a decided admission (explain and callers replaying a plan)."""
        for psa in admission.pod_sets:
            ps = pod_set_by_name(workload, psa.name)
            if ps is None:
                continue
            self.take({n: c for n, c in psa.pods_per_node().items() if n in self.row}, ps.request)
            for resource, flavor in psa.flavors.items():
                self.charge(admission.cluster_queue, (flavor, resource), psa.count * ps.request.get(resource))


# ---------------------------------------------------------------- one workload

class _Tentative:
    """Charges and node takes of a workload being tried, undone afterwards."""

    def __init__(self, state: ClusterState):
        self.state = state
        self.pending: dict[FlavorResource, int] = defaultdict(int)
        self.choices: list[Choice] = []

    def add(self, choice: Choice) -> None:
        self.state.take(choice.pods, choice.pod_set.request)
        for fr, v in choice.charges.items():
            self.pending[fr] += v
        self.choices.append(choice)

    def rollback(self, keep: int = 0) -> None:
        while len(self.choices) > keep:
            choice = self.choices.pop()
            self.state.take(choice.pods, choice.pod_set.request, sign=-1)
            for fr, v in choice.charges.items():
                self.pending[fr] -= v


def _try_pod_set(state: ClusterState, cq: ClusterQueue, ps: PodSet, count: int, tent: _Tentative) -> Choice | str:
    """Flavor options in order; quota, then placement; flavorFungibility decides when to stop."""
    options = state.options(cq, ps)
    if isinstance(options, str):
        return options
    first_reason: str | None = None
    borrowing_fit: Choice | None = None
    for option in options:
        charges = quota_usage(ps, option, count)
        short = state.quota_shortfall(cq.name, charges, tent.pending)
        if short is not None:
            first_reason = first_reason or short
            continue
        where = state.place(option, ps, count)
        if not where.ok:
            flavors = "/".join(option.flavors)
            first_reason = first_reason or f"{pods(count)} of {pod_shape(ps.request)} on flavor {flavors}: {where.reason}"
            continue
        choice = Choice(ps, option, count, dict(where.pods or {}), charges)
        total = {fr: tent.pending.get(fr, 0) + v for fr, v in charges.items()}
        if not state.borrows(cq.name, total) or cq.when_can_borrow != "TryNextFlavor":
            return choice
        borrowing_fit = borrowing_fit or choice
    if borrowing_fit is not None:
        return borrowing_fit
    return first_reason or f"no flavor of ClusterQueue {cq.name} fits"


def _group_level(members: Sequence[PodSet]) -> str | None:
    for mode in ("required", "preferred"):
        for ps in members:
            if ps.topology.mode == mode and ps.topology.level:
                return ps.topology.level
    return None


def _try_group(state: ClusterState, cq: ClusterQueue, members: Sequence[PodSet], counts: Sequence[int],
               tent: _Tentative) -> list[Choice] | str:
    """Pod sets sharing a group name: one common domain at their level, smallest that fits first."""
    level = _group_level(members)
    if level is None:
        return _try_each(state, cq, members, counts, tent)
    all_options: list[list[FlavorOption]] = []
    for ps in members:
        opts = state.options(cq, ps)
        if isinstance(opts, str):
            return opts
        all_options.append(opts)
    names = ", ".join(ps.name for ps in members)
    reason: str | None = None
    for option in all_options[0]:  # the members share a flavor, as they share nodes
        found = [next((o for o in opts if o.flavors == option.flavors), None) for opts in all_options[1:]]
        picks = [option] + [p for p in found if p is not None]
        if len(picks) < len(members):
            continue
        charges_each = [quota_usage(ps, opt, n) for ps, opt, n in zip(members, picks, counts)]
        total: dict[FlavorResource, int] = defaultdict(int)
        for ch in charges_each:
            for fr, v in ch.items():
                total[fr] += v
        short = state.quota_shortfall(cq.name, total, tent.pending)
        if short is not None:
            reason = reason or short
            continue
        placed = _group_at(state, members, picks, counts, level, tent)
        if not isinstance(placed, str):
            return placed
        reason = reason or placed
    if reason is None:
        return f"pod sets {names} have no common flavor in ClusterQueue {cq.name}"
    return reason


def _group_at(state: ClusterState, members: Sequence[PodSet], picks: Sequence[FlavorOption], counts: Sequence[int],
              level: str, tent: _Tentative) -> list[Choice] | str:
    """The group's members, each with its flavor choice, in one domain at `level`:
    candidates are domains where every member fits alone, smallest room (for the
    biggest member) first, then by domain. Taken in `tent` on success."""
    trees = [state.eligible(opt, ps) for opt, ps in zip(picks, members)]
    if any(level not in e.tree.levels for e in trees):
        return f"the topology of flavor {'/'.join(picks[0].flavors)} has no level {level}"
    domains, room = _group_room(state, trees, members, level)
    biggest = max(range(len(members)), key=lambda k: counts[k])
    fit = np.flatnonzero((room >= np.array(counts, dtype=np.int64)[:, None]).all(axis=0))
    for d in fit[np.lexsort((fit, room[biggest, fit]))]:
        values = domains[d]
        mark = len(tent.choices)
        for e, ps, opt, n in zip(trees, members, picks, counts):
            tree = e.tree
            lvl = tree.levels.index(level)
            inside = tree.domain_index(lvl, values)
            leaf = state.leaf_counts(e, ps.request)
            leaf = np.where(tree.node_domain[lvl] == inside, leaf, 0) if inside is not None else leaf * 0
            where = placement.place_counts(tree, leaf, n, ps.topology)
            if not where.ok:
                tent.rollback(mark)
                break
            tent.add(Choice(ps, opt, n, dict(where.pods or {}), quota_usage(ps, opt, n)))
        else:
            return tent.choices[mark:]
    names = ", ".join(ps.name for ps in members)
    return f"pod sets {names} do not fit together in one {level_noun(level)} ({level})"


def place_fixed(state: ClusterState, cq: ClusterQueue, workload: Workload,
                picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> list[Choice] | tuple[int, str]:
    """Nodes for every pod set of `workload` with its flavors and count fixed (Kueue's
    TAS assignment for a workload: later pod sets see what earlier ones take; a pod-set
    group shares one domain), as choices in pod set order; or (index of the pod set that
    does not fit, why). Quota is not looked at. The state is left as found."""
    if len(picks) == 1:   # one pod set: nothing to hold while the next is placed
        ps, opt, n = picks[0]
        where = state.place(opt, ps, n)
        if not where.ok:
            return 0, f"{pods(n)} of {pod_shape(ps.request)} on flavor {'/'.join(opt.flavors)}: {where.reason}"
        return [Choice(ps, opt, n, dict(where.pods or {}), quota_usage(ps, opt, n))]
    tent = _Tentative(state)
    index = {id(ps): i for i, (ps, _, _) in enumerate(picks)}
    try:
        done: set[int] = set()
        for i, (ps, option, count) in enumerate(picks):
            if i in done:
                continue
            group = [j for j, (other, _, _) in enumerate(picks)
                     if ps.topology.group and other.topology.group == ps.topology.group] or [i]
            done.update(group)
            members = [picks[j][0] for j in group]
            level = _group_level(members) if len(group) > 1 else None
            if level is not None:
                placed = _group_at(state, members, [picks[j][1] for j in group], [picks[j][2] for j in group],
                                   level, tent)
                if isinstance(placed, str):
                    return i, placed
                continue
            for j in group:
                member, opt, n = picks[j]
                where = state.place(opt, member, n)
                if not where.ok:
                    return j, f"{pods(n)} of {pod_shape(member.request)} on flavor {'/'.join(opt.flavors)}: {where.reason}"
                choice = Choice(member, opt, n, dict(where.pods or {}), quota_usage(member, opt, n))
                if len(done) == len(picks) and j == group[-1]:   # the last: nothing after it needs its nodes held
                    return sorted(tent.choices + [choice], key=lambda c: index[id(c.pod_set)])
                tent.add(choice)
        return sorted(tent.choices, key=lambda c: index[id(c.pod_set)])
    finally:
        tent.rollback()


def fits_fixed(state: ClusterState, cq: ClusterQueue, workload: Workload,
               picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> bool:
    """Would place_fixed place them? Cheaper for one pod set (no placement built)."""
    if len(picks) == 1:
        ps, option, count = picks[0]
        return state.fits(option, ps, count)
    return not isinstance(place_fixed(state, cq, workload, picks), tuple)


def _group_room(state: ClusterState, trees: Sequence[_Eligible], members: Sequence[PodSet],
                level: str) -> tuple[list[tuple[str, ...]], np.ndarray]:
    """Every domain at `level` of any member's eligible nodes, sorted, and the pods of each
    member that fit in each alone (members x domains; 0 where a member has no node)."""
    key = (tuple(e.key for e in trees), level)
    found = state._domain_unions.get(key)
    if found is None:
        at_level = [e.tree.values[e.tree.levels.index(level)] for e in trees]
        domains = sorted({v for values in at_level for v in values})
        position = {v: i for i, v in enumerate(domains)}
        index = [np.array([position[v] for v in values], dtype=np.int64) for values in at_level]
        found = state._domain_unions[key] = (domains, index)
    domains, index = found
    room = np.zeros((len(trees), len(domains)), dtype=np.int64)
    for k, (e, ps) in enumerate(zip(trees, members)):
        if len(e.tree):
            room[k, index[k]] = state._leaves(e, ps.request).sums()[e.tree.levels.index(level)]
    return domains, room


def _try_each(state: ClusterState, cq: ClusterQueue, members: Sequence[PodSet], counts: Sequence[int],
              tent: _Tentative) -> list[Choice] | str:
    out = []
    for ps, n in zip(members, counts):
        result = _try_pod_set(state, cq, ps, n, tent)
        if isinstance(result, str):
            return f"pod set {ps.name}: {result}" if len(members) > 1 else result
        tent.add(result)
        out.append(result)
    return out


def try_counts(state: ClusterState, workload: Workload, counts: Sequence[int]) -> list[Choice] | str:
    """Place every pod set of `workload` at `counts`, all or nothing; the state is left as found."""
    cq = state.snapshot.cluster_queues[workload.queue_name]
    tent = _Tentative(state)
    try:
        done: set[int] = set()
        many = len(workload.pod_sets) > 1
        for i, ps in enumerate(workload.pod_sets):
            if i in done:
                continue
            group = [j for j, other in enumerate(workload.pod_sets)
                     if ps.topology.group and other.topology.group == ps.topology.group] or [i]
            done.update(group)
            members = [workload.pod_sets[j] for j in group]
            if len(members) > 1:
                grouped = _try_group(state, cq, members, [counts[j] for j in group], tent)
                if isinstance(grouped, str):
                    return grouped
                continue
            single = _try_pod_set(state, cq, ps, counts[i], tent)
            if isinstance(single, str):
                return f"pod set {ps.name}: {single}" if many else single
            if len(done) == len(workload.pod_sets):  # the last: no pod set after it needs its nodes held
                return _in_order(workload, tent.choices + [single])
            tent.add(single)
        return _in_order(workload, tent.choices)
    finally:
        tent.rollback()


def _in_order(workload: Workload, choices: list[Choice]) -> list[Choice]:
    order = {ps.name: k for k, ps in enumerate(workload.pod_sets)}
    return sorted(choices, key=lambda c: order[c.pod_set.name])


def fits_at(state: ClusterState, workload: Workload, counts: Sequence[int]) -> bool:
    """Would try_counts place `workload` at `counts`? The same answer, cheaper for one pod
    set: no later pod set needs its nodes held, so nothing is taken and given back."""
    if len(workload.pod_sets) > 1:
        return not isinstance(try_counts(state, workload, counts), str)
    cq = state.snapshot.cluster_queues[workload.queue_name]
    return not isinstance(_try_pod_set(state, cq, workload.pod_sets[0], counts[0], _Tentative(state)), str)


def evaluate(state: ClusterState, workload: Workload) -> list[Choice] | str:
    """Full counts first; an elastic workload then binary-searches the largest count that fits."""
    full = [ps.count for ps in workload.pod_sets]
    result = try_counts(state, workload, full)
    if not isinstance(result, str) or not workload.elastic:
        return result
    deltas = [ps.count - ps.minimum for ps in workload.pod_sets]
    steps = max(deltas)
    if steps <= 0:
        return result

    def counts_at(k: int) -> list[int]:  # Kueue's PodSetReducer: all elastic pod sets shrink together
        return [ps.count - math.ceil(d * k / steps) for ps, d in zip(workload.pod_sets, deltas)]

    lowest = try_counts(state, workload, counts_at(steps))
    if isinstance(lowest, str):
        return lowest
    lo, hi, best = 1, steps - 1, lowest
    while lo <= hi:
        mid = (lo + hi) // 2
        attempt = try_counts(state, workload, counts_at(mid))
        if isinstance(attempt, str):
            lo = mid + 1
        else:
            best, hi = attempt, mid - 1
    return best


# ---------------------------------------------------------------- preemption

MAX_CANDIDATES = 256   # per attempt, after Kueue's ordering: bounds the work one head can cost


def may_preempt(cq: ClusterQueue) -> bool:
    """Does the queue's spec.preemption let its workloads evict anything at all?"""
    p = cq.preemption
    return "Never" != p.within_cluster_queue or "Never" != p.reclaim_within_cohort or "Never" != p.borrow_within_cohort


def minimal_victims(state: ClusterState, candidates: Sequence[Workload], fits: Callable[[], bool],
                    misfit: bool = False) -> list[int] | None:
    """Kueue's classical search: remove candidates in order until `fits()`, then add
    each back in reverse (all but the last removed), keeping it where it still fits.

    Returns the indexes of the victims, left released in `state`; None, with `state`
    as found, when even removing every candidate does not make it fit. Freeing more
    never turns a fit into a misfit (quota and capacity only grow), so the shortest
    fitting prefix is found by galloping then bisection, and what it need not lose
    is put back a run at a time: Kueue's answer in O(v log n) fit tests for v victims
    among n candidates, rather than n. (Were some placement not monotone, the victims
    found still make room.)

    `misfit`: the caller has just found that it does not fit as things stand (a fit
    test spared).
    """
    n = len(candidates)
    if misfit and n == 0:
        return None
    hi = first_fitting_prefix(state, list(candidates), 1 if misfit else 0, lambda k: n, fits, doubling=True)
    if hi is None:
        return None
    return put_back(state, candidates[:hi], fits)


def first_fitting_prefix(state: ClusterState, candidates: list[Workload], known: int, extend: Callable[[int], int],
                         fits: Callable[[], bool], doubling: bool = False, probe_whole: bool = False) -> int | None:
    """The shortest prefix of `candidates`, at least `known` long (nothing shorter fits),
    whose release makes `fits()` true; left released in `state`. None, with `state` as
    found, when no prefix does. `extend(k)` may grow `candidates` to k (it returns
    the length there is), so that a lazily computed order is read only as far as needed.
    Galloping then bisection (fits() is monotone in what is released): steps that
    double from `known` (the answer is usually just past it), or, `doubling`, prefixes
    that double in length. `probe_whole`: after the first miss, test every candidate
    released at once, and give up there if even that does not fit (one test where
    galloping to the end takes a few; worth it where misses are common)."""
    removed = 0
    chunks: list[tuple[int, Freed]] = []   # what each release gave, to take back as it was

    def prefix(k: int) -> None:
        nonlocal removed
        while removed > k:
            start, freed = chunks.pop()
            state.release_freed(freed, sign=-1)
            removed = start
        if removed < k:
            freed = state.freed_by(candidates[removed:k])
            state.release_freed(freed)
            chunks.append((removed, freed))
        removed = k

    bad, k, step = known - 1, known, 1
    while True:
        k = min(k, extend(k))
        prefix(k)
        if fits():
            break
        bad = k
        if extend(k + 1) <= k:
            prefix(0)
            return None
        if probe_whole and k == known:
            whole = extend(len(candidates) + (1 << 40))
            prefix(whole)
            if not fits():
                prefix(0)
                return None
        k, step = (max(1, 2 * k) if doubling else k + step), 2 * step
    lo, hi = bad + 1, k
    while lo < hi:
        mid = (lo + hi) // 2
        prefix(mid)
        if fits():
            hi = mid
        else:
            lo = mid + 1
    prefix(hi)
    return hi


def put_back(state: ClusterState, released: Sequence[Workload], fits: Callable[[], bool]) -> list[int]:
    """Kueue's fill-back over `released` (all released in `state`, the preemptor fits):
    each but the last, from the last but one down, is taken back where the preemptor
    still fits. Returns the indexes still released (the victims), left so in `state`.

    A run that fits back all together would fit back one at a time too (each step
    leaves at least as much free as the run's test), so runs are tried whole and halved
    where they do not fit, the later half first: the same victims in O(v log k) fit
    tests for v victims rather than k (k reaches hundreds)."""
    hi = len(released)
    victims = set(range(hi))
    runs = [(0, hi - 1)]   # half-open, the next to decide last
    while runs:
        first, end = runs.pop()
        if first >= end:
            continue
        run = released[first:end]
        state.release_many(run, sign=-1)
        if fits():
            victims.difference_update(range(first, end))
            continue
        state.release_many(run)
        if end - first > 1:
            middle = (first + end) // 2
            runs += [(first, middle), (middle, end)]
    return sorted(victims)


@dataclass(frozen=True)
class Candidate:
    workload: Workload
    reason: str            # Preempted | Reclaimed, from semantics.preemption_reason


class Preemption:
    """Kueue's classical preemption over a `ClusterState`, built once per run.

    Candidates for a preemptor: running, evictable workloads not evicted yet, that
    its ClusterQueue's policies allow it to evict (`semantics.preemption_reason`, on
    base priorities) and that do not hold the same right over it (no thrash: a
    victim of equal or higher priority that could reclaim from the preemptor's queue
    once it borrows is left alone); only those using a flavor/resource the
    preemptor could charge or sitting on a node it could use. Reclaiming needs the
    victim's queue borrowing both before the plan (what the verifier checks) and
    now. Order (Kueue's candidatesOrdering): other queues first, lower priority
    first, most recently admitted first, then UID; at most MAX_CANDIDATES.
    """

    def __init__(self, state: ClusterState, gone: Iterable[ObjectRef] = ()):
        """`gone`: workloads already released from `state` (evicted by decisions being explained)."""
        snap = state.snapshot
        skip = set(gone)
        self.state = state
        self.tree = state.quota
        self.before = borrowing_queues(snap, self.tree, cluster_queue_usage(snap))
        self.by_queue: dict[str, list[Workload]] = defaultdict(list)     # evictable; never changes
        self.all_by_queue: dict[str, list[Workload]] = defaultdict(list)   # evictable or not
        for w in sorted(snap.workloads, key=lambda w: w.ref):
            if w.state is WorkloadState.RUNNING and w.cluster_queue is not None and w.ref not in skip:
                self.all_by_queue[w.cluster_queue].append(w)
                if evictable(w, snap):
                    self.by_queue[w.cluster_queue].append(w)
        for q in list(self.by_queue.values()) + list(self.all_by_queue.values()):
            q.sort(key=self._order)  # Kueue's order within a queue: priority, newest admitted, UID
        # Every evictable workload's place in that order (by id(): by_queue holds them all): merging
        # queues compares these ints instead of the order's tuples.
        self._rank = {id(v): r for r, v in enumerate(sorted((v for q in self.by_queue.values() for v in q),
                                                            key=self._order))}
        self._candidates: dict[tuple[int, str], Candidate] = {}   # (id, reason) -> the one object
        self.root = {name: self.tree.root_of(f"cq:{name}") for name in snap.cluster_queues
                     if f"cq:{name}" in self.tree.parent}
        self.evicted: dict[ObjectRef, Eviction] = {}
        self._failed: dict[object, int] = {}   # shape of a failed attempt -> state version then
        self._frs: dict[ObjectRef, set[FlavorResource]] = {}
        self._rows: dict[ObjectRef, np.ndarray] = {}
        # What each evictable workload charges to quota, a row per workload (by id():
        # workloads live as long as the snapshot; hashing refs shows in profiles) and a
        # column per flavor/resource, so that a candidate list's sum is one array sum.
        evictable_now = [v for q in self.by_queue.values() for v in q]
        used = [quota_usage_of(v) for v in evictable_now]
        self._usage_col = {fr: j for j, fr in enumerate(sorted({fr for u in used for fr in u}))}
        self._usage_row = {id(v): i for i, v in enumerate(evictable_now)}
        self._usage = np.zeros((len(used), len(self._usage_col)), dtype=np.int64)
        for i, u in enumerate(used):
            for fr, amount in u.items():
                self._usage[i, self._usage_col[fr]] = amount
        # Shape of a preemptor's request -> what it could use (see _needs), and the first
        # shape with the same needs: shapes that need the same share candidate lists.
        self._needed: dict[object, tuple[set[FlavorResource], np.ndarray, object]] = {}
        self._same_needs: dict[tuple[frozenset[FlavorResource], bytes], object] = {}
        # (needs, queue) -> that queue's candidates for the needs (see _matching), and per
        # queue every such list, so that an eviction can be taken out of all of them.
        self._lists: dict[tuple[object, str], list[tuple[int, Workload]]] = {}
        self._lists_of_queue: dict[str, list[list[tuple[int, Workload]]]] = defaultdict(list)
        # (queue, priority, needs, evictions so far) -> lower(): explaining asks it per request shape.
        self._lower: dict[tuple[str, int, object, int], list[Workload]] = {}

    @staticmethod
    def _order(w: Workload) -> tuple[int, float, str, str]:
        return (w.priority, -(w.admitted_at or 0.0), w.uid, str(w.ref))

    def candidates(self, w: Workload) -> list[Candidate]:
        snap, tree = self.state.snapshot, self.tree
        cq = snap.cluster_queues[w.queue_name]
        policy = cq.preemption
        borrowing = self.before & self.state.borrowing()
        borrows = must_borrow(snap, w, tree, self.state.cq_usage, self.state.options)
        back = borrowing | {cq.name}
        limits: dict[str, float] = {}   # queue -> highest victim priority worth asking about
        if policy.within_cluster_queue != "Never":
            limits[cq.name] = w.priority - (policy.within_cluster_queue == "LowerPriority")
        if (policy.reclaim_within_cohort != "Never" or policy.borrow_within_cohort != "Never") and \
                tree.parent.get(f"cq:{cq.name}") is not None:
            root = self.root.get(cq.name)
            for name in self.by_queue:
                if name != cq.name and self.root.get(name) == root:
                    anyone = policy.reclaim_within_cohort == "Any" and name in borrowing
                    limits[name] = math.inf if anyone else w.priority - 1
        if not limits:
            return []
        shape = self._needs(cq, w)[0]
        # The rules look only at queues, priorities and (equal priority) queue order:
        # decide each combination once, not once per running workload.
        verdicts: dict[tuple[str | None, int, bool, bool], tuple[str | None, bool]] = {}

        def allowed(name: str) -> Iterator[tuple[int, Candidate]]:
            """One queue's candidates in Kueue's order, with their ranks in it."""
            limit = limits[name]
            for key, v in self._matching(shape, name):
                if v.priority > limit:
                    return  # sorted by priority
                vkey = (v.cluster_queue, v.priority, v.queued_at > w.queued_at, w.queued_at > v.queued_at)
                if vkey not in verdicts:
                    back_again = v.priority >= w.priority and preemption_reason(snap, v, w, tree, back) is not None
                    verdicts[vkey] = (preemption_reason(snap, w, v, tree, borrowing, borrows), back_again)
                reason, back_again = verdicts[vkey]
                if reason is not None and not back_again:
                    candidate = self._candidates.get((id(v), reason))
                    if candidate is None:
                        candidate = self._candidates[(id(v), reason)] = Candidate(v, reason)
                    yield key, candidate

        # Another queue gives up nothing unless it is borrowing (preemption_reason). Other
        # queues come first, merged in Kueue's order, then the preemptor's own queue; only the
        # first MAX_CANDIDATES in all are wanted, so each queue is read only as far as it
        # contributes to them. (Ranks are unique: no ties.)
        others = [allowed(name) for name in sorted(limits) if name != cq.name and name in borrowing]
        own = allowed(cq.name) if cq.name in limits else iter(())
        merged = itertools.chain(heapq.merge(*others), own)
        return [c for _, c in itertools.islice(merged, MAX_CANDIDATES)]

    def _matching(self, shape: object, name: str) -> list[tuple[int, Workload]]:
        """Queue `name`'s evictable running workloads, not evicted yet, that a preemptor of
        `shape` could use the room of (a flavor/resource it could charge, or a node it could
        use), with their ranks, in Kueue's order.

        What a workload uses never changes, so the list is built once per (needs, queue)
        and evictions are taken out of it as they happen (`_evict`).
        """
        found = self._lists.get((shape, name))
        if found is None:
            needs, rows, _ = self._needed[shape]
            found = [(self._rank[id(v)], v) for v in self.by_queue.get(name, ())
                     if v.ref not in self.evicted and (self._frs_of(v) & needs or rows[self._rows_of(v)].any())]
            self._lists[(shape, name)] = found
            self._lists_of_queue[name].append(found)
        return found

    def _evict(self, c: Candidate, preemptor: Workload) -> None:
        v = c.workload
        self.evicted[v.ref] = Eviction(workload=v.ref, reason=c.reason, for_=(preemptor.ref,),
                                       cost=eviction_cost(v, self.state.snapshot))
        rank = self._rank[id(v)]
        for found in self._lists_of_queue[v.queue_name]:
            i = bisect.bisect_left(found, (rank,))  # (rank,) sorts just before (rank, v)
            if i < len(found) and found[i][1] is v:
                del found[i]

    def lower(self, w: Workload) -> list[Workload]:
        """Running work of lower base priority in `w`'s queue or cohort tree that it could
        use the room of, whatever the policies say (for explaining), in Kueue's order."""
        snap = self.state.snapshot
        cq = snap.cluster_queues[w.queue_name]
        same, needs, rows = self._needs(cq, w)
        key = (cq.name, w.priority, same, len(self.evicted))
        if key not in self._lower:
            self._lower[key] = self._lower_for(cq, w.priority, needs, rows)
        return list(self._lower[key])

    def _lower_for(self, cq: ClusterQueue, priority: int, needs: set[FlavorResource],
                   rows: np.ndarray) -> list[Workload]:
        root = self.root.get(cq.name)
        queues = [n for n in self.all_by_queue
                  if n == cq.name or (root is not None and root != f"cq:{cq.name}" and self.root.get(n) == root)]
        out = []
        for name in sorted(queues):
            taken = 0
            for v in self.all_by_queue[name]:
                if v.priority >= priority or taken >= MAX_CANDIDATES:
                    break
                if v.ref in self.evicted or not (self._frs_of(v) & needs or rows[self._rows_of(v)].any()):
                    continue
                out.append(v)
                taken += 1
        out.sort(key=lambda v: (v.cluster_queue == cq.name,) + self._order(v))
        return out[:MAX_CANDIDATES]

    def why_not(self, w: Workload, v: Workload) -> str:
        """Why `w` may not evict `v`, in a few words (for explaining)."""
        snap = self.state.snapshot
        if v.non_preemptible:
            return "some of it is non-preemptible"
        if not evictable(v, snap):
            return "some of it has run less than the minimum runtime"
        cq = snap.cluster_queues[w.queue_name]
        policy = cq.preemption
        if v.cluster_queue == cq.name:
            return f"withinClusterQueue is {policy.within_cluster_queue}"
        if policy.reclaim_within_cohort == "Never" and policy.borrow_within_cohort == "Never":
            return "reclaimWithinCohort is Never"
        borrowing = self.before & borrowing_queues(snap, self.tree, self.state.cq_usage)
        if policy.borrow_within_cohort == "Never" and v.cluster_queue not in borrowing:
            return f"ClusterQueue {v.cluster_queue} is not borrowing"
        if preemption_reason(snap, w, v, self.tree, borrowing) is not None:
            return f"ClusterQueue {v.cluster_queue} could reclaim it back"
        return f"the preemption policy of ClusterQueue {cq.name} does not allow it"

    def _needs(self, cq: ClusterQueue, w: Workload) -> tuple[object, set[FlavorResource], np.ndarray]:
        """Flavor/resources `w` could charge and the node rows it could use, over all flavor
        options (cached per shape of request), with the first shape seen that needs the same."""
        shape = (cq.name, tuple((ps.request, ps.tolerations, tuple(sorted(ps.node_selector.items())))
                                for ps in w.pod_sets))
        if shape not in self._needed:
            frs: set[FlavorResource] = set()
            rows = np.zeros(len(self.state.node_objs), dtype=bool)
            for ps in w.pod_sets:
                options = self.state.options(cq, ps)
                if isinstance(options, str):
                    continue
                for option in options:
                    frs.update((f, r) for r, f in option.by_resource.items() if ps.request.get(r) > 0)
                    rows[self.state.eligible(option, ps).rows] = True
            same = self._same_needs.setdefault((frozenset(frs), rows.tobytes()), shape)
            self._needed[shape] = (frs, rows, same)
        frs, rows, same = self._needed[shape]
        return same, frs, rows

    def _frs_of(self, v: Workload) -> set[FlavorResource]:
        if v.ref not in self._frs:
            self._frs[v.ref] = {fr for fr, amount in quota_usage_of(v).items() if amount > 0}
        return self._frs[v.ref]

    def _rows_of(self, v: Workload) -> np.ndarray:
        if v.ref not in self._rows:
            nodes = {n for psa in v.assignment for n in psa.pods_per_node()}
            self._rows[v.ref] = np.array(sorted(self.state.row[n] for n in nodes if n in self.state.row),
                                         dtype=np.int64)
        return self._rows[v.ref]

    def attempt(self, w: Workload) -> tuple[list[Choice], list[Candidate]] | None:
        """Victims and choices that admit `w`, victims left released in the state; or None.

        Full counts first; an elastic workload that cannot get them preempts for its
        minimum, then takes the largest count the freed room allows.
        """
        snap = self.state.snapshot
        cq = snap.cluster_queues[w.queue_name]
        key: object = None
        if cq.preemption.within_cluster_queue != "LowerOrNewerEqualPriority":  # else queue time matters
            key = (cq.name, w.priority, tuple((ps.count, ps.minimum, ps.request, ps.topology, ps.tolerations,
                                               tuple(sorted(ps.node_selector.items()))) for ps in w.pod_sets))
            if self._failed.get(key) == self.state.version:
                return None  # the same request failed and nothing has changed since
        found = self._attempt(cq, w)
        if found is None and key is not None:
            self._failed[key] = self.state.version
        return found

    def _quota_could_fit(self, cq: ClusterQueue, w: Workload, candidates: Sequence[Candidate]) -> bool:
        """A cheap necessary test before any search: with every candidate's quota given
        back (each unit raises what the queue may take by at most one), does some
        flavor option of every pod set fit its minimum?"""
        rows = np.fromiter((self._usage_row[id(c.workload)] for c in candidates), dtype=np.int64,
                           count=len(candidates))
        given_back = self._usage[rows].sum(axis=0)
        freed = {fr: int(given_back[j]) for fr, j in self._usage_col.items()}
        for ps in w.pod_sets:
            options = self.state.options(cq, ps)
            if isinstance(options, str):
                return False
            if not any(all(self.state.lists(cq.name, fr)
                           and need <= max(0, self.state.available(cq.name, fr)) + freed.get(fr, 0)
                           for fr, need in quota_usage(ps, option, ps.minimum).items())
                       for option in options):
                return False
        return True

    def _attempt(self, cq: ClusterQueue, w: Workload) -> tuple[list[Choice], list[Candidate]] | None:
        candidates = self.candidates(w)
        if not candidates or not self._quota_could_fit(cq, w, candidates):
            return None
        victims = [c.workload for c in candidates]
        targets = [[ps.count for ps in w.pod_sets]]
        if w.elastic:
            targets.append([ps.minimum for ps in w.pod_sets])
        for counts in targets:
            chosen = minimal_victims(self.state, victims, lambda: fits_at(self.state, w, counts))
            if chosen is None:
                continue
            result = evaluate(self.state, w)
            if isinstance(result, str):  # cannot happen (the fit test just passed); stay safe
                for i in chosen:
                    self.state.release(victims[i], sign=-1)
                continue
            self.state.version += 1
            for i in chosen:
                self._evict(candidates[i], w)
            return result, [candidates[i] for i in chosen]
        return None


# ---------------------------------------------------------------- the cycles

@dataclass(eq=False)
class _Pending:
    """A workload waiting in its ClusterQueue, with what Kueue keeps about its last try."""

    workload: Workload
    key: tuple[Any, ...]                         # queue order: priority, queue time, UID
    last: dict[tuple[int, str], int] | None = None   # LastAssignment: flavor tried per (pod set, resource)
    generation: int = 0                          # the queue's generation at that try
    reason: str = ""


class _Queue:
    """One ClusterQueue's pending workloads as Kueue's queue manager holds them: a heap
    in queue order (the workload that is preempting, the sticky one, first), and the
    inadmissible ones set aside until something leaves the cohort tree."""

    def __init__(self, cq: ClusterQueue):
        self.cq = cq
        self.heap: list[tuple[tuple[Any, ...], ObjectRef]] = []
        self.waiting: dict[ObjectRef, _Pending] = {}          # in the heap
        self.inadmissible: dict[ObjectRef, _Pending] = {}
        self.sticky: ObjectRef | None = None
        self.generation = 0    # Kueue's AllocatableResourceGeneration: moves on when a workload leaves

    def push(self, p: _Pending) -> None:
        ref = p.workload.ref
        if ref not in self.waiting:
            self.waiting[ref] = p
            heapq.heappush(self.heap, (p.key, ref))

    def pop(self) -> _Pending | None:
        if self.sticky is not None and self.sticky in self.waiting:
            return self.waiting.pop(self.sticky)   # its heap entry is skipped when it surfaces
        while self.heap:
            _, ref = heapq.heappop(self.heap)
            p = self.waiting.pop(ref, None)
            if p is not None:
                return p
        return None

    def requeue_inadmissible(self) -> None:
        for p in self.inadmissible.values():
            self.push(p)
        self.inadmissible.clear()


@dataclass(eq=False)
class _Entry:
    pending: _Pending
    cq: ClusterQueue
    assignment: "kueue_rules.Assignment"
    targets: list["kueue_rules.Target"]
    order: tuple[Any, ...]


def greedy(snapshot: Snapshot) -> GreedyResult:
    """Kueue's scheduling cycles until nothing changes (planner.kueue_rules decides
    for each head; KueueCycles runs the cycles), replayed again with more running work
    protected while the end state cannot support an eviction the replay made (see
    KueueCycles: "Stowplan plans the end state")."""
    protected: dict[ObjectRef, str] = {}
    while True:
        cycles = KueueCycles(snapshot, protected=protected)
        result = cycles.run()
        more = {ref: kind for ref, kind in cycles.unsupported.items()
                if protected.get(ref) != kind and protected.get(ref) != ALL}
        if not more:
            return result
        protected = {**protected, **more}


# How running work is protected in a replay (KueueCycles.protected): not reclaimed by
# another queue's workload, or not evicted at all.
RECLAIM, ALL = "reclaim", "all"


# Cycles from a preemptor's evictions to their completion (its victims' quota and nodes
# free): 1, at the end of the cycle that issues them. In a cluster an eviction waits for
# the victim's pods to stop, and Kueue meanwhile runs more cycles: the preemptor stays
# its queue's head and issues the same evictions again, holding its room.
EVICTION_CYCLES = 1


class KueueCycles:
    """Kueue v0.17's scheduler loop (pkg/scheduler/scheduler.go schedule()), replayed on
    a static snapshot until its fixed point.

    Each cycle: 1. pop the head of every active ClusterQueue (the sticky preemptor
    first); 2. nominate every head against the state at the start of the cycle
    (kueue_rules: flavors, then nodes, then preemption targets); 3. order them: lower
    borrowing height first, then higher priority, then older; 4. process in order: a
    NoFit head, or one needing preemption with no targets, is set aside (in a queue
    whose reclaimWithinCohort is not Any the latter still holds what it could claim
    for the rest of the cycle); a head whose targets overlap an earlier preemptor's,
    or that no longer fits after the heads before it, is skipped (back in the heap);
    a preemptor's targets are evicted and its room held for the rest of the cycle,
    and it stays at the head of its queue; any other is admitted. 5. Between cycles
    the evictions complete: the victims' quota and nodes are free, every workload set
    aside in their cohort trees is back in its queue, and the victims' queues'
    generations move on (a requeued workload then tries every flavor again). The
    preemptor is admitted in a later cycle if it is then still the head that fits.

    At the fixed point every workload set aside is tried once more against the final
    state, and again while that changes anything: Kueue retries set-aside work when
    something leaves its cohort tree, and a cluster's next event (a finished job) would
    retry it there; without this a queue that started borrowing after a head was set
    aside would keep what that head may reclaim.

    Stowplan plans the end state. A workload admitted by this plan and later evicted
    goes back to its queue and may be admitted again; a workload running before the
    plan that is evicted stays evicted (a plan has no moves: Kueue would requeue it
    and might start it elsewhere). Nothing finishes.

    Each eviction must hold in the end state (planner.verify): it names an admission
    of the plan that the preemption policies allow to evict it, judging "borrowing" by
    the queue's usage before the plan or with all of the plan's admissions made. Kueue
    judges at the moment it preempts, and the two can part: a queue borrows through
    admissions that are themselves reclaimed later, or a preemptor loses its room to
    other heads and is never admitted. Such an eviction is first given to another
    admission of the plan allowed to make it; where none is, the victim is listed in
    `unsupported` and greedy() replays the cycles with it protected (`protected`: by
    reference, RECLAIM: no other queue's workload may take it, ALL: none may), as its
    Kueue counterpart would be requeued and started again.

    Where Kueue's loop would go round for ever (a workload this plan admitted, evicted,
    comes before its preemptor in the next cycle and takes its room back), greedy's
    preemptor does not evict the same workload twice (`taken_back`).
    """

    def __init__(self, snapshot: Snapshot, eviction_cycles: int | None = None,
                 protected: Mapping[ObjectRef, str] | None = None):
        self.kr = kueue_rules
        self.snapshot = snapshot
        self.state = ClusterState(snapshot)
        self.registry = kueue_rules.Registry()
        self._empty: ClusterState | None = None
        tree = self.state.quota
        self.rules = kueue_rules.Rules(snapshot, self.state, self.registry, place_fixed, fits_fixed, self.empty)
        self.borrowing_before = borrowing_queues(snapshot, tree, cluster_queue_usage(snapshot))
        self.protected = dict(protected or {})
        self.unsupported: dict[ObjectRef, str] = {}   # set by run(): see the class docstring
        self.reasons: dict[ObjectRef, str] = {}
        self.queues: dict[str, _Queue] = {}
        self.pending: dict[ObjectRef, _Pending] = {}
        for w in sorted(snapshot.workloads, key=lambda w: w.ref):
            if w.state is WorkloadState.RUNNING and w.cluster_queue is not None \
                    and f"cq:{w.cluster_queue}" in tree.parent:
                kept = self.protected.get(w.ref)
                self.registry.add(kueue_rules.Admitted(
                    w, w.cluster_queue, quota_usage_of(w), evictable(w, snapshot) and kept != ALL, False,
                    w.admitted_at if w.admitted_at is not None else snapshot.now, reclaimable=kept is None))
            if w.state is not WorkloadState.PENDING:
                continue
            blocker = admission_blocker(snapshot, w)
            if blocker is not None:
                self.reasons[w.ref] = blocker
                continue
            name = w.cluster_queue
            assert name is not None
            if name not in self.queues:
                self.queues[name] = _Queue(snapshot.cluster_queues[name])
            p = self.pending[w.ref] = _Pending(w, queue_order_key(w, snapshot))
            self.queues[name].push(p)
        self.names = sorted(self.queues)
        # Cohort tree root -> its queues: an eviction requeues what was set aside in all of them.
        self.tree_queues: dict[str, list[str]] = defaultdict(list)
        for name in self.names:
            self.tree_queues[self._root(name)].append(name)
        self.admitted: dict[ObjectRef, tuple[Admission, "kueue_rules.Admitted"]] = {}
        self.evictions: dict[ObjectRef, Eviction] = {}
        # Evictions issued and not complete: victim -> (target, preemptor, the cycle at whose
        # end it completes). See EVICTION_CYCLES.
        self.evicting: dict[ObjectRef, tuple["kueue_rules.Target", Workload, int]] = {}
        self.eviction_cycles = max(1, eviction_cycles if eviction_cycles is not None else EVICTION_CYCLES)
        self.cycle = 0
        self.sequence = 0
        # (preemptor, victim) for each eviction of a workload this plan admitted: the victim
        # is pending again and, in a queue that does not borrow as high, comes before the
        # preemptor in the next cycle and takes its room back, the preemptor evicts it
        # again, and so on (Kueue's loop thrashes there). A preemptor never evicts the same
        # workload twice: it is set aside instead, and the workload keeps running.
        self.taken_back: set[tuple[ObjectRef, ObjectRef]] = set()

    def empty(self) -> ClusterState:
        """The cluster with nothing admitted (Kueue's SimulateEmpty)."""
        if self._empty is None:
            self._empty = ClusterState(self.snapshot, evicted=[w.ref for w in self.snapshot.workloads
                                                               if w.state is WorkloadState.RUNNING])
        return self._empty

    def _root(self, name: str) -> str:
        key = f"cq:{name}"
        return self.state.quota.root_of(key) if key in self.state.quota.parent else key

    # -- the loop

    def run(self) -> GreedyResult:
        limit = 20 * (len(self.snapshot.workloads) + 10)   # a guard: Kueue's own loop could thrash
        swept: int | None = None
        while self.cycle < limit:
            if self.step():
                continue
            # The fixed point: try what was set aside once more, while anything changed since.
            if swept == self.registry.epoch:
                break
            swept = self.registry.epoch
            aside = [name for name in self.names if self.queues[name].inadmissible]
            if not aside:
                break
            for name in aside:
                self.queues[name].requeue_inadmissible()
        return self._result()

    def step(self) -> bool:
        """One cycle; False once there is nothing left to do (no heads, or only StrictFIFO
        heads that wait on a state that no longer changes)."""
        self.cycle += 1
        heads = [p for name in self.names if (p := self.queues[name].pop()) is not None]
        if not heads:
            return False
        self.rules.steady = True     # nothing is held while nominating
        entries = [self._nominate(p) for p in heads]
        self.rules.steady = False
        entries.sort(key=lambda e: e.order)
        return self._process(entries)

    def _nominate(self, p: _Pending) -> _Entry:
        w = p.workload
        queue = self.queues[w.queue_name]
        last = p.last if p.last is not None and p.generation >= queue.generation else None
        assignment, targets = self.rules.nominate(w, queue.cq, last, queue.generation)
        if assignment.mode != self.kr.FIT and assignment.reason:
            p.reason = assignment.reason
        order = (assignment.borrowing,) + p.key
        return _Entry(p, queue.cq, assignment, targets, order)

    def _process(self, entries: list[_Entry]) -> bool:
        """Step 5 of schedule(), then the cycle's end; whether anything moved."""
        kr, state = self.kr, self.state
        preempted: dict[ObjectRef, "kueue_rules.Admitted"] = {}
        held: list[tuple[str, list[Choice]]] = []            # room held until the cycle ends
        victims: list[tuple["kueue_rules.Target", Workload]] = []
        moved = False
        for e in entries:
            a, cq, queue = e.assignment, e.cq, self.queues[e.cq.name]
            if e.targets and self.taken_back and any(
                    (e.pending.workload.ref, t.admitted.ref) in self.taken_back for t in e.targets):
                e.targets = []     # it would evict again what took its room back: see taken_back
            if a.mode == kr.NO_FIT or (a.mode == kr.PREEMPT and not e.targets):
                if a.mode == kr.PREEMPT and cq.preemption.reclaim_within_cohort != "Any":
                    reserved = self._reserve(e, preempted)
                    if reserved:
                        held.append(reserved)
                moved |= self._set_aside(e)
                continue
            if any(t.admitted.ref in preempted for t in e.targets):
                self._skip(e)      # its targets overlap an earlier preemptor's
                moved = True
                continue
            mine = [t.admitted.view for t in e.targets]
            state.release_many(mine)
            if a.choices is None or not state.still_fits(cq.name, a.choices):
                state.release_many(mine, sign=-1)
                self._skip(e)      # no longer fits after the heads before it
                moved = True
                continue
            for t in e.targets:
                preempted[t.admitted.ref] = t.admitted
                if t.admitted.ref not in self.evicting:   # else its eviction is under way: nothing new
                    victims.append((t, e.pending.workload))
            state.commit(cq.name, a.choices)
            moved = True
            if a.mode == kr.PREEMPT:
                held.append((cq.name, a.choices))
                e.pending.last = None
                queue.push(e.pending)
                if cq.queueing_strategy != "StrictFIFO":
                    queue.sticky = e.pending.workload.ref
                continue
            self._admit(e)
        for name, choices in reversed(held):
            self._give_back(name, choices)
        self._evict(victims, preempted)
        return moved

    def _evict(self, victims: Sequence[tuple["kueue_rules.Target", Workload]],
               preempted: Mapping[ObjectRef, "kueue_rules.Admitted"]) -> None:
        """Evictions issued this cycle start; those due complete. Until then a victim
        holds its quota and nodes (it was released only for the rest of this cycle's
        checks, as Kueue's fits() does) and is a candidate of its own kind: already
        evicted, first in every later search's order."""
        for target, preemptor in victims:
            self.evicting[target.admitted.ref] = (target, preemptor, self.cycle + self.eviction_cycles - 1)
            if self.eviction_cycles > 1:
                self.registry.mark_evicting(target.admitted)
        due = [ref for ref, (_, _, at) in self.evicting.items() if at <= self.cycle]
        for ref, (target, _, _) in self.evicting.items():
            if ref in preempted and ref not in due:
                self.state.release(target.admitted.view, sign=-1)     # back until its eviction completes
            elif ref not in preempted and ref in due:
                self.state.release(target.admitted.view)
        done = [self.evicting.pop(ref)[:2] for ref in sorted(due)]
        self._complete(done)

    def _set_aside(self, e: _Entry) -> bool:
        """requeueAndUpdate for a head that was not nominated: StrictFIFO keeps it at the
        head; BestEffortFIFO sets it aside, unless flavors are left to try. Whether the
        queue moved on."""
        p, a, queue = e.pending, e.assignment, self.queues[e.cq.name]
        p.last, p.generation = a.last, a.generation
        if e.cq.queueing_strategy == "StrictFIFO":
            queue.push(p)
            return a.pending_flavors()
        if a.pending_flavors():
            queue.push(p)
        else:
            queue.inadmissible[p.workload.ref] = p
        return True

    def _skip(self, e: _Entry) -> None:
        e.pending.last = None
        self.queues[e.cq.name].push(e.pending)

    def _reserve(self, e: _Entry, preempted: Mapping[ObjectRef, "kueue_rules.Admitted"]) -> tuple[str, list[Choice]] | None:
        """resourcesToReserve: a head that needs preemption but has no targets holds, for
        the rest of the cycle, its nodes as placed on an empty cluster and the quota it
        could claim (up to nominal; up to the borrowing limit if it borrows)."""
        a, cq, state = e.assignment, e.cq, self.state
        picks = a.picks()
        placed = place_fixed(self.empty(), cq, e.pending.workload, picks)
        if isinstance(placed, tuple):
            return None
        # The queue's usage as Kueue's snapshot has it: victims of this cycle still count.
        gone: dict[FlavorResource, int] = defaultdict(int)
        for v in preempted.values():
            if v.cq == cq.name:
                for fr, amount in v.usage.items():
                    gone[fr] += amount
        charges: dict[FlavorResource, int] = {}
        for fr, usage in a.usage.items():
            used = state.used(cq.name, fr) + gone[fr]
            nominal, borrowing, _ = state.quota.limits(f"cq:{cq.name}", fr)
            if a.borrowing > 0:
                charges[fr] = usage if borrowing is None else min(usage, nominal + borrowing - used)
            else:
                charges[fr] = max(0, min(usage, nominal - used))
        choices = [Choice(c.pod_set, c.option, c.count, c.pods, {}) for c in placed]
        if choices:
            choices[0].charges = charges
        state.commit(cq.name, choices)
        return cq.name, choices

    def _give_back(self, name: str, choices: Sequence[Choice]) -> None:
        state = self.state
        state.version += 1
        for c in choices:
            state.take(c.pods, c.pod_set.request, sign=-1)
            for fr, v in c.charges.items():
                state.charge(name, fr, -v)

    def _admit(self, e: _Entry) -> None:
        kr, w, cq = self.kr, e.pending.workload, e.cq
        choices = e.assignment.choices
        assert choices is not None
        self.sequence += 1
        when = self.snapshot.now + self.cycle + self.sequence * 1e-9   # after everything running, in order
        assignment = tuple(c.assignment() for c in choices)
        view = replace(w, state=WorkloadState.RUNNING, assignment=assignment, admitted_at=when)
        minimum = self.snapshot.policy.minimum_runtime_seconds
        entry = kr.Admitted(view, cq.name, quota_usage_of(view), not w.non_preemptible and minimum <= 0, True, when)
        self.registry.add(entry)
        self.admitted[w.ref] = (Admission(workload=w.ref, cluster_queue=cq.name, pod_sets=assignment), entry)
        self.pending.pop(w.ref, None)

    def _complete(self, victims: Sequence[tuple["kueue_rules.Target", Workload]]) -> None:
        """The evictions complete: the victims leave the cache (already released), their
        queues' generations move on, a victim admitted by this plan is pending again,
        and everything set aside in their cohort trees goes back to its queue."""
        roots: set[str] = set()
        for target, preemptor in victims:
            v = target.admitted
            self.registry.remove(v)
            queue = self.queues.get(v.cq)
            if queue is not None:
                queue.generation += 1
            if v.planned:
                self.taken_back.add((preemptor.ref, v.ref))
                del self.admitted[v.ref]
                original = self._originals[v.ref]
                p = self.pending[v.ref] = _Pending(original, queue_order_key(original, self.snapshot))
                if queue is not None:
                    queue.push(p)
            else:
                self.evictions[v.ref] = Eviction(workload=v.ref, reason=target.reason, for_=(preemptor.ref,),
                                                 cost=eviction_cost(v.view, self.snapshot))
            roots.add(self._root(v.cq))
        for root in sorted(roots):
            for name in self.tree_queues.get(root, ()):
                self.queues[name].requeue_inadmissible()

    @property
    def _originals(self) -> dict[ObjectRef, Workload]:
        found = getattr(self, "_by_ref", None)
        if found is None:
            found = self._by_ref = {w.ref: w for w in self.snapshot.workloads}
        return found

    # -- the answer

    def _result(self) -> GreedyResult:
        admissions = {ref: adm for ref, (adm, _) in self.admitted.items()}
        evictions = self._justified(admissions)
        for ref, p in self.pending.items():
            if ref not in admissions:
                self.reasons[ref] = p.reason or "not admitted"
        for name, queue in self.queues.items():
            if queue.cq.queueing_strategy != "StrictFIFO":
                continue
            waiting = sorted((p for p in list(queue.waiting.values()) + list(queue.inadmissible.values())),
                             key=lambda p: p.key)
            if waiting:
                head = waiting[0].workload.ref
                for p in waiting[1:]:
                    self.reasons[p.workload.ref] = f"waiting behind {head} (StrictFIFO)"
        for ref in admissions:
            self.reasons.pop(ref, None)
        decisions = Decisions(admissions=tuple(admissions[r] for r in sorted(admissions)),
                              evictions=tuple(evictions[r] for r in sorted(evictions)))
        return GreedyResult(decisions=decisions, reasons=dict(sorted(self.reasons.items())))

    def _justified(self, admissions: Mapping[ObjectRef, Admission]) -> dict[ObjectRef, Eviction]:
        """Every eviction, naming an admission of the plan allowed to make it in the end
        state (planner.verify's rule: a Reclaimed victim's queue borrows before the plan
        or with all of its admissions made; a preemptor that borrows by its own admission
        needs borrowWithinCohort). Kueue's preemptor first, else the first admission
        allowed; where none is, the victim goes into `unsupported` (class docstring)."""
        snap, tree = self.snapshot, self.state.quota
        before = cluster_queue_usage(snap)
        with_all: dict[str, dict[FlavorResource, int]] = defaultdict(lambda: defaultdict(int))
        for key, usage in before.items():
            with_all[key].update(usage)
        for ref in admissions:
            entry = self.admitted[ref][1]
            for fr, v in entry.usage.items():
                with_all[f"cq:{entry.cq}"][fr] += v
        borrowing = self.borrowing_before | borrowing_queues(snap, tree, with_all)
        borrows: dict[ObjectRef, bool] = {}

        def reason(preemptor_ref: ObjectRef, victim: Workload) -> str | None:
            if preemptor_ref not in admissions:
                return None
            entry = self.admitted[preemptor_ref][1]
            if preemptor_ref not in borrows:
                used = before.get(f"cq:{entry.cq}", {})
                borrows[preemptor_ref] = any(used.get(fr, 0) + v > tree.limits(f"cq:{entry.cq}", fr)[0]
                                             for fr, v in entry.usage.items())
            return preemption_reason(snap, self._originals[preemptor_ref], victim, tree, borrowing,
                                     borrows[preemptor_ref])

        out: dict[ObjectRef, Eviction] = {}
        self.unsupported = {}
        for ref, e in sorted(self.evictions.items()):
            victim = self._originals[ref]
            if all(t in admissions for t in e.for_) and any(reason(t, victim) == e.reason for t in e.for_):
                out[ref] = e
                continue
            found = next((other for other in sorted(admissions) if reason(other, victim) == e.reason), None)
            if found is not None:
                out[ref] = replace(e, for_=(found,))
            else:
                out[ref] = e
                self.unsupported[ref] = RECLAIM if e.reason == kueue_rules.RECLAIMED else ALL
        return out
