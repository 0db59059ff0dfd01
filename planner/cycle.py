"""One planning cycle, in order, like Kueue's schedule():

  1. greedy: Kueue's own cycle replayed to its fixed point (the baseline, the MIP
     start and the fallback; it always finishes);
  2. the model (planner.milp.model: volumes, preemption cost, Kueue's rules);
  3. the relaxed pass: the priority tiers without the stability rows (a relaxation that
     solves far faster), that plan carried on by Kueue's own cycle until Kueue would
     leave it as it is (planner.continuation); it starts the stages where it verifies
     and serves more than greedy's plan;
  4. the stages (planner.milp.stages), each within what the Budget gives it;
  5. decode: every pod on a node;
  6. the tie-breakers on the full model (locality, free domains, age, flavor order);
  7. verify (the stability rule too) and choose: the MILP's plan, or greedy's with why;
  8. describe: why each waiting workload waits, and the metrics.

Before them (step 0), waitForPodsReady (planner.podsready): running workloads whose pods
missed their time are evicted (PodsReadyTimeout, or Deactivated past the requeue limit),
and the steps plan without them; workloads in their backoff wait. Their evictions join
the plan at the end, verified with it against the snapshot the cycle judged.

The policy's time limit holds the whole cycle (planner.budget); nothing here reads
the clock to decide what to do.

`plan_snapshot` is the way in (the CLI, the CronJob, the benchmarks): the policy's
overrides applied, Python's garbage collector paused for the cycle (planner.gc_pause).
Pure: takes a models.Snapshot, returns a models.Plan or raises.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from models import Decisions, Plan, Snapshot, SolverReport
from planner import fair_report, metrics, tiers, vs_kueue, why
from planner.kueue import fair_share
from planner.kueue.semantics import QuotaTree
from planner.milp import guarantee
from planner.assemble import assemble
from planner.budget import RELAXED_SHARE, Budget
from planner.continuation import continued
from planner.milp.solution import DecodeError
from planner.errors import VerificationError
from planner.gc_pause import cycle_collector
from models.plan import Eviction
from planner import podsready
from planner.greedy import greedy
from planner.milp import stages
from planner.milp.decode import decode
from planner.milp.formulate import candidates
from planner.milp.model import Formulation, formulate
from planner.milp.start import start_from
from planner.milp.arrays import ModelArrays
from planner.milp.solve import Backend, HighsBackend, PulpBackend, StageResult, refine
from planner.verify import verify
from planner.verify_stable import unstable


@dataclass(frozen=True)
class Heuristics:
    """What the cycle adds around the stages; all on in every plan. Switched off only to
    measure what each adds (tools/heuristics.py, BENCHMARKS.md)."""

    greedy_start: bool = True    # greedy's plan as the MIP start
    relaxed_pass: bool = True    # step 3
    rins: bool = True            # each tier's search around its LP point (planner.milp.neighbourhood)


def plan_snapshot(
    snapshot: Snapshot,
    *,
    solver: str = "milp",
    time_limit: float | None = None,
    gap: float | None = None,
    read_seconds: float = 0.0,
) -> Plan:
    """Plan one cycle. Raises VerificationError if the chosen plan breaks a rule.

    `time_limit` and `gap` override the snapshot's policy; `read_seconds` is how long
    reading took, reported in the plan's timings.
    """
    if time_limit is not None or gap is not None:
        policy = snapshot.policy
        policy = replace(
            policy,
            time_limit_seconds=policy.time_limit_seconds if time_limit is None else time_limit,
            mip_gap=policy.mip_gap if gap is None else gap,
        )
        snapshot = replace(snapshot, policy=policy)
    with cycle_collector():
        return run_cycle(snapshot, solver, read_seconds)


def run_cycle(snapshot: Snapshot, solver: str, read_seconds: float = 0.0,
              heuristics: Heuristics = Heuristics()) -> Plan:
    policy = snapshot.policy
    budget = Budget(policy.time_limit_seconds, spent=read_seconds)
    clock = Clock(read_seconds)
    # 0. waitForPodsReady: what timed out leaves, what waits out its backoff waits.
    readiness = podsready.judge(snapshot)
    snapshot = readiness.planning
    # 1. Kueue's way.
    baseline = greedy(snapshot).decisions
    clock.lap("build")
    if solver == "greedy":
        violations = verify(snapshot, baseline)
        if violations:
            raise VerificationError(violations)
        return finished(snapshot, baseline, greedy_report(snapshot, baseline, clock), clock, baseline=baseline,
                        readiness=readiness)
    # 2. The model, and greedy's plan in its columns where the model allows it.
    form = formulate(snapshot)
    greedy_violations = verify(snapshot, baseline)
    waiting = frozenset(ref for ref, _ in unstable(snapshot, baseline))
    valid_otherwise = len(waiting) == len(greedy_violations)
    start = start_from(form, baseline, ease=True, unstable=waiting) if valid_otherwise else None
    if not heuristics.greedy_start:
        start = None
    clock.lap("build")
    # 3. The relaxed pass, carried on by Kueue's cycle.
    relaxed: np.ndarray | None = None
    relaxed_stages: list[StageResult] = []
    if heuristics.relaxed_pass:
        relaxed, relaxed_stages = relaxed_pass(snapshot, form, start, solver, budget, baseline, heuristics.rins)
    if relaxed is not None:
        start = relaxed
    clock.lap("solve")
    backend = make_backend(form, solver, snapshot)
    clock.lap("build")
    # 4. The stages.
    outcome = stages.solve(form, start, backend, budget, policy.mip_gap, floor_at_start=policy.greedy_floor,
                           search=heuristics.rins, relaxed=relaxed_stages)
    outcome.stages[:0] = [replace(s, name=f"relaxed {s.name}") for s in relaxed_stages]
    # 5. Every pod on a node.
    why = ""
    decisions = Decisions()
    repaired = 0
    if outcome.status == "failed":
        why = f"MILP found no plan ({outcome.message})"
    else:
        try:
            decoded = decode(form, outcome.values)
            decisions, repaired = decoded.decisions, decoded.repaired
        except DecodeError as error:
            why = f"MILP plan could not be decoded ({error})"
    clock.lap("solve")
    # 6. The tie-breakers on the full model: every volume and the preemption cost held,
    #    locality, whole free domains, age and flavor order refined.
    if not why:
        decisions, tie_stage = tie_break(snapshot, solver, decisions, budget, policy.mip_gap)
        outcome.stages.append(tie_stage)
        clock.lap("solve")
    # 7. Verify and choose.
    if not why:
        violations = verify(snapshot, decisions)
        if violations:
            why = f"MILP plan failed verification ({violations[0]})"
        elif snapshot.kueue_config.fair_sharing.enabled:
            # the shares come before the priority tiers: greedy is compared on both, in that order
            if not greedy_violations and fairer(snapshot, baseline, decisions):
                why = "MILP plan scored below greedy (fair shares, then priority)"
        elif start is not None and tiers.compare(tiers.tier_volumes(snapshot, decisions),
                                                 tiers.tier_volumes(snapshot, baseline)) < 0:
            why = "MILP plan scored below greedy"
    clock.lap("verify")
    if why:
        if greedy_violations:
            raise VerificationError(greedy_violations)
        report = replace(greedy_report(snapshot, baseline, clock, status="fallback", message=why,
                                       method=method_of(solver)), model=model_size(form))
        return finished(snapshot, baseline, report, clock, form, baseline=baseline, readiness=readiness)
    proven = outcome.status == "optimal" and repaired == 0
    notes = []
    if start is None and baseline.admissions:
        notes.append("greedy's plan is not one the model allows (Kueue's reclaim would undo it)")
    if relaxed is not None:
        notes.append("the stages started from the relaxed pass's plan carried on by Kueue's cycle")
    if form.eased:
        notes.append(f"{form.eased} stability row(s) eased where greedy's plan shows no reclaim could place "
                     "the workload; the verifier checks the rule itself")
    if repaired:
        notes.append(f"{repaired} workload(s) left out: a pod without GPUs found no node")
    report = SolverReport(
        method=method_of(solver), status="optimal" if proven else "feasible",
        objective=round(volume(snapshot, decisions), 6), bound=round(outcome.bound, 6),
        gap=round(outcome.gap, 6), seconds=clock.seconds(), message="; ".join(notes),
        stages=tuple(s.as_dict() for s in outcome.stages), model=model_size(form))
    return finished(snapshot, decisions, report, clock, form, baseline=baseline, readiness=readiness)


def fairer(snapshot: Snapshot, baseline: Decisions, decisions: Decisions) -> bool:
    """Does greedy's plan beat `decisions` on the fair shares (least fraction of its
    target any queue reaches, then their sum), or tie there and serve more by priority?"""
    tree = QuotaTree(snapshot)
    goals = fair_share.targets(snapshot, tree, fair_share.demand(snapshot))
    theirs = fair_share.fairness_score(snapshot, tree, fair_report.usage_after(snapshot, baseline), goals)
    ours = fair_share.fairness_score(snapshot, tree, fair_report.usage_after(snapshot, decisions), goals)
    if abs(theirs[0] - ours[0]) > 1e-6:
        return theirs[0] > ours[0]
    if abs(theirs[1] - ours[1]) > 1e-6:
        return theirs[1] > ours[1]
    return tiers.compare(tiers.tier_volumes(snapshot, decisions), tiers.tier_volumes(snapshot, baseline)) < 0


def relaxed_pass(snapshot: Snapshot, form: Formulation, start: np.ndarray | None, solver: str, budget: Budget,
                 baseline: Decisions, search: bool = True) -> tuple[np.ndarray | None, list[StageResult]]:
    """The priority tiers on the model with its stability rows lifted, that plan carried
    on by Kueue's cycle (planner.continuation): a start for the stages, if it verifies,
    the model takes it and it serves more than greedy's plan (with the policy's greedy
    floor: at no priority less). Its stages' results come back too (their bounds hold for
    the model: it is a relaxation of it)."""
    if form.guarantee is None or not form.guarantee.rows:
        return None, []
    policy = snapshot.policy
    arrays = guarantee.lifted(form.arrays, form.guarantee)
    backend = make_backend_for(arrays, solver, snapshot)
    outcome = stages.solve(form, start, backend, budget.part(RELAXED_SHARE), policy.mip_gap, search=search,
                           tails=False)
    reported = outcome.stages
    if outcome.status == "failed":
        return None, reported
    try:
        decoded = decode(form, outcome.values)
    except DecodeError:
        return None, reported
    if decoded.repaired:
        return None, reported
    carried = continued(snapshot, decoded.decisions, form.preemption)
    if carried is None or verify(snapshot, carried):
        return None, reported
    if snapshot.kueue_config.fair_sharing.enabled:
        # shares first: a start no less fair than greedy's plan (greedy's tiers are no floor then)
        return (None if fairer(snapshot, baseline, carried) else start_from(form, carried, ease=True)), reported
    volumes, greedy_volumes = tiers.tier_volumes(snapshot, carried), tiers.tier_volumes(snapshot, baseline)
    if tiers.compare(volumes, greedy_volumes) <= 0:
        return None, reported
    if policy.greedy_floor and any(volumes.get(t, 0.0) < v for t, v in greedy_volumes.items()):
        return None, reported
    return start_from(form, carried, ease=True), reported


def tie_break(snapshot: Snapshot, solver: str, decisions: Decisions, budget: Budget,
              gap: float) -> tuple[Decisions, StageResult]:
    """Refine `decisions` on the full model within the last stage's deadline; keep them
    when the full model does not take them or its answer does not decode."""
    full = formulate(snapshot, locality=True)
    start = start_from(full, decisions, ease=True)
    if start is None or not full.secondary:
        return decisions, StageResult("tie-breakers", "kept", 0.0, 0.0, 0.0)
    backend = make_backend(full, solver, snapshot)
    deadline = max(budget.now() + stages.MIN_STAGE, budget.tail_deadline(1, 2))
    values, stage = refine(full, start, backend, deadline - budget.now(), gap)
    try:
        decoded = decode(full, values)
    except DecodeError:
        return decisions, StageResult("tie-breakers", "failed", stage.objective, stage.bound, stage.seconds)
    return (decoded.decisions, stage) if decoded.repaired == 0 else (decisions, stage)


def model_size(form: Formulation) -> dict[str, int]:
    arrays = form.arrays
    return {"columns": arrays.num_cols, "rows": arrays.num_rows, "nonzeros": len(arrays.entry_val)}


def method_of(solver: str) -> str:
    return "milp" if solver == "milp" else solver


def make_backend(form: Formulation, solver: str, snapshot: Snapshot) -> Backend:
    return make_backend_for(form.arrays, solver, snapshot)


def make_backend_for(arrays: ModelArrays, solver: str, snapshot: Snapshot) -> Backend:
    policy = snapshot.policy
    if solver == "milp":
        return HighsBackend(arrays, threads=policy.threads, seed=policy.seed, searches=False)
    if solver.startswith("pulp:"):
        return PulpBackend(arrays, solver.split(":", 1)[1], threads=policy.threads)
    raise ValueError(f"unknown solver {solver!r}")


def finished(snapshot: Snapshot, decisions: Decisions, report: SolverReport, clock: Clock,
             form: Formulation | None = None, baseline: Decisions | None = None,
             readiness: podsready.Readiness | None = None) -> Plan:
    """The Plan, with explaining what waits and the summary counted in the cycle; the
    summary ends with greedy's (Kueue's way) beside it (planner.vs_kueue).

    With `readiness` evictions, those join the decisions (and greedy's: Kueue makes them
    too), and the whole is verified against the snapshot the cycle judged."""
    if readiness is not None and readiness.evictions:
        same = baseline is decisions
        decisions = with_evictions(decisions, readiness.evictions)
        if baseline is not None:
            baseline = decisions if same else with_evictions(baseline, readiness.evictions)
        snapshot = readiness.seen
        violations = verify(snapshot, decisions)
        if violations:
            raise VerificationError(violations)
    plan = assemble(snapshot, decisions, report, form.excluded if form is not None else None)
    if baseline is not None:
        greedy_summary = plan.summary if baseline is decisions else metrics.summarize(snapshot, baseline)
        plan = replace(plan, summary={**plan.summary, vs_kueue.KEY: vs_kueue.compare(plan.summary, greedy_summary)})
    clock.lap("verify")
    return replace(plan, solver=replace(plan.solver, seconds=clock.seconds()))


def with_evictions(decisions: Decisions, evictions: tuple[Eviction, ...]) -> Decisions:
    return replace(decisions, evictions=tuple(sorted(decisions.evictions + evictions, key=lambda e: e.workload)))


def volume(snapshot: Snapshot, decisions: Decisions) -> float:
    """The objective's volume terms summed over the tiers (what the stages maximise)."""
    return sum(tiers.tier_volumes(snapshot, decisions).values())


def greedy_report(snapshot: Snapshot, decisions: Decisions, clock: "Clock", status: str = "feasible",
                  message: str = "", method: str = "greedy") -> SolverReport:
    """Greedy proves no bound of its own: the bound is all pending work admitted."""
    from planner.kueue.semantics import pod_volume

    objective = sum(max(0.0, v) for v in tiers.tier_volumes(snapshot, decisions).values())
    bound = sum(ps.count * pod_volume(w, ps, snapshot) for w in candidates(snapshot, {}) for ps in w.pod_sets)
    bound = max(bound, objective)
    gap = 0.0 if bound <= 0 else (bound - objective) / bound
    return SolverReport(method=method, status=status, objective=round(objective, 6), bound=round(bound, 6),
                        gap=round(gap, 6), seconds=clock.seconds(), message=message)


class Clock:
    """Seconds per step (read, build, solve, verify) and the total, for the plan's report
    (what the steps do never depends on it)."""

    def __init__(self, read_seconds: float):
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


def explain_one(snapshot: Snapshot, workload: str, *, solver: str = "milp", time_limit: float | None = None,
                gap: float | None = None, search_time_limit: float = 2.0,
                read_seconds: float = 0.0) -> "why.Explanation":
    """`stowplan explain`: plan `snapshot` as what-if does and explain one workload in that plan
    (planner.why), its changes each planned again by this cycle within `search_time_limit`.
    Raises why.UnknownWorkload (an input error) when no workload has that name."""
    w = why.find_workload(snapshot, workload)
    plan = plan_snapshot(snapshot, solver=solver, time_limit=time_limit, gap=gap, read_seconds=read_seconds)

    def replan(changed: Snapshot) -> Plan:
        return plan_snapshot(changed, solver=solver, time_limit=search_time_limit, gap=gap)

    return why.explain_workload(snapshot, w, plan, replan, search_time_limit)


def explain_all(snapshot: Snapshot, *, solver: str = "milp", time_limit: float | None = None,
                gap: float | None = None, search_time_limit: float = 2.0,
                read_seconds: float = 0.0) -> tuple[Plan, list["why.Explanation"]]:
    """`stowplan explain --all`: plan `snapshot` once and explain every workload the plan leaves
    waiting (in the plan's order), each up to its smallest change (the first kind that admits it;
    the kinds after it are not tried). The plans of changed snapshots are shared between the
    workloads (why.Replans): a change planned for one is not planned again for the next."""
    plan = plan_snapshot(snapshot, solver=solver, time_limit=time_limit, gap=gap, read_seconds=read_seconds)

    def replan(changed: Snapshot) -> Plan:
        return plan_snapshot(changed, solver=solver, time_limit=search_time_limit, gap=gap)

    replans = why.Replans(replan)
    by_ref = {w.ref: w for w in snapshot.workloads}
    return plan, [why.explain_workload(snapshot, by_ref[p.workload], plan, replans, search_time_limit, first_only=True)
                  for p in plan.pending if p.workload in by_ref]

