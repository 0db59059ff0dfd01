"""Snapshots from the generator (`stowplan generate`), written to JSON and read back as
a user would plan them: the cluster several tests share, built in one place."""

from __future__ import annotations

import json
from pathlib import Path

from models import Snapshot
from planner.tools.generate import generate, preset
from planner.snapshot import read_snapshot


def small_cluster(tmp_path: Path, seed: int = 9) -> Snapshot:
    """A generated cluster of 64 nodes, 60 pending and 60 running workloads (at seed 9
    greedy leaves the second tier well short and the stages change the start)."""
    path = tmp_path / f"small-{seed}.json"
    path.write_text(json.dumps(generate(preset("S", fanout=(2, 4, 8), teams=4, pending=60, running=60, seed=seed))))
    return read_snapshot([str(path)])
