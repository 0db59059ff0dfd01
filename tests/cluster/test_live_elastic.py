"""An elastic Job (kueue.x-k8s.io/elastic-job) grown and shrunk by apply on the real control
plane: the plan's resizes become spec.parallelism changes, the Job controller makes or
removes pods, and apply places the new ones where the slice says."""

from __future__ import annotations

import json

import pytest

from planner.cluster import apply_live
from planner.cluster.apply import ASSIGNMENT, MAX_PARALLELISM
from live_kit import GPU, Env, per_node, wait_for


@pytest.fixture
def env(control_plane, api_client, namespace):
    made = Env(control_plane, api_client, namespace, nodes=2, gpus=4,
               preemption={"withinClusterQueue": "LowerPriority"})
    yield made
    made.cleanup()


def cycle(kube, env, **kw):
    return apply_live(kube, lease_namespace=env.namespace, identity="test-planner", release_wait=10, **kw)


def elastic_job(env, name, most, floor):
    body = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": env.namespace, "labels": {"kueue.x-k8s.io/queue-name": env.lq},
                     "annotations": {"kueue.x-k8s.io/elastic-job": "true",
                                     "kueue.x-k8s.io/job-min-parallelism": str(floor)}},
        "spec": {"suspend": True, "parallelism": most, "completions": 100, "backoffLimit": 100,
                 "template": {"spec": {
                     "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "train", "image": "registry.invalid/trainer:1",
                                     "resources": {"requests": {GPU: "1", "cpu": "1"}, "limits": {GPU: "1"}}}]}}},
    }
    return env.batch.create_namespaced_job(env.namespace, body)


def live_pods(env, name):
    return [p for p in env.pods(name) if not p.metadata.deletion_timestamp and p.status.phase not in ("Succeeded", "Failed")]


def settle(kube, env, name, count, timeout=120.0):
    """Cycles until `name` has exactly `count` pods, all bound (a cycle releases pods the Job
    controller made after the last one's release window)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        pods = live_pods(env, name)
        if len(pods) == count and all(p.spec.node_name for p in pods):
            return pods
        assert time.monotonic() < deadline, f"{name}: {len(pods)} pods, want {count} bound"
        time.sleep(1.0)
        plan, _ = cycle(kube, env)
        assert not plan.evictions, plan.evictions


def test_elastic_job_is_grown_and_shrunk_by_apply(kube, env):
    ns = env.namespace
    # 8 GPUs in all. A 4-GPU filler and an elastic Job of 2..6 one-GPU pods: it starts at 4.
    env.job("filler", pods=1, gpus=4)
    elastic_job(env, "elastic", most=6, floor=2)
    plan, report = cycle(kube, env)
    assert sorted(a.workload.name for a in plan.admissions) == ["elastic", "filler"], plan
    (admitted,) = [a for a in plan.admissions if a.workload.name == "elastic"]
    assert admitted.pod_sets[0].count == 4
    job = env.batch.read_namespaced_job("elastic", ns)
    assert job.spec.parallelism == 4 and job.metadata.annotations[MAX_PARALLELISM] == "6"
    pods = settle(kube, env, "elastic", 4)
    assert per_node(pods) == admitted.pod_sets[0].pods_per_node()

    # The filler goes: the next plan grows the Job by a slice of 2, beside its running pods
    env.batch.delete_namespaced_job("filler", ns, propagation_policy="Background")
    wait_for("the filler's pods to go", lambda: not env.pods("filler"), 60)
    plan, report = cycle(kube, env)
    (grow,) = plan.resizes
    assert (grow.from_count, grow.to_count) == (4, 6) and grow.slice is not None and not grow.release
    assert report.resized and not plan.evictions
    job = env.batch.read_namespaced_job("elastic", ns)
    assert job.spec.parallelism == 6
    assignment = json.loads(job.metadata.annotations[ASSIGNMENT])
    assert assignment[0]["count"] == 6
    pods = settle(kube, env, "elastic", 6)
    want = {tuple(d["values"])[-1]: d["count"] for d in assignment[0]["topologyAssignment"]["domains"]}
    assert per_node(pods) == want

    # A higher-priority Job of 4 GPUs comes: 2 are free, the plan releases 2 pods of the
    # elastic Job (its floor is 2) rather than evicting it
    high = env.priority_class("high", 1000)
    env.job("urgent", pods=4, gpus=1, priority=high)
    plan, report = cycle(kube, env)
    assert [a.workload.name for a in plan.admissions] == ["urgent"]
    assert not plan.evictions
    (shrink,) = plan.resizes
    assert (shrink.from_count, shrink.to_count) == (6, 4) and sum(c for _, c in shrink.release) == 2
    assert [r.name for r in shrink.for_] == ["urgent"]
    job = env.batch.read_namespaced_job("elastic", ns)
    assert job.spec.parallelism == 4 and job.spec.suspend is False
    pods = settle(kube, env, "elastic", 4)
    released = dict(shrink.release)
    before = want
    after = per_node(pods)
    assert after == {n: c - released.get(n, 0) for n, c in before.items() if c - released.get(n, 0) > 0}
    urgent = settle(kube, env, "urgent", 4)
    assert len(urgent) == 4

