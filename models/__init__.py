"""Stowplan's domain vocabulary: plain frozen dataclasses, standard library only.

Every step of the pipeline (read, formulate, solve, decode, verify, apply) speaks
these types. Nothing here does I/O or imports anything outside the standard library;
`planner` imports `models`, never the reverse.
"""

from models.resources import Resources, FlavorResource, GPU_SUFFIX, dominant_units, is_gpu
from models.objects import (
    ObjectRef,
    Problem,
    Taint,
    Toleration,
    Node,
    NodePins,
    hostname_pin,
    Topology,
    ResourceFlavor,
    Quota,
    FlavorQuotas,
    ResourceGroup,
    PreemptionPolicy,
    ClusterQueue,
    Cohort,
    LocalQueue,
    TopologyRequest,
    SliceLayer,
    PodSet,
    PodSetAssignment,
    Workload,
    WorkloadState,
    Policy,
    CustomKind,
    CustomPodSet,
    Snapshot,
)
from models.kueue_config import (
    FairSharingConfig,
    AdmissionFairSharingConfig,
    RequeuingStrategy,
    WaitForPodsReadyConfig,
    KueueConfig,
    KueueConfigOverride,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    LESS_THAN_INITIAL_SHARE,
)
from models.plan import (
    Admission,
    Eviction,
    Domain,
    Migration,
    Resize,
    PendingEntry,
    SolverReport,
    Plan,
    Decisions,
    HOSTNAME_LABEL,
)

__all__ = [
    "Resources", "FlavorResource", "GPU_SUFFIX", "dominant_units", "is_gpu",
    "ObjectRef", "Problem", "Taint", "Toleration", "Node", "NodePins", "hostname_pin", "Topology", "ResourceFlavor",
    "Quota", "FlavorQuotas", "ResourceGroup", "PreemptionPolicy", "ClusterQueue",
    "Cohort", "LocalQueue", "TopologyRequest", "SliceLayer", "PodSet",
    "PodSetAssignment", "Workload", "WorkloadState", "Policy", "CustomKind", "CustomPodSet", "Snapshot",
    "FairSharingConfig", "AdmissionFairSharingConfig", "RequeuingStrategy", "WaitForPodsReadyConfig",
    "KueueConfig", "KueueConfigOverride", "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE", "LESS_THAN_INITIAL_SHARE",
    "Admission", "Eviction", "Domain", "Migration", "Resize", "PendingEntry", "SolverReport", "Plan", "Decisions", "HOSTNAME_LABEL",
]
