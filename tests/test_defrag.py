"""Defragmentation by planned migration (issue 28 item 2): hand-computed cases.

The Kueue #12478 shape: four racks of two 8-GPU nodes. Rack ra runs two small jobs
(s1 on ra-n0, s2 on ra-n1, 4 GPUs each), rack rb three (s3, s4 on rb-n0, s5 on
rb-n1), rack rc a non-movable 8-GPU job c1 on rc-n0, rack rd two movable jobs (t1,
t2, 4 GPUs each) that never checkpointed. Free: ra 8, rb 4, rc 8, rd 8 = 28 GPUs,
no rack with 16. A pending job needs 2 x 8 GPUs in one rack.

Costs (policy defaults: restartCost 1, maxLostHours 24), now = 12:00:
  s1..s5 checkpointed 10 min ago: 4 GPUs x 1/6 h + 1 = 5/3 each;
  t1, t2 admitted 10 h ago, no checkpoint: 4 x 10 + 1 = 41 each.
So: freeing ra moves s1, s2 (2 moves, 10/3); rb moves s3, s4, s5 (3 moves, 5);
rd moves t1, t2 (2 moves, 82); rc cannot be freed (c1 is not movable).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import GPU, ago, cq, flavor, job, lq, node, required, running_job, snapshot, topology
from models import Decisions, Domain, Migration, ObjectRef, Policy, PodSetAssignment, Snapshot, WorkloadState
from planner.cycle import plan_snapshot
from planner.base.errors import InputError
from planner.milp.model import formulate
from planner.output.document import plan_to_dict, to_table
from planner.snapshot.policy import parse_policy
from planner.verify import verify

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
RECENT = dict(checkpointed=ago(minutes=10), admitted=ago(hours=10))
SMALL_COST = round(4 * (10 / 60) + 1, 6)
ON = Policy(defragment=True)


def rack(name: str) -> list:
    return [node(f"{name}-n{i}", gpu=8, labels={BLOCK: "b0", RACK: name}) for i in range(2)]


def cluster(policy: Policy, *, s1: dict | None = None, extra: tuple = ()) -> Snapshot:
    workloads = [
        running_job("t", "s1", nodes={"ra-n0": 4}, gpu=1, **(RECENT if s1 is None else s1)),
        running_job("t", "s2", nodes={"ra-n1": 4}, gpu=1, **RECENT),
        running_job("t", "s3", nodes={"rb-n0": 4}, gpu=1, **RECENT),
        running_job("t", "s4", nodes={"rb-n0": 4}, gpu=1, **RECENT),
        running_job("t", "s5", nodes={"rb-n1": 4}, gpu=1, **RECENT),
        running_job("t", "c1", nodes={"rc-n0": 1}, gpu=8, admitted=ago(hours=10)),
        running_job("t", "t1", nodes={"rd-n0": 4}, gpu=1, movable=True, admitted=ago(hours=10)),
        running_job("t", "t2", nodes={"rd-n1": 4}, gpu=1, movable=True, admitted=ago(hours=10)),
        job("t", "rackjob", pods=2, gpu=8, priority=100, topology=required(RACK)),
        *extra,
    ]
    return snapshot(nodes=rack("ra") + rack("rb") + rack("rc") + rack("rd"),
                    flavors=[flavor("tas", topology="topo")], topologies=[topology("topo", BLOCK, RACK, HOST)],
                    cqs=[cq("cq", quotas={"tas": {GPU: 1000, "cpu": 1000, "memory": "100Ti"}})],
                    lqs=[lq("t", "lq", "cq")], workloads=workloads, policy=policy)


def planned(snap: Snapshot):
    plan = plan_snapshot(snap)
    assert plan.solver.status == "optimal", plan.solver.message
    assert verify(snap, Decisions(plan.admissions, plan.evictions, plan.migrations)) == []
    return plan


def racks(assignments: tuple[PodSetAssignment, ...]) -> set[str]:
    return {values[-1].split("-n")[0] for ps in assignments for values, _ in ps.domains}


def moved(plan) -> dict[str, set[str]]:
    return {m.workload.name: racks(m.to) for m in plan.migrations}


def test_kueue_12478_one_cycle_fewest_cheapest_moves():
    snap = cluster(ON)
    plan = planned(snap)
    (admission,) = plan.admissions
    assert admission.workload.name == "rackjob" and racks(admission.pod_sets) == {"ra"}
    assert plan.evictions == () and plan.pending == ()
    assert sorted(moved(plan)) == ["s1", "s2"]                       # 2 moves, cost 10/3: the cheapest
    for m in plan.migrations:
        assert "ra" not in racks(m.to)
        assert m.frees == (Domain((BLOCK, RACK), ("b0", "ra")),)
        assert m.for_ == (ObjectRef("Job", "t", "rackjob"),)
        assert m.cost == SMALL_COST
        assert m.to[0].count == 4 and m.to[0].flavors == m.from_[0].flavors
    assert plan.summary["migrated"] == 2
    assert plan.summary["migration_cost"] == pytest.approx(2 * SMALL_COST)
    assert plan.summary["served_gpus"][100] == 16


def test_switch_off_nothing_moves_and_the_model_has_no_move():
    snap = cluster(Policy())
    plan = planned(snap)
    assert plan.migrations == () and plan.admissions == () and plan.evictions == ()
    assert [p.workload.name for p in plan.pending] == ["rackjob"]
    assert "migrations" not in plan_to_dict(plan) and "migrated" not in plan.summary
    form = formulate(snap)
    assert form.movers == [] and form.move_col == []
    # budget and window without the switch change nothing either: the same arrays
    other = formulate(replace(snap, policy=Policy(max_migrations_per_cycle=9,
                                                  migration_checkpoint_window_seconds=5.0)))
    assert other.arrays.col_lower == form.arrays.col_lower and other.arrays.entry_val == form.arrays.entry_val


def test_budget_of_one_cannot_free_a_rack_so_nothing_moves():
    plan = planned(cluster(Policy(defragment=True, max_migrations_per_cycle=1)))
    assert plan.migrations == () and plan.admissions == ()


def test_non_movable_never_moves_cost_before_count():
    """s1 never checkpointed and is not marked movable: ra cannot be freed. Freeing rb
    takes 3 moves costing 5, rd 2 moves costing 82: the cheaper wins."""
    plan = planned(cluster(ON, s1=dict(admitted=ago(hours=10))))
    assert racks(plan.admissions[0].pod_sets) == {"rb"}
    assert sorted(moved(plan)) == ["s3", "s4", "s5"]
    assert plan.summary["migration_cost"] == pytest.approx(3 * SMALL_COST)


def test_budget_two_takes_the_dearer_two_moves():
    plan = planned(cluster(Policy(defragment=True, max_migrations_per_cycle=2), s1=dict(admitted=ago(hours=10))))
    assert racks(plan.admissions[0].pod_sets) == {"rd"}
    assert sorted(moved(plan)) == ["t1", "t2"]
    assert plan.summary["migration_cost"] == pytest.approx(82)


def test_checkpoint_window_decides_eligibility():
    """With a 5-minute window the 10-minute-old checkpoints no longer count: only t1, t2 may move."""
    plan = planned(cluster(Policy(defragment=True, migration_checkpoint_window_seconds=300)))
    assert sorted(moved(plan)) == ["t1", "t2"]


def test_lower_priority_required_work_moves_nothing():
    """A move is made only for required-topology work of at least the mover's priority."""
    snap = cluster(ON)
    low = [replace(w, priority=200) if w.state is WorkloadState.RUNNING else replace(w, priority=100)
           for w in snap.workloads]
    plan = planned(replace(snap, workloads=tuple(low)))
    assert plan.migrations == () and plan.admissions == ()


def test_plan_document_and_table_list_migrations():
    plan = planned(cluster(ON))
    data = plan_to_dict(plan)
    assert list(data)[:8] == ["apiVersion", "kind", "snapshot", "solver", "admissions", "evictions", "migrations",
                              "pending"]
    first = data["migrations"][0]
    assert first["workload"] == {"kind": "Job", "namespace": "t", "name": "s1"}
    assert first["from"][0]["topologyAssignment"]["domains"] == [{"values": ["ra-n0"], "count": 4}]
    assert first["frees"] == [{"levels": [BLOCK, RACK], "values": ["b0", "ra"]}]
    assert first["for"] == [{"kind": "Job", "namespace": "t", "name": "rackjob"}]
    table = to_table(plan)
    moves = [line for line in table.splitlines() if line.startswith("t/") and " move " in line]
    assert len(moves) == 2 and any("frees b0/ra" in line for line in moves)


# ---------------------------------------------------------------- the verifier on its own

def move(snap: Snapshot, name: str, to: dict[str, int], frees=("b0", "ra")) -> Migration:
    w = next(w for w in snap.workloads if w.ref.name == name)
    (old,) = w.assignment
    new = replace(old, domains=tuple(((n,), c) for n, c in sorted(to.items())), count=sum(to.values()))
    return Migration(w.ref, "cq", w.assignment, (new,), (Domain((BLOCK, RACK), frees),),
                     (ObjectRef("Job", "t", "rackjob"),), SMALL_COST)


def rack_admission(snap: Snapshot, nodes: tuple[str, str] = ("ra-n0", "ra-n1")):
    plan = planned(cluster(ON))
    (a,) = plan.admissions
    ps = replace(a.pod_sets[0], domains=tuple(((n,), 1) for n in nodes))
    return replace(a, pod_sets=(ps,))


def test_verifier_accepts_a_hand_made_move_and_rejects_each_broken_rule():
    snap = cluster(ON)
    admit = rack_admission(snap)
    good = Decisions((admit,), (), (move(snap, "s1", {"rd-n0": 4}), move(snap, "s2", {"rd-n1": 4})))
    assert verify(snap, good) == []
    # the switch off
    off = replace(snap, policy=Policy())
    assert any("defragment is off" in v for v in verify(off, good))
    # over budget
    one = replace(snap, policy=Policy(defragment=True, max_migrations_per_cycle=1))
    assert any("maxMigrationsPerCycle 1" in v for v in verify(one, good))
    # not movable: c1 (never checkpointed, not marked)
    c1 = move(snap, "c1", {"rd-n0": 1})
    assert any("Job/t/c1: moved but it is neither marked movable" in v
               for v in verify(snap, Decisions((admit,), (), good.migrations + (c1,))))
    # a move that frees nothing the plan admits into
    t1 = move(snap, "t1", {"rb-n1": 4}, frees=("b0", "rd"))
    assert any("Job/t/t1: moved, but no admission" in v
               for v in verify(snap, Decisions((admit,), (), good.migrations + (t1,))))
    # the moved workload must fit its new place: rd-n0 holds t1's 4 GPUs, s1 and s2 would make 12
    crowded = Decisions((admit,), (), (move(snap, "s1", {"rd-n0": 4}), move(snap, "s2", {"rd-n0": 4})))
    assert any(v.startswith("node rd-n0: nvidia.com/gpu 12 > allocatable 8") for v in verify(snap, crowded))
    # without the moves the rack job does not fit: the moves are what frees the rack
    assert any(v.startswith("node ra-n0") for v in verify(snap, Decisions((admit,), ())))


def test_verifier_counts_a_move_in_quota_as_eviction_plus_admission():
    """Quota of exactly what runs plus the rack job: a move keeps its quota, so it fits;
    counted twice (never given back) it would not."""
    snap = cluster(ON)
    used = 4 * 7 + 8 + 16
    tight = replace(snap, cluster_queues={"cq": cq("cq", quotas={"tas": {GPU: used, "cpu": 1000,
                                                                        "memory": "100Ti"}})})
    admit = rack_admission(tight)
    moves = (move(tight, "s1", {"rd-n0": 4}), move(tight, "s2", {"rd-n1": 4}))
    assert verify(tight, Decisions((admit,), (), moves)) == []
    tighter = replace(tight, cluster_queues={"cq": cq("cq", quotas={"tas": {GPU: used - 1, "cpu": 1000,
                                                                            "memory": "100Ti"}})})
    assert any("quota" in v for v in verify(tighter, Decisions((admit,), (), moves)))


# ---------------------------------------------------------------- several cycles: no ping-pong

def applied(snap: Snapshot, plan, hours: float, arrivals: tuple = ()) -> Snapshot:
    """The snapshot after `plan` is carried out, `hours` later; every running job
    checkpoints at the new time (so all of them stay eligible to move)."""
    admitted = {a.workload: a for a in plan.admissions}
    moves = {m.workload: m for m in plan.migrations}
    evicted = {e.workload for e in plan.evictions}
    later = snap.now + hours * 3600
    out = []
    for w in snap.workloads:
        if w.ref in admitted:
            w = replace(w, state=WorkloadState.RUNNING, assignment=admitted[w.ref].pod_sets, admitted_at=snap.now)
        elif w.ref in moves:
            w = replace(w, assignment=moves[w.ref].to, admitted_at=snap.now)
        elif w.ref in evicted:
            w = replace(w, state=WorkloadState.PENDING, assignment=(), admitted_at=None)
        if w.state is WorkloadState.RUNNING:
            w = replace(w, checkpointed_at=later)
        out.append(w)
    extra = tuple(replace(a, cluster_queue="cq", created_at=later, queued_at=later) for a in arrivals)
    return replace(snap, workloads=tuple(out) + extra, now=later)


def test_cycles_replayed_never_move_back_and_never_move_for_nothing():
    """Cycle 1 moves s1, s2 to free ra. Cycle 2 (a small job arrives), cycle 3 (a second
    rack job that no move can fit: 12 GPUs free outside any rack, 16 needed) and cycle 4
    move nothing: no move back, no move without a gain."""
    snap = cluster(ON)
    history: list[dict[str, set[str]]] = []
    arrivals = {2: (job("t", "small", pods=1, gpu=2),),
                3: (job("t", "rackjob2", pods=2, gpu=8, priority=100, topology=required(RACK)),)}
    for number in range(1, 5):
        plan = planned(snap)
        history.append(moved(plan))
        snap = applied(snap, plan, 0.5, arrivals.get(number + 1, ()))
    assert history[0] == {"s1": {"rd"}, "s2": {"rd"}}
    assert history[1:] == [{}, {}, {}]
    final = {w.ref.name: racks(w.assignment) for w in snap.workloads if w.state is WorkloadState.RUNNING}
    assert final["rackjob"] == {"ra"} and final["s1"] == {"rd"} and final["s2"] == {"rd"}
    assert final["small"] and "rackjob2" not in final


# ---------------------------------------------------------------- policy fields

def test_policy_fields_parse_and_bad_values_name_the_field():
    policy = parse_policy({"spec": {"defragment": True, "maxMigrationsPerCycle": 3,
                                    "migrationCheckpointWindowSeconds": 600}}, "p.yaml")
    assert (policy.defragment, policy.max_migrations_per_cycle, policy.migration_checkpoint_window_seconds) == \
        (True, 3, 600.0)
    assert Policy().defragment is False
    for spec, field in (({"defragment": "yes"}, "spec.defragment"),
                        ({"maxMigrationsPerCycle": -1}, "spec.maxMigrationsPerCycle"),
                        ({"maxMigrationsPerCycle": 1.5}, "spec.maxMigrationsPerCycle"),
                        ({"migrationCheckpointWindowSeconds": -5}, "spec.migrationCheckpointWindowSeconds")):
        with pytest.raises(InputError) as err:
            parse_policy({"spec": spec}, "p.yaml")
        assert field in str(err.value) and "p.yaml" in str(err.value)



def test_metrics_count_the_moves_only_with_the_switch_on():
    from prometheus_client.parser import text_string_to_metric_families
    from planner.output import promtext
    def metrics(snap):
        plan = planned(snap)
        text = promtext.text(promtext.registry_for(plan, promtext.queues_of(snap), now=0.0))
        return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}

    on = metrics(cluster(ON))
    assert on["stowplan_migrated_workloads_total"] == 2.0
    assert on["stowplan_migration_cost"] == pytest.approx(2 * SMALL_COST)
    assert "stowplan_migrated_workloads_total" not in metrics(cluster(Policy()))
