"""The snapshot's objects, as the planner sees them after reading.

Readers (`planner.snapshot`) turn Kubernetes and Kueue objects into these; every
field is already validated and in integer units, so the core never re-parses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, TypeVar, cast

from models.kueue_config import KueueConfig, KueueConfigOverride
from models.resources import Resources

T = TypeVar("T")

HOSTNAME_LABEL = "kubernetes.io/hostname"

if TYPE_CHECKING:   # models.capacity and models.provisioning import this module
    from models.capacity import NodeTemplate
    from models.provisioning import ProvisioningCheck, ProvisioningRequestState


@dataclass(frozen=True, order=True)
class ObjectRef:
    """kind/namespace/name of an object; namespace is "" for cluster-scoped kinds."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the input: where it is and what is wrong.

    Problems are reported once on stderr and, when they keep a workload waiting,
    again in the plan's `pending` reasons. `--strict` turns any problem into exit 2.
    """

    file: str
    ref: ObjectRef | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        obj = f"{self.ref}: " if self.ref else ""
        fld = f"{self.field}: " if self.field else ""
        return f"{where}{obj}{fld}{self.message}"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True)
class Toleration:
    key: str = ""               # "" with operator Exists tolerates everything
    operator: str = "Equal"     # Equal | Exists
    value: str = ""
    effect: str = ""            # "" matches every effect

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> bool:
    """True when every scheduling-relevant taint is tolerated (PreferNoSchedule is not binding)."""
    return all(
        taint.effect == "PreferNoSchedule" or any(t.tolerates(taint) for t in tolerations)
        for taint in taints
    )


@dataclass(frozen=True)
class Node:
    """A node that can take pods.

    `allocatable` includes `pods`. `unmanaged` is what pods Stowplan does not manage
    already request on it (with one `pods` each); what Stowplan's running workloads
    use is derived from their assignments, so evictions can free it.
    """

    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    unmanaged: Resources = Resources()
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    @property
    def free(self) -> Resources:
        """Allocatable minus unmanaged usage, never negative."""
        return (self.allocatable - self.unmanaged).clipped()

    @property
    def usable(self) -> bool:
        return self.ready and not self.unschedulable

    @property
    def pin(self) -> str:
        """What a pod pinned to this node names: its kubernetes.io/hostname label, which is
        what kube-scheduler matches (the name, as a kubelet sets it, when the label is absent)."""
        return hostname_pin(self.name, self.labels)


def hostname_pin(name: str, labels: Mapping[str, str]) -> str:
    """What kube-scheduler matches for the node `name` on kubernetes.io/hostname (Node.pin)."""
    return labels.get(HOSTNAME_LABEL, name)


@dataclass(frozen=True)
class NodePins:
    """Node name <-> the hostname label value a pin to it writes (REFERENCE §2).

    Plans, assignments and topology name nodes; every nodeSelector or node affinity
    Stowplan writes names the label, and every pin it reads back is turned into the
    node again here, so no writer can pin by name. When every node's label is its name
    (the usual case) nothing is kept: an empty NodePins pins by name. A label two nodes
    share is no unique pin: the reader places no new pod there, and reading such a pin
    back gives the label itself (no node)."""

    values: Mapping[str, str] = field(default_factory=dict)   # node name -> its label

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> NodePins:
        return cls.of_labels({n.name: n.labels for n in nodes})

    @classmethod
    def of_labels(cls, labels: Mapping[str, Mapping[str, str]]) -> NodePins:
        """From node name -> its labels (nodes listed raw, as on a worker cluster)."""
        values = {name: hostname_pin(name, node_labels) for name, node_labels in labels.items()}
        return cls(values) if any(name != value for name, value in values.items()) else cls()

    def value(self, node: str) -> str:
        """The value to pin `node` by."""
        return self.values.get(node, node)

    def node(self, value: str) -> str:
        """The node a pin `value` names (the value itself when no node is relabelled to it)."""
        return self._nodes.get(value, value)

    @cached_property
    def _nodes(self) -> dict[str, str]:
        holders: dict[str, list[str]] = {}
        for name, value in self.values.items():
            holders.setdefault(value, []).append(name)
        return {value: names[0] for value, names in holders.items() if len(names) == 1}


@dataclass(frozen=True)
class Topology:
    """Kueue Topology: node labels from the coarsest level to the finest."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


@dataclass(frozen=True)
class Quota:
    """Quota of one resource of one flavor; None limits mean "no limit"."""

    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    flavor: str
    resources: Mapping[str, Quota]


@dataclass(frozen=True)
class ResourceGroup:
    """Resources covered together; a pod set takes one flavor per group, tried in order."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True)
class PreemptionPolicy:
    """Kueue ClusterQueue spec.preemption, defaults as in Kueue."""

    within_cluster_queue: str = "Never"          # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"         # Never | LowerPriority | Any
    borrow_within_cohort: str = "Never"          # Never | LowerPriority
    borrow_max_priority_threshold: int | None = None


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    # Raw LabelSelector ({matchLabels, matchExpressions}); None selects no namespace? see reader.
    namespace_selector: Mapping[str, object] | None = None
    preemption: PreemptionPolicy = PreemptionPolicy()
    queueing_strategy: str = "BestEffortFIFO"    # BestEffortFIFO | StrictFIFO
    when_can_borrow: str = "MayStopSearch"       # flavorFungibility
    when_can_preempt: str = "TryNextFlavor"
    inactive_reason: str | None = None           # set when the queue cannot admit (missing flavor, cohort cycle, ...)
    # spec.fairSharing.weight (a quantity; 0 allowed: it gets only what nobody else wants)
    fair_weight: float = 1.0
    # spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing | NoAdmissionFairSharing | None (not set)
    admission_mode: str | None = None
    # spec.admissionChecksStrategy.admissionChecks[].name (v1beta1: spec.admissionChecks)
    admission_checks: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.inactive_reason is None


@dataclass(frozen=True)
class Cohort:
    """Kueue Cohort: a node of the sharing tree, possibly with quota of its own."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    inactive_reason: str | None = None
    fair_weight: float = 1.0                     # spec.fairSharing.weight


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    fair_weight: float = 1.0                     # spec.fairSharing.weight (admission fair sharing)


@dataclass(frozen=True)
class SliceLayer:
    """One layer of a slice request: each `size` consecutive pods in one domain of `level`."""

    level: str
    size: int


@dataclass(frozen=True)
class TopologyRequest:
    """A pod set's Kueue TAS annotations, validated.

    mode: "required" | "preferred" | "unconstrained" | None (no request).
    """

    mode: str | None = None
    level: str | None = None
    slices: tuple[SliceLayer, ...] = ()      # outer to inner
    group: str | None = None                 # podset-group-name


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int                      # pods wanted (parallelism, or replicas x parallelism)
    request: Resources              # effective per-pod request, including one `pods`
    min_count: int | None = None    # elastic minimum (job-min-parallelism); None: gang of `count`
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    topology: TopologyRequest = TopologyRequest()
    # Flavors the pod set must take (resource -> flavor): a growth slice of an elastic
    # running Job keeps its Job's flavors, as Kueue's workload slices do. None: any.
    fixed_flavors: Mapping[str, str] | None = None

    @property
    def minimum(self) -> int:
        return self.count if self.min_count is None else self.min_count


@dataclass(frozen=True)
class PodSetAssignment:
    """Where a pod set runs or will run: the shape of the plan's `podSets` entries.

    `domains` is a tuple of (values, count) where values are the label values of
    `levels`, coarse to fine; Stowplan always assigns down to the hostname level.
    """

    name: str
    count: int
    flavors: Mapping[str, str]                     # resource -> flavor
    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]

    def pods_per_node(self) -> dict[str, int]:
        """Node name -> pods, taking the last level value as the node name (a malformed
        empty domain is skipped: the reader and the verifier report it)."""
        out: dict[str, int] = {}
        for values, count in self.domains:
            if values:
                out[values[-1]] = out.get(values[-1], 0) + count
        return out


class WorkloadState(str, enum.Enum):
    PENDING = "pending"        # suspended, waiting for admission
    RUNNING = "running"        # admitted by Stowplan (assignment known)
    EXTERNAL = "external"      # unsuspended outside Stowplan: reported, its pods unmanaged


@dataclass(frozen=True)
class Workload:
    """A Job or JobSet queued through a LocalQueue."""

    ref: ObjectRef
    local_queue: str
    pod_sets: tuple[PodSet, ...]
    cluster_queue: str | None = None          # resolved through the LocalQueue; None when unknown
    priority: int = 0
    queued_at: float = 0.0                    # epoch seconds: creation or last eviction
    created_at: float = 0.0
    uid: str = ""
    state: WorkloadState = WorkloadState.PENDING
    assignment: tuple[PodSetAssignment, ...] = ()   # for running workloads
    admitted_at: float | None = None
    checkpointed_at: float | None = None
    preemption_cost: float | None = None            # stowplan.io/preemption-cost override
    non_preemptible: bool = False
    movable: bool = False                           # stowplan.io/movable: defragmentation may move it
    resource_version: str = ""
    # Why it cannot be admitted at all (unknown queue, bad request, ...): planned as pending.
    blocked_reason: str | None = None
    # waitForPodsReady (planner.cycle.podsready). What the snapshot's pods say of a running
    # workload: pod set -> (pods Ready or Succeeded, pods admitted); None when the
    # snapshot holds no Pod objects at all (readiness unknown: nothing times out).
    pods_ready: Mapping[str, tuple[int, int]] | None = None
    pods_ready_at: float | None = None        # stowplan.io/pods-ready-at: first seen with every pod Ready
    pods_not_ready_at: float | None = None    # stowplan.io/pods-not-ready-at: first seen not Ready after that
    requeue_count: int = 0                    # stowplan.io/requeue-count: PodsReadyTimeout evictions so far
    requeue_at: float | None = None           # stowplan.io/requeue-at: not planned before this time
    deactivated: str | None = None            # stowplan.io/deactivated: why it is never planned (RequeuingLimitExceeded)
    eviction_reason: str = ""                 # the first word of stowplan.io/eviction-reason (PodsReadyTimeout, ...)
    # kueue.x-k8s.io/elastic-job: "true": a running Job (or Ray cluster, per worker group)
    # the plan may grow or shrink (planner.cycle.elastic); a resizable pod set's count is the
    # most it may grow to.
    elastic_job: bool = False
    # A part planner.cycle.elastic split off a running elastic Job (a pod it may release):
    # the Job's ref. Evicting the Job evicts its parts.
    part_of: ObjectRef | None = None

    @property
    def all_pods_ready(self) -> bool | None:
        """Kueue's PodsReady for a running workload: every pod set has as many pods Ready or
        Succeeded as were admitted. None when the snapshot cannot tell (no pods read)."""
        if self.pods_ready is None:
            return None
        return all(ready >= admitted for ready, admitted in self.pods_ready.values())

    @property
    def elastic(self) -> bool:
        return any(ps.min_count is not None for ps in self.pod_sets)

    @cached_property
    def node_usage(self) -> Mapping[str, Resources]:
        """Node -> the requests this workload's assigned pods place there. Kept on the
        object (the model asks several times per workload), so it lives as long as the
        workload does and no longer; callers must not change it."""
        usage: dict[str, dict[str, int]] = {}
        requests = {ps.name: ps.request for ps in self.pod_sets}
        for assignment in self.assignment:
            request = requests.get(assignment.name)
            if request is None:
                continue
            for node, count in assignment.pods_per_node().items():
                on_node = usage.setdefault(node, {})
                for resource, amount in request.items():
                    on_node[resource] = on_node.get(resource, 0) + amount * count
        return {node: Resources.of(amounts) for node, amounts in usage.items()}

    @property
    def queue_name(self) -> str:
        """`cluster_queue`, where the caller knows the reader resolved one."""
        if self.cluster_queue is None:
            raise KeyError(f"{self.ref} has no ClusterQueue")
        return self.cluster_queue


@dataclass(frozen=True)
class ProvisioningPolicy:
    """PlannerPolicy `spec.provisioning`: whether the cycle asks the autoscaler for nodes
    through ProvisioningRequests (docs/provisioning.md).

    `templates` are the node kinds the autoscaler can add (the capacity what-if's node
    templates); `max_nodes_per_cycle` bounds the new nodes that the requests created in
    one cycle may ask for (None: no bound)."""

    enabled: bool = False
    max_nodes_per_cycle: int | None = None
    templates: tuple[NodeTemplate, ...] = ()


@dataclass(frozen=True)
class CustomPodSet:
    """One pod set of an in-house kind: its name, and the dotted paths (as key tuples) of its
    pod template and its pod count in the object."""

    name: str
    template_path: tuple[str, ...]
    count_path: tuple[str, ...]


@dataclass(frozen=True)
class CustomKind:
    """An in-house workload kind declared in the policy (spec.customKinds): read, planned and
    written like the built-in kinds, without code (planner.kinds.custom)."""

    group: str
    version: str
    kind: str
    plural: str
    suspend_path: tuple[str, ...]
    pod_sets: tuple[CustomPodSet, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@dataclass(frozen=True)
class Policy:
    """stowplan.io/v1alpha1 PlannerPolicy spec, with defaults."""

    time_limit_seconds: float = 20.0
    mip_gap: float = 0.001
    # Effective priority = priority + agingPerHour x hours waited (floored to an integer).
    aging_per_hour: float = 0.0
    # Preemption cost model: units x hours lost (capped) + restart cost.
    max_lost_hours: float = 24.0
    restart_cost: float = 1.0
    minimum_runtime_seconds: float = 0.0
    gpu_resources: tuple[str, ...] = ()       # extra resource names counted as GPUs
    threads: int = 1
    seed: int = 0
    # Never serve any priority less than the greedy (Kueue-like) plan does: the MILP
    # then improves on Kueue's answer priority by priority instead of trading a lower
    # priority's work for a higher one's. Off by default: REFERENCE §3 puts priority first.
    greedy_floor: bool = False
    # Defragmentation by planned migration (off by default: plans are then exactly as
    # without it). A running workload may be moved, at most `max_migrations_per_cycle`
    # a cycle, if it is marked movable or checkpointed within the window.
    defragment: bool = False
    max_migrations_per_cycle: int = 4
    migration_checkpoint_window_seconds: float = 3600.0
    # Bounds on churn, for preemptions (Preempted, Reclaimed): off by default. Each is a
    # constraint of the model and a check of the verifier; the objective's order holds
    # within them. At most `max_evictions_per_cycle` a cycle; for each priority p of a
    # victim, the net volume admitted above p pays for what is evicted at or below p
    # plus `min_gain_per_eviction` units per such eviction (dominant-resource units:
    # GPUs where a workload asks for GPUs); a workload that has run
    # `protect_running_after_seconds` is evicted only by reclaim.
    max_evictions_per_cycle: int | None = None
    # At most this many times Kueue's way's preemptions, once Kueue's way is in (the
    # MILP's search, planner/milp/search.py; 0: no such cap, the default: the cap
    # depends on Kueue's way being in within the time, and it makes the passes after
    # it restrictions that prove no bound). A planning preference, not a rule the
    # verifier checks: it knows no Kueue's way.
    max_evictions_vs_kueue: float = 0.0
    min_gain_per_eviction: float = 0.0
    protect_running_after_seconds: float | None = None
    # spec.kueueConfiguration: sections of Kueue's Configuration set or overridden here
    kueue: KueueConfigOverride = KueueConfigOverride()
    # spec.provisioning: ProvisioningRequests for what no plan can place (planner/whatif/provisioning.py)
    provisioning: ProvisioningPolicy = ProvisioningPolicy()
    # spec.customKinds: in-house workload kinds planned like the built-in ones
    custom_kinds: tuple[CustomKind, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """Everything one planning cycle needs, read once."""

    nodes: tuple[Node, ...] = ()
    flavors: Mapping[str, ResourceFlavor] = field(default_factory=dict)
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], LocalQueue] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    workloads: tuple[Workload, ...] = ()
    policy: Policy = Policy()
    now: float = 0.0                            # planning time, epoch seconds
    source: str = ""
    digest: str = ""
    object_count: int = 0
    ignored_kinds: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    # Kueue's Configuration (ConfigMap kueue-system/kueue-manager-config, then the policy's overrides)
    kueue_config: KueueConfig = KueueConfig()
    # ProvisioningRequest admission checks (models.provisioning): the provisioning
    # controller's AdmissionChecks by name, the requests Stowplan made, and the pending
    # workloads held back for want of a Provisioned one (ref -> the reason they wait)
    provisioning_checks: Mapping[str, ProvisioningCheck] = field(default_factory=dict)
    provisioning_requests: tuple[ProvisioningRequestState, ...] = ()
    provisioning_gated: Mapping[ObjectRef, str] = field(default_factory=dict)
    # What the deciding layers derive from this snapshot and ask for more than once, kept
    # with it (not in a module-level table keyed by id(), which would keep snapshots alive):
    # never compared, never copied by dataclasses.replace (a changed snapshot derives anew).
    _derived: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def derived(self, key: str, compute: Callable[[], T]) -> T:
        """`compute()`, once per snapshot object and `key` (a name its caller owns)."""
        if key not in self._derived:
            self._derived[key] = compute()
        return cast(T, self._derived[key])
