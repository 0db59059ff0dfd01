"""Admission fair sharing (Kueue's admissionScope UsageBasedAdmissionFairSharing),
hand-computed.

One ClusterQueue with nominal 8 GPUs and two LocalQueues, x and y. Half-life one hour:
a workload of r GPUs running for t hours has added r x (1 - 0.5^t) to its LocalQueue's
usage. x runs 4 GPUs since 1 h ago: 4 x 0.5 = 2.0; y runs 2 GPUs since 2 h ago: 2 x 0.75
= 1.5 (cpu and memory weighted 0). 6 of 8 GPUs are used: 2 are free.
"""

from __future__ import annotations

import dataclasses

import pytest

from builders import GPU, ago, cq, flavor, job, lq, node, running_job, snapshot
from models import AdmissionFairSharingConfig, KueueConfig
from planner.cycle import plan_snapshot
from planner.greedy import greedy
from planner.kueue.semantics import admission_fair_sharing, local_queue_usage, queue_order_key

HOUR = 3600.0


def setup(*pending, afs: bool = True, sampling: float = 300.0):
    queue = cq("cq", quotas={"default": {GPU: 8, "cpu": 1000, "memory": "10Ti"}})
    if afs:
        queue = dataclasses.replace(queue, admission_mode="UsageBasedAdmissionFairSharing")
    running = [running_job("ns", "x-run", "x", cq="cq", gpu=1, nodes={"n1": 4}, admitted=ago(hours=1)),
               running_job("ns", "y-run", "y", cq="cq", gpu=1, nodes={"n1": 2}, admitted=ago(hours=2))]
    snap = snapshot(nodes=[node("n1", gpu=8)], flavors=[flavor("default")], cqs=[queue],
                    lqs=[lq("ns", "x", "cq"), lq("ns", "y", "cq")], workloads=running + list(pending))
    config = AdmissionFairSharingConfig(usage_half_life_seconds=HOUR, usage_sampling_interval_seconds=sampling,
                                        resource_weights={"cpu": 0.0, "memory": 0.0})
    return dataclasses.replace(snap, kueue_config=KueueConfig(admission_fair_sharing=config))


def want(name: str, queue: str, gpus: int = 1, minutes: float = 10, priority: int = 0):
    return job("ns", name, queue, cq="cq", pods=gpus, gpu=1, created=ago(minutes=minutes), priority=priority)


def test_decayed_usage_per_local_queue() -> None:
    usage = local_queue_usage(setup())
    assert usage[("ns", "x")] == pytest.approx(2.0)
    assert usage[("ns", "y")] == pytest.approx(1.5)


def test_off_without_the_queues_admission_scope() -> None:
    snap = setup(afs=False)
    assert admission_fair_sharing(snap) is None and local_queue_usage(snap) == {}


def test_local_queue_weight_divides_its_usage() -> None:
    snap = setup()
    lqs = dict(snap.local_queues)
    lqs[("ns", "x")] = dataclasses.replace(lqs[("ns", "x")], fair_weight=4.0)
    assert local_queue_usage(dataclasses.replace(snap, local_queues=lqs))[("ns", "x")] == pytest.approx(0.5)


def test_less_used_local_queue_first_at_equal_priority_only() -> None:
    old_x, new_y = want("x1", "x", minutes=50), want("y1", "y", minutes=5)
    snap = setup(old_x, new_y)
    by = {w.ref.name: w for w in snap.workloads}
    assert queue_order_key(by["y1"], snap) < queue_order_key(by["x1"], snap)      # 1.5 < 2.0, though newer
    high_x = dataclasses.replace(by["x1"], priority=10)
    assert queue_order_key(high_x, snap) < queue_order_key(by["y1"], snap)       # priority first


def admitted(decisions) -> list[str]:
    return sorted(a.workload.name for a in decisions.admissions)


def test_greedy_admits_the_less_used_local_queue_first() -> None:
    # 2 GPUs free; x's 2-GPU job is older, y's is newer: y's goes (1.5 < 2.0).
    jobs = (want("x1", "x", gpus=2, minutes=50), want("y1", "y", gpus=2, minutes=5))
    assert admitted(greedy(setup(*jobs)).decisions) == ["y1"]
    assert admitted(greedy(setup(*jobs, afs=False)).decisions) == ["x1"]        # off: the older


def test_greedy_charges_each_admission_to_its_local_queue() -> None:
    """Sampling interval = half-life: each admission adds 0.5 x its GPUs (Kueue's entry
    penalty) to its LocalQueue. y1 goes first (1.5 < 2.0), y is then at 2.0 = x, and x1,
    older than y2, takes the last GPU."""
    jobs = (want("x1", "x", minutes=50), want("y1", "y", minutes=20), want("y2", "y", minutes=10))
    assert admitted(greedy(setup(*jobs, sampling=HOUR)).decisions) == ["x1", "y1"]


def test_milp_plan_takes_the_same_order() -> None:
    jobs = (want("x1", "x", gpus=2, minutes=50), want("y1", "y", gpus=2, minutes=5))
    plan = plan_snapshot(setup(*jobs))
    assert plan.solver.method == "milp" and admitted(plan) == ["y1"]
    assert admitted(plan_snapshot(setup(*jobs, afs=False))) == ["x1"]
