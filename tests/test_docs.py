"""The docs say what the code does (issue 35): the snapshot recipe leads with
`stowplan snapshot`, and its kubectl alternative lists every kind the reader reads,
Kueue's kueue-manager-config ConfigMap included; the README is a front door and the
rest a documentation site that builds with --strict, as part of `make test`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from planner.snapshot.reader import KINDS

REPO = Path(__file__).resolve().parent.parent
RECIPE_PAGES = [REPO / "docs" / "snapshots.md"]


def plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith("s") else "s")


def recipe() -> str:
    """The kubectl recipe: the sh block that loops over kinds."""
    for page in RECIPE_PAGES:
        if page.exists():
            for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
                if "for kind in" in block:
                    return block
    raise AssertionError("no kubectl recipe found")


def test_the_kubectl_recipe_lists_every_kind_the_reader_reads() -> None:
    text = recipe()
    for group, kind in KINDS:
        if kind == "ConfigMap":
            assert "kubectl get configmap kueue-manager-config -n kueue-system" in text
            continue
        name = plural(kind) + (f".{group}" if group and group != "scheduling.k8s.io" else "")
        if group == "batch":
            name = plural(kind)
        assert re.search(rf"(^|\s){re.escape(name)}(\s|;|$)", text), (group, kind, name)


def test_the_quick_start_leads_with_stowplan_snapshot() -> None:
    text = (REPO / "README.md").read_text()
    quick = text[text.index("## Quick start"):]
    assert quick.index("stowplan snapshot --out") < quick.index("```\n", quick.index("```sh") + 5)
    assert "kubectl get nodes,pods" not in text


def test_readme_is_a_front_door_starting_with_the_two_commands() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 160, len(lines)
    assert lines[:5] == ["# Stowplan", "", "```sh",
                         "make demo   # set up (venv, dependencies) and plan the bundled multi-team GPU snapshot",
                         "make test   # set up, build the test control plane (first run only), run every test"]
    for page in ("cli", "snapshots", "output", "concepts", "operations", "benchmarks", "design", "development"):
        assert f"(docs/{page}.md)" in "\n".join(lines), page


def test_make_test_builds_the_docs_strictly() -> None:
    makefile = (REPO / "Makefile").read_text()
    test_target = re.search(r"^test:(.*)$", makefile, re.M)
    assert test_target and "docs" in test_target.group(1).split()
    docs_recipe = re.search(r"^docs:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert docs_recipe and "mkdocs build --strict" in docs_recipe.group(1)


def test_the_site_builds_with_strict_and_has_the_generated_cli_reference(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    result = subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr
    reference = (tmp_path / "site" / "cli" / "index.html").read_text()
    for command in ("what-if", "explain", "snapshot", "generate"):
        assert f"stowplan {command}" in reference, command
    assert "--remove-nodes" in reference          # every option, from the click commands


def test_what_if_help_leads_with_stowplan_snapshot() -> None:
    """Issue 35, item 5: `what-if --help` recommended a `kubectl get` list that left out Kueue's
    kueue-manager-config ConfigMap and every kind but Job. It leads with `stowplan snapshot`,
    sends a hand-made recipe to the docs' complete one, and says what a snapshot without the
    ConfigMap is planned with."""
    from click.testing import CliRunner

    from planner.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["what-if", "--help"]).output.split())
    examples = text[text.index("Examples:"):]
    assert examples.split()[1:4] == ["stowplan", "snapshot", "--out"], examples[:80]
    assert "kueue-manager-config ConfigMap" in text and "Kueue's default Configuration" in text
    assert 'docs/snapshots.md: "Taking a snapshot"' in text
    assert "kubectl get nodes" not in text and "kubectl get jobs" not in text
