"""The placement rules of an admission: may the workload be admitted to this queue at
all (state, queue, namespace, cohort), the gang (every pod set, its count, placed in
full), the flavors (one listed flavor per resource group, their taints and topology),
the nodes (existing, usable, allowed), the topology (one domain of a required level,
whole slices, pod-set groups sharing a domain), the nodes' capacity, and the
ProvisioningRequest admission checks. A migration's new place is held to the same
rules (planner/verify/moves.py). Models and planner.verify.index only, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

from models import Admission, ClusterQueue, ObjectRef, PodSet, PodSetAssignment, ResourceFlavor, Workload, WorkloadState
from models.objects import tolerated
from planner.verify.index import (
    PODS, AdmittedEntry, SnapshotIndex, cohort_problems, label_at, levels_with, named, namespace_allowed, node_problems,
    listed_once, per_node, pod_set_of, pods_by_domain,
)
from planner.verify.violation import Rule, Violation


def check_provisioning(ix: SnapshotIndex, admissions: Sequence[Admission], out: list[Violation]) -> None:
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
                out.append(Violation(Rule.PROVISIONING, f"{admission.workload}: admitted through ProvisioningRequest admission check {check} "
                                     "with no request", workloads=(admission.workload,), queue=admission.cluster_queue))
                continue
            _, name, true = found
            bad = sorted(true & {"Failed", "BookingExpired", "CapacityRevoked"})
            if "Provisioned" not in true or bad:
                state = ", ".join(sorted(true)) or "no condition"
                out.append(Violation(Rule.PROVISIONING, f"{admission.workload}: admitted through ProvisioningRequest admission check {check} "
                                     f"but request {name} is not Provisioned ({state})",
                                     workloads=(admission.workload,), queue=admission.cluster_queue))


# ---------------------------------------------------------------- admissions

def check_admissions(ix: SnapshotIndex, admissions: tuple[Admission, ...], out: list[Violation]) -> dict[ObjectRef, AdmittedEntry]:
    """Per-admission rules; returns the first admission of every existing workload."""
    admitted: dict[ObjectRef, AdmittedEntry] = {}
    for admission in admissions:
        ref = admission.workload
        workload = listed_once(ix, ref, admitted, Rule.ADMISSION, "admitted", out)
        if workload is None:
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


def _check_identity(ix: SnapshotIndex, workload: Workload, admission: Admission, out: list[Violation]) -> None:
    """State, queue and namespace: may this workload be admitted to this queue at all?"""
    ref, snap = workload.ref, ix.snapshot
    if workload.state is not WorkloadState.PENDING:
        out.append(Violation(Rule.ADMISSION, f"{ref}: admitted but it is {workload.state.value}, not pending",
                             workloads=(ref,), queue=admission.cluster_queue))
    if workload.blocked_reason:
        out.append(Violation(Rule.ADMISSION, f"{ref}: admitted but blocked: {workload.blocked_reason}",
                             workloads=(ref,), queue=admission.cluster_queue))
    if workload.cluster_queue != admission.cluster_queue:
        out.append(Violation(Rule.ADMISSION, f"{ref}: admitted to ClusterQueue {admission.cluster_queue} "
                             f"but its queue is {workload.cluster_queue}", workloads=(ref,), queue=admission.cluster_queue))
    local = snap.local_queues.get((ref.namespace, workload.local_queue))
    if local is not None and local.cluster_queue != admission.cluster_queue:
        out.append(Violation(Rule.ADMISSION, f"{ref}: LocalQueue {ref.namespace}/{workload.local_queue} points at "
                             f"{local.cluster_queue}, not {admission.cluster_queue}",
                             workloads=(ref,), queue=admission.cluster_queue))
    cq = snap.cluster_queues.get(admission.cluster_queue)
    if cq is None:
        out.append(Violation(Rule.ADMISSION, f"{ref}: ClusterQueue {admission.cluster_queue} does not exist",
                             workloads=(ref,), queue=admission.cluster_queue))
        return
    if cq.inactive_reason is not None:
        out.append(Violation(Rule.ADMISSION, f"{ref}: ClusterQueue {cq.name} is inactive: {cq.inactive_reason}",
                             workloads=(ref,), queue=admission.cluster_queue))
    for problem in cohort_problems(ix, cq):
        out.append(Violation(Rule.ADMISSION, f"{ref}: ClusterQueue {cq.name}: {problem}",
                             workloads=(ref,), queue=admission.cluster_queue))
    if not namespace_allowed(snap, cq, ref.namespace):
        out.append(Violation(Rule.ADMISSION, f"{ref}: namespace {ref.namespace} is not allowed by ClusterQueue {cq.name}'s namespaceSelector",
                             workloads=(ref,), queue=admission.cluster_queue))


def check_gang(workload: Workload, admission: Admission, out: list[Violation]) -> list[tuple[PodSet, PodSetAssignment]]:
    """One assignment per pod set, with a count the pod set allows, placed in full."""
    ref = workload.ref
    by_name: dict[str, PodSetAssignment] = {}
    for psa in admission.pod_sets:
        if psa.name in by_name:
            out.append(Violation(Rule.PLACEMENT, f"{ref}: pod set {psa.name} assigned more than once",
                                 workloads=(ref,)))
            continue
        by_name[psa.name] = psa
    known = {ps.name for ps in workload.pod_sets}
    for name in sorted(set(by_name) - known):
        out.append(Violation(Rule.PLACEMENT, f"{ref}: assignment for unknown pod set {name}", workloads=(ref,)))
    pairs: list[tuple[PodSet, PodSetAssignment]] = []
    for pod_set in workload.pod_sets:
        found = by_name.get(pod_set.name)
        if found is None:
            out.append(Violation(Rule.PLACEMENT, f"{ref}: pod set {pod_set.name} has no assignment (gang: all pod sets or none)",
                                 workloads=(ref,)))
            continue
        psa = found
        low = pod_set.count if pod_set.min_count is None else pod_set.min_count
        if not low <= psa.count <= pod_set.count:
            want = f"{pod_set.count}" if pod_set.min_count is None else f"{low}..{pod_set.count}"
            out.append(Violation(Rule.PLACEMENT, f"{ref}: pod set {pod_set.name} admitted with {psa.count} pods, needs {want}",
                                 workloads=(ref,)))
        placed = 0
        for values, count in psa.domains:
            if count <= 0:
                out.append(Violation(Rule.PLACEMENT, f"{ref}: pod set {pod_set.name} has a domain {list(values)} with count {count}",
                                     workloads=(ref,)))
            placed += count
        if placed != psa.count:
            out.append(Violation(Rule.PLACEMENT, f"{ref}: pod set {pod_set.name} places {placed} pods but its count is {psa.count}",
                                 workloads=(ref,)))
        pairs.append((pod_set, psa))
    return pairs


def check_flavors(ix: SnapshotIndex, cq: ClusterQueue | None, workload: Workload, pod_set: PodSet,
                   psa: PodSetAssignment, out: list[Violation]) -> list[ResourceFlavor]:
    """One listed flavor per resource group for every requested covered resource.

    Returns the distinct chosen flavors that exist, sorted by name.
    """
    ref, snap = workload.ref, ix.snapshot
    where = f"{ref}: pod set {pod_set.name}"
    chosen = {name: snap.flavors[name] for name in set(psa.flavors.values()) if name in snap.flavors}
    for name in sorted(set(psa.flavors.values()) - set(chosen)):
        out.append(Violation(Rule.PLACEMENT, f"{where}: flavor {name} does not exist", workloads=(ref,), flavor=name))
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
                out.append(Violation(Rule.PLACEMENT, f"{where}: flavor {flavor} given for {resource}, which ClusterQueue {cq.name} does not cover",
                                     workloads=(ref,), flavor=flavor))
            elif resource != PODS:
                out.append(Violation(Rule.PLACEMENT, f"{where}: requests {resource}, which ClusterQueue {cq.name} does not cover",
                                     workloads=(ref,)))
            continue
        if flavor is None:
            out.append(Violation(Rule.PLACEMENT, f"{where}: no flavor for {resource}, which ClusterQueue {cq.name} covers",
                                 workloads=(ref,)))
            continue
        group = cq.resource_groups[gi]
        listed = next((fq for fq in group.flavors if fq.flavor == flavor), None)
        if listed is None:
            out.append(Violation(Rule.PLACEMENT, f"{where}: flavor {flavor} for {resource} is not in ClusterQueue {cq.name}'s resource group",
                                 workloads=(ref,), flavor=flavor))
        elif resource in requested and resource not in listed.resources:
            out.append(Violation(Rule.PLACEMENT, f"{where}: ClusterQueue {cq.name} lists no quota for {resource} in flavor {flavor}",
                                 workloads=(ref,), flavor=flavor))
        previous = group_flavor.setdefault(gi, flavor)
        if previous != flavor:
            out.append(Violation(Rule.PLACEMENT, f"{where}: resource group {list(group.covered_resources)} gets two flavors "
                                 f"({previous}, {flavor}); one pod set takes one flavor per group", workloads=(ref,)))
    for name in sorted(chosen):
        # Kueue tolerates a flavor's nodeTaints with the pod set's tolerations plus the flavor's own.
        if not tolerated(chosen[name].node_taints, pod_set.tolerations + chosen[name].tolerations):
            out.append(Violation(Rule.PLACEMENT, f"{where}: does not tolerate flavor {name}'s nodeTaints",
                                 workloads=(ref,), flavor=name))
        if chosen[name].topology_name is not None and ix.flavor_levels(chosen[name]) is None:
            out.append(Violation(Rule.PLACEMENT, f"{where}: flavor {name} names Topology {chosen[name].topology_name}, which does not exist",
                                 workloads=(ref,), flavor=name))
    return [chosen[n] for n in sorted(chosen)]


def check_nodes(ix: SnapshotIndex, workload: Workload, pod_set: PodSet, psa: PodSetAssignment,
                 flavors: list[ResourceFlavor], out: list[Violation]) -> None:
    """Every pod on an existing, usable node its flavors and selectors allow."""
    where = f"{workload.ref}: pod set {pod_set.name}"
    shape = (tuple(f.name for f in flavors), tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations)
    for values, _ in psa.domains:
        if not values:
            out.append(Violation(Rule.PLACEMENT, f"{where}: a domain has no values (no node named)",
                                 workloads=(workload.ref,)))
            continue
        if len(values) != len(psa.levels):
            out.append(Violation(Rule.PLACEMENT, f"{where}: domain {list(values)} does not match levels {list(psa.levels)}",
                                 workloads=(workload.ref,)))
        node = ix.nodes.get(values[-1])
        if node is None:
            out.append(Violation(Rule.PLACEMENT, f"{where}: node {values[-1]} does not exist",
                                 workloads=(workload.ref,), node=values[-1]))
            continue
        for level, value in zip(psa.levels[:-1], values[:-1]):
            if label_at(node, level) != value:
                out.append(Violation(Rule.PLACEMENT, f"{where}: node {node.name} has {level}={label_at(node, level)}, assignment says {value}",
                                     workloads=(workload.ref,), node=node.name))
        key = (node.name, shape)
        problems = ix.node_problems.get(key)
        if problems is None:
            problems = ix.node_problems[key] = node_problems(ix, node, pod_set, flavors)
        out.extend(Violation(Rule.PLACEMENT, f"{where}: node {node.name} {problem}",
                             workloads=(workload.ref,), node=node.name)
                   for problem in problems)



def check_topology(ix: SnapshotIndex, workload: Workload, pod_set: PodSet, psa: PodSetAssignment,
                    flavors: list[ResourceFlavor], out: list[Violation]) -> None:
    """Required level: one domain. Slices: whole groups of `size` per domain."""
    request = pod_set.topology
    where = f"{workload.ref}: pod set {pod_set.name}"
    if request.mode == "required" and request.level:
        levels = levels_with(ix, flavors, request.level)
        if levels is None:
            out.append(Violation(Rule.TOPOLOGY, f"{where}: requires level {request.level}, which no chosen flavor's topology has",
                                 workloads=(workload.ref,)))
        else:
            domains = pods_by_domain(ix, psa, levels, request.level)
            if len(domains) > 1:
                out.append(Violation(Rule.TOPOLOGY, f"{where}: requires one {request.level} domain but spans {len(domains)}",
                                     workloads=(workload.ref,)))
    for layer in request.slices:
        if layer.size <= 0:
            out.append(Violation(Rule.TOPOLOGY, f"{where}: slice size {layer.size} at {layer.level} is not positive",
                                 workloads=(workload.ref,)))
            continue
        if psa.count % layer.size:
            out.append(Violation(Rule.TOPOLOGY, f"{where}: {psa.count} pods are not whole slices of {layer.size} at {layer.level}",
                                 workloads=(workload.ref,)))
        levels = levels_with(ix, flavors, layer.level)
        if levels is None:
            out.append(Violation(Rule.TOPOLOGY, f"{where}: slice level {layer.level} is in no chosen flavor's topology",
                                 workloads=(workload.ref,)))
            continue
        for domain, count in sorted(pods_by_domain(ix, psa, levels, layer.level).items(), key=str):
            if count % layer.size:
                out.append(Violation(Rule.TOPOLOGY, f"{where}: {count} pods in {layer.level} {domain[-1]} straddle slices of {layer.size}",
                                     workloads=(workload.ref,)))


def check_groups(ix: SnapshotIndex, workload: Workload, pairs: list[tuple[PodSet, PodSetAssignment]], out: list[Violation]) -> None:
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
                    domains.update(pods_by_domain(ix, psa, levels, level))
            if len(domains) > 1:
                out.append(Violation(Rule.TOPOLOGY, f"{workload.ref}: pod-set group {name} spans {len(domains)} {level} domains, must share one",
                                     workloads=(workload.ref,)))


def check_node_capacity(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef],
                         out: list[Violation]) -> None:
    """unmanaged + running (not evicted) + admitted <= allocatable, per node and resource."""
    new: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for entry in admitted.values():
        for pod_set, psa in entry.pairs:
            for node_name, count in per_node(ix, psa).items():
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
                       if any(name in per_node(ix, psa) for _, psa in entry.pairs)]
                out.append(Violation(Rule.CAPACITY, f"node {name}: {resource} {before + added} > allocatable {limit} "
                                     f"(running+unmanaged {before}); admitted there: {named(who)}",
                                     workloads=tuple(sorted(set(who), key=str)), node=name))


