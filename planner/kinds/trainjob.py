"""trainer.kubeflow.org/v1alpha1 TrainJob (Kubeflow Trainer v2): the pod sets of the JobSet it runs.

Kueue: pkg/controller/jobs/trainjob. The JobSet is built from the runtime the TrainJob
names (`spec.runtimeRef`: a ClusterTrainingRuntime by default, or a TrainingRuntime in
its namespace): one pod set per replicated job of the runtime's
`spec.template.spec`, named as the replicated job. The trainer's replicated job (label
`trainer.kubeflow.org/trainjob-ancestor-step: trainer`) runs `spec.trainer.numNodes`
pods (else the runtime's `mlPolicy.numNodes`, else 1) and its `node` container asks
for `spec.trainer.resourcesPerNode` when set; every other one runs its parallelism.
Under an MPI policy (`mlPolicy.mpi`) the trainer's `numNodes` sizes the replicated job
named `node` instead (one less with `runLauncherAsNode`, which also gives that job
`resourcesPerNode`), as the Trainer's MPI plugin does.

Suspended by `spec.suspend`. Admission writes, as Kueue does, a `spec.runtimePatches`
entry of its own manager (`stowplan.io/planner`) with each replicated job's pod
scheduling fields (nodeSelector, tolerations, affinity, schedulingGates), which the
Trainer merges into the JobSet it makes; eviction suspends and removes that entry.
Pods are the JobSet's: `jobset.sigs.k8s.io/jobset-name` is the TrainJob's name.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping

from models import ObjectRef
from planner.kinds.base import SCHEDULING_FIELDS, Adapter, Attempt, Lookup, PodSetSource
from planner.kinds.jobset import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from planner.k8s.fields import Bad, integer, mapping, required, sequence
from planner.k8s.annotations import MANAGED_BY as MANAGER

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
RUNTIME = "TrainingRuntime"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
NODE_CONTAINER = "node"


def runtime_of(spec: Mapping[str, Any], namespace: str, lookup: Lookup) -> tuple[str, str, dict[str, Any]]:
    """(kind, name, runtime object) the TrainJob names; Bad when it is not there."""
    ref = mapping(spec.get("runtimeRef"), "spec.runtimeRef")
    name = required(ref.get("name"), "spec.runtimeRef.name")
    kind = ref.get("kind") or CLUSTER_RUNTIME
    if kind not in (CLUSTER_RUNTIME, RUNTIME):
        raise Bad("spec.runtimeRef.kind", f"must be {CLUSTER_RUNTIME} or {RUNTIME}, got {kind!r}")
    runtime = lookup(kind, namespace if kind == RUNTIME else "", name)
    if runtime is None:
        where = f" in namespace {namespace}" if kind == RUNTIME else ""
        raise Bad("spec.runtimeRef", f"{kind} {name}{where} does not exist (Kueue creates no Workload for it)")
    return kind, name, runtime


def _replicated_jobs(runtime: Mapping[str, Any], where: str) -> list[Any]:
    spec = mapping(runtime.get("spec"), f"{where} spec")
    template = mapping(spec.get("template"), f"{where} spec.template")
    jobs = sequence(mapping(template.get("spec"), f"{where} spec.template.spec").get("replicatedJobs"),
                    f"{where} spec.template.spec.replicatedJobs")
    if not jobs:
        raise Bad(f"{where} spec.template.spec.replicatedJobs", "must list at least one replicated job")
    return jobs


class TrainJobAdapter(Adapter):
    group = GROUP
    version = VERSION
    kind = "TrainJob"
    plural = "trainjobs"
    owner_label = JOBSET_NAME_LABEL
    pod_selector = "batch.kubernetes.io/job-name"   # the pods of the JobSet's Jobs
    needs = ((GROUP, VERSION, CLUSTER_RUNTIME, "clustertrainingruntimes", False),
             (GROUP, VERSION, RUNTIME, "trainingruntimes", True))

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        return attempt(self.read_pod_sets, spec, lookup, namespace, default=[])

    def read_pod_sets(self, spec: dict[str, Any], lookup: Lookup, namespace: str) -> list[PodSetSource]:
        kind, name, runtime = runtime_of(spec, namespace, lookup)
        where = f"{kind} {name}:"
        trainer = mapping(spec.get("trainer"), "spec.trainer")
        num_nodes = integer(trainer.get("numNodes"), "spec.trainer.numNodes", minimum=1)
        resources = trainer.get("resourcesPerNode")
        if resources is not None:
            mapping(resources, "spec.trainer.resourcesPerNode")
        runtime_spec = mapping(runtime.get("spec"), f"{where} spec")
        ml_policy = runtime_spec.get("mlPolicy")
        mpi = ml_policy.get("mpi") if isinstance(ml_policy, dict) else None
        launcher_as_node = isinstance(mpi, dict) and mpi.get("runLauncherAsNode") is True
        out = []
        for i, item in enumerate(_replicated_jobs(runtime, where)):
            rj_field = f"{where} spec.template.spec.replicatedJobs[{i}]"
            rj = mapping(item, rj_field)
            rj_name = required(rj.get("name"), f"{rj_field}.name")
            replicas = integer(rj.get("replicas"), f"{rj_field}.replicas", default=1, minimum=1)
            job = mapping(rj.get("template"), f"{rj_field}.template")
            labels = mapping(mapping(job.get("metadata"), f"{rj_field}.template.metadata").get("labels"),
                             f"{rj_field}.template.metadata.labels")
            job_spec = mapping(job.get("spec"), f"{rj_field}.template.spec")
            template = mapping(job_spec.get("template"), f"{rj_field}.template.spec.template")
            count = integer(job_spec.get("parallelism"), f"{rj_field}.template.spec.parallelism", default=1,
                            minimum=1)
            trainer_job = labels.get(ANCESTOR_LABEL) == TRAINER
            if trainer_job and isinstance(ml_policy, dict):
                count = integer(ml_policy.get("numNodes"), f"{where} spec.mlPolicy.numNodes", default=1, minimum=1)
            if num_nodes is not None:
                if mpi is None and trainer_job:
                    count = num_nodes            # the torch, plain, JAX and XGBoost policies
                elif mpi is not None and rj_name == NODE_CONTAINER:
                    count = max(num_nodes - 1, 1) if launcher_as_node else num_nodes   # the MPI policy
            if resources is not None and (trainer_job or (launcher_as_node and rj_name == NODE_CONTAINER)):
                template = _with_node_resources(template, resources)
            out.append(PodSetSource(rj_name, replicas * count, template,
                                    f"{rj_field}.template.spec.template"))
        return out

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        name = labels.get(JOBSET_NAME_LABEL)
        if not name:
            return None
        return ObjectRef(self.kind, namespace, str(name)), str(labels.get(REPLICATED_JOB_LABEL, ""))

    # ------------------------------------------------------------ writing

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {}   # they live in the runtime

    def original_scheduling(self, obj: dict[str, Any], lookup: Lookup) -> dict[str, dict[str, Any]]:
        """The runtime's templates' scheduling fields: the patch replaces lists (tolerations), so the
        admission must carry the runtime's own beside the flavor's."""
        meta = obj.get("metadata") or {}
        try:
            _, _, runtime = runtime_of(obj.get("spec") or {}, str(meta.get("namespace") or ""), lookup)
            jobs = _replicated_jobs(runtime, "")
        except Bad:
            return {}
        out = {}
        for rj in jobs:
            if not isinstance(rj, dict):
                continue
            pod_spec = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            out[str(rj.get("name"))] = {key: copy.deepcopy(pod_spec[key]) for key in SCHEDULING_FIELDS
                                        if pod_spec.get(key)}
        return out

    def write_admission(self, obj: dict[str, Any], specs: Mapping[str, Mapping[str, Any]]) -> str | None:
        patches = self._patches(obj)
        entry = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": name, "template": {"spec": {"template": {"spec": dict(specs[name])}}}} for name in sorted(specs)
        ]}}}}
        patches[:] = [p for p in patches if not (isinstance(p, dict) and p.get("manager") == MANAGER)] + [entry]
        self.set_suspended(obj, False)
        return None

    def write_eviction(self, obj: dict[str, Any]) -> None:
        patches = self._patches(obj)
        patches[:] = [p for p in patches if not (isinstance(p, dict) and p.get("manager") == MANAGER)]
        if not patches:
            obj["spec"].pop("runtimePatches", None)
        self.set_suspended(obj, True)

    def _patches(self, obj: dict[str, Any]) -> list[Any]:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec.get("runtimePatches"), list):
            spec["runtimePatches"] = []
        patches: list[Any] = spec["runtimePatches"]
        return patches

    def prune(self, obj: dict[str, Any], prune_template: Callable[[Any], Any],
              prune_metadata: Callable[[Any], Any]) -> dict[str, Any]:
        """Keep what planning reads: the runtime reference, the trainer's size and resources,
        suspend, and the scheduling fields of the runtime patches (no env, command or image)."""
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return obj
        out = {k: copy.deepcopy(v) for k, v in spec.items() if k not in ("trainer", "initializer", "runtimePatches")}
        trainer = spec.get("trainer")
        if isinstance(trainer, dict):
            out["trainer"] = {k: copy.deepcopy(v) for k, v in trainer.items()
                              if k in ("numNodes", "resourcesPerNode", "numProcPerNode")}
        patches = spec.get("runtimePatches")
        if isinstance(patches, list):
            out["runtimePatches"] = [_pruned_patch(p) for p in patches]
        return {**obj, "spec": out}

    def prune_needed(self, obj: dict[str, Any], prune_template: Callable[[Any], Any],
                     prune_metadata: Callable[[Any], Any]) -> dict[str, Any]:
        """A runtime: its JobSet template's pod templates pruned as a JobSet's are."""
        spec = obj.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
            return obj
        template: dict[str, Any] = spec["template"]
        from planner.kinds.jobset import JobSetAdapter

        pruned = JobSetAdapter().prune({"spec": template.get("spec")}, prune_template, prune_metadata)
        return {**obj, "spec": {**spec, "template": {**template, "spec": pruned["spec"]}}}


def _with_node_resources(template: Mapping[str, Any], resources: Any) -> dict[str, Any]:
    """The template with the `node` container's resources replaced (a copy)."""
    out = copy.deepcopy(dict(template))
    spec = out.get("spec")
    for container in (spec.get("containers") if isinstance(spec, dict) else None) or ():
        if isinstance(container, dict) and container.get("name") == NODE_CONTAINER:
            container["resources"] = copy.deepcopy(resources)
            break
    return out


def _pruned_patch(patch: Any) -> Any:
    """A runtime patch with only its manager and each replicated job's pod scheduling fields."""
    if not isinstance(patch, dict):
        return patch
    out: dict[str, Any] = {k: v for k, v in patch.items() if k in ("manager", "time")}
    try:
        jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    except (KeyError, TypeError):
        return out
    kept = []
    for rj in jobs if isinstance(jobs, list) else ():
        if not isinstance(rj, dict):
            continue
        pod_spec = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        fields = {k: v for k, v in pod_spec.items() if k in SCHEDULING_FIELDS}
        kept.append({"name": rj.get("name"), "template": {"spec": {"template": {"spec": fields}}}})
    out["trainingRuntimeSpec"] = {"template": {"spec": {"replicatedJobs": kept}}}
    return out
