"""Decisions + how they were found -> the Plan: pending reasons and summary metrics."""

from __future__ import annotations

from models import Decisions, ObjectRef, PendingEntry, Plan, Snapshot, SolverReport, WorkloadState
from planner.describe import reasons as explain
from planner.describe import metrics
def assemble(snapshot: Snapshot, decisions: Decisions, report: SolverReport,
             excluded: dict[ObjectRef, str] | None = None) -> Plan:
    """Every pending workload not admitted appears in `pending`, with a reason
    (explain.pending_reasons, else why the model left it out), and the summary metrics."""
    admitted = {a.workload for a in decisions.admissions}
    reasons = explain.pending_reasons(snapshot, decisions)
    pending = []
    for workload in sorted(snapshot.workloads, key=lambda w: w.ref):
        if workload.state is not WorkloadState.PENDING or workload.ref in admitted:
            continue
        reason = reasons.get(workload.ref) or (excluded or {}).get(workload.ref) or "not admitted"
        pending.append(PendingEntry(workload.ref, reason))
    return Plan(
        source=snapshot.source,
        digest=snapshot.digest,
        object_count=snapshot.object_count,
        solver=report,
        admissions=tuple(sorted(decisions.admissions, key=lambda a: a.workload)),
        evictions=tuple(sorted(decisions.evictions, key=lambda e: e.workload)),
        pending=tuple(pending),
        migrations=tuple(sorted(decisions.migrations, key=lambda m: m.workload)),
        summary=metrics.summarize(snapshot, decisions),
    )
