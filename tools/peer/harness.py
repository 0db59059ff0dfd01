"""Run the real Kueue on a Stowplan snapshot and say what it decided.

    run = run_kueue("fixtures/tiny.yaml")
    run.decisions          # models.Decisions on run.effective (the snapshot as Kueue saw it)
    run.rows               # per workload: admitted / pending / evicted / running / moved, and why
    plan_snapshot(run.effective, SolveOptions(solver="greedy"))   # greedy on exactly what Kueue saw

One run, on a control plane of its own (tests/controlplane/rig.py) with Kueue's
manager beside it (tools/peer/kueue.py):

a. the snapshot's namespaces, PriorityClasses, Kueue objects (as v1beta2) and
   Ready nodes are created; pods Stowplan does not manage are created bound to
   their nodes, so they use capacity as in the snapshot;
b. running workloads are created suspended, pinned (required node affinity) to the
   nodes their assignment names, with every ClusterQueue active and its preemption
   off; Kueue admits them; what it gave each (placement, flavors, time) is kept;
c. every ClusterQueue gets its own preemption back and `stopPolicy: Hold`; pending
   workloads are created suspended, in the snapshot's queue order (one creation
   second per snapshot time where there are few of them); once Kueue has made a
   Workload for each, Kueue is frozen, every hold cleared, and Kueue thawed, so
   its first cycle sees every queue; then the harness waits for a fixed point: no
   Workload's admission changed for a quiet period, no eviction in progress;
d. every Workload is read and converted (tools/peer/workloads.py);
e. the effective snapshot is built: Kueue's queue order and UIDs for pending work,
   Kueue's own admission of running work.

Only Jobs and JobSets are created (CREATABLE). Workloads of the other kinds
Stowplan plans are left out of the run before step a, so neither Kueue nor greedy
(which plans on `effective`) sees them; `PeerRun.left_out` and `notes` list them.

Workload pods carry a scheduling gate (objects.GATE) and are never bound: Kueue's
TAS counts admitted TAS workloads by their topology assignment, and quota-only
flavors never look at nodes. (Where a quota-only running workload shares nodes
with a TAS flavor, a real cluster's bound pods would count as TAS usage; the
harness says so in `notes`.)
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from models import Decisions, ObjectRef, Snapshot, WorkloadState
from planner.snapshot import loader, read_snapshot
from planner.k8s.fields import Bad
from planner.k8s.requests import effective_request_dict
from tools.peer import objects as bodies
from tools.peer.controlplane import rig
from tools.peer.kueue import KueueError, KueueManager, binary, kueue_sections
from tools.peer.workloads import (
    Effective, Eviction_, KueueRow, KueueWorkload, current_eviction, effective_objects, effective_snapshot,
    kueue_decisions, kueue_rows, owner, parse_workload, waiting_for_preemption,
)

G, V = "kueue.x-k8s.io", "v1beta2"
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "Cohort": "cohorts",
           "Topology": "topologies", "WorkloadPriorityClass": "workloadpriorityclasses",
           "LocalQueue": "localqueues"}
RESTARTS = 2   # Kueue restarts to finish a lost preemption (settle)
# The workload kinds the harness creates (Kueue's batch/job and jobset integrations). Every
# other kind Stowplan plans (PyTorchJob, MPIJob, TrainJob, RayCluster, RayJob,
# LeaderWorkerSet, Pod, PodGroup) is left out of the run and listed in PeerRun.left_out:
# their objects would need Kueue's matching integration and, for pods, its webhook.
CREATABLE = ("Job", "JobSet")
KUEUE_ORDER = ("WorkloadPriorityClass", "Topology", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")

Say = Callable[[str], None]


class PeerError(RuntimeError):
    """The harness could not run Kueue on this snapshot."""


@dataclass
class PeerOptions:
    quiet_seconds: float = 8.0        # a fixed point: no admission changed for this long
    timeout: float | None = None      # for the fixed point; default 300 s + 2 s per workload
    order: str = "auto"               # pending creation: exact (a second per snapshot time) | fast | auto
    exact_limit: int = 60             # auto: exact when the pending work has at most this many distinct times
    workers: int = 8                  # parallel API writes
    keep: bool = False                # keep the control plane's work dir (logs) afterwards
    poll: float = 1.0


@dataclass
class PeerRun:
    source: str
    snapshot: Snapshot                            # as read
    effective: Snapshot                           # as Kueue saw it
    effective_document: dict[str, Any]            # the same as a `kind: List` (write_effective)
    decisions: Decisions                          # Kueue's, on `effective`
    rows: tuple[KueueRow, ...]
    dropped: tuple[tuple[ObjectRef, str], ...]    # running workloads Kueue did not admit first
    settled: bool
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)   # Kueue's head counts per cycle after the release
    workdir: str | None = None
    left_out: tuple[ObjectRef, ...] = ()          # workloads of kinds the harness cannot create (CREATABLE)

    def write_effective(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.effective_document, indent=1, sort_keys=False) + "\n", encoding="utf-8")

    @property
    def quota_only(self) -> list[ObjectRef]:
        return [r.ref for r in self.rows if r.quota_only]


def available(manifest: Mapping[str, str] | None = None) -> str | None:
    """None when the harness can run here, else why not (for skip messages)."""
    try:
        manifest = dict(manifest) if manifest is not None else rig.load_manifest()
    except rig.ControlPlaneError as err:
        return str(err)
    if binary(manifest) is None:
        return ("no Kueue manager binary in the control plane manifest: run `bash tests/controlplane/build.sh` "
                "(it builds sigs.k8s.io/kueue/cmd/kueue; needs Go)")
    return None


# ---------------------------------------------------------------- API access

class Api:
    """The Kubernetes client for one control plane, shared by worker threads."""

    def __init__(self, kubeconfig: str | Path, workers: int):
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
        cfg.connection_pool_maxsize = max(4, workers * 2)
        # The client's own types describe its models; the harness sends and reads plain dicts.
        self.client: Any = client
        self.api: Any = client.ApiClient(cfg)
        self.core: Any = client.CoreV1Api(self.api)
        self.batch: Any = client.BatchV1Api(self.api)
        self.custom: Any = client.CustomObjectsApi(self.api)
        self.scheduling: Any = client.SchedulingV1Api(self.api)
        self.workers = workers

    def close(self) -> None:
        self.api.close()

    def parallel(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[tuple[Any, Exception]]:
        """fn over items on worker threads; the (item, error) pairs that failed."""
        failed: list[tuple[Any, Exception]] = []
        lock = threading.Lock()

        def run(item: Any) -> None:
            try:
                fn(item)
            except Exception as err:  # noqa: BLE001 - reported per object
                with lock:
                    failed.append((item, err))

        if len(items) <= 1 or self.workers <= 1:
            for item in items:
                run(item)
        else:
            with ThreadPoolExecutor(self.workers) as pool:
                list(pool.map(run, items))
        return failed

    def create(self, body: Mapping[str, Any]) -> None:
        """Create any object the harness makes; an existing one is fine."""
        kind = body["kind"]
        meta = body["metadata"]
        try:
            if kind == "Namespace":
                self.core.create_namespace(body)
            elif kind == "Node":
                self.core.create_node(body)
            elif kind == "Pod":
                self.core.create_namespaced_pod(meta["namespace"], body)
            elif kind == "PriorityClass":
                self.scheduling.create_priority_class(body)
            elif kind == "Job":
                self.batch.create_namespaced_job(meta["namespace"], body)
            elif kind == "JobSet":
                self.custom.create_namespaced_custom_object(*JOBSET[:2], meta["namespace"], JOBSET[2], body)
            elif kind == "LocalQueue":
                self.custom.create_namespaced_custom_object(G, V, meta["namespace"], "localqueues", body)
            elif kind in PLURALS:
                self.custom.create_cluster_custom_object(G, V, PLURALS[kind], body)
            else:
                raise PeerError(f"cannot create {kind}")
        except self.client.ApiException as err:
            if err.status != 409:
                raise PeerError(f"{kind}/{meta.get('namespace', '')}/{meta['name']}: "
                                f"{err.status} {_api_message(err)}") from None

    def workloads(self) -> list[dict[str, Any]]:
        return list(self.custom.list_cluster_custom_object(G, V, "workloads").get("items") or [])

    def cluster_queues(self) -> list[dict[str, Any]]:
        return list(self.custom.list_cluster_custom_object(G, V, "clusterqueues").get("items") or [])


def _api_message(err: Exception) -> str:
    body = getattr(err, "body", None)
    try:
        return str(json.loads(body).get("message", body)) if body else str(err)
    except (ValueError, AttributeError):
        return str(body)


def _units(resource: str, value: Any) -> int:
    """A quantity as the reader's integer units (the API server may respell it)."""
    from planner.k8s.quantity import parse_quantity

    return parse_quantity(value, resource)


def _wait(what: str, probe: Callable[[], bool], timeout: float, poll: float = 0.5,
          check: Callable[[], None] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        if probe():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)


# ---------------------------------------------------------------- the run

class _Run:
    def __init__(self, source: str, options: PeerOptions, manifest: Mapping[str, str] | None, say: Say):
        self.source = source
        self.options = options
        self.say = say
        self.manifest = dict(manifest) if manifest is not None else rig.load_manifest()
        read = read_snapshot([source])
        # Workloads of kinds the harness cannot create: left out of the run, for Kueue and greedy alike.
        self.left_out = tuple(w.ref for w in read.workloads
                              if w.ref.kind not in CREATABLE and w.state in (WorkloadState.PENDING,
                                                                             WorkloadState.RUNNING))
        left = set(self.left_out)
        self.snapshot = replace(read, workloads=tuple(w for w in read.workloads if w.ref not in left))
        self.objects = [obj for _, obj in loader.load([source]).objects]
        self.notes: list[str] = []
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for obj in self.objects:
            self.by_kind[obj.get("kind", "")].append(obj)
        self.raw: dict[ObjectRef, dict[str, Any]] = {}
        for obj in self.by_kind["Job"] + self.by_kind["JobSet"]:
            meta = obj.get("metadata") or {}
            self.raw[ObjectRef(obj["kind"], meta.get("namespace") or "default", meta.get("name", ""))] = obj
        self.hostname: dict[str, str] = {}      # node name -> its hostname label
        self.node_of: dict[str, str] = {}       # hostname label -> node name
        self.created_nodes: set[str] = set()
        self.evictions: dict[str, list[Eviction_]] = defaultdict(list)   # Workload UID -> seen evictions

    # ------------------------------------------------------------ a. objects

    def create_objects(self, api: Api) -> None:
        namespaces: dict[str, Mapping[str, str]] = {}
        for obj in self.by_kind["Namespace"]:
            meta = obj.get("metadata") or {}
            namespaces[meta["name"]] = meta.get("labels") or {}
        for obj in self.objects:
            ns = (obj.get("metadata") or {}).get("namespace")
            if ns and ns not in namespaces:
                namespaces[ns] = {}
        for w in self.snapshot.workloads:
            namespaces.setdefault(w.ref.namespace, {})
        self._create_all(api, [bodies.namespace_body(n, labels) for n, labels in sorted(namespaces.items())
                               if n not in ("default", "kube-system", "kube-public", "kube-node-lease")])
        self._create_all(api, [bodies.priority_class_body(o) for o in self.by_kind["PriorityClass"]
                               if not (o.get("metadata") or {}).get("name", "").startswith("system-")])
        for kind in KUEUE_ORDER:
            made = []
            for obj in self.by_kind[kind]:
                if not obj.get("apiVersion", "").startswith(G + "/"):
                    continue
                body = bodies.kueue_body(obj, self.notes)
                if kind == "ClusterQueue":
                    body["spec"] = bodies.held_spec(body["spec"], preemption=False, hold=False)
                made.append(body)
            self._create_all(api, made)

    def _create_all(self, api: Api, items: Sequence[Mapping[str, Any]]) -> None:
        for item, err in api.parallel(api.create, items):
            meta = item["metadata"]
            self.notes.append(f"not created: {item['kind']}/{meta.get('namespace', '')}/{meta['name']}: {err}")

    def create_nodes(self, api: Api) -> None:
        pairs = []
        for obj in self.by_kind["Node"]:
            name = (obj.get("metadata") or {}).get("name", "")
            labels = (obj.get("metadata") or {}).get("labels") or {}
            self.hostname[name] = labels.get(bodies.HOSTNAME, name)
            if not bodies.node_ready(obj):
                self.notes.append(f"node {name} is not Ready in the snapshot: not created (KWOK keeps nodes Ready)")
                continue
            pairs.append(bodies.node_bodies(obj))
        self.node_of = {host: name for name, host in self.hostname.items()}
        failed = api.parallel(api.create, [p[0] for p in pairs])
        for item, err in failed:
            self.notes.append(f"node {item['metadata']['name']} not created: {err}")
        bad = {item["metadata"]["name"] for item, _ in failed}
        status = {p[0]["metadata"]["name"]: p[1] for p in pairs if p[0]["metadata"]["name"] not in bad}
        self.created_nodes = set(status)

        # KWOK's node-initialize stage writes its defaults (no GPUs) once, to a node not yet
        # Ready, from the copy it saw: landing after ours it would undo ours. So ours go in
        # after KWOK's, and again wherever a node does not show them; once a node is Ready
        # KWOK leaves it alone.
        wanted = {name: {k: _units(k, v) for k, v in body["status"]["allocatable"].items()}
                  for name, body in status.items()}

        def listed() -> dict[str, dict[str, Any]]:
            items = json.loads(api.core.list_node(_preload_content=False).data).get("items") or []
            return {n["metadata"]["name"]: n.get("status") or {} for n in items}

        def initialised() -> bool:
            seen = listed()
            return all(str((seen.get(n, {}).get("nodeInfo") or {}).get("kubeletVersion", "")).startswith("kwok")
                       for n in status)

        if not _wait("KWOK to initialise the nodes", initialised, 120 + len(status) / 5, 1.0):
            self.notes.append("KWOK did not initialise every node in time")

        def stale() -> list[str]:
            out = []
            for name, st in listed().items():
                if name not in wanted:
                    continue
                ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or ())
                have = {k: _units(k, v) for k, v in (st.get("allocatable") or {}).items()}
                if not ready or have != wanted[name]:
                    out.append(name)
            return out

        deadline = time.monotonic() + 120 + len(status) / 10
        todo = sorted(status)
        while todo and time.monotonic() < deadline:
            for name, err in api.parallel(lambda n: api.core.patch_node_status(n, status[n]), todo):
                self.notes.append(f"node {name}: status not written: {err}")
            time.sleep(2.0)
            todo = stale()
        if todo:
            self.notes.append(f"{len(todo)} nodes never showed the snapshot's allocatable (e.g. {todo[0]})")
        self.counts["node status writes"] = len(status)

    def create_unmanaged_pods(self, api: Api) -> None:
        running = {w.ref for w in self.snapshot.workloads if w.state is WorkloadState.RUNNING}
        from tools.peer.workloads import pod_owner

        pods = []
        for obj in self.by_kind["Pod"]:
            spec = obj.get("spec") or {}
            phase = (obj.get("status") or {}).get("phase")
            node = spec.get("nodeName")
            if not node or phase in ("Succeeded", "Failed") or node not in self.created_nodes:
                continue
            if pod_owner(obj) in running:
                continue
            try:
                request = effective_request_dict(spec)
            except Bad:
                request = {"pods": 1}
            pods.append(bodies.unmanaged_pod_body(obj, request))
        self._create_all(api, pods)
        self.counts["unmanaged pods"] = len(pods)

    # ------------------------------------------------------------ workloads

    def pins(self, ref: ObjectRef) -> dict[str, list[str]]:
        w = next(w for w in self.snapshot.workloads if w.ref == ref)
        return {psa.name: [self.hostname.get(n, n) for n in psa.pods_per_node()] for psa in w.assignment}

    def workload_index(self, api: Api) -> dict[ObjectRef, dict[str, Any]]:
        """Owner -> its Workload (the newest, should Kueue have made two)."""
        out: dict[ObjectRef, dict[str, Any]] = {}
        for obj in api.workloads():
            ref = owner(obj)
            if ref is None:
                continue
            old = out.get(ref)
            if old is None or old["metadata"]["creationTimestamp"] <= obj["metadata"]["creationTimestamp"]:
                out[ref] = obj
        return out

    def create_workloads(self, api: Api, refs: Sequence[ObjectRef], pinned: bool) -> None:
        items = []
        for ref in refs:
            raw = self.raw.get(ref)
            if raw is None:
                self.notes.append(f"{ref}: no object in the snapshot to create")
                continue
            items.append(bodies.workload_body(raw, self.pins(ref) if pinned else None))
        self._create_all(api, items)

    def admit_running(self, api: Api, kueue: KueueManager) -> dict[ObjectRef, KueueWorkload]:
        running = sorted((w for w in self.snapshot.workloads if w.state is WorkloadState.RUNNING),
                         key=lambda w: (w.admitted_at or w.created_at, w.ref))
        if not running:
            return {}
        # In waves, those pinned to the fewest nodes first: Kueue places a pod set pinned to
        # several nodes by BestFit within them, not as the snapshot had it, and could take
        # the room of one pinned to a single node.
        waves: dict[int, list[ObjectRef]] = defaultdict(list)
        for w in running:
            waves[len({n for psa in w.assignment for n in psa.pods_per_node()})].append(w.ref)
        self.say(f"b. {len(running)} running workloads: Kueue admits them first, pinned to their nodes "
                 f"({len(waves)} waves by node count)")
        for size in sorted(waves):
            self._admit_wave(api, kueue, waves[size])
        index = self.workload_index(api)
        refs = {w.ref for w in running}
        return {ref: k for ref in refs if ref in index
                for k in [parse_workload(index[ref], self.node_of)] if k is not None}

    def _admit_wave(self, api: Api, kueue: KueueManager, wave: Sequence[ObjectRef]) -> None:
        self.create_workloads(api, wave, pinned=True)
        refs = set(wave)
        state: dict[str, Any] = {"sig": None, "since": time.monotonic()}

        def admitted() -> bool:
            index = self.workload_index(api)
            mine = {ref: parse_workload(index[ref], self.node_of) for ref in refs if ref in index}
            sig = tuple(sorted((str(ref), k.admitted) for ref, k in mine.items() if k is not None))
            if sig != state["sig"]:
                state["sig"], state["since"] = sig, time.monotonic()
            if all(k is not None and k.admitted for k in mine.values()) and len(mine) == len(refs):
                return True
            tried = len(mine) == len(refs) and all(k is not None and k.seen for k in mine.values())
            return tried and time.monotonic() - state["since"] >= self.options.quiet_seconds

        if not _wait("running workloads admitted", admitted, 120 + len(wave), min(self.options.poll, 0.5), kueue.check):
            self.notes.append("step b: Kueue did not settle on the running workloads in time")

    # ------------------------------------------------------------ c. hold, create, release

    def hold(self, api: Api, kueue: KueueManager) -> None:
        """Every ClusterQueue: its own preemption back, stopPolicy Hold."""
        specs = {}
        for obj in self.by_kind["ClusterQueue"]:
            if obj.get("apiVersion", "").startswith(G + "/"):
                specs[obj["metadata"]["name"]] = bodies.held_spec(bodies.kueue_body(obj)["spec"], preemption=True,
                                                                  hold=True)

        def put(name: str) -> None:
            for _ in range(20):
                current = api.custom.get_cluster_custom_object(G, V, "clusterqueues", name)
                current["spec"] = specs[name]
                try:
                    api.custom.replace_cluster_custom_object(G, V, "clusterqueues", name, current)
                    return
                except api.client.ApiException as err:
                    if err.status != 409:
                        raise
            raise PeerError(f"ClusterQueue {name}: conflicts on every update")

        for name, err in api.parallel(put, sorted(specs)):
            self.notes.append(f"ClusterQueue {name}: not held: {err}")

        def held() -> bool:
            for cq in api.cluster_queues():
                conditions = {c["type"]: c for c in (cq.get("status") or {}).get("conditions") or ()}
                active = conditions.get("Active")
                if cq["metadata"]["name"] in specs and (active is None or active.get("status") == "True"):
                    return False
            return True

        if not _wait("ClusterQueues held", held, 60, 0.3, kueue.check):
            self.notes.append("not every ClusterQueue reported itself stopped in time")

    def create_pending(self, api: Api, kueue: KueueManager) -> None:
        pending = sorted((w for w in self.snapshot.workloads if w.state is WorkloadState.PENDING),
                         key=lambda w: (w.queued_at, w.uid, w.ref))
        if not pending:
            return
        groups: list[list[ObjectRef]] = []
        last: float | None = None
        for w in pending:
            if last is None or w.queued_at != last:
                groups.append([])
                last = w.queued_at
            groups[-1].append(w.ref)
        exact = self.options.order == "exact" or (self.options.order == "auto" and len(groups) <= self.options.exact_limit)
        self.say(f"c. {len(pending)} pending workloads, {len(groups)} distinct queue times: "
                 f"{'one creation second each' if exact else 'created as fast as Kueue takes them'}")
        if not exact:
            groups = [[w.ref for w in pending]]
        for group in groups:
            self.create_workloads(api, group, pinned=False)
            if not exact:
                break
            want = set(group)
            _wait("Workloads of one queue time", lambda: want <= set(self.workload_index(api)), 30, 0.1, kueue.check)
            time.sleep(1.02 - (time.time() % 1.0))   # the next group's Workloads get a later second
        refs = {w.ref for w in pending}
        if not _wait("a Workload for every pending workload", lambda: refs <= set(self.workload_index(api)),
                     120 + len(pending) / 2, self.options.poll, kueue.check):
            missing = sorted(refs - set(self.workload_index(api)))
            self.notes.append(f"Kueue made no Workload for {len(missing)} pending workloads: "
                              + ", ".join(map(str, missing[:10])))

    def release(self, api: Api, kueue: KueueManager) -> float:
        """Clear every hold while Kueue is frozen, so that it sees every queue at once."""
        names = [obj["metadata"]["name"] for obj in self.by_kind["ClusterQueue"]
                 if obj.get("apiVersion", "").startswith(G + "/")]
        body = {"spec": {"stopPolicy": None}}
        kueue.freeze()
        try:
            failed = api.parallel(lambda n: api.custom.patch_cluster_custom_object(G, V, "clusterqueues", n, body), names)
        finally:
            released = time.time()
            kueue.thaw()
        for name, err in failed:
            self.notes.append(f"ClusterQueue {name}: hold not cleared: {err}")
        return released

    def settle(self, api: Api, kueue: KueueManager) -> bool:
        """Wait for Kueue's fixed point (module doc); False if it never came.

        Kueue v0.17.0 can lose a preemption: when it evicts a workload whose own
        admission write is still in flight, the admission's apply can land after the
        eviction and undo it. The preemptor then waits, as its queue's sticky head,
        for an eviction that never comes ("Pending the preemption of N workload(s)"
        with no eviction in progress), and scheduling cycles spin every few
        milliseconds with no change. Seen at a fixed point, that is noted and Kueue
        is restarted (its caches and expectations rebuilt from the API server) to
        finish what it started; at most `RESTARTS` times."""
        for attempt in range(RESTARTS + 1):
            settled = self._settle_once(api, kueue)
            stuck = sorted(str(owner(obj)) for obj in api.workloads() if waiting_for_preemption(obj))
            if not settled or not stuck:
                return settled
            self.notes.append(f"Kueue lost a preemption: {', '.join(stuck[:5])} waited for evictions that never "
                              "came (its admission write raced the eviction of the same workload)"
                              + ("; Kueue restarted to finish it" if attempt < RESTARTS else "; left as it is"))
            if attempt < RESTARTS:
                kueue.restart()
        return True

    def _settle_once(self, api: Api, kueue: KueueManager) -> bool:
        n = len(self.snapshot.workloads)
        timeout = self.options.timeout or (300.0 + 2.0 * n)
        quiet = self.options.quiet_seconds
        started = time.monotonic()
        last_sig: Any = None
        changed = time.monotonic()
        while True:
            kueue.check()
            listed = time.monotonic()
            workloads = api.workloads()
            sig = []
            evicting = 0
            unseen = 0
            for obj in workloads:
                status = obj.get("status") or {}
                conditions = {c["type"]: c.get("status") for c in status.get("conditions") or ()}
                sig.append((obj["metadata"]["uid"], conditions.get("QuotaReserved"), conditions.get("Evicted"),
                            json.dumps(status.get("admission"), sort_keys=True)))
                eviction = current_eviction(obj)
                seen = self.evictions[obj["metadata"]["uid"]]
                if eviction is not None and eviction not in seen:
                    seen.append(eviction)
                if conditions.get("Evicted") == "True" and conditions.get("QuotaReserved") == "True":
                    evicting += 1
                if "QuotaReserved" not in conditions:
                    unseen += 1
            terminating = sum(1 for job in api.batch.list_job_for_all_namespaces().items
                              if job.spec.suspend and (job.status.active or 0) > 0)  # gated pods still there
            signature = tuple(sorted(sig))
            now = time.monotonic()
            if signature != last_sig:
                last_sig, changed = signature, now
            calm = now - changed
            if not evicting and not terminating and calm >= quiet and (unseen == 0 or calm >= 3 * quiet):
                return True
            if now - started > timeout:
                self.notes.append(f"no fixed point within {timeout:.0f} s ({evicting} evictions in progress, "
                                  f"{terminating} suspended Jobs with pods, last change {calm:.0f} s ago)")
                return False
            time.sleep(max(self.options.poll, 2 * (time.monotonic() - listed)))

    # ------------------------------------------------------------ d, e. read and convert

    def read_final(self, api: Api) -> dict[ObjectRef, KueueWorkload]:
        out = {}
        for ref, obj in self.workload_index(api).items():
            k = parse_workload(obj, self.node_of, self.evictions.get(obj["metadata"]["uid"], ()))
            if k is not None:
                out[ref] = k
        return out

    def caveats(self, effective: Snapshot, rows: Sequence[KueueRow]) -> None:
        policy = effective.policy
        if policy.aging_per_hour > 0:
            self.notes.append("the policy ages priorities (agingPerHour); Kueue does not")
        if policy.minimum_runtime_seconds > 0:
            self.notes.append("the policy sets minimumRuntimeSeconds; Kueue has no such rule")
        protected = [w.ref for w in effective.workloads if w.non_preemptible and w.state is WorkloadState.RUNNING]
        if protected:
            self.notes.append(f"{len(protected)} running workloads are stowplan.io/non-preemptible; Kueue does not know it")
        quota_only = [r.ref for r in rows if r.quota_only]
        if quota_only:
            self.notes.append(f"{len(quota_only)} admissions on flavors without a Topology: Kueue checked quota only, "
                              "never nodes (Stowplan also fits pods on nodes)")
        tas_nodes = self._tas_nodes(effective)
        shared = [w.ref for w in effective.workloads if w.state is WorkloadState.RUNNING
                  and any(not self._tas_flavor(effective, p) and set(p.pods_per_node()) & tas_nodes
                          for p in w.assignment)]
        if shared:
            self.notes.append(f"{len(shared)} running quota-only workloads sit on nodes of a TAS flavor; their pods "
                              "are not bound here, so Kueue's TAS does not count them (a real cluster would)")

    @staticmethod
    def _tas_flavor(snapshot: Snapshot, psa: Any) -> bool:
        return any((snapshot.flavors.get(f) is not None and snapshot.flavors[f].topology_name)
                   for f in psa.flavors.values())

    @staticmethod
    def _tas_nodes(snapshot: Snapshot) -> set[str]:
        nodes = set()
        for flavor in snapshot.flavors.values():
            if not flavor.topology_name:
                continue
            for node in snapshot.nodes:
                if all(node.labels.get(k) == v for k, v in flavor.node_labels.items()):
                    nodes.add(node.name)
        return nodes


def run_kueue(source: str | Path, options: PeerOptions | None = None, *, manifest: Mapping[str, str] | None = None,
              say: Say = lambda message: None) -> PeerRun:
    """Run Kueue on the snapshot file `source` (module doc); raises PeerError/KueueError
    when it cannot. A run that never reaches a fixed point returns with settled=False."""
    options = options or PeerOptions()
    run = _Run(str(source), options, manifest, say)
    reason = available(run.manifest)
    if reason:
        raise PeerError(reason)
    t0 = time.monotonic()
    cp = rig.ControlPlane(manifest=run.manifest, keep_workdir=options.keep)
    cp.start()
    kueue = None
    api = None
    try:
        kueue = KueueManager(cp, say=say, sections=kueue_sections(run.snapshot.kueue_config))
        kueue.start()
        run.notes.extend(kueue.notes)
        api = Api(cp.kubeconfig, options.workers)
        t1 = time.monotonic()
        run.seconds["cluster"] = t1 - t0
        say(f"a. objects and {len(run.by_kind['Node'])} nodes of {source}")
        run.create_objects(api)
        run.create_nodes(api)
        run.create_unmanaged_pods(api)
        t2 = time.monotonic()
        run.seconds["objects"] = t2 - t1
        first = run.admit_running(api, kueue)
        t3 = time.monotonic()
        run.seconds["running"] = t3 - t2
        run.hold(api, kueue)
        run.create_pending(api, kueue)
        offset = kueue.log_size()
        released = run.release(api, kueue)
        t4 = time.monotonic()
        run.seconds["pending"] = t4 - t3
        say("c. holds cleared: waiting for Kueue's fixed point")
        settled = run.settle(api, kueue)
        t5 = time.monotonic()
        run.seconds["settle"] = t5 - t4
        final = run.read_final(api)
        heads = kueue.heads_per_cycle(offset)
        early = kueue.early_preemptions(offset)
        if early:
            run.notes.append("Kueue preempted " + ", ".join(early[:5]) + " before its own admission of it was "
                             "written; where that eviction was lost, Kueue took another victim: this run's "
                             "choice of victims is timing-dependent")
    finally:
        if api is not None:
            api.close()
        if kueue is not None:
            kueue.stop()
        cp.stop()
    run.seconds["total"] = time.monotonic() - t0
    shift = float(math.floor(run.snapshot.now) - math.floor(released))
    effective: Effective = effective_snapshot(run.snapshot, final, first, shift)
    rows = kueue_rows(effective.snapshot, final, first)
    decisions = kueue_decisions(effective.snapshot, rows)
    for ref, why in effective.dropped:
        run.notes.append(f"dropped running {ref}: {why}")
    run.caveats(effective.snapshot, rows)
    active = {w.cluster_queue for w in effective.snapshot.workloads
              if w.state is WorkloadState.PENDING and w.cluster_queue}
    if heads and heads[0] < len(active):
        run.notes.append(f"Kueue's first cycle after the release saw {heads[0]} heads of {len(active)} queues "
                         "with pending work")
    if run.left_out:
        kinds = sorted({ref.kind for ref in run.left_out})
        run.notes.append(f"left out of the run for Kueue and greedy alike, {len(run.left_out)} workloads of kinds "
                         f"the harness cannot create ({', '.join(kinds)}): " + ", ".join(map(str, run.left_out)))
    document = effective_objects(run.objects, run.snapshot, effective, run.left_out)
    return PeerRun(str(source), run.snapshot, effective.snapshot, document, decisions, rows, effective.dropped,
                   settled, {k: round(v, 2) for k, v in run.seconds.items()}, run.notes, heads[:5],
                   str(cp.workdir) if options.keep else None, run.left_out)
