"""Kueue's preemption: who may evict whom, and which admitted workloads to evict.

  preemptor   Preemptor: greedy's preemptor over one ClusterState and Registry, for
              the flavor assigner (planner.kueue.assigner): targets for an assignment
              (Kueue's GetTargets), the oracle, the bound a search cannot beat
  search      one classical search (preemptionCtx, candidateIterator), over each
              queue's admitted workloads as arrays (QueueView)
  fair        fair-sharing preemption's candidates and targets (planner.kueue.fairsharing
              holds the share arithmetic it runs)
  victims     the victim-search primitives (minimal_victims, first_fitting_prefix,
              put_back), who may evict whom in a snapshot (PreemptionRules, the MILP's
              and the continuation's)
  after_plan  AfterPlan: greedy's search asked about the cluster a plan leaves, for the
              plan's pending reasons and explain (one search: they say what greedy does)

This module holds what they all return: a `Target` and its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.kueue.registry import Admitted
from planner.kueue.semantics import PREEMPTED as PREEMPTED, RECLAIMED as RECLAIMED


@dataclass
class Target:
    """An admitted workload a preemptor evicts, and why."""

    admitted: Admitted
    reason: str          # PREEMPTED (its own queue's) | RECLAIMED (another queue's of its cohort tree)
