"""Two planners' decisions on one snapshot, workload by workload.

Pure: no I/O. The outcome of a workload (pending or running in the snapshot) is
one of

    admitted  pending in the snapshot, admitted (with a flavor per pod set)
    pending   pending in the snapshot, left pending
    evicted   running in the snapshot, evicted
    running   running in the snapshot, kept running
    moved     running in the snapshot, evicted and admitted again

Two decisions agree on a workload when the outcome is the same and, for admitted
and moved ones, so are the flavors of every pod set (nodes are not compared: which
of two equal nodes a pod takes is not a decision worth a disagreement).
`agreement` is the share of the snapshot's pending and running workloads on which
they agree. The REFERENCE §5 metrics of any Decisions come from planner.describe.metrics.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from models import Admission, Decisions, Eviction, ObjectRef, Plan, PodSetAssignment, Snapshot, WorkloadState
from planner.describe.metrics import summarize

KINDS = ("admitted", "pending", "evicted", "running", "moved")


@dataclass(frozen=True)
class Outcome:
    kind: str
    flavors: tuple[tuple[str, tuple[str, ...]], ...] = ()    # (pod set, flavor names), admitted/moved only

    def __str__(self) -> str:
        if not self.flavors:
            return self.kind
        shown = ", ".join(f"{name}: {'+'.join(names) or '-'}" for name, names in self.flavors)
        return f"{self.kind} ({shown})"


def flavors_of(pod_sets: Iterable[PodSetAssignment]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted((p.name, tuple(sorted(set(p.flavors.values())))) for p in pod_sets))


def outcomes(snapshot: Snapshot, decisions: Decisions) -> dict[ObjectRef, Outcome]:
    """The outcome of every pending and running workload of `snapshot` under `decisions`."""
    admitted = {a.workload: a for a in decisions.admissions}
    evicted = {e.workload for e in decisions.evictions}
    out: dict[ObjectRef, Outcome] = {}
    for w in snapshot.workloads:
        if w.state is WorkloadState.PENDING:
            a = admitted.get(w.ref)
            out[w.ref] = Outcome("admitted", flavors_of(a.pod_sets)) if a else Outcome("pending")
        elif w.state is WorkloadState.RUNNING:
            a = admitted.get(w.ref)
            if w.ref in evicted:
                out[w.ref] = Outcome("moved", flavors_of(a.pod_sets)) if a else Outcome("evicted")
            else:
                out[w.ref] = Outcome("running")
    return out


@dataclass(frozen=True)
class Disagreement:
    ref: ObjectRef
    priority: int
    cluster_queue: str | None
    a: Outcome
    b: Outcome

    def category(self) -> str:
        """Outcome kinds, e.g. "admitted/pending"; "flavor" when only flavors differ."""
        return "flavor" if self.a.kind == self.b.kind else f"{self.a.kind}/{self.b.kind}"


@dataclass(frozen=True)
class Comparison:
    names: tuple[str, str]
    total: int
    agreed: int
    disagreements: tuple[Disagreement, ...]
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)    # name -> outcome kind -> n

    @property
    def agreement(self) -> float:
        return self.agreed / self.total if self.total else 1.0

    def categories(self) -> dict[str, int]:
        return dict(Counter(d.category() for d in self.disagreements).most_common())


def compare(snapshot: Snapshot, a: Decisions, b: Decisions, names: tuple[str, str] = ("kueue", "greedy")) -> Comparison:
    """Workload by workload: where `a` and `b` decide the same (see the module doc)."""
    oa, ob = outcomes(snapshot, a), outcomes(snapshot, b)
    by_ref = {w.ref: w for w in snapshot.workloads}
    disagreements = []
    for ref in sorted(oa):
        if oa[ref] != ob[ref]:
            w = by_ref[ref]
            disagreements.append(Disagreement(ref, w.priority, w.cluster_queue, oa[ref], ob[ref]))
    counts = {names[0]: _count(oa), names[1]: _count(ob)}
    return Comparison(names, len(oa), len(oa) - len(disagreements), tuple(disagreements), counts)


def _count(outcome: Mapping[ObjectRef, Outcome]) -> dict[str, int]:
    seen = Counter(o.kind for o in outcome.values())
    return {kind: seen[kind] for kind in KINDS if seen[kind]}


def decisions_of(plan: Plan) -> Decisions:
    return Decisions(plan.admissions, plan.evictions)


def decisions_from_plan(data: Mapping[str, Any]) -> Decisions:
    """A plan document (`what-if -o json|yaml`, decoded) -> its Decisions."""
    def ref(d: Mapping[str, Any]) -> ObjectRef:
        return ObjectRef(str(d["kind"]), str(d.get("namespace") or ""), str(d["name"]))

    def pod_sets(entries: Iterable[Mapping[str, Any]]) -> tuple[PodSetAssignment, ...]:
        out = []
        for e in entries:
            ta = e.get("topologyAssignment") or {}
            out.append(PodSetAssignment(str(e["name"]), int(e["count"]), dict(e.get("flavors") or {}),
                                        tuple(ta.get("levels") or ()),
                                        tuple((tuple(d["values"]), int(d["count"])) for d in ta.get("domains") or ())))
        return tuple(out)

    admissions = tuple(Admission(ref(a["workload"]), str(a.get("clusterQueue", "")), pod_sets(a.get("podSets") or ()))
                       for a in data.get("admissions") or ())
    evictions = tuple(Eviction(ref(e["workload"]), str(e.get("reason", "")), tuple(ref(r) for r in e.get("for") or ()),
                               float(e.get("cost") or 0.0)) for e in data.get("evictions") or ())
    return Decisions(admissions, evictions)


def metrics(snapshot: Snapshot, decisions: Decisions) -> dict[str, object]:
    """REFERENCE §5 metrics of `decisions` (planner.describe.metrics, the plans' own summary)."""
    return summarize(snapshot, decisions)


def report_lines(comparison: Comparison, limit: int | None = None) -> list[str]:
    """A short human report: agreement, outcome counts, disagreements by category."""
    a, b = comparison.names
    lines = [f"agreement {a} vs {b}: {comparison.agreement:.4f} ({comparison.agreed}/{comparison.total})"]
    for name in comparison.names:
        lines.append(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in comparison.counts.get(name, {}).items()))
    if comparison.disagreements:
        lines.append("  disagreements by kind (" + a + "/" + b + "): " +
                     ", ".join(f"{k} {v}" for k, v in comparison.categories().items()))
    shown = comparison.disagreements if limit is None else comparison.disagreements[:limit]
    for d in shown:
        lines.append(f"  {d.ref} (priority {d.priority}, {d.cluster_queue}): {a} {d.a}; {b} {d.b}")
    if limit is not None and len(comparison.disagreements) > limit:
        lines.append(f"  ... and {len(comparison.disagreements) - limit} more")
    return lines
