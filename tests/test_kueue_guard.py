"""Never two admitters (issue 37, item 6): how Kueue's leader Lease and Deployment are judged.

The live refusal, override and expiry are in tests/cluster/test_live_kueue_guard.py.
"""

from __future__ import annotations

import pytest

from planner.cluster import kueue_guard as guard
from planner.base.errors import KueueActiveError

SERVER_NOW = 1_800_000_000.0   # what the API server's Date header said


def lease(renewed: str = "2027-01-15T08:00:00.000000Z", duration: object = 15, holder: object = "kueue-cm-1_abc"):
    return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed}}


def iso(epoch: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_lease_renewed_within_its_duration_by_the_servers_clock_is_active() -> None:
    found = guard.judge_lease(lease(iso(SERVER_NOW - 5)), SERVER_NOW)
    assert found is not None and found.active
    assert "kueue-system/c1f6bfd2.kueue.x-k8s.io" in found.what and "kueue-cm-1_abc" in found.what


@pytest.mark.parametrize("spec", [
    lease(iso(SERVER_NOW - 16)),           # renewed longer ago than its duration: Kueue's manager is gone
    lease(iso(SERVER_NOW - 5), holder=""),  # released
    lease(iso(SERVER_NOW - 5), holder=None),
])
def test_an_expired_or_released_lease_does_not_block(spec) -> None:
    assert guard.judge_lease(spec, SERVER_NOW) is None
    assert guard.judge_lease(None, SERVER_NOW) is None


def test_the_servers_clock_decides_not_the_local_one() -> None:
    """Renewed 5 s before the server's now: active, whatever the local clock says (it is not read)."""
    renewed = iso(SERVER_NOW - 5)
    assert guard.judge_lease(lease(renewed), SERVER_NOW) is not None
    assert guard.judge_lease(lease(renewed), SERVER_NOW + 60) is None
    assert guard.server_time("Fri, 15 Jan 2027 08:00:00 GMT") == SERVER_NOW


def test_a_held_lease_that_cannot_be_judged_counts_as_active() -> None:
    assert guard.judge_lease(lease(iso(SERVER_NOW - 5)), None) is not None          # no Date header
    assert guard.judge_lease(lease("not a time"), SERVER_NOW) is not None
    assert guard.judge_lease(lease(iso(SERVER_NOW), duration="15"), SERVER_NOW) is not None


def test_a_deployment_with_a_ready_replica_is_active() -> None:
    found = guard.judge_deployment({"status": {"readyReplicas": 1, "replicas": 1}})
    assert found is not None and "kueue-system/kueue-controller-manager" in found.what
    assert guard.judge_deployment({"status": {"replicas": 1}}) is None
    assert guard.judge_deployment({"status": {"readyReplicas": 0}}) is None
    assert guard.judge_deployment(None) is None


class FakeKube:
    """Answers GETs from a dict, with a Date; records nothing else (the guard never writes)."""

    def __init__(self, objects):
        self.objects, self.last_date = objects, "Fri, 15 Jan 2027 08:00:00 GMT"

    def get_or_none(self, path):
        return self.objects.get(path)


def test_refuses_naming_what_it_found_and_the_flag_lets_it_through_with_a_warning() -> None:
    kube = FakeKube({guard.LEASE_PATH: lease(iso(SERVER_NOW - 3)),
                     guard.DEPLOYMENT_PATH: {"status": {"readyReplicas": 2}}})
    with pytest.raises(KueueActiveError) as refused:
        guard.check_no_kueue_controller(kube, allow=False, say=lambda _: None, warn=lambda _: None)
    assert refused.value.exit_code == 8
    text = str(refused.value)
    assert "c1f6bfd2.kueue.x-k8s.io" in text and "kueue-controller-manager has 2 ready" in text
    assert "--allow-kueue-controller" in text
    warned: list[str] = []
    guard.check_no_kueue_controller(kube, allow=True, say=lambda _: None, warn=warned.append)
    assert len(warned) == 1 and "--allow-kueue-controller" in warned[0] and "c1f6bfd2" in warned[0]
    guard.check_no_kueue_controller(FakeKube({}), allow=False, say=lambda _: None, warn=warned.append)
    assert len(warned) == 1
