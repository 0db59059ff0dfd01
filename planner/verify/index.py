"""The verifier's shared ground: the snapshot's lookups and the small rules every rule
module reads (labels and selectors, node domains, the cohort tree and its quota).

Every rule module of planner/verify imports this one and models, never each other's
internals in a circle. Like all of the verifier, it re-derives what it needs from the
snapshot and must not import the code that makes plans. Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Container, Iterable, Mapping, Sequence, cast

from models import (
    Admission, ClusterQueue, Node, ObjectRef, PodSet, PodSetAssignment, ResourceFlavor, ResourceGroup, Snapshot, Workload,
)
from models.objects import tolerated
from planner.verify.violation import Rule, Violation

HOSTNAME = "kubernetes.io/hostname"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
PODS = "pods"
PREEMPTION_REASONS = frozenset({"Preempted", "Reclaimed"})
READINESS_REASONS = frozenset({"PodsReadyTimeout", "Deactivated"})   # waitForPodsReady, for nobody
EVICTION_REASONS = PREEMPTION_REASONS | READINESS_REASONS
MAX_NAMED = 5  # workloads named in one aggregate (capacity, quota) message

FR = tuple[str, str]  # (flavor, resource)


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


def named(refs: Iterable[ObjectRef]) -> str:
    names = sorted({str(r) for r in refs})
    shown = ", ".join(names[:MAX_NAMED])
    more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    return shown + more



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



def levels_with(ix: SnapshotIndex, flavors: list[ResourceFlavor], level: str) -> tuple[str, ...] | None:
    """The first chosen flavor's topology levels that contain `level` (hostname is always there)."""
    for flavor in flavors:
        levels = ix.flavor_levels(flavor)
        if levels and level in levels:
            return levels
    if level == HOSTNAME:
        return (HOSTNAME,)
    return None


def per_node(ix: SnapshotIndex, psa: PodSetAssignment) -> dict[str, int]:
    """Pods per node of an assignment of the plan, computed once (empty domains skipped)."""
    found = ix.per_node.get(id(psa))
    if found is None:
        found = ix.per_node[id(psa)] = psa.pods_per_node()
    return found


def pods_by_domain(ix: SnapshotIndex, psa: PodSetAssignment, levels: tuple[str, ...], level: str) -> dict[tuple[str | None, ...], int]:
    depth = levels.index(level)
    counts: dict[tuple[str | None, ...], int] = defaultdict(int)
    cache = ix.domains
    for node_name, count in per_node(ix, psa).items():
        key = (node_name, levels, depth)
        domain = cache.get(key)
        if domain is None:
            node = ix.nodes.get(node_name)
            if node is None:
                continue
            domain = cache[key] = _domain(node, levels, depth)
        counts[domain] += count
    return counts



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



def listed_once(ix: SnapshotIndex, ref: ObjectRef, seen: Container[ObjectRef], rule: Rule,
                verb: str, out: list[Violation]) -> Workload | None:
    """The workload a plan's admission, eviction or migration names, if it exists and is
    not among those `seen` before it; else None, with the violation ("admitted but not in
    the snapshot", "evicted more than once", ...) in `out`."""
    workload = ix.workloads.get(ref)
    if workload is None:
        out.append(Violation(rule, f"{ref}: {verb} but not in the snapshot", workloads=(ref,)))
        return None
    if ref in seen:
        out.append(Violation(rule, f"{ref}: {verb} more than once", workloads=(ref,)))
        return None
    return workload


def pairs_usage(pairs: Iterable[tuple[PodSet, PodSetAssignment]], coverage: Mapping[str, int]) -> dict[FR, int]:
    """(flavor, resource) -> count x request of the pod sets' flavored resources the queue
    covers (an uncovered one is no quota usage)."""
    out: dict[FR, int] = defaultdict(int)
    for pod_set, psa in pairs:
        for resource, flavor in psa.flavors.items():
            if resource in coverage and pod_set.request.get(resource):
                out[(flavor, resource)] += psa.count * pod_set.request.get(resource)
    return out


def pod_set_of(workload: Workload, name: str) -> PodSet | None:
    for pod_set in workload.pod_sets:
        if pod_set.name == name:
            return pod_set
    return None



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


def charge(usage: dict[str, dict[FR, int]], cq: str, covered: Mapping[str, int], workload: Workload,
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


