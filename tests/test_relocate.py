"""planner.relocate: a decided plan's preferred pod sets gathered into fewer domains,
every decision (who, how many, which flavors, who is evicted) kept, the plan still valid."""

from dataclasses import replace

import pytest

from builders import GPU, cq, flavor, job, lq, node, preferred, running_job, snapshot, topology
from generated import small_cluster
from models import HOSTNAME_LABEL, Decisions, PodSetAssignment
from planner.greedy import greedy
from planner.relocate import relocate
from planner.verify import verify

RACK = "cloud.provider.com/topology-rack"


def cluster(busy=None):
    """Two racks of two 4-GPU nodes; `busy` maps nodes to GPUs taken by running work that stays."""
    nodes = [node(f"{r}-n{i}", gpu=4, labels={RACK: r}) for r in ("r1", "r2") for i in (0, 1)]
    running = [running_job("team", f"busy-{n}", nodes={n: gpus}, gpu=1, priority=1000)
               for n, gpus in (busy or {}).items()]
    quota = {"default": {GPU: 16, "cpu": 100, "memory": "1Ti"}}
    return snapshot(nodes=nodes, flavors=[flavor("default", topology="topo")],
                    topologies=[topology("topo", RACK, HOSTNAME_LABEL)],
                    cqs=[cq("cq", quotas=quota)], lqs=[lq("team", "lq", "cq")],
                    workloads=[*running, job("team", "train", pods=4, gpu=1, priority=0, topology=preferred(RACK))])


def scattered(snap, pods_per_node):
    """Greedy's admission of `train`, with its pods moved to `pods_per_node`."""
    (admission,) = greedy(snap).decisions.admissions
    (psa,) = admission.pod_sets
    moved = PodSetAssignment(name=psa.name, count=psa.count, flavors=psa.flavors, levels=(HOSTNAME_LABEL,),
                             domains=tuple(((n,), c) for n, c in sorted(pods_per_node.items())))
    return Decisions(admissions=(replace(admission, pod_sets=(moved,)),))


def racks_of(decisions):
    (admission,) = decisions.admissions
    return {name.split("-")[0] for name in admission.pod_sets[0].pods_per_node()}


def test_a_scattered_preferred_pod_set_is_gathered_into_one_rack():
    snap = cluster()
    before = scattered(snap, {"r1-n0": 2, "r2-n0": 2})
    assert verify(snap, before) == []
    after = relocate(snap, before)
    assert verify(snap, after) == []
    assert len(racks_of(after)) == 1
    (was,), (now,) = before.admissions[0].pod_sets, after.admissions[0].pod_sets
    assert (now.count, dict(now.flavors)) == (was.count, dict(was.flavors))
    assert after.evictions == before.evictions


def test_a_pod_set_with_no_better_place_stays_where_it_was():
    """Running work leaves 3 GPUs per rack to `train`: its 4 pods fit in no
    single rack, so nothing moves."""
    snap = cluster(busy={"r1-n0": 2, "r1-n1": 3, "r2-n0": 2, "r2-n1": 3})
    before = scattered(snap, {"r1-n0": 2, "r2-n0": 2})
    assert verify(snap, before) == []
    assert relocate(snap, before) == before


@pytest.mark.parametrize("seed", range(4))
def test_relocating_generated_plans_keeps_them_valid_and_no_less_local(tmp_path, seed):
    """Plans decoded from the compact model (what relocate is for) stay verifier-clean,
    keep every decision, and span no more domains afterwards."""

    import numpy as np

    from planner import metrics
    from planner.decode import decode
    from planner.formulate import formulate
    from planner.improve import improve
    from planner.solve import HighsBackend, solve
    from planner.warmstart import start_from

    snap = small_cluster(tmp_path, seed)
    form = formulate(snap, locality=False)
    start = start_from(form, improve(snap, greedy(snap).decisions))
    outcome = solve(form, start, HighsBackend(form.arrays), 10.0, 1e-4)
    decoded = decode(form, outcome.values)
    after = relocate(snap, decoded)
    assert verify(snap, after) == []
    assert after.evictions == decoded.evictions
    key = lambda d: sorted((a.workload, a.cluster_queue, tuple((p.name, p.count, tuple(sorted(p.flavors.items())))
                                                             for p in a.pod_sets)) for a in d.admissions)
    assert key(after) == key(decoded)
    spans = lambda d: metrics.summarize(snap, d)["locality"]["mean_domains"]
    assert spans(after) <= spans(decoded) + 1e-9
    assert np.isfinite(spans(after))


def test_a_relocation_the_verifier_rejects_is_not_used(tmp_path, monkeypatch):
    """Were relocate ever wrong, the cycle keeps the plan as decoded, still the MILP's."""

    from planner import run
    from planner.pipeline import plan_snapshot

    snap = small_cluster(tmp_path)      # the stages change the start here (tests/test_rins.py)
    broken = []

    def overfill(snapshot, decisions):
        """Every admission's pods piled onto one node: more than any node holds."""
        first = sorted(snapshot.nodes, key=lambda n: n.name)[0].name
        piled = tuple(replace(a, pod_sets=tuple(replace(p, levels=(HOSTNAME_LABEL,), domains=(((first,), p.count),))
                                                for p in a.pod_sets)) for a in decisions.admissions)
        broken.append(replace(decisions, admissions=piled))
        return broken[-1]

    monkeypatch.setattr(run, "relocate", overfill)
    plan = plan_snapshot(snap)
    assert broken and verify(snap, broken[-1]) != []
    assert plan.solver.method == "milp" and plan.solver.status != "fallback"
    assert verify(snap, Decisions(admissions=plan.admissions, evictions=plan.evictions)) == []
