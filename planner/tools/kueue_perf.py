"""Kueue's scheduler performance scenario, as a snapshot and a trace for `stowplan simulate`.

Kueue's `test/performance/scheduler` baseline (configs/baseline/generator.yaml) creates 5
cohorts of 6 ClusterQueues (nominal 20 cpu, borrowingLimit 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority), a namespace and LocalQueue per ClusterQueue, and per
ClusterQueue three workload streams created side by side: 350 `small` (1 cpu, priority 50,
running 200 ms) one every 100 ms, 100 `medium` (5 cpu, priority 100, 500 ms) one every
500 ms, 50 `large` (20 cpu, priority 200, 1,000 ms) one every 1,200 ms: 15,000 workloads.
Kueue publishes 351 s for it on envtest (REFERENCE §7, KUEUE-NOTES).

Kueue runs it without nodes (quota only); Stowplan always places pods on nodes, so the
snapshot adds `nodes_per_queue` nodes of 32 cpu per ClusterQueue (more room than the
quota: quota binds, as in Kueue's run). `scale` keeps that share of each stream (at least
one workload each). Pure: builds dicts; the CLI writes them.
"""

from __future__ import annotations

import math
from typing import Any

from planner.tools.generate import TRACE_API_VERSION
from planner.k8s.annotations import SNAPSHOT_TIME

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = "rf"
# (class, count, creation interval ms, runtime ms, priority, cpu)
BASELINE_STREAMS = (("small", 350, 100, 200, 50, 1), ("medium", 100, 500, 500, 100, 5),
                    ("large", 50, 1200, 1000, 200, 20))
COHORTS, QUEUES_PER_COHORT, NOMINAL, BORROWING_LIMIT = 5, 6, 20, 100
NODE_CPU = 32
START = "2026-12-01T12:00:00Z"


def queue_names() -> list[tuple[str, str]]:
    """(cohort, ClusterQueue) in Kueue's naming: cq-<set>-<index>-<cohort>."""
    return [(f"cohort-{c}", f"cq-0-{q}-cohort-{c}") for c in range(COHORTS) for q in range(QUEUES_PER_COHORT)]


def baseline_snapshot(nodes_per_queue: int = 1) -> dict[str, Any]:
    """The scenario's cluster: flavor, cohorts, ClusterQueues, LocalQueues, priority classes, nodes."""
    items: list[dict[str, Any]] = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
                                    "spec": {}}]
    for _, priority_value, name in sorted({(s[4], s[4], f"p{s[4]}") for s in BASELINE_STREAMS}):
        items.append({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                      "value": priority_value})
    for cohort in sorted({c for c, _ in queue_names()}):
        items.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": cohort}, "spec": {}})
    for cohort, cq in queue_names():
        items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cq}})
        items.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
            "cohortName": cohort, "namespaceSelector": {},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [
                {"name": "cpu", "nominalQuota": str(NOMINAL), "borrowingLimit": str(BORROWING_LIMIT)}]}]}]}})
        items.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": cq, "namespace": cq},
                      "spec": {"clusterQueue": cq}})
    for i in range(len(queue_names()) * nodes_per_queue):
        name = f"node-{i:04d}"
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name}}, "status": {
            "allocatable": {"cpu": str(NODE_CPU), "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
    return {"apiVersion": "v1", "kind": "List", "items": items,
            "metadata": {"annotations": {SNAPSHOT_TIME: START}}}


def baseline_trace(scale: float = 1.0) -> list[dict[str, Any]]:
    """The scenario's workloads as trace lines (header first), in submit order."""
    if not 0 < scale <= 1:
        raise ValueError("scale: above 0 and at most 1")
    lines: list[dict[str, Any]] = []
    last = 0.0
    for set_index, (cls, count, every_ms, runtime_ms, priority, cpu) in enumerate(BASELINE_STREAMS):
        kept = max(1, math.ceil(count * scale))
        for _, cq in queue_names():
            for k in range(kept):
                submit = (k + 1) * every_ms / 1000.0          # Kueue's runner waits one interval first
                last = max(last, submit)
                lines.append({"submit": submit, "namespace": cq, "queue": cq, "name": f"{cls}-{set_index}-{k}-0",
                              "priorityClass": f"p{priority}",
                              "podSets": [{"count": 1, "requests": {"cpu": str(cpu)}}],
                              "duration": runtime_ms / 1000.0})
    lines.sort(key=lambda line: (line["submit"], line["namespace"], line["name"]))
    header = {"apiVersion": TRACE_API_VERSION, "kind": "Trace", "hours": None,
              "generator": {"scenario": "kueue-baseline", "scale": scale, "workloads": len(lines)}}
    del header["hours"]        # until the last arrival, unless --hours says longer
    return [header, *lines]
