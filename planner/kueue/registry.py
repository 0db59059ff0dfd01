"""The admitted workloads: what holds quota, per ClusterQueue, in Kueue's candidate order.

`Admitted` is one workload holding quota (running before the plan, or admitted by it);
`Registry` keeps them per queue, sorted as Kueue orders preemption candidates within a
queue, and logs each queue's changes so that what is built from a queue's list
(planner.kueue.preemption.search.QueueView) can follow it rather than rebuild.
Greedy's cycle (planner.greedy) fills it; the flavor assigner and the preemptor read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models import FlavorResource as FR, ObjectRef, Workload


@dataclass(eq=False)
class Admitted:
    """A workload holding quota: running before the plan, or admitted by it.

    `view` is the workload as running (its assignment: where it holds nodes and quota),
    which ClusterState releases and takes back. `order` is Kueue's candidate order
    within one queue: lower priority first, most recently admitted first, then UID.
    """

    view: Workload
    cq: str
    usage: dict[FR, int]
    evictable: bool
    planned: bool                   # admitted by this plan (not running before it)
    admitted_at: float
    order: tuple[Any, ...] = field(default=())
    evicting: bool = False          # its eviction is issued, not complete (Kueue: IsEvicted)
    # May another queue's workload reclaim it? Kueue's rule alone says yes (while its
    # queue borrows); greedy says no for running work whose reclaim an earlier replay
    # could not justify in its end state (planner.greedy: protected work).
    reclaimable: bool = True

    def __post_init__(self) -> None:
        w = self.view
        self.frs = frozenset(fr for fr, v in self.usage.items() if v > 0)
        self.order = (w.priority, -self.admitted_at, w.part_of is None, w.uid, str(w.ref))

    @property
    def ref(self) -> ObjectRef:
        return self.view.ref

    @property
    def priority(self) -> int:
        return self.view.priority


class Registry:
    """Admitted workloads per ClusterQueue, each queue's list in Kueue's candidate order."""

    def __init__(self) -> None:
        self.by_cq: dict[str, list[Admitted]] = {}
        self.by_ref: dict[ObjectRef, Admitted] = {}
        self.version: dict[str, int] = {}     # per queue: moves on with every change to its list
        self.epoch = 0                        # moves on with every change to any list
        # Per queue, its latest changes: (version after, "add" | "remove" | "mark", position,
        # workload), so that what is built from a queue's list can follow it (QueueView).
        self.changes: dict[str, list[tuple[int, str, int, Admitted]]] = {}

    def _changed(self, a: Admitted, what: str, at: int) -> None:
        version = self.version[a.cq] = self.version.get(a.cq, 0) + 1
        log = self.changes.setdefault(a.cq, [])
        log.append((version, what, at, a))
        if len(log) > 2 * self.KEPT:
            del log[:-self.KEPT]
        self.epoch += 1

    KEPT = 64

    def since(self, cq: str, version: int) -> list[tuple[int, str, int, Admitted]] | None:
        """The changes to `cq`'s list after `version`, or None if not all are kept."""
        log = self.changes.get(cq, [])
        if self.version.get(cq, 0) == version:
            return []
        if not log or log[0][0] > version + 1:
            return None
        return [c for c in log if c[0] > version]

    def add(self, a: Admitted) -> None:
        q = self.by_cq.setdefault(a.cq, [])
        lo, hi = 0, len(q)
        while lo < hi:                     # bisect on the order key
            mid = (lo + hi) // 2
            if q[mid].order < a.order:
                lo = mid + 1
            else:
                hi = mid
        q.insert(lo, a)
        self.by_ref[a.ref] = a
        self._changed(a, "add", lo)

    def mark_evicting(self, a: Admitted) -> None:
        """`a`'s eviction is under way: it sorts first among candidates from now on."""
        if not a.evicting:
            a.evicting = True
            self._changed(a, "mark", self.by_cq[a.cq].index(a))

    def remove(self, a: Admitted) -> None:
        q = self.by_cq[a.cq]
        at = q.index(a)
        del q[at]
        del self.by_ref[a.ref]
        self._changed(a, "remove", at)
