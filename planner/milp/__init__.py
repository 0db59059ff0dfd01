"""The MILP: a snapshot's decisions as one mixed-integer program, solved in stages.

Takes a models.Snapshot (and greedy's Decisions as a start); gives Decisions.

  rows          the Formulation (the one model class) and the shared rows: classes of
                identical workloads, flavor options
                (OptionColumns), victims (who may evict whom: planner.kueue.preemption.victims),
                quota, objectives
  guarantee     the stability rows: nominal quota is a guarantee
  model         Snapshot -> Formulation (columns and rows as arrays), decision-sized
  pools         node pools and their exact capacity rows
  arrays        the model as plain arrays (ModelArrays)
  start         Decisions -> a column vector (the MIP start)
  warmstart     the start's columns that follow from its decisions
  backends      the backends (HiGHS through highspy, any PuLP solver) and honest statuses
  highs         a ModelArrays handed to HiGHS in one call, quietly
  neighbourhood the search around the LP point (RINS) that gets a stage past its start
  stages        the Stage protocol and STAGES, the objective's one ordered list (fair
                shares, priority tiers, preemption cost, tie-breakers): a new stage is a
                class and a line there; one pass of them, and the tails
  solution      reading solver values: counts, demands per member, evictions
  decode        a column vector -> Decisions (every pod on a node)
  search        the passes: the PASS stages with the stability rows off, rows put back
                where the verifier's rule flags them, then the TAIL stages
  entry         the one way in: plan(snapshot, judge, budget, SolveOptions) -> Outcome

Everything outside planner/milp imports this package, never its modules (tests/test_layers.py):
`plan(snapshot, judge, budget, options)` (planner.base.solve_options, merged with the policy), with the cycle's `Judge`
(the verifier's rules, Kueue's cycle and Kueue's own plan, which this layer may not
import); and for the capacity what-if's own small model, a quiet HiGHS (`new_highs`,
`stop_on_signal`).

The model never has a column per (workload, node) nor, where nodes are
interchangeable, per (shape, node): see planner/milp/model.py.
"""

from planner.milp.entry import Outcome, plan
from planner.milp.rows import candidates
from planner.milp.highs import new_highs, show_solver_log, stop_on_signal
from planner.milp.search import Judge
from planner.milp.backends import PulpBackend

__all__ = ["Judge", "Outcome", "PulpBackend", "candidates", "new_highs", "plan", "show_solver_log",
           "stop_on_signal"]
