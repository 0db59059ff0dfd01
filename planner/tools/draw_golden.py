"""Draw a fixture's golden plan: the picture in the README and the docs is the golden plan
of `fixtures/meta-like.json` drawn, not a new solve (a time-limited one may differ on a
slower machine), so its title's numbers are the golden plan's. `make picture` runs it;
tests/test_picture_reads.py checks the committed picture against the golden plan.

    python -m planner.tools.draw_golden fixtures/meta-like.json fixtures/meta-like.plan.yaml docs/meta-like.png
"""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence

import yaml

from models import Admission, Eviction, ObjectRef, Plan, Snapshot, SolverReport
from planner.output import picture
from planner.snapshot import read_snapshot
from planner.k8s.annotations import decode_assignment


def _ref(d: dict[str, Any]) -> ObjectRef:
    return ObjectRef(str(d["kind"]), str(d["namespace"]), str(d["name"]))


def golden_plan(snapshot: Snapshot, path: str) -> Plan:
    """The plan a golden file holds, its decisions on `snapshot`'s workloads (migrations are
    not in the golden topology fixtures: defragmentation is off there)."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    by_ref = {w.ref: w for w in snapshot.workloads}
    admissions = []
    for entry in data.get("admissions") or ():
        ref = _ref(entry["workload"])
        pod_sets = decode_assignment(json.dumps(entry["podSets"]), by_ref[ref].pod_sets)
        admissions.append(Admission(ref, str(entry["clusterQueue"]), pod_sets))
    evictions = [Eviction(_ref(e["workload"]), str(e["reason"]), tuple(_ref(r) for r in e.get("for") or ()),
                          float(e.get("cost") or 0.0)) for e in data.get("evictions") or ()]
    solver = data.get("solver") or {}
    report = SolverReport(str(solver.get("method", "")), str(solver.get("status", "")),
                          float(solver.get("objective") or 0), float(solver.get("bound") or 0),
                          float(solver.get("gap") or 0))
    source = str((data.get("snapshot") or {}).get("source", snapshot.source))
    return Plan(source, snapshot.digest, snapshot.object_count, report, tuple(admissions), tuple(evictions),
                summary=dict(data.get("summary") or {}))


def main(argv: Sequence[str] | None = None) -> None:
    snapshot_path, golden_path, out = list(sys.argv[1:] if argv is None else argv)
    snapshot = read_snapshot([snapshot_path])
    picture.draw(snapshot, golden_plan(snapshot, golden_path), out)


if __name__ == "__main__":
    main()
