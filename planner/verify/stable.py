"""The verifier's stability rule: nominal quota is a guarantee (REFERENCE §3).

A plan Kueue would undo within a cycle is not a plan. Kueue lends a ClusterQueue's
unused nominal quota to its cohort and takes it back as soon as the queue has work
that fits inside it: its scheduler admits that work, or, when borrowers hold the
room, evicts them ("reclamation within the cohort"). So a plan must never leave such
a workload waiting while the borrowers that its queue may reclaim run.

The rule checked, for every pending workload the plan leaves waiting, whose ClusterQueue is active,
BestEffortFIFO (under StrictFIFO only the head is ever tried), in a cohort, with
`reclaimWithinCohort` Any or LowerPriority:

  for some flavor choice (one listed flavor per resource group, its nodeTaints
  tolerated, with a Topology exactly when the pod set uses TAS, as Kueue matches
  them), if the queue's usage after the plan plus the workload's request (its
  minimum count, for an elastic one) stays within the queue's nominal quota for
  every flavor/resource, and the workload does not fit as things stand, then it
  must not fit once Kueue's reclaim has removed its candidates.

Kueue's reclaim, as its classical preemption runs it for a workload that fits its
queue's nominal quota (pkg/scheduler/preemption, `classical`): candidates are the
workloads of other ClusterQueues of the cohort tree that use some flavor/resource
the preemptor needs, whose queue uses more than its nominal quota of one of those,
allowed by the policy (Any; LowerPriority: a lower base priority) and evictable
(not non-preemptible, past the policy's minimum runtime; admissions of this plan
have run for no time). In order (lower priority first, most recently admitted first,
then UID) each is removed while its queue, and every cohort between it and the
preemptor's, still uses more than its quota of one of those flavor/resources. This
plan's own admissions are the most recent, but in an order the plan does not give
(Kueue's admission times): the rule holds a workload owed only what every order of
them would let it run (see _reclaimed), so it never refuses a fixed point of Kueue's.
"Fits" is quota (Kueue's `available()` over the cohort tree) and nodes (enough
pods of the shape on eligible nodes, inside one domain of a required level, in
whole slices). A flavor with a Topology needs every flavor/resource it covers
preempted, as Kueue's TAS marks them, so every one of the workload's flavor/
resources counts.

Only workloads with one pod set are checked: their fit test is exact, so the rule
never flags a plan Kueue would keep. The MILP enforces the rule for every workload.
A workload the plan evicts is requeued and left to the next cycle, as Kueue's queue
would take it again later: what it evicts may not be admitted in the same plan. A
migration (planner/verify/moves.py) is the one move of running work: it counts here
as running at its new place, admitted by this plan.
Like all of planner/verify, this module must not import the code that makes plans.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from typing import Mapping, NamedTuple

from models import ClusterQueue, Decisions, ObjectRef, PodSet, PodSetAssignment, ResourceFlavor, Snapshot, Workload, WorkloadState
from models.objects import tolerated
from planner.verify.entries import plan_entries
from planner.verify.index import (
    FR, AdmittedEntry, SnapshotIndex, VerifierQuotaTree, cohort_problems, cohort_root, label_at, namespace_allowed,
    node_problems, pairs_usage, pod_set_of, quota_table,
)
from planner.verify.violation import Rule, Violation, messages

MAX_CHOICES = 16   # flavor choices tried per workload (the product over resource groups)

Key = tuple[str, str]   # ("cq" | "cohort", name): planner.verify.index's quota tree keys


def stability_violations(snapshot: Snapshot, decisions: Decisions) -> list[str]:
    """The stability rule alone, as sentences (planner.verify checks everything else)."""
    return messages(unstable(snapshot, decisions))


def unstable(snapshot: Snapshot, decisions: Decisions) -> list[Violation]:
    """Each waiting workload Kueue's reclaim would admit (Rule.STABILITY, the workload
    and its ClusterQueue), with why."""
    ix = SnapshotIndex(snapshot)
    admitted, evicted = plan_entries(ix, decisions)
    found: list[Violation] = []
    check_stability(ix, admitted, evicted, found)
    return found


def check_stability(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef],
                    out: list[Violation]) -> None:
    """Append a violation for each waiting workload Kueue's reclaim would admit."""
    snap = ix.snapshot
    waiting = [w for w in snap.workloads
               if w.state is WorkloadState.PENDING and w.ref not in admitted and _may_reclaim(ix, w)]
    if not waiting:
        return
    after = PlanState(ix, admitted, evicted)
    seen: dict[object, tuple[str, list[ObjectRef]] | None] = {}
    for w in sorted(waiting, key=lambda w: w.ref):
        pod_set = w.pod_sets[0]
        # The verdict depends on the queue, the pod set's shape and, for LowerPriority, the priority.
        key = (w.cluster_queue, pod_set.request, pod_set.minimum, pod_set.topology, pod_set.tolerations,
               tuple(sorted(pod_set.node_selector.items())), w.priority)
        if key not in seen:
            seen[key] = _reclaim_admits(ix, after, w)
        found = seen[key]
        if found is not None:
            cq_name, victims = found
            names = ", ".join(str(r) for r in victims[:5]) + (f" and {len(victims) - 5} more" if len(victims) > 5 else "")
            message = (f"{w.ref}: left waiting though it fits ClusterQueue {cq_name}'s nominal quota and "
                       f"reclaiming what its cohort borrows ({names}) would let it run: Kueue would reclaim")
            out.append(Violation(Rule.STABILITY, message, workloads=(w.ref,), queue=cq_name))


def _may_reclaim(ix: SnapshotIndex, w: Workload) -> bool:
    """Could Kueue try `w` and reclaim for it at all?"""
    if len(w.pod_sets) != 1 or w.blocked_reason or w.cluster_queue is None:
        return False
    cq = ix.snapshot.cluster_queues.get(w.cluster_queue)
    if cq is None or cq.inactive_reason is not None or not cq.cohort:
        return False
    if cq.preemption.reclaim_within_cohort not in ("Any", "LowerPriority") or cq.queueing_strategy == "StrictFIFO":
        return False
    return not cohort_problems(ix, cq) and namespace_allowed(ix.snapshot, cq, w.ref.namespace)


class _Runner:
    """A workload running once the plan is applied."""

    __slots__ = ("workload", "cq", "pairs", "since", "_on_nodes")

    def __init__(self, workload: Workload, cq: str, pairs: list[tuple[PodSet, PodSetAssignment]], since: float):
        self.workload, self.cq, self.pairs, self.since = workload, cq, pairs, since
        self._on_nodes: dict[str, dict[str, int]] | None = None

    def usage(self, coverage: Mapping[str, int]) -> dict[FR, int]:
        return pairs_usage(self.pairs, coverage)

    def on_nodes(self) -> dict[str, dict[str, int]]:
        """Node -> resource -> what it uses there (worked out once; callers only read it)."""
        if self._on_nodes is None:
            out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
            for pod_set, psa in self.pairs:
                for node, count in psa.pods_per_node().items():
                    for resource, amount in pod_set.request.items():
                        out[node][resource] += count * amount
            self._on_nodes = out
        return self._on_nodes


class PlanState:
    """The cluster once the plan is applied: who runs, quota usage, free node capacity."""

    def __init__(self, ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef]):
        snap = ix.snapshot
        self.ix = ix
        self.runners: list[_Runner] = []
        for w in snap.workloads:
            if w.state is WorkloadState.RUNNING and w.ref not in evicted and w.cluster_queue in snap.cluster_queues:
                pairs = [(ps, psa) for psa in w.assignment if (ps := pod_set_of(w, psa.name)) is not None]
                since = w.admitted_at if w.admitted_at is not None else snap.now
                self.runners.append(_Runner(w, w.queue_name, pairs, since))
        for entry in admitted.values():
            if entry.admission.cluster_queue in snap.cluster_queues:
                # Admitted by this plan: the most recently admitted of all, running for no time.
                self.runners.append(_Runner(entry.workload, entry.admission.cluster_queue, entry.pairs, float("inf")))
        self.usage: dict[str, dict[FR, int]] = defaultdict(lambda: defaultdict(int))
        self.runner_usage: list[dict[FR, int]] = []
        for runner in self.runners:
            mine = runner.usage(ix.coverage.get(runner.cq, {}))
            self.runner_usage.append(mine)
            for fr, amount in mine.items():
                self.usage[runner.cq][fr] += amount
        self.tree = VerifierQuotaTree(ix)
        self._free: dict[str, dict[str, int]] | None = None
        self._fits: dict[object, dict[str, int]] = {}
        self._capacity: dict[object, dict[tuple[str | None, ...], int]] = {}
        self._paths: dict[tuple[str, tuple[str, ...]], tuple[str | None, ...]] = {}
        self._by_queue: dict[str, list[int]] | None = None

    def by_queue(self) -> dict[str, list[int]]:
        """Queue -> its runners' indexes in Kueue's candidate order (lower priority, then
        most recently admitted, then UID): sorted once, read by every reclaim."""
        if self._by_queue is None:
            order = sorted(range(len(self.runners)), key=lambda i: (
                self.runners[i].workload.priority, -self.runners[i].since, self.runners[i].workload.uid,
                self.runners[i].workload.ref))
            found: dict[str, list[int]] = defaultdict(list)
            for i in order:
                found[self.runners[i].cq].append(i)
            self._by_queue = found
        return self._by_queue

    def capacity(self, key: object, fitting: Mapping[str, int],
                 levels: tuple[str, ...]) -> dict[tuple[str | None, ...], int]:
        """Pods per full domain path (a node's labels at `levels`) for `fitting` as things
        stand (kept per shape: the same for every workload of it)."""
        found = self._capacity.get((key, levels))
        if found is None:
            found = _by_path(self, fitting, levels)
            self._capacity[(key, levels)] = found
        return found

    def path(self, node: str, levels: tuple[str, ...]) -> tuple[str | None, ...]:
        """The node's labels at `levels`, coarse to fine (kept)."""
        key = (node, levels)
        found = self._paths.get(key)
        if found is None:
            found = self._paths[key] = tuple(label_at(self.ix.nodes[node], lv) for lv in levels)
        return found

    # -- nodes

    def free(self) -> dict[str, dict[str, int]]:
        """Node -> resource -> allocatable less unmanaged and running pods (computed once)."""
        if self._free is None:
            free: dict[str, dict[str, int]] = {}
            for name, node in self.ix.nodes.items():
                have = dict(node.allocatable.items())
                for resource, amount in node.unmanaged.items():
                    have[resource] = have.get(resource, 0) - amount
                free[name] = have
            for runner in self.runners:
                for node_name, used in runner.on_nodes().items():
                    if node_name in free:
                        for resource, amount in used.items():
                            free[node_name][resource] = free[node_name].get(resource, 0) - amount
            self._free = free
        return self._free

    def pods_fitting(self, pod_set: PodSet, flavors: list[ResourceFlavor]) -> dict[str, int]:
        """Eligible node -> pods of `pod_set` that fit there after the plan (cached per shape)."""
        key = (tuple(f.name for f in flavors), pod_set.request, pod_set.tolerations,
               tuple(sorted(pod_set.node_selector.items())))
        found = self._fits.get(key)
        if found is None:
            free = self.free()
            found = {}
            for name in sorted(self.ix.nodes):
                node = self.ix.nodes[name]
                shape = (name, (key[0], key[3], pod_set.tolerations))
                problems = self.ix.node_problems.get(shape)
                if problems is None:
                    problems = self.ix.node_problems[shape] = node_problems(self.ix, node, pod_set, flavors)
                if not problems:
                    found[name] = pods_in(free[name], pod_set)
            self._fits[key] = found
        return found


def pods_in(free: Mapping[str, int], pod_set: PodSet) -> int:
    """Whole pods of `pod_set` that `free` holds (never negative)."""
    most: int | None = None
    for resource, amount in pod_set.request.items():
        if amount > 0:
            here = max(0, free.get(resource, 0)) // amount
            most = here if most is None else min(most, here)
    return most or 0


# ---------------------------------------------------------------- one waiting workload

def _reclaim_admits(ix: SnapshotIndex, after: PlanState, w: Workload) -> tuple[str, list[ObjectRef]] | None:
    """(queue, victims) when Kueue's reclaim would let `w` run, else None."""
    cq = ix.snapshot.cluster_queues[w.queue_name]
    pod_set = w.pod_sets[0]
    count = pod_set.minimum
    nominal = quota_table(cq.resource_groups)
    used = after.usage.get(cq.name, {})
    for flavors in _flavor_choices(ix, cq, pod_set):
        need = {(flavor, r): count * pod_set.request.get(r) for r, flavor in flavors.items()}
        need = {fr: v for fr, v in need.items() if v > 0}
        if not need or any(used.get(fr, 0) + v > nominal.get(fr, (0, None, None))[0] for fr, v in need.items()):
            continue  # needs no quota, or does not fit inside the queue's nominal quota
        chosen = [ix.snapshot.flavors[f] for f in sorted(set(flavors.values()))]
        if _fits(ix, after, cq, pod_set, count, chosen, need, []):
            continue  # fits as things stand: no reclaim involved (a plan may leave volume unused)
        reclaim = _reclaimed(ix, after, cq, w, set(need))
        if reclaim.possible and _fits(ix, after, cq, pod_set, count, chosen, need, reclaim.victims, reclaim.usage):
            return cq.name, sorted(after.runners[i].workload.ref for i in reclaim.possible)
    return None


def _flavor_choices(ix: SnapshotIndex, cq: ClusterQueue, pod_set: PodSet) -> list[dict[str, str]]:
    """Resource -> flavor for every requested covered resource, one listed flavor per
    resource group that lists them all, whose nodeTaints the pod set (with the
    flavor's own tolerations) tolerates and that matches its use of TAS (_uses_tas);
    in the queue's order, at most MAX_CHOICES."""
    requested = [r for r, v in pod_set.request.items() if v > 0]
    cover = ix.coverage.get(cq.name, {})
    tas = _uses_tas(ix, cq, pod_set)
    groups = sorted({cover[r] for r in requested if r in cover})
    per_group: list[list[dict[str, str]]] = []
    for gi in groups:
        group = cq.resource_groups[gi]
        mine = [r for r in requested if cover.get(r) == gi]
        options = []
        for fq in group.flavors:
            flavor = ix.snapshot.flavors.get(fq.flavor)
            if flavor is None or any(r not in fq.resources for r in mine):
                continue
            if not tolerated(flavor.node_taints, pod_set.tolerations + flavor.tolerations):
                continue
            if tas != bool(flavor.topology_name):
                continue   # Kueue's TAS match: every group here holds a resource the pod set requests
            options.append({r: fq.flavor for r in mine})
        if not options:
            return []
        per_group.append(options)
    choices = []
    for combo in itertools.islice(itertools.product(*per_group), MAX_CHOICES):
        merged: dict[str, str] = {}
        for part in combo:
            merged.update(part)
        choices.append(merged)
    return choices


def _uses_tas(ix: SnapshotIndex, cq: ClusterQueue, pod_set: PodSet) -> bool:
    """Kueue's rule (flavorassigner checkPodSetAndFlavorMatchForTAS): the pod set uses
    topology-aware scheduling if it asks for it, or if every flavor its queue lists has a
    Topology; it then takes only flavors with a Topology for what it requests, and a pod
    set that does not use it only flavors without one."""
    if pod_set.topology.mode is not None or pod_set.topology.slices:
        return True
    flavors = [ix.snapshot.flavors.get(fq.flavor) for g in cq.resource_groups for fq in g.flavors]
    return bool(flavors) and all(f is not None and f.topology_name for f in flavors)


class _Reclaim(NamedTuple):
    """What Kueue's reclaim removes for a workload, whatever the order of this plan's
    admissions: `victims` every order removes, `possible` some order removes, and an
    upper bound on each queue's usage once it has run (per `cq` name)."""

    victims: list[int]
    possible: list[int]
    usage: dict[str, dict[FR, int]]


def _reclaimed(ix: SnapshotIndex, after: PlanState, cq: ClusterQueue, w: Workload, frs: set[FR]) -> _Reclaim:
    """What Kueue's reclaim removes for `w` (indexes into after.runners, in its order),
    whatever the order of this plan's own admissions among themselves.

    Kueue orders candidates by the time it admitted them (a second's resolution,
    then UID). A plan does not say in what order, or in which seconds, its
    admissions happen: the real Kueue, on its own, admits a few a second over many
    seconds (tools/peer runs), while a plan applied at once shares one second. So
    those of one priority may come in any order, and which of them the walk
    removes, where it stops inside their run, depends on it: the verifier may not
    pick one. The walk keeps two bounds on each queue's usage at every step: the
    highest (only what every order removes is gone) and the lowest (everything some
    order removes is gone). A candidate some order removes is over quota at the
    highest; one every order removes is over quota at the lowest, less, inside an
    unordered run, every other member some order removes before it.

    Once the walk is done, a queue whose candidates are judged by its own quota
    alone (no cohort between it and the preemptor's) is, in every order, within
    its quota or bereft of all it could lose: its usage is at most its quota (or
    the lowest bound, if higher) as well as the highest bound.

    Only queues above their nominal quota of one of `frs` give candidates: usage only
    falls as the walk goes, so a queue within it now gives none at any point."""
    snap = ix.snapshot
    root = cohort_root(ix, cq)
    policy = cq.preemption.reclaim_within_cohort
    minimum = snap.policy.minimum_runtime_seconds
    over = []
    for name, mine in after.by_queue().items():
        other = snap.cluster_queues.get(name)
        if name == cq.name or other is None or other.inactive_reason is not None or cohort_root(ix, other) != root:
            continue
        used = after.usage.get(name, {})
        if any(used.get(fr, 0) > after.tree.quota(("cq", name), fr)[0] for fr in frs):
            over.append(mine)
    candidates = []
    for i in heapq.merge(*over, key=lambda i: (after.runners[i].workload.priority, -after.runners[i].since,
                                                after.runners[i].workload.uid, after.runners[i].workload.ref)):
        runner = after.runners[i]
        v = runner.workload
        if v.non_preemptible or (policy == "LowerPriority" and not v.priority < w.priority):
            continue
        if minimum > 0 and snap.now - runner.since < minimum:
            continue
        if not frs & set(after.runner_usage[i]):
            continue
        candidates.append(i)
    highest = {name: dict(per_fr) for name, per_fr in after.usage.items()}
    if not candidates:
        return _Reclaim([], [], highest)
    lowest = {name: dict(per_fr) for name, per_fr in after.usage.items()}
    victims: list[int] = []
    possible: list[int] = []
    for run in _unordered_runs(after, candidates):
        some = [i for i in run if _over_quota_to(ix, after.tree, highest, after.runners[i].cq, cq.name, frs)]
        if len(some) > 1:   # each of them may come after all the others
            for i in some:
                _take(after, lowest, i, -1)
            every = [i for i in some if _over_with_back(ix, after, lowest, i, cq.name, frs)]
            for i in some:
                _take(after, lowest, i, +1)
        else:
            every = [i for i in some if _over_quota_to(ix, after.tree, lowest, after.runners[i].cq, cq.name, frs)]
        for i in every:
            _take(after, highest, i, -1)
        for i in some:
            _take(after, lowest, i, -1)
        victims += every
        possible += some
    for name in {after.runners[i].cq for i in possible}:
        if not _between(after.tree, name, cq.name):
            for fr in frs:
                nominal = after.tree.quota(("cq", name), fr)[0]
                high = highest[name].get(fr, 0)
                highest[name][fr] = min(high, max(nominal, lowest[name].get(fr, 0)))
    return _Reclaim(victims, possible, highest)


def _unordered_runs(after: PlanState, candidates: list[int]) -> list[list[int]]:
    """The candidates in order, as runs: each admission of this plan with the others of
    its priority (Kueue's order among them is not known), every other one alone."""
    runs: list[list[int]] = []
    for i in candidates:
        runner = after.runners[i]
        mine = runner.since == float("inf")
        if mine and runs and after.runners[runs[-1][0]].since == float("inf") and \
                after.runners[runs[-1][0]].workload.priority == runner.workload.priority:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _take(after: PlanState, usage: dict[str, dict[FR, int]], i: int, sign: int) -> None:
    runner = after.runners[i]
    for fr, amount in after.runner_usage[i].items():
        usage[runner.cq][fr] = usage[runner.cq].get(fr, 0) + sign * amount


def _over_with_back(ix: SnapshotIndex, after: PlanState, usage: dict[str, dict[FR, int]], i: int, preemptor: str,
                    frs: set[FR]) -> bool:
    """_over_quota_to for runner `i` with its own usage given back to `usage` (it has
    not been removed when its turn comes)."""
    _take(after, usage, i, +1)
    try:
        return _over_quota_to(ix, after.tree, usage, after.runners[i].cq, preemptor, frs)
    finally:
        _take(after, usage, i, -1)


def _over_quota_to(ix: SnapshotIndex, tree: VerifierQuotaTree, usage: Mapping[str, Mapping[FR, int]], name: str,
                   preemptor: str, frs: set[FR]) -> bool:
    """Kueue's candidate validity: queue `name` uses more than its nominal quota of one of
    `frs`, and so does every cohort on its path up to (not including) the lowest cohort
    it shares with `preemptor` (a cohort's quota: its subtree's)."""
    if not any(usage.get(name, {}).get(fr, 0) > tree.quota(("cq", name), fr)[0] for fr in frs):
        return False
    below_shared = _between(tree, name, preemptor)
    if not below_shared:
        return True
    over = {node: False for node in below_shared}
    for fr in frs:
        subtree, guaranteed = tree.subtree_and_guaranteed(fr)
        used = tree.usage(fr, usage, guaranteed)
        for node in below_shared:
            over[node] = over[node] or used.get(node, 0) > subtree.get(node, 0)
    return all(over.values())


def _between(tree: VerifierQuotaTree, name: str, preemptor: str) -> list[Key]:
    """The cohorts on queue `name`'s path up to (not including) the lowest cohort it
    shares with queue `preemptor`."""
    ours = set(_path(tree, ("cq", preemptor)))
    above = _path(tree, ("cq", name))[1:]
    return above[:next((k for k, node in enumerate(above) if node in ours), len(above))]


def _path(tree: VerifierQuotaTree, key: Key) -> list[Key]:
    """`key`, its parent, ..., its root."""
    out = [key]
    while (up := tree.parent.get(out[-1])) is not None:
        out.append(up)
    return out


def _available(tree: VerifierQuotaTree, fr: FR, usage: Mapping[str, Mapping[FR, int]], cq: str) -> int:
    """Kueue's available() for queue `cq` (pkg/cache/scheduler resource_node.go), clipped at 0."""
    subtree, guaranteed = tree.subtree_and_guaranteed(fr)
    used = tree.usage(fr, usage, guaranteed)

    def available(key: Key) -> int:
        parent = tree.parent.get(key)
        if parent is None:
            return subtree[key] - used[key]
        from_parent = available(parent)
        borrowing = tree.quota(key, fr)[1]
        if borrowing is not None:
            stored = subtree[key] - guaranteed[key]
            used_in_parent = max(0, used[key] - guaranteed[key])
            from_parent = min(stored - used_in_parent + borrowing, from_parent)
        return max(0, guaranteed[key] - used[key]) + from_parent

    return max(0, available(("cq", cq)))


def _fits(ix: SnapshotIndex, after: PlanState, cq: ClusterQueue, pod_set: PodSet, count: int,
          flavors: list[ResourceFlavor], need: Mapping[FR, int], victims: list[int],
          usage_after: Mapping[str, Mapping[FR, int]] | None = None) -> bool:
    """Quota and nodes, with the runners `victims` gone (quota: `usage_after` when given)."""
    usage: Mapping[str, Mapping[FR, int]] = after.usage
    if usage_after is not None:
        usage = usage_after
    elif victims:
        changed = dict(after.usage)
        for i in victims:
            name = after.runners[i].cq
            if changed[name] is after.usage[name]:
                changed[name] = dict(after.usage[name])
            for fr, amount in after.runner_usage[i].items():
                changed[name][fr] = changed[name].get(fr, 0) - amount
        usage = changed
    if any(_available(after.tree, fr, usage, cq.name) < v for fr, v in need.items()):
        return False
    fitting = after.pods_fitting(pod_set, flavors)
    levels = next((lv for f in flavors if (lv := ix.flavor_levels(f)) is not None), None) or ()
    shape = (tuple(f.name for f in flavors), pod_set.request, pod_set.tolerations,
             tuple(sorted(pod_set.node_selector.items())))
    by_path = after.capacity(shape, fitting, levels)
    if victims:
        # What the victims leave free, node by node, changes only the pods their nodes hold.
        gained: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for i in victims:
            for node, used in after.runners[i].on_nodes().items():
                for resource, amount in used.items():
                    gained[node][resource] += amount
        by_path = dict(by_path)
        free = after.free()
        for node, more in gained.items():
            if node not in fitting:
                continue
            have = dict(free[node])
            for resource, amount in more.items():
                have[resource] = have.get(resource, 0) + amount
            delta = pods_in(have, pod_set) - fitting[node]
            if delta:
                path = after.path(node, levels)
                by_path[path] = by_path.get(path, 0) + delta
    return _placeable(by_path, pod_set, count, levels or None)


def _by_path(after: "PlanState", fitting: Mapping[str, int], levels: tuple[str, ...]) -> dict[tuple[str | None, ...], int]:
    """Pods per full domain path (each node's labels at `levels`, coarse to fine)."""
    capacity: dict[tuple[str | None, ...], int] = defaultdict(int)
    for name, pods in fitting.items():
        if pods > 0:
            capacity[after.path(name, levels)] += pods
    return capacity


def _placeable(by_path: Mapping[tuple[str | None, ...], int], pod_set: PodSet, count: int,
               levels: tuple[str, ...] | None) -> bool:
    """Can `count` pods go on these nodes as the pod set's topology request demands?
    Pods per domain are counted bottom up: whole innermost slices per domain of their
    level, then whole outer slices, then one domain of the required level (or all)."""
    request = pod_set.topology
    layers = [(layer.level, layer.size) for layer in request.slices]
    required = request.level if request.mode == "required" and request.level else None
    wanted = [lv for lv, _ in layers] + ([required] if required else [])
    if not wanted:
        return sum(by_path.values()) >= count
    if levels is None or any(lv not in levels for lv in wanted):
        return False  # the flavor's topology cannot express the request
    capacity: Mapping[tuple[str | None, ...], int] = by_path
    for level, size in reversed(layers):
        depth = levels.index(level) + 1
        grouped: dict[tuple[str | None, ...], int] = defaultdict(int)
        for domain, pods in capacity.items():
            grouped[domain[:depth]] += pods
        capacity = {d: pods // size * size for d, pods in grouped.items()}
    if required is None:
        return sum(capacity.values()) >= count
    depth = levels.index(required) + 1
    totals: dict[tuple[str | None, ...], int] = defaultdict(int)
    for domain, pods in capacity.items():
        totals[domain[:depth]] += pods
    return any(pods >= count for pods in totals.values())
