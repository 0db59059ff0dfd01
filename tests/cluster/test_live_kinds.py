"""The Kubeflow kinds on the real control plane: PyTorchJob, MPIJob v2beta1, TrainJob.

Their CRDs come from the kinds' Go modules (tests/controlplane/build.sh); their own
controllers (training-operator, mpi-operator, the Kubeflow Trainer and the JobSet
controller it drives) are not built here: each is a separate Go program with its own
dependency set and webhooks, and none is needed to check what Stowplan does. So each
test creates one object of each kind, runs a real cycle, and checks that the API
server accepted the admission writes against the kind's CRD schema (reading the
object back), that the templates carry the planned placement, and then makes the
pods exactly as the kind's controller would from the admitted object (same labels,
same template; through a batch/v1 Job where the controller uses one, so the real
job controller creates those pods) and checks the next cycles place every pod on the
node the plan gave it. Eviction is then written and read back the same way.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from models import Eviction, ObjectRef
from planner.cluster import Kube, apply_live, connect
from planner.cluster.apply import ASSIGNMENT, GATE, Applier
from planner.cluster.kube import path_of
from live_kit import GPU, HOSTNAME, POOL, Env, wait_for

KF = ("kubeflow.org", "v1", "pytorchjobs")
MPI = ("kubeflow.org", "v2beta1", "mpijobs")
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
QUEUE = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
GROUP = "kueue.x-k8s.io/podset-group-name"
RACK = "cloud.provider.com/topology-rack"
JOB_NAME = "training.kubeflow.org/job-name"


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=4, gpus=8, per_rack=2)
    yield made
    made.cleanup()


def container(name: str, gpus: int = 0, cpu: str = "1") -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu}}
    if gpus:
        resources["requests"][GPU] = str(gpus)
        resources["limits"] = {GPU: str(gpus)}
    return {"name": name, "image": "registry.invalid/train:1", "resources": resources}


def pod_template(name: str, gpus: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [container(name, gpus)]}}


def create_kinds(env: Env, runtime: str) -> None:
    ns = env.namespace
    env.co.create_namespaced_custom_object(*KF[:2], ns, KF[2], {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": ns, "labels": {QUEUE: env.lq}},
        "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "Never",
                       "template": pod_template("pytorch", 4, {REQUIRED: RACK, GROUP: "bert"})},
            "Worker": {"replicas": 1, "restartPolicy": "Never",
                       "template": pod_template("pytorch", 4, {REQUIRED: RACK, GROUP: "bert"})}}}})
    env.co.create_namespaced_custom_object(*MPI[:2], ns, MPI[2], {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "mpi", "namespace": ns, "labels": {QUEUE: env.lq}},
        "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": pod_template("launcher")},
            "Worker": {"replicas": 2, "template": pod_template("worker", 2)}}}})
    env.co.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": runtime},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
            {"name": "node", "replicas": 1, "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": pod_template("node")}}}]}}}})
    env.co.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": ns, "labels": {QUEUE: env.lq}},
        "spec": {"suspend": True,
                 "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": runtime},
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1", GPU: "4"},
                                                                 "limits": {GPU: "4"}}}}})


def planned_nodes(obj: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Pod set -> node -> pods, from the object's stowplan.io/assignment annotation."""
    entries = json.loads(obj["metadata"]["annotations"][ASSIGNMENT])
    return {e["name"]: {d["values"][-1]: d["count"] for d in e["topologyAssignment"]["domains"]} for e in entries}


def assert_admitted_template(spec: dict[str, Any], env: Env, nodes: dict[str, int]) -> None:
    """An admitted pod template: the flavor's node label, the pin to the planned nodes, the gate."""
    assert spec["nodeSelector"][POOL] == env.s
    assert {"name": GATE} in spec["schedulingGates"]
    pins = [e for term in spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"] for e in term["matchExpressions"] if e["key"] == HOSTNAME]
    assert pins and sorted(pins[0]["values"]) == sorted(nodes)


def owner(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": obj["metadata"]["uid"], "controller": True}]


def make_pod(env: Env, name: str, labels: dict[str, str], template: dict[str, Any], owners: list[Any]) -> None:
    meta = {"name": name, "namespace": env.namespace, "ownerReferences": owners,
            "labels": {**(template.get("metadata") or {}).get("labels", {}), **labels},
            "annotations": (template.get("metadata") or {}).get("annotations") or {}}
    env.core.create_namespaced_pod(env.namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                                   "spec": copy.deepcopy(template["spec"])})


def make_job(env: Env, name: str, labels: dict[str, str], template: dict[str, Any], owners: list[Any],
             pods: int) -> None:
    template = copy.deepcopy(template)
    template.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    env.batch.create_namespaced_job(env.namespace, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": env.namespace, "labels": labels, "ownerReferences": owners},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template}})


def bound(env: Env, selector: str, role_label: str) -> dict[str, dict[str, int]]:
    """Role -> node -> running pods, for the pods matching `selector`."""
    out: dict[str, dict[str, int]] = {}
    for pod in env.core.list_namespaced_pod(env.namespace, label_selector=selector).items:
        if pod.spec.node_name and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
            role = pod.metadata.labels.get(role_label, "")
            out.setdefault(role, {})[pod.spec.node_name] = out.setdefault(role, {}).get(pod.spec.node_name, 0) + 1
    return out


def test_pytorchjob_mpijob_and_trainjob_are_admitted_placed_and_evicted(kube, env, control_plane):
    runtime = f"torch-{env.s}"
    create_kinds(env, runtime)
    ns = env.namespace
    plan, report = apply_live(kube, lease_namespace=ns, identity="test-planner", release_wait=0)
    refs = {ObjectRef("PyTorchJob", ns, "bert"), ObjectRef("MPIJob", ns, "mpi"), ObjectRef("TrainJob", ns, "tj")}
    assert refs <= set(report.admitted), report.summary()
    assert report.conflicts == []

    # read back: the API server took each write against the kind's CRD schema
    bert = env.co.get_namespaced_custom_object(*KF[:2], ns, KF[2], "bert")
    mpi = env.co.get_namespaced_custom_object(*MPI[:2], ns, MPI[2], "mpi")
    tj = env.co.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", "tj")
    assert bert["spec"]["runPolicy"]["suspend"] is False and mpi["spec"]["runPolicy"]["suspend"] is False
    assert tj["spec"]["suspend"] is False
    bert_nodes, mpi_nodes, tj_nodes = planned_nodes(bert), planned_nodes(mpi), planned_nodes(tj)
    assert set(bert_nodes) == {"master", "worker"} and set(mpi_nodes) == {"launcher", "worker"}
    assert set(tj_nodes) == {"node"} and sum(tj_nodes["node"].values()) == 2
    for replica, name in (("Master", "master"), ("Worker", "worker")):
        assert_admitted_template(bert["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"], env,
                                 bert_nodes[name])
    for replica, name in (("Launcher", "launcher"), ("Worker", "worker")):
        assert_admitted_template(mpi["spec"]["mpiReplicaSpecs"][replica]["template"]["spec"], env, mpi_nodes[name])
    (patch,) = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == "stowplan.io/planner"]
    (rj,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rj["name"] == "node"
    assert_admitted_template(rj["template"]["spec"]["template"]["spec"], env, tj_nodes["node"])
    # the PyTorchJob's two pods share a rack (required rack, one pod-set group)
    racks = {n: f"r-{env.s}-{i // 2}" for i, n in enumerate(env.nodes)}
    assert len({racks[n] for pods in bert_nodes.values() for n in pods}) == 1

    # the pods each controller would make from the admitted objects
    for replica, name in (("Master", "master"), ("Worker", "worker")):
        make_pod(env, f"bert-{name}-0", {JOB_NAME: "bert", "training.kubeflow.org/replica-type": name,
                                         "training.kubeflow.org/operator-name": "pytorchjob-controller",
                                         "training.kubeflow.org/replica-index": "0"},
                 bert["spec"]["pytorchReplicaSpecs"][replica]["template"], owner(bert))
    mpi_labels = {JOB_NAME: "mpi", "training.kubeflow.org/operator-name": "mpi-operator"}
    make_job(env, "mpi-launcher", {**mpi_labels, "training.kubeflow.org/job-role": "launcher"},
             mpi["spec"]["mpiReplicaSpecs"]["Launcher"]["template"], owner(mpi), 1)
    for i in range(2):
        make_pod(env, f"mpi-worker-{i}", {**mpi_labels, "training.kubeflow.org/job-role": "worker"},
                 mpi["spec"]["mpiReplicaSpecs"]["Worker"]["template"], owner(mpi))
    # the Trainer's JobSet's Job: the runtime's template, the trainer's resources, the patch merged in
    runtime_obj = env.co.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
    template = copy.deepcopy(runtime_obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"])
    template["spec"]["containers"][0]["resources"] = tj["spec"]["trainer"]["resourcesPerNode"]
    template["spec"].update(rj["template"]["spec"]["template"]["spec"])
    make_job(env, "tj-node-0", {"jobset.sigs.k8s.io/jobset-name": "tj",
                                "jobset.sigs.k8s.io/replicatedjob-name": "node"}, template, owner(tj), 2)

    def placed() -> bool:
        apply_live(kube, lease_namespace=ns, identity="test-planner", release_wait=2)
        return (bound(env, "training.kubeflow.org/replica-type", "training.kubeflow.org/replica-type") == bert_nodes
                and bound(env, "training.kubeflow.org/job-role", "training.kubeflow.org/job-role") == mpi_nodes
                and bound(env, "jobset.sigs.k8s.io/jobset-name=tj", "jobset.sigs.k8s.io/replicatedjob-name")
                == tj_nodes)

    wait_for("every pod on the node its plan gave it", placed, timeout=240, interval=1)

    # eviction, written through the same adapters and read back
    applier = Applier(kube, flavors={}, planned_versions={}, identity="test-planner")
    for ref in sorted(refs):
        applier.evict(Eviction(ref, "Preempted", (), 1.0))
    assert sorted(applier.report.evicted) == sorted(refs) and applier.report.conflicts == []
    bert = env.co.get_namespaced_custom_object(*KF[:2], ns, KF[2], "bert")
    mpi = env.co.get_namespaced_custom_object(*MPI[:2], ns, MPI[2], "mpi")
    tj = env.co.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", "tj")
    assert bert["spec"]["runPolicy"]["suspend"] is True and mpi["spec"]["runPolicy"]["suspend"] is True
    assert tj["spec"]["suspend"] is True and not tj["spec"].get("runtimePatches")
    for obj in (bert, mpi, tj):
        assert ASSIGNMENT not in obj["metadata"]["annotations"]


def test_a_runtime_patch_of_another_manager_is_kept_and_merged_into_the_base(kube, env):
    """A TrainJob whose runtime has tolerations and which carries another manager's
    patch: the admission keeps that patch as it was and writes the runtime's tolerations
    into its own (a patch's list replaces the runtime's: without them the pods would
    lose them)."""
    ns = env.namespace
    runtime = f"tolerant-{env.s}"
    toleration = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    env.co.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": runtime},
        "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
            "spec": {"restartPolicy": "Never", "tolerations": [toleration],
                     "containers": [container("node", 1)]}}}}}]}}}})
    other = {"manager": "example.com/labeler", "trainingRuntimeSpec": {"template": {"metadata": {
        "labels": {"team": "a"}}}}}
    env.co.create_namespaced_custom_object(*TRAINER, ns, "trainjobs", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tol", "namespace": ns, "labels": {QUEUE: env.lq}},
        "spec": {"suspend": True, "runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime",
                                                 "apiGroup": "trainer.kubeflow.org"},
                 "runtimePatches": [other]}})
    _, report = apply_live(kube, lease_namespace=ns, identity="test-planner", release_wait=0)
    assert ObjectRef("TrainJob", ns, "tol") in report.admitted and report.conflicts == []
    tj = env.co.get_namespaced_custom_object(*TRAINER, ns, "trainjobs", "tol")
    kept = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == "example.com/labeler"]
    assert len(kept) == 1 and kept[0]["trainingRuntimeSpec"] == other["trainingRuntimeSpec"]
    (own,) = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == "stowplan.io/planner"]
    spec = own["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert toleration in spec["tolerations"]


def test_a_planned_write_is_checked_by_a_server_side_dry_run_too(kube, env):
    """`apply --dry-run` sends every admission write with dryRun=All: the API server
    validates it against the CRD and stores nothing."""
    create_kinds(env, f"dry-{env.s}")
    dry = Kube(connect(str(env.cp.kubeconfig)), dry_run=True)
    _, report = apply_live(dry, lease_namespace=env.namespace, identity="test-planner", release_wait=0)
    assert len(report.admitted) == 3 and report.conflicts == []
    bert = env.co.get_namespaced_custom_object(*KF[:2], env.namespace, KF[2], "bert")
    assert bert["spec"]["runPolicy"]["suspend"] is True and ASSIGNMENT not in (bert["metadata"].get("annotations") or {})
    time.sleep(0)   # nothing to wait for: a dry run changes nothing


def test_the_live_read_and_its_snapshot_file_give_the_kinds_pod_sets(kube, env):
    """What the cluster reader lists for the Kubeflow kinds (and the TrainJob's runtime),
    and the pruned List `stowplan snapshot` writes, plan the same workloads."""
    from planner.cluster.reader import pruned, read_cluster
    from planner.snapshot import build_snapshot

    create_kinds(env, f"read-{env.s}")
    live = read_cluster(kube)
    ns = env.namespace
    mine = {w.ref: w for w in live.snapshot.workloads if w.ref.namespace == ns}
    counts = {(ref.kind, p.name): (p.count, p.request.get(GPU)) for ref, w in mine.items() for p in w.pod_sets}
    assert counts == {("PyTorchJob", "master"): (1, 4), ("PyTorchJob", "worker"): (1, 4),
                      ("MPIJob", "launcher"): (1, 0), ("MPIJob", "worker"): (2, 2),
                      ("TrainJob", "node"): (2, 4)}
    assert all(w.blocked_reason is None for w in mine.values()), [w.blocked_reason for w in mine.values()]
    again = build_snapshot([pruned(live.document)], source="snapshot file")
    assert {w.ref: w.pod_sets for w in again.workloads if w.ref.namespace == ns} == \
        {ref: w.pod_sets for ref, w in mine.items()}
