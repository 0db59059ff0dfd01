"""The cluster state every decider shares: free nodes and quota usage, updated in place.

Takes a models.Snapshot; gives `ClusterState` (free capacity per node as a matrix,
usage per ClusterQueue and flavor/resource, the quota tree), `PodSetChoice` (one pod
set's flavor, count and nodes with what it charges), and the words a reason uses for
quantities. Greedy's cycle, Kueue's flavor assigner (planner.kueue.assigner), the
explainer and the fit tests (planner.kueue.fit) all work over it. Only computes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from models import (
    HOSTNAME_LABEL, Admission, ClusterQueue, Decisions, FlavorResource, Node, ObjectRef, PodSet, PodSetAssignment, Resources,
    Snapshot, Workload, WorkloadState, is_gpu,
)
from planner.kueue import placement
from planner.kueue.capacity import cluster_queue_usage, pod_set_by_name, quota_usage_of
from planner.kueue.placement import DomainTree, Placement
from planner.kueue.semantics import FlavorOption, QuotaTree, flavor_options, namespace_allowed, node_allows
from planner.kueue.topology import levels_for, node_path

GIB = 1 << 30


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
class PodSetChoice:
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
class EligibleNodes:
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


class ReleasedView:
    """One pod set's fit test (ClusterState.fits) with running workloads released on a
    copy of its eligible nodes' pod counts: releasing recounts only the nodes the
    workloads hold, and the state (its free matrix, its kept counts) never moves."""

    def __init__(self, state: "ClusterState", eligible: EligibleNodes, counts: np.ndarray, pod_set: PodSet,
                 count: int):
        self.state, self.eligible, self.pod_set, self.count = state, eligible, pod_set, count
        self.counts = counts.copy()
        self.need, self.amounts = state.columns_of(pod_set.request)
        self.gained = np.zeros((len(counts), len(self.need)), dtype=np.int64)

    def release(self, freed: Freed, sign: int = 1) -> None:
        """Give back what `freed` holds (sign 1), or take it again (-1)."""
        leaf = self.eligible.leaf_of_row[freed.rows]
        mine = leaf >= 0
        if not mine.any():
            return
        leaf = leaf[mine]
        np.add.at(self.gained, leaf, sign * freed.used[mine][:, self.need])
        touched = np.unique(leaf)
        if len(self.need):
            room = self.state.free[self.eligible.rows[touched]][:, self.need] + self.gained[touched]
            self.counts[touched] = placement.pods_fitting(room, self.amounts)

    def fits(self) -> bool:
        return placement.fits_counts(self.eligible.tree, self.counts, self.count, self.pod_set.topology)


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
        self._trees: dict[object, EligibleNodes] = {}
        self._vectors: dict[Resources, np.ndarray] = {}
        self._request_columns: dict[Resources, tuple[np.ndarray, np.ndarray]] = {}
        # Rows whose free capacity changed, a chunk per update, in order, and how many rows
        # before each chunk: cached leaf counts catch up from here.
        self._changed: list[np.ndarray] = []
        self._changed_before: list[int] = [0]
        self._counts: dict[int, _LeafCounts] = {}   # by _count_keys of (eligible key, request)
        self._placed: dict[tuple[Any, ...], Placement] = {}   # place() answers since the last node change
        self._placed_at = 0
        self._options: dict[tuple[str, Resources, tuple[Any, ...], tuple[tuple[str, str], ...] | None], list[FlavorOption] | str] = {}
        # Memos by object identity, for the hot paths: hashing requests and tolerations
        # (dataclasses) on every fit test shows in profiles. Each entry holds the objects
        # it is keyed by, so their ids cannot be reused while it exists.
        self._options_of: dict[tuple[str, int], tuple[PodSet, list[FlavorOption] | str]] = {}
        self._placing_of: dict[tuple[int, int], tuple[FlavorOption, PodSet, EligibleNodes, int]] = {}
        self._count_keys: dict[tuple[object, Resources], int] = {}
        self._domain_unions: dict[object, tuple[list[tuple[str, ...]], list[np.ndarray]]] = {}
        # By id() (hashing refs shows in profiles); each entry holds its workload, so the id stays its own.
        self._footprints: dict[int, tuple[Workload, tuple[np.ndarray, np.ndarray, tuple[tuple[FlavorResource, int], ...]]]] = {}
        self.version = 0   # bumped by every commit and eviction: "has anything changed since?"
        self.changes = 0   # bumped by every change to free capacity or quota usage
        self.charges = 0   # bumped by every change to quota usage

    def options(self, cq: ClusterQueue, pod_set: PodSet) -> list[FlavorOption] | str:
        """`semantics.flavor_options`, cached: it reads only the queue, the pod set's request
        and tolerations, and the flavors, none of which change during a run."""
        seen = self._options_of.get((cq.name, id(pod_set)))
        if seen is not None and seen[0] is pod_set:
            return seen[1]
        fixed = tuple(sorted(pod_set.fixed_flavors.items())) if pod_set.fixed_flavors is not None else None
        key = (cq.name, pod_set.request, pod_set.tolerations, fixed)
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

    def tree_usage(self, fr: FlavorResource) -> Mapping[str, int]:
        """Usage of `fr` by every node of the cohort tree ("cq:NAME" | "cohort:NAME"), live."""
        return self._usage(fr)

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
        self.charges += 1
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

    def eligible(self, option: FlavorOption, pod_set: PodSet) -> EligibleNodes:
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
            cached = self._trees[key] = EligibleNodes(key, tree, rows, leaf_of_row)
        return cached

    def leaf_counts(self, eligible: EligibleNodes, request: Resources) -> np.ndarray:
        """Pods of `request` fitting on each eligible node now (read-only; cached, caught up by rows)."""
        return self._leaves(eligible, request).counts

    def _leaves(self, eligible: EligibleNodes, request: Resources, key: int | None = None) -> placement.LeafCounts:
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
        return placement.pods_fitting(self.free[rows][:, need], amounts)

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

    def released_view(self, option: FlavorOption, pod_set: PodSet, count: int) -> "ReleasedView":
        """fits() of one pod set on a copy of its eligible nodes' pod counts, to release
        workloads in (a search's many tries) without touching this state."""
        eligible, key = self._placing(option, pod_set)
        return ReleasedView(self, eligible, self._leaves(eligible, pod_set.request, key).counts, pod_set, count)

    def _placing(self, option: FlavorOption, pod_set: PodSet) -> tuple[EligibleNodes, int]:
        seen = self._placing_of.get((id(option), id(pod_set)))
        if seen is None or seen[0] is not option or seen[1] is not pod_set:
            self.place(option, pod_set, 0)
            seen = self._placing_of[(id(option), id(pod_set))]
        return seen[2], seen[3]

    def columns_of(self, request: Resources) -> tuple[np.ndarray, np.ndarray]:
        """The free matrix's columns `request` asks for, and how much of each."""
        return self._columns(request)

    def fits_released(self, option: FlavorOption, pod_set: PodSet, count: int, freed: Freed) -> bool:
        """fits() were `freed` released, asked without releasing it: only the eligible
        nodes it touches are counted again, on a copy, so neither the free matrix nor the
        kept leaf counts (which other shapes catch up from the change log) move."""
        seen = self._placing_of.get((id(option), id(pod_set)))
        if seen is None or seen[0] is not option or seen[1] is not pod_set:
            self.place(option, pod_set, 0)
            seen = self._placing_of[(id(option), id(pod_set))]
        eligible = seen[2]
        counts = self._leaves(eligible, pod_set.request, seen[3]).counts
        leaf = eligible.leaf_of_row[freed.rows]
        mine = leaf >= 0
        if mine.any():
            need, amounts = self._columns(pod_set.request)
            leaves, inverse = np.unique(leaf[mine], return_inverse=True)
            gained = np.zeros((len(leaves), len(need)), dtype=np.int64)
            np.add.at(gained, inverse, freed.used[mine][:, need])
            room = self.free[eligible.rows[leaves]][:, need] + gained
            counts = counts.copy()
            counts[leaves] = placement.pods_fitting(room, amounts) if len(need) else 0
        return placement.fits_counts(eligible.tree, counts, count, pod_set.topology)

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

    def commit(self, cq: str, choices: Sequence[PodSetChoice]) -> None:
        self.version += 1
        for choice in choices:
            self.take(choice.pods, choice.pod_set.request)
            for fr, v in choice.charges.items():
                self.charge(cq, fr, v)

    def still_fits(self, cq: str, choices: Sequence[PodSetChoice]) -> bool:
        """Does a nomination made earlier in the cycle still fit (Kueue re-checks, it does not redo)?"""
        charges: dict[FlavorResource, int] = defaultdict(int)
        for choice in choices:
            for fr, v in choice.charges.items():
                charges[fr] += v
        if self.quota_shortfall(cq, charges, {}) is not None:
            return False
        if len(choices) == 1:
            return self.nodes_fit(choices[0].pods, choices[0].pod_set.request)
        taken: list[PodSetChoice] = []
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

    def nodes_of(self, workloads: Sequence[Workload]) -> Freed:
        """freed_by's nodes alone (rows repeated where workloads share a node; no quota
        charges, no distinct rows): what fits_released reads."""
        prints = [self._footprint(w) for w in workloads]
        if not prints:
            empty = np.zeros(0, dtype=np.int64)
            return Freed(empty, np.zeros((0, len(self.col)), dtype=np.int64), empty, ())
        rows = np.concatenate([p[0] for p in prints])
        return Freed(rows, np.concatenate([p[1] for p in prints]), rows[:0], ())

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
        """The state a plan leaves: its evictions gone, its admissions in place, moved
        workloads at their new place (evicted from the old one, admitted again)."""
        moves = [Admission(m.workload, m.cluster_queue, m.to) for m in decisions.migrations]
        state = cls(snapshot, evicted=[e.workload for e in decisions.evictions] + [m.workload for m in moves])
        by_ref = {w.ref: w for w in snapshot.workloads}
        for a in sorted(list(decisions.admissions) + moves, key=lambda a: a.workload):
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
