"""Kueue's rules, and the cluster state every decider shares.

Takes a models.Snapshot; gives what greedy (planner.greedy), the MILP (planner.milp)
and the explainer (planner.describe.reasons) all ask of Kueue, so none of them reaches into
another:

  semantics   small pure rules: flavor options, node eligibility, priorities, the
              quota tree with Kueue's available(), who may preempt whom
  capacity    free capacity per node and usage per queue before the plan
  topology    a flavor's topology levels and each node's domain path
  placement   Kueue's TAS placement: how many pods on which node, for one pod set
  state       ClusterState: free nodes and quota usage, updated in place
  fit         does a workload fit the state, and where (PodSetChoice)
  victims     Kueue's classical preemption: who may evict whom (PreemptionRules),
              which running workloads to evict (Preemption)
  assigner    Kueue's flavor assigner and preemption targets for one head workload

Only computes: no I/O, nothing of the cluster, click, yaml or the Kubernetes client.
"""
