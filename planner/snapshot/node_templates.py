"""The capacity what-if's SPEC: a YAML file of node templates -> models.NodeTemplate.

    templates:
    - name: h100-rack          # unique
      cost: 10                 # per unit, > 0
      per: rack                # node (default) | rack: a whole rack or block of `hosts` nodes
      hosts: 4                 # nodes per unit (per: rack only; default 1)
      topology: [example.com/block, example.com/rack]   # labels given fresh values per unit
      labels: {example.com/gpu: h100}
      taints: [{key: gpu, value: "true", effect: NoSchedule}]
      allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110}
      max: 50                  # units at most (default 1000)

A bad file raises InputError naming the file and the field (exit 2).
"""

from __future__ import annotations

from typing import Any

import yaml

from models import Resources
from models.capacity import NodeTemplate
from planner.errors import InputError
from planner.snapshot.fields import Bad, integer, mapping, number, sequence, string, string_map, taints
from planner.snapshot.quantity import QuantityError, parse_quantity

_KEYS = {"name", "cost", "per", "hosts", "topology", "labels", "taints", "allocatable", "max"}


def read_templates(path: str) -> tuple[NodeTemplate, ...]:
    """The templates in the YAML file at `path`."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", file=path) from None
    except yaml.YAMLError as error:
        raise InputError(f"not YAML: {error}", file=path) from None
    try:
        return parse_templates(data)
    except Bad as bad:
        raise InputError(bad.message, file=path, field=bad.field) from None


def parse_templates(data: Any) -> tuple[NodeTemplate, ...]:
    """Templates from loaded YAML; raises Bad(field, message)."""
    top = mapping(data, "spec")
    items = sequence(top.get("templates"), "templates")
    if not items:
        raise Bad("templates", "must list at least one node template")
    out: list[NodeTemplate] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        out.append(_template(mapping(item, f"templates[{i}]"), f"templates[{i}]", seen))
    return tuple(out)


def _template(raw: dict[str, Any], where: str, seen: set[str]) -> NodeTemplate:
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise Bad(f"{where}.{unknown[0]}", f"unknown field (expected one of {', '.join(sorted(_KEYS))})")
    name = string(raw.get("name"), f"{where}.name", required=True)
    assert name is not None
    if name in seen:
        raise Bad(f"{where}.name", f"duplicate template name {name!r}")
    seen.add(name)
    if raw.get("cost") is None:
        raise Bad(f"{where}.cost", "is required")
    cost = number(raw.get("cost"), f"{where}.cost")
    if not cost > 0:
        raise Bad(f"{where}.cost", f"must be above 0, got {cost}")
    per = string(raw.get("per"), f"{where}.per") or "node"
    if per not in ("node", "rack"):
        raise Bad(f"{where}.per", f"must be node or rack, got {per!r}")
    hosts = integer(raw.get("hosts"), f"{where}.hosts", default=1, minimum=1)
    if per == "node" and hosts != 1:
        raise Bad(f"{where}.hosts", "is for per: rack (a node template is one host)")
    topology = tuple(str(v) for v in sequence(raw.get("topology"), f"{where}.topology"))
    if per == "rack" and not topology:
        raise Bad(f"{where}.topology", "per: rack needs the topology labels its new racks get fresh values of")
    allocatable_raw = mapping(raw.get("allocatable"), f"{where}.allocatable")
    if not allocatable_raw:
        raise Bad(f"{where}.allocatable", "is required (e.g. {cpu: \"32\", memory: 256Gi})")
    amounts: dict[str, int] = {}
    for resource, value in allocatable_raw.items():
        try:
            amounts[str(resource)] = parse_quantity(value, str(resource))
        except QuantityError as error:
            raise Bad(f"{where}.allocatable.{resource}", str(error)) from None
    amounts.setdefault("pods", 110)
    return NodeTemplate(
        name=name, allocatable=Resources.of(amounts), cost=cost,
        labels=string_map(raw.get("labels"), f"{where}.labels"),
        taints=taints(raw.get("taints"), f"{where}.taints"),
        per=per, hosts=hosts, topology=topology,
        max_units=integer(raw.get("max"), f"{where}.max", default=1000, minimum=0),
    )
