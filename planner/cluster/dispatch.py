"""Multi-cluster apply, MultiKueue's way: a plan's admissions that carry `cluster: NAME`
run on that worker cluster, while the manager's Job stays suspended and marked.

Jobs only (batch/v1), the most common kind; other kinds are reported and skipped.

The manager's Job is in one of three states, told by its annotations:
  undispatched           neither mark;
  dispatching-to: NAME   reserved for NAME: written BEFORE the copy is created, so a
                         crash or a worker lost between the two never lets another
                         cycle send it anywhere else (a copy may or may not exist);
  dispatched-to: NAME    the copy on NAME exists (confirmed after its create).
The copy on the worker carries Kueue's MultiKueue marks (label
`kueue.x-k8s.io/multikueue-origin`, annotation `kueue.x-k8s.io/multikueue-origin-uid`
with the manager Job's UID), the manager's queue-name label (the worker's LocalQueue of
the same name, as MultiKueue expects), and is created already admitted at the plan's
placement (what planner.cluster.apply writes on one cluster: node affinity, gate,
`stowplan.io/assignment`, unsuspended); its gated pods are then released onto the
planned nodes. Its name and namespace are the manager's, so a second create meets
AlreadyExists: one workload is never dispatched twice.

Each cycle also keeps the clusters in step (MultiKueue's garbage collection and
status sync): a copy whose manager Job is gone, has another UID, or is marked for
another cluster is deleted; otherwise its status is copied back to the manager (an
annotation always, the Job's status too when the manager's Job is managed by an
external controller through `spec.managedBy`, as MultiKueue's are). An eviction of a
dispatched workload deletes the worker's copy, then clears the mark.

A worker that cannot be reached is reported (planner.base.errors.WorkerUnreachableError,
exit 7 from the CLI) and left alone for the rest of the cycle: whatever it should have
received stays suspended on the manager, reserved for it at worst, and the next
cycle, with the worker back, finishes it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from typing import Any, Callable, Mapping

from models import Admission, Eviction, NodePins, ObjectRef, Plan, ResourceFlavor
from planner import kinds
from planner.cluster.apply import (
    ATTEMPTS, Applier, admitted_template_spec, fingerprint, rfc3339,
)
from planner.cluster.kube import MERGE_PATCH, ApiStatus, Kube, path_of
from planner.base.errors import ClusterError
from planner.k8s.fields import Bad
from planner.k8s.annotations import (
    ADMITTED_AT, ASSIGNMENT, DISPATCHED_AT, DISPATCHED_TO, DISPATCHING_TO, EVICTED_AT, EVICTION_REASON,
    ORIGINAL_SCHEDULING as ORIGINAL, WORKER_STATUS, MULTIKUEUE_ORIGIN as ORIGIN_LABEL, MULTIKUEUE_ORIGIN_UID as ORIGIN_UID, STOWPLAN_PREFIX, decode_assignment,
    encode_assignment,
)

ORIGIN = "stowplan"
# labels the manager's API server generated for its own Job: the worker's generates its own
GENERATED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name")
JOB_CONTROLLER = "kubernetes.io/job-controller"
STATUS_FIELDS = ("active", "ready", "succeeded", "failed", "terminating", "startTime", "completionTime",
                 "conditions", "completedIndexes", "failedIndexes")
Say = Callable[[str], None]


@dataclasses.dataclass
class DispatchReport:
    dry_run: bool = False
    dispatched: list[tuple[ObjectRef, str]] = dataclasses.field(default_factory=list)
    unchanged: list[ObjectRef] = dataclasses.field(default_factory=list)
    removed: list[tuple[ObjectRef, str]] = dataclasses.field(default_factory=list)    # evicted: the copy deleted
    deleted: list[tuple[ObjectRef, str]] = dataclasses.field(default_factory=list)    # copies without a manager Job
    synced: list[ObjectRef] = dataclasses.field(default_factory=list)                 # status copied back
    conflicts: list[tuple[ObjectRef, str]] = dataclasses.field(default_factory=list)
    unreachable: dict[str, str] = dataclasses.field(default_factory=dict)            # worker -> why
    released: int = 0
    still_gated: int = 0
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        dry = " (dry run: nothing changed)" if self.dry_run else ""
        lost = f", unreachable: {', '.join(sorted(self.unreachable))}" if self.unreachable else ""
        return (f"dispatched{dry}: {len(self.dispatched)} dispatched, {len(self.removed)} removed by eviction, "
                f"{len(self.deleted)} worker copies deleted, {len(self.synced)} statuses copied back, "
                f"{self.released} pods released, {len(self.unchanged)} already in place, "
                f"{len(self.conflicts)} conflicts{lost}")


class Unreachable(Exception):
    """A worker stopped answering during this cycle (internal: becomes report.unreachable)."""


def job_path(namespace: str, name: str = "") -> str:
    return path_of("batch/v1", "jobs", namespace, name)


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _notes(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {}
    notes: dict[str, str] = meta["annotations"]
    return notes


def marked_for(obj: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(the worker the manager's Job is marked for, whether the copy there is confirmed)."""
    notes = _meta(obj).get("annotations") or {}
    if notes.get(DISPATCHED_TO):
        return str(notes[DISPATCHED_TO]), True
    if notes.get(DISPATCHING_TO):
        return str(notes[DISPATCHING_TO]), False
    return None, False


def worker_copy(manager_job: Mapping[str, Any], admission: Admission, flavors: Mapping[str, ResourceFlavor],
                pins: NodePins,
                now: float, origin: str = ORIGIN) -> dict[str, Any]:
    """The Job to create on the worker (pure): the manager's spec and labels, MultiKueue's
    origin marks, no generated selector or managedBy, admitted at the plan's placement."""
    adapter = kinds.by_kind("Job")
    assert adapter is not None
    meta = _meta(manager_job)
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in GENERATED_LABELS}
    labels[ORIGIN_LABEL] = origin
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(STOWPLAN_PREFIX)}
    notes[ORIGIN_UID] = str(meta.get("uid", ""))
    spec = copy.deepcopy(dict(manager_job.get("spec") or {}))
    spec.pop("managedBy", None)            # the worker's own job controller runs it
    if not spec.get("manualSelector"):     # the selector names the manager's UID: the worker makes its own
        spec.pop("selector", None)
        template_meta = (spec.get("template") or {}).get("metadata") or {}
        if isinstance(template_meta.get("labels"), dict):
            template_meta["labels"] = {k: v for k, v in template_meta["labels"].items() if k not in GENERATED_LABELS}
    body: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job",
                            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                                         "labels": labels, "annotations": notes},
                            "spec": spec}
    original = adapter.original_scheduling(body, lambda *_: None)
    specs = {ps.name: admitted_template_spec(original.get(ps.name, {}), ps, flavors, pins=pins)
             for ps in admission.pod_sets}
    refused = adapter.write_admission(body, specs)
    if refused:
        raise ValueError(refused)
    notes[ORIGINAL] = json.dumps(original, separators=(",", ":"), sort_keys=True)
    notes[ASSIGNMENT] = encode_assignment(admission.pod_sets)
    notes[ADMITTED_AT] = rfc3339(now)
    return body


def status_note(cluster: str, worker_job: Mapping[str, Any]) -> str:
    """The worker-status annotation: where it runs and its counts and true conditions, compact."""
    status = worker_job.get("status") or {}
    true = sorted(str(c.get("type")) for c in status.get("conditions") or () if c.get("status") == "True")
    return json.dumps({"cluster": cluster, "active": int(status.get("active") or 0),
                       "ready": int(status.get("ready") or 0), "succeeded": int(status.get("succeeded") or 0),
                       "failed": int(status.get("failed") or 0), "conditions": true}, separators=(",", ":"))


class Dispatcher:
    """One multi-cluster cycle's writes: `manager` holds the Jobs as submitted, `workers` by name."""

    def __init__(self, manager: Kube, workers: Mapping[str, Kube], *,
                 planned_versions: Mapping[ObjectRef, str] | None = None,
                 fingerprints: Mapping[ObjectRef, str] | None = None, identity: str = "stowplan",
                 say: Say = lambda _: None, clock: Callable[[], float] = time.time, origin: str = ORIGIN):
        self.manager, self.workers = manager, dict(workers)
        self.planned, self.prints = planned_versions or {}, fingerprints or {}
        self.identity, self.say, self.clock, self.origin = identity, say, clock, origin
        self.report = DispatchReport(dry_run=manager.dry_run)
        self._flavors: dict[str, dict[str, ResourceFlavor]] = {}
        self._pins: dict[str, NodePins] = {}
        self._release: dict[str, dict[ObjectRef, Admission]] = {}   # worker -> copies whose pods to release

    # ------------------------------------------------------------ the cycle

    def run(self, plan: Plan, release_wait: float = 5.0) -> DispatchReport:
        started = time.monotonic()
        for eviction in plan.evictions:              # 1. free first, as on one cluster
            self.evict(eviction)
        for admission in plan.admissions:            # 2. dispatch
            self.dispatch(admission)
        for name in sorted(self.workers):            # 3. keep in step: deletions, status back, pods
            self.sync(name, release_wait)
        for refs in (self.report.unchanged, self.report.synced):
            refs.sort()
        for pairs in (self.report.dispatched, self.report.removed, self.report.deleted, self.report.conflicts):
            pairs.sort()
        self.report.seconds = {"total": round(time.monotonic() - started, 3)}
        return self.report

    def _worker(self, name: str, call: Callable[[Kube], Any]) -> Any:
        """`call` on worker `name`; an unreachable worker is recorded and raises Unreachable."""
        if name in self.report.unreachable:
            raise Unreachable(name)
        try:
            return call(self.workers[name])
        except ApiStatus as err:
            if err.status < 500 and err.status != 429:
                raise
            why = str(err)
        except ClusterError as err:
            why = str(err)
        self.report.unreachable[name] = why
        self.say(f"worker {name} unreachable: {why}; what it should get stays suspended on the manager")
        raise Unreachable(name)

    # ------------------------------------------------------------ dispatch

    def dispatch(self, admission: Admission) -> None:
        ref, name = admission.workload, admission.cluster
        if name is None:
            self.report.conflicts.append((ref, "planned for the manager itself: apply it without --worker"))
            return
        if name not in self.workers:
            self.report.conflicts.append((ref, f"planned for cluster {name}, which no --worker names"))
            return
        if ref.kind != "Job":
            self.report.conflicts.append((ref, f"dispatching a {ref.kind} is not supported (Jobs only)"))
            return
        if name in self.report.unreachable:
            return
        try:
            flavors = self._worker_flavors(name)   # first: a worker that does not answer gets no reservation
            self.worker_pins(name)
            job = self._reserve(ref, name)
            if job is None:
                return
            created = self._create_copy(job, admission, name, flavors)
            if created is None:
                return
            self._confirm(ref, name, job, created)
        except Unreachable:
            return
        except ApiStatus as err:
            if err.status in (401, 403):
                raise    # the identity lacks a right: every object would fail alike
            self.report.conflicts.append((ref, str(err)))

    def _reserve(self, ref: ObjectRef, name: str) -> dict[str, Any] | None:
        """The manager's Job, reserved for `name` (dispatching-to), or None (reported)."""
        for attempt in range(ATTEMPTS):
            job = self.manager.get_or_none(job_path(ref.namespace, ref.name))
            if job is None:
                self.report.conflicts.append((ref, "it no longer exists on the manager"))
                return None
            marked, _ = marked_for(job)
            if marked == name:
                return dict(job)
            if marked is not None and not self._release_reservation(ref, job, marked):
                return None
            if not (job.get("spec") or {}).get("suspend", False):
                self.report.conflicts.append((ref, "it runs on the manager itself; not dispatched"))
                return None
            if self._changed(ref, job):
                return None
            if marked is not None:
                continue    # its stale reservation was just released: read it again
            _notes(job)[DISPATCHING_TO] = name
            try:
                written: dict[str, Any] = self.manager.write("PUT", job_path(ref.namespace, ref.name), job)
                return written
            except ApiStatus as err:
                if err.status != 409:
                    raise
        self.report.conflicts.append((ref, "it kept changing on the manager"))
        return None

    def _release_reservation(self, ref: ObjectRef, job: dict[str, Any], marked: str) -> bool:
        """A Job marked for another cluster: a confirmed dispatch stays (evict it first); a
        reservation whose worker answers and holds no copy is dropped. True: dropped."""
        _, confirmed = marked_for(job)
        if confirmed or marked not in self.workers:
            self.report.conflicts.append((ref, f"it is already dispatched to {marked}; evict it there first"))
            return False
        try:
            copy_there = self._worker(marked, lambda k: k.get_or_none(job_path(ref.namespace, ref.name)))
        except Unreachable:
            self.report.conflicts.append((ref, f"it is reserved for {marked}, which is unreachable"))
            return False
        if copy_there is not None and _meta(copy_there).get("annotations", {}).get(ORIGIN_UID) == _meta(job).get("uid"):
            self.report.conflicts.append((ref, f"it already has a copy on {marked}; evict it there first"))
            return False
        notes = _notes(job)
        notes.pop(DISPATCHING_TO, None)
        try:
            self.manager.write("PUT", job_path(ref.namespace, ref.name), job)
        except ApiStatus as err:
            if err.status != 409:
                raise
        return True

    def _changed(self, ref: ObjectRef, job: Mapping[str, Any]) -> bool:
        planned = self.planned.get(ref)
        now = str(_meta(job).get("resourceVersion", ""))
        if not planned or planned == now or (self.prints.get(ref) and self.prints[ref] == fingerprint(job)):
            return False
        self.report.conflicts.append((ref, f"changed since the plan was made (resourceVersion {planned} -> {now})"))
        return True

    def _create_copy(self, job: dict[str, Any], admission: Admission, name: str,
                     flavors: Mapping[str, ResourceFlavor]) -> dict[str, Any] | None:
        """The copy on worker `name`: created, or found (made by an earlier cycle); None: reported."""
        ref = admission.workload
        uid = str(_meta(job).get("uid", ""))
        if marked_for(job) == (name, True):
            # confirmed earlier: its copy must be there. One that is gone (finished and removed by
            # its TTL, or deleted on the worker) is never made again: that would run the Job twice
            found = self._worker(name, lambda k: k.get_or_none(job_path(ref.namespace, ref.name)))
            if found is not None and (_meta(found).get("annotations") or {}).get(ORIGIN_UID) == uid:
                self.report.unchanged.append(ref)
                return dict(found)
            self.report.conflicts.append((ref, f"its copy on {name} is gone; not dispatched again (evict it "
                                               "on the manager to plan it anew)"))
            return None
        try:
            body = worker_copy(job, admission, flavors, self.worker_pins(name), self.clock(), self.origin)
        except ValueError as err:
            self.report.conflicts.append((ref, str(err)))
            return None
        try:
            created: dict[str, Any] = self._worker(name, lambda k: k.write("POST", job_path(ref.namespace), body))
            return created
        except ApiStatus as err:
            if err.status == 404:
                self.report.conflicts.append((ref, f"namespace {ref.namespace} does not exist on {name}"))
                return None
            if err.status != 409:
                self.report.conflicts.append((ref, f"{name} refused the copy: {err.detail}"))
                return None
        found = self._worker(name, lambda k: k.get_or_none(job_path(ref.namespace, ref.name)))
        if found is None or (_meta(found).get("annotations") or {}).get(ORIGIN_UID) != uid:
            self.report.conflicts.append((ref, f"{name} already has a Job {ref.namespace}/{ref.name} that is "
                                               "not this workload's copy"))
            return None
        self.report.unchanged.append(ref)
        return dict(found)

    def _confirm(self, ref: ObjectRef, name: str, job: dict[str, Any], created: dict[str, Any]) -> None:
        """dispatching-to -> dispatched-to on the manager, once the copy exists."""
        new = ref not in self.report.unchanged
        if not self.manager.dry_run:
            self._release.setdefault(name, {})[ref] = Admission(ref, "", tuple(
                _assignment(created)), cluster=name)

        def confirm(obj: dict[str, Any]) -> bool:
            marked, confirmed = marked_for(obj)
            if confirmed and marked == name:
                return False
            notes = _notes(obj)
            notes.pop(DISPATCHING_TO, None)
            notes[DISPATCHED_TO] = name
            notes[DISPATCHED_AT] = rfc3339(self.clock())
            return True

        job = self._put_edited(ref, job, confirm)
        if new:
            self.report.dispatched.append((ref, name))
            self._event(job, "Dispatched", f"Dispatched by Stowplan to worker cluster {name}")

    def _worker_flavors(self, name: str) -> dict[str, ResourceFlavor]:
        """The worker's ResourceFlavors (its node labels and tolerations go on the copy)."""
        if name not in self._flavors:
            from planner.snapshot.kueue import read_flavor

            listed = self._worker(name, lambda k: list(k.list("/apis/kueue.x-k8s.io/v1beta2/resourceflavors")))
            self._flavors[name] = {str(_meta(f).get("name")): read_flavor(str(_meta(f).get("name")),
                                                                          dict(f.get("spec") or {}))
                                   for f in listed}
        return self._flavors[name]

    def worker_pins(self, name: str) -> NodePins:
        """What a pin names for each of the worker's nodes (its hostname labels: models.NodePins).

        The least-rights worker identity (cronjob/multicluster/worker.yaml) may not list
        nodes: then pins name the nodes, as a kubelet labels them, and that is said once."""
        if name not in self._pins:
            try:
                listed = self._worker(name, lambda k: list(k.list(path_of("v1", "nodes"))))
            except ApiStatus as err:
                if err.status not in (401, 403, 404):
                    raise
                self.say(f"warning: cannot list the nodes of worker {name} ({err.status}): its pods are pinned by "
                         "node name, which a node whose kubernetes.io/hostname label differs would not match")
                listed = []
            self._pins[name] = NodePins.of_labels({str(_meta(n).get("name")): {
                str(k): str(v) for k, v in (_meta(n).get("labels") or {}).items()} for n in listed})
        return self._pins[name]

    # ------------------------------------------------------------ eviction

    def evict(self, eviction: Eviction) -> None:
        """Eviction = removal: the worker's copy deleted, then the manager's mark cleared."""
        ref = eviction.workload
        job = self.manager.get_or_none(job_path(ref.namespace, ref.name)) if ref.kind == "Job" else None
        if job is None:
            self.report.conflicts.append((ref, "no such Job on the manager"))
            return
        marked, _ = marked_for(job)
        if marked is None:
            self.report.unchanged.append(ref)    # not dispatched: nothing runs anywhere
            return
        if marked not in self.workers:
            self.report.conflicts.append((ref, f"it runs on {marked}, which no --worker names"))
            return
        uid = str(_meta(job).get("uid", ""))
        try:
            self._worker(marked, lambda k: self._delete_copy(k, ref, uid))
        except Unreachable:
            return
        why = f"{eviction.reason} for {', '.join(str(r) for r in eviction.for_) or 'higher-priority work'}"

        def mark_evicted(obj: dict[str, Any]) -> bool:
            notes = _notes(obj)
            for key in (DISPATCHED_TO, DISPATCHING_TO, DISPATCHED_AT, WORKER_STATUS):
                notes.pop(key, None)
            notes[EVICTED_AT] = rfc3339(self.clock())
            notes[EVICTION_REASON] = f"{why} (removed from worker cluster {marked})"
            return True

        job = self._put_edited(ref, job, mark_evicted)
        self.report.removed.append((ref, marked))
        self._event(job, eviction.reason, f"Evicted by Stowplan: {why}; its copy on {marked} is deleted")

    def _put_edited(self, ref: ObjectRef, job: dict[str, Any], edit: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The manager's Job `ref` after `edit` (False: it needs none) and a PUT; on a
        conflict, read again and edit again, ATTEMPTS times at the most."""
        for _ in range(ATTEMPTS):
            if not edit(job):
                break
            try:
                written: dict[str, Any] = self.manager.write("PUT", job_path(ref.namespace, ref.name), job)
                return written
            except ApiStatus as err:
                if err.status != 409:
                    raise
                job = self.manager.get_or_none(job_path(ref.namespace, ref.name)) or {}
        return job

    def _delete_copy(self, kube: Kube, ref: ObjectRef, uid: str) -> bool:
        """Delete the worker's copy of `ref` if it is the copy of manager UID `uid` (pods go with it)."""
        found = kube.get_or_none(job_path(ref.namespace, ref.name))
        if found is None or (_meta(found).get("annotations") or {}).get(ORIGIN_UID) != uid:
            return False
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                "preconditions": {"uid": _meta(found).get("uid")}}
        try:
            kube.write("DELETE", job_path(ref.namespace, ref.name), body)
        except ApiStatus as err:
            if err.status not in (404, 409):
                raise
        return True

    # ------------------------------------------------------------ keeping in step

    def sync(self, name: str, release_wait: float) -> None:
        """Worker `name`'s copies against the manager: delete orphans, confirm, copy status back, release pods."""
        if name in self.report.unreachable:
            return
        try:
            copies = self._worker(name, lambda k: list(k.list(path_of("batch/v1", "jobs"),
                                                              label_selector=f"{ORIGIN_LABEL}={self.origin}")))
            running: dict[ObjectRef, Admission] = dict(self._release.get(name, {}))
            for found in sorted(copies, key=lambda o: (_meta(o).get("namespace", ""), _meta(o).get("name", ""))):
                meta = _meta(found)
                ref = ObjectRef("Job", str(meta.get("namespace", "")), str(meta.get("name", "")))
                job = self.manager.get_or_none(job_path(ref.namespace, ref.name))
                uid = (meta.get("annotations") or {}).get(ORIGIN_UID)
                marked = marked_for(job)[0] if job is not None else None
                if job is None or _meta(job).get("uid") != uid or marked != name:
                    self._worker(name, lambda k: self._delete_copy(k, ref, str(uid)))
                    self.report.deleted.append((ref, name))
                    running.pop(ref, None)
                    continue
                if not marked_for(job)[1]:
                    self._confirm(ref, name, dict(job), found)
                self._copy_status(ref, name, dict(job), found)
                if not (found.get("spec") or {}).get("suspend") and ref not in running:
                    pod_sets = _assignment(found)
                    if pod_sets:
                        running[ref] = Admission(ref, "", tuple(pod_sets), cluster=name)
            if running and not self.manager.dry_run:
                self._release_pods(name, running, release_wait)
        except Unreachable:
            return

    def _copy_status(self, ref: ObjectRef, name: str, job: dict[str, Any], found: Mapping[str, Any]) -> None:
        """The worker copy's status onto the manager's Job: the annotation, and its status when managed elsewhere."""
        note = status_note(name, found)
        changed = False
        if (_meta(job).get("annotations") or {}).get(WORKER_STATUS) != note:
            body = {"metadata": {"annotations": {WORKER_STATUS: note}}}
            try:
                job = self.manager.write("PATCH", job_path(ref.namespace, ref.name), body, content_type=MERGE_PATCH)
                changed = True
            except ApiStatus as err:
                if err.status not in (404, 409):
                    raise
                return
        managed_by = (job.get("spec") or {}).get("managedBy")
        if managed_by and managed_by != JOB_CONTROLLER:
            status = {k: v for k, v in (found.get("status") or {}).items() if k in STATUS_FIELDS}
            if {k: v for k, v in (job.get("status") or {}).items() if k in STATUS_FIELDS} != status:
                cleared: dict[str, Any] = {k: None for k in STATUS_FIELDS}   # merge patch: null removes
                body = {"status": {**cleared, **status}}
                try:
                    self.manager.write("PATCH", job_path(ref.namespace, ref.name) + "/status", body,
                                       content_type=MERGE_PATCH)
                    changed = True
                except ApiStatus as err:
                    if err.status not in (404, 409, 422):
                        raise
                    if err.status == 422:
                        self.say(f"warning: {ref}'s status from {name} not copied: {err.detail}")
        if changed:
            self.report.synced.append(ref)

    def _release_pods(self, name: str, running: Mapping[ObjectRef, Admission], wait: float) -> None:
        """The copies' gated pods onto their planned nodes (planner.cluster.apply's gate release, on the worker)."""
        applier = Applier(self.workers[name], flavors={}, planned_versions={}, identity=self.identity, say=self.say,
                          pins=self.worker_pins(name))
        applier.assignments.update({ref: list(a.pod_sets) for ref, a in running.items()})
        fresh = any(ref in self._release.get(name, {}) for ref in running)
        # just created: wait for their pods, as on one cluster; else one pass (the last cycle's stragglers)
        self._worker(name, lambda _: applier.release_until_placed(set(running), wait) if fresh
                     else applier.release_gates(set(running)))
        self.report.released += applier.report.released
        self.report.still_gated += applier.report.still_gated

    def _event(self, job: Mapping[str, Any], reason: str, message: str) -> None:
        if job:
            Applier(self.manager, flavors={}, planned_versions={}, identity=self.identity,
                    say=self.say).event(dict(job), reason, message)


def _assignment(job: Mapping[str, Any]) -> list[Any]:
    text = (_meta(job).get("annotations") or {}).get(ASSIGNMENT)
    if not text:
        return []
    try:
        return list(decode_assignment(text))
    except Bad:
        return []


def stale_jobs(manager: Kube, plan: Plan, versions: Mapping[ObjectRef, str],
               prints: Mapping[ObjectRef, str]) -> list[str]:
    """What changed on the manager since a saved plan with resourceVersions was made (empty:
    fresh). The dispatch marks and the status copied back are not changes (see apply.fingerprint)."""
    from planner.cluster.planfile import touched

    out = []
    for ref in touched(plan):
        if ref not in versions or ref.kind != "Job":
            continue
        job = manager.get_or_none(job_path(ref.namespace, ref.name))
        if job is None:
            out.append(f"{ref} no longer exists")
            continue
        now = str(_meta(job).get("resourceVersion", ""))
        if now != versions[ref] and not (prints.get(ref) and prints[ref] == fingerprint(job)):
            out.append(f"{ref} changed (resourceVersion {versions[ref]} -> {now})")
    return out


def dispatch_live(manager: Kube, workers: Mapping[str, Kube], plan_file: str, *,
                  lease_namespace: str, lease_name: str, identity: str | None, lease_duration: int,
                  release_wait: float = 5.0, say: Say = lambda _: None) -> tuple[Plan, DispatchReport]:
    """One multi-cluster cycle on a saved plan: the manager's Lease, the staleness check, the writes."""
    from planner.cluster.lease import Lease
    from planner.cluster.planfile import load_plan_with_fingerprints
    from planner.base.errors import StalePlanError

    plan, versions, prints = load_plan_with_fingerprints(plan_file, require_versions=False)
    lease = Lease(manager, namespace=lease_namespace, name=lease_name, identity=identity, duration=lease_duration)
    if not manager.dry_run:
        lease.acquire()
        say(f"took Lease {lease_namespace}/{lease_name} as {lease.identity}")
    try:
        stale = stale_jobs(manager, plan, versions, prints)
        if stale:
            raise StalePlanError(f"the saved plan {plan_file} is stale, nothing applied: " + "; ".join(stale))
        say(f"{len(plan.admissions)} admissions, {len(plan.evictions)} evictions across "
            f"{len(workers)} worker clusters")
        dispatcher = Dispatcher(manager, workers, planned_versions=versions, fingerprints=prints,
                                identity=lease.identity, say=say)
        return plan, dispatcher.run(plan, release_wait=release_wait)
    finally:
        lease.release()
