"""kubeflow.org/v1 PyTorchJob (training-operator): pod sets `master` and `worker`.

Kueue: pkg/controller/jobs/kubeflow/jobs/pytorchjob (OrderedReplicaTypes Master, Worker).
The operator makes the pods itself, labelled with the job's name, the lower-case
replica type and `training.kubeflow.org/operator-name: pytorchjob-controller`.
"""

from __future__ import annotations

from typing import Any, Mapping

from planner.kinds.kubeflow import ReplicaSpecAdapter

OPERATOR_LABEL = "training.kubeflow.org/operator-name"


class PyTorchJobAdapter(ReplicaSpecAdapter):
    version = "v1"
    kind = "PyTorchJob"
    plural = "pytorchjobs"
    replica_specs = "pytorchReplicaSpecs"
    replica_types = ("Master", "Worker")
    role_label = "training.kubeflow.org/replica-type"

    def made_by_us(self, metadata: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
        operator = labels.get(OPERATOR_LABEL)
        return operator in (None, "pytorchjob-controller")
