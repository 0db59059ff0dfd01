"""Kueue's fair sharing arithmetic: dominant resource shares and the weighted max-min targets.

`shares` is Kueue's `dominantResourceShare` (pkg/cache/scheduler/fair_sharing.go): for
a ClusterQueue or Cohort with a parent, what it uses above its subtree's nominal
quota, per resource (summed over flavors), over what its parent's tree could lend of
that resource, times 1000; the largest such ratio (the dominant resource), divided by
its `fairSharing.weight`. Weight 0 while borrowing: an infinite share (always last).
`Shares` (with `DRS` and Kueue's `compare`) is that arithmetic, the one implementation:
greedy's fair-sharing cycle (planner.kueue.fairsharing) asks it on the live state,
`shares` on a usage table (the MILP, the plan's report, planner.tools.fairshare).
The verifier (planner/verify/fair.py) keeps its own copy on purpose.

`targets` is the allocation Stowplan aims at in one cycle: in every cohort, level by
level, each child first gets what it wants up to its own subtree's nominal quota (the
guarantee), then what is left of the cohort's allocation is shared by weighted
water-filling of what the children want beyond it (weighted max-min of the borrowed
amount; the dominant resource share is that amount over the parent's lendable
quantity, the same for every child, so max-min of amounts by weight is max-min of
weighted shares); children of weight 0 share only what the others do not want. It is
computed per flavor/resource, a workload's demand counted on the first flavor of its
queue that covers each resource (the flavor Kueue tries first).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Mapping

from models import FlavorResource, Snapshot, Workload, WorkloadState, is_gpu
from models.kueue_config import DEFAULT_STRATEGIES
from planner.kueue import capacity
from planner.kueue.semantics import QuotaTree, namespace_allowed

Usage = Mapping[str, Mapping[FlavorResource, float]]     # cq:NAME -> flavor/resource -> amount


@dataclass(frozen=True)
class FairSharing:
    """What the greedy needs of Kueue's fair-sharing settings: each tree node's weight
    ("cq:NAME" | "cohort:NAME"; 1 when not given) and the preemption strategies in order."""

    weights: Mapping[str, float] = field(default_factory=dict)
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES

    def weight(self, node: str) -> float:
        return float(self.weights.get(node, 1.0))


# ---------------------------------------------------------------- the share

@dataclass(frozen=True)
class DRS:
    """A node's dominant resource share (schdcache.DRS)."""

    weight: float
    ratio: float = 0.0                       # unweighted, per mille of the lendable
    resource: str = ""
    borrowing: bool = False
    borrowed: tuple[FlavorResource, ...] = ()

    def is_zero(self) -> bool:
        return self.ratio == 0

    def weighted(self) -> float:
        """PreciseWeightedShare."""
        if self.is_zero():
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero()

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        """IsBorrowingOn: borrows some flavor/resource the workload asks for."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


NEGATIVE = DRS(weight=1.0, ratio=-1.0)


def compare(a: DRS, b: DRS) -> int:
    """CompareDRS: -1 when `a` should be preferred for admission (and `b` for preemption)."""
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    x, y = a.weighted(), b.weighted()
    return (x > y) - (x < y)


UsageOf = Callable[[str, FlavorResource], float]     # node, flavor/resource -> what the node uses


class Shares:
    """Dominant resource shares over one quota tree; the tree's numbers are cached
    (quotas do not change during a run), usage is asked of the caller."""

    def __init__(self, tree: QuotaTree, fair: FairSharing):
        self.tree = tree
        self.fair = fair
        self._frs: dict[str, frozenset[FlavorResource]] = {}
        self._lendable: dict[str, dict[str, int]] = {}
        self._potential: dict[tuple[str, FlavorResource], int] = {}

    def frs(self, node: str) -> frozenset[FlavorResource]:
        """The flavor/resources of the node's SubtreeQuota: its own and its subtree's."""
        found = self._frs.get(node)
        if found is None:
            found = self._frs[node] = frozenset(tree_frs(self.tree, node))
        return found

    def potential(self, node: str, fr: FlavorResource) -> int:
        """potentialAvailable: the most the node could take, all else empty."""
        key = (node, fr)
        found = self._potential.get(key)
        if found is None:
            parent = self.tree.parent.get(node)
            if parent is None:
                found = self.tree.subtree_quota(node, fr)
            else:
                found = self.tree.guaranteed(node, fr) + self.potential(parent, fr)
                limit = self.tree.limits(node, fr)[1]
                if limit is not None:
                    found = min(self.tree.subtree_quota(node, fr) + limit, found)
            self._potential[key] = found
        return found

    def lendable(self, parent: str) -> dict[str, int]:
        """calculateLendable: per resource, summed over the root's flavors."""
        found = self._lendable.get(parent)
        if found is None:
            found = {}
            for fr in sorted(self.frs(self.tree.root_of(parent))):
                found[fr[1]] = found.get(fr[1], 0) + self.potential(parent, fr)
            self._lendable[parent] = found
        return found

    def drs(self, node: str, usage: UsageOf) -> DRS:
        """dominantResourceShare of a ClusterQueue ("cq:NAME") or Cohort ("cohort:NAME")."""
        weight = self.fair.weight(node)
        parent = self.tree.parent.get(node)
        if parent is None:
            return DRS(weight)
        borrowed: dict[str, float] = {}
        frs: list[FlavorResource] = []
        for fr in sorted(self.frs(node)):
            over = usage(node, fr) - self.tree.subtree_quota(node, fr)
            if over > 1e-9:                 # quantities are whole; a target's may be fractional
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
                frs.append(fr)
        if not borrowed:
            return DRS(weight)
        lendable = self.lendable(parent)
        ratio, dominant = 0.0, ""
        for resource, amount in sorted(borrowed.items()):
            lr = lendable.get(resource, 0)
            if lr > 0:
                r = amount * 1000.0 / lr
                if r > ratio:
                    ratio, dominant = r, resource
        return DRS(weight, ratio, dominant, True, tuple(frs))


def weights_of(snapshot: "Snapshot") -> FairSharing:
    """Every ClusterQueue's and Cohort's fairSharing.weight, and the Configuration's
    preemption strategies, whether fair sharing is on or not."""
    weights = {f"cq:{q.name}": q.fair_weight for q in snapshot.cluster_queues.values() if q.fair_weight != 1.0}
    weights.update({f"cohort:{c.name}": c.fair_weight for c in snapshot.cohorts.values() if c.fair_weight != 1.0})
    strategies = tuple(snapshot.kueue_config.fair_sharing.preemption_strategies) or DEFAULT_STRATEGIES
    return FairSharing(dict(sorted(weights.items())), strategies)


@dataclass(frozen=True)
class Share:
    """A node's dominant resource share as the MILP and the report read it: a DRS
    without what the greedy's tournament needs (which flavor/resources it borrows)."""

    weight: float
    ratio: float = 0.0          # unweighted: borrowed x 1000 / lendable, of the dominant resource
    resource: str = ""          # the dominant resource ("" when not borrowing)

    @property
    def weighted(self) -> float:
        """What Kueue compares: 0 when not borrowing, inf for weight 0 while borrowing."""
        return DRS(self.weight, self.ratio).weighted()


def weight_of(snapshot: Snapshot, node: str) -> float:
    kind, _, name = node.partition(":")
    if kind == "cq":
        cq = snapshot.cluster_queues.get(name)
        return cq.fair_weight if cq is not None else 1.0
    cohort = snapshot.cohorts.get(name)
    return cohort.fair_weight if cohort is not None else 1.0


def measured_resource(frs: list[FlavorResource]) -> str | None:
    """The resource fair shares are aimed at and compared on in a tree: its GPUs where it
    has any (the first GPU resource name), else cpu, else its first resource."""
    resources = sorted({r for _, r in frs})
    gpus = [r for r in resources if is_gpu(r)]
    if gpus:
        return gpus[0]
    return "cpu" if "cpu" in resources else (resources[0] if resources else None)


def tree_frs(tree: QuotaTree, root: str) -> list[FlavorResource]:
    """Every flavor/resource some node under `root` lists."""
    frs: set[FlavorResource] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        frs.update(tree.quota.get(node, {}))
        stack.extend(tree.children.get(node, []))
    return sorted(frs)


def node_usage(tree: QuotaTree, usage: Usage) -> dict[str, dict[FlavorResource, float]]:
    """Usage of every node of the tree (a cohort: what its children use beyond their guarantee)."""
    return _roll_up(tree, usage, capped=False)


def _roll_up(tree: QuotaTree, per_queue: Usage, capped: bool) -> dict[str, dict[FlavorResource, float]]:
    """Every node's amount, as the quota tree counts usage: a queue its own; a cohort what
    its children have beyond their guaranteed parts; `capped`: each at most what the node
    may use (its subtree quota plus borrowingLimit)."""
    out: dict[str, dict[FlavorResource, float]] = defaultdict(dict)

    def walk(node: str, fr: FlavorResource) -> float:
        if node.startswith("cq:"):
            value = float(per_queue.get(node, {}).get(fr, 0.0))
        else:
            value = sum(max(0.0, walk(c, fr) - tree.guaranteed(c, fr)) for c in tree.children[node])
        limit = tree.limits(node, fr)[1] if capped else None
        if limit is not None and tree.parent[node] is not None:
            value = min(value, float(tree.subtree_quota(node, fr) + limit))
        out[node][fr] = value
        return value

    for node in tree.nodes():
        if tree.parent[node] is None:
            for fr in tree_frs(tree, node):
                walk(node, fr)
    return out


def shares(snapshot: Snapshot, tree: QuotaTree, usage: Usage) -> dict[str, Share]:
    """Every node with a parent -> its Share under `usage` (per cq:NAME)."""
    used = node_usage(tree, usage)
    arithmetic = Shares(tree, weights_of(snapshot))

    def usage_of(node: str, fr: FlavorResource) -> float:
        return used.get(node, {}).get(fr, 0.0)

    out: dict[str, Share] = {}
    for node in tree.nodes():
        if tree.parent[node] is not None:
            drs = arithmetic.drs(node, usage_of)
            out[node] = Share(drs.weight, drs.ratio, drs.resource)
    return out


def first_flavor(snapshot: Snapshot, cq_name: str, resource: str) -> str | None:
    cq = snapshot.cluster_queues.get(cq_name)
    if cq is None:
        return None
    for group in cq.resource_groups:
        if resource in group.covered_resources and group.flavors:
            return group.flavors[0].flavor
    return None


def pending_demand(snapshot: Snapshot, workloads: list[Workload] | None = None) -> dict[str, dict[FlavorResource, float]]:
    """What pending work asks of each queue's quota (cq:NAME -> fr -> amount), on the
    first flavor of its queue covering each resource; elastic pod sets at their full count."""
    out: dict[str, dict[FlavorResource, float]] = defaultdict(lambda: defaultdict(float))
    pending = workloads if workloads is not None else [w for w in snapshot.workloads
                                                       if w.state is WorkloadState.PENDING]
    for workload in pending:
        cq = snapshot.cluster_queues.get(workload.cluster_queue or "")
        if (workload.blocked_reason or cq is None or not cq.active
                or not namespace_allowed(snapshot, cq, workload.ref.namespace)):
            continue
        queue = cq.name
        for pod_set in workload.pod_sets:
            for resource, amount in pod_set.request.items():
                flavor = first_flavor(snapshot, queue, resource)
                if flavor is not None and amount > 0:
                    out[f"cq:{queue}"][(flavor, resource)] += amount * pod_set.count
    return out


def demand(snapshot: Snapshot, running_usage: Usage | None = None) -> dict[str, dict[FlavorResource, float]]:
    """Running usage plus pending demand, per cq:NAME."""
    usage = running_usage if running_usage is not None else capacity.cluster_queue_usage(snapshot)
    out: dict[str, dict[FlavorResource, float]] = defaultdict(lambda: defaultdict(float))
    for queue, table in usage.items():
        for fr, amount in table.items():
            out[queue][fr] += amount
    for queue, table in pending_demand(snapshot).items():
        for fr, amount in table.items():
            out[queue][fr] += amount
    return out


def water_fill(amount: float, wants: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """Share `amount` by weighted max-min over what each child wants: each gets
    min(want, weight x level) for the level that spends it all (or everything it wants);
    weight-0 children share, equally, only what is left once the others have all they want."""
    out = {c: 0.0 for c in wants}
    left = max(0.0, amount)
    for group in ([c for c in wants if weights[c] > 0], [c for c in wants if weights[c] == 0]):
        weight = {c: (weights[c] if weights[c] > 0 else 1.0) for c in group}
        order = sorted((c for c in group if wants[c] > 0), key=lambda c: (wants[c] / weight[c], c))
        total = sum(weight[c] for c in order)
        for i, child in enumerate(order):
            if left <= 0:
                break
            level = left / total
            if wants[child] <= weight[child] * level:
                out[child] = wants[child]
                left -= wants[child]
                total -= weight[child]
                continue
            for other in order[i:]:
                out[other] = weight[other] * level
            left = 0.0
            break
    return out


def targets(snapshot: Snapshot, tree: QuotaTree, wanted: Usage) -> dict[str, dict[FlavorResource, float]]:
    """Every node's fair allocation (node -> fr -> its usage, as the quota tree counts it)
    given what each cq:NAME wants in all (running and pending): a root may use its
    subtree's quota, and each node shares its allocation among its children, guarantee
    first, then by weight. A child's part reserved by its lendingLimit (guaranteed) is
    its own and not drawn from the parent, as in Kueue's quota tree."""
    want = node_wants(tree, wanted)
    out: dict[str, dict[FlavorResource, float]] = defaultdict(dict)
    for root in tree.nodes():
        if tree.parent[root] is not None:
            continue
        for fr in tree_frs(tree, root):
            out[root][fr] = min(want.get(root, {}).get(fr, 0.0), float(tree.subtree_quota(root, fr)))
            _share_down(snapshot, tree, root, fr, want, out)
    return out


def node_wants(tree: QuotaTree, wanted: Usage) -> dict[str, dict[FlavorResource, float]]:
    """What each node wants, in the units its own usage is counted in: a queue its own; a
    cohort what its children want beyond their guaranteed parts; each capped by what the
    node may use (its subtree quota plus borrowingLimit)."""
    return _roll_up(tree, wanted, capped=True)


def _share_down(snapshot: Snapshot, tree: QuotaTree, node: str, fr: FlavorResource,
                want: Mapping[str, Mapping[FlavorResource, float]], out: dict[str, dict[FlavorResource, float]]) -> None:
    """Share `node`'s allocation among its children: each first what it wants up to its
    nominal (of which its guaranteed part is its own), then the rest by weight."""
    children = tree.children.get(node, [])
    if not children:
        return
    wants = {c: want.get(c, {}).get(fr, 0.0) for c in children}
    nominal = {c: min(wants[c], float(tree.subtree_quota(c, fr))) for c in children}
    drawn = {c: max(0.0, nominal[c] - tree.guaranteed(c, fr)) for c in children}   # from this node's pool
    extra = water_fill(out[node][fr] - sum(drawn.values()), {c: wants[c] - nominal[c] for c in children},
                       {c: weight_of(snapshot, c) for c in children})
    for child in children:
        out[child][fr] = nominal[child] + extra[child]
        _share_down(snapshot, tree, child, fr, want, out)


def fairness_score(snapshot: Snapshot, tree: QuotaTree, usage: Usage,
                   goals: Mapping[str, Mapping[FlavorResource, float]]) -> tuple[float, float]:
    """(least, total) over queues with a fair allocation of their tree's measured resource
    (GPUs where any): the fraction of it each uses under `usage`, capped at 1; the MILP's
    two fairness stages (planner.milp.fairness) in one pair, to compare plans."""
    fractions: list[float] = []
    for node in sorted(n for n in tree.nodes() if n.startswith("cq:") and tree.parent[n] is not None):
        measured = measured_resource(tree_frs(tree, tree.root_of(node)))
        goal = sum(v for fr, v in goals.get(node, {}).items() if fr[1] == measured)
        if goal <= 1e-6:
            continue
        used = sum(float(v) for fr, v in usage.get(node, {}).items() if fr[1] == measured)
        fractions.append(min(1.0, max(0.0, used / goal)))
    return (min(fractions) if fractions else 1.0, sum(fractions))
