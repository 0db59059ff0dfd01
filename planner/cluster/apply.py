"""Plan -> cluster writes: the only module that changes anything in a cluster.

One cycle, in this order (Kueue's split: deciding is pure, this only issues):
  1. finish what the last cycle started: gated pods of admitted workloads get
     their node and lose the gate;
  2. evictions: suspend, annotate why, drop the assignment, emit an Event;
  3. admissions: ONE update per Job/JobSet that adds the flavor's nodeSelector
     and tolerations, a required node affinity to the assigned nodes, the
     scheduling gate `stowplan.io/topology`, the `stowplan.io/assignment` and
     `stowplan.io/admitted-at` annotations, and unsuspends it; then an Event;
  4. release the gates of the admitted workloads' pods as they appear, each
     pod pinned to a node of the plan (nodeSelector kubernetes.io/hostname).
Every pin (node affinity, nodeSelector) names the node's kubernetes.io/hostname label,
which kube-scheduler matches, not its name (models.NodePins; REFERENCE §2).

Migrations (defragmentation) are an eviction then an admission of the same Job:
  2b. ONE write suspends it and swaps `stowplan.io/assignment` for
      `stowplan.io/migrating-to` (its new place). From then on the reader takes
      it as running at the new place (holding those nodes and its quota) while
      its old pods, still bound, count as used capacity where they are: at no
      moment does the Job hold neither place.
  3b. once its old pods are gone (and the job controller has reset its start
      time), it is admitted at the new place as in 3, the annotation dropped.
      Within `release_wait`; what is not done by then, step 1b of a later cycle
      finishes (Jobs still carrying `stowplan.io/migrating-to`).

Why this order is safe after a crash at any point:
  - a Job is never running without its assignment: the unsuspend and the
    assignment are one write;
  - a pod never binds where the plan did not say: it is gated until it gets its
    node, and the node affinity already limits it to the assigned nodes;
  - evictions go first, so capacity is freed before it is claimed. A crash
    between evictions and admissions leaves victims suspended (they wait in
    their queues) and the admissions unwritten; the next cycle plans again from
    what it reads. Until the victims' pods are gone they still count as used
    capacity on their nodes (the reader counts every bound pod that is not a
    running Stowplan workload's), so the next plan never double-books them;
  - a crash during gate release leaves some pods gated; step 1 of the next
    cycle releases them, counting the pods already placed, so no node gets more
    pods of a workload than the plan gave it.
Every write carries the resourceVersion the plan was made from (a PUT of the
object read, or a JSON-patch `test`): a conflict skips that workload, it is
reported, and the next cycle plans it again. A second apply of the same plan
finds everything in place and writes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import time
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Mapping, Sequence

from models import (
    HOSTNAME_LABEL, Admission, Eviction, Migration, NodePins, ObjectRef, Plan, PodSetAssignment, Resize, ResourceFlavor,
)
from planner import kinds
from planner.cycle import elastic
from planner.base import interrupt
from planner.cluster import lws as lws_writes
from planner.cluster import podgroups
from planner.cluster import pods as pod_writes
from planner.cluster.kube import JSON_PATCH, MERGE_PATCH, ApiStatus, Kube, path_of
from planner.kinds import SCHEDULING_FIELDS
from planner.kinds import ray as ray_kind
from planner.kinds.job import JOB_NAME_LABELS
from planner.k8s.fields import Bad
from planner.k8s.annotations import (
    ADMITTED_AT, ASSIGNMENT, DEACTIVATED, decode_assignment, encode_assignment, DISPATCHED_AT, KUEUE_GATE, DISPATCHED_TO, DISPATCHING_TO, ELASTIC_JOB, EVICTED_AT,
    EVICTION_REASON, MAX_PARALLELISM, MIGRATING_TO, ORIGINAL_SCHEDULING as ORIGINAL, PODS_NOT_READY_AT,
    PODS_READY_AT, REQUEUE_AT, REQUEUE_COUNT, TOPOLOGY_GATE as GATE, WORKER_STATUS,
)

# A pod held back for admission: Stowplan's gate, or Kueue's (an LWS's pods made before their group was
# admitted; an elastic workload's pods, gated by Kueue's webhook until their slice is admitted:
# workloadslicing.StartWorkloadSlicePods lifts that gate as apply lifts its own)
HOLD_GATES = (GATE, KUEUE_GATE, ELASTIC_JOB)
# waitForPodsReady's record (planner.cycle.podsready): written by evictions and `mark`
READINESS = (PODS_READY_AT, PODS_NOT_READY_AT)
DONE = ("Succeeded", "Failed")
# A multi-cluster apply's marks on the manager's copy (planner.cluster.dispatch): its own
# bookkeeping, not the workload's spec, so they never make a saved plan stale
DISPATCH_NOTES = (DISPATCHING_TO, DISPATCHED_TO, WORKER_STATUS, DISPATCHED_AT)
ATTEMPTS = 3   # a PUT that conflicts is re-read and retried while only status changed (the job controller)


@dataclasses.dataclass
class ApplyReport:
    dry_run: bool = False
    admitted: list[ObjectRef] = dataclasses.field(default_factory=list)
    evicted: list[ObjectRef] = dataclasses.field(default_factory=list)
    moved: list[ObjectRef] = dataclasses.field(default_factory=list)      # admitted at their new place
    moving: list[ObjectRef] = dataclasses.field(default_factory=list)     # suspended, old pods still leaving
    resized: list[ObjectRef] = dataclasses.field(default_factory=list)    # elastic Jobs grown or shrunk
    unchanged: list[ObjectRef] = dataclasses.field(default_factory=list)
    conflicts: list[tuple[ObjectRef, str]] = dataclasses.field(default_factory=list)
    released: int = 0            # pods given their node and ungated
    marked: list[ObjectRef] = dataclasses.field(default_factory=list)   # readiness recorded (planner.cycle.podsready)
    still_gated: int = 0         # gated pods of admitted workloads left for the next cycle
    requests_created: list[str] = dataclasses.field(default_factory=list)   # ProvisioningRequests (NAMESPACE/NAME)
    requests_deleted: list[str] = dataclasses.field(default_factory=list)
    writes: int = 0
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        dry = " (dry run: nothing changed)" if self.dry_run else ""
        moves = f"{len(self.moved)} moved, {len(self.moving)} moving, " if self.moved or self.moving else ""
        moves += f"{len(self.resized)} resized, " if self.resized else ""
        return (f"applied{dry}: {len(self.admitted)} admitted, {len(self.evicted)} evicted, {moves}"
                f"{self.released} pods released, {len(self.unchanged)} already in place, "
                f"{len(self.conflicts)} conflicts, {self.still_gated} pods left gated"
                + (f", readiness recorded on {len(self.marked)}" if self.marked else "")
                + (f", {len(self.requests_created)} ProvisioningRequests created, {len(self.requests_deleted)} deleted"
                   if self.requests_created or self.requests_deleted else ""))


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_path(ref: ObjectRef) -> str:
    adapter = kinds.by_kind(ref.kind)
    assert adapter is not None, ref
    return path_of(adapter.api_version, adapter.plural, ref.namespace, ref.name)


def planned_kind(obj: Mapping[str, Any]) -> bool:
    """Is `obj` of a kind Stowplan plans (has an adapter)?"""
    return kinds.by_kind(obj.get("kind")) is not None


def fingerprint(obj: Mapping[str, Any]) -> str:
    """What planning reads of a Job/JobSet (spec, labels, annotations), hashed: status changes leave it alone."""
    meta = obj.get("metadata") or {}
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in DISPATCH_NOTES}
    text = json.dumps([obj.get("spec"), meta.get("labels") or {}, notes],
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def same_assignment(a: str | None, b: str) -> bool:
    if a is None:
        return False
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    metadata = obj.setdefault("metadata", {})
    if not isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {}
    annotations: dict[str, str] = metadata["annotations"]
    return annotations


def is_suspended(obj: dict[str, Any]) -> bool:
    """Suspended, by its kind's own mechanism (absent reads as suspended, as Kueue's webhook sets it)."""
    adapter = kinds.by_kind(obj.get("kind"))
    return adapter.suspended(obj) if adapter is not None else True


def _original_scheduling(adapter: kinds.Adapter, obj: dict[str, Any], lookup: kinds.Lookup) -> dict[str, dict[str, Any]]:
    """The templates' own scheduling fields: recorded at the first admission, the base of every later one."""
    recorded = _annotations(obj).get(ORIGINAL)
    if recorded:
        try:
            value = json.loads(recorded)
            if isinstance(value, dict):
                return value
        except (ValueError, RecursionError):
            pass
    return adapter.original_scheduling(obj, lookup)


def admitted_template_spec(base: Mapping[str, Any], pod_set: PodSetAssignment,
                           flavors: Mapping[str, ResourceFlavor], *, pins: NodePins, pin: bool = True) -> dict[str, Any]:
    """The scheduling fields of an admitted pod template (pure): base + flavor + nodes + gate.

    The node affinity names the nodes by `pins` (their hostname labels, as kube-scheduler matches).

    `pin` False (an elastic Job, whose template cannot change while it runs but whose
    growth may go to other nodes): no node affinity to the assigned nodes; its pods are
    still held by the gate until apply gives each its node."""
    used = [flavors[name] for name in sorted(set(pod_set.flavors.values())) if name in flavors]
    selector = dict(base.get("nodeSelector") or {})
    tolerations = [dict(t) for t in base.get("tolerations") or ()]
    for flavor in used:
        selector.update(flavor.node_labels)
        for t in flavor.tolerations:
            entry = {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                       ("effect", t.effect)) if v}
            if entry not in tolerations:
                tolerations.append(entry)
    nodes = sorted({pins.value(node) for node in pod_set.pods_per_node()})
    affinity = copy.deepcopy(dict(base.get("affinity") or {}))
    if pin:
        to_nodes = {"key": HOSTNAME_LABEL, "operator": "In", "values": nodes}
        node_affinity = affinity.setdefault("nodeAffinity", {})
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.get("nodeSelectorTerms") or [{}]
        # terms are ORed, expressions within one ANDed: the pin goes into every term
        required["nodeSelectorTerms"] = [{**term, "matchExpressions": list(term.get("matchExpressions") or ())
                                          + [to_nodes]} for term in terms]
    gates = [dict(g) for g in base.get("schedulingGates") or ()]
    if {"name": GATE} not in gates:
        gates.append({"name": GATE})
    out: dict[str, Any] = {"schedulingGates": gates}
    if affinity:
        out["affinity"] = affinity
    if selector:
        out["nodeSelector"] = selector
    if tolerations:
        out["tolerations"] = tolerations
    return out


class Applier:
    """Issues one plan's writes. `planned_versions`: ref -> resourceVersion the plan was made from."""

    def __init__(self, kube: Kube, *, flavors: Mapping[str, ResourceFlavor],
                 planned_versions: Mapping[ObjectRef, str], identity: str = "stowplan",
                 say: Callable[[str], None] = lambda _: None, clock: Callable[[], float] = time.time,
                 fingerprints: Mapping[ObjectRef, str] | None = None, workers: int = 8,
                 objects: Iterable[Mapping[str, Any]] = (), pod_groups: bool = False,
                 pins: NodePins = NodePins()):
        self.kube, self.flavors, self.planned = kube, flavors, planned_versions
        # what each pin names for a node (the cluster's nodes read with the plan; empty: by name)
        self.pins = pins
        # Kubernetes' gang scheduling for admitted Jobs that name a PodGroup (planner.cluster.podgroups)
        self.pod_groups = podgroups.PodGroups(kube, say) if pod_groups else None
        # objects read beside the workloads (a TrainJob's runtime), for kinds whose templates live there
        self.beside = {(str(o.get("kind")), str((o.get("metadata") or {}).get("namespace") or ""),
                        str((o.get("metadata") or {}).get("name"))): o for o in objects}
        self.workers = workers
        self.fingerprints = fingerprints or {}
        self.identity, self.say, self.clock = identity, say, clock
        self.report = ApplyReport(dry_run=kube.dry_run)
        self.groups = lws_writes.Groups(kube, planned_versions)   # LeaderWorkerSet writes, one lock per object
        self.assignments: dict[ObjectRef, list[PodSetAssignment]] = {}   # for gate release

    def lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.beside.get((kind, namespace, name))
        return dict(found) if found is not None else None

    # ------------------------------------------------------------ the cycle

    def run(self, plan: Plan, running: Mapping[ObjectRef, list[PodSetAssignment]], *,
            release_wait: float = 5.0, moving: Mapping[ObjectRef, Admission] | None = None) -> ApplyReport:
        started = time.monotonic()
        writes_before = self.kube.writes
        self.assignments.update(running)
        if running:
            self.release_gates(set(running))                 # 1. finish the last cycle
        pending_moves = dict(moving or {})                    # 1b. ... and its moves
        for eviction in plan.evictions:
            pending_moves.pop(eviction.workload, None)
        self._each(self.evict, plan.evictions)                # 2. free capacity (all done before 3 starts)
        started_moves = self._each(self.start_move, plan.migrations)   # 2b. moves: suspended, new place held
        pending_moves.update({m.workload: Admission(m.workload, m.cluster_queue, m.to)
                              for m, ok in zip(plan.migrations, started_moves) if ok})
        resizes = resize_groups(plan.resizes)                 # one write per object (a Ray cluster's groups)
        shrinks = [g for g in resizes if any(r.release for r in g)]
        grows = [g for g in resizes if not any(r.release for r in g)]
        resized = self._each(self.resize, shrinks)            # 2c. elastic Jobs give pods back
        done = self._each(self.admit, plan.admissions)        # 3. claim it
        admitted = {a.workload for a, ok in zip(plan.admissions, done) if ok}
        resized += self._each(self.resize, grows)             # 3c. ... and grow by a slice
        admitted |= {g[0].workload for g, ok in zip(shrinks + grows, resized) if ok}
        if pending_moves and not self.kube.dry_run:           # 3b. moved, once their old pods are gone
            admitted |= self.finish_moves(pending_moves, release_wait)
        t_writes = time.monotonic()
        if admitted and not self.kube.dry_run:                # 4. pods, as they appear
            self.release_until_placed(admitted, release_wait)
        for refs in (self.report.admitted, self.report.evicted, self.report.unchanged, self.report.moved,
                     self.report.moving, self.report.resized):
            refs.sort()
        self.report.conflicts.sort()
        self.report.writes = self.kube.writes - writes_before
        self.report.seconds = {"workloads": round(t_writes - started, 3),
                               "release": round(time.monotonic() - t_writes, 3),
                               "total": round(time.monotonic() - started, 3)}
        return self.report

    def _each(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """fn over items, `workers` at a time: independent writes to different objects.

        Each write is still optimistic on its own object; only their order among
        themselves is given up, which nothing depends on (evictions all finish
        before any admission starts).
        """
        if self.workers <= 1 or len(items) <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            try:
                # Ctrl-C during a submission would leave a worker started but unknown to the
                # pool (not waited for): they are all made first
                with interrupt.deferred():
                    futures = [pool.submit(fn, item) for item in items]
                return [future.result() for future in futures]
            except BaseException:
                if interrupt.requested():    # Ctrl-C: the writes in flight finish, no other starts
                    pool.shutdown(wait=True, cancel_futures=True)
                raise

    # ------------------------------------------------------------ workloads

    def _read(self, ref: ObjectRef) -> dict[str, Any] | None:
        obj: dict[str, Any] | None = self.kube.get_or_none(workload_path(ref))
        if obj is None:
            self.report.conflicts.append((ref, "it no longer exists"))
        return obj

    def _changed(self, ref: ObjectRef, obj: dict[str, Any]) -> bool:
        """True (and reported) when the object is not what the plan was made from.

        A new resourceVersion whose spec, labels and annotations are unchanged (the
        job controller writing status) is the same workload: planning never reads status.
        """
        planned = self.planned.get(ref)
        now = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if not planned or planned == now:
            return False
        known = self.fingerprints.get(ref)
        if known and known == fingerprint(obj):
            return False
        self.report.conflicts.append((ref, f"changed since the plan was made (resourceVersion {planned} -> {now})"))
        return True

    def _update(self, ref: ObjectRef, obj: dict[str, Any], last: bool) -> dict[str, Any] | None:
        """PUT the object as read and edited: its resourceVersion makes a concurrent change fail.

        None: a conflict; on the last attempt it is reported, else the caller re-reads and retries.
        """
        try:
            written: dict[str, Any] = self.kube.write("PUT", workload_path(ref), obj)
            return written
        except ApiStatus as err:
            if err.status == 404 or (err.status == 409 and last):
                self.report.conflicts.append((ref, f"{'conflict' if err.status == 409 else 'gone'}: {err.detail}"))
                return None
            if err.status == 409:
                return None
            raise

    def admit(self, admission: Admission) -> bool:
        return self._admit(admission, moving=False)

    def _admit(self, admission: Admission, moving: bool) -> bool:
        """Step 3 for `admission`; `moving`: the second half of a move (the Job was suspended by
        this planner with `migrating-to` naming this place, which stands for the plan's version)."""
        ref = admission.workload
        if ref.kind in pod_writes.KINDS:
            return self.admit_pods(admission)
        if ref.kind == lws_writes.KIND:
            return self.admit_group(admission)
        adapter = kinds.by_kind(ref.kind)
        if adapter is None:
            self.report.conflicts.append((ref, f"kind {ref.kind} is not supported"))
            return False
        wanted = encode_assignment(admission.pod_sets)
        for attempt in range(ATTEMPTS):
            obj = self._read(ref)
            if obj is None:
                return False
            annotations = _annotations(obj)
            away = annotations.get(DISPATCHED_TO) or annotations.get(DISPATCHING_TO)
            if away:   # it runs (or is about to) on a worker cluster: admitting it here too would run it twice
                self.report.conflicts.append((ref, f"it is dispatched to worker cluster {away}; not admitted here"))
                return False
            if not is_suspended(obj):
                if same_assignment(annotations.get(ASSIGNMENT), wanted):
                    self.report.unchanged.append(ref)
                    self.assignments[ref] = list(admission.pod_sets)
                    return True   # its pods may still need releasing
                self.report.conflicts.append((ref, "it is already running with another assignment"))
                return False
            if moving:
                if not same_assignment(annotations.get(MIGRATING_TO), wanted):
                    self.report.conflicts.append((ref, "its migrating-to annotation names another place"))
                    return False
            elif self._changed(ref, obj):
                return False
            original = _original_scheduling(adapter, obj, self.lookup)
            resizable = elastic_object(adapter, obj)
            # a RayJob's submitter is never resized and has no gate: its node affinity pins it
            specs = {pod_set.name: admitted_template_spec(original.get(pod_set.name, {}), pod_set, self.flavors,
                                                          pins=self.pins,
                                                          pin=not resizable or pod_set.name == ray_kind.SUBMITTER)
                     for pod_set in admission.pod_sets}
            if resizable and ref.kind == "Job":
                set_parallelism(obj, annotations, sum(ps.count for ps in admission.pod_sets))
            if self.pod_groups is not None and ref.kind == "Job" and attempt == 0:
                # the gang exists before any pod of the Job does
                self.pod_groups.ensure(obj, admission)
            refused = adapter.write_admission(obj, specs)   # the fields, and unsuspend
            if refused:
                self.report.conflicts.append((ref, refused))
                return False
            annotations[ORIGINAL] = json.dumps(original, separators=(",", ":"), sort_keys=True)
            annotations[ASSIGNMENT] = wanted
            annotations[ADMITTED_AT] = rfc3339(self.clock())
            annotations.pop(EVICTION_REASON, None)
            annotations.pop(MIGRATING_TO, None)
            for key in READINESS:
                annotations.pop(key, None)
            updated = self._update(ref, obj, last=attempt == ATTEMPTS - 1)
            if updated is not None:
                break
        else:
            return False
        (self.report.moved if moving else self.report.admitted).append(ref)
        self.assignments[ref] = list(admission.pod_sets)
        pods = sum(ps.count for ps in admission.pod_sets)
        nodes = sorted({n for ps in admission.pod_sets for n in ps.pods_per_node()})
        self.event(updated, "Admitted", f"Admitted by Stowplan into ClusterQueue {admission.cluster_queue}: "
                                        f"{pods} pods on {len(nodes)} nodes ({', '.join(nodes[:5])}"
                                        f"{' ...' if len(nodes) > 5 else ''})")
        return True

    def evict(self, eviction: Eviction) -> None:
        ref = eviction.workload
        if ref.kind in pod_writes.KINDS:
            return self.evict_pods(eviction)
        if ref.kind == lws_writes.KIND:
            return self.evict_group(eviction)
        adapter = kinds.by_kind(ref.kind)
        if adapter is None:
            self.report.conflicts.append((ref, f"kind {ref.kind} is not supported"))
            return
        if eviction.message:
            why = f"{eviction.reason}: {eviction.message}"
        else:
            why = f"{eviction.reason} for {', '.join(str(r) for r in eviction.for_) or 'higher-priority work'}"
        for attempt in range(ATTEMPTS):
            obj = self._read(ref)
            if obj is None:
                return
            annotations = _annotations(obj)
            if is_suspended(obj) and ASSIGNMENT not in annotations and MIGRATING_TO not in annotations:
                self.report.unchanged.append(ref)
                return
            if self._changed(ref, obj):
                return
            annotations[EVICTED_AT] = rfc3339(self.clock())
            annotations[EVICTION_REASON] = why
            annotations.pop(ASSIGNMENT, None)
            annotations.pop(MIGRATING_TO, None)
            annotations.pop(ADMITTED_AT, None)
            for key in READINESS:            # readiness is per admission
                annotations.pop(key, None)
            _record_requeue(annotations, eviction)
            adapter.write_eviction(obj)
            updated = self._update(ref, obj, last=attempt == ATTEMPTS - 1)
            if updated is not None:
                break
        else:
            return
        self.report.evicted.append(ref)
        self.event(updated, eviction.reason, f"Evicted by Stowplan: {why} (cost {eviction.cost:g})")

    def resize(self, resizes: Sequence[Resize]) -> bool:
        """The resizes of one elastic workload (one per pod set), written as its kind is resized."""
        ref = resizes[0].workload
        if ref.kind in (ray_kind.RayClusterAdapter.kind, ray_kind.RayJobAdapter.kind):
            return self.resize_ray(resizes)
        if ref.kind != "Job" or len(resizes) != 1:
            self.report.conflicts.append((ref, f"resizing a {ref.kind} is not supported"))
            return False
        return self.resize_job(resizes[0])

    def resize_job(self, resize: Resize) -> bool:
        """An elastic Job grown or shrunk in place, as Kueue's workload slices do: the pods the
        plan releases are deleted first (the Job controller, told a lower parallelism, would
        pick its own), then ONE write sets spec.parallelism and the new assignment (the
        slice's places added, the released ones taken out). New pods come gated from the
        template and are given the slice's nodes as they appear (step 4).

        A crash between the deletions and the write leaves the old parallelism: the Job
        controller makes gated replacements, which the next cycle places where the old
        assignment says (it plans from what it reads)."""
        ref = resize.workload
        for attempt in range(ATTEMPTS):
            obj = self._read(ref)
            if obj is None:
                return False
            annotations = _annotations(obj)
            if is_suspended(obj) or annotations.get(ELASTIC_JOB) != "true":
                self.report.conflicts.append((ref, "it is not a running elastic Job"))
                return False
            try:
                (running,) = decode_assignment(annotations.get(ASSIGNMENT) or "[]")
            except (Bad, ValueError):
                self.report.conflicts.append((ref, "its assignment is unreadable"))
                return False
            if running.count == resize.to_count and running.count != resize.from_count:
                self.report.unchanged.append(ref)     # resized already (a second apply of the plan)
                self.assignments[ref] = [running]
                return True
            wanted = elastic.grown_assignment(running, resize)
            if running.count != resize.from_count or self._changed(ref, obj):
                if running.count != resize.from_count:
                    self.report.conflicts.append((ref, f"it runs {running.count} pods, not {resize.from_count}"))
                return False
            if attempt == 0 and resize.release and not self.kube.dry_run:
                self._release_pods(ref, obj, resize)
            set_parallelism(obj, annotations, resize.to_count)
            annotations[ASSIGNMENT] = encode_assignment([wanted])
            updated = self._update(ref, obj, last=attempt == ATTEMPTS - 1)
            if updated is not None:
                break
        else:
            return False
        self.report.resized.append(ref)
        self.assignments[ref] = [wanted]
        released = ", ".join(f"{n} on {node}" for node, n in resize.release)
        self.event(updated, "Resized", f"Resized by Stowplan from {resize.from_count} to {resize.to_count} pods"
                                       + (f", releasing {released} for {', '.join(map(str, resize.for_))}"
                                          if resize.release else " by a new slice"))
        return True

    def _release_pods(self, ref: ObjectRef, obj: Mapping[str, Any], resize: Resize) -> None:
        """Delete the pods a shrink releases (`pods_to_release`)."""
        uid = (obj.get("metadata") or {}).get("uid")
        pods = []
        for pod in self.kube.list(path_of("v1", "pods", ref.namespace), label_selector=f"{JOB_NAME_LABELS[0]}={ref.name}"):
            owners = (pod.get("metadata") or {}).get("ownerReferences") or ()
            if not uid or any(o.get("uid") == uid for o in owners if isinstance(o, dict)):
                pods.append(pod)
        for released in pods_to_release(pods, resize.release):
            meta = released["metadata"]
            try:
                self.kube.write("DELETE", path_of("v1", "pods", ref.namespace, str(meta["name"])),
                                {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.get("uid")}})
            except ApiStatus as err:
                if err.status not in (404, 409):
                    raise

    def resize_ray(self, resizes: Sequence[Resize]) -> bool:
        """An elastic RayCluster or RayJob resized as Ray's autoscaler resizes a cluster under
        Kueue's workload slices: ONE write of the RayCluster sets each resized worker group's
        `replicas` and, for a shrink, names the released pods in its
        `scaleStrategy.workersToDelete` (KubeRay deletes those; with autoscaling it never picks
        pods itself). A RayCluster's new assignment is in that same write. A RayJob's cluster is
        the one KubeRay made for it (`status.rayClusterName`, owned by it): that cluster is
        written first, then the RayJob's assignment. A crash between the two leaves the RayJob
        at its old assignment: after a shrink it holds more than it runs (never double-booked),
        after a growth the new pods wait behind the gate; the next cycle plans from the old
        assignment and its cluster, already resized, is not written twice. New pods come gated
        from the templates and are given the slice's nodes as they appear (step 4)."""
        ref = resizes[0].workload
        counts = {r.pod_set: (r.from_count, r.to_count) for r in resizes}
        for attempt in range(ATTEMPTS):
            last = attempt == ATTEMPTS - 1
            obj = self._read(ref)
            if obj is None:
                return False
            annotations = _annotations(obj)
            if is_suspended(obj) or annotations.get(ELASTIC_JOB) != "true":
                self.report.conflicts.append((ref, "it is not a running elastic workload"))
                return False
            try:
                running = {ps.name: ps for ps in decode_assignment(annotations.get(ASSIGNMENT) or "[]")}
            except (Bad, ValueError):
                self.report.conflicts.append((ref, "its assignment is unreadable"))
                return False
            missing = sorted(set(counts) - set(running))
            if missing:
                self.report.conflicts.append((ref, f"its assignment has no pod set {', '.join(missing)}"))
                return False
            if all(running[name].count == new != old for name, (old, new) in counts.items()):
                self.report.unchanged.append(ref)     # resized already (a second apply of the plan)
                self.assignments[ref] = list(running.values())
                return True
            stale = [f"{running[n].count} pods of {n}, not {old}" for n, (old, _) in sorted(counts.items())
                     if running[n].count != old]
            if stale:
                self.report.conflicts.append((ref, f"it runs {', '.join(stale)}"))
                return False
            if self._changed(ref, obj):
                return False
            wanted = dict(running)
            for resize in resizes:
                wanted[resize.pod_set] = elastic.grown_assignment(running[resize.pod_set], resize)
            cluster = obj if ref.kind == ray_kind.RayClusterAdapter.kind else self._cluster_of(ref, obj)
            if cluster is None:
                return False
            refused = ray_kind.resize_refusal(cluster, counts)
            if refused:
                self.report.conflicts.append((ref, refused))
                return False
            groups = ray_kind.worker_groups(cluster)
            # at its new size already (a RayJob's cluster written before a crash or a conflict): its
            # pods were named once, never twice
            done = all(ray_kind.group_replicas(groups[n]) == new for n, (_, new) in counts.items())
            if not done:
                ray_kind.write_resize(cluster, {n: new for n, (_, new) in counts.items()},
                                      self._workers_to_delete(cluster, resizes))
            annotations[ASSIGNMENT] = encode_assignment(wanted[n] for n in sorted(wanted))
            if cluster is not obj and not done and not self._write_cluster(ref, cluster, last):
                continue
            updated = self._update(ref, obj, last=last)
            if updated is not None:
                break
        else:
            return False
        self.report.resized.append(ref)
        self.assignments[ref] = list(wanted.values())
        changes = ", ".join(f"{r.pod_set} {r.from_count} -> {r.to_count}" for r in resizes)
        released = ", ".join(f"{n} on {node}" for r in resizes for node, n in r.release)
        for_ = sorted({str(w) for r in resizes for w in r.for_})
        self.event(updated, "Resized", f"Resized by Stowplan: {changes} pods"
                                       + (f", releasing {released} for {', '.join(for_)}" if released else " by a new slice"))
        return True

    def _cluster_of(self, ref: ObjectRef, rayjob: Mapping[str, Any]) -> dict[str, Any] | None:
        """The RayCluster KubeRay made for a RayJob (`status.rayClusterName`, owned by it), else
        None with the conflict reported."""
        name = (rayjob.get("status") or {}).get("rayClusterName")
        if not isinstance(name, str) or not name:
            self.report.conflicts.append((ref, "its RayCluster is not made yet (no status.rayClusterName)"))
            return None
        cluster: dict[str, Any] | None = self.kube.get_or_none(
            workload_path(ObjectRef(ray_kind.RayClusterAdapter.kind, ref.namespace, name)))
        uid = (rayjob.get("metadata") or {}).get("uid")
        owners = ((cluster or {}).get("metadata") or {}).get("ownerReferences") or ()
        if cluster is None or not any(isinstance(o, dict) and o.get("uid") == uid for o in owners):
            self.report.conflicts.append((ref, f"its RayCluster {name} is gone or not its own"))
            return None
        return cluster

    def _write_cluster(self, ref: ObjectRef, cluster: dict[str, Any], last: bool) -> bool:
        """PUT a RayJob's RayCluster as read and edited (a conflict: False, reported on the last try)."""
        name = str((cluster.get("metadata") or {}).get("name"))
        try:
            self.kube.write("PUT", workload_path(ObjectRef(ray_kind.RayClusterAdapter.kind, ref.namespace, name)),
                            cluster)
            return True
        except ApiStatus as err:
            if err.status in (404, 409):
                if last or err.status == 404:
                    self.report.conflicts.append((ref, f"its RayCluster {name}: {err.detail}"))
                return False
            raise

    def _workers_to_delete(self, cluster: Mapping[str, Any], resizes: Sequence[Resize]) -> dict[str, list[str]]:
        """Pod set -> the names of the worker pods a shrink releases (`pods_to_release`), of the cluster's group."""
        meta = cluster.get("metadata") or {}
        groups = ray_kind.worker_groups(cluster)
        out: dict[str, list[str]] = {}
        for resize in resizes:
            if not resize.release:
                continue
            selector = (f"{ray_kind.CLUSTER_LABEL}={meta.get('name')},"
                        f"{ray_kind.GROUP_LABEL}={groups[resize.pod_set]['groupName']}")
            pods = self.kube.list(path_of("v1", "pods", str(meta.get("namespace"))), label_selector=selector)
            out[resize.pod_set] = [str(p["metadata"]["name"]) for p in pods_to_release(pods, resize.release)]
        return out

    def start_move(self, migration: Migration) -> bool:
        """2b: suspend the Job and hold its new place (`migrating-to`) in one write."""
        ref = migration.workload
        if ref.kind != "Job":
            self.report.conflicts.append((ref, f"moving a {ref.kind} is not supported"))
            return False
        wanted = encode_assignment(migration.to)
        for attempt in range(ATTEMPTS):
            obj = self._read(ref)
            if obj is None:
                return False
            annotations = _annotations(obj)
            if is_suspended(obj) and same_assignment(annotations.get(MIGRATING_TO), wanted):
                self.report.unchanged.append(ref)
                return True     # started by an earlier apply of this plan
            if self._changed(ref, obj):
                return False
            if is_suspended(obj) or ASSIGNMENT not in annotations:
                self.report.conflicts.append((ref, "it no longer runs under Stowplan"))
                return False
            annotations[MIGRATING_TO] = wanted
            annotations[EVICTED_AT] = rfc3339(self.clock())
            annotations[EVICTION_REASON] = (f"Migrated to free {', '.join('/'.join(d.values) for d in migration.frees)}"
                                            f" for {', '.join(str(r) for r in migration.for_)}")
            annotations.pop(ASSIGNMENT, None)
            obj.setdefault("spec", {})["suspend"] = True
            updated = self._update(ref, obj, last=attempt == ATTEMPTS - 1)
            if updated is not None:
                break
        else:
            return False
        self.event(updated, "Migrated", f"Moved by Stowplan: {annotations[EVICTION_REASON]} (cost {migration.cost:g})")
        return True

    def finish_moves(self, moves: Mapping[ObjectRef, Admission], wait: float) -> set[ObjectRef]:
        """3b: admit each moving Job at its new place once its old pods are gone, within `wait`
        seconds; the rest stay moving (their new place held) for a later cycle."""
        deadline = time.monotonic() + wait
        left = dict(moves)
        done: set[ObjectRef] = set()
        while left:
            for ref in sorted(left):
                if self._old_pods_gone(ref):
                    if self._admit(left[ref], moving=True):
                        done.add(ref)
                    del left[ref]
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        self.report.moving.extend(sorted(left))
        return done

    def _old_pods_gone(self, ref: ObjectRef) -> bool:
        """No pod of the Job is left (terminating ones still hold their node), and the job
        controller has reset its start time (so the pod template may change again)."""
        obj = self.kube.get_or_none(workload_path(ref))
        if obj is None or (obj.get("status") or {}).get("startTime"):
            return False
        pods = self.kube.list(path_of("v1", "pods", ref.namespace), label_selector=f"{JOB_NAME_LABELS[0]}={ref.name}")
        return not [p for p in pods if (p.get("status") or {}).get("phase") not in DONE]

    def mark(self, ref: ObjectRef, changes: Mapping[str, str | None]) -> bool:
        """Record what this cycle saw of a running workload's readiness (planner.cycle.podsready's
        marks: an annotation set to a time, or removed): one merge patch of `stowplan.io/*`
        annotations, only while the workload is still running as read. False: skipped."""
        # one object per workload: not a pod group's pods or an LWS group (their readiness is not recorded)
        if kinds.by_kind(ref.kind) is None or ref.kind in pod_writes.KINDS or ref.kind == lws_writes.KIND or not changes:
            return False
        obj = self.kube.get_or_none(workload_path(ref))
        if obj is None or is_suspended(obj) or self._changed(ref, obj):
            return False
        current = _annotations(obj)
        patch = {k: v for k, v in changes.items() if current.get(k) != v}
        if not patch:
            return False
        body = {"metadata": {"resourceVersion": obj["metadata"].get("resourceVersion"), "annotations": patch}}
        try:
            self.kube.write("PATCH", workload_path(ref), body, content_type=MERGE_PATCH)
        except ApiStatus as err:
            if err.status in (404, 409):
                return False   # changed or gone: the next cycle sees it again
            raise
        self.report.marked.append(ref)
        return True

    def admit_group(self, admission: Admission) -> bool:
        """A LeaderWorkerSet's group (planner.cluster.lws): its entry and the shared templates, one write."""
        ref = admission.workload
        adapter = kinds.by_kind(ref.kind)
        assert adapter is not None
        obj, outcome = lws_writes.admit(
            self.groups, admission, self.flavors, encode_assignment(admission.pod_sets), rfc3339(self.clock()),
            lambda o: _original_scheduling(adapter, o, self.lookup),
            lambda base, ps: admitted_template_spec(base, ps, self.flavors, pins=self.pins), ORIGINAL)
        if outcome == "unchanged":
            self.report.unchanged.append(ref)
            self.assignments[ref] = list(admission.pod_sets)
            return True
        if outcome or obj is None:
            self.report.conflicts.append((ref, outcome or "conflict"))
            return False
        self.report.admitted.append(ref)
        self.assignments[ref] = list(admission.pod_sets)
        nodes = sorted({n for ps in admission.pod_sets for n in ps.pods_per_node()})
        self.event(obj, "Admitted", f"Admitted by Stowplan into ClusterQueue {admission.cluster_queue}: group "
                                    f"{ref.name} on {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}")
        return True

    def evict_group(self, eviction: Eviction) -> None:
        ref = eviction.workload
        obj, outcome = lws_writes.evict(self.groups, eviction)
        if outcome == "unchanged":
            self.report.unchanged.append(ref)
            return
        if outcome or obj is None:
            self.report.conflicts.append((ref, outcome or "conflict"))
            return
        why = f"{eviction.reason} for {', '.join(str(r) for r in eviction.for_) or 'higher-priority work'}"
        self.report.evicted.append(ref)
        self.event(obj, eviction.reason, f"Evicted by Stowplan: group {ref.name}, {why} (cost {eviction.cost:g}); "
                                         "its pods are deleted")

    def admit_pods(self, admission: Admission) -> bool:
        """A pod or pod group (Kueue's pod integration): its gated pods pinned and ungated (planner.cluster.pods)."""
        ref = admission.workload
        wanted = encode_assignment(admission.pod_sets)
        notes = {ASSIGNMENT: wanted, ADMITTED_AT: rfc3339(self.clock())}
        outcome, why = pod_writes.admit(self.kube, admission, self.flavors, self.pins, notes, wanted, self._each)
        if outcome == "conflict":
            self.report.conflicts.append((ref, why or "conflict"))
            return False
        if outcome == "unchanged":
            self.report.unchanged.append(ref)
            return True
        self.report.admitted.append(ref)
        self.report.released += sum(ps.count for ps in admission.pod_sets)
        pod = self.kube.get_or_none(path_of("v1", "pods", ref.namespace, ref.name)) if ref.kind == "Pod" else \
            next(iter(pod_writes.members(self.kube, ref)), None)
        if pod is not None:
            pod = {**pod, "apiVersion": "v1", "kind": "Pod"}   # a listed item carries neither
            nodes = sorted({n for ps in admission.pod_sets for n in ps.pods_per_node()})
            self.event(pod, "Admitted", f"Admitted by Stowplan into ClusterQueue {admission.cluster_queue}: "
                                        f"{ref} on {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}")
        return True

    def evict_pods(self, eviction: Eviction) -> None:
        """A pod or pod group: its pods deleted, as Kueue's pod integration stops them."""
        ref = eviction.workload
        pods = pod_writes.members(self.kube, ref)
        if not pods:
            self.report.unchanged.append(ref)
            return
        why = f"{eviction.reason} for {', '.join(str(r) for r in eviction.for_) or 'higher-priority work'}"
        self.event({**pods[0], "apiVersion": "v1", "kind": "Pod"}, eviction.reason, f"Evicted by Stowplan: {why} (cost {eviction.cost:g}); "
                                             f"{ref}'s pods are deleted")
        pod_writes.evict(self.kube, eviction)
        self.report.evicted.append(ref)

    def event(self, obj: dict[str, Any], reason: str, message: str) -> None:
        """A core/v1 Event on the workload; failing to record one never fails the cycle."""
        meta = obj.get("metadata", {})
        now = rfc3339(self.clock())
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'workload')}.", "namespace": meta.get("namespace")},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "namespace": meta.get("namespace"), "name": meta.get("name"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message[:1000], "type": "Normal",
            "source": {"component": "stowplan"}, "reportingComponent": "stowplan",
            "reportingInstance": self.identity[:128],
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            self.kube.write("POST", path_of("v1", "events", str(meta.get("namespace", ""))), body)
        except ApiStatus as err:
            self.say(f"warning: could not record the {reason} event for {meta.get('name')}: {err}")

    # ------------------------------------------------------------ pods

    def release_until_placed(self, refs: set[ObjectRef], wait: float) -> None:
        """Release gates until every admitted pod is placed, or `wait` seconds pass."""
        deadline = time.monotonic() + wait
        while True:
            missing = self.release_gates(refs)
            if missing <= 0 or time.monotonic() >= deadline:
                self.report.still_gated = max(missing, 0)
                if missing > 0:
                    self.say(f"{missing} pods not created or not placed yet: the next cycle releases them")
                return
            time.sleep(0.25)

    def release_gates(self, refs: set[ObjectRef]) -> int:
        """Give every gated pod of `refs` a node of its assignment and remove the gate.

        Returns how many planned pods are still not placed (not created yet, or gated).
        """
        placed: dict[tuple[ObjectRef, str], dict[str, int]] = {}
        gated: dict[tuple[ObjectRef, str], list[dict[str, Any]]] = {}
        namespaces = sorted({r.namespace for r in refs})
        selectors = sorted({a.pod_selector for a in map(kinds.by_kind, {r.kind for r in refs}) if a is not None})
        for namespace in namespaces:
            listed: set[str] = set()
            pods = (pod for selector in selectors
                    for pod in self.kube.list(path_of("v1", "pods", namespace), label_selector=selector or None))
            for pod in pods:
                name = str((pod.get("metadata") or {}).get("name"))
                if name in listed:
                    continue   # listed by two selectors
                listed.add(name)
                key = _pod_set_of(pod, refs)
                if key is None or (pod.get("status") or {}).get("phase") in DONE \
                        or pod.get("metadata", {}).get("deletionTimestamp"):
                    continue
                spec = pod.get("spec") or {}
                node = pod_writes.node_of(pod, self.pins)
                if any(g.get("name") in HOLD_GATES for g in spec.get("schedulingGates") or ()) and not node:
                    gated.setdefault(key, []).append(pod)
                elif node:
                    per_node = placed.setdefault(key, {})
                    per_node[node] = per_node.get(node, 0) + 1
                    if any(g.get("name") in HOLD_GATES for g in spec.get("schedulingGates") or ()):
                        gated.setdefault(key, []).append(pod)   # pinned but still gated: ungate only
        missing = 0
        releases: list[tuple[dict[str, Any], str, bool]] = []
        for ref in sorted(refs):
            for pod_set in self.assignments.get(ref, ()):
                key = (ref, pod_set.name)
                left = {n: c - placed.get(key, {}).get(n, 0) for n, c in sorted(pod_set.pods_per_node().items())}
                for pod in sorted(gated.get(key, ()), key=lambda p: p["metadata"]["name"]):
                    pinned = pod_writes.pinned_node(pod, self.pins)
                    node = pinned or next((n for n, c in left.items() if c > 0), None)
                    if node is None:
                        continue   # more pods than planned places (a replacement before its predecessor left)
                    releases.append((pod, node, pinned is None))
                    if pinned is None:
                        left[node] -= 1
                missing += sum(c for c in left.values() if c > 0)
        # decided above, one pass; the patches are independent (a failed one is looked at again next pass)
        done = self._each(lambda r: self.release_pod(*r), releases)
        return missing + done.count(False)

    def release_pod(self, pod: dict[str, Any], node: str, pin: bool) -> bool:
        """Ungate `pod`; `pin`: first pin it to `node` (by the value kube-scheduler matches)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        gates = spec.get("schedulingGates") or []
        held = [i for i, g in enumerate(gates) if g.get("name") in HOLD_GATES]
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion",
                                      "value": meta.get("resourceVersion")}]
        if pin:
            if spec.get("nodeSelector"):
                ops.append({"op": "add", "path": "/spec/nodeSelector/" + HOSTNAME_LABEL.replace("~", "~0")
                            .replace("/", "~1"), "value": self.pins.value(node)})
            else:
                ops.append({"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME_LABEL: self.pins.value(node)}})
        ops += [{"op": "remove", "path": f"/spec/schedulingGates/{i}"} for i in reversed(held)]
        try:
            self.kube.write("PATCH", path_of("v1", "pods", meta["namespace"], meta["name"]), ops,
                            content_type=JSON_PATCH)
        except ApiStatus as err:
            if err.status in (404, 409, 422):
                return False   # changed or gone: the next pass or cycle looks again
            raise
        self.report.released += 1
        return True


def resize_groups(resizes: Iterable[Resize]) -> list[tuple[Resize, ...]]:
    """The plan's resizes, one group per workload (its pod sets'), in the plan's order."""
    out: dict[ObjectRef, list[Resize]] = {}
    for resize in resizes:
        out.setdefault(resize.workload, []).append(resize)
    return [tuple(group) for group in out.values()]


def elastic_object(adapter: kinds.Adapter, obj: Mapping[str, Any]) -> bool:
    """Marked elastic, of a kind (and shape) the reader resizes (planner.kinds: `elastic_refusal`)."""
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    spec = obj.get("spec")
    return notes.get(ELASTIC_JOB) == "true" and adapter.elastic_refusal(spec if isinstance(spec, dict) else {}) is None


def pods_to_release(pods: Iterable[Mapping[str, Any]], release: Sequence[tuple[str, int]]) -> list[Mapping[str, Any]]:
    """The pods a shrink gives back: on each node `release` names, as many as it names, of
    those still running there; those not Ready first, then the newest (they have done the least)."""
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") in DONE or meta.get("deletionTimestamp"):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            by_node.setdefault(str(node), []).append(pod)
    out: list[Mapping[str, Any]] = []
    for node, count in release:
        here = sorted(by_node.get(node, ()), key=lambda p: str(p["metadata"].get("name")))
        # not Ready first; among the Ready, the newest
        ranked = [p for p in here if not _ready(p)] + sorted(
            (p for p in here if _ready(p)), key=lambda p: str(p["metadata"].get("creationTimestamp") or ""),
            reverse=True)
        out.extend(ranked[:count])
    return out


def set_parallelism(obj: dict[str, Any], annotations: dict[str, str], count: int) -> None:
    """An elastic Job's spec.parallelism set to `count`, its most kept in MAX_PARALLELISM the
    first time (the reader takes its pod count from there)."""
    spec = obj.setdefault("spec", {})
    if MAX_PARALLELISM not in annotations:
        annotations[MAX_PARALLELISM] = str(spec.get("parallelism") if type(spec.get("parallelism")) is int else 1)
    spec["parallelism"] = count


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def _record_requeue(annotations: dict[str, str], eviction: Eviction) -> None:
    """A waitForPodsReady eviction's requeue: the count and time (PodsReadyTimeout), or
    deactivation, which clears them as Kueue clears a deactivated Workload's requeueState."""
    if eviction.reason == "Deactivated":
        annotations[DEACTIVATED] = eviction.message.split(":", 1)[0] or "Deactivated"
        annotations.pop(REQUEUE_COUNT, None)
        annotations.pop(REQUEUE_AT, None)
    elif eviction.requeue_count is not None:
        annotations[REQUEUE_COUNT] = str(eviction.requeue_count)
        if eviction.requeue_at is not None:
            annotations[REQUEUE_AT] = rfc3339(eviction.requeue_at)


def _pod_set_of(pod: dict[str, Any], refs: set[ObjectRef] | None) -> tuple[ObjectRef, str] | None:
    """(workload, pod set) of a planned workload's pod, if the workload is in `refs` (None: the most specific)."""
    meta = pod.get("metadata") or {}
    owners = kinds.pod_owners(str(meta.get("namespace", "")), meta, meta.get("labels") or {})
    return next((owner for owner in owners if refs is None or owner[0] in refs), None)


def gated_owners(document: Mapping[str, Any]) -> set[ObjectRef]:
    """Workloads with pods still behind Stowplan's gate, in a live List (every kind a pod may
    belong to: a TrainJob's pods name its JobSet too)."""
    out: set[ObjectRef] = set()
    for obj in document.get("items") or ():
        if obj.get("kind") != "Pod":
            continue
        gates = (obj.get("spec") or {}).get("schedulingGates") or ()
        if any(g.get("name") in HOLD_GATES for g in gates):
            meta = obj.get("metadata") or {}
            out.update(ref for ref, _ in kinds.pod_owners(str(meta.get("namespace", "")), meta,
                                                          meta.get("labels") or {}))
    return out


def running_assignments(document: Mapping[str, Any], only_gated: bool = False) -> dict[ObjectRef, list[PodSetAssignment]]:
    """Unsuspended Jobs/JobSets carrying stowplan.io/assignment in a live List: whose gates to finish.

    With `only_gated`, just those that still have gated pods (the rest need nothing).
    """
    out: dict[ObjectRef, list[PodSetAssignment]] = {}
    wanted = gated_owners(document) if only_gated else None
    for obj in document.get("items") or ():
        kind = obj.get("kind")
        if kind == lws_writes.KIND:     # its admitted groups, each a workload
            out.update((ref, sets) for ref, sets in lws_writes.running(obj).items() if wanted is None or ref in wanted)
            continue
        if not planned_kind(obj) or is_suspended(obj):
            continue
        meta = obj.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(ASSIGNMENT)
        if not text:
            continue
        ref = ObjectRef(kind, meta.get("namespace", ""), meta.get("name", ""))
        if wanted is not None and ref not in wanted:
            continue
        try:
            out[ref] = list(decode_assignment(text))
        except (Bad, ValueError):
            continue   # the reader reports an unreadable assignment
    return out


def moving_assignments(document: Mapping[str, Any]) -> dict[ObjectRef, Admission]:
    """Suspended Jobs carrying stowplan.io/migrating-to in a live List: moves to finish."""
    out: dict[ObjectRef, Admission] = {}
    for obj in document.get("items") or ():
        if obj.get("kind") != "Job" or not is_suspended(obj):
            continue
        meta = obj.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(MIGRATING_TO)
        if not text:
            continue
        ref = ObjectRef("Job", meta.get("namespace", ""), meta.get("name", ""))
        try:
            out[ref] = Admission(ref, "", tuple(decode_assignment(text)))
        except (Bad, ValueError):
            continue   # the reader reports an unreadable annotation
    return out
