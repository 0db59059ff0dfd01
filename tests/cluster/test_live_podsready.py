"""waitForPodsReady on the real control plane (planner.cycle.podsready, planner.cluster.apply).

A Job is admitted; between planning and the first write its node is cordoned, so its
released pods can never be scheduled and stay Pending, never Ready. After the timeout
the next cycle evicts it (PodsReadyTimeout) and records the requeue on the Job; the
cycles before its requeue time leave it waiting; after it, with the node back, it is
admitted again, its pods run and turn Ready (KWOK's pod-ready stage), and the cycle
records when it saw them Ready. With backoffLimitCount 0 the first timeout deactivates.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from planner.cluster import apply_live
from planner.cluster.apply import ADMITTED_AT, ASSIGNMENT, EVICTION_REASON
from live_kit import Env, wait_for

TIMEOUT = 6
BASE = 10
REQUEUE_COUNT = "stowplan.io/requeue-count"
REQUEUE_AT = "stowplan.io/requeue-at"
DEACTIVATED = "stowplan.io/deactivated"
PODS_READY_AT = "stowplan.io/pods-ready-at"


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=1, gpus=8)
    yield made
    made.cleanup()


def policy(tmp_path, limit=None):
    strategy = f"backoffBaseSeconds: {BASE}, backoffMaxSeconds: 3600"
    if limit is not None:
        strategy += f", backoffLimitCount: {limit}"
    path = tmp_path / "policy.yaml"
    path.write_text("apiVersion: stowplan.io/v1alpha1\nkind: PlannerPolicy\nmetadata: {name: default}\n"
                    "spec:\n  timeLimitSeconds: 10\n  kueueConfiguration:\n"
                    f"    waitForPodsReady: {{timeout: {TIMEOUT}s, requeuingStrategy: {{{strategy}}}}}\n")
    return str(path)


def epoch(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def cordon(env, unschedulable):
    for name in env.nodes:
        env.core.patch_node(name, {"spec": {"unschedulable": unschedulable}})


def annotations(env, name):
    return env.batch.read_namespaced_job(name, env.namespace).metadata.annotations or {}


def stowplan_events(env, name):
    return [e.reason for e in env.core.list_namespaced_event(env.namespace).items
            if e.involved_object.name == name and e.source and e.source.component == "stowplan"]


def admit_stuck(kube, env, policy_file):
    """Cycle 1: admit `stuck`, cordoning its node before the first write; its pods stay Pending."""
    env.job("stuck", pods=2, gpus=1)
    plan, report = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=3,
                              before_apply=lambda live, plan: cordon(env, True))
    assert [a.workload.name for a in mine(env, plan.admissions)] == ["stuck"] and mine(env, plan.evictions) == []
    pods = wait_for("2 pods of stuck", lambda: env.pods("stuck") if len(env.pods("stuck")) == 2 else None, timeout=30)
    assert all(p.status.phase == "Pending" and not p.spec.node_name for p in pods)
    return epoch(annotations(env, "stuck")[ADMITTED_AT])


def mine(env, items):
    """The plan covers the whole cluster: only this test's namespace counts."""
    return [i for i in items if i.workload.namespace == env.namespace]


def wait_until(moment):
    time.sleep(max(0.0, moment - time.time()))


def test_pods_never_ready_are_evicted_after_the_timeout_and_requeued_with_backoff(kube, env, tmp_path):
    policy_file = policy(tmp_path)
    admitted = admit_stuck(kube, env, policy_file)
    # the cycle before the timeout leaves it alone
    plan, _ = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=0)
    if time.time() < admitted + TIMEOUT - 1:
        assert mine(env, plan.evictions) == []
    wait_until(admitted + TIMEOUT + 1)
    plan, report = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=0)
    (eviction,) = mine(env, plan.evictions)
    assert (eviction.workload.name, eviction.reason, eviction.for_, eviction.requeue_count) == (
        "stuck", "PodsReadyTimeout", (), 1)
    assert "WaitForStart" in eviction.message and "main 0/2" in eviction.message
    assert [r.name for r in report.evicted if r.namespace == env.namespace] == ["stuck"]
    job = env.batch.read_namespaced_job("stuck", env.namespace)
    notes = job.metadata.annotations
    assert job.spec.suspend is True and ASSIGNMENT not in notes and ADMITTED_AT not in notes
    assert notes[REQUEUE_COUNT] == "1"
    requeue_at = epoch(notes[REQUEUE_AT])
    assert requeue_at == eviction.requeue_at
    # the backoff is counted from the cycle's planning time (a whole second of the clock when it read)
    assert admitted + TIMEOUT + BASE <= requeue_at <= time.time() + BASE
    assert notes[EVICTION_REASON].startswith("PodsReadyTimeout: WaitForStart")
    assert "PodsReadyTimeout" in stowplan_events(env, "stuck")
    # the node comes back, but the Job waits out its backoff
    cordon(env, False)
    plan, _ = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=0)
    assert time.time() < requeue_at, "the cycle took longer than the backoff: the test proves nothing"
    assert mine(env, plan.admissions) == []
    (entry,) = [p for p in mine(env, plan.pending) if p.workload.name == "stuck"]
    assert "requeued after PodsReadyTimeout (requeue 1): backoff until" in entry.reason
    # after it, admitted again; its pods run and turn Ready, and a cycle records that
    wait_until(requeue_at + 1)
    plan, report = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=5)
    assert [a.workload.name for a in mine(env, plan.admissions)] == ["stuck"] and mine(env, plan.evictions) == []
    env.wait_bound("stuck", 2)

    def recorded():
        plan, report = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=2)
        assert mine(env, plan.evictions) == []
        return annotations(env, "stuck").get(PODS_READY_AT)

    assert wait_for("pods-ready-at recorded", recorded, timeout=60, interval=1.0)
    assert annotations(env, "stuck")[REQUEUE_COUNT] == "1"   # Kueue keeps the count until deactivation


def test_past_the_requeue_limit_the_job_is_deactivated_and_never_planned(kube, env, tmp_path):
    policy_file = policy(tmp_path, limit=0)
    admitted = admit_stuck(kube, env, policy_file)
    wait_until(admitted + TIMEOUT + 1)
    plan, report = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=0)
    (eviction,) = mine(env, plan.evictions)
    assert (eviction.reason, eviction.requeue_count) == ("Deactivated", 0)
    assert eviction.message.startswith("RequeuingLimitExceeded")
    job = env.batch.read_namespaced_job("stuck", env.namespace)
    assert job.spec.suspend is True
    assert job.metadata.annotations[DEACTIVATED] == "RequeuingLimitExceeded"
    assert REQUEUE_COUNT not in job.metadata.annotations
    assert "Deactivated" in stowplan_events(env, "stuck")
    cordon(env, False)
    plan, _ = apply_live(kube, policy_file=policy_file, lease_namespace=env.namespace, release_wait=0)
    assert mine(env, plan.admissions) == []
    (entry,) = [p for p in mine(env, plan.pending) if p.workload.name == "stuck"]
    assert "deactivated (RequeuingLimitExceeded)" in entry.reason
