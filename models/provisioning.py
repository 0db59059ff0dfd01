"""ProvisioningRequest admission checks: what the snapshot says of them, what a plan asks for.

Kueue's AdmissionCheck with `controllerName: kueue.x-k8s.io/provisioning-request` holds a
workload back until the cluster autoscaler promises its nodes: a ProvisioningRequest
(`autoscaling.x-k8s.io/v1`) per workload and check reports `Provisioned=True`. Stowplan
plans these requests itself when the policy allows it (docs/provisioning.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from models.objects import ObjectRef, ProvisioningPolicy, Toleration

__all__ = ["ProvisioningPolicy"]  # defined beside Policy (models.objects), named here too

CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

# the status conditions the autoscaler writes (autoscaling.x-k8s.io/v1)
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"


@dataclass(frozen=True)
class ProvisioningCheck:
    """A Kueue AdmissionCheck of the provisioning controller, with its ProvisioningRequestConfig.

    `problem` says why the check cannot be used (no such config, no class): its
    workloads then wait with that reason, as Kueue keeps the check inactive."""

    name: str
    class_name: str = ""
    parameters: Mapping[str, str] = field(default_factory=dict)
    config: str = ""
    problem: str = ""


@dataclass(frozen=True)
class ProvisioningRequestState:
    """A ProvisioningRequest Stowplan made, as the snapshot shows it."""

    namespace: str
    name: str
    workload: ObjectRef
    check: str
    attempt: int
    true_conditions: frozenset[str] = frozenset()    # condition types whose status is "True"
    pod_templates: tuple[str, ...] = ()              # the PodTemplates its podSets name

    @property
    def provisioned(self) -> bool:
        """Provisioned=True and not since failed, expired or revoked (Kueue's order of checks)."""
        spoilt = {FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED} & self.true_conditions
        return PROVISIONED in self.true_conditions and not spoilt

    @property
    def spent(self) -> bool:
        """Failed, expired or revoked before use: a new attempt replaces it."""
        return bool({FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED} & self.true_conditions)


@dataclass(frozen=True)
class RequestPodSet:
    """One podSets entry of a request, with the PodTemplate it names (made by apply)."""

    name: str                                # the workload's pod set
    pod_template: str
    count: int
    requests: Mapping[str, int]              # per pod, canonical units (models.Resources)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True)
class WantedRequest:
    """A ProvisioningRequest the plan wants to exist. `create`: apply makes it (and its
    PodTemplates); otherwise it exists already and is kept as it is."""

    namespace: str
    name: str
    workload: ObjectRef
    check: str
    class_name: str
    parameters: Mapping[str, str]
    pod_sets: tuple[RequestPodSet, ...]
    attempt: int = 1
    create: bool = True
    nodes: Mapping[str, int] = field(default_factory=dict)   # node template -> new nodes the what-if used


@dataclass(frozen=True)
class DeletedRequest:
    namespace: str
    name: str
    workload: ObjectRef
    reason: str
    pod_templates: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProvisioningSection:
    """The plan's `provisioning` section: requests wanted, requests to delete, notes."""

    requests: tuple[WantedRequest, ...] = ()
    deletions: tuple[DeletedRequest, ...] = ()
    notes: tuple[str, ...] = ()


def newest_requests(requests: Sequence[ProvisioningRequestState]) -> dict[tuple[ObjectRef, str], ProvisioningRequestState]:
    """The latest attempt per (workload, check): the one that speaks for the check."""
    out: dict[tuple[ObjectRef, str], ProvisioningRequestState] = {}
    for r in sorted(requests, key=lambda r: (r.attempt, r.name)):
        out[(r.workload, r.check)] = r
    return out


def quantity_text(resource: str, value: int) -> str:
    """A canonical amount (models.Resources: milli-cores for cpu) as a Kubernetes quantity."""
    return f"{value}m" if resource == "cpu" else str(value)
