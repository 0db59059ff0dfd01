"""`stowplan bench`: a tiny scenario end to end, the records' keys, the marker rewrite.

Speed is measured by the benchmark itself, never asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.tools import bench, bench_command, family_bench
from planner.cli import cli
from planner.tools.family import describe, family
from planner.tools.generate import preset

REPO = Path(__file__).resolve().parent.parent
TINY = preset("S", fanout=(2, 2, 4), teams=3, pending=20, running=20)

RECORD_KEYS = {"method", "status", "message", "objective", "bound", "ratio", "gap", "seconds", "wall", "stages",
               "peak_rss_mib", "served_gpus", "served_cores", "utilization", "admitted", "evicted", "pending", "preemption_cost",
               "locality", "free_domains", "model"}


def test_a_tiny_scenario_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    result = bench_command.run_bench({"tiny": (TINY, bench.Target(2.0, 0.999, 1024.0))}, [REPO / "fixtures" / "tiny.yaml"], out)
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
    again = bench_command.report(*bench_command.load_results(saved), None)            # --from-json: the same tables
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
    record = bench.plan_in_subprocess(bad, "milp")
    assert record["error"].startswith("exit 2")
    lines = bench.fixtures_markdown([{"fixture": "bad.yaml", "milp": record, "greedy": record}],
                                    {"date": "d", "commit": "c"})
    assert any("FAILED: exit 2" in line for line in lines)


def test_the_command_is_registered_with_its_options(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["bench", "--help"])
    assert result.exit_code == 0
    for option in ("--scenario", "--xl", "--time-limit-factor", "--out", "--fixtures / --no-fixtures",
                   "--scenarios / --no-scenarios", "--family / --no-family", "--family-scale", "--family-seeds"):
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
    record = bench.plan_in_subprocess(REPO / "fixtures" / "tiny.yaml", "greedy")
    assert 0 < record["peak_rss_mib"] < 350, record["peak_rss_mib"]
    del ballast


# ---------------------------------------------------------------- the family section (issue 32)

def record(method="milp", total=1.0, served=None, stages=(), rss=100.0, status="optimal", error=None):
    """A plan record as plan_in_subprocess makes it (only what the family section reads)."""
    if error is not None:
        return {"method": method, "error": error, "wall": 1.0}
    return {"method": method, "status": status, "message": "", "objective": 1.0, "bound": 1.0, "ratio": 1.0,
            "gap": 0.0, "seconds": {"read": 0.1, "build": 0.1, "solve": 0.1, "verify": 0.1, "total": total},
            "wall": total + 0.5, "stages": [{"stage": name, "status": "optimal", "objective": o, "bound": b,
                                              "seconds": 0.1} for name, o, b in stages],
            "peak_rss_mib": rss, "model": {}, "served_gpus": dict(served or {1000: 8, 0: 4}), "utilization": {},
            "admitted": 3, "evicted": 0, "pending": 1, "preemption_cost": 0.0, "locality": {}, "free_domains": {}}


def family_row(scale, seed, **runs):
    target = family_bench.FAMILY_TARGETS[scale]
    limit = target.limit.time_limit()
    row = {"scale": scale, "seed": seed, "shape": "2 flavors same; 8 CQs; depth 2 (2)", "nodes": 512, "gpus": 4096,
           "pending": 300, "running": 290, "running_share": 0.61, "time_limit": limit,
           "tier_ratio": target.tier_ratio, "greedy_seconds": target.greedy_seconds, "rss_mib": target.rss_mib,
           "milp": record(total=limit * 0.9, stages=[("priority 1000", 8, 8), ("priority 0", 4, 4)]),
           "milp_half": record(total=limit * 0.45, stages=[("priority 1000", 8, 8), ("priority 0", 4, 4)]),
           "greedy": record("greedy", total=0.5)}
    row.update(runs)
    return row


FAMILY_ROWS = [
    family_row("S", 1001),
    family_row("M", 2001),
    family_row("M", 2002,
               milp=record(total=5.2, served={1000: 8, 0: 9}, rss=1100.0,
                           stages=[("relaxed priority 1000", 1, 10), ("priority 1000", 8, 8), ("priority 0", 90, 100),
                                   ("tie-breakers", -1, 0)]),
               milp_half=record(total=2.0, served={1000: 6, 0: 20}, stages=[("priority 1000", 6, 8)]),
               greedy=record("greedy", total=1.4)),
    family_row("M", 2003, greedy=record("greedy", error="exit 3: Error: plan failed verification (2 violations)")),
]
META = {"date": "d", "commit": "c", "machine": "m", "load_start": "0", "load_end": "1", "command": "stowplan bench"}


def test_the_family_verdict_names_every_miss_per_target_and_scale():
    lines = family_bench.verdicts(FAMILY_ROWS)
    verified, in_time, kueue, tiers, greedy, rss = lines
    assert verified == ("- **every plan verified (MILP at the limit and at half, greedy)**: S ✓ 3 of 3; M ✗ 8 of 9 "
                        "(seed 2003 greedy: exit 3: Error: plan failed verification (2 violations))")
    assert in_time.endswith("S ✓ 2 of 2; M ✗ 5 of 6 (seed 2002 at the limit: 5.20 s > 4.987 s)")
    assert kueue.endswith("S ✓ 2 of 2; M ✗ 3 of 6 (seed 2002 at half: priority 1000: 6 GPUs against greedy's 8; "
                          "seed 2003 at the limit: no plan to compare; seed 2003 at half: no plan to compare)")
    assert tiers.endswith("S — (no target); M ✗ 4 of 6 (seed 2002 at the limit: 0: 90/100 (0.900); "
                          "seed 2002 at half: 1000: 6/8 (0.750))")
    assert greedy.endswith("S — (no target); M ✗ 1 of 3 (seed 2002: 1.40 s; seed 2003: no plan)")
    assert rss.endswith("S — (no target); M ✗ 2 of 3 (seed 2002: 1,100 MiB)")


def test_the_family_tables_mark_each_member():
    text = "\n".join(family_bench.family_markdown(FAMILY_ROWS, META))
    assert "### S: time limit 1.9 s (≤ 1.995 s), at half 0.95 s (≤ 0.9975 s)" in text
    assert "### M: time limit 4.75 s (≤ 4.987 s), at half 2.375 s (≤ 2.494 s)" in text
    row = next(line for line in text.splitlines() if line.startswith("| 2002 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:8] == ["✓ / ✓ / ✓", "5.20 ✗", "2.00 ✓", "better ✓ / WORSE ✗", "1000: 8/8 (1.00); 0: 9/4 (2.25)"]
    assert cells[8] == "optimal: 1000: 8/8 (1) ✓; 0: 90/100 (0.900) ✗"       # relaxed and tie-breaker stages left out
    assert cells[10:] == ["1.40 ✗", "1100 ✗"]
    failed = next(line for line in text.splitlines() if line.startswith("| 2003 |"))
    assert "✓ / ✓ / ✗" in failed and "FAILED" in failed


def test_a_tier_holds_within_its_share_of_the_bound_whatever_the_sign():
    assert family_bench.tier_holds(98.0, 100.0, 0.98) and not family_bench.tier_holds(97.9, 100.0, 0.98)
    assert family_bench.tier_holds(-10.0, -10.0, 0.98)                  # evicting more than admitting, proven
    assert family_bench.tier_holds(-10.4, -10.0, 0.95) and not family_bench.tier_holds(-12.0, -10.0, 0.95)
    assert family_bench.tiers_of(FAMILY_ROWS[2]["milp"]) == [(1000, 8.0, 8.0), (0, 90.0, 100.0)]


def test_from_json_re_renders_the_family_section(tmp_path: Path):
    out = tmp_path / "BENCHMARKS.md"
    result = bench_command.report(META, [], [], FAMILY_ROWS, out)
    assert result["markdown"].startswith(bench_command.FAMILY_HEADING)
    begin, end = bench.marker("family")
    text = out.read_text()
    assert text.count(begin) == 1 and text.count(end) == 1 and "| 2002 |" in text
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(bench.jsonable(result)))
    again = bench_command.report(*bench_command.load_results(saved), None)
    assert again["markdown"] == result["markdown"]


def test_a_tiny_family_member_runs_end_to_end(tmp_path: Path):
    [row] = family_bench.run_family(["tiny"], [1101], tmp_path)
    assert (row["scale"], row["seed"], row["nodes"], row["time_limit"]) == ("tiny", 1101, 32, 1.9)
    assert row["shape"] == describe(family(1101, "tiny")) and 0 < row["running_share"] <= 1
    for key, method in (("milp", "milp"), ("milp_half", "milp"), ("greedy", "greedy")):
        assert "error" not in row[key], row[key]
        assert set(row[key]) == RECORD_KEYS and row[key]["method"] == method
    assert family_bench.tiers_of(row["milp"])                            # the priority stages are read
    assert len(family_bench.verdicts([row])) == len(family_bench.CHECKS)


def test_the_tiers_read_are_where_the_plan_stands_not_each_pass() -> None:
    from planner.tools import family_bench

    record = {"stages": [{"stage": "priority 100 (pass 1)", "objective": 9.0, "bound": 9.0},
                         {"stage": "priority 100 (pass 2)", "objective": 7.0, "bound": 8.0},
                         {"stage": "priority 100", "objective": 7.0, "bound": 8.0},
                         {"stage": "priority -5", "objective": -2.0, "bound": -1.0},
                         {"stage": "preemption cost", "objective": 3.0, "bound": 3.0}]}
    assert family_bench.tiers_of(record) == [(100, 7.0, 8.0), (-5, -2.0, -1.0)]


def test_bench_writes_no_file_unless_told_and_names_no_issue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39: `bench` without --out wrote BENCHMARKS.md into the current folder, under a
    heading naming an internal issue number."""
    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"meta": META, "scale": [], "fixtures": [], "family": FAMILY_ROWS}))
    result = CliRunner().invoke(cli, ["bench", "--from-json", str(raw)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.json"]
    assert "## The family of shapes" in result.output and "issue" not in result.output.split("\n", 3)[0]
    out = tmp_path / "B.md"
    result = CliRunner().invoke(cli, ["bench", "--from-json", str(raw), "--out", str(out)])
    assert result.exit_code == 0 and "## The family of shapes: the targets on every member" in out.read_text()
    assert "issue 32" not in out.read_text() and "(issue" not in out.read_text()


def test_help_and_readme_agree_on_xl() -> None:
    """Issue 39: `bench --help` said ~10 GiB for XL where the README says 6 GiB."""
    import re

    help_text = " ".join(CliRunner().invoke(cli, ["bench", "--help"]).output.split())
    readme = (REPO / "docs" / "benchmarks.md").read_text()    # how to run them (the README is a front door)
    line = next(line for line in readme.splitlines() if "stowplan bench --xl" in line)
    said = re.search(r"(\d+) GiB", line)
    assert said and f"{said.group(1)} GiB" in help_text and "~10 GiB" not in help_text
