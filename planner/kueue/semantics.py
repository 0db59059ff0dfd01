"""Kueue's rules as small pure functions shared by the greedy baseline and the MILP.

Which flavors a pod set may take in a ClusterQueue, which nodes a flavor choice
allows, effective priority, dominant-resource volume, and the quota tree
(nominal / borrowing / lending over hierarchical cohorts) with Kueue's
`available()` arithmetic. The verifier deliberately re-derives quota feasibility
on its own instead of importing this module.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence, cast

from models import (
    ClusterQueue, FlavorResource, Node, PodSet, PodSetAssignment, ResourceFlavor, ResourceGroup, Snapshot, Workload, dominant_units,
)
from models.objects import tolerated
from models.resources import CPU, PODS, is_gpu



# ---------------------------------------------------------------- label selectors

def selector_matches(selector: Mapping[str, object] | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector semantics; None matches nothing, {} matches everything."""
    if selector is None:
        return False
    match_labels = selector.get("matchLabels") or {}
    assert isinstance(match_labels, Mapping)
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    # matchExpressions: a list of mappings with a list of values (as the reader keeps them)
    for expr in cast(Sequence[Mapping[str, object]], selector.get("matchExpressions") or []):
        key, op = expr.get("key"), expr.get("operator")
        values = cast(Sequence[object], expr.get("values") or [])
        label = labels.get(key) if isinstance(key, str) else None
        present = label is not None
        if op == "In" and not (present and label in values):
            return False
        if op == "NotIn" and present and label in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def namespace_allowed(snapshot: Snapshot, cq: ClusterQueue, namespace: str) -> bool:
    labels = dict(snapshot.namespace_labels.get(namespace, {}))
    labels.setdefault("kubernetes.io/metadata.name", namespace)
    return selector_matches(cq.namespace_selector, labels)


# ---------------------------------------------------------------- flavors

@dataclass(frozen=True)
class FlavorOption:
    """One way to give a pod set a flavor per resource group.

    `by_resource` maps each requested (and covered) resource to its flavor; `rank`
    is the flavor indices per group, so lower ranks are earlier (preferred) flavors.
    """

    by_resource: Mapping[str, str]
    flavors: tuple[str, ...]          # distinct flavors used, group order
    rank: tuple[int, ...]

    @property
    def preference(self) -> int:
        return sum(self.rank)


def flavor_options(snapshot: Snapshot, cq: ClusterQueue, pod_set: PodSet) -> list[FlavorOption] | str:
    """All flavor choices for `pod_set` in `cq`, in preference order, or why there are none."""
    requested = [r for r, v in pod_set.request.items() if v > 0]
    groups: list[tuple[int, list[tuple[int, str]]]] = []
    for resource in requested:
        gi = next((i for i, g in enumerate(cq.resource_groups) if resource in g.covered_resources), None)
        if gi is None:
            if resource == PODS:
                continue  # `pods` is charged to quota only where a queue lists it
            return f"resource {resource} is not covered by ClusterQueue {cq.name}"
        if all(gi != g for g, _ in groups):
            groups.append((gi, []))
    tas = tas_requested(snapshot, cq, pod_set)
    for gi, choices in groups:
        covered = cq.resource_groups[gi].covered_resources
        why = "whose taints the pod set tolerates"
        for fi, fq in enumerate(cq.resource_groups[gi].flavors):
            flavor = snapshot.flavors.get(fq.flavor)
            if flavor is None:
                continue
            if not flavor_tolerated(flavor, pod_set):
                continue
            if not tas_matches(flavor, tas, pod_set, covered):
                why = ("with a Topology, which the pod set asks for" if tas
                       else "without a Topology, which a pod set with no topology request needs")
                continue
            choices.append((fi, fq.flavor))
        if not choices:
            return f"no flavor for {', '.join(covered)} in ClusterQueue {cq.name} {why}"
    options = []
    for combo in itertools.product(*(choices for _, choices in groups)):
        by_resource: dict[str, str] = {}
        for (gi, _), (_, name) in zip(groups, combo):
            for resource in cq.resource_groups[gi].covered_resources:
                if pod_set.request.get(resource) > 0:
                    by_resource[resource] = name
        flavors = tuple(dict.fromkeys(f for _, f in combo))
        options.append(FlavorOption(by_resource, flavors, tuple(fi for fi, _ in combo)))
    options.sort(key=lambda o: (o.preference, o.rank))
    if pod_set.fixed_flavors is not None:
        # a growth slice keeps its running Job's flavors (Kueue's workload slices do)
        options = [o for o in options if dict(o.by_resource) == dict(pod_set.fixed_flavors)]
        if not options:
            return f"the flavors it runs under ({_flavor_text(pod_set.fixed_flavors)}) are no option in ClusterQueue {cq.name}"
    return options


def _flavor_text(flavors: Mapping[str, str]) -> str:
    return ", ".join(f"{r}: {f}" for r, f in sorted(flavors.items()))


def tas_requested(snapshot: Snapshot, cq: ClusterQueue, pod_set: PodSet) -> bool:
    """Does the pod set use topology-aware scheduling: it asks for it (any TAS annotation),
    or its ClusterQueue is TAS-only (every flavor it lists has a Topology)? Kueue's rule."""
    request = pod_set.topology
    if request.mode is not None or request.slices:
        return True
    flavors = [snapshot.flavors.get(fq.flavor) for g in cq.resource_groups for fq in g.flavors]
    return bool(flavors) and all(f is not None and f.topology_name for f in flavors)


def tas_matches(flavor: ResourceFlavor, tas: bool, pod_set: PodSet, covered: Iterable[str]) -> bool:
    """Kueue's match of a pod set and a flavor (flavorassigner's
    checkPodSetAndFlavorMatchForTAS): a pod set that uses TAS takes flavors with a
    Topology, or one without for resources it does not request (quota only); one that
    does not takes only flavors without a Topology."""
    if not tas:
        return not flavor.topology_name
    return bool(flavor.topology_name) or not any(pod_set.request.get(r) > 0 for r in covered)


def flavor_tolerated(flavor: ResourceFlavor, pod_set: PodSet) -> bool:
    """A flavor's nodeTaints admit only pod sets that tolerate them, counting the
    flavor's own `tolerations` with the pod set's (Kueue's flavorassigner checks
    `append(podSpec.Tolerations, flavor.Spec.Tolerations...)`: a flavor that tolerates
    its own taints is open to every pod set)."""
    return tolerated(flavor.node_taints, pod_set.tolerations + flavor.tolerations)


def node_allows(node: Node, flavors: Iterable[ResourceFlavor], pod_set: PodSet) -> bool:
    """Can a pod of `pod_set`, given these flavors, run on `node`?"""
    if not node.usable:
        return False
    flavor_list = list(flavors)
    for flavor in flavor_list:
        if any(node.labels.get(k) != v for k, v in flavor.node_labels.items()):
            return False
    if any(node.labels.get(k) != v for k, v in pod_set.node_selector.items()):
        return False
    tolerations = pod_set.tolerations + tuple(t for f in flavor_list for t in f.tolerations)
    return tolerated(node.taints, tolerations)


# ---------------------------------------------------------------- priority, volume

def effective_priority(workload: Workload, snapshot: Snapshot) -> int:
    """Priority plus aging: agingPerHour points for every hour waited (floored)."""
    aging = snapshot.policy.aging_per_hour
    if aging <= 0 or workload.state.value != "pending":
        return workload.priority
    hours = max(0.0, snapshot.now - workload.queued_at) / 3600.0
    return workload.priority + int(math.floor(aging * hours))


def _gpus(pod_set: PodSet, snapshot: Snapshot) -> int:
    """GPUs (and policy-named GPU resources) one pod of `pod_set` asks for."""
    extra = snapshot.policy.gpu_resources
    return sum(v for k, v in pod_set.request.items() if is_gpu(k) or k in extra)


def pod_volume(workload: Workload, pod_set: PodSet, snapshot: Snapshot) -> float:
    """Dominant-resource units of one pod of `workload`'s `pod_set`: its GPUs where the
    workload asks for GPUs in any pod set, else its cores. A JobSet's CPU-only launcher
    adds nothing to GPU work's volume (REFERENCE §3: "GPUs where a workload asks for
    GPUs"; `served_gpus` counts the same way): counted in cores, it made a GPU of a
    training job worth less than a core of its launcher, and plans that admit launchers
    look larger than the GPUs they serve."""
    if any(_gpus(ps, snapshot) > 0 for ps in workload.pod_sets):
        return float(_gpus(pod_set, snapshot))
    return dominant_units(pod_set.request)


def queue_order_key(workload: Workload, snapshot: Snapshot) -> tuple[int, float, float, str, str]:
    """The order within a ClusterQueue: effective priority desc, then (admission fair
    sharing) the LocalQueue's decayed usage, least first, then queue time, then UID.
    Greedy and the MILP both take their in-queue order from here."""
    usage = local_queue_usage(snapshot).get((workload.ref.namespace, workload.local_queue), 0.0) \
        if workload.cluster_queue in _afs_queues(snapshot) else 0.0
    return (-effective_priority(workload, snapshot), usage, workload.queued_at, workload.uid, str(workload.ref))


# ---------------------------------------------------------------- admission fair sharing

@dataclass(frozen=True)
class AdmissionFairSharing:
    """Kueue's Configuration admissionFairSharing, and where it applies.

    `queues`: the ClusterQueues with `admissionScope.admissionMode:
    UsageBasedAdmissionFairSharing`; `local_queue_weights`: LocalQueues'
    `fairSharing.weight` (1 when not given)."""

    half_life_seconds: float
    sampling_seconds: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    queues: frozenset[str] = frozenset()
    local_queue_weights: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def entry_penalty(self, amounts: Mapping[str, float]) -> float:
        """CalculateEntryPenalty, weighted: what one admission adds to its LocalQueue's
        usage until the next sample (alpha = 1 - 0.5^(sampling / half-life))."""
        if self.half_life_seconds <= 0:
            return 0.0
        alpha: float = 1.0 - 0.5 ** (self.sampling_seconds / self.half_life_seconds)
        return alpha * self.weighted(amounts)

    def weighted(self, amounts: Mapping[str, float]) -> float:
        return float(sum(float(self.resource_weights.get(r, 1.0)) * v for r, v in sorted(amounts.items())))


def kueue_amounts(workload: Workload, assignments: Iterable[PodSetAssignment]) -> dict[str, float]:
    """A workload's quota usage per resource in Kueue's units (cpu in cores): what an
    admitted workload adds to its LocalQueue's usage."""
    out: dict[str, float] = {}
    for a in assignments:
        pod_set = next((ps for ps in workload.pod_sets if ps.name == a.name), None)
        if pod_set is None:
            continue
        for resource in a.flavors:
            value = a.count * pod_set.request.get(resource)
            out[resource] = out.get(resource, 0.0) + (value / 1000.0 if resource == CPU else float(value))
    return out


def decayed_usage(afs: AdmissionFairSharing, running: Iterable[Workload], now: float) -> dict[tuple[str, str], float]:
    """Each LocalQueue's consumed resources at `now`, weighted and divided by the
    LocalQueue's weight (CalcFSUsageFromResources), from its running workloads and
    their start times: Kueue samples admitted usage into an exponential moving average
    with the configured half-life; a workload of usage r running since s has added
    r x (1 - 0.5^((now - s) / half-life)) (the average's continuous form, Kueue's with
    its first sample at the start). Half-life 0: usage is reset, 0."""
    out: dict[tuple[str, str], float] = {}
    if afs.half_life_seconds <= 0:
        return out
    for w in sorted(running, key=lambda w: w.ref):
        if w.cluster_queue not in afs.queues or not w.assignment:
            continue
        since = w.admitted_at if w.admitted_at is not None else w.created_at
        share: float = 1.0 - 0.5 ** (max(0.0, now - since) / afs.half_life_seconds)
        key = (w.ref.namespace, w.local_queue)
        out[key] = out.get(key, 0.0) + share * afs.weighted(kueue_amounts(w, w.assignment))
    for key in out:
        weight = afs.local_queue_weights.get(key, 1.0)
        out[key] = out[key] / weight if weight > 0 else math.inf
    return out


def admission_fair_sharing(snapshot: Snapshot) -> AdmissionFairSharing | None:
    """The snapshot's admission fair sharing settings (Kueue's Configuration
    admissionFairSharing, and the ClusterQueues whose admissionScope asks for it), or
    None when off or no queue asks for it."""
    config = snapshot.kueue_config.admission_fair_sharing
    if config is None:
        return None
    queues = frozenset(q.name for q in snapshot.cluster_queues.values()
                       if q.admission_mode == "UsageBasedAdmissionFairSharing")
    if not queues:
        return None
    return AdmissionFairSharing(
        half_life_seconds=config.usage_half_life_seconds, sampling_seconds=config.usage_sampling_interval_seconds,
        resource_weights=dict(config.resource_weights), queues=queues,
        local_queue_weights={key: lq.fair_weight for key, lq in snapshot.local_queues.items() if lq.fair_weight != 1.0})


def _afs_entry(snapshot: Snapshot) -> tuple[AdmissionFairSharing | None, dict[tuple[str, str], float]]:
    def compute() -> tuple[AdmissionFairSharing | None, dict[tuple[str, str], float]]:
        afs = admission_fair_sharing(snapshot)
        table = decayed_usage(afs, (w for w in snapshot.workloads if w.state.value == "running"), snapshot.now) \
            if afs is not None else {}
        return afs, table

    return snapshot.derived("kueue.admission-fair-sharing", compute)


def _afs_queues(snapshot: Snapshot) -> frozenset[str]:
    afs = _afs_entry(snapshot)[0]
    return afs.queues if afs is not None else frozenset()


def local_queue_usage(snapshot: Snapshot) -> dict[tuple[str, str], float]:
    """(namespace, LocalQueue) -> its decayed usage at the snapshot's planning time
    (admission fair sharing; empty when off). Computed once per snapshot."""
    return _afs_entry(snapshot)[1]


# ---------------------------------------------------------------- quota tree

class QuotaTree:
    """Kueue's hierarchical quota arithmetic (pkg/cache resource_node.go).

    subtree(n)    = nominal(n) + sum over children c of (subtree(c) - guaranteed(c))
    guaranteed(n) = max(0, subtree(n) - lendingLimit(n)) if a lending limit is set, else 0
    usage(cohort) = sum over children c of max(0, usage(c) - guaranteed(c))
    A node may use up to subtree + borrowingLimit, and the root up to its subtree.
    """

    def __init__(self, snapshot: Snapshot):
        self.parent: dict[str, str | None] = {}
        self.children: dict[str, list[str]] = {}
        self.quota: dict[str, dict[FlavorResource, tuple[int, int | None, int | None]]] = {}
        for cohort in sorted(snapshot.cohorts.values(), key=lambda c: c.name):
            if cohort.inactive_reason:
                continue
            key = f"cohort:{cohort.name}"
            parent = f"cohort:{cohort.parent}" if cohort.parent else None
            self._add(key, parent, cohort.resource_groups)
        for cq in sorted(snapshot.cluster_queues.values(), key=lambda q: q.name):
            if not cq.active:
                continue
            parent = f"cohort:{cq.cohort}" if cq.cohort else None
            self._add(f"cq:{cq.name}", parent, cq.resource_groups)
        # Cohorts named only by a parentName or a queue exist implicitly, without quota.
        for node, parent in list(self.parent.items()):
            while parent is not None and parent not in self.parent:
                self.parent[parent] = None
                self.quota.setdefault(parent, {})
                self.children.setdefault(parent, [])
                parent = None
        for node, parent in self.parent.items():
            if parent is not None:
                self.children.setdefault(parent, []).append(node)
        for kids in self.children.values():
            kids.sort()
        self._subtree: dict[tuple[str, FlavorResource], int] = {}
        self._roots: dict[str, str] = {}
        self._chains: dict[tuple[str, FlavorResource], tuple[tuple[str, int, int | None, int], ...]] = {}

    def _add(self, key: str, parent: str | None, groups: Iterable[ResourceGroup]) -> None:
        self.parent[key] = parent
        self.children.setdefault(key, [])
        table = self.quota.setdefault(key, {})
        for group in groups:
            for fq in group.flavors:
                for resource, q in fq.resources.items():
                    table[(fq.flavor, resource)] = (q.nominal, q.borrowing_limit, q.lending_limit)

    def nodes(self) -> list[str]:
        return sorted(self.parent)

    def root_of(self, node: str) -> str:
        if node not in self._roots:
            top = node
            while (up := self.parent[top]) is not None:
                top = up
            self._roots[node] = top
        return self._roots[node]

    def path(self, node: str) -> list[str]:
        """node, its parent, ..., the root."""
        out = [node]
        while (up := self.parent[out[-1]]) is not None:
            out.append(up)
        return out

    def limits(self, node: str, fr: FlavorResource) -> tuple[int, int | None, int | None]:
        return self.quota.get(node, {}).get(fr, (0, None, None))

    def lists(self, node: str, fr: FlavorResource) -> bool:
        return fr in self.quota.get(node, {})

    def subtree_quota(self, node: str, fr: FlavorResource) -> int:
        key = (node, fr)
        if key not in self._subtree:
            total = self.limits(node, fr)[0]
            for child in self.children.get(node, []):
                total += self.subtree_quota(child, fr) - self.guaranteed(child, fr)
            self._subtree[key] = total
        return self._subtree[key]

    def guaranteed(self, node: str, fr: FlavorResource) -> int:
        lending = self.limits(node, fr)[2]
        if lending is None:
            return 0
        return max(0, self.subtree_quota(node, fr) - lending)

    def tree_usage(self, cq_usage: Mapping[str, Mapping[FlavorResource, int]], fr: FlavorResource) -> dict[str, int]:
        """Usage of every node for one flavor/resource, given usage per `cq:NAME`."""
        usage: dict[str, int] = {}

        def walk(node: str) -> int:
            if node.startswith("cq:"):
                usage[node] = cq_usage.get(node, {}).get(fr, 0)
            else:
                usage[node] = sum(max(0, walk(c) - self.guaranteed(c, fr)) for c in self.children[node])
            return usage[node]

        for node in self.nodes():
            if self.parent[node] is None:
                walk(node)
        return usage

    def chain(self, node: str, fr: FlavorResource) -> tuple[tuple[str, int, int | None, int], ...]:
        """`node`, its parent, ..., the root, each as (name, guaranteed, borrowingLimit,
        subtree quota) for `fr`: the fixed numbers `available` and usage updates walk
        (cached; quotas do not change during a run)."""
        key = (node, fr)
        found = self._chains.get(key)
        if found is None:
            found = self._chains[key] = tuple(
                (n, self.guaranteed(n, fr), self.limits(n, fr)[1], self.subtree_quota(n, fr))
                for n in self.path(node))
        return found

    def move_usage(self, usage: dict[str, int], node: str, fr: FlavorResource, old: int, new: int) -> None:
        """`node`'s usage of `fr` went from `old` to `new`: set it in `usage` (node ->
        usage) and carry the change up the tree, where a node passes on what it uses
        beyond its guarantee (stopping where nothing more changes)."""
        usage[node] = new
        chain = self.chain(node, fr)
        for i in range(len(chain) - 1):
            guaranteed = chain[i][1]
            change = max(0, new - guaranteed) - max(0, old - guaranteed)
            if change == 0:
                return
            parent = chain[i + 1][0]
            old = usage.get(parent, 0)
            new = old + change
            usage[parent] = new

    def available(self, cq: str, fr: FlavorResource, usage: Mapping[str, int]) -> int:
        """How much more of `fr` the queue `cq` may admit now (Kueue's available()).

        Kueue recurses to the root; this is the same arithmetic from the root down:
        the root may take its subtree quota less its usage, and each node below takes
        its unused guaranteed quota plus what its parent may give, capped by its
        borrowingLimit.
        """
        chain = self.chain(cq, fr)
        root, _, _, subtree = chain[-1]
        avail = subtree - usage.get(root, 0)
        for i in range(len(chain) - 2, -1, -1):
            node, guaranteed, borrowing, subtree = chain[i]
            used = usage.get(node, 0)
            local = max(0, guaranteed - used)
            from_parent = avail
            if borrowing is not None:
                stored = subtree - guaranteed
                used_in_parent = max(0, used - guaranteed)
                from_parent = min(from_parent, stored - used_in_parent + borrowing)
            avail = local + from_parent if from_parent > 0 else local
        return avail


def quota_usage(pod_set: PodSet, option: FlavorOption, count: int) -> dict[FlavorResource, int]:
    """What `count` pods of `pod_set` charge to quota under `option` (only covered resources)."""
    return {(flavor, r): count * pod_set.request.get(r) for r, flavor in option.by_resource.items()}


# ---------------------------------------------------------------- preemption

PREEMPTED = "Preempted"    # by a workload of the same ClusterQueue
RECLAIMED = "Reclaimed"    # by a workload of another ClusterQueue in the cohort tree


def evictable(workload: Workload, snapshot: Snapshot) -> bool:
    """May this running workload be evicted at all (before asking who wants it gone)?"""
    if workload.state.value != "running" or workload.non_preemptible or workload.cluster_queue is None:
        return False
    minimum = snapshot.policy.minimum_runtime_seconds
    if minimum > 0 and workload.admitted_at is not None and snapshot.now - workload.admitted_at < minimum:
        return False
    return True


MOVABLE_KIND = "Job"


def movable(workload: Workload, snapshot: Snapshot) -> bool:
    """May defragmentation move this running workload (policy.defragment on)? Only what
    may be evicted at all, and only if marked `stowplan.io/movable: "true"` or
    checkpointed within the policy's window (little work is lost). Only Jobs: a move is
    carried out as suspend + re-admit of one object whose pods the job controller
    removes (planner.cluster.apply.start_move); other kinds are not moved yet."""
    policy = snapshot.policy
    if workload.ref.kind != MOVABLE_KIND or not policy.defragment or not evictable(workload, snapshot):
        return False
    if workload.movable:
        return True
    checkpoint = workload.checkpointed_at
    return checkpoint is not None and snapshot.now - checkpoint <= policy.migration_checkpoint_window_seconds


def borrowing_queues(snapshot: Snapshot, tree: QuotaTree,
                     usage: Mapping[str, Mapping[FlavorResource, int]]) -> set[str]:
    """ClusterQueues using more than their nominal quota of some flavor/resource now."""
    out = set()
    for node, table in usage.items():
        if any(amount > tree.limits(node, fr)[0] for fr, amount in table.items()):
            out.add(node.removeprefix("cq:"))
    return out


def preemption_reason(snapshot: Snapshot, preemptor: Workload, victim: Workload,
                      tree: QuotaTree, borrowing: set[str], preemptor_borrows: bool = False) -> str | None:
    """Kueue's rules: may `preemptor` evict `victim`? Returns Preempted / Reclaimed or None.

    Same queue: withinClusterQueue. Another queue of the cohort tree: only one that is
    borrowing now, and reclaimWithinCohort must allow it (Any, or LowerPriority with a
    lower priority); a preemptor that itself must borrow may also need
    borrowWithinCohort (LowerPriority, lower priority, at most maxPriorityThreshold).
    Base priorities decide (aging orders admissions, it grants no eviction rights),
    so an evicted workload that ages does not come back for the one that evicted it.
    """
    cq = snapshot.cluster_queues.get(preemptor.cluster_queue or "")
    if cq is None or victim.cluster_queue is None:
        return None
    policy = cq.preemption
    if victim.cluster_queue == cq.name:
        rule = policy.within_cluster_queue
        if victim.priority < preemptor.priority and rule in ("LowerPriority", "LowerOrNewerEqualPriority"):
            return PREEMPTED
        if (rule == "LowerOrNewerEqualPriority" and victim.priority == preemptor.priority
                and victim.queued_at > preemptor.queued_at):
            return PREEMPTED
        return None
    own, other = f"cq:{cq.name}", f"cq:{victim.cluster_queue}"
    if own not in tree.parent or other not in tree.parent or tree.root_of(own) != tree.root_of(other):
        return None
    if victim.cluster_queue not in borrowing:
        return None
    reclaim = policy.reclaim_within_cohort
    if not (reclaim == "Any" or (reclaim == "LowerPriority" and victim.priority < preemptor.priority)):
        return None
    if preemptor_borrows and not snapshot.kueue_config.fair_sharing.enabled:
        # With fair sharing Kueue's findCandidates asks reclaimWithinCohort only; its
        # strategies then judge each candidate by the shares (planner.milp.fairness).
        threshold = policy.borrow_max_priority_threshold
        if not (policy.borrow_within_cohort == "LowerPriority" and victim.priority < preemptor.priority
                and (threshold is None or victim.priority <= threshold)):
            return None
    return RECLAIMED


def must_borrow(snapshot: Snapshot, workload: Workload, tree: QuotaTree,
                usage: Mapping[str, Mapping[FlavorResource, int]],
                options_of: Callable[[ClusterQueue, PodSet], list[FlavorOption] | str] | None = None) -> bool:
    """Would admitting `workload` take its queue above nominal quota under any flavor choice?

    Errs towards yes (any option, not the one a plan picks), so reclaiming while
    borrowing is only done where borrowWithinCohort allows it. `options_of`: the
    caller's (cached) flavor_options for this snapshot.
    """
    cq = snapshot.cluster_queues.get(workload.cluster_queue or "")
    if cq is None:
        return False
    node = f"cq:{cq.name}"
    used = usage.get(node, {})
    for pod_set in workload.pod_sets:
        options = options_of(cq, pod_set) if options_of else flavor_options(snapshot, cq, pod_set)
        if isinstance(options, str):
            continue
        for option in options:
            for fr, amount in quota_usage(pod_set, option, pod_set.count).items():
                if used.get(fr, 0) + amount > tree.limits(node, fr)[0]:
                    return True
    return False


def eviction_cost(workload: Workload, snapshot: Snapshot) -> float:
    """Work an eviction throws away: units x hours since start or checkpoint (capped),
    plus the restart cost; `stowplan.io/preemption-cost` overrides the model."""
    if workload.preemption_cost is not None:
        return float(workload.preemption_cost)
    policy = snapshot.policy
    # Work since the later of start and last checkpoint is lost; without either, since creation.
    starts = [t for t in (workload.admitted_at, workload.checkpointed_at) if t is not None]
    since = max(starts) if starts else workload.created_at
    hours = min(policy.max_lost_hours, max(0.0, snapshot.now - since) / 3600.0)
    units = running_volume(workload, snapshot)
    return units * hours + policy.restart_cost


def assigned_volume(workload: Workload, assignments: Iterable[PodSetAssignment], snapshot: Snapshot) -> float:
    """Dominant-resource units of `workload`'s pods as `assignments` count them."""
    total = 0.0
    for assignment in assignments:
        pod_set = next((ps for ps in workload.pod_sets if ps.name == assignment.name), None)
        if pod_set is not None:
            total += assignment.count * pod_volume(workload, pod_set, snapshot)
    return total


def running_volume(workload: Workload, snapshot: Snapshot) -> float:
    """Dominant-resource units a running workload uses (its assigned pod counts)."""
    return assigned_volume(workload, workload.assignment, snapshot)
