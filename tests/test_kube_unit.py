"""The live edge without a cluster (issue 23): no credential in any message, the API
server's own included; hostile plan files refused as snapshot files are; and the
snapshot file `stowplan snapshot` writes carries only what planning reads."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import Any

import pytest

from planner.cluster.planfile import load_plan
from planner.cluster.kube import ApiStatus, ClusterError, Kube, scrub, url_without_userinfo
from planner.cluster.reader import pruned
from planner.base.errors import InputError

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJl"


@pytest.mark.parametrize("url, shown", [
    ("https://admin:s3cret@api.example:6443/x", "https://api.example:6443/x"),
    ("https://token@10.0.0.1", "https://10.0.0.1"),
    ("https://[::1]:6443", "https://[::1]:6443"),
    ("https://api.example", "https://api.example"),
    ("https://api.example:6443/?token=s3cret#x", "https://api.example:6443/"),   # issue 40: a query is dropped
    ("https://api.example:99999999", "https://api.example:99999999"),          # a bad port: kept, never a crash
])
def test_server_urls_lose_their_user_info(url, shown):
    assert url_without_userinfo(url) == shown


@pytest.mark.parametrize("text, secret", [
    ("Get https://admin:s3cret@host/api: refused", "s3cret"),
    ("Authorization: Bearer abcdefgh12345678 rejected", "abcdefgh12345678"),
    (f"token {JWT} expired", JWT),
    ("password=hunter2, then", "hunter2"),
    ('spec.template.spec.containers[0].env[0].value: Invalid value: "hunter2": too long', "hunter2"),
    ('Job.batch "j" is invalid: spec.template.spec: Invalid value: {"Containers":[{"Name":"c","Env":[{"Name":"P",'
     '"Value":"hunter2"}]}]}: field is immutable', "hunter2"),
    ('Pod "p" is invalid: spec: Forbidden: pod updates may not change fields\n   "Env": [{"Name": "P", "Value": "hunter2"}]',
     "hunter2"),
])
def test_scrub_takes_credentials_out(text, secret):
    assert secret not in scrub(text)
    assert "<redacted>" in scrub(text) or "://host/api" in scrub(text) or "Invalid value: {...}: field" in scrub(text)


class FakeResponse:
    def __init__(self, status: int, body: Any):
        self.status, self.reason, self._body = status, "Forbidden", json.dumps(body).encode()

    def read(self) -> bytes:
        return self._body


class FakeApi:
    """What Kube.request uses of kubernetes.client.ApiClient."""

    def __init__(self, host: str, response: Any = None, error: Exception | None = None):
        self.configuration = SimpleNamespace(host=host)
        self.response, self.error = response, error

    def param_serialize(self, method, path, **kwargs):
        return method, self.configuration.host + path, {}, None, None

    def call_api(self, *args, **kwargs):
        if self.error:
            raise self.error
        return self.response


def test_api_server_messages_are_scrubbed():
    body = {"kind": "Status", "message": f'Job "x" is invalid: spec.template.spec.containers[0].env[0].value: '
                                        f'Invalid value: "hunter2"; token={JWT}'}
    kube = Kube(FakeApi("https://admin:s3cret@api:6443", FakeResponse(422, body)))
    with pytest.raises(ApiStatus) as err:
        kube.get("/apis/batch/v1/jobs")
    for secret in ("hunter2", JWT, "s3cret"):
        assert secret not in str(err.value)
    assert err.value.status == 422 and "Invalid value" in str(err.value)


def test_an_unreachable_server_is_named_without_user_info():
    kube = Kube(FakeApi("https://admin:s3cret@api:6443", error=ConnectionError("refused by https://admin:s3cret@api")))
    assert kube.host == "https://api:6443"
    with pytest.raises(ClusterError) as err:
        kube.get("/api/v1/nodes")
    assert "s3cret" not in str(err.value) and "admin" not in str(err.value)
    assert "cannot reach the API server at https://api:6443" in str(err.value)


def test_a_plan_file_is_read_as_safely_as_a_snapshot(tmp_path):
    with pytest.raises(InputError, match="is a character device"):
        load_plan("/dev/zero")
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        load_plan(str(fifo))
    shaped = tmp_path / "shaped.yaml"
    shaped.write_text("kind: Plan\nsnapshot: [1, 2]\nadmissions: []\n")
    with pytest.raises(InputError, match="malformed plan"):          # was AttributeError: exit 1
        load_plan(str(shaped))
    objects = tmp_path / "objects.yaml"
    objects.write_text("kind: Plan\nsnapshot: {resourceVersions: {}, objects: many}\n")
    with pytest.raises(InputError, match="malformed plan"):          # was ValueError: exit 1
        load_plan(str(objects))


def test_pruned_keeps_what_planning_reads_and_leaves_the_live_document_alone():
    container = {"name": "c", "image": "trainer:1", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always",
                 "env": [{"name": "K", "value": "v"}], "command": ["x"], "args": ["--token=t"],
                 "livenessProbe": {"exec": {"command": ["curl", "-H", "Authorization: x"]}}}
    template = {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack", "other": "o"}},
                "spec": {"containers": [dict(container)], "initContainers": [dict(container)],
                         "nodeSelector": {"a": "b"}}}
    meta = {"name": "j", "namespace": "n", "managedFields": [{}], "labels": {"l": "v"},
            "annotations": {"stowplan.io/assignment": "[]", "kubectl.kubernetes.io/last-applied-configuration": "{}"}}
    document = {"kind": "List", "items": [
        {"kind": "Job", "metadata": dict(meta), "spec": {"suspend": True, "template": template}},
        {"kind": "JobSet", "metadata": dict(meta), "spec": {"replicatedJobs": [
            {"name": "w", "template": {"metadata": {"annotations": {"x": "y"}}, "spec": {"template": template}}}]}},
        {"kind": "Pod", "metadata": dict(meta), "spec": {"nodeName": "n1", "containers": [dict(container)]}},
        {"kind": "Node", "metadata": {"name": "n1", "annotations": {"kubeadm": "x"}}, "status": {"capacity": {}}},
    ]}
    before = json.dumps(document, sort_keys=True)
    out = pruned(document)
    assert json.dumps(document, sort_keys=True) == before
    job, jobset, pod, node = out["items"]
    kept = {"name": "c", "image": "trainer:1", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}
    assert job["spec"]["template"]["spec"]["containers"] == [kept]
    assert job["spec"]["template"]["spec"]["initContainers"] == [kept]
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"a": "b"}
    assert job["spec"]["template"]["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": "rack"}
    assert job["metadata"] == {"name": "j", "namespace": "n", "labels": {"l": "v"},
                               "annotations": {"stowplan.io/assignment": "[]"}}
    replicated = jobset["spec"]["replicatedJobs"][0]["template"]
    assert "annotations" not in replicated["metadata"]
    assert replicated["spec"]["template"]["spec"]["containers"] == [kept]
    assert pod["spec"]["containers"] == [kept] and pod["spec"]["nodeName"] == "n1"
    assert node["metadata"] == {"name": "n1"}
