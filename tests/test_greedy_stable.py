"""Greedy's plans pass the independent verifier, the stability rule included
(REFERENCE §3: nominal quota is a guarantee), wherever the tests and benchmarks use
greedy: the seeds of tests/test_property.py and of tests/test_verify.py's greedy test,
every fixture, and a generated S snapshot. And the two ways greedy's end state parts
from a plain replay of Kueue's cycles (planner.greedy.KueueCycles): running work whose
eviction the end state cannot support is protected in a second replay, and a
preemptor never evicts twice the workload that took its room back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import cohort, cq, flavor, job, node, running_job, snapshot
from randomgen import random_snapshot
from planner.tools.generate import generate, preset, to_json
from planner.greedy import KueueCycles, greedy
from planner.snapshot import read_snapshot
from planner.verify import verify

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SNAPSHOTS = sorted(p for p in FIXTURES.glob("*.yaml") if not p.name.endswith(".plan.yaml")) + \
    sorted(FIXTURES.glob("*.json"))

def cases():
    out = []
    out += [("quota", seed, {}) for seed in range(150)]
    out += [("topology", 10_000 + seed, {"with_topology": True}) for seed in range(100)]
    out += [("property-running", 20_000 + seed, {"with_running": True, "with_topology": seed % 2 == 0})
            for seed in range(50)]
    out += [("running+topology", seed, {"with_running": True, "with_topology": True}) for seed in range(40)]
    return [pytest.param(kind, seed, kw, id=f"{kind}-{seed}") for kind, seed, kw in out]


@pytest.mark.parametrize(("kind", "seed", "kw"), cases())
def test_greedy_plan_passes_verify_on_random_snapshots(kind, seed, kw):
    snap = random_snapshot(seed, **kw)
    assert verify(snap, greedy(snap).decisions) == []


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_greedy_plan_passes_verify_on_every_fixture(path):
    snap = read_snapshot([str(path)])
    assert verify(snap, greedy(snap).decisions) == []


def test_greedy_plan_passes_verify_on_a_generated_s_snapshot(tmp_path):
    out = tmp_path / "s.json"
    out.write_text(to_json(generate(preset("S"))))   # `stowplan generate --preset S`
    snap = read_snapshot([str(out)])
    decisions = greedy(snap).decisions
    assert decisions.admissions and decisions.evictions
    assert verify(snap, decisions) == []


@pytest.mark.parametrize("seed", [9])
def test_greedy_plan_passes_verify_with_rack_jobs_waiting_behind_its_own_borrowers(tmp_path, seed):
    """A block/rack/host cluster, 8 teams in one cohort with borrowing limits, priorities
    100 / 1,000 / 10,000, every multi-node job rack- or block-required (a user's shape,
    reduced). Greedy's replay admits many borrowers of one priority over many cycles;
    a rack job of a lending queue then waits, as reclaim in the order Kueue admitted them
    (most recent first) frees no whole rack. The verifier once ordered this plan's own
    admissions by UID instead, found a rack there and refused Kueue's own end state."""
    spec = preset("S", seed=seed, fanout=(4, 8, 16), teams=8, pending=400, running=400,
                  priorities=(("low", 100, 0.5), ("mid", 1000, 0.35), ("high", 10000, 0.15)),
                  borrowing_share=1.0, required_share=1.0)
    out = tmp_path / "shape.json"
    out.write_text(to_json(generate(spec)))
    snap = read_snapshot([str(out)])
    assert verify(snap, greedy(snap).decisions) == []


def test_an_eviction_the_end_state_cannot_support_protects_its_victim():
    """Seed 100 (running work): Kueue's replay has team-d's train-0 reclaim team-c's
    run-0, and train-0 then loses its room to other heads and is never admitted; no
    admission of the plan may reclaim run-0 instead (the other queues' policies do not
    allow it). The second replay protects run-0 from reclaim; its own queue's train-5
    (priority 1000, withinClusterQueue LowerPriority) still preempts it there."""
    snap = random_snapshot(100, with_running=True)
    first = KueueCycles(snap)
    plain = first.run().decisions
    assert {str(r): kind for r, kind in first.unsupported.items()} == {"Job/team-c/run-0": "reclaim"}
    assert any(e.workload.name == "run-0" and e.reason == "Reclaimed" for e in plain.evictions)
    assert verify(snap, plain) != []
    decisions = greedy(snap).decisions
    assert {(str(e.workload), e.reason, tuple(str(f) for f in e.for_)) for e in decisions.evictions} == \
        {("Job/team-c/run-0", "Preempted", ("Job/team-c/train-5",))}
    assert verify(snap, decisions) == []


def test_a_preemptor_does_not_evict_twice_what_took_its_room_back():
    """Queues s and s2 share cohort org-3 under org (each lends half its nominal 4 cpu);
    o lends 4 at org. s already uses its 4, so "v" (s, 1 cpu) borrows within org-3
    (height 1) and "p" (s2, 3 cpu, priority 100) borrows from org (height 2). Cycle 1
    admits "v" first, and "p" no longer fits; cycle 2, "p" reclaims "v" (s borrows;
    borrowWithinCohort LowerPriority). Cycle 3, "v" is pending again, comes first (it
    borrows less high) and takes its room back, and "p" no longer fits: Kueue's loop
    would go round for ever (greedy's guard stops it after 300 cycles, "v" out). Greedy
    sets "p" aside instead of evicting "v" twice: "v" keeps running."""
    policy = dict(within="LowerPriority", reclaim="Any", borrow_within="LowerPriority")
    snap = snapshot(
        nodes=[node("n", cpu="64", memory="64Gi", pods=100)], flavors=[flavor("default")],
        cohorts=[cohort("org"), cohort("org-3", parent="org")],
        cqs=[cq("s", cohort="org-3", quotas={"default": {"cpu": (4, None, 2)}}, **policy),
             cq("s2", cohort="org-3", quotas={"default": {"cpu": (4, None, 2)}}, **policy),
             cq("o", cohort="org", quotas={"default": {"cpu": 4}}, **policy)],
        workloads=[running_job("one", "rs", cq="s", cpu="4", memory=0, priority=200, nodes={"n": 1}, flavors="default"),
                   running_job("two", "rs2", cq="s2", cpu="2", memory=0, priority=200, nodes={"n": 1},
                               flavors="default"),
                   running_job("three", "ro", cq="o", cpu="3", memory=0, priority=200, nodes={"n": 1},
                               flavors="default"),
                   job("one", "v", cq="s", cpu="1", memory=0, priority=0),
                   job("two", "p", cq="s2", cpu="3", memory=0, priority=100)])
    cycles = KueueCycles(snap)
    for _ in range(3):
        cycles.step()
    assert {r.name for r in cycles.admitted} == {"v"}
    assert {(p.name, v.name) for p, v in cycles.taken_back} == {("p", "v")}
    result = cycles.run()
    assert [a.workload.name for a in result.decisions.admissions] == ["v"]
    assert not result.decisions.evictions
    assert cycles.cycle < 10
    assert verify(snap, result.decisions) == []
