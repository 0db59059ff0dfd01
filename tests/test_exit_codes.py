"""Help that tells the truth (issue 39): each command's exit-code block comes from one
table (planner.cli.group.EXIT_CODES) and the codes it lists are the codes it exits with;
--now before every creation time warns; --picture and --picture-before on one path
are refused."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner import cli as cli_module
from planner.cli.group import EXIT_CODES
from planner.base.errors import VerificationError

REPO = Path(__file__).resolve().parent.parent
TINY = str(REPO / "fixtures" / "tiny.yaml")
COMMANDS = sorted(EXIT_CODES)
UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def invoke(*args: str):
    return CliRunner().invoke(cli_module.cli, list(args), auto_envvar_prefix="STOWPLAN")


def listed(help_text: str) -> list[int]:
    block = help_text.split("Exit codes:", 1)[1]
    return [int(m) for m in re.findall(r"^\s+(\d+)  ", block, re.M)]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_exactly_the_commands_own_codes(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert result.output.count("Exit codes:") == 1
    assert listed(result.output) == [code for code, _ in EXIT_CODES[command]]
    for _, meaning in EXIT_CODES[command]:
        assert meaning.split()[0] in result.output


def test_blocks_differ_where_the_commands_do() -> None:
    """The old block was one for all: --strict for commands without it, a plan for snapshot."""
    helps = {c: invoke(c, "--help").output.split("Exit codes:", 1)[1] for c in COMMANDS}
    for command, text in helps.items():
        options = invoke(command, "--help").output.split("Exit codes:", 1)[0]
        assert ("--strict" in text) == ("--strict" in options), command
    assert "plan" not in helps["snapshot"] and "snapshot written" in helps["snapshot"]
    assert "Lease" in helps["apply"] and "Lease" not in helps["plan"]
    assert 4 not in listed("Exit codes:" + helps["what-if"]) and 4 not in listed("Exit codes:" + helps["generate"])


# ---------------------------------------------------------------- the codes, provoked

def codes_seen(command: str) -> set[int]:
    """The codes a run reaches here; 130 and 143 (a signal) are tests/test_interrupt.py's."""
    return {code for code, _ in EXIT_CODES[command] if code not in (130, 143)}


def test_what_if_exits_as_its_help_says(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = {invoke("what-if", TINY, "-q", "-o", "yaml").exit_code, invoke("what-if", TINY, "--gap", "abc").exit_code}
    import planner.cycle

    def fails(*args: object, **kwargs: object) -> None:
        raise VerificationError(["node n1: cpu over allocatable"])

    monkeypatch.setattr(planner.cycle, "plan_snapshot", fails)
    seen.add(invoke("what-if", TINY, "-q").exit_code)

    def breaks(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(planner.cycle, "plan_snapshot", breaks)
    seen.add(invoke("what-if", TINY, "-q").exit_code)
    assert seen == codes_seen("what-if")


def test_explain_and_generate_exit_as_their_help_says(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    explain = {invoke("explain", "team-a/nope", TINY, "-q").exit_code,
               invoke("explain", "--all", TINY, "-q", "--search-time-limit", "0.5", "-o", "yaml").exit_code,
               invoke("explain", "--live", "a/b", "--kubeconfig", str(kubeconfig), "-q").exit_code}
    assert explain == {0, 2, 4} and explain <= codes_seen("explain")
    generate = {invoke("generate", "--nodes", "2x2x2", "--set", "pending=2", "--set", "running=2",
                       "--set", "teams=1", "-q").exit_code,
                invoke("generate", "--nodes", "abc").exit_code}
    assert generate == {0, 2}


@pytest.mark.parametrize("command", ["snapshot", "plan", "apply"])
def test_live_commands_exit_4_on_an_unreachable_cluster_and_2_on_a_bad_flag(command: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    assert invoke(command, "--kubeconfig", str(kubeconfig), "-q").exit_code == 4
    assert invoke(command, "--no-such-flag").exit_code == 2
    assert {2, 4} <= codes_seen(command)


# ---------------------------------------------------------------- --now, pictures

def test_now_before_every_creation_time_warns() -> None:
    result = subprocess.run([sys.executable, "-m", "planner.cli", "what-if", TINY, "-q", "-o", "yaml",
                             "--now", "2001-01-01T00:00:00Z"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "warning: --now 2001-01-01T00:00:00Z is before every workload's creation time" in result.stderr
    quiet = subprocess.run([sys.executable, "-m", "planner.cli", "what-if", TINY, "-q", "-o", "yaml"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "--now" not in quiet.stderr
    strict = invoke("what-if", TINY, "-q", "--strict", "--now", "2001-01-01T00:00:00Z")
    assert strict.exit_code == 2


def test_picture_and_picture_before_on_one_path_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.svg"
    result = invoke("what-if", TINY, "-q", "--picture", str(path), "--picture-before", str(tmp_path / "." / "p.svg"))
    assert result.exit_code == 2
    assert "--picture-before" in result.output and "--picture names" in result.output
    assert not path.exists()


def test_the_determinism_claim_is_what_the_test_compares() -> None:
    """Issue 39: the README promised byte-identical plans "apart from seconds" while
    peak_rss_mib changes run to run; the claim names what the test leaves out."""
    from test_reproducible import without_timings

    plan = {"solver": {"seconds": {"total": 1.5}, "peak_rss_mib": 117.0, "stages": [{"seconds": 0.3}]}, "x": 1}
    other = {"solver": {"seconds": {"total": 9.0}, "peak_rss_mib": 250.0, "stages": [{"seconds": 2.0}]}, "x": 1}
    assert without_timings(plan) == without_timings(other)
    readme = (REPO / "docs" / "output.md").read_text()    # the Plan document's page (the README is a front door)
    claim = next(line for line in readme.split("\n- ") if line.startswith("Determinism, as tested"))
    assert "`seconds` and `peak_rss_mib`" in " ".join(claim.split()) and "on one machine" in claim
    assert "apart from `seconds`." not in readme
