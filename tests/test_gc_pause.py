"""planner.cycle.gc_pause: a cycle runs with what existed before it frozen out of garbage
collection and the young generation collected rarely; both are undone after it."""

import gc

from randomgen import random_snapshot
from planner import cycle
from planner.base.solve_options import SolveOptions
from planner.cycle import gc_pause
from planner.cycle import plan_snapshot


def test_a_cycle_runs_with_the_snapshot_frozen_and_rare_collections(monkeypatch):
    before = gc.get_threshold()
    seen = []
    real = cycle.run_cycle

    def recording(snapshot, solver, read_seconds):
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return real(snapshot, solver, read_seconds)

    monkeypatch.setattr(cycle, "run_cycle", recording)
    plan = plan_snapshot(random_snapshot(61_000, with_running=True), SolveOptions(time_limit=5.0))
    assert plan.solver.status in ("optimal", "feasible")
    ((threshold, frozen),) = seen
    assert threshold == (gc_pause.YOUNG, gc_pause.MIDDLE, gc_pause.OLDEST) and frozen > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_an_error_in_the_cycle_undoes_the_tuning_too():
    before = gc.get_threshold()
    try:
        with gc_pause.cycle_collector():
            raise RuntimeError("the cycle failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_what_reading_built_is_frozen_until_a_cycle_ends():
    """The reader freezes what it read (the first collection after it would scan all of
    it); the planning cycle that follows unfreezes everything when it ends."""
    from pathlib import Path

    from planner.snapshot import read_snapshot

    gc.unfreeze()
    snap = read_snapshot([str(Path(__file__).resolve().parent.parent / "fixtures" / "tiny.yaml")])
    assert gc.get_freeze_count() > 0
    plan_snapshot(snap, SolveOptions(time_limit=5.0))
    assert gc.get_freeze_count() == 0
