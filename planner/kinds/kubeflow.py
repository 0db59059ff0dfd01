"""What Kubeflow's replica-spec jobs share (training-operator v1 PyTorchJob, MPIJob v2beta1).

Kueue: pkg/controller/jobs/kubeflow/kubeflowjob and pkg/controller/jobs/mpijob. One pod
set per replica type the object has, in Kueue's order, named by the type in lower case
(`Master` -> `master`), `replicas` pods each (default 1); suspended by
`spec.runPolicy.suspend`; priority from `spec.runPolicy.schedulingPolicy.priorityClass`,
else the first template's priorityClassName. Admission writes the replica templates'
scheduling fields as Kueue's RunWithPodSetsInfo does. Pods carry the job's name in
`training.kubeflow.org/job-name`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from models import ObjectRef
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.k8s.fields import Bad, integer, mapping

JOB_NAME_LABEL = "training.kubeflow.org/job-name"


class ReplicaSpecAdapter(Adapter):
    """A kind whose pod templates are `spec.<replica_specs>[<Type>].template`."""

    group = "kubeflow.org"
    owner_label = JOB_NAME_LABEL
    pod_selector = JOB_NAME_LABEL
    suspend_path = ("spec", "runPolicy", "suspend")
    replica_specs = ""                       # e.g. pytorchReplicaSpecs
    replica_types: tuple[str, ...] = ()      # Kueue's order, e.g. ("Master", "Worker")
    role_label = ""                          # the pod label naming its replica type (lower case)

    def present_types(self, spec: Mapping[str, Any]) -> list[str]:
        specs = spec.get(self.replica_specs)
        return [t for t in self.replica_types if isinstance(specs, dict) and specs.get(t) is not None]

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        return attempt(self.read_replica_specs, spec, default=[])

    def read_replica_specs(self, spec: dict[str, Any]) -> list[PodSetSource]:
        field = f"spec.{self.replica_specs}"
        specs = mapping(spec.get(self.replica_specs), field)
        types = self.present_types(spec)
        if not types:
            raise Bad(field, f"must have at least one of {', '.join(self.replica_types)}")
        out = []
        for replica_type in types:
            where = f"{field}.{replica_type}"
            replica = mapping(specs[replica_type], where)
            count = integer(replica.get("replicas"), f"{where}.replicas", default=1, minimum=0)
            if count < 1:
                raise Bad(f"{where}.replicas", "asks for no pods")
            template = mapping(replica.get("template"), f"{where}.template")
            out.append(PodSetSource(replica_type.lower(), count, template, f"{where}.template"))
        return out

    def priority_class(self, spec: dict[str, Any], sources: Sequence[PodSetSource]) -> tuple[object, str]:
        run_policy = spec.get("runPolicy")
        policy = run_policy.get("schedulingPolicy") if isinstance(run_policy, dict) else None
        if isinstance(policy, dict) and policy.get("priorityClass"):
            return policy["priorityClass"], "spec.runPolicy.schedulingPolicy.priorityClass"
        return super().priority_class(spec, sources)

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        name = labels.get(JOB_NAME_LABEL)
        role = labels.get(self.role_label)
        if not name or not role or str(role).lower() not in {t.lower() for t in self.replica_types}:
            return None
        if not self.made_by_us(metadata, labels):
            return None
        return ObjectRef(self.kind, namespace, str(name)), str(role).lower()

    def made_by_us(self, metadata: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
        """Is the pod this kind's (training-operator's kinds share their labels)?"""
        return True

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        spec = obj.get("spec")
        specs = spec.get(self.replica_specs) if isinstance(spec, dict) else None
        out = {}
        for replica_type in self.replica_types:
            replica = specs.get(replica_type) if isinstance(specs, dict) else None
            template = replica.get("template") if isinstance(replica, dict) else None
            if isinstance(template, dict):
                out[replica_type.lower()] = template
        return out
