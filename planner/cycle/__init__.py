"""One planning cycle, in order, like Kueue's schedule():

  1. Kueue's way (greedy: Kueue's own cycle replayed to its fixed point) starts on the
     second core (planner.cycle.beside), with its verification and metrics: the baseline
     every plan is shown beside, and a candidate;
  2-3. the MILP, through its one way in (planner.milp `plan`): the model built once,
     then its stages (planner.milp.stages: fair shares, the priority tiers, the
     preemption cost, the tie-breakers) in passes with the stability rows off (a
     relaxation: valid bounds), those rows put back only for the workloads the
     verifier's rule flags (this module's CycleJudge: the verifier, Kueue's cycle and
     Kueue's way are the cycle's, not the MILP layer's);
  4. Kueue's way, waited for until the stages' end at the latest (then stopped);
  5. verify the MILP's plan and choose, by a rule of the candidates alone: the best
     verified plan in the objective's order (fair shares first where they are on,
     then volume per priority, then preemption cost) among the MILP's, Kueue's way
     and changing nothing (always allowed: the next cycle starts from the same state);
     the MILP's on a tie;
  6. describe: why each waiting workload waits, and the metrics.

Before them (step 0), waitForPodsReady (planner.cycle.podsready): running workloads whose pods
missed their time are evicted (PodsReadyTimeout, or Deactivated past the requeue limit),
and the steps plan without them; workloads in their backoff wait. Their evictions join
the plan at the end, verified with it against the snapshot the cycle judged.

The time limit (a flag's, else the policy's: planner.base.solve_options) holds the
whole cycle (planner.base.budget); nothing here reads the clock to decide what to do.
Only how far the searches get, and whether Kueue's way finished, depend on time, and
the plan says so.

`plan_snapshot` is the way in (the CLI, the CronJob, the benchmarks): the command's
SolveOptions merged with the policy (in run_cycle), Python's garbage collector paused
for the cycle (planner.cycle.gc_pause).
Pure: takes a models.Snapshot, returns a models.Plan or raises.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from models import Decisions, ObjectRef, Plan, Snapshot, SolverReport
from planner.cycle import elastic
from planner.describe import fair_report
from planner.describe import metrics
from planner.cycle import tiers
from planner.describe import vs_kueue
from planner.describe import explain as why
from planner.kueue import shares as fair_share
from planner.kueue.semantics import QuotaTree, eviction_cost
from planner.kueue.preemption.victims import PreemptionRules
from planner.cycle.assemble import assemble
from planner.cycle.beside import Beside, reaped
from planner.base.budget import Budget, Stopwatch
from planner.base.solve_options import SolveOptions
from planner.cycle.continuation import continued
from planner.base.errors import VerificationError
from planner.cycle.gc_pause import cycle_collector
from models.plan import Eviction
from planner.cycle import podsready
from planner.greedy import greedy
from planner import milp
from planner.milp import candidates
from planner.verify import Rule, Violation, check, check_resizes, messages, unneeded, unstable


@dataclass(frozen=True)
class Heuristics:
    """What the cycle adds around the stages; all on in every plan. Switched off only to
    measure what each adds (tools/heuristics.py, BENCHMARKS.md)."""

    rins: bool = True            # each tier's search around its LP point (planner.milp.neighbourhood)


def plan_snapshot(snapshot: Snapshot, options: SolveOptions = SolveOptions(), *, read_seconds: float = 0.0) -> Plan:
    """Plan one cycle. Raises VerificationError if the chosen plan breaks a rule.

    `options` are the command's flags (a field left None is the policy's: run_cycle
    merges them); `read_seconds` is how long reading took, reported in the plan's
    timings and counted in the time limit.
    """
    # Elastic running Jobs: split into what the planners decide (planner.cycle.elastic), joined after.
    expanded, expansion = elastic.expand(snapshot)
    with cycle_collector(), reaped():     # no copy on the second core outlives the cycle (Ctrl-C included)
        plan = elastic.collapse(run_cycle(expanded, options, read_seconds), expansion)
    bad_resizes = check_resizes(snapshot, plan)
    if bad_resizes:
        raise VerificationError(messages(bad_resizes))
    return plan


@dataclass(frozen=True)
class KueueWay:
    """Kueue's way on a snapshot, as the second core sends it back."""

    decisions: Decisions
    violations: tuple[Violation, ...]  # the verifier's, on the snapshot greedy planned
    summary: dict[str, Any]            # REFERENCE section 5 metrics, readiness evictions included
    seconds: float


def kueue_way(snapshot: Snapshot, readiness: podsready.Readiness) -> KueueWay:
    """Greedy, its verification and its metrics (what the cycle needs of Kueue's way)."""
    watch = Stopwatch()    # reported only
    decisions = greedy(snapshot).decisions
    violations = tuple(check(snapshot, decisions))
    seen, judged = snapshot, decisions
    if readiness.evictions:
        seen, judged = readiness.seen, with_evictions(decisions, readiness.evictions)
    return KueueWay(decisions, violations, metrics.summarize(seen, judged), watch.seconds())


def carry_on(snapshot: Snapshot, decisions: Decisions, rules: PreemptionRules | None) -> Decisions | None:
    """`decisions` carried on by Kueue's cycle (planner.cycle.continuation), if that verifies."""
    onward = continued(snapshot, decisions, rules)
    return onward if onward is not None and not check(snapshot, onward) else None


def _unstable_refs(snapshot: Snapshot, decisions: Decisions) -> frozenset[ObjectRef]:
    """The waiting workloads the stability rule says Kueue's reclaim would admit."""
    return subjects(unstable(snapshot, decisions), Rule.STABILITY)


def _unneeded_refs(snapshot: Snapshot, decisions: Decisions) -> frozenset[ObjectRef]:
    """The victims the needed-eviction rule says nobody needed."""
    return subjects(unneeded(snapshot, decisions), Rule.NEEDED)


def subjects(found: list[Violation], rule: Rule) -> frozenset[ObjectRef]:
    """The workloads `rule`'s violations are about (the records' subjects, not their sentences)."""
    return frozenset(v.workload for v in found if v.rule is rule and v.workload is not None)


class CycleJudge:
    """planner.milp's Judge: the verifier's stability rule, Kueue's cycle carrying
    a plan on (planner.cycle.continuation) to one the verifier accepts, and Kueue's way from
    the second core (waited for until the stages' end)."""

    def __init__(self, snapshot: Snapshot, beside: "Beside[KueueWay]", budget: Budget):
        self.snapshot, self.beside, self.budget = snapshot, beside, budget

    def kueue_way(self, timeout: float) -> Decisions | None:
        way = self.beside.result(timeout=0) if self.beside.wait(timeout) else None
        return way.decisions if way is not None and not way.violations else None

    def unstable(self, decisions: Decisions) -> frozenset[ObjectRef] | None:
        return self._judged(_unstable_refs, decisions)

    def unneeded(self, decisions: Decisions) -> frozenset[ObjectRef] | None:
        return self._judged(_unneeded_refs, decisions)

    def _judged(self, rule: Callable[[Snapshot, Decisions], frozenset[ObjectRef]],
                decisions: Decisions) -> frozenset[ObjectRef] | None:
        """The rule's verdict by the stages' end, or None: judging a plan at scale (the
        stability rule over 20,000 running workloads at L) can take longer than the
        cycle has left, and the limit is a limit. Judged in a copy that can be stopped."""
        left = self.budget.until_stages_end()
        if left <= 0:
            return None
        return Beside(rule, self.snapshot, decisions).result(timeout=left)

    def carried(self, decisions: Decisions, rules: PreemptionRules | None, timeout: float) -> Decisions | None:
        """Kueue's cycle run on from `decisions`, verified, on the second core (this one
        waits: the copy is the one that can be stopped at the deadline)."""
        return Beside(carry_on, self.snapshot, decisions, rules).result(timeout=timeout)


def run_cycle(snapshot: Snapshot, options: SolveOptions, read_seconds: float = 0.0,
              heuristics: Heuristics = Heuristics()) -> Plan:
    """The cycle's steps on `snapshot`, `options` merged with its policy (plan_snapshot's way in)."""
    options = options.merged(snapshot.policy)
    solver, limit = options.solver, options.seconds
    budget = Budget(limit, spent=read_seconds)
    clock = Clock(read_seconds)
    # 0. waitForPodsReady: what timed out leaves, what waits out its backoff waits.
    readiness = podsready.judge(snapshot)
    snapshot = readiness.planning
    # 1. Kueue's way, on the second core.
    beside = Beside(kueue_way, snapshot, readiness)
    if solver == "greedy":
        way = beside.result(timeout=budget.until_stages_end())
        clock.lap("build")
        if way is None:
            return nothing_new(snapshot, clock, readiness, "greedy",
                               f"Kueue's way did not finish within the time limit ({limit:g} s)")
        if way.violations:
            raise VerificationError(messages(list(way.violations)))
        return finished(snapshot, way.decisions, greedy_report(snapshot, way.decisions, clock), clock,
                        way=way, readiness=readiness)
    # 2-3. The MILP: the model, once, and its stages.
    found = milp.plan(snapshot, CycleJudge(snapshot, beside, budget), budget, options, rins=heuristics.rins)
    clock.lap_split("build", found.build_seconds, "solve")
    # 4. Kueue's way, by the stages' end at the latest.
    way = beside.result(timeout=budget.until_stages_end())
    clock.lap("solve")
    # 5. Verify and choose.
    why = found.message or ""
    if found.decisions is not None:
        violations = check(snapshot, found.decisions)
        if violations:
            why = f"MILP plan failed verification ({violations[0].message})"
    choice = choose(snapshot, found, way, why)
    clock.lap("verify")
    notes = [note for note in (choice.note, way_note(way, limit)) if note]
    if choice.kind == "greedy":
        assert way is not None
        report = replace(greedy_report(snapshot, way.decisions, clock, status="fallback", message="; ".join(notes),
                                       method=method_of(solver)), model=found.model)
        return finished(snapshot, way.decisions, report, clock, found, way=way, readiness=readiness)
    if choice.kind == "nothing":
        return nothing_new(snapshot, clock, readiness, method_of(solver), "; ".join(notes), found, way)
    assert found.decisions is not None
    notes.extend(found.notes)
    report = SolverReport(
        method=method_of(solver), status=found.status, objective=round(volume(snapshot, found.decisions), 6),
        bound=round(max(found.bound, volume(snapshot, found.decisions)), 6), gap=round(found.gap, 6),
        seconds=clock.seconds(), message="; ".join(notes), stages=found.stages, model=found.model)
    return finished(snapshot, found.decisions, report, clock, found, way=way, readiness=readiness)


@dataclass(frozen=True)
class Choice:
    kind: str          # milp | greedy | nothing
    note: str = ""


def choose(snapshot: Snapshot, found: milp.Outcome, way: KueueWay | None, why: str) -> Choice:
    """The best verified candidate in the objective's order (Choice.kind), by the
    candidates alone: the MILP's plan unless it failed (`why`), serves less than Kueue's
    way, or, with the policy's greedy floor, less at any priority; else Kueue's way if
    it finished and verified; else nothing new."""
    usable = way is not None and not way.violations
    if found.decisions is not None and not why:
        if not usable:
            return Choice("milp")
        assert way is not None
        if snapshot.policy.greedy_floor and not snapshot.kueue_config.fair_sharing.enabled:
            ours, theirs = tiers.tier_volumes(snapshot, found.decisions), tiers.tier_volumes(snapshot, way.decisions)
            if any(ours.get(t, 0.0) < v - tiers.TOLERANCE for t, v in theirs.items()):
                return Choice("greedy", "MILP plan serves less than greedy at some priority (greedy floor)")
        if better(snapshot, way.decisions, found.decisions) > 0:
            return Choice("greedy", "MILP plan scored below greedy" + (
                " (fair shares, then priority)" if snapshot.kueue_config.fair_sharing.enabled else ""))
        return Choice("milp")
    if usable:
        return Choice("greedy", why)
    return Choice("nothing", why)


def better(snapshot: Snapshot, a: Decisions, b: Decisions) -> int:
    """1 if plan `a` comes before plan `b` in the objective's order (fair shares where
    they are on, then volume per priority, then preemption cost), -1 if after, 0 if tied."""
    if snapshot.kueue_config.fair_sharing.enabled:
        tree = QuotaTree(snapshot)
        goals = fair_share.targets(snapshot, tree, fair_share.demand(snapshot))
        score_a = fair_share.fairness_score(snapshot, tree, fair_report.usage_after(snapshot, a), goals)
        score_b = fair_share.fairness_score(snapshot, tree, fair_report.usage_after(snapshot, b), goals)
        for x, y in zip(score_a, score_b):
            if abs(x - y) > 1e-6:
                return 1 if x > y else -1
    by_tier = tiers.compare(tiers.tier_volumes(snapshot, a), tiers.tier_volumes(snapshot, b))
    if by_tier:
        return by_tier
    cost_a, cost_b = preemption_cost(snapshot, a), preemption_cost(snapshot, b)
    if abs(cost_a - cost_b) > 1e-6:
        return 1 if cost_a < cost_b else -1
    return 0


def preemption_cost(snapshot: Snapshot, decisions: Decisions) -> float:
    by_ref = {w.ref: w for w in snapshot.workloads}
    return sum(eviction_cost(by_ref[e.workload], snapshot) for e in decisions.evictions if e.workload in by_ref)


def way_note(way: KueueWay | None, limit: float) -> str:
    return "" if way is not None else f"Kueue's way did not finish within the time limit ({limit:g} s): not compared"


def nothing_new(snapshot: Snapshot, clock: "Clock", readiness: podsready.Readiness, method: str, why: str,
                found: milp.Outcome | None = None, way: KueueWay | None = None) -> Plan:
    """The plan that changes nothing (but what waitForPodsReady evicts): always allowed,
    whatever the snapshot, since the next cycle starts from the same state."""
    decisions = Decisions()
    report = greedy_report(snapshot, decisions, clock, status="fallback",
                           message=f"{why}; nothing changes this cycle" if why else "nothing changes this cycle",
                           method=method)
    if found is not None:
        report = replace(report, model=found.model)
    return finished(snapshot, decisions, report, clock, found, way=way, readiness=readiness, checked=False)


def method_of(solver: str) -> str:
    return "milp" if solver == "milp" else solver


def finished(snapshot: Snapshot, decisions: Decisions, report: SolverReport, clock: Clock,
             found: milp.Outcome | None = None, way: KueueWay | None = None,
             readiness: podsready.Readiness | None = None, checked: bool = True) -> Plan:
    """The Plan, with explaining what waits and the summary counted in the cycle; the
    summary ends with Kueue's way (greedy's metrics, counted on the second core) beside
    it (planner.describe.vs_kueue), when it finished.

    With `readiness` evictions, those join the decisions, and the whole is verified
    against the snapshot the cycle judged (`checked` False: the plan that changes
    nothing, which no rule can refuse, is not)."""
    if readiness is not None and readiness.evictions:
        decisions = with_evictions(decisions, readiness.evictions)
        snapshot = readiness.seen
        violations = check(snapshot, decisions) if checked else []
        if violations:
            raise VerificationError(messages(violations))
    plan = assemble(snapshot, decisions, report, found.excluded if found is not None else None)
    if way is not None:
        plan = replace(plan, summary={**plan.summary, vs_kueue.KEY: vs_kueue.compare(plan.summary, way.summary)})
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
        self.watch = Stopwatch()

    def lap(self, step: str) -> None:
        self.spent[step] += self.watch.lap()

    def lap_split(self, first: str, seconds: float, then: str) -> None:
        """One lap of two steps: its first `seconds` (as the step measured them) to
        `first`, the rest to `then`."""
        lapped = self.watch.lap()
        self.spent[first] += min(seconds, lapped)
        self.spent[then] += max(0.0, lapped - seconds)

    def seconds(self) -> dict[str, float]:
        out = {k: round(v, 3) for k, v in self.spent.items()}
        out["total"] = round(sum(self.spent.values()), 3)
        return out


def explain_one(snapshot: Snapshot, workload: str, options: SolveOptions = SolveOptions(), *,
                search_time_limit: float = 2.0, read_seconds: float = 0.0) -> "why.Explanation":
    """`stowplan explain`: plan `snapshot` as what-if does and explain one workload in that plan
    (planner.describe.explain), its changes each planned again by this cycle within `search_time_limit`.
    Raises why.UnknownWorkload (an input error) when no workload has that name."""
    w = why.find_workload(snapshot, workload)
    plan = plan_snapshot(snapshot, options, read_seconds=read_seconds)

    def replan(changed: Snapshot) -> Plan:
        return plan_snapshot(changed, replace(options, time_limit=search_time_limit))

    return why.explain_workload(snapshot, w, plan, replan, search_time_limit)


def explain_all(snapshot: Snapshot, options: SolveOptions = SolveOptions(), *, search_time_limit: float = 2.0,
                read_seconds: float = 0.0,
                on_each: Callable[[int, int, ObjectRef], None] | None = None) -> tuple[Plan, list["why.Explanation"]]:
    """`stowplan explain --all`: plan `snapshot` once and explain every workload the plan leaves
    waiting (in the plan's order), then every workload it evicts, each up to its smallest change (the first kind that admits it;
    the kinds after it are not tried). The plans of changed snapshots are shared between the
    workloads (why.Replans): a change planned for one is not planned again for the next."""
    plan = plan_snapshot(snapshot, options, read_seconds=read_seconds)

    def replan(changed: Snapshot) -> Plan:
        return plan_snapshot(changed, replace(options, time_limit=search_time_limit))

    replans = why.Replans(replan)
    by_ref = {w.ref: w for w in snapshot.workloads}
    # What the plan leaves waiting, then what it evicts (each says its preemptor, rule and cost).
    refs = [ref for ref in dict.fromkeys([p.workload for p in plan.pending] + [e.workload for e in plan.evictions])
            if ref in by_ref]
    out = []
    for i, ref in enumerate(refs, 1):
        if on_each is not None:    # progress (i of n) for a person watching; decides nothing
            on_each(i, len(refs), ref)
        out.append(why.explain_workload(snapshot, by_ref[ref], plan, replans, search_time_limit, first_only=True))
    return plan, out

