"""One cycle, in order: greedy and the start beside the model, solve, decode, gather, verify,
choose, assemble.

The greedy plan is the fallback when the MILP finds nothing or fails, and the
yardstick the MILP plan must meet. The MIP start is greedy's plan improved by
topology-aware victims (planner.improve), or greedy's own plan under the policy's
greedyFloor; both are computed on a second core while the model is built
(planner.starts). Whatever plan is chosen has passed the independent verifier; if
none passes, that is an error.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import replace
from typing import Callable

import numpy as np

from models import Decisions, Plan, Snapshot, SolverReport
from planner import score
from planner.assemble import Description, assemble, describe
from planner.beside import Beside
from planner.bound import TierBounds
from planner.decode import DecodeError, decode
from planner.errors import VerificationError
from planner.formulate import Formulation, formulate
from planner.highs import LpRelaxation
from planner.relocate import relocate
from planner.restore import restore
from planner.solve import (
    MAX_NONZEROS, TAIL_SHARE, HighsBackend, LazyBackend, PulpBackend, StageResult, refine, relaxation_ahead, solvable,
    solve,
)
from planner.starts import Due, Starts, starts, starts_beside
from planner.verify import verify
from planner.warmstart import empty_start, start_from


# Share of the time limit the start may spend improving on greedy's victims (planner.improve).
IMPROVE_SHARE = 0.3
# The improved start is due this share of the time limit before the stages' deadline:
# it still has to come back from the second core and be checked against the model
# (measured at M: 0.3 s after an improvement that stopped at the deadline itself).
HANDOFF_SHARE = 0.05
# Share of the time limit kept back for decoding, gathering, verifying, explaining and
# writing the plan (measured after the stages: at M up to 0.97 s of its 4.3 s when a
# stage changed the plan, at L 5.2 s of its 26.5 s; 18% and 20% let M's cycle overrun
# its limit by a few tenths).
FINISH_SHARE = 0.23
# A model too large to solve in a cycle leaves the plan to the improved start, which may
# then take the stages' time too: all but this share of the limit, for checking the
# start against the model, bounding it, verifying, explaining and writing. Measured from
# the start's due to the plan (the preemption hints cut short by SUMMARY_SHARE): at L
# 2.4 s of a limit of 18 s and, in a slow spell, 4.2 s of 26 s (16%); at XL 10.4 s of
# 114 s and, in a slow spell, 13.3 s of 103 s, after the start overran its due by 6 s
# in its setup (which now gives up at its deadline too).
UNSOLVED_TAIL_SHARE = 0.2
# Where the limit is short for the stages (stages_can_search), the start is due this
# share of the limit before its end: the rest is checking the start against the model,
# bounding, verifying, explaining (beside: Described) and writing (measured at M:
# 0.5-0.9 s of 4.2 s; 0.75-1.0 s before explaining moved to the second core).
SHORT_TAIL_SHARE = 0.2
# A stage searches only once its LP is solved, and the first volume stage must end by
# about this share of the limit (planner.solve keeps the rest for the stages after it).
STAGE_END_SHARE = 0.45
# The LP takes about LP_PER_BUILD times as long as building the model at
# LP_REFERENCE_NONZEROS, more per nonzero as models grow (measured: 30k nonzeros, LP
# 0.05 s after a 0.09 s build; 330k, 1.45 s after 0.89 s: LP time grows as nnz^1.4).
LP_PER_BUILD = 1.5
LP_REFERENCE_NONZEROS = 300_000
LP_GROWTH = 0.4
# Share of the time limit left, at the end, for the rest of explaining (the reasons
# without their hints), the summary metrics and writing the plan: explaining adds its
# preemption hints (the costly part) only before that. Measured at L: 1.3 s of reasons
# and 0.6 s of metrics, 7% of its 27 s.
SUMMARY_SHARE = 0.08


def stages_can_search(form: Formulation, model_seconds: float, limit: float) -> bool:
    """Could the first volume stage search before it must end? Its LP, estimated from the
    model's build (which measures this machine's speed of the moment) and size, and a
    search as long again, after the build. Not at M with its 4.75 s (never in any run
    measured): there the start, which packs better than a stage's short search, takes
    the stages' time, as for a model too large to solve."""
    lp = LP_PER_BUILD * model_seconds * (len(form.arrays.entry_val) / LP_REFERENCE_NONZEROS) ** LP_GROWTH
    return model_seconds + 2 * lp <= STAGE_END_SHARE * limit


def run_cycle(snapshot: Snapshot, solver: str, read_seconds: float = 0.0) -> Plan:
    """Plan one cycle. The policy's time limit holds the whole of it, reading included (a
    CronJob has a cycle, not a solver budget): each step past greedy (which always
    finishes: it is the fallback) takes what is left."""
    policy = snapshot.policy
    limit = max(0.0, policy.time_limit_seconds - read_seconds)
    began = time.monotonic()
    clock = Clock(read_seconds, hints_until=began + limit * (1 - SUMMARY_SHARE))
    deadline = began + limit * (1 - FINISH_SHARE)
    due = Due(deadline - HANDOFF_SHARE * limit)
    if solver == "greedy":
        plans = starts(snapshot, None, due)
        clock.lap("build")
        violations = verify(snapshot, plans.baseline)
        if violations:
            raise VerificationError(violations)
        return finished(snapshot, plans.baseline, greedy_report(snapshot, plans.baseline, clock), clock)

    # Greedy and the improved start on the second core while the compact model (volumes
    # and preemption cost) is built here; the tie-breakers come later on the full one
    # (domains spanned, free domains, age, flavor order), volumes held.
    # Here too: the first stage's LP relaxation (planner.rins searches around it) and,
    # while the starts are not ready, the small relaxation that bounds stages cut short
    # (planner.bound; else built when needed). Neither needs the start. A model too large
    # to solve in a cycle is not built past that size: its stages keep the start, so the
    # small relaxation is all it is for, and is built at once; and the start, which is then
    # the plan, may take the stages' time.
    def build(starts_ready: Callable[[], bool]) -> tuple[Formulation, float, LpRelaxation | None, TierBounds | None]:
        building = time.monotonic()
        form = formulate(snapshot, locality=False, max_nonzeros=MAX_NONZEROS)
        model_seconds = time.monotonic() - building
        too_large = not solvable(form)
        if too_large or not stages_can_search(form, model_seconds, limit):
            # The stages would not get to search: the start takes their time (and this
            # core, once the small relaxation that bounds the plan is built: see
            # planner.starts).
            due.extend(began + limit * (1 - (UNSOLVED_TAIL_SHARE if too_large else SHORT_TAIL_SHARE)))
            return form, model_seconds, None, TierBounds(form)
        due.keep()
        # The LP may take until the start is due (at M it takes about as long as the start,
        # and a fixed share of the limit cut it short in slow spells, leaving the stage
        # nothing to search around).
        ahead = relaxation_ahead(form, policy.threads, due.at - time.monotonic()) if solver == "milp" else None
        bounds = TierBounds(form) if not form.complete or not starts_ready() else None
        return form, model_seconds, ahead, bounds

    improve_seconds = None if policy.greedy_floor else IMPROVE_SHARE * limit   # the floor is greedy's own plan
    plans, (form, model_seconds, ahead, bounds) = starts_beside(snapshot, improve_seconds, due, build)
    baseline = plans.baseline
    # Where no stage will search (an extended due), the improved start is the plan unless
    # the verifier rejects it: the second core, free again, works out its pending reasons
    # and summary while this one verifies and bounds it (at M 0.3 s of the cycle's 1 s
    # after the start; at L 2 s of 4). Its preemption hints stop once this core is done
    # (description_of).
    described = Described(plans.better, snapshot, clock.hints_until) if due.extended else None
    start_plan, start, start_verified = start_for(snapshot, form, plans)
    note = "" if start is not None or not baseline.admissions else "greedy start rejected by the model; "
    if not solvable(form):
        note += (f"model over {MAX_NONZEROS:,} nonzeros, not solved in a cycle: the plan is the start, "
                 "bounded by the small relaxation; ")
    has_start = start is not None
    if start is None:
        start = empty_start(form)
    backend = make_backend(form, solver, snapshot, ahead)
    clock.lap("build")
    left = max(0.0, deadline - time.monotonic())
    # Time for the tie-breakers on the full model is kept back only where it would be
    # enough to build that model (tie_break's test), else the stages take it all.
    kept_back = TAIL_SHARE * left if TAIL_SHARE * left >= 2 * model_seconds else 0.0
    outcome = solve(form, start, backend, left - kept_back, policy.mip_gap,
                    polish=lambda v: polished(form, v),
                    floor_at_start=policy.greedy_floor and has_start, bounds=bounds)
    try:
        # A start no stage improved on is kept as it was placed (greedy's BestFit keeps
        # pod sets together; decoding the same volumes again need not).
        unchanged = np.array_equal(outcome.values, start)
        decoded = start_plan if unchanged else decode(form, outcome.values)
        # Preferred pod sets gathered again (planner.relocate), then the evictions the
        # admissions do not need taken back (planner.restore: gathering can free room);
        # as decoded should the verifier ever reject that.
        moved = decoded if unchanged else restore(snapshot, relocate(snapshot, decoded))
        clock.lap("solve")   # decoding is part of finding the answer
        decisions, tie_stage = tie_break(snapshot, solver, moved, deadline, policy.mip_gap, clock,
                                         model_seconds, solvable(form))
        outcome.stages.append(tie_stage)
        # Only the plan chosen is verified, once: the improved start already was where no
        # stage changed it (start_for); greedy's own only where it is that plan, or the
        # fallback (at L its verification took 0.5 s of the second core, before the start).
        violations = [] if decisions is start_plan and start_verified else verify(snapshot, decisions)
        if violations and decisions is moved and moved != decoded:
            decisions, violations = decoded, verify(snapshot, decoded)
    except DecodeError as error:
        decisions, violations = Decisions(), [str(error)]
    clock.lap("verify")

    method = "milp" if solver == "milp" else solver
    why = ""
    if outcome.status == "failed":
        why = f"MILP found no plan ({outcome.message})"
    elif violations:
        why = f"MILP plan failed verification ({violations[0]})"
    elif score.compare(score.tier_volumes(snapshot, decisions), score.tier_volumes(snapshot, baseline)) < 0 \
            and (not form.complete or start_from(form, baseline) is not None):
        # (A greedy plan the model rules out, one Kueue's reclaim would undo, is no yardstick.)
        why = "MILP plan scored below greedy"
    if why:
        greedy_violations = violations if decisions == baseline else verify(snapshot, baseline)
        if greedy_violations:
            raise VerificationError(violations or greedy_violations)
        report = greedy_report(snapshot, baseline, clock, status="fallback", message=why, method=method)
        return finished(snapshot, baseline, report, clock, form.excluded, description_of(baseline, described))
    proven = all(s.status in ("optimal", "kept") for s in outcome.stages)
    # The plan's own volume: what was done after the stages (evictions taken back) counts
    # too, and the stages' bounds hold it (each tier's bound assumes only that the tiers
    # above serve at least what their stages reached).
    outcome.objective = volume(snapshot, decisions)
    report = SolverReport(
        method=method, status="optimal" if proven else "feasible", objective=round(outcome.objective, 6),
        bound=round(outcome.bound, 6), gap=round(outcome.gap, 6), seconds=clock.seconds(),
        message=note.rstrip("; "), stages=tuple(s.as_dict() for s in outcome.stages),
    )
    return finished(snapshot, decisions, report, clock, form.excluded, description_of(decisions, described))


class Described:
    """`decisions` described (planner.assemble.describe) on the second core, with
    preemption hints until `hints_until` or until the answer is asked for, whichever
    comes first: hints are worth no wait."""

    def __init__(self, decisions: Decisions, snapshot: Snapshot, hints_until: float):
        self.decisions = decisions
        self.hints_until = multiprocessing.RawValue("d", hints_until)   # shared with the child
        self.beside = Beside(lambda: describe(snapshot, decisions, lambda: self.hints_until.value))

    def answer(self) -> Description:
        self.hints_until.value = min(self.hints_until.value, time.monotonic())
        return self.beside.result()


def description_of(decisions: Decisions, described: Described | None) -> Description | None:
    """The description worked out beside, if it is of `decisions` (else it is not wanted)."""
    if described is None:
        return None
    if described.decisions is decisions:
        return described.answer()
    described.beside.cancel()
    return None


def volume(snapshot: Snapshot, decisions: Decisions) -> float:
    """The objective's volume terms summed over the tiers (what the stages maximise)."""
    return sum(score.tier_volumes(snapshot, decisions).values())


def finished(snapshot: Snapshot, decisions: Decisions, report: SolverReport, clock: "Clock",
             excluded: dict | None = None, description: Description | None = None) -> Plan:  # type: ignore[type-arg]
    """The Plan, with explaining what waits and summarising (or waiting for them to be
    worked out beside: `description`) counted in `verify` (and the total): the cycle is
    not over before they are."""
    plan = assemble(snapshot, decisions, report, excluded, hints_until=clock.hints_until, description=description)
    clock.lap("verify")
    return replace(plan, solver=replace(plan.solver, seconds=clock.seconds()))


def start_for(snapshot: Snapshot, form: Formulation, plans: Starts) -> tuple[Decisions, np.ndarray | None, bool]:
    """The improved start if the verifier passes it and the model takes it, else greedy's
    plan, as decisions and a column vector, and whether the plan was verified here (the
    improved start is, once, here and not on the second core: where no stage changes it,
    it is the plan, and the cycle's last verifying is this one; greedy's plan only where
    it is used, see run_cycle); no plan and None when the model takes neither."""
    if plans.better != plans.baseline and not verify(snapshot, plans.better):
        values = start_from(form, plans.better)
        if values is not None:
            return plans.better, values, True
    values = start_from(form, plans.baseline)
    return (plans.baseline, values, False) if values is not None else (Decisions(), None, False)


def tie_break(snapshot: Snapshot, solver: str, decisions: Decisions, deadline: float, gap: float,
              clock: "Clock", model_seconds: float = 0.0, compact_solvable: bool = True) -> tuple[Decisions, StageResult]:
    """Refine `decisions` on the full model with what time is left; keep them if that fails.
    Skipped when what is left would not build the full model (it takes longer than the
    compact one's `model_seconds`) and give it a moment, or when the compact model
    cannot be solved in a cycle (the full one is larger)."""
    skipped = StageResult("tie-breakers", "skipped", 0.0, 0.0, 0.0)
    left = deadline - time.monotonic()
    if left <= 0.01 or left < 2 * model_seconds or not compact_solvable:
        return decisions, skipped
    full = formulate(snapshot, locality=True, max_nonzeros=MAX_NONZEROS)
    start = start_from(full, decisions) if solvable(full) else None
    if start is None:
        return decisions, skipped
    backend = make_backend(full, solver, snapshot)
    clock.lap("build")
    budget = min(deadline - time.monotonic(), TAIL_SHARE * snapshot.policy.time_limit_seconds)
    if not backend.worth_starting(budget):
        return decisions, skipped
    values, stage = refine(full, start, backend, max(0.05, budget), gap)
    clock.lap("solve")
    try:
        return decode(full, values), stage
    except DecodeError:
        return decisions, StageResult("tie-breakers", "failed", stage.objective, stage.bound, stage.seconds)


def polished(form: Formulation, values):  # type: ignore[no-untyped-def]
    """The same plan, re-expressed without slack (decode, then encode); unchanged if that fails."""
    try:
        clean = start_from(form, decode(form, values))
    except DecodeError:
        return values
    return values if clean is None else clean


def make_backend(form: Formulation, solver: str, snapshot: Snapshot,
                 relaxation: LpRelaxation | None = None) -> LazyBackend:
    """The solver for `form`, handed the model only when a stage first runs. With HiGHS,
    the stages search around the LP point only when `relaxation` was solved ahead
    (where it was not, their own shorter tries would fail too)."""
    policy = snapshot.policy
    size, whole = len(form.arrays.entry_val), solvable(form)
    if solver == "milp":
        return LazyBackend(lambda: HighsBackend(form.arrays, threads=policy.threads, seed=policy.seed,
                                                relaxation=relaxation, searches=relaxation is not None), size, whole)
    if solver.startswith("pulp:"):
        return LazyBackend(lambda: PulpBackend(form.arrays, solver.split(":", 1)[1], threads=policy.threads),
                           size, whole)
    raise ValueError(f"unknown solver {solver!r}")


def greedy_report(snapshot: Snapshot, decisions: Decisions, clock: "Clock", status: str = "feasible",
                  message: str = "", method: str = "greedy") -> SolverReport:
    """Greedy proves no bound of its own: the bound is all pending work admitted."""
    from planner.formulate import candidates
    from planner.semantics import pod_volume

    objective = sum(max(0.0, v) for v in score.tier_volumes(snapshot, decisions).values())
    bound = sum(ps.count * pod_volume(w, ps, snapshot) for w in candidates(snapshot, {}) for ps in w.pod_sets)
    bound = max(bound, objective)
    gap = 0.0 if bound <= 0 else (bound - objective) / bound
    return SolverReport(method=method, status=status, objective=round(objective, 6), bound=round(bound, 6),
                        gap=round(gap, 6), seconds=clock.seconds(), message=message)


class Clock:
    """Seconds per step (read, build, solve, verify) and the total; and until when the
    pending reasons may spend time on preemption hints."""

    def __init__(self, read_seconds: float, hints_until: float = float("inf")):
        self.hints_until = hints_until
        self.spent = {"read": read_seconds, "build": 0.0, "solve": 0.0, "verify": 0.0}
        self.mark = time.monotonic()

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.spent[step] += now - self.mark
        self.mark = now

    def seconds(self) -> dict[str, float]:
        out = {k: round(v, 3) for k, v in self.spent.items()}
        out["total"] = round(sum(self.spent.values()), 3)
        return out
