"""The last cycle's status in the cluster: ConfigMap `stowplan-status` in the planner's
namespace, so `kubectl get configmap stowplan-status -o yaml` answers "did the last
cycle run and what did it do".

One write per cycle, after applying: a merge patch of that one ConfigMap (RBAC:
`patch` on resourceNames [stowplan-status]); the first cycle creates it (`create`,
which RBAC cannot limit by name). Every key is written every time, so nothing stale
is left. A dry run writes it with dryRun=All like every other write (nothing changes).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Mapping

from models import Plan
from planner.describe import vs_kueue
from planner.cluster.apply import ApplyReport
from planner.cluster.kube import MERGE_PATCH, ApiStatus, Kube, path_of

NAME = "stowplan-status"
MAX_CONFLICTS_SHOWN = 20


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


def _finite(value: float) -> float | None:
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def status_data(plan: Plan, report: ApplyReport, now: float) -> dict[str, str]:
    """The ConfigMap's data: strings only, one key per fact."""
    summary: Mapping[str, Any] = plan.summary
    block = summary.get(vs_kueue.KEY)
    conflicts = [f"{ref}: {why}" for ref, why in report.conflicts]
    shown = conflicts[:MAX_CONFLICTS_SHOWN]
    if len(conflicts) > len(shown):
        shown.append(f"... {len(conflicts) - len(shown)} more")
    return {
        "time": datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "method": plan.solver.method,
        "status": plan.solver.status,
        "message": plan.solver.message,
        "gap": _json(_finite(plan.solver.gap)),
        "objective": _json(_finite(plan.solver.objective)),
        "bound": _json(_finite(plan.solver.bound)),
        "seconds": _json({k: round(float(v), 3) for k, v in plan.solver.seconds.items()}),
        "admitted": str(len(plan.admissions)),
        "evicted": str(len(plan.evictions)),
        "pending": str(len(plan.pending)),
        "servedGpus": _json({str(k): v for k, v in dict(summary.get("served_gpus") or {}).items()}),
        "servedCores": _json({str(k): v for k, v in dict(summary.get("served_cores") or {}).items()}),
        "preemptionCost": _json(summary.get("preemption_cost", 0)),
        "applied": report.summary(),
        "dryRun": "true" if report.dry_run else "false",
        "conflicts": str(len(conflicts)),
        "conflictDetails": "\n".join(shown),
        "vsKueue": str(block["says"]) if isinstance(block, Mapping) else "",
        "gainOverGreedyGpus": _json({str(k): v for k, v in vs_kueue.gain_gpus(block).items()})
        if isinstance(block, Mapping) else "{}",
    }


def write_status(kube: Kube, namespace: str, data: Mapping[str, str]) -> None:
    """Patch ConfigMap `stowplan-status` in `namespace` with `data`; create it if absent.
    Raises ApiStatus / ClusterError as every cluster call does."""
    path = path_of("v1", "configmaps", namespace, NAME)
    try:
        kube.write("PATCH", path, {"data": dict(data)}, content_type=MERGE_PATCH)
        return
    except ApiStatus as err:
        if err.status != 404:
            raise
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "stowplan"}},
            "data": dict(data)}
    try:
        kube.write("POST", path_of("v1", "configmaps", namespace), body)
    except ApiStatus as err:
        if err.status != 409:      # made meanwhile (a dry run's create leaves nothing): patch it
            raise
        kube.write("PATCH", path, {"data": dict(data)}, content_type=MERGE_PATCH)
