"""Writing a picture file whole or not at all (planner/output's pictures share it)."""

from __future__ import annotations

import os
import tempfile


def write_whole(path: str, data: bytes, mode: int | None = None) -> None:
    """`data` into `path` through a temporary file in its folder renamed over it, so a
    reader never sees half a file and a failed write leaves the old one. `mode`: the new
    file's permissions; None: those of any new file (0666 less the umask; mkstemp's are 0600)."""
    folder = os.path.dirname(os.path.abspath(path))
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
