"""Independent feasibility check of a plan's decisions against their snapshot.

`check(snapshot, decisions)` returns the violations as typed records (`Violation`:
the rule, the workloads, node, flavor and queue it names, and its sentence);
`verify(snapshot, decisions)` the same as sentences. An empty list means the plan is
valid. Every rule is re-derived here from the snapshot with small local functions:
this package must not import the code that makes plans
(planner.kueue.semantics, capacity, topology, greedy, formulate, solve), so a bug shared
by greedy and the MILP is still caught. Pure: no I/O. Indexes are built once, so
checking 20,000 workloads on 16,384 nodes stays well under a second or two.

Pre-existing overuse (running work alone already above a node's allocatable, or
above a quota limit) is not the plan's fault. For both node capacity and quota the
rule checked is therefore

    final(x) <= max(limit(x), base(x))

where `final` counts unmanaged pods + running workloads not evicted + this plan's
admissions and `base` counts the same without the admissions. Since `final` never
decreases when work is added, this says: either the limit holds after the plan, or
the admissions add nothing at all to that quantity (final == base).
For quota this equals admitting the plan's workloads one at a time with Kueue's
`available()`, in any order, where what a queue may take from its parent is never
negative (tests/test_verify.py checks both against a brute-force oracle).

Choices where the contract leaves room:
- namespaceSelector None selects no namespace (Kueue's LabelSelectorAsSelector(nil),
  and what the reader keeps for an absent field); {} selects every namespace.
- The quota tree holds active ClusterQueues only (quota and usage alike), as Kueue's
  scheduling snapshot does; cohorts named but not defined exist with no quota; a
  parentName cycle is cut, and admitting below it, or below an inactive cohort, is a
  violation.
- Only resources a ClusterQueue covers are quota usage; requesting an uncovered one
  other than `pods`, or giving a flavor to one, is a violation.
- Pod-set groups bind only members with mode "required" and a level; "preferred" and
  "unconstrained" impose nothing hard.
- A domain at a level is a node's values at that level and every level above, so rack
  "r1" in two blocks is two domains; the hostname level is the node's name.
- Minimum runtime is measured from `admitted_at`; work without it is not held back.
- Preemption is judged on base priorities (aging orders admissions, it grants no
  eviction rights). An eviction must name, in `for_`, at least one admission of this
  plan whose ClusterQueue's spec.preemption allows it; an eviction for nobody is a
  violation. "Borrowing" (for reclaimWithinCohort) is the victim's queue using more
  than its nominal quota of some flavor/resource before the plan, or with all of the
  plan's admissions made and none of its evictions (Kueue judges it when it preempts,
  and the plan's admissions may make a queue borrow). As in the
  project's semantics, borrowWithinCohort LowerPriority allows victims in any queue
  of the cohort tree below the preemptor's priority (and at most
  maxPriorityThreshold), without asking whether the preemptor itself borrows.
  Not checked: that a victim uses a flavor/resource or node its preemptor needs,
  and Kueue's "already evicted first" ordering (orderings are the planner's choice).
- waitForPodsReady evictions (PodsReadyTimeout, Deactivated) are for nobody and
  need no preemption right: only Kueue's condition at the planning time
  (preemption.py, re-derived here, not planner.cycle.podsready's), and the requeue they
  record must be the next count with its backoff (or a deactivation past the limit).
- Stability (nominal quota is a guarantee): stable.py, on its own.
- Migrations (defragmentation): moves.py, on its own; a moved workload then counts as
  evicted from its old place and admitted at its new one.
- Resizes of running elastic workloads: resize.py, `check_resizes`, on its own, against
  the snapshot as read (the cycle checks the rest on the snapshot planner.cycle.elastic
  expanded).

One module per rule family, all built on index.py (the snapshot's lookups, the cohort
tree, the small shared rules) and violation.py (the records), none importing another's
internals in a circle: placement.py (admission, gang, flavors, nodes, topology, node
capacity, provisioning checks), quota.py, preemption.py (what an eviction names,
Kueue's preemption policies, waitForPodsReady), moves.py, resize.py, stable.py, needed.py (an
eviction is needed by whom it is for; the policy's churn bounds), fair.py (fair
sharing), fleet.py (MultiKueue's fleet and manager quota); entries.py reads the plan
for the rules checked on their own. This module is the front door.
"""

from __future__ import annotations

from models import Decisions, Snapshot
from planner.verify.entries import with_migrations
from planner.verify.fair import check_fair_preemption, check_fair_shares
from planner.verify.fleet import check_fleet, verify_fleet
from planner.verify.index import SnapshotIndex, VerifierQuotaTree, selector_matches
from planner.verify.needed import check_needed, unneeded
from planner.verify.placement import check_admissions, check_node_capacity, check_provisioning
from planner.verify.preemption import check_evictions
from planner.verify.quota import check_quota, check_quota_fr
from planner.verify.resize import check_resizes
from planner.verify.stable import check_stability, stability_violations, unstable
from planner.verify.violation import Rule, Violation, messages

__all__ = [
    "Rule", "SnapshotIndex", "VerifierQuotaTree", "Violation", "check", "check_fleet", "check_quota_fr", "check_resizes",
    "messages",
    "selector_matches", "stability_violations", "unneeded", "unstable", "verify", "verify_fleet",
]


def check(snapshot: Snapshot, decisions: Decisions) -> list[Violation]:
    """All violations of `decisions` against `snapshot`, in a deterministic order."""
    ix = SnapshotIndex(snapshot)
    out: list[Violation] = []
    admitted = check_admissions(ix, decisions.admissions, out)
    check_provisioning(ix, decisions.admissions, out)
    evicted = check_evictions(ix, decisions.evictions, admitted, out)
    admitted, evicted = with_migrations(ix, decisions, admitted, evicted, out)
    check_node_capacity(ix, admitted, evicted, out)
    check_quota(ix, admitted, evicted, out)
    check_stability(ix, admitted, evicted, out)
    check_needed(ix, decisions, admitted, evicted, out)
    check_fair_preemption(ix, decisions, admitted, evicted, out)
    check_fair_shares(ix, decisions, admitted, evicted, out)
    return out


def verify(snapshot: Snapshot, decisions: Decisions) -> list[str]:
    """`check`'s violations as sentences (what the error output and the goldens show)."""
    return messages(check(snapshot, decisions))
