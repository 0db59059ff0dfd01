"""Decoded Kubernetes objects -> one models.Snapshot.

Steps, in order: sort objects by kind (rejecting duplicates), the policy, then
what other objects refer to (namespaces, priority classes, flavors, topologies,
cohorts, queues), then workloads, nodes, and the pods that tell which capacity is
used outside Stowplan and where running workloads really are. Wrong objects become
Problems that only affect what depends on them (as in Kueue); only what the planner
cannot run without raises InputError. Everything is sorted for determinism.
"""

from __future__ import annotations

import contextlib
import json
import dataclasses
import gc
import os
from collections import Counter
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence, TypeVar

from models import (
    HOSTNAME_LABEL, ClusterQueue, Cohort, KueueConfig, LocalQueue, Node, ObjectRef, PodSet, PodSetAssignment,
    Policy, Problem, ResourceFlavor, Resources, Snapshot, Topology, Workload, WorkloadState,
    hostname_pin,
)
from models.provisioning import ProvisioningCheck, ProvisioningRequestState
from planner import kinds as kinds_mod
from planner.base.errors import InputError
from planner.k8s import annotations as keys
from planner.k8s.annotations import decode_assignment
from planner.kinds import Adapter, PodSetSource
from planner.kinds import custom as custom_kinds
from planner.kinds import leaderworkerset as lws_kind
from planner.kinds import pods as pods_kind
from planner.kinds.ray import Entry
from planner.k8s import podsets as wl
from planner.snapshot import kueue, kueue_config, loader, policy as policy_mod, provisioning
from planner.k8s.fields import (
    Bad, boolean, is_decimal, mapping, number, string, string_map, taints, timestamp,
)
from planner.k8s.quantity import QuantityError, parse_quantity
from planner.k8s.requests import effective_request_dict, resources

T = TypeVar("T")

DEFAULT_NAMESPACE = "default"
DEFAULT_MAX_PODS = 110
TERMINATED = ("Succeeded", "Failed")
KUEUE_VERSIONS = ("v1beta2", "v1beta1")



# Kueue's cohort trees are a few levels deep; the quota walks above them recurse per level,
# so a chain of thousands (a generated or hostile snapshot) is cut here, as a reported problem
MAX_COHORT_DEPTH = 100
# Kubernetes' documented limit of pods in one cluster: a pod set asking for more can never
# start, and the per-pod work of explaining it must not run out of memory first
MAX_POD_SET_COUNT = 150_000

class Kind(NamedTuple):
    bucket: str
    versions: tuple[str, ...]
    namespaced: bool


# (API group, kind) -> where it goes; other kinds are counted and ignored
KINDS: dict[tuple[str, str], Kind] = {
    ("", "Node"): Kind("node", ("v1",), False),
    ("", "Pod"): Kind("pod", ("v1",), True),
    ("", "Namespace"): Kind("namespace", ("v1",), False),
    ("scheduling.k8s.io", "PriorityClass"): Kind("priorityclass", ("v1",), False),
    ("kueue.x-k8s.io", "ResourceFlavor"): Kind("flavor", KUEUE_VERSIONS, False),
    ("kueue.x-k8s.io", "ClusterQueue"): Kind("clusterqueue", KUEUE_VERSIONS, False),
    ("kueue.x-k8s.io", "Cohort"): Kind("cohort", KUEUE_VERSIONS + ("v1alpha1",), False),
    ("kueue.x-k8s.io", "LocalQueue"): Kind("localqueue", KUEUE_VERSIONS, True),
    ("kueue.x-k8s.io", "Topology"): Kind("topology", KUEUE_VERSIONS + ("v1alpha1",), False),
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): Kind("workloadpriorityclass", KUEUE_VERSIONS, False),
    ("stowplan.io", "PlannerPolicy"): Kind("policy", ("v1alpha1",), False),
    # only kueue-system/kueue-manager-config (Kueue's Configuration); other ConfigMaps are ignored
    ("", "ConfigMap"): Kind("kueueconfig", ("v1",), True),
    # ProvisioningRequest admission checks (planner/snapshot/provisioning.py)
    ("kueue.x-k8s.io", "AdmissionCheck"): Kind("admissioncheck", KUEUE_VERSIONS, False),
    ("kueue.x-k8s.io", "ProvisioningRequestConfig"): Kind("provisioningrequestconfig", KUEUE_VERSIONS, False),
    ("autoscaling.x-k8s.io", "ProvisioningRequest"): Kind("provisioningrequest", ("v1",), True),
}
# every planned workload kind (planner.kinds), and what its adapter reads beside it
for _adapter in kinds_mod.ADAPTERS:
    KINDS[(_adapter.group, _adapter.kind)] = Kind(_adapter.bucket, _adapter.accepted_versions, True)
    for _group, _version, _kind, _plural, _namespaced in _adapter.needs:
        KINDS.setdefault((_group, _kind), Kind(_kind.lower(), (_version,), _namespaced))
WORKLOAD_BUCKETS = {a.bucket for a in kinds_mod.ADAPTERS}


# What an object the API server would have refused (a key given twice) becomes, by bucket
INVALID_EFFECT = {
    "node": "the node is ignored (it takes no pods)",
    "pod": "the pod is ignored (its requests are not counted)",
    "namespace": "the namespace is ignored (no labels for namespaceSelector)",
    **{bucket: "the workload waits" for bucket in WORKLOAD_BUCKETS},
    "priorityclass": "the class is invalid (its workloads wait)",
    "workloadpriorityclass": "the class is invalid (its workloads wait)",
    "flavor": "the flavor is invalid (queues naming it are inactive)",
    "topology": "the topology is invalid (flavors naming it make their queues inactive)",
    "cohort": "the cohort is inactive, and every ClusterQueue under it",
    "clusterqueue": "the ClusterQueue is inactive (its workloads wait)",
    "localqueue": "the LocalQueue is invalid (its workloads wait)",
    "kueueconfig": "Kueue's Configuration is not read (Kueue's defaults are used)",
    "admissioncheck": "the admission check is ignored",
    "provisioningrequestconfig": "the config is ignored (admission checks naming it are inactive)",
    "provisioningrequest": "the request is ignored (its workload waits for a new one)",
}


class Item:
    """One object read: where it came from, its identity, its metadata and the raw mapping.

    `invalid` says why the object as a whole cannot be trusted (a key given twice): it is
    then read as Kueue treats an object its API would have refused (ignored, inactive or
    waiting, by kind)."""

    __slots__ = ("file", "kind", "namespace", "name", "metadata", "obj", "_ref", "invalid")

    def __init__(self, file: str, kind: str, namespace: str, name: str, metadata: dict[str, Any],
                 obj: dict[str, Any]):
        self.file, self.kind, self.namespace, self.name = file, kind, namespace, name
        self.metadata, self.obj = metadata, obj
        self._ref: ObjectRef | None = None
        self.invalid = ""

    @property
    def ref(self) -> ObjectRef:
        # built on demand: most objects (pods) never need one
        if self._ref is None:
            self._ref = ObjectRef(self.kind, self.namespace, self.name)
        return self._ref


@dataclasses.dataclass
class PodsSeen:
    """The pods of one pod set of a running workload: bound and alive per node, and succeeded."""

    per_node: dict[str, int] = dataclasses.field(default_factory=dict)
    succeeded: int = 0
    ready: int = 0      # alive pods whose Ready condition is True (what a Job's status.ready counts)


PodsOf = dict[ObjectRef, dict[str, PodsSeen]]


@dataclasses.dataclass
class Draft:
    """A workload being assembled: Workload's fields plus what still has to be resolved."""

    item: Item
    fields: dict[str, Any]
    reasons: list[str]
    completions: int | None = None     # a Job's spec.completions: how many pods must succeed in all
    templates: dict[str, str] = dataclasses.field(default_factory=dict)   # pod set -> its template's field


def read_snapshot(sources: Sequence[str], *, policy_file: str | None = None, now: float | None = None,
                  limits: loader.Limits = loader.DEFAULT_LIMITS,
                  extra: Sequence[tuple[str, dict[str, Any]]] = ()) -> Snapshot:
    """Read snapshot files or folders (see planner.snapshot) into a models.Snapshot.

    `extra`: objects read as if they were in the snapshot, each with the file (and
    place) problems name for it (a simulation's trace: planner/snapshot/trace.py)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    paths = [os.fspath(source) for source in sources]
    with _no_gc():
        loaded = loader.load(paths, limits)
        for file, obj in extra:
            loader.flatten(file, obj, "object", loaded, None)
        return _Reader(loaded, limits).snapshot(",".join(paths), policy_file, now)


def build_snapshot(objects: Iterable[Any], *, source: str = "", digest: str = "", policy_file: str | None = None,
                   now: float | None = None) -> Snapshot:
    """Objects already decoded (from the API server, say) -> models.Snapshot, as if read from `source`.

    Lists flatten as in files; problems and errors name `source` as their file.
    """
    with _no_gc():
        loaded = loader.Loaded([], digest, [])
        for index, doc in enumerate(objects):
            loader.flatten(source, doc, f"object {index + 1}", loaded, None)
        return _Reader(loaded).snapshot(source, policy_file, now)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Reading builds millions of small acyclic objects; the cyclic collector would scan
    them again and again for nothing. What was read lives as long as the snapshot, so
    it is frozen out of collection when reading ends (else the first collection after
    it scans all of it); a planning cycle unfreezes it when it ends (planner.cycle.gc_pause)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


class _Reader:
    def __init__(self, loaded: loader.Loaded, limits: loader.Limits = loader.DEFAULT_LIMITS):
        self.loaded = loaded
        self.limits = limits
        self.problems: set[Problem] = set()
        self.ignored: Counter[str] = Counter()
        self.buckets: dict[str, list[Item]] = {k.bucket: [] for k in KINDS.values()}
        self.kinds = KINDS      # and the policy's custom kinds (use_custom_kinds)
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.priority_classes: dict[str, int | None] = {}     # None: present but invalid
        self.default_priority = 0
        self.workload_priority_classes: dict[str, int | None] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self.bad_flavors: set[str] = set()
        self.topologies: dict[str, Topology] = {}
        self.bad_topologies: set[str] = set()
        self.cohorts: dict[str, Cohort] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[tuple[str, str], LocalQueue] = {}
        self.bad_local_queues: set[tuple[str, str]] = set()
        self.drafts: dict[ObjectRef, Draft] = {}
        self.moving: set[ObjectRef] = set()      # Jobs being moved (stowplan.io/migrating-to)
        self.unplanned: dict[str, tuple[str, int]] = {}   # queued objects of kinds not planned: first file, count

    # ------------------------------------------------------------ helpers

    def problem(self, item: Item | None, field: str, message: str, file: str = "") -> None:
        self.problems.add(Problem(item.file if item else file, item.ref if item else None, field, message))

    def attempt(self, item: Item, fn: Callable[..., T], *args: Any, default: T,
                reasons: list[str] | None = None) -> T:
        """fn(*args), or `default` with a Problem (and a blocking reason) when a field is bad."""
        try:
            return fn(*args)
        except Bad as bad:
            self.problem(item, bad.field, bad.message)
            if reasons is not None:
                reasons.append(f"invalid {bad.field}: {bad.message}")
            return default

    # ------------------------------------------------------------ the recipe

    def snapshot(self, source: str, policy_file: str | None, now: float | None) -> Snapshot:
        # the policy first: its custom kinds (spec.customKinds) decide which objects are workloads
        if policy_file is not None:
            policy = policy_mod.read_policy_file(policy_file, self.limits)
        else:
            policy = policy_mod.policy_from([(f, o) for f, o in self.loaded.objects if policy_mod.is_policy(o)])
        self.use_custom_kinds(policy)
        self.sort_objects()
        config = self.kueue_configuration(policy)
        self.read_namespaces()
        self.read_priority_classes()
        self.read_flavors_and_topologies()
        self.read_cohorts()
        self.read_cluster_queues()
        self.read_local_queues()
        for adapter in kinds_mod.adapters():
            for item in self.buckets[adapter.bucket]:
                if adapter.grouped:
                    self.read_groups(adapter, item)
                else:
                    self.read_workload(adapter, item)
        self.read_pod_workloads()
        self.report_unplanned()
        nodes = self.read_nodes()
        unmanaged, seen = self.read_pods(nodes)
        workloads = self.finish_workloads(seen, nodes)
        self.check_node_usage(nodes, unmanaged, workloads)
        checks, requests, gate = self.read_provisioning(policy, workloads)
        if gate:   # a gated workload waits with that reason, unless it waits for another already
            workloads = tuple(dataclasses.replace(w, blocked_reason=gate[w.ref])
                              if w.ref in gate and not w.blocked_reason else w for w in workloads)
        node_list = tuple(
            Node(name, labels, allocatable, resources(unmanaged.get(name, {})), node_taints, ready, unschedulable)
            for name, (labels, allocatable, node_taints, ready, unschedulable) in sorted(nodes.items())
        )
        return Snapshot(
            nodes=node_list,
            flavors=dict(sorted(self.flavors.items())),
            topologies=dict(sorted(self.topologies.items())),
            cluster_queues=dict(sorted(self.cluster_queues.items())),
            cohorts=dict(sorted(self.cohorts.items())),
            local_queues=dict(sorted(self.local_queues.items())),
            namespace_labels=dict(sorted(self.namespace_labels.items())),
            workloads=workloads,
            policy=policy,
            now=self.planning_time(now, workloads),
            source=source,
            digest=self.loaded.digest,
            object_count=len(self.loaded.objects),
            ignored_kinds=dict(sorted(self.ignored.items())),
            problems=tuple(sorted(self.problems, key=_problem_key)),
            kueue_config=config,
            provisioning_checks=checks,
            provisioning_requests=requests,
            provisioning_gated=gate,
        )

    def read_provisioning(self, policy: Policy, workloads: Sequence[Workload]) -> tuple[
            dict[str, ProvisioningCheck], tuple[ProvisioningRequestState, ...], dict[ObjectRef, str]]:
        """The provisioning controller's admission checks, Stowplan's ProvisioningRequests, and the
        pending workloads they hold back (only when the policy enables provisioning)."""
        configs = {i.name: self.spec(i) or {} for i in self.buckets["provisioningrequestconfig"] if not i.invalid}
        checks: dict[str, ProvisioningCheck] = {}
        for item in self.buckets["admissioncheck"]:
            if item.invalid:
                continue
            empty: dict[str, ProvisioningCheck] = {}
            checks.update(self.attempt(item, provisioning.read_checks, [(item.name, self.spec(item) or {})],
                                       configs, default=empty))
        requests: list[ProvisioningRequestState] = []
        for item in self.buckets["provisioningrequest"]:
            if item.invalid:
                continue
            state = self.attempt(item, provisioning.read_request, item.namespace, item.name, item.metadata,
                                 item.obj, default=None)
            if state is not None:
                requests.append(state)
        if not policy.provisioning.enabled:
            for item in self.buckets["clusterqueue"]:
                cq = self.cluster_queues.get(item.name)
                if cq is not None and any(c in checks for c in cq.admission_checks):
                    self.problem(item, "spec.admissionChecksStrategy",
                                 "names a ProvisioningRequest admission check; the policy does not enable "
                                 "spec.provisioning, so the check is ignored (docs/provisioning.md)")
            return checks, tuple(requests), {}
        gate = provisioning.gated(workloads, self.cluster_queues, checks, requests)
        return checks, tuple(requests), gate

    def use_custom_kinds(self, policy: Policy) -> None:
        """The policy's custom kinds read as workloads (planner.kinds.custom), and put in force
        for every later step (the registry, planner.kinds.use_custom)."""
        custom = custom_kinds.adapters_for(policy.custom_kinds)
        kinds_mod.use_custom(custom)
        self.kinds = dict(KINDS)
        for adapter in custom:
            self.kinds[(adapter.group, adapter.kind)] = Kind(adapter.bucket, adapter.accepted_versions, True)
            self.buckets[adapter.bucket] = []

    def kueue_configuration(self, policy: Policy) -> KueueConfig:
        """Kueue's Configuration from its ConfigMap (if the snapshot has it), then the policy's sections."""
        config = KueueConfig()
        for item in self.buckets["kueueconfig"]:
            if item.invalid:
                continue
            read = kueue_config.read_config_map(item.obj, item.file)
            if read is None:
                self.problem(item, kueue_config.DATA_FIELD, "is missing: Kueue's defaults are used "
                                                            "(fair sharing and waitForPodsReady off)")
            else:
                config = read
        return policy.kueue.applied(config, "PlannerPolicy")

    def sort_objects(self) -> None:
        """Route each object to its kind's bucket; an object twice is an InputError."""
        seen: dict[tuple[str, str, str, str], str] = {}
        kinds = self.kinds
        duplicates = self.loaded.duplicates
        for file, message in self.loaded.file_duplicates:
            self.problems.add(Problem(file, None, "", message))
        for index, (file, obj) in enumerate(self.loaded.objects):
            api_version = obj["apiVersion"]
            kind_name = obj["kind"]
            group, _, version = api_version.rpartition("/")
            kind = kinds.get((group, kind_name))
            if kind is None or version not in kind.versions:
                self.ignored[f"{api_version}/{kind_name}"] += 1
                if kind is None and _queued(obj):
                    unplanned = f"{api_version}/{kind_name}"
                    first, count = self.unplanned.get(unplanned, (file, 0))
                    self.unplanned[unplanned] = (first, count + 1)
                if kind is not None and kind.bucket == "policy":
                    raise InputError(f"PlannerPolicy version {api_version} is not supported (expected "
                                     f"{policy_mod.API_VERSION})", file=file, field="apiVersion")
                if kind is not None:
                    metadata = obj.get("metadata")
                    name = metadata.get("name") if type(metadata) is dict else None
                    namespace = metadata.get("namespace") if type(metadata) is dict and kind.namespaced else ""
                    ref = ObjectRef(kind_name, namespace if type(namespace) is str else "",
                                    name if type(name) is str else "")
                    self.problems.add(Problem(file, ref, "apiVersion",
                                              f"version {api_version} is not supported (expected "
                                              f"{', '.join(kind.versions)}); object ignored"))
                continue
            metadata = obj.get("metadata")
            if type(metadata) is not dict:
                metadata = {}
            name = metadata.get("name")
            namespace = ""
            if kind.namespaced:
                namespace = metadata.get("namespace") or DEFAULT_NAMESPACE
            if type(name) is not str or not name or type(namespace) is not str:
                where = ObjectRef(kind_name, namespace if type(namespace) is str else "", "")
                self.problems.add(Problem(file, where, "metadata.name", "a name (and, if namespaced, a namespace "
                                                                        "string) is required; object ignored"))
                continue
            if kind.bucket == "kueueconfig" and (namespace, name) != (kueue_config.NAMESPACE, kueue_config.NAME):
                self.ignored[f"{api_version}/{kind_name}"] += 1
                continue
            key = (group, kind_name, namespace, name)
            if key in seen:
                raise InputError(f"duplicate object: it is in {seen[key]} and again in {file}",
                                 file=file, ref=ObjectRef(kind_name, namespace, name), field="metadata.name")
            seen[key] = file
            item = Item(file, kind_name, namespace, name, metadata, obj)
            if index in duplicates:
                self.invalid(item, kind.bucket, *duplicates[index])
            self.buckets[kind.bucket].append(item)

    def invalid(self, item: Item, bucket: str, field: str, message: str) -> None:
        """An object with a key given twice: the API server would have refused it, so it is
        not trusted, and the problem says what that means for this kind."""
        if bucket == "policy":
            raise InputError(f"{message}: a policy must be unambiguous", file=item.file, ref=item.ref, field=field)
        effect = INVALID_EFFECT.get(bucket) or ("the workload waits" if bucket.startswith(custom_kinds.BUCKET)
                                                else "ignored")
        item.invalid = f"{field}: {message}"
        self.problem(item, field, f"{message}; the API server rejects duplicate fields, so {effect}")

    # ------------------------------------------------------------ what others refer to

    def read_namespaces(self) -> None:
        for item in self.buckets["namespace"]:
            if item.invalid:
                continue
            labels: dict[str, str] = self.attempt(item, string_map, item.metadata.get("labels"), "metadata.labels",
                                                  default={})
            self.namespace_labels[item.name] = labels

    def read_priority_classes(self) -> None:
        defaults: list[tuple[int, str, Item]] = []
        for item in self.buckets["priorityclass"]:
            value = None if item.invalid else self.attempt(item, kueue.read_priority_value, item.obj, default=None)
            self.priority_classes[item.name] = value
            if value is not None and item.obj.get("globalDefault") is True:
                defaults.append((value, item.name, item))
        if defaults:
            # as Kubernetes does with several global defaults: the lowest value wins (reported)
            value, name, _ = min(defaults, key=lambda d: (d[0], d[1]))
            self.default_priority = value
            for other_value, other, item in defaults:
                if len(defaults) > 1 and other != name:
                    self.problem(item, "globalDefault", f"PriorityClass {name} is a global default too; as in "
                                 f"Kubernetes the lowest value ({value}) is the default, not {other_value}")
        for item in self.buckets["workloadpriorityclass"]:
            self.workload_priority_classes[item.name] = None if item.invalid else self.attempt(
                item, kueue.read_priority_value, item.obj, default=None)

    def spec(self, item: Item) -> dict[str, Any] | None:
        """The object's spec, or None (reported) when it is not a mapping or the object is invalid."""
        if item.invalid:
            return None
        try:
            return mapping(item.obj.get("spec"), "spec")
        except Bad as bad:
            self.problem(item, bad.field, bad.message)
            return None

    def read_flavors_and_topologies(self) -> None:
        for item in self.buckets["flavor"]:
            spec = self.spec(item)
            flavor = None if spec is None else self.attempt(item, kueue.read_flavor, item.name, spec, default=None)
            if flavor is None:
                self.bad_flavors.add(item.name)
            else:
                self.flavors[item.name] = flavor
        for item in self.buckets["topology"]:
            spec = self.spec(item)
            topology = None if spec is None else self.attempt(item, kueue.read_topology, item.name, spec,
                                                              default=None)
            if topology is None:
                self.bad_topologies.add(item.name)
            else:
                self.topologies[item.name] = topology

    def read_cohorts(self) -> None:
        own: dict[str, str] = {}
        items: dict[str, Item] = {}
        for item in self.buckets["cohort"]:
            name = item.name
            items[name] = item
            spec = self.spec(item)
            cohort = None if spec is None else self.attempt(item, kueue.read_cohort, name, spec, default=None)
            if cohort is None:
                parent = None
                if spec is not None:
                    raw = spec.get("parentName") or spec.get("parent")
                    parent = raw if type(raw) is str else None
                cohort = Cohort(name, parent)
                own[name] = "its spec is invalid (see the reported problem)"
            self.cohorts[name] = cohort
        cycles = _cohort_cycles({n: c.parent for n, c in self.cohorts.items()})
        for name, text in cycles.items():
            field = "spec.parent" if "parent" in mapping(items[name].obj.get("spec"), "spec") else "spec.parentName"
            self.problem(items[name], field, f"is part of a cohort cycle ({text}); the cohorts in it and "
                                             "every ClusterQueue under them are inactive")
            own[name] = f"in a cohort cycle {text}"
        for name, depth in self._cohort_depths(own).items():
            if depth == MAX_COHORT_DEPTH + 1:   # reported once, where the tree passes the limit
                self.problem(items[name], "spec.parentName", f"is {depth} levels below its root cohort, more than "
                             f"{MAX_COHORT_DEPTH}: this cohort, those under it and their ClusterQueues are inactive")
                own[name] = f"more than {MAX_COHORT_DEPTH} levels below its root cohort"
        self.cohort_reason: dict[str, str | None] = {}
        faulty = self._first_faulty_above(own)
        for name in sorted(self.cohorts):
            source = faulty[name]
            self.cohort_reason[name] = None if source is None else \
                own[source] if source == name else f"cohort {source} is inactive ({own[source]})"
        for name, reason in self.cohort_reason.items():
            if reason:
                self.cohorts[name] = dataclasses.replace(self.cohorts[name], inactive_reason=reason)

    def _cohort_depths(self, own: dict[str, str]) -> dict[str, int]:
        """Each cohort's level (a root is 1), iteratively; cohorts in a cycle have none."""
        depth: dict[str, int] = {}
        for name in self.cohorts:
            path: list[str] = []
            current: str | None = name
            base = 0
            while current is not None and current in self.cohorts and current not in depth:
                if current in own and own[current].startswith("in a cohort cycle"):
                    path = []
                    break
                path.append(current)
                current = self.cohorts[current].parent
            else:
                base = depth.get(current, 0) if current is not None else 0
            for offset, member in enumerate(reversed(path)):
                depth[member] = base + offset + 1
        return depth

    def _first_faulty_above(self, own: dict[str, str]) -> dict[str, str | None]:
        """Each cohort's first cohort, itself or above it, with a fault of its own (or None).
        Each chain is walked once, iteratively (a chain thousands deep costs no stack and
        no quadratic time); a cycle's cohorts are all in `own`, so every walk ends."""
        first: dict[str, str | None] = {}
        for name in self.cohorts:
            path: list[str] = []
            on_path: set[str] = set()
            current: str | None = name
            found: str | None = None
            while current is not None and current in self.cohorts and current not in on_path:
                if current in first:
                    found = first[current]
                    break
                if current in own:
                    found = current
                    break
                path.append(current)
                on_path.add(current)
                current = self.cohorts[current].parent
            for member in path:
                first[member] = found
            if name not in first:   # itself faulty
                first[name] = found
        return first

    def read_cluster_queues(self) -> None:
        for item in self.buckets["clusterqueue"]:
            name = item.name
            spec = self.spec(item)
            reasons: list[str] = []
            cq = None if spec is None else self.attempt(item, kueue.read_cluster_queue, name, spec, default=None,
                                                        reasons=reasons)
            if cq is None:
                cq = ClusterQueue(name, (), inactive_reason=reasons[0] if reasons else "its spec is invalid")
                self.cluster_queues[name] = cq
                continue
            assert spec is not None
            for group in cq.resource_groups:
                for fq in group.flavors:
                    if fq.flavor in self.bad_flavors:
                        reasons.append(f"flavor {fq.flavor} is invalid")
                    elif fq.flavor not in self.flavors:
                        reasons.append(f"flavor {fq.flavor} not found")
                    else:
                        topology = self.flavors[fq.flavor].topology_name
                        if topology and topology not in self.topologies:
                            state = "is invalid" if topology in self.bad_topologies else "does not exist"
                            reasons.append(f"flavor {fq.flavor} names Topology {topology}, which {state}")
            for reason in reasons:
                self.problem(item, "spec.resourceGroups", f"{reason}; the ClusterQueue is inactive")
            if cq.namespace_selector is None:
                self.problem(item, "spec.namespaceSelector",
                             "is not set, which in Kueue matches no namespace: this queue admits nothing; "
                             "set it to {} to allow every namespace")
            if cq.cohort is None and kueue.has_limits(cq.resource_groups):
                self.problem(item, "spec.resourceGroups",
                             "borrowingLimit/lendingLimit need a cohort (Kueue rejects them without one); "
                             "they are ignored")
            stop = spec.get("stopPolicy")
            if stop not in (None, "None"):
                reasons.append(f"stopped (spec.stopPolicy: {stop})")
            cohort_reason = self.cohort_reason.get(cq.cohort) if cq.cohort else None
            if cohort_reason:
                # inherited reasons already say which cohort ("cohort X is inactive (...)")
                reasons.append(cohort_reason if cohort_reason.startswith("cohort ")
                               else f"cohort {cq.cohort} is inactive ({cohort_reason})")
            if reasons:
                cq = dataclasses.replace(cq, inactive_reason="; ".join(reasons))
            self.cluster_queues[name] = cq

    def read_local_queues(self) -> None:
        for item in self.buckets["localqueue"]:
            key = (item.namespace, item.name)
            spec = self.spec(item)
            lq = None if spec is None else self.attempt(
                item, kueue.read_local_queue, item.namespace, item.name, spec, default=None)
            if lq is None:
                self.bad_local_queues.add(key)
                continue
            if lq.cluster_queue not in self.cluster_queues:
                self.problem(item, "spec.clusterQueue", f"ClusterQueue {lq.cluster_queue} does not exist; "
                                                        "workloads in this queue wait")
            self.local_queues[key] = lq

    # ------------------------------------------------------------ workloads

    def queued(self, item: Item) -> tuple[dict[str, str], dict[str, Any], dict[str, str], list[str]] | None:
        """(labels, spec, annotations, blocking reasons) of a Job/JobSet queued through Kueue, else None."""
        meta = item.metadata
        labels: dict[str, str] | None = self.attempt(item, string_map, meta.get("labels"), "metadata.labels",
                                                     default=None)
        if not labels or not labels.get(keys.QUEUE_LABEL):
            return None   # not queued through Kueue: its pods, if any, are unmanaged usage
        reasons: list[str] = [f"invalid {item.invalid}"] if item.invalid else []
        spec: dict[str, Any] = self.attempt(item, mapping, item.obj.get("spec"), "spec", default={},
                                            reasons=reasons)
        annotations: dict[str, str] = self.attempt(item, string_map, meta.get("annotations"),
                                                   "metadata.annotations", default={}, reasons=reasons)
        return labels, spec, annotations, reasons

    def read_workload(self, adapter: Adapter, item: Item) -> None:
        """One object of a planned kind -> a Draft, with the pod sets its adapter finds."""
        if adapter.is_child(item.metadata) or adapter.skip(item.obj):
            return   # e.g. a JobSet's child Job (the JobSet is the workload), a RayJob on an existing cluster
        head = self.queued(item)
        if head is None:
            return
        labels, spec, annotations, reasons = head

        def attempt(fn: Callable[..., T], *args: Any, default: T) -> T:
            return self.attempt(item, fn, *args, default=default, reasons=reasons)

        sources = adapter.pod_sets(spec, annotations, attempt, self.lookup, item.namespace)
        pod_sets = [self.pod_set(item, s.name, s.count, dict(s.template), s.field, s.min_count, reasons)
                    for s in sources]
        if not pod_sets:
            pod_sets.append(PodSet("main", 1, Resources.of(pods=1)))
        pc_name, pc_field = adapter.priority_class(spec, sources)
        self.draft(adapter, item, labels, annotations, spec, tuple(sorted(pod_sets, key=lambda p: p.name)),
                   pc_name, pc_field, reasons)
        draft = self.drafts[item.ref]
        draft.templates = {s.name: s.field for s in sources}
        draft.completions = adapter.completions(spec)

    def read_groups(self, adapter: Adapter, item: Item) -> None:
        """A LeaderWorkerSet: one workload per group (planner.kinds.leaderworkerset), each as if
        it were an object of its own: the groups Stowplan admitted run, the others wait while
        the templates hold their pods."""
        head = self.queued(item)
        if head is None:
            return
        labels, spec, annotations, reasons = head

        def attempt(fn: Callable[..., T], *args: Any, default: T) -> T:
            return self.attempt(item, fn, *args, default=default, reasons=reasons)

        sources = adapter.pod_sets(spec, annotations, attempt, self.lookup, item.namespace)
        count = attempt(lws_kind.groups, spec, default=0)
        none: dict[str, dict[str, Any]] = {}
        admitted = attempt(lws_kind.group_assignments, annotations, default=none)
        held = lws_kind.held(spec)
        pc_name, pc_field = adapter.priority_class(spec, sources)
        own = {k: v for k, v in annotations.items() if k not in (keys.GROUP_ASSIGNMENTS, keys.ASSIGNMENT, keys.ADMITTED_AT)}
        for index in range(count):
            ref = lws_kind.group_ref(item.namespace, item.name, index)
            group_reasons = list(reasons)
            pod_sets = [self.pod_set(item, s.name, s.count, dict(s.template), s.field, s.min_count, group_reasons)
                        for s in sources] or [PodSet("main", 1, Resources.of(pods=1))]
            entry = admitted.get(str(index))
            notes = dict(own)
            if entry is not None:
                notes[keys.ASSIGNMENT] = json.dumps(entry.get("podSets"))
                if isinstance(entry.get("admittedAt"), str):
                    notes[keys.ADMITTED_AT] = entry["admittedAt"]
            metadata = {**item.metadata, "annotations": notes}
            group = Item(item.file, ref.kind, ref.namespace, ref.name, metadata,
                         {"kind": ref.kind, "metadata": metadata, "spec": {"suspend": entry is None and held}})
            group.invalid = item.invalid
            self.draft(adapter, group, labels, notes, spec, tuple(sorted(pod_sets, key=lambda p: p.name)),
                       pc_name, pc_field, group_reasons)
            draft = self.drafts[ref]
            draft.templates = {s.name: s.field for s in sources}
            if entry is None and not held:
                self.problem(item, "spec.leaderWorkerTemplate.workerTemplate.spec.schedulingGates",
                             f"group {index} runs outside Stowplan: the templates hold no pods (add the "
                             f"scheduling gate {lws_kind.HOLD_GATES[0]} to both templates)")

    def read_pod_workloads(self) -> None:
        """Queued pods that no planned kind owns: Kueue's pod integration (planner.kinds.pods),
        a pod of its own or, by `kueue.x-k8s.io/pod-group-name`, a group."""
        groups: dict[ObjectRef, list[Item]] = {}
        for item in self.buckets["pod"]:
            labels = item.metadata.get("labels")
            if item.invalid or type(labels) is not dict or not labels.get(keys.QUEUE_LABEL):
                continue
            if labels.get(pods_kind.LWS_NAME_LABEL) or _owned_by_planned(item, labels):
                continue
            groups.setdefault(pods_kind.workload_of(item.namespace, item.name, labels), []).append(item)
        for ref, items in sorted(groups.items()):
            self.read_pod_workload(ref, sorted(items, key=lambda i: i.name))

    def read_pod_workload(self, ref: ObjectRef, items: list[Item]) -> None:
        first = items[0]
        item = first if ref.kind == pods_kind.POD_KIND else Item(first.file, ref.kind, ref.namespace, ref.name,
                                                                 first.metadata, first.obj)
        reasons: list[str] = []
        members = []
        for member in items:
            annotations: dict[str, str] = self.attempt(member, string_map, member.metadata.get("annotations"),
                                       "metadata.annotations", default={}, reasons=reasons)
            spec: dict[str, Any] = self.attempt(member, mapping, member.obj.get("spec"), "spec", default={},
                                                reasons=reasons)
            status = member.obj.get("status")
            phase = status.get("phase") if type(status) is dict else None
            members.append(pods_kind.Member(member.name, annotations, spec, str(phase or ""),
                                            bool(member.metadata.get("deletionTimestamp"))))
        queues = sorted({str(i.metadata["labels"][keys.QUEUE_LABEL]) for i in items})
        if len(queues) > 1:
            self.problem(item, f"metadata.labels[{keys.QUEUE_LABEL}]", f"the group's pods name different queues "
                                                                     f"({', '.join(queues)}); the group waits")
            reasons.append(f"the group's pods name different queues ({', '.join(queues)})")
        if ref.kind == pods_kind.POD_KIND:
            entries = [Entry(pods_kind.SINGLE_POD_SET, 1, first.obj, "")]
        else:
            nothing: tuple[list[Entry], int, int] = ([], 0, 0)
            grouped = self.attempt(item, pods_kind.group_entries, members, default=nothing, reasons=reasons)
            entries, active, total = grouped
            if entries and active < total:
                reasons.append(f"waits for its pods: {active} of {total} pods of the group exist "
                               "(Kueue admits a pod group once all its pods exist)")
            elif entries and active > total:
                reasons.append(f"{active} pods for a group of {total} "
                               f"({keys.POD_GROUP_TOTAL_COUNT}); Kueue deletes the excess first")
        pod_sets = []
        for entry in entries:
            try:
                pod_sets.append(pods_kind.build(entry))
            except Bad as bad:
                self.problem(item, bad.field, bad.message)
                reasons.append(f"invalid {bad.field}: {bad.message}")
                pod_sets.append(PodSet(entry.name, entry.size, Resources.of(pods=1)))
        if not pod_sets:
            pod_sets.append(PodSet(pods_kind.SINGLE_POD_SET, 1, Resources.of(pods=1)))
        # the group as one object: the earliest creation, the annotations of a pod Stowplan admitted,
        # waiting while any pod is gated, and every pod's resourceVersion
        admitted = next((m for m in members if keys.ASSIGNMENT in m.annotations), members[0])
        created = min((str(i.metadata.get("creationTimestamp") or "") for i in items), default="")
        metadata = {**first.metadata, "annotations": admitted.annotations, "creationTimestamp": created or None,
                    "resourceVersion": ",".join(f"{i.name}={i.metadata.get('resourceVersion', '')}" for i in items)
                    if ref.kind == pods_kind.GROUP_KIND else first.metadata.get("resourceVersion")}
        gated = any(pods_kind.is_gated(m.spec) for m in members if pods_kind.runnable(m))
        synthetic = Item(item.file, ref.kind, ref.namespace, ref.name, metadata,
                         {"kind": ref.kind, "metadata": metadata,
                          "spec": {"schedulingGates": [{"name": keys.KUEUE_GATE}]} if gated else {}})
        adapter = kinds_mod.by_kind(ref.kind)
        assert adapter is not None
        labels = {k: str(v) for k, v in first.metadata["labels"].items()}
        sources = [PodSetSource(e.name, e.size, e.template, e.field) for e in entries]
        pc_name, pc_field = adapter.priority_class({}, sources)
        self.draft(adapter, synthetic, labels, admitted.annotations, {}, tuple(sorted(pod_sets, key=lambda p: p.name)),
                   pc_name, pc_field.lstrip("."), reasons)
        self.drafts[ref].templates = {e.name: e.field or "spec" for e in entries}

    def lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """An object an adapter reads beside its own (a TrainJob's runtime), by kind, namespace and name."""
        for item in self.buckets.get(kind.lower(), ()):
            if item.kind == kind and item.namespace == namespace and item.name == name and not item.invalid:
                return item.obj
        return None

    def report_unplanned(self) -> None:
        """Queued objects of kinds Stowplan does not plan: one problem per kind, never dropped silently."""
        for key, (file, count) in sorted(self.unplanned.items()):
            api_version, _, kind = key.rpartition("/")
            self.problem(None, "", f"kind {kind} is not planned ({api_version}): {count} object(s) with label "
                                   f"{keys.QUEUE_LABEL} wait outside Stowplan", file)

    def pod_set(self, item: Item, name: str, count: int, template: dict[str, Any], field: str,
                min_count: int | None, reasons: list[str]) -> PodSet:
        if count > MAX_POD_SET_COUNT:   # no cluster holds it; planning it would only cost memory
            message = (f"pod set {name} asks for {count:,} pods, more than a Kubernetes cluster holds "
                       f"({MAX_POD_SET_COUNT:,}, its documented limit)")
            self.problem(item, field, message)
            reasons.append(message)
            return PodSet(name, 1, Resources.of(pods=1), None)
        try:
            return wl.build_pod_set(name, count, template, field, min_count)
        except Bad as bad:
            self.problem(item, bad.field, bad.message)
            reasons.append(f"invalid {bad.field}: {bad.message}")
            return PodSet(name, count, Resources.of(pods=1), min_count)

    def draft(self, adapter: Adapter, item: Item, labels: dict[str, str], annotations: dict[str, str],
              spec: dict[str, Any], pod_sets: tuple[PodSet, ...], pc_name: object, pc_field: str,
              reasons: list[str]) -> None:
        meta = item.metadata
        uid = meta.get("uid")
        version = meta.get("resourceVersion")
        fields: dict[str, Any] = {
            "ref": item.ref,
            "local_queue": labels[keys.QUEUE_LABEL],
            "pod_sets": pod_sets,
            "priority": self.priority(item, labels, pc_name, pc_field, reasons),
            "uid": uid if type(uid) is str else "",
            "resource_version": version if type(version) is str else "",
        }
        created = self.attempt(item, timestamp, meta.get("creationTimestamp"), "metadata.creationTimestamp",
                               default=None)
        evicted = self.annotation_time(item, annotations, keys.EVICTED_AT)
        fields["created_at"] = created or 0.0
        fields["queued_at"] = max(created or 0.0, evicted or 0.0)
        fields["admitted_at"] = self.annotation_time(item, annotations, keys.ADMITTED_AT)
        self.read_requeue_state(item, annotations, fields)
        fields["checkpointed_at"] = self.annotation_time(item, annotations, keys.CHECKPOINTED_AT)
        if keys.PREEMPTION_COST in annotations:
            cost_field = f"metadata.annotations[{keys.PREEMPTION_COST}]"
            cost = self.attempt(item, number, annotations[keys.PREEMPTION_COST], cost_field, default=None)
            if cost is not None and cost < 0:
                self.problem(item, cost_field, f"{cost:g} is negative; ignored")
                cost = None
            elif cost is not None and cost > policy_mod.MAX_COST:
                # bounded, so a sum over victims stays finite and the cost stage exact enough
                self.problem(item, cost_field, f"{cost:g} is more than {policy_mod.MAX_COST:g}; "
                                               f"{policy_mod.MAX_COST:g} is used")
                cost = policy_mod.MAX_COST
            fields["preemption_cost"] = cost
        flag = annotations.get(keys.NON_PREEMPTIBLE)
        if flag is not None and flag not in ("true", "false"):
            self.problem(item, f"metadata.annotations[{keys.NON_PREEMPTIBLE}]",
                         f"must be \"true\" or \"false\", got {flag!r}; read as false")
        fields["non_preemptible"] = flag == "true"
        movable = annotations.get(keys.MOVABLE)
        if movable is not None and movable not in ("true", "false"):
            self.problem(item, f"metadata.annotations[{keys.MOVABLE}]",
                         f"must be \"true\" or \"false\", got {movable!r}; read as false")
        fields["movable"] = movable == "true"
        elastic = annotations.get(keys.ELASTIC_JOB)
        if elastic is not None and elastic not in ("true", "false"):
            self.problem(item, f"metadata.annotations[{keys.ELASTIC_JOB}]",
                         f"must be \"true\" or \"false\", got {elastic!r}; read as false")
        # Resized while running where Kueue resizes it (batch/v1 Jobs, Ray clusters); any other
        # kind says why not and is planned at its declared size
        refusal = adapter.elastic_refusal(spec) if elastic == "true" else None
        if refusal:
            self.problem(item, f"metadata.annotations[{keys.ELASTIC_JOB}]", refusal)
        fields["elastic_job"] = elastic == "true" and refusal is None
        # Kueue's webhook suspends a queued Job at creation, so a missing `suspend` reads as true
        suspend = self.attempt(item, adapter.read_suspended, item.obj, default=True, reasons=reasons)
        if suspend and keys.MIGRATING_TO in annotations:
            # Being moved: it holds its new place (and its quota) while its old pods leave;
            # those count as unmanaged usage until they are gone.
            target = self.attempt(item, decode_assignment, annotations[keys.MIGRATING_TO], pod_sets, keys.MIGRATING_TO,
                                  default=None)
            if target is None:
                fields["state"] = WorkloadState.PENDING
            else:
                fields["state"] = WorkloadState.RUNNING
                fields["assignment"] = target
                self.moving.add(item.ref)
        elif suspend:
            fields["state"] = WorkloadState.PENDING
        elif keys.ASSIGNMENT in annotations:
            assignment = self.attempt(item, decode_assignment, annotations[keys.ASSIGNMENT], pod_sets, default=None)
            if assignment is None:
                self.problem(item, f"metadata.annotations[{keys.ASSIGNMENT}]",
                             "unreadable, so the running workload is treated as started outside Stowplan")
                fields["state"] = WorkloadState.EXTERNAL
            else:
                fields["state"] = WorkloadState.RUNNING
                fields["assignment"] = assignment
        else:
            fields["state"] = WorkloadState.EXTERNAL
        self.drafts[item.ref] = Draft(item, fields, reasons)

    def read_requeue_state(self, item: Item, annotations: dict[str, str], fields: dict[str, Any]) -> None:
        """waitForPodsReady's record (planner.cycle.podsready): when the pods were seen Ready and
        not, the requeue count and time, deactivation, and the last eviction's reason."""
        fields["pods_ready_at"] = self.annotation_time(item, annotations, keys.PODS_READY_AT)
        fields["pods_not_ready_at"] = self.annotation_time(item, annotations, keys.PODS_NOT_READY_AT)
        fields["requeue_at"] = self.annotation_time(item, annotations, keys.REQUEUE_AT)
        if keys.REQUEUE_COUNT in annotations:
            text = annotations[keys.REQUEUE_COUNT].strip()
            if is_decimal(text):
                fields["requeue_count"] = int(text)
            else:
                self.problem(item, f"metadata.annotations[{keys.REQUEUE_COUNT}]",
                             f"{annotations[keys.REQUEUE_COUNT]!r} is not a count (0, 1, 2, ...); read as 0")
        deactivated = annotations.get(keys.DEACTIVATED)
        if deactivated is not None:
            fields["deactivated"] = deactivated or "Deactivated"
        reason = annotations.get(keys.EVICTION_REASON, "")
        fields["eviction_reason"] = reason.split(":", 1)[0].split(" ", 1)[0].strip()

    def annotation_time(self, item: Item, annotations: dict[str, str], key: str) -> float | None:
        if key not in annotations:
            return None
        return self.attempt(item, timestamp, annotations[key], f"metadata.annotations[{key}]", default=None)

    def priority(self, item: Item, labels: dict[str, str], pc_name: object, pc_field: str,
                 reasons: list[str]) -> int:
        """WorkloadPriorityClass by label, else PriorityClass by name, else the global default (0)."""
        wpc = labels.get(keys.PRIORITY_LABEL)
        if wpc:
            return self._class_value(item, self.workload_priority_classes, "WorkloadPriorityClass", wpc,
                                     f"metadata.labels[{keys.PRIORITY_LABEL}]", reasons)
        if pc_name is None or pc_name == "":
            return self.default_priority
        if type(pc_name) is not str:
            self.problem(item, pc_field, f"must be a string, got {pc_name!r}")
            reasons.append(f"invalid {pc_field}")
            return 0
        return self._class_value(item, self.priority_classes, "PriorityClass", pc_name, pc_field, reasons)

    def _class_value(self, item: Item, table: dict[str, int | None], kind: str, name: str, field: str,
                     reasons: list[str]) -> int:
        if name not in table:
            self.problem(item, field, f"{kind} {name} does not exist")
            reasons.append(f"{kind} {name} does not exist (Kueue does not admit it)")
            return 0
        value = table[name]
        if value is None:
            reasons.append(f"{kind} {name} is invalid")
            return 0
        return value

    # ------------------------------------------------------------ nodes and pods

    def read_nodes(self) -> dict[str, tuple[dict[str, str], Resources, tuple[Any, ...], bool, bool]]:
        nodes = {}
        items: dict[str, Item] = {}
        for item in self.buckets["node"]:
            if item.invalid:
                continue
            try:
                nodes[item.name] = _node(item)
                items[item.name] = item
            except Bad as bad:
                self.problem(item, bad.field, f"{bad.message}; node skipped")
        self.check_hostnames(nodes, items)
        return nodes

    def check_hostnames(self, nodes: dict[str, tuple[dict[str, str], Resources, tuple[Any, ...], bool, bool]],
                        items: dict[str, Item]) -> None:
        """kube-scheduler matches a pin (nodeSelector or node affinity on kubernetes.io/hostname)
        against the label, so Stowplan pins by the label's value (models.NodePins). A node whose
        label differs from its name is still pinned uniquely: reported, and usable. Two nodes
        sharing one label have no pin that names only one of them: each is reported, and
        Stowplan places no new pod there (what runs there still counts)."""
        field = f"metadata.labels[{HOSTNAME_LABEL}]"
        holders: dict[str, list[str]] = {}
        for name, (labels, *_) in nodes.items():
            holders.setdefault(hostname_pin(name, labels), []).append(name)
        for name in sorted(nodes):
            labels, allocatable, node_taints, ready, unschedulable = nodes[name]
            hostname = hostname_pin(name, labels)
            sharing = sorted(n for n in holders[hostname] if n != name)
            if sharing:
                self.problem(items[name], field, f"{hostname!r} is also the label of {_listed(sharing)}: a pod "
                                                 "pinned here could land there; no new pod is placed on this node")
                nodes[name] = (labels, allocatable, node_taints, ready, True)
            elif hostname != name:
                self.problem(items[name], field, f"is {hostname!r}, not the node's name: kube-scheduler matches "
                                                 f"the label, so Stowplan pins pods for this node by {hostname!r}")

    def read_pods(self, nodes: dict[str, Any]) -> tuple[dict[str, dict[str, int]], PodsOf]:
        """Unmanaged requests per node, and what the pods of each running workload say."""
        running = {ref for ref, d in self.drafts.items() if d.fields["state"] is WorkloadState.RUNNING} - self.moving
        unmanaged: dict[str, dict[str, int]] = {}
        seen: PodsOf = {}
        for item in self.buckets["pod"]:
            spec = item.obj.get("spec")
            if type(spec) is not dict or item.invalid:
                continue
            node = spec.get("nodeName")
            status = item.obj.get("status")
            phase = status.get("phase") if type(status) is dict else None
            labels = item.metadata.get("labels")
            if type(labels) is not dict:
                labels = {}
            owner = next(((ref, pod_set) for ref, pod_set in kinds_mod.pod_owners(item.namespace, item.metadata, labels)
                          if ref in running), None)
            if owner is not None:
                pods = seen.setdefault(owner[0], {}).setdefault(owner[1], PodsSeen())
                if phase == "Succeeded":
                    pods.succeeded += 1
                elif phase != "Failed" and node and type(node) is str:
                    pods.per_node[node] = pods.per_node.get(node, 0) + 1
                    if _pod_ready(item, status):
                        pods.ready += 1
                continue
            if not node or phase in TERMINATED or node not in nodes:
                continue
            try:
                request = effective_request_dict(spec, "spec")
            except Bad as bad:
                self.problem(item, bad.field, f"{bad.message}; only its pod slot is counted")
                request = {"pods": 1}
            usage = unmanaged.setdefault(node, {})
            for name, amount in request.items():
                usage[name] = usage.get(name, 0) + amount
        return unmanaged, seen

    # ------------------------------------------------------------ resolving

    def finish_workloads(self, seen: PodsOf, nodes: dict[str, Any]) -> tuple[Workload, ...]:
        out = []
        for ref in sorted(self.drafts):
            draft = self.drafts[ref]
            fields, reasons = draft.fields, draft.reasons
            fields["cluster_queue"] = self.resolve_queue(draft)
            if fields["state"] is WorkloadState.RUNNING and self.buckets["pod"]:
                # Kueue's PodsReady counts against what was admitted: the annotation's counts
                pods = seen.get(ref, {})
                fields["pods_ready"] = {
                    entry.name: (pods[entry.name].ready + pods[entry.name].succeeded if entry.name in pods else 0,
                                 entry.count)
                    for entry in fields["assignment"]}
            if ref in seen:
                fields["assignment"] = _assignment_from_pods(fields["assignment"], seen[ref], draft.completions)
            if fields.get("assignment"):
                fields["assignment"] = self.check_assignment(draft, fields["assignment"], nodes)
            self.check_topology_levels(draft)
            if reasons:
                fields["blocked_reason"] = "; ".join(dict.fromkeys(reasons))
            out.append(Workload(**fields))
        return tuple(out)

    def resolve_queue(self, draft: Draft) -> str | None:
        ref = draft.item.ref
        name = draft.fields["local_queue"]
        key = (ref.namespace, name)
        lq = self.local_queues.get(key)
        if lq is None:
            if key in self.bad_local_queues:
                draft.reasons.insert(0, f"LocalQueue {name} in namespace {ref.namespace} is invalid")
            else:
                self.problem(draft.item, f"metadata.labels[{keys.QUEUE_LABEL}]",
                             f"LocalQueue {name} does not exist in namespace {ref.namespace}")
                draft.reasons.insert(0, f"LocalQueue {name} does not exist in namespace {ref.namespace}")
            return None
        cq = self.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            draft.reasons.insert(0, f"LocalQueue {ref.namespace}/{name} points to ClusterQueue "
                                    f"{lq.cluster_queue}, which does not exist")
            return None
        if cq.inactive_reason:
            draft.reasons.insert(0, f"ClusterQueue {cq.name} is inactive: {cq.inactive_reason}")
        return cq.name

    def check_assignment(self, draft: Draft, assignment: tuple[PodSetAssignment, ...],
                         nodes: dict[str, Any]) -> tuple[PodSetAssignment, ...]:
        """A running workload's nodes and flavors must exist. Unknown nodes are reported (its
        pods there take no capacity of any node in the snapshot, but its quota is charged);
        an unknown flavor is reported and its usage charged to the first flavor of the
        ClusterQueue covering that resource: quota that may be in use is never handed out."""
        field = f"metadata.annotations[{keys.ASSIGNMENT}]"
        cq = self.cluster_queues.get(draft.fields.get("cluster_queue") or "")
        out = []
        for entry in assignment:
            missing = sorted(n for n in entry.pods_per_node() if n not in nodes)
            if missing:
                self.problem(draft.item, field, f"pod set {entry.name} runs on node(s) {_listed(missing)}, not in "
                                                "the snapshot: their pods take no node's capacity here, their "
                                                "quota is still charged")
            flavors = dict(entry.flavors)
            unknown: dict[str, list[str]] = {}
            for resource, flavor in sorted(entry.flavors.items()):
                if flavor not in self.flavors or (cq is not None and not _offers(cq, flavor, resource)):
                    unknown.setdefault(flavor, []).append(resource)
            for flavor, resources in sorted(unknown.items()):
                where = "does not exist" if flavor not in self.flavors else f"is not in ClusterQueue {cq.name if cq else ''}"
                charged = []
                for resource in resources:
                    instead = _first_flavor(cq, resource) if cq is not None else None
                    if instead:
                        flavors[resource] = instead
                        charged.append(f"{resource} to flavor {instead}")
                effect = (f"its usage is charged to the queue's first flavor instead ({', '.join(charged)}), so that "
                          "quota in use is not handed out again" if charged else "its usage cannot be charged to any quota")
                self.problem(draft.item, field, f"pod set {entry.name}: flavor {flavor} {where}; {effect}")
            out.append(dataclasses.replace(entry, flavors=flavors) if flavors != dict(entry.flavors) else entry)
        return tuple(out)

    def check_topology_levels(self, draft: Draft) -> None:
        """A TAS level that no flavor of the workload's ClusterQueue has: reported on the workload,
        which waits with that reason (as Kueue's flavor assigner finds no flavor for it),
        rather than with whatever else holds it back (quota) when checked first."""
        cq = self.cluster_queues.get(draft.fields.get("cluster_queue") or "")
        if cq is None or cq.inactive_reason:
            return
        for pod_set in draft.fields["pod_sets"]:
            request = pod_set.topology
            wanted = ([(keys.REQUIRED if request.mode == "required" else keys.PREFERRED, request.level)]
                      if request.mode in ("required", "preferred") and request.level else [])
            wanted += [(keys.SLICE_CONSTRAINTS if len(request.slices) > 1 else keys.SLICE_TOPOLOGY, layer.level)
                       for layer in request.slices]
            if not wanted:
                continue
            offered = {flavor: self.flavor_levels(flavor) for flavor in _flavors_for(cq, pod_set)}
            if not offered or any(all(level in levels for _, level in wanted) for levels in offered.values()):
                continue
            missing = [(k, lv) for k, lv in wanted if not any(lv in levels for levels in offered.values())]
            key, level = missing[0] if missing else wanted[0]
            template = draft.templates.get(pod_set.name, "spec.template")
            has = "; ".join(f"flavor {f}: {', '.join(levels)}" for f, levels in offered.items())
            what = (f"level {level} is not in the Topology of any flavor" if missing else
                    f"levels {', '.join(lv for _, lv in wanted)} are not all in the Topology of any one flavor")
            self.problem(draft.item, f"{template}.metadata.annotations[{key}]",
                         f"{what} ClusterQueue {cq.name} offers ({has}); the workload waits")
            draft.reasons.append(f"topology level {level} is in no flavor's Topology of ClusterQueue {cq.name}")

    def flavor_levels(self, name: str) -> tuple[str, ...]:
        """A flavor's topology levels, ending with the hostname (the node is always the last level)."""
        flavor = self.flavors.get(name)
        topology = self.topologies.get(flavor.topology_name or "") if flavor else None
        levels = topology.levels if topology else ()
        return levels if levels and levels[-1] == HOSTNAME_LABEL else levels + (HOSTNAME_LABEL,)

    def check_node_usage(self, nodes: dict[str, Any], unmanaged: dict[str, dict[str, int]],
                         workloads: tuple[Workload, ...]) -> None:
        """Running work that asks for more than a node has: reported on the node (it takes no more pods)."""
        used: dict[str, dict[str, int]] = {}
        users: dict[str, list[str]] = {}
        for node, usage in unmanaged.items():   # pods Stowplan does not manage over-commit a node too
            if node in nodes:
                used[node] = dict(usage)
                users[node] = ["pods not managed by Stowplan"]
        for w in workloads:
            if w.state is not WorkloadState.RUNNING:
                continue
            for node, there in w.node_usage.items():
                if node not in nodes:
                    continue
                usage = used.setdefault(node, {})
                for resource, amount in there.items():
                    usage[resource] = usage.get(resource, 0) + amount
                users.setdefault(node, []).append(str(w.ref))
        for name in sorted(used):
            allocatable = nodes[name][1]
            over = [resource for resource, amount in sorted(used[name].items()) if amount > allocatable.get(resource)]
            if over:
                item = next((i for i in self.buckets["node"] if i.name == name), None)
                shown = "; ".join(f"{r} {used[name][r]} of {allocatable.get(r)}" for r in over)
                self.problem(item, "status.allocatable",
                             f"running work asks for more than the node has ({shown}; running there: "
                             f"{_listed(sorted(set(users.get(name, ()))))}): no more pods asking for "
                             f"{', '.join(over)} fit on it")

    def planning_time(self, now: float | None, workloads: tuple[Workload, ...]) -> float:
        """--now, else the List's snapshot-time annotation, else the newest timestamp read."""
        if now is not None:
            return float(now)
        for file, value in self.loaded.snapshot_times:
            try:
                stamp = timestamp(value, "metadata.annotations[stowplan.io/snapshot-time]")
            except Bad as bad:
                self.problem(None, bad.field, f"{bad.message}; using the newest timestamp instead", file)
                continue
            if stamp is not None:
                return stamp
        newest = 0.0
        for w in workloads:
            newest = max(newest, w.created_at, w.admitted_at or 0.0, w.checkpointed_at or 0.0)
        for bucket in self.buckets.values():
            for item in bucket:
                raw = item.metadata.get("creationTimestamp")
                if raw:
                    try:
                        newest = max(newest, timestamp(raw, "") or 0.0)
                    except Bad:
                        pass   # reported where it matters (workloads)
        return newest


# ---------------------------------------------------------------- pure helpers

def _listed(names: Sequence[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _offers(cq: ClusterQueue, flavor: str, resource: str) -> bool:
    return any(resource in group.covered_resources and any(fq.flavor == flavor for fq in group.flavors)
               for group in cq.resource_groups)


def _first_flavor(cq: ClusterQueue, resource: str) -> str | None:
    group = next((g for g in cq.resource_groups if resource in g.covered_resources), None)
    return group.flavors[0].flavor if group is not None and group.flavors else None


def _flavors_for(cq: ClusterQueue, pod_set: PodSet) -> list[str]:
    """Flavors of the groups covering what the pod set asks for, in the queue's order."""
    asked = {r for r, v in pod_set.request.items() if v > 0}
    return list(dict.fromkeys(fq.flavor for g in cq.resource_groups if asked & set(g.covered_resources)
                              for fq in g.flavors))


def _problem_key(p: Problem) -> tuple[str, str, str, str]:
    return (p.file, str(p.ref) if p.ref else "", p.field, p.message)


def _cohort_cycles(parent: dict[str, str | None]) -> dict[str, str]:
    """Cohort -> "a -> b -> a" for every cohort on a parentName cycle."""
    cycles: dict[str, str] = {}
    done: set[str] = set()
    for start in sorted(parent):
        path: list[str] = []
        index: dict[str, int] = {}
        current: str | None = start
        while current is not None and current in parent and current not in done and current not in index:
            index[current] = len(path)
            path.append(current)
            current = parent[current]
        if current is not None and current in index:
            cycle = path[index[current]:]
            text = " -> ".join(cycle + [current])
            for name in cycle:
                cycles[name] = text
        done.update(path)
    return cycles


def _owned_by_planned(item: Item, labels: dict[str, Any]) -> bool:
    """A pod of a workload of a planned kind (a Job's, a RayCluster's): not a pod workload."""
    return any(ref.kind not in (pods_kind.POD_KIND, pods_kind.GROUP_KIND)
               for ref, _ in kinds_mod.pod_owners(item.namespace, item.metadata, labels))


def _queued(obj: dict[str, Any]) -> bool:
    """Does the object carry Kueue's queue-name label (it wants to be queued)?"""
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if type(metadata) is dict else None
    return type(labels) is dict and bool(labels.get(keys.QUEUE_LABEL))


def _pod_ready(item: Item, status: Any) -> bool:
    """A pod that counts as Ready for Kueue: condition Ready=True, and not being deleted."""
    if item.metadata.get("deletionTimestamp") or type(status) is not dict:
        return False
    conditions = status.get("conditions")
    return type(conditions) is list and any(
        type(c) is dict and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _node(item: Item) -> tuple[dict[str, str], Resources, tuple[Any, ...], bool, bool]:
    meta, obj = item.metadata, item.obj
    labels = string_map(meta.get("labels"), "metadata.labels")
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    allocatable: dict[str, int] = {}
    for resource, value in mapping(status.get("allocatable"), "status.allocatable").items():
        try:
            allocatable[resource] = parse_quantity(value, resource)
        except QuantityError as err:
            raise Bad(f"status.allocatable.{resource}", str(err)) from None
    allocatable.setdefault("pods", DEFAULT_MAX_PODS)
    ready = True
    conditions = status.get("conditions")
    if type(conditions) is list:
        for condition in conditions:
            if type(condition) is dict and condition.get("type") == "Ready":
                ready = condition.get("status") == "True"
    return (labels, resources(allocatable), taints(spec.get("taints"), "spec.taints"), ready,
            boolean(spec.get("unschedulable"), "spec.unschedulable"))


def _assignment_from_pods(annotated: tuple[PodSetAssignment, ...], pods: dict[str, PodsSeen],
                          completions: int | None) -> tuple[PodSetAssignment, ...]:
    """Bound pods are the truth: pods per node from them, flavors from the annotation.

    Pods still to be bound keep the places the annotation gave them (Kueue pins admitted
    pods to their assigned nodes), and pods that already succeeded give their place back
    (Kueue's reclaimable pods): a fresh admission whose pods are not yet scheduled does
    not look like free capacity, and a finishing Job does not hold more than it runs.
    """
    out = []
    for entry in annotated:
        seen = pods.get(entry.name)
        if seen is None:
            out.append(entry)
            continue
        per_node = dict(seen.per_node)
        wanted = entry.count - seen.succeeded
        if completions is not None:
            wanted = min(entry.count, completions - seen.succeeded)
        left = wanted - sum(per_node.values())
        for node, planned in sorted(entry.pods_per_node().items()):
            if left <= 0:
                break
            extra = min(left, planned - per_node.get(node, 0))
            if extra > 0:
                per_node[node] = per_node.get(node, 0) + extra
                left -= extra
        domains = tuple(((node,), count) for node, count in sorted(per_node.items()))
        out.append(PodSetAssignment(entry.name, sum(per_node.values()), entry.flavors, (HOSTNAME_LABEL,), domains))
    return tuple(out)
