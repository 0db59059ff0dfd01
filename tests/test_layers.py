"""The core does no I/O: models/ is stdlib only and the planning core never imports
the Kubernetes client, click, yaml, or anything that reads files or the network."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ["semantics", "capacity", "topology", "formulate", "model_arrays", "solve", "decode",
        "warmstart", "score", "greedy", "kueue_rules", "placement", "explain", "verify", "verify_stable",
        "metrics", "assemble", "cycle", "budget", "guarantee", "rins", "pipeline", "errors",
        "milp/model", "milp/pools", "milp/start", "milp/decode", "milp/stages", "vs_kueue"]
FORBIDDEN_IN_CORE = {"yaml", "click", "kubernetes", "json", "subprocess", "socket", "urllib",
                     "requests", "http", "pathlib", "shutil", "tempfile", "planner.snapshot",
                     "planner.cli", "planner.render", "planner.apply",
                     "prometheus_client", "planner.promtext", "matplotlib"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_models_use_only_the_standard_library():
    for path in sorted((ROOT / "models").glob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            assert top == "models" or top in sys.stdlib_module_names, f"{path.name} imports {name}"


@pytest.mark.parametrize("module", CORE)
def test_core_module_does_no_io(module):
    path = ROOT / "planner" / f"{module}.py"
    if not path.exists():
        pytest.fail(f"core module planner/{module}.py is missing")
    for name in imported_modules(path):
        assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IN_CORE), \
            f"planner/{module}.py imports {name}"
        assert "open(" not in path.read_text().replace("_open(", ""), f"planner/{module}.py opens files"


def test_models_never_import_planner():
    for path in sorted((ROOT / "models").glob("*.py")):
        assert not any(n.startswith("planner") for n in imported_modules(path)), path.name


# tools/ (the Kueue peer harness) sits beside the planner, in a checkout only: the
# planner reaches for it from one edge, lazily (`stowplan bench --peer kueue`).
TOOLS_USERS = {"peer_bench.py"}
PURE_TOOLS = ["compare"]   # tools/peer modules that only compute


def test_only_the_peer_bench_imports_tools():
    for path in sorted((ROOT / "planner").rglob("*.py")):
        if path.name in TOOLS_USERS:
            continue
        names = imported_modules(path)
        assert not any(n == "tools" or n.startswith("tools.") for n in names), f"{path.name} imports tools"


@pytest.mark.parametrize("module", PURE_TOOLS)
def test_peer_comparison_does_no_io(module):
    path = ROOT / "tools" / "peer" / f"{module}.py"
    for name in imported_modules(path):
        assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IN_CORE), \
            f"tools/peer/{module}.py imports {name}"
        assert not name.startswith("tools.peer.") or name.split(".")[-1] in PURE_TOOLS, \
            f"tools/peer/{module}.py imports {name}"
