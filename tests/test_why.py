"""`stowplan explain` (planner.describe.explain): on every fixture's waiting workloads it answers, and
its smallest change, applied to the snapshot here (by this file's own code) and planned
again by the cycle, admits the workload. Also: an unknown name is exit 2 naming it; an
admitted workload needs no change.

The generated .json fixtures are large: their plans and searches use greedy (the cycle
with solver=greedy, deterministic and fast); the hand-written .yaml ones the MILP.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from models import Node, ObjectRef, Plan, Snapshot, WorkloadState
from models.plan import HOSTNAME_LABEL
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions
from planner.cycle import explain_all, explain_one, plan_snapshot
from planner.kueue.semantics import queue_order_key
from planner.snapshot import read_snapshot
from planner.describe.explain import Change, Explanation, as_dict, lines, served

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SNAPSHOTS = sorted(p for p in FIXTURES.glob("*.yaml") if not p.name.endswith(".plan.yaml")) + \
    sorted(FIXTURES.glob("*.json"))
SEARCH_LIMIT = 2.0
PER_FIXTURE = {".yaml": 3, ".json": 1}


def solver_for(path: Path) -> str:
    return "greedy" if path.suffix == ".json" else "milp"


@lru_cache(maxsize=None)
def fixture(path: Path) -> tuple[Snapshot, Plan]:
    snapshot = read_snapshot([str(path)])
    return snapshot, plan_snapshot(snapshot, SolveOptions(solver=solver_for(path)))


def changed(snapshot: Snapshot, change: Change) -> Snapshot:
    """The change, applied independently of planner.describe.explain."""
    queues = dict(snapshot.cluster_queues)
    if change.quota:
        cq = queues[change.cluster_queue]
        more = {(f, r): a for f, r, a in change.quota}
        groups = tuple(replace(g, flavors=tuple(replace(fq, resources={
            r: replace(q, nominal=q.nominal + more.get((fq.flavor, r), 0)) for r, q in fq.resources.items()})
            for fq in g.flavors)) for g in cq.resource_groups)
        queues[change.cluster_queue] = replace(cq, resource_groups=groups)
    nodes = list(snapshot.nodes)
    if change.template:
        like = next(n for n in snapshot.nodes if n.name == change.template)
        for i in range(1, change.nodes + 1):
            name = f"{change.template}-more-{i}"     # as explain names them (plans may break ties by name)
            nodes.append(Node(name=name, labels={**like.labels, HOSTNAME_LABEL: name},
                              allocatable=like.allocatable, taints=like.taints))
    gone = set(change.finishing)
    workloads = tuple(w for w in snapshot.workloads if w.ref not in gone)
    return replace(snapshot, cluster_queues=queues, nodes=tuple(nodes), workloads=workloads)


def admitted(plan: Plan, ref: object) -> bool:
    return any(a.workload == ref for a in plan.admissions)


def everything_more(snapshot: Snapshot, ref: ObjectRef) -> Snapshot:
    """Far more than any change explain tries: every quota of the workload's ClusterQueue x1000
    (and 10^6 more where it was 0), every node twice, every running workload finished."""
    w = next(w for w in snapshot.workloads if w.ref == ref)
    queues = dict(snapshot.cluster_queues)
    cq = queues.get(w.cluster_queue or "")
    if cq is not None:
        queues[cq.name] = replace(cq, resource_groups=tuple(replace(g, flavors=tuple(replace(fq, resources={
            r: replace(q, nominal=q.nominal * 1000 + 10**6) for r, q in fq.resources.items()}) for fq in g.flavors))
            for g in cq.resource_groups))
    nodes = list(snapshot.nodes)
    for n in snapshot.nodes:
        name = f"{n.name}-twin"
        nodes.append(Node(name=name, labels={**n.labels, HOSTNAME_LABEL: name}, allocatable=n.allocatable,
                          taints=n.taints))
    workloads = tuple(v for v in snapshot.workloads if v.state is not WorkloadState.RUNNING)
    return replace(snapshot, cluster_queues=queues, nodes=tuple(nodes), workloads=workloads)


def waiting_of(path: Path) -> list[str]:
    """The first waiting workloads in Kueue's order (a workload a queue can never admit aside)."""
    snapshot, plan = fixture(path)
    kept = {p.workload for p in plan.pending if "not covered" not in p.reason}
    waiting = sorted((w for w in snapshot.workloads if w.ref in kept), key=lambda w: queue_order_key(w, snapshot))
    return [str(w.ref) for w in waiting][:PER_FIXTURE[path.suffix]]


@pytest.mark.parametrize("path", [p for p in SNAPSHOTS if p.suffix == ".yaml"], ids=lambda p: p.name)
def test_explain_answers_and_every_change_it_says_admits_does(path: Path) -> None:
    snapshot, plan = fixture(path)
    names = waiting_of(path)
    assert names, f"{path.name}: no waiting workload to explain"
    found = 0
    for name in names:
        e = explain_one(snapshot, name, SolveOptions(solver=solver_for(path)), search_time_limit=SEARCH_LIMIT)
        assert e.state == "waiting" and e.reason, name
        assert e.cluster_position[0] >= 1 and e.local_position[0] >= 1
        assert lines(e) and json.dumps(as_dict(e))
        smallest = e.smallest()
        if smallest is None:
            continue
        found += 1
        # Every change said to admit (the sweep below checks the smallest on every fixture).
        for change in [c for c in e.changes if c.amount is not None]:
            replanned = plan_snapshot(changed(snapshot, change),
                                      SolveOptions(solver=solver_for(path), time_limit=SEARCH_LIMIT))
            assert admitted(replanned, e.workload), (name, change)
    assert found, f"{path.name}: no change found for any of {names}"


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_every_waiting_workload_of_every_fixture_gets_a_smallest_change_that_admits_it(path: Path) -> None:
    """`explain --all` (one plan, the changed snapshots' plans shared): every workload the plan
    leaves waiting is explained; its smallest change, applied here and planned again, admits
    it; where there is none, the note says no change of those kinds can (a blocker), and even
    far more of everything (quota x1000, every node twice, nothing running) does not admit it."""
    snapshot, plan = fixture(path)
    # greedy's plans do not depend on its limit once it finishes, and 60 s lets it finish on
    # a loaded machine (at 2 s, 1,024+ nodes may admit nothing and the search ends cut short)
    limit = 60.0 if solver_for(path) == "greedy" else SEARCH_LIMIT
    base, explanations = explain_all(snapshot, SolveOptions(solver=solver_for(path)), search_time_limit=limit)
    # the waiting ones in the plan's order, then the evicted ones (issue 35: --all covers them)
    assert [e.workload for e in explanations] == \
        [p.workload for p in plan.pending] + [v.workload for v in plan.evictions] == \
        [p.workload for p in base.pending] + [v.workload for v in base.evictions]
    for e in explanations:
        if e.state == "evicted":
            assert e.eviction is not None and e.eviction.cost >= 0 and e.eviction.rule, e.workload
        else:
            assert e.state == "waiting" and e.reason, e.workload
        smallest = e.smallest()
        if smallest is not None:
            after = changed(snapshot, smallest)
            replanned = plan_snapshot(after, SolveOptions(solver=solver_for(path), time_limit=limit))
            assert served(replanned, after, e.workload), (e.workload, smallest)
            continue
        (note,) = e.notes
        assert note.startswith("no change of quota, nodes or work finishing can admit it: "), (e.workload, note)
        more = everything_more(snapshot, e.workload)
        searched = SolveOptions(solver=solver_for(path), time_limit=SEARCH_LIMIT)
        assert not admitted(plan_snapshot(more, searched), e.workload), \
            (e.workload, note)


def run(*args: str) -> object:
    return CliRunner().invoke(cli_module.cli, list(args))


def test_unknown_workload_is_exit_2_naming_it() -> None:
    result = run("explain", "nowhere/no-such-job", str(FIXTURES / "tiny.yaml"))
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "nowhere/no-such-job" in result.stderr  # type: ignore[attr-defined]


def test_admitted_workload_needs_no_change() -> None:
    path = FIXTURES / "tiny.yaml"
    snapshot, plan = fixture(path)
    ref = plan.admissions[0].workload
    result = run("explain", f"{ref.namespace}/{ref.name}", str(path), "-o", "yaml")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    data = yaml.safe_load(result.stdout)  # type: ignore[attr-defined]
    assert data["state"] == "admitted" and data["changes"] == [] and data["smallestChange"] is None
    table = run("explain", str(ref), str(path), "-o", "table")
    assert "admitted by this plan" in table.stdout and "no change needed" in table.stdout  # type: ignore


def test_snapshot_or_live_not_both_nor_neither() -> None:
    assert run("explain", "a/b").exit_code == 2  # type: ignore[attr-defined]
    assert run("explain", "a/b", str(FIXTURES / "tiny.yaml"), "--live").exit_code == 2  # type: ignore


def test_json_output_carries_the_numbers() -> None:
    path = FIXTURES / "tiny.yaml"
    name = waiting_of(path)[0]
    result = run("explain", name, str(path), "-o", "json")
    assert result.exit_code == 0  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["state"] == "waiting"
    assert any(q["short"] for q in data["quota"])
    assert data["smallestChange"]["admits"] is True


def test_a_full_queue_and_node_names_each_change_and_the_protected_victim() -> None:
    import builders as b

    snap = b.snapshot(
        nodes=[b.node("n1", gpu=8)], flavors=[b.flavor("gpu")],
        cqs=[b.cq("cq", quotas={"gpu": {"nvidia.com/gpu": 8, "cpu": 100, "memory": "1Ti"}})],
        workloads=[b.running_job("t", "low", cq="cq", gpu=8, nodes={"n1": 1}, priority=0),
                   b.job("t", "high", cq="cq", gpu=8, priority=10)])
    e = explain_one(snap, "t/high", search_time_limit=SEARCH_LIMIT)
    assert e.state == "waiting"
    assert [(v.workload.name, v.allowed, v.why) for v in e.victims] == \
        [("low", False, "withinClusterQueue is Never")]
    gpu = next(q for q in e.quota if q.resource == "nvidia.com/gpu")
    assert (gpu.nominal, gpu.used, gpu.available, gpu.needs) == (8, 8, 0, 8)
    kinds = {c.kind: c for c in e.changes}
    assert kinds["quota"].amount is None and kinds["nodes"].amount is None
    both = kinds["quota+nodes"]
    assert both.nodes == 1 and both.quota == (("gpu", "nvidia.com/gpu", 8),)
    assert kinds["finishing"].finishing == (b.running_job("t", "low", cq="cq", gpu=8, nodes={"n1": 1}).ref,)
    assert e.smallest() is both
    for change in (both, kinds["finishing"]):
        assert admitted(plan_snapshot(changed(snap, change), SolveOptions(time_limit=SEARCH_LIMIT)), e.workload)


def test_explain_all_answers_for_every_waiting_workload_in_the_plans_order() -> None:
    path = FIXTURES / "tiny.yaml"
    _, plan = fixture(path)
    result = run("explain", "--all", str(path), "-o", "json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert [(e["workload"]["namespace"], e["workload"]["name"]) for e in data["explanations"]] == \
        [(p.workload.namespace, p.workload.name) for p in plan.pending]
    assert all(e["state"] == "waiting" and e["smallestChange"]["admits"] for e in data["explanations"])
    table = run("explain", "--all", str(path), "-o", "table")
    assert table.stdout.count("smallest change found: [") == len(plan.pending)  # type: ignore[attr-defined]


def test_explain_all_takes_no_workload_and_explain_needs_one() -> None:
    missing = run("explain", "--all", "no-such-snapshot.yaml")
    assert missing.exit_code == 2 and "no-such-snapshot.yaml" in missing.stderr  # type: ignore[attr-defined]
    bare = run("explain")
    assert bare.exit_code == 2 and "--all" in bare.stderr  # type: ignore[attr-defined]
