"""In-house workload kinds without code: an adapter built from the policy's spec.customKinds.

Each entry names a custom resource (apiVersion, kind), the dotted path of its suspend
field, and its pod templates, each with the dotted path of its pod count and the
pod-set name it becomes:

    customKinds:
    - apiVersion: example.com/v1
      kind: TrainingRun
      suspendPath: spec.suspend
      podSets:
      - {name: driver, templatePath: spec.driver.template, countPath: spec.driver.replicas}
      - {name: workers, templatePath: spec.workers.template, countPath: spec.workers.replicas}

Such an object is read, planned and written like a Job: suspended while it waits,
admitted by writing each template's scheduling fields and unsuspending, evicted by
suspending again. Its pods point back to it by a controller owner reference to the
object and the label kueue.x-k8s.io/podset (the pod set's name), which admission writes
into each template as Kueue does; a pod made by an intermediate object is not seen.
A path that does not resolve on an object is a reported problem naming the object and
field (the workload waits). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from models import CustomKind, CustomPodSet, ObjectRef
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.k8s.fields import Bad, shown, type_name
from planner.k8s.annotations import PODSET_LABEL

BUCKET = "custom:"                         # the snapshot reader's buckets of custom kinds: never a built-in's

_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_PLURAL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_POD_SET = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SEGMENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")
MAX_PATH_KEYS = 32          # keys in a dotted path: a pod template lies a few levels down, never hundreds
MAX_KEY_LENGTH = 253        # one key of a path (a field name; Kubernetes' longest names are 253)
MAX_POD_SETS = 8            # Kueue's Workload holds at most 8 pod sets (its CRD's maxItems)
MAX_CUSTOM_KINDS = 100      # each kind is listed, watched and granted RBAC on its own
_KEYS = {"apiVersion", "kind", "plural", "suspendPath", "podSets"}
_POD_SET_KEYS = {"name", "templatePath", "countPath"}


def guessed_plural(kind: str) -> str:
    """The resource name Kubernetes guesses for a kind (apimachinery's UnsafeGuessKindToResource)."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def _path(value: object, field: str, root: str | None = None) -> tuple[str, ...]:
    if type(value) is not str or not value:
        raise Bad(field, f"must be a dotted field path such as spec.suspend, got {shown(value)}")
    if value.count(".") >= MAX_PATH_KEYS:
        raise Bad(field, f"has {value.count('.') + 1:,} keys, more than the limit of {MAX_PATH_KEYS}")
    keys = tuple(value.split("."))
    if any(len(k) > MAX_KEY_LENGTH for k in keys):
        raise Bad(field, f"has a key longer than the limit of {MAX_KEY_LENGTH} characters")
    bad = next((k for k in keys if not _SEGMENT.match(k)), None)
    if bad is not None:
        raise Bad(field, f"{value!r} is not a dotted field path (segment {bad!r}); list indexes are not supported")
    if root is not None and (keys[0] != root or len(keys) < 2):
        raise Bad(field, f"must lie under {root}. (pod templates and counts are in the object's {root}), "
                         f"got {value!r}")
    return keys


def _keys(entry: Mapping[str, Any], known: set[str], field: str) -> None:
    unknown = sorted(set(entry) - known)
    if unknown:
        raise Bad(f"{field}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(known))})")


def _pod_set(entry: object, field: str) -> CustomPodSet:
    if type(entry) is not dict:
        raise Bad(field, f"must be a mapping, got {type_name(entry)}")
    _keys(entry, _POD_SET_KEYS, field)
    name = entry.get("name")
    if type(name) is not str or not _POD_SET.match(name) or len(name) > 63:
        raise Bad(f"{field}.name", f"must be a DNS label (lower-case letters, digits, '-'), got {shown(name)}")
    return CustomPodSet(name, _path(entry.get("templatePath"), f"{field}.templatePath", "spec"),
                        _path(entry.get("countPath"), f"{field}.countPath", "spec"))


def _custom_kind(entry: object, field: str, reserved: set[str]) -> CustomKind:
    if type(entry) is not dict:
        raise Bad(field, f"must be a mapping, got {type_name(entry)}")
    _keys(entry, _KEYS, field)
    api_version = entry.get("apiVersion")
    group, _, version = api_version.partition("/") if type(api_version) is str else ("", "", "")
    if not _GROUP.match(group) or not _VERSION.match(version):
        raise Bad(f"{field}.apiVersion", f"must be GROUP/VERSION of a custom resource (a group with a dot, "
                                         f"a version such as v1 or v1beta2), got {shown(api_version)}")
    kind = entry.get("kind")
    if type(kind) is not str or not _KIND.match(kind):
        raise Bad(f"{field}.kind", f"must be a kind name (CamelCase, a capital first), got {shown(kind)}")
    if kind in reserved:
        raise Bad(f"{field}.kind", f"{kind} is a kind Stowplan already reads; a custom kind needs its own name")
    plural = entry.get("plural", guessed_plural(kind))
    if type(plural) is not str or not _PLURAL.match(plural):
        raise Bad(f"{field}.plural", f"must be the resource's plural name (lower case), got {shown(plural)}")
    pod_sets = entry.get("podSets")
    if type(pod_sets) is not list or not pod_sets:
        raise Bad(f"{field}.podSets", f"must be a non-empty list of {{name, templatePath, countPath}}, "
                                      f"got {shown(pod_sets)}")
    if len(pod_sets) > MAX_POD_SETS:
        raise Bad(f"{field}.podSets", f"has {len(pod_sets):,} pod sets, more than Kueue's limit of {MAX_POD_SETS} "
                                      f"a workload")
    sets = tuple(_pod_set(p, f"{field}.podSets[{i}]") for i, p in enumerate(pod_sets))
    names = [s.name for s in sets]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise Bad(f"{field}.podSets[{i}].name", f"pod set {name} is named twice")
    return CustomKind(group, version, kind, plural, _path(entry.get("suspendPath"), f"{field}.suspendPath"), sets)


def parse_custom_kinds(value: object, field: str, reserved: Iterable[str]) -> tuple[CustomKind, ...]:
    """spec.customKinds, strictly: Bad names the field of the first fault. `reserved`: the
    kinds Stowplan already reads (a custom kind may not take one's name)."""
    if type(value) is not list:
        raise Bad(field, f"must be a list, got {type_name(value)}")
    if len(value) > MAX_CUSTOM_KINDS:
        raise Bad(field, f"declares {len(value):,} kinds, more than the limit of {MAX_CUSTOM_KINDS}")
    taken = set(reserved)
    out: list[CustomKind] = []
    for i, entry in enumerate(value):
        kind = _custom_kind(entry, f"{field}[{i}]", taken)
        if any(k.kind == kind.kind for k in out):
            raise Bad(f"{field}[{i}].kind", f"kind {kind.kind} is declared twice")
        out.append(kind)
    return tuple(out)


def _at(root: Mapping[str, Any], path: Sequence[str]) -> object:
    """The value at `path` in `root`; Bad when a step is missing or not a mapping."""
    node: object = root
    for depth, key in enumerate(path):
        if type(node) is not dict or key not in node:
            where = ".".join(path[:depth]) or "the object"
            got = "absent" if type(node) is dict else type_name(node)
            raise Bad(".".join(path), f"does not resolve on this object ({where} has no {key!r}: {got})")
        node = node[key]
    return node


def _template(root: Mapping[str, Any], path: Sequence[str]) -> dict[str, Any]:
    value = _at(root, path)
    if type(value) is not dict:
        raise Bad(".".join(path), f"must be a pod template (a mapping), got {type_name(value)}")
    return value


def _count(root: Mapping[str, Any], path: Sequence[str]) -> int:
    value = _at(root, path)
    if type(value) is not int or value < 0:
        raise Bad(".".join(path), f"must be a pod count (an integer, 0 or more), got {shown(value)}")
    return value


class CustomAdapter(Adapter):
    """An Adapter from a CustomKind: the Job adapter's behaviour at the paths the policy names."""

    pod_selector = PODSET_LABEL
    owner_label = PODSET_LABEL

    def __init__(self, spec: CustomKind):
        self.spec = spec
        self.group, self.version, self.kind, self.plural = spec.group, spec.version, spec.kind, spec.plural
        self.suspend_path = spec.suspend_path

    @property
    def bucket(self) -> str:
        return BUCKET + self.kind

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        root = {"spec": spec}   # every template and count path lies under spec (checked when parsed)
        out = []
        for pod_set in self.spec.pod_sets:
            empty: dict[str, Any] = {}
            template = attempt(_template, root, pod_set.template_path, default=empty)
            count = attempt(_count, root, pod_set.count_path, default=1)
            out.append(PodSetSource(pod_set.name, count, template, ".".join(pod_set.template_path)))
        return out

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        owners = metadata.get("ownerReferences")
        pod_set = labels.get(PODSET_LABEL)
        names = {p.name for p in self.spec.pod_sets}
        if type(owners) is not list or pod_set not in names:
            return None
        for owner in owners:
            if type(owner) is dict and owner.get("kind") == self.kind and type(owner.get("name")) is str \
                    and str(owner.get("apiVersion", "")).startswith(self.group + "/"):
                return ObjectRef(self.kind, namespace, owner["name"]), str(pod_set)
        return None

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out = {}
        for pod_set in self.spec.pod_sets:
            try:
                out[pod_set.name] = _template(obj, pod_set.template_path)
            except Bad:
                continue   # a template the object lacks: admission says so (write_admission)
        return out

    def write_admission(self, obj: dict[str, Any], specs: Mapping[str, Mapping[str, Any]]) -> str | None:
        """As a Job's, and each template labelled with its pod set (Kueue's kueue.x-k8s.io/podset),
        so the pods the kind's controller makes name the pod set they belong to."""
        why = super().write_admission(obj, specs)
        if why is not None:
            return why
        for name, template in self.templates(obj).items():
            metadata = template.get("metadata")
            if not isinstance(metadata, dict):
                metadata = template["metadata"] = {}
            labels = metadata.get("labels")
            if not isinstance(labels, dict):
                labels = metadata["labels"] = {}
            labels[PODSET_LABEL] = name
        return None


def adapters_for(kinds: Iterable[CustomKind]) -> tuple[CustomAdapter, ...]:
    return tuple(CustomAdapter(k) for k in kinds)


def role_rules(kinds: Sequence[CustomKind]) -> list[dict[str, Any]]:
    """The ClusterRole rules a cycle needs for these kinds, as cronjob/rbac.yaml grants the
    built-in ones: list to read, get and update (a PUT with the resourceVersion read) to
    admit and evict. One rule per API group, resources sorted: the same kinds print the same rules."""
    by_group: dict[str, set[str]] = {}
    for kind in kinds:
        by_group.setdefault(kind.group, set()).add(kind.plural)
    return [{"apiGroups": [group], "resources": sorted(plurals), "verbs": ["get", "list", "update"]}
            for group, plurals in sorted(by_group.items())]


__all__ = ["CustomAdapter", "PODSET_LABEL", "adapters_for", "guessed_plural", "parse_custom_kinds", "role_rules"]
