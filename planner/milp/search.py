"""The MILP's search: the stages (planner.milp.stages) solved as a cut loop over the
stability rows. planner.milp.entry's `plan` calls it.

The stability rows (planner.milp.guarantee: nominal quota is a guarantee) are big-M
disjunctions; with all of them on, the LP relaxation says little and the search
finds few plans in a cycle. Most of them are never needed: a plan that admits the
most volume seldom leaves work waiting that its queue would reclaim for. So:

  1. the PASS stages (fair shares, every priority tier) are solved with the stability
     rows off. The model is then a relaxation of the whole problem, so each tier's
     bound is a bound on it too, and its LP is tight. The pass starts from nothing new (a tier's LP and dive find
     plans far from it), so it does not wait for Kueue's way, which runs on the
     second core meanwhile;
  2. the plan is judged by the verifier's own rule (`Judge.unstable`); where it
     leaves no workload that Kueue would reclaim for, it is the answer, unless Kueue's
     own plan (waited for now) is better: then one more pass starts from that;
  3. else the rows of the flagged workloads are put back, and the tiers are solved
     again, from the better of the plan carried on by Kueue's cycle (`Judge.carried`:
     what Kueue would do next, a plan the rule keeps) and Kueue's own plan; where that
     pass is flagged too, the rows of every waiting workload of the flagged ones'
     ClusterQueues (they share each queue's room and borrowing columns: with only some
     on, the optimum leaves the others waiting in their place), then every row;
  4. the best plan the rule keeps (a pass's, or a carried one) has its PASS stages
     held, and the TAIL stages (the preemption cost, then the tie-breakers) run from it.

The policy's maxEvictionsVsKueue (default 2) caps the evictions at that many times
Kueue's way's, once Kueue's way is in (after the first pass): a row of the model
from then on, a restriction like the held victims; where Kueue's way is not in
within the time limit, no cap applies and the plan's origin says which did.

A pass's plan that evicts work nobody needed (`Judge.unneeded`: the verifier's rule
that an eviction is needed by whom it is for; the model lets any admission allowed
to preempt a victim "carry" its eviction, wherever the room goes) is no candidate
either: its needless victims are held running from then on (their eviction columns
fixed at 0) and the next pass solves again. Holding is a restriction, not a
relaxation: the passes after it give no bounds.

Every bound reported holds for the model with all its rows: each pass that gives
bounds solves a relaxation of it (some rows off, no victim held), and a tier's bound from an earlier pass is used
only while every tier above it serves at least what it served there
(planner.milp.stages). Each pass starts from a clean model (the holds of a pass do
not bind the next). Only how far each stage gets depends on time.

Pure: no I/O. The judging is the caller's (planner.cycle): this layer may not import
the verifier or Kueue's cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from models import Decisions, ObjectRef
from planner.kueue.preemption.victims import PreemptionRules
from planner.base.budget import Budget
from planner.milp import stages
from planner.milp.stages import Phase
from planner.milp.arrays import INF, ModelArrays
from planner.milp.backends import HOLD_SLACK, PROVEN_TOLERANCE, Backend, StageResult, value_of
from planner.milp.decode import decode
from planner.milp.rows import Formulation
from planner.milp.solution import DecodeError
from planner.milp.start import ease_rows, empty_start, start_from
from planner.milp.warmstart import feasible

# Each pass may take this share of what is left; one with every row on (the last there
# can be) leaves only TAILS_SHARE for the preemption cost and the tie-breakers.
PASS_SHARE = 0.6
TAILS_SHARE = 0.2
# The first pass proves the bounds and finds most of the plan: it takes more.
FIRST_PASS_SHARE = 0.8
# Carrying a plan on by Kueue's cycle may take this share of what is left.
CARRY_SHARE = 0.3
# After the first pass, Kueue's way (a candidate and a start) is waited for at most this
# share of what is left of the stages' window.
KUEUE_WAIT_SHARE = 0.5
MAX_PASSES = 4


class Judge(Protocol):
    """The verifier's stability rule and Kueue's cycle, as the caller supplies them."""

    def unstable(self, decisions: Decisions) -> frozenset[ObjectRef] | None:
        """The waiting workloads Kueue's reclaim would admit after `decisions` (None: not
        judged in the time left)."""
        ...

    def unneeded(self, decisions: Decisions) -> frozenset[ObjectRef] | None:
        """The workloads `decisions` evicts although nobody needed their room (None: not
        judged in the time left)."""
        ...

    def carried(self, decisions: Decisions, rules: PreemptionRules | None, timeout: float) -> Decisions | None:
        """`decisions` carried on by Kueue's cycle to a plan the verifier accepts (an
        eviction kept only for admissions `rules` allow it for: who may evict whom in
        this snapshot, None where the model has no victims); None if there is none, or
        none within `timeout` seconds."""
        ...

    def kueue_way(self, timeout: float) -> Decisions | None:
        """Kueue's own plan (greedy), if the verifier accepts it and it is in within
        `timeout` seconds (waited for: it runs on the second core)."""
        ...


@dataclass(eq=False)
class Candidate:
    decisions: Decisions
    values: np.ndarray
    origin: str          # "pass N" | "pass N carried on by Kueue's cycle"


@dataclass
class Found:
    """What the search found: the plan (None: no plan), how it got there and its bounds."""

    decisions: Decisions | None
    status: str                                   # optimal | feasible | failed
    objective: float                              # volume over the tiers
    bound: float                                  # the tiers' bounds, summed
    stages: list[StageResult] = field(default_factory=list)
    passes: int = 0
    rows_on: int = 0                              # workloads whose stability rows were put back
    origin: str = ""
    repaired: int = 0                             # a pod without GPUs found no node (decode)
    message: str = ""

    @property
    def gap(self) -> float:
        if self.bound <= 0:
            return 0.0
        return max(0.0, (self.bound - self.objective) / abs(self.bound))


BackendMaker = Callable[[ModelArrays], Backend]


def solve(form: Formulation, make_backend: BackendMaker, budget: Budget, gap: float, judge: Judge,
          search: bool = True) -> Found:
    """The cut loop (module docstring), within `budget` (the tails get what the passes leave)."""
    rows = stability_rows(form)
    for row, _ in (r for held in rows.values() for r in held):
        form.arrays.row_upper[row] = INF
    empty = empty_start(form)
    incumbent = empty if feasible(form, empty) else None
    best: tuple[Candidate, list[StageResult]] | None = None
    outer: list[StageResult] = []
    history: list[StageResult] = []
    passes_stages: list[list[StageResult]] = []      # each pass's own stages, for the bounds
    on: set[ObjectRef] = set()
    way: Candidate | None = None
    asked = False
    repaired, passes = 0, 0
    kept: set[ObjectRef] = set()     # victims held running: the rule found nobody needed them
    cap: int | None = None           # at most this many evictions (the policy's bound against Kueue's way)
    for index in range(MAX_PASSES):
        if index and budget.until_stages_end() <= 0:
            break        # out of time: the best plan in hand stands
        passes += 1
        every_row = len(on) == len(rows)
        share = FIRST_PASS_SHARE if index == 0 else PASS_SHARE
        part = budget.part(1.0 - TAILS_SHARE if every_row or index == MAX_PASSES - 1 else share)
        outcome = stages.solve_pass(form, incumbent, make_backend(form.arrays), part, gap, search=search,
                                    relaxed=outer)
        history += [_named(s, index) for s in outcome.stages]
        if not kept and cap is None:
            passes_stages.append(outcome.stages)   # a relaxation: its bounds hold (holding victims is not one)
        if outcome.status == "failed":
            break
        try:
            decoded = decode(form, outcome.values)
        except DecodeError:
            break
        if decoded.repaired:
            repaired = decoded.repaired
            break
        outer = outcome.stages
        flagged = judge.unstable(decoded.decisions)
        needless = judge.unneeded(decoded.decisions) if flagged is not None else None
        if flagged is None or needless is None:
            break        # not judged in time: this pass's plan is no candidate, the best in hand stands
        held = needless - kept
        if held:
            kept |= held
            _hold_running(form, held)
        starts: list[Candidate] = []
        new: frozenset[ObjectRef] = frozenset()
        if not flagged and not held:
            own = Candidate(decoded.decisions, outcome.values, f"pass {index + 1}")
            best = _better(form, best, own, outcome.stages)
        else:
            # Put back the rows of the flagged workloads (escalating); the next pass
            # starts from the best plan the rule keeps: this one carried on by Kueue's
            # cycle, or Kueue's own.
            new = _escalated(form, rows, flagged, index) - on
            on |= new
            _put_back(form, rows, new)
            left = budget.until_stages_end()
            carried = judge.carried(decoded.decisions, form.preemption, CARRY_SHARE * left) if left > 0 else None
            values = start_from(form, carried, ease=True) if carried is not None else None
            if carried is not None and values is not None and feasible(form, values):
                starts.append(Candidate(carried, values, f"pass {index + 1} carried on by Kueue's cycle"))
        # Kueue's own plan, asked for once (it runs on the second core): a candidate,
        # and the next pass's start where it is the best plan in hand.
        if not asked:
            asked = True
            plan = judge.kueue_way(KUEUE_WAIT_SHARE * budget.until_stages_end())
            values = start_from(form, plan, ease=True) if plan is not None else None
            cap = _eviction_cap(form, plan)
            if cap is not None:
                _cap_evictions(form, cap)
                starts = [c for c in starts if feasible(form, c.values)]
                if best is not None and not feasible(form, best[0].values):
                    best = None
                if evictions(form, outcome.values) > cap:
                    held = held | frozenset({_CAPPED})   # this pass's plan churns too much: pass again
            if plan is not None and values is not None and feasible(form, values):
                way = Candidate(plan, values, "Kueue's way")
                starts.append(way)
        ahead = way is not None and any(c is way for c in starts) and best is not None and _ahead(form, way, best[0])
        for candidate in starts:
            best = _better(form, best, candidate, outcome.stages)
        if ahead and way is not None and not flagged and not held:
            # Kueue's plan beats this pass's: one more pass from it (rows as they are).
            incumbent = way.values
            continue
        if not new and not held:
            break        # the plan is stable (or the rows on do not hold the rule here)
        chosen = None
        for candidate in starts:
            chosen = _better(form, chosen, candidate, [])
        incumbent = chosen[0].values if chosen is not None else (empty if feasible(form, empty) else None)
    if best is None:
        message = "no plan the model allows was found within the time limit"
        if repaired:
            message = f"{repaired} workload(s) left out: a pod without GPUs found no node"
        return Found(None, "failed", 0.0, 0.0, history, passes, len(on), message=message, repaired=repaired)
    chosen_plan, _ = best
    if cap is not None:
        chosen_plan = Candidate(chosen_plan.decisions, chosen_plan.values,
                                f"{chosen_plan.origin}; evictions at most {cap} "
                                f"({form.snapshot.policy.max_evictions_vs_kueue:g}x Kueue's way's)")
    standing = _standing(form, chosen_plan, passes_stages)
    decisions, tails = _tails(form, chosen_plan, make_backend, budget, gap, judge, rows, on)
    volume = [s for s in standing if stages.is_volume(s)]
    objective = sum(s.objective for s in volume)
    bound = sum(s.bound for s in volume)
    proven = all(s.status == "optimal" for s in standing) and all(s.status in ("optimal", "kept") for s in tails)
    return Found(decisions, "optimal" if proven else "feasible", objective, bound, history + standing + tails,
                 passes, len(on), chosen_plan.origin)


_CAPPED = ObjectRef("", "", "")   # stands for "over the eviction cap" among the held victims


def _eviction_cap(form: Formulation, way: Decisions | None) -> int | None:
    """The policy's bound on evictions against Kueue's way (maxEvictionsVsKueue times
    its preemptions), once Kueue's way is in; None when off or not in."""
    factor = form.snapshot.policy.max_evictions_vs_kueue
    if way is None or factor <= 0 or not form.victims:
        return None
    return int(factor * sum(e.reason in ("Preempted", "Reclaimed") for e in way.evictions))


def _cap_evictions(form: Formulation, cap: int) -> None:
    """A row: at most `cap` evictions. A restriction: the passes after it give no bounds."""
    form.arrays.add_row("evictions vs Kueue's way", [(e, 1.0) for e in form.evict_col], -INF, float(cap))


def evictions(form: Formulation, values: np.ndarray) -> int:
    return sum(value_of([(e, 1.0)], values) > 0.5 for e in form.evict_col)


def _hold_running(form: Formulation, refs: frozenset[ObjectRef]) -> None:
    """Evict none of `refs` from now on: the rule found nobody needed their room in a
    pass's plan. A restriction, not a relaxation: the passes after it give no bounds."""
    for victim, col in zip(form.victims, form.evict_col):
        if victim.ref in refs:
            form.arrays.col_upper[col] = 0.0


def _escalated(form: Formulation, rows: dict[ObjectRef, list[tuple[int, float]]], flagged: frozenset[ObjectRef],
               index: int) -> frozenset[ObjectRef]:
    """Whose rows the pass after pass `index` puts back: the flagged workloads' at first;
    then, if that pass is flagged too, their ClusterQueues' (_queue_mates); then every row."""
    if index == 0:
        return flagged
    if index == 1:
        return _queue_mates(form, rows, flagged)
    return frozenset(rows)


def _queue_mates(form: Formulation, rows: dict[ObjectRef, list[tuple[int, float]]],
                 flagged: frozenset[ObjectRef]) -> frozenset[ObjectRef]:
    """The flagged workloads and every other waiting workload of their ClusterQueues with
    stability rows: their rows share each queue's room and borrowing columns, and a pass
    with only some of them on leaves the others waiting in their place."""
    queue_of = {w.ref: w.cluster_queue for members in form.members for w in members}
    queues = {queue_of.get(ref) for ref in flagged}
    return frozenset(flagged | {ref for ref in rows if queue_of.get(ref) in queues})


def _put_back(form: Formulation, rows: dict[ObjectRef, list[tuple[int, float]]], refs: frozenset[ObjectRef]) -> None:
    for ref in refs:
        for row, upper in rows.get(ref, ()):
            form.arrays.row_upper[row] = upper


def _standing(form: Formulation, chosen: Candidate, passes: list[list[StageResult]]) -> list[StageResult]:
    """Where the chosen plan stands, stage by stage (fair shares, then the tiers): what it
    reaches against the least bound any pass proved for it. Every pass solved a
    relaxation of the model, so its bound on a stage holds for the chosen plan while the
    plan reaches, on every stage above, what that pass held there. Proven while it
    reaches every bound so far."""
    out: list[StageResult] = []
    proven = True
    reached: dict[str, float] = {}
    for name, terms, most in ((o.name, o.terms, o.ceiling) for _, o in stages.objectives(form, Phase.PASS)):
        value = value_of(terms, chosen.values)
        ceiling = most
        for stages_of_pass in passes:
            by_name = {s.name: s for s in stages_of_pass}
            if name in by_name and all(reached[above] >= by_name[above].objective - HOLD_SLACK
                                       for above in reached if above in by_name):
                ceiling = min(ceiling, by_name[name].bound)
        ceiling = max(value, ceiling)
        reached[name] = value
        proven = proven and value >= ceiling - PROVEN_TOLERANCE * (1.0 + abs(ceiling))
        out.append(StageResult(name, "optimal" if proven else "feasible", value, ceiling, 0.0))
    return out


def stability_rows(form: Formulation) -> dict[ObjectRef, list[tuple[int, float]]]:
    """Per waiting workload, its stability rows and their upper bounds as built."""
    out: dict[ObjectRef, list[tuple[int, float]]] = {}
    for row, ref in form.guarantee.rows if form.guarantee is not None else ():
        out.setdefault(ref, []).append((row, form.arrays.row_upper[row]))
    return out


def _named(stage: StageResult, index: int) -> StageResult:
    return StageResult(f"{stage.name} (pass {index + 1})", stage.status, stage.objective, stage.bound, stage.seconds)


def _better(form: Formulation, best: tuple[Candidate, list[StageResult]] | None, new: Candidate,
            new_stages: list[StageResult]) -> tuple[Candidate, list[StageResult]]:
    """The better candidate in the objective's order (fair-sharing stages, then the tiers;
    the later on a tie: a later pass solved a tighter relaxation), with the tier stages
    of the pass it came from."""
    if best is None:
        return new, new_stages
    for terms in pass_terms(form):
        a, b = value_of(terms, new.values), value_of(terms, best[0].values)
        if a > b + HOLD_SLACK:
            return new, new_stages
        if a < b - HOLD_SLACK:
            return best
    return new, new_stages


def pass_terms(form: Formulation) -> list[list[tuple[int, float]]]:
    """The PASS stages' objectives in order (fair shares, then the tiers): what candidates
    are compared on."""
    return [objective.terms for _, objective in stages.objectives(form, Phase.PASS)]


TAIL_TRIES = 2   # the tails again, with the rows of what their plan left unstable put back


def _ahead(form: Formulation, a: Candidate, b: Candidate) -> bool:
    """Does `a` come strictly before `b` in the objective's order (fair shares, tiers)?"""
    for terms in pass_terms(form):
        x, y = value_of(terms, a.values), value_of(terms, b.values)
        if abs(x - y) > HOLD_SLACK:
            return x > y
    return False


def _tails(form: Formulation, chosen: Candidate, make_backend: BackendMaker, budget: Budget, gap: float,
           judge: Judge, rows: dict[ObjectRef, list[tuple[int, float]]],
           on: set[ObjectRef]) -> tuple[Decisions, list[StageResult]]:
    """Hold every PASS stage at what the chosen plan reaches; run the TAIL stages (the
    preemption cost, then the tie-breakers; each never worse than where it starts).
    Their plan is kept only if it decodes and the stability rule keeps it; where the rule
    flags some of its workloads, their rows are put back and the tails run again."""
    done: list[StageResult] = []
    if not stages.objectives(form, Phase.TAIL):
        return chosen.decisions, done
    budget.open_stages()
    for attempt in range(TAIL_TRIES):
        if budget.until_stages_end() <= 0:
            break        # out of time: the chosen plan stands as it is
        if form.guarantee is not None and not feasible(form, chosen.values):
            ease_rows(form, form.guarantee, chosen.values, frozenset())   # rows stricter than the rule, here
        values = stages.solve_tails(form, chosen.values, make_backend(form.arrays), budget, gap, done,
                                    attempt, TAIL_TRIES)
        if values is chosen.values:
            return chosen.decisions, done
        try:
            decoded = decode(form, values)
        except DecodeError:
            return chosen.decisions, done
        if decoded.repaired:
            return chosen.decisions, done
        needless = judge.unneeded(decoded.decisions)
        if needless is None or needless:
            return chosen.decisions, done
        flagged = judge.unstable(decoded.decisions)
        if flagged is None:
            return chosen.decisions, done
        if not flagged:
            return decoded.decisions, done
        new = _queue_mates(form, rows, flagged) - on
        if not new:
            break
        on |= new
        _put_back(form, rows, new)
    return chosen.decisions, done
