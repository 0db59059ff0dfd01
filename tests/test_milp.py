"""Hand-computed cases for the MILP pipeline (greedy start, solve, decode, verify)."""

import pytest

from builders import (
    GPU, NOW, ago, cq, flavor, job, lq, node, pod_set, preferred, required, sliced, snapshot,
    topology, workload,
)
from generated import small_cluster
from models import ObjectRef, Policy
from planner.pipeline import plan_snapshot
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


def test_more_volume_beats_the_older_head_at_equal_priority():
    # 8 GPUs free. Greedy takes the oldest (6 GPUs) and then nothing else fits;
    # volume comes before age, so the plan takes the two 4-GPU jobs (8 GPUs).
    snap = one_queue(
        [node("n1", gpu=8)],
        [job("team", "old-6", pods=6, gpu=1, created=ago(hours=3)),
         job("team", "new-4a", pods=4, gpu=1, created=ago(hours=2)),
         job("team", "new-4b", pods=4, gpu=1, created=ago(hours=1))],
    )
    greedy_plan = plan_snapshot(snap, solver="greedy")
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
    snap = one_queue(
        [node("n1", gpu=8)],
        [job("team", "old-6", pods=6, gpu=1, created=ago(hours=3)),
         job("team", "new-4a", pods=4, gpu=1, created=ago(hours=2)),
         job("team", "new-4b", pods=4, gpu=1, created=ago(hours=1))],
    )
    highs = plan_snapshot(snap)
    cbc = plan_snapshot(snap, solver="pulp:CBC")
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
    """A cycle whose reading took its whole limit has none left for any stage: each keeps
    its start (greedy's plan, verified), where with the same limit and no reading the
    second tier's stage searches and serves more (the generated cluster of test_rins)."""

    snap = small_cluster(tmp_path)
    searched = plan_snapshot(snap, time_limit=20.0, read_seconds=0.0)
    out_of_time = plan_snapshot(snap, time_limit=20.0, read_seconds=20.0)
    # No stage searched: each kept its start, skipped, or was proven by the small
    # relaxation's bound alone (the cluster is full: no tier below can serve more).
    ran = [s for s in out_of_time.solver.stages if s["seconds"] > 0]
    assert all(s["status"] in ("kept", "skipped", "optimal") for s in out_of_time.solver.stages)
    assert ran == [] and out_of_time.solver.status == "feasible"
    assert any(s["status"] in ("optimal", "feasible") and s["seconds"] > 0 for s in searched.solver.stages)
    # Served more at the second tier (the sum over tiers can be the same: the cluster is
    # full either way, and what the second tier gains the lowest gives up).
    second_tier = [s["objective"] for s in searched.solver.stages][1], [s["objective"] for s in out_of_time.solver.stages][1]
    assert second_tier[0] > second_tier[1]
    assert verify(snap, Decisions(admissions=out_of_time.admissions, evictions=out_of_time.evictions)) == []


def test_the_solver_gets_the_model_only_when_a_stage_runs():
    """LazyBackend: nothing is built for a cycle whose stages are all skipped, and rows
    given before the first run are all there when it runs."""
    from planner.solve import LazyBackend

    built: list[object] = []

    class Recorder:
        def __init__(self):
            self.calls: list[str] = []
            built.append(self)

        def set_objective(self, terms, maximize):
            self.calls.append("objective")

        def add_row(self, terms, lower, upper):
            self.calls.append(f"row {lower}")

        def run(self, time_limit, gap, start):
            self.calls.append("run")
            return None, "failed", None

    lazy = LazyBackend(Recorder)
    lazy.add_row([(0, 1.0)], 1.0, 2.0)
    lazy.set_objective([(0, 1.0)], True)
    assert built == []
    lazy.run(1.0, 0.0, None)
    lazy.add_row([(0, 1.0)], 3.0, 4.0)
    (backend,) = built
    assert backend.calls == ["row 1.0", "objective", "run", "row 3.0"]


def test_a_stage_too_short_to_hand_a_large_model_over_is_skipped(tmp_path):
    """A solver not built yet is not started for a stage shorter than reading the model
    would take (HANDOVER_*), nor at all for a model that cannot be solved in a cycle
    (planner.solve.solvable): the stage keeps its start, reported `skipped`; once
    built, any stage may run."""
    from planner.solve import HANDOVER_MARGIN, HANDOVER_SECONDS_PER_NONZERO, MAX_NONZEROS, LazyBackend

    built = []
    lazy = LazyBackend(lambda: built.append(1) or object(), nonzeros=MAX_NONZEROS)
    need = HANDOVER_MARGIN * HANDOVER_SECONDS_PER_NONZERO * MAX_NONZEROS
    assert not lazy.worth_starting(need * 0.9)
    assert lazy.worth_starting(need * 1.1)
    unsolvable = LazyBackend(lambda: built.append(1) or object(), nonzeros=1000, solvable=False)
    assert not unsolvable.worth_starting(10 ** 6)
    assert built == []

    import numpy as np
    from planner.formulate import formulate
    from planner.greedy import greedy
    from planner.solve import HighsBackend, solve
    from planner.warmstart import start_from

    snap = small_cluster(tmp_path)      # greedy leaves the second tier well short here (tests/test_rins.py)
    form = formulate(snap, locality=False)
    start = start_from(form, greedy(snap).decisions)
    backend = LazyBackend(lambda: HighsBackend(form.arrays), nonzeros=10**12)   # as if enormous
    outcome = solve(form, start, backend, 2.0, 1e-4)
    ran = [s for s in outcome.stages if s.name.startswith("priority") and s.status != "kept"]
    # Not searched: skipped, or left feasible or proven optimal by the small relaxation's bound.
    assert ran and all(s.status in ("skipped", "feasible", "optimal") and s.seconds == 0.0 for s in ran)
    assert any(s.status == "skipped" for s in ran)
    assert np.array_equal(outcome.values, start)

    # Polishing (a decode and an encode, seconds at scale) serves only the tail stages:
    # not done when none of them can run; done when one runs.
    polished = []
    outcome = solve(form, start, backend, 2.0, 1e-4, polish=lambda v: polished.append(1) or v)
    assert polished == [] and np.array_equal(outcome.values, start)
    outcome = solve(form, start, LazyBackend(lambda: HighsBackend(form.arrays)), 2.0, 1e-4,
                    polish=lambda v: polished.append(1) or v)
    assert polished and any(s.name in ("preemption cost", "tie-breakers") and s.status != "skipped"
                            for s in outcome.stages)


def test_a_run_whose_report_disagrees_with_its_values_keeps_the_values_when_time_is_short(monkeypatch):
    """HiGHS 1.16 can report an objective its col_value does not have (a start's objective
    in presolve's space after an interrupt). With under half the time left the values
    (a solution) are kept, as `feasible` with no bound; with more, the run is redone."""
    from pathlib import Path

    from planner.formulate import formulate
    from planner.greedy import greedy
    from planner.snapshot import read_snapshot
    from planner.solve import HighsBackend
    from planner.warmstart import start_from

    snap = read_snapshot([str(Path(__file__).resolve().parent.parent / "fixtures" / "tiny.yaml")])
    form = formulate(snap, locality=False)
    start = start_from(form, greedy(snap).decisions)
    backend = HighsBackend(form.arrays)
    backend.set_objective([(c, 1.0) for c in form.admit_col], maximize=True)
    monkeypatch.setattr(HighsBackend, "_consistent", staticmethod(lambda h, cost, values: False))
    clock = iter([0.0, 0.9, 0.9, 0.9])     # began, then "0.9 s later" for a 1 s limit
    monkeypatch.setattr("planner.solve.time.monotonic", lambda: next(clock, 0.9))
    values, status, bound = backend.run(1.0, 1e-4, start)
    assert values is not None and status == "feasible" and bound is None
    clock = iter([0.0, 0.1, 0.1, 0.1, 0.1])   # plenty left: solved again, still disagreeing
    values, status, bound = backend.run(1.0, 1e-4, start)
    assert (values, status, bound) == (None, "failed", None)


def test_a_model_too_large_to_solve_in_a_cycle_keeps_the_start_and_its_bound(tmp_path, monkeypatch):
    """Beyond MAX_NONZEROS the model's placement is not built, no stage hands it to HiGHS
    (its search overruns the limit there) and the full model is not built for the
    tie-breakers: the plan is the start, verified, and the bound comes from the small
    relaxation, above any plan's answer."""

    from planner import run, solve

    snap = small_cluster(tmp_path)
    solved = plan_snapshot(snap, time_limit=30.0)
    assert any(s["status"] in ("optimal", "feasible") and s["seconds"] > 0 for s in solved.solver.stages)
    formulated, formulate = [], run.formulate
    monkeypatch.setattr(solve, "MAX_NONZEROS", 100)
    monkeypatch.setattr(run, "MAX_NONZEROS", 100)
    monkeypatch.setattr(run, "formulate", lambda *a, **k: formulated.append(k) or formulate(*a, **k))
    plan = plan_snapshot(snap, time_limit=30.0)
    assert formulated == [{"locality": False, "max_nonzeros": 100}]       # the compact model only
    # None searched: kept, skipped, or proven by the small relaxation's bound alone.
    assert all(s["status"] in ("kept", "skipped", "optimal") and s["seconds"] == 0.0 for s in plan.solver.stages)
    assert any(s["status"] == "skipped" for s in plan.solver.stages)
    assert "not solved in a cycle" in plan.solver.message and "not solved" not in solved.solver.message
    assert verify(snap, Decisions(admissions=plan.admissions, evictions=plan.evictions)) == []
    assert plan.solver.objective <= plan.solver.bound
    assert plan.solver.bound >= solved.solver.objective    # a bound on every plan, the solved one too


def watch_due_extensions(monkeypatch) -> list[tuple[float, float]]:
    """The cycle's Due, recording each extension as (due before, until)."""
    from planner import run
    from planner.starts import Due

    moved: list[tuple[float, float]] = []

    class Watched(Due):
        def extend(self, until: float) -> None:
            moved.append((self.at, until))
            super().extend(until)

        def keep(self) -> None:     # decided not to extend: recorded as (due, due)
            moved.append((self.at, self.at))
            super().keep()

    monkeypatch.setattr(run, "Due", Watched)
    return moved


def test_a_model_too_large_to_solve_in_a_cycle_gives_the_stages_time_to_the_start(tmp_path, monkeypatch):
    """No stage can run on such a model, so the improved start, which is then the plan,
    is due later: all but UNSOLVED_TAIL_SHARE of the limit, however long its own share.
    A model that can be solved keeps its due."""
    from planner import run, solve
    moved = watch_due_extensions(monkeypatch)
    snap = small_cluster(tmp_path)
    plan_snapshot(snap, time_limit=30.0)
    [(due, kept)] = moved       # decided, and not extended (the child waits for no decision)
    assert kept == due
    moved.clear()
    monkeypatch.setattr(solve, "MAX_NONZEROS", 100)
    monkeypatch.setattr(run, "MAX_NONZEROS", 100)
    plan = plan_snapshot(snap, time_limit=30.0)
    assert "not solved in a cycle" in plan.solver.message
    [(due, until)] = moved
    later = 30.0 * (run.FINISH_SHARE + run.HANDOFF_SHARE - run.UNSOLVED_TAIL_SHARE)
    assert until - due == pytest.approx(later, abs=0.5)


def test_a_limit_too_short_for_a_stage_gives_the_stages_time_to_the_start(tmp_path, monkeypatch):
    """A model that can be solved, but with a limit too short for its LP and a search
    (stages_can_search): the start is due at all but SHORT_TAIL_SHARE of the limit, the
    small relaxation bounds the plan and no LP is solved ahead for a stage."""
    from planner import run
    moved = watch_due_extensions(monkeypatch)
    ahead: list[object] = []
    real_ahead = run.relaxation_ahead
    monkeypatch.setattr(run, "relaxation_ahead", lambda *a, **k: ahead.append(1) or real_ahead(*a, **k))
    snap = small_cluster(tmp_path)
    plan_snapshot(snap, time_limit=30.0)
    assert [due == until for due, until in moved] == [True] and ahead == [1]     # kept
    moved.clear()
    monkeypatch.setattr(run, "STAGE_END_SHARE", 0.0)
    plan = plan_snapshot(snap, time_limit=30.0)
    [(due, until)] = moved
    assert ahead == [1]
    later = 30.0 * (run.FINISH_SHARE + run.HANDOFF_SHARE - run.SHORT_TAIL_SHARE)
    assert until - due == pytest.approx(later, abs=0.5)
    assert verify(snap, Decisions(admissions=plan.admissions, evictions=plan.evictions)) == []
    assert plan.solver.objective <= plan.solver.bound


def test_the_stages_can_search_where_the_limit_leaves_their_lp_and_as_long_again():
    """The estimate behind it, from the model's build and size: at S's 1.9 s (its LP
    0.05 s) the stages search, at M's 4.75 s (its LP 1.45 s) they cannot, at 12 s they can."""
    from types import SimpleNamespace

    from planner import run

    def form(nonzeros):
        return SimpleNamespace(arrays=SimpleNamespace(entry_val=range(nonzeros)))

    assert run.stages_can_search(form(30_000), 0.09, 1.8)
    assert run.stages_can_search(form(30_000), 0.25, 1.8)        # S in a slow spell
    assert not run.stages_can_search(form(330_000), 0.89, 4.2)
    assert not run.stages_can_search(form(330_000), 1.5, 4.2)
    assert run.stages_can_search(form(330_000), 0.89, 11.2)


def test_a_size_cap_stops_placement_and_the_bound_stays_valid(tmp_path):
    """formulate under a cap it would pass: not complete, no Hall or node rows, and no
    choice whose placement went unbuilt counts as unplaceable, so the small relaxation
    bounds at least what the complete model's does (a looser bound, never a wrong one)."""

    from planner.bound import tier_bounds
    from planner.formulate import formulate

    snap = small_cluster(tmp_path)
    whole = formulate(snap, locality=False)
    assert whole.complete and all(c.placed for c in whole.choices)
    capped = formulate(snap, locality=False, max_nonzeros=len(whole.arrays.entry_val) // 10)
    assert not capped.complete and not all(c.placed for c in capped.choices)
    assert not any(name.startswith(("hall[", "node[")) for name in capped.arrays.row_names)
    assert len(capped.arrays.entry_val) < len(whole.arrays.entry_val)
    assert capped.tiers == whole.tiers and capped.tier_max == whole.tier_max
    tiers = [t for t in whole.tiers if whole.tier_volume[t]]
    for tier, bound in tier_bounds(whole, {}, tiers[:1]).items():
        assert tier_bounds(capped, {}, tiers[:1])[tier] >= bound - 1e-6


def test_tie_breakers_are_skipped_when_the_full_model_is_too_large(tmp_path, monkeypatch):
    """The tie-breakers' full model is built under the cap: past it, the stage is skipped
    and the plan kept as it is; within it, the stage runs."""
    import time

    from planner import run
    from planner.greedy import greedy

    snap = small_cluster(tmp_path)
    decisions = greedy(snap).decisions

    def tie_break():
        return run.tie_break(snap, "milp", decisions, time.monotonic() + 20.0, 1e-4, run.Clock(0.0))

    kept, stage = tie_break()
    assert stage.status != "skipped"
    monkeypatch.setattr(run, "MAX_NONZEROS", 1)
    kept, stage = tie_break()
    assert stage.status == "skipped" and kept == decisions


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
