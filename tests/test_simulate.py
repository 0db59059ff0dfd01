"""The simulator's core (planner/whatif/simulate.py) on tiny hand-built clusters, with the real
planning cycle (planner.cycle.plan_snapshot) planning each step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models import Snapshot, Workload
from models.trace import Arrival, Trace
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.whatif.simulate import Planner, percentiles, simulate
from tests.builders import NOW, cq, flavor, job, node, running_job, snapshot


def one_node_cluster(workloads: tuple[Workload, ...] = ()) -> Snapshot:
    return snapshot(
        nodes=[node("n1", gpu=4, cpu="32")],
        flavors=[flavor("default")],
        cqs=[cq("team", quotas={"default": {"nvidia.com/gpu": 4, "cpu": 32, "memory": "256Gi"}},
                within="LowerPriority")],
        workloads=workloads,
    )


def arrival(name: str, submit: float, duration: float, *, priority: int = 0, gpu: int = 4,
            checkpoint: float | None = None) -> Arrival:
    w = job("team", name, cq="team", gpu=gpu, priority=priority)
    return Arrival(replace(w, cluster_queue="team"), submit, duration, checkpoint)


def planner(solver: str = "greedy") -> Planner:
    return lambda snap: plan_snapshot(snap, SolveOptions(solver=solver, time_limit=10))


def by_name(result_jobs: tuple[object, ...]) -> dict[str, object]:
    return {job.workload.ref.name: job for job in result_jobs}  # type: ignore[attr-defined]


def test_a_job_arrives_waits_runs_and_finishes() -> None:
    # a fills the node from t=0 to t=150; b arrives at 30, waits for the cycle after a ends (180)
    trace = Trace("t", (arrival("a", 0, 150), arrival("b", 30, 100)), hours=300 / 3600)
    result = simulate(one_node_cluster(), trace, planner(), interval=60)
    jobs = by_name(result.jobs)
    a, b = jobs["a"], jobs["b"]
    assert (a.first_start, a.finished_at) == (NOW, NOW + 150)  # type: ignore[attr-defined]
    assert (b.first_start, b.finished_at) == (NOW + 180, NOW + 280)  # type: ignore[attr-defined]
    summary = result.as_dict()
    assert summary["cycles"] == 6 and summary["admitted"] == 2 and summary["finished"] == 2
    assert summary["evictions"] == 0 and summary["lost_gpu_hours"] == 0
    # waits: a 0 s, b 150 s (submit 30, start 180)
    assert summary["wait_seconds"] == {"0": {"p50": 0.0, "p95": 150.0, "p99": 150.0, "mean": 75.0, "count": 2}}
    # 4 GPUs busy for 150 + 100 of 300 seconds
    assert summary["utilization_useful"] == pytest.approx(250 / 300)


def test_an_eviction_loses_the_work_since_the_last_checkpoint() -> None:
    # low runs from 0, checkpointing every 120 s; high (priority 1000) arrives at 250 and evicts
    # it at the cycle of 300: low loses 300 - 240 = 60 s on 4 GPUs and keeps 240 s of progress.
    trace = Trace("t", (arrival("low", 0, 1000, checkpoint=120), arrival("high", 250, 100, priority=1000)),
                  hours=600 / 3600)
    result = simulate(one_node_cluster(), trace, planner(), interval=60)
    jobs = by_name(result.jobs)
    low, high = jobs["low"], jobs["high"]
    summary = result.as_dict()
    assert summary["evictions"] == 1 and low.evictions == 1  # type: ignore[attr-defined]
    assert summary["evictions_by_priority"] == {"0": 1} and summary["evicted_more_than_once"] == 0
    assert summary["lost_gpu_hours_by_priority"] == {"0": pytest.approx(4 * 60 / 3600, abs=1e-4)}
    assert summary["lost_gpu_hours"] == pytest.approx(4 * 60 / 3600, abs=1e-4)
    assert high.first_start == NOW + 300 and high.finished_at == NOW + 400  # type: ignore[attr-defined]
    # back at the next cycle after high ends (420), with 240 s saved
    assert low.run_start == NOW + 420 and low.done == 240  # type: ignore[attr-defined]
    assert summary["wait_seconds"]["1000"]["p50"] == 50.0  # type: ignore[index]
    # allocated 0-300 (low), 300-400 (high), 420-600 (low); useful: minus the 60 s lost
    assert summary["utilization_allocated"] == pytest.approx(580 / 600)
    assert summary["utilization_useful"] == pytest.approx(520 / 600)


def test_without_checkpoints_an_eviction_loses_the_whole_run() -> None:
    trace = Trace("t", (arrival("low", 0, 1000), arrival("high", 250, 100, priority=1000)), hours=360 / 3600)
    summary = simulate(one_node_cluster(), trace, planner(), interval=60).as_dict()
    assert summary["lost_gpu_hours"] == pytest.approx(4 * 300 / 3600, abs=1e-4)


def test_the_snapshots_running_work_finishes_and_frees_its_room() -> None:
    busy = running_job("team", "old", cq="team", gpu=4, nodes={"n1": 1}, admitted=NOW - 600)
    trace = Trace("t", (arrival("new", 0, 60),), hours=10.0)
    result = simulate(one_node_cluster((busy,)), trace, planner(), interval=3600, seed=3)
    jobs = by_name(result.jobs)
    old, new = jobs["old"], jobs["new"]
    assert old.finished_at is not None  # type: ignore[attr-defined]
    assert new.first_start is not None and new.first_start >= old.finished_at  # type: ignore[attr-defined]


def test_the_same_seed_gives_the_same_day() -> None:
    busy = (running_job("team", "old-1", cq="team", gpu=2, nodes={"n1": 1}, admitted=NOW - 600),
            running_job("team", "old-2", cq="team", gpu=2, nodes={"n1": 1}, admitted=NOW - 900))
    trace = Trace("t", tuple(arrival(f"j{i}", 600.0 * i, 3000, gpu=2, checkpoint=600) for i in range(6)),
                  hours=4.0)

    def day(seed: int) -> dict[str, object]:
        out = simulate(one_node_cluster(busy), trace, planner(), interval=900, seed=seed).as_dict()
        out.pop("cycle_seconds")                       # measured, the only thing that may differ
        for point in out.pop("series"):                # type: ignore[attr-defined]
            point.pop("cycle_seconds")
        return out

    assert day(5) == day(5)
    assert day(5) != day(6)        # the snapshot's own work gets other durations


def test_percentiles_take_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "mean": 50.5, "count": 100}
    assert percentiles([])["p95"] == 0.0


def test_waits_of_jobs_that_require_a_rack_are_reported_per_level() -> None:
    from tests.builders import required, topology

    rack = "example.com/rack"
    snap = snapshot(
        nodes=[node(f"n{i}", gpu=4, cpu="32", labels={rack: "r1"}) for i in (1, 2)],
        flavors=[flavor("default", topology="t")],
        topologies=[topology("t", rack, "kubernetes.io/hostname")],
        cqs=[cq("team", quotas={"default": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}})],
    )
    small = arrival("small", 0, 200, gpu=4)
    big_w = job("team", "big", cq="team", gpu=4, pods=2, topology=required(rack))
    big = Arrival(replace(big_w, cluster_queue="team"), 10, 100)
    summary = simulate(snap, Trace("t", (small, big), hours=400 / 3600), planner(), interval=60).as_dict()
    # big needs the whole rack: it starts at the first cycle after small ends (240), 230 s after submit
    assert summary["wait_seconds_topology_required"] == {
        rack: {"p50": 230.0, "p95": 230.0, "p99": 230.0, "mean": 230.0, "count": 1, "max": 230.0, "unstarted": 0}}


def test_the_snapshots_pending_work_is_counted_as_backlog() -> None:
    waiting = job("team", "old", cq="team", gpu=4)
    blocked = job("team", "huge", cq="team", gpu=4, pods=2)          # 8 GPUs: never fits the node
    summary = simulate(one_node_cluster((waiting, blocked)), Trace("t", (), hours=120 / 3600), planner(),
                       interval=60).as_dict()
    assert summary["backlog"] == {"pending_at_start": 2, "gpus_at_start": 12, "started": 1, "gpus_started": 4}
    assert summary["wait_seconds"] == {} and summary["trace_jobs"] == 0


def test_fair_share_distance_sums_each_queues_distance_from_its_fair_allocation() -> None:
    from models import Plan, SolverReport
    from planner.whatif.simulate import fair_distance, fair_summary

    report = SolverReport("greedy", "feasible", 0.0, 0.0, 0.0)
    fair_on = Plan("s", "", 0, report, summary={"fair_sharing": {"strategies": [], "queues": {
        "a": {"used": 10, "fair": 6, "over_fair": 4}, "b": {"used": 2, "fair": 6.5, "over_fair": -4.5}}}})
    assert fair_distance(fair_on) == {"fair_distance": 8.5}
    assert fair_distance(Plan("s", "", 0, report)) == {}                  # fair sharing off: nothing
    series: list[dict[str, object]] = [{"fair_distance": 8.5}, {"fair_distance": 1.5}]
    assert fair_summary(series) == {"fair_distance": {"mean": 5.0, "max": 8.5, "last": 1.5}}
    assert fair_summary([{"t": 0}]) == {}


def test_drain_keeps_planning_until_every_trace_job_has_finished() -> None:
    trace = Trace("t", (arrival("a", 0, 150), arrival("b", 30, 100)), hours=60 / 3600)
    short = simulate(one_node_cluster(), trace, planner(), interval=60).as_dict()
    drained = simulate(one_node_cluster(), trace, planner(), interval=60, drain=True)
    assert short["cycles"] == 2 and short["finished"] == 0
    summary = drained.as_dict()
    # b starts at 180 and ends at 280: the cycle at 300 sees every trace job finished
    assert summary["cycles"] == 6 and summary["finished"] == 2 and summary["hours"] == round(300 / 3600, 4)


def test_drain_stops_when_what_waits_can_never_start() -> None:
    from planner.whatif.simulate import MAX_STALLED_CYCLES

    too_big = Arrival(replace(job("team", "huge", cq="team", gpu=4, pods=2), cluster_queue="team"), 0, 60)
    summary = simulate(one_node_cluster(), Trace("t", (too_big,), hours=0.0), planner(), interval=60,
                       drain=True).as_dict()
    # 8 GPUs on a 4-GPU node: every cycle admits nothing and nothing runs; the 30th ends it
    assert summary["cycles"] == MAX_STALLED_CYCLES
    assert summary["unstarted"] == 1
