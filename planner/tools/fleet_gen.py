"""A seeded MultiKueue fleet: worker clusters of different sizes and GPU types, and a
manager whose Jobs wait to be dispatched (what `stowplan generate --fleet DIR` writes).

Each worker: racks of 8-GPU nodes under a rack/hostname Topology, one flavor named for
its GPU type, ClusterQueue `gpu-cq` holding the worker's capacity, LocalQueue
`team/gpu-queue`. The manager: a flavor without nodes, ClusterQueue `gpu-cq` with the
fleet's GPUs (so the workers, not the manager, are the limit unless `manager_share` < 1),
the same LocalQueue, and the pending Jobs: mostly 1-8 GPU jobs (Philly-like mix) and
some 4 x 8-GPU jobs that require one rack. Deterministic for a seed.
"""

from __future__ import annotations

import random
from typing import Any
from planner.k8s.annotations import PRIORITY_LABEL, QUEUE_LABEL, REQUIRED, SNAPSHOT_TIME

RACK = "topology.example.com/rack"
HOST = "kubernetes.io/hostname"
TIME = "2026-12-01T12:00:00Z"

# (name, GPU type, racks, nodes per rack), in the MultiKueueConfig's order
FLEET = (("east", "h100", 4, 4), ("west", "a100", 2, 4), ("north", "l40s", 3, 2), ("south", "h200", 1, 4))
SMALL_FLEET = (("east", "h100", 2, 2), ("west", "a100", 1, 2))
GPUS_PER_NODE = 8


def _list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"annotations": {SNAPSHOT_TIME: TIME}},
            "items": items}


def _common(quota: dict[str, str], flavor: str) -> list[dict[str, Any]]:
    """Namespace, priority classes, the ClusterQueue and its LocalQueue (every cluster has them)."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "low"}, "value": 100},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpu-cq"},
         "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                      "flavors": [{"name": flavor, "resources": [
                                          {"name": r, "nominalQuota": q} for r, q in quota.items()]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "gpu-queue", "namespace": "team"}, "spec": {"clusterQueue": "gpu-cq"}},
    ]


def worker(name: str, gpu: str, racks: int, per_rack: int) -> dict[str, Any]:
    nodes = racks * per_rack
    items = _common({"cpu": str(64 * nodes), "memory": f"{512 * nodes}Gi", "nvidia.com/gpu": str(GPUS_PER_NODE * nodes)}, gpu)
    items.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "racks"},
                  "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}})
    items.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": gpu},
                  "spec": {"nodeLabels": {"gpu.example.com/type": gpu}, "topologyName": "racks"}})
    for r in range(racks):
        for n in range(per_rack):
            host = f"{name}-r{r + 1}-n{n + 1}"
            items.append({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": host, "labels": {HOST: host, RACK: f"{name}-r{r + 1}",
                                                                "gpu.example.com/type": gpu}},
                          "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(GPUS_PER_NODE),
                                                     "pods": "110"},
                                     "conditions": [{"type": "Ready", "status": "True"}]}})
    return _list(items)


def _job(i: int, priority: str, pods: int, gpus: int, rack: bool) -> dict[str, Any]:
    minute, second = divmod(i, 60)
    annotations = {REQUIRED: RACK} if rack else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"job-{i:03d}", "namespace": "team", "uid": f"00000000-0000-0000-0000-{i:012d}",
                         "creationTimestamp": f"2026-12-01T10:{minute:02d}:{second:02d}Z",
                         "labels": {QUEUE_LABEL: "gpu-queue", PRIORITY_LABEL: priority}},
            "spec": {"parallelism": pods, "completions": pods, "suspend": True,
                     "template": {"metadata": {"annotations": annotations},
                                  "spec": {"restartPolicy": "Never", "containers": [{
                                      "name": "main", "image": "trainer:1",
                                      "resources": {"requests": {"cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi",
                                                                 "nvidia.com/gpu": str(gpus)},
                                                    "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def manager(seed: int, workers: tuple[tuple[str, str, int, int], ...], load: float = 1.3,
            manager_share: float = 1.0) -> dict[str, Any]:
    """The manager's snapshot: quota for the fleet's GPUs x `manager_share`, and Jobs asking
    about `load` x the fleet's GPUs."""
    rng = random.Random(seed)
    total = sum(r * n * GPUS_PER_NODE for _, _, r, n in workers)
    nodes = total // GPUS_PER_NODE
    quota = {"cpu": str(64 * nodes), "memory": f"{512 * nodes}Gi", "nvidia.com/gpu": str(int(total * manager_share))}
    items = _common(quota, "default-flavor")
    items.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"},
                  "spec": {}})
    asked, i = 0, 0
    while asked < load * total:
        priority = "high" if rng.random() < 0.3 else "low"
        if rng.random() < 0.2:
            pods, gpus, rack = 4, 8, True          # a rack-requiring job: 32 GPUs in one rack
        else:
            pods, gpus, rack = 1, rng.choices((1, 2, 4, 8), weights=(70, 10, 15, 5))[0], False
        items.append(_job(i, priority, pods, gpus, rack))
        asked += pods * gpus
        i += 1
    return _list(items)


def fleet(seed: int, small: bool = False, load: float = 1.3) -> dict[str, dict[str, Any]]:
    """File stem -> List: `manager` and one per worker, in the config's order."""
    shape = SMALL_FLEET if small else FLEET
    out = {"manager": manager(seed, shape, load)}
    out.update({name: worker(name, gpu, racks, per_rack) for name, gpu, racks, per_rack in shape})
    return out
