"""The test builders and the random instance generator produce consistent models.

Other tests trust these inputs; a builder that silently made an invalid snapshot
would make a planner bug look like a pass (or a pass look like a bug).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from models import HOSTNAME_LABEL, Quota, Resources, Snapshot, Toleration, WorkloadState
from models.objects import tolerated

try:
    from tests import builders as b
    from tests.randomgen import random_snapshot
except ModuleNotFoundError:  # tests/ on sys.path rather than the repo root
    import builders as b  # type: ignore[no-redef]
    from randomgen import random_snapshot  # type: ignore[no-redef]

GI = 2**30


# ---------------------------------------------------------------- quantities

@pytest.mark.parametrize("resource, value, units", [
    ("cpu", "500m", 500), ("cpu", "32", 32_000), ("cpu", 2, 2_000), ("cpu", "1.5", 1_500),
    ("cpu", "1e3", 1_000_000), ("cpu", "100u", 1),
    ("memory", "64Gi", 64 * GI), ("memory", "512Mi", 512 * 2**20), ("memory", "1G", 10**9),
    ("memory", "1e3", 1_000), ("memory", 4096, 4096), ("memory", "1E", 10**18),
    ("nvidia.com/gpu", 8, 8), ("nvidia.com/gpu", "4", 4), ("pods", "110", 110),
])
def test_quantities_become_planner_integers(resource, value, units):
    assert b.to_units(resource, value) == units


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5Gb", "--1"])
def test_bad_quantity_is_refused(bad):
    with pytest.raises(ValueError):
        b.to_units("memory", bad)


def test_times_accept_epoch_rfc3339_and_offsets():
    assert b.at("2026-12-01T12:00:00Z") == b.NOW
    assert b.at(b.NOW) == b.NOW
    assert b.ago(minutes=30) == b.NOW - 1800


# ---------------------------------------------------------------- objects

def test_node_defaults():
    n = b.node("n1", gpu=4, cpu="16", memory="64Gi")
    assert n.labels[HOSTNAME_LABEL] == "n1"
    assert n.allocatable == Resources.of({"nvidia.com/gpu": 4, "cpu": 16_000, "memory": 64 * GI, "pods": 110})
    assert n.usable and n.unmanaged == Resources()


def test_node_taints_unmanaged_and_labels():
    n = b.node("g1", gpu=8, labels={"gpu-type": "h100"}, taints=["nvidia.com/gpu=present:NoSchedule"],
               unmanaged={"cpu": "500m", "pods": 1})
    assert n.labels == {HOSTNAME_LABEL: "g1", "gpu-type": "h100"}
    assert n.taints[0].key == "nvidia.com/gpu" and n.taints[0].value == "present"
    assert n.taints[0].effect == "NoSchedule"
    assert n.free.get("cpu") == 31_500 and n.free.get("pods") == 109


def test_toleration_notations():
    assert b.toleration("nvidia.com/gpu:NoSchedule") == Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule")
    assert b.toleration("k=v:NoSchedule") == Toleration("k", "Equal", "v", "NoSchedule")
    assert b.toleration({"key": "k", "operator": "Exists"}) == Toleration("k", "Exists")
    f = b.flavor("h100", node_labels={"gpu-type": "h100"}, tolerations=["nvidia.com/gpu:NoSchedule"])
    assert tolerated((b.taint("nvidia.com/gpu=present:NoSchedule"),), f.tolerations)


def test_cq_quota_forms_and_one_group():
    q = b.cq("team-a", cohort="org", quotas={
        "a100": {"nvidia.com/gpu": (8, 4, None), "cpu": 64},
        "h100": {"nvidia.com/gpu": {"nominal": 8, "lending_limit": 2}},
    })
    assert q.cohort == "org" and q.namespace_selector == {}
    (group,) = q.resource_groups
    assert group.covered_resources == ("cpu", "nvidia.com/gpu")
    a100, h100 = group.flavors
    assert (a100.flavor, h100.flavor) == ("a100", "h100")      # order is preference: kept
    assert a100.resources["nvidia.com/gpu"] == Quota(8, 4, None)
    assert a100.resources["cpu"] == Quota(64_000)
    # Kueue requires every flavor of a group to list every covered resource.
    assert h100.resources["cpu"] == Quota(0)
    assert h100.resources["nvidia.com/gpu"] == Quota(8, None, 2)


def test_cq_explicit_groups():
    q = b.cq("ml", quotas={"default": {"cpu": 100, "memory": "400Gi"}, "a100": {"nvidia.com/gpu": 16},
                           "h100": {"nvidia.com/gpu": 8}},
             groups=[("cpu", "memory"), ("nvidia.com/gpu",)], reclaim="Any", within="LowerPriority")
    cpu_group, gpu_group = q.resource_groups
    assert [f.flavor for f in cpu_group.flavors] == ["default"]
    assert [f.flavor for f in gpu_group.flavors] == ["a100", "h100"]
    assert q.preemption.reclaim_within_cohort == "Any"
    assert q.preemption.within_cluster_queue == "LowerPriority"
    with pytest.raises(ValueError):
        b.cq("bad", quotas={"x": {"cpu": 1, "nvidia.com/gpu": 1}}, groups=[("cpu",), ("nvidia.com/gpu",)])


def test_cohort_with_parent_and_quota():
    c = b.cohort("research", parent="org", quotas={"h100": {"nvidia.com/gpu": 8}})
    assert c.parent == "org"
    assert c.resource_groups[0].flavors[0].resources["nvidia.com/gpu"] == Quota(8)


def test_job_pod_set_requests_include_one_pod():
    w = b.job("team-a", "train-1", pods=4, gpu=1, cpu="8", memory="32Gi", priority=100, min_pods=2,
              tolerations=["nvidia.com/gpu:NoSchedule"], node_selector={"gpu-type": "h100"},
              topology=b.required("rack"))
    (ps,) = w.pod_sets
    assert ps.name == "main" and ps.count == 4 and ps.minimum == 2 and w.elastic
    assert ps.request == Resources.of({"nvidia.com/gpu": 1, "cpu": 8000, "memory": 32 * GI, "pods": 1})
    assert ps.topology.mode == "required" and ps.topology.level == "rack"
    assert w.state is WorkloadState.PENDING and w.priority == 100
    assert w.queued_at == w.created_at == b.DEFAULT_CREATED
    assert w.uid == b.job("team-a", "train-1").uid != b.job("team-a", "train-2").uid


def test_workload_with_several_pod_sets():
    w = b.workload("team-a", "js", pod_sets=[b.pod_set("driver", 1, cpu=2),
                                             b.pod_set("workers", 8, gpu=1)], kind="JobSet")
    assert w.ref.kind == "JobSet" and [ps.name for ps in w.pod_sets] == ["driver", "workers"]
    with pytest.raises(ValueError):
        b.workload("t", "dup", pod_sets=[b.pod_set("a"), b.pod_set("a")])


def test_running_job_assignment_sorted_by_node():
    w = b.running_job("team-a", "r1", nodes={"n2": 1, "n1": 3}, gpu=1, flavors="default")
    assert w.state is WorkloadState.RUNNING and w.admitted_at is not None
    (a,) = w.assignment
    assert a.count == 4 == w.pod_sets[0].count
    assert a.levels == (HOSTNAME_LABEL,)
    assert a.domains == ((("n1",), 3), (("n2",), 1))
    assert a.pods_per_node() == {"n1": 3, "n2": 1}


# ---------------------------------------------------------------- snapshot wiring

def _tiny() -> Snapshot:
    return b.snapshot(
        nodes=[b.node("n2", gpu=4), b.node("n1", gpu=4)],
        flavors=[b.flavor("default")],
        cqs=[b.cq("team-a", quotas={"default": {"nvidia.com/gpu": 6, "cpu": 64, "memory": "512Gi"}},
                  groups=[("cpu", "memory", "nvidia.com/gpu")])],
        lqs=[b.lq("team-a", "lq", "team-a")],
        workloads=[
            b.job("team-a", "big", pods=1, gpu=4, priority=1000),
            b.job("team-b", "lost", queue="nope", gpu=1),
            b.job("team-c", "direct", queue="team-c-lq", cq="team-a"),
            b.running_job("team-a", "r", nodes={"n1": 1}, gpu=1),
        ],
    )


def test_snapshot_wires_local_queues():
    snap = _tiny()
    by_name = {w.ref.name: w for w in snap.workloads}
    assert by_name["big"].cluster_queue == "team-a" and by_name["big"].blocked_reason is None
    assert by_name["lost"].cluster_queue is None
    assert "LocalQueue team-b/nope" in (by_name["lost"].blocked_reason or "")
    assert snap.local_queues[("team-c", "team-c-lq")].cluster_queue == "team-a"
    assert [n.name for n in snap.nodes] == ["n1", "n2"]
    assert snap.namespace_labels["team-b"] == {"kubernetes.io/metadata.name": "team-b"}
    assert snap.now == b.NOW


def test_snapshot_completes_running_flavors_from_the_queue():
    snap = _tiny()
    r = next(w for w in snap.workloads if w.ref.name == "r")
    # no flavor given: every requested, covered resource takes the group's first flavor; pods is not covered
    assert dict(r.assignment[0].flavors) == {"cpu": "default", "memory": "default", "nvidia.com/gpu": "default"}


# ---------------------------------------------------------------- random instances

def _check_valid(snap: Snapshot) -> None:
    """No dangling references, requests include pods, running workloads fit (an independent check)."""
    node_by_name = {n.name: n for n in snap.nodes}
    assert all(n.allocatable.get("pods") > 0 and n.labels.get(HOSTNAME_LABEL) == n.name for n in snap.nodes)
    for f in snap.flavors.values():
        assert f.topology_name is None or f.topology_name in snap.topologies
    for c in snap.cohorts.values():
        assert c.parent is None or c.parent in snap.cohorts
        seen, cur = set(), c
        while cur.parent is not None:            # no cycles
            assert cur.name not in seen
            seen.add(cur.name)
            cur = snap.cohorts[cur.parent]
        for g in c.resource_groups:
            assert all(fq.flavor in snap.flavors for fq in g.flavors)
    for q in snap.cluster_queues.values():
        assert q.cohort is None or q.cohort in snap.cohorts
        assert q.namespace_selector is not None
        for g in q.resource_groups:
            assert g.flavors
            for fq in g.flavors:
                assert fq.flavor in snap.flavors
                assert set(fq.resources) == set(g.covered_resources)
                for quota in fq.resources.values():
                    assert quota.nominal >= 0
                    assert quota.borrowing_limit is None or quota.borrowing_limit >= 0
                    assert quota.lending_limit is None or 0 <= quota.lending_limit <= quota.nominal
        covered = [r for g in q.resource_groups for r in g.covered_resources]
        assert len(covered) == len(set(covered))
    for (ns, name), local in snap.local_queues.items():
        assert (local.namespace, local.name) == (ns, name) and local.cluster_queue in snap.cluster_queues
        assert ns in snap.namespace_labels
    refs = [w.ref for w in snap.workloads]
    assert len(refs) == len(set(refs))
    used: dict[str, Resources] = defaultdict(Resources)
    for w in snap.workloads:
        assert snap.local_queues[(w.ref.namespace, w.local_queue)].cluster_queue == w.cluster_queue
        assert w.blocked_reason is None and w.pod_sets
        for ps in w.pod_sets:
            assert ps.request.get("pods") == 1 and ps.count >= 1
            assert ps.min_count is None or 1 <= ps.min_count < ps.count
            if ps.topology.level is not None:
                topo_levels = {lv for t in snap.topologies.values() for lv in t.levels}
                assert ps.topology.level in topo_levels
        if w.state is WorkloadState.RUNNING:
            assert w.assignment and w.admitted_at is not None and w.admitted_at <= snap.now
            queue = snap.cluster_queues[w.cluster_queue]
            queue_flavors = {fq.flavor for g in queue.resource_groups for fq in g.flavors}
            for a in w.assignment:
                ps = next(p for p in w.pod_sets if p.name == a.name)
                assert ps.minimum <= a.count <= ps.count
                assert a.count == sum(c for _, c in a.domains)
                assert set(a.flavors.values()) <= queue_flavors
                flavors = [snap.flavors[f] for f in set(a.flavors.values())]
                for (node_name,), count in a.domains:
                    n = node_by_name[node_name]
                    assert n.usable
                    assert all(n.labels.get(k) == v for f in flavors for k, v in f.node_labels.items())
                    assert all(n.labels.get(k) == v for k, v in ps.node_selector.items())
                    assert tolerated(n.taints, ps.tolerations + tuple(t for f in flavors for t in f.tolerations))
                    used[node_name] = used[node_name] + ps.request.scaled(count)
        else:
            assert w.state is WorkloadState.PENDING and not w.assignment
    for name, amount in used.items():
        assert (amount + node_by_name[name].unmanaged).fits_in(node_by_name[name].allocatable), name


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("running, topo", [(False, False), (True, False), (False, True), (True, True)])
def test_random_snapshots_are_valid(seed, running, topo):
    _check_valid(random_snapshot(seed, with_running=running, with_topology=topo))


@pytest.mark.parametrize("seed", range(40))
def test_random_running_workloads_fit_their_quota(seed):
    """Each queue's running usage is within nominal + borrowing limit, and the tree within its total."""
    snap = random_snapshot(seed, with_running=True)
    usage: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for w in snap.workloads:
        if w.state is not WorkloadState.RUNNING:
            continue
        for a in w.assignment:
            ps = next(p for p in w.pod_sets if p.name == a.name)
            for r, f in a.flavors.items():
                usage[w.cluster_queue][(f, r)] += a.count * ps.request.get(r)
    total_quota: dict[tuple[str, str], int] = defaultdict(int)
    for groups in [q.resource_groups for q in snap.cluster_queues.values()] + \
                  [c.resource_groups for c in snap.cohorts.values()]:
        for g in groups:
            for fq in g.flavors:
                for r, quota in fq.resources.items():
                    total_quota[(fq.flavor, r)] += quota.nominal
    total_used: dict[tuple[str, str], int] = defaultdict(int)
    for name, by_fr in usage.items():
        q = snap.cluster_queues[name]
        limits = {(fq.flavor, r): quota for g in q.resource_groups for fq in g.flavors
                  for r, quota in fq.resources.items()}
        for fr, amount in by_fr.items():
            assert fr in limits, (name, fr)
            quota = limits[fr]
            if q.cohort is None:
                assert amount <= quota.nominal
            elif quota.borrowing_limit is not None:
                assert amount <= quota.nominal + quota.borrowing_limit
            total_used[fr] += amount
    for fr, amount in total_used.items():
        assert amount <= total_quota[fr], fr


@pytest.mark.parametrize("seed", [0, 1, 7, 123, 9999])
def test_random_snapshot_is_deterministic(seed):
    kw = dict(with_running=True, with_topology=True)
    assert random_snapshot(seed, **kw) == random_snapshot(seed, **kw)


def test_random_snapshot_sizes_and_variety():
    snaps = [random_snapshot(s, nodes=(3, 5), workloads=(2, 4), with_running=True, with_topology=True)
             for s in range(80)]
    for snap in snaps:
        assert 3 <= len(snap.nodes) <= 5
        pending = [w for w in snap.workloads if w.state is WorkloadState.PENDING]
        assert 2 <= len(pending) <= 4
        assert 1 <= len(snap.flavors) <= 3 + 0 and 1 <= len(snap.cluster_queues) <= 4
        assert len(snap.cohorts) <= 2
    # across seeds the generator exercises every feature the property tests rely on
    assert any(c.parent for s in snaps for c in s.cohorts.values())
    assert any(c.resource_groups for s in snaps for c in s.cohorts.values())
    assert any(w.elastic for s in snaps for w in s.workloads)
    assert any(len(w.pod_sets) == 2 for s in snaps for w in s.workloads)
    assert any(w.state is WorkloadState.RUNNING for s in snaps for w in s.workloads)
    assert any(f.node_taints for s in snaps for f in s.flavors.values())
    assert any(f.tolerations for s in snaps for f in s.flavors.values())
    assert any(ps.topology.mode == "required" for s in snaps for w in s.workloads for ps in w.pod_sets)
    assert any(ps.topology.mode == "preferred" for s in snaps for w in s.workloads for ps in w.pod_sets)
    assert any(q.namespace_selector for s in snaps for q in s.cluster_queues.values())
    assert any(fq.resources[r].lending_limit is not None for s in snaps for q in s.cluster_queues.values()
               for g in q.resource_groups for fq in g.flavors for r in fq.resources)
    gpus = [ps.count * ps.request.get("nvidia.com/gpu") for s in snaps for w in s.workloads for ps in w.pod_sets]
    assert 0 in gpus and 1 in gpus and max(gpus) >= 8


# ---------------------------------------------------------------- fixtures

FIXTURES = sorted(p for p in (__import__("pathlib").Path(__file__).resolve().parent.parent / "fixtures").glob("*.yaml")
                  if not p.name.endswith(".plan.yaml"))  # golden plans are outputs, not snapshots


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_is_a_kubectl_list_with_its_expectations(path):
    """Each fixture reads as `kubectl get -o yaml` output and says what a correct plan does."""
    import yaml

    text = path.read_text()
    assert text.startswith("# Stowplan fixture: ") and "A correct plan" in text
    doc = yaml.safe_load(text)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    assert b.at(doc["metadata"]["annotations"]["stowplan.io/snapshot-time"]) == b.NOW
    kinds = {item["kind"] for item in doc["items"]}
    assert {"Node", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Job", "Namespace"} <= kinds
    for item in doc["items"]:
        meta = item["metadata"]
        assert meta["name"] and meta["uid"] and meta["creationTimestamp"]
        if item["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert item["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        if item["kind"] == "Node":
            assert meta["labels"]["kubernetes.io/hostname"] == meta["name"]
            assert "pods" in item["status"]["allocatable"]
            assert {"type": "Ready", "status": "True"}.items() <= item["status"]["conditions"][0].items()
        if item["kind"] == "Job":
            assert "kueue.x-k8s.io/queue-name" in meta["labels"]
            if not item["spec"]["suspend"]:
                assert "stowplan.io/assignment" in meta["annotations"]
    assert path.with_name("EXPECTATIONS.md").read_text().count(f"## {path.name}") == 1


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_reads_without_problems(path):
    snapshot_reader = pytest.importorskip("planner.snapshot")
    snap = snapshot_reader.read_snapshot([str(path)])
    assert snap.problems == ()
    assert snap.now == b.NOW
    assert all(w.blocked_reason is None and w.cluster_queue for w in snap.workloads)
