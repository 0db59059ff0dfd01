"""The layers, as an allow-list every module of planner/ and models/ belongs to.

Each module is assigned to one layer (a module no layer claims fails the test, so a
new module has to say where it stands). A layer may import the layers it lists and
nothing else of Stowplan; the deciding layers never import click, yaml, the Kubernetes
client or anything that reads files or the network. The guard is proven below: a
forbidden import planted in a temporary copy of the tree makes it fail.

    models      the vocabulary: stdlib only, nothing of planner
    base        errors, terminal-safe text, the cycle's time budget (the one clock every
                deciding module reads, through planner.base.budget) and its signals
    k8s         Kubernetes' vocabulary decoded strictly: fields, quantities, requests,
                pod sets (what readers, kinds and the live cluster share), and the wire
                contract (planner.k8s.annotations: every label and annotation key, the one
                assignment codec)
    snapshot    reading: Kubernetes objects (files) -> models.Snapshot; and the
                workload kinds' adapters (planner/kinds: pod sets out of an object,
                the pure edits that admit and evict it, which cluster issues)
    kueue       Kueue's rules and the cluster state every decider shares (greedy,
                the MILP and the explainer all import it; it imports none of them)
    greedy      Kueue's cycle replayed (the baseline and the MIP start)
    milp        formulation, arrays, solvers, decoding
    verify      the independent check: models only, never the code that makes plans
    describe    explain and metrics: why a workload waits, the plan's numbers
    cycle       one planning cycle, in order: greedy -> MILP -> verify -> Plan
    whatif      questions around the cycle: the nodes to add, what a drain does
    fleet       one plan over MultiKueue's worker clusters, from per-cluster cycles
    output      Plan -> yaml, json, a table
    cluster     the live cluster: read, lease, apply, the plan file (and the cycle's
                provisioning section, planner.whatif.provisioning, a what-if around the cycle)
    cli         the click commands
    tools       generate and bench: beside the product, not in its path
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Layer -> the modules it holds: a module name, or a package ending in ".*".
LAYERS: dict[str, tuple[str, ...]] = {
    "models": ("models", "models.*"),
    "base": ("planner", "planner.base", "planner.base.*"),
    "k8s": ("planner.k8s", "planner.k8s.*"),
    "snapshot": ("planner.snapshot", "planner.snapshot.*", "planner.kinds", "planner.kinds.*"),
    "kueue": ("planner.kueue", "planner.kueue.*"),
    "greedy": ("planner.greedy",),
    "milp": ("planner.milp", "planner.milp.*"),
    "verify": ("planner.verify", "planner.verify.*"),
    "describe": ("planner.describe", "planner.describe.*"),
    "cycle": ("planner.cycle", "planner.cycle.*"),
    "whatif": ("planner.whatif", "planner.whatif.*"),
    "fleet": ("planner.fleet", "planner.fleet.*"),
    "output": ("planner.output", "planner.output.*"),
    "cluster": ("planner.cluster", "planner.cluster.*"),
    "cli": ("planner.cli", "planner.cli.*"),
    "tools": ("planner.tools", "planner.tools.*"),
}

# Layer -> the layers it may import (itself always).
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "base": {"models"},
    "k8s": {"models", "base"},
    "snapshot": {"models", "base", "k8s"},
    "kueue": {"models", "base"},
    "greedy": {"models", "base", "kueue"},
    "milp": {"models", "base", "kueue"},
    "verify": {"models"},
    "describe": {"models", "base", "kueue"},
    "cycle": {"models", "base", "k8s", "kueue", "greedy", "milp", "verify", "describe"},
    "whatif": {"models", "base", "kueue", "greedy", "milp", "verify", "describe", "cycle"},
    "fleet": {"models", "base", "kueue", "greedy", "verify", "cycle"},
    "output": {"models", "base", "k8s", "describe"},
    "cluster": {"models", "base", "k8s", "snapshot", "describe", "cycle", "whatif", "output"},
    "cli": {"models", "base", "k8s", "snapshot", "milp", "cycle", "whatif", "fleet", "output", "cluster", "tools"},
    "tools": {"models", "base", "k8s", "snapshot", "kueue", "greedy", "milp", "verify", "describe", "cycle", "fleet", "output"},
}

# What decides never touches the outside world: these layers import none of this.
DECIDING = {"models", "base", "kueue", "greedy", "milp", "verify", "describe", "cycle", "whatif"}
NO_IO = {"yaml", "click", "kubernetes", "json", "subprocess", "socket", "urllib", "requests", "http",
         "pathlib", "shutil", "tempfile"}
TOOLS_USERS = {"planner.tools.peer_bench"}   # reaches the Kueue peer harness in tools/, lazily, from a checkout


# Packages entered only through their __init__ (issue 38): the MILP's one way in.
FRONT_DOORS = ("planner.milp",)

# The one clock (issue 38): planner.base.budget reads it for every module that decides;
# only the edges (the CLI, the live cluster, the tools, and the metrics text's wall-clock
# timestamp) read it themselves.
CLOCK_READER = "planner.base.budget"
CLOCK_FREE_EXCEPT = {"cli", "cluster", "tools"}
CLOCK_EDGE_MODULES = {"planner.output.promtext"}
CLOCK_CALLS = {("time", name) for name in ("monotonic", "monotonic_ns", "time", "time_ns", "perf_counter",
                                           "perf_counter_ns", "process_time", "process_time_ns")} | {
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today")}


def clock_reads(path: Path) -> list[str]:
    """Every reading of the clock in `path`: time.monotonic() and its kin, datetime.now(),
    and any `from time import ...` (which would hide them)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and (node.value.id, node.attr) in CLOCK_CALLS:
            out.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            out.append(f"line {node.lineno}: from time import ...")
    return out


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """The layer holding `module`; the most specific pattern wins."""
    best: tuple[int, str] | None = None
    for layer, patterns in LAYERS.items():
        for pattern in patterns:
            if pattern.endswith(".*"):
                hit = module.startswith(pattern[:-1])
            else:
                hit = module == pattern
            if hit and (best is None or len(pattern) > best[0]):
                best = (len(pattern), layer)
    return best[1] if best else None


def runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` that runs: all but the bodies of `if TYPE_CHECKING:` (imports
    for the type checker only, never executed)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def imports_of(path: Path, root: Path, runtime_only: bool = False) -> set[str]:
    """Absolute names of everything `path` imports; `from pkg import mod` counts as pkg.mod.
    `runtime_only`: not those under `if TYPE_CHECKING:`."""
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in (runtime_nodes(tree) if runtime_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            for alias in node.names:
                sub = root.joinpath(*f"{base}.{alias.name}".split("."))
                if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                    names.add(f"{base}.{alias.name}")
    return names


def sources(root: Path) -> list[Path]:
    return sorted(p for top in ("models", "planner") for p in (root / top).rglob("*.py"))


def problems(root: Path) -> list[str]:
    """Every broken layer rule in the tree at `root`; empty when the layers hold."""
    out: list[str] = []
    for path in sources(root):
        module = module_name(path, root)
        layer = layer_of(module)
        if layer is None:
            out.append(f"{module}: belongs to no layer (add it to LAYERS in tests/test_layers.py)")
            continue
        for name in sorted(imports_of(path, root)):
            top = name.split(".")[0]
            if top in ("models", "planner"):
                target = layer_of(name)
                if target is None or (target != layer and target not in ALLOWED[layer]):
                    out.append(f"{module} ({layer}) imports {name} ({target})")
            elif top == "tools":
                if module not in TOOLS_USERS:
                    out.append(f"{module} ({layer}) imports {name}: only {sorted(TOOLS_USERS)} reach tools/")
            elif layer == "models" and top not in sys.stdlib_module_names and top != "__future__":
                out.append(f"{module} (models) imports {name}: models use the standard library only")
            elif layer in DECIDING and top in NO_IO:
                out.append(f"{module} ({layer}) imports {name}: deciding code does no I/O")
        for door in FRONT_DOORS:
            if module != door and not module.startswith(door + "."):
                out.extend(f"{module} ({layer}) imports {name}: outside {door}, import {door} itself (its front door)"
                           for name in sorted(imports_of(path, root)) if name.startswith(door + "."))
        if layer not in CLOCK_FREE_EXCEPT and module not in CLOCK_EDGE_MODULES | {CLOCK_READER}:
            out.extend(f"{module} ({layer}) reads the clock at {where}: ask planner.base.budget (now, Stopwatch)"
                       for where in clock_reads(path))
        if layer in DECIDING and re.search(r"(?<![\w.])open\(", path.read_text()):
            out.append(f"{module} ({layer}) opens files")
    return out


def import_cycles(root: Path) -> list[tuple[str, ...]]:
    """Every set of modules that import each other in a circle when they run: imports
    inside functions count (they only hide a cycle), imports for the type checker do not.
    A module importing its own package's __init__ is not a cycle here."""
    modules = {module_name(p, root): p for p in sources(root)}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name in imports_of(path, root, runtime_only=True):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                graph[module].add(name)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(tuple(sorted(members)))
    return sorted(found)


def test_no_import_cycles() -> None:
    """Not even through an import inside a function (issue 38): a module that needs one
    that needs it back is one module, or two with a third beneath them."""
    assert import_cycles(ROOT) == []


def test_a_planted_function_level_import_cycle_fails(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    target = root / "planner" / "milp" / "arrays.py"
    target.write_text(target.read_text() + "\n\ndef _planted() -> None:\n    from planner.milp import rows\n")
    assert any("planner.milp.arrays" in cycle for cycle in import_cycles(root))
    typed = root / "planner" / "kueue" / "semantics.py"
    before = import_cycles(root)
    typed.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planner.kueue import assigner\n"
                     + typed.read_text())
    assert import_cycles(root) == before     # the type checker's imports never run


def global_id_caches(path: Path) -> list[str]:
    """Module-level containers looked up by id(): a cache that outlives every run and
    keeps what it holds alive (a per-object memo, made and dropped with its run, is fine)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module_names = {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name)}

    def has_id_call(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "id" for n in ast.walk(node))

    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in module_names \
                and has_id_call(node.slice):
            out.append(f"line {node.lineno}: {node.value.id}[id(...)]")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in module_names \
                and any(has_id_call(arg) for arg in node.args):
            out.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}(id(...))")
    return out


def test_no_module_level_cache_is_keyed_by_id() -> None:
    found = [f"{module_name(path, ROOT)} {hit}" for path in sources(ROOT) for hit in global_id_caches(path)]
    assert not found, "id()-keyed module-level caches:\n" + "\n".join(found)


def test_a_planted_id_cache_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "cache.py"
    planted.write_text("_SEEN: dict[int, object] = {}\n\ndef remember(x: object) -> None:\n    _SEEN[id(x)] = x\n"
                       "\ndef seen(x: object) -> object:\n    return _SEEN.get(id(x))\n")
    assert len(global_id_caches(planted)) == 2


# The wire contract (issue 38): one module spells every label and annotation key.
WIRE_CONTRACT = "planner.k8s.annotations"
WIRE_KEY = re.compile(r"(stowplan\.io|kueue\.x-k8s\.io)/[a-z-]*")   # API versions carry digits
# AdmissionCheck controller names look like keys but are values of a spec field
CONTROLLER_NAMES = {"kueue.x-k8s.io/provisioning-request", "kueue.x-k8s.io/multikueue"}


def wire_keys(path: Path) -> list[str]:
    """String constants in code (docstrings and help texts aside) that are a key or a key's prefix."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and WIRE_KEY.fullmatch(node.value) and node.value not in CONTROLLER_NAMES]


def test_every_wire_key_is_spelled_in_one_module() -> None:
    found = [f"{module_name(path, ROOT)} {hit}" for path in sources(ROOT)
             if module_name(path, ROOT) != WIRE_CONTRACT for hit in wire_keys(path)]
    assert not found, f"keys spelled outside {WIRE_CONTRACT}:\n" + "\n".join(found)


def test_a_planted_wire_key_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "writer.py"
    planted.write_text('"""Writes stowplan.io/assignment (a docstring may name it)."""\n\n'
                       'KEY = "stowplan.io/assignment"\nPREFIX = f"kueue.x-k8s.io/podset-{1}"\nAPI = "stowplan.io/v1alpha1"\n')
    assert [hit.split(":")[0] for hit in wire_keys(planted)] == ["line 3", "line 4"]


def test_every_module_keeps_to_its_layer() -> None:
    found = problems(ROOT)
    assert not found, "layer rules broken:\n" + "\n".join(found)


def test_every_layer_is_named_and_allowed() -> None:
    assert set(ALLOWED) == set(LAYERS)
    assert all(allowed <= set(LAYERS) for allowed in ALLOWED.values())
    used = {layer_of(module_name(p, ROOT)) for p in sources(ROOT)}
    assert used == set(LAYERS), f"layers holding no module: {set(LAYERS) - used}"


def test_the_verifier_never_imports_the_code_that_makes_plans() -> None:
    assert ALLOWED["verify"] == {"models"}


def test_models_import_nothing_of_planner() -> None:
    assert ALLOWED["models"] == set()


def test_deciding_code_never_imports_the_edges() -> None:
    for layer in DECIDING:
        assert not ALLOWED[layer] & {"snapshot", "output", "cluster", "cli", "tools"}, layer


# ---------------------------------------------------------------- the guard, seen failing

def _copy_tree(tmp_path: Path) -> Path:
    for top in ("models", "planner"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


FORMULATION = "planner/milp/rows.py"


def test_a_planted_import_of_the_cluster_fails_the_guard(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    assert problems(root) == []
    target = root / FORMULATION
    target.write_text(target.read_text() + "\nfrom planner.cluster.apply import Applier\n")
    found = problems(root)
    assert any("imports planner.cluster.apply" in p for p in found), found


@pytest.mark.parametrize("planted", ["import yaml", "import click", "from kubernetes import client",
                                     "from planner import cli", "from planner.greedy import greedy"])
def test_planted_imports_into_the_verifier_fail_the_guard(tmp_path: Path, planted: str) -> None:
    root = _copy_tree(tmp_path)
    target = root / "planner" / "verify" / "placement.py"
    target.write_text(target.read_text() + f"\n{planted}\n")
    assert problems(root), planted


@pytest.mark.parametrize("module, planted", [
    ("planner/milp/backends.py", "began = time.monotonic()"),
    ("planner/milp/neighbourhood.py", "from time import perf_counter"),
    ("planner/cycle/__init__.py", "stamp = datetime.now()"),
    ("planner/kueue/semantics.py", "t = time.time()"),
])
def test_a_planted_clock_reading_fails_the_guard(tmp_path: Path, module: str, planted: str) -> None:
    """The Budget is the only reader of the clock: a deadline read anywhere else fails."""
    root = _copy_tree(tmp_path)
    target = root / module
    target.write_text(target.read_text() + f"\n\ndef _planted() -> None:\n    {planted}\n")
    found = problems(root)
    assert any("reads the clock" in p and module_name(target, root) in p for p in found), found


def test_reaching_past_the_milps_front_door_fails_the_guard(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    target = root / "planner" / "cycle" / "__init__.py"
    target.write_text(target.read_text() + "\nfrom planner.milp.stages import solve as _stages\n")
    assert any("planner.cycle (cycle) imports planner.milp.stages" in p and "front door" in p for p in problems(root))


def test_a_module_of_no_layer_fails_the_guard(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    (root / "planner" / "newcomer.py").write_text('"""Nobody placed me."""\n')
    assert any("planner.newcomer: belongs to no layer" in p for p in problems(root))


def test_models_importing_planner_fails_the_guard(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    target = root / "models" / "plan.py"
    target.write_text(target.read_text() + "\nfrom planner import semantics\n")
    assert problems(root)


# tools/ (the Kueue peer harness) sits beside the planner, in a checkout only.
PURE_TOOLS = ["compare"]   # tools/peer modules that only compute


@pytest.mark.parametrize("module", PURE_TOOLS)
def test_peer_comparison_does_no_io(module: str) -> None:
    path = ROOT / "tools" / "peer" / f"{module}.py"
    for name in imports_of(path, ROOT):
        assert name.split(".")[0] not in NO_IO, f"tools/peer/{module}.py imports {name}"
        assert not name.startswith("tools.peer.") or name.split(".")[-1] in PURE_TOOLS, \
            f"tools/peer/{module}.py imports {name}"
