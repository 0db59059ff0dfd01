"""Helpers several test modules share (the builders of models are in builders.py)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def cli_on_a_tty(args: list[str], cwd: Path, stdout: Path) -> tuple[int, str]:
    """Run the CLI in `cwd` with stderr on a pseudo-terminal and stdout to the file
    `stdout`: its exit code and what the terminal got (colours and cursor moves taken
    out, each carriage return a line break)."""
    main, child = pty.openpty()
    with open(stdout, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "planner.cli", *args], cwd=cwd, stdout=out, stderr=child,
                                   env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "TERM": "xterm"})
        os.close(child)
        chunks = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:     # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = process.wait(timeout=600)
    os.close(main)
    return code, ANSI.sub("", b"".join(chunks).decode(errors="replace").replace("\r", "\n"))
