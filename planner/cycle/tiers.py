"""The objective's first criterion, measured on Decisions: volume per priority tier.

Used to hold the MILP to "never worse than greedy": plans are compared tier by
tier, highest effective priority first, on the dominant-resource volume admitted
(minus what evictions take away).
"""

from __future__ import annotations

from collections import defaultdict

from models import Decisions, Snapshot
from planner.kueue import semantics

TOLERANCE = 1e-6


def tier_volumes(snapshot: Snapshot, decisions: Decisions) -> dict[int, float]:
    """Effective priority -> volume admitted minus volume evicted."""
    by_ref = {w.ref: w for w in snapshot.workloads}
    volume: dict[int, float] = defaultdict(float)
    for admission in decisions.admissions:
        workload = by_ref[admission.workload]
        tier = semantics.effective_priority(workload, snapshot)
        volume[tier] += semantics.assigned_volume(workload, admission.pod_sets, snapshot)
    for eviction in decisions.evictions:
        workload = by_ref[eviction.workload]
        volume[semantics.effective_priority(workload, snapshot)] -= semantics.running_volume(workload, snapshot)
    return dict(volume)


def compare(a: dict[int, float], b: dict[int, float]) -> int:
    """1 if a is lexicographically better than b, -1 if worse, 0 if equal (within tolerance)."""
    for tier in sorted(set(a) | set(b), reverse=True):
        diff = a.get(tier, 0.0) - b.get(tier, 0.0)
        if diff > TOLERANCE:
            return 1
        if diff < -TOLERANCE:
            return -1
    return 0
