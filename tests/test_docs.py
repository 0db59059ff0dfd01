"""The docs say what the code does (issue 35): the snapshot recipe leads with
`stowplan snapshot`, and its kubectl alternative lists every kind the reader reads,
Kueue's kueue-manager-config ConfigMap included."""

from __future__ import annotations

import re
from pathlib import Path

from planner.snapshot.reader import KINDS

REPO = Path(__file__).resolve().parent.parent
RECIPE_PAGES = [REPO / "README.md", REPO / "docs" / "snapshots.md"]


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
