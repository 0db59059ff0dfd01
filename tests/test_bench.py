"""`stowplan bench`: a tiny scenario end to end, the records' keys, the marker rewrite.

Speed is measured by the benchmark itself, never asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.tools import bench
from planner.cli import cli
from planner.tools.generate import preset

REPO = Path(__file__).resolve().parent.parent
TINY = preset("S", fanout=(2, 2, 4), teams=3, pending=20, running=20)

RECORD_KEYS = {"method", "status", "message", "objective", "bound", "ratio", "gap", "seconds", "wall", "stages",
               "peak_rss_mib", "served_gpus", "utilization", "admitted", "evicted", "pending", "preemption_cost",
               "locality", "free_domains", "model"}


def test_a_tiny_scenario_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    result = bench.run_bench({"tiny": (TINY, bench.Target(2.0, 0.999, 1024.0))}, [REPO / "fixtures" / "tiny.yaml"], out)
    [row] = result["scale"]
    assert (row["scenario"], row["nodes"], row["gpus"], row["levels"]) == ("tiny", 16, 128, 3)
    assert row["pending"] == 20 and 0 < row["running"] <= 20
    assert row["time_limit"] == 1.9                               # the target less 5% for writing the plan
    for key, solver in (("milp", "milp"), ("milp_half", "milp"), ("greedy", "greedy")):
        record = row[key]
        assert "error" not in record, record
        assert set(record) == RECORD_KEYS
        assert record["method"] == solver
        assert set(record["seconds"]) == {"read", "build", "solve", "verify", "total"}
        assert record["peak_rss_mib"] > 0 and record["wall"] > 0
        assert set(record["served_gpus"]) == {1000, 100, 0}
        assert set(record["free_domains"]) == {"cloud.provider.com/topology-block",
                                               "cloud.provider.com/topology-rack", "kubernetes.io/hostname"}
    assert bench.served_order(row["milp"]["served_gpus"], row["greedy"]["served_gpus"]) in ("better", "equal")
    assert set(row["milp"]["model"]) == {"columns", "rows", "nonzeros"} and row["milp"]["model"]["columns"] > 0
    assert row["greedy"]["model"] == {}                           # greedy builds no model
    [fixture] = result["fixtures"]
    assert fixture["fixture"] == "tiny.yaml"
    assert fixture["milp"]["admitted"] == 2 and fixture["milp"]["status"] == "optimal"
    text = out.read_text()
    assert text.startswith("# Benchmarks")
    for name in ("scale", "fixtures"):
        begin, end = bench.marker(name)
        assert text.count(begin) == 1 and text.count(end) == 1
    assert "| tiny | 16 / 128 | 3 | 20 + " in text and "| tiny.yaml | milp | optimal | 2 |" in text
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(bench.jsonable(result)))
    again = bench.report(*bench.load_results(saved), None)            # --from-json: the same tables
    assert again["markdown"] == result["markdown"]


def test_the_marker_rewrite_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Mine\n\nhand-written intro\n\n<!-- bench:scale -->\nold table\n<!-- /bench:scale -->\n\n"
                    "## Notes\n\nkept too\n")
    bench.write_benchmarks(path, {"scale": ("## Scale", "new table"), "fixtures": ("## Fixtures", "fixture rows")})
    assert path.read_text() == ("# Mine\n\nhand-written intro\n\n<!-- bench:scale -->\nnew table\n"
                                "<!-- /bench:scale -->\n\n## Notes\n\nkept too\n\n## Fixtures\n\n"
                                "<!-- bench:fixtures -->\nfixture rows\n<!-- /bench:fixtures -->\n")
    before = path.read_text()
    bench.write_benchmarks(path, {"scale": ("## Scale", "new table")})
    assert path.read_text() == before                             # idempotent


def test_growth_exponent_is_the_log_log_slope() -> None:
    assert bench.growth_exponent([(512, 1.0), (4096, 8.0)]) == pytest.approx(1.0)
    assert bench.growth_exponent([(512, 1.0), (4096, 64.0), (16384, 1024.0)]) == pytest.approx(2.0)
    assert bench.growth_exponent([(512, 1.0)]) is None


def test_served_order_is_lexicographic_from_the_highest_priority() -> None:
    assert bench.served_order({1000: 8, 0: 0}, {1000: 4, 0: 50}) == "better"
    assert bench.served_order({1000: 4, 0: 10}, {1000: 4, 0: 50}) == "WORSE"
    assert bench.served_order({1000: 4}, {1000: 4}) == "equal"
    assert bench.versus({1000: 8, 0: 0}, {1000: 4, 0: 50}) == "better; less at 0"
    assert bench.versus({1000: 4, 0: 50}, {1000: 4, 0: 50}) == "equal; ≥ at every priority"


def test_a_failed_plan_is_a_row_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [\n")
    record = bench.plan_in_process(bad, "milp")
    assert record["error"].startswith("exit 2")
    lines = bench.fixtures_markdown([{"fixture": "bad.yaml", "milp": record, "greedy": record}],
                                    {"date": "d", "commit": "c"})
    assert any("FAILED: exit 2" in line for line in lines)


def test_the_command_is_registered_with_its_options(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["bench", "--help"])
    assert result.exit_code == 0
    for option in ("--scenario", "--xl", "--time-limit-factor", "--out", "--fixtures / --no-fixtures"):
        assert option in result.output


def test_what_if_reports_peak_rss_beside_seconds(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(cli, ["what-if", str(REPO / "fixtures" / "tiny.yaml"), "-o", "json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    solver = json.loads(out.read_text())["solver"]
    keys = list(solver)
    assert keys.index("peak_rss_mib") == keys.index("seconds") + 1
    assert solver["peak_rss_mib"] > 0


def test_peak_rss_is_the_planning_process_own_not_its_parent() -> None:
    """ru_maxrss survives execve: a what-if started by a big bench process must not report the bench's size."""
    ballast = bytearray(400 * 2**20)                              # this process: > 400 MiB resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    record = bench.plan_in_process(REPO / "fixtures" / "tiny.yaml", "greedy")
    assert 0 < record["peak_rss_mib"] < 350, record["peak_rss_mib"]
    del ballast
