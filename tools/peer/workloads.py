"""What Kueue decided, read from its Workload objects, in Stowplan's terms.

Pure: decoded Workload objects (as the API server returns them) in, models out.

- `parse_workload`: one Workload -> KueueWorkload (owner, UID, creation time,
  admission with flavors and topology assignment, why it waits).
- `effective_snapshot`: the snapshot as Kueue saw it (Kueue's queue order and UIDs
  for pending work, Kueue's own placement for running work), so that greedy and the
  MILP plan exactly what Kueue planned.
- `kueue_rows` / `kueue_decisions`: the per-workload outcome table and the
  models.Decisions (admissions of pending work, evictions of running work) relative
  to the effective snapshot.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from models import (
    Admission, Decisions, Eviction, ObjectRef, PodSetAssignment, Snapshot, Workload, WorkloadState,
)
from planner.kinds import pods as pods_kind
from planner.kueue.semantics import eviction_cost
from planner.k8s.podsets import QUEUE_LABEL

HOSTNAME = "kubernetes.io/hostname"
_PREEMPTOR_UID = re.compile(r"\(UID: ([^,)]+)")
# Kueue's Preempted condition reasons -> the plan's eviction reasons.
RECLAIM_REASONS = ("InCohortReclamation", "InCohortReclaimWhileBorrowing", "InCohortFairSharing")


def epoch(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Eviction_:
    """One eviction Kueue made of a workload (as seen while it happened)."""

    reason: str                   # Preempted condition reason: InClusterQueue, InCohortReclamation, ...
    preemptor_uid: str = ""
    message: str = ""


@dataclass(frozen=True)
class KueueWorkload:
    """One Kueue Workload, read."""

    ref: ObjectRef                # the Job or JobSet that owns it
    name: str
    uid: str
    created: float                # creationTimestamp, epoch seconds (1 s resolution)
    admitted: bool                # QuotaReserved=True now
    cluster_queue: str | None = None
    reserved_at: float | None = None
    pod_sets: tuple[PodSetAssignment, ...] = ()
    evicting: bool = False        # Evicted=True while quota is still reserved
    evictions: tuple[Eviction_, ...] = ()
    message: str = ""             # the QuotaReserved condition's message (why it waits)
    seen: bool = False            # Kueue has tried it (it has a QuotaReserved condition)

    @property
    def quota_only(self) -> bool:
        """Admitted with a pod set on flavors without a Topology: Kueue checked quota only."""
        return self.admitted and any(not ps.domains for ps in self.pod_sets)


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return dict(condition)
    return None


def owner(obj: Mapping[str, Any]) -> ObjectRef | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") in ("Job", "JobSet"):
            return ObjectRef(ref["kind"], meta.get("namespace", ""), ref["name"])
    return None


def decode_topology(assignment: Mapping[str, Any], node_of: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], int], ...]]:
    """Kueue's v1beta2 topologyAssignment (levels, slices of domains with universal or
    individual values and counts) -> (levels, ((values, count), ...)) sorted.

    Values at the hostname level are node label values; `node_of` maps them back to
    node names (Stowplan's assignments name nodes)."""
    levels = tuple(assignment.get("levels") or ())
    domains: list[tuple[tuple[str, ...], int]] = []
    for piece in assignment.get("slices") or ():
        n = int(piece.get("domainCount") or 0)
        per_level: list[list[str]] = []
        for values in piece.get("valuesPerLevel") or ():
            if values.get("universal") is not None:
                per_level.append([values["universal"]] * n)
            else:
                individual = values.get("individual") or {}
                prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
                per_level.append([f"{prefix}{root}{suffix}" for root in individual.get("roots") or ()])
        counts = piece.get("podCounts") or {}
        if counts.get("universal") is not None:
            per_domain = [int(counts["universal"])] * n
        else:
            per_domain = [int(c) for c in counts.get("individual") or ()]
        for i in range(n):
            values = tuple(level[i] for level in per_level)
            if levels and levels[-1] == HOSTNAME:
                values = values[:-1] + (node_of.get(values[-1], values[-1]),)
            domains.append((values, per_domain[i]))
    return levels, tuple(sorted(domains))


def parse_pod_set(entry: Mapping[str, Any], node_of: Mapping[str, str]) -> PodSetAssignment:
    flavors = {str(k): str(v) for k, v in (entry.get("flavors") or {}).items()}
    levels: tuple[str, ...] = ()
    domains: tuple[tuple[tuple[str, ...], int], ...] = ()
    if entry.get("topologyAssignment"):
        levels, domains = decode_topology(entry["topologyAssignment"], node_of)
    return PodSetAssignment(str(entry.get("name", "main")), int(entry.get("count") or 0), flavors, levels, domains)


def parse_workload(obj: Mapping[str, Any], node_of: Mapping[str, str] | None = None,
                   evictions: Iterable[Eviction_] = ()) -> KueueWorkload | None:
    """One Workload object -> KueueWorkload (None when no Job/JobSet owns it)."""
    ref = owner(obj)
    if ref is None:
        return None
    node_of = node_of or {}
    meta = obj["metadata"]
    status = obj.get("status") or {}
    reserved = _condition(obj, "QuotaReserved")
    evicted = _condition(obj, "Evicted")
    admitted = bool(reserved and reserved.get("status") == "True")
    admission = status.get("admission") or {}
    pod_sets = tuple(sorted((parse_pod_set(e, node_of) for e in admission.get("podSetAssignments") or ()),
                            key=lambda p: p.name)) if admitted else ()
    seen = list(evictions)
    current = current_eviction(obj)
    if current is not None and current not in seen:
        seen.append(current)
    return KueueWorkload(
        ref=ref, name=meta["name"], uid=meta.get("uid", ""), created=epoch(meta.get("creationTimestamp")) or 0.0,
        admitted=admitted,
        cluster_queue=admission.get("clusterQueue") if admitted else None,
        reserved_at=epoch(reserved.get("lastTransitionTime")) if admitted and reserved else None,
        pod_sets=pod_sets,
        evicting=bool(admitted and evicted and evicted.get("status") == "True"),
        evictions=tuple(seen),
        message="" if admitted or not reserved else str(reserved.get("message", "")),
        seen=reserved is not None,
    )


def current_eviction(obj: Mapping[str, Any]) -> Eviction_ | None:
    """The eviction a Workload's conditions show now (Evicted=True), if any."""
    evicted = _condition(obj, "Evicted")
    if not evicted or evicted.get("status") != "True":
        return None
    preempted = _condition(obj, "Preempted")
    reason = str(evicted.get("reason", ""))
    message = str(evicted.get("message", ""))
    if preempted and preempted.get("status") == "True":
        reason = str(preempted.get("reason", reason))
        message = str(preempted.get("message", message))
    match = _PREEMPTOR_UID.search(message)
    return Eviction_(reason, match.group(1) if match else "", message)


PENDING_PREEMPTION = "Pending the preemption of"


def waiting_for_preemption(obj: Mapping[str, Any]) -> bool:
    """Kueue's scheduler has issued preemptions for this workload and waits for them
    (its QuotaReserved=False message says so)."""
    reserved = _condition(obj, "QuotaReserved")
    return bool(reserved and reserved.get("status") != "True" and PENDING_PREEMPTION in str(reserved.get("message", "")))


# ---------------------------------------------------------------- the effective snapshot

@dataclass(frozen=True)
class Effective:
    snapshot: Snapshot
    dropped: tuple[tuple[ObjectRef, str], ...]      # running workloads Kueue did not admit, and why
    missing: tuple[ObjectRef, ...]                  # pending workloads Kueue made no Workload for
    shift: float                                    # seconds added to Kueue's clock


def _running_assignment(workload: Workload, kueue: KueueWorkload) -> tuple[PodSetAssignment, ...]:
    """Kueue's admission of a running workload with nodes: its own topology
    assignment where it made one (TAS), else the snapshot's nodes (Kueue admits
    quota-only flavors without looking at nodes; the pods ran there)."""
    own = {psa.name: psa for psa in workload.assignment}
    out = []
    for psa in kueue.pod_sets:
        if psa.domains and psa.levels and psa.levels[-1] == HOSTNAME:
            out.append(psa)
            continue
        mine = own.get(psa.name)
        if mine is None:
            continue
        domains, left = [], psa.count
        for values, count in mine.domains:
            take = min(count, left)
            if take > 0:
                domains.append((values, take))
                left -= take
        out.append(PodSetAssignment(psa.name, psa.count - left, dict(psa.flavors), mine.levels, tuple(domains)))
    return tuple(sorted(out, key=lambda p: p.name))


def effective_snapshot(snapshot: Snapshot, final: Mapping[ObjectRef, KueueWorkload],
                       running: Mapping[ObjectRef, KueueWorkload], shift: float) -> Effective:
    """The snapshot as Kueue saw it.

    Pending workloads take their Workload's creation time (queue time and creation)
    and UID: Kueue orders equal priorities by those, and a snapshot's own order
    cannot be reproduced through the API. Running workloads take what Kueue gave
    them when they were admitted first (`running`: placement, flavors, admission time
    as quota reservation time, UID, which orders preemption candidates); those Kueue
    did not admit are dropped. Kueue's times move by `shift` seconds (a whole
    number, so ties within a second stay ties) into the snapshot's own time frame.
    """
    workloads: list[Workload] = []
    dropped: list[tuple[ObjectRef, str]] = []
    missing: list[ObjectRef] = []
    for w in snapshot.workloads:
        if w.state is WorkloadState.PENDING:
            k = final.get(w.ref)
            if k is None:
                missing.append(w.ref)
                workloads.append(w)
                continue
            workloads.append(replace(w, queued_at=k.created + shift, created_at=k.created + shift, uid=k.uid))
        elif w.state is WorkloadState.RUNNING:
            k = running.get(w.ref)
            if k is None or not k.admitted:
                why = "Kueue made no Workload for it" if k is None else (
                    f"Kueue did not admit it: {k.message or 'no quota reservation'}")
                dropped.append((w.ref, why))
                continue
            assignment = _running_assignment(w, k)
            if {p.name for p in assignment} != {p.name for p in w.pod_sets}:
                dropped.append((w.ref, "Kueue's admission names other pod sets"))
                continue
            admitted_at = (k.reserved_at if k.reserved_at is not None else k.created) + shift
            workloads.append(replace(w, assignment=assignment, admitted_at=admitted_at, uid=k.uid,
                                     created_at=k.created + shift, queued_at=k.created + shift))
        else:
            workloads.append(w)
    return Effective(replace(snapshot, workloads=tuple(workloads)), tuple(dropped), tuple(missing), shift)


# ---------------------------------------------------------------- outcomes and decisions

@dataclass(frozen=True)
class KueueRow:
    """One workload of the effective snapshot and what Kueue did with it."""

    ref: ObjectRef
    was: str                      # pending | running (in the effective snapshot)
    outcome: str                  # admitted | pending | evicted | running | moved
    priority: int
    cluster_queue: str | None
    pod_sets: tuple[PodSetAssignment, ...] = ()     # Kueue's final admission, when admitted
    quota_only: bool = False      # admitted on a flavor without a Topology: Kueue never looked at nodes
    eviction_reason: str = ""     # Kueue's Preempted reason (InClusterQueue, InCohortReclamation, ...)
    preemptors: tuple[ObjectRef, ...] = ()
    message: str = ""             # why it still waits, in Kueue's words

    @property
    def flavors(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple((p.name, tuple(sorted(set(p.flavors.values())))) for p in self.pod_sets)


def kueue_rows(effective: Snapshot, final: Mapping[ObjectRef, KueueWorkload],
               running: Mapping[ObjectRef, KueueWorkload]) -> tuple[KueueRow, ...]:
    """Per workload (pending and running in `effective`): Kueue's outcome at its fixed point."""
    by_uid = {k.uid: k.ref for k in final.values()}
    rows = []
    for w in sorted(effective.workloads, key=lambda w: w.ref):
        if w.state is WorkloadState.EXTERNAL:
            continue
        k = final.get(w.ref)
        was = w.state.value
        if k is None:
            rows.append(KueueRow(w.ref, was, "pending" if was == "pending" else "evicted", w.priority,
                                 w.cluster_queue, message="no Workload at the end"))
            continue
        if was == "pending":
            outcome = "admitted" if k.admitted else "pending"
        else:
            first = running.get(w.ref)
            evicted = bool(k.evictions) or (first is not None and first.uid != k.uid)
            if not k.admitted:
                outcome = "evicted"
            elif evicted or (first is not None and first.pod_sets != k.pod_sets):
                outcome = "moved"
            else:
                outcome = "running"
        last = k.evictions[-1] if k.evictions else None
        rows.append(KueueRow(
            w.ref, was, outcome, w.priority, k.cluster_queue or w.cluster_queue,
            pod_sets=k.pod_sets if k.admitted else (),
            quota_only=k.quota_only and outcome in ("admitted", "moved"),
            eviction_reason=last.reason if last else "",
            preemptors=tuple(dict.fromkeys(by_uid[e.preemptor_uid] for e in k.evictions if e.preemptor_uid in by_uid)),
            message=k.message,
        ))
    return tuple(rows)


def kueue_decisions(effective: Snapshot, rows: Iterable[KueueRow]) -> Decisions:
    """Kueue's fixed point as Decisions on `effective`: admissions of pending work it
    admitted, evictions of running work it evicted (a running workload evicted and
    admitted again is both: it moved). Quota-only pod sets have no domains."""
    by_ref = {w.ref: w for w in effective.workloads}
    admissions, evictions = [], []
    for row in rows:
        if row.outcome in ("admitted", "moved"):
            admissions.append(Admission(row.ref, row.cluster_queue or "", row.pod_sets))
        if row.outcome in ("evicted", "moved"):
            reason = "Reclaimed" if row.eviction_reason in RECLAIM_REASONS else "Preempted"
            evictions.append(Eviction(row.ref, reason, row.preemptors, eviction_cost(by_ref[row.ref], effective)))
    return Decisions(tuple(admissions), tuple(evictions))


# ---------------------------------------------------------------- the effective snapshot as a file

def assignment_entries(pod_sets: Iterable[PodSetAssignment]) -> list[dict[str, Any]]:
    """The plan's podSets entries (and the stowplan.io/assignment annotation's)."""
    return [{"name": p.name, "count": p.count, "flavors": dict(sorted(p.flavors.items())),
             "topologyAssignment": {"levels": list(p.levels),
                                    "domains": [{"values": list(v), "count": c} for v, c in p.domains]}}
            for p in pod_sets]


def pod_owner(obj: Mapping[str, Any]) -> ObjectRef | None:
    """As the reader finds a pod's Job or JobSet: JobSet label, owner reference, job-name label."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    labels = meta.get("labels") or {}
    if labels.get("jobset.sigs.k8s.io/jobset-name"):
        return ObjectRef("JobSet", namespace, labels["jobset.sigs.k8s.io/jobset-name"])
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "Job" and ref.get("name"):
            return ObjectRef("Job", namespace, ref["name"])
    for key in ("batch.kubernetes.io/job-name", "job-name"):
        if labels.get(key):
            return ObjectRef("Job", namespace, labels[key])
    return None


def effective_objects(objects: Iterable[Mapping[str, Any]], original: Snapshot, effective: Effective,
                      left_out: Iterable[ObjectRef] = ()) -> dict[str, Any]:
    """The effective snapshot as a `kind: List` the project's reader reads back to it.

    Jobs and JobSets take their effective creation time and UID (the evicted-at
    annotation goes: Kueue queues by creation); running ones take Kueue's placement
    (stowplan.io/assignment) and admission time, and their pods go (the annotation
    is then the truth); dropped running workloads go with their pods, and so do the
    workloads `left_out` of the run (their objects, their queued pods). The rest is
    as it was."""
    left = set(left_out)
    left_kinds = {ref.kind for ref in left} - {pods_kind.POD_KIND, pods_kind.GROUP_KIND}
    state = {w.ref: w for w in effective.snapshot.workloads}
    running_before = {w.ref for w in original.workloads if w.state is WorkloadState.RUNNING}
    out = []
    for obj in objects:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind == "Pod":
            if pod_owner(obj) in running_before:
                continue
            labels = meta.get("labels") or {}
            if left and labels.get(QUEUE_LABEL) and pods_kind.workload_of(
                    meta.get("namespace") or "default", str(meta.get("name", "")), labels) in left:
                continue
            out.append(obj)
            continue
        if kind in left_kinds:
            continue
        if kind not in ("Job", "JobSet"):
            out.append(obj)
            continue
        ref = ObjectRef(kind, meta.get("namespace") or "default", meta.get("name", ""))
        if ref in running_before and ref not in state:
            continue   # dropped
        w = state.get(ref)
        if w is None or w.state is WorkloadState.EXTERNAL:
            out.append(obj)
            continue
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        meta["creationTimestamp"] = rfc3339(w.created_at)
        meta["uid"] = w.uid
        annotations = dict(meta.get("annotations") or {})
        annotations.pop("stowplan.io/evicted-at", None)
        if w.state is WorkloadState.RUNNING:
            annotations["stowplan.io/assignment"] = json.dumps(assignment_entries(w.assignment), separators=(",", ":"))
            if w.admitted_at is not None:
                annotations["stowplan.io/admitted-at"] = rfc3339(w.admitted_at)
        meta["annotations"] = annotations
        out.append(obj)
    return {"apiVersion": "v1", "kind": "List",
            "metadata": {"annotations": {"stowplan.io/snapshot-time": rfc3339(original.now)}},
            "items": out}


def as_dict(row: KueueRow) -> dict[str, Any]:
    """A row as plain data (JSON reports)."""
    data = dataclasses.asdict(row)
    data["ref"] = str(row.ref)
    data["preemptors"] = [str(r) for r in row.preemptors]
    data["pod_sets"] = assignment_entries(row.pod_sets)
    return data
