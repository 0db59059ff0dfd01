"""The fleet's own rules, checked on a plan across MultiKueue worker clusters.

Each worker's part is checked by planner.verify like any one-cluster plan; here only
what spans clusters: every admission names a known worker, a workload is admitted once
in the fleet (a gang never spans clusters), every pod set's nodes are nodes of the
admission's cluster, and the manager's ClusterQueues hold what runs and what is admitted.

The manager's quota is Kueue's, as for one cluster (planner.verify's quota arithmetic):
per flavor and resource, over the manager's cohort tree (nominal quota, borrowing and
lending limits, nested cohorts), with the verifier's relaxation for usage already above
a limit before the plan. What holds it: every workload a worker runs that the plan does
not evict (its counts there) and every admission (its counts in the plan), each with the
manager's flavors: those the planner reserved (`manager_flavors`, the manager's own
admission), else the manager's own admission in its snapshot, else, where the manager's
ClusterQueue offers one flavor for a resource, that one. Each must be a flavor the
ClusterQueue lists for the resource, one per resource group and pod set.
Models and planner/verify's index and quota only, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from models import Admission, ClusterQueue, ObjectRef, PodSetAssignment, Snapshot, Workload, WorkloadState
from planner.verify.index import FR, SnapshotIndex, VerifierQuotaTree, cohort_problems
from planner.verify.quota import check_quota_fr
from planner.verify.violation import Rule, Violation, messages

ManagerFlavors = Mapping[ObjectRef, Sequence[PodSetAssignment]]   # the manager's admission per workload
PODS = "pods"


def verify_fleet(workers: Mapping[str, Snapshot], manager: Snapshot, admissions: Sequence[Admission],
                 evicted: Iterable[ObjectRef] = (), manager_flavors: ManagerFlavors | None = None) -> list[str]:
    """Every broken fleet rule, as sentences (`check_fleet`'s)."""
    return messages(check_fleet(workers, manager, admissions, evicted, manager_flavors))


def check_fleet(workers: Mapping[str, Snapshot], manager: Snapshot, admissions: Sequence[Admission],
                evicted: Iterable[ObjectRef] = (), manager_flavors: ManagerFlavors | None = None) -> list[Violation]:
    """Every broken fleet rule; empty when the plan holds (`evicted`: the plan's
    evictions, whose manager quota is given back; `manager_flavors`: the manager's
    flavors per workload, as the planner reserved them; see the module docstring)."""
    out: list[Violation] = []
    nodes = {name: {n.name for n in snap.nodes} for name, snap in workers.items()}
    seen: dict[ObjectRef, str] = {}
    for a in admissions:
        if a.cluster is None or a.cluster not in workers:
            out.append(Violation(Rule.FLEET, f"{a.workload}: admitted on {a.cluster!r}, not a worker cluster of the fleet",
                                 workloads=(a.workload,)))
            continue
        if a.workload in seen:
            out.append(Violation(Rule.FLEET, f"{a.workload}: admitted on {seen[a.workload]} and again on {a.cluster}: "
                                 "a workload's pods are all on one cluster", workloads=(a.workload,)))
        seen[a.workload] = a.cluster
        for psa in a.pod_sets:
            foreign = sorted(set(psa.pods_per_node()) - nodes[a.cluster])
            if foreign:
                out.append(Violation(Rule.FLEET, f"{a.workload}: pod set {psa.name} on {', '.join(foreign[:3])}, not nodes of "
                                     f"cluster {a.cluster}: a workload's pods are all on one cluster", workloads=(a.workload,)))
    out.extend(manager_quota_problems(workers, manager, admissions, set(evicted), manager_flavors or {}))
    return out


def manager_quota_problems(workers: Mapping[str, Snapshot], manager: Snapshot, admissions: Sequence[Admission],
                           evicted: set[ObjectRef], given: ManagerFlavors) -> list[Violation]:
    """The manager's quota rules (module docstring)."""
    out: list[Violation] = []
    ix = SnapshotIndex(manager)
    base: dict[str, dict[FR, int]] = {}
    final: dict[str, dict[FR, int]] = {}
    who: dict[FR, dict[str, set[ObjectRef]]] = defaultdict(lambda: defaultdict(set))
    charged: set[ObjectRef] = set()
    for snap in workers.values():
        for w in sorted(snap.workloads, key=lambda w: w.ref):
            mine = ix.workloads.get(w.ref)
            if w.state is not WorkloadState.RUNNING or w.ref in evicted or w.ref in charged or mine is None:
                continue
            cq = _queue(ix, mine)
            if cq is None:
                continue      # held nothing the manager counts (an inactive or missing queue)
            charged.add(w.ref)
            amounts = _amounts(ix, cq, mine, {ps.name: ps.count for ps in w.assignment}, given, [])
            for table in (base, final):
                _add(table, cq.name, amounts)
    for a in admissions:
        mine = ix.workloads.get(a.workload)
        if mine is None or a.workload in charged:
            continue
        cq = _queue(ix, mine)
        if cq is None:
            out.append(Violation(Rule.MANAGER_QUOTA, f"{a.workload}: admitted, but the manager's ClusterQueue {mine.cluster_queue} "
                                 "is missing or inactive: the manager reserves no quota for it",
                                 workloads=(a.workload,), queue=mine.cluster_queue))
            continue
        out.extend(Violation(Rule.MANAGER_QUOTA, f"{a.workload}: manager ClusterQueue {cq.name} admits nothing: {p}",
                             workloads=(a.workload,), queue=cq.name) for p in cohort_problems(ix, cq))
        charged.add(a.workload)
        amounts = _amounts(ix, cq, mine, {ps.name: ps.count for ps in a.pod_sets}, given, out)
        _add(final, cq.name, amounts)
        for fr, amount in amounts.items():
            if amount > 0:
                who[fr][cq.name].add(a.workload)
    tree = VerifierQuotaTree(ix)
    problems: list[Violation] = []
    for fr in sorted(who):
        check_quota_fr(tree, fr, base, final, who[fr], problems)
    out.extend(replace(p, rule=Rule.MANAGER_QUOTA, message=f"manager {p.message}") for p in problems)
    return out


def _queue(ix: SnapshotIndex, workload: Workload) -> ClusterQueue | None:
    cq = ix.snapshot.cluster_queues.get(workload.cluster_queue or "")
    return cq if cq is not None and cq.inactive_reason is None else None


def _add(table: dict[str, dict[FR, int]], cq: str, amounts: Mapping[FR, int]) -> None:
    mine = table.setdefault(cq, {})
    for fr, amount in amounts.items():
        mine[fr] = mine.get(fr, 0) + amount


def _amounts(ix: SnapshotIndex, cq: ClusterQueue, workload: Workload, counts: Mapping[str, int],
             given: ManagerFlavors, out: list[Violation]) -> dict[FR, int]:
    """(flavor, resource) -> what `counts` pods of each pod set charge to the manager's
    queue, with the manager's flavors (module docstring); what has none, or one the queue
    does not list, is said in `out` (left out of the usage)."""
    named = {psa.name: psa.flavors for psa in given.get(workload.ref, ())}
    if not named and workload.state is WorkloadState.RUNNING:
        named = {psa.name: psa.flavors for psa in workload.assignment}
    groups = cq.resource_groups
    cover = ix.coverage[cq.name]
    usage: dict[FR, int] = {}
    for ps in workload.pod_sets:
        count = counts.get(ps.name, 0)
        if count <= 0:
            continue
        flavors = named.get(ps.name, {})
        per_group: dict[int, set[str]] = defaultdict(set)
        for resource, value in sorted(ps.request.items()):
            if value <= 0:
                continue
            g = cover.get(resource)
            if g is None:
                if resource != PODS:
                    out.append(Violation(Rule.MANAGER_QUOTA, f"{workload.ref}: pod set {ps.name} requests {resource}, which the manager's "
                                         f"ClusterQueue {cq.name} does not cover", workloads=(workload.ref,), queue=cq.name))
                continue
            listed = [fq.flavor for fq in groups[g].flavors if resource in fq.resources]
            flavor = flavors.get(resource) or (listed[0] if len(listed) == 1 else None)
            if flavor is None:
                out.append(Violation(Rule.MANAGER_QUOTA, f"{workload.ref}: pod set {ps.name}: no manager flavor for {resource} (ClusterQueue "
                                     f"{cq.name} offers {', '.join(listed) or 'none'})",
                                     workloads=(workload.ref,), queue=cq.name))
                continue
            if flavor not in listed:
                out.append(Violation(Rule.MANAGER_QUOTA, f"{workload.ref}: pod set {ps.name}: the manager's ClusterQueue {cq.name} lists no "
                                     f"quota for {resource} in flavor {flavor}", workloads=(workload.ref,), queue=cq.name))
                continue
            per_group[g].add(flavor)
            usage[(flavor, resource)] = usage.get((flavor, resource), 0) + value * count
        for g, chosen in sorted(per_group.items()):
            if len(chosen) > 1:
                out.append(Violation(Rule.MANAGER_QUOTA, f"{workload.ref}: pod set {ps.name} takes flavors {', '.join(sorted(chosen))} of one "
                                     f"resource group of the manager's ClusterQueue {cq.name}: Kueue gives it one",
                                     workloads=(workload.ref,), queue=cq.name))
    return usage
