"""batch/v1 Job: one pod set `main`, `spec.parallelism` pods (capped by completions).

Kueue: pkg/controller/jobs/job. Elastic with `kueue.x-k8s.io/job-min-parallelism`.
Pods point back by owner reference (or the job-name labels). A Job owned by a JobSet
is the JobSet's, not a workload of its own.
"""

from __future__ import annotations

from typing import Any, Mapping

from models import ObjectRef
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.k8s import podsets as wl
from planner.k8s.annotations import ELASTIC_JOB
from planner.k8s.fields import mapping

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
# Kinds whose child Jobs are theirs (the child is not a workload of its own)
PARENT_KINDS = ("JobSet", "MPIJob", "RayJob")   # a RayJob's submitter Job is the RayJob's


def owned_by(metadata: Mapping[str, Any], kinds: tuple[str, ...]) -> bool:
    owners = metadata.get("ownerReferences")
    return type(owners) is list and any(type(o) is dict and o.get("kind") in kinds for o in owners)


class JobAdapter(Adapter):
    group = "batch"
    version = "v1"
    kind = "Job"
    plural = "jobs"
    builtin = True
    pod_selector = JOB_NAME_LABELS[0]

    def is_child(self, metadata: Mapping[str, Any]) -> bool:
        return owned_by(metadata, PARENT_KINDS)

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        count = attempt(wl.job_count, spec, "spec", default=1)
        if annotations.get(ELASTIC_JOB) == "true":
            # an elastic Job apply has resized: its most is what it recorded
            count = attempt(wl.max_parallelism, annotations, spec.get("completions"), default=None) or count
        min_count = attempt(wl.min_parallelism, annotations, count, default=None)
        template: dict[str, Any] = attempt(mapping, spec.get("template"), "spec.template", default={})
        return [PodSetSource(wl.JOB_POD_SET, count, template, "spec.template", min_count)]

    def priority_class(self, spec: dict[str, Any], sources: Any) -> tuple[object, str]:
        template = spec.get("template")
        pod_spec = template.get("spec") if type(template) is dict else None
        return (pod_spec.get("priorityClassName") if type(pod_spec) is dict else None,
                "spec.template.spec.priorityClassName")

    def elastic_refusal(self, spec: Mapping[str, Any]) -> str | None:
        return None

    def completions(self, spec: Mapping[str, Any]) -> int | None:
        completions = spec.get("completions")
        return completions if type(completions) is int else None

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        owners = metadata.get("ownerReferences")
        if type(owners) is list:
            for owner in owners:
                if type(owner) is dict and owner.get("kind") == "Job" and type(owner.get("name")) is str:
                    return ObjectRef("Job", namespace, owner["name"]), wl.JOB_POD_SET
        for key in JOB_NAME_LABELS:
            if labels.get(key):
                return ObjectRef("Job", namespace, str(labels[key])), wl.JOB_POD_SET
        return None

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        spec = obj.get("spec")
        template = spec.get("template") if isinstance(spec, dict) else None
        return {wl.JOB_POD_SET: template} if isinstance(template, dict) else {}
