"""`stowplan explain WORKLOAD --live` on the real control plane (issue 27, item 1): a job
waits behind a full ClusterQueue on a full node; the CLI reads the cluster, names the
constraints with their numbers (the quota, the node's room, the running job protected
from it) and the smallest change, computed by planning the changed cluster again."""

from __future__ import annotations

import json

from click.testing import CliRunner

from planner.cli import cli
from planner.cluster import Kube, apply_live, connect
from live_kit import GPU, Env


def test_live_explain_names_the_constraints_and_the_smallest_change(control_plane, api_client, namespace):
    kube = Kube(connect(str(control_plane.kubeconfig)))
    # One node of 8 GPUs, 8 GPUs of nominal quota, no preemption within the queue (Never).
    env = Env(control_plane, api_client, namespace, nodes=1, gpus=8, quota=8)
    try:
        low, high = env.priority_class("low", 10), env.priority_class("high", 1000)
        env.job("running", pods=1, gpus=8, priority=low)
        _, report = apply_live(kube, lease_namespace=namespace, identity="test-planner", release_wait=15)
        assert [r.name for r in report.admitted] == ["running"]
        env.wait_bound("running", 1)
        env.job("waiting", pods=1, gpus=8, priority=high)

        result = CliRunner().invoke(cli, ["explain", f"Job/{namespace}/waiting", "--live", "--kubeconfig",
                                          str(control_plane.kubeconfig), "-o", "json", "-q"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
    finally:
        env.cleanup()

    assert data["workload"] == {"kind": "Job", "namespace": namespace, "name": "waiting"}
    assert (data["state"], data["clusterQueue"], data["localQueue"], data["priority"]) == \
        ("waiting", env.cq, env.lq, 1000)
    assert data["position"] == {"localQueue": [1, 1], "clusterQueue": [1, 1]}
    gpu = next(q for q in data["quota"] if q["resource"] == GPU)
    # 8 nominal, the running job uses all 8, it needs 8: short by 8.
    assert (gpu["flavor"], gpu["nominal"], gpu["usedAfterPlan"], gpu["available"], gpu["needs"], gpu["short"]) == \
        (env.flavor, 8, 8, 0, 8, True)
    (capacity,) = data["capacity"]      # the one node is full
    assert (capacity["flavors"], capacity["fits"], capacity["neededPods"], capacity["bestRoomPods"]) == \
        ([env.flavor], False, 1, 0)
    (victim,) = data["victims"]
    assert (victim["workload"]["name"], victim["priority"], victim["preemptible"]) == ("running", 10, False)
    assert victim["why"] == "withinClusterQueue is Never"
    kinds = {c["kind"]: c for c in data["changes"]}
    # Quota alone: the node is full; nodes alone: the quota is full; both: one node and its 8 GPUs.
    assert kinds["quota"]["admits"] is False and kinds["nodes"]["admits"] is False
    both = kinds["quota+nodes"]
    assert both["admits"] and both["nodes"] == 1 and both["nodesLike"] == env.nodes[0]
    assert both["quota"] == [{"flavor": env.flavor, "resource": GPU, "more": 8}]
    assert kinds["finishing"]["admits"] and [r["name"] for r in kinds["finishing"]["finishing"]] == ["running"]
    assert data["smallestChange"] == both
