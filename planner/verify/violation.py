"""What the verifier finds: one typed record per broken rule.

A `Violation` says which rule it breaks (`Rule`), what it is about (the workloads,
node, flavor and queue it names, where the rule has them) and the sentence a person
reads (`message`, also its `str()`): the plan file, the error output and the goldens
show that sentence, byte for byte. Callers decide on the rule and the fields, never
by searching the sentence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from models import ObjectRef


class Rule(enum.Enum):
    """The rule families; each is checked by one module of planner/verify."""

    ADMISSION = "admission"          # may this workload be admitted to this queue at all (placement.py)
    PLACEMENT = "placement"          # gang, flavors and nodes of an admission (placement.py)
    TOPOLOGY = "topology"            # required levels, slices, pod-set groups (placement.py)
    CAPACITY = "capacity"            # a node's allocatable (placement.py)
    PROVISIONING = "provisioning"    # ProvisioningRequest admission checks (placement.py)
    QUOTA = "quota"                  # ClusterQueue and cohort quota (quota.py)
    EVICTION = "eviction"            # what an eviction names: once, running, a known reason (preemption.py)
    PREEMPTION = "preemption"        # Kueue's preemption policies: who may evict whom (preemption.py)
    READINESS = "readiness"          # waitForPodsReady evictions (preemption.py)
    MIGRATION = "migration"          # defragmentation's moves (moves.py)
    STABILITY = "stability"          # nominal quota is a guarantee (stable.py)
    NEEDED = "needed"                # an eviction is needed by whom it is for (needed.py)
    CHURN = "churn"                  # the policy's bounds on evictions (needed.py)
    FAIRNESS = "fairness"            # fair sharing's preemption strategies (fair.py)
    FAIR_SHARE = "fair-share"        # a fair share left unmet (fair.py)
    FLEET = "fleet"                  # one cluster per workload across MultiKueue workers (fleet.py)
    MANAGER_QUOTA = "manager-quota"  # the MultiKueue manager's quota (fleet.py)
    RESIZE = "resize"                # an elastic workload grown or shrunk in place (resize.py)


@dataclass(frozen=True)
class Violation:
    """One broken rule. `workloads`: those it is about, the subject first (a quota or
    capacity violation names every admission it counts); `node`, `flavor`, `queue`
    (a ClusterQueue or Cohort's name): where the rule has one."""

    rule: Rule
    message: str
    workloads: tuple[ObjectRef, ...] = ()
    node: str | None = None
    flavor: str | None = None
    queue: str | None = None

    @property
    def workload(self) -> ObjectRef | None:
        """The workload the violation is about, if it is about one."""
        return self.workloads[0] if self.workloads else None

    def __str__(self) -> str:
        return self.message


def messages(found: list[Violation]) -> list[str]:
    """The sentences, in order (what the plan's error output shows)."""
    return [v.message for v in found]
