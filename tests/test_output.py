"""planner.output.document: the Plan's shape, byte-for-byte YAML, JSON round trip, the table."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from models import Admission, Eviction, ObjectRef, PendingEntry, Plan, PodSetAssignment, SolverReport
from planner.output import document as output
from planner.k8s.annotations import assignment_entry
from planner.output.table import View


def job(name: str, namespace: str = "team-a", kind: str = "Job") -> ObjectRef:
    return ObjectRef(kind, namespace, name)


def on_nodes(name: str, flavors: dict[str, str], per_node: dict[str, int], block: str | None = None) -> PodSetAssignment:
    levels = ("cloud.com/block", "kubernetes.io/hostname") if block else ("kubernetes.io/hostname",)
    domains = tuple((((block, node) if block else (node,)), count) for node, count in sorted(per_node.items()))
    return PodSetAssignment(name, sum(per_node.values()), flavors, levels, domains)


def sample_plan(**solver_overrides: object) -> Plan:
    solver = dict(
        method="milp", status="feasible", objective=1234.0, bound=1240.123456789, gap=0.0049732,
        seconds={"read": 0.81234, "build": 0.3, "solve": 2.1, "verify": 0.1, "total": 3.4},
        message="time limit reached",
    )
    solver.update(solver_overrides)
    return Plan(
        source="snap.yaml",
        digest="sha256:abc123",
        object_count=20,
        solver=SolverReport(**solver),  # type: ignore[arg-type]
        admissions=(
            Admission(job("train-1"), "team-a-cq", (
                on_nodes("main", {"nvidia.com/gpu": "h100", "cpu": "h100"}, {"n1": 8, "n2": 8}, block="b1"),
            )),
            Admission(job("sweep", "team-b", "JobSet"), "team-b-cq", (
                on_nodes("driver", {"cpu": "default"}, {"n3": 1}),
                on_nodes("worker", {"cpu": "spot", "memory": "default"}, {f"n{i}": 2 for i in range(4, 10)}),
            )),
        ),
        evictions=(Eviction(job("sweep-7", "team-b"), "Preempted", (job("train-1"),), 12.5),),
        pending=(
            PendingEntry(job("big-9", "team-c"), "needs 64 GPUs in one block; best block has 40 free"),
            PendingEntry(job("true", "team-c"), "LocalQueue team-c/missing not found"),
        ),
        summary={"served_gpus": {100: 16, 0: 4}, "utilization": {"gpu": 0.75, "cpu": 1 / 3},
                 "admitted": 2, "evicted": 1, "pending": 2, "preemption_cost": 12.5},
    )


GOLDEN_YAML = """\
apiVersion: stowplan.io/v1alpha1
kind: Plan
snapshot: {source: snap.yaml, digest: 'sha256:abc123', objects: 20}
solver:
  method: milp
  status: feasible
  objective: 1234.0
  bound: 1240.123457
  gap: 0.004973
  seconds: {read: 0.812, build: 0.3, solve: 2.1, verify: 0.1, total: 3.4}
  message: time limit reached
admissions:
- workload: {kind: Job, namespace: team-a, name: train-1}
  clusterQueue: team-a-cq
  podSets:
  - name: main
    count: 16
    flavors: {cpu: h100, nvidia.com/gpu: h100}
    topologyAssignment:
      levels: [cloud.com/block, kubernetes.io/hostname]
      domains:
      - {values: [b1, n1], count: 8}
      - {values: [b1, n2], count: 8}
- workload: {kind: JobSet, namespace: team-b, name: sweep}
  clusterQueue: team-b-cq
  podSets:
  - name: driver
    count: 1
    flavors: {cpu: default}
    topologyAssignment:
      levels: [kubernetes.io/hostname]
      domains:
      - {values: [n3], count: 1}
  - name: worker
    count: 12
    flavors: {cpu: spot, memory: default}
    topologyAssignment:
      levels: [kubernetes.io/hostname]
      domains:
      - {values: [n4], count: 2}
      - {values: [n5], count: 2}
      - {values: [n6], count: 2}
      - {values: [n7], count: 2}
      - {values: [n8], count: 2}
      - {values: [n9], count: 2}
evictions:
- workload: {kind: Job, namespace: team-b, name: sweep-7}
  reason: Preempted
  for:
  - {kind: Job, namespace: team-a, name: train-1}
  cost: 12.5
pending:
- workload: {kind: Job, namespace: team-c, name: big-9}
  reason: needs 64 GPUs in one block; best block has 40 free
- workload: {kind: Job, namespace: team-c, name: 'true'}
  reason: LocalQueue team-c/missing not found
summary:
  served_gpus: {'100': 16, '0': 4}
  utilization: {gpu: 0.75, cpu: 0.333333}
  admitted: 2
  evicted: 1
  pending: 2
  preemption_cost: 12.5
"""


def test_yaml_is_golden() -> None:
    assert output.to_yaml(sample_plan()) == GOLDEN_YAML


def test_top_level_keys_in_reference_order() -> None:
    data = output.plan_to_dict(sample_plan())
    assert list(data) == ["apiVersion", "kind", "snapshot", "solver", "admissions", "evictions", "pending", "summary"]
    assert list(data["snapshot"]) == ["source", "digest", "objects"]
    assert list(data["solver"]) == ["method", "status", "objective", "bound", "gap", "seconds", "message"]
    assert list(data["solver"]["seconds"]) == ["read", "build", "solve", "verify", "total"]
    assert list(data["admissions"][0]) == ["workload", "clusterQueue", "podSets"]
    assert list(data["admissions"][0]["podSets"][0]) == ["name", "count", "flavors", "topologyAssignment"]
    assert list(data["evictions"][0]) == ["workload", "reason", "for", "cost"]
    assert list(data["pending"][0]) == ["workload", "reason"]
    assert list(data["admissions"][0]["workload"]) == ["kind", "namespace", "name"]


def test_yaml_loads_back_to_the_same_dict() -> None:
    plan = sample_plan()
    assert yaml.safe_load(output.to_yaml(plan)) == output.plan_to_dict(plan)


def test_json_round_trips_to_the_same_dict() -> None:
    plan = sample_plan()
    text = output.to_json(plan)
    assert json.loads(text) == output.plan_to_dict(plan)
    assert text.startswith('{\n  "apiVersion": "stowplan.io/v1alpha1",\n  "kind": "Plan",\n')
    assert text.endswith("}\n")


def test_message_and_stages_only_when_present() -> None:
    quiet = output.plan_to_dict(sample_plan(message=""))
    assert "message" not in quiet["solver"] and "stages" not in quiet["solver"]
    staged = output.plan_to_dict(sample_plan(stages=({"name": "priority", "objective": 10.0},)))
    assert staged["solver"]["stages"] == [{"name": "priority", "objective": 10.0}]
    assert list(staged["solver"])[-1] == "stages"


def test_extra_timings_follow_the_documented_five_and_missing_ones_are_zero() -> None:
    data = output.plan_to_dict(sample_plan(seconds={"total": 1.23456, "greedy": 0.5, "decode": 0.25}))
    assert data["solver"]["seconds"] == {
        "read": 0.0, "build": 0.0, "solve": 0.0, "verify": 0.0, "total": 1.235, "decode": 0.25, "greedy": 0.5,
    }


def test_non_finite_numbers_become_null_and_json_stays_valid() -> None:
    plan = sample_plan(bound=math.inf, gap=math.nan, objective=-0.0)
    data = output.plan_to_dict(plan)
    assert data["solver"]["bound"] is None and data["solver"]["gap"] is None
    assert str(data["solver"]["objective"]) == "0.0"
    assert json.loads(output.to_json(plan))["solver"]["bound"] is None
    assert "bound: null" in output.to_yaml(plan)
    assert "bound -" in output.to_table(plan)


def test_same_plan_same_bytes_whatever_the_mapping_order() -> None:
    a = sample_plan()
    flipped = Admission(a.admissions[0].workload, a.admissions[0].cluster_queue, (
        on_nodes("main", {"cpu": "h100", "nvidia.com/gpu": "h100"}, {"n2": 8, "n1": 8}, block="b1"),
    ))
    b = Plan(**{**a.__dict__, "admissions": (flipped,) + a.admissions[1:]})
    for fmt in output.FORMATS:
        assert output.render(a, fmt) == output.render(b, fmt) == output.render(sample_plan(), fmt)


def test_empty_plan_renders_everywhere() -> None:
    plan = Plan(source="", digest="", object_count=0,
                solver=SolverReport(method="greedy", status="fallback", objective=0.0, bound=0.0, gap=0.0))
    assert yaml.safe_load(output.to_yaml(plan))["admissions"] == []
    assert "admissions: []" in output.to_yaml(plan)
    table = output.to_table(plan)
    assert "Workloads: none" in table and "WORKLOAD" not in table
    assert json.loads(output.to_json(plan))["summary"] == {}


def test_table_names_workloads_reasons_and_compresses_nodes() -> None:
    table = output.to_table(sample_plan())
    lines = table.splitlines()
    # without its snapshot the tiers are unknown: the solver's sum is named for what it is
    assert lines[0] == "Plan for snap.yaml (20 objects): milp feasible in 3.4s"
    assert "  solver: time limit reached" in lines
    assert "  objective summed over the stages 1234, bound 1240.12" in lines
    assert "Workloads: admit 2, evict 1, pending 2" in lines
    header = next(line for line in lines if line.startswith("WORKLOAD")).split()
    assert header == ["WORKLOAD", "QUEUE", "PRIORITY", "WAIT", "POSITION", "PODS", "FLAVOR", "DECISION", "NODES", "(REASON)"]
    train = next(line for line in lines if line.startswith("team-a/train-1 "))
    assert train.split()[1:] == ["team-a-cq", "-", "-", "-", "16", "h100", "admit", "b1", "x2", "(n1-n2)"]
    sweep = next(line for line in lines if "JobSet/team-b/sweep " in line)
    assert sweep.split()[5:8] == ["13", "2", "flavors"]          # 1 + 12 pods; default and spot among them
    wider = output.to_table(sample_plan(), view=View(width=160)).splitlines()
    assert any("team-b/sweep-7" in l and "evict" in l and "(Preempted for Job/team-a/train-1 (cost 12.5))" in l
               for l in wider)
    assert any("team-c/big-9" in l and "pending" in l and "(needs 64 GPUs in one block; best block has 40 free)" in l
               for l in wider)
    assert max(map(len, lines)) <= 120 and any(l.endswith("…") for l in lines)   # cut, with a mark
    assert "  served_gpus: 100=16, 0=4" in lines and "  admitted: 2" in lines
    assert table.endswith("\n")


def test_wide_shows_every_flavor_and_node() -> None:
    lines = output.render(sample_plan(), "wide").splitlines()
    sweep = next(line for line in lines if "JobSet/team-b/sweep " in line)
    assert "driver: cpu=default; worker: cpu=spot,memory=default" in sweep
    assert "n3:1,n4:2,n5:2,n6:2,n7:2,n8:2,n9:2" in sweep


def test_unknown_format_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        output.render(sample_plan(), "xml")


def test_pod_set_dict_matches_the_assignment_annotation_shape() -> None:
    ps = on_nodes("main", {"nvidia.com/gpu": "h100"}, {"n1": 2})
    assert assignment_entry(ps) == {
        "name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "h100"},
        "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "domains": [{"values": ["n1"], "count": 2}]},
    }
