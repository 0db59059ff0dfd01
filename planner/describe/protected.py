"""Running work a waiting workload could use the room of but may not evict, and why.

Which running workloads Kueue's preemption would evict is greedy's search's answer
(planner.kueue.after_plan); this module answers the question beside it that only an
explanation asks: lower-priority work in the workload's ClusterQueue or cohort tree,
using a flavor/resource it could charge or sitting on a node it could use, whatever
the policies say, and for each one the reason it is protected (non-preemptible, the
minimum runtime, the policy value, a queue not borrowing, thrash protection).
Pure: no I/O; deterministic.
"""

from __future__ import annotations

import numpy as np

from models import ClusterQueue, FlavorResource, ObjectRef, Workload, WorkloadState
from planner.kueue.capacity import cluster_queue_usage, quota_usage_of
from planner.kueue.semantics import borrowing_queues, evictable, preemption_reason
from planner.kueue.state import ClusterState

MAX_LOWER = 256   # lower-priority running workloads listed per queue and in all: bounds one question's work


class Protected:
    """Lower-priority running work per waiting workload, over the state a plan leaves
    (`gone`: the workloads the plan evicts or moves, already released from `state`)."""

    def __init__(self, state: ClusterState, gone: set[ObjectRef], limit: int = MAX_LOWER):
        snap = state.snapshot
        self.state, self.limit = state, limit
        self.tree = state.quota
        self.before = borrowing_queues(snap, self.tree, cluster_queue_usage(snap))
        self.by_queue: dict[str, list[Workload]] = {}
        for w in sorted(snap.workloads, key=lambda w: w.ref):
            if w.state is WorkloadState.RUNNING and w.cluster_queue is not None and w.ref not in gone:
                self.by_queue.setdefault(w.cluster_queue, []).append(w)
        for members in self.by_queue.values():
            members.sort(key=_order)
        self.root = {name: self.tree.root_of(f"cq:{name}") for name in snap.cluster_queues
                     if f"cq:{name}" in self.tree.parent}
        self._needs: dict[object, tuple[set[FlavorResource], np.ndarray]] = {}
        self._held: dict[ObjectRef, tuple[frozenset[FlavorResource], np.ndarray]] = {}

    def lower(self, w: Workload) -> list[Workload]:
        """Running work of lower base priority in `w`'s queue or cohort tree that it could
        use the room of, in Kueue's order (other queues first), at most `limit`."""
        cq = self.state.snapshot.cluster_queues[w.queue_name]
        needs, rows = self._needs_of(cq, w)
        root = self.root.get(cq.name)
        queues = [n for n in self.by_queue
                  if n == cq.name or (root is not None and root != f"cq:{cq.name}" and self.root.get(n) == root)]
        out: list[Workload] = []
        for name in sorted(queues):
            taken = 0
            for v in self.by_queue[name]:
                if v.priority >= w.priority or taken >= self.limit:
                    break
                if self._uses(v, needs, rows):
                    out.append(v)
                    taken += 1
        out.sort(key=lambda v: (v.cluster_queue == cq.name,) + _order(v))
        return out[:self.limit]

    def why_not(self, w: Workload, v: Workload) -> str:
        """Why `w` may not evict `v` (not among greedy's candidates for it), in a few words."""
        snap = self.state.snapshot
        if v.non_preemptible:
            return "some of it is non-preemptible"
        if not evictable(v, snap):
            return "some of it has run less than the minimum runtime"
        cq = snap.cluster_queues[w.queue_name]
        policy = cq.preemption
        borrowing = self.before & borrowing_queues(snap, self.tree, self.state.cq_usage)
        if preemption_reason(snap, w, v, self.tree, borrowing) is not None:
            # The policies allow it, yet greedy's search (Kueue's) does not take it: it
            # takes only what uses a flavor/resource needing preemption, from queues above
            # their nominal quota in it, and only while taking them can make room.
            return "Kueue's preemption does not pick it for this workload"
        if v.cluster_queue == cq.name:
            return f"withinClusterQueue is {policy.within_cluster_queue}"
        if policy.reclaim_within_cohort == "Never" and policy.borrow_within_cohort == "Never":
            return "reclaimWithinCohort is Never"
        if policy.borrow_within_cohort == "Never" and v.cluster_queue not in borrowing:
            return f"ClusterQueue {v.cluster_queue} is not borrowing"
        return f"the preemption policy of ClusterQueue {cq.name} does not allow it"

    def _needs_of(self, cq: ClusterQueue, w: Workload) -> tuple[set[FlavorResource], np.ndarray]:
        """Flavor/resources `w` could charge and the node rows it could use, over all flavor
        options (kept per shape of request)."""
        shape = (cq.name, tuple((ps.request, ps.tolerations, tuple(sorted(ps.node_selector.items())))
                                for ps in w.pod_sets))
        if shape not in self._needs:
            frs: set[FlavorResource] = set()
            rows = np.zeros(len(self.state.node_objs), dtype=bool)
            for ps in w.pod_sets:
                options = self.state.options(cq, ps)
                if isinstance(options, str):
                    continue
                for option in options:
                    frs.update((f, r) for r, f in option.by_resource.items() if ps.request.get(r) > 0)
                    rows[self.state.eligible(option, ps).rows] = True
            self._needs[shape] = (frs, rows)
        return self._needs[shape]

    def _uses(self, v: Workload, needs: set[FlavorResource], rows: np.ndarray) -> bool:
        """Does `v` charge one of `needs` or run on one of `rows`? (What `v` holds never
        changes: read once per workload, as every waiting workload asks.)"""
        held = self._held.get(v.ref)
        if held is None:
            frs = frozenset(fr for fr, amount in quota_usage_of(v).items() if amount > 0)
            nodes = {n for psa in v.assignment for n in psa.pods_per_node()}
            held = self._held[v.ref] = (frs, np.array(sorted(self.state.row[n] for n in nodes if n in self.state.row),
                                                      dtype=np.int64))
        frs, at = held
        return not frs.isdisjoint(needs) or bool(rows[at].any())


def _order(w: Workload) -> tuple[int, float, bool, str, str]:
    """Kueue's candidate order within a queue: lower priority, newest admitted, UID
    (an elastic Job's releasable pods before the Job: a shrink loses less)."""
    return (w.priority, -(w.admitted_at or 0.0), w.part_of is None, w.uid, str(w.ref))
