"""The file snapshot reader on well-formed input: what each object becomes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from models import (
    HOSTNAME_LABEL, ObjectRef, PodSetAssignment, Resources, SliceLayer, TopologyRequest, WorkloadState,
)
from planner.snapshot import build_snapshot, read_snapshot

DATA = Path(__file__).parent / "data" / "snapshot"
GI = 2**30
T0 = "2026-12-01T10:00:00Z"
T0_EPOCH = 1796119200.0


# ---------------------------------------------------------------- builders

def meta(name, namespace=None, labels=None, annotations=None, **extra):
    m = {"name": name, **extra}
    if namespace is not None:
        m["namespace"] = namespace
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    return m


def node(name, cpu="32", memory="256Gi", gpus=None, pods=None, labels=None, ready=None, unschedulable=None,
         taints=None):
    allocatable = {"cpu": cpu, "memory": memory}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = gpus
    if pods is not None:
        allocatable["pods"] = pods
    obj = {"apiVersion": "v1", "kind": "Node",
           "metadata": meta(name, labels={HOSTNAME_LABEL: name, **(labels or {})}),
           "spec": {}, "status": {"allocatable": allocatable}}
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"},
                                       {"type": "Ready", "status": ready}]
    if unschedulable is not None:
        obj["spec"]["unschedulable"] = unschedulable
    if taints:
        obj["spec"]["taints"] = taints
    return obj


def pod_spec(requests=None, **extra):
    return {"containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}], **extra}


def job(name, namespace="team-a", queue="lq", suspend=True, parallelism=None, completions=None, requests=None,
        labels=None, annotations=None, template_annotations=None, created=T0, **spec_extra):
    all_labels = dict(labels or {})
    if queue:
        all_labels["kueue.x-k8s.io/queue-name"] = queue
    spec = {"suspend": suspend,
            "template": {"metadata": {}, "spec": pod_spec(requests, **spec_extra)}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    if template_annotations:
        spec["template"]["metadata"]["annotations"] = template_annotations
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": meta(name, namespace, all_labels, annotations, creationTimestamp=created,
                             uid=f"uid-{name}"),
            "spec": spec}


def pod(name, node_name, namespace="team-a", requests=None, labels=None, owner_job=None, phase="Running"):
    m = meta(name, namespace, labels)
    if owner_job:
        m["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner_job, "uid": "x"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m,
            "spec": {"nodeName": node_name, **pod_spec(requests)}, "status": {"phase": phase}}


def assignment(nodes, flavors=None, name="main"):
    return json.dumps([{"name": name, "count": sum(nodes.values()), "flavors": flavors or {"cpu": "default"},
                        "topologyAssignment": {"levels": [HOSTNAME_LABEL],
                                               "domains": [{"values": [n], "count": c} for n, c in nodes.items()]}}])


def kueue(kind, name, spec=None, namespace=None, version="v1beta2", **top):
    obj = {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": kind, "metadata": meta(name, namespace), **top}
    if spec is not None:
        obj["spec"] = spec
    return obj


def cluster_queue(name="cq", flavor="default", cohort=None, resources=(("cpu", "100"),), selector=None, **spec):
    body = {"namespaceSelector": {} if selector is None else selector,
            "resourceGroups": [{"coveredResources": [r for r, _ in resources],
                                "flavors": [{"name": flavor,
                                             "resources": [{"name": r, "nominalQuota": q} for r, q in resources]}]}],
            **spec}
    if cohort:
        body["cohortName"] = cohort
    return kueue("ClusterQueue", name, body)


def base():
    """A flavor, a ClusterQueue and a LocalQueue team-a/lq pointing at it."""
    return [kueue("ResourceFlavor", "default", {}),
            cluster_queue(),
            kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="team-a")]


def write(tmp_path, objects, name="snap.yaml", form="list", annotations=None):
    path = tmp_path / name
    if form == "list":
        doc = {"apiVersion": "v1", "kind": "List", "items": objects}
        if annotations:
            doc["metadata"] = {"annotations": annotations}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    elif form == "multi":
        path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    elif form == "json":
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=1))
    return str(path)


def read(tmp_path, objects, **kw):
    return read_snapshot([write(tmp_path, objects)], **kw)


def workload(snapshot, name, kind="Job", namespace="team-a"):
    ref = ObjectRef(kind, namespace, name)
    return next(w for w in snapshot.workloads if w.ref == ref)


def node_named(snapshot, name):
    return next(n for n in snapshot.nodes if n.name == name)


# ---------------------------------------------------------------- file forms

def _without_origin(snapshot):
    return dataclasses.replace(snapshot, source="", digest="")


def test_list_multidoc_folder_and_json_give_the_same_snapshot(tmp_path):
    objects = yaml.safe_load((DATA / "cluster.yaml").read_text())["items"]
    as_list = read_snapshot([str(DATA / "cluster.yaml")])
    (tmp_path / "m").mkdir()
    multi = read_snapshot([write(tmp_path / "m", objects, form="multi")], now=as_list.now)
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    write(folder, objects[:5], "a.yaml", form="multi")
    write(folder / "sub", objects[5:9], "b.yml", form="list")
    write(folder, objects[9:], "c.json", form="json")
    (folder / "README.txt").write_text("not read")
    from_folder = read_snapshot([str(folder)], now=as_list.now)
    as_json = read_snapshot([write(tmp_path, objects, "snap.json", form="json")], now=as_list.now)
    assert as_list.object_count == 16
    assert as_list.problems == ()
    for other in (multi, from_folder, as_json):
        assert _without_origin(other) == _without_origin(as_list)


def test_nested_lists_flatten_and_api_lists_lend_kind_to_items(tmp_path):
    path = tmp_path / "nested.json"
    items = [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}]  # NodeList items omit kind
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "NodeList", "items": items},
        {"apiVersion": "v1", "kind": "List", "items": [node("n2")]},
    ]}))
    snap = read_snapshot([str(path)])
    assert [n.name for n in snap.nodes] == ["n1", "n2"]
    assert snap.object_count == 2


def test_build_snapshot_from_decoded_objects():
    objects = yaml.safe_load((DATA / "cluster.yaml").read_text())
    from_file = read_snapshot([str(DATA / "cluster.yaml")])
    built = build_snapshot([objects], source="cluster://test", digest="sha256:x")
    assert built.source == "cluster://test" and built.digest == "sha256:x"
    assert _without_origin(built) == _without_origin(from_file)


def test_paths_and_a_single_string_are_accepted():
    path = DATA / "cluster.yaml"
    assert read_snapshot(path).source == read_snapshot([path]).source == read_snapshot(str(path)).source == str(path)


def test_json_array_file(tmp_path):
    path = tmp_path / "arr.json"
    path.write_text(json.dumps([node("a"), node("b")]))
    assert [n.name for n in read_snapshot([str(path)]).nodes] == ["a", "b"]


def test_digest_source_counts_and_ignored_kinds(tmp_path):
    first = write(tmp_path, [node("n1"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
                  "1.yaml")
    second = write(tmp_path, [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
                              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}}], "2.yaml",
                   form="multi")
    snap = read_snapshot([first, second])
    expected = hashlib.sha256(Path(first).read_bytes() + Path(second).read_bytes()).hexdigest()
    assert snap.digest == f"sha256:{expected}"
    assert snap.source == f"{first},{second}"
    assert snap.object_count == 4
    assert snap.ignored_kinds == {"apps/v1/Deployment": 1, "v1/ConfigMap": 2}


def test_output_is_sorted_whatever_the_file_order(tmp_path):
    objects = base() + [kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="team-0"),
                        node("b"), node("a"), job("z"), job("y"), job("x", namespace="team-0", queue="lq")]
    forward = read(tmp_path, objects, now=0)
    (tmp_path / "r").mkdir()
    backward = read(tmp_path / "r", list(reversed(objects)), now=0)
    assert [n.name for n in forward.nodes] == ["a", "b"]
    assert [w.ref.name for w in forward.workloads] == ["x", "y", "z"]
    assert _without_origin(forward) == _without_origin(backward)


# ---------------------------------------------------------------- nodes and pods

def test_node_capacity_and_unmanaged_usage(tmp_path):
    objects = base() + [
        node("n1", cpu="64", memory="512Gi", gpus="8"),
        node("n2", cpu="7500m", pods="20"),
        pod("plain", "n1", namespace="default", requests={"cpu": "500m", "memory": "1Gi"}),
        pod("plain2", "n1", namespace="default", requests={"cpu": "1", "nvidia.com/gpu": "1"}),
        pod("finished", "n1", namespace="default", requests={"cpu": "8"}, phase="Succeeded"),
        pod("failed", "n1", namespace="default", requests={"cpu": "8"}, phase="Failed"),
        pod("unbound", "", namespace="default", requests={"cpu": "8"}),
        pod("elsewhere", "gone-node", namespace="default", requests={"cpu": "8"}),
    ]
    snap = read(tmp_path, objects)
    n1, n2 = node_named(snap, "n1"), node_named(snap, "n2")
    assert n1.allocatable == Resources.of({"cpu": 64000, "memory": 512 * GI, "nvidia.com/gpu": 8, "pods": 110})
    assert n1.unmanaged == Resources.of({"cpu": 1500, "memory": GI, "nvidia.com/gpu": 1, "pods": 2})
    assert n1.free == Resources.of({"cpu": 62500, "memory": 511 * GI, "nvidia.com/gpu": 7, "pods": 108})
    assert n2.allocatable.get("cpu") == 7500 and n2.allocatable.get("pods") == 20
    assert n2.unmanaged == Resources()
    assert snap.problems == ()


@pytest.mark.parametrize("ready, unschedulable, usable", [
    (None, None, True),          # hand-written node without conditions
    ("True", None, True),
    ("False", None, False),
    ("Unknown", None, False),
    ("True", True, False),
    ("True", False, True),
])
def test_node_ready_and_unschedulable(tmp_path, ready, unschedulable, usable):
    snap = read(tmp_path, [node("n", ready=ready, unschedulable=unschedulable)])
    n = snap.nodes[0]
    assert n.ready == (ready in (None, "True"))
    assert n.unschedulable == bool(unschedulable)
    assert n.usable == usable


def test_node_labels_and_taints(tmp_path):
    taints = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}, {"key": "spot", "effect": "PreferNoSchedule"}]
    n = read(tmp_path, [node("n", labels={"rack": "r1"}, taints=taints)]).nodes[0]
    assert n.labels == {HOSTNAME_LABEL: "n", "rack": "r1"}
    assert [(t.key, t.value, t.effect) for t in n.taints] == [("gpu", "true", "NoSchedule"),
                                                              ("spot", "", "PreferNoSchedule")]


# ---------------------------------------------------------------- job states

def test_job_states_pending_running_external(tmp_path):
    objects = base() + [
        node("n1"), node("n2"),
        job("waiting", suspend=True, parallelism=2),
        job("running", suspend=False, parallelism=2, annotations={"stowplan.io/assignment": assignment({"n1": 2})}),
        job("outside", suspend=False, parallelism=1, requests={"cpu": "3"}),
        pod("outside-0", "n2", requests={"cpu": "3"}, owner_job="outside"),
    ]
    snap = read(tmp_path, objects)
    assert workload(snap, "waiting").state is WorkloadState.PENDING
    running = workload(snap, "running")
    assert running.state is WorkloadState.RUNNING
    assert running.assignment == (PodSetAssignment("main", 2, {"cpu": "default"}, (HOSTNAME_LABEL,),
                                                   ((("n1",), 2),)),)
    outside = workload(snap, "outside")
    assert outside.state is WorkloadState.EXTERNAL and outside.assignment == ()
    # the external job's pod is unmanaged usage; the running job's usage comes from its assignment
    assert node_named(snap, "n2").unmanaged == Resources.of(cpu=3000, pods=1)
    assert node_named(snap, "n1").unmanaged == Resources()
    assert snap.problems == ()


def test_bound_pods_win_over_the_annotation(tmp_path):
    flavors = {"cpu": "default"}
    objects = base() + [
        node("n1"), node("n2"), node("n3"),
        job("train", suspend=False, parallelism=3, annotations={"stowplan.io/assignment": assignment({"n1": 3}, flavors)}),
        pod("train-a", "n2", owner_job="train", requests={"cpu": "1"}),
        pod("train-b", "n3", labels={"batch.kubernetes.io/job-name": "train"}, requests={"cpu": "1"}),
        pod("train-c", "n3", labels={"job-name": "train"}, requests={"cpu": "1"}),
        pod("train-old", "n1", owner_job="train", phase="Succeeded"),
    ]
    snap = read(tmp_path, objects)
    w = workload(snap, "train")
    assert w.state is WorkloadState.RUNNING
    assert w.assignment == (PodSetAssignment("main", 3, flavors, (HOSTNAME_LABEL,), ((("n2",), 1), (("n3",), 2))),)
    assert all(n.unmanaged == Resources() for n in snap.nodes)   # managed pods are not unmanaged usage


def test_pods_not_yet_bound_keep_their_planned_nodes(tmp_path):
    # just admitted: one pod bound on n2 (moved), three not scheduled yet
    objects = base() + [
        node("n1"), node("n2"),
        job("fresh", suspend=False, parallelism=4, annotations={"stowplan.io/assignment": assignment({"n1": 4})}),
        pod("fresh-a", "n2", owner_job="fresh"),
        pod("fresh-b", "", owner_job="fresh"),
    ]
    w = workload(read(tmp_path, objects), "fresh")
    assert w.assignment[0].count == 4
    assert w.assignment[0].domains == ((("n1",), 3), (("n2",), 1))


def test_succeeded_pods_give_their_place_back(tmp_path):
    objects = base() + [
        node("n1"),
        job("finishing", suspend=False, parallelism=4, completions=4,
            annotations={"stowplan.io/assignment": assignment({"n1": 4})}),
        pod("f-0", "n1", owner_job="finishing"),
        *[pod(f"f-{i}", "n1", owner_job="finishing", phase="Succeeded") for i in range(1, 4)],
        job("long", suspend=False, parallelism=2, completions=10,
            annotations={"stowplan.io/assignment": assignment({"n1": 2})}),
        pod("l-0", "n1", owner_job="long"),
        *[pod(f"l-{i}", "n1", owner_job="long", phase="Succeeded") for i in range(1, 6)],
    ]
    snap = read(tmp_path, objects)
    assert workload(snap, "finishing").assignment[0].domains == ((("n1",), 1),)   # 3 of 4 done
    assert workload(snap, "long").assignment[0].count == 2                       # 5 of 10 done: still 2 wide


def test_pods_of_a_pending_job_and_of_unqueued_jobs_are_unmanaged(tmp_path):
    objects = base() + [
        node("n1"),
        job("plain", queue=None, suspend=False),
        pod("plain-0", "n1", owner_job="plain", requests={"cpu": "2"}),
        job("waiting", suspend=True),
        pod("waiting-0", "n1", owner_job="waiting", requests={"cpu": "1"}),
    ]
    snap = read(tmp_path, objects)
    assert [w.ref.name for w in snap.workloads] == ["waiting"]   # no queue label: not a Stowplan workload
    assert node_named(snap, "n1").unmanaged == Resources.of(cpu=3000, pods=2)


def test_job_fields(tmp_path):
    objects = base() + [job(
        "train", parallelism=8, completions=6,
        requests={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
        annotations={"kueue.x-k8s.io/job-min-parallelism": "2", "stowplan.io/evicted-at": "2026-12-01T11:00:00Z",
                     "stowplan.io/admitted-at": "2026-12-01T10:30:00Z",
                     "stowplan.io/checkpointed-at": "2026-12-01T10:45:00+00:00",
                     "stowplan.io/preemption-cost": "7.5", "stowplan.io/non-preemptible": "true"},
        nodeSelector={"pool": "gpu"}, tolerations=[{"key": "gpu", "operator": "Exists"}],
    )]
    objects[-1]["metadata"]["resourceVersion"] = "123"
    w = workload(read(tmp_path, objects), "train")
    ps = w.pod_sets[0]
    assert ps.name == "main" and ps.count == 6 and ps.min_count == 2   # completions < parallelism caps the count
    assert ps.request == Resources.of({"cpu": 8000, "memory": 64 * GI, "nvidia.com/gpu": 2, "pods": 1})
    assert ps.node_selector == {"pool": "gpu"}
    assert [(t.key, t.operator) for t in ps.tolerations] == [("gpu", "Exists")]
    assert w.cluster_queue == "cq" and w.local_queue == "lq"
    assert w.uid == "uid-train" and w.resource_version == "123"
    assert w.created_at == T0_EPOCH
    assert w.queued_at == T0_EPOCH + 3600        # the later of creation and eviction
    assert w.admitted_at == T0_EPOCH + 1800 and w.checkpointed_at == T0_EPOCH + 2700
    assert w.preemption_cost == 7.5 and w.non_preemptible is True
    assert w.blocked_reason is None


def test_missing_suspend_reads_as_suspended(tmp_path):
    queued = job("j")
    del queued["spec"]["suspend"]     # Kueue's webhook would have set it to true
    assert workload(read(tmp_path, base() + [queued]), "j").state is WorkloadState.PENDING


def test_parallelism_defaults_to_one_and_min_equal_to_count_is_not_elastic(tmp_path):
    objects = base() + [job("one"), job("gang", parallelism=4,
                                        annotations={"kueue.x-k8s.io/job-min-parallelism": "4"})]
    snap = read(tmp_path, objects)
    assert workload(snap, "one").pod_sets[0].count == 1
    gang = workload(snap, "gang")
    assert gang.pod_sets[0].min_count is None and not gang.elastic


# ---------------------------------------------------------------- JobSet

def replicated_job(name, replicas, parallelism, requests, annotations=None, completions=None):
    template = {"metadata": {"annotations": annotations} if annotations else {}, "spec": pod_spec(requests)}
    return {"name": name, "replicas": replicas,
            "template": {"spec": {"parallelism": parallelism, "completions": completions or parallelism,
                                  "template": template}}}


def jobset(name, suspend=True, annotations=None, replicated=None):
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": meta(name, "team-a", {"kueue.x-k8s.io/queue-name": "lq"}, annotations,
                             creationTimestamp=T0),
            "spec": {"suspend": suspend, "replicatedJobs": replicated}}


def test_jobset_pod_sets(tmp_path):
    objects = base() + [jobset("js", replicated=[
        replicated_job("workers", 4, 2, {"cpu": "2", "nvidia.com/gpu": "8"},
                       {"kueue.x-k8s.io/podset-required-topology": "rack",
                        "kueue.x-k8s.io/podset-group-name": "g"}),
        replicated_job("driver", 1, 1, {"cpu": "1"}, {"kueue.x-k8s.io/podset-group-name": "g"}),
        replicated_job("short", 3, 4, {"cpu": "1"}, completions=2),    # 3 x min(4, 2)
    ])]
    snap = read(tmp_path, objects)
    w = workload(snap, "js", kind="JobSet")
    assert [(p.name, p.count) for p in w.pod_sets] == [("driver", 1), ("short", 6), ("workers", 8)]
    workers = w.pod_sets[2]
    assert workers.request == Resources.of({"cpu": 2000, "nvidia.com/gpu": 8, "pods": 1})
    assert workers.topology == TopologyRequest("required", "rack", (), "g")
    assert w.pod_sets[0].topology == TopologyRequest(None, None, (), "g")
    assert w.state is WorkloadState.PENDING and w.cluster_queue == "cq"


def test_running_jobset_pods_are_managed_and_win(tmp_path):
    entries = [{"name": rj, "count": c, "flavors": {"cpu": "default"},
                "topologyAssignment": {"levels": [HOSTNAME_LABEL], "domains": [{"values": ["n1"], "count": c}]}}
               for rj, c in (("driver", 1), ("workers", 2))]
    child = job("js-workers-0", queue="lq", suspend=False)
    child["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "js", "apiVersion": "jobset.x-k8s.io/v1alpha2"}]

    def js_pod(name, node_name, rj):
        return pod(name, node_name, labels={"jobset.sigs.k8s.io/jobset-name": "js",
                                            "jobset.sigs.k8s.io/replicatedjob-name": rj}, owner_job=f"js-{rj}-0")

    objects = base() + [node("n1"), node("n2"), child,
                        jobset("js", suspend=False, annotations={"stowplan.io/assignment": json.dumps(entries)},
                               replicated=[replicated_job("workers", 1, 2, {"cpu": "1"}),
                                           replicated_job("driver", 1, 1, {"cpu": "1"})]),
                        js_pod("w0", "n2", "workers"), js_pod("w1", "n2", "workers")]
    snap = read(tmp_path, objects)
    assert [w.ref.kind for w in snap.workloads] == ["JobSet"]      # the child Job is not a workload
    w = snap.workloads[0]
    assert w.state is WorkloadState.RUNNING
    by_name = {a.name: a for a in w.assignment}
    assert by_name["driver"].domains == ((("n1",), 1),)             # no pods bound: the annotation stands
    assert by_name["workers"].domains == ((("n2",), 2),)
    assert all(n.unmanaged == Resources() for n in snap.nodes)


# ---------------------------------------------------------------- TAS annotations

@pytest.mark.parametrize("annotations, expected", [
    ({}, TopologyRequest()),
    ({"kueue.x-k8s.io/podset-required-topology": "block"}, TopologyRequest("required", "block")),
    ({"kueue.x-k8s.io/podset-preferred-topology": "rack"}, TopologyRequest("preferred", "rack")),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, TopologyRequest("unconstrained")),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "false"}, TopologyRequest()),
    ({"kueue.x-k8s.io/podset-required-topology": "no-such-level"}, TopologyRequest("required", "no-such-level")),
    ({"kueue.x-k8s.io/podset-preferred-topology": "block",
      "kueue.x-k8s.io/podset-slice-required-topology": "rack", "kueue.x-k8s.io/podset-slice-size": "4"},
     TopologyRequest("preferred", "block", (SliceLayer("rack", 4),))),
    ({"kueue.x-k8s.io/podset-required-topology": "block",
      "kueue.x-k8s.io/podset-slice-required-topology-constraints":
          '[{"topology": "rack", "size": 8}, {"topology": "host", "size": 4}]'},
     TopologyRequest("required", "block", (SliceLayer("rack", 8), SliceLayer("host", 4)))),
    ({"kueue.x-k8s.io/podset-group-name": "g1"}, TopologyRequest(group="g1")),
])
def test_topology_annotations(tmp_path, annotations, expected):
    # the queue's flavor has a Topology with these levels (a level it lacks is tested with bad input)
    levels = [{"nodeLabel": level} for level in ("block", "rack", "host", HOSTNAME_LABEL)]
    objects = [kueue("ResourceFlavor", "default", {"topologyName": "t"}), kueue("Topology", "t", {"levels": levels}),
               *base()[1:]]
    snap = read(tmp_path, objects + [job("j", parallelism=8, template_annotations=annotations)])
    w = workload(snap, "j")
    assert w.pod_sets[0].topology == expected
    if "no-such-level" in annotations.values():
        assert w.blocked_reason == "topology level no-such-level is in no flavor's Topology of ClusterQueue cq"
    else:
        assert w.blocked_reason is None


# ---------------------------------------------------------------- priority

def test_priority_resolution(tmp_path):
    classes = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
         "value": 1000},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
    ]
    objects = base() + classes + [
        job("by-label", labels={"kueue.x-k8s.io/priority-class": "high"}, priorityClassName="low"),
        job("by-class", priorityClassName="low"),
        job("none"),
    ]
    snap = read(tmp_path, objects)
    assert workload(snap, "by-label").priority == 1000     # the WorkloadPriorityClass wins
    assert workload(snap, "by-class").priority == 10
    assert workload(snap, "none").priority == 0
    default = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "dflt"},
               "value": 5, "globalDefault": True}
    (tmp_path / "d").mkdir()
    assert workload(read(tmp_path / "d", objects + [default]), "none").priority == 5


# ---------------------------------------------------------------- Kueue objects, policy, time

def test_v1beta1_spellings(tmp_path):
    cq = cluster_queue("cq", flavorFungibility={"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"})
    cq["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    cq["spec"]["cohort"] = "child"
    objects = [kueue("ResourceFlavor", "default", {}, version="v1beta1"), cq,
               kueue("Cohort", "child", {"parent": "root"}, version="v1beta1"),
               kueue("Cohort", "root", {}),
               kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="team-a", version="v1beta1"),
               kueue("Topology", "t", {"levels": [{"nodeLabel": "rack"}]}, version="v1alpha1")]
    snap = read(tmp_path, objects)
    got = snap.cluster_queues["cq"]
    assert got.cohort == "child" and got.active
    assert got.when_can_borrow == "MayStopSearch" and got.when_can_preempt == "MayStopSearch"
    assert snap.cohorts["child"].parent == "root"
    assert snap.topologies["t"].levels == ("rack",)
    assert snap.local_queues[("team-a", "lq")].cluster_queue == "cq"


def test_cluster_queue_defaults_and_selector(tmp_path):
    snap = read(tmp_path, base())
    cq = snap.cluster_queues["cq"]
    assert cq.namespace_selector == {}
    assert cq.preemption.within_cluster_queue == "Never" and cq.queueing_strategy == "BestEffortFIFO"
    assert cq.when_can_borrow == "MayStopSearch" and cq.when_can_preempt == "TryNextFlavor"
    assert cq.resource_groups[0].flavors[0].resources["cpu"].nominal == 100_000


def test_stopped_cluster_queue_is_inactive(tmp_path):
    snap = read(tmp_path, [kueue("ResourceFlavor", "default", {}), cluster_queue(stopPolicy="Hold")])
    assert snap.cluster_queues["cq"].inactive_reason == "stopped (spec.stopPolicy: Hold)"


def test_policy_from_snapshot_and_policy_file_overrides(tmp_path):
    policy = {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
              "spec": {"timeLimitSeconds": 5, "gap": 0.01, "agingPerHour": 1.5, "maxLostHours": 12,
                       "restartCost": 2, "minimumRuntimeSeconds": 600, "gpuResources": ["google.com/tpu"],
                       "threads": 4, "seed": 3}}
    snap = read(tmp_path, [policy])
    p = snap.policy
    assert (p.time_limit_seconds, p.mip_gap, p.aging_per_hour, p.max_lost_hours, p.restart_cost,
            p.minimum_runtime_seconds, p.gpu_resources, p.threads, p.seed) == (
        5.0, 0.01, 1.5, 12.0, 2.0, 600.0, ("google.com/tpu",), 4, 3)
    override = tmp_path / "policy.yaml"
    override.write_text(yaml.safe_dump({**policy, "spec": {"timeLimitSeconds": 60}}))
    p2 = read_snapshot([str(tmp_path / "snap.yaml")], policy_file=str(override)).policy
    assert p2.time_limit_seconds == 60.0 and p2.threads == 1     # the file replaces, it does not merge


def test_planning_time(tmp_path):
    objects = base() + [job("a", created="2026-12-01T10:00:00Z"),
                        job("b", created="2026-12-01T08:00:00Z",
                            annotations={"stowplan.io/checkpointed-at": "2026-12-01T12:00:00Z"})]
    assert read(tmp_path, objects, now=42.0).now == 42.0
    assert read(tmp_path, objects).now == T0_EPOCH + 2 * 3600        # newest timestamp read
    path = write(tmp_path, objects, "annotated.yaml", annotations={"stowplan.io/snapshot-time": "2026-12-02T00:00:00Z"})
    assert read_snapshot([path]).now == T0_EPOCH + 14 * 3600
    assert read_snapshot([path], now=1.0).now == 1.0
    (tmp_path / "empty").mkdir()
    assert read(tmp_path / "empty", [node("n", ready="True")]).now == 0.0


def test_bare_yaml_timestamps_are_accepted(tmp_path):
    path = tmp_path / "bare.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": base()}) + "")
    text = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  namespace: team-a\n"
        "  creationTimestamp: 2026-12-01T10:00:00Z\n  labels: {kueue.x-k8s.io/queue-name: lq}\n"
        "spec:\n  suspend: true\n  template:\n    spec:\n      containers: [{name: c}]\n"
    )
    (tmp_path / "job.yaml").write_text(text)
    snap = read_snapshot([str(path), str(tmp_path / "job.yaml")])
    assert workload(snap, "j").created_at == T0_EPOCH


# ---------------------------------------------------------------- scale

@pytest.mark.slow
def test_large_json_snapshot_reads_exactly(tmp_path):
    nodes_n, jobs_n = 4096, 5000
    request = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    levels = [{"nodeLabel": level} for level in ("block", "rack", HOSTNAME_LABEL)]
    queues = [kueue("ResourceFlavor", "default", {"topologyName": "t"}), kueue("Topology", "t", {"levels": levels}),
              *base()[1:]]
    objects = queues + [node(f"n{i:05d}", cpu="64", memory="512Gi", gpus="8", ready="True",
                             labels={"block": f"b{i // 512}", "rack": f"r{i // 32}"}) for i in range(nodes_n)]
    for j in range(jobs_n):
        name = f"job-{j:05d}"
        if j % 2:
            objects.append(job(name, parallelism=4, requests=request,
                               template_annotations={"kueue.x-k8s.io/podset-preferred-topology": "rack"}))
            continue
        where = f"n{j % nodes_n:05d}"
        objects.append(job(name, suspend=False, parallelism=2, requests=request,
                           annotations={"stowplan.io/assignment": assignment({where: 2})}))
        objects += [pod(f"{name}-{k}", where, owner_job=name, requests=request) for k in range(2)]
    objects += [pod(f"ds-{i}", f"n{i:05d}", namespace="kube-system", requests={"cpu": "100m"})
                for i in range(nodes_n)]
    path = write(tmp_path, objects, "big.json", form="json")
    snap = read_snapshot([path])
    assert len(snap.nodes) == nodes_n and len(snap.workloads) == jobs_n and snap.problems == ()
    assert sum(w.state is WorkloadState.RUNNING for w in snap.workloads) == jobs_n // 2
    assert all(n.unmanaged == Resources.of(cpu=100, pods=1) for n in snap.nodes)   # job pods are managed


def test_kubectl_output_reads_cleanly():
    snap = read_snapshot([str(DATA / "kubectl-get.yaml")])
    assert snap.problems == ()
    assert snap.ignored_kinds == {"kueue.x-k8s.io/v1beta2/Workload": 1}
    n = snap.nodes[0]
    assert n.ready and n.allocatable.get("cpu") == 207_000 and n.allocatable.get("memory") == 1843200000 * 1024
    assert n.unmanaged == Resources.of(cpu=100, memory=50 * 2**20, pods=1)
    w = snap.workloads[0]
    assert (w.ref, w.state, w.cluster_queue) == (ObjectRef("Job", "default", "sample-job-x7k2q"),
                                                 WorkloadState.PENDING, "cluster-queue")
    assert w.pod_sets[0].count == 3 and w.pod_sets[0].min_count == 2
    assert w.pod_sets[0].request == Resources.of({"cpu": 1000, "memory": 200 * 2**20, "nvidia.com/gpu": 1, "pods": 1})
    assert snap.cluster_queues["cluster-queue"].active
    assert snap.now == w.created_at            # no snapshot-time: the newest timestamp


def test_a_moving_job_holds_its_new_place_and_its_old_pods_count_where_they_are(tmp_path):
    """Defragmentation: `apply` suspends a moved Job with stowplan.io/migrating-to; until
    it is admitted again it runs, for planning, at the new place, and its pods still
    bound at the old place are unmanaged usage there."""
    objects = base() + [
        node("n1"), node("n2"),
        job("moving", suspend=True, parallelism=2, requests={"cpu": "2"},
            annotations={"stowplan.io/migrating-to": assignment({"n2": 2}), "stowplan.io/movable": "true"}),
        pod("moving-a", "n1", owner_job="moving", requests={"cpu": "2"}),
        job("plain", suspend=True, annotations={"stowplan.io/movable": "maybe"}),
    ]
    snap = read(tmp_path, objects)
    moving = workload(snap, "moving")
    assert moving.state is WorkloadState.RUNNING and moving.movable
    assert moving.assignment == (PodSetAssignment("main", 2, {"cpu": "default"}, (HOSTNAME_LABEL,), ((("n2",), 2),)),)
    assert node_named(snap, "n1").unmanaged == Resources.of(cpu=2000, pods=1)
    assert node_named(snap, "n2").unmanaged == Resources()
    plain = workload(snap, "plain")
    assert plain.state is WorkloadState.PENDING and not plain.movable
    (problem,) = snap.problems
    assert problem.field == "metadata.annotations[stowplan.io/movable]" and "'maybe'" in problem.message
