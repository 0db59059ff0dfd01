"""Kueue's TAS placement (planner.kueue.placement), case by case against what Kueue does."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given, settings, strategies as st

from models import Resources, SliceLayer, TopologyRequest
from planner.kueue.placement import DomainTree, leaf_counts, place, place_counts

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)
POD = Resources.of(cpu=1000, pods=1)


def cluster(layout: dict[str, dict[str, list[int]]]) -> tuple[dict[str, Resources], dict[str, tuple[str, ...]]]:
    """block -> rack -> free pods per node; node names b-r-nI."""
    free, paths = {}, {}
    for block, racks in layout.items():
        for rack, nodes in racks.items():
            for i, pods in enumerate(nodes):
                name = f"{rack}-n{i}"
                free[name] = Resources.of(cpu=pods * 1000, pods=110)
                paths[name] = (block, rack, name)
    return free, paths


def racks_of(pods: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node, count in pods.items():
        rack = node.rsplit("-n", 1)[0]
        out[rack] = out.get(rack, 0) + count
    return out


def required(level: str) -> TopologyRequest:
    return TopologyRequest("required", level)


def preferred(level: str) -> TopologyRequest:
    return TopologyRequest("preferred", level)


# Kueue #10574: one block, racks with 19 / 10 / 10 pods free, a job of 20 pods.
ISSUE_10574 = {"b1": {"r19": [19], "r10a": [5, 5], "r10b": [10]}}


def test_10574_required_rack_fails_as_in_kueue():
    # BestFit sorts racks 19, 10, 10; the top one holds 19 < 20, so a required rack fails.
    free, paths = cluster(ISSUE_10574)
    result = place(free, POD, 20, paths, LEVELS, required(RACK))
    assert result.pods is None
    assert result.reason == f"only 19 of 20 pods fit in one rack ({RACK})"
    assert (result.needed, result.fit, result.level) == (20, 19, RACK)


def test_10574_preferred_rack_takes_19_then_10():
    # Preferred climbs to the block: it holds 39 >= 20, then descends filling as few
    # racks as possible: the 19 first, then the smallest rack that covers the last pod
    # (a 10, the first by name on a tie). Kueue's known weakness: 10+10 would keep the 19.
    free, paths = cluster(ISSUE_10574)
    result = place(free, POD, 20, paths, LEVELS, preferred(RACK))
    assert result.ok
    assert racks_of(dict(result.pods)) == {"r19": 19, "r10a": 1}
    assert result.pods == {"r19-n0": 19, "r10a-n0": 1}


def test_10574_preferred_at_the_top_level_takes_domains_in_order():
    # With the rack as the top level there is nothing to climb to: take 19, then the
    # smallest rack covering the remaining 1.
    free, paths = cluster(ISSUE_10574)
    two_levels = {n: p[1:] for n, p in paths.items()}
    result = place(free, POD, 20, two_levels, (RACK, HOST), preferred(RACK))
    assert racks_of(dict(result.pods)) == {"r19": 19, "r10a": 1}


def test_required_takes_the_smallest_rack_that_fits():
    free, paths = cluster({"b1": {"big": [8, 8, 8], "mid": [6, 6], "tight": [4, 4], "small": [3]}})
    result = place(free, POD, 8, paths, LEVELS, required(RACK))
    assert result.pods == {"tight-n0": 4, "tight-n1": 4}


def test_required_descends_filling_as_few_nodes_as_possible():
    free, paths = cluster({"b1": {"r1": [2, 8, 8, 5]}})
    result = place(free, POD, 13, paths, LEVELS, required(RACK))
    # 8 on the first full node (name order), then the smallest node taking the other 5.
    assert result.pods == {"r1-n1": 8, "r1-n3": 5}


def test_required_failure_counts_zero_fit():
    free, paths = cluster({"b1": {"r1": [0, 0]}})
    result = place(free, POD, 4, paths, LEVELS, required(RACK))
    assert result.reason == f"none of the 4 pods fit in one rack ({RACK})"


def test_preferred_falls_back_one_level():
    # No rack holds 12, block b2 does (and is the smallest block that does).
    free, paths = cluster({
        "b1": {"r1": [8], "r2": [8], "r3": [8]},
        "b2": {"r4": [8], "r5": [6]},
    })
    result = place(free, POD, 12, paths, LEVELS, preferred(RACK))
    assert racks_of(dict(result.pods)) == {"r4": 8, "r5": 4}


def test_preferred_falls_back_two_levels_to_several_blocks():
    free, paths = cluster({
        "b1": {"r1": [8], "r2": [8]},
        "b2": {"r3": [8], "r4": [4]},
        "b3": {"r5": [2]},
    })
    result = place(free, POD, 20, paths, LEVELS, preferred(RACK))
    # No rack, no block holds 20: blocks in BestFit order b1 (16), then the smallest
    # block covering the 4 left, b2 (12); inside, racks fullest first then best fit.
    assert result.ok
    assert sum(result.pods.values()) == 20
    assert racks_of(dict(result.pods)) == {"r1": 8, "r2": 8, "r4": 4}


def test_preferred_fails_only_when_everything_together_is_too_small():
    free, paths = cluster({"b1": {"r1": [3], "r2": [3]}})
    result = place(free, POD, 7, paths, LEVELS, preferred(RACK))
    assert result.reason == "only 6 of 7 pods fit on the eligible nodes"
    assert result.level is None


def test_slices_stay_whole_in_their_rack():
    # 3 slices of 4 pods, each slice in one rack; racks hold 6, 6, 5 pods (1 slice each),
    # so a rack with 6 free never gets 6 pods of two different slices.
    free, paths = cluster({"b1": {"r1": [3, 3], "r2": [6], "r3": [5]}})
    request = TopologyRequest("required", BLOCK, slices=(SliceLayer(RACK, 4),))
    result = place(free, POD, 12, paths, LEVELS, request)
    assert result.ok
    assert sorted(racks_of(dict(result.pods)).values()) == [4, 4, 4]


def test_slices_that_do_not_fit_whole_are_refused():
    free, paths = cluster({"b1": {"r1": [3, 3], "r2": [3]}})  # 9 pods free, 1 slice of 4
    request = TopologyRequest("required", BLOCK, slices=(SliceLayer(RACK, 4),))
    result = place(free, POD, 8, paths, LEVELS, request)
    assert result.reason == f"only 1 of 2 slices of 4 pods fit in one block ({BLOCK})"
    assert result.fit == 4


def test_inner_slice_layer_keeps_pairs_on_one_node():
    free, paths = cluster({"b1": {"r1": [3, 3, 2]}})
    request = TopologyRequest("required", RACK, slices=(SliceLayer(RACK, 6), SliceLayer(HOST, 2)))
    result = place(free, POD, 6, paths, LEVELS, request)
    assert result.ok
    assert all(c % 2 == 0 for c in result.pods.values())
    assert sum(result.pods.values()) == 6


def test_unconstrained_fills_the_fullest_nodes_first():
    free, paths = cluster({"b1": {"r1": [8, 2, 5], "r2": [1, 3]}})
    result = place(free, POD, 9, paths, LEVELS, TopologyRequest("unconstrained"))
    # LeastFreeCapacity: no single node holds 9, so take nodes from the least free up
    # (1, 2, 3, then 3 of the 5), leaving the emptiest node (8) untouched.
    assert result.pods == {"r2-n0": 1, "r1-n1": 2, "r2-n1": 3, "r1-n2": 3}


def test_unconstrained_single_node_is_the_fullest_that_fits():
    free, paths = cluster({"b1": {"r1": [8, 2, 5], "r2": [1, 3]}})
    result = place(free, POD, 4, paths, LEVELS, None)
    assert result.pods == {"r1-n2": 4}


def test_non_tas_flavor_places_every_pod_on_a_node():
    free = {"a": Resources.of(cpu=4000, pods=110), "b": Resources.of(cpu=2000, pods=110)}
    paths = {"a": ("a",), "b": ("b",)}
    result = place(free, POD, 5, paths, (HOST,), None)
    assert result.pods == {"a": 3, "b": 2}
    refused = place(free, POD, 5, paths, (HOST,), required(RACK))
    assert refused.reason == f"the flavor's topology has no level {RACK}"


def test_leaf_count_is_the_tightest_resource_and_pods():
    free = np.array([[8000, 2, 110], [8000, 8, 3], [500, 8, 110]], dtype=np.int64)
    request = np.array([1000, 1, 1], dtype=np.int64)
    assert leaf_counts(free, request).tolist() == [2, 3, 0]


@settings(max_examples=60, deadline=None)
@given(
    caps=st.lists(st.lists(st.integers(0, 8), min_size=1, max_size=4), min_size=1, max_size=5),
    count=st.integers(1, 40),
    mode=st.sampled_from(["required", "preferred", "unconstrained", None]),
)
def test_any_placement_respects_capacity_and_its_rack(caps, count, mode):
    free, paths = cluster({"b1": {f"r{i}": nodes for i, nodes in enumerate(caps)}})
    request = TopologyRequest(mode, RACK if mode in ("required", "preferred") else None)
    result = place(free, POD, count, paths, LEVELS, request)
    total = sum(sum(nodes) for nodes in caps)
    if result.ok:
        assert sum(result.pods.values()) == count
        assert all(0 < c <= free[n].get("cpu") // 1000 for n, c in result.pods.items())
        if mode == "required":
            assert len(racks_of(dict(result.pods))) == 1
    else:
        if mode == "required":
            assert max(sum(nodes) for nodes in caps) < count
        else:
            assert total < count


def test_ten_thousand_nodes_place_fast():
    paths = {f"n{i:05d}": (f"b{i // 1024}", f"r{i // 32}", f"n{i:05d}") for i in range(10_240)}
    tree = DomainTree(LEVELS, paths)
    counts = np.array([(i * 7) % 9 for i in range(len(tree))], dtype=np.int64)
    start = time.perf_counter()
    for _ in range(20):
        place_counts(tree, counts, 64, required(RACK))
        assert place_counts(tree, counts, 500, preferred(RACK)).ok
    assert (time.perf_counter() - start) / 40 < 0.05
