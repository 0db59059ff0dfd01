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

A bad file raises InputError naming the file and the field (exit 2). The file is read
as snapshots are (a regular file only, bounded in size and alias expansion, a key given
twice refused: the last template would silently win), and what it may buy is bounded:
`hosts` at most MAX_HOSTS, `max` at most MAX_UNITS, and the nodes all templates could
add together at most MAX_NODES (what the planner could ever place on).
"""

from __future__ import annotations

from typing import Any

from models import Resources
from models.capacity import NodeTemplate
from planner.base.errors import InputError
from planner.snapshot import loader
from planner.k8s.fields import Bad, integer, mapping, number, sequence, string, string_map, taints
from planner.k8s.quantity import QuantityError, parse_quantity

MAX_HOSTS = 16_384        # nodes in one rack or block unit
MAX_UNITS = 100_000       # units of one template (`max`)
MAX_NODES = 262_144       # nodes all templates may add together (4 x the XL benchmark)
MAX_TEMPLATES = 1_000

_KEYS = {"name", "cost", "per", "hosts", "topology", "labels", "taints", "allocatable", "max"}


def read_templates(path: str) -> tuple[NodeTemplate, ...]:
    """The templates in the YAML file at `path`."""
    data = loader.read_document(path, "a capacity spec (--add-nodes)")
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
    if len(items) > MAX_TEMPLATES:
        raise Bad("templates", f"lists {len(items):,} templates, more than {MAX_TEMPLATES:,}")
    out: list[NodeTemplate] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        out.append(_template(mapping(item, f"templates[{i}]"), f"templates[{i}]", seen))
    total = sum(t.hosts * t.max_units for t in out)
    if total > MAX_NODES:
        raise Bad("templates", f"could add {total:,} nodes (hosts x max, summed), more than {MAX_NODES:,}: "
                               "lower max or hosts")
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
    if hosts > MAX_HOSTS:
        raise Bad(f"{where}.hosts", f"{hosts:,} nodes in one unit is more than {MAX_HOSTS:,}")
    if per == "node" and hosts != 1:
        raise Bad(f"{where}.hosts", "is for per: rack (a node template is one host)")
    topology = tuple(string(v, f"{where}.topology[{i}]", required=True) or ""
                     for i, v in enumerate(sequence(raw.get("topology"), f"{where}.topology")))
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
        max_units=_max_units(raw.get("max"), f"{where}.max"),
    )


def _max_units(value: object, field: str) -> int:
    units = integer(value, field, default=1000, minimum=0)
    if units > MAX_UNITS:
        raise Bad(field, f"{units:,} units is more than {MAX_UNITS:,}")
    return units
