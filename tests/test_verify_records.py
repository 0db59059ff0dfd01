"""The verifier's typed records (issue 38): each violation carries its rule and what it
is about, its sentence is the one `verify()` prints, and the cycle decides on the
record (its rule and workload), never on the sentence."""

from __future__ import annotations

import dataclasses

from models import Decisions, Resize
from planner.cycle import plan_snapshot, subjects
from planner.verify import Rule, Violation, check, check_resizes, messages, unneeded, unstable, verify
from test_elastic import job_snap
from test_needed_evictions import by_name, laundering_plan, laundering_world
from test_verify import D, cpu_admit, cpu_cq, cpu_job, mk_snapshot
from test_verify_stable import borrowed, ref


def test_an_over_quota_admission_is_a_quota_violation_naming_its_workload() -> None:
    ok, over = cpu_job("ok", "cq-a", 4), cpu_job("over", "cq-a", 5)
    snap = mk_snapshot([ok, over], cqs=[cpu_cq("cq-a", 4000)])
    found = check(snap, D(cpu_admit(over)))
    quota = [v for v in found if v.rule is Rule.QUOTA]
    assert len(quota) == 1, found
    assert quota[0].workload == over.ref and quota[0].workloads == (over.ref,)
    assert (quota[0].queue, quota[0].flavor) == ("cq-a", "tas")
    # The sentence is the one verify() gives, in the same order: goldens compare it.
    assert [str(v) for v in found] == [v.message for v in found] == verify(snap, D(cpu_admit(over)))
    assert check(snap, D(cpu_admit(ok))) == []


def test_a_valid_plan_has_no_record_and_a_record_is_frozen() -> None:
    v = Violation(Rule.CAPACITY, "node n1: cpu 9 > allocatable 8", node="n1")
    try:
        v.message = "changed"   # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a Violation must be frozen")
    assert v.workload is None and str(v) == "node n1: cpu 9 > allocatable 8"


def test_stability_records_name_the_waiting_workload_and_its_queue() -> None:
    found = unstable(borrowed(), Decisions())
    assert [(v.rule, v.workload, v.queue) for v in found] == [(Rule.STABILITY, ref("a", "waiting"), "team-a")]


def test_an_unneeded_eviction_names_its_victim_first() -> None:
    snap = laundering_world()
    a = by_name(snap, "a-running")
    laundered = laundering_plan(snap)
    found = unneeded(snap, laundered)
    assert [v.rule for v in found] == [Rule.NEEDED] and found[0].workload == a.ref
    assert any(v.rule is Rule.NEEDED and v.workload == a.ref for v in check(snap, laundered))


def test_the_cycle_decides_on_the_rule_and_workload_not_the_sentence() -> None:
    """planner.cycle's judge takes the workloads a rule flags from the records: a
    reworded sentence changes nothing, another rule naming the same workload is not
    mistaken for it."""
    found = unstable(borrowed(), Decisions())
    reworded = [dataclasses.replace(v, message="reworded") for v in found]
    other = Violation(Rule.QUOTA, f"{ref('a', 'other')}: left waiting though it fits", workloads=(ref("a", "other"),))
    assert subjects(reworded + [other], Rule.STABILITY) == frozenset({ref("a", "waiting")})
    assert subjects(reworded + [other], Rule.NEEDED) == frozenset()


def test_a_bad_resize_is_a_resize_record_naming_its_workload_and_node() -> None:
    """The resize rules (planner.verify.resize) give records too: a shrink below the floor
    that releases pods on a node the Job does not run on is two RESIZE records about the
    Job, the release's naming its node; their sentences are the ones the cycle's error prints."""
    snap = job_snap()          # the elastic Job runs 4 pods on n1, floor 2, most 6
    job = snap.workloads[0].ref
    bad = Resize(job, "cq", "main", 4, 1, release=(("n1", 2), ("n2", 1)), reason="Preempted")
    found = check_resizes(snap, dataclasses.replace(plan_snapshot(snap), resizes=(bad,)))
    assert [(v.rule, v.workload, v.node, v.queue) for v in found] == [
        (Rule.RESIZE, job, "n2", "cq"), (Rule.RESIZE, job, None, "cq")], found
    assert messages(found) == [f"resize of {job}: releases 1 pods on n2, where it runs 0",
                               f"resize of {job}: 1 pods of main is below its minimum 2"]
    good = Resize(job, "cq", "main", 4, 2, release=(("n1", 2),), reason="Preempted")
    assert check_resizes(snap, dataclasses.replace(plan_snapshot(snap), resizes=(good,))) == []
