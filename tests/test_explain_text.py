"""`explain` as people read it (issue 39): no placeholders, no empty headings, quota that
says whose it is, no `<- short` where quota is not the blocker, trials that read as an
answer, and a LeaderWorkerSet's name that leads to its groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import ObjectRef, Snapshot, Workload
from planner.cycle import explain_one
from planner.base.solve_options import SolveOptions
from planner.snapshot import read_snapshot
from planner.describe.explain import Change, Explanation, QuotaFact, UnknownWorkload, as_dict, find_workload, lines, tried_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def multi_team():
    return read_snapshot([str(FIXTURES / "multi-team-gpu.yaml")])


def explained(snapshot, name: str) -> Explanation:
    return explain_one(snapshot, name, SolveOptions(solver="greedy"), search_time_limit=2.0)


def test_a_node_selector_blocker_marks_no_quota_short_and_tries_nothing(multi_team) -> None:
    e = explained(multi_team, "team-vision/vision-l4-bench")
    text = lines(e)
    assert e.blocker and "node selector" in e.reason
    assert not any("<- short" in line for line in text)
    assert "  quota (after the plan): not what keeps it waiting:" in text
    assert not any("changes tried" in line for line in text)          # no heading over nothing
    assert not any("+?" in line for line in text)
    assert not any(q["short"] for q in as_dict(e)["quota"])           # type: ignore[index]


def test_available_says_what_is_its_own_and_what_the_cohort_lends(multi_team) -> None:
    e = explained(multi_team, "team-vision/vision-l4-bench")
    cpu = next(q for q in e.quota if q.resource == "cpu")
    assert 0 < cpu.own < cpu.available and cpu.own == cpu.nominal - cpu.used
    line = next(line for line in lines(e) if "default-flavor/cpu" in line)
    assert (f"available {cpu.available // 1000} ({cpu.own // 1000} its own, {(cpu.available - cpu.own) // 1000} "
            "lent by the cohort)") in line                                   # millicores, shown in cores
    data = next(q for q in as_dict(e)["quota"] if q["resource"] == "cpu")  # type: ignore[union-attr]
    assert data["availableOwn"] == cpu.own and data["availableFromCohort"] == cpu.available - cpu.own


def test_nodes_that_admit_nothing_say_how_many_were_tried_not_a_placeholder() -> None:
    base = Explanation(ObjectRef("Job", "ns", "j"), "cq", "lq", 0, "waiting", "short", "milp optimal",
                       quota=(QuotaFact("h100", "nvidia.com/gpu", 8, None, 8, 0, 4),),
                       changes=(Change("nodes", "cq", template="h100-node-01", tried=((3, False), (6, False))),))
    text = "\n".join(lines(base))
    assert "+?" not in text and "node(s)" not in text
    assert "[nodes] up to +6 nodes like h100-node-01: none admits, up to 6 nodes (tried 3, 6)" in text
    assert "<- short" in text                                          # quota is the blocker here


@pytest.mark.parametrize("tried, text", [
    (((1, False), (2, False), (3, False), (4, True), (24, True)), "admits from 4 pods' worth, not 3 (tried 1, 2, 3, 4, 24)"),
    (((1, True),), "admits from 1 pod's worth (tried 1)"),
    (((8, False), (4, False)), "none admits, up to 8 pods' worth (tried 4, 8)"),
])
def test_trials_read_as_an_answer(tried, text) -> None:
    assert tried_text(tried, ("pod's worth", "pods' worth")) == text


def test_a_leaderworkerset_name_leads_to_its_groups() -> None:
    groups = tuple(Workload(ObjectRef("LeaderWorkerSet", "serve", f"llm-{i}"), "lq", ()) for i in (0, 1, 10, 2))
    snapshot = Snapshot(workloads=groups + (Workload(ObjectRef("Job", "serve", "llm-x"), "lq", ()),))
    with pytest.raises(UnknownWorkload, match=r"its groups are: serve/llm-0, serve/llm-1, serve/llm-2, serve/llm-10"):
        find_workload(snapshot, "serve/llm")
    with pytest.raises(UnknownWorkload, match=r"is not in the snapshot$"):
        find_workload(snapshot, "serve/other")
