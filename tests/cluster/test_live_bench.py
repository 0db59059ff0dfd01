"""Apply time of a realistic cycle on the rig: 200 single-pod Jobs admitted onto 50 KWOK nodes.

Prints (and, with STOWPLAN_BENCH_OUT=FILE, writes as JSON) the read, plan, write
and gate-release times; asserts every pod binds where the plan said.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from planner.cluster import Kube, apply_live, connect
from test_live_kit import Env, wait_for

# STOWPLAN_BENCH_JOBS / STOWPLAN_BENCH_NODES scale it up by hand
JOBS = int(os.environ.get("STOWPLAN_BENCH_JOBS", "200"))
NODES = int(os.environ.get("STOWPLAN_BENCH_NODES", "50"))


@pytest.mark.slow
def test_apply_hundreds_of_single_pod_jobs(control_plane, api_client, namespace):
    env = Env(control_plane, api_client, namespace, nodes=NODES, gpus=8)
    try:
        for i in range(JOBS):
            env.job(f"j{i:03d}", pods=1, gpus=1)
        kube = Kube(connect(str(control_plane.kubeconfig)))
        started = time.monotonic()
        plan, report = apply_live(kube, lease_namespace=namespace, identity="bench", release_wait=60)
        total = time.monotonic() - started
        assert len(report.admitted) == JOBS and report.conflicts == []
        planned = {a.workload.name: a.pod_sets[0].pods_per_node() for a in plan.admissions}

        def all_bound():
            pods = [p for p in env.pods() if p.spec.node_name]
            return pods if len(pods) == JOBS else None

        t_bind = time.monotonic()
        pods = wait_for("every pod bound", all_bound, timeout=180 + JOBS / 5, interval=1.0)
        bind_wait = time.monotonic() - t_bind
        for p in pods:
            job = p.metadata.labels["batch.kubernetes.io/job-name"]
            assert planned[job] == {p.spec.node_name: 1}
        numbers = {
            "jobs": JOBS, "nodes": NODES, "cycle_seconds": round(total, 2),
            "read_seconds": round(float(plan.solver.seconds.get("read", 0)), 2),
            "plan_seconds": round(float(plan.solver.seconds.get("total", 0)), 2),
            "write_seconds": report.seconds["workloads"], "release_seconds": report.seconds["release"],
            "pods_released": report.released, "writes": report.writes,
            "extra_wait_for_binding_seconds": round(bind_wait, 2),
        }
        print("\napply benchmark:", json.dumps(numbers))
        if os.environ.get("STOWPLAN_BENCH_OUT"):
            with open(os.environ["STOWPLAN_BENCH_OUT"], "w") as out:
                json.dump(numbers, out, indent=2)
    finally:
        env.cleanup()
