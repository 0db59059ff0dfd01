"""The quota rule: hierarchical quota per flavor and resource over the cohort tree
(nominal quota, borrowing and lending limits, nested cohorts), with the relaxation for
usage already above a limit before the plan (see planner/verify/__init__.py). The
fleet's manager quota uses the same arithmetic (`check_quota_fr`). Models and
planner.verify.index only, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

from models import ObjectRef, WorkloadState
from planner.verify.index import FR, AdmittedEntry, SnapshotIndex, VerifierQuotaTree, charge, named
from planner.verify.violation import Rule, Violation


def check_quota(ix: SnapshotIndex, admitted: Mapping[ObjectRef, AdmittedEntry], evicted: set[ObjectRef], out: list[Violation]) -> None:
    """Hierarchical quota per (flavor, resource) touched by the admissions.

    Constraints: every tree node n with a parent and a borrowingLimit:
    usage(n) <= subtree(n) + borrowingLimit(n); every root: usage(root) <= subtree(root);
    each with the pre-existing-overuse relaxation of the module docstring.
    """
    snap = ix.snapshot
    new: dict[str, dict[FR, int]] = {}
    who: dict[FR, dict[str, set[ObjectRef]]] = defaultdict(lambda: defaultdict(set))
    for ref, entry in admitted.items():
        cq = snap.cluster_queues.get(entry.admission.cluster_queue)
        if cq is None or cq.inactive_reason is not None:
            continue  # reported by the identity check
        pod_sets = {ps.name: ps for ps, _ in entry.pairs}
        mine: dict[str, dict[FR, int]] = {}
        charge(mine, cq.name, ix.coverage[cq.name], entry.workload, [psa for _, psa in entry.pairs], pod_sets)
        target = new.setdefault(cq.name, defaultdict(int))
        for fr, amount in mine[cq.name].items():
            target[fr] += amount
            if amount > 0:
                who[fr][cq.name].add(ref)
    touched = sorted({fr for per in new.values() for fr, v in per.items() if v > 0})
    if not touched:
        return
    base: dict[str, dict[FR, int]] = {}
    for workload in snap.workloads:
        if workload.state is not WorkloadState.RUNNING or workload.ref in evicted or workload.cluster_queue is None:
            continue
        if workload.cluster_queue in snap.cluster_queues:
            charge(base, workload.cluster_queue, ix.coverage[workload.cluster_queue], workload, workload.assignment)
    final: dict[str, dict[FR, int]] = {}
    for cq_name in set(base) | set(new):
        merged: dict[FR, int] = defaultdict(int)
        for source in (base.get(cq_name, {}), new.get(cq_name, {})):
            for fr, amount in source.items():
                merged[fr] += amount
        final[cq_name] = merged
    tree = VerifierQuotaTree(ix)
    for fr in touched:
        check_quota_fr(tree, fr, base, final, who[fr], out)


def check_quota_fr(tree: VerifierQuotaTree, fr: FR, base: Mapping[str, Mapping[FR, int]], final: Mapping[str, Mapping[FR, int]],
                   who: Mapping[str, set[ObjectRef]], out: list[Violation]) -> None:
    """One flavor/resource over the whole tree: usage per queue before the plan (`base`)
    and with its admissions (`final`); `who`: the admitted workloads per queue, to name."""
    subtree, guaranteed = tree.subtree_and_guaranteed(fr)
    before = tree.usage(fr, base, guaranteed)
    after = tree.usage(fr, final, guaranteed)
    flavor, resource = fr
    for key in sorted(after):
        parent = tree.parent[key]
        borrowing = tree.quota(key, fr)[1]
        if parent is None:
            limit, what = subtree[key], "its quota"
        elif borrowing is not None:
            limit, what = subtree[key] + borrowing, "quota + borrowingLimit"
        else:
            continue
        if after[key] > max(limit, before[key]):
            refs = [r for cq, refs in who.items() if _under(tree, ("cq", cq), key) for r in refs]
            kind = "Cohort" if key[0] == "cohort" else "ClusterQueue"
            out.append(Violation(Rule.QUOTA, f"{kind} {key[1]}: {resource} of flavor {flavor} "
                                 f"uses {after[key]} > {what} {limit} (before the plan {before[key]}); "
                                 f"admitted: {named(refs)}",
                                 workloads=tuple(sorted(set(refs), key=str)), flavor=flavor, queue=key[1]))


def _under(tree: VerifierQuotaTree, node: tuple[str, str], ancestor: tuple[str, str]) -> bool:
    current: tuple[str, str] | None = node
    while current is not None:
        if current == ancestor:
            return True
        current = tree.parent.get(current)
    return False
