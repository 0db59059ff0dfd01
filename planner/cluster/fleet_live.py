"""The fleet read live, for `stowplan plan --worker NAME=KUBECONFIG ...` (or
`--multikueue-config NAME`): every worker cluster read as `plan` reads one cluster
(planner.cluster.reader), and what a saved fleet plan records of the manager's objects so
that `apply --plan FILE --worker ...` can tell whether they changed (planner.cluster.dispatch).

A worker that does not answer (connection refused, a timeout, HTTP 5xx or 429, as
planner.cluster.dispatch counts it) is named in WorkerUnreachableError (exit 7) once every
worker has been tried: no plan is made from part of the fleet. A worker that answers with
a refusal (401, 403, ...) is a cluster API error naming it (exit 4).
"""

from __future__ import annotations

from typing import Callable, Mapping

from models import ObjectRef, Plan
from planner.cluster.cycle import fingerprints, resource_versions
from planner.cluster.kube import ApiStatus, Kube
from planner.cluster.reader import LiveSnapshot, read_cluster
from planner.base.errors import ClusterError, WorkerUnreachableError


def read_workers(workers: Mapping[str, Kube], *, policy_file: str | None = None,
                 say: Callable[[str], None] = lambda _: None) -> list[tuple[str, LiveSnapshot]]:
    """Each worker, in the order given (the MultiKueueConfig's), read live."""
    read: list[tuple[str, LiveSnapshot]] = []
    lost: dict[str, str] = {}
    for name, kube in workers.items():
        say(f"reading worker cluster {name} ({kube.host})")
        try:
            read.append((name, read_cluster(kube, policy_file=policy_file, say=say)))
        except ApiStatus as err:
            if err.status < 500 and err.status != 429:
                raise ClusterError(f"worker cluster {name}: {err}") from None
            lost[name] = str(err)
        except ClusterError as err:
            lost[name] = str(err)
    if lost:
        raise WorkerUnreachableError(
            "unreachable worker clusters: " + "; ".join(f"{n}: {why}" for n, why in sorted(lost.items()))
            + ". Nothing planned, nothing written: a plan of part of the fleet could send work where another "
              "worker's would fit better")
    return read


def manager_versions(plan: Plan, manager: LiveSnapshot) -> tuple[dict[ObjectRef, str], dict[ObjectRef, str]]:
    """The resourceVersions and fingerprints, at read time, of the manager's objects the plan
    touches (its Jobs to dispatch, or to evict from their worker). A worker's own workload
    the plan evicts has no object on the manager and no version here."""
    known = {w.ref for w in manager.snapshot.workloads}
    versions = {ref: v for ref, v in resource_versions(plan, manager).items() if ref in known}
    return versions, fingerprints(plan, manager)

