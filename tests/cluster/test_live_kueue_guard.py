"""Never two admitters (issue 37, item 6), on the real control plane: a Lease
kueue-system/c1f6bfd2.kueue.x-k8s.io held and renewed as Kueue's leader election
writes it makes `stowplan apply` refuse (exit 8, naming the Lease, nothing admitted);
`--allow-kueue-controller` applies anyway and says so on stderr; an expired Lease
does not block. No Kueue manager runs: the test writes its Lease as Kueue's manager
would (holder `<pod>_<uuid>`, leaseDurationSeconds, acquire and renew times), with a
long duration so that a slow machine cannot let it expire mid-test."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.kube import ApiStatus, path_of
from planner.cluster.kueue_guard import LEASE_NAME, LEASE_PATH, NAMESPACE
from live_kit import Env


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def put_kueue_lease(kube: Kube, renewed: datetime, duration: int) -> None:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE_NAME, "namespace": NAMESPACE},
            "spec": {"holderIdentity": "kueue-controller-manager-6d4c9f7b8-x2x9q_5b1f0c2e-1111-4a2b-9c3d-0e1f2a3b4c5d",
                     "leaseDurationSeconds": duration, "acquireTime": _stamp(renewed - timedelta(minutes=5)),
                     "renewTime": _stamp(renewed), "leaseTransitions": 0}}
    current = kube.get_or_none(LEASE_PATH)
    if current is None:
        kube.request("POST", path_of("coordination.k8s.io/v1", "leases", NAMESPACE), body=body)
    else:
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        kube.request("PUT", LEASE_PATH, body=body)


@pytest.fixture
def kube(control_plane):
    kube = Kube(connect(str(control_plane.kubeconfig)))
    try:
        kube.request("POST", path_of("v1", "namespaces"), body={"apiVersion": "v1", "kind": "Namespace",
                                                                  "metadata": {"name": NAMESPACE}})
    except ApiStatus as err:
        if err.status != 409:
            raise
    yield kube
    if kube.get_or_none(LEASE_PATH) is not None:
        kube.request("DELETE", LEASE_PATH)   # other tests of this session must not see a Kueue manager


def test_apply_refuses_beside_kueues_leader_unless_told_and_an_expired_lease_does_not_block(
        kube, control_plane, api_client, namespace):
    env = Env(control_plane, api_client, namespace, nodes=1)
    try:
        env.job("a", pods=1, gpus=1)
        env.job("b", pods=1, gpus=1)
        base = ["apply", "--kubeconfig", str(control_plane.kubeconfig), "--namespace", namespace, "-q"]
        # a Lease renewed now (the API server's clock: the machine's) for an hour: Kueue's manager leads
        put_kueue_lease(kube, datetime.now(timezone.utc), duration=3600)
        refused = CliRunner().invoke(cli, base)
        assert refused.exit_code == 8, refused.output
        assert f"Lease {NAMESPACE}/{LEASE_NAME} held by kueue-controller-manager" in refused.stderr
        assert env.batch.read_namespaced_job("a", namespace).spec.suspend is True   # nothing applied
        assert env.batch.read_namespaced_job("b", namespace).spec.suspend is True
        # the operator's explicit override: applied, and said on stderr
        allowed = CliRunner().invoke(cli, base + ["--allow-kueue-controller"])
        assert allowed.exit_code == 0, allowed.output
        assert "warning: Kueue's controller manager is active" in allowed.stderr
        assert "--allow-kueue-controller" in allowed.stderr
        assert env.batch.read_namespaced_job("a", namespace).spec.suspend is False
        # the environment variable of the flag (STOWPLAN_APPLY_<FLAG>) is the same override
        assert CliRunner().invoke(cli, base, auto_envvar_prefix="STOWPLAN",
                                  env={"STOWPLAN_APPLY_ALLOW_KUEUE_CONTROLLER": "1"}).exit_code == 0
        # renewed an hour ago with Kueue's 15 s duration: its holder is gone, apply runs
        put_kueue_lease(kube, datetime.now(timezone.utc) - timedelta(hours=1), duration=15)
        env.job("c", pods=1, gpus=1)
        expired = CliRunner().invoke(cli, base)
        assert expired.exit_code == 0, expired.output
        assert "Kueue's controller manager" not in expired.stderr
        assert env.batch.read_namespaced_job("c", namespace).spec.suspend is False
    finally:
        env.cleanup()
