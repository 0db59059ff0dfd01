"""ClusterState's fast bookkeeping agrees with the plain definitions in capacity and semantics."""

from pathlib import Path

import numpy as np
import pytest

from models import WorkloadState
from planner.capacity import free_capacity
from planner.greedy import ClusterState
from planner.semantics import borrowing_queues
from planner.snapshot import read_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SNAPSHOTS = sorted(p for p in FIXTURES.iterdir() if p.suffix in (".yaml", ".json") and not p.name.endswith(".plan.yaml"))


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_free_matrix_is_free_capacity(path: Path) -> None:
    snapshot = read_snapshot([str(path)])
    running = [w.ref for w in snapshot.workloads if w.state is WorkloadState.RUNNING]
    for gone in ([], running[::3]):
        state = ClusterState(snapshot, evicted=gone)
        free = free_capacity(snapshot, gone)
        names = {r for res in free.values() for r in res.names()}
        names |= {r for w in snapshot.workloads for ps in w.pod_sets for r in ps.request.names()}
        assert list(state.col) == sorted(names)
        assert [n.name for n in state.node_objs] == sorted(free)
        want = np.array([[free[n].get(r) for r in state.col] for n in sorted(free)], dtype=np.int64)
        assert np.array_equal(state.free, want.reshape(state.free.shape))


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_borrowing_follows_every_charge(path: Path) -> None:
    snapshot = read_snapshot([str(path)])
    state = ClusterState(snapshot)
    assert state.borrowing() == borrowing_queues(snapshot, state.quota, state.cq_usage)
    running = [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING and w.cluster_queue]
    for w in running[::2]:
        state.release(w)
        assert state.borrowing() == borrowing_queues(snapshot, state.quota, state.cq_usage)
    for w in running[::2]:
        state.release(w, sign=-1)
    assert state.borrowing() == borrowing_queues(snapshot, state.quota, state.cq_usage)
