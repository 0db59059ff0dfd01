"""planner.bound: the small relaxation's per-tier bounds must hold for every plan the
model allows (never below what a real plan achieves) and be tight where capacity,
quota or an impossible topology request is what limits a tier."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from builders import GPU, ago, cq, flavor, job, lq, node, required, running_job, snapshot, topology
from randomgen import random_snapshot
from models import HOSTNAME_LABEL, Decisions
from planner.bound import tier_bounds
from planner.formulate import formulate
from planner.greedy import greedy
from planner.improve import improve
from planner.pipeline import plan_snapshot
from planner.snapshot import read_snapshot
from planner.solve import value_of
from planner.warmstart import start_from

RACK = "cloud.provider.com/topology-rack"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def achieved(form, decisions):
    values = start_from(form, decisions)
    assert values is not None
    return {t: value_of(form.tier_volume[t], values) for t in form.tiers}


def assert_bounds_hold(form, decisions):
    reached = achieved(form, decisions)
    bounds = tier_bounds(form, reached, form.tiers)
    assert set(bounds) == set(form.tiers)
    for tier in form.tiers:
        assert bounds[tier] >= reached[tier] - 1e-6, (tier, bounds, reached)
        assert bounds[tier] <= form.tier_max[tier] + 1e-3 or form.tier_max[tier] == 0


@pytest.mark.parametrize("seed", range(40))
def test_no_plan_beats_the_bound(seed):
    """Greedy's, the improved start's and the MILP's plans all lie under the bounds,
    each with the tiers above held at what that plan achieves."""
    snap = random_snapshot(40_000 + seed, with_running=seed % 2 == 0, with_topology=seed % 3 != 0)
    form = formulate(snap, locality=False)
    base = greedy(snap).decisions
    plan = plan_snapshot(snap, time_limit=10)
    for decisions in (base, improve(snap, base), Decisions(plan.admissions, plan.evictions)):
        assert_bounds_hold(form, decisions)


def test_capacity_bounds_a_tier_exactly():
    """8 GPUs, three 4-GPU jobs: no plan serves more than 8, and the bound says so."""
    snap = snapshot(nodes=[node("n1", gpu=4), node("n2", gpu=4)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 100, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[job("t", f"j{i}", pods=4, gpu=1, priority=10) for i in range(3)])
    form = formulate(snap, locality=False)
    assert form.tier_max[10] == 12
    assert tier_bounds(form, {}, [10])[10] == pytest.approx(8.0, abs=1e-4)


def test_quota_bounds_a_tier_exactly():
    snap = snapshot(nodes=[node("n1", gpu=8)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 3, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[job("t", f"j{i}", pods=1, gpu=1, priority=10) for i in range(6)])
    form = formulate(snap, locality=False)
    assert tier_bounds(form, {}, [10])[10] == pytest.approx(3.0, abs=1e-4)


def test_a_job_no_rack_can_hold_counts_for_nothing():
    """A required-rack job larger than every rack cannot be admitted: it adds nothing to
    the bound, though the cluster as a whole has room for it."""
    nodes = [node(f"{r}-n{i}", gpu=4, labels={RACK: r}) for r in ("r1", "r2") for i in (0, 1)]
    snap = snapshot(nodes=nodes, flavors=[flavor("default", topology="topo")],
                    topologies=[topology("topo", RACK, HOSTNAME_LABEL)],
                    cqs=[cq("cq", quotas={"default": {GPU: 100, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[job("t", "huge", pods=12, gpu=1, priority=10, topology=required(RACK)),
                               job("t", "small", pods=2, gpu=1, priority=10)])
    form = formulate(snap, locality=False)
    assert tier_bounds(form, {}, [10])[10] == pytest.approx(2.0, abs=1e-4)


def test_a_cut_short_stage_is_proven_by_the_relaxation():
    """With no time to solve, the stage keeps the start; the relaxation's bound meets it
    (capacity is what limits the tier), so the plan is honestly optimal."""
    snap = snapshot(nodes=[node("n1", gpu=4), node("n2", gpu=4)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 100, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[job("t", f"j{i}", pods=4, gpu=1, priority=10) for i in range(3)])
    plan = plan_snapshot(snap, time_limit=0.001)
    (stage,) = [s for s in plan.solver.stages if s["stage"] == "priority 10"]
    assert stage["objective"] == 8.0 and stage["bound"] == pytest.approx(8.0, abs=1e-4)
    assert stage["status"] == "optimal"


def test_evictions_give_their_room_to_the_bound():
    """The only room is a lower-priority job's: the bound counts what evicting it frees."""
    snap = snapshot(nodes=[node("n1", gpu=4)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 100, "cpu": 100, "memory": "1Ti"}}, within="LowerPriority")],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[running_job("t", "low", nodes={"n1": 4}, gpu=1, priority=0, admitted=ago(hours=3)),
                               job("t", "high", pods=4, gpu=1, priority=10)])
    form = formulate(snap, locality=False)
    assert tier_bounds(form, {}, [10])[10] == pytest.approx(4.0, abs=1e-4)
    plan = plan_snapshot(snap)
    assert [e.workload.name for e in plan.evictions] == ["low"]
    assert_bounds_hold(form, Decisions(plan.admissions, plan.evictions))


def test_free_gpus_scattered_over_nodes_hold_fewer_whole_node_pods():
    """Two 16-GPU nodes with 6 GPUs each taken by work nothing may evict: 20 GPUs are
    free, but each node holds one 8-GPU pod, so of three such jobs the bound admits two
    (16 GPUs), not two and a half (20)."""
    snap = snapshot(nodes=[node("n1", gpu=16), node("n2", gpu=16)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 100, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[running_job("t", "a", nodes={"n1": 1}, gpu=6, priority=50, admitted=ago(hours=1)),
                               running_job("t", "b", nodes={"n2": 1}, gpu=6, priority=50, admitted=ago(hours=1)),
                               *(job("t", f"whole-{i}", pods=1, gpu=8, priority=10) for i in range(3))])
    form = formulate(snap, locality=False)
    assert tier_bounds(form, {50: 12.0}, [10])[10] == pytest.approx(16.0, abs=1e-4)


@pytest.mark.parametrize("name", ["nvl72.json", "four-level.json", "hierarchical-cohorts.yaml", "multi-team-gpu.yaml"])
def test_no_fixture_plan_beats_the_bound(name):
    """The fixtures have slices, pod-set groups, preferred levels and cohorts of cohorts."""
    snap = read_snapshot([FIXTURES / name])
    form = formulate(snap, locality=False)
    base = greedy(snap).decisions
    for decisions in (base, improve(snap, base)):
        assert_bounds_hold(form, decisions)


def test_the_relaxation_and_the_milp_run_in_one_process():
    """HiGHS sizes one thread scheduler per process at its first run and refuses any
    instance asking for another size: the relaxation's LP, run first in a fresh
    process, must leave the MILP stages able to run (both use the policy's threads)."""
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from builders import GPU, cq, flavor, job, lq, node, snapshot
        from planner.bound import tier_bounds
        from planner.formulate import formulate
        from planner.run import make_backend
        from planner.warmstart import empty_start
        snap = snapshot(nodes=[node("n1", gpu=4)], flavors=[flavor("default")],
                        cqs=[cq("cq", quotas={"default": {GPU: 8, "cpu": 100, "memory": "1Ti"}})],
                        lqs=[lq("t", "lq", "cq")], workloads=[job("t", "j", pods=2, gpu=1, priority=1)])
        form = formulate(snap, locality=False)
        assert tier_bounds(form, {}, form.tiers), "the LP ran"
        backend = make_backend(form, "milp", snap)
        backend.set_objective(form.tier_volume[1], maximize=True)
        values, status, bound = backend.run(10, 0.0, empty_start(form))
        print(status, bound)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["optimal", "2.0"], done.stdout
