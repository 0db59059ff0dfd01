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
  registry    the admitted workloads per queue, in Kueue's candidate order
  quota       Kueue's quota arithmetic beyond available() (Quota, Overlay)
  shares      Kueue's fair-sharing arithmetic (dominant resource shares, targets)
  fairsharing Kueue's fair sharing for greedy: the admission tournament, fair preemption
  flavors     which flavors a pod set may take; the assignment's modes and types
  assigner    Kueue's flavor assigner for one head workload (Rules), and its
              getAssignments: `Rules(...).assign(w, cq)`, then `.targets_for(w, cq, a)`
  preemption/ Kueue's preemption: greedy's Preemptor (preemptor), one classical
              search (search), fair-sharing targets (fair); who may evict whom
              (victims.PreemptionRules), which running workloads to evict
              (preemptor, search, fair; after_plan for the explainer)

Only computes: no I/O, nothing of the cluster, click, yaml or the Kubernetes client.
"""
