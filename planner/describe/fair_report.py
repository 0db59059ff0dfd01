"""The plan's fair-sharing report: each queue's dominant resource share and its target.

Pure: no I/O, no solver. Only when Kueue's Configuration turns fair sharing on; the
summary then holds, under `fair_sharing`:

    strategies: [LessThanOrEqualToFinalShare, ...]
    queues:
      team-a: {weight: 1, share: 250, target: 250, resource: nvidia.com/gpu, used: 8, fair: 8, over_fair: 0}

`share` is Kueue's weighted DRS after the plan (planner.kueue.shares.shares: per
mille of the parent's lendable quantity of the dominant resource above the queue's
nominal, over its weight; `null` for a weight-0 queue that borrows: infinite);
`target` the same share of the fair allocation (planner.kueue.shares.targets, over
what each queue wants: running plus admissible pending work) on the tree's measured
resource, the one the plan aims at. `used` and `fair` are
the queue's quota use after the plan and in the fair allocation, of the tree's
measured resource (its GPUs where it has any), summed over flavors; `over_fair` = used - fair.
Only ClusterQueues in a cohort are listed.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Any

from models import Decisions, FlavorResource, Snapshot
from planner.kueue import capacity
from planner.kueue import shares as fair_share
from planner.kueue.semantics import QuotaTree

KEY = "fair_sharing"


def _num(value: float) -> int | float:
    rounded = round(float(value), 3) + 0.0
    return int(rounded) if rounded.is_integer() else rounded


def usage_after(snapshot: Snapshot, decisions: Decisions) -> dict[str, dict[FlavorResource, float]]:
    """Quota use per cq:NAME after the plan: running work not evicted, plus the admissions."""
    evicted = {e.workload for e in decisions.evictions}
    out: dict[str, dict[FlavorResource, float]] = defaultdict(lambda: defaultdict(float))
    for queue, table in capacity.cluster_queue_usage(snapshot, evicted).items():
        for fr, amount in table.items():
            out[queue][fr] += amount
    by_ref = {w.ref: w for w in snapshot.workloads}
    for admission in decisions.admissions:
        workload = by_ref.get(admission.workload)
        if workload is None:
            continue
        placed = dataclasses.replace(workload, assignment=admission.pod_sets)
        for fr, amount in capacity.quota_usage_of(placed).items():
            out[f"cq:{admission.cluster_queue}"][fr] += amount
    return out


def report(snapshot: Snapshot, decisions: Decisions) -> dict[str, Any] | None:
    """The `fair_sharing` block, or None when fair sharing is off."""
    config = snapshot.kueue_config.fair_sharing
    if not config.enabled:
        return None
    tree = QuotaTree(snapshot)
    after = usage_after(snapshot, decisions)
    shares_after = fair_share.shares(snapshot, tree, after)
    goals = fair_share.targets(snapshot, tree, fair_share.demand(snapshot))
    # the target on the measured resource only: the fair allocation is aimed at on it alone
    resource_of = {k: fair_share.measured_resource(fair_share.tree_frs(tree, tree.root_of(k)))
                   for k in goals if k.startswith("cq:")}
    aimed = {k: {fr: v for fr, v in goals[k].items() if fr[1] == resource} for k, resource in resource_of.items()}
    fair_shares = fair_share.shares(snapshot, tree, aimed)
    queues: dict[str, Any] = {}
    for node in sorted(n for n in tree.nodes() if n.startswith("cq:") and tree.parent[n] is not None):
        resource = fair_share.measured_resource(fair_share.tree_frs(tree, tree.root_of(node)))
        unit = 1000.0 if resource == "cpu" else 1.0
        used = sum(v for fr, v in after.get(node, {}).items() if fr[1] == resource) / unit
        fair = sum(v for fr, v in goals.get(node, {}).items() if fr[1] == resource) / unit
        share = shares_after[node].weighted
        target = fair_shares[node].weighted
        queues[node[3:]] = {
            "weight": _num(shares_after[node].weight),
            "share": None if math.isinf(share) else _num(share),
            "target": None if math.isinf(target) else _num(target),
            "resource": resource or "",
            "used": _num(used),
            "fair": _num(fair),
            "over_fair": _num(used - fair),
        }
    return {"strategies": list(config.preemption_strategies), "queues": queues}


def table_lines(summary: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    """For the table output: per queue weight, share and target, used and fair, and greedy's share beside."""
    block = summary.get(KEY)
    if not isinstance(block, dict):
        return []
    theirs = (baseline or {}).get(KEY, {}) or {}
    rows = [("QUEUE", "WEIGHT", "SHARE", "TARGET", "USED", "FAIR", "OVER FAIR", "KUEUE SHARE")]
    for name, q in block["queues"].items():
        kueue = theirs.get(name) if isinstance(theirs, dict) else None
        rows.append((name, _text(q["weight"]), _text(q["share"]), _text(q["target"]), _text(q["used"]),
                     _text(q["fair"]), _text(q["over_fair"]), "-" if kueue is None else _text(kueue)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"Fair sharing (dominant resource share per mille / weight; {', '.join(block['strategies'])}):"]
    for row in rows:
        lines.append("  " + "  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]))
    return lines


def _text(value: Any) -> str:
    if value is None:
        return "inf"
    return f"{float(value):g}"
