"""Progress on a terminal (issue 35): on a TTY, stderr shows the search's stages as they
finish with objective and gap, and explain --all's i/n; nothing when stderr is not a
terminal or with --quiet. Run in a real pseudo-terminal, the CLI as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import cli_on_a_tty

REPO = Path(__file__).resolve().parent.parent
FIXTURE = str(REPO / "fixtures" / "hierarchical-cohorts.yaml")
TINY = str(REPO / "fixtures" / "tiny.yaml")


def stderr_on_a_tty(args: list[str], tmp_path: Path) -> str:
    """What the terminal got of a run in the checkout that must succeed."""
    code, text = cli_on_a_tty(args, REPO, tmp_path / "stdout")
    assert code == 0, text
    return text


def test_stages_with_objective_and_gap_on_a_terminal(tmp_path: Path) -> None:
    text = stderr_on_a_tty(["what-if", FIXTURE, "-o", "yaml"], tmp_path)
    stages = [line for line in text.splitlines() if line.startswith("stowplan: stage priority")]
    assert stages, text
    assert all(re.search(r": (optimal|feasible|kept|failed), objective [0-9.e+]+ of bound [0-9.e+]+", s)
               for s in stages), stages
    assert any("stowplan: milp optimal:" in line for line in text.splitlines()), text


def test_explain_all_shows_i_of_n_on_a_terminal(tmp_path: Path) -> None:
    text = stderr_on_a_tty(["explain", "--all", TINY, "-o", "yaml"], tmp_path)
    assert re.search(r"explaining.*\b1/2 Job/ml-research/", text), text
    assert re.search(r"explaining.*\b2/2\b", text), text


def test_quiet_and_not_a_terminal_show_nothing(tmp_path: Path) -> None:
    quiet = stderr_on_a_tty(["what-if", FIXTURE, "-o", "yaml", "--quiet"], tmp_path)
    assert "stowplan:" not in quiet and "stage" not in quiet
    piped = subprocess.run([sys.executable, "-m", "planner.cli", "what-if", FIXTURE, "-o", "yaml"], cwd=REPO,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert piped.returncode == 0 and "stowplan:" not in piped.stderr
