"""What every workload kind tells the planner: one adapter per kind, this is its shape.

An adapter knows one kind's object layout and nothing else: where its pod
templates live and how Kueue's integration for that kind counts them (pod sets),
how the kind is suspended, how its pods point back to it, and what to write into
it to admit, evict and release it. It is pure: it reads and edits plain dicts and
never talks to a cluster (planner.cluster.apply issues the writes, the snapshot
reader builds the Workload). Field errors raise `Bad` with the field's path.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

from models import ObjectRef
from planner.k8s.fields import Bad, boolean, mapping

T = TypeVar("T")

# The pod template fields an admission writes (and an eviction restores)
SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


class Attempt(Protocol):
    """fn(*args), or `default` after the reader has reported the field `Bad` names
    (the workload then waits with that reason)."""

    def __call__(self, fn: Callable[..., T], *args: Any, default: T) -> T: ...


@dataclasses.dataclass(frozen=True)
class PodSetSource:
    """One pod set as Kueue's integration builds it: name, pod count, the pod template
    (read for requests, scheduling fields and TAS annotations) and that template's
    field path; `min_count` for elastic (partial admission) pod sets."""

    name: str
    count: int
    template: Mapping[str, Any]
    field: str
    min_count: int | None = None


Lookup = Callable[[str, str, str], "dict[str, Any] | None"]
"""(kind, namespace, name) -> an object of a kind an adapter `needs` (None: absent)."""


class Adapter:
    """A workload kind. Subclasses set the identity and override what differs.

    Defaults fit a kind that is suspended by `spec.suspend` and whose templates are
    edited in place: admission replaces each template's SCHEDULING_FIELDS with the
    planned ones and unsuspends; eviction suspends.
    """

    group: str = ""
    version: str = ""                       # the version listed live and written
    versions: tuple[str, ...] = ()          # accepted in snapshot files (default: (version,))
    kind: str = ""
    plural: str = ""
    builtin: bool = False                   # served by every API server (no discovery needed)
    pod_selector: str = ""                  # a label key every pod of this kind carries (to list them)
    owner_label: str = ""                   # a label key `pod_owner` needs: pods without it are not asked
    suspend_path: tuple[str, ...] = ("spec", "suspend")
    grouped: bool = False                   # one workload per group of the object (LeaderWorkerSet)
    # other kinds read to build the pod sets: (group, version, kind, plural, namespaced)
    needs: tuple[tuple[str, str, str, str, bool], ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def accepted_versions(self) -> tuple[str, ...]:
        return self.versions or (self.version,)

    @property
    def bucket(self) -> str:
        return self.kind.lower()

    # ------------------------------------------------------------ reading

    def is_child(self, metadata: Mapping[str, Any]) -> bool:
        """An object another planned workload owns (a JobSet's Job): not a workload of its own."""
        return False

    def skip(self, obj: Mapping[str, Any]) -> bool:
        """An object Kueue's integration leaves alone (its JobWithSkip: a RayJob on an existing cluster)."""
        return False

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        """Kueue's pod sets of the object. Faults go through `attempt` (reported, the workload waits)."""
        raise NotImplementedError

    def priority_class(self, spec: dict[str, Any], sources: Sequence[PodSetSource]) -> tuple[object, str]:
        """(priorityClassName, its field): the first pod template that names one."""
        for source in sources:
            pod_spec = source.template.get("spec")
            if type(pod_spec) is dict and pod_spec.get("priorityClassName") is not None:
                return pod_spec["priorityClassName"], f"{source.field}.spec.priorityClassName"
        return None, ""

    def elastic_refusal(self, spec: Mapping[str, Any]) -> str | None:
        """Why an object of this kind marked elastic (`kueue.x-k8s.io/elastic-job: "true"`) is
        not resized while it runs; None when it is. Kueue v0.17 opens workload slices to
        batch/v1 Jobs and Ray clusters only (pkg/controller/jobs/{job,raycluster,rayjob}:
        their webhooks gate the templates or allow autoscaling for an elastic object)."""
        return (f"Kueue v0.17 resizes running batch/v1 Jobs, RayClusters and RayJobs through workload "
                f"slices, not a {self.kind}: it is planned as not elastic, at its declared size")

    def completions(self, spec: Mapping[str, Any]) -> int | None:
        """How many pods must succeed in all, where the kind says (a Job's spec.completions)."""
        return None

    def suspend_value(self, obj: Mapping[str, Any]) -> object:
        """The raw suspend field (None when absent)."""
        value: Any = obj
        for key in self.suspend_path:
            value = value.get(key) if type(value) is dict else None
        return value

    def read_suspended(self, obj: Mapping[str, Any]) -> bool:
        """Suspended? Absent reads as true: Kueue's webhook suspends a queued object at creation."""
        value = self.suspend_value(obj)
        return True if value is None else boolean(value, ".".join(self.suspend_path))

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        """(workload, pod set) a pod of this kind belongs to, from its labels or owner references."""
        return None

    # ------------------------------------------------------------ writing (pure edits of a read object)

    def suspended(self, obj: Mapping[str, Any]) -> bool:
        """As `read_suspended`, forgiving: a value of the wrong type reads as its truth."""
        value = self.suspend_value(obj)
        return True if value is None else bool(value)

    def set_suspended(self, obj: dict[str, Any], value: bool) -> None:
        node = obj
        for key in self.suspend_path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[self.suspend_path[-1]] = value

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Pod set name -> its pod template inside `obj` (the same dict, to edit in place).

        Only templates that exist; an adapter whose templates live elsewhere returns {}."""
        raise NotImplementedError

    def original_scheduling(self, obj: dict[str, Any], lookup: Lookup) -> dict[str, dict[str, Any]]:
        """The templates' own scheduling fields, before any admission: the base of every admission.

        `lookup` finds the objects the kind `needs` (a TrainJob's templates live in its runtime)."""
        import copy

        out = {}
        for name, template in self.templates(obj).items():
            spec = template.get("spec") or {}
            out[name] = {key: copy.deepcopy(spec[key]) for key in SCHEDULING_FIELDS if spec.get(key)}
        return out

    def write_admission(self, obj: dict[str, Any], specs: Mapping[str, Mapping[str, Any]]) -> str | None:
        """Write the planned scheduling fields of each pod set (`specs`) and unsuspend.

        Returns why it cannot (a pod set the object does not have), else None."""
        templates = self.templates(obj)
        for name in specs:
            if name not in templates:
                return f"it has no pod set {name}"
        for name, fields in specs.items():
            spec = templates[name].setdefault("spec", {})
            for key in SCHEDULING_FIELDS:
                spec.pop(key, None)
            spec.update(fields)
        self.set_suspended(obj, False)
        return None

    def write_eviction(self, obj: dict[str, Any]) -> None:
        """Suspend. The templates keep the last admission's fields: the next admission replaces them."""
        self.set_suspended(obj, True)

    def prune(self, obj: dict[str, Any], prune_template: Callable[[Any], Any],
              prune_metadata: Callable[[Any], Any]) -> dict[str, Any]:
        """`obj` with each pod template replaced by `prune_template(template)`: a copy of
        its spec, so the object read stays as it is (`prune_metadata` is for kinds with
        other templates, as a JobSet's Job templates)."""
        import copy

        out = {**obj, "spec": copy.deepcopy(obj.get("spec"))}
        for template in self.templates(out).values():
            pruned = prune_template(template)
            template.clear()
            template.update(pruned)
        return out

    def prune_needed(self, obj: dict[str, Any], prune_template: Callable[[Any], Any],
                     prune_metadata: Callable[[Any], Any]) -> dict[str, Any]:
        """An object of a kind this adapter `needs`, pruned as its own pod templates are."""
        return obj


def template_at(parent: Mapping[str, Any], key: str, field: str) -> dict[str, Any]:
    """A pod template mapping under `parent[key]` (absent: empty)."""
    return mapping(parent.get(key), field)


__all__ = ["Adapter", "Attempt", "Bad", "Lookup", "PodSetSource", "SCHEDULING_FIELDS", "template_at"]
