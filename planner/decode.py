"""Solver values -> Decisions: which workloads start, with which flavors, on which nodes.

The MILP decides pods per domain and pods per (shape, node); here each workload's
pods get concrete nodes. Demands are served deepest domain first, each from the
nodes of its own domain with the most supply left (so a workload lands on as few
nodes as possible). By Hall's condition on the domain tree, which every solution
satisfies, this never runs out of supply.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from models import HOSTNAME_LABEL, Admission, Decisions, Eviction, PodSetAssignment
from planner import capacity, semantics
from planner.formulate import Choice, Formulation, Path


class DecodeError(Exception):
    """The solver's values do not describe a placeable plan (a bug or numerical trouble)."""


def chosen(values: np.ndarray, col: int) -> bool:
    return values[col] > 0.5


def pods_of(choice: Choice, values: np.ndarray) -> int:
    return int(round(sum(coef * values[col] for col, coef in choice.pods)))


def demands_of(choice: Choice, values: np.ndarray) -> list[tuple[Path, int]]:
    """(domain, pods) the chosen pod set must place inside each domain."""
    if choice.slice_layers:
        return [(path, int(round(values[col])) * choice.slice_size)
                for path, col in sorted(choice.slice_cols[-1].items()) if round(values[col]) > 0]
    if choice.mode == "required":
        if choice.count_cols:
            return [(path, int(round(values[col]))) for path, col in sorted(choice.count_cols.items())
                    if round(values[col]) > 0]
        return [(path, pods_of(choice, values)) for path, col in sorted(choice.domain_cols.items())
                if chosen(values, col)]
    if choice.mode == "preferred":
        return [(path, int(round(values[col]))) for path, col in sorted(choice.domain_cols.items())
                if round(values[col]) > 0]
    return [((), pods_of(choice, values))]


def decode(form: Formulation, values: np.ndarray) -> Decisions:
    picked = [c for c in form.choices if chosen(values, form.admit_col[c.workload]) and chosen(values, c.use_col)]
    supply: dict[int, dict[str, int]] = {
        s: {node: int(round(values[col])) for node, col in shape.supply.items()}
        for s, shape in enumerate(form.shapes)
    }
    placed: dict[int, dict[str, int]] = defaultdict(dict)    # choice index -> node -> pods
    jobs = []
    for index, choice in enumerate(picked):
        for path, pods in demands_of(choice, values):
            jobs.append((-len(path), choice.workload, choice.pod_set, path, pods, index))
    for _, _, _, path, pods, index in sorted(jobs):
        choice = picked[index]
        take_from_domain(form, choice, path, pods, supply[choice.shape], placed[index])
    by_workload: dict[int, list[tuple[Choice, dict[str, int]]]] = defaultdict(list)
    for index, choice in enumerate(picked):
        by_workload[choice.workload].append((choice, placed[index]))
    admissions = []
    for w, entries in sorted(by_workload.items()):
        workload = form.workloads[w]
        pod_sets = []
        for choice, nodes in sorted(entries, key=lambda e: e[0].pod_set):
            pod_set = workload.pod_sets[choice.pod_set]
            pod_sets.append(PodSetAssignment(
                name=pod_set.name,
                count=sum(nodes.values()),
                flavors=dict(sorted(choice.option.by_resource.items())),
                levels=(HOSTNAME_LABEL,),
                domains=tuple(((node,), n) for node, n in sorted(nodes.items()) if n > 0),
            ))
        if len(pod_sets) != len(workload.pod_sets):
            raise DecodeError(f"{workload.ref}: admitted with {len(pod_sets)} of {len(workload.pod_sets)} pod sets")
        admissions.append(Admission(workload.ref, workload.cluster_queue or "", tuple(pod_sets)))
    evictions = decode_evictions(form, values, admissions)
    return Decisions(tuple(sorted(admissions, key=lambda a: a.workload)), evictions)


def decode_evictions(form: Formulation, values: np.ndarray, admissions: list[Admission]) -> tuple[Eviction, ...]:
    """Each evicted workload, the admitted workloads it makes way for, and its cost.

    `for` lists the admitted workloads allowed to evict it that use its nodes, or,
    when none does, those allowed that draw on the same quota tree.
    """
    snapshot = form.snapshot
    tree = form.quota_tree
    borrowing = semantics.borrowing_queues(snapshot, tree, capacity.cluster_queue_usage(snapshot))
    by_ref = {w.ref: w for w in form.workloads}
    nodes_of = {a.workload: {v[-1] for ps in a.pod_sets for v, _ in ps.domains} for a in admissions}
    out = []
    for victim, col in zip(form.victims, form.evict_col):
        if not chosen(values, col):
            continue
        allowed = [(a.workload, semantics.preemption_reason(snapshot, by_ref[a.workload], victim, tree, borrowing))
                   for a in admissions]
        allowed = [(ref, reason) for ref, reason in allowed if reason]
        if not allowed:
            raise DecodeError(f"{victim.ref}: evicted but no admitted workload may evict it")
        victim_nodes = set(capacity.node_usage_of(victim))
        sharing = [(ref, reason) for ref, reason in allowed if nodes_of[ref] & victim_nodes] or allowed
        out.append(Eviction(victim.ref, sharing[0][1], tuple(sorted(ref for ref, _ in sharing)),
                            round(semantics.eviction_cost(victim, snapshot), 6)))
    return tuple(sorted(out, key=lambda e: e.workload))


def take_from_domain(form: Formulation, choice: Choice, path: Path, pods: int,
                     supply: dict[str, int], placed: dict[str, int]) -> None:
    """Give `pods` pods nodes inside `path`, fullest supply first, then by name."""
    shape = form.shapes[choice.shape]
    nodes = sorted((n for n, p in shape.paths.items() if p[: len(path)] == path and supply.get(n, 0) > 0),
                   key=lambda n: (-supply[n], n))
    left = pods
    for node in nodes:
        if left == 0:
            break
        take = min(left, supply[node])
        supply[node] -= take
        placed[node] = placed.get(node, 0) + take
        left -= take
    if left:
        ref = form.workloads[choice.workload].ref
        raise DecodeError(f"{ref}: {left} pods found no node in domain {'/'.join(path) or 'root'}")
