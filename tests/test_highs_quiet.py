"""HiGHS prints a "Running HiGHS ... Copyright" banner from the constructor of a
process's first instance, before any option can be set (issue 23): planner.milp.highs
makes every instance, silently unless asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FIRST_INSTANCE = """
import sys
import planner.milp.highs as highs
highs.log_to_console = sys.argv[1] == "loud"
h = highs.new_highs()
h.run()                      # an empty model: no log either
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FIRST_INSTANCE, mode], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_the_first_instance_prints_no_banner():
    done = _run("quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


def test_asked_for_the_log_it_is_there():
    done = _run("loud")
    assert done.returncode == 0 and "HiGHS" in done.stdout
