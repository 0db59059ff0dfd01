"""The real Kueue v0.17.0 on Stowplan snapshots (tools/peer), and greedy beside it.

Each harness run starts a control plane of its own with Kueue's manager (about
20-30 s for a small snapshot here), so these tests do not use the session's
`control_plane`. They skip, saying why, where the Kueue binary is not built (Go
missing, or its build failed: see tests/controlplane/build.sh).

The hand-made snapshots' outcomes are derived from Kueue's source:
(i)   BestEffortFIFO steps past a head that does not fit;
(ii)  TAS BestFit (pkg/cache/scheduler/tas_flavor_snapshot.go findLevelWithFitDomains /
      findBestFitDomainBy): a preferred-rack job too big for any rack takes racks in
      order of most free pods and then the smallest that covers the rest, and fills
      the fewest nodes of them; a required-rack job takes the smallest rack it fits;
(iii) reclamation within the cohort (reclaimWithinCohort: Any) evicts a borrower
      whatever its priority for a workload that fits its queue's nominal quota.

Kueue runs with the snapshot's own fairSharing / admissionFairSharing /
waitForPodsReady sections (tools/peer/kueue.py kueue_sections), as greedy does.
The harness creates only Jobs and JobSets: workloads of the other kinds
(PyTorchJob, MPIJob, TrainJob, RayCluster, RayJob, LeaderWorkerSet, Pod, PodGroup)
are left out of the run for Kueue and greedy alike, and the agreement test prints
them ("not compared: ..."); on fixtures/many-kinds.yaml that compares 3 of its 12
workloads. A fixture with no workload the harness can create fails the test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import rig
from models import ObjectRef, is_gpu
from peer_kit import (
    GPU, cluster_queue, flavor, job, local_queue, namespace, node, priority_class, snapshot_document, topology,
)
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.snapshot import read_snapshot
from tools.peer.compare import compare, decisions_of, outcomes, report_lines
from tools.peer.harness import PeerOptions, available, run_kueue

REPO = Path(__file__).resolve().parents[2]
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
# Where the agreement test also writes what it saw (agreement, every disagreement).
REPORT = os.environ.get("STOWPLAN_PEER_REPORT")


@pytest.fixture(scope="module")
def manifest():
    try:
        built = rig.build(quiet=True)
    except rig.ControlPlaneError as err:
        pytest.skip(f"test control plane not built: {err}")
    why = available(built)
    if why:
        pytest.skip(why)
    return built


def run(manifest, tmp_path, items, name="snap.json"):
    path = tmp_path / name
    path.write_text(json.dumps(snapshot_document(items)))
    result = run_kueue(path, PeerOptions(quiet_seconds=6.0), manifest=manifest)
    assert result.settled, result.notes
    return result


def admitted(result):
    return {a.workload.name: a for a in result.decisions.admissions}


def nodes(admission):
    out = {}
    for ps in admission.pod_sets:
        for node_name, count in ps.pods_per_node().items():
            out[node_name] = out.get(node_name, 0) + count
    return out


def test_one_queue_admits_what_fits_past_a_head_that_does_not(manifest, tmp_path):
    result = run(manifest, tmp_path, [
        namespace("ml"), node("n1", gpu=8), flavor("f"),
        cluster_queue("cq", {"f": {GPU: 4}}), local_queue("ml", "lq", "cq"),
        job("ml", "too-big", gpu=6, created="2026-12-01T09:00:00Z"),
        job("ml", "fits", gpu=4, created="2026-12-01T10:00:00Z"),
    ])
    assert set(admitted(result)) == {"fits"}
    (pod_set,) = admitted(result)["fits"].pod_sets
    assert (pod_set.count, pod_set.flavors, pod_set.domains) == (1, {GPU: "f"}, ())   # quota only
    rows = {r.ref.name: r for r in result.rows}
    assert rows["too-big"].outcome == "pending" and "insufficient" in rows["too-big"].message
    assert rows["fits"].quota_only and result.decisions.evictions == ()


def test_tas_places_by_best_fit(manifest, tmp_path):
    # Free GPUs per rack: r1 19 (8+8+3), r2 10 (8+2), r3 10 (5+5), r4 16 (8+8); one GPU per pod.
    racks = {"r1": {"a1": 8, "a2": 8, "a3": 3}, "r2": {"b1": 8, "b2": 2}, "r3": {"c1": 5, "c2": 5},
             "r4": {"d1": 8, "d2": 8}}
    items = [namespace("ml"), topology("topo", RACK, HOST),
             flavor("tas", node_labels={"pool": "tas"}, topology_name="topo"),
             cluster_queue("cq", {"tas": {GPU: 100}}), local_queue("ml", "lq", "cq"),
             priority_class("high", 100), priority_class("low", 50),
             # No rack holds 20: racks by most free first (r1), then the smallest that covers
             # the one pod left (r2, before r3 by name); in them the fewest nodes: a1, a2, b1.
             job("ml", "wide", pods=20, priority="high", created="2026-12-01T09:00:00Z",
                 template_annotations={PREFERRED: RACK}),
             # Left: r1 3, r2 6, r3 10, r4 16: the smallest rack that holds 10 is r3, not r4.
             job("ml", "rack", pods=10, priority="low", created="2026-12-01T09:30:00Z",
                 template_annotations={REQUIRED: RACK})]
    items += [node(n, gpu=g, labels={RACK: r, "pool": "tas"}) for r, ns in racks.items() for n, g in ns.items()]
    result = run(manifest, tmp_path, items)
    got = admitted(result)
    assert nodes(got["wide"]) == {"a1": 8, "a2": 8, "b1": 4}
    assert nodes(got["rack"]) == {"c1": 5, "c2": 5}
    assert not result.quota_only


def test_a_lender_reclaims_from_a_borrower_of_higher_priority(manifest, tmp_path):
    result = run(manifest, tmp_path, [
        namespace("lend"), namespace("borrow"), node("n1", gpu=8), node("n2", gpu=8), flavor("f"),
        cluster_queue("lender", {"f": {GPU: 8}}, cohort="c",
                      preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}),
        cluster_queue("borrower", {"f": {GPU: 0}}, cohort="c"),
        local_queue("lend", "lq", "lender"), local_queue("borrow", "lq", "borrower"),
        priority_class("high", 1000), priority_class("low", 100),
        job("borrow", "b-run", gpu=8, priority="high", created="2026-12-01T08:00:00Z",
            running_on={"n1": 1}, flavor_name="f"),
        job("lend", "l-new", gpu=4, priority="low", created="2026-12-01T11:30:00Z"),
    ])
    assert result.dropped == ()
    assert set(admitted(result)) == {"l-new"}
    (eviction,) = result.decisions.evictions
    assert eviction.workload == ObjectRef("Job", "borrow", "b-run")
    assert eviction.reason == "Reclaimed" and eviction.for_ == (ObjectRef("Job", "lend", "l-new"),)
    rows = {r.ref.name: r for r in result.rows}
    assert rows["b-run"].eviction_reason == "InCohortReclamation"
    # The effective snapshot keeps b-run running where it ran, with Kueue's time and UID.
    (b_run,) = [w for w in result.effective.workloads if w.ref.name == "b-run"]
    assert b_run.assignment[0].pods_per_node() == {"n1": 1} and b_run.admitted_at <= result.effective.now
    # ... and its file reads back as the same snapshot.
    result.write_effective(tmp_path / "effective.json")
    again = read_snapshot([str(tmp_path / "effective.json")])
    fields = ("ref", "state", "queued_at", "created_at", "uid", "assignment", "admitted_at", "priority")
    assert [tuple(getattr(w, f) for f in fields) for w in again.workloads] == \
           [tuple(getattr(w, f) for f in fields) for w in result.effective.workloads]
    assert again.now == result.effective.now


# ---------------------------------------------------------------- greedy beside Kueue

def generated(tmp_path: Path) -> Path:
    from planner.tools.generate import generate, preset, to_json

    path = tmp_path / "generated-s128.json"
    path.write_text(to_json(generate(preset("S", fanout=(2, 4, 16), pending=200, running=100))))
    return path


SNAPSHOTS = sorted(p.name for p in (REPO / "fixtures").glob("*.yaml") if not p.name.endswith(".plan.yaml"))


# Kueue's own cycles are not deterministic on a generated cluster: which queues' heads
# meet in a cycle and which head takes quota a preemption just freed depend on timing
# (two runs of the same snapshot differ by several percent; BENCHMARKS.md, peer). On
# it greedy agrees with Kueue on about 0.93 of workloads, short of 0.98: the test
# shows the number and fails softly there, and must pass on the fixtures.
GENERATED = pytest.param("generated-s128", marks=pytest.mark.xfail(
    strict=False, reason="Kueue's own cycles are timing-dependent at this size; agreement about 0.93"))


# With fair sharing, the victims of a fair-sharing preemption among equal-priority,
# equally old jobs of one queue are Kueue's timing: its own admission of the newest job
# may still be in flight when it preempts, and the write that lands last decides, so a
# different job of the same queue waits from run to run (peerfix: 1 of 4 runs agreed on
# every workload, all 4 on the split). What fair sharing decides is each queue's share:
# there Kueue and greedy must agree exactly, GPU for GPU per ClusterQueue.
SHARES_ONLY = {"fair-sharing.yaml"}


def gpus_by_queue(snapshot: Any, decisions: Any) -> dict[str, int]:
    """GPUs each ClusterQueue runs once `decisions` are carried out."""
    kinds = outcomes(snapshot, decisions)
    admitted = {a.workload: a for a in decisions.admissions}
    out: dict[str, int] = {}
    for w in snapshot.workloads:
        outcome = kinds.get(w.ref)
        if outcome is None or outcome.kind not in ("admitted", "running", "moved") or w.cluster_queue is None:
            continue
        placed = admitted[w.ref].pod_sets if w.ref in admitted else w.assignment
        counts = {a.name: a.count for a in placed}
        gpus = sum(counts.get(ps.name, 0) * amount for ps in w.pod_sets
                   for resource, amount in ps.request.items_ if is_gpu(resource))
        out[w.cluster_queue] = out.get(w.cluster_queue, 0) + gpus
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", SNAPSHOTS + [GENERATED])
def test_greedy_decides_as_kueue_does(manifest, tmp_path, name):
    path = generated(tmp_path) if name == "generated-s128" else REPO / "fixtures" / name
    result = run_kueue(path, PeerOptions(), manifest=manifest)
    greedy = decisions_of(plan_snapshot(result.effective, SolveOptions(solver="greedy")))
    comparison = compare(result.effective, result.decisions, greedy)
    lines = [f"{name}: settled {result.settled}; {result.seconds}"] + [f"note: {n}" for n in result.notes]
    if result.left_out:
        lines.append(f"not compared ({len(result.left_out)} workloads of kinds the harness cannot create, "
                     "left out for Kueue and greedy alike): " + ", ".join(map(str, result.left_out)))
    lines += report_lines(comparison)
    print("\n".join(lines))
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n\n")
    assert result.settled
    assert comparison.total > 0, "\n".join(lines)
    if name in SHARES_ONLY:
        shares = gpus_by_queue(result.effective, result.decisions), gpus_by_queue(result.effective, greedy)
        assert shares[0] == shares[1], "\n".join(lines + [f"GPUs per ClusterQueue: kueue {shares[0]}, greedy {shares[1]}"])
        return
    assert comparison.agreement >= 0.98, "\n".join(lines)
