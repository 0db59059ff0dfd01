"""Ctrl-C and SIGTERM during `stowplan apply` on the real control plane (issue 33 item 3):
the write in flight finishes, no other write starts, exit 130 / 143 with one line saying
how far it got, no metrics written, the Lease given back; the next cycle applies the rest.

The signal is real and comes from this test, to a real `stowplan apply` process. To land
while a write is in flight (and not depend on how fast the API server answers), the
process runs with a hook on its third admission write (the `Kube.before_write` test hook):
it leaves a marker file and holds that write until the signal has arrived, then lets it go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from planner.base.solve_options import SolveOptions
from planner.cluster import Kube, apply_live
from live_kit import wait_for

REPO = Path(__file__).resolve().parent.parent.parent

HOLD_THIRD_ADMISSION = textwrap.dedent("""
    import sys, time
    from planner.base import interrupt
    from planner.cli import main
    from planner.cluster import kube as kube_module

    marker = sys.argv[1]
    puts = []
    made = kube_module.Kube.__init__

    def hold(method, path):
        if method == "PUT" and "/jobs/" in path:
            puts.append(path)
            if len(puts) == 3:           # the third admission: in flight until the signal has come
                open(marker, "w").write(path)
                deadline = time.monotonic() + 300
                while not interrupt.requested() and time.monotonic() < deadline:
                    time.sleep(0.02)

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.before_write = hold

    kube_module.Kube.__init__ = init
    main(sys.argv[2:])
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_apply_stops_after_the_write_in_flight(kube, env_factory, control_plane, tmp_path, signum):
    env = env_factory(nodes=4)
    names = [f"j{i}" for i in range(6)]
    for name in names:
        env.job(name, pods=2, gpus=2)
    marker, metrics = tmp_path / "holding", tmp_path / "m.prom"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_THIRD_ADMISSION, str(marker), "apply", "--kubeconfig",
         str(control_plane.kubeconfig), "--namespace", env.namespace, "--identity", "interrupted-planner",
         "--workers", "1", "--solver", "greedy", "--metrics", str(metrics)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("stowplan: ")]
    how = "terminated" if signum == signal.SIGTERM else "interrupted"
    assert len(lines) == 1 and lines[0].startswith(f"stowplan: {how} ({signal.Signals(signum).name}); "
                                                   "stopped after"), stderr
    assert "Traceback" not in stderr and stdout == ""
    assert not metrics.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["holding"]

    # the two admissions before it and the one in flight landed whole; nothing after it
    admitted = [n for n in names if env.batch.read_namespaced_job(n, env.namespace).spec.suspend is False]
    assert len(admitted) == 3, admitted
    held = marker.read_text().rsplit("/", 1)[1]
    assert held in admitted
    stowplan_events = [e.involved_object.name for e in env.core.list_namespaced_event(env.namespace).items
                       if e.source and e.source.component == "stowplan"]
    assert sorted(stowplan_events) == sorted(n for n in admitted if n != held)   # the held one's Event: never started
    # the Lease was given back: the next cycle need not wait for it to expire
    lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{env.namespace}/leases/stowplan-planner")
    assert not lease["spec"].get("holderIdentity")

    # the next cycle (another planner) plans from there and applies the rest
    plan, report = apply_live(kube, lease_namespace=env.namespace, identity="next-planner",
                              options=SolveOptions(solver="greedy"), release_wait=2)
    assert sorted(r.name for r in report.admitted) == sorted(set(names) - set(admitted))
    assert report.conflicts == []
    wait_for("every job admitted", lambda: all(
        env.batch.read_namespaced_job(n, env.namespace).spec.suspend is False for n in names))
