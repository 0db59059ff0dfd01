"""A node whose kubernetes.io/hostname label is not its name (issue 40, REFERENCE §2):
read, planned and applied. kube-scheduler matches the label, so every pin Stowplan writes
names the label's value, while plans, assignments and topology keep naming the node.
Two nodes sharing one label have no unique pin: they take no new pod."""

from __future__ import annotations

import copy
import json
from typing import Any

from models import HOSTNAME_LABEL, Node, NodePins, ObjectRef, Resources
from planner.cluster import pods as pod_writes
from planner.base.solve_options import SolveOptions
from planner.cluster.apply import GATE, Applier, workload_path
from planner.cycle import plan_snapshot
from planner.kinds import pods as pod_kind
from planner.snapshot import build_snapshot
from test_apply_unit import FakeKube
from test_kinds_read import NS, lws, pod, tmpl, world

LABEL = "host-a"        # n1's hostname label
FIELD = f"metadata.labels[{HOSTNAME_LABEL}]"


def relabelled(*objects: dict[str, Any], n2_label: str = "n2", n2_usable: bool = False) -> list[dict[str, Any]]:
    """test_kinds_read's world with n1 labelled `host-a`; n2 cordoned unless `n2_usable`, so
    what is planned lands on n1."""
    items = copy.deepcopy(world(*objects))
    nodes = {o["metadata"]["name"]: o for o in items if o["kind"] == "Node"}
    nodes["n1"]["metadata"]["labels"][HOSTNAME_LABEL] = LABEL
    nodes["n2"]["metadata"]["labels"][HOSTNAME_LABEL] = n2_label
    if not n2_usable:
        nodes["n2"]["spec"] = {"unschedulable": True}
    for i, obj in enumerate(items):
        obj.setdefault("metadata", {}).setdefault("resourceVersion", str(10 + i))
    return items


def read(items: list[dict[str, Any]]) -> Any:
    return build_snapshot([{"apiVersion": "v1", "kind": "List", "items": items}], source="snap.yaml")


def job(name: str = "train", pods: int = 2) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "creationTimestamp": "2026-12-01T10:00:00Z"},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "template": tmpl(2)}}


def fake_kube(items: list[dict[str, Any]]) -> FakeKube:
    """The workloads of `items` at their API paths (what apply reads and PUTs)."""
    objects = {}
    for obj in items:
        if obj["kind"] in ("Job", "LeaderWorkerSet"):
            objects[workload_path(ObjectRef(obj["kind"], NS, obj["metadata"]["name"]))] = copy.deepcopy(obj)
    return FakeKube(objects)


def node_affinity(template_spec: dict[str, Any]) -> list[dict[str, Any]]:
    terms = template_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [e for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"] if e["key"] == HOSTNAME_LABEL]


# ---------------------------------------------------------------- the mapping

def test_node_pins_name_the_label_and_read_it_back_as_the_node() -> None:
    def node(name: str, label: str | None) -> Node:
        return Node(name, {HOSTNAME_LABEL: label} if label else {}, Resources())

    pins = NodePins.of([node("n1", "host-a"), node("n2", "n2"), node("n3", None), node("n4", "dup"),
                        node("n5", "dup")])
    assert [pins.value(n) for n in ("n1", "n2", "n3", "unknown")] == ["host-a", "n2", "n3", "unknown"]
    assert pins.node("host-a") == "n1" and pins.node("n2") == "n2"
    assert pins.node("dup") == "dup"          # shared: no node is named by it
    assert NodePins.of([node("n1", "n1"), node("n2", None)]) == NodePins()   # the usual case keeps nothing


# ---------------------------------------------------------------- read and plan

def test_a_unique_label_is_reported_once_and_the_node_still_takes_the_job() -> None:
    snap = read(relabelled(job()))
    n1 = next(n for n in snap.nodes if n.name == "n1")
    assert n1.usable and n1.pin == LABEL
    (problem,) = [p for p in snap.problems if p.field == FIELD]
    assert (problem.file, str(problem.ref)) == ("snap.yaml", "Node/n1")
    assert f"{LABEL!r}, not the node's name" in problem.message
    (admission,) = plan_snapshot(snap, SolveOptions(time_limit=10)).admissions
    # the plan names the node (the hostname topology level is the node itself)
    assert admission.pod_sets[0].pods_per_node() == {"n1": 2}


def test_nodes_sharing_a_label_are_reported_naming_each_other_and_take_no_new_pod() -> None:
    snap = read(relabelled(job(), n2_label=LABEL, n2_usable=True))
    assert not any(n.usable for n in snap.nodes)
    messages = {str(p.ref): p.message for p in snap.problems if p.field == FIELD}
    assert f"{LABEL!r} is also the label of n2" in messages["Node/n1"]
    assert f"{LABEL!r} is also the label of n1" in messages["Node/n2"]
    plan = plan_snapshot(snap, SolveOptions(time_limit=10))
    assert plan.admissions == () and [str(p.workload) for p in plan.pending] == [f"Job/{NS}/train"]


# ---------------------------------------------------------------- what apply writes

def test_a_job_on_the_relabelled_node_is_pinned_by_the_label_and_its_pods_by_it_too() -> None:
    items = relabelled(job())
    snap = read(items)
    plan = plan_snapshot(snap, SolveOptions(time_limit=10))
    kube = fake_kube(items)
    ref = ObjectRef("Job", NS, "train")
    applier = Applier(kube, flavors=snap.flavors, planned_versions={}, pins=NodePins.of(snap.nodes))  # type: ignore[arg-type]
    report = applier.run(plan, {}, release_wait=0)
    assert report.admitted == [ref], report.conflicts
    written = kube.objects[workload_path(ref)]
    assert node_affinity(written["spec"]["template"]["spec"]) == [
        {"key": HOSTNAME_LABEL, "operator": "In", "values": [LABEL]}]
    # the assignment annotation keeps naming the node: the reader maps it to the node
    (entry,) = json.loads(written["metadata"]["annotations"]["stowplan.io/assignment"])
    assert entry["topologyAssignment"]["domains"] == [{"values": ["n1"], "count": 2}]

    for name in ("train-a", "train-b"):
        kube.objects[f"/api/v1/namespaces/{NS}/pods/{name}"] = {
            "metadata": {"name": name, "namespace": NS, "resourceVersion": "7",
                         "labels": {"batch.kubernetes.io/job-name": "train"}},
            "spec": {"schedulingGates": [{"name": GATE}]}, "status": {"phase": "Pending"}}
    assert applier.release_gates({ref}) == 0
    pinned = [kube.objects[f"/api/v1/namespaces/{NS}/pods/{n}"]["spec"]["nodeSelector"] for n in ("train-a", "train-b")]
    assert pinned == [{HOSTNAME_LABEL: LABEL}] * 2
    # read back, those pins are n1's two places: nothing more is released
    writes = kube.writes
    assert applier.release_gates({ref}) == 0 and kube.writes == writes


def test_a_pod_group_on_the_relabelled_node_gets_the_label_as_its_nodeselector() -> None:
    items = relabelled(pod("g-0", 2, group="g", total=2), pod("g-1", 2, group="g", total=2))
    snap = read(items)
    (admission,) = plan_snapshot(snap, SolveOptions(time_limit=10)).admissions
    assert admission.workload == ObjectRef(pod_kind.GROUP_KIND, NS, "g")
    pods = {f"/api/v1/namespaces/{NS}/pods/{o['metadata']['name']}": o for o in items if o["kind"] == "Pod"}
    kube = FakeKube(pods)
    patches: list[list[dict[str, Any]]] = []
    kube.write = lambda method, path, body, content_type="": patches.append(body) or {}   # type: ignore[method-assign]
    outcome, why = pod_writes.admit(kube, admission, snap.flavors, NodePins.of(snap.nodes), {}, "[]",  # type: ignore[arg-type]
                                    lambda fn, xs: [fn(x) for x in xs])
    assert (outcome, why) == ("admitted", None)
    selectors = [op["value"] for ops in patches for op in ops if op["path"] == "/spec/nodeSelector"]
    assert selectors == [{HOSTNAME_LABEL: LABEL}] * 2


def test_a_leaderworkerset_group_on_the_relabelled_node_is_pinned_by_the_label() -> None:
    items = relabelled(lws("serve"), n2_usable=False)
    snap = read(items)
    plan = plan_snapshot(snap, SolveOptions(time_limit=10))
    assert plan.admissions, plan.pending
    first = plan.admissions[0]
    kube = fake_kube(items)
    lws_ref = ObjectRef("LeaderWorkerSet", NS, "serve")
    applier = Applier(kube, flavors=snap.flavors, planned_versions={}, pins=NodePins.of(snap.nodes))  # type: ignore[arg-type]
    report = applier.run(plan, {}, release_wait=0)
    assert first.workload in report.admitted, report.conflicts
    spec = kube.objects[workload_path(lws_ref)]["spec"]["leaderWorkerTemplate"]
    for template in (spec["leaderTemplate"], spec["workerTemplate"]):
        assert [e["values"] for e in node_affinity(template["spec"])] == [[LABEL]]
