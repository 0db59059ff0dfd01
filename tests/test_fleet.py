"""Planning across MultiKueue worker clusters (planner.fleet, planner.verify.fleet): the
combined plan, the one-cluster-per-workload rule, the manager's quota, first-fit as Kueue's
dispatcher does it, and `what-if --cluster` end to end on fixtures/fleet."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import pytest
import yaml
from click.testing import CliRunner

import builders as B
from models import (
    HOSTNAME_LABEL, Admission, ClusterQueue, Cohort, ObjectRef, PodSetAssignment, Snapshot, Workload, WorkloadState,
)
from planner import cli as cli_module
from planner.base.solve_options import SolveOptions
from planner import fleet as F
from planner.cluster.planfile import load_plan, render_saved
from planner.cycle import plan_snapshot
from planner.snapshot import read_snapshot
from planner.tools import fleet_gen
from planner.verify import verify_fleet

FLEET = Path(__file__).resolve().parent.parent / "fixtures" / "fleet"
GOLDEN = FLEET / "plan.golden.yaml"


def job(name: str) -> ObjectRef:
    return ObjectRef("Job", "team", name)


def fixture_fleet() -> F.Fleet:
    workers = tuple((name, read_snapshot([str(FLEET / f"{name}.yaml")])) for name in ("east", "west"))
    return F.Fleet(workers, read_snapshot([str(FLEET / "manager.yaml")]))


def milp(snapshot):  # type: ignore[no-untyped-def]
    return plan_snapshot(snapshot, SolveOptions(time_limit=10))


def test_rebind_resolves_the_workers_queue_and_drops_the_managers_topology_reason() -> None:
    fleet = fixture_fleet()
    rack_job = next(w for w in fleet.manager.workloads if w.ref == job("job-001"))
    assert F.manager_only(rack_job.blocked_reason)          # the manager has no Topology
    mine = F.rebind(rack_job, fleet.worker("east"))
    assert mine is not None and mine.cluster_queue == "gpu-cq" and mine.blocked_reason is None
    no_queue = replace(rack_job, local_queue="nowhere")
    assert F.rebind(no_queue, fleet.worker("east")) is None


def test_first_fit_dispatches_in_config_order_and_fragments() -> None:
    ff = F.first_fit(fixture_fleet())
    assert [w.ref.name for w in ff.clusters["east"]] == ["job-000", "job-001", "job-004"]
    assert [w.ref.name for w in ff.clusters["west"]] == ["job-002"]
    # 8 + 16 + 16 of the manager's 48 GPUs are held; job-003's 16 more do not fit there
    assert ff.unsent[job("job-003")] == "no quota left in the manager's ClusterQueue"


def test_joint_plan_beats_first_fit_and_keeps_each_workload_on_one_cluster() -> None:
    fleet = fixture_fleet()
    result = F.plan_fleet(fleet, milp)
    plan = result.plan
    assert result.chosen != "first-fit"
    assert F.served(plan.summary) == {1000: 48.0}
    assert F.served(result.candidates["first-fit"]) == {1000: 40.0, 100: 1.0}
    assert {a.workload.name: a.cluster for a in plan.admissions} == \
        {"job-001": "west", "job-002": "east", "job-003": "east"} or \
        sorted(a.cluster or "" for a in plan.admissions) == ["east", "east", "west"]
    for a in plan.admissions:
        nodes = {n.name for n in fleet.worker(a.cluster or "").nodes}
        assert all(set(ps.pods_per_node()) <= nodes for ps in a.pod_sets)
    assert plan.summary["fleet"] == {"chosen": result.chosen, "first_fit": {
        k: result.candidates["first-fit"][k] for k in F.PER_CLUSTER}}


def _admission(plan_admission: Admission, **changes: object) -> Admission:
    return replace(plan_admission, **changes)  # type: ignore[arg-type]


def test_verifier_refuses_a_gang_split_across_clusters() -> None:
    fleet = fixture_fleet()
    plan = F.plan_fleet(fleet, milp).plan
    workers = {name: snap for name, snap in fleet.clusters}
    assert verify_fleet(workers, fleet.manager, plan.admissions) == []
    east = next(a for a in plan.admissions if a.cluster == "east")
    # the same workload admitted on both clusters: a gang spanning clusters
    twice = (*plan.admissions, replace(east, cluster="west"))
    assert any("all on one cluster" in p and "again on west" in p for p in verify_fleet(workers, fleet.manager, twice))
    # one admission whose pods sit on the other cluster's nodes
    west_nodes = sorted(n.name for n in fleet.worker("west").nodes)
    psa = east.pod_sets[0]
    split = replace(psa, domains=((psa.domains[0][0], psa.domains[0][1]), ((west_nodes[0],), psa.domains[1][1])))
    bad = tuple(replace(a, pod_sets=(split,)) if a is east else a for a in plan.admissions)
    problems = verify_fleet(workers, fleet.manager, bad)
    assert any(west_nodes[0] in p and "not nodes of cluster east" in p for p in problems)
    # an unknown cluster
    assert any("not a worker cluster" in p for p in
               verify_fleet(workers, fleet.manager, (replace(east, cluster="mars"),)))


def test_verifier_refuses_more_than_the_managers_quota() -> None:
    fleet = fixture_fleet()
    plan = F.plan_fleet(fleet, milp).plan
    workers = {name: snap for name, snap in fleet.clusters}
    job0 = next(w for w in fleet.manager.workloads if w.ref == job("job-000"))
    psa = replace(plan.admissions[0].pod_sets[0], count=1, domains=((("x",), 1),))
    extra = Admission(job0.ref, "gpu-cq", (replace(psa, name="main"),), "east")
    problems = verify_fleet(workers, fleet.manager, (*plan.admissions, extra))
    assert any("manager ClusterQueue gpu-cq: nvidia.com/gpu of flavor default-flavor uses 56 > its quota 48" in p
               for p in problems)


# Seeds the design was not tuned on (it was tried on 1-3 while written).
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_joint_plan_verifies_and_is_never_worse_than_first_fit(seed: int, tmp_path: Path) -> None:
    files = fleet_gen.fleet(seed)         # the four-cluster fleet of the benchmark
    for stem, data in files.items():
        (tmp_path / f"{stem}.yaml").write_text(yaml.safe_dump(data))
    workers = tuple((n, read_snapshot([str(tmp_path / f"{n}.yaml")])) for n in files if n != "manager")
    fleet = F.Fleet(workers, read_snapshot([str(tmp_path / "manager.yaml")]))
    result = F.plan_fleet(fleet, milp)
    assert verify_fleet(dict(workers), fleet.manager, result.plan.admissions) == []
    chosen = result.candidates[result.chosen]
    baseline = result.candidates["first-fit"]
    priorities = sorted(set(F.served(chosen)) | set(F.served(baseline)), reverse=True)
    got = [F.served(chosen).get(p, 0.0) for p in priorities]
    base = [F.served(baseline).get(p, 0.0) for p in priorities]
    assert got >= base, (seed, got, base)       # lexicographic: the first differing priority decides
    refs = [a.workload for a in result.plan.admissions]
    assert len(refs) == len(set(refs)) and all(a.cluster in dict(workers) for a in result.plan.admissions)


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli_module.cli, list(args))


FIXTURE_ARGS = ("--cluster", f"east={FLEET / 'east.yaml'}", "--cluster", f"west={FLEET / 'west.yaml'}",
                "--manager", str(FLEET / "manager.yaml"))


def _stable(text: str) -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load(text)
    data["solver"].pop("seconds", None)
    data["solver"].pop("peak_rss_mib", None)
    data["snapshot"]["source"] = Path(data["snapshot"]["source"]).name
    return data  # type: ignore[no-any-return]


def test_what_if_cluster_end_to_end_matches_its_golden() -> None:
    result = run("what-if", *FIXTURE_ARGS, "-q", "-o", "yaml")
    assert result.exit_code == 0, result.output
    got = _stable(result.stdout)
    assert all("cluster" in a for a in got["admissions"]) and len(got["admissions"]) == 3
    if os.environ.get("STOWPLAN_UPDATE_GOLDEN") == "1" or not GOLDEN.exists():
        GOLDEN.write_text(yaml.safe_dump(got, sort_keys=False, width=120))
        if os.environ.get("STOWPLAN_UPDATE_GOLDEN") != "1":
            pytest.fail(f"{GOLDEN.name} was missing and has been written; review and commit it")
    assert got == yaml.safe_load(GOLDEN.read_text())


def test_what_if_cluster_table_shows_the_cluster() -> None:
    result = run("what-if", *FIXTURE_ARGS, "-q", "-o", "table")
    assert result.exit_code == 0, result.output
    assert "east: east-r" in result.stdout and "west: west-r1-n" in result.stdout


def test_without_manager_the_first_cluster_holds_the_workloads(tmp_path: Path) -> None:
    first = tmp_path / "east.yaml"
    manager = yaml.safe_load((FLEET / "manager.yaml").read_text())
    east = yaml.safe_load((FLEET / "east.yaml").read_text())
    east["items"] += [i for i in manager["items"] if i["kind"] == "Job"]
    first.write_text(yaml.safe_dump(east))
    result = run("what-if", "--cluster", f"east={first}", "--cluster", f"west={FLEET / 'west.yaml'}", "-q", "-o", "yaml")
    assert result.exit_code == 0, result.output
    admitted = yaml.safe_load(result.stdout)["admissions"]
    # east's own ClusterQueue (32 GPUs) is then the manager's quota: two rack jobs, one per cluster
    assert sorted(a["cluster"] for a in admitted) == ["east", "west"]


def test_saved_plan_round_trips_the_cluster(tmp_path: Path) -> None:
    plan = F.plan_fleet(fixture_fleet(), milp).plan
    path = tmp_path / "plan.yaml"
    path.write_text(render_saved(plan, {a.workload: "1" for a in plan.admissions}, "yaml"))
    loaded, _ = load_plan(str(path))
    assert [(a.workload, a.cluster) for a in loaded.admissions] == [(a.workload, a.cluster) for a in plan.admissions]


@pytest.mark.parametrize("args, says", [
    (("--cluster", "east"), "--cluster: 'east' is not NAME=SNAPSHOT"),
    (("--cluster", "east=/nonexistent/east.yaml"), "--cluster: cluster east: no such file"),
    (("--cluster", f"east={FLEET / 'east.yaml'}", "--cluster", f"east={FLEET / 'west.yaml'}"), "--cluster: names cluster 'east' twice"),
    (("--cluster", f"east={FLEET / 'east.yaml'}", "--manager", "/nonexistent/m.yaml"), "--manager: no such file"),
    ((str(FLEET / "east.yaml"), "--cluster", f"east={FLEET / 'east.yaml'}"), "--cluster: give SNAPSHOT or --cluster"),
])
def test_bad_cluster_flags_exit_2_naming_the_flag(args: tuple[str, ...], says: str) -> None:
    result = run("what-if", *args, "-q")
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_generate_fleet_writes_a_manager_and_four_workers_that_plan(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    result = run("generate", "--fleet", str(folder), "--seed", "5", "-q")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["east.yaml", "manager.yaml", "north.yaml", "south.yaml", "west.yaml"]
    again = tmp_path / "again"
    run("generate", "--fleet", str(again), "--seed", "5", "-q")
    assert (folder / "manager.yaml").read_bytes() == (again / "manager.yaml").read_bytes()   # seeded
    gpus = {name: sum(n.allocatable.get("nvidia.com/gpu") for n in read_snapshot([str(folder / f"{name}.yaml")]).nodes)
            for name in ("east", "west", "north", "south")}
    assert len(set(gpus.values())) > 1          # clusters of different sizes


# ---------------------------------------------------------------- the manager's quota, by Kueue's rules
# Small hand-built fleets: one worker with room for everything (4 nodes x 8 GPUs, its own
# ClusterQueue 32 GPUs), so only the manager's quota decides what is dispatched.

def _worker(*running: Workload) -> Snapshot:
    return B.snapshot(nodes=[B.node(f"n{i}", gpu=8, cpu=64, memory="512Gi") for i in range(1, 5)],
                      flavors=[B.flavor("gpu")],
                      cqs=[B.cq("worker-cq", quotas={"gpu": {B.GPU: 32, "cpu": 256, "memory": "2Ti"}})],
                      lqs=[B.lq("team", "lq-a", "worker-cq"), B.lq("team", "lq-b", "worker-cq")],
                      workloads=running)


def _manager_cq(name: str, gpus: object, *, cohort: str | None = None, **kw: object) -> ClusterQueue:
    """A manager ClusterQueue with `gpus` (nominal or (nominal, borrowing, lending)) of flavor
    `default`, and cpu and memory to spare."""
    quotas = {"default": {B.GPU: gpus, "cpu": 1000, "memory": "10Ti"}}
    return B.cq(name, cohort=cohort, quotas=quotas, **kw)  # type: ignore[arg-type]


def _fleet(manager_cqs: Sequence[ClusterQueue], jobs: Sequence[Workload], *, cohorts: Sequence[Cohort] = (),
           flavors: Sequence[str] = ("default",), running: Sequence[Workload] = ()) -> F.Fleet:
    """One worker `w1` and a manager with these ClusterQueues (lq-a -> cq-a, lq-b -> cq-b)
    and cohorts; `running`: dispatched workloads the worker runs (the manager's copies wait)."""
    copies = [replace(w, state=WorkloadState.PENDING, assignment=(), admitted_at=None) for w in running]
    manager = B.snapshot(flavors=[B.flavor(f) for f in flavors], cqs=manager_cqs, cohorts=cohorts,
                         lqs=[B.lq("team", "lq-a", "cq-a"), B.lq("team", "lq-b", "cq-b")],
                         workloads=[*jobs, *copies])
    return F.Fleet((("w1", _worker(*running)),), manager)


def _gpu_jobs(n: int, gpus: int, queue: str = "lq-a", prefix: str = "j") -> list[Workload]:
    return [B.job("team", f"{prefix}{i}", queue, gpu=gpus, created=B.NOW - 3600 + i) for i in range(n)]


def _on_worker(jobs: Sequence[Workload]) -> tuple[Admission, ...]:
    """Admissions of `jobs` on w1, one pod each, on nodes taken in turn (the worker's part is
    not what these tests check)."""
    return tuple(Admission(w.ref, "worker-cq", (PodSetAssignment(
        "main", 1, {B.GPU: "gpu", "cpu": "gpu", "memory": "gpu"}, (HOSTNAME_LABEL,), (((f"n{i % 4 + 1}",), 1),)),), "w1")
        for i, w in enumerate(jobs))


def _sent(assignment: F.Assignment) -> list[str]:
    return sorted(w.ref.name for ws in assignment.clusters.values() for w in ws)


COHORT_CASES = {
    # two queues of 8 GPUs in one cohort, no limits: cq-a borrows all of cq-b's 8 (once uncapped)
    "cohort without limits": ([_manager_cq("cq-a", 8, cohort="pool"), _manager_cq("cq-b", 8, cohort="pool")], [], 16),
    "borrowingLimit": ([_manager_cq("cq-a", (8, 4), cohort="pool"), _manager_cq("cq-b", 8, cohort="pool")], [], 12),
    # cq-b lends only 2 of its 8 (once uncapped)
    "lendingLimit on the lender": ([_manager_cq("cq-a", 8, cohort="pool"),
                                    _manager_cq("cq-b", (8, None, 2), cohort="pool")], [], 10),
    # nested: cq-a under cohort left, cq-b under right, both under root; right lends 4
    "nested cohorts": ([_manager_cq("cq-a", 8, cohort="left"), _manager_cq("cq-b", 8, cohort="right")],
                       [B.cohort("left", parent="root"),
                        B.cohort("right", parent="root", quotas={"default": {B.GPU: (0, None, 4)}})], 12),
}


@pytest.mark.parametrize("case", sorted(COHORT_CASES))
def test_dispatch_borrows_from_the_managers_cohort_only_as_far_as_kueue_allows(case: str) -> None:
    cqs, cohorts, cap = COHORT_CASES[case]
    jobs = _gpu_jobs(10, 2)                     # 20 GPUs wanted through cq-a; the worker has 32
    fleet = _fleet(cqs, jobs, cohorts=cohorts)
    for dispatch in (F.first_fit, F.best_fit):
        sent = dispatch(fleet)
        assert len(_sent(sent)) == cap // 2, (case, dispatch.__name__, _sent(sent))
        assert all(sent.unsent[w.ref] == "no quota left in the manager's ClusterQueue"
                   for w in jobs if w.ref.name not in _sent(sent))
        assert {f for psas in sent.manager.values() for psa in psas for f in psa.flavors.values()} == {"default"}
    workers = dict(fleet.clusters)
    assert verify_fleet(workers, fleet.manager, _on_worker(jobs[:cap // 2])) == []
    problems = verify_fleet(workers, fleet.manager, _on_worker(jobs[:cap // 2 + 1]))
    assert any(p.startswith("manager ") and f"nvidia.com/gpu of flavor default uses {cap + 2} >" in p
               for p in problems), problems
    result = F.plan_fleet(fleet, milp)
    assert len(result.plan.admissions) == cap // 2


def test_two_queues_of_one_cohort_without_borrowing_limits_are_capped_by_the_cohort() -> None:
    # (The case issue 36 names: today's crude check left such a queue uncapped.)
    fleet = _fleet([_manager_cq("cq-a", 8, cohort="pool"), _manager_cq("cq-b", 8, cohort="pool")],
                   [*_gpu_jobs(3, 8), B.job("team", "b0", "lq-b", gpu=8, created=B.NOW - 60)])
    sent = F.first_fit(fleet)
    assert _sent(sent) == ["j0", "j1"]          # cq-a's 8 and the 8 it borrows; b0 finds the cohort used up
    assert sent.unsent[ObjectRef("Job", "team", "b0")] == "no quota left in the manager's ClusterQueue"
    problems = verify_fleet(dict(fleet.clusters), fleet.manager, _on_worker(_gpu_jobs(3, 8)))
    assert any("manager Cohort pool: nvidia.com/gpu of flavor default uses 24 > its quota 16" in p for p in problems)


def test_a_lending_limit_on_the_lender_restricts_what_the_other_borrows() -> None:
    lender = _manager_cq("cq-b", (8, None, 2), cohort="pool")
    jobs = _gpu_jobs(3, 4) + _gpu_jobs(1, 2, prefix="small")
    sent = F.first_fit(_fleet([_manager_cq("cq-a", 8, cohort="pool"), lender], jobs))
    assert _sent(sent) == ["j0", "j1", "small0"]     # 4 + 4 + 2: cq-a's 8 and the 2 cq-b lends
    fleet = _fleet([_manager_cq("cq-a", 8, cohort="pool"), lender], jobs)
    problems = verify_fleet(dict(fleet.clusters), fleet.manager, _on_worker(jobs[:3]))
    assert any("manager Cohort pool: nvidia.com/gpu of flavor default uses 12 > its quota 10" in p for p in problems)


def test_the_managers_quota_is_per_flavor() -> None:
    # cq-a: flavor small (4 GPUs) before big (8): 12 GPUs in all, but no 6-GPU pod fits small
    queue = B.cq("cq-a", quotas={"small": {B.GPU: 4, "cpu": 100, "memory": "1Ti"},
                                 "big": {B.GPU: 8, "cpu": 100, "memory": "1Ti"}})
    jobs = [B.job("team", "six-a", "lq-a", gpu=6, created=B.NOW - 300),
            B.job("team", "six-b", "lq-a", gpu=6, created=B.NOW - 200),
            B.job("team", "four", "lq-a", gpu=4, created=B.NOW - 100)]
    fleet = _fleet([queue], jobs, flavors=("small", "big"))
    sent = F.first_fit(fleet)
    assert _sent(sent) == ["four", "six-a"]     # six-b fits no flavor once six-a holds big
    flavor_of = {ref.name: {psa.flavors[B.GPU] for psa in psas} for ref, psas in sent.manager.items()}
    assert flavor_of == {"six-a": {"big"}, "four": {"small"}}
    workers = dict(fleet.clusters)
    assert verify_fleet(workers, fleet.manager, _on_worker([jobs[0], jobs[2]]), manager_flavors=sent.manager) == []
    both_big = {**sent.manager, jobs[1].ref: sent.manager[jobs[0].ref]}
    problems = verify_fleet(workers, fleet.manager, _on_worker(jobs[:2]), manager_flavors=both_big)
    assert any("manager ClusterQueue cq-a: nvidia.com/gpu of flavor big uses 12 > its quota 8" in p for p in problems)
    # a flavor the queue does not list, or none where the queue offers two: refused too
    wrong = {jobs[0].ref: (replace(sent.manager[jobs[0].ref][0], flavors={B.GPU: "gpu", "cpu": "big", "memory": "big"}),)}
    assert any("lists no quota for nvidia.com/gpu in flavor gpu" in p
               for p in verify_fleet(workers, fleet.manager, _on_worker(jobs[:1]), manager_flavors=wrong))
    assert any("no manager flavor for nvidia.com/gpu" in p
               for p in verify_fleet(workers, fleet.manager, _on_worker(jobs[:1])))
    assert F.plan_fleet(fleet, milp).chosen        # the fleet plan verifies with the flavors it reserved


@pytest.mark.parametrize("when_can_borrow, flavor", [("MayStopSearch", "first"), ("TryNextFlavor", "second")])
def test_flavor_fungibility_as_kueue(when_can_borrow: str, flavor: str) -> None:
    # cq-a has 2 GPUs of flavor first (and may borrow first from cq-b), 8 of second
    quotas = {"first": {B.GPU: 2, "cpu": 100, "memory": "1Ti"}, "second": {B.GPU: 8, "cpu": 100, "memory": "1Ti"}}
    a = B.cq("cq-a", cohort="pool", quotas=quotas, when_can_borrow=when_can_borrow)
    b = B.cq("cq-b", cohort="pool", quotas={"first": {B.GPU: 8, "cpu": 100, "memory": "1Ti"}})
    jobs = _gpu_jobs(1, 4)
    sent = F.first_fit(_fleet([a, b], jobs, flavors=("first", "second")))
    assert sent.manager[jobs[0].ref][0].flavors[B.GPU] == flavor


def test_evicted_workloads_give_their_manager_quota_back() -> None:
    # r0 runs on w1 through cq-b and holds cq-b's 8 GPUs; j0 asks cq-a for 16: its 8 and
    # 8 borrowed from cq-b, which only r0's eviction frees
    r0 = B.running_job("team", "r0", "lq-b", nodes={"n1": 1}, gpu=8, flavors="gpu", admitted=B.NOW - 600)
    j0 = B.job("team", "j0", "lq-a", pods=2, gpu=8)
    fleet = _fleet([_manager_cq("cq-a", 8, cohort="pool"), _manager_cq("cq-b", 8, cohort="pool")], [j0],
                   running=[r0])
    sent = F.first_fit(fleet)
    assert _sent(sent) == [] and sent.unsent[j0.ref] == "no quota left in the manager's ClusterQueue"
    assert {ref.name for ref in sent.manager} == {"r0"}          # r0 holds the manager's quota
    workers = dict(fleet.clusters)
    admission = (Admission(j0.ref, "worker-cq", (PodSetAssignment(
        "main", 2, {B.GPU: "gpu", "cpu": "gpu", "memory": "gpu"}, (HOSTNAME_LABEL,),
        ((("n2",), 1), (("n3",), 1))),), "w1"),)
    problems = verify_fleet(workers, fleet.manager, admission, manager_flavors=sent.manager)
    assert any("manager Cohort pool: nvidia.com/gpu of flavor default uses 24 > its quota 16" in p for p in problems)
    assert verify_fleet(workers, fleet.manager, admission, [r0.ref], manager_flavors=sent.manager) == []
