"""planner.rins and the LP it searches around: a stage's neighbourhood search must never
return worse than its incumbent, must stay inside the model (the verifier agrees), must
find better answers where the LP point shows them, and its LP optimum must bound them."""

import time

import numpy as np
import pytest

from generated import small_cluster
from models import Decisions
from planner import rins
from planner.decode import decode
from planner.formulate import formulate
from planner.greedy import greedy
from planner.highs import LpRelaxation
from planner.improve import improve
from planner.model_arrays import INF, ModelArrays
from planner.solve import HOLD_SLACK, HighsBackend, nudge, relaxation_ahead, stage_bound, value_of
from planner.verify import verify
from planner.warmstart import start_from


def second_stage(snap):
    """The compact model, its start, and a backend set up as the second tier's stage:
    the top tier held at what the start serves, the second tier (and nudge) maximised."""
    form = formulate(snap, locality=False)
    start = start_from(form, improve(snap, greedy(snap).decisions))
    assert start is not None and len(form.tiers) > 1
    backend = HighsBackend(form.arrays)
    top, tier = form.tiers[0], form.tiers[1]
    backend.add_row(form.tier_volume[top], value_of(form.tier_volume[top], start) - HOLD_SLACK, INF)
    objective = form.tier_volume[tier] + nudge(form, tier)
    backend.set_objective(objective, maximize=True)
    return form, start, backend, objective


@pytest.mark.parametrize("seed", range(6))
def test_search_never_loses_stays_valid_and_is_bounded_by_its_lp(tmp_path, seed):
    snap = small_cluster(tmp_path, seed)
    form, start, backend, objective = second_stage(snap)
    integer = np.asarray(form.arrays.col_integer, dtype=bool)
    found = rins.search(backend, start, lambda v: value_of(objective, v), integer, time.monotonic() + 20, 1e-4)
    assert value_of(objective, found.values) >= value_of(objective, start) - 1e-9
    assert found.lp_optimum is not None
    assert found.lp_optimum >= value_of(objective, found.values) - 1e-6
    assert verify(snap, decode(form, found.values)) == []
    top = form.tiers[0]     # the hold was kept
    assert value_of(form.tier_volume[top], found.values) >= value_of(form.tier_volume[top], start) - 1e-6


def test_search_finds_what_the_start_missed(tmp_path):
    """Seed 15: the improved start leaves the second tier 25 GPUs short of what one
    sub-MIP around the LP point finds. (Greedy's plan is Kueue's cycle; on the seeds
    before 15 improving it already reaches what the search would.)"""
    snap = small_cluster(tmp_path, 15)
    form, start, backend, objective = second_stage(snap)
    integer = np.asarray(form.arrays.col_integer, dtype=bool)
    found = rins.search(backend, start, lambda v: value_of(objective, v), integer, time.monotonic() + 20, 1e-4)
    tier = form.tiers[1]
    assert value_of(form.tier_volume[tier], found.values) > value_of(form.tier_volume[tier], start) + 1
    assert found.rounds >= 1


def test_no_relaxation_no_search(tmp_path):
    """A backend told not to search (the LP was too slow ahead of the stages) returns the
    incumbent untouched and no bound."""
    snap = small_cluster(tmp_path)
    form = formulate(snap, locality=False)
    start = start_from(form, improve(snap, greedy(snap).decisions))
    backend = HighsBackend(form.arrays, searches=False)
    backend.set_objective(form.tier_volume[form.tiers[1]], maximize=True)
    integer = np.asarray(form.arrays.col_integer, dtype=bool)
    found = rins.search(backend, start, lambda v: 0.0, integer, time.monotonic() + 5, 1e-4)
    assert found.values is start and found.lp_optimum is None and found.rounds == 0


def one_column(upper=10.0):
    arrays = ModelArrays()
    arrays.add_col("x", 0.0, upper)
    return arrays


def test_an_assumed_row_stays_when_confirmed_and_goes_when_not():
    """Minimise x with x >= 5 assumed: 5. Confirmed by the same row, still 5; not
    confirmed, the row no longer binds: 0."""
    cols, vals = np.array([0], dtype=np.int32), np.array([1.0])
    for confirmed, expected in ((True, 5.0), (False, 0.0)):
        lp = LpRelaxation(one_column(), threads=1)
        lp.assume_row(5.0, INF, cols, vals)
        lp.set_objective(np.array([1.0]), maximize=False)
        assert lp.solve(5.0)[1] == pytest.approx(5.0)
        if confirmed:
            lp.add_row(5.0, INF, cols, vals)
        lp.settle()
        assert lp.solve(5.0)[1] == pytest.approx(expected)


def test_the_lp_solved_ahead_is_the_first_stage_lp(tmp_path):
    """Where the start serves the top tier whole, the LP solved before the stages has the
    optimum a fresh LP of the second stage has; a model above the size limit gets none."""
    snap = small_cluster(tmp_path)
    form, start, backend, objective = second_stage(snap)
    top = form.tiers[0]
    assert value_of(form.tier_volume[top], start) == pytest.approx(form.tier_max[top])
    ahead = relaxation_ahead(form, threads=1, time_limit=20)
    assert ahead is not None
    fresh = HighsBackend(form.arrays)
    fresh.add_row(form.tier_volume[top], form.tier_max[top] - HOLD_SLACK, INF)
    fresh.set_objective(objective, maximize=True)
    with_ahead = HighsBackend(form.arrays, relaxation=ahead)
    with_ahead.add_row(form.tier_volume[top], form.tier_max[top] - HOLD_SLACK, INF)
    with_ahead.set_objective(objective, maximize=True)
    assert with_ahead.relax(20)[1] == pytest.approx(fresh.relax(20)[1], rel=1e-7)


def test_no_lp_ahead_for_a_model_too_large(tmp_path, monkeypatch):
    from planner import solve

    snap = small_cluster(tmp_path)
    form = formulate(snap, locality=False)
    monkeypatch.setattr(solve, "MAX_NONZEROS", len(form.arrays.entry_val) - 1)
    assert relaxation_ahead(form, threads=1, time_limit=20) is None


def test_stage_bounds_are_rounded_to_the_volume_step(tmp_path):
    """Every pod of the generated clusters' multi-node tiers asks for whole GPUs: a tier's
    volume is a multiple of the gcd of its coefficients, and so is its bound, which never
    falls below the bound it was made from less the nudge's largest possible size."""
    snap = small_cluster(tmp_path)
    form = formulate(snap, locality=False)
    for tier in form.tiers:
        coefficients = [int(abs(k)) for _, k in form.tier_volume[tier]]
        step = np.gcd.reduce(coefficients)
        for raw in (100.0, 100.4, 257.9):
            bound = stage_bound(form, tier, raw)
            assert bound % step == 0
            assert bound > raw - step - 1e-9


def test_a_stage_reports_no_more_than_its_lp_bound(tmp_path):
    """Planned end to end, the second tier's stage bound is at most the (rounded) optimum
    of its LP relaxation, and at least what the stage achieved."""
    from planner.pipeline import plan_snapshot

    snap = small_cluster(tmp_path)
    form, start, backend, objective = second_stage(snap)
    lp_optimum = backend.relax(20)[1]
    tier = form.tiers[1]
    plan = plan_snapshot(snap)
    assert verify(snap, Decisions(admissions=plan.admissions, evictions=plan.evictions)) == []
    stage = next(s for s in plan.solver.stages if s["stage"] == f"priority {tier}")
    assert stage["objective"] - 1e-6 <= stage["bound"] <= stage_bound(form, tier, lp_optimum) + 1e-6


def test_a_wrong_guess_ahead_still_leaves_a_relaxation_for_the_stages():
    """Two top-priority jobs of 4 GPUs on one 5-GPU node: no plan serves the top tier
    whole, so the LP solved ahead under that guess is infeasible. It is kept all the
    same, and once the real hold is added its stages get the right LP."""
    from builders import GPU, cq, flavor, job, lq, node, snapshot

    snap = snapshot(nodes=[node("n1", gpu=5)], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {GPU: 8, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("team", "lq", "cq")],
                    workloads=[job("team", "top-a", gpu=4, priority=100), job("team", "top-b", gpu=4, priority=100),
                               job("team", "low", gpu=1, priority=0)])
    form = formulate(snap, locality=False)
    ahead = relaxation_ahead(form, threads=1, time_limit=20)
    assert ahead is not None and not ahead.out_of_time
    top, low = form.tiers
    fresh = HighsBackend(form.arrays)
    reused = HighsBackend(form.arrays, relaxation=ahead)
    for backend in (fresh, reused):
        backend.add_row(form.tier_volume[top], 4.0 - HOLD_SLACK, INF)
        backend.set_objective(form.tier_volume[low] + nudge(form, low), maximize=True)
    assert fresh.relax(20)[1] == pytest.approx(1.0, abs=1e-3)      # the low job beside one top job
    assert reused.relax(20)[1] == pytest.approx(fresh.relax(20)[1], abs=1e-6)


def test_the_restricted_model_moves_row_bounds_by_the_held_columns():
    """x + y + z in [2, 5] and x - z <= 1 (plus an added row y + z >= 1), x held at 1:
    the model over y and z has y + z in [1, 4] and -z <= 0 and y + z >= 1; a row of only
    held columns is left out."""
    arrays = ModelArrays()
    for name in "xyz":
        arrays.add_col(name, 0.0, 3.0, integer=True)
    arrays.add_row("sum", [(0, 1.0), (1, 1.0), (2, 1.0)], 2.0, 5.0)
    arrays.add_row("diff", [(0, 1.0), (2, -1.0)], -INF, 1.0)
    arrays.add_row("x only", [(0, 2.0)], -INF, 4.0)
    free = np.array([False, True, True])
    added = [(1.0, INF, np.array([1, 2], dtype=np.int32), np.array([1.0, 1.0]))]
    sub = arrays.restricted(free, np.array([1.0, 0.0, 1.0]), added)
    assert sub.num_cols == 2 and sub.col_integer == [True, True] and sub.col_upper == [3.0, 3.0]
    assert sub.row_lower == [1.0, -INF, 1.0] and sub.row_upper == [4.0, 0.0, INF]
    rows = {}
    for r, c, v in zip(sub.entry_row, sub.entry_col, sub.entry_val):
        rows.setdefault(r, []).append((c, v))
    assert rows == {0: [(0, 1.0), (1, 1.0)], 1: [(1, -1.0)], 2: [(0, 1.0), (1, 1.0)]}


@pytest.mark.parametrize("seed", range(4))
def test_a_run_with_columns_held_finds_what_holding_them_in_the_whole_model_finds(tmp_path, seed):
    """run_fixed hands HiGHS only the free columns; its answer keeps the held columns at
    the start's values, is feasible in the whole model (the verifier agrees), and is as
    good as the whole model with those columns' bounds pinned (both solved to optimality)."""
    snap = small_cluster(tmp_path, seed)
    form, start, backend, objective = second_stage(snap)
    point, _ = backend.relax(20)
    integer = np.asarray(form.arrays.col_integer, dtype=bool)
    fixed = np.flatnonzero(integer & (np.abs(point - start) <= rins.AGREE))
    values, status, bound = backend.run_fixed(30.0, 0.0, start, fixed)
    assert status == "optimal" and values is not None
    assert np.array_equal(values[fixed], start[fixed])
    assert verify(snap, decode(form, values)) == []
    assert bound == pytest.approx(value_of(objective, values), rel=1e-6, abs=1e-6)

    pinned = HighsBackend(form.arrays)
    top = form.tiers[0]
    pinned.add_row(form.tier_volume[top], value_of(form.tier_volume[top], start) - HOLD_SLACK, INF)
    pinned.set_objective(objective, maximize=True)
    index = fixed.astype(np.int32)
    pinned.h.changeColsBounds(len(index), index, start[index], start[index])
    whole, whole_status, _ = pinned.run(30.0, 0.0, start)
    assert whole_status == "optimal"
    assert value_of(objective, values) == pytest.approx(value_of(objective, whole), rel=1e-6, abs=1e-6)


def test_node_columns_are_grouped_by_the_nodes_they_are_about(tmp_path):
    """A node column's neighbours are the spare-supply columns of every shape on its nodes
    and the evictions of the workloads running there, and none on other nodes."""
    from planner import capacity
    from planner.places import NodeColumns

    snap = small_cluster(tmp_path)
    form = formulate(snap, locality=False)
    nodes = NodeColumns(form)
    about: dict[int, set[str]] = {}
    for shape in form.shapes:
        for name, col in shape.supply.items():
            about.setdefault(col, set()).add(name)
    for victim, col in zip(form.victims, form.evict_col):
        about.setdefault(col, set()).update(capacity.node_usage_of(victim))
    for col in list(about)[::7]:
        expected = sorted(c for c, names in about.items() if names & about[col])
        assert nodes.on_same_nodes(np.array([col])).tolist() == expected


@pytest.mark.parametrize("seed", range(6))
def test_widening_to_the_nodes_around_never_loses_and_finds_what_the_disagreement_misses(tmp_path, seed):
    """Seeds 3 and 4: the columns where the LP point and the start disagree hold nothing
    better (the start stays), the same columns with the rest of their nodes' columns
    reach the LP optimum. Everywhere, widening ends no worse and stays valid."""
    from planner.places import NodeColumns

    snap = small_cluster(tmp_path, seed)
    results = []
    for widen in (False, True):
        form, start, backend, objective = second_stage(snap)
        integer = np.asarray(form.arrays.col_integer, dtype=bool)
        found = rins.search(backend, start, lambda v: value_of(objective, v), integer, time.monotonic() + 20, 1e-4,
                            widen=NodeColumns(form).on_same_nodes if widen else None)
        assert verify(snap, decode(form, found.values)) == []
        results.append((value_of(objective, start), value_of(objective, found.values), found.lp_optimum))
    (begun, narrow, optimum), (_, wide, _) = results
    assert wide >= narrow - 1e-6
    if seed in (3, 4):
        assert narrow == pytest.approx(begun, abs=1e-6) and wide == pytest.approx(optimum, rel=1e-6)
