"""An empty or partial snapshot is said, not planned "optimal" in silence (issue 35):
no Node, no ClusterQueue or no workload read is a warning on stderr, and under --strict
exit 2 (README's exit-code table: any reported problem under --strict) with nothing
written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner import cli as cli_module

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "fixtures" / "tiny.yaml"


def run(*args: str):
    return CliRunner().invoke(cli_module.cli, list(args))


def without(tmp_path: Path, *kinds: str) -> str:
    doc = yaml.safe_load(TINY.read_text())
    doc["items"] = [o for o in doc["items"] if o["kind"] not in kinds]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_an_empty_list_warns_about_each_missing_part_and_strict_fails(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    result = run("what-if", str(path), "-o", "yaml", "-q")
    assert result.exit_code == 0, result.output
    for kind in ("Node", "ClusterQueue", "workload"):
        assert f"warning: {path}: no {kind} was read" in result.stderr
    strict = run("what-if", str(path), "-o", "yaml", "-q", "--strict")
    assert strict.exit_code == 2, strict.output
    assert "--strict" in strict.stderr and strict.stdout == ""


@pytest.mark.parametrize(("kinds", "missing"), [
    (("Node",), "Node"),
    (("ClusterQueue",), "ClusterQueue"),
    (("Job",), "workload"),
])
def test_each_missing_part_is_named(tmp_path: Path, kinds: tuple[str, ...], missing: str) -> None:
    path = without(tmp_path, *kinds)
    result = run("what-if", path, "-o", "yaml", "-q")
    assert f"no {missing} was read" in result.stderr
    others = {"Node", "ClusterQueue", "workload"} - {missing}
    assert not any(f"no {o} was read" in result.stderr for o in others)
    assert run("what-if", path, "-o", "yaml", "-q", "--strict").exit_code == 2


def test_a_full_snapshot_warns_of_nothing() -> None:
    result = run("what-if", str(TINY), "-o", "yaml", "-q")
    assert result.exit_code == 0 and "was read" not in result.stderr


def test_a_snapshot_without_kueues_configmap_says_which_configuration_it_assumed() -> None:
    result = run("what-if", str(TINY), "-o", "yaml", "-q")
    assert result.exit_code == 0
    [line] = [l for l in result.stderr.splitlines() if "kueue-manager-config" in l]
    assert line.startswith(f"warning: {TINY}: no ConfigMap kueue-system/kueue-manager-config in the snapshot: "
                           "planning with Kueue's default Configuration (fairSharing off, "
                           "admissionFairSharing off, waitForPodsReady off)")
    strict = run("what-if", str(TINY), "-o", "yaml", "-q", "--strict")
    assert strict.exit_code == 0       # a snapshot without it is valid: said, not refused


def test_a_snapshot_with_the_configmap_says_nothing_about_it() -> None:
    result = run("what-if", str(REPO / "fixtures" / "fair-sharing.yaml"), "-o", "yaml", "-q")
    assert result.exit_code == 0 and "kueue-manager-config" not in result.stderr
