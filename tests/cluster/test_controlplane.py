"""Smoke tests: the test control plane is a working Kubernetes with KWOK nodes
and Kueue's/JobSet's APIs, and the APIs of every other workload kind Stowplan plans.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kubernetes import client
from live_kit import wait_for

TOPOLOGY_BLOCK = "cloud.provider.com/topology-block"
TOPOLOGY_RACK = "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")




def _suffix() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture
def two_nodes(control_plane):
    """Two KWOK nodes in one block, two racks, 8 GPUs each."""
    s = _suffix()
    names = [f"gpu-{s}-0", f"gpu-{s}-1"]
    for i, name in enumerate(names):
        control_plane.make_node(
            name,
            labels={TOPOLOGY_BLOCK: f"block-{s}", TOPOLOGY_RACK: f"rack-{s}-{i}"},
            allocatable={GPU: "8", "cpu": "96", "memory": "1Ti", "pods": "110"},
        )
    yield names
    core = client.CoreV1Api(control_plane.api_client())
    for name in names:
        try:
            core.delete_node(name)
        except client.ApiException:
            pass


def test_version_is_the_built_one(control_plane, api_client):
    info = client.VersionApi(api_client).get_code()
    assert info.git_version == control_plane.version
    assert not info.git_version.startswith("v0.0.0")
    assert info.major == "1" and info.minor == control_plane.version.split(".")[1]
    assert info.git_tree_state == "clean"


def test_readyz_and_components(control_plane):
    status, body = control_plane.http_get("/readyz?verbose")
    assert status == 200, body
    control_plane.check()
    assert set(control_plane.procs) == {
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}


def test_kwok_nodes_ready_with_topology_and_gpus(control_plane, api_client, two_nodes):
    core = client.CoreV1Api(api_client)
    # Stay Ready well past the node-initialize stage (heartbeats run every 20-45 s;
    # the point here is that nothing flips them NotReady or taints them).
    time.sleep(3)
    for i, name in enumerate(two_nodes):
        node = core.read_node(name)
        labels = node.metadata.labels
        assert labels[HOSTNAME] == name
        assert labels[TOPOLOGY_RACK].endswith(f"-{i}")
        assert labels[TOPOLOGY_BLOCK].startswith("block-")
        assert node.status.allocatable[GPU] == "8"
        assert node.status.allocatable["pods"] == "110"
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True"
        assert not [t for t in (node.spec.taints or []) if t.key.startswith("node.kubernetes.io/")]


def _job(name, parallelism, node_selector, gpus="1"):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": node_selector,
                    "containers": [{
                        "name": "train",
                        "image": "registry.invalid/trainer:1",
                        "resources": {"requests": {GPU: gpus, "cpu": "1"},
                                      "limits": {GPU: gpus}},
                    }],
                }
            },
        },
    }


def test_job_pods_are_created_bound_and_running(control_plane, api_client, namespace, two_nodes):
    core = client.CoreV1Api(api_client)
    batch = client.BatchV1Api(api_client)
    target = two_nodes[0]
    batch.create_namespaced_job(namespace, _job("train", 2, {HOSTNAME: target}))

    def running_pods():
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=train").items
        if len(pods) == 2 and all(p.status.phase == "Running" for p in pods):
            return pods
        return None

    pods = wait_for("2 Running job pods", running_pods, timeout=90)
    for p in pods:
        assert p.spec.node_name == target
        assert p.status.pod_ip  # KWOK hands out pod IPs from its CIDR
    job = wait_for("job status.active == 2",
                   lambda: (j := batch.read_namespaced_job("train", namespace)).status.active == 2 and j)
    assert job.status.active == 2


def test_gated_pod_waits_then_binds_to_patched_node(control_plane, api_client, namespace, two_nodes):
    core = client.CoreV1Api(api_client)
    target = two_nodes[1]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gated"},
        "spec": {
            "schedulingGates": [{"name": "stowplan.io/plan"}],
            "containers": [{"name": "c", "image": "registry.invalid/x:1",
                            "resources": {"requests": {GPU: "2"}, "limits": {GPU: "2"}}}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    time.sleep(3)  # give the scheduler every chance to (wrongly) bind it
    p = core.read_namespaced_pod("gated", namespace)
    assert p.spec.node_name is None
    assert p.status.phase == "Pending"
    conds = {c.type: c for c in (p.status.conditions or [])}
    assert conds["PodScheduled"].reason == "SchedulingGated"

    # While gated, node affinity / nodeSelector may be added (not changed).
    core.patch_namespaced_pod("gated", namespace, {"spec": {"nodeSelector": {HOSTNAME: target}}})
    # Removing the gate: a list body makes the client send a JSON patch.
    core.patch_namespaced_pod("gated", namespace, [{"op": "remove", "path": "/spec/schedulingGates"}])

    p = wait_for("the pod to be bound and Running",
                 lambda: (q := core.read_namespaced_pod("gated", namespace)).status.phase == "Running" and q,
                 timeout=60)
    assert p.spec.node_name == target
    assert p.spec.node_selector == {HOSTNAME: target}


def test_kueue_v1beta2_objects_round_trip(control_plane, api_client, namespace):
    co = client.CustomObjectsApi(api_client)
    group, version = KUEUE
    s = _suffix()
    topo = {
        "apiVersion": f"{group}/{version}", "kind": "Topology",
        "metadata": {"name": f"topo-{s}"},
        "spec": {"levels": [{"nodeLabel": TOPOLOGY_BLOCK}, {"nodeLabel": TOPOLOGY_RACK},
                            {"nodeLabel": HOSTNAME}]},
    }
    flavor = {
        "apiVersion": f"{group}/{version}", "kind": "ResourceFlavor",
        "metadata": {"name": f"gpu-{s}"},
        "spec": {"nodeLabels": {"stowplan.io/pool": s}, "topologyName": f"topo-{s}"},
    }
    cq = {
        "apiVersion": f"{group}/{version}", "kind": "ClusterQueue",
        "metadata": {"name": f"cq-{s}"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": [GPU],
                "flavors": [{"name": f"gpu-{s}", "resources": [{"name": GPU, "nominalQuota": "16"}]}],
            }],
        },
    }
    wpc = {
        "apiVersion": f"{group}/{version}", "kind": "WorkloadPriorityClass",
        "metadata": {"name": f"high-{s}"}, "value": 1000, "description": "high",
    }
    lq = {
        "apiVersion": f"{group}/{version}", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": namespace},
        "spec": {"clusterQueue": f"cq-{s}"},
    }
    for plural, body in (("topologies", topo), ("resourceflavors", flavor),
                         ("clusterqueues", cq), ("workloadpriorityclasses", wpc)):
        co.create_cluster_custom_object(group, version, plural, body)
    co.create_namespaced_custom_object(group, version, namespace, "localqueues", lq)

    got = co.get_cluster_custom_object(group, version, "topologies", f"topo-{s}")
    assert [lv["nodeLabel"] for lv in got["spec"]["levels"]] == [TOPOLOGY_BLOCK, TOPOLOGY_RACK, HOSTNAME]
    got = co.get_cluster_custom_object(group, version, "resourceflavors", f"gpu-{s}")
    assert got["spec"]["topologyName"] == f"topo-{s}"
    got = co.get_cluster_custom_object(group, version, "clusterqueues", f"cq-{s}")
    quota = got["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota == {"name": GPU, "nominalQuota": "16"} or quota["nominalQuota"] == "16"
    # Defaults from the CRD schema are applied by the API server.
    assert got["spec"]["queueingStrategy"] == "BestEffortFIFO"
    got = co.get_cluster_custom_object(group, version, "workloadpriorityclasses", f"high-{s}")
    assert got["value"] == 1000
    got = co.get_namespaced_custom_object(group, version, namespace, "localqueues", "lq")
    assert got["spec"]["clusterQueue"] == f"cq-{s}"

    # v1beta1 is not served: without Kueue's conversion webhook it would lie.
    status, _ = control_plane.http_get(f"/apis/{group}/v1beta1")
    assert status == 404

    for plural, name in (("clusterqueues", f"cq-{s}"), ("resourceflavors", f"gpu-{s}"),
                         ("topologies", f"topo-{s}"), ("workloadpriorityclasses", f"high-{s}")):
        co.delete_cluster_custom_object(group, version, plural, name)


def test_jobset_round_trip(control_plane, api_client, namespace):
    co = client.CustomObjectsApi(api_client)
    group, version = JOBSET
    js = {
        "apiVersion": f"{group}/{version}", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": namespace,
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [{
                "name": "workers",
                "replicas": 2,
                "template": {"spec": {
                    "parallelism": 4, "completions": 4,
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "w", "image": "registry.invalid/w:1",
                                        "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}],
                    }},
                }},
            }],
        },
    }
    co.create_namespaced_custom_object(group, version, namespace, "jobsets", js)
    got = co.get_namespaced_custom_object(group, version, namespace, "jobsets", "js")
    rj = got["spec"]["replicatedJobs"][0]
    assert rj["name"] == "workers" and rj["replicas"] == 2
    assert rj["template"]["spec"]["parallelism"] == 4
    assert got["spec"]["suspend"] is True
    assert got["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    # No JobSet controller runs here: no Jobs appear.
    jobs = client.BatchV1Api(api_client).list_namespaced_job(namespace).items
    assert jobs == []


@pytest.mark.parametrize("graceful", [False, True], ids=["crash", "graceful"])
def test_apiserver_restart_keeps_state(control_plane, api_client, namespace, two_nodes, graceful):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "before"},
                                                  "data": {"k": "v"}})
    control_plane.stop_apiserver(graceful=graceful)
    assert not control_plane.apiserver_running()
    with pytest.raises(Exception):
        core.read_namespaced_config_map("before", namespace, _request_timeout=2)
    control_plane.start_apiserver()
    assert core.read_namespaced_config_map("before", namespace).data == {"k": "v"}
    # The controllers reconnect: a new Job still gets its pod.
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, _job("after", 1, {HOSTNAME: two_nodes[0]}))
    wait_for("the post-restart job pod to run",
             lambda: [p for p in core.list_namespaced_pod(namespace, label_selector="job-name=after").items
                      if p.status.phase == "Running"], timeout=120)
    assert json.loads(control_plane.http_get("/version")[1])["gitVersion"] == control_plane.version


def test_apiserver_killed_mid_apply(control_plane, api_client, namespace):
    """The shape issue 5 needs: writes in flight while the API server dies.

    Every write the server acknowledged survives the restart; writes that
    failed while it was down succeed when retried after it is back.
    """
    core = client.CoreV1Api(api_client)
    total = 40
    acked: list[str] = []
    failed: list[str] = []
    stop_at = 10
    started = threading.Event()

    def writer():
        for i in range(total):
            name = f"cm-{i:03d}"
            if i == stop_at:
                started.set()
            try:
                core.create_namespaced_config_map(
                    namespace, {"metadata": {"name": name}, "data": {"i": str(i)}},
                    _request_timeout=2)
                acked.append(name)
            except Exception:  # connection refused / reset / timeout
                failed.append(name)
            time.sleep(0.02)

    t = threading.Thread(target=writer)
    t.start()
    assert started.wait(30)
    control_plane.stop_apiserver()
    time.sleep(0.5)
    control_plane.start_apiserver()
    t.join(60)
    assert not t.is_alive()
    assert acked and failed, (acked, failed)  # some writes hit the dead server
    names = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
    assert set(acked) <= names
    for name in failed:  # retry what failed; an ambiguous failure may have landed
        try:
            core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
        except client.ApiException as e:
            assert e.status == 409
    names = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
    assert {f"cm-{i:03d}" for i in range(total)} <= names


# Every workload kind Stowplan plans beyond Job and JobSet, with the CRD version served
# here (from the module version Kueue v0.17.0's go.mod requires; see build.sh).
WORKLOAD_RESOURCES = [
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"),
    ("trainer.kubeflow.org", "v1alpha1", "trainingruntimes"),
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("kubeflow.org", "v2beta1", "mpijobs"),
    ("ray.io", "v1", "rayjobs"),
    ("ray.io", "v1", "rayclusters"),
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
]


@pytest.mark.parametrize("group,version,plural", WORKLOAD_RESOURCES, ids=[r[2] for r in WORKLOAD_RESOURCES])
def test_workload_kind_crds_are_served_from_their_modules(control_plane, group, version, plural):
    status, body = control_plane.http_get(f"/apis/{group}/{version}")
    assert status == 200, body
    assert plural in {r["name"] for r in json.loads(body)["resources"]}
    # read from the Go module cache, never from a copy in the repository
    files = control_plane.manifest["WORKLOAD_CRDS"].split(":")
    assert all("/pkg/mod/" in f for f in files), files
    versions = control_plane.manifest["WORKLOAD_CRD_VERSIONS"].split()
    assert {"github.com/kubeflow/trainer/v2@v2.2.0", "github.com/kubeflow/training-operator@v1.9.3",
            "github.com/kubeflow/mpi-operator@v0.8.0", "github.com/ray-project/kuberay/ray-operator@v1.6.0",
            "sigs.k8s.io/lws@v0.8.0"} == set(versions)
