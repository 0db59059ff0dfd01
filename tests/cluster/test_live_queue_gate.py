"""No hand-edited templates (issue 37, item 4), on the real control plane: the
MutatingAdmissionPolicies of cronjob/queue-gate.yaml, installed as they ship, make the
API server add Kueue's `kueue.x-k8s.io/admission` scheduling gate to a queued pod created
without it (and to a queued LeaderWorkerSet's templates), as Kueue's webhook would; a
cycle of `stowplan apply` then admits the pod and the real kube-scheduler binds it.

kube-apiserver v1.36.3 serves MutatingAdmissionPolicy as admissionregistration.k8s.io/v1
with its feature gate and admission plugin on by default: the rig needs no flag for it
(test_the_api_server_serves_the_v1_api checks that it is served).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.cluster import apply_live
from planner.cluster.kube import ApiStatus, path_of
from planner.kinds import pods as kind
from live_kit import GPU, Env, wait_for

MANIFEST = Path(__file__).resolve().parents[2] / "cronjob" / "queue-gate.yaml"
API = "admissionregistration.k8s.io/v1"
PLURALS = {"MutatingAdmissionPolicy": "mutatingadmissionpolicies",
           "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings"}
LWS = "leaderworkerset.x-k8s.io"


def pod_body(namespace: str, name: str, queue: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue},
                         **meta},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.invalid/serve:1",
                                     "resources": {"requests": {GPU: "1", "cpu": "1"}, "limits": {GPU: "1"}}}]}}


def gates(pod: dict) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


@pytest.fixture
def policies(kube, namespace):
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    assert sorted({d["kind"] for d in docs}) == sorted(PLURALS) and {d["apiVersion"] for d in docs} == {API}
    for doc in docs:
        try:
            kube.request("POST", path_of(API, PLURALS[doc["kind"]]), body=doc)
        except ApiStatus as err:
            if err.status != 409:
                raise
    # the API server picks a new policy up from its informer: wait until a dry-run pod shows it
    probe = pod_body(namespace, "probe", "q")

    def active():
        made = kube.request("POST", path_of("v1", "pods", namespace), body=probe, query=[("dryRun", "All")])
        return kind.GATE in gates(made)

    wait_for("the MutatingAdmissionPolicy to take effect", active, timeout=120)
    yield docs
    for doc in reversed(docs):   # later tests of the session create pods as they choose
        try:
            kube.request("DELETE", path_of(API, PLURALS[doc["kind"]], "", doc["metadata"]["name"]))
        except ApiStatus:
            pass


def test_the_api_server_serves_the_v1_api(kube):
    served = {r["name"] for r in kube.get(f"/apis/{API}")["resources"]}
    assert {"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} <= served


def test_a_queued_pod_created_without_the_gate_is_gated_then_admitted(kube, policies, control_plane, api_client,
                                                                      namespace):
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        made = kube.request("POST", path_of("v1", "pods", namespace), body=pod_body(namespace, "p", env.lq))
        assert gates(made) == [kind.GATE]                     # the API server added it at creation
        assert made["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
        assert not made["spec"].get("nodeName")
        # a pod with a gate of its own keeps it and gets Kueue's beside it (once)
        other = pod_body(namespace, "other", env.lq)
        other["spec"]["schedulingGates"] = [{"name": "example.com/wait"}, {"name": kind.GATE}]
        dry = kube.request("POST", path_of("v1", "pods", namespace), body=other, query=[("dryRun", "All")])
        assert gates(dry) == ["example.com/wait", kind.GATE]
        # not queued, or made by a controller (a Job's pod): left alone
        plain = pod_body(namespace, "plain", env.lq)
        del plain["metadata"]["labels"]
        assert gates(kube.request("POST", path_of("v1", "pods", namespace), body=plain,
                                  query=[("dryRun", "All")])) == []
        owned = pod_body(namespace, "owned", env.lq, ownerReferences=[
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "0d4c0a8e-0000-4000-8000-000000000001",
             "controller": True}])
        assert gates(kube.request("POST", path_of("v1", "pods", namespace), body=owned,
                                  query=[("dryRun", "All")])) == []
        # a cycle admits it: pinned to the env's node, gate removed; kube-scheduler binds it
        plan, report = apply_live(kube, lease_namespace=namespace, identity="test-planner", release_wait=0)
        assert [a.workload.name for a in plan.admissions] == ["p"]
        bound = wait_for("the pod bound", lambda: (lambda p: p if p.spec.node_name else None)(
            env.core.read_namespaced_pod("p", namespace)), timeout=90)
        assert bound.spec.node_name == env.nodes[0] and not bound.spec.scheduling_gates
    finally:
        env.cleanup()


def test_a_queued_leaderworkerset_gets_the_gate_in_its_templates(kube, policies, namespace):
    def template(gated: bool) -> dict:
        spec: dict = {"containers": [{"name": "c", "image": "registry.invalid/serve:1"}]}
        if gated:
            spec["schedulingGates"] = [{"name": kind.GATE}]
        return {"spec": spec}

    body = {"apiVersion": f"{LWS}/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "leaderTemplate": template(False),
                                                             "workerTemplate": template(False)}}}
    made = kube.request("POST", path_of(f"{LWS}/v1", "leaderworkersets", namespace), body=body,
                        query=[("dryRun", "All")])
    lwt = made["spec"]["leaderWorkerTemplate"]
    assert gates(lwt["leaderTemplate"]) == [kind.GATE] and gates(lwt["workerTemplate"]) == [kind.GATE]
    # no leader template, a worker template already gated: nothing added twice
    body["spec"]["leaderWorkerTemplate"] = {"size": 2, "workerTemplate": template(True)}
    made = kube.request("POST", path_of(f"{LWS}/v1", "leaderworkersets", namespace), body=body,
                        query=[("dryRun", "All")])
    lwt = made["spec"]["leaderWorkerTemplate"]
    assert "leaderTemplate" not in lwt and gates(lwt["workerTemplate"]) == [kind.GATE]
    # without the queue-name label: untouched
    del body["metadata"]["labels"]
    body["spec"]["leaderWorkerTemplate"] = {"size": 2, "workerTemplate": template(False)}
    made = kube.request("POST", path_of(f"{LWS}/v1", "leaderworkersets", namespace), body=body,
                        query=[("dryRun", "All")])
    assert gates(made["spec"]["leaderWorkerTemplate"]["workerTemplate"]) == []
