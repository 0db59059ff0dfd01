"""Start Stowplan's test control plane for a person to play with.

    .venv/bin/python tests/controlplane/up.py [--no-build] [--workdir DIR] [--complete-jobs]
                                              [--nodes N] [--gpus-per-node G]

Builds what is missing (tests/controlplane/build.sh), starts etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and KWOK with Kueue's
and JobSet's CRDs, prints the kubeconfig, and runs until Ctrl-C (or SIGTERM),
then stops everything.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-build", action="store_true", help="do not run build.sh, use the manifest as is")
    ap.add_argument("--workdir", help="keep certs, kubeconfig and logs here (default: a temp dir, removed at exit)")
    ap.add_argument("--complete-jobs", action="store_true",
                    help="let KWOK move Running Job pods to Succeeded")
    ap.add_argument("--nodes", type=int, default=0,
                    help="create N KWOK nodes kwok-0..N-1 (2 per rack, 4 racks per block)")
    ap.add_argument("--gpus-per-node", default="8")
    args = ap.parse_args(argv)

    manifest = rig.load_manifest() if args.no_build else rig.build()
    cp = rig.ControlPlane(workdir=args.workdir, manifest=manifest,
                          keep_workdir=bool(args.workdir), job_pods_complete=args.complete_jobs)

    stop = {"now": False}

    def on_signal(signum, frame):  # noqa: ARG001
        stop["now"] = True

    # SIGINT explicitly too: started in the background by a script, Python
    # would inherit SIGINT as ignored and never see Ctrl-C/kill -INT.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    t0 = time.monotonic()
    cp.start()
    try:
        for i in range(args.nodes):
            cp.make_node(f"kwok-{i}", labels={
                "cloud.provider.com/topology-block": f"block-{i // 8}",
                "cloud.provider.com/topology-rack": f"rack-{i // 2}",
            }, allocatable={"nvidia.com/gpu": args.gpus_per_node})
        print(f"Kubernetes {cp.version} control plane up in {time.monotonic() - t0:.1f}s", flush=True)
        print(f"  API server : {cp.server}")
        print(f"  work dir   : {cp.workdir} (logs in {cp.logs})")
        print(f"  kubeconfig : {cp.kubeconfig}")
        print(f"\nexport KUBECONFIG={cp.kubeconfig}\n", flush=True)
        print("Ctrl-C stops it.", flush=True)
        while not stop["now"]:
            time.sleep(1)
            cp.check()
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping...", file=sys.stderr, flush=True)
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
