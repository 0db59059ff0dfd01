"""The plan as the verifier reads it: its admissions (each workload's first, its pod
sets resolved), its evictions and its migrations, a move counting as both an eviction
from where the workload runs and an admission at its new place. The stability and
needed-eviction rules, checked on their own, read the plan here; planner.verify's
`check` reads it the same way, in its own order of rules.
"""

from __future__ import annotations

from models import Decisions, ObjectRef
from planner.verify.index import AdmittedEntry, SnapshotIndex
from planner.verify.moves import check_migrations
from planner.verify.placement import check_admissions
from planner.verify.preemption import check_evictions
from planner.verify.violation import Violation


def with_migrations(ix: SnapshotIndex, decisions: Decisions, admitted: dict[ObjectRef, AdmittedEntry],
                    evicted: set[ObjectRef], out: list[Violation]) -> tuple[dict[ObjectRef, AdmittedEntry], set[ObjectRef]]:
    """`admitted` and `evicted` with the plan's moves (checked into `out`) added to both."""
    if not decisions.migrations:
        return admitted, evicted
    moved = check_migrations(ix, decisions.migrations, admitted, evicted, out)
    return {**admitted, **moved}, evicted | set(moved)


def plan_entries(ix: SnapshotIndex, decisions: Decisions) -> tuple[dict[ObjectRef, AdmittedEntry], set[ObjectRef]]:
    """The plan's admissions and evictions as the verifier reads them (a move counts as
    both), for a rule checked on its own; the other rules' violations are not kept."""
    others: list[Violation] = []
    admitted = check_admissions(ix, decisions.admissions, others)
    evicted = check_evictions(ix, decisions.evictions, admitted, others)
    return with_migrations(ix, decisions, admitted, evicted, others)
