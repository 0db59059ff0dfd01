"""ProvisioningRequests for what no plan can place: which requests a cycle wants, which go.

Pure: a Snapshot, the cycle's Plan and a planner in; the plan's `provisioning` section
out (planner/cluster/provisioning.py writes it). With the policy's `spec.provisioning`:

  1. Every ProvisioningRequest Stowplan made is kept while its workload waits for it or
     runs admitted through it (Provisioned); deleted when the workload is gone, evicted
     by this plan, admitted without it, no longer behind the check, or when the request
     failed, expired or was revoked before use (a new attempt, `-N+1`, replaces it: at
     most MAX_ATTEMPTS retries).
  2. The pending workloads the gate holds back (planner/snapshot/provisioning.py) that
     have no live request are the targets of the capacity what-if
     (planner.whatif.capacity.plan_additions), planned as if the autoscaler had granted
     them: the smallest addition of the policy's node templates that lets the cycle
     admit them. Each target that what-if admits gets one request, in queue order
     (priority, then age), while the new nodes the requests ask for stay within
     `maxNodesPerCycle`. A target admitted on today's nodes asks for no new node (the
     check-capacity class then confirms at once).
  3. A request holds one podSets entry per pod set, count as the what-if admitted it,
     and a PodTemplate per pod set (the pod set's per-pod requests, its node selector
     plus the flavor's node labels, its tolerations plus the flavor's), as Kueue's
     provisioning controller makes them, plus the node template's labels where the
     what-if put the whole pod set on new nodes of one template (so the autoscaler adds
     that kind); class and parameters from the check's ProvisioningRequestConfig.

The workload is admitted once its request reports Provisioned=True, by a later cycle,
on the nodes that cycle's snapshot holds: no plan counts capacity only promised.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Callable, Mapping, Sequence

from models import ObjectRef, Plan, Snapshot, Workload, WorkloadState
from models.capacity import NodeTemplate
from planner.base.solve_options import SolveOptions
from models.objects import PodSetAssignment, Toleration
from models.provisioning import (
    BOOKING_EXPIRED, CAPACITY_REVOKED, FAILED, PROVISIONED, DeletedRequest, ProvisioningCheck, ProvisioningRequestState,
    ProvisioningSection, RequestPodSet, WantedRequest, newest_requests,
)
from planner.whatif import capacity as capacity_plan
Planner = Callable[[Snapshot], Plan]
SPOILT = frozenset({FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED})

MAX_NAME = 253                 # a Kubernetes object name
MAX_ATTEMPTS = 3               # retries per workload and check (Kueue's default backoffLimitCount)
POD_TEMPLATE_PREFIX = "ppt"    # Kueue's prefix for a request's PodTemplates
WHAT_IF_SOLVER = "greedy"      # the solver of the what-if's tries (plan_cycle says why)
# The time each try's Kueue's way may take: no deadline in practice (plan_snapshot takes a
# number). Kueue's way is a replay bounded by its work; a deadline of the cycle's time
# limit would let a loaded machine cut a try short, and then which nodes are asked for,
# and for which workload, would depend on the machine's speed (plan_cycle says more).
WHAT_IF_SECONDS = 24 * 3600.0


def limit_name(full: str) -> str:
    """`full` if it is a valid length, else cut with a hash of the whole (stable, unique)."""
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    return f"{full[:MAX_NAME - 11].rstrip('-.')}-{digest}"


def request_name(workload: ObjectRef, check: str, attempt: int) -> str:
    """Kueue's shape, WORKLOAD-CHECK-ATTEMPT, with the workload's kind in front (Stowplan has
    no Workload objects: a Job and a JobSet of one name must not share a request)."""
    return limit_name(f"{workload.kind.lower()}-{workload.name}-{check}-{attempt}")


def pod_template_name(request: str, pod_set: str) -> str:
    return limit_name(f"{POD_TEMPLATE_PREFIX}-{request}-{pod_set}")


def checks_of(snapshot: Snapshot, workload: Workload) -> tuple[ProvisioningCheck, ...]:
    queue = snapshot.cluster_queues.get(workload.cluster_queue or "")
    if queue is None:
        return ()
    return tuple(snapshot.provisioning_checks[n] for n in queue.admission_checks if n in snapshot.provisioning_checks)


def plan_provisioning(snapshot: Snapshot, plan: Plan, planner: Planner) -> ProvisioningSection | None:
    """The plan's `provisioning` section, or None when the policy does not enable it."""
    policy = snapshot.policy.provisioning
    if not policy.enabled:
        return None
    workloads = {w.ref: w for w in snapshot.workloads}
    evicted = {e.workload for e in plan.evictions}
    newest = newest_requests(snapshot.provisioning_requests)
    kept: list[WantedRequest] = []
    deletions: list[DeletedRequest] = []
    notes: list[str] = []
    live: set[tuple[ObjectRef, str]] = set()       # (workload, check) with a request that stays
    attempts: dict[tuple[ObjectRef, str], int] = {}
    for r in sorted(snapshot.provisioning_requests, key=lambda r: (r.namespace, r.name)):
        w = workloads.get(r.workload)
        key = (r.workload, r.check)
        attempts[key] = max(attempts.get(key, 0), r.attempt)
        reason = _unneeded(snapshot, r, w, newest[key] is r, r.workload in evicted)
        if reason:
            deletions.append(DeletedRequest(r.namespace, r.name, r.workload, reason, r.pod_templates))
            continue
        live.add(key)
        if r.spent:
            notes.append(f"{r.workload}: {MAX_ATTEMPTS} retries of admission check {r.check} failed, expired or "
                         f"were revoked; no new request (delete {r.namespace}/{r.name} to try again)")
        check = snapshot.provisioning_checks[r.check]
        kept.append(WantedRequest(r.namespace, r.name, r.workload, r.check, check.class_name,
                                  dict(check.parameters), (), attempt=r.attempt, create=False))
    targets: list[tuple[Workload, tuple[tuple[ProvisioningCheck, int], ...]]] = []
    for w in snapshot.workloads:
        if w.ref not in snapshot.provisioning_gated or w.state != WorkloadState.PENDING:
            continue
        wanted: list[tuple[ProvisioningCheck, int]] = []
        for check in checks_of(snapshot, w):
            key = (w.ref, check.name)
            if check.problem or key in live:
                continue
            wanted.append((check, attempts.get(key, 0) + 1))
        if wanted:
            targets.append((w, tuple(wanted)))
    created = _created(snapshot, targets, planner, notes) if targets else []
    return ProvisioningSection(tuple(sorted(kept + created, key=lambda r: (r.namespace, r.name))),
                               tuple(deletions), tuple(notes))


def _unneeded(snapshot: Snapshot, r: ProvisioningRequestState, w: Workload | None, newest: bool,
              evicted: bool) -> str:
    """Why request `r` is no longer needed, or ""."""
    if w is None:
        return "its workload is gone"
    if not newest:
        return "a later attempt replaces it"
    if evicted:
        return "its workload is evicted by this plan"
    if r.check not in {c.name for c in checks_of(snapshot, w)}:
        return f"ClusterQueue {w.cluster_queue} no longer has admission check {r.check}"
    if w.state == WorkloadState.RUNNING:
        # Provisioned (even if since revoked or expired): it was admitted through it
        return "" if PROVISIONED in r.true_conditions else "its workload runs, admitted without it"
    if w.state != WorkloadState.PENDING:
        return "its workload is not pending"
    if r.spent and r.attempt > MAX_ATTEMPTS:
        return ""       # the last retry: kept as the record, so no attempt 1 starts over
    if r.spent:
        return "it reports " + " and ".join(sorted(SPOILT & r.true_conditions)) + ": a new attempt replaces it"
    return ""


def _created(snapshot: Snapshot, targets: Sequence[tuple[Workload, tuple[tuple[ProvisioningCheck, int], ...]]],
             planner: Planner, notes: list[str]) -> list[WantedRequest]:
    """New requests for `targets`: the capacity what-if, then one request per admitted target."""
    policy = snapshot.policy.provisioning
    refs = {w.ref for w, _ in targets}
    # as if granted: the targets' gate lifted, and the verifier's provisioning rule off
    workloads = tuple(replace(w, blocked_reason=None)
                      if w.ref in refs and w.blocked_reason == snapshot.provisioning_gated.get(w.ref) else w
                      for w in snapshot.workloads)
    granted = replace(snapshot, workloads=workloads,
                      policy=replace(snapshot.policy, provisioning=replace(policy, enabled=False)))
    target_workloads = [w for w in granted.workloads if w.ref in refs]
    templates = policy.templates
    answer = capacity_plan.plan_additions(granted, templates, target_workloads, planner)
    notes.extend(f"capacity what-if: {n}" for n in answer.notes)
    notes.extend(f"{b.workload}: quota, not nodes: {b.reason}" for b in answer.quota_blocked)
    added = capacity_plan.added_nodes(granted, templates, answer.units)
    template_of = {n.name: _template_name(n.name, [t.name for t in templates]) for n in added}
    admissions = {a.workload: a for a in answer.plan.admissions}
    budget = policy.max_nodes_per_cycle
    out: list[WantedRequest] = []
    by_ref = {w.ref: (w, checks) for w, checks in targets}
    order = sorted(by_ref.values(), key=lambda t: (-t[0].priority, t[0].queued_at, t[0].ref.namespace,
                                                   t[0].ref.kind, t[0].ref.name))
    for w, checks in order:
        admission = admissions.get(w.ref)
        if admission is None:
            notes.append(f"{w.ref}: no addition of the node templates lets a plan admit it; no request")
            continue
        nodes: dict[str, int] = {}
        for a in admission.pod_sets:
            for host in a.pods_per_node():
                if host in template_of:
                    nodes[template_of[host]] = nodes.get(template_of[host], 0) + 1
        need = sum(nodes.values())
        if budget is not None and need > budget:
            notes.append(f"{w.ref}: needs {need} new nodes, more than maxNodesPerCycle leaves ({budget}); "
                         "asked for in a later cycle")
            continue
        if budget is not None:
            budget -= need
        for check, attempt in checks:
            name = request_name(w.ref, check.name, attempt)
            out.append(WantedRequest(w.ref.namespace, name, w.ref, check.name, check.class_name,
                                     dict(check.parameters),
                                     _pod_sets(snapshot, w, admission.pod_sets, name, template_of, templates),
                                     attempt=attempt, create=True, nodes=dict(sorted(nodes.items()))))
    return out


def _template_name(node: str, templates: Sequence[str]) -> str:
    """The template a what-if node came from (capacity_plan.unit_nodes names them TEMPLATE-UNIT[-HOST])."""
    return max((t for t in templates if node.startswith(t + "-")), key=len, default=node)


def _pod_sets(snapshot: Snapshot, w: Workload, assigned: Sequence[PodSetAssignment], name: str,
              template_of: Mapping[str, str], templates: Sequence[NodeTemplate]) -> tuple[RequestPodSet, ...]:
    by_name = {ps.name: ps for ps in w.pod_sets}
    labels_of = {t.name: t.labels for t in templates}
    out = []
    for a in assigned:
        ps = by_name[a.name]
        selector = dict(ps.node_selector)
        tolerations: list[Toleration] = list(ps.tolerations)
        for flavor_name in sorted(set(a.flavors.values())):
            flavor = snapshot.flavors.get(flavor_name)
            if flavor is None:
                continue
            selector.update(flavor.node_labels)
            tolerations.extend(t for t in flavor.tolerations if t not in tolerations)
        # every pod on new nodes of one template: its labels say which node kind to add
        # (where they agree with what the pod set already selects)
        kinds = {template_of.get(host) for host in a.pods_per_node()}
        if len(kinds) == 1 and None not in kinds:
            (kind,) = kinds
            assert kind is not None
            for key, value in labels_of.get(kind, {}).items():
                selector.setdefault(key, value)
        requests = {r: v for r, v in ps.request.items() if r != "pods" and v}
        out.append(RequestPodSet(ps.name, pod_template_name(name, ps.name), a.count, requests,
                                 dict(sorted(selector.items())), tuple(tolerations)))
    return tuple(out)


def with_provisioning(snapshot: Snapshot, plan: Plan, planner: Planner) -> Plan:
    """`plan` with its provisioning section (unchanged when the policy does not enable it)."""
    section = plan_provisioning(snapshot, plan, planner)
    return plan if section is None else replace(plan, provisioning=section)


def plan_cycle(snapshot: Snapshot, options: SolveOptions = SolveOptions(), *, read_seconds: float = 0.0) -> Plan:
    """One cycle's plan (planner.cycle.plan_snapshot) with its provisioning section.

    The what-if behind the section plans each try with the greedy solver (Kueue's own
    cycle, verified like any plan): it runs a few plans, and a few more MILP solves of
    the full time limit each would multiply the cycle's time, which one time limit
    bounds (a CronJob's run has a deadline). It chooses nodes to ask for, not where the
    work goes: the cycle that admits the work once the nodes join plans with `options`.

    Each try runs to its end (WHAT_IF_SECONDS), not to the cycle's deadline: the requests,
    the nodes each asks for and the workload that carries them are a function of the
    snapshot and the policy (where two workloads could carry the same nodes, Kueue's
    queue order decides: priority, then age, then uid), never of the machine's speed."""
    from planner.cycle import plan_snapshot

    plan = plan_snapshot(snapshot, options, read_seconds=read_seconds)
    if not snapshot.policy.provisioning.enabled:
        return plan

    def planner(snap: Snapshot) -> Plan:
        return plan_snapshot(snap, SolveOptions(solver=WHAT_IF_SOLVER, time_limit=WHAT_IF_SECONDS))

    return with_provisioning(snapshot, plan, planner)

