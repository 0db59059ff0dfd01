"""The MILP: a snapshot's decisions as one mixed-integer program, solved in stages.

Takes a models.Snapshot (and greedy's Decisions as a start); gives Decisions.

  formulate     the shared rows: classes of identical workloads, flavor options
                (OptionColumns), victims (who may evict whom: planner.kueue.victims),
                quota, objectives
  guarantee     the stability rows: nominal quota is a guarantee
  model         Snapshot -> Formulation (columns and rows as arrays), decision-sized
  pools         node pools and their exact capacity rows
  arrays        the model as plain arrays (ModelArrays)
  start         Decisions -> a column vector (the MIP start)
  warmstart     the start's columns that follow from its decisions
  solve         the backends (HiGHS through highspy, any PuLP solver) and honest statuses
  highs         a ModelArrays handed to HiGHS in one call, quietly
  neighbourhood the search around the LP point (RINS) that gets a stage past its start
  stages        the lexicographic solve, tier by tier, within the cycle's budget
  solution      reading solver values: counts, demands per member, evictions
  decode        a column vector -> Decisions (every pod on a node)

The model never has a column per (workload, node) nor, where nodes are
interchangeable, per (shape, node): see planner/milp/model.py.
"""
