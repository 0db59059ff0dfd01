"""Domain trees: which topology levels a flavor choice has, and each node's domain path.

A flavor tied to a Kueue Topology (topologyName) places pods through that
topology's levels; a flavor without one is a single level, the node. Nodes are
always the leaves: when a topology's last level is not the hostname, the node is
added below it, because Stowplan names the node of every pod.
"""

from __future__ import annotations

from typing import Iterable

from models import HOSTNAME_LABEL, Node, ResourceFlavor, Snapshot

Path = tuple[str, ...]


def levels_for(snapshot: Snapshot, flavors: Iterable[ResourceFlavor]) -> tuple[str, ...]:
    """The levels (coarse to fine, ending with the hostname) for a flavor choice."""
    for flavor in flavors:
        if flavor.topology_name and flavor.topology_name in snapshot.topologies:
            levels = tuple(snapshot.topologies[flavor.topology_name].levels)
            return levels if levels and levels[-1] == HOSTNAME_LABEL else levels + (HOSTNAME_LABEL,)
    return (HOSTNAME_LABEL,)


def node_path(node: Node, levels: tuple[str, ...]) -> Path | None:
    """Label values of `node` at each level; the hostname level is the node's name.

    None when the node lacks a level's label: it is then outside that topology.
    """
    values = []
    for level in levels:
        if level == HOSTNAME_LABEL:
            values.append(node.name)  # the leaf is the node itself, named as the API names it
        elif level in node.labels:
            values.append(node.labels[level])
        else:
            return None
    return tuple(values)


def level_index(levels: tuple[str, ...], level: str | None) -> int | None:
    """Position of `level` in `levels`, or None when the topology lacks it."""
    if level is None:
        return None
    try:
        return levels.index(level)
    except ValueError:
        return None
