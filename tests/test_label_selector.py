"""`--remove-nodes` label selectors parsed exactly as kubectl parses `-l` (apimachinery's
labels.Parse): each case below is what kubectl accepts or refuses, and what it selects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner import cli as cli_module
from planner.base import label_selector
from planner.base.errors import InputError

REPO = Path(__file__).resolve().parent.parent
TINY = str(REPO / "fixtures" / "tiny.yaml")
HOST = "kubernetes.io/hostname"

N1 = {HOST: "gpu-node-1", "zone": "a", "gen": "3"}
N2 = {HOST: "gpu-node-2", "zone": "b"}
N3 = {HOST: "cpu-node-1"}


def chosen(text: str) -> list[str]:
    selector = label_selector.parse(text, field="--remove-nodes")
    return [labels[HOST] for labels in (N1, N2, N3) if label_selector.matches(selector, labels)]


@pytest.mark.parametrize(("text", "want"), [
    (f"{HOST}=gpu-node-1", ["gpu-node-1"]),
    (f"{HOST}==gpu-node-1", ["gpu-node-1"]),
    (f"{HOST} = gpu-node-1", ["gpu-node-1"]),
    (f"{HOST}!=gpu-node-1", ["gpu-node-2", "cpu-node-1"]),
    ("zone!=a", ["gpu-node-2", "cpu-node-1"]),              # != matches where the label is absent too
    (f"{HOST} in (gpu-node-1)", ["gpu-node-1"]),
    (f"{HOST} in (gpu-node-1, gpu-node-2)", ["gpu-node-1", "gpu-node-2"]),
    ("zone notin (a)", ["gpu-node-2", "cpu-node-1"]),       # notin: absent label matches
    ("zone", ["gpu-node-1", "gpu-node-2"]),
    ("!zone", ["cpu-node-1"]),
    ("zone,!gen", ["gpu-node-2"]),
    ("zone in (a,b),zone notin (b)", ["gpu-node-1"]),
    ("zone=", []),                                        # the empty value is a value
    ("zone in (a,)", ["gpu-node-1"]),                      # "(a," adds the empty value
    ("gen>2", ["gpu-node-1"]),
    ("gen<3", []),
    ("in", []),                                           # 'in' where a key stands is a key
    ("zone in (in)", []),                                 # ... and where a value stands, a value
])
def test_kubectl_accepts_and_selects(text: str, want: list[str]) -> None:
    assert chosen(text) == want


@pytest.mark.parametrize("text", [
    "a!b",            # '!' is no binary operator
    "!!x",            # was: drains every node
    "!x=y",           # !KEY takes nothing after it
    "zone in gpu",    # a set needs parentheses
    "zone in (a",     # and its closing one
    "zone notin ()x",
    "zone in ()",     # kubectl: the set holds the empty value: valid ... (checked below)
    "zone=a,",        # nothing after a comma
    ",zone",
    "=a",
    "zone a",
    "zone=a=b",
    "zone=(a)",
    "gen>x",          # Gt/Lt take an integer
    "-bad-key=1",
    "a/b/c=1",
    "Upper.Case/key=1",
    "zone=-a",        # a label value starts with an alphanumeric
    "zone=" + "v" * 64,
    "",
    "   ",
])
def test_malformed_selector_is_an_input_error_naming_the_flag(text: str) -> None:
    if text == "zone in ()":    # apimachinery: "()" is the set of the empty string, valid
        assert chosen(text) == []
        return
    with pytest.raises(InputError) as error:
        label_selector.parse(text, field="--remove-nodes")
    assert error.value.field == "--remove-nodes"


def run(*args: str):
    return CliRunner().invoke(cli_module.cli, list(args))


@pytest.mark.parametrize("text", [f"{HOST} in gpu-node-1", "a!b", "!!x", "zone notin"])
def test_cli_malformed_selector_exits_2_naming_the_flag(text: str) -> None:
    result = run("what-if", TINY, "--remove-nodes", text, "-q")
    assert result.exit_code == 2, result.output
    assert "--remove-nodes" in result.stderr and result.stdout == ""


def test_cli_set_based_selector_drains_the_node() -> None:
    result = run("what-if", TINY, "--remove-nodes", f"{HOST} in (gpu-node-1)", "-o", "json", "-q")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["whatIf"]["removedNodes"] == ["gpu-node-1"]


def test_cli_selector_matching_no_node_warns_and_strict_fails() -> None:
    result = run("what-if", TINY, "--remove-nodes", "kubernetes.io/hostnme=gpu-node-1", "-q")
    assert result.exit_code == 0, result.output
    assert "warning: --remove-nodes: 'kubernetes.io/hostnme=gpu-node-1' matches no node" in result.stderr
    strict = run("what-if", TINY, "--remove-nodes", "kubernetes.io/hostnme=gpu-node-1", "-q", "--strict")
    assert strict.exit_code == 2, strict.output
    assert "matches no node" in strict.stderr and strict.stdout == ""
