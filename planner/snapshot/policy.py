"""stowplan.io/v1alpha1 PlannerPolicy -> models.Policy, and the one validation of its values.

A malformed policy is an InputError (the planner cannot run without knowing its
objective): an unknown key, a wrong type or an out-of-range value names the field.
The ranges here are also the CLI's (`--time-limit`, `--gap`, whether from a flag or
its environment variable): `check_time_limit` and `check_gap` are the one place that
says what a time limit or a gap may be. Every number is finite and bounded, so
nothing downstream overflows (a cost of 1e308 summed over victims is inf).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from models import ObjectRef, Policy
from models.capacity import NodeTemplate
from models.objects import ProvisioningPolicy
from planner.base.errors import InputError
from planner.snapshot import kueue_config, loader
from planner.k8s.fields import Bad, shown

KIND = "PlannerPolicy"
API_VERSION = "stowplan.io/v1alpha1"


MAX_TIME_LIMIT = 7 * 24 * 3600.0   # a week: longer is a mistake, and inf hangs or breaks solvers
MAX_COST = 1e9                     # a preemption cost (annotation or restartCost): sums stay exact enough
MAX_LOST_HOURS = 100_000.0
MAX_AGING_PER_HOUR = 1e6
MAX_SECONDS = 1e9
MAX_THREADS = 256
MAX_MIGRATIONS = 10_000            # migrations per cycle
MAX_EVICTIONS = 1_000_000          # evictions per cycle
MAX_SEED = 2**31 - 1               # HiGHS's random_seed is a 32-bit int


def _number(minimum: float, strict: bool, maximum: float) -> Callable[[object], float | str]:
    def check(value: object) -> float | str:
        if type(value) is int and abs(value) > 2**63:   # math.isfinite(10**400) overflows
            return f"must be at most {maximum:g}, got {shown(value)}"
        if not (type(value) is int or type(value) is float) or not math.isfinite(value):
            return f"must be a finite number, got {shown(value)}"
        if value < minimum or (strict and value == minimum):
            return f"must be {'greater than' if strict else 'at least'} {minimum:g}, got {value!r}"
        if value > maximum:
            return f"must be at most {maximum:g}, got {value!r}"
        return float(value)
    return check


def _integer(minimum: int, maximum: int) -> Callable[[object], int | str]:
    def check(value: object) -> int | str:
        if type(value) is not int:
            return f"must be an integer, got {shown(value)}"
        if not minimum <= value <= maximum:
            return f"must be from {minimum} to {maximum}, got {shown(value)}"
        return value
    return check


_time_limit = _number(0, strict=True, maximum=MAX_TIME_LIMIT)
_gap = _number(0, strict=False, maximum=1)


def _checked(check: Callable[[object], float | str], value: object) -> float:
    """`value` (a number, or text from a flag or the environment) through `check`; ValueError says why."""
    if type(value) is str:
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"must be a number, got {shown(value)}") from None
    result = check(value)
    if isinstance(result, str):
        raise ValueError(result)
    return result


def check_time_limit(value: object) -> float:
    """A cycle's time limit in seconds: finite, above 0, at most a week."""
    return _checked(_time_limit, value)


def check_gap(value: object) -> float:
    """A relative MIP gap: finite, from 0 to 1."""
    return _checked(_gap, value)


def _boolean(value: object) -> bool | str:
    if type(value) is not bool:
        return f"must be true or false, got {shown(value)}"
    return value


def _names(value: object) -> tuple[str, ...] | str:
    if type(value) is not list or any(type(v) is not str or not v for v in value):
        return f"must be a list of resource names, got {shown(value)}"
    return tuple(value)


# spec key -> (models.Policy field, check returning the value or an error message)
_FIELDS: dict[str, tuple[str, Callable[[object], object]]] = {
    "timeLimitSeconds": ("time_limit_seconds", _time_limit),
    "gap": ("mip_gap", _gap),
    "agingPerHour": ("aging_per_hour", _number(0, strict=False, maximum=MAX_AGING_PER_HOUR)),
    "maxLostHours": ("max_lost_hours", _number(0, strict=False, maximum=MAX_LOST_HOURS)),
    "restartCost": ("restart_cost", _number(0, strict=False, maximum=MAX_COST)),
    "minimumRuntimeSeconds": ("minimum_runtime_seconds", _number(0, strict=False, maximum=MAX_SECONDS)),
    "gpuResources": ("gpu_resources", _names),
    "threads": ("threads", _integer(1, MAX_THREADS)),
    "seed": ("seed", _integer(0, MAX_SEED)),
    "greedyFloor": ("greedy_floor", _boolean),
    "defragment": ("defragment", _boolean),
    "maxMigrationsPerCycle": ("max_migrations_per_cycle", _integer(0, MAX_MIGRATIONS)),
    "migrationCheckpointWindowSeconds": ("migration_checkpoint_window_seconds",
                                         _number(0, strict=False, maximum=MAX_SECONDS)),
    "maxEvictionsPerCycle": ("max_evictions_per_cycle", _integer(0, MAX_EVICTIONS)),
    "maxEvictionsVsKueue": ("max_evictions_vs_kueue", _number(0, strict=False, maximum=MAX_EVICTIONS)),
    "minGainPerEviction": ("min_gain_per_eviction", _number(0, strict=False, maximum=MAX_COST)),
    "protectRunningAfterSeconds": ("protect_running_after_seconds", _number(0, strict=False, maximum=MAX_SECONDS)),
}


# Sections of Kueue's Configuration the policy sets or overrides (planner.snapshot.kueue_config)
KUEUE_CONFIGURATION = "kueueConfiguration"
# ProvisioningRequests for what no plan can place (docs/provisioning.md)
PROVISIONING = "provisioning"
MAX_NODES_PER_CYCLE = 100_000
_PROVISIONING_KEYS = ("enabled", "maxNodesPerCycle", "templates")


def parse_provisioning(value: object, where: str) -> ProvisioningPolicy:
    """`spec.provisioning`: {enabled, maxNodesPerCycle?, templates} (templates as `--add-nodes`
    reads them, planner.snapshot.node_templates); raises Bad naming the field."""
    from planner.snapshot.node_templates import parse_templates

    if type(value) is not dict:
        raise Bad(where, f"must be a mapping, got {shown(value)}")
    unknown = sorted(set(value) - set(_PROVISIONING_KEYS))
    if unknown:
        raise Bad(f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(_PROVISIONING_KEYS)})")
    enabled = _boolean(value.get("enabled", False))
    if type(enabled) is str:
        raise Bad(f"{where}.enabled", enabled)
    limit: int | None = None
    if value.get("maxNodesPerCycle") is not None:
        checked = _integer(0, MAX_NODES_PER_CYCLE)(value["maxNodesPerCycle"])
        if type(checked) is str:
            raise Bad(f"{where}.maxNodesPerCycle", checked)
        assert type(checked) is int
        limit = checked
    templates: tuple[NodeTemplate, ...] = ()
    if value.get("templates") is not None or enabled:
        try:
            templates = parse_templates({"templates": value.get("templates")})
        except Bad as bad:
            raise Bad(f"{where}.{bad.field}", bad.message + (" (the node kinds the autoscaler can add)"
                                                             if bad.field == "templates" else "")) from None
    return ProvisioningPolicy(enabled=bool(enabled), max_nodes_per_cycle=limit, templates=templates)


# In-house workload kinds (planner.kinds.custom)
CUSTOM_KINDS = "customKinds"


def is_policy(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == KIND and obj.get("apiVersion") == API_VERSION


def _ref(obj: dict[str, Any]) -> ObjectRef:
    metadata = obj.get("metadata")
    name = metadata.get("name") if type(metadata) is dict else None
    return ObjectRef(KIND, "", name if type(name) is str else "")


def parse_policy(obj: dict[str, Any], file: str) -> Policy:
    ref = _ref(obj)
    spec = obj.get("spec")
    if spec is None:
        return Policy()
    if type(spec) is not dict:
        raise InputError(f"must be a mapping, got {type(spec).__name__}", file=file, ref=ref, field="spec")
    values: dict[str, Any] = {}   # attribute -> its checked value (each of its field's type)
    for key, value in spec.items():
        if key == KUEUE_CONFIGURATION:
            try:
                values["kueue"] = kueue_config.parse_override(value, f"spec.{key}")
            except Bad as bad:
                raise InputError(bad.message, file=file, ref=ref, field=bad.field) from None
            continue
        if key == PROVISIONING:
            try:
                values["provisioning"] = parse_provisioning(value, f"spec.{key}")
            except Bad as bad:
                raise InputError(bad.message, file=file, ref=ref, field=bad.field) from None
            continue
        if key == CUSTOM_KINDS:
            from planner import kinds
            from planner.kinds.custom import parse_custom_kinds

            try:
                values["custom_kinds"] = parse_custom_kinds(value, f"spec.{key}", kinds.reserved_kinds())
            except Bad as bad:
                raise InputError(bad.message, file=file, ref=ref, field=bad.field) from None
            continue
        if key not in _FIELDS:
            known = ", ".join(sorted([*_FIELDS, KUEUE_CONFIGURATION, PROVISIONING, CUSTOM_KINDS]))
            raise InputError(f"unknown field (known: {known})", file=file, ref=ref, field=f"spec.{key}")
        attribute, check = _FIELDS[key]
        result = check(value)
        if type(result) is str:
            raise InputError(result, file=file, ref=ref, field=f"spec.{key}")
        values[attribute] = result
    return Policy(**values)


def read_policy_file(path: str, limits: loader.Limits = loader.DEFAULT_LIMITS) -> Policy:
    """A policy file (`--policy FILE`): exactly one PlannerPolicy object."""
    data = loader.read_bytes(path, limits.max_file_bytes)
    objects: list[tuple[str, dict[str, Any]]] = []
    found = loader.Loaded(objects, "", [])
    tainted: loader.Tainted = {}
    for index, doc in enumerate(loader.decode(path, data, limits, tainted)):
        loader.flatten(path, doc, f"document {index + 1}", found, None)
    if len(objects) != 1 or not is_policy(objects[0][1]):
        kinds = ", ".join(f"{o.get('apiVersion')}/{o.get('kind')}" for _, o in objects) or "nothing"
        raise InputError(f"a policy file must hold exactly one {API_VERSION} {KIND}, found {kinds}",
                         file=path)
    if tainted:
        loader.locate_duplicates(path, found, 0, tainted)
        duplicate = found.duplicates.get(0)
        where, message = duplicate if duplicate else ("", found.file_duplicates[0][1])
        raise InputError(f"{message}: a policy must be unambiguous", file=path, ref=_ref(objects[0][1]),
                         field=where)
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
