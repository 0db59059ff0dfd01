"""Live snapshot: every kind of REFERENCE section 2, listed from the API server.

The objects are listed page by page as raw JSON, their `managedFields` dropped
(bookkeeping the planner never reads), and gathered into one `kind: List` with a
`stowplan.io/snapshot-time` annotation. What `stowplan snapshot` writes to a file is
that List `pruned` of everything else planning never reads and a snapshot file need
not carry (containers' env, commands and probes, annotations other than Stowplan's and
Kueue's): a snapshot is shared, and should not leak a Secret someone put in an env. That List goes through the file reader's
own conversion (`planner.snapshot.build_snapshot`), so a live cycle and
`stowplan what-if` on the file `stowplan snapshot` writes plan the same objects the
same way. Kueue's objects come from the cluster when its API group is served
(v1beta2, else v1beta1); otherwise from `--config` files. Reading never writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Sequence

from models import Snapshot
from planner import kinds
from planner.cluster.kube import ApiStatus, Kube, path_of
from planner.k8s.annotations import KUEUE_PREFIX, SNAPSHOT_SOURCE, SNAPSHOT_TIME, STOWPLAN_PREFIX

KUEUE_CONFIG_NAMESPACE = "kueue-system"     # planner.snapshot.kueue_config reads it
KUEUE_CONFIG_NAME = "kueue-manager-config"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
KUEUE_PLURALS = ("resourceflavors", "topologies", "cohorts", "clusterqueues", "localqueues",
                 "workloadpriorityclasses", "admissionchecks", "provisioningrequestconfigs")
KUEUE_KINDS = ("ResourceFlavor", "Topology", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass",
               "AdmissionCheck", "ProvisioningRequestConfig")
# The cluster autoscaler's ProvisioningRequests (planner/snapshot/provisioning.py), when served
PROVISIONING_GROUP, PROVISIONING_VERSION = "autoscaling.x-k8s.io", "v1"
# (apiVersion, plural) always listed, then the built-in workload kinds (Jobs), then pods;
# Kueue's and the other workload kinds' (planner.kinds) depend on discovery
CORE_KINDS = (("v1", "namespaces"), ("v1", "nodes"), ("scheduling.k8s.io/v1", "priorityclasses"))


@dataclasses.dataclass
class LiveSnapshot:
    """What one live read produced: the List document, its JSON bytes, and the Snapshot."""

    document: dict[str, Any]
    data: bytes                      # the List as JSON: what `snapshot -o FILE.json` writes
    snapshot: Snapshot
    kueue_version: str | None        # None: Kueue's objects came from --config
    counts: dict[str, int]
    seconds: float


def served_version(kube: Kube, group: str, wanted: Sequence[str]) -> str | None:
    """The first of `wanted` that the API server serves for `group`, or None."""
    info = kube.get_or_none(f"/apis/{group}")
    if not info:
        return None
    served = {v.get("version") for v in info.get("versions") or ()}
    return next((v for v in wanted if v in served), None)


def list_objects(kube: Kube, *, config_objects: Iterable[dict[str, Any]] = (),
                 say: Callable[[str], None] = lambda _: None) -> tuple[list[dict[str, Any]], str | None, dict[str, int]]:
    """All objects a snapshot needs, in a fixed order; plus the Kueue version used and counts per kind."""
    items: list[dict[str, Any]] = []
    counts: dict[str, int] = {}

    def collect(api_version: str, plural: str) -> None:
        started = time.monotonic()
        n = 0
        try:
            for obj in kube.list(path_of(api_version, plural)):
                metadata = obj.get("metadata")
                if isinstance(metadata, dict):
                    metadata.pop("managedFields", None)
                items.append(obj)
                n += 1
        except ApiStatus as err:
            if err.status == 404:     # a resource this version of the API does not serve
                return
            raise
        counts[plural] = n
        if n >= PROGRESS_AT:
            say(f"listed {n} {plural} in {time.monotonic() - started:.2f}s")

    kueue = served_version(kube, KUEUE_GROUP, KUEUE_VERSIONS)
    if kueue:
        for plural in KUEUE_PLURALS:
            collect(f"{KUEUE_GROUP}/{kueue}", plural)
    else:
        say("Kueue's API is not served: quota objects come from --config")
    configuration = kueue_configuration(kube, say)
    if configuration is not None:
        items.append(configuration)
        counts["configmaps"] = 1
    for obj in config_objects:
        if configuration is not None and _is_kueue_configuration(obj):
            continue           # the cluster's own Configuration wins
        if obj.get("kind") in KUEUE_KINDS and str(obj.get("apiVersion", "")).startswith(KUEUE_GROUP + "/"):
            if kueue:
                continue       # the cluster's own objects win
            items.append(obj)
            counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
        else:
            items.append(obj)  # PlannerPolicy
    builtin = [(a.api_version, a.plural) for a in kinds.ADAPTERS if a.builtin]
    for api_version, plural in CORE_KINDS + tuple(builtin) + (("v1", "pods"),):
        collect(api_version, plural)
    if served_version(kube, PROVISIONING_GROUP, (PROVISIONING_VERSION,)):
        collect(f"{PROVISIONING_GROUP}/{PROVISIONING_VERSION}", "provisioningrequests")
    listed = set(builtin)
    for adapter in kinds.adapters():
        wanted = [(adapter.group, adapter.version, adapter.plural)] if not adapter.builtin else []
        wanted += [(group, version, plural) for group, version, _, plural, _ in adapter.needs]
        for group, version, plural in wanted:
            api_version = f"{group}/{version}"
            if (api_version, plural) not in listed and served_version(kube, group, (version,)):
                listed.add((api_version, plural))
                collect(api_version, plural)
            elif adapter in kinds.custom_kinds():
                say(f"custom kind {adapter.kind} ({api_version}) is not served by this cluster: none read")
    return items, kueue, counts


PROGRESS_AT = 1000
KUEUE_CONFIG_PATH = path_of("v1", "configmaps", KUEUE_CONFIG_NAMESPACE, KUEUE_CONFIG_NAME)


def kueue_configuration(kube: Kube, say: Callable[[str], None]) -> dict[str, Any] | None:
    """Kueue's Configuration ConfigMap (kueue-system/kueue-manager-config), or None when the
    cluster has none. The planner's RBAC gets exactly this one object; without that right
    (an older install) the cycle goes on with Kueue's defaults and says so."""
    try:
        obj = kube.get_or_none(KUEUE_CONFIG_PATH)
    except ApiStatus as err:
        if err.status != 403:
            raise
        say(f"may not read ConfigMap {KUEUE_CONFIG_NAMESPACE}/{KUEUE_CONFIG_NAME} (Kueue's Configuration): "
            "planning with Kueue's defaults (fair sharing off); grant get on it (cronjob/rbac.yaml)")
        return None
    if not isinstance(obj, dict):
        return None
    obj.setdefault("apiVersion", "v1")
    obj.setdefault("kind", "ConfigMap")
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


def _is_kueue_configuration(obj: dict[str, Any]) -> bool:
    metadata = obj.get("metadata")
    return (obj.get("kind") == "ConfigMap" and isinstance(metadata, dict)
            and metadata.get("namespace") == KUEUE_CONFIG_NAMESPACE and metadata.get("name") == KUEUE_CONFIG_NAME)

# What `pruned` keeps: the annotations Stowplan reads (its own, and Kueue's on Jobs and pod
# templates) and of each container what the effective request and a person need.
KEPT_ANNOTATIONS = (STOWPLAN_PREFIX, KUEUE_PREFIX)
KEPT_CONTAINER_FIELDS = ("name", "image", "resources", "restartPolicy")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def pruned(document: dict[str, Any]) -> dict[str, Any]:
    """The List without what planning never reads (see the module's docstring); a new
    document sharing every part it leaves alone, so the live one is unchanged."""
    return {**document, "items": [_pruned_object(obj) for obj in document.get("items") or ()]}


def _pruned_metadata(metadata: Any) -> Any:
    if not isinstance(metadata, dict):
        return metadata
    out = {k: v for k, v in metadata.items() if k != "managedFields"}
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict):
        kept = {k: v for k, v in annotations.items() if isinstance(k, str) and k.startswith(KEPT_ANNOTATIONS)}
        if kept:
            out["annotations"] = kept
        else:
            out.pop("annotations", None)
    return out


def _pruned_pod_spec(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = dict(spec)
    for key in CONTAINER_LISTS:
        containers = spec.get(key)
        if isinstance(containers, list):
            out[key] = [{k: v for k, v in c.items() if k in KEPT_CONTAINER_FIELDS} if isinstance(c, dict) else c
                        for c in containers]
    return out


def _with(mapping: dict[str, Any], key: str, change: Any) -> dict[str, Any]:
    """`mapping` with `change` applied to its `key`, if it has one (a copy; the original is left alone)."""
    if key not in mapping:
        return mapping
    return {**mapping, key: change(mapping[key])}


def _pruned_template(template: Any) -> Any:
    if not isinstance(template, dict):
        return template
    return _with(_with(template, "metadata", _pruned_metadata), "spec", _pruned_pod_spec)


# Fields that hold programs, their arguments and environments wherever a kind puts them
# (a RayJob's entrypoint and runtimeEnvYAML, a Ray group's rayStartParams with a redis
# password, env and args outside the pod templates): planning never reads them, so a
# snapshot never keeps them, at any depth of any kind's spec.
SECRET_FIELDS = frozenset({"entrypoint", "runtimeEnvYAML", "rayStartParams", "env", "envFrom", "args", "command",
                           "jobSubmitterPodTemplateEnv"})


def _without_secret_fields(value: Any) -> Any:
    """`value` copied without SECRET_FIELDS at any depth (iteratively: depth costs no stack)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, key = stack.pop()
        if isinstance(item, dict):
            copy: Any = {}
            for k, v in item.items():
                if k not in SECRET_FIELDS:
                    copy[k] = None
                    stack.append((v, copy, k))
        elif isinstance(item, list):
            copy = [None] * len(item)
            stack.extend((v, copy, i) for i, v in enumerate(item))
        else:
            copy = item
        parent[key] = copy
    return root[0]


def _pruned_object(obj: Any) -> Any:
    pruned = _pruned_kind(obj)
    if isinstance(pruned, dict) and isinstance(pruned.get("spec"), dict):
        return {**pruned, "spec": _without_secret_fields(pruned["spec"])}
    return pruned


def _pruned_kind(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = _with(obj, "metadata", _pruned_metadata)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return out
    if obj.get("kind") == "Pod":
        return {**out, "spec": _pruned_pod_spec(spec)}
    adapter = kinds.by_kind(obj.get("kind"))
    if adapter is not None:
        return adapter.prune(out, _pruned_template, _pruned_metadata)
    needing = kinds.needing(obj.get("kind"))
    if needing is not None:
        return needing.prune_needed(out, _pruned_template, _pruned_metadata)
    return out


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def use_policy_kinds(policy_file: str | None, config: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Put the policy's custom kinds (spec.customKinds) in force before listing, so their
    objects are listed too; the snapshot's own read of the same policy sets them again."""
    from planner.kinds.custom import adapters_for
    from planner.snapshot import policy as policy_mod

    policy = (policy_mod.read_policy_file(policy_file) if policy_file is not None
              else policy_mod.policy_from([(f, o) for f, o in config if policy_mod.is_policy(o)]))
    kinds.use_custom(adapters_for(policy.custom_kinds))


def read_cluster(kube: Kube, *, config_files: Sequence[str] = (), policy_file: str | None = None,
                 now: float | None = None, say: Callable[[str], None] = lambda _: None) -> LiveSnapshot:
    """List the cluster into a models.Snapshot (and the List document it was made from).

    `now` defaults to the clock, in whole seconds, so the snapshot-time annotation
    written with the List gives `what-if` exactly the planning time of the live cycle.
    """
    from planner.snapshot import build_snapshot
    from planner.snapshot.loader import load

    started = time.monotonic()
    stamp = float(math.floor(time.time() if now is None else now))
    loaded = load(list(config_files)).objects if config_files else []
    config_objects = [obj for _, obj in loaded]
    use_policy_kinds(policy_file, loaded)
    items, kueue, counts = list_objects(kube, config_objects=config_objects, say=say)
    document = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"annotations": {SNAPSHOT_TIME: rfc3339(stamp), SNAPSHOT_SOURCE: kube.host}},
        "items": items,
    }
    data = (json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    snapshot = build_snapshot([document], source=f"cluster {kube.host}", digest=digest,
                              policy_file=policy_file, now=stamp)
    return LiveSnapshot(document, data, snapshot, kueue, counts, time.monotonic() - started)
