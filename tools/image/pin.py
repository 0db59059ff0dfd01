"""Pin the CronJob's image by digest: the release step after `make image` (make image-pin).

    python3 tools/image/pin.py sha256:<64 hex> [--root DIR] [--inputs ID]

Rewrites every `stowplan@sha256:<digest>` in PINNED_FILES, and the `image inputs` line of
cronjob/cronjob.yaml: which inputs of the image (tools/image/build.sh INPUTS, as git
trees) that digest was built from, so tests/test_image.py can tell a pin that must equal
today's build (same inputs) from one a later change to the planner has left behind.

Why a release step and not a pin in every commit: every change to planner/ is a new
image, so a pin that had to match each commit would fail the suite on every change by
anyone who did not run `make image-pin`; the digest is pinned when a release is cut.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINNED_FILES = ("cronjob/cronjob.yaml", "docs/image.md", "docs/operations.md", "README.md")
PIN = re.compile(r"stowplan@sha256:[0-9a-f]{64}")
INPUTS_LINE = re.compile(r"(# image inputs: )[0-9a-f]+")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def input_paths(root: Path = ROOT) -> list[str]:
    """The paths the image is built from (tools/image/build.sh INPUTS)."""
    build = (root / "tools/image/build.sh").read_text()
    match = re.search(r'^INPUTS="([^"]+)"', build, re.M)
    if not match:
        raise SystemExit("tools/image/build.sh names no INPUTS")
    return match.group(1).split()


def image_inputs(root: Path = ROOT, rev: str = "HEAD") -> str:
    """The identity of the image's inputs at `rev`: a hash of their git trees."""
    trees = [subprocess.run(["git", "rev-parse", f"{rev}:{path}"], cwd=root, check=True,
                            capture_output=True, text=True).stdout.strip()
             for path in input_paths(root)]
    return hashlib.sha256("\n".join(trees).encode()).hexdigest()[:32]


def pinned(root: Path = ROOT) -> dict[str, list[str]]:
    """Every pinned digest, by file."""
    return {name: [m.removeprefix("stowplan@") for m in PIN.findall((root / name).read_text())]
            for name in PINNED_FILES}


def pinned_inputs(root: Path = ROOT) -> str:
    match = INPUTS_LINE.search((root / "cronjob/cronjob.yaml").read_text())
    return match.group(0).split(": ")[1] if match else ""


def pin(digest: str, inputs: str, root: Path = ROOT) -> None:
    if not DIGEST.fullmatch(digest):
        raise SystemExit(f"{digest!r} is not a digest (sha256:<64 hex>)")
    texts = {}
    for name in PINNED_FILES:
        text = (root / name).read_text()
        new, count = PIN.subn("stowplan@" + digest, text)
        if count == 0:
            raise SystemExit(f"{name}: no stowplan@sha256:... to pin")
        if name == "cronjob/cronjob.yaml":
            new, found = INPUTS_LINE.subn(lambda m: m.group(1) + inputs, new)
            if found != 1:
                raise SystemExit(f"{name}: no single '# image inputs: ...' line")
        texts[name] = new
    for name, text in texts.items():      # all files or none
        (root / name).write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("digest")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--inputs", help="the inputs' identity (default: from git, HEAD)")
    args = parser.parse_args()
    inputs = args.inputs or image_inputs(args.root)
    pin(args.digest, inputs, args.root)
    print(f"pinned {args.digest} (inputs {inputs}) in {', '.join(PINNED_FILES)}", file=sys.stderr)


if __name__ == "__main__":
    main()
