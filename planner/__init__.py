"""Stowplan's pipeline, one package or module a step:

  snapshot/   read: Kubernetes objects (files, or the cluster through cluster/) -> models.Snapshot
  kueue/      Kueue's rules and the cluster state every decider shares
  greedy      Kueue's cycle replayed: the baseline, the MIP start, the fallback
  milp/       formulate -> arrays -> solve -> decode: Snapshot -> Decisions
  verify/     the independent check of Decisions against their Snapshot, a module per rule, typed Violations
  explain, metrics   why a workload waits, the plan's numbers
  cycle       one planning cycle, in order (greedy -> MILP -> verify -> Plan); tiers, budget, gc_pause
  output      Plan -> yaml, json, a table
  cluster/    the live cluster: read, Lease, apply (the only writer), the plan file both ways
  cli         the click commands; the only place that turns errors into exit codes
  tools/      generate and bench, beside the product

Imports point down this list (tests/test_layers.py keeps it so); models/ is the vocabulary every step shares.
"""
