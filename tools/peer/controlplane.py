"""The test control plane's rig (tests/controlplane/rig.py), importable from tools.

It lives with the tests because the cluster tests own it; the harness starts one
of its own per snapshot (a Kueue run needs a cluster of its own: its nodes,
queues and cluster-scoped objects are the snapshot's).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RIG_DIR = REPO / "tests" / "controlplane"
if str(RIG_DIR) not in sys.path:
    sys.path.insert(0, str(RIG_DIR))

import rig  # noqa: E402  (tests/controlplane/rig.py: the same module the cluster tests import)

__all__ = ["rig", "REPO", "RIG_DIR"]
