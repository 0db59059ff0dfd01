"""Elastic running Jobs (planner.cycle.elastic): grown and shrunk by the plan, with the
admissions and evictions, by both planners; the slice rules the verifier checks."""

import dataclasses

import pytest

from builders import GPU, cq, flavor, job, lq, node, required, running_job, snapshot, topology
from models import PodSetAssignment, Resize
from planner.cycle import elastic
from planner.base.solve_options import SolveOptions
from planner.cycle import plan_snapshot
from planner.base.errors import VerificationError
from planner.verify import check_resizes, messages

QUOTA = {"default": {GPU: 1000, "cpu": 10_000, "memory": "100Ti"}}
RACK = "rack"
HOST = "kubernetes.io/hostname"


def elastic_job(name, nodes, *, most, floor, priority=0, **kw):
    """A running elastic Job: `nodes` pods now, from `floor` up to `most`."""
    w = running_job("team", name, nodes=nodes, gpu=1, pods=most, min_pods=floor if floor < most else None,
                    priority=priority, **kw)
    return dataclasses.replace(w, elastic_job=True)


def snap_of(nodes, workloads, quota=None, **kw):
    return snapshot(nodes=nodes, flavors=[flavor("default")],
                    cqs=[cq("cq", quotas=quota or QUOTA, within="LowerPriority")],
                    lqs=[lq("team", "lq", "cq")], workloads=workloads, **kw)


@pytest.mark.parametrize("solver", ["milp", "greedy"])
def test_a_shrink_replaces_an_eviction(solver):
    # 8 GPUs, the elastic Job holds 6 of them (floor 2); a higher-priority job needs 4:
    # releasing 2 pods is enough, evicting the Job would throw all its work away
    snap = snap_of([node("n1", gpu=8)], [
        elastic_job("elastic", {"n1": 6}, most=6, floor=2),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    plan = plan_snapshot(snap, SolveOptions(solver=solver))
    assert [a.workload.name for a in plan.admissions] == ["high"]
    assert not plan.evictions
    (resize,) = plan.resizes
    assert resize.workload.name == "elastic" and (resize.from_count, resize.to_count) == (6, 4)
    assert resize.release == (("n1", 2),) and resize.slice is None
    assert resize.reason == "Preempted" and [r.name for r in resize.for_] == ["high"]


def test_a_shrink_never_goes_below_the_floor():
    # the floor of 5 leaves 3 free at most: the 4-pod job needs the whole Job evicted
    snap = snap_of([node("n1", gpu=8)], [
        elastic_job("elastic", {"n1": 8}, most=8, floor=5),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    plan = plan_snapshot(snap)
    assert [a.workload.name for a in plan.admissions] == ["high"]
    assert [e.workload.name for e in plan.evictions] == ["elastic"]
    assert not plan.resizes


def test_growth_when_capacity_frees():
    # the Job runs 2 of its most 6; 4 GPUs are free on n1 and n2 together: it grows by 4,
    # same flavor, the slice beside its running pods
    snap = snap_of([node("n1", gpu=4), node("n2", gpu=2)], [
        elastic_job("elastic", {"n1": 2}, most=6, floor=1),
    ])
    for solver in ("milp", "greedy"):
        plan = plan_snapshot(snap, SolveOptions(solver=solver))
        assert not plan.admissions and not plan.evictions and not plan.pending
        (resize,) = plan.resizes
        assert (resize.from_count, resize.to_count) == (2, 6), solver
        assert resize.slice is not None and resize.slice.count == 4
        assert dict(resize.slice.flavors) == dict(snap.workloads[0].assignment[0].flavors)
        assert not resize.release


def test_growth_stays_in_the_required_domain():
    # required rack: the Job runs in r1, which has 1 GPU left; r2 has 8 free: it grows by 1 only
    nodes = [node("a1", gpu=4, labels={RACK: "r1"}), node("b1", gpu=8, labels={RACK: "r2"})]
    w = running_job("team", "elastic", nodes={"a1": 3}, gpu=1, pods=8, topology=required(RACK))
    ps = w.pod_sets[0]
    placed = PodSetAssignment(ps.name, 3, {GPU: "tas"}, (RACK, HOST), ((("r1", "a1"), 3),))
    w = dataclasses.replace(w, elastic_job=True, assignment=(placed,))
    snap = snapshot(nodes=nodes, flavors=[flavor("tas", topology="t")], topologies=[topology("t", RACK, HOST)],
                    cqs=[cq("cq", quotas={"tas": {GPU: 1000, "cpu": 10_000, "memory": "100Ti"}})],
                    lqs=[lq("team", "lq", "cq")], workloads=[w])
    plan = plan_snapshot(snap)
    (resize,) = plan.resizes
    assert resize.to_count == 4 and resize.slice is not None
    assert {values[-1] for values, _ in resize.slice.domains} == {"a1"}   # the only node of r1


def test_growth_within_quota_only():
    # quota 4 GPUs, the Job uses 2: it grows by 2 though the node has room for 6 more
    quota = {"default": {GPU: 4, "cpu": 10_000, "memory": "100Ti"}}
    snap = snap_of([node("n1", gpu=8)], [elastic_job("elastic", {"n1": 2}, most=8, floor=1)], quota=quota)
    (resize,) = plan_snapshot(snap).resizes
    assert resize.to_count == 4


def test_not_elastic_means_no_resize():
    w = running_job("team", "fixed", nodes={"n1": 2}, gpu=1, pods=6, min_pods=1)
    assert not plan_snapshot(snap_of([node("n1", gpu=8)], [w])).resizes


def job_snap():
    """Two 8-GPU nodes; an elastic Job runs 4 pods on n1, floor 2, most 6."""
    return snap_of([node("n1", gpu=8), node("n2", gpu=8)], [elastic_job("elastic", {"n1": 4}, most=6, floor=2)])


def _check(snap, resize):
    """The verifier's sentences for the plan of `snap` with `resize` as its one resize."""
    plan = plan_snapshot(snap)
    return messages(check_resizes(snap, dataclasses.replace(plan, resizes=(resize,))))


def test_verifier_refuses_a_shrink_below_the_floor():
    snap = job_snap()
    ref = snap.workloads[0].ref
    bad = Resize(ref, "cq", "main", 4, 1, release=(("n1", 3),), reason="Preempted")
    assert any("below its minimum 2" in v for v in _check(snap, bad))


def test_verifier_refuses_a_growth_in_other_flavors():
    snap = job_snap()
    ref = snap.workloads[0].ref
    slice_ = PodSetAssignment("main", 2, {GPU: "other"}, (HOST,), ((("n2",), 2),))
    assert any("not the ones it runs under" in v for v in _check(snap, Resize(ref, "cq", "main", 4, 6, slice=slice_)))


def test_verifier_refuses_growth_past_the_most_and_bad_counts():
    snap = job_snap()
    ref = snap.workloads[0].ref
    flavors = dict(snap.workloads[0].assignment[0].flavors)
    slice_ = PodSetAssignment("main", 3, flavors, (HOST,), ((("n2",), 3),))
    found = _check(snap, Resize(ref, "cq", "main", 4, 7, slice=slice_))
    assert any("more than its most 6" in v for v in found)
    found = _check(snap, Resize(ref, "cq", "main", 4, 3, release=(("n2", 1),), reason="Preempted"))
    assert any("releases 1 pods on n2, where it runs 0" in v for v in found)


def test_the_cycle_refuses_a_plan_whose_resize_breaks_a_rule(monkeypatch):
    snap = job_snap()
    real = elastic.collapse

    def broken(plan, expansion):
        out = real(plan, expansion)
        return dataclasses.replace(out, resizes=tuple(dataclasses.replace(r, to_count=r.to_count + 5)
                                                      for r in out.resizes))

    monkeypatch.setattr(elastic, "collapse", broken)
    with pytest.raises(VerificationError):
        plan_snapshot(snap)


def test_output_and_plan_file_carry_resizes(tmp_path):
    from planner.cluster.planfile import load_plan, render_saved
    from planner.output.document import plan_to_dict

    snap = job_snap()
    plan = plan_snapshot(snap)
    (resize,) = plan.resizes
    data = plan_to_dict(plan)
    assert data["resizes"][0]["from"] == 4 and data["resizes"][0]["to"] == 6
    assert data["resizes"][0]["slice"]["count"] == 2
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {resize.workload: "7"}, "yaml"))
    loaded, versions = load_plan(str(path))
    assert loaded.resizes == plan.resizes and versions[resize.workload] == "7"


def test_verifier_refuses_a_slice_outside_the_required_domain():
    nodes = [node("a1", gpu=4, labels={RACK: "r1"}), node("b1", gpu=8, labels={RACK: "r2"})]
    w = running_job("team", "elastic", nodes={"a1": 3}, gpu=1, pods=8, topology=required(RACK))
    w = dataclasses.replace(w, elastic_job=True)
    snap = snapshot(nodes=nodes, flavors=[flavor("tas", topology="t")], topologies=[topology("t", RACK, HOST)],
                    cqs=[cq("cq", quotas={"tas": {GPU: 1000, "cpu": 10_000, "memory": "100Ti"}})],
                    lqs=[lq("team", "lq", "cq")], workloads=[w])
    flavors = dict(snap.workloads[0].assignment[0].flavors)
    slice_ = PodSetAssignment("main", 2, flavors, (HOST,), ((("b1",), 2),))
    found = _check(snap, Resize(w.ref, "cq", "main", 3, 5, slice=slice_))
    assert any("leaves the rack domain it requires" in v for v in found)


def test_the_table_shows_resizes():
    from planner.describe import board
    from planner.output.document import render

    snap = snap_of([node("n1", gpu=8)], [
        elastic_job("elastic", {"n1": 6}, most=6, floor=2),
        job("team", "high", pods=4, gpu=1, priority=100),
    ])
    plan = plan_snapshot(snap)
    line = next(line for line in render(plan, "table", snap).splitlines() if line.startswith("team/elastic"))
    assert " resize " in line and "6 -> 4 pods" in line
    (row,) = [r for r in board.rows(plan, snap) if r.decision == "resize"]
    assert row.pods == 4 and row.gpus == 4 and "releases n1 x2, Preempted for Job/team/high" in row.note
    assert {t.priority: t.served for t in board.tiers(plan, snap)} == {100: 4.0, 0: 4.0}


@pytest.mark.parametrize("solver", ["milp", "greedy"])
def test_a_growth_slice_keeps_its_flavor_beside_a_look_alike_pending_job(solver):
    # two flavors; the Job runs on the second. A pending one-pod job asks what its slice asks:
    # they must not be planned as one class (the slice may only take the Job's flavor)
    quotas = {"a": {GPU: 8, "cpu": 1000, "memory": "10Ti"}, "b": {GPU: 8, "cpu": 1000, "memory": "10Ti"}}
    nodes = [node("a1", gpu=8, labels={"pool": "a"}), node("b1", gpu=8, labels={"pool": "b"})]
    w = running_job("team", "elastic", nodes={"b1": 2}, gpu=1, pods=3, flavors="b")
    snap = snapshot(nodes=nodes, flavors=[flavor("a", node_labels={"pool": "a"}), flavor("b", node_labels={"pool": "b"})],
                    cqs=[cq("cq", quotas=quotas)], lqs=[lq("team", "lq", "cq")],
                    workloads=[dataclasses.replace(w, elastic_job=True), job("team", "other", gpu=1)])
    plan = plan_snapshot(snap, SolveOptions(solver=solver))
    (resize,) = plan.resizes
    assert resize.slice is not None and set(resize.slice.flavors.values()) - {"b"} == set()
    assert resize.slice.pods_per_node() == {"b1": 1}
    assert [a.workload.name for a in plan.admissions] == ["other"]
