"""The MILP: a snapshot's decisions as one mixed-integer program, solved in stages.

  model    Snapshot -> Formulation (columns and rows as arrays), decision-sized
  pools    node pools and their exact capacity rows
  start    Decisions -> a column vector (the MIP start)
  decode   a column vector -> Decisions (every pod on a node)

The model never has a column per (workload, node) nor, where nodes are
interchangeable, per (shape, node): see planner/milp/model.py.
"""
