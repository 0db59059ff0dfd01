"""The workload kinds Stowplan plans, one adapter module each (see planner.kinds.base).

A new kind is one module with an `Adapter` subclass, added to `ADAPTERS` below, plus
its tests. Order matters where a pod could belong to more than one kind (a JobSet's
pod also names its child Job): the more specific kind comes first. Everything else
that carries Kueue's queue-name label is counted and reported as not planned.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from models import ObjectRef
from planner.kinds.base import SCHEDULING_FIELDS, Adapter, Attempt, Lookup, PodSetSource
from planner.kinds.job import JobAdapter
from planner.kinds.jobset import JobSetAdapter
from planner.kinds.leaderworkerset import LeaderWorkerSetAdapter
from planner.kinds.mpijob import MPIJobAdapter
from planner.kinds.pods import POD_ADAPTERS
from planner.kinds.pytorchjob import PyTorchJobAdapter
from planner.kinds.ray import RayClusterAdapter, RayJobAdapter
from planner.kinds.trainjob import TrainJobAdapter

# more specific first: a TrainJob's pods name its JobSet, an MPIJob launcher's its Job, a
# RayJob's submitter its Job
ADAPTERS: tuple[Adapter, ...] = (JobSetAdapter(), TrainJobAdapter(), PyTorchJobAdapter(), MPIJobAdapter(),
                                 RayJobAdapter(), RayClusterAdapter(), LeaderWorkerSetAdapter(),
                                 JobAdapter())

# Plain pods and pod groups (Kueue's pod integration) are read from the pods every
# snapshot has (planner.snapshot.reader.read_pod_workloads), so they are not among the
# kinds listed and read as objects; they are adapters for apply and for their pods.
_BY_KIND: dict[str, Adapter] = {a.kind: a for a in ADAPTERS + POD_ADAPTERS}
assert len(_BY_KIND) == len(ADAPTERS) + len(POD_ADAPTERS), "two adapters for one kind"


# In-house kinds of the policy in force (spec.customKinds, planner.kinds.custom). Process-wide,
# because the policy is read with the snapshot and every step after it (the live read's
# listing, apply's writes, a pod's owner) asks this registry by kind: each snapshot read
# sets them afresh from its own policy (`use_custom`), none if it declares none.
_CUSTOM: tuple[Adapter, ...] = ()
_CUSTOM_BY_KIND: dict[str, Adapter] = {}


def use_custom(adapters: Sequence[Adapter]) -> None:
    """Make `adapters` the custom kinds in force (replacing any before). Their kind names are
    checked unique against the built-in ones when the policy is parsed."""
    global _CUSTOM, _CUSTOM_BY_KIND, _CUSTOM_CHECKS
    _CUSTOM = tuple(adapters)
    _CUSTOM_BY_KIND = {a.kind: a for a in _CUSTOM if a.kind not in _BY_KIND}
    _CUSTOM_CHECKS = tuple((a, a.owner_label) for a in _CUSTOM)


def custom_kinds() -> tuple[Adapter, ...]:
    """The custom kinds in force."""
    return _CUSTOM


def adapters() -> tuple[Adapter, ...]:
    """Every kind read as objects: the custom kinds in force, then the built-in ones."""
    return _CUSTOM + ADAPTERS


# Kinds the snapshot reader reads besides the workloads (planner.snapshot.reader.KINDS)
_READ_KINDS = {"Node", "Pod", "Namespace", "PriorityClass", "ConfigMap", "ResourceFlavor", "ClusterQueue", "Cohort",
               "LocalQueue", "Topology", "WorkloadPriorityClass", "PlannerPolicy", "Workload"}


def reserved_kinds() -> set[str]:
    """Kind names a custom kind may not take: every kind Stowplan already plans or reads."""
    return set(_BY_KIND) | needed_kinds() | _READ_KINDS


def by_kind(kind: object) -> Adapter | None:
    """The adapter of a planned kind (kind names are unique among them), else None."""
    if not isinstance(kind, str):
        return None
    return _BY_KIND.get(kind) or _CUSTOM_BY_KIND.get(kind)


def needed_kinds() -> set[str]:
    """Kinds read beside the workloads (a TrainJob's runtimes): what an apply must be able to look up."""
    return {kind for a in ADAPTERS for _, _, kind, _, _ in a.needs}


def needing(kind: object) -> Adapter | None:
    """The adapter that reads objects of `kind` beside its own (a TrainJob's runtimes), else None."""
    return next((a for a in ADAPTERS if any(k == kind for _, _, k, _, _ in a.needs)), None)


def pod_owners(namespace: str, metadata: Mapping[str, Any], labels: Mapping[str, Any]) -> Iterator[tuple[ObjectRef, str]]:
    """Every (workload, pod set) a pod may belong to, most specific kind first (lazily: a
    reader looking at millions of pods stops at the first owner it knows)."""
    for adapter, label in _CUSTOM_CHECKS + _OWNER_CHECKS:
        if label and label not in labels:
            continue
        owner = adapter.pod_owner(namespace, metadata, labels)
        if owner is not None:
            yield owner


_OWNER_CHECKS = tuple((a, a.owner_label) for a in ADAPTERS + POD_ADAPTERS)
_CUSTOM_CHECKS: tuple[tuple[Adapter, str], ...] = ()


__all__ = ["ADAPTERS", "Adapter", "Attempt", "Lookup", "PodSetSource", "SCHEDULING_FIELDS", "adapters", "by_kind",
           "custom_kinds", "needed_kinds", "needing", "pod_owners", "reserved_kinds", "use_custom"]
