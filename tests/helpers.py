"""Helpers several test modules share (the builders of models are in builders.py)."""

from __future__ import annotations

import http.server
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

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


class JsonServer:
    """A real local HTTP server (at `url`) answering every GET with `answer`, bytes of
    JSON or not, which a test may change between requests; `close()` stops it."""

    def __init__(self, answer: bytes = b"{}") -> None:
        server = self
        self.answer = answer

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:   # noqa: N802 - http.server's name
                body = server.answer
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
