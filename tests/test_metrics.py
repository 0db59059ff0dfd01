"""Summary metrics on hand-computed cases."""

from __future__ import annotations

import json

from models import (
    Admission, Decisions, Eviction, Node, ObjectRef, PodSet, PodSetAssignment, Policy,
    ResourceFlavor, Resources, Snapshot, Topology, TopologyRequest, Workload, WorkloadState,
)
from planner.describe.metrics import summarize

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
BLOCK, RACK = "cloud/block", "cloud/rack"


def node(name: str, block: str, rack: str, *, unmanaged: dict | None = None, **kw) -> Node:
    return Node(name, {HOST: name, BLOCK: block, RACK: rack},
                Resources.of({"cpu": 8000, GPU: 8, "pods": 110}),
                unmanaged=Resources.of(unmanaged or {}), **kw)


def on(per_node: dict[str, int], name: str = "main") -> PodSetAssignment:
    return PodSetAssignment(name, sum(per_node.values()), {"cpu": "tas", GPU: "tas"}, (HOST,),
                            tuple(((n,), c) for n, c in sorted(per_node.items())))


def job(name: str, count: int, cpu: int = 0, gpu: int = 0, priority: int = 0, *,
        state: WorkloadState = WorkloadState.PENDING, placed: dict[str, int] | None = None,
        preferred: str | None = None, **kw) -> Workload:
    topology = TopologyRequest("preferred", preferred) if preferred else TopologyRequest()
    request = Resources.of({"cpu": cpu, GPU: gpu, "pods": 1})
    return Workload(ObjectRef("Job", "ns", name), "lq", (PodSet("main", count, request, topology=topology),),
                    cluster_queue="cq", priority=priority, state=state,
                    assignment=(on(placed),) if placed else (), **kw)


def snapshot(workloads, nodes, **kw) -> Snapshot:
    return Snapshot(nodes=tuple(nodes), flavors={"tas": ResourceFlavor("tas", topology_name="topo")},
                    topologies={"topo": Topology("topo", (BLOCK, RACK, HOST))},
                    workloads=tuple(workloads), **kw)


def scenario() -> tuple[Snapshot, Decisions]:
    """b1: r1 {n1 n2}, r2 {n3 n4}; b2: r3 {n5 n6}, r5 {n9}; b3: r4 {n7 n8}. n6 is cordoned."""
    nodes = [
        node("n1", "b1", "r1"), node("n2", "b1", "r1"),
        node("n3", "b1", "r2"), node("n4", "b1", "r2", unmanaged={"cpu": 500, "pods": 1}),
        node("n5", "b2", "r3"), node("n6", "b2", "r3", unschedulable=True, unmanaged={GPU: 8}),
        node("n7", "b3", "r4"), node("n8", "b3", "r4"), node("n9", "b2", "r5"),
    ]
    running = WorkloadState.RUNNING
    r_gpu = job("r-gpu", 4, cpu=1000, gpu=2, priority=100, state=running, placed={"n1": 4})     # 8 GPUs
    r_cpu = job("r-cpu", 2, cpu=1500, state=running, placed={"n2": 2})                          # 3 cores
    r_ev = job("r-ev", 1, gpu=1, state=running, placed={"n3": 1})                               # evicted
    p_gpu = job("p-gpu", 2, gpu=4, priority=100, preferred=RACK)                                # 8 GPUs, 2 racks
    p_cpu = job("p-cpu", 3, cpu=1000, priority=50, preferred=RACK)                              # 3 cores, 1 rack
    p_wait = job("p-wait", 1, cpu=1000, priority=50)
    blocked = job("blocked", 1, cpu=1000, priority=7, blocked_reason="unknown LocalQueue")
    external = job("ext", 1, cpu=1000, priority=999, state=WorkloadState.EXTERNAL)
    snap = snapshot([r_gpu, r_cpu, r_ev, p_gpu, p_cpu, p_wait, blocked, external], nodes)
    decisions = Decisions(
        admissions=(Admission(p_gpu.ref, "cq", (on({"n4": 1, "n5": 1}),)),
                    Admission(p_cpu.ref, "cq", (on({"n2": 3}),))),
        evictions=(Eviction(r_ev.ref, "Preempted", (p_gpu.ref,), 2.5),),
    )
    return snap, decisions


def test_scenario_by_hand() -> None:
    snap, decisions = scenario()
    assert summarize(snap, decisions) == {
        "served_gpus": {0: 0, 7: 0, 50: 0, 100: 16},     # GPUs only (REFERENCE §5)
        "served_cores": {0: 3, 7: 0, 50: 3, 100: 0},
        # usable: n1-n5, n7-n9 (8 nodes). cpu: n1 4000 + n2 6000 + n4 500 = 10500 / 64000.
        # gpu: n1 8 + n4 4 + n5 4 = 16 / 64; n6's unmanaged GPUs are on a cordoned node.
        "utilization": {"cpu": 0.164062, "gpu": 0.25},   # round(0.1640625, 6), half to even
        "admitted": 2,
        "evicted": 1,
        "pending": 2,
        "preemption_cost": 2.5,
        "locality": {"mean_domains": 1.5, "one_domain_share": 0.5, "pod_sets": 2},
        # busy: n1 n2 (running), n4 (unmanaged + admitted), n5 (admitted); n3 freed by the eviction.
        "free_domains": {BLOCK: 1, RACK: 2, HOST: 4},
    }


def test_key_order_is_deterministic_and_json_safe() -> None:
    snap, decisions = scenario()
    summary = summarize(snap, decisions)
    assert list(summary) == ["served_gpus", "served_cores", "utilization", "admitted", "evicted", "pending",
                             "preemption_cost", "locality", "free_domains"]
    assert list(summary["served_gpus"]) == sorted(summary["served_gpus"])  # type: ignore[arg-type]
    assert list(summary["free_domains"]) == sorted(summary["free_domains"])  # type: ignore[arg-type]
    json.dumps(summary)
    assert summary == summarize(snap, decisions)


def test_empty() -> None:
    assert summarize(Snapshot(), Decisions()) == {
        "served_gpus": {}, "served_cores": {}, "utilization": {"cpu": 0, "gpu": 0},
        "admitted": 0, "evicted": 0, "pending": 0, "preemption_cost": 0,
        "locality": {"mean_domains": 0, "one_domain_share": 0, "pod_sets": 0},
        "free_domains": {HOST: 0},
    }


def test_gpu_work_counts_gpus_not_cores_and_policy_gpu_names() -> None:
    mixed = job("mixed", 2, cpu=4000, gpu=1, state=WorkloadState.RUNNING, placed={"n1": 2})
    tpu_req = Resources.of({"cpu": 2000, "google.com/tpu": 4, "pods": 1})
    tpu = Workload(ObjectRef("Job", "ns", "tpu"), "lq", (PodSet("main", 1, tpu_req),), cluster_queue="cq",
                   priority=1, state=WorkloadState.RUNNING, assignment=(on({"n2": 1}),))
    nodes = [node("n1", "b1", "r1"), node("n2", "b1", "r1")]
    plain = summarize(snapshot([mixed, tpu], nodes), Decisions())
    assert plain["served_gpus"] == {0: 2, 1: 0}          # the TPU job counts as CPU-only: 2 cores, no GPU
    assert plain["served_cores"] == {0: 0, 1: 2}
    named = summarize(snapshot([mixed, tpu], nodes, policy=Policy(gpu_resources=("google.com/tpu",))),
                      Decisions())
    assert named["served_gpus"] == {0: 2, 1: 4}
    assert named["served_cores"] == {0: 0, 1: 0}
    # nodes have no TPUs allocatable: utilization counts the nvidia GPUs only
    assert named["utilization"] == {"cpu": 0.625, "gpu": 0.125}


def test_served_gpus_never_counts_cores() -> None:
    """Issue 35: a CPU-only snapshot reported its cores as "served GPUs"; the two are
    different units and are never summed."""
    cpu_only = job("cpu", 4, cpu=1500, priority=5, state=WorkloadState.RUNNING, placed={"n1": 4})
    gpu = job("gpu", 2, cpu=1000, gpu=4, priority=5, state=WorkloadState.RUNNING, placed={"n2": 2})
    summary = summarize(snapshot([cpu_only, gpu], [node("n1", "b1", "r1"), node("n2", "b1", "r1")]), Decisions())
    assert summary["served_gpus"] == {5: 8}
    assert summary["served_cores"] == {5: 6}


def test_elastic_admission_counts_admitted_pods() -> None:
    w = Workload(ObjectRef("Job", "ns", "e"), "lq",
                 (PodSet("main", 8, Resources.of({GPU: 1, "pods": 1}), min_count=2),), cluster_queue="cq")
    snap = snapshot([w], [node("n1", "b1", "r1")])
    summary = summarize(snap, Decisions((Admission(w.ref, "cq", (on({"n1": 3}),)),)))
    assert summary["served_gpus"] == {0: 3}
    assert summary["utilization"] == {"cpu": 0, "gpu": 0.375}


def test_overused_node_counts_up_to_allocatable() -> None:
    hog = job("hog", 10, cpu=1000, state=WorkloadState.RUNNING, placed={"n1": 10})
    summary = summarize(snapshot([hog], [node("n1", "b1", "r1"), node("n2", "b1", "r1")]), Decisions())
    assert summary["utilization"] == {"cpu": 0.5, "gpu": 0}


def test_domains_are_named_with_their_parents() -> None:
    # rack "r1" exists in two blocks: two domains, one of them free.
    nodes = [node("a", "b1", "r1"), node("b", "b2", "r1")]
    w = job("w", 2, cpu=1000, preferred=RACK)
    snap = snapshot([w], nodes)
    summary = summarize(snap, Decisions((Admission(w.ref, "cq", (on({"a": 1, "b": 1}),)),)))
    assert summary["locality"] == {"mean_domains": 2, "one_domain_share": 0, "pod_sets": 1}
    assert summary["free_domains"] == {BLOCK: 0, RACK: 0, HOST: 0}
    one = summarize(snap, Decisions((Admission(w.ref, "cq", (on({"a": 2}),)),)))
    assert one["locality"] == {"mean_domains": 1, "one_domain_share": 1, "pod_sets": 1}
    assert one["free_domains"] == {BLOCK: 1, RACK: 1, HOST: 1}


def test_hostname_level_in_topology_is_not_counted_twice() -> None:
    nodes = [node("a", "b1", "r1"), node("b", "b1", "r1", ready=False)]
    snap = Snapshot(nodes=tuple(nodes), topologies={"t": Topology("t", (BLOCK, HOST)),
                                                    "u": Topology("u", (RACK,))})
    assert summarize(snap, Decisions())["free_domains"] == {BLOCK: 1, RACK: 1, HOST: 1}
