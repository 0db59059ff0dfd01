"""Never two admitters: refuse to apply while Kueue's own controller manager is active.

Kueue and Stowplan both admit (unsuspend, ungate) and evict the same objects; with
both running, each undoes the other. Before a cycle writes anything it looks at the
two things an active Kueue manager leaves on a cluster:

- its leader-election Lease, kueue-system/c1f6bfd2.kueue.x-k8s.io (the default
  `leaderElection.resourceName` of Kueue's Configuration, apis/config/v1beta2/defaults.go),
  held and renewed within its leaseDurationSeconds. "Within" is judged by the API
  server's clock (the `Date` of the answer that carried the Lease), so a wrong or
  drifting local clock cannot make a live Lease look expired, or the reverse;
- its Deployment, kueue-system/kueue-controller-manager (Kueue's install manifests),
  with a ready replica.

Either one refuses the cycle (KueueActiveError, exit 8) naming what it found, unless
the operator passes `--allow-kueue-controller`; then it is only logged. A 403 on
either object (RBAC not granted) is said and does not block: the check is a guard
against a mistake, not a lock. Reading only: RBAC gets `get` on these two objects.
"""

from __future__ import annotations

import dataclasses
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable

from planner.cluster.kube import ApiStatus, Kube, path_of
from planner.cluster.lease import lease_time
from planner.base.errors import KueueActiveError

NAMESPACE = "kueue-system"
LEASE_NAME = "c1f6bfd2.kueue.x-k8s.io"
DEPLOYMENT_NAME = "kueue-controller-manager"
LEASE_PATH = path_of("coordination.k8s.io/v1", "leases", NAMESPACE, LEASE_NAME)
DEPLOYMENT_PATH = path_of("apps/v1", "deployments", NAMESPACE, DEPLOYMENT_NAME)
FLAG = "--allow-kueue-controller"


@dataclasses.dataclass(frozen=True)
class Finding:
    """What was seen of Kueue's manager: a sign it is active, or why it was not checked."""

    active: bool
    what: str


def server_time(date_header: str) -> float | None:
    try:
        return parsedate_to_datetime(date_header).astimezone(timezone.utc).timestamp() if date_header else None
    except (TypeError, ValueError):
        return None


def judge_lease(lease: dict[str, Any] | None, server_now: float | None) -> Finding | None:
    """A Finding when the Lease says Kueue's manager leads now; None when it is absent,
    unheld or expired. Without a server time (no Date header) a held Lease counts as live:
    when in doubt, do not admit beside another admitter."""
    if not isinstance(lease, dict):
        return None
    raw = lease.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    holder = spec.get("holderIdentity")
    if not isinstance(holder, str) or not holder:
        return None
    renewed = lease_time(spec.get("renewTime")) or lease_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    where = f"Lease {NAMESPACE}/{LEASE_NAME} held by {holder}"
    if renewed is None or type(duration) is not int:
        return Finding(True, f"{where} (no renewTime or leaseDurationSeconds to judge it by)")
    if server_now is None:
        return Finding(True, f"{where}, renewed {spec.get('renewTime')} (the API server sent no time)")
    left = renewed + duration - server_now
    if left <= 0:
        return None
    return Finding(True, f"{where}, renewed {spec.get('renewTime')}, valid {left:.0f}s more by the API "
                         f"server's clock")


def judge_deployment(deployment: dict[str, Any] | None) -> Finding | None:
    """A Finding when Kueue's Deployment has a ready replica, else None."""
    if not isinstance(deployment, dict):
        return None
    raw = deployment.get("status")
    status: dict[str, Any] = raw if isinstance(raw, dict) else {}
    ready = status.get("readyReplicas")
    if type(ready) is int and ready > 0:
        return Finding(True, f"Deployment {NAMESPACE}/{DEPLOYMENT_NAME} has {ready} ready replica(s)")
    return None


def _get(kube: Kube, path: str, what: str, say: Callable[[str], None]) -> tuple[Any, str]:
    """(the object or None, the server's Date of that answer); a 403 is said and reads as absent."""
    try:
        return kube.get_or_none(path), kube.last_date
    except ApiStatus as err:
        if err.status != 403:
            raise
        say(f"warning: may not read {what} to check that Kueue's controller manager is not running "
            "(grant get on it: cronjob/rbac.yaml); not checked")
        return None, ""


def findings(kube: Kube, say: Callable[[str], None]) -> list[Finding]:
    """Every sign that Kueue's controller manager is active on this cluster."""
    lease, date = _get(kube, LEASE_PATH, f"Lease {NAMESPACE}/{LEASE_NAME}", say)
    deployment, _ = _get(kube, DEPLOYMENT_PATH, f"Deployment {NAMESPACE}/{DEPLOYMENT_NAME}", say)
    found = [judge_lease(lease, server_time(date)), judge_deployment(deployment)]
    return [f for f in found if f is not None]


def check_no_kueue_controller(kube: Kube, *, allow: bool, say: Callable[[str], None],
                              warn: Callable[[str], None]) -> None:
    """Raise KueueActiveError when Kueue's manager is active, unless `allow` (then `warn` says so)."""
    found = findings(kube, say)
    if not found:
        return
    what = "; ".join(f.what for f in found)
    if allow:
        warn(f"warning: Kueue's controller manager is active ({what}); applying anyway because {FLAG} "
             "was given: two admitters may undo each other's admissions and evictions")
        return
    raise KueueActiveError(f"Kueue's controller manager is active on this cluster ({what}); two admitters would "
                           f"undo each other's work, nothing applied. Stop Kueue's manager (scale "
                           f"{NAMESPACE}/{DEPLOYMENT_NAME} to 0), or pass {FLAG} to apply anyway")
