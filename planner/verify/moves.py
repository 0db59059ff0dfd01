"""The verifier's check of migrations (defragmentation), on its own.

A migration moves a running workload: it is evicted from where it runs and admitted
at its new place in the same plan. So everything the verifier checks of nodes, quota
and stability counts it twice, as an eviction (its old place and quota given back)
and as an admission (its new place and the same quota taken again): it still holds
its quota. Here, what only a migration must satisfy:

- the policy allows it: `defragment` on, at most `maxMigrationsPerCycle` of them;
- the workload may move: running under Stowplan, not non-preemptible, past the
  minimum runtime, and marked `stowplan.io/movable: "true"` or checkpointed within
  the policy's window;
- it is moved once, is neither evicted nor admitted otherwise, keeps its queue, its
  flavors and its pod counts (so its quota), and `from` is where it runs now;
- the new place obeys every placement rule an admission does (nodes, topology,
  groups) and differs from the old one;
- it frees room for required-topology work: some admission of this plan of at least
  its (base) priority runs in one domain of a required level that holds a node the
  workload ran on; `for` names only such admissions.

Like all of planner/verify, this module must not import the code that makes plans.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from models import Admission, Migration, Node, ObjectRef, PodSetAssignment, ResourceFlavor, Workload, WorkloadState
from planner.verify.index import AdmittedEntry, SnapshotIndex, label_at, levels_with, listed_once
from planner.verify.placement import check_flavors, check_gang, check_groups, check_nodes, check_topology
from planner.verify.violation import Rule, Violation


def check_migrations(ix: SnapshotIndex, migrations: tuple[Migration, ...], admitted: Mapping[ObjectRef, AdmittedEntry],
                     evicted: set[ObjectRef], out: list[Violation]) -> dict[ObjectRef, AdmittedEntry]:
    """Violations of the migrations' own rules into `out`; each moved workload at its new place."""
    policy = ix.snapshot.policy
    if migrations and not policy.defragment:
        out.append(Violation(Rule.MIGRATION, f"{len(migrations)} migration(s) but the policy's defragment is off",
                             workloads=tuple(m.workload for m in migrations)))
    if len(migrations) > policy.max_migrations_per_cycle:
        out.append(Violation(Rule.MIGRATION, f"{len(migrations)} migrations, more than maxMigrationsPerCycle {policy.max_migrations_per_cycle}",
                             workloads=tuple(m.workload for m in migrations)))
    moved: dict[ObjectRef, AdmittedEntry] = {}
    for migration in migrations:
        ref = migration.workload
        workload = listed_once(ix, ref, moved, Rule.MIGRATION, "moved", out)
        if workload is None:
            continue
        if ref in admitted or ref in evicted:
            out.append(Violation(Rule.MIGRATION, f"{ref}: moved and also {'admitted' if ref in admitted else 'evicted'} in the same plan",
                                 workloads=(ref,)))
        problem = _may_not_move(ix, workload)
        if problem:
            out.append(Violation(Rule.MIGRATION, f"{ref}: moved but {problem}", workloads=(ref,)))
            continue
        entry = _new_place(ix, workload, migration, out)
        moved[ref] = entry
        _check_frees(ix, workload, migration, admitted, out)
    return moved


def _may_not_move(ix: SnapshotIndex, workload: Workload) -> str | None:
    snap, policy = ix.snapshot, ix.snapshot.policy
    if workload.state is not WorkloadState.RUNNING or not workload.assignment:
        return f"it is {workload.state.value}, not running under Stowplan"
    if workload.ref.kind != "Job":
        return f"it is a {workload.ref.kind}: only Jobs are moved"
    if workload.non_preemptible:
        return "it is non-preemptible"
    if (policy.minimum_runtime_seconds > 0 and workload.admitted_at is not None
            and snap.now - workload.admitted_at < policy.minimum_runtime_seconds):
        return "it has run less than the policy's minimum runtime"
    recent = (workload.checkpointed_at is not None
              and snap.now - workload.checkpointed_at <= policy.migration_checkpoint_window_seconds)
    if not (workload.movable or recent):
        return "it is neither marked movable nor checkpointed within the policy's window"
    return None


def _new_place(ix: SnapshotIndex, workload: Workload, migration: Migration, out: list[Violation]) -> AdmittedEntry:
    """The placement rules of an admission, for the pods it runs now, under the same flavors."""
    ref = workload.ref
    if migration.cluster_queue != workload.cluster_queue:
        out.append(Violation(Rule.MIGRATION, f"{ref}: moved to ClusterQueue {migration.cluster_queue}, its queue is {workload.cluster_queue}",
                             workloads=(ref,)))
    if tuple(migration.from_) != tuple(workload.assignment):
        out.append(Violation(Rule.MIGRATION, f"{ref}: moved from a place it does not run at", workloads=(ref,)))
    now = {psa.name: psa for psa in workload.assignment}
    pod_sets = tuple(replace(ps, count=now[ps.name].count, min_count=None) if ps.name in now else ps
                     for ps in workload.pod_sets)
    view = replace(workload, pod_sets=pod_sets)
    pairs = check_gang(view, migration_admission(migration), out)
    cq = ix.snapshot.cluster_queues.get(migration.cluster_queue)
    for pod_set, psa in pairs:
        before = now.get(pod_set.name)
        if before is not None and dict(before.flavors) != dict(psa.flavors):
            out.append(Violation(Rule.MIGRATION, f"{ref}: pod set {pod_set.name} moved to other flavors (a move keeps its quota)",
                                 workloads=(ref,)))
        flavors = check_flavors(ix, cq, view, pod_set, psa, out)
        check_nodes(ix, view, pod_set, psa, flavors, out)
        check_topology(ix, view, pod_set, psa, flavors, out)
    check_groups(ix, view, pairs, out)
    if {p.name: p.pods_per_node() for p in migration.to} == {p.name: p.pods_per_node() for p in workload.assignment}:
        out.append(Violation(Rule.MIGRATION, f"{ref}: moved to where it runs now", workloads=(ref,)))
    return AdmittedEntry(view, migration_admission(migration), pairs)


def migration_admission(migration: Migration) -> Admission:
    return Admission(migration.workload, migration.cluster_queue, tuple(migration.to))


def _check_frees(ix: SnapshotIndex, workload: Workload, migration: Migration,
                 admitted: Mapping[ObjectRef, AdmittedEntry], out: list[Violation]) -> None:
    """Some admission of at least its priority now runs in a required domain it left."""
    mine = [ix.nodes[n] for psa in workload.assignment for n in psa.pods_per_node() if n in ix.nodes]
    helped: set[ObjectRef] = set()
    for ref, entry in admitted.items():
        if entry.workload.priority < workload.priority:
            continue
        for pod_set, psa in entry.pairs:
            request = pod_set.topology
            if request.mode != "required" or not request.level:
                continue
            flavors = [ix.snapshot.flavors[f] for f in sorted(set(psa.flavors.values())) if f in ix.snapshot.flavors]
            if _shares_domain(ix, flavors, request.level, psa, mine):
                helped.add(ref)
    if not helped:
        out.append(Violation(Rule.MIGRATION, f"{workload.ref}: moved, but no admission of this plan of priority >= {workload.priority} "
                             "needing a required domain runs where it ran", workloads=(workload.ref,)))
    for target in migration.for_:
        if target not in helped:
            out.append(Violation(Rule.MIGRATION, f"{workload.ref}: moved for {target}, which this plan does not admit into a domain it frees",
                                 workloads=(workload.ref, target)))


def _shares_domain(ix: SnapshotIndex, flavors: list[ResourceFlavor], level: str, psa: PodSetAssignment,
                   mine: list[Node]) -> bool:
    levels = levels_with(ix, flavors, level)
    if levels is None:
        return False
    depth = levels.index(level)

    def domain(node: Node) -> tuple[str | None, ...]:
        return tuple(label_at(node, lv) for lv in levels[: depth + 1])

    theirs = {domain(ix.nodes[n]) for n in psa.pods_per_node() if n in ix.nodes}
    return any(domain(node) in theirs for node in mine)
