"""Readable builders for test setups that produce `models` objects directly.

In the spirit of Kueue's `MakeWorkload(...).Priority(...).Obj()`: a test says what
matters and the builder fills in the rest with valid, boring defaults.

    snap = snapshot(
        nodes=[node("n1", gpu=4), node("n2", gpu=4)],
        flavors=[flavor("default")],
        cqs=[cq("team-a", quotas={"default": {"nvidia.com/gpu": 6, "cpu": 64, "memory": "256Gi"}})],
        lqs=[lq("team-a", "lq", "team-a")],
        workloads=[job("team-a", "train-1", pods=4, gpu=1, priority=100)],
    )

Quantities are ints or Kubernetes strings ("500m", "64Gi", "1e3") and are turned
into the planner's integers here, with a tiny converter of our own (cpu in milli,
everything else in whole units), so the builders never depend on the readers they
help to test. Every pod set request includes `pods: 1`; every node's allocatable
includes `pods` (110 by default). Namespace selectors default to `{}` (all).

This module must not import `planner`: it builds inputs, it does not judge them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import uuid
from datetime import datetime, timezone
from fractions import Fraction
from typing import Iterable, Mapping, Sequence, Union

from models import (
    HOSTNAME_LABEL, ClusterQueue, Cohort, FlavorQuotas, LocalQueue, Node, PodSet,
    PodSetAssignment, Policy, PreemptionPolicy, Quota, ResourceFlavor, ResourceGroup,
    Resources, SliceLayer, Snapshot, Taint, Toleration, Topology, TopologyRequest,
    Workload, WorkloadState, ObjectRef,
)

GPU = "nvidia.com/gpu"
Qty = Union[int, float, str]
Time = Union[int, float, str, datetime]

# A fixed clock so every test plans the same on any day.
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc).timestamp()
DEFAULT_CREATED = NOW - 3600.0

# ---------------------------------------------------------------- quantities

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


def parse_quantity(value: Qty) -> Fraction:
    """A Kubernetes quantity as an exact fraction ("500m" -> 1/2, "1Gi" -> 2**30)."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Fraction(value)
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        amount *= Fraction(10) ** int(exponent[1:])
    return amount * _SUFFIXES[suffix or ""]


def to_units(resource: str, value: Qty) -> int:
    """The planner's integer for `value` of `resource`: milli-cpu for cpu, else whole units.

    Rounded up, as Kubernetes rounds requests it cannot represent.
    """
    amount = parse_quantity(value)
    if resource == "cpu":
        amount *= 1000
    return math.ceil(amount)


def res(values: Mapping[str, Qty] | None = None, *, gpu: Qty = 0, cpu: Qty = 0,
        memory: Qty = 0, pods: Qty = 0, gpu_resource: str = GPU) -> Resources:
    """A Resources vector from Kubernetes quantities; zero amounts are dropped."""
    merged: dict[str, Qty] = {"cpu": cpu, "memory": memory, gpu_resource: gpu, "pods": pods}
    for name, amount in (values or {}).items():
        merged[name] = amount
    return Resources.of({name: to_units(name, amount) for name, amount in merged.items()})


def at(when: Time) -> float:
    """Epoch seconds from epoch seconds, an RFC 3339 string or a datetime."""
    if isinstance(when, datetime):
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(when, str):
        return datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
    return float(when)


def ago(*, minutes: float = 0, hours: float = 0, now: Time = NOW) -> float:
    """Epoch seconds some time before `now` (the builders' fixed clock by default)."""
    return at(now) - 60.0 * minutes - 3600.0 * hours


# ---------------------------------------------------------------- taints and tolerations

TaintLike = Union[Taint, str]
TolerationLike = Union[Toleration, str, Mapping[str, str]]


def taint(spec: TaintLike) -> Taint:
    """`Taint` from kubectl's notation: "key=value:Effect" or "key:Effect"."""
    if isinstance(spec, Taint):
        return spec
    key_value, _, effect = spec.partition(":")
    key, _, value = key_value.partition("=")
    return Taint(key=key, value=value, effect=effect or "NoSchedule")


def toleration(spec: TolerationLike) -> Toleration:
    """`Toleration` from "key=value:Effect" (Equal), "key:Effect" or "key" (Exists),
    or a dict in the Kubernetes field names."""
    if isinstance(spec, Toleration):
        return spec
    if isinstance(spec, Mapping):
        return Toleration(key=spec.get("key", ""), operator=spec.get("operator", "Equal"),
                          value=spec.get("value", ""), effect=spec.get("effect", ""))
    key_value, _, effect = spec.partition(":")
    key, eq, value = key_value.partition("=")
    return Toleration(key=key, operator="Equal" if eq else "Exists", value=value, effect=effect)


def _taints(specs: Iterable[TaintLike]) -> tuple[Taint, ...]:
    return tuple(taint(s) for s in specs)


def _tolerations(specs: Iterable[TolerationLike]) -> tuple[Toleration, ...]:
    return tuple(toleration(s) for s in specs)


# ---------------------------------------------------------------- cluster

def node(name: str, *, gpu: Qty = 0, cpu: Qty = "32", memory: Qty = "256Gi", pods: Qty = 110,
         labels: Mapping[str, str] | None = None, taints: Iterable[TaintLike] = (),
         unmanaged: Mapping[str, Qty] | Resources | None = None, extra: Mapping[str, Qty] | None = None,
         gpu_resource: str = GPU, ready: bool = True, unschedulable: bool = False) -> Node:
    """A ready node labelled with its hostname; `unmanaged` is usage by pods Stowplan does not manage."""
    all_labels = {HOSTNAME_LABEL: name, **(labels or {})}
    allocatable = res(extra, gpu=gpu, cpu=cpu, memory=memory, pods=pods, gpu_resource=gpu_resource)
    used = unmanaged if isinstance(unmanaged, Resources) else res(unmanaged or {})
    return Node(name=name, labels=all_labels, allocatable=allocatable, unmanaged=used,
                taints=_taints(taints), ready=ready, unschedulable=unschedulable)


def flavor(name: str, *, node_labels: Mapping[str, str] | None = None,
           taints: Iterable[TaintLike] = (), tolerations: Iterable[TolerationLike] = (),
           topology: str | None = None) -> ResourceFlavor:
    """A ResourceFlavor: `taints` are its nodeTaints, `tolerations` are added to admitted pods."""
    return ResourceFlavor(name=name, node_labels=dict(node_labels or {}), node_taints=_taints(taints),
                          tolerations=_tolerations(tolerations), topology_name=topology)


def topology(name: str, *levels: str) -> Topology:
    """A Kueue Topology, levels coarsest first (end with kubernetes.io/hostname as usual)."""
    return Topology(name=name, levels=tuple(levels))


# ---------------------------------------------------------------- quotas

QuotaLike = Union[Qty, tuple, Mapping[str, object], Quota]


def quota(resource: str, spec: QuotaLike) -> Quota:
    """Quota from `nominal`, `(nominal, borrowing_limit, lending_limit)` (None: no limit),
    a dict with those keys, or a Quota."""
    if isinstance(spec, Quota):
        return spec
    if isinstance(spec, Mapping):
        spec = (spec.get("nominal", 0), spec.get("borrowing_limit"), spec.get("lending_limit"))
    if isinstance(spec, tuple):
        nominal, borrowing, lending = (tuple(spec) + (None, None))[:3]
        return Quota(nominal=to_units(resource, nominal),
                     borrowing_limit=None if borrowing is None else to_units(resource, borrowing),
                     lending_limit=None if lending is None else to_units(resource, lending))
    return Quota(nominal=to_units(resource, spec))


QuotasSpec = Mapping[str, Mapping[str, QuotaLike]]   # flavor -> resource -> quota


def resource_groups(quotas: QuotasSpec, groups: Sequence[Sequence[str]] | None = None) -> tuple[ResourceGroup, ...]:
    """Kueue resourceGroups from flavor -> resource -> quota, flavors in the order given.

    Without `groups`, one group covers every resource named. With `groups` (lists of
    covered resources), each flavor goes to the group that covers its resources.
    As Kueue requires, every flavor of a group lists every covered resource; the
    ones not given get nominal 0 (listed, so usable only by borrowing).
    """
    if groups is None:
        every = tuple(sorted({r for resources in quotas.values() for r in resources}))
        groups = [every] if every else []
    out = []
    for covered in groups:
        flavors = []
        for flavor_name, resources in quotas.items():
            if not set(resources) & set(covered):
                continue
            stray = set(resources) - set(covered)
            if stray:
                raise ValueError(f"flavor {flavor_name} lists {sorted(stray)} outside its group {list(covered)}")
            flavors.append(FlavorQuotas(flavor=flavor_name, resources={
                r: quota(r, resources.get(r, 0)) for r in covered}))
        out.append(ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors)))
    for flavor_name, resources in quotas.items():
        if not any(set(resources) & set(g) for g in groups):
            raise ValueError(f"flavor {flavor_name} lists no covered resource")
    return tuple(out)


def cq(name: str, *, cohort: str | None = None, quotas: QuotasSpec | None = None,
       groups: Sequence[Sequence[str]] | None = None,
       namespace_selector: Mapping[str, object] | None = None,
       within: str = "Never", reclaim: str = "Never", borrow_within: str = "Never",
       borrow_max_priority: int | None = None, preemption: PreemptionPolicy | None = None,
       strategy: str = "BestEffortFIFO", when_can_borrow: str = "MayStopSearch",
       when_can_preempt: str = "TryNextFlavor", inactive_reason: str | None = None) -> ClusterQueue:
    """A ClusterQueue; `quotas` maps flavor -> resource -> nominal or (nominal, borrowing, lending).

    `within`, `reclaim`, `borrow_within` are spec.preemption's withinClusterQueue,
    reclaimWithinCohort and borrowWithinCohort.policy.
    """
    policy = preemption or PreemptionPolicy(
        within_cluster_queue=within, reclaim_within_cohort=reclaim,
        borrow_within_cohort=borrow_within, borrow_max_priority_threshold=borrow_max_priority)
    return ClusterQueue(
        name=name, resource_groups=resource_groups(quotas or {}, groups), cohort=cohort,
        namespace_selector={} if namespace_selector is None else dict(namespace_selector),
        preemption=policy, queueing_strategy=strategy, when_can_borrow=when_can_borrow,
        when_can_preempt=when_can_preempt, inactive_reason=inactive_reason)


def cohort(name: str, *, parent: str | None = None, quotas: QuotasSpec | None = None,
           groups: Sequence[Sequence[str]] | None = None) -> Cohort:
    """A Cohort, optionally under `parent` and with quota of its own."""
    return Cohort(name=name, parent=parent, resource_groups=resource_groups(quotas or {}, groups))


def lq(namespace: str, name: str, cluster_queue: str) -> LocalQueue:
    return LocalQueue(namespace=namespace, name=name, cluster_queue=cluster_queue)


# ---------------------------------------------------------------- workloads

def required(level: str, *, group: str | None = None) -> TopologyRequest:
    return TopologyRequest(mode="required", level=level, group=group)


def preferred(level: str, *, group: str | None = None) -> TopologyRequest:
    return TopologyRequest(mode="preferred", level=level, group=group)


def unconstrained(*, group: str | None = None) -> TopologyRequest:
    return TopologyRequest(mode="unconstrained", group=group)


def sliced(level: str, size: int, *inner: tuple[str, int], mode_level: str | None = None,
           mode: str | None = None) -> TopologyRequest:
    """Slices of `size` pods in one `level` domain (then optional inner (level, size) layers).

    Kueue allows slices alone (mode None) or with a required/preferred level.
    """
    layers = (SliceLayer(level, size),) + tuple(SliceLayer(lv, sz) for lv, sz in inner)
    return TopologyRequest(mode=mode, level=mode_level, slices=layers)


def pod_set(name: str = "main", count: int = 1, *, gpu: Qty = 0, cpu: Qty = "1", memory: Qty = "1Gi",
            extra: Mapping[str, Qty] | None = None, min_count: int | None = None,
            node_selector: Mapping[str, str] | None = None, tolerations: Iterable[TolerationLike] = (),
            topology: TopologyRequest | None = None, gpu_resource: str = GPU) -> PodSet:
    """A pod set of `count` pods, each requesting these amounts plus one `pods`."""
    request = res(extra, gpu=gpu, cpu=cpu, memory=memory, pods=1, gpu_resource=gpu_resource)
    return PodSet(name=name, count=count, request=request, min_count=min_count,
                  node_selector=dict(node_selector or {}), tolerations=_tolerations(tolerations),
                  topology=topology or TopologyRequest())


def default_uid(namespace: str, name: str, kind: str = "Job") -> str:
    """A stable UID, so the same builder call gives the same workload every time."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"stowplan-test/{kind}/{namespace}/{name}"))


def workload(namespace: str, name: str, queue: str = "lq", *, pod_sets: Sequence[PodSet],
             kind: str = "Job", cq: str | None = None, priority: int = 0,
             created: Time = DEFAULT_CREATED, queued: Time | None = None, uid: str | None = None,
             preemption_cost: float | None = None, non_preemptible: bool = False,
             checkpointed: Time | None = None, movable: bool = False) -> Workload:
    """A pending workload with any pod sets, queued through LocalQueue `queue`.

    `cq` names the ClusterQueue when the test does not care about LocalQueues:
    `snapshot()` then creates the LocalQueue `namespace/queue` -> `cq` if missing.
    """
    names = [ps.name for ps in pod_sets]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate pod set names in {namespace}/{name}: {names}")
    return Workload(
        ref=ObjectRef(kind, namespace, name), local_queue=queue, pod_sets=tuple(pod_sets),
        cluster_queue=cq, priority=priority, created_at=at(created),
        queued_at=at(queued if queued is not None else created),
        uid=uid or default_uid(namespace, name, kind), preemption_cost=preemption_cost,
        non_preemptible=non_preemptible, movable=movable,
        checkpointed_at=None if checkpointed is None else at(checkpointed))


def job(namespace: str, name: str, queue: str = "lq", *, pods: int = 1, gpu: Qty = 0, cpu: Qty = "1",
        memory: Qty = "1Gi", extra: Mapping[str, Qty] | None = None, min_pods: int | None = None,
        node_selector: Mapping[str, str] | None = None, tolerations: Iterable[TolerationLike] = (),
        topology: TopologyRequest | None = None, pod_set_name: str = "main",
        gpu_resource: str = GPU, **kw: object) -> Workload:
    """A pending batch/v1 Job: one pod set of `pods` pods (elastic down to `min_pods`)."""
    ps = pod_set(pod_set_name, pods, gpu=gpu, cpu=cpu, memory=memory, extra=extra, min_count=min_pods,
                 node_selector=node_selector, tolerations=tolerations, topology=topology,
                 gpu_resource=gpu_resource)
    return workload(namespace, name, queue, pod_sets=[ps], **kw)  # type: ignore[arg-type]


FlavorsSpec = Union[str, Mapping[str, str], None]


def assignment(ps: PodSet, nodes: Mapping[str, int], flavors: FlavorsSpec = None) -> PodSetAssignment:
    """Where `ps` runs: pods per node, flavors per resource (a str: one flavor for all).

    Flavors are finished by `snapshot()` once the ClusterQueue is known: resources it
    does not cover are dropped, covered ones missing get their group's flavor.
    """
    if isinstance(flavors, str):
        by_resource = {r: flavors for r in ps.request.names() if r != "pods"}
    else:
        by_resource = dict(flavors or {})
    domains = tuple(((n,), c) for n, c in sorted(nodes.items()) if c > 0)
    return PodSetAssignment(name=ps.name, count=sum(c for _, c in domains), flavors=by_resource,
                            levels=(HOSTNAME_LABEL,), domains=domains)


def running(w: Workload, *, nodes: Mapping[str, int] | None = None,
            placements: Mapping[str, Mapping[str, int]] | None = None, flavors: FlavorsSpec = None,
            pod_set_flavors: Mapping[str, FlavorsSpec] | None = None,
            admitted: Time | None = None) -> Workload:
    """`w` admitted by Stowplan: `nodes` places its only pod set, `placements` each pod set by name.

    `flavors` applies to every pod set; `pod_set_flavors` (pod set name -> flavors) overrides it.
    """
    if placements is None:
        if len(w.pod_sets) != 1 or nodes is None:
            raise ValueError("running(): give nodes= for one pod set, placements= for several")
        placements = {w.pod_sets[0].name: nodes}
    by_name = {ps.name: ps for ps in w.pod_sets}
    unknown = set(placements) - set(by_name)
    if unknown:
        raise ValueError(f"running(): unknown pod sets {sorted(unknown)} in {w.ref}")
    per_set = pod_set_flavors or {}
    assigned = tuple(assignment(by_name[ps.name], placements[ps.name], per_set.get(ps.name, flavors))
                     for ps in w.pod_sets if ps.name in placements)
    started = at(admitted) if admitted is not None else w.created_at + 60.0
    return dataclasses.replace(w, state=WorkloadState.RUNNING, assignment=assigned, admitted_at=started)


def running_job(namespace: str, name: str, queue: str = "lq", *, nodes: Mapping[str, int],
                flavors: FlavorsSpec = None, admitted: Time | None = None, **kw: object) -> Workload:
    """A Job already admitted by Stowplan and running with `nodes` (node -> pods)."""
    kw.setdefault("pods", sum(nodes.values()))
    return running(job(namespace, name, queue, **kw), nodes=nodes, flavors=flavors,  # type: ignore[arg-type]
                   admitted=admitted)


# ---------------------------------------------------------------- snapshot

def snapshot(*, nodes: Iterable[Node] = (), flavors: Iterable[ResourceFlavor] = (),
             cqs: Iterable[ClusterQueue] = (), cohorts: Iterable[Cohort] = (),
             lqs: Iterable[LocalQueue] = (), workloads: Iterable[Workload] = (),
             topologies: Iterable[Topology] = (), namespaces: Mapping[str, Mapping[str, str]] | None = None,
             policy: Policy | None = None, now: Time = NOW, source: str = "builders") -> Snapshot:
    """A Snapshot with LocalQueue -> ClusterQueue wired and every `Workload.cluster_queue` resolved.

    - A workload built with `cq=` gets its LocalQueue created when missing.
    - A workload whose LocalQueue is unknown keeps `cluster_queue=None` and gets a
      `blocked_reason`, as the reader does, so tests of bad input read naturally.
    - Running workloads' flavors are completed against their ClusterQueue.
    - Every namespace used gets `kubernetes.io/metadata.name`; `namespaces` adds labels.
    """
    cluster_queues = {q.name: q for q in cqs}
    local_queues = {(q.namespace, q.name): q for q in lqs}
    for w in workloads:
        key = (w.ref.namespace, w.local_queue)
        if w.cluster_queue is not None and key not in local_queues:
            local_queues[key] = LocalQueue(w.ref.namespace, w.local_queue, w.cluster_queue)
    resolved = tuple(_resolve(w, local_queues, cluster_queues) for w in workloads)
    ns_labels: dict[str, dict[str, str]] = {}
    for ns in sorted({ns for ns, _ in local_queues} | {w.ref.namespace for w in resolved} | set(namespaces or {})):
        ns_labels[ns] = {"kubernetes.io/metadata.name": ns, **(namespaces or {}).get(ns, {})}
    return Snapshot(
        nodes=tuple(sorted(nodes, key=lambda n: n.name)),
        flavors={f.name: f for f in flavors},
        topologies={t.name: t for t in topologies},
        cluster_queues=cluster_queues,
        cohorts={c.name: c for c in cohorts},
        local_queues=dict(sorted(local_queues.items())),
        namespace_labels=ns_labels,
        workloads=resolved,
        policy=policy or Policy(),
        now=at(now),
        source=source,
    )


def _resolve(w: Workload, local_queues: Mapping[tuple[str, str], LocalQueue],
             cluster_queues: Mapping[str, ClusterQueue]) -> Workload:
    local = local_queues.get((w.ref.namespace, w.local_queue))
    if local is None:
        reason = f"LocalQueue {w.ref.namespace}/{w.local_queue} not found"
        return dataclasses.replace(w, cluster_queue=None, blocked_reason=w.blocked_reason or reason)
    w = dataclasses.replace(w, cluster_queue=local.cluster_queue)
    queue = cluster_queues.get(local.cluster_queue)
    if queue is None or not w.assignment:
        return w
    by_name = {ps.name: ps for ps in w.pod_sets}
    finished = tuple(dataclasses.replace(a, flavors=_complete_flavors(queue, by_name[a.name], a.flavors))
                     for a in w.assignment)
    return dataclasses.replace(w, assignment=finished)


def _complete_flavors(queue: ClusterQueue, ps: PodSet, given: Mapping[str, str]) -> dict[str, str]:
    """resource -> flavor for every requested resource the queue covers.

    A resource not given takes the flavor given for another resource of its group,
    else the group's first flavor; resources the queue does not cover are dropped.
    """
    out: dict[str, str] = {}
    for group in queue.resource_groups:
        wanted = [r for r in group.covered_resources if ps.request.get(r) > 0]
        if not wanted:
            continue
        names = [fq.flavor for fq in group.flavors]
        chosen = next((given[r] for r in group.covered_resources if given.get(r) in names), None)
        if chosen is None and names:
            chosen = names[0]
        for r in wanted:
            if chosen is not None:
                out[r] = given.get(r, chosen) if given.get(r) in names else chosen
    return dict(sorted(out.items()))
