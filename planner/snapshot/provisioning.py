"""ProvisioningRequest admission checks, read: Kueue's AdmissionChecks of the provisioning
controller with their ProvisioningRequestConfigs, the ProvisioningRequests Stowplan made
(`autoscaling.x-k8s.io/v1`), and the gate they put on pending work.

The gate (`gated`) is part of reading, as an unknown LocalQueue is: with the policy's
`spec.provisioning.enabled`, a pending workload whose ClusterQueue names such a check
waits until its own request for that check reports Provisioned=True. Without the policy
the checks are ignored, as before (one reported problem per queue). Pure: objects in,
models out.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from models import ClusterQueue, ObjectRef, Workload, WorkloadState
from models.provisioning import CONTROLLER_NAME, ProvisioningCheck, ProvisioningRequestState, newest_requests
from planner.k8s.fields import Bad, mapping, sequence, string
from planner.k8s.annotations import (
    PROVISIONING_ATTEMPT as ATTEMPT_LABEL, PROVISIONING_CHECK as CHECK_LABEL, PROVISIONING_MANAGED as
    MANAGED_LABEL, PROVISIONING_WORKLOAD as WORKLOAD_ANNOTATION,
)

# Stowplan's marks on what it makes (a request, its PodTemplates)
PROVISIONING_GROUP = "autoscaling.x-k8s.io"
CONFIG_KIND = "ProvisioningRequestConfig"
_ATTEMPT = re.compile(r"-([0-9]+)$")


def read_admission_checks(spec: dict[str, Any]) -> tuple[str, ...]:
    """A ClusterQueue's admission checks: v1beta2 `spec.admissionChecksStrategy.admissionChecks[].name`,
    v1beta1 `spec.admissionChecks` (names). `onFlavors` is not read: a check applies to every flavor."""
    names: list[str] = []
    strategy = mapping(spec.get("admissionChecksStrategy"), "spec.admissionChecksStrategy")
    for i, rule in enumerate(sequence(strategy.get("admissionChecks"), "spec.admissionChecksStrategy.admissionChecks")):
        where = f"spec.admissionChecksStrategy.admissionChecks[{i}]"
        name = string(mapping(rule, where).get("name"), f"{where}.name", required=True)
        if name and name not in names:
            names.append(name)
    for i, value in enumerate(sequence(spec.get("admissionChecks"), "spec.admissionChecks")):
        name = string(value, f"spec.admissionChecks[{i}]", required=True)
        if name and name not in names:
            names.append(name)
    return tuple(names)


def read_checks(checks: Sequence[tuple[str, dict[str, Any]]],
                configs: Mapping[str, dict[str, Any]]) -> dict[str, ProvisioningCheck]:
    """The provisioning controller's AdmissionChecks (name, spec), each with its config's class
    and parameters; others (MultiKueue's, a custom controller's) are left out. Raises Bad."""
    out: dict[str, ProvisioningCheck] = {}
    for name, spec in checks:
        if string(spec.get("controllerName"), "spec.controllerName") != CONTROLLER_NAME:
            continue
        params = mapping(spec.get("parameters"), "spec.parameters")
        kind = string(params.get("kind"), "spec.parameters.kind")
        config = string(params.get("name"), "spec.parameters.name") or ""
        if kind != CONFIG_KIND or not config:
            out[name] = ProvisioningCheck(name, config=config, problem=(
                f"AdmissionCheck {name}: spec.parameters must name a {CONFIG_KIND}"))
            continue
        config_spec = configs.get(config)
        if config_spec is None:
            out[name] = ProvisioningCheck(name, config=config,
                                          problem=f"AdmissionCheck {name}: {CONFIG_KIND} {config} not found")
            continue
        class_name = string(config_spec.get("provisioningClassName"), "spec.provisioningClassName") or ""
        parameters = {str(k): str(v) for k, v in mapping(config_spec.get("parameters"), "spec.parameters").items()}
        out[name] = ProvisioningCheck(name, class_name, parameters, config,
                                      "" if class_name else f"{CONFIG_KIND} {config} has no provisioningClassName")
    return out


def read_request(namespace: str, name: str, metadata: dict[str, Any], obj: dict[str, Any]) -> ProvisioningRequestState | None:
    """A ProvisioningRequest Stowplan made (labelled stowplan.io/managed), or None for others. Raises Bad."""
    labels = metadata.get("labels") or {}
    if type(labels) is not dict or labels.get(MANAGED_LABEL) != "true":
        return None
    annotations = metadata.get("annotations") or {}
    owner = annotations.get(WORKLOAD_ANNOTATION) if type(annotations) is dict else None
    parts = owner.split("/") if type(owner) is str else []
    if len(parts) != 3 or not all(parts):
        raise Bad(f"metadata.annotations.{WORKLOAD_ANNOTATION}", f"must be KIND/NAMESPACE/NAME, got {owner!r}")
    check = labels.get(CHECK_LABEL)
    if type(check) is not str or not check:
        raise Bad(f"metadata.labels.{CHECK_LABEL}", "is missing")
    label = labels.get(ATTEMPT_LABEL)
    found = _ATTEMPT.search(name)
    if type(label) is str and label.isdigit() and 0 < len(label) <= 6:
        attempt = int(label)
    else:
        attempt = int(found.group(1)[-6:]) if found else 1
    status = mapping(obj.get("status"), "status")
    true = frozenset(str(c.get("type")) for c in sequence(status.get("conditions"), "status.conditions")
                     if type(c) is dict and c.get("status") == "True")
    spec = mapping(obj.get("spec"), "spec")
    templates = tuple(str(mapping(mapping(p, "spec.podSets[]").get("podTemplateRef"), "podTemplateRef").get("name", ""))
                      for p in sequence(spec.get("podSets"), "spec.podSets"))
    return ProvisioningRequestState(namespace, name, ObjectRef(parts[0], parts[1], parts[2]), check, attempt,
                                    true, tuple(t for t in templates if t))


def provisioning_checks_of(queue: ClusterQueue | None, checks: Mapping[str, ProvisioningCheck]) -> tuple[ProvisioningCheck, ...]:
    if queue is None:
        return ()
    return tuple(checks[n] for n in queue.admission_checks if n in checks)


def gated(workloads: Sequence[Workload], queues: Mapping[str, ClusterQueue], checks: Mapping[str, ProvisioningCheck],
          requests: Sequence[ProvisioningRequestState]) -> dict[ObjectRef, str]:
    """Pending workloads held back by a provisioning check, and why: no request yet, or one
    not (or no longer) Provisioned. Running workloads are never gated."""
    latest = newest_requests(requests)
    out: dict[ObjectRef, str] = {}
    for w in workloads:
        if w.state != WorkloadState.PENDING:
            continue
        for check in provisioning_checks_of(queues.get(w.cluster_queue or ""), checks):
            if check.problem:
                out[w.ref] = f"admission check {check.name} is inactive: {check.problem}"
                break
            request = latest.get((w.ref, check.name))
            if request is None:
                out[w.ref] = f"waits for a ProvisioningRequest (admission check {check.name})"
                break
            if not request.provisioned:
                said = ", ".join(sorted(request.true_conditions)) or "no condition yet"
                out[w.ref] = (f"waits for ProvisioningRequest {request.namespace}/{request.name} to report "
                              f"Provisioned=True ({said})")
                break
    return out
