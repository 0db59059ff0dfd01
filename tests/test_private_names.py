"""No module reaches into another module's private names.

What one module shares with another is public in the module that owns it; a name
with a leading underscore is used only where it is defined. The scan covers the
product (planner/, models/), the tools beside it and the tests: `from X import _name`
and `module._name` (a module or object bound by an import) both fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("planner", "models", "tools", "tests")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line name` for every private name this file takes from another module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    imported: set[str] = set()   # names bound by an import: modules or objects of another module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{path.relative_to(root)}:{node.lineno} from {node.module} import {alias.name}")
                imported.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imported.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in imported and _private(node.attr)):
            found.append(f"{path.relative_to(root)}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_private_names_of_another() -> None:
    found = [hit for top in SCANNED for path in sorted((ROOT / top).rglob("*.py"))
             for hit in private_reaches(path)]
    assert not found, "private names used outside their module:\n" + "\n".join(found)


def test_the_scan_sees_both_forms(tmp_path: Path) -> None:
    path = tmp_path / "planted.py"
    path.write_text("from planner.greedy import _Hidden\nfrom planner import render\nrender._flowed(1)\n")
    hits = private_reaches(path, tmp_path)
    assert any("import _Hidden" in h for h in hits) and any("render._flowed" in h for h in hits), hits
