"""Kueue's preemption search, as greedy runs it, asked about the cluster a plan leaves.

The plan's pending reasons and `explain` ask "could preemption make room for this
workload, and by evicting whom?"; greedy (planner.greedy) answers the same question
for every head it nominates. Both ask one search, `Rules.nominate` (Kueue's flavor
assignment, then getTargets: classical or fair-sharing preemption, minimal victims),
so an explanation never says that preempting would make room where greedy's search
finds no targets, nor names other victims than it would. (The preemption package's
front door for callers outside greedy.)

The state is the one the plan leaves: its evictions gone, its admissions running
(admitted now, so newest first among candidates), moved workloads at their new place.
Asking restores the state: a search releases victims only on copies or puts them back.
"""

from __future__ import annotations

from dataclasses import replace

from models import Admission, ClusterQueue, Decisions, Snapshot, Workload, WorkloadState
from planner.kueue import fairsharing
from planner.kueue.assigner import Rules
from planner.kueue.capacity import quota_usage_of
from planner.kueue.fit import fits_fixed, place_fixed
from planner.kueue.flavors import FIT
from planner.kueue.preemption import Target
from planner.kueue.registry import Admitted, Registry
from planner.kueue.semantics import evictable
from planner.kueue.state import ClusterState


class AfterPlan:
    """Greedy's Rules over the state `decisions` leave in `snapshot` (`state`, if given,
    must be ClusterState.after(snapshot, decisions): callers that hold it share it)."""

    def __init__(self, snapshot: Snapshot, decisions: Decisions, state: ClusterState | None = None):
        self.snapshot = snapshot
        self.state = state if state is not None else ClusterState.after(snapshot, decisions)
        self._empty: ClusterState | None = None
        registry = Registry()
        tree = self.state.quota
        gone = {e.workload for e in decisions.evictions} | {m.workload for m in decisions.migrations}
        for w in sorted(snapshot.workloads, key=lambda w: w.ref):
            if w.state is WorkloadState.RUNNING and w.cluster_queue is not None and w.ref not in gone \
                    and f"cq:{w.cluster_queue}" in tree.parent:
                registry.add(Admitted(w, w.cluster_queue, quota_usage_of(w), evictable(w, snapshot), False,
                                      w.admitted_at if w.admitted_at is not None else snapshot.now))
        by_ref = {w.ref: w for w in snapshot.workloads}
        placed = list(decisions.admissions) + [Admission(m.workload, m.cluster_queue, m.to) for m in decisions.migrations]
        minimum = snapshot.policy.minimum_runtime_seconds
        for a in sorted(placed, key=lambda a: a.workload):
            placed_w = by_ref.get(a.workload)
            if placed_w is None or f"cq:{a.cluster_queue}" not in tree.parent:
                continue
            view = replace(placed_w, state=WorkloadState.RUNNING, assignment=a.pod_sets, admitted_at=snapshot.now)
            registry.add(Admitted(view, a.cluster_queue, quota_usage_of(view),
                                  not placed_w.non_preemptible and minimum <= 0, True, snapshot.now))
        fair = fairsharing.from_snapshot(snapshot)
        self.rules = Rules(snapshot, self.state, registry, place_fixed, fits_fixed, self.empty,
                           fair=fairsharing.Shares(tree, fair) if fair is not None else None)

    def empty(self) -> ClusterState:
        """The cluster with nothing admitted (Kueue's SimulateEmpty)."""
        if self._empty is None:
            self._empty = ClusterState(self.snapshot, evicted=[w.ref for w in self.snapshot.workloads
                                                               if w.state is WorkloadState.RUNNING])
        return self._empty

    def targets(self, w: Workload) -> list[Target] | None:
        """The victims greedy's search would evict to admit `w` now (elastic: at least its
        minimum); [] when it fits without preemption; None when no victims its
        ClusterQueue's policies allow make room."""
        cq = self.snapshot.cluster_queues[w.queue_name]
        assignment, targets = self.rules.nominate(w, cq, None, 0)
        if targets:
            return targets
        return [] if assignment.mode == FIT else None

    def candidates(self, w: Workload) -> list[Admitted]:
        """The candidates greedy's search walks for `w`, in Kueue's order (those its
        policies allow, using what `w` lacks); [] when `w` needs no preemption or
        preemption cannot help (its request is above what the queue may ever take)."""
        cq: ClusterQueue = self.snapshot.cluster_queues[w.queue_name]
        return self.rules.candidates(w, cq)
