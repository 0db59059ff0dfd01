"""`stowplan what-if --add-nodes / --remove-nodes` through click: wiring, output and bad input
(the answers themselves are worked out by hand in test_capacity_plan.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from planner import cli as cli_module

REPO = Path(__file__).resolve().parent.parent
FIXTURE = str(REPO / "fixtures" / "multi-team-gpu.yaml")

H100 = """\
templates:
- name: h100-node
  cost: 8
  labels: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(cli_module.cli, list(args), auto_envvar_prefix="STOWPLAN")


def spec(tmp_path: Path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


def test_add_nodes_answers_beside_the_plan(tmp_path: Path) -> None:
    result = run("what-if", FIXTURE, "--add-nodes", spec(tmp_path, H100), "-o", "json", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    answer = data["whatIf"]
    assert data["kind"] and data["admissions"]
    (h100,) = answer["addNodes"]
    assert h100["template"] == "h100-node" and h100["units"] == len(answer["addedNodes"])
    assert answer["cost"] == 8 * h100["units"]
    assert set(answer["admitted"]) | set(answer["waiting"]) == set(answer["targets"])
    blocked = {b["workload"]: b for b in answer["quotaBlocked"]}
    assert "Job/team-data/data-gpu-ocr" in blocked       # its queue covers no GPUs: nodes cannot help
    assert answer["addedNodes"] == [f"h100-node-{i}" for i in range(1, h100["units"] + 1)]


def test_add_nodes_table_starts_with_the_answer(tmp_path: Path) -> None:
    result = run("what-if", FIXTURE, "--add-nodes", spec(tmp_path, H100), "--priority", "1000", "-o", "table", "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Add nodes: ")
    assert "\nPlan for " in result.stdout


def test_remove_nodes_lists_the_displaced() -> None:
    result = run("what-if", FIXTURE, "--remove-nodes", "cloud.google.com/gke-accelerator=nvidia-h100-80gb",
                 "-o", "yaml", "-q")
    assert result.exit_code == 0, result.output
    assert "removedNodes:" in result.stdout and "h100-node-01" in result.stdout
    assert "displaced:" in result.stdout


@pytest.mark.parametrize(("text", "field"), [
    ("templates: []\n", "templates"),
    ("templates:\n- {cost: 1, allocatable: {cpu: 1}}\n", "templates[0].name"),
    ("templates:\n- {name: a, allocatable: {cpu: 1}}\n", "templates[0].cost"),
    ("templates:\n- {name: a, cost: -1, allocatable: {cpu: 1}}\n", "templates[0].cost"),
    ("templates:\n- {name: a, cost: 1}\n", "templates[0].allocatable"),
    ("templates:\n- {name: a, cost: 1, allocatable: {cpu: lots}}\n", "templates[0].allocatable.cpu"),
    ("templates:\n- {name: a, cost: 1, per: row, allocatable: {cpu: 1}}\n", "templates[0].per"),
    ("templates:\n- {name: a, cost: 1, per: rack, hosts: 2, allocatable: {cpu: 1}}\n", "templates[0].topology"),
    ("templates:\n- {name: a, cost: 1, hosts: 2, allocatable: {cpu: 1}}\n", "templates[0].hosts"),
    ("templates:\n- {name: a, cost: 1, colour: red, allocatable: {cpu: 1}}\n", "templates[0].colour"),
    ("templates:\n- {name: a, cost: 1, allocatable: {cpu: 1}}\n- {name: a, cost: 1, allocatable: {cpu: 1}}\n",
     "templates[1].name"),
    ("templates:\n- {name: a, cost: 1, taints: [{key: k, effect: Sometimes}], allocatable: {cpu: 1}}\n",
     "templates[0].taints[0].effect"),
])
def test_bad_spec_is_exit_2_naming_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = spec(tmp_path, text)
    result = run("what-if", FIXTURE, "--add-nodes", path, "-q")
    assert result.exit_code == 2, result.output
    assert f"{path}: {field}: " in result.stderr
    assert result.stdout == ""


def test_spec_that_is_not_yaml_is_exit_2(tmp_path: Path) -> None:
    path = spec(tmp_path, "templates: [\n")
    result = run("what-if", FIXTURE, "--add-nodes", path, "-q")
    assert result.exit_code == 2 and path in result.stderr and "malformed YAML at line 2" in result.stderr


@pytest.mark.parametrize("args", [
    ("--priority", "5"),
    ("--workloads", "x"),
    ("--remove-nodes", "a=b", "--add-nodes", "SPEC"),
    ("--remove-nodes", "=b"),
    ("--add-nodes", "SPEC", "--workloads", "no-such-job"),
])
def test_bad_combinations_are_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    path = spec(tmp_path, H100)
    result = run("what-if", FIXTURE, *(path if a == "SPEC" else a for a in args), "-q")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""


def test_add_nodes_that_help_nothing_say_so_once_and_in_the_singular(tmp_path: Path) -> None:
    """Issue 39: "Add nodes: none; total cost 0" followed by notes that one was added; each
    quota-blocked target printed twice; "1 nodes"."""
    result = run("what-if", FIXTURE, "--add-nodes", spec(tmp_path, H100), "-o", "table", "-q", "--solver", "greedy")
    assert result.exit_code == 0, result.output
    head = result.stdout.split("\nPlan for ")[0]
    first = head.splitlines()[0]
    assert first.startswith("Add nodes: none: no addition tried admits more targets (tried h100-node x1")
    assert "added one more" not in head
    assert head.count("Job/team-data/data-gpu-ocr") == 1
    answer = json.loads(run("what-if", FIXTURE, "--add-nodes", spec(tmp_path, H100), "-o", "json", "-q",
                            "--solver", "greedy").stdout)["whatIf"]
    assert not any("data-gpu-ocr" in note for note in answer["notes"])


def test_remove_one_node_in_the_singular_and_displaced_structured() -> None:
    result = run("what-if", FIXTURE, "--remove-nodes", "kubernetes.io/hostname=h100-node-01", "-o", "json", "-q",
                 "--solver", "greedy")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)["whatIf"]
    assert answer["removedNodes"] == ["h100-node-01"] and len(answer["displaced"]) == 1
    for d in answer["displaced"]:
        assert set(d) >= {"workload", "from", "to", "cost"} and set(d["workload"]) == {"kind", "namespace", "name"}
        assert any(f["node"] == "h100-node-01" for f in d["from"])
    table = run("what-if", FIXTURE, "--remove-nodes", "kubernetes.io/hostname=h100-node-01", "-o", "table", "-q",
                "--solver", "greedy").stdout
    assert table.startswith("Removed 1 node: h100-node-01\nDisplaced: 1 running workload\n")
