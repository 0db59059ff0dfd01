"""jobset.x-k8s.io/v1alpha2 JobSet: one pod set per replicated job.

Kueue: pkg/controller/jobs/jobset. Count: replicas x min(parallelism, completions).
Pods carry the JobSet's name and their replicated job's name as labels.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from models import ObjectRef
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.k8s import podsets as wl

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def replicated_job_templates(spec: Any) -> dict[str, dict[str, Any]]:
    """Replicated job name -> its pod template (the same dicts), for those that have one."""
    out: dict[str, dict[str, Any]] = {}
    jobs = spec.get("replicatedJobs") if isinstance(spec, dict) else None
    for rj in jobs if isinstance(jobs, list) else ():
        template = rj.get("template") if isinstance(rj, dict) else None
        job_spec = template.get("spec") if isinstance(template, dict) else None
        pod_template = job_spec.get("template") if isinstance(job_spec, dict) else None
        if isinstance(pod_template, dict):
            out[str(rj.get("name"))] = pod_template
    return out


class JobSetAdapter(Adapter):
    group = "jobset.x-k8s.io"
    version = "v1alpha2"
    kind = "JobSet"
    plural = "jobsets"
    owner_label = JOBSET_NAME_LABEL
    pod_selector = "batch.kubernetes.io/job-name"   # JobSet's pods are its Jobs' pods

    def is_child(self, metadata: Mapping[str, Any]) -> bool:
        """A TrainJob's JobSet is the TrainJob's."""
        owners = metadata.get("ownerReferences")
        return type(owners) is list and any(type(o) is dict and o.get("kind") == "TrainJob" for o in owners)

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        entries: list[tuple[str, int, dict[str, Any], str]] = attempt(wl.jobset_pod_sets, spec, default=[])
        return [PodSetSource(name, count, template, field) for name, count, template, field in entries]

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        jobset = labels.get(JOBSET_NAME_LABEL)
        if not jobset:
            return None
        return ObjectRef("JobSet", namespace, str(jobset)), str(labels.get(REPLICATED_JOB_LABEL, ""))

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return replicated_job_templates(obj.get("spec"))

    def prune(self, obj: dict[str, Any], prune_template: Callable[[Any], Any],
              prune_metadata: Callable[[Any], Any]) -> dict[str, Any]:
        out = super().prune(obj, prune_template, prune_metadata)
        jobs = out["spec"].get("replicatedJobs") if isinstance(out.get("spec"), dict) else None
        for rj in jobs if isinstance(jobs, list) else ():
            template = rj.get("template") if isinstance(rj, dict) else None
            if isinstance(template, dict) and "metadata" in template:
                template["metadata"] = prune_metadata(template["metadata"])
        return out
