"""Kueue's Configuration, the parts that change what a plan may decide.

Kueue keeps it in ConfigMap `kueue-system/kueue-manager-config`, key
`controller_manager_config.yaml` (`config.kueue.x-k8s.io/v1beta2`, `kind:
Configuration`); a PlannerPolicy may set or override each section. Defaults are
Kueue v0.17's (`apis/config/v1beta2/defaults.go`): in v1beta2 a section that is
present is on (v1beta1 said `enable: true`), and every field left out takes Kueue's
default. Durations are seconds. Readers (`planner.snapshot.kueue_config`) validate;
the core only reads these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
# The only lists Kueue's validation accepts (pkg/config/validation.go validStrategySets).
STRATEGY_LISTS: tuple[tuple[str, ...], ...] = (
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (LESS_THAN_INITIAL_SHARE,),
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
)
# What Kueue uses when the list is empty (v1beta1 `enable: true` with no list; preemption.go parseStrategies).
DEFAULT_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)

EVICTION_TIMESTAMP = "Eviction"
CREATION_TIMESTAMP = "Creation"


@dataclass(frozen=True)
class FairSharingConfig:
    """`fairSharing`: share what a cohort can lend by weight; preempt to restore the shares."""

    enabled: bool = False
    preemption_strategies: tuple[str, ...] = DEFAULT_STRATEGIES


@dataclass(frozen=True)
class AdmissionFairSharingConfig:
    """`admissionFairSharing`: inside a ClusterQueue, LocalQueues with less decayed usage first.

    `resource_weights`: resource -> weight; a resource not listed weighs 1 (Kueue's default).
    """

    usage_half_life_seconds: float = 0.0
    usage_sampling_interval_seconds: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)

    def weight(self, resource: str) -> float:
        return self.resource_weights.get(resource, 1.0)


@dataclass(frozen=True)
class RequeuingStrategy:
    """`waitForPodsReady.requeuingStrategy`. `backoff_limit_count` None: requeue forever."""

    timestamp: str = EVICTION_TIMESTAMP          # Eviction | Creation
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class WaitForPodsReadyConfig:
    """`waitForPodsReady`: an admitted workload must have its pods ready within `timeout`.

    `recovery_timeout_seconds` defaults to the timeout (Kueue's defaulting); 0 disables it.
    """

    enabled: bool = False
    timeout_seconds: float = 300.0
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()
    recovery_timeout_seconds: float | None = None

    @property
    def recovery_timeout(self) -> float:
        return self.timeout_seconds if self.recovery_timeout_seconds is None else self.recovery_timeout_seconds


@dataclass(frozen=True)
class KueueConfig:
    """The Configuration as the planner uses it. `admission_fair_sharing` None: off.

    `source` says where it came from ("" for the defaults; a file, the cluster's ConfigMap,
    and/or the PlannerPolicy), so a plan can say why fair sharing is on."""

    fair_sharing: FairSharingConfig = FairSharingConfig()
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    wait_for_pods_ready: WaitForPodsReadyConfig = WaitForPodsReadyConfig()
    source: str = ""


@dataclass(frozen=True)
class KueueConfigOverride:
    """What a PlannerPolicy's `spec.kueueConfiguration` sets: each section given replaces
    the Configuration's whole section; None leaves it as read. `admission_fair_sharing_off`
    turns admission fair sharing off (`admissionFairSharing: {enable: false}`)."""

    fair_sharing: FairSharingConfig | None = None
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    admission_fair_sharing_off: bool = False
    wait_for_pods_ready: WaitForPodsReadyConfig | None = None

    @property
    def empty(self) -> bool:
        return self == KueueConfigOverride()

    def applied(self, config: KueueConfig, source: str) -> KueueConfig:
        """`config` with these sections in place of its own; `source` names the policy."""
        if self.empty:
            return config
        admission = config.admission_fair_sharing
        if self.admission_fair_sharing_off:
            admission = None
        elif self.admission_fair_sharing is not None:
            admission = self.admission_fair_sharing
        return KueueConfig(
            fair_sharing=self.fair_sharing if self.fair_sharing is not None else config.fair_sharing,
            admission_fair_sharing=admission,
            wait_for_pods_ready=(self.wait_for_pods_ready if self.wait_for_pods_ready is not None
                                 else config.wait_for_pods_ready),
            source=" + ".join(s for s in (config.source, source) if s),
        )
