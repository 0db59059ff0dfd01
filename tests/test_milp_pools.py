"""Node pools (planner/milp/pools.py): the ladder rows are exact, and `place` gives every
pod a node whenever they hold.

The claim: GPU pods of sizes that divide one another fit nodes with free GPUs c_n iff,
for every size s, the GPUs of the pods of size >= s are at most sum_n s * floor(c_n/s).
Checked against a brute-force packer on seeded random instances, both ways."""

import itertools
import random

import pytest

from models import Resources
from planner.milp.pools import Item, Pools, ShapeView, divisible, place

GPU = "nvidia.com/gpu"


def ladder_rows_hold(frees: list[int], pods: list[int]) -> bool:
    sizes = sorted(set(pods))
    return all(sum(p for p in pods if p >= s) <= sum(s * (c // s) for c in frees) for s in sizes)


def brute_force_fits(frees: list[int], pods: list[int]) -> bool:
    """Every assignment of pods to nodes, largest first, with pruning."""
    pods = sorted(pods, reverse=True)
    left = list(frees)

    def go(i: int) -> bool:
        if i == len(pods):
            return True
        tried = set()
        for n in range(len(left)):
            if left[n] >= pods[i] and left[n] not in tried:
                tried.add(left[n])
                left[n] -= pods[i]
                if go(i + 1):
                    return True
                left[n] += pods[i]
        return False

    return go(0)


def pool_of(frees: list[int], sizes: list[int], cpu_per_gpu: int = 10):
    nodes = [f"n{i}" for i in range(len(frees))]
    shapes = [ShapeView(Resources.of({GPU: s, "cpu": cpu_per_gpu * s, "pods": 1}),
                        {n: ("r1", n) for n in nodes}, {n: max(1, frees[i] // s) for i, n in enumerate(nodes)})
              for s in sizes]
    free = {n: Resources.of({GPU: frees[i], "cpu": 1000, "pods": 110}) for i, n in enumerate(nodes)}
    return Pools(shapes, free, [], set(), set())


@pytest.mark.parametrize("seed", range(300))
def test_ladder_rows_are_exact_for_divisible_sizes(seed):
    rng = random.Random(seed)
    ladder = rng.choice([[1, 2, 4, 8], [1, 2], [2, 4, 8], [1, 4], [1, 3, 6]])
    frees = [rng.randint(0, 8) for _ in range(rng.randint(1, 4))]
    pods = [rng.choice(ladder) for _ in range(rng.randint(0, 7))]
    assert divisible(ladder)
    assert ladder_rows_hold(frees, pods) == brute_force_fits(frees, pods)


@pytest.mark.parametrize("seed", range(200))
def test_place_never_fails_when_the_ladder_rows_hold(seed):
    rng = random.Random(1000 + seed)
    ladder = rng.choice([[1, 2, 4, 8], [1, 2, 4], [2, 8]])
    frees = [rng.randint(0, 8) for _ in range(rng.randint(1, 6))]
    pods: list[int] = []
    for _ in range(30):  # as many pods as the rows allow, in random sizes
        size = rng.choice(ladder)
        if ladder_rows_hold(frees, pods + [size]):
            pods.append(size)
    pools = pool_of(frees, ladder)
    (pool,) = pools.pools
    assert pool.aggregated and pool.ladder == tuple(sorted(ladder))
    shape_of = {s: k for k, s in enumerate(ladder)}
    items = [Item(("w", i), shape_of[p], 1) for i, p in enumerate(pods)]
    placed, failed = place(pools, pool, items, set())
    assert failed == []
    used = {n: 0 for n in pool.nodes}
    for owner, per_node in placed.items():
        for node, count in per_node.items():
            used[node] += count * pods[owner[1]]
    assert all(used[f"n{i}"] <= frees[i] for i in range(len(frees)))
    assert sum(sum(per_node.values()) for per_node in placed.values()) == len(pods)


def test_sizes_that_do_not_divide_keep_the_pool_node_by_node():
    pools = pool_of([8, 8], [2, 3])
    assert not pools.pools[0].aggregated


def test_a_resource_that_can_run_out_first_keeps_the_pool_node_by_node():
    # 8 GPUs free but only 40 cores: 8 pods of 1 GPU and 10 cores would need 80.
    nodes = ["n0"]
    shape = ShapeView(Resources.of({GPU: 1, "cpu": 10, "pods": 1}), {"n0": ("r", "n0")}, {"n0": 4})
    pools = Pools([shape], {"n0": Resources.of({GPU: 8, "cpu": 40, "pods": 110})}, [], set(), set())
    assert not pools.pools[0].aggregated
    roomy = Pools([shape], {"n0": Resources.of({GPU: 8, "cpu": 80, "pods": 110})}, [], set(), set())
    assert roomy.pools[0].aggregated
    assert nodes == list(roomy.pools[0].nodes)


def place_pod_by_pod(free: dict[str, dict[str, int]], items: list[tuple[object, dict[str, int], int]],
                     gpu: str = GPU) -> tuple[dict[object, dict[str, int]], list[object]]:
    """`place`'s rule one pod at a time (a node the owner uses, first by name, else the fitting
    node with the fewest GPUs left, then by name): what placing a node's run at once must equal."""
    have = {n: dict(r) for n, r in free.items()}
    placed: dict[object, dict[str, int]] = {}
    failed: list[object] = []
    order = sorted(range(len(items)), key=lambda i: (-items[i][1].get(gpu, 0), i))
    for i in order:
        owner, request, count = items[i]
        mine = placed.setdefault(owner, {})
        for _ in range(count):
            def fits(n: str) -> bool:
                return all(have[n].get(r, 0) >= v for r, v in request.items())
            best = next((n for n in sorted(mine) if fits(n)), None) or min(
                (n for n in have if fits(n)), key=lambda n: (have[n].get(gpu, 0), n), default=None)
            if best is None:
                failed.append(owner)
                break
            for r, v in request.items():
                have[best][r] = have[best].get(r, 0) - v
            mine[best] = mine.get(best, 0) + 1
    return {o: p for o, p in placed.items() if p}, failed


@pytest.mark.parametrize("seed", range(200))
def test_place_gives_a_node_its_run_of_pods_as_pod_by_pod_would(seed):
    """Issue 40: `place` takes a node's run of pods at once (a million pods cost a search per
    node used, not per pod); where each pod goes is what the pod-by-pod rule says."""
    rng = random.Random(5000 + seed)
    ladder = rng.choice([[1, 2, 4, 8], [1, 2], [2, 8]])
    frees = [rng.randint(0, 8) for _ in range(rng.randint(1, 6))]
    pools = pool_of(frees, ladder, cpu_per_gpu=rng.choice([10, 100, 300]))
    (pool,) = pools.pools
    items = [Item(("w", rng.randint(0, 3)), rng.randrange(len(ladder)), rng.randint(1, 12))
             for _ in range(rng.randint(1, 5))]
    expected = place_pod_by_pod({n: pools.free[n].as_dict() for n in pool.nodes},
                                [(it.owner, dict(pools.shapes[it.shape].request.items()), it.count) for it in items],
                                pool.gpu)
    placed, failed = place(pools, pool, items, set())
    assert ({o: p for o, p in placed.items() if p}, failed) == expected
