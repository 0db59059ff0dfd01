"""Integer resource vectors.

Quantities become integers once, at the edge (milli-cpu for `cpu`, whole units for
everything else: bytes for memory, devices for GPUs), exactly as Kueue does, so no
capacity arithmetic inside the planner ever rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

CPU = "cpu"
PODS = "pods"
GPU_SUFFIX = "/gpu"

# (flavor, resource): the key of a ClusterQueue's quota, and of every usage table kept against it.
FlavorResource = tuple[str, str]


def is_gpu(resource: str) -> bool:
    """A GPU-like extended resource (`nvidia.com/gpu`, `amd.com/gpu`, ...)."""
    return resource.endswith(GPU_SUFFIX) or resource == "gpu"


@dataclass(frozen=True, slots=True)
class Resources:
    """An immutable map resource name -> integer amount; absent means zero."""

    items_: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def of(values: Mapping[str, int] | Iterable[tuple[str, int]] | None = None, **kw: int) -> "Resources":
        merged: dict[str, int] = {}
        pairs = values.items() if isinstance(values, Mapping) else (values or ())
        for name, amount in list(pairs) + list(kw.items()):
            merged[name] = merged.get(name, 0) + int(amount)
        return Resources(tuple(sorted((k, v) for k, v in merged.items() if v != 0)))

    def get(self, name: str) -> int:
        for key, value in self.items_:
            if key == name:
                return value
        return 0

    def __getitem__(self, name: str) -> int:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.items_)

    def __bool__(self) -> bool:
        return bool(self.items_)

    def items(self) -> tuple[tuple[str, int], ...]:
        return self.items_

    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.items_)

    def as_dict(self) -> dict[str, int]:
        return dict(self.items_)

    def __add__(self, other: "Resources") -> "Resources":
        return self._plus(other.items_, 1)

    def __sub__(self, other: "Resources") -> "Resources":
        return self._plus(other.items_, -1)

    def _plus(self, items: tuple[tuple[str, int], ...], sign: int) -> "Resources":
        # The hot path of capacity arithmetic (millions of calls at scale): no
        # Resources.of round trip, and nothing to do when one side is empty.
        if not items:
            return self
        if not self.items_ and sign == 1:
            return Resources(items)
        total = dict(self.items_)
        for k, v in items:
            total[k] = total.get(k, 0) + sign * v
        return Resources(tuple(sorted((k, v) for k, v in total.items() if v != 0)))

    def scaled(self, factor: int) -> "Resources":
        return Resources(tuple((k, v * factor) for k, v in self.items_)) if factor else Resources()

    def fits_in(self, capacity: "Resources") -> bool:
        """Every amount here is at most the same amount in `capacity`."""
        return all(v <= capacity.get(k) for k, v in self.items_)

    def pods_fitting(self, capacity: "Resources") -> int:
        """How many copies of this request fit in `capacity` (Kueue's per-leaf count)."""
        have = dict(capacity.items_)
        fit: int | None = None
        for k, v in self.items_:
            if v > 0:
                n = have.get(k, 0) // v
                if fit is None or n < fit:
                    fit = n
        return max(0, fit) if fit is not None else 0

    def clipped(self) -> "Resources":
        """Negative amounts raised to zero (free capacity never goes below zero)."""
        return Resources.of({k: max(0, v) for k, v in self.items_})


def dominant_units(request: Resources) -> float:
    """Volume of one pod in dominant-resource units: GPUs if it asks for any, else cores."""
    gpus = sum(v for k, v in request.items() if is_gpu(k))
    if gpus > 0:
        return float(gpus)
    return request.get(CPU) / 1000.0
