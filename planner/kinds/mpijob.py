"""kubeflow.org/v2beta1 MPIJob (mpi-operator): pod sets `launcher` and `worker`.

Kueue: pkg/controller/jobs/mpijob (Launcher before Worker). The operator runs the
launcher as a batch Job `<name>-launcher` it owns (that Job is the MPIJob's, not a
workload of its own: planner.kinds.job) and the workers as pods; both carry
`training.kubeflow.org/job-name` and `training.kubeflow.org/job-role` (launcher, worker).
"""

from __future__ import annotations

from planner.kinds.kubeflow import ReplicaSpecAdapter


class MPIJobAdapter(ReplicaSpecAdapter):
    version = "v2beta1"
    kind = "MPIJob"
    plural = "mpijobs"
    replica_specs = "mpiReplicaSpecs"
    replica_types = ("Launcher", "Worker")
    role_label = "training.kubeflow.org/job-role"
