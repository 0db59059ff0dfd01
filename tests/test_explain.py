"""Pending reasons (planner.describe.reasons): one actionable sentence, after the decisions."""

from __future__ import annotations

from models import (
    Admission, ClusterQueue, Decisions, Eviction, FlavorQuotas, Node, ObjectRef, PodSet,
    PodSetAssignment, Quota, ResourceFlavor, ResourceGroup, Resources, Snapshot, Topology,
    TopologyRequest, Workload, WorkloadState,
)
from planner.describe.reasons import pending_reasons
from planner.greedy import greedy

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
RACK = "cloud.provider.com/topology-rack"


def node(name: str, gpus: int = 8, rack: str = "r1") -> Node:
    return Node(name, {HOST: name, RACK: rack}, Resources.of({"cpu": 64_000, GPU: gpus, "pods": 110}))


def queue(name: str, gpus: int, cohort: str | None = None, flavor: str = "h100", **kw: object) -> ClusterQueue:
    group = ResourceGroup(("cpu", GPU), (FlavorQuotas(flavor, {"cpu": Quota(10_000_000), GPU: Quota(gpus, **kw)}),))  # type: ignore[arg-type]
    return ClusterQueue(name, (group,), cohort=cohort, namespace_selector={})


def job(name: str, cq: str, pods: int, gpus: int = 1, t: float = 0.0, **kw: object) -> Workload:
    ps = PodSet("main", pods, Resources.of({"cpu": 1000, GPU: gpus, "pods": 1}), **kw)  # type: ignore[arg-type]
    return Workload(ObjectRef("Job", "team-a", name), "lq", (ps,), cluster_queue=cq, queued_at=t, uid=name)


def snapshot(nodes, queues, workloads, **kw) -> Snapshot:
    flavors = {"h100": ResourceFlavor("h100", topology_name="dc")}
    return Snapshot(
        nodes=tuple(nodes), flavors=flavors, topologies={"dc": Topology("dc", (RACK, HOST))},
        cluster_queues={q.name: q for q in queues}, workloads=tuple(workloads), **kw,
    )


def ref(name: str) -> ObjectRef:
    return ObjectRef("Job", "team-a", name)


def test_quota_sentence_names_nominal_and_borrowable_room():
    nodes = [node(f"n{i}") for i in range(8)]
    queues = [queue("team-a-cq", 8, cohort="ai-org"), queue("team-b-cq", 8, cohort="ai-org", lending_limit=4)]
    s = snapshot(nodes, queues, [job("train", "team-a-cq", pods=2, gpus=8)])
    reasons = pending_reasons(s, Decisions())
    assert reasons == {ref("train"): (
        "needs 16 nvidia.com/gpu of flavor h100 in ClusterQueue team-a-cq; "
        "8 within nominal quota are free, 4 more borrowable from cohort ai-org")}


def test_quota_sentence_counts_what_the_decisions_admitted():
    nodes = [node(f"n{i}") for i in range(4)]
    s = snapshot(nodes, [queue("team-a-cq", 8)], [job("first", "team-a-cq", pods=1, gpus=6),
                                                  job("second", "team-a-cq", pods=1, gpus=4, t=1)])
    decisions = greedy(s).decisions
    assert [a.workload.name for a in decisions.admissions] == ["first"]
    assert pending_reasons(s, decisions) == {ref("second"): (
        "needs 4 nvidia.com/gpu of flavor h100 in ClusterQueue team-a-cq; 2 within nominal quota are free")}


def test_capacity_sentence_for_a_required_rack():
    nodes = [node(f"a{i}", rack="r1") for i in range(5)] + [node(f"b{i}", rack="r2") for i in range(2)]
    req = TopologyRequest("required", RACK)
    s = snapshot(nodes, [queue("team-a-cq", 1000)], [job("big", "team-a-cq", pods=64, topology=req)])
    assert pending_reasons(s, Decisions()) == {ref("big"): (
        "needs 64 pods in one cloud.provider.com/topology-rack; largest has room for 40")}


def test_capacity_sentence_for_plain_pods():
    nodes = [node("n0", gpus=4), node("n1", gpus=6)]
    s = snapshot(nodes, [queue("team-a-cq", 100)], [job("wide", "team-a-cq", pods=16)])
    assert pending_reasons(s, Decisions()) == {ref("wide"): (
        "needs 16 pods of 1 nvidia.com/gpu on flavor h100 nodes; room for 10")}


def test_evictions_give_back_capacity_and_quota():
    running = Workload(
        ObjectRef("Job", "team-a", "old"), "lq",
        (PodSet("main", 1, Resources.of({"cpu": 1000, GPU: 8, "pods": 1})),), cluster_queue="team-a-cq",
        state=WorkloadState.RUNNING,
        assignment=(PodSetAssignment("main", 1, {"cpu": "h100", GPU: "h100"}, (HOST,), ((("n0",), 1),)),),
    )
    s = snapshot([node("n0")], [queue("team-a-cq", 8)], [running, job("new", "team-a-cq", pods=1, gpus=8)])
    before = pending_reasons(s, Decisions())
    assert before[ref("new")].startswith("needs 8 nvidia.com/gpu of flavor h100")
    after = pending_reasons(s, Decisions(evictions=(Eviction(running.ref, "Preempted"),)))
    assert after == {ref("new"): "fits in what is left, but was not chosen: the plan admitted other workloads instead"}


def test_blocked_and_strict_fifo_reasons():
    q = ClusterQueue("strict-cq", queue("x", 8).resource_groups, namespace_selector={},
                     queueing_strategy="StrictFIFO")
    s = snapshot([node("n0")], [q], [job("head", "strict-cq", pods=1, gpus=16),
                                     job("behind", "strict-cq", pods=1, gpus=1, t=5)])
    reasons = pending_reasons(s, Decisions())
    assert reasons[ref("behind")] == "waiting behind Job/team-a/head (StrictFIFO)"
    assert reasons[ref("head")].startswith("needs 16 nvidia.com/gpu")


def test_admitted_workloads_get_no_reason():
    s = snapshot([node("n0")], [queue("team-a-cq", 8)], [job("a", "team-a-cq", pods=1, gpus=8)])
    decisions = greedy(s).decisions
    assert decisions.admissions and pending_reasons(s, decisions) == {}
    assert isinstance(decisions.admissions[0], Admission)


# ---------------------------------------------------------------- preemption in reasons

def _rack_world(within: str, *running_specs, pending_gpus: int = 8, quota: int = 16):
    """Racks r1 (n1 n2) and r2 (n3 n4) of 4-GPU nodes; one queue; `running_specs` are
    (name, priority, nodes, kwargs)."""
    import builders as b

    nodes = [b.node(n, gpu=4, labels={RACK: r}) for n, r in (("n1", "r1"), ("n2", "r1"), ("n3", "r2"), ("n4", "r2"))]
    quotas = {"default": {GPU: quota, "cpu": 1000, "memory": "10Ti"}}
    running = [b.running_job("team-a", name, cq="cq-a", gpu=1, nodes=placed, priority=prio, **kw)
               for name, prio, placed, kw in running_specs]
    want = b.job("team-a", "rack-job", cq="cq-a", pods=pending_gpus, gpu=1, priority=10,
                 topology=b.required(RACK))
    return b.snapshot(nodes=nodes, flavors=[b.flavor("default", topology="topo")],
                      topologies=[b.topology("topo", RACK, HOST)],
                      cqs=[b.cq("cq-a", quotas=quotas, within=within)], workloads=running + [want])


def test_reason_says_which_policy_forbids_the_preemption_that_would_help():
    s = _rack_world("Never", ("low-1", 0, {"n3": 4}, {}), ("low-2", 1, {"n4": 4}, {}),
                    ("high", 20, {"n1": 4, "n2": 4}, {}), quota=32)
    reasons = pending_reasons(s, greedy(s).decisions)
    assert reasons == {ref("rack-job"): (
        "needs 8 pods in one cloud.provider.com/topology-rack; largest has room for 0; "
        "evicting 2 lower-priority running workloads (8 pods) would make room, but withinClusterQueue is Never")}


def test_reason_says_when_preemption_was_allowed_but_not_chosen():
    s = _rack_world("LowerPriority", ("low-1", 0, {"n3": 4}, {}), ("low-2", 1, {"n4": 4}, {}),
                    ("high", 20, {"n1": 4, "n2": 4}, {}), quota=32)
    assert pending_reasons(s, Decisions())[ref("rack-job")].endswith(
        "; preempting 2 running workloads (8 pods) would make room, which this plan did not choose")
    assert pending_reasons(s, greedy(s).decisions) == {}   # greedy did preempt


def test_reason_names_non_preemptible_work_in_the_way():
    s = _rack_world("LowerPriority", ("pinned", 0, {"n3": 4, "n4": 4}, {"non_preemptible": True}),
                    ("high", 20, {"n1": 4, "n2": 4}, {}), quota=32)
    assert pending_reasons(s, greedy(s).decisions)[ref("rack-job")].endswith(
        "; evicting 1 lower-priority running workload (8 pods) would make room, but some of it is non-preemptible")


def test_no_preemption_clause_when_nothing_of_lower_priority_would_help():
    s = _rack_world("LowerPriority", ("high", 20, {"n1": 4, "n2": 4, "n3": 4}, {}), pending_gpus=8, quota=32)
    reason = pending_reasons(s, greedy(s).decisions)[ref("rack-job")]
    assert "evicting" not in reason and "preempting" not in reason


def test_a_pod_set_no_node_can_take_says_so_before_quota():
    import builders as b
    from planner.describe.reasons import pending_reasons
    from models import Decisions
    snap = b.snapshot(
        nodes=[b.node("n1", gpu=4, labels={"gpu-type": "a100"})],
        flavors=[b.flavor("default")],
        cqs=[b.cq("cq", quotas={"default": {b.GPU: 0, "cpu": 10, "memory": "10Gi"}})],
        workloads=[b.job("team", "l4", cq="cq", pods=1, gpu=1, node_selector={"gpu-type": "nvidia-l4"})])
    (reason,) = pending_reasons(snap, Decisions()).values()
    assert reason == "no ready node matches its node selector gpu-type=nvidia-l4 with any of its flavors (default)"
