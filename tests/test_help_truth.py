"""`--help` texts true, each tested against behaviour (issue 35, item 8).

CHECKS names, for every parameter of every command of `stowplan` (the group's --version
included), the test that runs the command with it on a bundled fixture and asserts what
its help text promises: a concrete difference the flag makes (with against without) or
the value it claims, its stated default included. `test_every_flag_has_a_behavioural_check`
walks the click tree, so a new flag without an entry fails here.

An entry is the name of a test in this module, or `path::test` for a test elsewhere that
already runs the flag against its claim (the live commands' cluster-only flags run on the
real control plane in tests/cluster/); the meta-test checks that the named test exists.
Planned results used by several checks are shared through functools.cache.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

from helpers import cli_on_a_tty
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions

REPO = Path(__file__).resolve().parent.parent
TINY = str(REPO / "fixtures" / "tiny.yaml")
TWO = str(REPO / "fixtures" / "two-teams-cohort.yaml")
TINY_WORKLOAD = "ml-research/pretrain-small"
# a generated cluster small enough for a simulation of a few cycles (as tests/test_simulate_cli.py)
SMALL = ("--preset", "S", "--nodes", "2x2x4", "--set", "teams=3", "--set", "pending=6", "--set", "running=6",
         "--set", "max_job_gpus=32", "--set", "multi_node_sizes=16:2,32:1")
LIVE = "tests/cluster/test_live_cycle.py"
STATUS = "tests/cluster/test_live_status.py"
FLAGS = "tests/cluster/test_live_flags.py"

# ------------------------------------------------------------------ the table

CHECKS: dict[tuple[str, str], str] = {
    ("", "--version"): "test_version_prints_stowplan_and_its_solver_libraries",
    ("version", "*"): "test_version_prints_stowplan_and_its_solver_libraries",
    # what-if
    ("what-if", "SNAPSHOT..."): "test_snapshot_arguments_a_folder_and_stdin_read_as_the_file",
    ("what-if", "--policy"): "test_policy_file_is_used",
    ("what-if", "--output"): "test_output_formats",
    ("what-if", "--out"): "test_out_writes_the_file_and_nothing_to_stdout",
    ("what-if", "--solver"): "test_solver_choice_and_its_default",
    ("what-if", "--time-limit"): "test_time_limit_is_the_cycles_and_its_default_is_20",
    ("what-if", "--gap"): "test_gap_is_the_solvers_tolerance_and_its_default",
    ("what-if", "--now"): "test_now_is_the_planning_time_and_defaults_to_the_snapshot_time",
    ("what-if", "--strict"): "test_strict_turns_a_reported_problem_into_exit_2",
    ("what-if", "--max-file-size"): "test_max_file_size_refuses_a_larger_file",
    ("what-if", "--quiet"): "test_quiet_silences_progress_on_a_terminal",
    ("what-if", "--verbose"): "test_verbose_shows_the_solvers_log",
    ("what-if", "--metrics"): "test_metrics_writes_prometheus_text_with_the_named_metrics",
    ("what-if", "--picture"): "test_picture_draws_what_its_help_describes",
    ("what-if", "--picture-before"): "test_picture_before_draws_the_cluster_before_the_plan",
    ("what-if", "--add-nodes"): "test_add_nodes_answers_least_cost_units_and_the_plan_with_them",
    ("what-if", "--priority"): "test_priority_narrows_the_targets",
    ("what-if", "--workloads"): "test_workloads_narrows_the_targets",
    ("what-if", "--remove-nodes"): "test_remove_nodes_drains_exactly_the_matching_nodes",
    ("what-if", "--namespace"): "test_namespace_filters_the_table_rows_not_the_headline",
    ("what-if", "--queue"): "test_queue_filters_the_table_rows",
    ("what-if", "--summary-only"): "test_summary_only_drops_the_workload_rows",
    ("what-if", "--cluster"): "tests/test_fleet.py::test_what_if_cluster_end_to_end_matches_its_golden",
    ("what-if", "--manager"): "tests/test_fleet.py::test_without_manager_the_first_cluster_holds_the_workloads",
    # explain
    ("explain", "WORKLOAD"): "test_explain_workload_names_its_state_and_position",
    ("explain", "[SNAPSHOT...]"): "test_snapshot_arguments_a_folder_and_stdin_read_as_the_file",
    ("explain", "--all"): "test_explain_all_covers_every_waiting_workload",
    ("explain", "--live"): "test_live_and_kubeconfig_read_the_cluster_the_kubeconfig_names",
    ("explain", "--kubeconfig"): "test_live_and_kubeconfig_read_the_cluster_the_kubeconfig_names",
    ("explain", "--context"): "test_context_picks_the_kubeconfig_context",
    ("explain", "--config"): "test_explain_config_and_policy_are_read_with_live",
    ("explain", "--policy"): "test_policy_file_is_used",
    ("explain", "--solver"): "test_solver_choice_and_its_default",
    ("explain", "--time-limit"): "test_time_limit_is_the_cycles_and_its_default_is_20",
    ("explain", "--gap"): "test_gap_is_the_solvers_tolerance_and_its_default",
    ("explain", "--verbose"): "test_verbose_shows_the_solvers_log",
    ("explain", "--search-time-limit"): "test_search_time_limit_bounds_each_changed_plan",
    ("explain", "--now"): "test_now_is_the_planning_time_and_defaults_to_the_snapshot_time",
    ("explain", "--output"): "test_output_formats",
    ("explain", "--quiet"): "test_quiet_silences_progress_on_a_terminal",
    # plan (the live cluster)
    ("plan", "--kubeconfig"): "test_live_and_kubeconfig_read_the_cluster_the_kubeconfig_names",
    ("plan", "--context"): "test_context_picks_the_kubeconfig_context",
    ("plan", "--config"): f"{STATUS}::test_plan_writes_metrics_and_no_status",
    ("plan", "--policy"): f"{FLAGS}::test_plan_policy_and_solver_flags_reach_the_live_plan",
    ("plan", "--solver"): f"{FLAGS}::test_plan_policy_and_solver_flags_reach_the_live_plan",
    ("plan", "--time-limit"): f"{FLAGS}::test_plan_policy_and_solver_flags_reach_the_live_plan",
    ("plan", "--gap"): "test_gap_is_the_solvers_tolerance_and_its_default",
    ("plan", "--verbose"): f"{FLAGS}::test_plan_policy_and_solver_flags_reach_the_live_plan",
    ("plan", "--output"): f"{FLAGS}::test_plan_table_flags_and_formats",
    ("plan", "--out"): f"{LIVE}::test_saved_plan_refused_after_a_change_and_applied_when_fresh",
    ("plan", "--quiet"): "test_quiet_silences_progress_on_a_terminal",
    ("plan", "--metrics"): f"{STATUS}::test_plan_writes_metrics_and_no_status",
    ("plan", "--namespace"): f"{FLAGS}::test_plan_table_flags_and_formats",
    ("plan", "--queue"): f"{FLAGS}::test_plan_table_flags_and_formats",
    ("plan", "--summary-only"): f"{FLAGS}::test_plan_table_flags_and_formats",
    ("plan", "--worker"): "tests/cluster/test_live_dispatch.py::"
        "test_plan_worker_reads_the_fleet_live_and_apply_runs_it_where_planned",
    ("plan", "--multikueue-config"): "tests/cluster/test_live_dispatch.py::"
        "test_plan_multikueue_config_reads_the_workers_from_the_manager",
    ("plan", "--kueue-namespace"): "tests/cluster/test_live_dispatch.py::"
        "test_plan_multikueue_config_reads_the_workers_from_the_manager",
    # apply (the live cluster)
    ("apply", "--plan"): f"{LIVE}::test_saved_plan_refused_after_a_change_and_applied_when_fresh",
    ("apply", "--dry-run"): f"{STATUS}::test_a_dry_run_changes_no_status",
    ("apply", "--kubeconfig"): "test_live_and_kubeconfig_read_the_cluster_the_kubeconfig_names",
    ("apply", "--context"): "test_context_picks_the_kubeconfig_context",
    ("apply", "--config"): f"{STATUS}::test_each_cycle_writes_the_status_configmap_as_the_service_account",
    ("apply", "--policy"): f"{STATUS}::test_each_cycle_writes_the_status_configmap_as_the_service_account",
    ("apply", "--solver"): f"{FLAGS}::test_apply_lease_flags_and_solver",
    ("apply", "--time-limit"): f"{FLAGS}::test_apply_lease_flags_and_solver",
    ("apply", "--gap"): "test_gap_is_the_solvers_tolerance_and_its_default",
    ("apply", "--verbose"): f"{FLAGS}::test_apply_lease_flags_and_solver",
    ("apply", "--namespace"): "test_apply_lease_namespace_and_name_and_their_defaults",
    ("apply", "--lease-name"): "test_apply_lease_namespace_and_name_and_their_defaults",
    ("apply", "--lease-duration"): f"{FLAGS}::test_apply_lease_flags_and_solver",
    ("apply", "--identity"): f"{FLAGS}::test_apply_lease_flags_and_solver",
    ("apply", "--release-wait"): f"{FLAGS}::test_apply_lease_flags_and_solver",
    ("apply", "--workers"): "tests/cluster/test_live_interrupt.py::test_apply_stops_after_the_write_in_flight",
    ("apply", "--quiet"): f"{FLAGS}::test_apply_and_snapshot_quiet_on_a_terminal",
    ("apply", "--metrics"): f"{STATUS}::test_each_cycle_writes_the_status_configmap_as_the_service_account",
    ("apply", "--allow-kueue-controller"): "tests/cluster/test_live_kueue_guard.py::"
        "test_apply_refuses_beside_kueues_leader_unless_told_and_an_expired_lease_does_not_block",
    ("apply", "--worker"): "tests/cluster/test_live_dispatch.py::test_dispatch_idempotency_status_deletion_and_eviction",
    ("apply", "--multikueue-config"): "tests/cluster/test_live_dispatch.py::"
        "test_dispatch_idempotency_status_deletion_and_eviction",
    ("apply", "--pod-groups"): "tests/cluster/test_live_podgroups.py::test_a_placeable_gang_binds_every_pod_where_planned",
    ("apply", "--kueue-namespace"): "tests/test_dispatch_unit.py::test_kueue_namespace_is_where_the_kubeconfig_secret_is_read",
    # rbac
    ("rbac", "--policy"): "tests/test_kinds_custom.py::test_rbac_prints_the_rules_for_the_custom_kinds",
    ("rbac", "--service-account"): "tests/test_kinds_custom.py::test_rbac_prints_the_rules_for_the_custom_kinds",
    ("apply", "--pushgateway"): f"{STATUS}::test_each_cycle_writes_the_status_configmap_as_the_service_account",
    # snapshot (the live cluster)
    ("snapshot", "--output"): f"{FLAGS}::test_snapshot_format_out_config_and_policy",
    ("snapshot", "--out"): f"{FLAGS}::test_snapshot_format_out_config_and_policy",
    ("snapshot", "--kubeconfig"): "test_live_and_kubeconfig_read_the_cluster_the_kubeconfig_names",
    ("snapshot", "--context"): "test_context_picks_the_kubeconfig_context",
    ("snapshot", "--config"): f"{FLAGS}::test_snapshot_format_out_config_and_policy",
    ("snapshot", "--policy"): f"{FLAGS}::test_snapshot_format_out_config_and_policy",
    ("snapshot", "--quiet"): f"{FLAGS}::test_apply_and_snapshot_quiet_on_a_terminal",
    # generate
    ("generate", "--preset"): "test_generate_preset_seed_and_nodes",
    ("generate", "--fleet"): "tests/test_fleet.py::test_generate_fleet_writes_a_manager_and_four_workers_that_plan",
    ("generate", "--seed"): "test_generate_preset_seed_and_nodes",
    ("generate", "--nodes"): "test_generate_preset_seed_and_nodes",
    ("generate", "--set"): "test_generate_set_changes_a_parameter",
    ("generate", "--output"): "test_generate_output_format_and_its_default",
    ("generate", "--out"): "test_generate_output_format_and_its_default",
    ("generate", "--quiet"): "test_quiet_silences_progress_on_a_terminal",
    ("generate", "--trace"): "test_generate_trace_hours_and_load",
    ("generate", "--hours"): "test_generate_trace_hours_and_load",
    ("generate", "--load"): "test_generate_trace_hours_and_load",
    # simulate
    ("simulate", "SNAPSHOT..."): "test_simulate_interval_hours_and_solver",
    ("simulate", "--trace"): "test_simulate_interval_hours_and_solver",
    ("simulate", "--interval"): "test_simulate_interval_hours_and_solver",
    ("simulate", "--hours"): "test_simulate_interval_hours_and_solver",
    ("simulate", "--solver"): "test_simulate_interval_hours_and_solver",
    ("simulate", "--compare"): "test_simulate_compare_drain_and_outputs",
    ("simulate", "--drain"): "test_simulate_compare_drain_and_outputs",
    ("simulate", "--policy"): "test_simulate_policy_time_limit_gap_and_seed",
    ("simulate", "--time-limit"): "test_simulate_policy_time_limit_gap_and_seed",
    ("simulate", "--gap"): "test_simulate_policy_time_limit_gap_and_seed",
    ("simulate", "--seed"): "test_simulate_policy_time_limit_gap_and_seed",
    ("simulate", "--output"): "test_simulate_compare_drain_and_outputs",
    ("simulate", "--out"): "test_simulate_compare_drain_and_outputs",
    ("simulate", "--picture"): "test_simulate_compare_drain_and_outputs",
    ("simulate", "--max-file-size"): "test_max_file_size_refuses_a_larger_file",
    ("simulate", "--quiet"): "test_quiet_silences_progress_on_a_terminal",
    # trace
    ("trace", "SNAPSHOT..."): "test_trace_since_and_out",
    ("trace", "--since"): "test_trace_since_and_out",
    ("trace", "--out"): "test_trace_since_and_out",
    ("trace", "--max-file-size"): "test_max_file_size_refuses_a_larger_file",
    ("trace", "--quiet"): "test_quiet_silences_progress_on_a_terminal",
    # bench
    ("bench", "--scenarios"): "test_bench_fixtures_json_and_sections",
    ("bench", "--family"): "test_bench_fixtures_json_and_sections",
    ("bench", "--fixtures"): "test_bench_fixtures_json_and_sections",
    ("bench", "--fixtures-dir"): "test_bench_fixtures_json_and_sections",
    ("bench", "--json"): "test_bench_fixtures_json_and_sections",
    ("bench", "--out"): "test_bench_fixtures_json_and_sections",
    ("bench", "--quiet"): "test_bench_fixtures_json_and_sections",
    ("bench", "--from-json"): "tests/test_bench.py::test_bench_writes_no_file_unless_told_and_names_no_issue",
    ("bench", "--scenario"): "test_bench_scenario_keep_and_time_limit_factor",
    ("bench", "--keep"): "test_bench_scenario_keep_and_time_limit_factor",
    ("bench", "--time-limit-factor"): "test_bench_scenario_keep_and_time_limit_factor",
    ("bench", "--xl"): "test_bench_xl_adds_the_xl_scenario",
    ("bench", "--family-scale"): "test_bench_family_scale_and_seeds",
    ("bench", "--family-seeds"): "test_bench_family_scale_and_seeds",
    ("bench", "--peer"): "tests/test_bench_peer.py::test_bench_renders_peer_results_from_json",
    ("bench", "--peer-scenario"): "tests/test_bench_peer.py::test_peer_scenarios_are_small_generated_clusters",
}


def flag(param: click.Parameter) -> str:
    """How --help shows a parameter: its long option, or an argument's metavar (SNAPSHOT...)."""
    if isinstance(param, click.Argument):
        return param.human_readable_name
    return next(o for o in param.opts if o.startswith("--"))


def walk() -> set[tuple[str, str]]:
    """Every (command, flag) of the click tree; a command without any as (command, '*')."""
    found = {("", flag(p)) for p in cli_module.cli.params if p.name != "help"}
    for name, command in cli_module.cli.commands.items():
        flags = {(name, flag(p)) for p in command.params if p.name != "help"}
        found |= flags or {(name, "*")}
    return found


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_flag_has_a_behavioural_check() -> None:
    """A new flag, argument or command without an entry in CHECKS fails here (and a stale entry)."""
    tree = walk()
    assert sorted(tree - set(CHECKS)) == [], "flags without a check"
    assert sorted(set(CHECKS) - tree) == [], "checks of flags that no longer exist"


def test_every_named_check_exists() -> None:
    here = defined_tests(Path(__file__))
    for flag, check in CHECKS.items():
        if "::" in check:
            path, name = check.split("::")
            assert (REPO / path).is_file() and name in defined_tests(REPO / path), (flag, check)
        else:
            assert check in here, (flag, check)


# ------------------------------------------------------------------ helpers

def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli_module.cli, list(args), input=input)


@functools.cache
def planned(*args: str) -> Result:
    """A run shared by the checks that read it (the same arguments plan once)."""
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def plan_json(*args: str) -> dict[str, Any]:
    return json.loads(planned("what-if", *args, "-o", "json", "-q").stdout)


def placed_nodes(plan: dict[str, Any]) -> set[str]:
    return {value for a in plan["admissions"] for ps in a["podSets"]
            for domain in (ps.get("topologyAssignment") or {}).get("domains", []) for value in domain["values"]}


def policy_file(tmp_path: Path, **spec: Any) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy",
                                    "metadata": {"name": "p"}, "spec": spec}))
    return str(path)


def kubeconfig(tmp_path: Path) -> str:
    """Two contexts on two closed ports: x (port 1, the current one) and y (port 2)."""
    path = tmp_path / "kubeconfig"
    path.write_text("""\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}, {name: d, cluster: {server: "https://127.0.0.1:2"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}, {name: y, context: {cluster: d, user: u}}]
current-context: x
""")
    return str(path)


LIVE_ARGS = {"plan": ["plan"], "apply": ["apply"], "snapshot": ["snapshot"],
             "explain": ["explain", TINY_WORKLOAD, "--live"]}

# ------------------------------------------------------------------ the group and version


@pytest.mark.parametrize("args", [["--version"], ["version"]])
def test_version_prints_stowplan_and_its_solver_libraries(args: list[str]) -> None:
    """--version: "Print Stowplan's version and those of its solver libraries, and exit (as `stowplan version`)"."""
    from importlib import metadata

    result = run(*args)
    assert result.exit_code == 0
    assert result.stdout.startswith(f"stowplan {metadata.version('stowplan')} (")
    assert re.search(r"\bhighspy [0-9.]+", result.stdout) and re.search(r"\bpulp [0-9.]+", result.stdout)
    assert result.stdout == run("version").stdout


# ------------------------------------------------------------------ what-if and explain on files

@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_snapshot_arguments_a_folder_and_stdin_read_as_the_file(command: str, tmp_path: Path) -> None:
    """SNAPSHOT: a file, a folder of such files, or - for stdin; several read as one snapshot."""
    head = ["what-if"] if command == "what-if" else ["explain", TINY_WORKLOAD]
    text = Path(TINY).read_text()
    docs = text.split("\n---\n") if "\n---\n" in text else None
    folder = tmp_path / "snap"
    folder.mkdir()
    (folder / "tiny.yaml").write_text(text)
    expected = planned(*head, TINY, "-o", "json", "-q").stdout

    def same(result: Result) -> None:
        assert result.exit_code == 0, result.output
        got, want = json.loads(result.stdout), json.loads(expected)
        if command == "what-if":
            assert (got["admissions"], got["pending"]) == (want["admissions"], want["pending"])
        else:
            assert got["state"] == want["state"] and got["position"] == want["position"]

    same(run(*head, str(folder), "-o", "json", "-q"))
    same(run(*head, "-", "-o", "json", "-q", input=text))
    # split in two files: the nodes in one, everything else in the other, read as one snapshot
    items = yaml.safe_load(text)["items"] if docs is None else [yaml.safe_load(d) for d in docs]
    nodes = [i for i in items if i["kind"] == "Node"]
    assert nodes
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                                     "items": [i for i in items if i["kind"] != "Node"]}))
    same(run(*head, str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "-o", "json", "-q"))
    alone = run(*head, str(tmp_path / "b.yaml"), "-o", "json", "-q")   # without the nodes: nothing admitted
    assert alone.exit_code != 0 or json.loads(alone.stdout) != json.loads(expected)


@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_policy_file_is_used(command: str, tmp_path: Path) -> None:
    """--policy FILE: a PlannerPolicy (here one whose time limit no search meets) replaces the default."""
    policy = policy_file(tmp_path, timeLimitSeconds=0.0001)
    if command == "what-if":
        assert plan_json(TINY)["solver"]["status"] == "optimal"
        result = run("what-if", TINY, "--policy", policy, "-o", "json", "-q")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["solver"]["status"] == "fallback"
    else:
        before = json.loads(planned("explain", "ml-research/eval-sweep", TINY, "-o", "json", "-q").stdout)
        assert before["state"] == "admitted" and before["plan"] == "milp optimal"
        result = run("explain", "ml-research/eval-sweep", TINY, "--policy", policy, "-o", "json", "-q")
        assert result.exit_code == 0, result.output
        after = json.loads(result.stdout)
        assert after["plan"].startswith("milp fallback") and after["state"] != "admitted"


@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_output_formats(command: str) -> None:
    """-o table|wide|yaml|json (explain: table|yaml|json); default off a terminal: yaml."""
    head = ["what-if", TWO] if command == "what-if" else ["explain", TINY_WORKLOAD, TINY]
    default = untimed(yaml.safe_load(planned(*head, "-q").stdout))
    as_yaml = untimed(yaml.safe_load(planned(*head, "-o", "yaml", "-q").stdout))
    assert default == as_yaml and isinstance(as_yaml, dict)
    assert as_yaml == untimed(json.loads(planned(*head, "-o", "json", "-q").stdout))
    table = planned(*head, "-o", "table", "-q").stdout
    assert not table.lstrip().startswith(("{", "apiVersion", "workload:"))
    if command == "what-if":
        assert table.startswith("Plan for ") and "\nWORKLOAD " in table
        wide = planned(*head, "-o", "wide", "-q").stdout
        # wide: every flavor and node (the table shows only the nodes' names, not FLAVOR/LOCALQUEUE)
        assert "LOCALQUEUE" in wide and "LOCALQUEUE" not in table
        assert "cpu=l4,memory=l4,nvidia.com/gpu=l4" in wide and "l4-node-03:1" in wide
    else:
        assert "pretrain-small" in table


def untimed(document: Any) -> Any:
    """A document without what the clock measured (seconds, memory), which differ run to run."""
    if isinstance(document, dict):
        return {k: untimed(v) for k, v in document.items()
                if k not in ("seconds", "peak_rss_mib", "cycle_seconds", "admissions_per_planner_second", "series")}
    if isinstance(document, list):
        return [untimed(v) for v in document]
    return document


def test_out_writes_the_file_and_nothing_to_stdout(tmp_path: Path) -> None:
    """--out FILE: the plan goes to FILE instead of stdout; its extension names the format."""
    for name, loads in (("plan.json", json.loads), ("plan.yaml", yaml.safe_load)):
        out = tmp_path / name
        result = run("what-if", TINY, "--out", str(out), "-q")
        assert result.exit_code == 0 and result.stdout == "", result.output
        assert loads(out.read_text())["admissions"] == plan_json(TINY)["admissions"]


@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_solver_choice_and_its_default(command: str) -> None:
    """--solver milp|greedy|pulp:NAME, default milp: the plan names the method that made it."""
    if command == "what-if":
        assert plan_json(TINY)["solver"]["method"] == "milp"
        assert plan_json(TINY, "--solver", "greedy")["solver"]["method"] == "greedy"
        assert plan_json(TINY, "--solver", "pulp:HiGHS")["solver"]["method"].startswith("pulp")
    else:
        head = ("explain", TINY_WORKLOAD, TINY, "-o", "json", "-q")
        assert json.loads(planned(*head).stdout)["plan"].startswith("milp ")
        assert json.loads(planned(*head, "--solver", "greedy").stdout)["plan"].startswith("greedy ")
    assert run(command, *(["x/y"] if command == "explain" else []), TINY, "--solver", "cplex").exit_code == 2


@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_time_limit_is_the_cycles_and_its_default_is_20(command: str) -> None:
    """--time-limit SECONDS: the whole cycle's limit, above 0 and at most a week; default the policy's (20)."""
    headline = " ".join(planned("what-if", TWO, "-o", "table", "-q").stdout.split("\n  ")[0].split())
    assert re.search(r"in [0-9.]+s of a 20s limit$", headline), headline
    headline = " ".join(planned("what-if", TWO, "-o", "table", "-q", "--time-limit", "7").stdout.split("\n  ")[0].split())
    assert re.search(r"in [0-9.]+s of a 7s limit$", headline), headline
    if command == "what-if":
        solver = plan_json(TINY, "--time-limit", "0.0001")["solver"]
        assert solver["status"] == "fallback" and "time limit (0.0001 s)" in solver["message"]
    else:
        explained = json.loads(planned("explain", "ml-research/eval-sweep", TINY, "-o", "json", "-q",
                                       "--time-limit", "0.0001").stdout)
        assert explained["plan"].startswith("milp fallback")
    for bad in ("0", "604801"):
        assert run(command, *(["x/y"] if command == "explain" else []), TINY, "--time-limit", bad).exit_code == 2
    assert run(command, *(["x/y"] if command == "explain" else []), TINY, "--time-limit", "604800").exit_code != 2 \
        or command == "explain"     # explain x/y is not in the snapshot: exit 2 for that reason


@functools.cache
def process(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: HiGHS writes its log to the process's stderr, past click."""
    done = subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def highs_tolerance(stderr: str) -> set[str]:
    return set(re.findall(r"Gap .*\(tolerance: ([0-9.e-]+%)\)", stderr))


@pytest.mark.parametrize("command", ["what-if", "explain", "plan", "apply"])
def test_gap_is_the_solvers_tolerance_and_its_default(command: str, tmp_path: Path) -> None:
    """--gap GAP: the relative MIP gap each solve stops at, 0 to 1; default the policy's (0.001).

    The live commands take the same option (planner.cli.options' shared planning options); their
    range is checked here, the value's effect on what-if and explain."""
    if command in ("plan", "apply"):
        assert run(command, "--gap", "1.5").exit_code == 2 and run(command, "--gap", "-0.1").exit_code == 2
        result = run(command, "--gap", "0.5", "--kubeconfig", kubeconfig(tmp_path), "-q")
        assert result.exit_code == 4, result.output      # accepted; the cluster is what is missing
        return
    head = ["what-if", TINY] if command == "what-if" else ["explain", TINY_WORKLOAD, TINY, "--search-time-limit", "1"]
    # the priority stages at the gap, the cost and tie-breaker stages at it or 0.5%, the larger
    assert highs_tolerance(process(*head, "-v", "-o", "json").stderr) == {"0.1%", "0.5%"}
    assert highs_tolerance(process(*head, "-v", "-o", "json", "--gap", "0.25").stderr) == {"25%"}
    assert run(*head, "--gap", "1.5").exit_code == 2


@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_verbose_shows_the_solvers_log(command: str) -> None:
    """-v: HiGHS's banner and log on stderr; without it, none; never on stdout."""
    head = ["what-if", TINY] if command == "what-if" else ["explain", TINY_WORKLOAD, TINY, "--search-time-limit", "1"]
    loud = process(*head, "-v", "-o", "json")
    quiet = process(*head, "-o", "json")
    assert "HiGHS" in loud.stderr and "HiGHS" not in quiet.stderr
    json.loads(loud.stdout)     # stdout is still the document alone


@pytest.mark.parametrize("command", ["what-if", "explain"])
def test_now_is_the_planning_time_and_defaults_to_the_snapshot_time(command: str) -> None:
    """--now RFC3339: the planning time (waiting counts to it); default the snapshot's
    stowplan.io/snapshot-time."""
    if command == "what-if":
        default = planned("what-if", TWO, "-o", "table", "-q").stdout
        later = planned("what-if", TWO, "-o", "table", "-q", "--now", "2026-12-02T12:00:00Z").stdout
        assert "objects at 2026-12-01T12:00:00Z)" in default       # the fixture's snapshot-time
        assert "objects at 2026-12-02T12:00:00Z)" in later
        row = re.compile(r"^(?:Job/)?team-a/a-protein-fold .*", re.M)
        assert row.search(default) and row.search(later)
        assert " 2h " in row.search(default).group(0) and " 26h " in row.search(later).group(0)
    else:
        # explain shows no times: a --now before every creation is the one it reads as the planning time
        head = ("explain", TINY_WORKLOAD, TINY, "-o", "json", "-q", "--search-time-limit", "1")
        assert "--now" not in planned(*head).stderr
        early = planned(*head, "--now", "2000-01-01T00:00:00Z").stderr
        assert "--now 2000-01-01T00:00:00Z is before every workload's creation time" in early
    assert run("what-if", TWO, "--now", "yesterday").exit_code == 2


def test_strict_turns_a_reported_problem_into_exit_2(tmp_path: Path) -> None:
    """--strict: every reported input problem an error, exit 2, nothing written."""
    out, snap = tmp_path / "plan.yaml", tmp_path / "snap.yaml"
    # one Job names a LocalQueue that does not exist: a problem with that object only
    snap.write_text(Path(TINY).read_text().replace("kueue.x-k8s.io/queue-name: research-queue",
                                                   "kueue.x-k8s.io/queue-name: no-such-queue", 1))
    loose = run("what-if", str(snap), "-q", "--out", str(out))
    assert loose.exit_code == 0 and "no-such-queue" in loose.stderr and out.exists(), loose.output
    out.unlink()
    strict = run("what-if", str(snap), "-q", "--strict", "--out", str(out))
    assert strict.exit_code == 2 and "no-such-queue" in strict.stderr and not out.exists(), strict.output
    # Kueue's default Configuration assumed (no ConfigMap) is a note, not an input problem
    assert run("what-if", TINY, "-q", "--strict", "-o", "json").exit_code == 0


@pytest.mark.parametrize("command, default", [("what-if", "512Mi"), ("simulate", "2Gi"), ("trace", "2Gi")])
def test_max_file_size_refuses_a_larger_file(command: str, default: str, tmp_path: Path) -> None:
    """--max-file-size BYTES: refuse (exit 2) any input file larger than this; the default is stated."""
    head = {"what-if": ["what-if", TINY], "simulate": ["simulate", TINY, "--trace", str(tmp_path / "t.jsonl")],
            "trace": ["trace", TINY]}[command]
    (tmp_path / "t.jsonl").write_text('{"apiVersion": "stowplan.io/v1alpha1", "kind": "Trace"}\n')
    small = run(*head, "--max-file-size", "4Ki", "-q")       # tiny.yaml is 7,236 bytes
    assert small.exit_code == 2 and "tiny.yaml: is 7,236 bytes, more than the limit of 4,096" in small.stderr, \
        small.output
    big = run(*head, "--max-file-size", "8Ki", "-q")
    assert "more than the limit" not in big.stderr, big.output
    option = next(p for p in cli_module.cli.commands[command].params if p.name == "max_file_size")
    assert option.default == default


@pytest.mark.parametrize("command", ["what-if", "explain", "generate", "simulate", "trace", "plan"])
def test_quiet_silences_progress_on_a_terminal(command: str, tmp_path: Path) -> None:
    """-q: no progress lines on a terminal's stderr (they show without it); warnings still show."""
    history = tmp_path / "history.yaml"
    history.write_text(Path(TINY).read_text())
    args = {"what-if": ["what-if", TINY, "-o", "yaml"],
            "explain": ["explain", TINY_WORKLOAD, TINY, "-o", "yaml", "--search-time-limit", "1"],
            "generate": ["generate", *SMALL, "--out", str(tmp_path / "g.json")],
            "simulate": ["simulate", TINY, "--trace", str(tmp_path / "t.jsonl"), "--hours", "0.02",
                         "--interval", "60", "--solver", "greedy", "-o", "json"],
            "trace": ["trace", str(history), "--out", str(tmp_path / "trace.jsonl")],
            # an unreachable cluster: the spinner while it reads, then exit 4
            "plan": ["plan", "--kubeconfig", kubeconfig(tmp_path)]}[command]
    (tmp_path / "t.jsonl").write_text('{"apiVersion": "stowplan.io/v1alpha1", "kind": "Trace"}\n')

    def progress(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("stowplan: ") or "reading the cluster" in line]

    code, loud = cli_on_a_tty(args, tmp_path, tmp_path / "stdout")
    assert progress(loud), (code, loud)
    code_q, quiet = cli_on_a_tty([*args, "-q"], tmp_path, tmp_path / "stdout")
    assert code_q == code and progress(quiet) == [], quiet
    if command == "what-if":
        assert "warning:" in quiet      # warnings still go to stderr


def samples(text: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_metrics_writes_prometheus_text_with_the_named_metrics(tmp_path: Path) -> None:
    """--metrics FILE: the cycle's metrics in Prometheus text format (REFERENCE's names)."""
    prom = tmp_path / "m.prom"
    result = run("what-if", TWO, "-q", "-o", "json", "--metrics", str(prom))
    assert result.exit_code == 0, result.output
    got = samples(prom.read_text())
    for name in ("stowplan_pending_workloads", "stowplan_admitted_workloads_total", "stowplan_served_gpus",
                 "stowplan_plan_gap", "stowplan_cycle_seconds", "stowplan_plan_info"):
        assert name in got, sorted(got)
    admitted = {s.labels["cluster_queue"]: s.value for s in got["stowplan_admitted_workloads_total"]}
    assert admitted == {"team-a-cq": 1, "team-b-cq": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["m.prom"]     # atomically: no temp file left


def test_picture_draws_what_its_help_describes(tmp_path: Path) -> None:
    """--picture FILE.svg|FILE.png: the topology as a grid of hosts coloured by team, admissions
    hatched, a legend of only what is drawn, a title per cell (SVG), the title in a PNG's metadata."""
    svg, png = tmp_path / "p.svg", tmp_path / "p.png"
    result = run("what-if", TWO, "-q", "-o", "json", "--picture", str(svg))
    assert result.exit_code == 0, result.output
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    titles = re.findall(r"<title>([^<]*)</title>", text)
    assert any("l4-node-01" in t for t in titles) and any("l4-node-05" in t for t in titles)
    legend = re.findall(r"<text[^>]*>([^<]*)</text>", text)
    assert {"team-a-cq", "team-b-cq", "admitted by this plan"} <= set(legend), legend   # coloured by team, hatched
    assert not any("evict" in entry or "migrat" in entry for entry in legend[1:]), legend   # only what is drawn
    result = run("what-if", TWO, "-q", "-o", "json", "--picture", str(png))
    assert result.exit_code == 0, result.output
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and b"Title" in data
    assert run("what-if", TWO, "-q", "--picture", str(tmp_path / "p.gif")).exit_code == 2


def test_picture_before_draws_the_cluster_before_the_plan(tmp_path: Path) -> None:
    """--picture-before: the cluster before the plan, drawn the same way (no admissions yet)."""
    after, before = tmp_path / "after.svg", tmp_path / "before.svg"
    result = run("what-if", TWO, "-q", "-o", "json", "--picture", str(after), "--picture-before", str(before))
    assert result.exit_code == 0, result.output
    a, b = after.read_text(), before.read_text()
    assert b.lstrip().startswith("<?xml") and a != b
    assert "admitted by this plan" in a and "admitted by this plan" not in b


# tiny with ten times its quota: what waits there waits for room on nodes, not for quota
G2 = """\
templates:
- name: g2
  cost: 3
  labels: {node.kubernetes.io/instance-type: g2-standard-32}
  allocatable: {nvidia.com/gpu: 4, cpu: "32", memory: 128Gi, pods: "110"}
"""


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("roomy")
    text = Path(TINY).read_text()
    for old, new in (('nominalQuota: "48"', 'nominalQuota: "480"'), ("nominalQuota: 192Gi", "nominalQuota: 1920Gi"),
                     ('nominalQuota: "6"', 'nominalQuota: "60"')):
        assert old in text
        text = text.replace(old, new)
    (folder / "roomy.yaml").write_text(text)
    (folder / "g2.yaml").write_text(G2)
    return str(folder / "roomy.yaml"), str(folder / "g2.yaml")


def what_if_answer(snapshot: str, *args: str) -> dict[str, Any]:
    return json.loads(planned("what-if", snapshot, *args, "-o", "json", "-q").stdout)  # type: ignore[no-any-return]


def test_add_nodes_answers_least_cost_units_and_the_plan_with_them(roomy: tuple[str, str]) -> None:
    """--add-nodes SPEC: the least-cost units that admit every target, and the plan with them."""
    snapshot, spec = roomy
    without = what_if_answer(snapshot)
    assert sorted(p["workload"]["name"] for p in without["pending"]) == ["eval-sweep", "notebook-export"]
    data = what_if_answer(snapshot, "--add-nodes", spec)
    answer = data["whatIf"]
    assert answer["addNodes"] == [{"template": "g2", "per": "node", "units": 1, "nodes": 1, "cost": 3.0}]
    assert answer["cost"] == 3.0 and answer["addedNodes"] == ["g2-1"] and answer["waiting"] == []
    assert data["pending"] == [] and "g2-1" in placed_nodes(data)        # the plan with them
    assert "whatIf" not in without
    blocked = what_if_answer(TINY, "--add-nodes", spec)["whatIf"]     # tiny's own quota: nodes cannot help
    assert "Job/ml-research/pretrain-small" in {b["workload"] for b in blocked["quotaBlocked"]}
    assert blocked["addedNodes"] == []


def test_priority_narrows_the_targets(roomy: tuple[str, str]) -> None:
    """--priority P: with --add-nodes, the targets are the pending workloads at P or above (default: all)."""
    snapshot, spec = roomy
    every = what_if_answer(snapshot, "--add-nodes", spec)["whatIf"]
    mid = what_if_answer(snapshot, "--add-nodes", spec, "--priority", "100")["whatIf"]
    high = what_if_answer(snapshot, "--add-nodes", spec, "--priority", "1000")["whatIf"]
    assert [t.rsplit("/", 1)[1] for t in every["targets"]] == ["eval-sweep", "finetune-llama", "notebook-export",
                                                               "pretrain-small"]
    assert "Job/ml-research/notebook-export" not in mid["targets"] and len(mid["targets"]) == 3   # its priority: 0
    assert high["targets"] == ["Job/ml-research/finetune-llama"] and high["addNodes"][0]["units"] == 0


def test_workloads_narrows_the_targets(roomy: tuple[str, str]) -> None:
    """--workloads NAMES: with --add-nodes, the targets are these pending workloads (NAME or NAMESPACE/NAME)."""
    snapshot, spec = roomy
    for names in ("notebook-export", "ml-research/notebook-export"):
        answer = what_if_answer(snapshot, "--add-nodes", spec, "--workloads", names)["whatIf"]
        assert answer["targets"] == ["Job/ml-research/notebook-export"] and answer["addedNodes"] == ["g2-1"]
    answer = what_if_answer(snapshot, "--add-nodes", spec, "--workloads", "finetune-llama")["whatIf"]
    assert answer["targets"] == ["Job/ml-research/finetune-llama"] and answer["addedNodes"] == []


def test_remove_nodes_drains_exactly_the_matching_nodes() -> None:
    """--remove-nodes SELECTOR: plan without exactly the nodes the kubectl-style selector matches;
    a malformed one exits 2; one matching no node warns (exit 2 under --strict)."""
    assert "gpu-node-2" in placed_nodes(plan_json(TINY))
    drained = plan_json(TINY, "--remove-nodes", "kubernetes.io/hostname=gpu-node-2")
    assert drained["whatIf"]["removedNodes"] == ["gpu-node-2"]
    assert "gpu-node-2" not in placed_nodes(drained) and placed_nodes(drained) <= {"gpu-node-1"}
    both = plan_json(TINY, "--remove-nodes", "kubernetes.io/hostname in (gpu-node-1,gpu-node-2)")
    assert sorted(both["whatIf"]["removedNodes"]) == ["gpu-node-1", "gpu-node-2"] and both["admissions"] == []
    notin = plan_json(TINY, "--remove-nodes", "kubernetes.io/hostname notin (gpu-node-1)")
    assert notin["whatIf"]["removedNodes"] == ["gpu-node-2"]
    assert run("what-if", TINY, "--remove-nodes", "a!b", "-q").exit_code == 2
    none = run("what-if", TINY, "--remove-nodes", "example.com/rack=r7", "-o", "json", "-q")
    assert none.exit_code == 0 and "matches no node" in none.stderr, none.output
    assert run("what-if", TINY, "--remove-nodes", "example.com/rack=r7", "-q", "--strict").exit_code == 2


def rows(table: str) -> list[str]:
    return re.findall(r"^(?:Job/)?(team-[ab]/\S+)", table, re.M)


def test_namespace_filters_the_table_rows_not_the_headline() -> None:
    """--namespace NS: the table's workload rows of namespace NS only; the headline is the whole plan's."""
    whole = planned("what-if", TWO, "-o", "table", "-q").stdout
    only = planned("what-if", TWO, "-o", "table", "-q", "--namespace", "team-a").stdout
    assert {r.split("/")[0] for r in rows(whole)} == {"team-a", "team-b"}
    assert rows(only) == ["team-a/a-protein-fold"]
    assert "admits 4, 1 wait" in whole and "admits 4, 1 wait" in only


def test_queue_filters_the_table_rows() -> None:
    """--queue Q: only the workloads of ClusterQueue or LocalQueue Q."""
    by_cq = planned("what-if", TWO, "-o", "table", "-q", "--queue", "team-b-cq").stdout
    by_lq = planned("what-if", TWO, "-o", "table", "-q", "--queue", "team-b-queue").stdout
    assert {r.split("/")[0] for r in rows(by_cq)} == {"team-b"} and len(rows(by_cq)) == 4
    assert rows(by_lq) == rows(by_cq)


def test_summary_only_drops_the_workload_rows() -> None:
    """--summary-only: the headline, counts and summary, no workload rows."""
    whole = planned("what-if", TWO, "-o", "table", "-q").stdout
    summary = planned("what-if", TWO, "-o", "table", "-q", "--summary-only").stdout
    assert rows(whole) and rows(summary) == [] and "WORKLOAD " not in summary
    assert summary.startswith("Plan for ") and "Workloads: admit 4" in summary and "Summary:" in summary


# ------------------------------------------------------------------ explain

def test_explain_workload_names_its_state_and_position() -> None:
    """WORKLOAD is NAMESPACE/NAME or KIND/NAMESPACE/NAME; the answer is its state, position and change."""
    short = json.loads(planned("explain", TINY_WORKLOAD, TINY, "-o", "json", "-q").stdout)
    long = json.loads(planned("explain", "Job/" + TINY_WORKLOAD, TINY, "-o", "json", "-q").stdout)
    assert short == long
    assert short["workload"]["name"] == "pretrain-small" and short["state"] == "waiting"
    assert short["position"]["clusterQueue"] == [2, 4] and short["smallestChange"]["admits"]
    assert run("explain", "ml-research/no-such", TINY, "-q").exit_code == 2


def test_explain_all_covers_every_waiting_workload() -> None:
    """--all: every workload the plan leaves waiting, no WORKLOAD."""
    result = planned("explain", "--all", TINY, "-o", "json", "-q")
    explained = json.loads(result.stdout)["explanations"]
    assert sorted(e["workload"]["name"] for e in explained) == ["notebook-export", "pretrain-small"]
    assert {p["workload"]["name"] for p in plan_json(TINY)["pending"]} == {"notebook-export", "pretrain-small"}


def test_search_time_limit_bounds_each_changed_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """--search-time-limit SECONDS (default 2): the limit of each plan of a changed snapshot.
    Checked where it is used (the limit each changed plan is given), not by racing the
    clock: how far a search gets in a given time is the machine's, not the flag's."""
    import planner.cycle as cycle

    limits: list[float | None] = []
    plan_snapshot = cycle.plan_snapshot

    def spy(snapshot: Any, options: SolveOptions = SolveOptions(), **rest: Any) -> Any:
        limits.append(options.time_limit)
        return plan_snapshot(snapshot, options, **rest)

    monkeypatch.setattr(cycle, "plan_snapshot", spy)
    chosen = run("explain", TINY_WORKLOAD, TINY, "-o", "json", "-q", "--search-time-limit", "0.75")
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.stdout)["searchTimeLimitSeconds"] == 0.75
    assert len(limits) > 2 and set(limits[1:]) == {0.75}, limits       # the first is the plan itself
    limits.clear()
    default = run("explain", TINY_WORKLOAD, TINY, "-o", "json", "-q")
    assert default.exit_code == 0 and set(limits[1:]) == {2.0}, limits
    option = next(p for p in cli_module.cli.commands["explain"].params if p.name == "search_time_limit")
    assert option.default == 2.0


def test_explain_config_and_policy_are_read_with_live(tmp_path: Path) -> None:
    """--config FILE (with --live): read before the cluster; a malformed one is exit 2 naming it."""
    bad = tmp_path / "kueue.yaml"
    bad.write_text("kind: [\n")
    result = run("explain", TINY_WORKLOAD, "--live", "--config", str(bad), "--kubeconfig", kubeconfig(tmp_path), "-q")
    assert result.exit_code == 2 and str(bad) in result.stderr, result.output
    good = run("explain", TINY_WORKLOAD, "--live", "--kubeconfig", kubeconfig(tmp_path), "-q")
    assert good.exit_code == 4


# ------------------------------------------------------------------ the live commands, offline

@pytest.mark.parametrize("command", sorted(LIVE_ARGS))
def test_live_and_kubeconfig_read_the_cluster_the_kubeconfig_names(command: str, tmp_path: Path) -> None:
    """--kubeconfig FILE (and explain's --live): the cluster read is the one FILE names; an
    unreachable one is exit 4, naming its server, no credential shown."""
    result = run(*LIVE_ARGS[command], "--kubeconfig", kubeconfig(tmp_path), "-q")
    assert result.exit_code == 4, result.output
    assert "https://127.0.0.1:1" in result.stderr and "abc" not in result.stderr


@pytest.mark.parametrize("command", sorted(LIVE_ARGS))
def test_context_picks_the_kubeconfig_context(command: str, tmp_path: Path) -> None:
    """--context NAME: that context of the kubeconfig instead of its current one."""
    result = run(*LIVE_ARGS[command], "--kubeconfig", kubeconfig(tmp_path), "--context", "y", "-q")
    assert result.exit_code == 4 and "https://127.0.0.1:2" in result.stderr, result.output
    assert "https://127.0.0.1:1" not in result.stderr
    missing = run(*LIVE_ARGS[command], "--kubeconfig", kubeconfig(tmp_path), "--context", "nope", "-q")
    assert missing.exit_code in (2, 4) and "nope" in missing.stderr, missing.output


def test_apply_lease_namespace_and_name_and_their_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """apply --namespace / --lease-name: the Lease it takes (defaults stowplan-system / stowplan-planner).

    The Kueue guard reads the cluster before the Lease is taken; it has its own tests
    (tests/test_kueue_guard.py), so it is switched off here to reach the Lease."""
    import planner.cluster.cycle as cycle
    monkeypatch.setattr(cycle, "check_no_kueue_controller", lambda *_a, **_k: None)
    default = run("apply", "--kubeconfig", kubeconfig(tmp_path), "-q")
    assert default.exit_code == 4 and "/namespaces/stowplan-system/leases/stowplan-planner" in default.stderr
    named = run("apply", "--kubeconfig", kubeconfig(tmp_path), "--namespace", "ops", "--lease-name", "mine", "-q")
    assert named.exit_code == 4 and "/namespaces/ops/leases/mine" in named.stderr, named.output


# ------------------------------------------------------------------ generate

def generated(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "g.json"
    result = run("generate", *args, "--out", str(out), "-q")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return data


def count(snapshot: dict[str, Any], kind: str) -> int:
    return sum(1 for item in snapshot["items"] if item["kind"] == kind)


def test_generate_preset_seed_and_nodes(tmp_path: Path) -> None:
    """--preset (default S: 512 nodes), --seed (same seed, same bytes; default the preset's), --nodes AxB..."""
    small = generated(tmp_path, "--nodes", "2x2x4", "--set", "pending=4", "--set", "running=0")
    assert count(small, "Node") == 16
    again = generated(tmp_path, "--nodes", "2x2x4", "--set", "pending=4", "--set", "running=0")
    seeded = generated(tmp_path, "--nodes", "2x2x4", "--set", "pending=4", "--set", "running=0", "--seed", "9")
    assert small == again and small != seeded
    fair = generated(tmp_path, "--preset", "fair", "--nodes", "2x2x4", "--set", "pending=4", "--set", "running=0")
    assert any(i["kind"] == "ConfigMap" and "fairSharing" in json.dumps(i) for i in fair["items"])
    assert not any(i["kind"] == "ConfigMap" for i in small["items"])
    option = next(p for p in cli_module.cli.commands["generate"].params if p.name == "preset")
    assert option.default == "S"


def test_generate_set_changes_a_parameter(tmp_path: Path) -> None:
    """--set KEY=VALUE: any listed parameter (here teams and gpus_per_node)."""
    three = generated(tmp_path, "--nodes", "1x2", "--set", "teams=3", "--set", "pending=2", "--set", "running=0",
                      "--set", "gpus_per_node=4")
    assert count(three, "ClusterQueue") == 3
    gpus = {i["status"]["allocatable"]["nvidia.com/gpu"] for i in three["items"] if i["kind"] == "Node"}
    assert gpus == {"4"}
    assert run("generate", "--set", "no_such=1", "-q").exit_code == 2


def test_generate_output_format_and_its_default(tmp_path: Path) -> None:
    """-o json|yaml, default yaml for an --out ending in .yaml/.yml, else json; --out writes FILE, not stdout."""
    args = ("generate", "--nodes", "1x2", "--set", "pending=2", "--set", "running=0", "-q")
    stdout = run(*args)
    assert stdout.stdout.startswith("{") and json.loads(stdout.stdout)["kind"] == "List"
    assert yaml.safe_load(run(*args, "-o", "yaml").stdout) == json.loads(stdout.stdout)
    for name, is_json in (("s.yml", False), ("s.json", True), ("s.txt", True)):
        result = run(*args, "--out", str(tmp_path / name))
        assert result.exit_code == 0 and result.stdout == ""
        assert (tmp_path / name).read_text().startswith("{") == is_json


def test_generate_trace_hours_and_load(tmp_path: Path) -> None:
    """--trace: JSON lines of jobs arriving; --hours of arrivals (default 24); --load: GPU-time per hour."""
    def trace(*extra: str) -> list[dict[str, Any]]:
        result = run("generate", *SMALL, "--trace", "--seed", "7", *extra, "-q")
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in result.stdout.splitlines()]

    short = trace("--hours", "0.5")
    assert short[0]["kind"] == "Trace" and all(line["submit"] <= 1800 for line in short[1:])
    longer = trace("--hours", "2")
    assert max(line["submit"] for line in longer[1:]) > 1800
    heavy = trace("--hours", "0.5", "--load", "4")
    assert len(heavy) > len(short)
    default = trace()
    assert max(line["submit"] for line in default[1:]) > 20 * 3600 and default[0].get("hours", 24) == 24
    assert run("generate", *SMALL, "--hours", "1", "-q").exit_code == 2       # only with --trace


# ------------------------------------------------------------------ simulate

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("sim")
    snap, trace = folder / "snap.json", folder / "trace.jsonl"
    assert run("generate", *SMALL, "-o", "json", "--out", str(snap), "-q").exit_code == 0
    result = run("generate", *SMALL, "--trace", "--hours", "0.5", "--load", "3", "--seed", "7",
                 "--out", str(trace), "-q")
    assert result.exit_code == 0, result.output
    return str(snap), str(trace)


def simulated(*args: str) -> dict[str, Any]:
    result = planned("simulate", *args, "-o", "json", "-q")
    return json.loads(result.stdout)   # type: ignore[no-any-return]


def test_simulate_interval_hours_and_solver(cluster: tuple[str, str]) -> None:
    """SNAPSHOT and --trace FILE are simulated; --interval (default 60) s between cycles; --hours
    simulated; --solver the planner under test (default milp)."""
    snap, trace = cluster
    base = simulated(snap, "--trace", trace, "--hours", "0.1", "--solver", "greedy")
    (planner,) = base["planners"]
    assert planner == "greedy" and base["planners"]["greedy"]["cycles"] == 7          # t = 0, 60, ..., 360
    wide = simulated(snap, "--trace", trace, "--hours", "0.1", "--solver", "greedy", "--interval", "180")
    assert wide["planners"]["greedy"]["cycles"] == 3                                   # t = 0, 180, 360
    milp = simulated(snap, "--trace", trace, "--hours", "0.05", "--time-limit", "2")
    assert list(milp["planners"]) == ["milp"] and milp["planners"]["milp"]["cycles"] == 4
    assert run("simulate", snap, "-q").exit_code == 2       # --trace is required


def test_simulate_compare_drain_and_outputs(cluster: tuple[str, str], tmp_path: Path) -> None:
    """--compare: both planners side by side; --drain: plan on until every trace job finished;
    -o (default json off a terminal), --out FILE instead of stdout, --picture the time series."""
    snap, trace = cluster
    both = simulated(snap, "--trace", trace, "--hours", "0.05", "--compare", "--time-limit", "2")
    assert set(both["planners"]) == {"milp", "greedy"}
    drained = simulated(snap, "--trace", trace, "--hours", "0.05", "--solver", "greedy", "--drain",
                        "--interval", "600")
    plain = simulated(snap, "--trace", trace, "--hours", "0.05", "--solver", "greedy", "--interval", "600")
    assert drained["planners"]["greedy"]["cycles"] > plain["planners"]["greedy"]["cycles"]
    args = (snap, "--trace", trace, "--hours", "0.05", "--solver", "greedy", "--interval", "600", "-q")
    default = run("simulate", *args)
    assert untimed(json.loads(default.stdout)) == untimed(plain)
    table = run("simulate", *args, "-o", "table")
    assert "useful GPU utilisation" in table.stdout
    out, picture = tmp_path / "sim.json", tmp_path / "sim.svg"
    result = run("simulate", *args, "--out", str(out), "--picture", str(picture))
    assert result.exit_code == 0 and result.stdout == "" and untimed(json.loads(out.read_text())) == untimed(plain)
    assert picture.read_text().lstrip().startswith("<?xml") and "<svg" in picture.read_text()


def test_simulate_policy_time_limit_gap_and_seed(cluster: tuple[str, str], tmp_path: Path) -> None:
    """--policy FILE replaces the snapshot's; --time-limit each cycle's limit; --gap 0 to 1;
    --seed (default 0) draws the snapshot's own workloads' durations."""
    snap, trace = cluster
    args = (snap, "--trace", trace, "--hours", "0.05", "--interval", "60")
    fast = simulated(*args, "--time-limit", "2")
    starved = simulated(*args, "--time-limit", "0.0001")
    assert fast["time_limit"] == 2 and set(fast["planners"]["milp"]["plan_status"]) == {"optimal"}
    assert starved["time_limit"] == 0.0001 and set(starved["planners"]["milp"]["plan_status"]) == {"fallback"}
    by_policy = simulated(*args, "--policy", policy_file(tmp_path, timeLimitSeconds=0.0001))
    assert set(by_policy["planners"]["milp"]["plan_status"]) == {"fallback"}
    assert run("simulate", *args, "--gap", "2", "-q").exit_code == 2
    assert fast["gap"] is None and simulated(*args, "--time-limit", "2", "--gap", "0.5")["gap"] == 0.5
    long = (snap, "--trace", trace, "--hours", "1", "--interval", "600", "--solver", "greedy")
    assert untimed(simulated(*long)) == untimed(simulated(*long, "--seed", "0"))
    assert untimed(simulated(*long)["planners"]) != untimed(simulated(*long, "--seed", "5")["planners"])


# ------------------------------------------------------------------ trace

def finished_job(name: str, created: str, started: str, completed: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team-llm", "creationTimestamp": created,
                         "labels": {"kueue.x-k8s.io/queue-name": "team-llm-queue"}},
            "spec": {"parallelism": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}},
            "status": {"startTime": started, "completionTime": completed}}


def test_trace_since_and_out(tmp_path: Path) -> None:
    """SNAPSHOT... history files; --since: only Jobs created at or after it, submit counted from it
    (default: the first finished Job's creation); --out FILE instead of stdout."""
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        finished_job("early", "2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z", "2026-12-01T10:31:00Z"),
        finished_job("late", "2026-12-01T12:00:00Z", "2026-12-01T12:00:00Z", "2026-12-01T13:00:00Z")]}))
    whole = run("trace", str(history), "-q")
    assert whole.exit_code == 0, whole.output
    lines = [json.loads(line) for line in whole.stdout.splitlines()][1:]
    assert [(j["name"], j["submit"]) for j in lines] == [("early", 0.0), ("late", 7200.0)]
    since = run("trace", str(history), "--since", "2026-12-01T11:00:00Z", "-q")
    lines = [json.loads(line) for line in since.stdout.splitlines()][1:]
    assert [(j["name"], j["submit"]) for j in lines] == [("late", 3600.0)]
    out = tmp_path / "t.jsonl"
    written = run("trace", str(history), "--out", str(out), "-q")
    assert written.exit_code == 0 and written.stdout == "" and out.read_text() == whole.stdout


# ------------------------------------------------------------------ bench

@pytest.fixture(scope="module")
def bench_fixtures(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    folder = tmp_path_factory.mktemp("bench")
    (folder / "fixtures").mkdir()
    (folder / "fixtures" / "tiny.yaml").write_text(Path(TINY).read_text())
    (folder / "B.md").write_text("# Mine\n\nkept\n")
    result = run("bench", "--no-scenarios", "--no-family", "--fixtures-dir", str(folder / "fixtures"),
                 "--json", str(folder / "raw.json"), "--out", str(folder / "B.md"), "-q")
    assert result.exit_code == 0, result.output
    return folder, result


def test_bench_fixtures_json_and_sections(bench_fixtures: tuple[Path, Result], tmp_path: Path) -> None:
    """--no-scenarios / --no-family drop those sections; --fixtures-dir: the fixtures planned (milp
    and greedy); --json every record; --out refreshes FILE's bench sections, keeping the rest; -q quiet."""
    folder, result = bench_fixtures
    raw = json.loads((folder / "raw.json").read_text())
    assert raw["scale"] == [] and raw["family"] == []
    (fixture,) = raw["fixtures"]
    assert fixture["fixture"] == "tiny.yaml" and fixture["milp"]["method"] == "milp"
    assert fixture["greedy"]["method"] == "greedy"
    text = (folder / "B.md").read_text()
    assert text.startswith("# Mine\n\nkept\n") and "| tiny.yaml | milp |" in text
    assert "| tiny.yaml | milp |" in result.stdout and result.stderr == ""
    dropped = run("bench", "--no-scenarios", "--no-family", "--no-fixtures", "-q")
    assert dropped.exit_code == 0 and "tiny.yaml" not in dropped.stdout


def test_bench_scenario_keep_and_time_limit_factor(tmp_path: Path) -> None:
    """--scenario S: only that scenario; --keep DIR keeps its snapshot; --time-limit-factor scales
    the limit (S's target 2 s less 5%)."""
    keep = tmp_path / "keep"
    result = run("bench", "--scenario", "S", "--no-fixtures", "--no-family", "--time-limit-factor", "0.25",
                 "--keep", str(keep), "--json", str(tmp_path / "raw.json"), "-q")
    assert result.exit_code == 0, result.output
    (row,) = json.loads((tmp_path / "raw.json").read_text())["scale"]
    assert row["scenario"] == "S" and row["time_limit"] == pytest.approx(1.9 * 0.25)
    assert [p.suffix for p in keep.iterdir()] == [".json"]


def test_bench_xl_adds_the_xl_scenario() -> None:
    """--xl: add XL to the scenarios. Running XL takes 15 minutes; checked where it is decided."""
    from planner.tools import bench_command as bench

    assert bench.scenarios_of((), False, True) == ["S", "M", "L"]          # "Default: S, M, L"
    assert bench.scenarios_of((), True, True) == ["S", "M", "L", "XL"]
    assert bench.scenarios_of(("S",), True, True) == ["S", "XL"]
    assert bench.scenarios_of((), True, False) == ["XL"] and bench.scenarios_of((), False, False) == []


def test_bench_family_scale_and_seeds(tmp_path: Path) -> None:
    """--family-scale tiny --family-seeds N: the family's members of that scale and those seeds."""
    result = run("bench", "--no-scenarios", "--no-fixtures", "--family-scale", "tiny", "--family-seeds", "1101",
                 "--json", str(tmp_path / "raw.json"))
    assert result.exit_code == 0, result.output
    assert "bench: " in result.stderr          # progress without -q (test_bench_fixtures_json_and_sections: none with)
    rows_ = json.loads((tmp_path / "raw.json").read_text())["family"]
    assert [(r["scale"], r["seed"], r["nodes"]) for r in rows_] == [("tiny", 1101, 32)]
