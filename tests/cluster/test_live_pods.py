"""Kueue's pod integration on the real control plane: plain Pods and pod groups.

The pods are created as Kueue's webhook would leave them (queue-name label, the
`kueue.x-k8s.io/admission` scheduling gate; a group's pods with
`kueue.x-k8s.io/pod-group-name` and `kueue.x-k8s.io/pod-group-total-count`). A cycle
pins each to the node the plan gave it and removes the gate; the real kube-scheduler
then binds it, and KWOK runs it: the test reads where each pod landed. Eviction
deletes the pods, as Kueue's pod integration does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner.cluster import apply_live
from planner.kinds import pods as kind
from live_kit import GPU, HOSTNAME, RACK, Env, per_node, wait_for


def cycle(kube, env, **kw):
    kw.setdefault("lease_namespace", env.namespace)
    kw.setdefault("identity", "test-planner")
    kw.setdefault("release_wait", 0)
    return apply_live(kube, **kw)


def make_pod(env: Env, name: str, gpus: int, *, group: str | None = None, total: int | None = None,
             priority: str | None = None, annotations: dict[str, str] | None = None) -> Any:
    labels = {"kueue.x-k8s.io/queue-name": env.lq}
    if group:
        labels[kind.GROUP_NAME_LABEL] = group
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    notes = dict(annotations or {})
    if total is not None:
        notes[kind.TOTAL_COUNT] = str(total)
    return env.core.create_namespaced_pod(env.namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": env.namespace, "labels": labels, "annotations": notes},
        "spec": {"schedulingGates": [{"name": kind.GATE}], "restartPolicy": "Never",
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "registry.invalid/serve:1",
                                 "resources": {"requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}}}]}})


def running(env: Env, names: list[str]) -> list[Any] | None:
    pods = [env.core.read_namespaced_pod(n, env.namespace) for n in names]
    return pods if all(p.spec.node_name and p.status.phase == "Running" for p in pods) else None


def test_a_pod_and_a_pod_group_bind_where_the_plan_placed_them(kube, env_factory):
    env = env_factory(nodes=4, gpus=8, per_rack=2)
    make_pod(env, "solo", 2)
    group = [f"grp-{i}" for i in range(3)]
    for name in group:   # 3 x 4 GPUs in one rack (2 nodes x 8 GPUs): the rack requirement splits them 2 + 1
        make_pod(env, name, 4, group="grp", total=3,
                 annotations={"kueue.x-k8s.io/podset-required-topology": RACK})
    plan, report = cycle(kube, env)
    admitted = {str(a.workload): a for a in plan.admissions}
    assert sorted(admitted) == [f"Pod/{env.namespace}/solo", f"PodGroup/{env.namespace}/grp"]
    assert sorted(map(str, report.admitted)) == sorted(admitted) and report.conflicts == []

    (solo_set,) = admitted[f"Pod/{env.namespace}/solo"].pod_sets
    solo = wait_for("solo running", lambda: running(env, ["solo"]), 90)
    assert per_node(solo) == solo_set.pods_per_node()
    (grp_set,) = admitted[f"PodGroup/{env.namespace}/grp"].pod_sets
    assert grp_set.count == 3
    members = wait_for("the group running", lambda: running(env, group), 90)
    assert per_node(members) == grp_set.pods_per_node()
    racks = {env.core.read_node(p.spec.node_name).metadata.labels[RACK] for p in members}
    assert len(racks) == 1
    for p in solo + members:
        assert p.spec.node_selector == {HOSTNAME: p.spec.node_name}
        assert not p.spec.scheduling_gates
        entries = json.loads(p.metadata.annotations["stowplan.io/assignment"])
        assert entries[0]["count"] == (1 if p.metadata.name == "solo" else 3)
    roles = {p.metadata.annotations[kind.ROLE] for p in members}
    assert roles == {grp_set.name}

    # the next cycle reads them as running where they are: nothing to do
    again, report = cycle(kube, env)
    assert again.admissions == () and again.evictions == () and report.conflicts == []


def test_a_group_waits_for_all_its_pods_and_an_eviction_deletes_them(kube, env_factory):
    env = env_factory(nodes=1, gpus=8, quota=8,
                      preemption={"withinClusterQueue": "LowerPriority"})
    low, high = env.priority_class("low", 10), env.priority_class("high", 1000)
    make_pod(env, "g-0", 4, group="g", total=2, priority=low)
    plan, _ = cycle(kube, env)
    assert plan.admissions == ()
    (waiting,) = [p for p in plan.pending if p.workload.name == "g"]
    assert "1 of 2 pods" in waiting.reason
    make_pod(env, "g-1", 4, group="g", total=2, priority=low)
    plan, _ = cycle(kube, env)
    assert [str(a.workload) for a in plan.admissions] == [f"PodGroup/{env.namespace}/g"]
    wait_for("the group running", lambda: running(env, ["g-0", "g-1"]), 90)

    make_pod(env, "urgent", 8, priority=high)
    plan, report = cycle(kube, env)
    # the plan is the end state: the victim and the pod it makes room for, in one cycle
    assert [str(e.workload) for e in plan.evictions] == [f"PodGroup/{env.namespace}/g"]
    assert [str(r) for r in report.evicted] == [f"PodGroup/{env.namespace}/g"]
    assert [str(a.workload) for a in plan.admissions] == [f"Pod/{env.namespace}/urgent"]

    def gone() -> bool:
        names = {p.metadata.name for p in env.core.list_namespaced_pod(env.namespace).items
                 if not p.metadata.deletion_timestamp}
        return not names & {"g-0", "g-1"}

    wait_for("the group's pods deleted", gone, 60)
    urgent = wait_for("urgent running", lambda: running(env, ["urgent"]), 90)
    assert urgent[0].spec.node_name == env.nodes[0]
    again, _ = cycle(kube, env)
    assert again.admissions == () and again.evictions == ()
