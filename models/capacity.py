"""Node templates for the capacity what-if: the nodes a cluster could add, with a cost each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from models.objects import Taint
from models.resources import Resources


@dataclass(frozen=True)
class NodeTemplate:
    """One kind of unit to add: a node (`per == "node"`, one host) or a whole rack or
    block (`per == "rack"`, `hosts` nodes that share fresh values of `topology` labels).

    Every unit added gets fresh values of the `topology` labels (the template's name
    and the unit's number), so a rack template adds new racks, never hosts in old ones.
    """

    name: str
    allocatable: Resources
    cost: float
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    per: str = "node"                    # node | rack
    hosts: int = 1                       # nodes per unit
    topology: tuple[str, ...] = ()       # labels given a fresh value per unit
    max_units: int = 1000
