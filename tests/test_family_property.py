"""Issue 32's family targets, as properties, on many tiny members (fast; no timing).

For each member of the generated family (planner/tools/family.py) at the tiny scale
(32 nodes, 40 pending + 60 running workloads; every other shape parameter drawn from
the seed): greedy's plan (Kueue's way) passes the independent verifier, and the plan
the cycle returns with the MILP passes it too and serves at least greedy's volume at
the first priority where the two differ (planner.tiers.compare, as the goldens do).
`plan_snapshot` raises VerificationError when the plan it would return breaks a rule.

The seeds were never used to tune the planner. A seed that fails today is kept and
marked xfail(strict=True) with its violation: when a fix makes it pass, the strict
mark fails and must be removed, so the list shrinks as greedy and the MILP improve.
"""

from __future__ import annotations

import pytest

from models import Decisions
from planner import tiers
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
MILP_FAILS: dict[int, str] = {}


def member(seed: int):
    return build_snapshot([g.generate(family(seed, "tiny"))], source=f"family-{seed}-tiny")


def cases(known: dict[int, str]) -> list:
    return [pytest.param(seed, id=str(seed),
                         marks=[pytest.mark.xfail(strict=True, reason=known[seed])] if seed in known else [])
            for seed in SEEDS]


@pytest.mark.parametrize("seed", cases(GREEDY_FAILS))
def test_greedy_plan_of_every_member_verifies(seed):
    plan = plan_snapshot(member(seed), solver="greedy")       # raises VerificationError if it breaks a rule
    assert plan.solver.method == "greedy", describe(family(seed, "tiny"))


@pytest.mark.parametrize("seed", cases(MILP_FAILS))
def test_milp_plan_of_every_member_verifies_and_serves_at_least_greedy(seed):
    snapshot = member(seed)
    plan = plan_snapshot(snapshot, time_limit=TIME_LIMIT)     # raises VerificationError if it breaks a rule
    mine = tiers.tier_volumes(snapshot, Decisions(plan.admissions, plan.evictions))
    kueue = tiers.tier_volumes(snapshot, greedy(snapshot).decisions)
    assert tiers.compare(mine, kueue) >= 0, (describe(family(seed, "tiny")), plan.solver.status, mine, kueue)
