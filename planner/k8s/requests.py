"""A pod's effective request, by Kubernetes' rule (k8s.io/component-helpers resource.PodRequests).

For each resource:
    max( sum(app containers) + sum(sidecars),
         max over init containers i of (request(i) + sum of sidecars declared before i) )
    + overhead
where a sidecar is an init container with `restartPolicy: Always`. A container that
gives only a limit requests that limit (API defaulting). One `pods` is added.
"""

from __future__ import annotations

from typing import Any

from models import Resources
from planner.k8s.fields import Bad, mapping, sequence
from planner.k8s.quantity import QuantityError, parse_quantity


def container_request(container: object, field: str) -> dict[str, int]:
    """One container's requests, falling back to its limits, as integers."""
    spec = mapping(container, field)
    resources = mapping(spec.get("resources"), f"{field}.resources")
    requests = mapping(resources.get("requests"), f"{field}.resources.requests")
    limits = mapping(resources.get("limits"), f"{field}.resources.limits")
    out: dict[str, int] = {}
    for name, value in requests.items():
        out[name] = _quantity(value, name, f"{field}.resources.requests.{name}")
    for name, value in limits.items():
        if name not in out:
            out[name] = _quantity(value, name, f"{field}.resources.limits.{name}")
    return out


def _quantity(value: object, resource: str, field: str) -> int:
    try:
        return parse_quantity(value, resource)
    except QuantityError as err:
        raise Bad(field, str(err)) from None


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _maximize(total: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


def effective_request_dict(pod_spec: dict[str, Any], field: str = "spec") -> dict[str, int]:
    """The effective per-pod request of `pod_spec` (a PodSpec mapping), `pods: 1` included."""
    total: dict[str, int] = {}
    for i, container in enumerate(sequence(pod_spec.get("containers"), f"{field}.containers")):
        _add(total, container_request(container, f"{field}.containers[{i}]"))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, container in enumerate(sequence(pod_spec.get("initContainers"), f"{field}.initContainers")):
        name = f"{field}.initContainers[{i}]"
        request = container_request(container, name)
        if mapping(container, name).get("restartPolicy") == "Always":
            _add(total, request)        # a sidecar keeps running beside the app containers
            _add(sidecars, request)
            _maximize(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, request)      # sidecars started before it run while it does
            _maximize(init_peak, running)
    _maximize(total, init_peak)
    overhead = mapping(pod_spec.get("overhead"), f"{field}.overhead")
    for name, value in overhead.items():
        total[name] = total.get(name, 0) + _quantity(value, name, f"{field}.overhead.{name}")
    total["pods"] = total.get("pods", 0) + 1
    return total


def resources(amounts: dict[str, int]) -> Resources:
    """Resources from a dict with unique keys: what Resources.of builds, without its merging."""
    return Resources(tuple(sorted([item for item in amounts.items() if item[1] != 0])))


def effective_request(pod_spec: dict[str, Any], field: str = "spec") -> Resources:
    return resources(effective_request_dict(pod_spec, field))
