"""planner.starts: greedy and the improved start on a forked second core give exactly
what they give in this process, and a child that fails costs nothing but time."""

import os
import time

import pytest

from randomgen import random_snapshot
from planner import starts as starts_module
from planner.starts import Due, starts, starts_beside


@pytest.mark.parametrize("seed", range(5))
def test_beside_gives_what_in_process_gives(seed):
    snap = random_snapshot(50_000 + seed, with_running=True, with_topology=True)
    due = Due(time.monotonic() + 60)
    alone = starts(snap, 30.0, due)
    beside, result = starts_beside(snap, 30.0, due, lambda done: os.getpid())
    assert beside == alone
    assert result == os.getpid()     # the work ran here, not in the child


def test_a_failing_child_is_made_up_for_here(monkeypatch):
    parent = os.getpid()
    real = starts_module.improve

    def improve_fails_in_the_child(*args, **kwargs):
        if os.getpid() != parent:
            raise MemoryError("the child ran out")
        return real(*args, **kwargs)

    monkeypatch.setattr(starts_module, "improve", improve_fails_in_the_child)
    snap = random_snapshot(50_100, with_running=True)
    due = Due(time.monotonic() + 60)
    beside, _ = starts_beside(snap, 30.0, due, lambda done: None)
    assert beside == starts(snap, 30.0, due)


def test_without_improving_the_start_is_greedy_itself():
    snap = random_snapshot(50_200, with_running=True)
    plans, _ = starts_beside(snap, None, Due(time.monotonic() + 60), lambda done: None)
    assert plans.better == plans.baseline


def test_a_start_no_stage_improves_is_kept_as_greedy_placed_it():
    """With no time for any stage, the plan is the start exactly, pods on the nodes
    greedy's BestFit chose: each preferred-rack job in one rack. (Decoding the same
    volumes again would hand nodes out by name, n1 and n2, across both racks.)"""
    from dataclasses import replace

    from builders import GPU, cq, flavor, job, lq, node, preferred, snapshot, topology
    from models import HOSTNAME_LABEL
    from planner.greedy import greedy
    from planner.pipeline import plan_snapshot

    rack = "cloud.provider.com/topology-rack"
    nodes = [node(f"n{i}", gpu=1, labels={rack: "ra" if i % 2 else "rb"}) for i in range(1, 5)]
    snap = snapshot(nodes=nodes, flavors=[flavor("default", topology="topo")],
                    topologies=[topology("topo", rack, HOSTNAME_LABEL)],
                    cqs=[cq("cq", quotas={"default": {GPU: 8, "cpu": 100, "memory": "1Ti"}})],
                    lqs=[lq("t", "lq", "cq")],
                    workloads=[job("t", f"j{i}", pods=2, gpu=1, topology=preferred(rack)) for i in (1, 2)])
    snap = replace(snap, policy=replace(snap.policy, greedy_floor=True))
    plan = plan_snapshot(snap, time_limit=0.001)
    assert plan.admissions == greedy(snap).decisions.admissions
    racks = [{"ra" if int(v[-1][1:]) % 2 else "rb" for ps in a.pod_sets for v, _ in ps.domains}
             for a in plan.admissions]
    assert racks and all(len(r) == 1 for r in racks)


def test_the_work_here_learns_when_the_starts_are_ready():
    """`done()` is false while the child computes, true once its answer waits to be read
    (work that only fills idle time uses it to stop); in process it is true at once."""
    snap = random_snapshot(50_300, with_running=True, with_topology=True)
    seen = []

    def work(done):
        seen.append(done())
        give_up = time.monotonic() + 60
        while not done() and time.monotonic() < give_up:
            time.sleep(0.01)
        seen.append(done())

    plans, _ = starts_beside(snap, 30.0, Due(time.monotonic() + 60), work)
    assert seen[-1] is True
    assert plans == starts(snap, 30.0, Due(time.monotonic() + 60))

    monkeypatched = []
    original = starts_module.two_cpus
    try:
        starts_module.two_cpus = lambda: False
        starts_beside(snap, 30.0, Due(time.monotonic() + 60), lambda done: monkeypatched.append(done()))
    finally:
        starts_module.two_cpus = original
    assert monkeypatched == [True]


def test_past_its_deadline_the_start_is_greedy_without_improving(monkeypatch):
    """improve's own setup takes seconds at scale: it is not begun once its deadline has passed."""
    def improve_must_not_run(*args, **kwargs):
        raise AssertionError("improve ran past its deadline")

    monkeypatch.setattr(starts_module, "improve", improve_must_not_run)
    snap = random_snapshot(50_400, with_running=True)
    plans = starts(snap, 30.0, Due(time.monotonic() - 1.0))
    assert plans.better == plans.baseline


def test_greedys_plan_is_verified_only_where_it_is_the_plan(monkeypatch):
    """Greedy's plan is verified where it is used, once: as the plan chosen (here the start,
    with no time for any stage to change it) or as the fallback. Where another plan is
    chosen, that one is verified and greedy's is not (0.5 s of the second core at L,
    before the start could begin)."""
    from planner import run
    from planner.greedy import greedy
    from planner.pipeline import plan_snapshot

    checked = []
    real = run.verify
    monkeypatch.setattr(run, "verify", lambda snapshot, decisions: checked.append(decisions) or real(snapshot, decisions))
    snap = random_snapshot(50_500, with_running=True, with_topology=True)
    baseline = greedy(snap).decisions
    plan = plan_snapshot(snap, time_limit=0.001)      # no time for any stage: the start is the plan
    assert (plan.admissions, plan.evictions) == (baseline.admissions, baseline.evictions)
    assert checked == [baseline] and plan.solver.status != "fallback"
    checked.clear()
    plan = plan_snapshot(snap, time_limit=30.0)     # the stages serve more than greedy here
    assert tuple(plan.admissions) != tuple(baseline.admissions)
    assert checked and baseline not in checked


def test_a_forked_child_sees_its_due_moved_later():
    """Due lives in shared memory: moved after the fork, the child reads the new instant."""
    import multiprocessing

    due = Due(100.0)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        give_up = time.monotonic() + 30
        while due.at == 100.0 and time.monotonic() < give_up:
            time.sleep(0.005)
        send.send(due.at)

    process = context.Process(target=child, daemon=True)
    process.start()
    due.extend(250.0)
    assert receive.recv() == 250.0
    process.join()


def test_improving_is_held_to_its_share_until_due_is_extended():
    """Before `extend`, improving stops `seconds` after it began (or at due, if sooner);
    after it, only due holds it, however short its own share."""
    due = Due(1_000.0)
    until = due.improving_until(began=10.0, seconds=5.0)
    assert until() == 15.0
    due.extend(500.0)             # never earlier than it was
    assert due.at == 1_000.0 and until() == 1_000.0
    due.extend(2_000.0)
    assert until() == 2_000.0


def test_an_extended_due_lets_improving_go_on_past_its_own_share():
    """improve asks for its deadline again as it goes: with no share of its own (0 s) it
    keeps greedy's plan, unless due was extended, when it improves as without a deadline."""
    from planner.greedy import greedy

    snap = random_snapshot(50_686, with_running=True, with_topology=True)   # one improving changes
    unlimited = starts_module.improve(snap, greedy(snap).decisions)
    held = starts(snap, 0.0, Due(time.monotonic() + 60))
    assert held.better == held.baseline != unlimited      # there is something to improve
    extended = Due(time.monotonic() + 60)
    extended.extend(time.monotonic() + 120)
    assert starts(snap, 0.0, extended).better == unlimited


@pytest.mark.parametrize("seed", [50_686, 50_001])
def test_where_the_due_is_extended_this_process_grows_while_the_child_packs(seed, monkeypatch):
    """Once the model leaves the start the stages' time (Due.extend), the parent, done
    building, grows greedy's plan while the child packs it again: the start is the better
    of the two, as in this process one after the other."""
    from planner.improve import admit_more

    parent = os.getpid()
    grown_here = []

    def recorded(*args, **kwargs):
        if os.getpid() == parent:
            grown_here.append(True)
        return admit_more(*args, **kwargs)

    snap = random_snapshot(seed, with_running=True, with_topology=True)
    due = Due(time.monotonic() + 60)
    due.extend(time.monotonic() + 120)
    alone = starts(snap, 30.0, due)
    monkeypatch.setattr(starts_module, "admit_more", recorded)
    beside, _ = starts_beside(snap, 30.0, due, lambda done: None)
    assert beside == alone
    assert grown_here == [True]


def test_without_the_time_to_pack_again_the_plan_is_only_grown(monkeypatch):
    """Packing again takes longer than greedy: with less time than REPACK_PER_GREEDY times
    greedy's own, the start is greedy's plan grown, unless the parent grows it beside."""
    from planner.improve import admit_more

    snap = random_snapshot(50_686, with_running=True, with_topology=True)
    monkeypatch.setattr(starts_module, "REPACK_PER_GREEDY", 1e9)

    def no_packing(*args, **kwargs):
        raise AssertionError("packed again without the time for it")

    monkeypatch.setattr(starts_module, "improve", no_packing)
    plans = starts(snap, 30.0, Due(time.monotonic() + 60))
    assert plans.better == admit_more(snap, plans.baseline, lambda: float("inf"))
    told = []
    extended = Due(time.monotonic() + 60)
    extended.extend(time.monotonic() + 120)
    with pytest.raises(AssertionError, match="packed again"):
        starts(snap, 30.0, extended, tell=told.append)   # the parent grows: the child packs
    assert told == [plans.baseline]
    # Not yet decided (the parent's model still building): likely to be extended, so the
    # child packs; decided against, it does not.
    told.clear()
    with pytest.raises(AssertionError, match="packed again"):
        starts(snap, 30.0, Due(time.monotonic() + 60), tell=told.append)
    kept = Due(time.monotonic() + 60)
    kept.keep()
    assert starts(snap, 30.0, kept, tell=told.append).better == plans.better
    assert told == [plans.baseline, None]


def test_the_improved_start_is_verified_here_and_passed_over_if_it_fails(monkeypatch):
    """The cycle verifies the improved start before taking it (the second core no longer
    does); one the verifier rejects gives way to greedy's plan, verified where used."""
    from planner import run
    from planner.formulate import formulate
    from planner.greedy import greedy
    from planner.improve import improve
    from planner.starts import Starts

    snap = random_snapshot(50_515, with_running=True, with_topology=True)    # improving serves more here
    form = formulate(snap, locality=False)
    baseline = greedy(snap).decisions
    better = improve(snap, baseline)
    assert better != baseline
    plan, values, verified = run.start_for(snap, form, Starts(baseline, better))
    assert plan is better and values is not None and verified
    monkeypatch.setattr(run, "verify", lambda snapshot, decisions: ["broken"] if decisions is better else [])
    plan, values, verified = run.start_for(snap, form, Starts(baseline, better))
    assert plan is baseline and values is not None and not verified


def test_where_no_stage_searches_the_start_is_described_beside_as_here(tmp_path, monkeypatch):
    """An extended due: the improved start's pending reasons and summary are worked out on
    the second core while the cycle verifies it; the plan is the one described here."""
    from generated import small_cluster
    from planner import run, solve
    from planner.assemble import describe
    from planner.pipeline import plan_snapshot

    snap = small_cluster(tmp_path)
    monkeypatch.setattr(solve, "MAX_NONZEROS", 100)      # a model too large: due extended,
    monkeypatch.setattr(run, "MAX_NONZEROS", 100)        # the start is the plan
    asked = []
    real = run.description_of
    monkeypatch.setattr(run, "description_of", lambda d, described: asked.append(described) or real(d, described))
    plan = plan_snapshot(snap, time_limit=30.0)
    [described] = asked
    described_plan = described.decisions
    decisions = run.Decisions(admissions=plan.admissions, evictions=plan.evictions)
    assert decisions == described_plan
    here = describe(snap, described_plan, hints_until=0.0)    # hints stop once asked for: some, or none
    assert plan.summary == here.summary
    assert plan.pending and all(p.reason.startswith(here.reasons[p.workload]) for p in plan.pending)
