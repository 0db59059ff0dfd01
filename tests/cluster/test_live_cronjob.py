"""cronjob/ on the real control plane: the manifests apply cleanly, and one cycle run
with only the CronJob ServiceAccount's rights (a TokenRequest token for it, in a
kubeconfig of its own) admits, while the same token cannot read Secrets, and (the
ValidatingAdmissionPolicy in cronjob/admission.yaml) cannot change an image, a command
or anything else a cycle does not change, in a pod, a Job or a JobSet."""

from __future__ import annotations

from pathlib import Path

import itertools
import time

import pytest
import yaml
from click.testing import CliRunner

from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.kube import ApiStatus, path_of
from live_kit import Env

CRONJOB_DIR = Path(__file__).resolve().parents[2] / "cronjob"
PLURALS = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "ConfigMap": "configmaps", "CronJob": "cronjobs",
           "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
           "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
           "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings"}
NAMESPACE = "stowplan-system"
POLICY = "stowplan-planner-writes"
GATE = "stowplan.io/topology"


def manifests():
    kustomization = yaml.safe_load((CRONJOB_DIR / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((CRONJOB_DIR / name).read_text()):
            if doc:
                yield doc


def create(kube, doc, dry_run=False):
    meta = doc["metadata"]
    path = path_of(doc["apiVersion"], PLURALS[doc["kind"]], meta.get("namespace", ""))
    query = [("dryRun", "All")] if dry_run else []
    try:
        kube.request("POST", path, body=doc, query=query)
    except ApiStatus as err:
        if err.status != 409:
            raise


@pytest.fixture(scope="module")
def installed(control_plane):
    kube = Kube(connect(str(control_plane.kubeconfig)))
    docs = list(manifests())
    assert sorted({d["kind"] for d in docs}) == sorted(PLURALS)
    # the manifests expect Kueue installed: its namespace holds the Configuration the planner reads
    create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
    for doc in docs:
        if doc["kind"] == "CronJob":
            create(kube, doc, dry_run=True)            # exactly as written: the server validates it
            doc = {**doc, "spec": {**doc["spec"], "suspend": True}}   # no fake planner pods in the tests
        create(kube, doc)
    return kube


def sa_kubeconfig(control_plane, kube, tmp_path):
    answer = kube.request("POST", path_of("v1", "serviceaccounts", NAMESPACE, "stowplan") + "/token",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 600}})
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": answer["status"]["token"]}
    path = tmp_path / "sa.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_manifests_apply_cleanly(installed):
    cron = installed.get(path_of("batch/v1", "cronjobs", NAMESPACE, "stowplan"))
    spec = cron["spec"]
    assert spec["schedule"] == "* * * * *" and spec["concurrencyPolicy"] == "Forbid"
    assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] < 60
    env = {e["name"] for e in spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert all(name.startswith("STOWPLAN_APPLY_") for name in env)
    role = installed.get(path_of("rbac.authorization.k8s.io/v1", "clusterroles", "", "stowplan-planner"))
    assert not any("secrets" in rule.get("resources", ()) or "*" in rule.get("resources", ())
                   or "*" in rule.get("verbs", ()) for rule in role["rules"])
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "@sha256:" in container["image"]                                # pinned by digest, not a tag
    assert container["resources"]["limits"]["cpu"] and container["resources"]["limits"]["memory"]
    (tmp,) = [v for v in pod["volumes"] if v["name"] == "tmp"]
    assert tmp["emptyDir"]["sizeLimit"]
    labels = installed.get(path_of("v1", "namespaces", "", NAMESPACE))["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert installed.get(path_of("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "", POLICY))


def test_the_namespace_enforces_restricted_pod_security_and_the_cronjob_meets_it(installed):
    cron = installed.get(path_of("batch/v1", "cronjobs", NAMESPACE, "stowplan"))
    template = cron["spec"]["jobTemplate"]["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stowplan-psa-check", "namespace": NAMESPACE},
           "spec": template["spec"]}
    installed.request("POST", path_of("v1", "pods", NAMESPACE), body=pod, query=[("dryRun", "All")])
    privileged = {**pod, "spec": {"containers": [{"name": "x", "image": "busybox",
                                                  "securityContext": {"privileged": True}}]}}
    with pytest.raises(ApiStatus) as denied:
        installed.request("POST", path_of("v1", "pods", NAMESPACE), body=privileged, query=[("dryRun", "All")])
    assert denied.value.status == 403 and "restricted" in str(denied.value)


def test_cycle_as_the_service_account(installed, control_plane, api_client, namespace, tmp_path):
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        env.job("a", pods=2, gpus=4)
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        cm = installed.get(path_of("v1", "configmaps", NAMESPACE, "stowplan-config"))
        mount = tmp_path / "etc"
        mount.mkdir()
        for key, value in cm["data"].items():
            (mount / key).write_text(value)
        args = ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--policy",
                str(mount / "policy.yaml"), "--config", str(mount / "kueue.yaml"), "--release-wait", "10", "-q"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "1 admitted" in result.output and "0 conflicts" in result.output
        # the job controller may create the pods after the release window (late on a loaded
        # machine): the next cycles release them, as the CronJob's would
        deadline = time.monotonic() + 240
        while len([p for p in env.pods("a") if p.spec.node_name]) < 2 and time.monotonic() < deadline:
            time.sleep(1)
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, result.output
        env.wait_bound("a", 2)
        # the same rights cannot read Secrets, here or anywhere
        sa = Kube(connect(str(kubeconfig)))
        for path in (path_of("v1", "secrets", NAMESPACE), path_of("v1", "secrets")):
            with pytest.raises(ApiStatus) as denied:
                sa.get(path)
            assert denied.value.status == 403
        # nor write a Lease outside its namespace
        with pytest.raises(ApiStatus) as denied:
            sa.get(path_of("coordination.k8s.io/v1", "leases", namespace, "stowplan-planner"))
        assert denied.value.status == 403
    finally:
        env.cleanup()


# ---------------------------------------------------------------- what the token may change (issue 23)

ATTEMPT = itertools.count()


def denied_by_policy(write, timeout: float = 60.0) -> ApiStatus:
    """The write fails with the policy's 403. A policy (or binding) just created takes a
    moment to be enforced, so a write that got through is tried again; each attempt
    changes something new (`write(n)`), as a repeated change would be no change at all."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            write(next(ATTEMPT))
        except ApiStatus as err:
            if err.status == 403 and f"ValidatingAdmissionPolicy '{POLICY}'" in str(err):
                return err
            if time.monotonic() > deadline:
                raise
        else:
            if time.monotonic() > deadline:
                pytest.fail("the write was allowed")
        time.sleep(0.5)


def allowed(write, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            write(next(ATTEMPT))
            return
        except ApiStatus:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_the_planner_token_changes_only_what_a_cycle_changes(installed, control_plane, namespace, tmp_path):
    admin = installed
    sa = Kube(connect(str(sa_kubeconfig(control_plane, admin, tmp_path))))
    # a gated pod, as Stowplan's admitted pods are
    pod_path = path_of("v1", "pods", namespace, "p")
    admin.request("POST", path_of("v1", "pods", namespace), body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace, "labels": {"app": "a"}},
        "spec": {"schedulingGates": [{"name": GATE}], "containers": [{"name": "c", "image": "registry.invalid/a:1",
                                                                       "command": ["run"]}]}})

    def patch_pod(ops, who=sa):
        return lambda n: who.request("PATCH", pod_path, body=ops(n), content_type="application/json-patch+json")

    denied_by_policy(patch_pod(lambda n: [{"op": "replace", "path": "/spec/containers/0/image",
                                           "value": f"registry.invalid/evil:{n}"}]))
    with pytest.raises(ApiStatus) as err:           # a pod's command: the API server refuses it itself
        patch_pod(lambda n: [{"op": "replace", "path": "/spec/containers/0/command", "value": ["sh"]}])(0)
    assert err.value.status in (403, 422)
    denied_by_policy(patch_pod(lambda n: [{"op": "replace", "path": "/metadata/labels/app", "value": f"b{n}"}]))
    denied_by_policy(patch_pod(lambda n: [{"op": "add", "path": "/spec/nodeSelector", "value": {"zone": f"z{n}"}}]))
    # what a cycle does to a pod: its node pinned, the gate removed
    allowed(patch_pod(lambda n: [{"op": "add", "path": "/spec/nodeSelector",
                                  "value": {"kubernetes.io/hostname": "n1"}},
                                 {"op": "remove", "path": "/spec/schedulingGates/0"}]))

    # a suspended Job: its command (the API server refuses it too) and its other fields
    job_path = path_of("batch/v1", "jobs", namespace, "j")
    admin.request("POST", path_of("batch/v1", "jobs", namespace), body={
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": namespace},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "registry.invalid/a:1", "command": ["run"]}]}}}})

    def put_job(change):
        def write(n):
            for _ in range(20):     # the Job controller writes it too: a 409 is read again and retried
                obj = admin.get(job_path)
                change(obj, n)
                try:
                    sa.request("PUT", job_path, body=obj)
                    return
                except ApiStatus as err:
                    if err.status != 409:
                        raise
                time.sleep(0.2)
            raise AssertionError(f"PUT {job_path}: still 409 after 20 tries")
        return write

    def command(obj, n):
        obj["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", f"steal {n}"]

    with pytest.raises(ApiStatus) as err:
        put_job(command)(0)
    assert err.value.status in (403, 422)
    denied_by_policy(put_job(lambda obj, n: obj["spec"].update(parallelism=50 + n)))
    denied_by_policy(put_job(lambda obj, n: obj["metadata"].setdefault("labels", {}).update(x=f"y{n}")))

    # a JobSet: a CRD, so nothing but the policy stands between the token and its pod template
    js_path = path_of("jobset.x-k8s.io/v1alpha2", "jobsets", namespace, "js")
    admin.request("POST", path_of("jobset.x-k8s.io/v1alpha2", "jobsets", namespace), body={
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": namespace},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.invalid/a:1",
                                                                 "command": ["run"]}]}}}}}]}})

    def put_jobset(change, who=sa):
        def write(n):
            obj = admin.get(js_path)
            change(obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"], n)
            who.request("PUT", js_path, body=obj)
        return write

    denied_by_policy(put_jobset(lambda pod, n: pod["containers"][0].update(image=f"registry.invalid/evil:{n}")))
    denied_by_policy(put_jobset(lambda pod, n: pod["containers"][0].update(command=["sh", "-c", f"steal {n}"])))
    denied_by_policy(put_jobset(lambda pod, n: pod.update(hostNetwork=not pod.get("hostNetwork", False))))
    allowed(put_jobset(lambda pod, n: pod.update(nodeSelector={"pool": f"a{n}"}, schedulingGates=[{"name": GATE}])))
    # the policy is about this ServiceAccount only
    allowed(put_jobset(lambda pod, n: pod["containers"][0].update(image=f"registry.invalid/a:{n}"), who=admin))


def test_without_the_policy_the_same_token_could_change_an_image(installed, control_plane, namespace, tmp_path):
    """The guard seen failing: RBAC alone lets the planner's token patch any pod's image."""
    admin = installed
    sa = Kube(connect(str(sa_kubeconfig(control_plane, admin, tmp_path))))
    pod_path = path_of("v1", "pods", namespace, "p")
    admin.request("POST", path_of("v1", "pods", namespace), body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
        "spec": {"schedulingGates": [{"name": GATE}], "containers": [{"name": "c", "image": "registry.invalid/a:1"}]}})
    binding_path = path_of("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "", POLICY)
    binding = admin.get(binding_path)
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        binding["metadata"].pop(key, None)
    binding.pop("status", None)

    def image(n):
        ops = [{"op": "replace", "path": "/spec/containers/0/image", "value": f"registry.invalid/evil:{n}"}]
        sa.request("PATCH", pod_path, body=ops, content_type="application/json-patch+json")

    denied_by_policy(image)
    admin.request("DELETE", binding_path)
    try:
        allowed(image)
    finally:
        admin.request("POST", path_of("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings"),
                      body=binding)
    denied_by_policy(image)


def test_a_jobset_cycle_as_the_service_account(installed, control_plane, api_client, namespace, tmp_path):
    env = Env(control_plane, api_client, namespace, nodes=2)
    try:
        env.co.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": env.lq}},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": 2, "completions": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "w", "image": "registry.invalid/w:1",
                     "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "1"},
                                   "limits": {"nvidia.com/gpu": "2"}}}]}}}}}]}})
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        policy = tmp_path / "policy.yaml"
        policy.write_text(installed.get(path_of("v1", "configmaps", NAMESPACE, "stowplan-config"))["data"]["policy.yaml"])
        result = CliRunner().invoke(cli, ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE,
                                          "--policy", str(policy), "--release-wait", "0", "-q"])
        assert result.exit_code == 0, result.output
        assert "1 admitted" in result.output and "0 conflicts" in result.output
        got = env.co.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", "js")
        assert got["spec"]["suspend"] is False and "stowplan.io/assignment" in got["metadata"]["annotations"]
    finally:
        env.cleanup()


# ---------------------------------------------------------------- waitForPodsReady's writes (issue 26)

def test_pods_ready_timeout_and_readiness_record_as_the_service_account(installed, control_plane, api_client,
                                                                       namespace, tmp_path):
    """The eviction's requeue record and the readiness record are writes the CronJob's
    rights (RBAC unchanged) and the admission policy allow: a Job whose node is cordoned
    after planning times out and is requeued; a Job whose pods run gets pods-ready-at."""
    from datetime import datetime

    from planner.cluster import apply_live

    env = Env(control_plane, api_client, namespace, nodes=1)
    sa = Kube(connect(str(sa_kubeconfig(control_plane, installed, tmp_path))))
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: stowplan.io/v1alpha1\nkind: PlannerPolicy\nmetadata: {name: default}\n"
                      "spec:\n  kueueConfiguration:\n    waitForPodsReady: {timeout: 8s, "
                      "requeuingStrategy: {backoffBaseSeconds: 600}}\n")

    def cycle(**kw):
        return apply_live(sa, policy_file=str(policy), lease_namespace=NAMESPACE, **kw)

    def cordon(flag):
        for name in env.nodes:
            env.core.patch_node(name, {"spec": {"unschedulable": flag}})

    def notes(name):
        return env.batch.read_namespaced_job(name, env.namespace).metadata.annotations or {}

    try:
        env.job("stuck", pods=1, gpus=1)
        plan, report = cycle(release_wait=2, before_apply=lambda live, plan: cordon(True))
        assert [r.name for r in report.admitted if r.namespace == namespace] == ["stuck"] and report.conflicts == []
        admitted = datetime.fromisoformat(notes("stuck")["stowplan.io/admitted-at"].replace("Z", "+00:00"))
        time.sleep(max(0.0, admitted.timestamp() + 9 - time.time()))
        plan, report = cycle(release_wait=0)
        assert [(e.workload.name, e.reason) for e in plan.evictions if e.workload.namespace == namespace] == [
            ("stuck", "PodsReadyTimeout")]
        assert [r.name for r in report.evicted if r.namespace == namespace] == ["stuck"] and report.conflicts == []
        assert notes("stuck")["stowplan.io/requeue-count"] == "1" and "stowplan.io/requeue-at" in notes("stuck")
        cordon(False)
        env.job("fine", pods=1, gpus=1)
        deadline = time.monotonic() + 120
        while "stowplan.io/pods-ready-at" not in notes("fine"):
            assert time.monotonic() < deadline, "pods-ready-at never recorded on fine"
            plan, report = cycle(release_wait=2)
            assert report.conflicts == [] and not [e for e in plan.evictions if e.workload.namespace == namespace]
            time.sleep(0.5)
        assert "stowplan.io/pods-ready-at" not in notes("stuck")     # in its backoff: suspended, no record
    finally:
        env.cleanup()


# ---------------------------------------------------------------- the Kubeflow kinds (issue 26)

def _kubeflow_objects(namespace: str, lq: str, runtime: str) -> list[tuple[str, str, str, dict]]:
    """(group/version, plural, namespace, body): one PyTorchJob, MPIJob and TrainJob (+ its runtime)."""
    def template(gpus: int) -> dict:
        requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        return {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "registry.invalid/a:1", "command": ["run"], "resources": {"requests": requests}}]}}

    labels = {"kueue.x-k8s.io/queue-name": lq}
    return [
        ("kubeflow.org/v1", "pytorchjobs", namespace, {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": namespace, "labels": labels},
            "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template(2)}, "Worker": {"replicas": 1, "template": template(2)}}}}),
        ("kubeflow.org/v2beta1", "mpijobs", namespace, {
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "mpi", "namespace": namespace, "labels": labels},
            "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(0)}, "Worker": {"replicas": 1, "template": template(2)}}}}),
        ("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", "", {
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": runtime},
            "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
                "template": template(2)}}}]}}}}),
        ("trainer.kubeflow.org/v1alpha1", "trainjobs", namespace, {
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": namespace, "labels": labels},
            "spec": {"suspend": True, "runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime",
                                                     "apiGroup": "trainer.kubeflow.org"}}}),
    ]


def test_a_kubeflow_cycle_as_the_service_account(installed, control_plane, api_client, namespace, tmp_path):
    """PyTorchJob, MPIJob and TrainJob admitted by a cycle with only the CronJob's rights
    (RBAC: get, list, update on each kind; get, list on the Trainer's runtimes), every
    write passing the admission policy; the same token may not create or delete them."""
    env = Env(control_plane, api_client, namespace, nodes=2)
    try:
        for api_version, plural, ns, body in _kubeflow_objects(namespace, env.lq, f"rt-{env.s}"):
            installed.request("POST", path_of(api_version, plural, ns), body=body)
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        policy = tmp_path / "policy.yaml"
        policy.write_text(installed.get(path_of("v1", "configmaps", NAMESPACE, "stowplan-config"))["data"]["policy.yaml"])
        result = CliRunner().invoke(cli, ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE,
                                          "--policy", str(policy), "--release-wait", "0", "-q"])
        assert result.exit_code == 0, result.output
        assert "3 admitted" in result.output and "0 conflicts" in result.output
        pt = installed.get(path_of("kubeflow.org/v1", "pytorchjobs", namespace, "pt"))
        tj = installed.get(path_of("trainer.kubeflow.org/v1alpha1", "trainjobs", namespace, "tj"))
        assert pt["spec"]["runPolicy"]["suspend"] is False and tj["spec"]["suspend"] is False
        assert [p["manager"] for p in tj["spec"]["runtimePatches"]] == ["stowplan.io/planner"]
        sa = Kube(connect(str(kubeconfig)))
        for path in (path_of("kubeflow.org/v1", "pytorchjobs", namespace, "pt"),
                     path_of("trainer.kubeflow.org/v1alpha1", "trainjobs", namespace, "tj")):
            with pytest.raises(ApiStatus) as denied:
                sa.request("DELETE", path)
            assert denied.value.status == 403
        with pytest.raises(ApiStatus) as denied:
            sa.request("POST", path_of("kubeflow.org/v2beta1", "mpijobs", namespace), body={
                **_kubeflow_objects(namespace, env.lq, "x")[1][3], "metadata": {"name": "new", "namespace": namespace}})
        assert denied.value.status == 403
        with pytest.raises(ApiStatus) as denied:      # the runtimes are read only
            sa.request("DELETE", path_of("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", "", f"rt-{env.s}"))
        assert denied.value.status == 403
    finally:
        env.cleanup()


def test_the_planner_token_changes_only_scheduling_fields_of_the_kubeflow_kinds(installed, control_plane, namespace,
                                                                             tmp_path):
    admin = installed
    sa = Kube(connect(str(sa_kubeconfig(control_plane, admin, tmp_path))))
    objects = _kubeflow_objects(namespace, "lq", f"rt-policy-{next(ATTEMPT)}")
    for api_version, plural, ns, body in objects:
        admin.request("POST", path_of(api_version, plural, ns), body=body)

    def put(api_version, plural, name, change, who=sa):
        path = path_of(api_version, plural, namespace, name)

        def write(n):
            obj = admin.get(path)
            change(obj, n)
            who.request("PUT", path, body=obj)
        return write

    pt = ("kubeflow.org/v1", "pytorchjobs", "pt")
    mpi = ("kubeflow.org/v2beta1", "mpijobs", "mpi")
    tj = ("trainer.kubeflow.org/v1alpha1", "trainjobs", "tj")

    def pt_pod(obj):
        return obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]

    denied_by_policy(put(*pt, lambda o, n: pt_pod(o)["containers"][0].update(image=f"registry.invalid/evil:{n}")))
    denied_by_policy(put(*pt, lambda o, n: o["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas=2 + n)))
    denied_by_policy(put(*pt, lambda o, n: o["spec"]["runPolicy"].update(backoffLimit=3 + n)))
    allowed(put(*pt, lambda o, n: (pt_pod(o).update(nodeSelector={"pool": f"a{n}"}, schedulingGates=[{"name": GATE}]),
                                   o["spec"]["runPolicy"].update(suspend=False))))
    denied_by_policy(put(*mpi, lambda o, n: o["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"][0].update(command=["sh", "-c", f"steal {n}"])))
    allowed(put(*mpi, lambda o, n: o["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].update(
        tolerations=[{"key": f"k{n}", "operator": "Exists"}])))

    def patch_entry(manager, pod_spec):
        return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}}}}

    def add_patch(entry):
        return lambda o, n: o["spec"].update(runtimePatches=[entry(n)])

    # another manager's patch, or a patch of ours that reaches beyond the scheduling fields
    denied_by_policy(put(*tj, add_patch(lambda n: patch_entry("example.com/other", {"nodeSelector": {"a": f"{n}"}}))))
    denied_by_policy(put(*tj, add_patch(lambda n: patch_entry("stowplan.io/planner", {
        "serviceAccountName": f"admin-{n}"}))))
    allowed(put(*tj, add_patch(lambda n: patch_entry("stowplan.io/planner", {
        "nodeSelector": {"pool": f"a{n}"}, "schedulingGates": [{"name": GATE}]}))))
    allowed(put(*tj, lambda o, n: o["spec"].update(suspend=n % 2 == 0)))


def test_a_raycluster_and_a_queued_pod_cycle_as_the_service_account(installed, control_plane, api_client, namespace,
                                                                     tmp_path):
    """The rights rbac.yaml grows for Ray (update RayClusters) and Kueue's pod integration (the
    admission policy lets the token pin a queued pod, remove Kueue's gate, annotate it) are enough;
    and the policy refuses the same token a RayCluster's image or hostNetwork."""
    env = Env(control_plane, api_client, namespace, nodes=2)
    try:
        queue = {"kueue.x-k8s.io/queue-name": env.lq}
        pod_spec = {"containers": [{"name": "w", "image": "registry.invalid/w:1",
                                    "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "1"},
                                                  "limits": {"nvidia.com/gpu": "2"}}}]}
        env.co.create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", {
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": namespace,
                                                                        "labels": queue},
            "spec": {"suspend": True, "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec}},
                     "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 1,
                                           "rayStartParams": {}, "template": {"spec": pod_spec}}]}})
        env.core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": namespace, "labels": queue},
            "spec": {**pod_spec, "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}})
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        policy = tmp_path / "policy.yaml"
        policy.write_text(installed.get(path_of("v1", "configmaps", NAMESPACE, "stowplan-config"))["data"]["policy.yaml"])
        result = CliRunner().invoke(cli, ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE,
                                          "--policy", str(policy), "--release-wait", "0", "-q"])
        assert result.exit_code == 0, result.output
        assert "2 admitted" in result.output and "0 conflicts" in result.output
        got = env.co.get_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", "rc")
        assert got["spec"]["suspend"] is False and "stowplan.io/assignment" in got["metadata"]["annotations"]
        solo = env.core.read_namespaced_pod("solo", namespace)
        assert not solo.spec.scheduling_gates and "kubernetes.io/hostname" in solo.spec.node_selector
        # the policy holds the same token to a RayCluster's scheduling fields
        sa = Kube(connect(str(kubeconfig)))
        rc_path = path_of("ray.io/v1", "rayclusters", namespace, "rc")

        def put_rc(change):
            def write(n):
                obj = installed.get(rc_path)
                change(obj["spec"]["workerGroupSpecs"][0]["template"]["spec"], n)
                sa.request("PUT", rc_path, body=obj)
            return write

        denied_by_policy(put_rc(lambda pod, n: pod["containers"][0].update(image=f"registry.invalid/evil:{n}")))
        denied_by_policy(put_rc(lambda pod, n: pod.update(hostNetwork=not pod.get("hostNetwork", False))))
        allowed(put_rc(lambda pod, n: pod.update(nodeSelector={"pool": f"a{n}"})))
    finally:
        env.cleanup()


def test_the_planner_token_resizes_only_elastic_workloads(installed, control_plane, namespace, tmp_path):
    """A resize writes an elastic Job's spec.parallelism and an elastic RayCluster's worker
    replicas and scaleStrategy.workersToDelete (a RayJob's cluster carries the RayJob's
    annotations, KubeRay copies them): the policy lets the token write those and only on an
    object marked elastic; anything else in them stays refused."""
    admin = installed
    sa = Kube(connect(str(sa_kubeconfig(control_plane, admin, tmp_path))))
    pod_spec = {"containers": [{"name": "w", "image": "registry.invalid/w:1"}]}

    def raycluster(name, elastic):
        notes = {"kueue.x-k8s.io/elastic-job": "true"} if elastic else {}
        admin.request("POST", path_of("ray.io/v1", "rayclusters", namespace), body={
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": namespace, "annotations": notes},
            "spec": {"suspend": True, "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec}},
                     "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "minReplicas": 1, "maxReplicas": 9,
                                           "rayStartParams": {}, "template": {"spec": pod_spec}}]}})
        return path_of("ray.io/v1", "rayclusters", namespace, name)

    def put(path, change):
        def write(n):
            obj = admin.get(path)
            change(obj, n)
            sa.request("PUT", path, body=obj)
        return write

    def resize(obj, n):
        group = obj["spec"]["workerGroupSpecs"][0]
        group["replicas"] = 1 + n % 9
        group["scaleStrategy"] = {"workersToDelete": [f"w-{n}"]}

    fixed, scaled = raycluster("fixed", False), raycluster("scaled", True)
    denied_by_policy(put(fixed, resize))          # first: the policy is in force
    allowed(put(scaled, resize))
    got = admin.get(scaled)["spec"]["workerGroupSpecs"][0]
    assert got["scaleStrategy"]["workersToDelete"] and got["replicas"] >= 1
    denied_by_policy(put(scaled, lambda obj, n: obj["spec"]["workerGroupSpecs"][0].update(maxReplicas=10 + n)))
    denied_by_policy(put(scaled, lambda obj, n: obj["spec"]["workerGroupSpecs"][0]["template"]["spec"][
        "containers"][0].update(image=f"registry.invalid/evil:{n}")))

    job_path = path_of("batch/v1", "jobs", namespace, "elastic")
    admin.request("POST", path_of("batch/v1", "jobs", namespace), body={
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "elastic", "namespace": namespace, "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
        "spec": {"suspend": True, "parallelism": 4, "completions": 100, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.invalid/a:1"}]}}}})

    def put_job(change):
        def write(n):
            obj = admin.get(job_path)
            change(obj, n)
            sa.request("PUT", job_path, body=obj)
        return write

    allowed(put_job(lambda obj, n: obj["spec"].update(parallelism=1 + n % 50)))
    denied_by_policy(put_job(lambda obj, n: obj["spec"].update(backoffLimit=10 + n)))


# ---------------------------------------------------------------- ProvisioningRequests (issue 36)

def test_a_provisioning_cycle_as_the_service_account(installed, control_plane, api_client, namespace, tmp_path):
    """The ClusterRole's provisioning rights are enough for a cycle that creates a
    ProvisioningRequest and its PodTemplate, and no more: the token cannot write the
    request's status (the autoscaler's part), nor update or get it."""
    from live_kit import behind_a_provisioning_check, drop_provisioning_check, policy_file

    env = Env(control_plane, api_client, namespace, nodes=1, gpus=8, quota=64)
    try:
        check = behind_a_provisioning_check(env)
        env.job("big", pods=2, gpus=8)
        kubeconfig = sa_kubeconfig(control_plane, installed, tmp_path)
        args = ["apply", "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE, "--policy",
                policy_file(env, tmp_path), "--release-wait", "1", "-q"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "1 ProvisioningRequests created" in result.output, result.output
        name = f"job-big-{check}-1"
        path = path_of("autoscaling.x-k8s.io/v1", "provisioningrequests", namespace, name)
        made = installed.get(path)
        assert made["spec"]["podSets"][0]["count"] == 2
        assert installed.get(path_of("v1", "podtemplates", namespace, f"ppt-{name}-main"))
        sa = Kube(connect(str(kubeconfig)))
        status = {"status": {"conditions": [{"type": "Provisioned", "status": "True", "reason": "R", "message": "m",
                                             "lastTransitionTime": "2026-12-01T10:00:00Z"}]}}
        for method, where, body, kind in (("PATCH", path + "/status", status, "application/merge-patch+json"),
                                          ("PUT", path, made, "application/json"),
                                          ("GET", path, None, "application/json")):
            with pytest.raises(ApiStatus) as denied:
                sa.request(method, where, body=body, content_type=kind)
            assert denied.value.status == 403, (method, where)
        # a second cycle as the same token keeps the request (it lists, and writes nothing new)
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "ProvisioningRequests created" not in result.output
    finally:
        env.cleanup()
        drop_provisioning_check(env)
