"""The planner's answer: what starts where, what stops, what waits and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

# its home is models.objects (a Node's pin); re-exported where it always was
from models.objects import HOSTNAME_LABEL as HOSTNAME_LABEL
from models.objects import ObjectRef, PodSetAssignment
from models.provisioning import ProvisioningSection


@dataclass(frozen=True)
class Admission:
    workload: ObjectRef
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    # The MultiKueue worker cluster the workload runs on (planner.fleet); None in one cluster.
    cluster: str | None = None


@dataclass(frozen=True)
class Eviction:
    workload: ObjectRef
    reason: str                              # Preempted (same queue) | Reclaimed (cohort) | PodsReadyTimeout | Deactivated
    for_: tuple[ObjectRef, ...] = ()
    cost: float = 0.0
    # PodsReadyTimeout: the requeue this eviction records (count after it, not planned before `requeue_at`);
    # Deactivated: `requeue_count` is the count that exceeded the limit. `message` says why, for people.
    requeue_count: int | None = None
    requeue_at: float | None = None
    message: str = ""


@dataclass(frozen=True)
class Domain:
    """One topology domain: its level (a node label) and its values, coarse to fine."""

    levels: tuple[str, ...]
    values: tuple[str, ...]


@dataclass(frozen=True)
class Migration:
    """A running workload moved by defragmentation: evicted from `from_` and admitted
    at `to` in the same plan (it keeps its quota), to free `frees` for `for_`."""

    workload: ObjectRef
    cluster_queue: str
    from_: tuple[PodSetAssignment, ...]
    to: tuple[PodSetAssignment, ...]
    frees: tuple[Domain, ...] = ()
    for_: tuple[ObjectRef, ...] = ()
    cost: float = 0.0


@dataclass(frozen=True)
class Resize:
    """A running elastic Job grown or shrunk in place (planner.cycle.elastic), as Kueue's
    workload slices do: from `from_count` pods of pod set `pod_set` to `to_count`.

    Growth is `slice`, a new slice admitted beside the running pods (same flavors);
    shrinking releases `release` (node -> pods) for `for_`, costing `cost` lost work."""

    workload: ObjectRef
    cluster_queue: str
    pod_set: str
    from_count: int
    to_count: int
    slice: PodSetAssignment | None = None
    release: tuple[tuple[str, int], ...] = ()
    reason: str = ""                         # Preempted | Reclaimed, for a shrink
    for_: tuple[ObjectRef, ...] = ()
    cost: float = 0.0


@dataclass(frozen=True)
class PendingEntry:
    workload: ObjectRef
    reason: str


@dataclass(frozen=True)
class SolverReport:
    """How the plan was found, honestly.

    status: optimal | feasible (time limit or gap; bound and gap are then real) |
    fallback (the greedy plan; `message` says why).
    """

    method: str                              # milp | greedy | pulp:NAME
    status: str
    objective: float
    bound: float
    gap: float
    seconds: Mapping[str, float] = field(default_factory=dict)
    message: str = ""
    stages: tuple[Mapping[str, object], ...] = ()
    peak_rss_mib: float | None = None        # the planning process's peak RSS, set by the CLI
    model: Mapping[str, int] = field(default_factory=dict)   # columns, rows, nonzeros of the stages' model


@dataclass(frozen=True)
class Plan:
    source: str
    digest: str
    object_count: int
    solver: SolverReport
    admissions: tuple[Admission, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    pending: tuple[PendingEntry, ...] = ()
    migrations: tuple[Migration, ...] = ()
    summary: Mapping[str, object] = field(default_factory=dict)
    resizes: tuple[Resize, ...] = ()
    # ProvisioningRequests wanted and deleted (planner/whatif/provisioning.py); None: the policy
    # does not enable provisioning, and the plan has no such section
    provisioning: ProvisioningSection | None = None


@dataclass(frozen=True)
class Decisions:
    """What a solver (greedy or MILP) decided, before the Plan is assembled."""

    admissions: tuple[Admission, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    migrations: tuple[Migration, ...] = ()
