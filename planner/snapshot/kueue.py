"""Kueue's objects (v1beta2, and v1beta1 where the fields are the same) -> models.

Each reader takes one decoded object and returns the model, raising `Bad` for the
first wrong field; it never looks at other objects. Cross-object checks (missing
flavors, cohort cycles, queues pointing nowhere) are the reader's (reader.py).
"""

from __future__ import annotations

from typing import Any

from models import (
    HOSTNAME_LABEL, ClusterQueue, Cohort, FlavorQuotas, LocalQueue, PreemptionPolicy, Quota, ResourceFlavor,
    ResourceGroup, Topology,
)
from planner.k8s.fields import (
    Bad, integer, mapping, required, sequence, string, string_map, taints, tolerations,
)
from planner.snapshot.kueue_config import parse_weight
from planner.snapshot.provisioning import read_admission_checks
from planner.k8s.quantity import QuantityError, parse_quantity

ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")

WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM = ("Never", "LowerPriority", "Any")
BORROW = ("Never", "LowerPriority")
STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
# v1beta1 spelled the "stop searching" choice Borrow / Preempt; v1beta2 says MayStopSearch.
WHEN_CAN_BORROW = {"MayStopSearch": "MayStopSearch", "Borrow": "MayStopSearch", "TryNextFlavor": "TryNextFlavor"}
WHEN_CAN_PREEMPT = {"MayStopSearch": "MayStopSearch", "Preempt": "MayStopSearch", "TryNextFlavor": "TryNextFlavor"}


def _choice(value: object, field: str, allowed: tuple[str, ...] | dict[str, str], default: str) -> str:
    text = string(value, field)
    if text is None:
        return default
    if text not in allowed:
        raise Bad(field, f"must be one of {', '.join(allowed)}, got {text!r}")
    return allowed[text] if isinstance(allowed, dict) else text


def read_flavor(name: str, spec: dict[str, Any]) -> ResourceFlavor:
    return ResourceFlavor(
        name=name,
        node_labels=string_map(spec.get("nodeLabels"), "spec.nodeLabels"),
        node_taints=taints(spec.get("nodeTaints"), "spec.nodeTaints"),
        tolerations=tolerations(spec.get("tolerations"), "spec.tolerations"),
        topology_name=string(spec.get("topologyName"), "spec.topologyName"),
    )


def read_topology(name: str, spec: dict[str, Any]) -> Topology:
    levels: list[str] = []
    items = sequence(spec.get("levels"), "spec.levels")
    if not items:
        raise Bad("spec.levels", "must list at least one level")
    for i, item in enumerate(items):
        label = required(mapping(item, f"spec.levels[{i}]").get("nodeLabel"), f"spec.levels[{i}].nodeLabel")
        if label in levels:
            raise Bad(f"spec.levels[{i}].nodeLabel", f"{label!r} appears twice")
        levels.append(label)
    if HOSTNAME_LABEL in levels[:-1]:   # Kueue's CRD: "kubernetes.io/hostname can only be the last level"
        at = levels.index(HOSTNAME_LABEL)
        raise Bad(f"spec.levels[{at}].nodeLabel", f"{HOSTNAME_LABEL} must be the last level (Kueue refuses a "
                                                  "Topology with levels below the hostname)")
    if len(levels) > MAX_TOPOLOGY_LEVELS:
        raise Bad("spec.levels", f"has {len(levels)} levels, more than Kueue's {MAX_TOPOLOGY_LEVELS}")
    return Topology(name, tuple(levels))


MAX_TOPOLOGY_LEVELS = 16   # Kueue's CRD: maxItems 16


def _quantity(value: object, resource: str, field: str) -> int:
    try:
        return parse_quantity(value, resource)
    except QuantityError as err:
        raise Bad(field, str(err)) from None


def read_resource_groups(value: object, field: str = "spec.resourceGroups") -> tuple[ResourceGroup, ...]:
    """Kueue's resourceGroups, with the webhook's checks: a resource and a flavor in one
    group only, each flavor listing exactly the covered resources, lendingLimit <= nominal."""
    groups = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for gi, item in enumerate(sequence(value, field)):
        where = f"{field}[{gi}]"
        group = mapping(item, where)
        covered = []
        for ri, resource in enumerate(sequence(group.get("coveredResources"), f"{where}.coveredResources")):
            name = required(resource, f"{where}.coveredResources[{ri}]")
            if name in seen_resources:
                raise Bad(f"{where}.coveredResources[{ri}]", f"resource {name} is covered by more than one group")
            seen_resources.add(name)
            covered.append(name)
        if not covered:
            raise Bad(f"{where}.coveredResources", "must list at least one resource")
        flavors = []
        for fi, fitem in enumerate(sequence(group.get("flavors"), f"{where}.flavors")):
            fwhere = f"{where}.flavors[{fi}]"
            flavor = mapping(fitem, fwhere)
            fname = required(flavor.get("name"), f"{fwhere}.name")
            if fname in seen_flavors:
                raise Bad(f"{fwhere}.name", f"flavor {fname} is listed more than once")
            seen_flavors.add(fname)
            quotas: dict[str, Quota] = {}
            for qi, qitem in enumerate(sequence(flavor.get("resources"), f"{fwhere}.resources")):
                qwhere = f"{fwhere}.resources[{qi}]"
                quota = mapping(qitem, qwhere)
                resource = required(quota.get("name"), f"{qwhere}.name")
                if resource not in covered:
                    raise Bad(f"{qwhere}.name", f"resource {resource} is not in coveredResources {covered}")
                if resource in quotas:
                    raise Bad(f"{qwhere}.name", f"resource {resource} is listed twice")
                if quota.get("nominalQuota") is None:
                    raise Bad(f"{qwhere}.nominalQuota", "is required")
                nominal = _quantity(quota["nominalQuota"], resource, f"{qwhere}.nominalQuota")
                borrowing = lending = None
                if quota.get("borrowingLimit") is not None:
                    borrowing = _quantity(quota["borrowingLimit"], resource, f"{qwhere}.borrowingLimit")
                if quota.get("lendingLimit") is not None:
                    lending = _quantity(quota["lendingLimit"], resource, f"{qwhere}.lendingLimit")
                    if lending > nominal:
                        raise Bad(f"{qwhere}.lendingLimit",
                                  f"{quota['lendingLimit']} is more than nominalQuota {quota['nominalQuota']}")
                quotas[resource] = Quota(nominal, borrowing, lending)
            missing = [r for r in covered if r not in quotas]
            if missing:
                raise Bad(f"{fwhere}.resources", f"must give a quota for every covered resource; missing {missing}")
            flavors.append(FlavorQuotas(fname, quotas))
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def has_limits(groups: tuple[ResourceGroup, ...]) -> bool:
    return any(q.borrowing_limit is not None or q.lending_limit is not None
               for g in groups for f in g.flavors for q in f.resources.values())


def read_fair_weight(spec: dict[str, Any]) -> float:
    """spec.fairSharing.weight: 1 when absent (Kueue's default), 0 allowed."""
    weight = mapping(spec.get("fairSharing"), "spec.fairSharing").get("weight")
    return 1.0 if weight is None else parse_weight(weight, "spec.fairSharing.weight")


def read_cluster_queue(name: str, spec: dict[str, Any]) -> ClusterQueue:
    cohort = string(spec.get("cohortName"), "spec.cohortName") or string(spec.get("cohort"), "spec.cohort")
    selector = spec.get("namespaceSelector")
    if selector is not None:
        selector = mapping(selector, "spec.namespaceSelector")
        _check_selector(selector, "spec.namespaceSelector")
    preemption = mapping(spec.get("preemption"), "spec.preemption")
    borrow = mapping(preemption.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    fungibility = mapping(spec.get("flavorFungibility"), "spec.flavorFungibility")
    return ClusterQueue(
        name=name,
        resource_groups=read_resource_groups(spec.get("resourceGroups")),
        cohort=cohort,
        namespace_selector=selector,
        preemption=PreemptionPolicy(
            within_cluster_queue=_choice(preemption.get("withinClusterQueue"),
                                         "spec.preemption.withinClusterQueue", WITHIN_CQ, "Never"),
            reclaim_within_cohort=_choice(preemption.get("reclaimWithinCohort"),
                                          "spec.preemption.reclaimWithinCohort", RECLAIM, "Never"),
            borrow_within_cohort=_choice(borrow.get("policy"),
                                         "spec.preemption.borrowWithinCohort.policy", BORROW, "Never"),
            borrow_max_priority_threshold=integer(
                borrow.get("maxPriorityThreshold"), "spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
        ),
        queueing_strategy=_choice(spec.get("queueingStrategy"), "spec.queueingStrategy", STRATEGIES,
                                  "BestEffortFIFO"),
        when_can_borrow=_choice(fungibility.get("whenCanBorrow"), "spec.flavorFungibility.whenCanBorrow",
                                WHEN_CAN_BORROW, "MayStopSearch"),
        when_can_preempt=_choice(fungibility.get("whenCanPreempt"), "spec.flavorFungibility.whenCanPreempt",
                                 WHEN_CAN_PREEMPT, "TryNextFlavor"),
        fair_weight=read_fair_weight(spec),
        admission_mode=_choice(mapping(spec.get("admissionScope"), "spec.admissionScope").get("admissionMode"),
                               "spec.admissionScope.admissionMode", ADMISSION_MODES, "") or None,
        admission_checks=read_admission_checks(spec),
    )


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _check_selector(selector: dict[str, Any], field: str) -> None:
    """A LabelSelector Kubernetes would accept (LabelSelectorAsSelector's checks)."""
    for key in selector:
        if key not in ("matchLabels", "matchExpressions"):
            raise Bad(f"{field}.{key}", "unknown field (a label selector has matchLabels and matchExpressions)")
    string_map(selector.get("matchLabels"), f"{field}.matchLabels")
    for i, item in enumerate(sequence(selector.get("matchExpressions"), f"{field}.matchExpressions")):
        where = f"{field}.matchExpressions[{i}]"
        expr = mapping(item, where)
        required(expr.get("key"), f"{where}.key")
        op = required(expr.get("operator"), f"{where}.operator")
        if op not in _OPERATORS:
            raise Bad(f"{where}.operator", f"must be one of {', '.join(_OPERATORS)}, got {op!r}")
        values = sequence(expr.get("values"), f"{where}.values")
        if any(type(v) is not str for v in values):
            raise Bad(f"{where}.values", "must be a list of strings")
        if op in ("In", "NotIn") and not values:
            raise Bad(f"{where}.values", f"must not be empty for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise Bad(f"{where}.values", f"must be empty for operator {op}")


def read_cohort(name: str, spec: dict[str, Any]) -> Cohort:
    parent = string(spec.get("parentName"), "spec.parentName") or string(spec.get("parent"), "spec.parent")
    return Cohort(name=name, parent=parent, resource_groups=read_resource_groups(spec.get("resourceGroups")),
                  fair_weight=read_fair_weight(spec))


def read_local_queue(namespace: str, name: str, spec: dict[str, Any]) -> LocalQueue:
    cq = required(spec.get("clusterQueue"), "spec.clusterQueue")
    return LocalQueue(namespace, name, cq, fair_weight=read_fair_weight(spec))


def read_priority_value(obj: dict[str, Any]) -> int:
    """PriorityClass and WorkloadPriorityClass keep `value` at the top level."""
    value = obj.get("value")
    if value is None:
        raise Bad("value", "is required")
    result = integer(value, "value", default=0)   # not None here: the default is never taken
    if not -(2**31) <= result <= 2**31 - 1:
        raise Bad("value", f"{value} is outside the int32 range")
    return result
