"""`stowplan bench --peer kueue` without a cluster: its tables from recorded results.

The measurement itself needs the test control plane and Kueue (tools/peer); it is
run by hand and never in the default test run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from click.testing import CliRunner

from planner.tools import bench, peer_bench
from planner.cli import cli

ROW = {
    "snapshot": "tiny.yaml", "nodes": 2, "pending": 4, "running": 0,
    "kueue": {"served_gpus": {"1000": 4, "100": 2, "0": 0}, "admitted": 2, "evicted": 0, "pending": 2,
              "preemption_cost": 0, "free_domains": {"kubernetes.io/hostname": 2}, "utilization": {},
              "seconds": 23.4, "settled": True, "quota_only": 2, "dropped": 0,
              "notes": ["2 admissions on flavors without a Topology: Kueue checked quota only"]},
    "greedy": {"served_gpus": {1000: 4, 100: 2, 0: 0}, "admitted": 2, "evicted": 0,
               "free_domains": {"kubernetes.io/hostname": 0}, "seconds": {"total": 0.01},
               "agreement": {"value": 1.0, "agreed": 4, "total": 4, "categories": {}, "disagreements": []}},
    "milp": {"served_gpus": {1000: 4, 100: 2, 0: 0}, "admitted": 2, "evicted": 0,
             "free_domains": {"kubernetes.io/hostname": 0}, "seconds": {"total": 0.4},
             "agreement": {"value": 0.75, "agreed": 3, "total": 4, "categories": {"pending/admitted": 1},
                           "disagreements": [{"workload": "Job/ml/x", "priority": 0, "clusterQueue": "cq",
                                              "kueue": "pending", "milp": "admitted (main: f)"}]}},
}


def test_the_peer_tables_show_every_planner_and_greedys_disagreements(tmp_path: Path) -> None:
    failing = {"snapshot": "bad.yaml", "error": "PeerError: no Kueue"}
    disagreeing = json.loads(json.dumps(ROW))
    disagreeing["snapshot"] = "two.yaml"
    disagreeing["greedy"]["agreement"] = {"value": 0.5, "agreed": 2, "total": 4, "categories": {"flavor": 2},
                                          "disagreements": [{"workload": "Job/ml/a", "priority": 100,
                                                             "clusterQueue": "cq", "kueue": "admitted (main: f)",
                                                             "greedy": "admitted (main: g)",
                                                             "why": ""}, {"workload": "Job/ml/r", "priority": 0,
                                                             "clusterQueue": "cq", "kueue": "evicted",
                                                             "greedy": "running",
                                                             "why": "InCohortReclamation by Job/ml/a"}]}
    out = tmp_path / "BENCHMARKS.md"
    result = peer_bench.peer_report({"date": "today", "commit": "abc"}, [ROW, disagreeing, failing], out)
    text = result["markdown"]
    assert "| tiny.yaml | 2 | 4 + 0 | kueue | 1000: 4; 100: 2; 0: 0 | 2 | 0 | hostname 2 | — | 23.4 (harness) |" in text
    assert "|  |  |  | greedy | 1000: 4; 100: 2; 0: 0 | 2 | 0 | hostname 0 | 1.0000 (4/4) | 0.01 |" in text
    assert "|  |  |  | milp | 1000: 4; 100: 2; 0: 0 | 2 | 0 | hostname 0 | 0.7500 (3/4) | 0.40 |" in text
    assert "- **two.yaml**: 2 of 4 (kueue/greedy: flavor 2)" in text
    assert "  - `Job/ml/a` (priority 100, cq): Kueue admitted (main: f); greedy admitted (main: g)" in text
    assert "  - `Job/ml/r` (priority 0, cq): Kueue evicted [InCohortReclamation by Job/ml/a]; greedy running" in text
    assert "| bad.yaml | — | — | kueue | FAILED: PeerError: no Kueue |" in text
    written = out.read_text()
    begin, end = bench.marker("peer")
    assert written.count(begin) == 1 and written.count(end) == 1 and "## Kueue v0.17.0 beside" in written


def test_bench_renders_peer_results_from_json(tmp_path: Path) -> None:
    saved = tmp_path / "peer.json"
    saved.write_text(json.dumps({"meta": {"date": "d", "commit": "c"}, "peer": [ROW]}))
    result = CliRunner().invoke(cli, ["bench", "--peer", "kueue", "--from-json", str(saved), "--out", "-"])
    assert result.exit_code == 0, result.output
    assert "| tiny.yaml | 2 | 4 + 0 | kueue |" in result.output


def test_peer_scenarios_are_small_generated_clusters() -> None:
    nodes = {name: math.prod(peer_bench.scenario_spec(name).fanout) for name in peer_bench.PEER_SCENARIOS}
    assert nodes == {"P128": 128, "P512": 512, "P1024": 1024}
    harness, compare = peer_bench.peer_modules()
    assert callable(harness.run_kueue) and callable(compare.compare)
