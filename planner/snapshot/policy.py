"""stowplan.io/v1alpha1 PlannerPolicy -> models.Policy.

A malformed policy is an InputError (the planner cannot run without knowing its
objective): an unknown key, a wrong type or an out-of-range value names the field.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from models import ObjectRef, Policy
from planner.errors import InputError
from planner.snapshot import loader

KIND = "PlannerPolicy"
API_VERSION = "stowplan.io/v1alpha1"


def _number(minimum: float, strict: bool) -> Callable[[object], float | str]:
    def check(value: object) -> float | str:
        if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
            return f"must be a number, got {value!r}"
        if value < minimum or (strict and value == minimum):  # type: ignore[operator]
            return f"must be {'greater than' if strict else 'at least'} {minimum:g}, got {value!r}"
        return float(value)  # type: ignore[arg-type]
    return check


def _integer(minimum: int) -> Callable[[object], int | str]:
    def check(value: object) -> int | str:
        if type(value) is not int:
            return f"must be an integer, got {value!r}"
        if value < minimum:
            return f"must be at least {minimum}, got {value}"
        return value
    return check


def _boolean(value: object) -> bool | str:
    if type(value) is not bool:
        return f"must be true or false, got {value!r}"
    return value


def _names(value: object) -> tuple[str, ...] | str:
    if type(value) is not list or any(type(v) is not str or not v for v in value):
        return f"must be a list of resource names, got {value!r}"
    return tuple(value)


# spec key -> (models.Policy field, check returning the value or an error message)
_FIELDS: dict[str, tuple[str, Callable[[object], object]]] = {
    "timeLimitSeconds": ("time_limit_seconds", _number(0, strict=True)),
    "gap": ("mip_gap", _number(0, strict=False)),
    "agingPerHour": ("aging_per_hour", _number(0, strict=False)),
    "maxLostHours": ("max_lost_hours", _number(0, strict=False)),
    "restartCost": ("restart_cost", _number(0, strict=False)),
    "minimumRuntimeSeconds": ("minimum_runtime_seconds", _number(0, strict=False)),
    "gpuResources": ("gpu_resources", _names),
    "threads": ("threads", _integer(1)),
    "seed": ("seed", _integer(0)),
    "greedyFloor": ("greedy_floor", _boolean),
}


def is_policy(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == KIND and obj.get("apiVersion") == API_VERSION


def parse_policy(obj: dict[str, Any], file: str) -> Policy:
    metadata = obj.get("metadata")
    name = metadata.get("name") if type(metadata) is dict else None
    ref = ObjectRef(KIND, "", name if type(name) is str else "")
    spec = obj.get("spec")
    if spec is None:
        return Policy()
    if type(spec) is not dict:
        raise InputError(f"must be a mapping, got {type(spec).__name__}", file=file, ref=ref, field="spec")
    values: dict[str, object] = {}
    for key, value in spec.items():
        if key not in _FIELDS:
            known = ", ".join(sorted(_FIELDS))
            raise InputError(f"unknown field (known: {known})", file=file, ref=ref, field=f"spec.{key}")
        attribute, check = _FIELDS[key]
        result = check(value)
        if type(result) is str:
            raise InputError(result, file=file, ref=ref, field=f"spec.{key}")
        values[attribute] = result
    return Policy(**values)  # type: ignore[arg-type]


def read_policy_file(path: str) -> Policy:
    """A policy file (`--policy FILE`): exactly one PlannerPolicy object."""
    data = loader.read_bytes(path)
    objects: list[tuple[str, dict[str, Any]]] = []
    found = loader.Loaded(objects, "", [])
    for index, doc in enumerate(loader.decode(path, data)):
        loader.flatten(path, doc, f"document {index + 1}", found, None)
    if len(objects) != 1 or not is_policy(objects[0][1]):
        kinds = ", ".join(f"{o.get('apiVersion')}/{o.get('kind')}" for _, o in objects) or "nothing"
        raise InputError(f"a policy file must hold exactly one {API_VERSION} {KIND}, found {kinds}",
                         file=path)
    return parse_policy(objects[0][1], path)


def policy_from(candidates: Sequence[tuple[str, dict[str, Any]]]) -> Policy:
    """The snapshot's PlannerPolicy (at most one), or the defaults."""
    if len(candidates) > 1:
        files = " and ".join(f for f, _ in candidates[:2])
        raise InputError(f"more than one {KIND} in the snapshot ({files}); keep one, or pass --policy",
                         file=candidates[1][0], field="kind")
    if not candidates:
        return Policy()
    return parse_policy(candidates[0][1], candidates[0][0])
