"""Decisions + how they were found -> the Plan: pending reasons and summary metrics."""

from __future__ import annotations

from dataclasses import dataclass

from models import Decisions, ObjectRef, PendingEntry, Plan, Snapshot, SolverReport, WorkloadState
from planner import explain, metrics


@dataclass(frozen=True)
class Description:
    """What a Plan says beside its decisions: why each pending workload waits, and the
    summary metrics. Computed apart (describe) so that it can be worked out on the
    second core while the cycle verifies the decisions (planner.run)."""

    reasons: dict[ObjectRef, str]
    summary: dict[str, object]


def describe(snapshot: Snapshot, decisions: Decisions) -> Description:
    """The reasons (explain.pending_reasons) and the summary of `decisions`."""
    return Description(explain.pending_reasons(snapshot, decisions),
                       metrics.summarize(snapshot, decisions))


def assemble(snapshot: Snapshot, decisions: Decisions, report: SolverReport,
             excluded: dict[ObjectRef, str] | None = None,
             description: Description | None = None) -> Plan:
    """Every pending workload not admitted appears in `pending`, with a reason. The
    `description` of `decisions` if given, else described here."""
    admitted = {a.workload for a in decisions.admissions}
    described = description or describe(snapshot, decisions)
    pending = []
    for workload in sorted(snapshot.workloads, key=lambda w: w.ref):
        if workload.state is not WorkloadState.PENDING or workload.ref in admitted:
            continue
        reason = described.reasons.get(workload.ref) or (excluded or {}).get(workload.ref) or "not admitted"
        pending.append(PendingEntry(workload.ref, reason))
    return Plan(
        source=snapshot.source,
        digest=snapshot.digest,
        object_count=snapshot.object_count,
        solver=report,
        admissions=tuple(sorted(decisions.admissions, key=lambda a: a.workload)),
        evictions=tuple(sorted(decisions.evictions, key=lambda e: e.workload)),
        pending=tuple(pending),
        summary=described.summary,
    )
