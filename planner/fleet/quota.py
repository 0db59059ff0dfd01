"""The MultiKueue manager's quota, by Kueue's own rules (planner.kueue).

The manager runs Kueue like any cluster: its ClusterQueue reserves quota for a workload
before MultiKueue dispatches it, per flavor and resource, flavor by flavor in the
ResourceGroup's order with the queue's flavorFungibility, borrowing from its cohort only as
far as the cohort tree allows (borrowing and lending limits, nested cohorts). So this is
planner.kueue.assigner's flavor assigner (Kueue's flavorassigner, with planner.kueue.quota's
arithmetic: the same greedy uses) over a ClusterState of the manager, with two differences that MultiKueue
makes:
- the manager's flavors carry no nodes, and topology is the worker's: a pod set is given
  flavors by quota alone (its TAS request is the worker's to meet);
- only a Fit reserves quota here: the planner never preempts on the manager, so a workload
  that would need preemption there is not dispatched.
What holds the manager's quota is read from the workers (a workload a worker runs holds it,
with the flavors of the manager's own admission where the manager's snapshot has one, else
with those the manager's Kueue would have given it, in the order they were admitted).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from models import (
    ClusterQueue, ObjectRef, PodSet, PodSetAssignment, Snapshot, TopologyRequest, Workload, WorkloadState,
)
from planner.kueue.assigner import Rules
from planner.kueue.capacity import quota_usage_of
from planner.kueue.flavors import FIT
from planner.kueue.registry import Registry
from planner.kueue.semantics import FlavorOption, quota_usage
from planner.kueue.state import ClusterState, PodSetChoice, admission_blocker

ManagerFlavors = dict[ObjectRef, tuple[PodSetAssignment, ...]]   # the manager's admission: flavors and counts

TOPOLOGY_REASON = "topology level "   # the reader's reason when no flavor of the queue has a level


def manager_only(reason: str | None) -> bool:
    """A reason the manager's reader gives that the worker decides instead: the manager's
    flavors carry no nodes and no Topology, so topology levels are the worker's to check."""
    return reason is not None and reason.startswith(TOPOLOGY_REASON)


def _place(state: ClusterState, cq: ClusterQueue, workload: Workload,
           picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> list[PodSetChoice]:
    """The manager's flavors carry no nodes: a pod set with its flavors is placed on none."""
    return [PodSetChoice(ps, option, count, {}, quota_usage(ps, option, count)) for ps, option, count in picks]


def _fits(state: ClusterState, cq: ClusterQueue, workload: Workload,
          picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> bool:
    return True


def quota_view(workload: Workload) -> Workload:
    """The workload as the manager's flavor assigner sees it: no topology request (the
    manager's flavors have no Topology; each worker places the pods)."""
    if all(ps.topology == TopologyRequest() for ps in workload.pod_sets):
        return workload
    return replace(workload, pod_sets=tuple(replace(ps, topology=TopologyRequest()) for ps in workload.pod_sets))


class ManagerQuota:
    """The manager's ClusterQueues and cohorts, their usage, and Kueue's flavor assigner over them."""

    def __init__(self, manager: Snapshot):
        self.manager = manager
        # The manager's own copies hold nothing here: what holds quota is charged by hold().
        self.state = ClusterState(manager, evicted=[w.ref for w in manager.workloads])
        self._empty: ClusterState | None = None
        self.rules = Rules(manager, self.state, Registry(), _place, _fits, self.empty)
        self.held: ManagerFlavors = {}
        self._views: dict[ObjectRef, tuple[Workload, Workload]] = {}

    def empty(self) -> ClusterState:
        if self._empty is None:
            self._empty = ClusterState(self.manager, evicted=[w.ref for w in self.manager.workloads])
        return self._empty

    def blocker(self, workload: Workload) -> str | None:
        """Why the manager can never reserve quota for `workload`, or None."""
        return admission_blocker(self.manager, self.view(workload))

    def assign(self, workload: Workload, counts: Mapping[str, int] | None = None) -> tuple[PodSetAssignment, ...] | str:
        """The flavors the manager's Kueue gives `workload` (`counts` pods per pod set, all
        by default) as its usage stands, when they fit without preemption; else why not."""
        blocker = self.blocker(workload)
        if blocker is not None:
            return blocker
        view = self.view(workload)
        cq = self.manager.cluster_queues[str(workload.cluster_queue)]
        wanted = tuple(counts.get(ps.name, 0) if counts is not None else ps.count for ps in view.pod_sets)
        result = self.rules.assign(view, cq, wanted)
        if result.mode != FIT:
            return result.reason or f"no quota left in the manager's ClusterQueue {cq.name}"
        return tuple(PodSetAssignment(a.pod_set.name, a.count, dict(sorted(a.flavors.items())), (), ())
                     for a in result.pod_sets)

    def view(self, workload: Workload) -> Workload:
        """`quota_view`, without the reasons the worker decides (kept per workload, so the
        assigner's caches by object hold)."""
        found = self._views.get(workload.ref)
        if found is None or found[0] is not workload:
            view = quota_view(workload)
            if manager_only(view.blocked_reason):
                view = replace(view, blocked_reason=None)
            found = self._views[workload.ref] = (workload, view)
        return found[1]

    def hold(self, workload: Workload, pod_sets: Sequence[PodSetAssignment]) -> None:
        """Reserve the manager's quota for `workload` with these flavors and counts."""
        self.held[workload.ref] = tuple(pod_sets)
        cq = str(workload.cluster_queue)
        for fr, amount in quota_usage_of(replace(workload, assignment=tuple(pod_sets))).items():
            if amount:
                self.state.charge(cq, fr, amount)


def dispatched_quota(manager: Snapshot, workers: Sequence[tuple[str, Snapshot]]) -> ManagerQuota:
    """The manager's quota with what the workers run of the manager's workloads held, in the
    order they were admitted (where the manager's snapshot has its own admission of one, with
    its flavors). A workload the manager's Kueue could give no flavors at all holds nothing."""
    quota = ManagerQuota(manager)
    mine = {w.ref: w for w in manager.workloads}
    running = [(w, mine[w.ref]) for _, snap in workers for w in snap.workloads
               if w.state is WorkloadState.RUNNING and w.ref in mine and mine[w.ref].cluster_queue]
    running.sort(key=lambda pair: (pair[0].admitted_at if pair[0].admitted_at is not None else manager.now,
                                   -pair[1].priority, pair[1].queued_at, pair[1].uid, pair[1].ref))
    for on_worker, copy in running:
        if copy.ref in quota.held:
            continue        # run by two workers: held once
        if copy.state is WorkloadState.RUNNING and copy.assignment:
            quota.hold(copy, copy.assignment)   # the manager's own admission says which flavors
            continue
        counts = {ps.name: ps.count for ps in on_worker.assignment}
        found = quota.assign(copy, counts)
        flavors = _any_flavors(quota, copy, counts) if isinstance(found, str) else found
        if flavors is not None:
            quota.hold(copy, flavors)
    return quota


def _any_flavors(quota: ManagerQuota, workload: Workload, counts: Mapping[str, int]) -> tuple[PodSetAssignment, ...] | None:
    """Flavors for a workload already running beyond what the manager's quota has room for
    (held before the quota shrank, say): the first flavor option of each pod set."""
    cq = quota.manager.cluster_queues.get(str(workload.cluster_queue))
    if cq is None:
        return None
    out = []
    for ps in quota.view(workload).pod_sets:
        options = quota.state.options(cq, ps)
        if isinstance(options, str) or not options:
            return None
        out.append(PodSetAssignment(ps.name, counts.get(ps.name, 0), dict(sorted(options[0].by_resource.items())), (), ()))
    return tuple(out)
