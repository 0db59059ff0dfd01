"""ClusterState's fast bookkeeping agrees with the plain definitions in capacity and semantics."""

from pathlib import Path

import numpy as np
import pytest

from models import WorkloadState
from planner.kueue.capacity import free_capacity
from planner.kueue.state import ClusterState
from planner.kueue.semantics import borrowing_queues
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


def kueue_minimal_victims(state: ClusterState, candidates, fits) -> list[int] | None:
    """Kueue's search as it is written: remove one at a time until it fits, then put
    each back, the last removed but one first, keeping it back where it still fits."""
    for k, w in enumerate(candidates):
        state.release(w)
        if fits():
            break
    else:
        for w in candidates:
            state.release(w, sign=-1)
        return None
    victims = set(range(k + 1))
    for i in range(k - 1, -1, -1):
        state.release(candidates[i], sign=-1)
        if fits():
            victims.discard(i)
        else:
            state.release(candidates[i])
    return sorted(victims)


def search_case(rng):  # type: ignore[no-untyped-def]
    """A random victim search on meta-like: candidates among its running work, and the
    free capacity that a random few of them gone would leave (monotone in what is freed)."""
    snapshot = read_snapshot([str(FIXTURES / "meta-like.json")])
    running = [w for w in sorted(snapshot.workloads, key=lambda w: w.ref)
               if w.state is WorkloadState.RUNNING and w.cluster_queue]
    candidates = rng.sample(running, rng.randint(1, len(running)))
    needed = rng.sample(range(len(candidates)), rng.randint(1, min(6, len(candidates))))
    return snapshot, candidates, ClusterState(snapshot, evicted=[candidates[i].ref for i in needed]).free


@pytest.mark.parametrize("seed", range(40))
def test_minimal_victims_is_kueues_one_at_a_time_answer(seed: int) -> None:
    """Runs put back whole (and halved where they do not fit) give the victims Kueue's
    one-at-a-time search gives, left released the same way, with fewer fit tests."""
    import random

    from planner.kueue.preemption.victims import minimal_victims

    rng = random.Random(seed)
    snapshot, candidates, want = search_case(rng)
    if rng.random() < 0.2:
        want = want + 1   # more than freeing them all gives: no answer
    answers, tests = [], []
    for search in (minimal_victims, kueue_minimal_victims):
        state = ClusterState(snapshot)
        count = [0]

        def fits() -> bool:
            count[0] += 1
            return bool((state.free >= want).all())

        found = search(state, candidates, fits)
        gone = [] if found is None else [candidates[i].ref for i in found]
        assert np.array_equal(state.free, ClusterState(snapshot, evicted=gone).free)
        answers.append(found)
        tests.append(count[0])
    assert answers[0] == answers[1]
    if tests[1] >= 100:   # a long search (a few victims among many candidates, or none fits)
        assert tests[0] < tests[1] / 2


@pytest.mark.parametrize("seed", range(10))
def test_minimal_victims_told_of_a_misfit_spares_that_fit_test(seed: int) -> None:
    """With `misfit` (the caller found that nothing removed does not fit) the answer and
    the state left are the same, with one fit test fewer; with no candidates, none."""
    import random

    from planner.kueue.preemption.victims import minimal_victims

    snapshot, candidates, want = search_case(random.Random(seed))
    answers, tests, frees = [], [], []
    for misfit in (False, True):
        state = ClusterState(snapshot)
        count = [0]

        def fits() -> bool:
            count[0] += 1
            return bool((state.free >= want).all())

        answers.append(minimal_victims(state, candidates, fits, misfit=misfit))
        tests.append(count[0])
        frees.append(state.free.copy())
    assert answers[0] == answers[1] is not None
    assert np.array_equal(frees[0], frees[1])
    assert tests[1] == tests[0] - 1
    assert minimal_victims(ClusterState(snapshot), [], lambda: pytest.fail("tested"), misfit=True) is None


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_available_quota_kept_between_charges_is_the_one_computed_afresh(path: Path) -> None:
    """available() is kept per flavor/resource until a charge to it: asked after each
    release and take-back, it is what the quota tree gives from the usage as it stands."""
    snapshot = read_snapshot([str(path)])
    state = ClusterState(snapshot)
    frs = sorted({fr for usage in state.quota.quota.values() for fr in usage})
    queues = sorted(snapshot.cluster_queues)

    def agrees() -> bool:
        asked = [state.available(cq, fr) for cq in queues for fr in frs]
        fresh = [state.quota.available(f"cq:{cq}", fr, state.quota.tree_usage(state.cq_usage, fr))
                 for cq in queues for fr in frs]
        return asked == fresh

    assert agrees()
    running = [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING and w.cluster_queue]
    for w in running[::2]:
        state.release(w)
        assert agrees()
    for w in running[::2]:
        state.release(w, sign=-1)
        assert agrees()


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_freed_gathered_once_releases_like_evicting_them(path: Path) -> None:
    """release_freed(freed_by(ws)) leaves the state ClusterState(evicted=ws) starts from,
    workloads sharing nodes included; sign=-1 takes it all back. A gathered Freed is
    applied again and again by victim searches, so a second round must agree too."""
    snapshot = read_snapshot([str(path)])
    running = [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING and w.cluster_queue]
    gone = running[::2]
    state, start = ClusterState(snapshot), ClusterState(snapshot)
    want = ClusterState(snapshot, evicted=[w.ref for w in gone])
    freed = state.freed_by(gone)
    for _ in range(2):
        state.release_freed(freed)
        assert np.array_equal(state.free, want.free)
        assert _usage(state) == _usage(want)
        state.release_freed(freed, sign=-1)
        assert np.array_equal(state.free, start.free)
        assert _usage(state) == _usage(start)
    assert state.freed_by([]).rows.size == 0


def _usage(state: ClusterState) -> dict:
    """Cohort usage without the zero entries a release leaves behind."""
    return {key: {fr: v for fr, v in usage.items() if v} for key, usage in state.cq_usage.items()
            if any(usage.values())}
