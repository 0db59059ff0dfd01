"""The live cluster: read a snapshot from the API server, apply a plan, hold the Lease.

  kube       the Kubernetes client, connected once
  reader     the cluster's objects -> models.Snapshot (through planner.snapshot)
  lease      the Lease that keeps two planners from applying at once
  apply      Plan -> cluster writes; the only module that writes to a cluster
  planfile   the plan file both ways: written by `plan --out`, read by `apply --plan`
  cycle      one live cycle: read -> plan -> (check) -> lease -> apply

An edge package: it may import the Kubernetes client and yaml; the planner's core
never imports it.
"""

from planner.cluster.apply import Applier, ApplyReport
from planner.cluster.cycle import apply_live, plan_live, resource_versions
from planner.cluster.planfile import load_plan
from planner.cluster.kube import Kube, connect
from planner.cluster.lease import Lease
from planner.cluster.reader import LiveSnapshot, read_cluster

__all__ = ["Applier", "ApplyReport", "Kube", "Lease", "LiveSnapshot", "apply_live", "connect", "load_plan",
           "plan_live", "read_cluster", "resource_versions"]
