"""Issue 32's family targets, as properties, on many tiny members (fast; no timing).

For each member of the generated family (planner/tools/family.py) at the tiny scale
(32 nodes, 40 pending + 60 running workloads; every other shape parameter drawn from
the seed): greedy's plan (Kueue's way) passes the independent verifier, and the plan
the cycle returns with the MILP passes it too and serves at least greedy's volume at
the first priority where the two differ (planner.cycle.tiers.compare, as the goldens do).
`plan_snapshot` raises VerificationError when the plan it would return breaks a rule.

The seeds were never used to tune the planner. A seed that fails today is kept and
marked xfail(strict=True) with its violation: when a fix makes it pass, the strict
mark fails and must be removed, so the list shrinks as greedy and the MILP improve.
"""

from __future__ import annotations

import pytest

from models import Decisions
from planner.cycle import tiers
from planner.base.solve_options import SolveOptions
from planner.cycle import plan_snapshot
from planner.greedy import greedy
from planner.snapshot import build_snapshot
from planner.tools import generate as g
from planner.tools.family import describe, family

# 5000-5079: drawn for this test; 915 and 934: failures found by a wider probe of
# seeds 900-969 (no one tuned on either range), kept as known cases.
SEEDS = (*range(5000, 5080), 915, 934)
# Far above what a tiny member needs, so that only a machine stalled for that long
# could cut a search short (no result here depends on speed).
TIME_LIMIT = 60.0

# seed -> the violation seen (VerificationError's first violation, or the tiers compared)
GREEDY_FAILS: dict[int, str] = {
    5046: "greedy leaves Job/team-ads/ads-sweep-00084 (priority 10, elastic 4x1 GPU sweep) waiting though it "
          "fits team-ads-cq's nominal quota and reclaiming what its cohort borrows (recsys-train-00097, "
          "ads-notebook-00028, speech-embed-00100, vision-sweep-00104) would let it run: Kueue would reclaim",
    934: "greedy leaves Job/team-llm/llm-ablation-00083 (priority 10, 1 GPU) waiting though it fits "
         "team-llm-cq's nominal quota and reclaiming what its cohort borrows (multimodal-hpo-00088, admitted by "
         "greedy) would let it run: Kueue would reclaim",
}
# Kueue decides each preemption in its own cycle; with BestEffortFIFO a lower-priority
# job of the preemptor's queue can be admitted first (the preemptor was inadmissible
# then) and a later eviction can free room the preemptor ends up using. The verifier
# judges the end state (planner/verify/needed.py) and refuses these four of Kueue's
# plans as evicting work nobody needed.
_NEEDED = ("the needed-eviction rule refuses Kueue's sequence: {victim} evicted for {queue} work that, with every "
           "victim kept and the lower work of the preemptor's queue out, still fits")
GREEDY_FAILS.update({
    5007: _NEEDED.format(victim="recsys-2-notebook-00027", queue="team-agents and others'"),
    5019: _NEEDED.format(victim="recsys-ablation-00018 (and 2 more)", queue="team-recsys"),
    5058: _NEEDED.format(victim="JobSet llm-rlhf-00002", queue="team-llm (equal priority, newer)"),
    5062: _NEEDED.format(victim="research-embed-00028 (and 2 more)", queue="team-infra and team-llm"),
})
MILP_FAILS: dict[int, str] = {}


def member(seed: int):
    return build_snapshot([g.generate(family(seed, "tiny"))], source=f"family-{seed}-tiny")


def cases(known: dict[int, str]) -> list:
    return [pytest.param(seed, id=str(seed),
                         marks=[pytest.mark.xfail(strict=True, reason=known[seed])] if seed in known else [])
            for seed in SEEDS]


@pytest.mark.parametrize("seed", cases(GREEDY_FAILS))
def test_greedy_plan_of_every_member_verifies(seed):
    plan = plan_snapshot(member(seed), SolveOptions(solver="greedy"))   # raises VerificationError if it breaks a rule
    assert plan.solver.method == "greedy", describe(family(seed, "tiny"))


@pytest.mark.parametrize("seed", cases(MILP_FAILS))
def test_milp_plan_of_every_member_verifies_and_serves_at_least_greedy(seed):
    snapshot = member(seed)
    plan = plan_snapshot(snapshot, SolveOptions(time_limit=TIME_LIMIT))  # raises VerificationError if it breaks a rule
    mine = tiers.tier_volumes(snapshot, Decisions(plan.admissions, plan.evictions))
    kueue = tiers.tier_volumes(snapshot, greedy(snapshot).decisions)
    assert tiers.compare(mine, kueue) >= 0, (describe(family(seed, "tiny")), plan.solver.status, mine, kueue)
