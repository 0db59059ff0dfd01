"""Which workload's ProvisioningRequest carries the new nodes is a function of the snapshot,
never of the machine's speed: the scenario of tests/cluster/test_live_provisioning.py through
the same pure code path (plan_cycle, as planner.cluster.cycle calls it).

One 8-GPU node (n1, in a TAS flavor) and one node template (gpu8: an 8-GPU host on a rack and
block of its own, at most 4). Three pending jobs behind a provisioning check: big (2 pods x 8
GPUs), small and gone (1 pod x 1 GPU each). Planned all at once, 18 GPUs on n1's 8 need two
new hosts (the capacity model's answer; big's two 8-GPU pods need two 8-GPU hosts). Which
workload lands where is Kueue's order (priority, then age, then uid), worked out by hand:
  - small and gone first: they take 2 GPUs of n1; big's two pods fit no host with 6 GPUs,
    so both go to the two new nodes: big asks for 2, small and gone for none;
  - big first: one pod on n1 (first in the domains' order), one on a new node; small and
    gone share the other new node: each of the three requests asks for one node.
"""

from __future__ import annotations

from typing import Any

import pytest

from test_provisioning import NS, kueue, snap
from planner.base.solve_options import SolveOptions
from planner.whatif.provisioning import plan_cycle

GPU = "nvidia.com/gpu"
HOST = "kubernetes.io/hostname"
BLOCK = "example.com/block"
RACK = "example.com/rack"
POOL = "example.com/pool"
ALLOCATABLE = {GPU: "8", "cpu": "96", "memory": "1Ti", "pods": "110"}
EARLY, LATE = "2026-12-01T09:00:00Z", "2026-12-01T09:00:01Z"


def gpu_job(name: str, pods: int, gpus: int, created: str, uid: str = "") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}", "creationTimestamp": created,
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "trainer", "resources": {
                    "requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}}}]}}}}


def gpu_cluster(*jobs: dict[str, Any], time_limit: float = 10) -> list[dict[str, Any]]:
    """As the live test's Env: one 8-GPU node, a TAS flavor, 64 GPUs of quota, the check, and
    the policy (the live test's: 10 s, or `time_limit`, the cycle's whole budget)."""
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {HOST: "n1", POOL: "p", BLOCK: "b1", RACK: "r1"}},
            "status": {"allocatable": ALLOCATABLE, "conditions": [{"type": "Ready", "status": "True"}]}}
    cq = {"namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
          "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [{"name": "gpu", "resources": [
              {"name": "cpu", "nominalQuota": "100000"}, {"name": GPU, "nominalQuota": "64"}]}]}]}
    template = {"name": "gpu8", "cost": 1, "topology": [BLOCK, RACK], "labels": {POOL: "p"},
                "allocatable": ALLOCATABLE, "max": 4}
    return [
        node,
        kueue("Topology", "topo", {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}),
        kueue("ResourceFlavor", "gpu", {"nodeLabels": {POOL: "p"}, "topologyName": "topo"}),
        kueue("ClusterQueue", "cq", cq), kueue("LocalQueue", "lq", {"clusterQueue": "cq"}, namespace=NS),
        kueue("AdmissionCheck", "prov", {"controllerName": "kueue.x-k8s.io/provisioning-request", "parameters": {
            "apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"}}),
        kueue("ProvisioningRequestConfig", "prc", {
            "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "parameters": {"ValidUntilSeconds": "600"}}),
        {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
         "spec": {"timeLimitSeconds": time_limit, "provisioning": {"enabled": True, "maxNodesPerCycle": 4,
                                                           "templates": [template]}}},
        *jobs,
    ]


def nodes_asked(objects: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Each request's workload and the new nodes it asks for."""
    plan = plan_cycle(snap(objects), SolveOptions(solver="greedy"))
    assert plan.provisioning is not None
    assert all(r.create for r in plan.provisioning.requests)
    return {r.workload.name: dict(r.nodes) for r in plan.provisioning.requests}


SMALL_ONES_FIRST = {"big": {"gpu8": 2}, "small": {}, "gone": {}}
BIG_FIRST = {"big": {"gpu8": 1}, "small": {"gpu8": 1}, "gone": {"gpu8": 1}}


@pytest.mark.parametrize("big, small, gone, expected", [
    ((LATE, ""), (EARLY, ""), (EARLY, ""), SMALL_ONES_FIRST),          # the older jobs first
    ((EARLY, ""), (LATE, ""), (LATE, ""), BIG_FIRST),
    ((EARLY, "uid-2"), (EARLY, "uid-1"), (EARLY, "uid-3"), SMALL_ONES_FIRST),   # one second: the uid
    ((EARLY, "uid-1"), (EARLY, "uid-2"), (EARLY, "uid-3"), BIG_FIRST),
])
def test_kueues_queue_order_decides_which_request_carries_the_new_nodes(
        big: tuple[str, str], small: tuple[str, str], gone: tuple[str, str], expected: dict[str, dict[str, int]]) -> None:
    objects = gpu_cluster(gpu_job("big", 2, 8, *big), gpu_job("small", 1, 1, *small), gpu_job("gone", 1, 1, *gone))
    assert nodes_asked(objects) == expected


@pytest.mark.parametrize("older, expected", [("small", SMALL_ONES_FIRST), ("big", BIG_FIRST)])
def test_the_requests_do_not_change_with_the_time_limit(older: str, expected: dict[str, dict[str, int]]) -> None:
    # A policy time limit too short for any plan to finish (the cycle's own plan changes nothing)
    # and a generous one: the what-if's tries run Kueue's way to its end either way, so
    # the same nodes are asked for, by the same workloads. (Before, each try waited for
    # Kueue's way only until the cycle's deadline: the tiny limit asked for nothing.)
    created = {name: EARLY if name == older or (older == "small" and name == "gone") else LATE
               for name in ("big", "small", "gone")}
    jobs = [gpu_job("big", 2, 8, created["big"]), gpu_job("small", 1, 1, created["small"]),
            gpu_job("gone", 1, 1, created["gone"])]
    tiny, generous = nodes_asked(gpu_cluster(*jobs, time_limit=0.001)), nodes_asked(gpu_cluster(*jobs, time_limit=60))
    assert tiny == generous == expected
