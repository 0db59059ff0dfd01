"""Kueue's Configuration (ConfigMap kueue-system/kueue-manager-config) -> models.KueueConfig.

Only the sections that change what a plan may decide are read: `fairSharing`,
`admissionFairSharing`, `waitForPodsReady`; the rest of the Configuration is Kueue's
business and left alone. Within those sections Kueue decodes strictly and validates
(`pkg/config/config.go`, `validation.go`): an unknown field or a value it refuses is
an error here too, naming the file, the ConfigMap and the field, because Kueue would
not start with it and the planner cannot know what it would have meant. Defaults are
Kueue v0.17's: in `v1beta2` a section that is present is on; `v1beta1` still says
`enable`. The PlannerPolicy's `spec.kueueConfiguration` uses the v1beta2 shape plus an
`enable` (default true) so that a policy can also turn a section off.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Callable

from models import (
    AdmissionFairSharingConfig, FairSharingConfig, KueueConfig, KueueConfigOverride, ObjectRef,
    RequeuingStrategy, WaitForPodsReadyConfig,
)
from models.kueue_config import CREATION_TIMESTAMP, DEFAULT_STRATEGIES, EVICTION_TIMESTAMP, STRATEGY_LISTS
from planner.base.errors import InputError
from planner.snapshot import loader
from planner.k8s.fields import MAX_EXACT_INT, Bad, mapping, shown, type_name
from planner.k8s.quantity import QuantityError, quantity_fraction

NAMESPACE = "kueue-system"
NAME = "kueue-manager-config"
KEY = "controller_manager_config.yaml"
GROUP = "config.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
CONFIG_MAP = ObjectRef("ConfigMap", NAMESPACE, NAME)
DATA_FIELD = f"data[{KEY}]"

DEFAULT_PODS_READY_TIMEOUT = 300.0      # v1beta1's default (v1beta2 requires it)
MIN_WEIGHT = Fraction(1, 10**9)         # Kueue: "When not 0, Weight must be greater than 10^-9"

_UNITS = {"ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "µs": Fraction(1, 10**6),
          "μs": Fraction(1, 10**6), "ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60),
          "h": Fraction(3600)}
_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
MAX_DURATION = 10 * 365 * 24 * 3600.0   # Go's time.Duration tops out near 292 years; ten is already a mistake


def parse_duration(value: object, field: str) -> float:
    """A Go duration string (metav1.Duration: "5m", "1h30m", "300s", "0s", "0") in seconds, at least 0."""
    if type(value) is not str:
        raise Bad(field, f"must be a duration string such as 5m or 1h30m, got {type_name(value)} {shown(value)}")
    text = value.strip()
    if len(text) > 64:   # Go's durations are int64 nanoseconds: 20 digits at most, with units
        raise Bad(field, f"{shown(value)} is too long for a duration (at most 64 characters)")
    if text == "0":
        return 0.0
    if text.startswith("-"):
        raise Bad(field, f"{shown(value)} is negative; it must be at least 0")
    rest = text.lstrip("+")
    total = Fraction(0)
    position = 0
    while position < len(rest):
        match = _DURATION.match(rest, position)
        if match is None or match.group(1) in ("", "."):
            raise Bad(field, f"{shown(value)} is not a duration (expected Go notation such as 300s, 5m, 1h30m)")
        total += Fraction(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not rest:
        raise Bad(field, "must not be empty (a duration such as 5m)")
    if total > MAX_DURATION:
        raise Bad(field, f"{shown(value)} is longer than ten years")
    return float(total)


def parse_weight(value: object, field: str) -> float:
    """A `fairSharing.weight`: a quantity (1, 0.5, 500m, 2); 0, or above 10^-9."""
    if type(value) is bool or not (type(value) in (int, float, str)):
        raise Bad(field, f"must be a quantity such as 1, 0.5 or 500m, got {type_name(value)} {shown(value)}")
    if type(value) is int and abs(value) > 10**9:
        raise Bad(field, f"{shown(value)} is too large (at most 10^9)")
    if type(value) is float and not math.isfinite(value):
        raise Bad(field, f"{shown(value)} is not a finite number")
    text = repr(value) if type(value) is float else str(value)
    try:
        weight = quantity_fraction(text.strip())
    except QuantityError as err:
        raise Bad(field, str(err)) from None
    if 0 < weight <= MIN_WEIGHT:
        raise Bad(field, f"{shown(value)} is too small: a weight is 0 or more than 10^-9 (Kueue's rule)")
    if weight > 10**9:
        raise Bad(field, f"{shown(value)} is too large (at most 10^9)")
    return float(weight)


def _keys(section: dict[str, Any], field: str, known: tuple[str, ...], hint: str = "") -> None:
    for key in section:
        if key not in known:
            raise Bad(f"{field}.{key}", f"unknown field (known: {', '.join(known)}){hint}")


def _bool(value: object, field: str, default: bool) -> bool:
    if value is None:
        return default
    if type(value) is not bool:
        raise Bad(field, f"must be true or false, got {type_name(value)} {shown(value)}")
    return value


def _count(value: object, field: str, default: int | None) -> int | None:
    """A non-negative int32 (Kueue's backoff fields)."""
    if value is None:
        return default
    if type(value) is not int:
        raise Bad(field, f"must be an integer, got {type_name(value)} {shown(value)}")
    if value < 0:
        raise Bad(field, f"must be at least 0, got {value}")
    if value > 2**31 - 1:
        raise Bad(field, f"{value} is outside the int32 range")
    return value


def _strategies(value: object, field: str, empty_means_default: bool) -> tuple[str, ...]:
    if value is None or value == []:
        if empty_means_default:
            return DEFAULT_STRATEGIES
        raise Bad(field, "must be specified (Kueue requires it when fairSharing is set)")
    if type(value) is not list or any(type(v) is not str for v in value):
        raise Bad(field, f"must be a list of strategy names, got {type_name(value)} {shown(value)}")
    strategies = tuple(value)
    if strategies not in STRATEGY_LISTS:
        allowed = "; ".join(f"[{', '.join(s)}]" for s in STRATEGY_LISTS)
        raise Bad(field, f"{list(strategies)} is not supported; Kueue accepts only {allowed}")
    return strategies


def fair_sharing(raw: object, field: str, version: str) -> FairSharingConfig:
    section = mapping(raw, field)
    if version == "v1beta2":
        _keys(section, field, ("preemptionStrategies",),
              " (in v1beta2 the section being present turns fair sharing on; there is no enable)")
        return FairSharingConfig(True, _strategies(section.get("preemptionStrategies"),
                                                   f"{field}.preemptionStrategies", False))
    # v1beta1, and the policy: `enable`; an empty list is Kueue's default pair
    _keys(section, field, ("enable", "preemptionStrategies"))
    enabled = _bool(section.get("enable"), f"{field}.enable", version == "policy")
    if not enabled:
        return FairSharingConfig()
    return FairSharingConfig(True, _strategies(section.get("preemptionStrategies"),
                                               f"{field}.preemptionStrategies", True))


def admission_fair_sharing(raw: object, field: str, version: str) -> AdmissionFairSharingConfig | None:
    section = mapping(raw, field)
    known = ("usageHalfLifeTime", "usageSamplingInterval", "resourceWeights")
    _keys(section, field, known + (("enable",) if version == "policy" else ()))
    if version == "policy" and not _bool(section.get("enable"), f"{field}.enable", True):
        return None
    half_life = section.get("usageHalfLifeTime")
    sampling = section.get("usageSamplingInterval")
    weights: dict[str, float] = {}
    for resource, weight in sorted(mapping(section.get("resourceWeights"), f"{field}.resourceWeights").items()):
        where = f"{field}.resourceWeights[{resource}]"
        if type(weight) is int and abs(weight) > MAX_EXACT_INT:   # math.isfinite(10**400) overflows
            raise Bad(where, f"{shown(weight)} is out of range")
        if type(weight) is bool or type(weight) not in (int, float) or not math.isfinite(weight):
            raise Bad(where, f"must be a number, got {type_name(weight)} {shown(weight)}")
        if weight < 0:
            raise Bad(where, f"must be at least 0, got {shown(weight)}")
        weights[str(resource)] = float(weight)
    interval = 300.0 if sampling is None else parse_duration(sampling, f"{field}.usageSamplingInterval")
    if interval <= 0:
        raise Bad(f"{field}.usageSamplingInterval", f"must be greater than 0, got {shown(sampling)}")
    return AdmissionFairSharingConfig(
        usage_half_life_seconds=0.0 if half_life is None else parse_duration(half_life, f"{field}.usageHalfLifeTime"),
        usage_sampling_interval_seconds=interval,
        resource_weights=weights,
    )


def _requeuing(raw: object, field: str) -> RequeuingStrategy:
    section = mapping(raw, field)
    _keys(section, field, ("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"))
    stamp = section.get("timestamp", EVICTION_TIMESTAMP)
    if stamp not in (EVICTION_TIMESTAMP, CREATION_TIMESTAMP):
        raise Bad(f"{field}.timestamp", f"must be {EVICTION_TIMESTAMP} or {CREATION_TIMESTAMP}, got {shown(stamp)}")
    base = _count(section.get("backoffBaseSeconds"), f"{field}.backoffBaseSeconds", 60)
    maximum = _count(section.get("backoffMaxSeconds"), f"{field}.backoffMaxSeconds", 3600)
    assert base is not None and maximum is not None
    return RequeuingStrategy(
        timestamp=stamp,
        backoff_limit_count=_count(section.get("backoffLimitCount"), f"{field}.backoffLimitCount", None),
        backoff_base_seconds=base,
        backoff_max_seconds=maximum,
    )


def wait_for_pods_ready(raw: object, field: str, version: str) -> WaitForPodsReadyConfig:
    section = mapping(raw, field)
    known = ("timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout")
    if version == "v1beta2":
        _keys(section, field, known, " (in v1beta2 the section being present turns it on; there is no enable)")
        enabled = True
    else:
        _keys(section, field, ("enable",) + known)
        enabled = _bool(section.get("enable"), f"{field}.enable", version == "policy")
    if not enabled:
        return WaitForPodsReadyConfig()
    timeout_raw = section.get("timeout")
    if timeout_raw is None and version == "v1beta2":
        raise Bad(f"{field}.timeout", "must be specified (Kueue requires it when waitForPodsReady is set)")
    timeout = DEFAULT_PODS_READY_TIMEOUT if timeout_raw is None else parse_duration(timeout_raw, f"{field}.timeout")
    if timeout == 0:
        raise Bad(f"{field}.timeout", "must be greater than 0")
    recovery = section.get("recoveryTimeout")
    return WaitForPodsReadyConfig(
        enabled=True,
        timeout_seconds=timeout,
        # v1beta2 defaults blockAdmission to false; v1beta1 to true when enabled (its conversion)
        block_admission=_bool(section.get("blockAdmission"), f"{field}.blockAdmission", version == "v1beta1"),
        requeuing_strategy=_requeuing(section.get("requeuingStrategy"), f"{field}.requeuingStrategy"),
        recovery_timeout_seconds=None if recovery is None else parse_duration(recovery, f"{field}.recoveryTimeout"),
    )


def parse_configuration(document: object, version_field: str = "apiVersion") -> KueueConfig:
    """A decoded Configuration -> KueueConfig; Bad names the field inside it."""
    config = mapping(document, "")
    api_version = config.get("apiVersion")
    group, _, version = str(api_version).rpartition("/")
    if group != GROUP or version not in VERSIONS:
        raise Bad(version_field, f"must be {GROUP}/v1beta2 (or v1beta1), got {shown(api_version)}")
    if config.get("kind") != "Configuration":
        raise Bad("kind", f"must be Configuration, got {shown(config.get('kind'))}")
    afs = config.get("admissionFairSharing")
    return KueueConfig(
        fair_sharing=fair_sharing(config.get("fairSharing"), "fairSharing", version)
        if config.get("fairSharing") is not None else FairSharingConfig(),
        admission_fair_sharing=None if afs is None else admission_fair_sharing(afs, "admissionFairSharing", version),
        wait_for_pods_ready=wait_for_pods_ready(config.get("waitForPodsReady"), "waitForPodsReady", version)
        if config.get("waitForPodsReady") is not None else WaitForPodsReadyConfig(),
    )


def read_config_map(obj: dict[str, Any], file: str) -> KueueConfig | None:
    """The ConfigMap kueue-system/kueue-manager-config -> KueueConfig, or None without the key.

    Raises InputError naming the file, the ConfigMap and the field when the Configuration
    is unreadable or holds a value Kueue refuses."""
    try:
        data = mapping(obj.get("data"), "data")
    except Bad as bad:
        raise InputError(bad.message, file=file, ref=CONFIG_MAP, field=bad.field) from None
    text = data.get(KEY)
    if text is None:
        return None
    if type(text) is not str:
        raise InputError(f"must be a string (the Configuration as YAML), got {type_name(text)}",
                         file=file, ref=CONFIG_MAP, field=DATA_FIELD)
    # the snapshot's own bounded decoder: an alias bomb in the embedded text is refused as in a file
    try:
        document = loader.decode_document(file, text, "Kueue's Configuration")
    except InputError as err:
        inner = f"{DATA_FIELD}.{err.field}" if err.field else DATA_FIELD
        raise InputError(f"is not valid YAML: {err.detail}", file=file, ref=CONFIG_MAP, field=inner) from None
    try:
        config = parse_configuration(document)
    except Bad as bad:
        field = f"{DATA_FIELD}.{bad.field}" if bad.field else DATA_FIELD
        raise InputError(bad.message, file=file, ref=CONFIG_MAP, field=field) from None
    return KueueConfig(config.fair_sharing, config.admission_fair_sharing, config.wait_for_pods_ready,
                       source=f"ConfigMap {NAMESPACE}/{NAME}")


_SECTIONS: dict[str, Callable[[object, str, str], object]] = {
    "fairSharing": fair_sharing,
    "admissionFairSharing": admission_fair_sharing,
    "waitForPodsReady": wait_for_pods_ready,
}


def parse_override(raw: object, field: str) -> KueueConfigOverride:
    """A PlannerPolicy's `spec.kueueConfiguration`; Bad names the field under `field`."""
    section = mapping(raw, field)
    _keys(section, field, tuple(_SECTIONS))
    fair = section.get("fairSharing")
    admission = section.get("admissionFairSharing")
    ready = section.get("waitForPodsReady")
    admission_config = (None if admission is None
                        else admission_fair_sharing(admission, f"{field}.admissionFairSharing", "policy"))
    return KueueConfigOverride(
        fair_sharing=None if fair is None else fair_sharing(fair, f"{field}.fairSharing", "policy"),
        admission_fair_sharing=admission_config,
        admission_fair_sharing_off=admission is not None and admission_config is None,
        wait_for_pods_ready=None if ready is None else wait_for_pods_ready(ready, f"{field}.waitForPodsReady",
                                                                           "policy"),
    )
