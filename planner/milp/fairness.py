"""Fair sharing in the MILP (Kueue's `fairSharing`, issue 25): stages and strategy rows.

When the Configuration turns fair sharing on, the borrowable pool of each cohort tree
is shared by weighted max-min of the dominant resource share, before the priority
tiers. The fair allocation itself is computed exactly outside the solver
(planner.kueue.shares.targets: guarantee first, then weighted water-filling level
by level over the cohort tree, on what each queue wants: running plus pending work
the model can place). The model then only has to come as close to it as whole
workloads allow, with two stages ahead of the priority tiers:

    m[q] <= usage(q, r)    its use of the tree's measured resource r, over r's flavors  (continuous)
    0 <= m[q] <= x[q]      x[q]: q's fair allocation of r (its nominal part first, then its share)
    t * x[q] <= m[q]       for every queue with a fair allocation

    stage "fair share: least": maximise t         (the least fraction of its fair allocation any queue reaches)
    stage "fair share: total": maximise sum m[q] / x[q], t held

Fractions of the whole allocation, not only of the part above nominal: a queue below
its nominal with pending work (the guarantee) counts as much as one short of its
borrowed share, so borrowers admitted by the priority tiers cannot take the nodes a
queue within its nominal needs.

r is the tree's measured resource (its GPUs where it has any, else cpu). Targets computed
resource by resource would not add up to whole workloads (a queue last on GPUs but
first on spare cpu would be asked to take cpu it can only use with GPUs); Kueue's DRS
of GPU work is its GPU share. Each is held (a row) for every stage after it, so the priority tiers then rank the
plans that are as fair as workloads allow, and spend only what no queue below its
target can use. This is two LP-like stages, whatever the number of queues; an exact
lexicographic max-min would need one stage per queue, and a concave utility only
approximates the split; the targets make both unnecessary (docs/design.md).

Preemption for fairness follows Kueue's strategies (pkg/scheduler/preemption,
fairPreemptions), reduced to the plan's final shares: Kueue removes victims one at a
time, each allowed while the preemptor's share with its workload is at most the
victim queue's after that removal (LessThanOrEqualToFinalShare) or below it before
that removal (LessThanInitialShare, S2-b: once per queue); the last removal is the
hardest, so with S[X] = (usage(X, r) - nominal(X, r)) x 1000 / lendable(r) / weight(X),
a column per queue on the tree's measured resource r (its GPUs where it has any):

    LessThanOrEqualToFinalShare:            S[P] <= S[Q]
    LessThanInitialShare (alone or second): S[P] <  S[Q] + d[v]      d[v]: v's own share of Q

for every eviction e[v] of Q's work while P (P != Q, whose workloads may evict v)
borrows; a preemptor within its nominal quota preempts regardless (Kueue v0.17's
FairSharingPreemptWithinNominal, on by default). A queue of weight 0 may preempt
across queues only within its nominal; a victim queue of weight 0 that borrows may
always lose work (its share is infinite). Victims among the allowed ones are still
chosen by the cost stages.

Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from models import FlavorResource
from models.kueue_config import LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from planner.kueue import capacity
from planner.kueue import shares as fair_share
from planner.milp.arrays import INF

from planner.milp.rows import Formulation, queue_usage_terms, resource_units

EPSILON = 1e-4          # share units (per mille): "strictly less than"
MIN_TARGET = 1e-6       # a target above nominal smaller than this is no target


@dataclass
class FairStage:
    name: str
    terms: list[tuple[int, float]]
    ceiling: float


@dataclass
class Fairness:
    """The fairness columns, with what sets each in a start (planner.milp.start)."""

    # (m column, usage terms, constant, target x): m = clamp(constant + terms . v, 0, x)
    shares: list[tuple[int, list[tuple[int, float]], float, float]] = field(default_factory=list)
    least: int | None = None          # t
    # (S column, usage terms, constant): S = constant + terms . v
    measured: list[tuple[int, list[tuple[int, float]], float]] = field(default_factory=list)
    # (beta column, S column): 1 when the queue stays within its nominal quota (S <= 0)
    within: list[tuple[int, int]] = field(default_factory=list)
    stages: list[FairStage] = field(default_factory=list)
    target_amounts: dict[str, dict[FlavorResource, float]] = field(default_factory=dict)


def add_fairness(model: "Formulation") -> None:
    """The fairness columns, rows and stages, when the snapshot's Configuration turns fair sharing on."""

    snapshot = model.snapshot
    if not snapshot.kueue_config.fair_sharing.enabled:
        return
    tree = model.quota_tree
    running = capacity.cluster_queue_usage(snapshot)
    members = [m for group in model.members for m in group]
    wanted: dict[str, dict[FlavorResource, float]] = defaultdict(lambda: defaultdict(float))
    for queue, used in running.items():
        for fr, amount in used.items():
            wanted[queue][fr] += amount
    for queue, asks in fair_share.pending_demand(snapshot, members).items():
        for fr, asked in asks.items():
            wanted[queue][fr] += asked
    goals = fair_share.targets(snapshot, tree, wanted)
    fair = Fairness(target_amounts={k: dict(v) for k, v in goals.items()})
    model.fairness = fair
    new_usage = queue_usage_terms(model)
    units = resource_units(model)
    arrays = model.arrays

    def usage_expr(queue: str, fr: FlavorResource) -> tuple[list[tuple[int, float]], float]:
        unit = units.get(fr[1], 1)
        terms = [(c, coef / unit) for c, coef in new_usage.get(queue, {}).get(fr, [])]
        constant = (running.get(queue, {}).get(fr, 0) - tree.subtree_quota(queue, fr)) / unit
        return terms, constant

    # the stages: each queue's fraction of its fair allocation of the measured resource
    ratios: list[tuple[int, float]] = []
    for queue in sorted(n for n in tree.nodes() if n.startswith("cq:") and tree.parent[n] is not None):
        measured = fair_share.measured_resource(fair_share.tree_frs(tree, tree.root_of(queue)))
        frs = [fr for fr in sorted(goals.get(queue, {})) if fr[1] == measured]
        goal = sum(goals[queue][fr] for fr in frs)
        if goal <= MIN_TARGET:
            continue
        unit = units.get(measured or "", 1)
        terms: list[tuple[int, float]] = []
        constant = 0.0
        for fr in frs:
            more, base = usage_expr(queue, fr)
            terms += more
            constant += base + tree.subtree_quota(queue, fr) / unit     # its whole use, not only above nominal
        x = goal / unit
        m = arrays.add_col(f"fair[{queue}]", 0.0, x)
        # m - usage terms <= constant: m is at most what q uses
        arrays.add_row(f"fair_used[{queue}]", [(m, 1.0)] + [(c, -v) for c, v in terms], -INF, constant)
        fair.shares.append((m, terms, constant, x))
        ratios.append((m, 1.0 / x))
    if fair.shares:
        t = fair.least = arrays.add_col("fair_least", 0.0, 1.0)
        for m, _, _, x in fair.shares:
            arrays.add_row(f"fair_least[{m}]", [(t, x), (m, -1.0)], -INF, 0.0)
        fair.stages = [FairStage("fair share: least", [(t, 1.0)], 1.0),
                       FairStage("fair share: total", ratios, float(len(ratios)))]
    add_strategy_rows(model, fair, usage_expr, units)


UsageExpr = Callable[[str, FlavorResource], tuple[list[tuple[int, float]], float]]


def add_strategy_rows(model: "Formulation", fair: Fairness, usage_expr: UsageExpr, units: dict[str, float]) -> None:
    """For every cross-queue eviction e[v] (v of queue Q, for queue P), Kueue's strategies on
    the plan's final shares, waived while P stays within its nominal quota (beta[P]):

        LessThanOrEqualToFinalShare:  S[P] - S[Q] <= M (1 - e[v]) + M beta[P]
        LessThanInitialShare (alone or second):
                                      S[P] - S[Q] <= d[v] - eps + M (1 - e[v]) + M beta[P]
        beta[P] = 1 only if S[P] <= 0

    d[v] is v's own share of Q: Kueue's incremental check removes victims one at a time,
    the last of them while Q's share is S[Q] + d[v] (S2-b: once), so "S[P] < share of Q
    before that removal" is S[P] < S[Q] + d[v]; asking it of every victim asks it of the last."""
    if not model.victims or model.preemption is None:
        return
    snapshot = model.snapshot
    tree = model.quota_tree
    strategies = snapshot.kueue_config.fair_sharing.preemption_strategies
    final_share = strategies == (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)
    rules = model.preemption
    classes = rules.classes([m for group in model.members for m in group])
    wide: dict[tuple[str | None, int], list[tuple[str, int, bool]]] = {}
    initial = fair_share.shares(snapshot, tree, capacity.cluster_queue_usage(snapshot))
    arithmetic = fair_share.Shares(tree, fair_share.weights_of(snapshot))
    columns: dict[str, tuple[int, float, float, str]] = {}     # queue -> (S column, scale, bound, resource)
    within: dict[str, int] = {}                                # queue -> beta column
    arrays = model.arrays

    def share_col(queue: str) -> tuple[int, float, float, str] | None:
        if queue in columns:
            return columns[queue]
        frs = fair_share.tree_frs(tree, tree.root_of(queue))
        resource = fair_share.measured_resource(frs)
        if resource is None:
            return None
        lend = arithmetic.lendable(tree.parent[queue] or queue).get(resource, 0)
        weight = fair_share.weight_of(snapshot, queue)
        if lend <= 0:
            return None
        unit = units.get(resource, 1)
        scale = 1000.0 * unit / lend / max(weight, 1e-3)
        terms: list[tuple[int, float]] = []
        constant = 0.0
        quota = 0.0
        for fr in frs:
            if fr[1] != resource:
                continue
            more, base = usage_expr(queue, fr)
            terms += more
            constant += base
            quota += tree.subtree_quota(tree.root_of(queue), fr) / unit
        s = arrays.add_col(f"fair_share[{queue}]", -INF, INF)
        arrays.add_row(f"fair_share[{queue}]", [(s, 1.0)] + [(c, -v * scale) for c, v in terms],
                       constant * scale, constant * scale)
        fair.measured.append((s, [(c, v * scale) for c, v in terms], constant * scale))
        columns[queue] = (s, scale, 2.0 * quota * scale + 1.0, resource)
        return columns[queue]

    def beta(queue: str, s: int, bound: float) -> int:
        if queue not in within:
            b = within[queue] = arrays.add_binary(f"fair_within[{queue}]")
            arrays.add_row(f"fair_within[{queue}]", [(s, 1.0), (b, bound)], -INF, bound)   # b = 1 -> S <= 0
            fair.within.append((b, s))
        return within[queue]

    for victim, e in zip(model.victims, model.evict_col):
        q_name = victim.cluster_queue or ""
        q = f"cq:{q_name}"
        if q not in tree.parent:
            continue
        preemptors = sorted({key[0] for key in rules.wide_classes(classes, victim, wide)} - {q_name})
        for p_name in preemptors:
            p = f"cq:{p_name}"
            if p not in tree.parent or tree.root_of(p) != tree.root_of(q):
                continue
            sp, sq = share_col(p), share_col(q)
            if sp is None or sq is None:
                continue
            s_p, _, bound_p, resource = sp
            s_q, scale_q, bound_q, _ = sq
            b = beta(p, s_p, bound_p)
            weight_p = fair_share.weight_of(snapshot, p)
            weight_q = fair_share.weight_of(snapshot, q)
            if weight_q == 0 and initial.get(q, fair_share.Share(0.0)).ratio > 0:
                continue                        # an infinite share may always be preempted
            big = bound_p + bound_q + 1.0
            if weight_p == 0:
                # weight 0 borrowing is an infinite share: only within nominal (beta) may it preempt
                arrays.add_row(f"fair_strategy[{p},{victim.ref}]", [(e, 1.0), (b, -1.0)], -INF, 0.0)
                continue
            slack = 0.0
            if not final_share:
                unit = units.get(resource, 1)
                own = sum(v for fr, v in capacity.quota_usage_of(victim).items() if fr[1] == resource) / unit
                slack = own * scale_q - EPSILON
            arrays.add_row(f"fair_strategy[{p},{victim.ref}]", [(s_p, 1.0), (s_q, -1.0), (e, big), (b, -big)],
                           -INF, big + slack)


def fill_fairness_columns(fair: "Fairness | None", values: np.ndarray) -> None:
    """The fairness columns that follow from the decisions in `values` (a start)."""
    if fair is None:
        return
    for s, terms, constant in fair.measured:
        values[s] = constant + sum(v * values[c] for c, v in terms)
    least = 1.0
    for m, terms, constant, x in fair.shares:
        borrowed = constant + sum(v * values[c] for c, v in terms)
        values[m] = min(max(borrowed, 0.0), x)
        least = min(least, values[m] / x)
    if fair.least is not None:
        values[fair.least] = max(0.0, least)
    for b, s in fair.within:
        values[b] = 1.0 if values[s] <= 1e-9 else 0.0
