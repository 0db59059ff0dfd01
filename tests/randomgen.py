"""Seeded random snapshots for property tests: small, valid, deterministic per seed.

`random_snapshot(seed)` draws a cluster the way real ones look, only smaller:
flavors as node pools (GPU types selected by a node label, GPU nodes tainted,
a CPU pool), ClusterQueues in zero to two cohorts (sometimes nested, sometimes
with quota of their own), quotas as shares of what the flavor's nodes hold, and
pending workloads sized like the Philly trace (1 GPU 70%, 2: 10%, 4: 15%, 8: 5%)
or CPU-only. Options add a Topology (block/rack/hostname) with TAS requests, and
running workloads whose assignments respect node capacity and quota (Kueue's
available() up the cohort tree, so no cohort is overused). Every ClusterQueue draws
a preemption policy (withinClusterQueue, reclaimWithinCohort, borrowWithinCohort with
an optional maxPriorityThreshold); with running work the PlannerPolicy may set a
minimum runtime, and running workloads carry admission and checkpoint times, a
cost override now and then, and rarely `non-preemptible`.

Everything is drawn from one `random.Random(seed)` and every object refers only to
objects that exist, so a failing seed is a reproducible bug report. Instances may
well be infeasible to admit fully (that is the point); they are never malformed.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, field
from typing import Sequence

from models import (
    HOSTNAME_LABEL, ClusterQueue, Node, PodSet, Policy, Quota, ResourceFlavor, Resources, Snapshot,
    TopologyRequest, Workload,
)
from models.objects import tolerated

try:
    from tests import builders as b
except ModuleNotFoundError:  # tests/ itself on sys.path
    import builders as b  # type: ignore[no-redef,import-not-found]

GPU = b.GPU
GI = 2**30
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
GPU_TOLERATION = "nvidia.com/gpu:NoSchedule"
GPU_LABEL = "gpu-type"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
PHILLY_SIZES, PHILLY_WEIGHTS = (1, 2, 4, 8), (70, 10, 15, 5)
PRIORITIES = (0, 100, 1000)
TEAMS = ("team-a", "team-b", "team-c", "team-d")


@dataclass
class _Pool:
    """A flavor and the shape of the nodes it selects."""

    flavor: ResourceFlavor
    gpus: int                      # per node; 0 for CPU pools
    labels: dict[str, str] = field(default_factory=dict)
    tainted: bool = False


def random_snapshot(seed: int, *, nodes: tuple[int, int] = (2, 12), workloads: tuple[int, int] = (1, 15),
                    with_running: bool = False, with_topology: bool = False) -> Snapshot:
    """A small valid snapshot drawn from `seed`; the same seed gives the same snapshot."""
    rng = random.Random(seed)
    now = b.NOW
    split = rng.random() < 0.4                   # cpu/memory and GPUs in separate resource groups
    pools = _pools(rng, split)
    topo = _topology(rng, pools) if with_topology else None
    node_list = _nodes(rng, pools, rng.randint(*nodes), topo)
    flavors = [p.flavor for p in pools]
    if topo is not None:
        name, levels, tied = topo
        flavors = [b.flavor(f.name, node_labels=f.node_labels, taints=f.node_taints,
                            tolerations=f.tolerations, topology=name if f.name == tied else None)
                   for f in flavors]
    cohort_names, cohorts = _cohorts(rng, pools, node_list, split)
    cqs, namespaces = _cluster_queues(rng, pools, node_list, split, cohort_names)
    lqs = _local_queues(rng, cqs)
    levels = topo[1] if topo else ()
    pending = [_pending(rng, i, lqs, pools, levels, now) for i in range(rng.randint(*workloads))]
    snap = b.snapshot(nodes=node_list, flavors=flavors, cqs=cqs, cohorts=cohorts, lqs=lqs,
                      workloads=pending, topologies=[b.topology(topo[0], *topo[1])] if topo else [],
                      namespaces=namespaces, now=now, source=f"random:{seed}")
    if with_running:
        running = _running(rng, snap, lqs, pools, now)
        # Preemption knobs: sometimes a minimum runtime that protects the youngest work.
        policy = Policy(minimum_runtime_seconds=rng.choice([0, 0, 600, 1800]),
                          restart_cost=rng.choice([1.0, 1.0, 5.0]))
        snap = b.snapshot(nodes=node_list, flavors=flavors, cqs=cqs, cohorts=cohorts, lqs=lqs,
                          workloads=pending + running, topologies=list(snap.topologies.values()),
                          namespaces=namespaces, now=now, source=f"random:{seed}", policy=policy)
    return snap


# ---------------------------------------------------------------- cluster

def _pools(rng: random.Random, split: bool) -> list[_Pool]:
    """1-3 flavors. Split layout: a label-less `default` for cpu/memory plus GPU types."""
    gpu_types = rng.sample(["a100", "h100", "l4"], rng.randint(1, 2))
    pools: list[_Pool] = []
    if split:
        pools.append(_Pool(b.flavor("default"), gpus=0, labels={"node-pool": "cpu"}))
    elif rng.random() < 0.25:
        # one homogeneous pool: a flavor without labels, as in Kueue's quick start
        return [_Pool(b.flavor("default"), gpus=rng.choice([2, 4, 8]))]
    elif rng.random() < 0.5:
        pools.append(_Pool(b.flavor("cpu", node_labels={"node-pool": "cpu"}), gpus=0,
                           labels={"node-pool": "cpu"}))
    for gpu_type in gpu_types[: 3 - len(pools)]:
        taint_mode = rng.choice(["none", "tolerations", "tolerations", "node_taints"])
        labels = {GPU_LABEL: gpu_type}
        f = b.flavor(gpu_type, node_labels=labels,
                     tolerations=[GPU_TOLERATION] if taint_mode == "tolerations" else [],
                     taints=[GPU_TAINT] if taint_mode == "node_taints" else [])
        pools.append(_Pool(f, gpus=rng.choice([4, 8]), labels=labels, tainted=taint_mode != "none"))
    return pools


def _topology(rng: random.Random, pools: list[_Pool]) -> tuple[str, tuple[str, ...], str]:
    """A 2-3 level Topology tied to one GPU flavor: (name, levels, flavor)."""
    gpu_pools = [p for p in pools if p.gpus > 0]
    tied = rng.choice(gpu_pools).flavor.name
    levels = (BLOCK, RACK, HOSTNAME_LABEL) if rng.random() < 0.5 else (RACK, HOSTNAME_LABEL)
    return "default-topology", levels, tied


def _nodes(rng: random.Random, pools: list[_Pool], count: int,
           topo: tuple[str, tuple[str, ...], str] | None) -> list[Node]:
    owners = [pools[i % len(pools)] for i in range(min(count, len(pools)))]
    owners += [rng.choice(pools) for _ in range(count - len(owners))]
    out: list[Node] = []
    per_pool: dict[str, int] = {}
    rack_size = rng.randint(1, 3)
    for i, pool in enumerate(owners):
        name = pool.flavor.name
        index = per_pool.get(name, 0)
        per_pool[name] = index + 1
        labels = dict(pool.labels)
        if topo is not None and name == topo[2]:
            rack = index // rack_size
            labels[RACK] = f"{name}-r{rack}"
            if BLOCK in topo[1]:
                labels[BLOCK] = f"{name}-b{rack // 2}"
        if pool.gpus:
            cpu, memory = rng.choice([32, 64, 96]), rng.choice(["256Gi", "512Gi"])
        else:
            cpu, memory = rng.choice([16, 32, 64]), rng.choice(["64Gi", "128Gi", "256Gi"])
        unmanaged: dict[str, b.Qty] | None = None
        if rng.random() < 0.2:   # a DaemonSet or a pod started by hand
            unmanaged = {"cpu": rng.choice(["250m", "500m", "2"]), "memory": "1Gi", "pods": rng.randint(1, 3)}
            if pool.gpus and rng.random() < 0.3:
                unmanaged[GPU] = 1
        state = rng.random()
        out.append(b.node(f"{name}-{index}", gpu=pool.gpus, cpu=cpu, memory=memory, labels=labels,
                          taints=[GPU_TAINT] if pool.tainted else [], unmanaged=unmanaged,
                          ready=state >= 0.03, unschedulable=0.03 <= state < 0.06))
    return out


def _capacity(pool: _Pool, nodes: Sequence[Node]) -> Resources:
    """What the pool's flavor can reach: all nodes its labels select."""
    total = Resources()
    for n in nodes:
        if all(n.labels.get(k) == v for k, v in pool.flavor.node_labels.items()):
            total = total + n.allocatable
    return total


# ---------------------------------------------------------------- quotas

def _groups(pools: list[_Pool], split: bool, pods: bool) -> list[tuple[str, ...]]:
    base = ("cpu", "memory") + (("pods",) if pods else ())
    if split:
        return [base, (GPU,)]
    return [base + ((GPU,) if any(p.gpus for p in pools) else ())]


def _share(rng: random.Random, resource: str, capacity: int, parts: int) -> int:
    """A random share of `capacity`, in whole cores / GiB / GPUs as an admin would write it."""
    fraction = rng.uniform(0.2, 1.2) / parts
    unit = {"cpu": 1000, "memory": GI}.get(resource, 1)
    return int(capacity * fraction) // unit * unit


def _quotas(rng: random.Random, pools: list[_Pool], nodes: Sequence[Node], groups: list[tuple[str, ...]],
            parts: int, cohort: bool) -> dict[str, dict[str, Quota]]:
    out: dict[str, dict[str, Quota]] = {}
    for pool in pools:
        capacity = _capacity(pool, nodes)
        resources = {}
        for group in groups:
            if GPU in group and len(group) == 1 and not pool.gpus:
                continue              # split layout: `default` is the cpu/memory flavor only
            if GPU not in group and len(groups) == 2 and pool.gpus:
                continue              # split layout: GPU flavors only in the GPU group
            for r in group:
                nominal = _share(rng, r, capacity.get(r), parts) if capacity.get(r) else 0
                borrowing = lending = None
                if cohort and rng.random() < 0.4:
                    borrowing = _share(rng, r, capacity.get(r), parts)
                if cohort and rng.random() < 0.3:
                    lending = rng.randint(0, nominal // {"cpu": 1000, "memory": GI}.get(r, 1)) \
                        * {"cpu": 1000, "memory": GI}.get(r, 1)
                resources[r] = Quota(nominal, borrowing, lending)
        if resources:
            out[pool.flavor.name] = resources
    return out


def _cohorts(rng: random.Random, pools: list[_Pool], nodes: Sequence[Node], split: bool):
    count = rng.choice([0, 1, 1, 2, 2])
    names = ["org", "research"][:count]
    out = []
    for i, name in enumerate(names):
        parent = names[0] if i == 1 and rng.random() < 0.5 else None
        quotas: dict[str, dict[str, Quota]] = {}
        if rng.random() < 0.35:
            gpu_pools = [p for p in pools if p.gpus]
            pool = rng.choice(gpu_pools)
            groups = _groups(pools, split, pods=False)
            group = next(g for g in groups if GPU in g)
            capacity = _capacity(pool, nodes)
            quotas = {pool.flavor.name: {r: Quota(_share(rng, r, capacity.get(r), 4)) for r in group}}
            out.append(b.cohort(name, parent=parent, quotas=quotas, groups=[group]))
        else:
            out.append(b.cohort(name, parent=parent))
    return names, out


def _cluster_queues(rng: random.Random, pools: list[_Pool], nodes: Sequence[Node], split: bool,
                    cohorts: list[str]) -> tuple[list[ClusterQueue], dict[str, dict[str, str]]]:
    count = rng.randint(1, 4)
    cqs, namespaces = [], {}
    for team in TEAMS[:count]:
        cohort = rng.choice(cohorts) if cohorts and rng.random() < 0.85 else None
        groups = _groups(pools, split, pods=rng.random() < 0.15)
        usable = [p for p in pools]
        rng.shuffle(usable)
        chosen = usable[: rng.randint(1, len(usable))]
        if split and not any(p.flavor.name == "default" for p in chosen):
            chosen.insert(0, pools[0])
        if split and not any(p.gpus for p in chosen):
            chosen.append(rng.choice([p for p in pools if p.gpus]))
        quotas = _quotas(rng, chosen, nodes, groups, count, cohort is not None)
        within = rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
        reclaim = rng.choice(["Never", "LowerPriority", "Any"]) if cohort else "Never"
        borrow = "LowerPriority" if reclaim != "Never" and rng.random() < 0.3 else "Never"
        threshold = rng.choice([None, 100]) if borrow != "Never" else None
        selector: dict[str, object] = {}
        if rng.random() < 0.15:
            selector = {"matchLabels": {"team": team}}
        namespaces[team] = {"team": team}
        cqs.append(b.cq(team, cohort=cohort, quotas=quotas, groups=groups, namespace_selector=selector,
                        within=within, reclaim=reclaim, borrow_within=borrow, borrow_max_priority=threshold,
                        strategy="StrictFIFO" if rng.random() < 0.1 else "BestEffortFIFO"))
    return cqs, namespaces


def _local_queues(rng: random.Random, cqs: list[ClusterQueue]):
    lqs = [b.lq(q.name, "lq", q.name) for q in cqs]
    if rng.random() < 0.25:     # a namespace shared by teams, one LocalQueue per ClusterQueue
        lqs += [b.lq("shared", f"to-{q.name}", q.name) for q in cqs]
    return lqs


# ---------------------------------------------------------------- workloads

def _pod_shape(rng: random.Random, pools: list[_Pool]) -> tuple[int, int]:
    """(pods, GPUs per pod) for a Philly-sized job, or (pods, 0) for CPU-only work."""
    max_gpus = max((p.gpus for p in pools), default=0)
    if max_gpus == 0 or rng.random() < 0.2:
        return rng.randint(1, 4), 0
    size = rng.choices(PHILLY_SIZES, PHILLY_WEIGHTS)[0]
    per_pod = rng.choice([g for g in (1, 2, 4, 8) if g <= size and size % g == 0 and g <= max_gpus] or [1])
    return size // per_pod, per_pod


def _topology_request(rng: random.Random, levels: tuple[str, ...], count: int) -> TopologyRequest:
    if not levels or rng.random() < 0.4:
        return TopologyRequest()
    pick = rng.random()
    level = rng.choice(levels)
    if pick < 0.4:
        return b.required(level)
    if pick < 0.8:
        return b.preferred(level)
    if pick < 0.9 or count < 2:
        return b.unconstrained()
    size = rng.choice([s for s in range(1, count + 1) if count % s == 0 and s < count] or [1])
    return b.sliced(levels[-1], size, mode="preferred", mode_level=levels[0])


def _pod_sets(rng: random.Random, pools: list[_Pool], levels: tuple[str, ...], elastic: bool) -> list[PodSet]:
    tolerate = any(p.flavor.node_taints for p in pools) and rng.random() < 0.6
    gpu_labels = [p.labels[GPU_LABEL] for p in pools if GPU_LABEL in p.labels]
    count, gpus = _pod_shape(rng, pools)
    selector = {GPU_LABEL: rng.choice(gpu_labels)} if gpus and gpu_labels and rng.random() < 0.1 else {}
    main = b.pod_set("main" if rng.random() < 0.8 else "workers", count, gpu=gpus,
                     cpu=rng.choice(["500m", "1", "2", "4", "8"]) if not gpus else str(4 * gpus),
                     memory=rng.choice(["1Gi", "4Gi", "16Gi"]) if not gpus else f"{16 * gpus}Gi",
                     min_count=rng.randint(1, count - 1) if elastic and count > 1 and rng.random() < 0.25 else None,
                     node_selector=selector, tolerations=[GPU_TOLERATION] if tolerate and gpus else [],
                     topology=_topology_request(rng, levels, count) if gpus or len(pools) == 1 else None)
    if main.name == "workers" and rng.random() < 0.7:
        driver = b.pod_set("driver", 1, cpu="1", memory="2Gi")
        return [driver, main]
    return [main]


def _pending(rng: random.Random, i: int, lqs, pools: list[_Pool], levels: tuple[str, ...], now: float) -> Workload:
    local = rng.choice(lqs)
    pod_sets = _pod_sets(rng, pools, levels, elastic=True)
    prefix = "train" if any(ps.request.get(GPU) for ps in pod_sets) else "etl"
    return b.workload(local.namespace, f"{prefix}-{i}", local.name, pod_sets=pod_sets,
                      kind="JobSet" if len(pod_sets) > 1 else "Job",
                      priority=rng.choice(PRIORITIES), created=now - rng.randint(60, 48 * 3600))


# ---------------------------------------------------------------- running workloads

def _running(rng: random.Random, snap: Snapshot, lqs, pools: list[_Pool], now: float) -> list[Workload]:
    """Workloads admitted earlier: placed first-fit on free nodes, within quota."""
    free = {n.name: n.free for n in snap.nodes if n.usable}
    usage: dict[str, dict[tuple[str, str], int]] = {}
    out: list[Workload] = []
    for i in range(rng.randint(1, 8)):
        local = rng.choice(lqs)
        queue = snap.cluster_queues[local.cluster_queue]
        pod_sets = _pod_sets(rng, pools, (), elastic=False)
        pod_sets = [dataclasses.replace(ps, min_count=rng.randint(1, ps.count - 1))
                    if ps.count > 1 and rng.random() < 0.2 else ps for ps in pod_sets]
        created = now - rng.randint(3600, 72 * 3600)
        w = b.workload(local.namespace, f"run-{i}", local.name, pod_sets=pod_sets,
                       kind="JobSet" if len(pod_sets) > 1 else "Job", priority=rng.choice(PRIORITIES),
                       created=created, non_preemptible=rng.random() < 0.05,
                       preemption_cost=rng.choice([None] * 9 + [5.0]),
                       checkpointed=now - rng.randint(60, 3600) if rng.random() < 0.3 else None)
        placed = _place(rng, snap, queue, w, free, usage)
        if placed is None:
            continue
        placements, flavors = placed
        # Admitted anywhere from a few minutes to days ago; checkpoints (drawn above) after that.
        admitted = rng.uniform(max(created + 60, now - rng.choice([900, 4 * 3600, 72 * 3600])), now - 60)
        if w.checkpointed_at is not None and w.checkpointed_at < admitted:
            w = dataclasses.replace(w, checkpointed_at=rng.uniform(admitted, now))
        w = b.running(w, placements=placements, pod_set_flavors=flavors, admitted=admitted)
        out.append(w)
    return out


def _place(rng: random.Random, snap: Snapshot, queue: ClusterQueue, w: Workload,
           free: dict[str, Resources], usage: dict[str, dict[tuple[str, str], int]]):
    """Place every pod set (elastic: as many as fit, at least the minimum) or nothing.

    Quota: a queue without a cohort stays within nominal; a queue in a cohort may
    also borrow as far as the project's quota tree allows, but never beyond its
    borrowing limit. On success `free` and `usage` are updated.
    """
    trial_free = dict(free)
    trial_usage = {k: dict(v) for k, v in usage.items()}
    placements: dict[str, dict[str, int]] = {}
    flavors: dict[str, dict[str, str]] = {}
    for ps in w.pod_sets:
        for option in _flavor_options(snap, queue, ps):
            nodes = [n for n in snap.nodes if n.name in trial_free and _node_ok(n, option, ps, snap)]
            rng.shuffle(nodes)
            for count in range(ps.count, ps.minimum - 1, -1):
                charge = {(f, r): count * ps.request.get(r) for r, f in option.items()}
                if not _quota_ok(snap, queue, charge, trial_usage):
                    continue
                spot = _first_fit(nodes, trial_free, ps.request, count)
                if spot is None:
                    continue
                for n, c in spot.items():
                    trial_free[n] = trial_free[n] - ps.request.scaled(c)
                mine = trial_usage.setdefault(queue.name, {})
                for fr, amount in charge.items():
                    mine[fr] = mine.get(fr, 0) + amount
                placements[ps.name] = spot
                flavors[ps.name] = option
                break
            if ps.name in placements:
                break
        if ps.name not in placements:
            return None
    free.update(trial_free)
    usage.clear()
    usage.update(trial_usage)
    return placements, flavors


def _flavor_options(snap: Snapshot, queue: ClusterQueue, ps: PodSet) -> list[dict[str, str]]:
    """resource -> flavor choices, one flavor per resource group, in the queue's order."""
    per_group = []
    for group in queue.resource_groups:
        wanted = [r for r in group.covered_resources if ps.request.get(r) > 0]
        if not wanted:
            continue
        choices = [fq.flavor for fq in group.flavors
                   if tolerated(snap.flavors[fq.flavor].node_taints, ps.tolerations)]
        per_group.append([{r: f for r in wanted} for f in choices])
    uncovered = [r for r in ps.request.names()
                 if r != "pods" and not any(r in g.covered_resources for g in queue.resource_groups)]
    if uncovered:
        return []
    return [dict(kv for part in combo for kv in part.items()) for combo in itertools.product(*per_group)]


def _node_ok(n: Node, option: dict[str, str], ps: PodSet, snap: Snapshot) -> bool:
    chosen = [snap.flavors[f] for f in sorted(set(option.values()))]
    if any(n.labels.get(k) != v for f in chosen for k, v in f.node_labels.items()):
        return False
    if any(n.labels.get(k) != v for k, v in ps.node_selector.items()):
        return False
    return tolerated(n.taints, ps.tolerations + tuple(t for f in chosen for t in f.tolerations))


def _first_fit(nodes: list[Node], free: dict[str, Resources], request: Resources, count: int):
    spot: dict[str, int] = {}
    left = count
    for n in nodes:
        fit = min(left, request.pods_fitting(free[n.name]))
        if fit > 0:
            spot[n.name] = fit
            left -= fit
        if left == 0:
            return spot
    return None


def _quota_ok(snap: Snapshot, queue: ClusterQueue, charge: dict[tuple[str, str], int],
              usage: dict[str, dict[tuple[str, str], int]]) -> bool:
    """Would Kueue admit `charge` to `queue` on top of `usage`? Its available(), level by
    level up the cohort tree (nominal, borrowingLimit, lendingLimit, cohort quota), so
    running work never exceeds a cohort either."""
    from planner.kueue.semantics import QuotaTree

    tree = QuotaTree(snap)
    key = f"cq:{queue.name}"
    if key not in tree.parent:
        return False
    keyed = {f"cq:{name}": dict(v) for name, v in usage.items()}
    for fr, amount in charge.items():
        if not tree.lists(key, fr) or tree.available(key, fr, tree.tree_usage(keyed, fr)) < amount:
            return False
    return True
