"""Kueue's fit tests for one workload over a `ClusterState`: does it fit, and where.

Takes the state and a workload (its pod sets, counts, optionally fixed flavors);
gives the `PodSetChoice`s that place it or the reason it does not fit. Every try is
charged through a `Tentative` and undone, so the state is unchanged on return.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

import numpy as np

from models import ClusterQueue, FlavorResource, PodSet, Workload
from planner.kueue import placement
from planner.kueue.placement import level_noun
from planner.kueue.semantics import FlavorOption, quota_usage
from planner.kueue.state import ClusterState, EligibleNodes, PodSetChoice, pod_shape, pods


# ---------------------------------------------------------------- one workload

class Tentative:
    """Charges and node takes of a workload being tried, undone afterwards."""

    def __init__(self, state: ClusterState):
        self.state = state
        self.pending: dict[FlavorResource, int] = defaultdict(int)
        self.choices: list[PodSetChoice] = []

    def add(self, choice: PodSetChoice) -> None:
        self.state.take(choice.pods, choice.pod_set.request)
        for fr, v in choice.charges.items():
            self.pending[fr] += v
        self.choices.append(choice)

    def rollback(self, keep: int = 0) -> None:
        while len(self.choices) > keep:
            choice = self.choices.pop()
            self.state.take(choice.pods, choice.pod_set.request, sign=-1)
            for fr, v in choice.charges.items():
                self.pending[fr] -= v


def _try_pod_set(state: ClusterState, cq: ClusterQueue, ps: PodSet, count: int, tent: Tentative) -> PodSetChoice | str:
    """Flavor options in order; quota, then placement; flavorFungibility decides when to stop."""
    options = state.options(cq, ps)
    if isinstance(options, str):
        return options
    first_reason: str | None = None
    borrowing_fit: PodSetChoice | None = None
    for option in options:
        charges = quota_usage(ps, option, count)
        short = state.quota_shortfall(cq.name, charges, tent.pending)
        if short is not None:
            first_reason = first_reason or short
            continue
        where = state.place(option, ps, count)
        if not where.ok:
            flavors = "/".join(option.flavors)
            first_reason = first_reason or f"{pods(count)} of {pod_shape(ps.request)} on flavor {flavors}: {where.reason}"
            continue
        choice = PodSetChoice(ps, option, count, dict(where.pods or {}), charges)
        total = {fr: tent.pending.get(fr, 0) + v for fr, v in charges.items()}
        if not state.borrows(cq.name, total) or cq.when_can_borrow != "TryNextFlavor":
            return choice
        borrowing_fit = borrowing_fit or choice
    if borrowing_fit is not None:
        return borrowing_fit
    return first_reason or f"no flavor of ClusterQueue {cq.name} fits"


def _group_level(members: Sequence[PodSet]) -> str | None:
    for mode in ("required", "preferred"):
        for ps in members:
            if ps.topology.mode == mode and ps.topology.level:
                return ps.topology.level
    return None


def _try_group(state: ClusterState, cq: ClusterQueue, members: Sequence[PodSet], counts: Sequence[int],
               tent: Tentative) -> list[PodSetChoice] | str:
    """Pod sets sharing a group name: one common domain at their level, smallest that fits first."""
    level = _group_level(members)
    if level is None:
        return _try_each(state, cq, members, counts, tent)
    all_options: list[list[FlavorOption]] = []
    for ps in members:
        opts = state.options(cq, ps)
        if isinstance(opts, str):
            return opts
        all_options.append(opts)
    names = ", ".join(ps.name for ps in members)
    reason: str | None = None
    for option in all_options[0]:  # the members share a flavor, as they share nodes
        found = [next((o for o in opts if o.flavors == option.flavors), None) for opts in all_options[1:]]
        picks = [option] + [p for p in found if p is not None]
        if len(picks) < len(members):
            continue
        charges_each = [quota_usage(ps, opt, n) for ps, opt, n in zip(members, picks, counts)]
        total: dict[FlavorResource, int] = defaultdict(int)
        for ch in charges_each:
            for fr, v in ch.items():
                total[fr] += v
        short = state.quota_shortfall(cq.name, total, tent.pending)
        if short is not None:
            reason = reason or short
            continue
        placed = _group_at(state, members, picks, counts, level, tent)
        if not isinstance(placed, str):
            return placed
        reason = reason or placed
    if reason is None:
        return f"pod sets {names} have no common flavor in ClusterQueue {cq.name}"
    return reason


def _group_at(state: ClusterState, members: Sequence[PodSet], picks: Sequence[FlavorOption], counts: Sequence[int],
              level: str, tent: Tentative) -> list[PodSetChoice] | str:
    """The group's members, each with its flavor choice, in one domain at `level`:
    candidates are domains where every member fits alone, smallest room (for the
    biggest member) first, then by domain. Taken in `tent` on success."""
    trees = [state.eligible(opt, ps) for opt, ps in zip(picks, members)]
    if any(level not in e.tree.levels for e in trees):
        return f"the topology of flavor {'/'.join(picks[0].flavors)} has no level {level}"
    domains, room = _group_room(state, trees, members, level)
    biggest = max(range(len(members)), key=lambda k: counts[k])
    fit = np.flatnonzero((room >= np.array(counts, dtype=np.int64)[:, None]).all(axis=0))
    for d in fit[np.lexsort((fit, room[biggest, fit]))]:
        values = domains[d]
        mark = len(tent.choices)
        for e, ps, opt, n in zip(trees, members, picks, counts):
            tree = e.tree
            lvl = tree.levels.index(level)
            inside = tree.domain_index(lvl, values)
            leaf = state.leaf_counts(e, ps.request)
            leaf = np.where(tree.node_domain[lvl] == inside, leaf, 0) if inside is not None else leaf * 0
            where = placement.place_counts(tree, leaf, n, ps.topology)
            if not where.ok:
                tent.rollback(mark)
                break
            tent.add(PodSetChoice(ps, opt, n, dict(where.pods or {}), quota_usage(ps, opt, n)))
        else:
            return tent.choices[mark:]
    names = ", ".join(ps.name for ps in members)
    return f"pod sets {names} do not fit together in one {level_noun(level)} ({level})"


def place_fixed(state: ClusterState, cq: ClusterQueue, workload: Workload,
                picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> list[PodSetChoice] | tuple[int, str]:
    """Nodes for every pod set of `workload` with its flavors and count fixed (Kueue's
    TAS assignment for a workload: later pod sets see what earlier ones take; a pod-set
    group shares one domain), as choices in pod set order; or (index of the pod set that
    does not fit, why). Quota is not looked at. The state is left as found."""
    if len(picks) == 1:   # one pod set: nothing to hold while the next is placed
        ps, opt, n = picks[0]
        where = state.place(opt, ps, n)
        if not where.ok:
            return 0, f"{pods(n)} of {pod_shape(ps.request)} on flavor {'/'.join(opt.flavors)}: {where.reason}"
        return [PodSetChoice(ps, opt, n, dict(where.pods or {}), quota_usage(ps, opt, n))]
    tent = Tentative(state)
    index = {id(ps): i for i, (ps, _, _) in enumerate(picks)}
    try:
        done: set[int] = set()
        for i, (ps, option, count) in enumerate(picks):
            if i in done:
                continue
            group = [j for j, (other, _, _) in enumerate(picks)
                     if ps.topology.group and other.topology.group == ps.topology.group] or [i]
            done.update(group)
            members = [picks[j][0] for j in group]
            level = _group_level(members) if len(group) > 1 else None
            if level is not None:
                placed = _group_at(state, members, [picks[j][1] for j in group], [picks[j][2] for j in group],
                                   level, tent)
                if isinstance(placed, str):
                    return i, placed
                continue
            for j in group:
                member, opt, n = picks[j]
                where = state.place(opt, member, n)
                if not where.ok:
                    return j, f"{pods(n)} of {pod_shape(member.request)} on flavor {'/'.join(opt.flavors)}: {where.reason}"
                choice = PodSetChoice(member, opt, n, dict(where.pods or {}), quota_usage(member, opt, n))
                if len(done) == len(picks) and j == group[-1]:   # the last: nothing after it needs its nodes held
                    return sorted(tent.choices + [choice], key=lambda c: index[id(c.pod_set)])
                tent.add(choice)
        return sorted(tent.choices, key=lambda c: index[id(c.pod_set)])
    finally:
        tent.rollback()


def fits_fixed(state: ClusterState, cq: ClusterQueue, workload: Workload,
               picks: Sequence[tuple[PodSet, FlavorOption, int]]) -> bool:
    """Would place_fixed place them? Cheaper for one pod set (no placement built)."""
    if len(picks) == 1:
        ps, option, count = picks[0]
        return state.fits(option, ps, count)
    return not isinstance(place_fixed(state, cq, workload, picks), tuple)


def _group_room(state: ClusterState, trees: Sequence[EligibleNodes], members: Sequence[PodSet],
                level: str) -> tuple[list[tuple[str, ...]], np.ndarray]:
    """Every domain at `level` of any member's eligible nodes, sorted, and the pods of each
    member that fit in each alone (members x domains; 0 where a member has no node)."""
    key = (tuple(e.key for e in trees), level)
    found = state._domain_unions.get(key)
    if found is None:
        at_level = [e.tree.values[e.tree.levels.index(level)] for e in trees]
        domains = sorted({v for values in at_level for v in values})
        position = {v: i for i, v in enumerate(domains)}
        index = [np.array([position[v] for v in values], dtype=np.int64) for values in at_level]
        found = state._domain_unions[key] = (domains, index)
    domains, index = found
    room = np.zeros((len(trees), len(domains)), dtype=np.int64)
    for k, (e, ps) in enumerate(zip(trees, members)):
        if len(e.tree):
            room[k, index[k]] = state._leaves(e, ps.request).sums()[e.tree.levels.index(level)]
    return domains, room


def _try_each(state: ClusterState, cq: ClusterQueue, members: Sequence[PodSet], counts: Sequence[int],
              tent: Tentative) -> list[PodSetChoice] | str:
    out = []
    for ps, n in zip(members, counts):
        result = _try_pod_set(state, cq, ps, n, tent)
        if isinstance(result, str):
            return f"pod set {ps.name}: {result}" if len(members) > 1 else result
        tent.add(result)
        out.append(result)
    return out


def try_counts(state: ClusterState, workload: Workload, counts: Sequence[int]) -> list[PodSetChoice] | str:
    """Place every pod set of `workload` at `counts`, all or nothing; the state is left as found."""
    cq = state.snapshot.cluster_queues[workload.queue_name]
    tent = Tentative(state)
    try:
        done: set[int] = set()
        many = len(workload.pod_sets) > 1
        for i, ps in enumerate(workload.pod_sets):
            if i in done:
                continue
            group = [j for j, other in enumerate(workload.pod_sets)
                     if ps.topology.group and other.topology.group == ps.topology.group] or [i]
            done.update(group)
            members = [workload.pod_sets[j] for j in group]
            if len(members) > 1:
                grouped = _try_group(state, cq, members, [counts[j] for j in group], tent)
                if isinstance(grouped, str):
                    return grouped
                continue
            single = _try_pod_set(state, cq, ps, counts[i], tent)
            if isinstance(single, str):
                return f"pod set {ps.name}: {single}" if many else single
            if len(done) == len(workload.pod_sets):  # the last: no pod set after it needs its nodes held
                return _in_order(workload, tent.choices + [single])
            tent.add(single)
        return _in_order(workload, tent.choices)
    finally:
        tent.rollback()


def _in_order(workload: Workload, choices: list[PodSetChoice]) -> list[PodSetChoice]:
    order = {ps.name: k for k, ps in enumerate(workload.pod_sets)}
    return sorted(choices, key=lambda c: order[c.pod_set.name])


def fits_at(state: ClusterState, workload: Workload, counts: Sequence[int]) -> bool:
    """Would try_counts place `workload` at `counts`? The same answer, cheaper for one pod
    set: no later pod set needs its nodes held, so nothing is taken and given back."""
    if len(workload.pod_sets) > 1:
        return not isinstance(try_counts(state, workload, counts), str)
    cq = state.snapshot.cluster_queues[workload.queue_name]
    return not isinstance(_try_pod_set(state, cq, workload.pod_sets[0], counts[0], Tentative(state)), str)


def evaluate(state: ClusterState, workload: Workload) -> list[PodSetChoice] | str:
    """Full counts first; an elastic workload then binary-searches the largest count that fits."""
    full = [ps.count for ps in workload.pod_sets]
    result = try_counts(state, workload, full)
    if not isinstance(result, str) or not workload.elastic:
        return result
    deltas = [ps.count - ps.minimum for ps in workload.pod_sets]
    steps = max(deltas)
    if steps <= 0:
        return result

    def counts_at(k: int) -> list[int]:  # Kueue's PodSetReducer: all elastic pod sets shrink together
        return [ps.count - math.ceil(d * k / steps) for ps, d in zip(workload.pod_sets, deltas)]

    lowest = try_counts(state, workload, counts_at(steps))
    if isinstance(lowest, str):
        return lowest
    lo, hi, best = 1, steps - 1, lowest
    while lo <= hi:
        mid = (lo + hi) // 2
        attempt = try_counts(state, workload, counts_at(mid))
        if isinstance(attempt, str):
            lo = mid + 1
        else:
            best, hi = attempt, mid - 1
    return best
