"""`stowplan bench`, the command: runs planner/tools/bench.py's scenarios and fixtures,
the family (planner/tools/family_bench.py) and the Kueue peer (planner/tools/peer_bench.py),
and writes their tables. Kept apart from bench.py, whose measuring and tables the
family and peer benches build on, so that nothing imports back in a circle.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import click

from planner.tools import peer_bench
from planner.tools.bench import (
    DEFAULT_SCENARIOS, REPO, TARGETS, Say, Target, bench_fixture, bench_scenario, commit_of_checkout, fixture_paths,
    fixtures_markdown, jsonable, load_average, machine, scale_markdown, silent, write_benchmarks,
)
from planner.tools.family_bench import DEFAULT_FAMILY_SCALES, family_markdown, run_family
from planner.tools.generate import preset


def run_bench(scenarios: Mapping[str, tuple[Any, Target]], fixtures: Sequence[Path], out: Path | None,
              factor: float = 1.0, command: str = "stowplan bench", say: Say = silent,
              workdir: Path | None = None, family_scales: Sequence[str] = (),
              family_seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """Everything `stowplan bench` does; returns {"meta", "scale", "fixtures", "family", "markdown"}."""
    meta: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                            "commit": commit_of_checkout(), "machine": machine(), "load_start": load_average(), "command": command}
    say(f"load average at start {meta['load_start']} on {meta['machine']}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="stowplan-bench-") as temp:
        folder = workdir or Path(temp)
        for name, (spec, target) in scenarios.items():
            rows.append(bench_scenario(name, spec, target, folder, factor, say))
        fixture_rows = [bench_fixture(path, say) for path in fixtures]
        family_rows = run_family(family_scales, family_seeds, folder, factor, say)
    meta["load_end"] = load_average()
    return report(meta, rows, fixture_rows, family_rows, out)


FAMILY_HEADING = "## The family of shapes: the targets on every member"


def report(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], fixture_rows: Sequence[Mapping[str, Any]],
           family_rows: Sequence[Mapping[str, Any]], out: Path | None) -> dict[str, Any]:
    """Markdown of measured rows (stdout text and --out's sections); writes --out."""
    sections: dict[str, tuple[str, str]] = {}
    markdown: list[str] = []
    if rows:
        body = scale_markdown(rows, meta)
        sections["scale"] = ("## Scale", "\n".join(body))
        markdown += ["## Scale", ""] + body + [""]
    if fixture_rows:
        body = fixtures_markdown(fixture_rows, meta)
        sections["fixtures"] = ("## Every fixture, milp beside greedy", "\n".join(body))
        markdown += ["## Every fixture, milp beside greedy", ""] + body + [""]
    if family_rows:
        body = family_markdown(family_rows, meta)
        sections["family"] = (FAMILY_HEADING, "\n".join(body))
        markdown += [FAMILY_HEADING, ""] + body + [""]
    if out is not None and sections:
        write_benchmarks(out, sections)
    return {"meta": meta, "scale": rows, "fixtures": fixture_rows, "family": family_rows,
            "markdown": "\n".join(markdown)}


def load_results(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                                      list[dict[str, Any]]]:
    """meta, scale rows, fixture rows and family rows from a --json file, as run_bench made them."""
    data = json.loads(path.read_text(encoding="utf-8"))

    def record(r: dict[str, Any]) -> dict[str, Any]:
        for key in ("served_gpus", "served_cores"):
            if key in r:
                r[key] = {int(k): v for k, v in r[key].items()}
        return r

    rows = []
    for row in data.get("scale", []):
        target = row["target"]
        rows.append({**row, "target": Target(target["seconds"], target["ratio"], target["rss_mib"]),
                     "milp": record(row["milp"]), "greedy": record(row["greedy"]),
                     "milp_half": record(row.get("milp_half", {"error": "not run"}))})
    fixture_rows = [{**row, "milp": record(row["milp"]), "greedy": record(row["greedy"])}
                    for row in data.get("fixtures", [])]
    family_rows = [{**row, **{key: record(row[key]) for key in ("milp", "milp_half", "greedy")}}
                   for row in data.get("family", [])]
    return data["meta"], rows, fixture_rows, family_rows


# ---------------------------------------------------------------- the command

@click.command("bench", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--scenario", "scenario_names", multiple=True, type=click.Choice(list(TARGETS)), show_envvar=True,
              envvar="STOWPLAN_BENCH_SCENARIO",
              help="Scenario (generator preset) to run; repeat for several. Default: S, M, L.")
@click.option("--xl", is_flag=True, show_envvar=True, help="Add XL (65,536 nodes: the whole run about 15 minutes and 6 GiB on 2 cores).")
@click.option("--scenarios/--no-scenarios", "with_scenarios", default=True, show_default=True, show_envvar=True,
              envvar="STOWPLAN_BENCH_SCENARIOS", help="Run the scale scenarios (the presets).")
@click.option("--family/--no-family", "with_family", default=True, show_default=True, show_envvar=True,
              envvar="STOWPLAN_BENCH_FAMILY",
              help="Run the family section: the family's targets on members of the generated family "
                   "(stowplan generate --preset family).")
@click.option("--family-scale", "family_scales", multiple=True, type=click.Choice(["tiny", *TARGETS]), show_envvar=True,
              envvar="STOWPLAN_BENCH_FAMILY_SCALE",
              help="Scale of the family's members; repeat for several. Default: S (8 seeds) and M (3 seeds); "
                   "L has 2, XL 1, tiny (32 nodes, S's limit) 2.")
@click.option("--family-seeds", "family_seeds", metavar="N,N,...", show_envvar=True,
              envvar="STOWPLAN_BENCH_FAMILY_SEEDS",
              help="Seeds of the family's members, at every --family-scale (default: each scale's own list, "
                   "seeds never used for tuning).")
@click.option("--time-limit-factor", "factor", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, show_envvar=True, envvar="STOWPLAN_BENCH_TIME_LIMIT_FACTOR",
              help="Multiply each scenario's time limit (target less 5%) by this.")
@click.option("--out", "out", metavar="FILE", default="-", show_envvar=True,
              type=click.Path(dir_okay=False),
              help="Also refresh the bench: sections of this markdown file (e.g. BENCHMARKS.md). "
                   "Default: none, the tables go to stdout only.")
@click.option("--fixtures/--no-fixtures", "with_fixtures", default=True, show_default=True, show_envvar=True,
              envvar="STOWPLAN_BENCH_FIXTURES",
              help="Also plan every fixture with milp and greedy.")
@click.option("--fixtures-dir", "fixtures_dir", metavar="DIR", default=str(REPO / "fixtures"), show_envvar=True,
              type=click.Path(file_okay=False, exists=True), help="Where the fixtures are.")
@click.option("--keep", "keep", metavar="DIR", show_envvar=True, type=click.Path(file_okay=False),
              help="Keep the generated snapshots in DIR (default: a temp folder, removed).")
@click.option("--json", "raw", metavar="FILE", show_envvar=True, envvar="STOWPLAN_BENCH_JSON", type=click.Path(dir_okay=False),
              help="Also write every measured record (both solvers, every scenario and fixture) as JSON.")
@click.option("--from-json", "from_json", metavar="FILE", show_envvar=True, envvar="STOWPLAN_BENCH_FROM_JSON",
              type=click.Path(dir_okay=False, exists=True),
              help="Measure nothing: render the tables (stdout and --out) from an earlier run's --json.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@click.option("--peer", "peer", type=click.Choice(["kueue"]), show_envvar=True, envvar="STOWPLAN_BENCH_PEER",
              help="Instead of the scale benchmark: run the real Kueue (built by tests/controlplane/build.sh) on "
                   "the fixtures and small generated scenarios, beside greedy and the MILP (a checkout only).")
@click.option("--peer-scenario", "peer_scenarios", multiple=True, show_envvar=True,
              envvar="STOWPLAN_BENCH_PEER_SCENARIO", type=click.Choice(["P128", "P512", "P1024"]),
              help="Generated scenario for --peer (128, 512, 1,024 nodes); repeat for several. Default: P128, P512.")
def bench_command(scenario_names: Sequence[str], xl: bool, with_scenarios: bool, with_family: bool,
                  family_scales: Sequence[str], family_seeds: str | None, factor: float, out: str,
                  with_fixtures: bool, fixtures_dir: str, keep: str | None, raw: str | None, from_json: str | None,
                  quiet: bool, peer: str | None, peer_scenarios: Sequence[str]) -> None:
    """Benchmark planning at scale and compare milp with greedy (markdown on stdout; --out FILE too).

    For each scenario, the generator's preset (fixed seed) is written to JSON and
    planned twice, each in its own process (`what-if -o json --solver milp`, then
    `--solver greedy`), with the time limit (end to end, as the targets: S 2 s, M 5 s,
    L 30 s, XL 120 s) at the scenario's target less 5% for writing the plan.
    Every fixture is planned the same way. The family section plans members of the
    generated family at the limit, at half of it and with greedy, and judges each
    of the family's targets on each member. Tables go to stdout and, with --out
    FILE, between the `<!-- bench:... -->` markers of FILE; the rest of it is kept.
    Nothing else is written (no file without --out).

    \b
    Examples:
      stowplan bench                          # S, M, L, the fixtures, the family at S and M; stdout
      stowplan bench --out BENCHMARKS.md      # and refresh BENCHMARKS.md's tables
      stowplan bench --xl --out BENCHMARKS.md # and XL
      stowplan bench --scenario S --no-fixtures --no-family
      stowplan bench --no-scenarios --no-fixtures --family-scale L
      stowplan bench --peer kueue             # Kueue beside greedy and the MILP
    """
    if peer:
        _bench_peer(peer_scenarios, with_fixtures, fixtures_dir, keep, raw, from_json, out, quiet)
        return
    if from_json:
        result = report(*load_results(Path(from_json)), None if out == "-" else Path(out))
        click.echo(result["markdown"])
        return
    scenarios = {name: (preset(name), TARGETS[name]) for name in scenarios_of(scenario_names, xl, with_scenarios)}
    scales = list(dict.fromkeys(family_scales or DEFAULT_FAMILY_SCALES)) if with_family else []
    seeds = _seeds(family_seeds)
    fixtures = fixture_paths(Path(fixtures_dir)) if with_fixtures else []
    say: Say = silent if quiet else (lambda message: click.echo(f"bench: {message}", err=True))
    workdir = None
    if keep:
        workdir = Path(keep)
        workdir.mkdir(parents=True, exist_ok=True)
    command = "stowplan bench " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "stowplan bench"
    result = run_bench(scenarios, fixtures, None if out == "-" else Path(out), factor, command.strip(), say, workdir,
                       scales, seeds)
    click.echo(result["markdown"])
    if raw:
        Path(raw).write_text(json.dumps(jsonable(result), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        say(f"wrote {raw}")
    if out != "-":
        say(f"wrote {out}")


def scenarios_of(scenario_names: Sequence[str], xl: bool, with_scenarios: bool) -> list[str]:
    """The scale scenarios to run: --scenario's (default S, M, L; none with --no-scenarios
    unless named), and XL with --xl."""
    names = list(dict.fromkeys(scenario_names or DEFAULT_SCENARIOS)) if with_scenarios or scenario_names else []
    if xl and "XL" not in names:
        names.append("XL")
    return names


def _seeds(text: str | None) -> list[int] | None:
    """--family-seeds: comma-separated integers (None: each scale's own list)."""
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: comma-separated integers", param_hint="--family-seeds") from None


def _bench_peer(names: Sequence[str], with_fixtures: bool, fixtures_dir: str, keep: str | None, raw: str | None,
                from_json: str | None, out: str, quiet: bool) -> None:
    """`bench --peer kueue` (planner/tools/peer_bench.py)."""
    target = None if out == "-" else Path(out)
    if from_json:
        result = peer_bench.peer_report(*peer_bench.load_peer_results(Path(from_json)), target)
        click.echo(result["markdown"])
        return
    say: Say = silent if quiet else (lambda message: click.echo(f"bench: {message}", err=True))
    harness, _ = peer_bench.peer_modules()
    why = harness.available()
    if why:
        raise click.ClickException(why)
    meta: dict[str, Any] = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                            "commit": commit_of_checkout(), "machine": machine(), "load_start": load_average()}
    scenarios = list(dict.fromkeys(names or peer_bench.DEFAULT_PEER_SCENARIOS))
    fixtures = fixture_paths(Path(fixtures_dir)) if with_fixtures else []
    with tempfile.TemporaryDirectory(prefix="stowplan-peer-") as temp:
        workdir = Path(keep) if keep else Path(temp)
        workdir.mkdir(parents=True, exist_ok=True)
        result = peer_bench.run_peer_bench(scenarios, fixtures, target, say, workdir,
                                           TARGETS["S"].time_limit(), meta)
    meta["load_end"] = load_average()
    click.echo(result["markdown"])
    if raw:
        Path(raw).write_text(json.dumps(jsonable(result), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        say(f"wrote {raw}")
    if target is not None:
        say(f"wrote {out}")
