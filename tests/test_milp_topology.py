"""Topology-aware placement in the MILP, hand-computed, beside Kueue's greedy BestFit."""

from builders import GPU, cq, flavor, job, lq, node, pod_set, preferred, required, sliced, snapshot, topology, workload
from models import Decisions
from planner.cycle import plan_snapshot
from planner.base.solve_options import SolveOptions
from planner.verify import verify

DC = "example.com/datacenter"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
QUOTA = {"tas": {GPU: 10_000, "cpu": 100_000, "memory": "1000Ti"}}


def cluster(nodes, workloads, levels=(BLOCK, RACK, HOST)):
    return snapshot(nodes=nodes, flavors=[flavor("tas", topology="topo")], topologies=[topology("topo", *levels)],
                    cqs=[cq("cq", quotas=QUOTA)], lqs=[lq("team", "lq", "cq")], workloads=workloads)


def rack_nodes(rack, gpus, block="b0", dc=None):
    labels = {BLOCK: block, RACK: rack, **({DC: dc} if dc else {})}
    return [node(f"{rack}-n{i}", gpu=g, labels=labels) for i, g in enumerate(gpus)]


def racks_used(plan, name):
    admission = next(a for a in plan.admissions if a.workload.name == name)
    return {values[0].split("-n")[0] for ps in admission.pod_sets for values, _ in ps.domains}


def checked(snap, solver="milp"):
    plan = plan_snapshot(snap, SolveOptions(solver=solver))
    assert verify(snap, Decisions(plan.admissions, plan.evictions)) == []
    return plan


def test_kueue_10574_twenty_pods_on_racks_with_19_10_10_free():
    """A 20-pod job (preferred rack) and, after it, a 19-pod job that needs one rack.
    Greedy places the first on 19 + 1 and the second no longer fits anywhere; the
    MILP places the first on 10 + 10 and keeps the 19-GPU rack whole for the second."""
    nodes = rack_nodes("ra", [4, 4, 4, 4, 3]) + rack_nodes("rb", [4, 4, 2]) + rack_nodes("rc", [4, 4, 2])
    snap = cluster(nodes, [job("team", "first", pods=20, gpu=1, priority=100, topology=preferred(RACK)),
                           job("team", "next", pods=19, gpu=1, priority=50, topology=required(RACK))])
    greedy = checked(snap, "greedy")
    milp = checked(snap)
    assert "ra" in racks_used(greedy, "first")
    assert [p.workload.name for p in greedy.pending] == ["next"]
    assert racks_used(milp, "first") == {"rb", "rc"}
    assert racks_used(milp, "next") == {"ra"}
    assert milp.summary["served_gpus"][50] == 19


def test_an_idle_rack_stays_whole_when_nothing_else_waits():
    nodes = rack_nodes("ra", [4, 4, 4, 4, 3]) + rack_nodes("rb", [4, 4, 2]) + rack_nodes("rc", [4, 4, 2])
    snap = cluster(nodes, [job("team", "train", pods=20, gpu=1, topology=preferred(RACK))])
    milp = checked(snap)
    assert racks_used(milp, "train") == {"rb", "rc"}
    assert milp.summary["free_domains"][RACK] == 1


def test_required_rack_fits_only_whole():
    nodes = rack_nodes("ra", [4, 4]) + rack_nodes("rb", [4, 4, 4])
    snap = cluster(nodes, [job("team", "train", pods=12, gpu=1, topology=required(RACK))])
    assert racks_used(checked(snap), "train") == {"rb"}


def test_preferred_falls_back_one_level_to_a_block():
    # No rack holds 12; block b0 holds exactly 12 (8 + 4), block b1 holds 16. The plan
    # spans two racks of one block, and fills b0 so that block b1 stays whole.
    nodes = (rack_nodes("b0r0", [4, 4], "b0") + rack_nodes("b0r1", [4], "b0")
             + rack_nodes("b1r0", [4, 4], "b1") + rack_nodes("b1r1", [4, 4], "b1"))
    snap = cluster(nodes, [job("team", "train", pods=12, gpu=1, topology=preferred(RACK))])
    used = racks_used(checked(snap), "train")
    assert used == {"b0r0", "b0r1"}


def test_preferred_falls_back_two_levels_to_a_datacenter():
    levels = (DC, BLOCK, RACK, HOST)
    nodes = (rack_nodes("d0b0r0", [4, 4], "d0b0", "d0") + rack_nodes("d0b1r0", [4, 4], "d0b1", "d0")
             + rack_nodes("d1b0r0", [4, 4], "d1b0", "d1") + rack_nodes("d1b1r0", [4], "d1b1", "d1"))
    snap = cluster(nodes, [job("team", "train", pods=16, gpu=1, topology=preferred(RACK))], levels=levels)
    used = racks_used(checked(snap), "train")
    assert used == {"d0b0r0", "d0b1r0"}  # two racks of one datacenter, not three across both


def test_pod_set_group_shares_one_rack():
    launcher = pod_set("launcher", 1, cpu="1", topology=required(RACK, group="g"))
    workers = pod_set("workers", 3, gpu=4, topology=required(RACK, group="g"))
    # Rack ra has room for the workers but no CPU left for the launcher... both fit only in rb.
    nodes = [node("ra-n0", gpu=8, cpu="8", labels={BLOCK: "b0", RACK: "ra"}),
             node("ra-n1", gpu=8, cpu="8", labels={BLOCK: "b0", RACK: "ra"}),
             node("rb-n0", gpu=8, cpu="16", labels={BLOCK: "b0", RACK: "rb"}),
             node("rb-n1", gpu=8, cpu="16", labels={BLOCK: "b0", RACK: "rb"})]
    snap = cluster(nodes, [workload("team", "mpi", pod_sets=[launcher, workers])])
    plan = checked(snap)
    assert racks_used(plan, "mpi") in ({"ra"}, {"rb"})


def test_multi_layer_slices_keep_each_layer_whole():
    # 16 pods: slices of 8 per rack, and inside them slices of 4 per host.
    nodes = rack_nodes("ra", [4, 4, 2, 2]) + rack_nodes("rb", [4, 4, 4])
    request = sliced(RACK, 8, (HOST, 4), mode="required", mode_level=BLOCK)
    snap = cluster(nodes, [job("team", "sliced", pods=16, gpu=1, topology=request)])
    plan = checked(snap)
    (admission,) = plan.admissions
    per_host = dict((values[0], count) for values, count in admission.pod_sets[0].domains)
    assert all(count % 4 == 0 for count in per_host.values())
    assert sum(c for h, c in per_host.items() if h.startswith("ra")) % 8 == 0


def test_a_node_missing_a_level_label_is_outside_the_topology():
    nodes = [node("n0", gpu=4, labels={BLOCK: "b0", RACK: "r0"}), node("n1", gpu=4, labels={BLOCK: "b0"})]
    snap = cluster(nodes, [job("team", "train", pods=8, gpu=1)])
    plan = checked(snap)
    assert not plan.admissions
    small = cluster(nodes, [job("team", "small", pods=4, gpu=1)])
    (admission,) = checked(small).admissions
    assert admission.pod_sets[0].domains == ((("n0",), 4),)
