"""waitForPodsReady (planner.cycle.podsready): timeouts, backoff, deactivation, recovery and
blockAdmission on hand-made snapshots, judged at the snapshot's planning time; the
verifier's own check of those evictions; the reader's count of Ready pods."""

from __future__ import annotations

import dataclasses

import pytest

from models import Decisions, Eviction, ObjectRef, Plan, SolverReport, WorkloadState
from models.kueue_config import CREATION_TIMESTAMP, KueueConfig, RequeuingStrategy, WaitForPodsReadyConfig
from planner.cycle import podsready
from planner.cycle import plan_snapshot
from planner.output.document import plan_to_dict
from planner.snapshot import build_snapshot
from planner.verify import verify
from tests.builders import NOW, cq, flavor, job, lq, node, running_job, snapshot

from tests import test_snapshot as ts

TIMEOUT = 300.0
REF = ObjectRef("Job", "team-a", "stuck")


def config(**kw: object) -> KueueConfig:
    strategy = kw.pop("strategy", RequeuingStrategy(backoff_base_seconds=60, backoff_max_seconds=3600))
    return KueueConfig(wait_for_pods_ready=WaitForPodsReadyConfig(
        enabled=kw.pop("enabled", True), timeout_seconds=kw.pop("timeout", TIMEOUT),  # type: ignore[arg-type]
        requeuing_strategy=strategy, **kw))  # type: ignore[arg-type]


def stuck(*, admitted_ago: float, ready: int = 1, pods: int = 2, **fields: object):
    """team-a/stuck: running 2 pods on n1 (2 CPUs each), `ready` of them Ready."""
    w = running_job("team-a", "stuck", nodes={"n1": pods}, flavors="default", cpu="2", admitted=NOW - admitted_ago)
    return dataclasses.replace(w, pods_ready={"main": (ready, pods)}, **fields)


def cluster(*workloads, kueue: KueueConfig | None = None):
    """One 4-CPU node, one queue with 4 CPUs of quota; the running work fills it."""
    snap = snapshot(nodes=[node("n1", cpu="4")], flavors=[flavor("default")],
                    cqs=[cq("cq", quotas={"default": {"cpu": 4, "memory": "64Gi"}})],
                    lqs=[lq("team-a", "lq", "cq")], workloads=workloads)
    return dataclasses.replace(snap, kueue_config=kueue or config())


def waiting(name: str = "next", cpu: str = "4", **kw: object):
    return job("team-a", name, pods=1, cpu=cpu, created=NOW - 100, **kw)


# ---------------------------------------------------------------- the timeout


def test_pods_not_ready_past_the_timeout_are_evicted_and_requeued_with_the_first_backoff():
    snap = cluster(stuck(admitted_ago=TIMEOUT), waiting())
    plan = plan_snapshot(snap)
    assert [(e.workload, e.reason, e.for_, e.requeue_count, e.requeue_at) for e in plan.evictions] == [
        (REF, "PodsReadyTimeout", (), 1, NOW + 60)]          # n = 1: base * 2^0
    assert "WaitForStart" in plan.evictions[0].message and "main 1/2" in plan.evictions[0].message
    # its 4 CPUs are free for the plan: the waiting job takes them in the same cycle
    assert [a.workload.name for a in plan.admissions] == ["next"]
    assert plan.summary["evicted"] == 1


def test_one_second_before_the_timeout_nothing_happens():
    plan = plan_snapshot(cluster(stuck(admitted_ago=TIMEOUT - 1), waiting()))
    assert plan.evictions == ()
    assert plan.admissions == ()


def test_ready_or_unknown_readiness_or_waitforpodsready_off_never_times_out():
    for w, kueue in ((stuck(admitted_ago=9999, ready=2), config()),
                     (dataclasses.replace(stuck(admitted_ago=9999), pods_ready=None), config()),
                     (stuck(admitted_ago=9999), config(enabled=False))):
        assert plan_snapshot(cluster(w, kueue=kueue)).evictions == ()


def test_succeeded_pods_count_as_ready_through_the_reader(tmp_path):
    """Kueue's Job PodsReady: ready + succeeded >= admitted. Read from pods: one Ready, one
    Succeeded, one Pending of 3 admitted -> 2 of 3; a snapshot with no pods cannot tell."""
    nodes = {"n1": 3}
    objects = ts.base() + [
        ts.node("n1"),
        ts.job("j", suspend=False, parallelism=3,
               annotations={"stowplan.io/assignment": ts.assignment(nodes),
                            "stowplan.io/admitted-at": "2026-12-01T10:00:00Z",
                            "stowplan.io/requeue-count": "2",
                            "stowplan.io/requeue-at": "2026-12-01T10:01:00Z",
                            "stowplan.io/pods-ready-at": "2026-12-01T10:02:00Z",
                            "stowplan.io/eviction-reason": "PodsReadyTimeout: WaitForStart ..."}),
    ]
    pods = [ts.pod("j-a", "n1", owner_job="j"), ts.pod("j-b", "n1", owner_job="j", phase="Succeeded"),
            ts.pod("j-c", "n1", owner_job="j", phase="Pending")]
    pods[0]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    pods[2]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    w = ts.workload(build_snapshot(objects + pods), "j")
    assert w.pods_ready == {"main": (2, 3)} and w.all_pods_ready is False
    assert (w.requeue_count, w.requeue_at, w.pods_ready_at, w.eviction_reason) == (
        2, ts.T0_EPOCH + 60, ts.T0_EPOCH + 120, "PodsReadyTimeout")
    pods[2]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert ts.workload(build_snapshot(objects + pods), "j").all_pods_ready is True
    assert ts.workload(build_snapshot(objects), "j").pods_ready is None


# ---------------------------------------------------------------- backoff and deactivation


@pytest.mark.parametrize("count, expected", [(1, 10.0), (2, 20.0), (3, 30.0), (9, 30.0)])
def test_backoff_is_base_times_two_to_the_n_minus_one_capped_at_max(count, expected):
    cfg = config(strategy=RequeuingStrategy(backoff_base_seconds=10, backoff_max_seconds=30)).wait_for_pods_ready
    assert podsready.backoff_seconds(count, cfg) == expected


def test_the_third_requeue_waits_four_bases():
    plan = plan_snapshot(cluster(stuck(admitted_ago=TIMEOUT, requeue_count=2)))
    (e,) = plan.evictions
    assert (e.reason, e.requeue_count, e.requeue_at) == ("PodsReadyTimeout", 3, NOW + 240)


def test_past_backoff_limit_count_the_workload_is_deactivated_not_requeued():
    kueue = config(strategy=RequeuingStrategy(backoff_limit_count=2))
    plan = plan_snapshot(cluster(stuck(admitted_ago=TIMEOUT, requeue_count=2), kueue=kueue))
    (e,) = plan.evictions
    assert (e.reason, e.requeue_count, e.requeue_at) == ("Deactivated", 2, None)
    assert e.message.startswith("RequeuingLimitExceeded: ")
    # one requeue fewer: still requeued
    plan = plan_snapshot(cluster(stuck(admitted_ago=TIMEOUT, requeue_count=1), kueue=kueue))
    assert [(e.reason, e.requeue_count) for e in plan.evictions] == [("PodsReadyTimeout", 2)]


def test_a_workload_in_its_backoff_waits_and_is_planned_once_the_backoff_is_over():
    requeued = dataclasses.replace(waiting("requeued"), requeue_count=1, requeue_at=NOW + 1,
                                   eviction_reason="PodsReadyTimeout")
    plan = plan_snapshot(cluster(requeued))
    assert plan.admissions == ()
    (entry,) = plan.pending
    assert "requeued after PodsReadyTimeout (requeue 1): backoff until 2026-12-01T12:00:01Z" in entry.reason
    plan = plan_snapshot(cluster(dataclasses.replace(requeued, requeue_at=NOW)))
    assert [a.workload.name for a in plan.admissions] == ["requeued"]


def test_a_deactivated_workload_is_reported_and_never_planned():
    plan = plan_snapshot(cluster(dataclasses.replace(waiting("off"), deactivated="RequeuingLimitExceeded")))
    assert plan.admissions == ()
    assert "deactivated (RequeuingLimitExceeded)" in plan.pending[0].reason


def test_creation_timestamp_strategy_queues_a_requeued_workload_by_its_creation():
    requeued = dataclasses.replace(waiting("requeued"), queued_at=NOW - 10, eviction_reason="PodsReadyTimeout")
    kueue = config(strategy=RequeuingStrategy(timestamp=CREATION_TIMESTAMP))
    (w,) = podsready.judge(cluster(requeued, kueue=kueue)).seen.workloads
    assert w.queued_at == NOW - 100
    (w,) = podsready.judge(cluster(requeued)).seen.workloads    # Eviction (default): the eviction time
    assert w.queued_at == NOW - 10


# ---------------------------------------------------------------- recovery and the record


def test_recovery_timeout_counts_from_when_readiness_was_first_seen_lost():
    was_ready = dict(pods_ready_at=NOW - 5000, pods_not_ready_at=NOW - TIMEOUT)
    (e,) = plan_snapshot(cluster(stuck(admitted_ago=9999, **was_ready))).evictions
    assert (e.reason, e.requeue_count) == ("PodsReadyTimeout", 1) and "WaitForRecovery" in e.message
    assert plan_snapshot(cluster(stuck(admitted_ago=9999, pods_ready_at=NOW - 5000,
                                       pods_not_ready_at=NOW - TIMEOUT + 1))).evictions == ()
    # recoveryTimeout 0 turns it off; the admission's timeout no longer applies once Ready
    assert plan_snapshot(cluster(stuck(admitted_ago=9999, **was_ready),
                                 kueue=config(recovery_timeout_seconds=0.0))).evictions == ()


def test_marks_record_first_ready_and_first_not_ready_at_the_planning_time():
    ready = stuck(admitted_ago=10, ready=2)
    lost = stuck(admitted_ago=9999, pods_ready_at=NOW - 50)
    back = stuck(admitted_ago=9999, ready=2, pods_ready_at=NOW - 50, pods_not_ready_at=NOW - 20)
    assert podsready.judge(cluster(ready)).marks == {REF: {"stowplan.io/pods-ready-at": "2026-12-01T12:00:00Z"}}
    assert podsready.judge(cluster(lost)).marks == {REF: {"stowplan.io/pods-not-ready-at": "2026-12-01T12:00:00Z"}}
    assert podsready.judge(cluster(back)).marks == {REF: {"stowplan.io/pods-not-ready-at": None}}
    assert podsready.judge(cluster(ready, kueue=config(enabled=False))).marks == {}


# ---------------------------------------------------------------- blockAdmission


def test_block_admission_holds_every_admission_while_an_admitted_workload_is_not_ready():
    young = stuck(admitted_ago=10, pods=1, ready=0)              # 2 of 4 CPUs; 2 free
    small = waiting("small", cpu="2")
    assert [a.workload.name for a in plan_snapshot(cluster(young, small)).admissions] == ["small"]
    plan = plan_snapshot(cluster(young, small, kueue=config(block_admission=True)))
    assert plan.admissions == ()
    assert "blockAdmission: waiting for all admitted workloads to be in PodsReady condition" in plan.pending[0].reason
    ready = stuck(admitted_ago=10, pods=1, ready=1)
    plan = plan_snapshot(cluster(ready, small, kueue=config(block_admission=True)))
    assert [a.workload.name for a in plan.admissions] == ["small"]


# ---------------------------------------------------------------- the verifier's own check


def test_verifier_accepts_a_readiness_eviction_only_when_the_condition_holds():
    def check(w, e, kueue=None):
        return verify(cluster(w, kueue=kueue), Decisions((), (e,)))

    good = Eviction(REF, "PodsReadyTimeout", (), 0.0, requeue_count=1, requeue_at=NOW + 60)
    assert check(stuck(admitted_ago=TIMEOUT), good) == []
    assert "all Ready" in check(stuck(admitted_ago=TIMEOUT, ready=2), good)[0]
    assert "before its pods' time ran out" in check(stuck(admitted_ago=TIMEOUT - 1), good)[0]
    assert "waitForPodsReady is off" in check(stuck(admitted_ago=TIMEOUT), good, config(enabled=False))[0]
    assert "must record requeue 1 at now + 60s" in check(
        stuck(admitted_ago=TIMEOUT), dataclasses.replace(good, requeue_at=NOW + 30))[0]
    assert any("for nobody" in v for v in check(stuck(admitted_ago=TIMEOUT), dataclasses.replace(good, for_=(REF,))))
    limited = config(strategy=RequeuingStrategy(backoff_limit_count=0))
    assert "must be Deactivated" in check(stuck(admitted_ago=TIMEOUT), good, limited)[0]
    assert check(stuck(admitted_ago=TIMEOUT), Eviction(REF, "Deactivated", (), 0.0, requeue_count=0), limited) == []
    assert "reason is PodsReadyTimeout" in check(stuck(admitted_ago=TIMEOUT), Eviction(REF, "Deactivated"))[0]


def test_the_plan_document_lists_the_requeue_and_why():
    (e,) = plan_to_dict(plan_snapshot(cluster(stuck(admitted_ago=TIMEOUT))))["evictions"]
    assert e["reason"] == "PodsReadyTimeout" and e["for"] == []
    assert (e["requeueCount"], e["requeueAt"]) == (1, "2026-12-01T12:01:00Z")
    assert e["message"].startswith("WaitForStart: pods not all Ready (main 1/2) 300s after admission")
    # a preemption's entry has none of these keys (golden plans unchanged)
    preempted = Plan("s", "", 0, SolverReport("milp", "optimal", 0.0, 0.0, 0.0),
                     evictions=(Eviction(REF, "Preempted", (ObjectRef("Job", "team-a", "b"),), 2.0),))
    assert list(plan_to_dict(preempted)["evictions"][0]) == ["workload", "reason", "for", "cost"]


def test_judging_is_a_function_of_the_snapshot_not_the_clock():
    snap = cluster(stuck(admitted_ago=TIMEOUT), waiting())
    assert podsready.judge(snap) == podsready.judge(snap)
    later = dataclasses.replace(snap, now=NOW + 3600)
    assert podsready.judge(later).evictions[0].requeue_at == NOW + 3600 + 60
    assert podsready.judge(cluster(waiting())).planning.workloads[0].state is WorkloadState.PENDING


def test_from_snapshot_objects_a_policy_turns_it_on_and_the_reader_feeds_the_cycle():
    """The whole path from Kubernetes objects: a PlannerPolicy's kueueConfiguration, a running
    Job admitted at T0 with one of its two pods Pending, planned 300 s later."""
    policy = {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
              "spec": {"kueueConfiguration": {"waitForPodsReady": {
                  "timeout": "5m", "requeuingStrategy": {"backoffBaseSeconds": 30, "backoffLimitCount": 3}}}}}
    objects = ts.base() + [policy, ts.node("n1"), ts.job("j", suspend=False, parallelism=2, annotations={
        "stowplan.io/assignment": ts.assignment({"n1": 2}), "stowplan.io/admitted-at": "2026-12-01T10:00:00Z",
        "stowplan.io/requeue-count": "1"})]
    pods = [ts.pod("j-a", "n1", owner_job="j"), ts.pod("j-b", "n1", owner_job="j", phase="Pending")]
    pods[0]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    plan = plan_snapshot(build_snapshot(objects + pods, now=ts.T0_EPOCH + 300))
    (e,) = plan.evictions
    assert (e.workload.name, e.reason, e.requeue_count, e.requeue_at) == ("j", "PodsReadyTimeout", 2,
                                                                         ts.T0_EPOCH + 300 + 60)
    assert "main 1/2" in e.message
    assert plan_snapshot(build_snapshot(objects + pods, now=ts.T0_EPOCH + 299)).evictions == ()


def test_a_saved_plan_keeps_the_requeue_for_apply(tmp_path):
    """`plan --out` then `apply --plan`: the eviction read back carries the same requeue."""
    from planner.cluster.planfile import load_plan, render_saved

    plan = plan_snapshot(cluster(stuck(admitted_ago=TIMEOUT), waiting()))
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {REF: "7", ObjectRef("Job", "team-a", "next"): "8"}, "yaml"))
    loaded, versions = load_plan(str(path))
    assert loaded.evictions == plan.evictions
    assert versions[REF] == "7"


def test_a_running_workload_deactivated_by_hand_is_evicted_whatever_its_pods_do():
    """Kueue evicts an admitted Workload whose spec.active turns false; here the annotation."""
    w = stuck(admitted_ago=10, ready=2, deactivated="ByHand")
    for kueue in (config(), config(enabled=False)):
        plan = plan_snapshot(cluster(w, waiting("next", cpu="2"), kueue=kueue))
        (e,) = plan.evictions
        assert (e.workload, e.reason, e.for_, e.message.split(":")[0]) == (REF, "Deactivated", (), "ByHand")
        assert [a.workload.name for a in plan.admissions] == ["next"]
    assert "for nobody" in verify(cluster(w), Decisions((), (dataclasses.replace(e, for_=(REF,)),)))[-1]
