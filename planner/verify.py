"""Independent feasibility check of a plan's decisions against their snapshot.

`verify(snapshot, decisions)` returns human-readable violations; an empty list
means the plan is valid. Every rule is re-derived here from the snapshot with
small local functions: this module must not import the code that makes plans
(planner.kueue.semantics, capacity, topology, greedy, formulate, solve), so a bug shared
by greedy and the MILP is still caught. Pure: no I/O. Indexes are built once, so
checking 20,000 workloads on 16,384 nodes stays well under a second or two.

Pre-existing overuse (running work alone already above a node's allocatable, or
above a quota limit) is not the plan's fault. For both node capacity and quota the
rule checked is therefore

    final(x) <= max(limit(x), base(x))

where `final` counts unmanaged pods + running workloads not evicted + this plan's
admissions and `base` counts the same without the admissions. Since `final` never
decreases when work is added, this says: either the limit holds after the plan, or
the admissions add nothing at all to that quantity (final == base).
For quota this equals admitting the plan's workloads one at a time with Kueue's
`available()`, in any order, where what a queue may take from its parent is never
negative (tests/test_verify.py checks both against a brute-force oracle).

Choices where the contract leaves room:
- namespaceSelector None selects no namespace (Kueue's LabelSelectorAsSelector(nil),
  and what the reader keeps for an absent field); {} selects every namespace.
- The quota tree holds active ClusterQueues only (quota and usage alike), as Kueue's
  scheduling snapshot does; cohorts named but not defined exist with no quota; a
  parentName cycle is cut, and admitting below it, or below an inactive cohort, is a
  violation.
- Only resources a ClusterQueue covers are quota usage; requesting an uncovered one
  other than `pods`, or giving a flavor to one, is a violation.
- Pod-set groups bind only members with mode "required" and a level; "preferred" and
  "unconstrained" impose nothing hard.
- A domain at a level is a node's values at that level and every level above, so rack
  "r1" in two blocks is two domains; the hostname level is the node's name.
- Minimum runtime is measured from `admitted_at`; work without it is not held back.
- Preemption is judged on base priorities (aging orders admissions, it grants no
  eviction rights). An eviction must name, in `for_`, at least one admission of this
  plan whose ClusterQueue's spec.preemption allows it; an eviction for nobody is a
  violation. "Borrowing" (for reclaimWithinCohort) is the victim's queue using more
  than its nominal quota of some flavor/resource before the plan, or with all of the
  plan's admissions made and none of its evictions (Kueue judges it when it preempts,
  and the plan's admissions may make a queue borrow). As in the
  project's semantics, borrowWithinCohort LowerPriority allows victims in any queue
  of the cohort tree below the preemptor's priority (and at most
  maxPriorityThreshold), without asking whether the preemptor itself borrows.
  Not checked: that a victim uses a flavor/resource or node its preemptor needs,
  and Kueue's "already evicted first" ordering (orderings are the planner's choice).
- waitForPodsReady evictions (PodsReadyTimeout, Deactivated) are for nobody and
  need no preemption right: only Kueue's condition at the planning time
  (`_check_readiness`, re-derived here, not planner.podsready's), and the requeue they
  record must be the next count with its backoff (or a deactivation past the limit).
- Stability (nominal quota is a guarantee): planner/verify_stable.py, on its own.
- Migrations (defragmentation): planner/verify_moves.py, on its own; a moved workload
  then counts as evicted from its old place and admitted at its new one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Sequence, cast

from models import (
    Admission, ClusterQueue, Decisions, Eviction, Node, ObjectRef, PodSet,
    PodSetAssignment, ResourceFlavor, ResourceGroup, Snapshot, Workload, WorkloadState,
)
from models.objects import tolerated

HOSTNAME = "kubernetes.io/hostname"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
PODS = "pods"
PREEMPTION_REASONS = frozenset({"Preempted", "Reclaimed"})
READINESS_REASONS = frozenset({"PodsReadyTimeout", "Deactivated"})   # waitForPodsReady, for nobody
EVICTION_REASONS = PREEMPTION_REASONS | READINESS_REASONS
MAX_NAMED = 5  # workloads named in one aggregate (capacity, quota) message

FR = tuple[str, str]  # (flavor, resource)


# ---------------------------------------------------------------- entry point

def verify(snapshot: Snapshot, decisions: Decisions) -> list[str]:
    """All violations of `decisions` against `snapshot`, in a deterministic order."""
    ix = SnapshotIndex(snapshot)
    out: list[str] = []
    admitted = check_admissions(ix, decisions.admissions, out)
    _check_provisioning(ix, decisions.admissions, out)
    evicted = check_evictions(ix, decisions.evictions, admitted, out)
    if decisions.migrations:
        # A move is an eviction and an admission in the same plan (planner/verify_moves.py).
        from planner.verify_moves import check_migrations
        moved = check_migrations(ix, decisions.migrations, admitted, evicted, out)
        admitted, evicted = {**admitted, **moved}, evicted | set(moved)
    _check_node_capacity(ix, admitted, evicted, out)
    _check_quota(ix, admitted, evicted, out)
    from planner.verify_stable import check_stability  # the rule has a module of its own, built on this one
    unstable: list[tuple[ObjectRef, str]] = []
    check_stability(ix, admitted, evicted, unstable)
    out.extend(message for _, message in unstable)
    from planner.verify_needed import check_needed  # each eviction needed by whom it is for
    check_needed(ix, decisions, admitted, evicted, out)
    from planner.verify_fair import check_fair_preemption, check_fair_shares  # fair sharing's rules
    check_fair_preemption(ix, decisions, admitted, evicted, out)
    check_fair_shares(ix, decisions, admitted, evicted, out)
    return out


def _check_provisioning(ix: "SnapshotIndex", admissions: Sequence[Admission], out: list[str]) -> None:
    """With the policy's spec.provisioning: an admission through a ClusterQueue with a
    ProvisioningRequest admission check needs the workload's newest request for that check
    to say Provisioned=True, and none of Failed, BookingExpired, CapacityRevoked (read
    here from the snapshot's requests, not from the reader's gate)."""
    snapshot = ix.snapshot
    if not snapshot.policy.provisioning.enabled:
        return
    newest: dict[tuple[ObjectRef, str], tuple[int, str, frozenset[str]]] = {}
    for r in snapshot.provisioning_requests:
        key = (r.workload, r.check)
        if key not in newest or (r.attempt, r.name) > newest[key][:2]:
            newest[key] = (r.attempt, r.name, r.true_conditions)
    for admission in admissions:
        queue = snapshot.cluster_queues.get(admission.cluster_queue)
        for check in queue.admission_checks if queue is not None else ():
            if check not in snapshot.provisioning_checks:
                continue
            found = newest.get((admission.workload, check))
            if found is None:
                out.append(f"{admission.workload}: admitted through ProvisioningRequest admission check {check} "
                           "with no request")
                continue
            _, name, true = found
            bad = sorted(true & {"Failed", "BookingExpired", "CapacityRevoked"})
            if "Provisioned" not in true or bad:
                state = ", ".join(sorted(true)) or "no condition"
                out.append(f"{admission.workload}: admitted through ProvisioningRequest admission check {check} "
                           f"but request {name} is not Provisioned ({state})")


class AdmittedEntry:
    """One admission whose workload exists, with its pod sets resolved."""

    __slots__ = ("workload", "admission", "pairs")

    def __init__(self, workload: Workload, admission: Admission, pairs: list[tuple[PodSet, PodSetAssignment]]):
        self.workload, self.admission, self.pairs = workload, admission, pairs


class SnapshotIndex:
    """Lookups built once per verification."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        self.workloads: dict[ObjectRef, Workload] = {}
        for w in snapshot.workloads:
            self.workloads.setdefault(w.ref, w)
        self.nodes: dict[str, Node] = {n.name: n for n in snapshot.nodes}
        self.topology_levels: dict[str, tuple[str, ...]] = {
            name: tuple(t.levels) for name, t in snapshot.topologies.items()
        }
        # ClusterQueue -> resource -> index of the (first) group covering it.
        self.coverage: dict[str, dict[str, int]] = {}
        for cq in snapshot.cluster_queues.values():
            cover: dict[str, int] = {}
            for gi, group in enumerate(cq.resource_groups):
                for resource in group.covered_resources:
                    cover.setdefault(resource, gi)
            self.coverage[cq.name] = cover
        self.cohort_parent, self.cohort_cycle = _cohort_links(snapshot)
        # Memos: node checks per (node, pod shape) and node domains per (node, levels, depth).
        self.node_problems: dict[tuple[str, object], list[str]] = {}
        self.domains: dict[tuple[str, tuple[str, ...], int], tuple[str | None, ...]] = {}
        self.per_node: dict[int, dict[str, int]] = {}  # id(assignment) -> pods per node; decisions outlive it
        self.borrowing: set[str] | None = None  # ClusterQueues borrowing before the plan, when first asked
        self.borrowing_after: dict[str, dict[FR, int]] | None = None  # ... with the plan's admissions made
        self.usage_before: dict[str, dict[FR, int]] = {}

    def flavor_levels(self, flavor: ResourceFlavor) -> tuple[str, ...] | None:
        if flavor.topology_name is None:
            return None
        return self.topology_levels.get(flavor.topology_name)


# ---------------------------------------------------------------- small shared rules

def label_at(node: Node, level: str) -> str | None:
    """A node's value at a topology level; the hostname level is the node itself."""
    if level == HOSTNAME:
        return node.name
    return node.labels.get(level)


def _domain(node: Node, levels: tuple[str, ...], depth: int) -> tuple[str | None, ...]:
    """The node's domain at levels[depth]: its values at that level and every level above."""
    return tuple(label_at(node, levels[i]) for i in range(depth + 1))


def selector_matches(selector: Mapping[str, object] | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector: None selects nothing, {} everything; terms are ANDed."""
    if selector is None:
        return False
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, (list, tuple)):
        return False
    for expr in expressions:
        if not isinstance(expr, Mapping) or not _expression_matches(expr, labels):
            return False
    return True


def _expression_matches(expr: Mapping[str, object], labels: Mapping[str, str]) -> bool:
    key, operator = expr.get("key"), expr.get("operator")
    values = cast(Sequence[object], expr.get("values") or [])   # a list, as the reader keeps it
    label = labels.get(key) if isinstance(key, str) else None
    present = label is not None
    if operator == "In":
        return present and label in values
    if operator == "NotIn":
        return not (present and label in values)
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False  # an invalid operator makes the selector invalid: selects nothing


def namespace_allowed(snapshot: Snapshot, cq: ClusterQueue, namespace: str) -> bool:
    labels = dict(snapshot.namespace_labels.get(namespace, {}))
    labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
    return selector_matches(cq.namespace_selector, labels)


def _named(refs: Iterable[ObjectRef]) -> str:
    names = sorted({str(r) for r in refs})
    shown = ", ".join(names[:MAX_NAMED])
    more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    return shown + more


# ---------------------------------------------------------------- admissions

def check_admissions(ix: SnapshotIndex, admissions: tuple[Admission, ...], out: list[str]) -> dict[ObjectRef, AdmittedEntry]:
    """Per-admission rules; returns the first admission of every existing workload."""
    admitted: dict[ObjectRef, AdmittedEntry] = {}
    for admission in admissions:
        ref = admission.workload
        workload = ix.workloads.get(ref)
        if workload is None:
            out.append(f"{ref}: admitted but not in the snapshot")
            continue
        if ref in admitted:
            out.append(f"{ref}: admitted more than once")
            continue
        _check_identity(ix, workload, admission, out)
        pairs = check_gang(workload, admission, out)
        admitted[ref] = AdmittedEntry(workload, admission, pairs)
        cq = ix.snapshot.cluster_queues.get(admission.cluster_queue)
        for pod_set, psa in pairs:
            flavors = check_flavors(ix, cq, workload, pod_set, psa, out)
            check_nodes(ix, workload, pod_set, psa, flavors, out)
            check_topology(ix, workload, pod_set, psa, flavors, out)
        check_groups(ix, workload, pairs, out)
    return admitted


def _check_identity(ix: SnapshotIndex, workload: Workload, admission: Admission, out: list[str]) -> None:
    """State, queue and namespace: may this workload be admitted to this queue at all?"""
    ref, snap = workload.ref, ix.snapshot
    if workload.state is not WorkloadState.PENDING:
        out.append(f"{ref}: admitted but it is {workload.state.value}, not pending")
    if workload.blocked_reason:
        out.append(f"{ref}: admitted but blocked: {workload.blocked_reason}")
    if workload.cluster_queue != admission.cluster_queue:
        out.append(f"{ref}: admitted to ClusterQueue {admission.cluster_queue} "
                   f"but its queue is {workload.cluster_queue}")
    local = snap.local_queues.get((ref.namespace, workload.local_queue))
    if local is not None and local.cluster_queue != admission.cluster_queue:
        out.append(f"{ref}: LocalQueue {ref.namespace}/{workload.local_queue} points at "
                   f"{local.cluster_queue}, not {admission.cluster_queue}")
    cq = snap.cluster_queues.get(admission.cluster_queue)
    if cq is None:
        out.append(f"{ref}: ClusterQueue {admission.cluster_queue} does not exist")
        return
    if cq.inactive_reason is not None:
        out.append(f"{ref}: ClusterQueue {cq.name} is inactive: {cq.inactive_reason}")
    for problem in cohort_problems(ix, cq):
        out.append(f"{ref}: ClusterQueue {cq.name}: {problem}")
    if not namespace_allowed(snap, cq, ref.namespace):
        out.append(f"{ref}: namespace {ref.namespace} is not allowed by ClusterQueue {cq.name}'s namespaceSelector")


def check_gang(workload: Workload, admission: Admission, out: list[str]) -> list[tuple[PodSet, PodSetAssignment]]:
    """One assignment per pod set, with a count the pod set allows, placed in full."""
    ref = workload.ref
    by_name: dict[str, PodSetAssignment] = {}
    for psa in admission.pod_sets:
        if psa.name in by_name:
            out.append(f"{ref}: pod set {psa.name} assigned more than once")
            continue
        by_name[psa.name] = psa
    known = {ps.name for ps in workload.pod_sets}
    for name in sorted(set(by_name) - known):
        out.append(f"{ref}: assignment for unknown pod set {name}")
    pairs: list[tuple[PodSet, PodSetAssignment]] = []
    for pod_set in workload.pod_sets:
        found = by_name.get(pod_set.name)
        if found is None:
            out.append(f"{ref}: pod set {pod_set.name} has no assignment (gang: all pod sets or none)")
            continue
        psa = found
        low = pod_set.count if pod_set.min_count is None else pod_set.min_count
        if not low <= psa.count <= pod_set.count:
            want = f"{pod_set.count}" if pod_set.min_count is None else f"{low}..{pod_set.count}"
            out.append(f"{ref}: pod set {pod_set.name} admitted with {psa.count} pods, needs {want}")
        placed = 0
        for values, count in psa.domains:
            if count <= 0:
                out.append(f"{ref}: pod set {pod_set.name} has a domain {list(values)} with count {count}")
            placed += count
        if placed != psa.count:
            out.append(f"{ref}: pod set {pod_set.name} places {placed} pods but its count is {psa.count}")
        pairs.append((pod_set, psa))
    return pairs


def check_flavors(ix: SnapshotIndex, cq: ClusterQueue | None, workload: Workload, pod_set: PodSet,
                   psa: PodSetAssignment, out: list[str]) -> list[ResourceFlavor]:
    """One listed flavor per resource group for every requested covered resource.

    Returns the distinct chosen flavors that exist, sorted by name.
    """
    ref, snap = workload.ref, ix.snapshot
    where = f"{ref}: pod set {pod_set.name}"
    chosen = {name: snap.flavors[name] for name in set(psa.flavors.values()) if name in snap.flavors}
    for name in sorted(set(psa.flavors.values()) - set(chosen)):
        out.append(f"{where}: flavor {name} does not exist")
    if cq is None:
        return [chosen[n] for n in sorted(chosen)]
    cover = ix.coverage[cq.name]
    group_flavor: dict[int, str] = {}
    requested = {r for r, v in pod_set.request.items() if v > 0}
    for resource in sorted(requested | set(psa.flavors)):
        gi = cover.get(resource)
        flavor = psa.flavors.get(resource)
        if gi is None:
            if flavor is not None:
                out.append(f"{where}: flavor {flavor} given for {resource}, which ClusterQueue {cq.name} does not cover")
            elif resource != PODS:
                out.append(f"{where}: requests {resource}, which ClusterQueue {cq.name} does not cover")
            continue
        if flavor is None:
            out.append(f"{where}: no flavor for {resource}, which ClusterQueue {cq.name} covers")
            continue
        group = cq.resource_groups[gi]
        listed = next((fq for fq in group.flavors if fq.flavor == flavor), None)
        if listed is None:
            out.append(f"{where}: flavor {flavor} for {resource} is not in ClusterQueue {cq.name}'s resource group")
        elif resource in requested and resource not in listed.resources:
            out.append(f"{where}: ClusterQueue {cq.name} lists no quota for {resource} in flavor {flavor}")
        previous = group_flavor.setdefault(gi, flavor)
        if previous != flavor:
            out.append(f"{where}: resource group {list(group.covered_resources)} gets two flavors "
                       f"({previous}, {flavor}); one pod set takes one flavor per group")
    for name in sorted(chosen):
        # Kueue tolerates a flavor's nodeTaints with the pod set's tolerations plus the flavor's own.
        if not tolerated(chosen[name].node_taints, pod_set.tolerations + chosen[name].tolerations):
            out.append(f"{where}: does not tolerate flavor {name}'s nodeTaints")
        if chosen[name].topology_name is not None and ix.flavor_levels(chosen[name]) is None:
            out.append(f"{where}: flavor {name} names Topology {chosen[name].topology_name}, which does not exist")
    return [chosen[n] for n in sorted(chosen)]


def check_nodes(ix: SnapshotIndex, workload: Workload, pod_set: PodSet, psa: PodSetAssignment,
                 flavors: list[ResourceFlavor], out: list[str]) -> None:
    """Every pod on an existing, usable node its flavors and selectors allow."""
    where = f"{workload.ref}: pod set {pod_set.name}"
    shape = (tuple(f.name for f in flavors), tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations)
    for values, _ in psa.domains:
        if not values:
            out.append(f"{where}: a domain has no values (no node named)")
            continue
        if len(values) != len(psa.levels):
            out.append(f"{where}: domain {list(values)} does not match levels {list(psa.levels)}")
        node = ix.nodes.get(values[-1])
        if node is None:
            out.append(f"{where}: node {values[-1]} does not exist")
            continue
        for level, value in zip(psa.levels[:-1], values[:-1]):
            if label_at(node, level) != value:
                out.append(f"{where}: node {node.name} has {level}={label_at(node, level)}, assignment says {value}")
        key = (node.name, shape)
        problems = ix.node_problems.get(key)
        if problems is None:
            problems = ix.node_problems[key] = node_problems(ix, node, pod_set, flavors)
        out.extend(f"{where}: node {node.name} {problem}" for problem in problems)


def node_problems(ix: SnapshotIndex, node: Node, pod_set: PodSet, flavors: list[ResourceFlavor]) -> list[str]:
    """Why a pod of this shape (flavors, selector, tolerations) may not run on `node`."""
    problems = []
    if not (node.ready and not node.unschedulable):
        problems.append("is not usable (not ready or unschedulable)")
    for flavor in flavors:
        if any(node.labels.get(k) != v for k, v in flavor.node_labels.items()):
            problems.append(f"lacks flavor {flavor.name}'s nodeLabels")
    if any(node.labels.get(k) != v for k, v in pod_set.node_selector.items()):
        problems.append("does not match the pod set's nodeSelector")
    tolerations = pod_set.tolerations + tuple(t for f in flavors for t in f.tolerations)
    if not tolerated(node.taints, tolerations):
        problems.append("has a taint the pod set does not tolerate")
    topo_levels = {lv for f in flavors for lv in (ix.flavor_levels(f) or ())}
    missing = sorted(lv for lv in topo_levels if label_at(node, lv) is None)
    if missing:
        problems.append(f"lacks topology level labels {missing}")
    return problems


# ---------------------------------------------------------------- topology

def levels_with(ix: SnapshotIndex, flavors: list[ResourceFlavor], level: str) -> tuple[str, ...] | None:
    """The first chosen flavor's topology levels that contain `level` (hostname is always there)."""
    for flavor in flavors:
        levels = ix.flavor_levels(flavor)
        if levels and level in levels:
            return levels
    if level == HOSTNAME:
        return (HOSTNAME,)
    return None


def _per_node(ix: SnapshotIndex, psa: PodSetAssignment) -> dict[str, int]:
    """Pods per node of an assignment of the plan, computed once (empty domains skipped)."""
    per_node = ix.per_node.get(id(psa))
    if per_node is None:
        per_node = ix.per_node[id(psa)] = psa.pods_per_node()
    return per_node


def _pods_by_domain(ix: SnapshotIndex, psa: PodSetAssignment, levels: tuple[str, ...], level: str) -> dict[tuple[str | None, ...], int]:
    depth = levels.index(level)
    counts: dict[tuple[str | None, ...], int] = defaultdict(int)
    cache = ix.domains
    for node_name, count in _per_node(ix, psa).items():
        key = (node_name, levels, depth)
        domain = cache.get(key)
        if domain is None:
            node = ix.nodes.get(node_name)
            if node is None:
                continue
            domain = cache[key] = _domain(node, levels, depth)
        counts[domain] += count
    return counts


def check_topology(ix: SnapshotIndex, workload: Workload, pod_set: PodSet, psa: PodSetAssignment,
                    flavors: list[ResourceFlavor], out: list[str]) -> None:
    """Required level: one domain. Slices: whole groups of `size` per domain."""
    request = pod_set.topology
    where = f"{workload.ref}: pod set {pod_set.name}"
    if request.mode == "required" and request.level:
        levels = levels_with(ix, flavors, request.level)
        if levels is None:
            out.append(f"{where}: requires level {request.level}, which no chosen flavor's topology has")
        else:
            domains = _pods_by_domain(ix, psa, levels, request.level)
            if len(domains) > 1:
                out.append(f"{where}: requires one {request.level} domain but spans {len(domains)}")
    for layer in request.slices:
        if layer.size <= 0:
            out.append(f"{where}: slice size {layer.size} at {layer.level} is not positive")
            continue
        if psa.count % layer.size:
            out.append(f"{where}: {psa.count} pods are not whole slices of {layer.size} at {layer.level}")
        levels = levels_with(ix, flavors, layer.level)
        if levels is None:
            out.append(f"{where}: slice level {layer.level} is in no chosen flavor's topology")
            continue
        for domain, count in sorted(_pods_by_domain(ix, psa, levels, layer.level).items(), key=str):
            if count % layer.size:
                out.append(f"{where}: {count} pods in {layer.level} {domain[-1]} straddle slices of {layer.size}")


def check_groups(ix: SnapshotIndex, workload: Workload, pairs: list[tuple[PodSet, PodSetAssignment]], out: list[str]) -> None:
    """Pod sets sharing a group name and requiring a level use one domain of it together."""
    groups: dict[str, list[tuple[PodSet, PodSetAssignment]]] = defaultdict(list)
    for pod_set, psa in pairs:
        request = pod_set.topology
        if request.group and request.mode == "required" and request.level:
            groups[request.group].append((pod_set, psa))
    snap_flavors = ix.snapshot.flavors
    for name in sorted(groups):
        members = groups[name]
        if len(members) < 2:
            continue
        for level in sorted({ps.topology.level for ps, _ in members if ps.topology.level}):
            domains: set[tuple[str | None, ...]] = set()
            for _, psa in members:
                flavors = [snap_flavors[f] for f in sorted(set(psa.flavors.values())) if f in snap_flavors]
                levels = levels_with(ix, flavors, level)
                if levels is not None:
                    domains.update(_pods_by_domain(ix, psa, levels, level))
            if len(domains) > 1:
                out.append(f"{workload.ref}: pod-set group {name} spans {len(domains)} {level} domains, must share one")


# ---------------------------------------------------------------- evictions

def check_evictions(ix: SnapshotIndex, evictions: tuple[Eviction, ...], admitted: Mapping[ObjectRef, AdmittedEntry],
                     out: list[str]) -> set[ObjectRef]:
    """Only running, preemptible workloads, once each, for admissions of this plan
    that Kueue's preemption policies allow to evict them."""
    evicted: set[ObjectRef] = set()
    for eviction in evictions:
        ref = eviction.workload
        workload = ix.workloads.get(ref)
        if workload is None:
            out.append(f"{ref}: evicted but not in the snapshot")
            continue
        if ref in evicted:
            out.append(f"{ref}: evicted more than once")
            continue
        if workload.state is not WorkloadState.RUNNING:
            out.append(f"{ref}: evicted but it is {workload.state.value}, not running")
        else:
            evicted.add(ref)
        if ref in admitted:
            out.append(f"{ref}: both evicted and admitted in the same plan")
        if eviction.reason not in EVICTION_REASONS:
            out.append(f"{ref}: eviction reason {eviction.reason!r} is not one of {sorted(EVICTION_REASONS)}")
        if not (isinstance(eviction.cost, (int, float)) and 0 <= eviction.cost < float("inf")):
            out.append(f"{ref}: eviction cost {eviction.cost!r} is not a finite number >= 0")
        for target in eviction.for_:
            if target not in admitted:
                out.append(f"{ref}: evicted for {target}, which this plan does not admit")
    ix.borrowing_after = _borrowing_with_victims(ix, admitted, evicted)
    for eviction in evictions:
        workload = ix.workloads.get(eviction.workload)
        if workload is None:
            continue
        if eviction.reason in READINESS_REASONS:
            _check_readiness(ix.snapshot, workload, eviction, out)
        else:
            _check_preemption_policy(ix, workload, eviction, admitted, out)
    return evicted


def _check_readiness(snapshot: Snapshot, workload: Workload, eviction: Eviction, out: list[str]) -> None:
    """A waitForPodsReady eviction only where Kueue's condition holds at the planning time:
    waitForPodsReady on; some pod set with fewer pods Ready or Succeeded than admitted;
    never seen Ready and `timeout` passed since admission, or seen Ready and then not,
    and `recoveryTimeout` (default: the timeout; 0: off) passed since. For nobody. The
    requeue it records is the next count with backoff base*2^(n-1) capped at max; past
    `backoffLimitCount` it must be Deactivated instead."""
    ref, config, now = workload.ref, snapshot.kueue_config.wait_for_pods_ready, snapshot.now
    if workload.state is not WorkloadState.RUNNING:
        return   # reported by the caller
    if eviction.reason == "Deactivated" and workload.deactivated is not None:
        if eviction.for_:
            out.append(f"{ref}: a Deactivated eviction is for nobody, not for {eviction.for_[0]}")
        return   # deactivated by hand (stowplan.io/deactivated): evicted whatever its pods do
    if not config.enabled:
        out.append(f"{ref}: evicted for {eviction.reason} but waitForPodsReady is off")
        return
    if eviction.for_:
        out.append(f"{ref}: a {eviction.reason} eviction is for nobody, not for {eviction.for_[0]}")
    counts = workload.pods_ready
    if counts is None or all(ready >= admitted for ready, admitted in counts.values()):
        out.append(f"{ref}: evicted for {eviction.reason} but its pods are "
                   f"{'not known' if counts is None else 'all Ready'}")
        return
    if workload.pods_ready_at is None:
        since, limit = workload.admitted_at, config.timeout_seconds
    else:
        since = workload.pods_not_ready_at
        limit = config.timeout_seconds if config.recovery_timeout_seconds is None else config.recovery_timeout_seconds
        if limit <= 0:
            since = None
    if since is None or now - since < limit:
        out.append(f"{ref}: evicted for {eviction.reason} before its pods' time ran out "
                   f"({'no start time' if since is None else f'{now - since:.0f}s of {limit:g}s'})")
        return
    strategy = config.requeuing_strategy
    count = workload.requeue_count + 1
    if strategy.backoff_limit_count is not None and count > strategy.backoff_limit_count:
        if eviction.reason != "Deactivated":
            out.append(f"{ref}: requeue {count} exceeds backoffLimitCount {strategy.backoff_limit_count}: "
                       f"it must be Deactivated, not {eviction.reason}")
        return
    wait = min(strategy.backoff_base_seconds * 2 ** min(count - 1, 62), strategy.backoff_max_seconds)
    if eviction.reason != "PodsReadyTimeout":
        out.append(f"{ref}: requeue {count} is within backoffLimitCount: the reason is PodsReadyTimeout, "
                   f"not {eviction.reason}")
    elif eviction.requeue_count != count or eviction.requeue_at is None or abs(eviction.requeue_at - (now + wait)) > 1e-6:
        out.append(f"{ref}: PodsReadyTimeout must record requeue {count} at now + {wait:g}s, not "
                   f"{eviction.requeue_count} at {eviction.requeue_at}")


def _borrowing_with_victims(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry],
                            evicted: set[ObjectRef]) -> dict[str, dict[FR, int]]:
    """Per ClusterQueue, by how much it would use more than its nominal quota with every
    admission of the plan made and none of its evictions (flavor/resource -> amount
    above nominal): Kueue judges "borrowing" when it preempts, and some order of the
    plan's steps has the queue that full then."""
    snap = ix.snapshot
    usage: dict[str, dict[FR, int]] = defaultdict(lambda: defaultdict(int))
    for w in snap.workloads:
        if w.state is WorkloadState.RUNNING and w.cluster_queue in snap.cluster_queues:
            _charge(usage, w.queue_name, ix.coverage[w.queue_name], w, w.assignment)
    for entry in admitted.values():
        name = entry.admission.cluster_queue
        if name in snap.cluster_queues:
            _charge(usage, name, ix.coverage[name], entry.workload, [psa for _, psa in entry.pairs])
    out: dict[str, dict[FR, int]] = {}
    for name, per_fr in usage.items():
        table = quota_table(snap.cluster_queues[name].resource_groups)
        over = {fr: v - table.get(fr, (0, None, None))[0] for fr, v in per_fr.items()
                if v > table.get(fr, (0, None, None))[0]}
        if over:
            out[name] = over
    return out


def _check_preemption_policy(ix: SnapshotIndex, workload: Workload, eviction: Eviction,
                             admitted: Mapping[ObjectRef, AdmittedEntry], out: list[str]) -> None:
    """Who may be evicted, and for whom.

    Never non-preemptible work, never work younger than policy.minimum_runtime_seconds
    (measured from admitted_at; work with no admitted_at is not held back). And at
    least one workload of `for_` admitted by this plan must be allowed to evict it by
    its ClusterQueue's spec.preemption (see `preemption_verdict`), with the reason
    that rule gives: Preempted within the queue, Reclaimed across the cohort.
    """
    ref, snapshot = workload.ref, ix.snapshot
    if workload.non_preemptible:
        out.append(f"{ref}: evicted but it is non-preemptible")
    minimum = snapshot.policy.minimum_runtime_seconds
    if minimum > 0 and workload.admitted_at is not None:
        ran = snapshot.now - workload.admitted_at
        if ran < minimum:
            out.append(f"{ref}: evicted after {ran:.0f}s running, minimum runtime is {minimum:.0f}s")
    if workload.state is not WorkloadState.RUNNING:
        return  # reported above
    if not eviction.for_:
        out.append(f"{ref}: evicted for no workload; an eviction must make room for an admission of this plan")
        return
    refusals: list[str] = []
    for target in eviction.for_:
        entry = admitted.get(target)
        if entry is None:
            continue  # reported by the caller
        reason, why = preemption_verdict(ix, entry.workload, entry.admission.cluster_queue, workload,
                                          borrows_alone(ix, entry))
        if reason is None:
            refusals.append(f"not for {target}: {why}")
        elif reason != eviction.reason:
            refusals.append(f"for {target} the reason is {reason}, not {eviction.reason}")
        else:
            return
    if refusals:
        out.append(f"{ref}: eviction not allowed by the preemption policies: " + "; ".join(refusals[:MAX_NAMED]))


def preemption_verdict(ix: SnapshotIndex, preemptor: Workload, cq_name: str, victim: Workload,
                        borrows: bool) -> tuple[str | None, str]:
    """Kueue's rules on base priorities: ("Preempted" | "Reclaimed", "") or (None, why not).

    Same ClusterQueue, withinClusterQueue: LowerPriority (victim's priority below the
    preemptor's) or LowerOrNewerEqualPriority (below, or equal and the victim queued
    later). Another ClusterQueue of the same cohort tree: only one that was borrowing
    before the plan (using more than its nominal quota of some flavor/resource), and
    reclaimWithinCohort Any, or LowerPriority with a lower priority; when the preemptor
    borrows (its admission alone takes its queue above nominal), borrowWithinCohort
    must also be LowerPriority, with a lower priority at most maxPriorityThreshold,
    unless Kueue's Configuration turns fair sharing on: then a borrowing preemptor may
    reclaim too (Kueue's canPreemptWhileBorrowing), its shares deciding which victims.
    """
    cq = ix.snapshot.cluster_queues.get(cq_name)
    if cq is None:
        return None, f"ClusterQueue {cq_name} does not exist"
    policy = cq.preemption
    mine, theirs = preemptor.priority, victim.priority
    if victim.cluster_queue == cq.name:
        rule = policy.within_cluster_queue
        if rule in ("LowerPriority", "LowerOrNewerEqualPriority") and theirs < mine:
            return "Preempted", ""
        if rule == "LowerOrNewerEqualPriority" and theirs == mine and victim.queued_at > preemptor.queued_at:
            return "Preempted", ""
        if rule not in ("LowerPriority", "LowerOrNewerEqualPriority"):
            return None, f"withinClusterQueue of ClusterQueue {cq.name} is {rule}"
        newer = " nor equal and queued later" if rule == "LowerOrNewerEqualPriority" else ""
        return None, f"withinClusterQueue is {rule} and priority {theirs} is not below {mine}{newer}"
    other = ix.snapshot.cluster_queues.get(victim.cluster_queue or "")
    if (other is None or other.inactive_reason is not None or cq.inactive_reason is not None
            or cohort_root(ix, cq) is None or cohort_root(ix, cq) != cohort_root(ix, other)):
        return None, f"ClusterQueue {victim.cluster_queue} is not in the cohort tree of ClusterQueue {cq.name}"
    if other.name not in _borrowing_before(ix) and other.name not in (ix.borrowing_after or {}):
        return None, f"ClusterQueue {other.name} was not borrowing"
    reclaim, borrow = policy.reclaim_within_cohort, policy.borrow_within_cohort
    if not (reclaim == "Any" or (reclaim == "LowerPriority" and theirs < mine)):
        tail = f" and priority {theirs} is not below {mine}" if reclaim == "LowerPriority" else ""
        return None, f"reclaimWithinCohort is {reclaim}{tail} (ClusterQueue {cq.name})"
    if borrows and not ix.snapshot.kueue_config.fair_sharing.enabled:
        # (with fair sharing Kueue asks no borrowWithinCohort: its strategies judge, verify_fair)
        threshold = policy.borrow_max_priority_threshold
        if borrow != "LowerPriority":
            return None, f"the preemptor borrows and borrowWithinCohort is {borrow} (ClusterQueue {cq.name})"
        if theirs >= mine:
            return None, f"borrowWithinCohort is LowerPriority but priority {theirs} is not below {mine}"
        if threshold is not None and theirs > threshold:
            return None, f"borrowWithinCohort: priority {theirs} is above maxPriorityThreshold {threshold}"
    return "Reclaimed", ""


def cohort_root(ix: SnapshotIndex, cq: ClusterQueue) -> str | None:
    """The root of the cohort tree above `cq` (parentName cycles cut), None without a cohort."""
    name = cq.cohort
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        parent = ix.cohort_parent.get(name)
        if parent is None:
            return name
        name = parent
    return name


def _borrowing_before(ix: SnapshotIndex) -> set[str]:
    """ClusterQueues whose running work (before the plan) uses more than their nominal
    quota of some flavor/resource. Every flavored resource of an assignment counts;
    one the queue does not list has nominal 0."""
    if ix.borrowing is None:
        usage: dict[str, dict[FR, int]] = defaultdict(lambda: defaultdict(int))
        for w in ix.snapshot.workloads:
            if w.state is not WorkloadState.RUNNING or w.cluster_queue is None:
                continue
            for psa in w.assignment:
                pod_set = pod_set_of(w, psa.name)
                if pod_set is None:
                    continue
                for resource, flavor in psa.flavors.items():
                    usage[w.cluster_queue][(flavor, resource)] += psa.count * pod_set.request.get(resource)
        borrowing = set()
        for name, per_fr in usage.items():
            cq = ix.snapshot.cluster_queues.get(name)
            table = quota_table(cq.resource_groups) if cq is not None else {}
            if any(amount > table.get(fr, (0, None, None))[0] for fr, amount in per_fr.items()):
                borrowing.add(name)
        ix.borrowing = borrowing
        ix.usage_before = {name: dict(per_fr) for name, per_fr in usage.items()}
    return ix.borrowing


def borrows_alone(ix: SnapshotIndex, entry: "AdmittedEntry") -> bool:
    """Would this admission alone take its queue above nominal (running work before the
    plan plus its own charges, with the flavors it was given)?"""
    _borrowing_before(ix)
    name = entry.admission.cluster_queue
    cq = ix.snapshot.cluster_queues.get(name)
    table = quota_table(cq.resource_groups) if cq is not None else {}
    used = dict(ix.usage_before.get(name, {}))
    for pod_set, psa in entry.pairs:
        for resource, flavor in psa.flavors.items():
            used[(flavor, resource)] = used.get((flavor, resource), 0) + psa.count * pod_set.request.get(resource)
            if used[(flavor, resource)] > table.get((flavor, resource), (0, None, None))[0]:
                return True
    return False


# ---------------------------------------------------------------- node capacity

def pod_set_of(workload: Workload, name: str) -> PodSet | None:
    for pod_set in workload.pod_sets:
        if pod_set.name == name:
            return pod_set
    return None


def _check_node_capacity(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef],
                         out: list[str]) -> None:
    """unmanaged + running (not evicted) + admitted <= allocatable, per node and resource."""
    new: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for entry in admitted.values():
        for pod_set, psa in entry.pairs:
            for node_name, count in _per_node(ix, psa).items():
                if node_name not in ix.nodes:
                    continue  # reported by the node check
                target = new[node_name]
                for resource, amount in pod_set.request.items():
                    target[resource] += amount * count
    if not new:
        return
    base: dict[str, dict[str, int]] = {name: defaultdict(int) for name in new}
    for name, usage in base.items():
        for resource, amount in ix.nodes[name].unmanaged.items():
            usage[resource] += amount
    for workload in ix.snapshot.workloads:
        if workload.state is not WorkloadState.RUNNING or workload.ref in evicted:
            continue
        for running in workload.assignment:
            shape = pod_set_of(workload, running.name)
            if shape is None:
                continue
            for node_name, count in running.pods_per_node().items():
                on_node = base.get(node_name)
                if on_node is not None:
                    for resource, amount in shape.request.items():
                        on_node[resource] += amount * count
    for name in sorted(new):
        node = ix.nodes[name]
        for resource in sorted(new[name]):
            added = new[name][resource]
            before = base[name][resource]
            limit = node.allocatable.get(resource)
            if added > 0 and before + added > max(limit, before):
                who = [ref for ref, entry in admitted.items()
                       if any(name in _per_node(ix, psa) for _, psa in entry.pairs)]
                out.append(f"node {name}: {resource} {before + added} > allocatable {limit} "
                           f"(running+unmanaged {before}); admitted there: {_named(who)}")


# ---------------------------------------------------------------- quota

def _cohort_links(snapshot: Snapshot) -> tuple[dict[str, str | None], set[str]]:
    """Cohort -> parent (implicit cohorts included), and the cohorts on a parent cycle.

    Cycle members are cut from their parents so the tree stays a tree; queues below
    them are reported by `cohort_problems`.
    """
    parent: dict[str, str | None] = {}
    for cohort in snapshot.cohorts.values():
        parent[cohort.name] = cohort.parent or None
    for cq in snapshot.cluster_queues.values():
        if cq.cohort:
            parent.setdefault(cq.cohort, None)
    for name in list(parent):
        p = parent[name]
        while p is not None and p not in parent:
            parent[p] = None
            p = None
    cycle: set[str] = set()
    state: dict[str, int] = {}  # 1 on the current walk, 2 done
    for start in sorted(parent):
        walk: list[str] = []
        node: str | None = start
        while node is not None and node not in state:
            state[node] = 1
            walk.append(node)
            node = parent[node]
        if node is not None and state[node] == 1:
            cycle.update(walk[walk.index(node):])
        for n in walk:
            state[n] = 2
    for name in cycle:
        parent[name] = None
    return parent, cycle


def cohort_problems(ix: SnapshotIndex, cq: ClusterQueue) -> list[str]:
    """Cohorts above `cq` that make it unable to admit: a parent cycle or an inactive cohort."""
    problems = []
    seen: set[str] = set()
    name = cq.cohort
    while name is not None and name not in seen:
        seen.add(name)
        if name in ix.cohort_cycle:
            problems.append(f"cohort {name} is on a parentName cycle")
            break
        cohort = ix.snapshot.cohorts.get(name)
        if cohort is not None and cohort.inactive_reason:
            problems.append(f"cohort {name} is inactive: {cohort.inactive_reason}")
        name = ix.cohort_parent.get(name)
    return problems


class VerifierQuotaTree:
    """Kueue's sharing tree for quota checks, over active ClusterQueues and all cohorts.

    Keys are ("cq", name) and ("cohort", name). Inactive ClusterQueues are left out
    of the tree (their quota and usage alike), as in Kueue's scheduling snapshot.
    """

    def __init__(self, ix: SnapshotIndex):
        snap = ix.snapshot
        self.parent: dict[tuple[str, str], tuple[str, str] | None] = {}
        self.limits: dict[tuple[str, str], dict[FR, tuple[int, int | None, int | None]]] = {}
        for name, up in ix.cohort_parent.items():
            self.parent[("cohort", name)] = ("cohort", up) if up is not None else None
            cohort = snap.cohorts.get(name)
            self.limits[("cohort", name)] = quota_table(cohort.resource_groups if cohort else ())
        for cq in snap.cluster_queues.values():
            if cq.inactive_reason is not None:
                continue
            key = ("cq", cq.name)
            self.parent[key] = ("cohort", cq.cohort) if cq.cohort else None
            self.limits[key] = quota_table(cq.resource_groups)
        self.children: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for key, above in self.parent.items():
            if above is not None:
                self.children[above].append(key)
        self.roots = sorted(k for k, p in self.parent.items() if p is None)
        self._order: list[tuple[str, str]] | None = None
        self._static: dict[FR, tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]] = {}

    def quota(self, key: tuple[str, str], fr: FR) -> tuple[int, int | None, int | None]:
        return self.limits[key].get(fr, (0, None, None))

    def subtree_and_guaranteed(self, fr: FR) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """subtree(n) = nominal(n) + sum_c (subtree(c) - guaranteed(c));
        guaranteed(n) = max(0, subtree(n) - lendingLimit(n)) if set, else 0.
        (Quota only: worked out once per flavor/resource; callers only read them.)"""
        found = self._static.get(fr)
        if found is not None:
            return found
        subtree: dict[tuple[str, str], int] = {}
        guaranteed: dict[tuple[str, str], int] = {}
        for key in self._post_order():
            nominal, _, lending = self.quota(key, fr)
            subtree[key] = nominal + sum(subtree[c] - guaranteed[c] for c in self.children.get(key, ()))
            guaranteed[key] = max(0, subtree[key] - lending) if lending is not None else 0
        self._static[fr] = subtree, guaranteed
        return subtree, guaranteed

    def usage(self, fr: FR, cq_usage: Mapping[str, Mapping[FR, int]], guaranteed: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
        """usage(cq) as given; usage(cohort) = sum_c max(0, usage(c) - guaranteed(c))."""
        usage: dict[tuple[str, str], int] = {}
        for key in self._post_order():
            if key[0] == "cq":
                usage[key] = cq_usage.get(key[1], {}).get(fr, 0)
            else:
                usage[key] = sum(max(0, usage[c] - guaranteed[c]) for c in self.children.get(key, ()))
        return usage

    def _post_order(self) -> list[tuple[str, str]]:
        if self._order is not None:
            return self._order
        order: list[tuple[str, str]] = []
        stack: list[tuple[tuple[str, str], bool]] = [(r, False) for r in reversed(self.roots)]
        while stack:
            key, expanded = stack.pop()
            if expanded:
                order.append(key)
                continue
            stack.append((key, True))
            for child in sorted(self.children.get(key, ()), reverse=True):
                stack.append((child, False))
        self._order = order
        return order


def quota_table(groups: Iterable[ResourceGroup]) -> dict[FR, tuple[int, int | None, int | None]]:
    table: dict[FR, tuple[int, int | None, int | None]] = {}
    for group in groups:
        for fq in group.flavors:
            for resource, q in fq.resources.items():
                table[(fq.flavor, resource)] = (q.nominal, q.borrowing_limit, q.lending_limit)
    return table


def _charge(usage: dict[str, dict[FR, int]], cq: str, covered: Mapping[str, int], workload: Workload,
            assignments: Iterable[PodSetAssignment], pod_sets: Mapping[str, PodSet] | None = None) -> None:
    """Add count x request of every flavored resource the queue covers to `usage[cq]`
    (an uncovered one is no quota usage; a plan that flavors one is reported by the flavor check)."""
    target = usage.setdefault(cq, defaultdict(int))
    for psa in assignments:
        pod_set = pod_sets.get(psa.name) if pod_sets is not None else pod_set_of(workload, psa.name)
        if pod_set is None:
            continue
        for resource, flavor in psa.flavors.items():
            if resource not in covered:
                continue
            amount = pod_set.request.get(resource) * psa.count
            if amount:
                target[(flavor, resource)] += amount


def _check_quota(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef], out: list[str]) -> None:
    """Hierarchical quota per (flavor, resource) touched by the admissions.

    Constraints: every tree node n with a parent and a borrowingLimit:
    usage(n) <= subtree(n) + borrowingLimit(n); every root: usage(root) <= subtree(root);
    each with the pre-existing-overuse relaxation of the module docstring.
    """
    snap = ix.snapshot
    new: dict[str, dict[FR, int]] = {}
    who: dict[FR, dict[str, set[ObjectRef]]] = defaultdict(lambda: defaultdict(set))
    for ref, entry in admitted.items():
        cq = snap.cluster_queues.get(entry.admission.cluster_queue)
        if cq is None or cq.inactive_reason is not None:
            continue  # reported by the identity check
        pod_sets = {ps.name: ps for ps, _ in entry.pairs}
        mine: dict[str, dict[FR, int]] = {}
        _charge(mine, cq.name, ix.coverage[cq.name], entry.workload, [psa for _, psa in entry.pairs], pod_sets)
        target = new.setdefault(cq.name, defaultdict(int))
        for fr, amount in mine[cq.name].items():
            target[fr] += amount
            if amount > 0:
                who[fr][cq.name].add(ref)
    touched = sorted({fr for per in new.values() for fr, v in per.items() if v > 0})
    if not touched:
        return
    base: dict[str, dict[FR, int]] = {}
    for workload in snap.workloads:
        if workload.state is not WorkloadState.RUNNING or workload.ref in evicted or workload.cluster_queue is None:
            continue
        if workload.cluster_queue in snap.cluster_queues:
            _charge(base, workload.cluster_queue, ix.coverage[workload.cluster_queue], workload, workload.assignment)
    final: dict[str, dict[FR, int]] = {}
    for cq_name in set(base) | set(new):
        merged: dict[FR, int] = defaultdict(int)
        for source in (base.get(cq_name, {}), new.get(cq_name, {})):
            for fr, amount in source.items():
                merged[fr] += amount
        final[cq_name] = merged
    tree = VerifierQuotaTree(ix)
    for fr in touched:
        check_quota_fr(tree, fr, base, final, who[fr], out)


def check_quota_fr(tree: VerifierQuotaTree, fr: FR, base: Mapping[str, Mapping[FR, int]], final: Mapping[str, Mapping[FR, int]],
                   who: Mapping[str, set[ObjectRef]], out: list[str]) -> None:
    """One flavor/resource over the whole tree: usage per queue before the plan (`base`)
    and with its admissions (`final`); `who`: the admitted workloads per queue, to name."""
    subtree, guaranteed = tree.subtree_and_guaranteed(fr)
    before = tree.usage(fr, base, guaranteed)
    after = tree.usage(fr, final, guaranteed)
    flavor, resource = fr
    for key in sorted(after):
        parent = tree.parent[key]
        borrowing = tree.quota(key, fr)[1]
        if parent is None:
            limit, what = subtree[key], "its quota"
        elif borrowing is not None:
            limit, what = subtree[key] + borrowing, "quota + borrowingLimit"
        else:
            continue
        if after[key] > max(limit, before[key]):
            refs = [r for cq, refs in who.items() if _under(tree, ("cq", cq), key) for r in refs]
            kind = "Cohort" if key[0] == "cohort" else "ClusterQueue"
            out.append(f"{kind} {key[1]}: {resource} of flavor {flavor} "
                       f"uses {after[key]} > {what} {limit} (before the plan {before[key]}); "
                       f"admitted: {_named(refs)}")


def _under(tree: VerifierQuotaTree, node: tuple[str, str], ancestor: tuple[str, str]) -> bool:
    current: tuple[str, str] | None = node
    while current is not None:
        if current == ancestor:
            return True
        current = tree.parent.get(current)
    return False
