"""Flags and names as kubectl users expect (issue 35): `stowplan --version`; `-o` is a
format everywhere and `--out` the file; `--out x.json` writes JSON or refuses a
contradicting -o; `--out` and `--metrics` on one path refused; every option's
environment variable is STOWPLAN_<COMMAND>_<FLAG> (the old names of --priority and
--all still read)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from planner import cli as cli_module

REPO = Path(__file__).resolve().parent.parent
TINY = str(REPO / "fixtures" / "tiny.yaml")


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli_module.cli, list(args), env=env)


def test_version_flag() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("stowplan ") and "highspy" in result.stdout
    assert result.stdout == run("version").stdout


def test_out_json_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = run("what-if", TINY, "--out", str(out), "-q")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["kind"] == "Plan"


def test_out_yaml_from_generate_writes_yaml(tmp_path: Path) -> None:
    out = tmp_path / "snap.yaml"
    result = run("generate", "--nodes", "1x2", "--set", "pending=2", "--set", "running=0", "--out", str(out), "-q")
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert not text.startswith("{") and yaml.safe_load(text)["kind"] == "List"


@pytest.mark.parametrize("args", [
    ("what-if", TINY, "-o", "yaml", "--out", "OUT.json"),
    ("what-if", TINY, "-o", "json", "--out", "OUT.yaml"),
    ("what-if", TINY, "-o", "table", "--out", "OUT.json"),
    ("generate", "--nodes", "1x2", "-o", "json", "--out", "OUT.yml"),
    ("snapshot", "-o", "yaml", "--out", "OUT.json"),
])
def test_out_extension_contradicting_o_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    target = str(tmp_path / "x")
    argv = [a.replace("OUT", target) for a in args]
    result = run(*argv, "-q")
    assert result.exit_code == 2, result.output
    assert "--out" in result.stderr and not list(tmp_path.iterdir())


def test_snapshot_o_is_a_format_not_a_file() -> None:
    result = run("snapshot", "-o", "snap.json")
    assert result.exit_code == 2 and "'snap.json' is not one of" in result.stderr
    assert "--out FILE" in run("snapshot", "--help").stdout


def test_out_and_metrics_on_one_path_are_refused(tmp_path: Path) -> None:
    same = str(tmp_path / "plan.yaml")
    result = run("what-if", TINY, "--out", same, "--metrics", same, "-q")
    assert result.exit_code == 2, result.output
    assert "--out and --metrics name the same file" in result.stderr
    assert not list(tmp_path.iterdir())


def test_every_option_env_var_follows_the_rule() -> None:
    for name, command in cli_module.cli.commands.items():
        for param in command.params:
            if not isinstance(param, click.Option) or not any(o.startswith("--") for o in param.opts):
                continue
            if param.name == "settings":            # --set: its own repeatable STOWPLAN_GENERATE_SET
                continue
            flag = next(o for o in param.opts if o.startswith("--"))[2:]
            want = f"STOWPLAN_{name.upper().replace('-', '_')}_{flag.upper().replace('-', '_')}"
            envvar = param.envvar if isinstance(param.envvar, str) else (param.envvar or [None])[0]
            assert envvar == want, (name, flag, param.envvar)


@pytest.mark.parametrize("var", ["STOWPLAN_WHAT_IF_PRIORITY", "STOWPLAN_WHAT_IF_MIN_PRIORITY"])
def test_priority_env_var_new_and_old_name(var: str) -> None:
    result = run("what-if", TINY, "-q", env={var: "5"})     # --priority without --add-nodes
    assert result.exit_code == 2 and "--add-nodes" in result.stderr, result.output


@pytest.mark.parametrize("var", ["STOWPLAN_EXPLAIN_ALL", "STOWPLAN_EXPLAIN_EVERY"])
def test_explain_all_env_var_new_and_old_name(var: str) -> None:
    result = run("explain", TINY, "-q", "-o", "json", env={var: "1"})
    assert result.exit_code == 0, result.output
    assert "explanations" in json.loads(result.stdout)
