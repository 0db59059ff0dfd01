"""Apply time of a realistic cycle on the test control plane, by hand (not part of the suite).

    .venv/bin/python tests/controlplane/bench_apply.py [--jobs 200] [--nodes 50] [--json FILE]

Single-pod suspended Jobs onto fresh KWOK nodes, one `apply` cycle with 8 writers:
prints (and with --json writes) the read, plan, write and gate-release times, and
checks that every pod binds where the plan said. A benchmark measures the machine
of the moment, so it lives beside `stowplan bench` and BENCHMARKS.md, never in
`make test`: a busy machine must not fail the suite (issue 23).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "cluster"), str(HERE.parent.parent)]

import rig  # noqa: E402
from kubernetes import client  # noqa: E402
from live_kit import Env, wait_for  # noqa: E402

from planner.cluster import Kube, apply_live, connect  # noqa: E402


def measure(cp: rig.ControlPlane, jobs: int, nodes: int) -> dict[str, float | int]:
    with cp.api_client() as api:
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        env = Env(cp, api, namespace, nodes=nodes, gpus=8)
        try:
            for i in range(jobs):
                env.job(f"j{i:04d}", pods=1, gpus=1)
            kube = Kube(connect(str(cp.kubeconfig)))
            started = time.monotonic()
            plan, report = apply_live(kube, lease_namespace=namespace, identity="bench", release_wait=60)
            total = time.monotonic() - started
            assert len(report.admitted) == jobs and report.conflicts == [], report.summary()
            planned = {a.workload.name: a.pod_sets[0].pods_per_node() for a in plan.admissions}

            def all_bound():
                pods = [p for p in env.pods() if p.spec.node_name]
                return pods if len(pods) == jobs else None

            t_bind = time.monotonic()
            pods = wait_for("every pod bound", all_bound, timeout=180 + jobs / 5, interval=1.0)
            for p in pods:
                job = p.metadata.labels["batch.kubernetes.io/job-name"]
                assert planned[job] == {p.spec.node_name: 1}, f"{p.metadata.name} not where planned"
            return {
                "jobs": jobs, "nodes": nodes, "cycle_seconds": round(total, 2),
                "read_seconds": round(float(plan.solver.seconds.get("read", 0)), 2),
                "plan_seconds": round(float(plan.solver.seconds.get("total", 0)), 2),
                "write_seconds": report.seconds["workloads"], "release_seconds": report.seconds["release"],
                "pods_released": report.released, "writes": report.writes,
                "extra_wait_for_binding_seconds": round(time.monotonic() - t_bind, 2),
            }
        finally:
            env.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    with rig.ControlPlane(manifest=rig.build(quiet=True)) as cp:
        numbers = measure(cp, args.jobs, args.nodes)
    print(json.dumps(numbers))
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
