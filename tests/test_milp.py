"""Hand-computed cases for the MILP pipeline (greedy start, solve, decode, verify)."""

import pytest

from builders import (
    GPU, NOW, ago, cq, flavor, job, lq, node, pod_set, preferred, required, sliced, snapshot,
    topology, workload,
)
from generated import small_cluster
from models import ObjectRef, Policy
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.verify import verify
from models import Decisions

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
HOST = "kubernetes.io/hostname"


def one_queue(nodes, workloads, gpus=64, flavors=None, quotas=None, **kw):
    return snapshot(
        nodes=nodes,
        flavors=flavors or [flavor("default")],
        cqs=[cq("cq", quotas=quotas or {"default": {GPU: gpus, "cpu": 1000, "memory": "4Ti"}})],
        lqs=[lq("team", "lq", "cq")],
        workloads=workloads,
        **kw,
    )


def admitted(plan):
    return {a.workload.name: a for a in plan.admissions}


def old_six_and_two_fours():
    """8 GPUs free; at equal priority, the oldest Job wants 6 and two newer ones 4 each."""
    return one_queue(
        [node("n1", gpu=8)],
        [job("team", "old-6", pods=6, gpu=1, created=ago(hours=3)),
         job("team", "new-4a", pods=4, gpu=1, created=ago(hours=2)),
         job("team", "new-4b", pods=4, gpu=1, created=ago(hours=1))],
    )


def test_more_volume_beats_the_older_head_at_equal_priority():
    # 8 GPUs free. Greedy takes the oldest (6 GPUs) and then nothing else fits;
    # volume comes before age, so the plan takes the two 4-GPU jobs (8 GPUs).
    snap = old_six_and_two_fours()
    greedy_plan = plan_snapshot(snap, SolveOptions(solver="greedy"))
    assert set(admitted(greedy_plan)) == {"old-6"}
    plan = plan_snapshot(snap)
    assert set(admitted(plan)) == {"new-4a", "new-4b"}
    assert plan.solver.status == "optimal"
    assert plan.solver.objective == 8.0
    assert {p.workload.name for p in plan.pending} == {"old-6"}


def test_priority_comes_before_volume():
    # A 2-GPU job of priority 100 is admitted even though two 4-GPU jobs of
    # priority 0 would fill the node.
    snap = one_queue(
        [node("n1", gpu=8)],
        [job("team", "hi-2", pods=2, gpu=1, priority=100),
         job("team", "lo-4a", pods=4, gpu=1), job("team", "lo-4b", pods=4, gpu=1)],
    )
    plan = plan_snapshot(snap)
    names = set(admitted(plan))
    assert "hi-2" in names and len(names) == 2


def test_age_breaks_ties_between_equal_jobs():
    snap = one_queue(
        [node("n1", gpu=4)],
        [job("team", "younger", pods=4, gpu=1, created=ago(minutes=5)),
         job("team", "older", pods=4, gpu=1, created=ago(minutes=50))],
    )
    assert set(admitted(plan_snapshot(snap))) == {"older"}


def test_earlier_flavor_is_preferred_when_both_fit():
    snap = one_queue(
        [node("a1", gpu=4, labels={"gpu-type": "a100"}), node("h1", gpu=4, labels={"gpu-type": "h100"})],
        [job("team", "j", pods=2, gpu=1)],
        flavors=[flavor("a100", node_labels={"gpu-type": "a100"}), flavor("h100", node_labels={"gpu-type": "h100"})],
        quotas={"h100": {GPU: 8, "cpu": 100, "memory": "1Ti"}, "a100": {GPU: 8, "cpu": 100, "memory": "1Ti"}},
    )
    plan = plan_snapshot(snap)
    (ps,) = admitted(plan)["j"].pod_sets
    assert ps.flavors[GPU] == "h100"  # h100 is listed first in the queue
    assert ps.domains == ((("h1",), 2),)


def test_elastic_job_gets_the_largest_count_that_fits():
    snap = one_queue([node("n1", gpu=5)], [job("team", "elastic", pods=8, min_pods=2, gpu=1)])
    (ps,) = admitted(plan_snapshot(snap))["elastic"].pod_sets
    assert ps.count == 5


def test_elastic_job_below_its_minimum_waits():
    snap = one_queue([node("n1", gpu=1)], [job("team", "elastic", pods=8, min_pods=2, gpu=1)])
    plan = plan_snapshot(snap)
    assert not plan.admissions and plan.pending[0].workload.name == "elastic"


def test_gang_places_every_pod_set_or_none():
    launcher = pod_set("launcher", 1, cpu="2")
    workers = pod_set("workers", 4, gpu=2)
    snap = one_queue([node("n1", gpu=8, cpu="8")], [workload("team", "mpi", pod_sets=[launcher, workers])])
    (adm,) = plan_snapshot(snap).admissions
    assert [p.name for p in adm.pod_sets] == ["launcher", "workers"]
    assert [p.count for p in adm.pod_sets] == [1, 4]
    # Only 6 GPUs: the workers cannot all run, so nothing of the gang starts.
    small = one_queue([node("n1", gpu=6, cpu="8")], [workload("team", "mpi", pod_sets=[launcher, workers])])
    assert not plan_snapshot(small).admissions


def racks(free_per_rack, gpus_per_node=8, block="b1"):
    nodes = []
    for r, free in enumerate(free_per_rack):
        full, rest = divmod(free, gpus_per_node)
        sizes = [gpus_per_node] * full + ([rest] if rest else [])
        for i, size in enumerate(sizes):
            nodes.append(node(f"{block}-r{r}-n{i}", gpu=size, labels={BLOCK: block, RACK: f"{block}-r{r}"}))
    return nodes


def tas_snapshot(nodes, workloads):
    return one_queue(nodes, workloads, gpus=10_000,
                     flavors=[flavor("default", topology="default")],
                     topologies=[topology("default", BLOCK, RACK, HOST)])


def test_required_rack_takes_a_rack_that_holds_every_pod():
    snap = tas_snapshot(racks([3, 5]), [job("team", "train", pods=4, gpu=1, topology=required(RACK))])
    (ps,) = admitted(plan_snapshot(snap))["train"].pod_sets
    assert {values[0].split("-n")[0] for values, _ in ps.domains} == {"b1-r1"}


def test_required_rack_waits_when_no_rack_holds_it():
    snap = tas_snapshot(racks([3, 3]), [job("team", "train", pods=4, gpu=1, topology=required(RACK))])
    plan = plan_snapshot(snap)
    assert not plan.admissions


def test_slices_stay_whole_inside_racks():
    # Two racks with 4 and 6 free GPUs: 8 pods in slices of 4 per rack fit (4 + 4),
    # slices of 3 do not divide 8, slices of 8 do not fit a rack.
    snap = tas_snapshot(racks([4, 6], gpus_per_node=2),
                        [job("team", "sliced", pods=8, gpu=1, topology=sliced(RACK, 4, mode="required", mode_level=BLOCK))])
    plan = plan_snapshot(snap)
    (ps,) = admitted(plan)["sliced"].pod_sets
    per_rack = {}
    for values, count in ps.domains:
        rack = values[0].rsplit("-n", 1)[0]
        per_rack[rack] = per_rack.get(rack, 0) + count
    assert sorted(per_rack.values()) == [4, 4]
    too_big = tas_snapshot(racks([4, 6], gpus_per_node=2),
                           [job("team", "sliced", pods=8, gpu=1, topology=sliced(RACK, 8))])
    assert not plan_snapshot(too_big).admissions


def test_pulp_cbc_finds_the_same_plan_as_highs():
    snap = old_six_and_two_fours()
    highs = plan_snapshot(snap)
    cbc = plan_snapshot(snap, SolveOptions(solver="pulp:CBC"))
    assert cbc.solver.method == "pulp:CBC"
    assert set(admitted(cbc)) == set(admitted(highs)) == {"new-4a", "new-4b"}


def test_same_snapshot_gives_the_same_plan():
    snap = tas_snapshot(racks([8, 16, 12]), [
        job("team", f"j{i}", pods=p, gpu=1, topology=required(RACK) if i % 2 else preferred(RACK))
        for i, p in enumerate([4, 8, 2, 6, 5])
    ])
    first, second = plan_snapshot(snap), plan_snapshot(snap)
    assert first.admissions == second.admissions and first.pending == second.pending


def test_read_time_counts_in_the_plan_total():
    snap = one_queue([node("n1", gpu=8)], [job("team", "j", pods=1, gpu=1)])
    seconds = plan_snapshot(snap, read_seconds=2.5).solver.seconds
    assert seconds["read"] == 2.5
    assert seconds["total"] >= 2.5 + seconds["solve"]


def test_the_time_limit_holds_reading_too(tmp_path):
    """A cycle whose reading took its whole limit waits for nothing: Kueue's way is used
    only if it is in already (else the plan says it was not compared), each stage gets
    the least a stage is given, and the plan it returns is verified."""
    snap = small_cluster(tmp_path)
    out_of_time = plan_snapshot(snap, SolveOptions(time_limit=20.0), read_seconds=20.0)
    assert out_of_time.solver.status in ("optimal", "feasible", "fallback")
    assert out_of_time.solver.seconds["read"] == 20.0
    assert verify(snap, Decisions(admissions=out_of_time.admissions, evictions=out_of_time.evictions)) == []


def test_the_budget_gives_each_stage_its_share_and_keeps_the_finish():
    """Tiers share TIER_SHARE of the window in turn (time a tier leaves passes on), the
    tail stages the rest, and FINISH_SHARE of the limit stays for after the stages."""
    from planner.base.budget import FINISH_SHARE, TIER_SHARE, Budget

    now = [0.0]
    budget = Budget(100.0, clock=lambda: now[0])
    budget.open_stages()
    window = 100.0 * (1 - FINISH_SHARE)
    assert budget.tier_deadline(0, 2) == pytest.approx(TIER_SHARE * window / 2)
    now[0] = 5.0   # the first tier finished early: the second gets what is left of the tiers' part
    assert budget.tier_deadline(1, 2) == pytest.approx(TIER_SHARE * window)
    now[0] = TIER_SHARE * window
    assert budget.tail_deadline(0, 2) == pytest.approx(now[0] + (window - now[0]) / 2)
    now[0] = 1000.0  # past the end: a deadline in the past, never an error
    assert budget.tier_deadline(0, 1) == 1000.0 and budget.left() == 0.0


def test_a_part_of_the_budget_is_a_share_of_what_is_left_for_the_tiers_alone():
    """A pass of the MILP's search: PASS_SHARE of what is left before the finish reserve,
    all of it for its tiers (it runs no tail stage and keeps no reserve)."""
    from planner.base.budget import FINISH_SHARE, Budget
    from planner.milp.search import PASS_SHARE

    now = [0.0]
    budget = Budget(100.0, clock=lambda: now[0])
    now[0] = 10.0
    part = budget.part(PASS_SHARE)
    left = 100.0 * (1 - FINISH_SHARE) - 10.0
    assert part.end == pytest.approx(10.0 + PASS_SHARE * left) and part.stages_end == part.end
    part.open_stages()
    assert part.tier_deadline(0, 1) == pytest.approx(part.end)
    now[0] = 95.0   # past the stages' end: an empty part, never an error
    assert budget.part(PASS_SHARE).left() == 0.0


def test_a_run_whose_report_disagrees_with_its_values_keeps_the_values_when_time_is_short(monkeypatch):
    """HiGHS 1.16 can report an objective its col_value does not have (a start's objective
    in presolve's space after an interrupt). With under half the time left the values
    (a solution) are kept, as `feasible` with no bound; with more, the run is redone."""
    from pathlib import Path

    from planner.greedy import greedy
    from planner.milp.model import formulate
    from planner.milp.start import start_from
    from planner.snapshot import read_snapshot
    from planner.milp.backends import HighsBackend

    snap = read_snapshot([str(Path(__file__).resolve().parent.parent / "fixtures" / "tiny.yaml")])
    form = formulate(snap)
    start = start_from(form, greedy(snap).decisions)
    backend = HighsBackend(form.arrays)
    backend.set_objective([(c, 1.0) for c in form.admit_col], maximize=True)
    monkeypatch.setattr(HighsBackend, "_consistent", staticmethod(lambda h, cost, values: False))
    clock = iter([0.0, 0.9, 0.9, 0.9])     # began, then "0.9 s later" for a 1 s limit
    monkeypatch.setattr("planner.milp.backends.now", lambda: next(clock, 0.9))
    values, status, bound = backend.run(1.0, 1e-4, start)
    assert values is not None and status == "feasible" and bound is None
    clock = iter([0.0, 0.1, 0.1, 0.1, 0.1])   # plenty left: solved again, still disagreeing
    values, status, bound = backend.run(1.0, 1e-4, start)
    assert (values, status, bound) == (None, "failed", None)


def test_a_flavor_that_tolerates_its_own_taints_serves_untolerating_pod_sets():
    # Half the cluster is tainted GPU nodes whose flavor tolerates the taint itself
    # (Kueue adds the flavor's tolerations when matching nodeTaints): both halves are used.
    gpu_taint = "nvidia.com/gpu=present:NoSchedule"
    snap = snapshot(
        nodes=[node("plain", gpu=8), node("tainted", gpu=8, labels={"pool": "gpu"}, taints=[gpu_taint])],
        flavors=[flavor("default"),
                 flavor("gpu", node_labels={"pool": "gpu"}, taints=[gpu_taint],
                        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])],
        cqs=[cq("cq", quotas={"gpu": {GPU: 8, "cpu": 100, "memory": "1Ti"},
                              "default": {GPU: 8, "cpu": 100, "memory": "1Ti"}})],
        lqs=[lq("team", "lq", "cq")],
        workloads=[job("team", "a", pods=8, gpu=1), job("team", "b", pods=8, gpu=1)],
    )
    plan = plan_snapshot(snap)
    assert set(admitted(plan)) == {"a", "b"}
    flavors = {a.pod_sets[0].flavors[GPU] for a in plan.admissions}
    assert flavors == {"gpu", "default"}
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []
