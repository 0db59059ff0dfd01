"""The independent verifier: one valid/invalid pair per rule, an oracle check of the
quota arithmetic against Kueue's one-at-a-time `available()`, and a size check."""

from __future__ import annotations

import ast
import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from models import (
    Admission, ClusterQueue, Decisions, Eviction, Node, ObjectRef, PodSet, PodSetAssignment, Policy,
    PreemptionPolicy, Quota, ResourceGroup, Snapshot, Toleration, TopologyRequest, Workload, WorkloadState,
)
from planner.verify import selector_matches, verify

import builders as build

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
BLOCK, RACK = "cloud/block", "cloud/rack"


# ---------------------------------------------------------------- the rack world, on tests/builders.py
# Quantities here are the planner's integers (milli-cpu, units); the builders take them
# as Kubernetes quantities ("8000m"). Nothing asks for memory.

def mk_node(name: str, cpu: int = 8000, gpu: int = 8, pods: int = 110, labels: dict | None = None,
            **kw) -> Node:
    return build.node(name, cpu=f"{cpu}m", gpu=gpu, memory=0, pods=pods, labels=labels, **kw)


def rack_nodes() -> tuple[Node, ...]:
    """b1/r1: n1 n2, b1/r2: n3 n4, b2/r3: n5 n6."""
    racks = {"n1": ("b1", "r1"), "n2": ("b1", "r1"), "n3": ("b1", "r2"), "n4": ("b1", "r2"),
             "n5": ("b2", "r3"), "n6": ("b2", "r3")}
    return tuple(mk_node(n, labels={BLOCK: block, RACK: rack}) for n, (block, rack) in racks.items())


def plain_nodes(n: int, **kw) -> list[Node]:
    """n1..nN, all in block b1 / rack r1."""
    return [mk_node(f"n{i}", labels={BLOCK: "b1", RACK: "r1"}, **kw) for i in range(1, n + 1)]


def group(resources: tuple[str, ...], *flavors: tuple[str, dict[str, Quota]]) -> ResourceGroup:
    return build.resource_groups(dict(flavors), [resources])[0]


def big(n: int = 10**6, **kw) -> Quota:
    return Quota(nominal=n, **kw)


def mk_cq(name: str, groups: tuple[ResourceGroup, ...] | None = None, cohort: str | None = None,
          **kw) -> ClusterQueue:
    if groups is None:
        groups = (group(("cpu", GPU), ("tas", {"cpu": big(), GPU: big()})),)
    return replace(build.cq(name, cohort=cohort), resource_groups=groups, **kw)   # namespace_selector=None kept


def mk_workload(name: str, ns: str = "team-a", cq: str = "cq-a", count: int = 1, cpu: int = 1000,
                gpu: int = 0, *, state: WorkloadState = WorkloadState.PENDING,
                assignment: tuple[PodSetAssignment, ...] = (), min_count: int | None = None,
                topology: TopologyRequest = TopologyRequest(), tolerations: tuple[Toleration, ...] = (),
                node_selector: dict | None = None, pod_sets: tuple[PodSet, ...] | None = None,
                **kw) -> Workload:
    if pod_sets is None:
        pod_sets = (build.pod_set("main", count, cpu=f"{cpu}m", gpu=gpu, memory=0, min_count=min_count,
                              node_selector=node_selector, tolerations=tolerations, topology=topology),)
    return replace(build.workload(ns, name, pod_sets=pod_sets, cq=cq), state=state, assignment=assignment, **kw)


def psa(per_node: dict[str, int], name: str = "main", flavors: dict[str, str] | None = None,
        gpu: bool = True) -> PodSetAssignment:
    if flavors is None:
        flavors = {"cpu": "tas", GPU: "tas"} if gpu else {"cpu": "tas"}
    domains = tuple(((n,), c) for n, c in sorted(per_node.items()))
    return PodSetAssignment(name, sum(per_node.values()), flavors, (HOST,), domains)


def admit(w: Workload, *assignments: PodSetAssignment, cq: str | None = None) -> Admission:
    return Admission(w.ref, cq or w.cluster_queue or "", assignments)


def running(name: str, per_node: dict[str, int], cpu: int = 1000, gpu: int = 0, cq: str = "cq-a",
            **kw) -> Workload:
    return mk_workload(name, cq=cq, count=sum(per_node.values()), cpu=cpu, gpu=gpu,
                       state=WorkloadState.RUNNING, assignment=(psa(per_node, gpu=gpu > 0),), **kw)


def mk_snapshot(workloads=(), nodes=None, cqs=None, cohorts=(), flavors=None, **kw) -> Snapshot:
    """A Snapshot as the verifier may be handed one, built as is: not through
    builders.snapshot, which resolves workloads through LocalQueues, completes running
    flavors and labels every namespace with its name; tests here must do without
    (a queue mismatch, the implicit kubernetes.io/metadata.name label)."""
    if flavors is None:
        flavors = {"tas": build.flavor("tas", topology="topo")}
    return Snapshot(
        nodes=rack_nodes() if nodes is None else tuple(nodes),
        flavors=flavors,
        topologies={"topo": build.topology("topo", BLOCK, RACK, HOST)},
        cluster_queues={q.name: q for q in (cqs if cqs is not None else [mk_cq("cq-a")])},
        cohorts={c.name: c for c in cohorts},
        namespace_labels={"team-a": {"team": "a"}, "team-b": {"team": "b"}},
        workloads=tuple(workloads),
        **kw,
    )


def assert_valid(snapshot: Snapshot, decisions: Decisions) -> None:
    assert verify(snapshot, decisions) == []


def assert_caught(snapshot: Snapshot, decisions: Decisions, ref: ObjectRef, *fragments: str) -> list[str]:
    violations = verify(snapshot, decisions)
    hits = [v for v in violations if str(ref) in v and all(f in v for f in fragments)]
    assert hits, f"expected a violation naming {ref} with {fragments}, got {violations}"
    return violations


def D(*admissions: Admission, evictions: tuple[Eviction, ...] = ()) -> Decisions:
    return Decisions(tuple(admissions), tuple(evictions))


# ---------------------------------------------------------------- basics

def test_empty_plan_is_valid() -> None:
    assert_valid(mk_snapshot(), D())


def test_valid_plan_passes() -> None:
    w = mk_workload("w", count=3, gpu=2)
    assert_valid(mk_snapshot([w]), D(admit(w, psa({"n1": 2, "n2": 1}))))


def test_unknown_workload_and_double_admission() -> None:
    w = mk_workload("w")
    ghost = mk_workload("ghost")
    snap = mk_snapshot([w])
    assert_caught(snap, D(admit(ghost, psa({"n1": 1}, gpu=False))), ghost.ref, "not in the snapshot")
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False)), admit(w, psa({"n2": 1}, gpu=False))),
                  w.ref, "more than once")


def test_blocked_workload_not_admitted() -> None:
    w = mk_workload("w", blocked_reason="unknown LocalQueue")
    assert_caught(mk_snapshot([w]), D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "blocked")


def test_queue_mismatch() -> None:
    w = mk_workload("w")
    snap = mk_snapshot([w], cqs=[mk_cq("cq-a"), mk_cq("cq-b")])
    assert_valid(snap, D(admit(w, psa({"n1": 1}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False), cq="cq-b")), w.ref, "cq-b")


# ---------------------------------------------------------------- node capacity

def test_capacity_on_a_node() -> None:
    r = running("r", {"n1": 4}, cpu=1000)            # 4000 of n1's 8000 m
    w, w2 = mk_workload("w", count=4, cpu=1000), mk_workload("w2")
    snap = mk_snapshot([r, w, w2])
    assert_valid(snap, D(admit(w, psa({"n1": 4}, gpu=False))))
    violations = assert_caught(snap, D(admit(w, psa({"n1": 4}, gpu=False)), admit(w2, psa({"n1": 1}, gpu=False))),
                               w.ref, "node n1", "cpu")
    assert str(w2.ref) in violations[0] and len(violations) == 1


def test_capacity_counts_unmanaged_and_gpus() -> None:
    nodes = list(rack_nodes())
    nodes[0] = replace(nodes[0], unmanaged=build.res(gpu=7, pods=1))
    w = mk_workload("w", count=1, gpu=1)
    snap = mk_snapshot([w], nodes=nodes)
    assert_valid(snap, D(admit(w, psa({"n1": 1}))))
    w2 = mk_workload("w2", count=1, gpu=2)
    assert_caught(mk_snapshot([w2], nodes=nodes), D(admit(w2, psa({"n1": 1}))), w2.ref, GPU)


LOWER = PreemptionPolicy(within_cluster_queue="LowerPriority")


def test_eviction_frees_capacity() -> None:
    r = running("r", {"n1": 8}, cpu=1000)
    w = mk_workload("w", count=1, cpu=1000, priority=1)
    snap = mk_snapshot([r, w], nodes=plain_nodes(1), cqs=[mk_cq("cq-a", preemption=LOWER)])
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "node n1")
    assert_valid(snap, D(admit(w, psa({"n1": 1}, gpu=False)),
                         evictions=(Eviction(r.ref, "Preempted", (w.ref,)),)))


def test_preexisting_node_overuse_blocks_only_that_resource() -> None:
    r = running("r", {"n1": 10}, cpu=1000)           # 10000 m on an 8000 m node
    cpu_job = mk_workload("c", count=1, cpu=1000)
    gpu_job = mk_workload("g", count=1, cpu=0, gpu=1)
    snap = mk_snapshot([r, cpu_job, gpu_job])
    assert_valid(snap, D())                          # running overuse alone is not the plan's fault
    assert_valid(snap, D(admit(gpu_job, psa({"n1": 1}, flavors={GPU: "tas"}))))
    assert_caught(snap, D(admit(cpu_job, psa({"n1": 1}, gpu=False))), cpu_job.ref, "node n1", "cpu")


# ---------------------------------------------------------------- quota

def cpu_cq(name: str, nominal: int, cohort: str | None = None, borrowing: int | None = None,
           lending: int | None = None, flavor: str = "tas") -> ClusterQueue:
    quota = Quota(nominal, borrowing, lending)
    return mk_cq(name, (group(("cpu",), (flavor, {"cpu": quota})),), cohort=cohort)


def cpu_job(name: str, cq: str, cores: int, ns: str = "team-a") -> Workload:
    return mk_workload(name, ns=ns, cq=cq, count=cores, cpu=1000)


def spread(cores: int, first: int = 0) -> dict[str, int]:
    """Place `cores` one-core pods over n1..n6 (from n{first+1}), 8 per node."""
    out, i = {}, first
    while cores > 0:
        take = min(8, cores)
        out[f"n{i + 1}"] = take
        cores -= take
        i += 1
    return out


def cpu_admit(w: Workload, first: int = 0) -> Admission:
    return admit(w, psa(spread(w.pod_sets[0].count, first), gpu=False))


def test_quota_nominal() -> None:
    ok, over = cpu_job("ok", "cq-a", 4), cpu_job("over", "cq-a", 5)
    snap = mk_snapshot([ok, over], cqs=[cpu_cq("cq-a", 4000)])
    assert_valid(snap, D(cpu_admit(ok)))
    assert_caught(snap, D(cpu_admit(over)), over.ref, "ClusterQueue cq-a", "cpu")


def test_quota_counts_running_work() -> None:
    r = running("r", {"n1": 3}, cpu=1000)
    w = replace(cpu_job("w", "cq-a", 2), priority=1)
    snap = mk_snapshot([r, w], cqs=[replace(cpu_cq("cq-a", 4000), preemption=LOWER)])
    assert_caught(snap, D(cpu_admit(w)), w.ref, "cq-a")
    assert_valid(snap, D(cpu_admit(w), evictions=(Eviction(r.ref, "Preempted", (w.ref,)),)))


def test_borrowing_limit() -> None:
    cqs = [cpu_cq("cq-a", 4000, "co", borrowing=2000), cpu_cq("cq-b", 10000, "co")]
    ok, over = cpu_job("ok", "cq-a", 6), cpu_job("over", "cq-a", 7)
    snap = mk_snapshot([ok, over], cqs=cqs)
    assert_valid(snap, D(cpu_admit(ok)))
    assert_caught(snap, D(cpu_admit(over)), over.ref, "ClusterQueue cq-a", "borrowingLimit")


def test_no_borrowing_limit_borrows_whole_cohort() -> None:
    cqs = [cpu_cq("cq-a", 4000, "co"), cpu_cq("cq-b", 10000, "co")]
    ok, over = cpu_job("ok", "cq-a", 14), cpu_job("over", "cq-a", 15)
    snap = mk_snapshot([ok, over], nodes=plain_nodes(6), cqs=cqs)
    assert_valid(snap, D(cpu_admit(ok)))
    assert_caught(snap, D(cpu_admit(over)), over.ref, "Cohort co")


def test_lending_limit() -> None:
    # cq-b lends at most 3 of its 10 cores: cq-a can reach 4 + 3.
    cqs = [cpu_cq("cq-a", 4000, "co"), cpu_cq("cq-b", 10000, "co", lending=3000)]
    ok, over = cpu_job("ok", "cq-a", 7), cpu_job("over", "cq-a", 8)
    snap = mk_snapshot([ok, over], cqs=cqs)
    assert_valid(snap, D(cpu_admit(ok)))
    assert_caught(snap, D(cpu_admit(over)), over.ref, "Cohort co")


def test_lending_limit_guarantee_is_kept_for_the_lender() -> None:
    # cq-a borrows all 3 lendable cores of cq-b; cq-b still gets its 7 guaranteed.
    cqs = [cpu_cq("cq-a", 4000, "co"), cpu_cq("cq-b", 10000, "co", lending=3000)]
    a = cpu_job("a", "cq-a", 7)
    b = cpu_job("b", "cq-b", 7)
    b2 = cpu_job("b2", "cq-b", 8)
    snap = mk_snapshot([a, b, b2], nodes=plain_nodes(6),
                       cqs=cqs)
    assert_valid(snap, D(cpu_admit(a), cpu_admit(b, 2)))
    assert_caught(snap, D(cpu_admit(a), cpu_admit(b2, 2)), b2.ref, "Cohort co")


def test_hierarchical_cohort_quota() -> None:
    # root (own quota 2) <- mid (borrowingLimit 1 via its own quota table) <- cq-a, cq-b
    cohorts = [
        build.cohort("root", quotas={"tas": {"cpu": "2"}}),
        build.cohort("mid", parent="root", quotas={"tas": {"cpu": (0, "1")}}),
    ]
    cqs = [cpu_cq("cq-a", 3000, "mid"), cpu_cq("cq-b", 1000, "mid"), cpu_cq("cq-c", 0, "root")]
    ok = cpu_job("ok", "cq-a", 5)      # 3 own + 1 of cq-b + 1 borrowed from root
    over = cpu_job("over", "cq-a", 6)  # mid may take only 1 from root
    c2 = cpu_job("c2", "cq-c", 2)
    snap = mk_snapshot([ok, over, c2], cqs=cqs, cohorts=cohorts)
    assert_valid(snap, D(cpu_admit(ok)))
    assert_caught(snap, D(cpu_admit(over)), over.ref, "Cohort mid", "borrowingLimit")
    # cq-c may take the root's 2 cores, but not when mid took one of them.
    assert_valid(snap, D(cpu_admit(c2)))
    assert_caught(snap, D(cpu_admit(c2, 3), cpu_admit(ok)), c2.ref, "Cohort root")


def test_implicit_cohort_has_no_quota() -> None:
    cqs = [cpu_cq("cq-a", 2000, "ghost"), cpu_cq("cq-b", 2000, "ghost")]
    ok, over = cpu_job("ok", "cq-a", 4), cpu_job("over", "cq-a", 5)
    snap = mk_snapshot([ok, over], cqs=cqs)
    assert_valid(snap, D(cpu_admit(ok)))
    assert_caught(snap, D(cpu_admit(over)), over.ref, "Cohort ghost")


def test_preexisting_quota_overuse() -> None:
    r = running("r", {"n1": 5}, cpu=1000)          # 5 cores in a 4-core queue
    cqs = [mk_cq("cq-a", (group(("cpu", GPU), ("tas", {"cpu": Quota(4000), GPU: Quota(8)})),))]
    cpu_w = cpu_job("c", "cq-a", 1)
    gpu_w = mk_workload("g", count=1, cpu=0, gpu=1)
    snap = mk_snapshot([r, cpu_w, gpu_w], cqs=cqs)
    assert_valid(snap, D())
    assert_valid(snap, D(admit(gpu_w, psa({"n2": 1}, flavors={GPU: "tas"}))))
    assert_caught(snap, D(cpu_admit(cpu_w)), cpu_w.ref, "cq-a")


# ---------------------------------------------------------------- flavors

def two_flavor_snapshot(workloads) -> Snapshot:
    flavors = {"tas": build.flavor("tas", topology="topo"), "spot": build.flavor("spot"), "other": build.flavor("other")}
    cq = mk_cq("cq-a", (group(("cpu", GPU), ("tas", {"cpu": big(), GPU: big()}),
                              ("spot", {"cpu": big(), GPU: big()})),))
    return mk_snapshot(workloads, flavors=flavors, cqs=[cq])


def test_flavor_not_in_cluster_queue() -> None:
    w = mk_workload("w", gpu=1)
    snap = two_flavor_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 1}, flavors={"cpu": "spot", GPU: "spot"}))))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, flavors={"cpu": "other", GPU: "other"}))),
                  w.ref, "other", "not in ClusterQueue")
    assert_caught(snap, D(admit(w, psa({"n1": 1}, flavors={"cpu": "tas"}))), w.ref, "no flavor for", GPU)


def test_uncovered_resource() -> None:
    w = mk_workload("w", pod_sets=(build.pod_set("main", 1, cpu="1", memory=10),))
    snap = mk_snapshot([w])
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "memory", "does not cover")


def test_one_flavor_per_group() -> None:
    w = mk_workload("w", gpu=1)
    snap = two_flavor_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 1}, flavors={"cpu": "tas", GPU: "tas"}))))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, flavors={"cpu": "tas", GPU: "spot"}))),
                  w.ref, "one flavor per group")


def test_pods_resource_follows_coverage() -> None:
    w = mk_workload("w")
    covered = mk_cq("cq-a", (group(("cpu", GPU, "pods"), ("tas", {"cpu": big(), GPU: big(), "pods": Quota(1)})),))
    snap = mk_snapshot([w], cqs=[covered])
    assert_valid(snap, D(admit(w, psa({"n1": 1}, flavors={"cpu": "tas", "pods": "tas"}))))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "no flavor for pods")
    # `pods` is charged to quota where covered: a second pod exceeds the quota of 1
    w2 = mk_workload("w2", count=2)
    assert_caught(mk_snapshot([w2], cqs=[covered]),
                  D(admit(w2, psa({"n1": 2}, flavors={"cpu": "tas", "pods": "tas"}))), w2.ref, "pods")
    # not covered: a flavor for pods is an error
    assert_caught(mk_snapshot([w]), D(admit(w, psa({"n1": 1}, flavors={"cpu": "tas", "pods": "tas"}))),
                  w.ref, "pods", "does not cover")


def test_flavor_taints_need_tolerations() -> None:
    flavors = {"tas": build.flavor("tas", topology="topo", taints=["gpu=yes:NoSchedule"])}
    plain = mk_workload("plain")
    tolerant = mk_workload("tolerant", tolerations=["gpu"])
    snap = mk_snapshot([plain, tolerant], flavors=flavors)
    assert_valid(snap, D(admit(tolerant, psa({"n1": 1}, gpu=False))))
    assert_caught(snap, D(admit(plain, psa({"n1": 1}, gpu=False))), plain.ref, "nodeTaints")


def test_flavor_taints_are_tolerated_by_the_flavors_own_tolerations() -> None:
    open_flavor = {"tas": build.flavor("tas", topology="topo", taints=["gpu=yes:NoSchedule"], tolerations=["gpu"])}
    plain = mk_workload("plain")
    assert_valid(mk_snapshot([plain], flavors=open_flavor), D(admit(plain, psa({"n1": 1}, gpu=False))))
    wrong = {"tas": build.flavor("tas", topology="topo", taints=["gpu=yes:NoSchedule"], tolerations=["other"])}
    assert_caught(mk_snapshot([plain], flavors=wrong), D(admit(plain, psa({"n1": 1}, gpu=False))),
                  plain.ref, "nodeTaints")


# ---------------------------------------------------------------- nodes

def test_node_label_mismatch() -> None:
    flavors = {"tas": build.flavor("tas", node_labels={BLOCK: "b1"}, topology="topo")}
    w = mk_workload("w")
    snap = mk_snapshot([w], flavors=flavors)
    assert_valid(snap, D(admit(w, psa({"n3": 1}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n5": 1}, gpu=False))), w.ref, "n5", "nodeLabels")


def test_node_selector_mismatch() -> None:
    w = mk_workload("w", node_selector={RACK: "r2"})
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n3": 1}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "n1", "nodeSelector")


def test_untolerated_node_taint() -> None:
    nodes = list(rack_nodes())
    nodes[0] = replace(nodes[0], taints=(build.taint("dedicated=infer:NoSchedule"),))
    nodes[1] = replace(nodes[1], taints=(build.taint("soft=x:PreferNoSchedule"),))
    plain = mk_workload("plain")
    tolerant = mk_workload("tolerant", tolerations=["dedicated=infer"])
    snap = mk_snapshot([plain, tolerant], nodes=nodes)
    assert_valid(snap, D(admit(tolerant, psa({"n1": 1}, gpu=False)), admit(plain, psa({"n2": 1}, gpu=False))))
    assert_caught(snap, D(admit(plain, psa({"n1": 1}, gpu=False))), plain.ref, "n1", "taint")


def test_flavor_tolerations_cover_node_taints() -> None:
    nodes = list(rack_nodes())
    nodes[0] = replace(nodes[0], taints=(build.taint("pool=gpu:NoSchedule"),))
    flavors = {"tas": build.flavor("tas", topology="topo", tolerations=["pool"])}
    w = mk_workload("w")
    assert_valid(mk_snapshot([w], nodes=nodes, flavors=flavors), D(admit(w, psa({"n1": 1}, gpu=False))))


def test_unusable_and_unknown_nodes() -> None:
    nodes = list(rack_nodes())
    nodes[0] = replace(nodes[0], unschedulable=True)
    nodes[1] = replace(nodes[1], ready=False)
    w = mk_workload("w")
    snap = mk_snapshot([w], nodes=nodes)
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "n1", "not usable")
    assert_caught(snap, D(admit(w, psa({"n2": 1}, gpu=False))), w.ref, "n2", "not usable")
    assert_caught(snap, D(admit(w, psa({"n9": 1}, gpu=False))), w.ref, "n9", "does not exist")


def test_node_missing_topology_label() -> None:
    nodes = list(rack_nodes())
    nodes[0] = replace(nodes[0], labels={HOST: "n1", BLOCK: "b1"})
    w = mk_workload("w")
    snap = mk_snapshot([w], nodes=nodes)
    assert_valid(snap, D(admit(w, psa({"n2": 1}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "n1", RACK)


def test_domain_values_must_match_node_labels() -> None:
    w = mk_workload("w", count=1)
    levels = (BLOCK, RACK, HOST)
    good = PodSetAssignment("main", 1, {"cpu": "tas"}, levels, ((("b1", "r1", "n1"), 1),))
    bad = PodSetAssignment("main", 1, {"cpu": "tas"}, levels, ((("b1", "r2", "n1"), 1),))
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, good)))
    assert_caught(snap, D(admit(w, bad)), w.ref, "n1", RACK)


# ---------------------------------------------------------------- gang

def test_gang_count_wrong() -> None:
    w = mk_workload("w", count=4)
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 4}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 3}, gpu=False))), w.ref, "3 pods", "needs 4")


def test_gang_domain_sum_and_positive_counts() -> None:
    w = mk_workload("w", count=2)
    snap = mk_snapshot([w])
    mismatched = PodSetAssignment("main", 2, {"cpu": "tas"}, (HOST,), ((("n1",), 1),))
    assert_caught(snap, D(admit(w, mismatched)), w.ref, "places 1 pods")
    zero = PodSetAssignment("main", 2, {"cpu": "tas"}, (HOST,), ((("n1",), 2), (("n2",), 0)))
    assert_caught(snap, D(admit(w, zero)), w.ref, "count 0")


def test_gang_every_pod_set() -> None:
    w = mk_workload("w", pod_sets=(build.pod_set("leader", 1, memory=0), build.pod_set("workers", 2, memory=0)))
    snap = mk_snapshot([w])
    both = D(admit(w, psa({"n1": 1}, "leader", gpu=False), psa({"n2": 2}, "workers", gpu=False)))
    assert_valid(snap, both)
    assert_caught(snap, D(admit(w, psa({"n1": 1}, "leader", gpu=False))), w.ref, "workers", "no assignment")
    assert_caught(snap, D(admit(w, psa({"n1": 1}, "leader", gpu=False), psa({"n2": 2}, "workers", gpu=False),
                                psa({"n3": 1}, "extra", gpu=False))), w.ref, "unknown pod set extra")


def test_elastic_below_min() -> None:
    w = mk_workload("w", count=8, min_count=4)
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 4}, gpu=False))))
    assert_valid(snap, D(admit(w, psa({"n1": 6}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 3}, gpu=False))), w.ref, "3 pods", "4..8")
    big_w = mk_workload("w", count=8, min_count=4)
    assert_caught(mk_snapshot([big_w]), D(admit(big_w, psa({"n1": 8, "n2": 1}, gpu=False))), w.ref, "9 pods")


# ---------------------------------------------------------------- topology

def test_required_topology_split() -> None:
    w = mk_workload("w", count=4, topology=build.required(RACK))
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 2, "n2": 2}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n2": 2, "n3": 2}, gpu=False))), w.ref, "requires one", RACK)


def test_required_level_same_name_in_different_parents() -> None:
    nodes = (mk_node("x1", labels={BLOCK: "b1", RACK: "r1"}), mk_node("x2", labels={BLOCK: "b2", RACK: "r1"}))
    w = mk_workload("w", count=2, topology=build.required(RACK))
    assert_caught(mk_snapshot([w], nodes=nodes), D(admit(w, psa({"x1": 1, "x2": 1}, gpu=False))),
                  w.ref, "requires one")


def test_required_level_missing_from_topology() -> None:
    w = mk_workload("w", count=1, topology=build.required("cloud/zone"))
    assert_caught(mk_snapshot([w]), D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "cloud/zone")


def test_preferred_and_unconstrained_impose_nothing() -> None:
    p = mk_workload("p", count=2, topology=build.preferred(RACK))
    u = mk_workload("u", count=2, topology=build.unconstrained())
    snap = mk_snapshot([p, u])
    assert_valid(snap, D(admit(p, psa({"n1": 1, "n5": 1}, gpu=False)), admit(u, psa({"n2": 1, "n6": 1}, gpu=False))))


def test_slice_straddling() -> None:
    w = mk_workload("w", count=8, topology=build.sliced(RACK, 4, mode="preferred", mode_level=BLOCK))
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 3, "n2": 1, "n5": 4}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 2, "n3": 2, "n5": 4}, gpu=False))), w.ref, "straddle", "r1")
    w6 = mk_workload("w", count=6, min_count=2,
                     topology=build.sliced(RACK, 4, mode="preferred", mode_level=BLOCK))
    assert_caught(mk_snapshot([w6]), D(admit(w6, psa({"n1": 6}, gpu=False))), w.ref, "whole slices")


def test_multi_layer_slices() -> None:
    w = mk_workload("w", count=8, topology=build.sliced(BLOCK, 4, (HOST, 2), mode="required", mode_level=BLOCK)) 
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 2, "n2": 2, "n3": 4}, gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n1": 3, "n2": 1, "n3": 4}, gpu=False))), w.ref, "straddle", HOST)


def test_group_split() -> None:
    top = build.required(RACK, group="lws")
    w = mk_workload("w", pod_sets=(build.pod_set("leader", 1, memory=0, topology=top),
                                   build.pod_set("workers", 2, memory=0, topology=top)))
    snap = mk_snapshot([w])
    assert_valid(snap, D(admit(w, psa({"n1": 1}, "leader", gpu=False), psa({"n2": 2}, "workers", gpu=False))))
    assert_caught(snap, D(admit(w, psa({"n3": 1}, "leader", gpu=False), psa({"n2": 2}, "workers", gpu=False))),
                  w.ref, "group lws")


# ---------------------------------------------------------------- evictions

def test_evicting_non_preemptible() -> None:
    r = running("r", {"n1": 1})
    keep = running("keep", {"n2": 1}, non_preemptible=True)
    w = mk_workload("w", priority=1)
    # Full nodes: each eviction is needed (planner/verify/needed.py) where it is allowed.
    snap = mk_snapshot([r, keep, w], nodes=plain_nodes(2, cpu=1000), cqs=[mk_cq("cq-a", preemption=LOWER)])
    assert_valid(snap, D(admit(w, psa({"n1": 1}, gpu=False)), evictions=(Eviction(r.ref, "Preempted", (w.ref,)),)))
    assert_caught(snap, D(admit(w, psa({"n2": 1}, gpu=False)), evictions=(Eviction(keep.ref, "Preempted", (w.ref,)),)),
                  keep.ref, "non-preemptible")


def test_eviction_rules() -> None:
    r = running("r", {"n1": 1})
    p = mk_workload("p", priority=1)
    snap = mk_snapshot([r, p], nodes=plain_nodes(1, cpu=1000), cqs=[mk_cq("cq-a", preemption=LOWER)])
    assert_caught(snap, D(evictions=(Eviction(p.ref, "Preempted"),)), p.ref, "not running")
    assert_caught(snap, D(evictions=(Eviction(r.ref, "Preempted"),)), r.ref, "for no workload")
    assert_caught(snap, D(evictions=(Eviction(r.ref, "Preempted"), Eviction(r.ref, "Preempted"))), r.ref, "more than once")
    assert_caught(snap, D(evictions=(Eviction(r.ref, "Because"),)), r.ref, "reason")
    assert_caught(snap, D(evictions=(Eviction(r.ref, "Preempted", (p.ref,)),)), r.ref, "does not admit")
    p_in = admit(p, psa({"n1": 1}, gpu=False))
    assert_valid(snap, D(p_in, evictions=(Eviction(r.ref, "Preempted", (p.ref,)),)))
    assert_caught(snap, D(p_in, evictions=(Eviction(r.ref, "Reclaimed", (p.ref,)),)), r.ref, "reason is Preempted")
    assert_caught(snap, D(p_in, evictions=(Eviction(r.ref, "Preempted", (p.ref,), cost=-1.0),)), r.ref, "cost")


def test_minimum_runtime() -> None:
    young = running("young", {"n1": 1}, admitted_at=1000.0)
    old = running("old", {"n2": 1}, admitted_at=0.0)
    w = mk_workload("w", priority=1)
    snap = mk_snapshot([young, old, w], nodes=plain_nodes(2, cpu=1000), now=1500.0,
                       policy=Policy(minimum_runtime_seconds=600), cqs=[mk_cq("cq-a", preemption=LOWER)])
    assert_valid(snap, D(admit(w, psa({"n2": 1}, gpu=False)), evictions=(Eviction(old.ref, "Preempted", (w.ref,)),)))
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False)), evictions=(Eviction(young.ref, "Preempted", (w.ref,)),)),
                  young.ref, "minimum runtime")


def test_admitting_a_running_workload() -> None:
    r = running("r", {"n1": 1})
    p = mk_workload("p")
    snap = mk_snapshot([r, p])
    assert_valid(snap, D(admit(p, psa({"n1": 1}, gpu=False))))
    assert_caught(snap, D(admit(r, psa({"n2": 1}, gpu=False))), r.ref, "running, not pending")
    assert_caught(snap, D(admit(r, psa({"n2": 1}, gpu=False)), evictions=(Eviction(r.ref, "Preempted"),)),
                  r.ref, "both evicted and admitted")


# ---------------------------------------------------------------- queues, namespaces

def test_namespace_not_allowed() -> None:
    cq = mk_cq("cq-a", namespace_selector={"matchLabels": {"team": "a"}})
    a, b = mk_workload("a"), mk_workload("b", ns="team-b")
    snap = mk_snapshot([a, b], cqs=[cq])
    assert_valid(snap, D(admit(a, psa({"n1": 1}, gpu=False))))
    assert_caught(snap, D(admit(b, psa({"n1": 1}, gpu=False))), b.ref, "namespace team-b")


def test_none_namespace_selector_selects_nothing() -> None:
    w = mk_workload("w")
    snap = mk_snapshot([w], cqs=[mk_cq("cq-a", namespace_selector=None)])
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "namespaceSelector")


def test_selector_semantics() -> None:
    labels = {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert selector_matches({}, labels)
    assert not selector_matches(None, labels)
    assert selector_matches({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                   "values": ["team-a", "x"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches({"matchLabels": {"team": "a"},
                                 "matchExpressions": [{"key": "x", "operator": "Exists"}]}, labels)


def test_implicit_namespace_name_label() -> None:
    cq = mk_cq("cq-a", namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": "team-b"}})
    b = mk_workload("b", ns="team-b")
    assert_valid(mk_snapshot([b], cqs=[cq]), D(admit(b, psa({"n1": 1}, gpu=False))))


def test_inactive_cluster_queue() -> None:
    w = mk_workload("w")
    snap = mk_snapshot([w], cqs=[mk_cq("cq-a", inactive_reason="flavor gone is missing")])
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "inactive")
    assert_caught(mk_snapshot([w], cqs=[]), D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "does not exist")


def test_cohort_cycle_blocks_admission() -> None:
    cohorts = [build.cohort("x", parent="y"), build.cohort("y", parent="x")]
    w = mk_workload("w")
    snap = mk_snapshot([w], cqs=[mk_cq("cq-a", cohort="x")], cohorts=cohorts)
    assert_caught(snap, D(admit(w, psa({"n1": 1}, gpu=False))), w.ref, "cycle")


# ---------------------------------------------------------------- independence and speed

VERIFIER = sorted((Path(__file__).resolve().parent.parent / "planner" / "verify").glob("*.py"))


@pytest.mark.parametrize("source", VERIFIER, ids=[p.name for p in VERIFIER])
def test_verifier_imports_nothing_that_makes_plans(source: Path) -> None:
    forbidden = {"planner.kueue.semantics", "planner.kueue.capacity", "planner.kueue.topology", "planner.greedy",
                 "planner.milp.rows", "planner.milp.backends", "planner.milp.solution", "highspy", "pulp"}
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
            imported.update(f"{node.module}.{a.name}" for a in node.names)
    assert not imported & forbidden
    allowed = {"models", "__future__", "collections", "typing", "itertools", "heapq", "math", "dataclasses", "enum"}
    assert all(m.split(".")[0] in allowed or m.startswith("planner.verify") for m in imported)


def test_a_large_plan_verifies() -> None:
    """16,384 nodes, 20,000 workloads: the verifier's answer at scale (its speed is the
    benchmark's to measure, not a test's)."""
    nodes = tuple(mk_node(f"n{i:05d}", cpu=64000, gpu=8, labels={BLOCK: f"b{i // 512}", RACK: f"r{i // 32}"})
                  for i in range(16384))
    cq = mk_cq("cq-a", (group(("cpu", GPU), ("tas", {"cpu": big(10**9), GPU: big(10**9)})),))
    workloads, admissions = [], []
    for i in range(20000):
        node_a, node_b = nodes[(2 * i) % 16384].name, nodes[(2 * i + 1) % 16384].name
        if i % 2:
            workloads.append(running(f"r{i}", {node_a: 1, node_b: 1}, cpu=1000, gpu=1))
        else:
            w = mk_workload(f"w{i}", count=2, cpu=1000, gpu=1, topology=build.required(RACK))
            workloads.append(w)
            admissions.append(admit(w, psa({node_a: 1, node_b: 1})))
    snap = mk_snapshot(workloads, nodes=nodes, cqs=[cq])
    assert verify(snap, D(*admissions)) == []
    split = admit(workloads[0], psa({nodes[0].name: 1, nodes[40].name: 1}))   # two racks: r0 and r1
    assert any("w0" in v and "rack" in v for v in verify(snap, D(split, *admissions[1:])))


# ---------------------------------------------------------------- quota oracle (Kueue's available())

class Oracle:
    """Kueue's resource_node.go, written out again: admit one workload at a time."""

    def __init__(self, parents: dict[str, str | None], quotas: dict[str, Quota], clamp: bool = False):
        # clamp: what flows from the parent is never negative, so pre-existing overuse
        # above a queue does not take away what it has guaranteed (see planner.verify).
        self.parents, self.quotas, self.clamp = parents, quotas, clamp
        self.children = {n: [c for c, p in parents.items() if p == n] for n in parents}

    def subtree(self, n: str) -> int:
        return self.quotas[n].nominal + sum(self.subtree(c) - self.guaranteed(c) for c in self.children[n])

    def guaranteed(self, n: str) -> int:
        lend = self.quotas[n].lending_limit
        return 0 if lend is None else max(0, self.subtree(n) - lend)

    def usage(self, n: str, cq_usage: dict[str, int]) -> int:
        if not self.children[n]:
            return cq_usage.get(n, 0)
        return sum(max(0, self.usage(c, cq_usage) - self.guaranteed(c)) for c in self.children[n])

    def available(self, n: str, cq_usage: dict[str, int]) -> int:
        used = self.usage(n, cq_usage)
        parent = self.parents[n]
        if parent is None:
            return self.subtree(n) - used
        local = max(0, self.guaranteed(n) - used)
        from_parent = self.available(parent, cq_usage)
        limit = self.quotas[n].borrowing_limit
        if limit is not None:
            stored = self.subtree(n) - self.guaranteed(n)
            from_parent = min(from_parent, stored - max(0, used - self.guaranteed(n)) + limit)
        return local + (max(0, from_parent) if self.clamp else from_parent)

    def admits_in_some_order(self, base: dict[str, int], jobs: list[tuple[str, int]]) -> bool:
        for order in itertools.permutations(jobs):
            usage = dict(base)
            for cq, amount in order:
                if self.available(cq, usage) < amount:
                    break
                usage[cq] = usage.get(cq, 0) + amount
            else:
                return True
        return False


@st.composite
def quota_worlds(draw):
    """A random cohort tree of 1-3 cohorts and 2-4 queues, one flavor/resource (cpu cores)."""
    n_cohorts = draw(st.integers(1, 3))
    cohort_names = [f"co{i}" for i in range(n_cohorts)]
    parents: dict[str, str | None] = {"co0": None}
    for i in range(1, n_cohorts):
        parents[cohort_names[i]] = cohort_names[draw(st.integers(0, i - 1))]
    n_cqs = draw(st.integers(2, 4))
    limit = st.one_of(st.none(), st.integers(0, 6))
    quotas: dict[str, Quota] = {}
    for name in cohort_names:
        quotas[name] = Quota(draw(st.integers(0, 3)), draw(limit) if parents[name] else None, draw(limit))
    for i in range(n_cqs):
        parents[f"cq{i}"] = draw(st.sampled_from(cohort_names))
        quotas[f"cq{i}"] = Quota(draw(st.integers(0, 6)), draw(limit), draw(limit))
    sizes = st.integers(1, 5)
    candidates = [(f"cq{draw(st.integers(0, n_cqs - 1))}", draw(sizes)) for _ in range(draw(st.integers(0, 6)))]
    pending = [(f"cq{draw(st.integers(0, n_cqs - 1))}", draw(sizes)) for _ in range(draw(st.integers(1, 4)))]
    return parents, quotas, candidates, pending, draw(st.randoms(use_true_random=False))


def world_snapshot(parents, quotas, running_jobs, pending_jobs):
    def groups(name: str) -> tuple[ResourceGroup, ...]:
        q = quotas[name]
        return (group(("cpu",), ("tas", {"cpu": Quota(q.nominal * 1000,
                                                          None if q.borrowing_limit is None else q.borrowing_limit * 1000,
                                                          None if q.lending_limit is None else q.lending_limit * 1000)})),)
    cohorts = [replace(build.cohort(n, parent=parents[n]), resource_groups=groups(n)) for n in parents if n.startswith("co")]
    cqs = [mk_cq(n, groups(n), cohort=parents[n]) for n in parents if n.startswith("cq")]
    nodes = plain_nodes(2, cpu=10**6, pods=10**6)
    workloads = []
    for i, (cq, cores) in enumerate(running_jobs):
        workloads.append(running(f"r{i}", {"n1": cores}, cpu=1000, cq=cq))
    for i, (cq, cores) in enumerate(pending_jobs):
        workloads.append(mk_workload(f"p{i}", cq=cq, count=cores, cpu=1000))
    return mk_snapshot(workloads, nodes=nodes, cqs=cqs, cohorts=cohorts)


@settings(max_examples=300, deadline=None)
@given(quota_worlds())
def test_quota_verdict_matches_kueue_one_at_a_time(world) -> None:
    parents, quotas, candidates, pending, rnd = world
    oracle = Oracle(parents, quotas)
    # Running work is what Kueue would have admitted: candidates that fit, in order.
    base: dict[str, int] = {}
    running_jobs = []
    for cq, cores in candidates:
        if oracle.available(cq, base) >= cores:
            base[cq] = base.get(cq, 0) + cores
            running_jobs.append((cq, cores))
    # Evict a random subset of it.
    evict = [i for i in range(len(running_jobs)) if rnd.random() < 0.3]
    after_evictions: dict[str, int] = {}
    for i, (cq, cores) in enumerate(running_jobs):
        if i not in evict:
            after_evictions[cq] = after_evictions.get(cq, 0) + cores
    expected = oracle.admits_in_some_order(after_evictions, pending)

    snap = world_snapshot(parents, quotas, running_jobs, pending)
    by_name = {w.ref.name: w for w in snap.workloads}
    admissions = [admit(by_name[f"p{i}"], psa({"n2": cores}, gpu=False)) for i, (_, cores) in enumerate(pending)]
    evictions = tuple(Eviction(by_name[f"r{i}"].ref, "Preempted") for i in evict)
    # Evictions for nobody break the preemption rules; only the quota verdict matters here.
    violations = [v for v in verify(snap, D(*admissions, evictions=evictions))
                  if v.startswith(("ClusterQueue ", "Cohort "))]
    assert (violations == []) == expected, (violations, parents, quotas, running_jobs, evict, pending)


@settings(max_examples=300, deadline=None)
@given(quota_worlds())
def test_quota_verdict_with_preexisting_overuse(world) -> None:
    """Running work placed regardless of quota: admissions may only use what is free
    (a queue's guaranteed part stays usable even when the cohort above is overused)."""
    parents, quotas, candidates, pending, rnd = world
    oracle = Oracle(parents, quotas, clamp=True)
    base: dict[str, int] = {}
    for cq, cores in candidates:
        base[cq] = base.get(cq, 0) + cores
    expected = oracle.admits_in_some_order(base, pending)
    snap = world_snapshot(parents, quotas, candidates, pending)
    by_name = {w.ref.name: w for w in snap.workloads}
    assert verify(snap, D()) == []
    admissions = [admit(by_name[f"p{i}"], psa({"n2": cores}, gpu=False)) for i, (_, cores) in enumerate(pending)]
    violations = verify(snap, D(*admissions))
    assert (violations == []) == expected, (violations, parents, quotas, candidates, pending)


# ---------------------------------------------------------------- seeded plans from the greedy baseline

def test_greedy_plans_pass_and_broken_ones_fail() -> None:
    """Greedy's plans on seeded random snapshots are valid; the same plans with one pod
    moved onto a node with room for nothing are not."""
    randomgen = pytest.importorskip("tests.randomgen")
    greedy = pytest.importorskip("planner.greedy").greedy
    checked = 0
    for seed in range(40):
        for with_running, with_topology in ((False, False), (True, True)):
            snap = randomgen.random_snapshot(seed, with_running=with_running, with_topology=with_topology)
            decisions = greedy(snap).decisions
            assert verify(snap, decisions) == [], (seed, with_running, with_topology)
            if not decisions.admissions:
                continue
            first = decisions.admissions[0]
            full = mk_node("full", cpu=0, gpu=0, pods=0)
            broken_ps = replace(first.pod_sets[0], domains=((("full",), first.pod_sets[0].count),),
                                levels=(HOST,))
            broken = Decisions((replace(first, pod_sets=(broken_ps,) + first.pod_sets[1:]),)
                               + decisions.admissions[1:], decisions.evictions)
            snap_full = replace(snap, nodes=snap.nodes + (full,))
            assert any(str(first.workload) in v and "full" in v for v in verify(snap_full, broken))
            checked += 1
    assert checked > 20


def test_malformed_assignments_are_reported_not_fatal() -> None:
    w = mk_workload("w", count=2)
    r = mk_workload("r", state=WorkloadState.RUNNING,
                    assignment=(PodSetAssignment("main", 1, {"cpu": "tas"}, (HOST,), (((), 1),)),))
    empty = PodSetAssignment("main", 2, {"cpu": "tas"}, (HOST,), (((), 2),))
    snap = mk_snapshot([w, r])
    assert_caught(snap, D(admit(w, empty)), w.ref, "no values")
    assert_caught(snap, D(admit(w, psa({"n1": 2}, gpu=False)), evictions=(Eviction(w.ref, "Preempted"),)),
                  w.ref, "not running")
