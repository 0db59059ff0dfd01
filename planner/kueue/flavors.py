"""What Kueue's flavor assigner works with: which flavors a pod set may take, and the
assignment it leaves.

Flavor matching (`flavor_mismatch`: flavorassigner's checkFlavorForPodSets: the TAS
match, taints and tolerations, the node selector against the flavor's labels); the
assigner's modes (Kueue's FlavorAssignmentMode and its finer preemption mode); a pod
set's and a workload's assignment (`Assigned`, `Assignment`); and the node placement
the caller supplies (`Place`, `Fits`). The assigner itself is planner.kueue.assigner;
the preemptor (planner.kueue.preemption) reads these too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from models import ClusterQueue, FlavorResource as FR, PodSet, ResourceFlavor, Snapshot, Workload
from models.objects import tolerated
from models.resources import PODS
from planner.kueue.semantics import FlavorOption
from planner.kueue.topology import levels_for

if TYPE_CHECKING:
    from planner.kueue.state import PodSetChoice, ClusterState

# Kueue's FlavorAssignmentMode, worst first.
NO_FIT, PREEMPT, FIT = 0, 1, 2
# The flavor assigner's finer preemption mode (flavorassigner.go preemptionMode), worst first.
G_NO_FIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = 0, 1, 2, 3, 4

# Node placement of every pod set with fixed flavors and counts, jointly (Kueue's TAS
# assignment for a workload): choices, or (pod set index, why not); and whether it would place them.
Place = Callable[["ClusterState", ClusterQueue, Workload, Sequence[tuple[PodSet, FlavorOption, int]]],
                 "list[PodSetChoice] | tuple[int, str]"]
Fits = Callable[["ClusterState", ClusterQueue, Workload, Sequence[tuple[PodSet, FlavorOption, int]]], bool]


def resource_group(cq: ClusterQueue, resource: str) -> int | None:
    """The queue's resource group covering `resource` (the first), or None."""
    return next((i for i, g in enumerate(cq.resource_groups) if resource in g.covered_resources), None)


# ---------------------------------------------------------------- flavor matching

def explicit_tas(pod_set: PodSet) -> bool:
    """IsExplicitlyRequestingTAS: the pod set carries a Kueue TAS annotation."""
    t = pod_set.topology
    return t.mode in ("required", "preferred", "unconstrained") or bool(t.slices)


def has_topology(snapshot: Snapshot, flavor: ResourceFlavor) -> bool:
    return bool(flavor.topology_name) and flavor.topology_name in snapshot.topologies


def tas_only(snapshot: Snapshot, cq: ClusterQueue) -> bool:
    """Every flavor of every resource group of the queue has a Topology (isTASOnly)."""
    return all(fq.flavor in snapshot.flavors and has_topology(snapshot, snapshot.flavors[fq.flavor])
               for rg in cq.resource_groups for fq in rg.flavors)


def _tas_mismatch(snapshot: Snapshot, cq: ClusterQueue, pod_set: PodSet, flavor: ResourceFlavor,
                  covered: Sequence[str]) -> str | None:
    """checkPodSetAndFlavorMatchForTAS."""
    if explicit_tas(pod_set):
        if flavor.topology_name is None:
            if not any(pod_set.request.get(r) > 0 for r in covered if r != PODS):
                return None   # a quota-only flavor beside the TAS one
            return f"flavor {flavor.name} does not support TopologyAwareScheduling"
        if not has_topology(snapshot, flavor):
            return f"flavor {flavor.name}: its Topology {flavor.topology_name} does not exist"
        levels = levels_for(snapshot, [flavor])
        t = pod_set.topology
        wanted = [t.level] if t.mode in ("required", "preferred") else []
        wanted += [t.slices[0].level] if t.slices else []
        if any(level not in levels for level in wanted):
            return f"flavor {flavor.name} does not contain the requested level"
        return None
    if flavor.topology_name is not None and not tas_only(snapshot, cq):
        return f"flavor {flavor.name} supports only TopologyAwareScheduling"
    return None


def flavor_mismatch(snapshot: Snapshot, cq: ClusterQueue, group: int, flavor_name: str,
                    pod_set: PodSet) -> str | None:
    """checkFlavorForPodSets for one pod set: why it cannot take this flavor, or None.

    TAS match, the flavor's nodeTaints against the pod set's tolerations plus the
    flavor's own, and the pod set's nodeSelector on the label keys the group's flavors
    use (Kueue's flavorSelector) against the flavor's nodeLabels.
    """
    flavor = snapshot.flavors.get(flavor_name)
    if flavor is None:
        return f"flavor {flavor_name} not found"
    rg = cq.resource_groups[group]
    tas = _tas_mismatch(snapshot, cq, pod_set, flavor, rg.covered_resources)
    if tas is not None:
        return tas
    if not tolerated(flavor.node_taints, pod_set.tolerations + flavor.tolerations):
        return f"the pod set does not tolerate the taints of flavor {flavor_name}"
    keys = {k for fq in rg.flavors if fq.flavor in snapshot.flavors for k in snapshot.flavors[fq.flavor].node_labels}
    if any(k in keys and flavor.node_labels.get(k) != v for k, v in pod_set.node_selector.items()):
        return f"flavor {flavor_name} doesn't match the pod set's node selector"
    return None

# ---------------------------------------------------------------- the assignment

@dataclass(eq=False)
class Assigned:
    """One pod set's flavors as the flavor assigner leaves them (PodSetAssignment)."""

    index: int
    pod_set: PodSet
    count: int
    flavors: dict[str, str] = field(default_factory=dict)     # resource -> flavor
    modes: dict[str, int] = field(default_factory=dict)       # resource -> FIT | PREEMPT | NO_FIT
    reasons: list[str] = field(default_factory=list)
    failed: bool = False                                       # no flavor at all
    option: FlavorOption | None = None

    def mode(self) -> int:
        if self.failed or not self.flavors:
            return NO_FIT if (self.failed or self.reasons) else FIT
        if not self.reasons:
            return FIT
        return min(self.modes.values())

    def set_modes(self, mode: int) -> None:
        for r in self.modes:
            self.modes[r] = mode


@dataclass(eq=False)
class Assignment:
    """A workload's flavor assignment (flavorassigner.Assignment)."""

    pod_sets: list[Assigned]
    borrowing: int = 0
    usage: dict[FR, int] = field(default_factory=dict)
    last: dict[tuple[int, str], int] = field(default_factory=dict)   # LastTriedFlavorIdx
    generation: int = 0
    mode: int = NO_FIT
    choices: list["PodSetChoice"] | None = None     # where it goes: Fit, or the preemptor once its targets are gone
    reason: str = ""                           # the first reason it does not fit, for people
    # Oracle questions not asked yet: (flavor/resource, quantity). Where the group had one
    # flavor to try, the oracle's answer cannot change the flavor, only how high the
    # workload borrows, which orders it among the heads only when it preempts (Rules.resolve).
    pending: list[tuple[FR, int]] = field(default_factory=list)

    def need_preemption(self) -> set[FR]:
        """flavorResourcesNeedPreemption: the flavor/resources assigned in Preempt mode."""
        return {(f, r) for a in self.pod_sets for r, f in a.flavors.items() if a.modes.get(r) == PREEMPT}

    def pending_flavors(self) -> bool:
        """PendingFlavors: the search stopped before the last flavor of some group."""
        return any(v != -1 for v in self.last.values())

    def counts(self) -> list[int]:
        return [a.count for a in self.pod_sets]

    def picks(self) -> list[tuple[PodSet, FlavorOption, int]]:
        """(pod set, its flavors, count) of every pod set, for an assignment with flavors."""
        out = []
        for p in self.pod_sets:
            assert p.option is not None
            out.append((p.pod_set, p.option, p.count))
        return out
