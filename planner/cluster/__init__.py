"""The live cluster: read a snapshot from the API server, apply a plan, hold the Lease.

An edge package: it may import the Kubernetes client; the planner's core never
imports it. `apply` is the only module that writes to a cluster.
"""

from planner.cluster.apply import Applier, ApplyReport
from planner.cluster.cycle import apply_live, load_plan, plan_live, resource_versions
from planner.cluster.kube import Kube, connect
from planner.cluster.lease import Lease
from planner.cluster.reader import LiveSnapshot, read_cluster

__all__ = ["Applier", "ApplyReport", "Kube", "Lease", "LiveSnapshot", "apply_live", "connect", "load_plan",
           "plan_live", "read_cluster", "resource_versions"]
