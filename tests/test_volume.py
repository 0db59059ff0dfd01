"""Volume, the objective's first measure: GPUs of GPU work, cores of CPU-only work."""

from __future__ import annotations

from builders import assignment, cq, job, node, pod_set, snapshot, workload
from planner.kueue.semantics import assigned_volume, pod_volume


def test_a_gpu_workloads_cpu_only_launcher_adds_no_volume():
    """A JobSet of a 4-core launcher and four 8-GPU workers is 32 GPUs of volume, as
    served_gpus counts it: counting the launcher's cores made its admission look four
    units larger than the GPUs it serves."""
    launcher, workers = pod_set("launcher", 1, cpu="4"), pod_set("workers", 4, gpu=8, cpu="32")
    train = workload("ml", "train", pod_sets=[launcher, workers], kind="JobSet", cq="team")
    snap = snapshot(nodes=[node("n1", gpu=32, cpu="256")], cqs=[cq("team")], workloads=[train])
    assert pod_volume(train, launcher, snap) == 0.0
    assert pod_volume(train, workers, snap) == 8.0
    placed = [assignment(launcher, {"n1": 1}), assignment(workers, {"n1": 4})]
    assert assigned_volume(train, placed, snap) == 32.0


def test_cpu_only_work_counts_its_cores():
    etl = job("ml", "etl", pods=2, cpu="6", cq="team")
    snap = snapshot(nodes=[node("n1", cpu="64")], cqs=[cq("team")], workloads=[etl])
    assert pod_volume(etl, etl.pod_sets[0], snap) == 6.0
    assert assigned_volume(etl, [assignment(etl.pod_sets[0], {"n1": 2})], snap) == 12.0
