"""LeaderWorkerSet groups, live: admitting and evicting one group of an LWS.

Several groups of one LeaderWorkerSet may be admitted in one cycle, each a write to
the same object: the writes to one LWS are serialised (a lock per object) and each
re-reads it, so a group's write never undoes another's. A write is refused when the
LWS changed since the plan in anything but what this cycle itself wrote. See
planner.kinds.leaderworkerset for what is written.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any, Callable, Mapping

from models import Admission, Eviction, ObjectRef, PodSetAssignment, ResourceFlavor
from planner.cluster.kube import ApiStatus, Kube, path_of
from planner.kinds import leaderworkerset as lws
from planner.k8s import annotations as keys
from planner.k8s.annotations import decode_entries
from planner.k8s.fields import Bad, is_decimal

ATTEMPTS = 3
KIND = lws.KIND


class Groups:
    """The LWS writes of one apply: (namespace, name) -> its lock and the resourceVersion last written."""

    def __init__(self, kube: Kube, planned: Mapping[ObjectRef, str]):
        self.kube, self.planned = kube, planned
        self.locks: dict[tuple[str, str], threading.Lock] = {}
        self.written: dict[tuple[str, str], str] = {}
        self.guard = threading.Lock()

    def lock(self, key: tuple[str, str]) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(key, threading.Lock())

    def path(self, namespace: str, name: str) -> str:
        return path_of(f"{lws.LeaderWorkerSetAdapter.group}/{lws.LeaderWorkerSetAdapter.version}",
                       lws.LeaderWorkerSetAdapter.plural, namespace, name)

    def changed(self, ref: ObjectRef, obj: Mapping[str, Any]) -> str | None:
        key = (ref.namespace, lws.split_ref(ref)[0])
        now = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        planned = self.planned.get(ref)
        if not planned or now in (planned, self.written.get(key)):
            return None
        return f"changed since the plan was made (resourceVersion {planned} -> {now})"

    def update(self, ref: ObjectRef, edit: Callable[[dict[str, Any]], str | None]) -> tuple[dict[str, Any] | None, str]:
        """Read the group's LWS, `edit` it (None: write it; "unchanged"; or why not), PUT it.

        Returns (the object written or read, "" | "unchanged" | why it was not written)."""
        name, _ = lws.split_ref(ref)
        key = (ref.namespace, name)
        with self.lock(key):
            for attempt in range(ATTEMPTS):
                obj = self.kube.get_or_none(self.path(ref.namespace, name))
                if obj is None:
                    return None, "it no longer exists"
                why = self.changed(ref, obj)
                if why:
                    return obj, why
                outcome = edit(obj)
                if outcome is not None:
                    return obj, outcome
                try:
                    written: dict[str, Any] = self.kube.write("PUT", self.path(ref.namespace, name), obj)
                except ApiStatus as err:
                    if err.status == 409 and attempt < ATTEMPTS - 1:
                        continue
                    if err.status in (404, 409):
                        return None, f"conflict: {err.detail}"
                    raise
                self.written[key] = str(written.get("metadata", {}).get("resourceVersion", ""))
                return written, ""
        return None, "conflict"


def union(entries: list[dict[str, Any]], name: str, flavors: Mapping[str, str]) -> PodSetAssignment | None:
    """Pod set `name` over every admitted group: all their nodes (the template is shared)."""
    per_node: dict[str, int] = {}
    for entry in entries:
        for ps in decode_entries(entry.get("podSets") or []):
            if ps.name == name:
                for node, count in ps.pods_per_node().items():
                    per_node[node] = per_node.get(node, 0) + count
    if not per_node:
        return None
    domains = tuple(((node,), count) for node, count in sorted(per_node.items()))
    levels = ("kubernetes.io/hostname",)
    return PodSetAssignment(name, sum(per_node.values()), flavors, levels, domains)


def common_labels(entries: list[dict[str, Any]], name: str, flavors: Mapping[str, ResourceFlavor]) -> dict[str, str]:
    """The node labels every admitted group's flavors of pod set `name` share (the template's selector)."""
    out: dict[str, str] | None = None
    for entry in entries:
        for ps in decode_entries(entry.get("podSets") or []):
            if ps.name != name:
                continue
            labels: dict[str, str] = {}
            for flavor in sorted(set(ps.flavors.values())):
                if flavor in flavors:
                    labels.update(flavors[flavor].node_labels)
            out = labels if out is None else {k: v for k, v in out.items() if labels.get(k) == v}
    return out or {}


def admit(groups: Groups, admission: Admission, flavors: Mapping[str, ResourceFlavor], wanted: str, now: str,
          original_of: Callable[[dict[str, Any]], dict[str, dict[str, Any]]],
          template_spec: Callable[[Mapping[str, Any], PodSetAssignment], dict[str, Any]],
          original_key: str) -> tuple[dict[str, Any] | None, str]:
    """Record the group's admission and rewrite the templates for every admitted group."""
    ref = admission.workload
    _, index = lws.split_ref(ref)
    adapter = lws.LeaderWorkerSetAdapter()

    def edit(obj: dict[str, Any]) -> str | None:
        annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
        try:
            admitted = lws.group_assignments(annotations)
        except Bad as bad:
            return f"{bad.field}: {bad.message}"
        podsets = json.loads(wanted)
        if str(index) in admitted:
            return "unchanged" if admitted[str(index)].get("podSets") == podsets else \
                "it is already running with another assignment"
        admitted[str(index)] = {"podSets": podsets, "admittedAt": now}
        original = original_of(obj)
        entries = [admitted[k] for k in sorted(admitted, key=int)]
        templates = adapter.templates(obj)
        for name, template in templates.items():
            mine = next((ps for ps in admission.pod_sets if ps.name == name), None)
            spread = union(entries, name, dict(mine.flavors) if mine else {})
            if spread is None:
                continue
            base = copy.deepcopy(original.get(name, {}))
            gates = [g for g in base.get("schedulingGates") or () if g.get("name") not in lws.HOLD_GATES]
            base["schedulingGates"] = gates
            fields = template_spec(base, spread)
            selector = {**(base.get("nodeSelector") or {}), **common_labels(entries, name, flavors)}
            fields.pop("nodeSelector", None)
            if selector:
                fields["nodeSelector"] = selector
            spec = template.setdefault("spec", {})
            for key in ("nodeSelector", "tolerations", "affinity", "schedulingGates"):
                spec.pop(key, None)
            spec.update(fields)
            template.setdefault("metadata", {}).setdefault("annotations", {})[keys.ROLE] = name
        annotations[original_key] = json.dumps(original, separators=(",", ":"), sort_keys=True)
        annotations[keys.GROUP_ASSIGNMENTS] = json.dumps(admitted, separators=(",", ":"), sort_keys=True)
        return None

    return groups.update(ref, edit)


def evict(groups: Groups, eviction: Eviction) -> tuple[dict[str, Any] | None, str]:
    """Drop the group's entry, then delete its pods (LWS makes them again, held by the templates' gate)."""
    ref = eviction.workload
    name, index = lws.split_ref(ref)

    def edit(obj: dict[str, Any]) -> str | None:
        annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
        try:
            admitted = lws.group_assignments(annotations)
        except Bad as bad:
            return f"{bad.field}: {bad.message}"
        if str(index) not in admitted:
            return "unchanged"
        del admitted[str(index)]
        annotations[keys.GROUP_ASSIGNMENTS] = json.dumps(admitted, separators=(",", ":"), sort_keys=True)
        return None

    obj, outcome = groups.update(ref, edit)
    if outcome in ("", "unchanged"):
        selector = f"{lws.NAME_LABEL}={name},{lws.GROUP_INDEX_LABEL}={index}"
        for pod in groups.kube.list(path_of("v1", "pods", ref.namespace), label_selector=selector):
            meta = pod.get("metadata") or {}
            try:
                groups.kube.write("DELETE", path_of("v1", "pods", ref.namespace, str(meta.get("name"))),
                                  {"apiVersion": "v1", "kind": "DeleteOptions",
                                   "preconditions": {"uid": meta.get("uid")}})
            except ApiStatus as err:
                if err.status not in (404, 409):
                    raise
    return obj, outcome


def running(obj: Mapping[str, Any]) -> dict[ObjectRef, list[PodSetAssignment]]:
    """Group workload -> its assignment, for an LWS of a live List (whose gates to finish)."""
    meta = obj.get("metadata") or {}
    try:
        admitted = lws.group_assignments(meta.get("annotations") or {})
    except Bad:
        return {}
    out = {}
    for index, entry in admitted.items():
        if not is_decimal(index):
            continue
        try:
            out[lws.group_ref(str(meta.get("namespace", "")), str(meta.get("name", "")), int(index))] = \
                decode_entries(entry.get("podSets") or [])
        except Bad:
            continue
    return out
