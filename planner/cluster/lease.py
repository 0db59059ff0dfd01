"""One applier at a time: a coordination.k8s.io/v1 Lease taken before writing.

The Lease names its holder and lasts longer than a cycle (the CronJob's deadline
is 50 s, the default duration 60 s). Another holder's unexpired Lease refuses the
cycle (LeaseHeldError, exit 5); an expired one, or our own, is taken over. Every
change carries the Lease's resourceVersion, so two planners racing for it cannot
both win. A crashed cycle leaves its Lease to expire: the next one waits at most
one duration.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timezone
from typing import Any

from planner.cluster.kube import ApiStatus, Kube, path_of
from planner.base.errors import ClusterError, LeaseHeldError

DEFAULT_NAMESPACE = "stowplan-system"
DEFAULT_NAME = "stowplan-planner"
DEFAULT_DURATION = 60


def default_identity() -> str:
    """Who holds the Lease: the pod's name in a CronJob (HOSTNAME), plus the process id."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{os.getpid()}"


def _micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_time(text: Any) -> float | None:
    """A Lease's renewTime or acquireTime as epoch seconds; None where it is absent or no
    time (a Lease another program wrote is read leniently: it only ever means "not held")."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Lease:
    """`with Lease(kube, ...):` holds the Lease for the block and releases it after."""

    def __init__(self, kube: Kube, *, namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME,
                 identity: str | None = None, duration: int = DEFAULT_DURATION):
        self.kube, self.namespace, self.name = kube, namespace, name
        self.identity = identity or default_identity()
        self.duration = int(duration)
        self.held = False
        self._version = ""

    @property
    def path(self) -> str:
        return path_of("coordination.k8s.io/v1", "leases", self.namespace, self.name)

    def acquire(self) -> None:
        now = time.time()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                "acquireTime": _micro_time(now), "renewTime": _micro_time(now)}
        current = self.kube.get_or_none(self.path)
        try:
            if current is None:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
                created = self.kube.request("POST", path_of("coordination.k8s.io/v1", "leases", self.namespace),
                                            body=body)
            else:
                held = current.get("spec") or {}
                holder = held.get("holderIdentity") or ""
                renewed = lease_time(held.get("renewTime")) or lease_time(held.get("acquireTime")) or 0.0
                expires = renewed + float(held.get("leaseDurationSeconds") or 0)
                if holder and holder != self.identity and expires > now:
                    raise LeaseHeldError(
                        f"Lease {self.namespace}/{self.name} is held by {holder} until "
                        f"{_micro_time(expires)[:19]}Z ({expires - now:.0f}s from now); not applying")
                if holder == self.identity:
                    spec["acquireTime"] = held.get("acquireTime") or spec["acquireTime"]
                current["spec"] = {**held, **spec}
                created = self.kube.request("PUT", self.path, body=current)
        except ApiStatus as err:
            if err.status == 409:
                raise LeaseHeldError(f"Lease {self.namespace}/{self.name} was taken by another planner "
                                     "at the same moment; not applying") from None
            if err.status == 404:
                raise ClusterError(f"cannot take Lease {self.namespace}/{self.name}: namespace "
                                   f"{self.namespace} does not exist (create it, or set --namespace)") from None
            raise
        self._version = str((created or {}).get("metadata", {}).get("resourceVersion", ""))
        self.held = True

    def release(self) -> None:
        """Give the Lease up (only if it is still ours); failures leave it to expire."""
        if not self.held:
            return
        self.held = False
        try:
            current = self.kube.get_or_none(self.path)
            if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            current["spec"]["holderIdentity"] = None
            current["spec"].pop("renewTime", None)
            self.kube.request("PUT", self.path, body=current)
        except ClusterError:
            pass  # it expires by itself

    def __enter__(self) -> "Lease":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
