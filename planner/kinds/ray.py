"""RayCluster and RayJob (ray.io/v1) -> the pod sets Kueue v0.17's integrations build.

Kueue's `raycluster.BuildPodSets` (pkg/controller/jobs/raycluster) gives a pod set
`head` of one pod, then one per worker group named by its `groupName` lowercased,
counting `replicas` (1 when absent) times `numOfHosts` (when above 1). A RayJob
(pkg/controller/jobs/rayjob) has the same pod sets from `spec.rayClusterSpec`, plus
`submitter` (one pod) when `submissionMode` is `K8sJobMode` (the CRD's default):
`spec.submitterPodTemplate`, or KubeRay's default submitter (500m cpu, 200Mi).

`minReplicas`/`maxReplicas` bound Ray's autoscaler, not the admission: Kueue admits
`replicas` and has no partial admission for Ray. `enableInTreeAutoscaling: true` is
refused by Kueue's webhook unless workload slicing is on for the object (annotation
`kueue.x-k8s.io/elastic-job: "true"` with the alpha gate ElasticJobsViaWorkloadSlices,
off by default in v0.17). Kueue's webhook also refuses: more than 7 worker groups, a
group named `head`, a RayJob that keeps its cluster (`shutdownAfterJobFinishes: false`)
or names an existing one (`clusterSelector`) beside its own `rayClusterSpec`. A RayJob
with only a `clusterSelector` runs on someone else's cluster: Kueue skips it (None here).

Elastic (workload slices, Kueue v0.17): a RayCluster with the annotation, and a RayJob
with the annotation and `spec.rayClusterSpec.enableInTreeAutoscaling: true` (Kueue
follows a RayJob's worker counts from its RayCluster only then: raycluster.UpdatePodSets).
Pending, it is admitted at `replicas`, as Kueue sizes its first slice. Running (its
`spec.suspend` false), each worker group of one host per replica is resizable: its pod
set counts its most, `maxReplicas` (KubeRay's default 2147483647 means none was set: no
growth above `replicas`), with its floor, `minReplicas` (at least 1), as min_count; what
it runs now is its admission's count (planner.cycle.elastic).
A group of `numOfHosts` > 1 keeps its size: its pods come in multi-host replicas, and a
slice here is of single pods. The head and the submitter never change.

Pods point back by KubeRay's label `ray.io/cluster` (a RayJob's cluster is named
`RAYJOB-xxxxx`, five random characters), `ray.io/node-type` (`head`) and `ray.io/group`;
a RayJob's submitter pod by its Job's name (the RayJob's). The RayCluster a RayJob
creates, and its submitter Job, are the RayJob's (children, not workloads).

Admission writes each pod template's scheduling fields (flavor node labels and
tolerations, node affinity to the planned nodes, Stowplan's gate) and
`spec.suspend: false`; eviction sets `spec.suspend: true` (KubeRay then deletes the
cluster's pods). Pure: no I/O. Field errors raise `Bad` with the field's path.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from models import ObjectRef
from planner.kinds.base import Adapter, Attempt, Lookup, PodSetSource
from planner.kinds.job import owned_by
from planner.k8s.fields import Bad, boolean, integer, mapping, required, sequence, string, string_map
from planner.k8s.annotations import ELASTIC_JOB as ELASTIC, TOPOLOGY_GATE as STOWPLAN_GATE

HEAD = "head"
SUBMITTER = "submitter"
MAX_WORKER_GROUPS = 7          # Kueue: 8 pod sets at most, the head among them
K8S_JOB_MODE = "K8sJobMode"    # KubeRay's default submissionMode
UNSET_MAX_REPLICAS = 2**31 - 1   # KubeRay's default maxReplicas (the CRD's): no most given

# KubeRay's default submitter pod, as Kueue's rayjob.getSubmitterTemplate copies it
DEFAULT_SUBMITTER: dict[str, Any] = {
    "spec": {
        "containers": [{"name": "ray-job-submitter",
                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"},
                                      "limits": {"cpu": "1", "memory": "1Gi"}}}],
        "restartPolicy": "Never",
    },
}


class Entry(NamedTuple):
    """One pod set to build: its name, pod count, pod template and the template's field path;
    `floor` for a worker group an elastic running cluster may resize (its count is then its most)."""

    name: str
    size: int
    template: dict[str, Any]
    field: str
    floor: int | None = None


def cluster_entries(spec: dict[str, Any], field: str, elastic: bool, running: bool = False) -> list[Entry]:
    """Pod sets of a RayClusterSpec at `field` ("spec" or "spec.rayClusterSpec"), in Kueue's order.

    `elastic` (workload slicing on for the object) and `running`: resizable worker groups
    count their most, with their floor."""
    if boolean(spec.get("enableInTreeAutoscaling"), f"{field}.enableInTreeAutoscaling") and not elastic:
        raise Bad(f"{field}.enableInTreeAutoscaling",
                  "Kueue refuses autoscaling for a queued Ray cluster unless workload slicing is on for it "
                  f"(annotation {ELASTIC}: \"true\"); the workload waits")
    head = mapping(spec.get("headGroupSpec"), f"{field}.headGroupSpec")
    if not head:
        raise Bad(f"{field}.headGroupSpec", "is required")
    out = [Entry(HEAD, 1, mapping(head.get("template"), f"{field}.headGroupSpec.template"),
                 f"{field}.headGroupSpec.template")]
    groups = sequence(spec.get("workerGroupSpecs"), f"{field}.workerGroupSpecs")
    if len(groups) > MAX_WORKER_GROUPS:
        raise Bad(f"{field}.workerGroupSpecs", f"has {len(groups)} groups; Kueue admits at most "
                                               f"{MAX_WORKER_GROUPS} (8 pod sets with the head)")
    seen: set[str] = set()
    for i, item in enumerate(groups):
        where = f"{field}.workerGroupSpecs[{i}]"
        group = mapping(item, where)
        name = required(group.get("groupName"), f"{where}.groupName").lower()   # kueue.NewPodSetReference
        if name == HEAD:
            raise Bad(f"{where}.groupName", f"{HEAD!r} is reserved for the head group")
        if name in seen:
            raise Bad(f"{where}.groupName", f"{name!r} names two worker groups")
        seen.add(name)
        replicas = integer(group.get("replicas"), f"{where}.replicas", default=1, minimum=0)
        hosts = integer(group.get("numOfHosts"), f"{where}.numOfHosts", default=1, minimum=0)
        count = replicas * hosts if hosts > 1 else replicas
        template = mapping(group.get("template"), f"{where}.template")
        bounds = resize_bounds(group, where, replicas) if elastic and running and hosts <= 1 and replicas else None
        if bounds is not None:
            out.append(Entry(name, bounds[1], template, f"{where}.template", bounds[0]))
        else:
            out.append(Entry(name, count, template, f"{where}.template"))
    return out


def resize_bounds(group: dict[str, Any], where: str, replicas: int) -> tuple[int, int] | None:
    """(floor, most) of a running elastic worker group at `replicas`, None when it cannot change.

    The floor is `minReplicas`, at least 1 (a group at 0 has no pods to plan from; a group
    running below its floor only grows, planner.cycle.elastic); the most is `maxReplicas` when
    one was set, at least `replicas`. (A RayJob's `replicas` is the one it was admitted
    at: KubeRay resizes its RayCluster, not its spec.)"""
    low = integer(group.get("minReplicas"), f"{where}.minReplicas", default=0, minimum=0)
    high = integer(group.get("maxReplicas"), f"{where}.maxReplicas", default=UNSET_MAX_REPLICAS, minimum=0)
    assert low is not None and high is not None   # defaulted
    if low > high:
        raise Bad(f"{where}.minReplicas", f"{low} is more than maxReplicas {high}")
    floor = max(1, low)
    most = replicas if high >= UNSET_MAX_REPLICAS else max(high, replicas)
    return (floor, most) if floor < most else None


def running(spec: Mapping[str, Any]) -> bool:
    """Unsuspended (an absent `suspend` reads as suspended: Kueue's webhook sets it at creation)."""
    return spec.get("suspend") is False


def ray_cluster_entries(spec: dict[str, Any], annotations: dict[str, str]) -> list[Entry]:
    """A RayCluster's pod sets (worker groups of 0 pods dropped: they ask for nothing)."""
    return [e for e in cluster_entries(spec, "spec", annotations.get(ELASTIC) == "true", running(spec))
            if e.size > 0]


def rayjob_autoscales(spec: Mapping[str, Any]) -> bool:
    """`spec.rayClusterSpec.enableInTreeAutoscaling: true`: Kueue follows its RayCluster's counts only then."""
    cluster = spec.get("rayClusterSpec")
    return isinstance(cluster, dict) and cluster.get("enableInTreeAutoscaling") is True


def ray_job_entries(spec: dict[str, Any], annotations: dict[str, str]) -> list[Entry] | None:
    """A RayJob's pod sets; None when it runs on an existing cluster (Kueue skips those)."""
    selector = string_map(spec.get("clusterSelector"), "spec.clusterSelector")
    cluster = spec.get("rayClusterSpec")
    if selector and cluster is None:
        return None
    if selector:
        raise Bad("spec.clusterSelector", "a Kueue-managed RayJob cannot use an existing cluster beside its own "
                                          "rayClusterSpec")
    if cluster is None:
        raise Bad("spec.rayClusterSpec", "is required for a queued RayJob without clusterSelector")
    if not boolean(spec.get("shutdownAfterJobFinishes"), "spec.shutdownAfterJobFinishes"):
        raise Bad("spec.shutdownAfterJobFinishes", "must be true for a queued RayJob: Kueue refuses a job that keeps "
                                                   "its cluster (and its quota) after it finishes")
    entries = cluster_entries(mapping(cluster, "spec.rayClusterSpec"), "spec.rayClusterSpec",
                              annotations.get(ELASTIC) == "true",
                              running(spec) and annotations.get(ELASTIC) == "true" and rayjob_autoscales(spec))
    mode = string(spec.get("submissionMode"), "spec.submissionMode") or K8S_JOB_MODE
    if mode == K8S_JOB_MODE:
        if spec.get("submitterPodTemplate") is not None:
            entries.append(Entry(SUBMITTER, 1, mapping(spec["submitterPodTemplate"], "spec.submitterPodTemplate"),
                                 "spec.submitterPodTemplate"))
        else:
            entries.append(Entry(SUBMITTER, 1, DEFAULT_SUBMITTER, "spec.submitterPodTemplate"))
    return [e for e in entries if e.size > 0]


def template_paths(kind: str, spec: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Pod set -> the key path of its pod template inside the object (for the writes).

    The default submitter has no template in the object: as in Kueue, where the
    placement merged into KubeRay's default submitter is dropped, nothing is written
    for it (its one pod is placed by the scheduler)."""
    cluster = spec if kind == "RayCluster" else mapping(spec.get("rayClusterSpec"), "spec.rayClusterSpec")
    prefix: tuple[str, ...] = ("spec",) if kind == "RayCluster" else ("spec", "rayClusterSpec")
    out: dict[str, tuple[str, ...]] = {HEAD: prefix + ("headGroupSpec", "template")}
    for i, item in enumerate(sequence(cluster.get("workerGroupSpecs"), "workerGroupSpecs")):
        name = mapping(item, "workerGroupSpecs").get("groupName")
        if type(name) is str:
            out[name.lower()] = prefix + ("workerGroupSpecs", str(i), "template")
    if kind == "RayJob" and spec.get("submitterPodTemplate") is not None:
        out[SUBMITTER] = ("spec", "submitterPodTemplate")
    return out


# ---------------------------------------------------------------- the adapters

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
SUFFIX = 6   # KubeRay names a RayJob's cluster NAME-xxxxx (utils.GenerateRayClusterName)


def _sources(entries: list[Entry] | None) -> list[PodSetSource]:
    return [PodSetSource(e.name, e.size, e.template, e.field, e.floor) for e in entries or ()]


def _templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod set -> its template inside `obj` (the same dicts), for those present."""
    out: dict[str, dict[str, Any]] = {}
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return out
    for name, path in template_paths(str(obj.get("kind")), spec).items():
        node: Any = obj
        for key in path:
            node = node[int(key)] if isinstance(node, list) else node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            out[name] = node
    return out


def _pod_set_of_ray_pod(labels: Mapping[str, Any]) -> str:
    return HEAD if labels.get(NODE_TYPE_LABEL) == "head" else str(labels.get(GROUP_LABEL, "")).lower()


class RayClusterAdapter(Adapter):
    group = "ray.io"
    version = "v1"
    kind = "RayCluster"
    plural = "rayclusters"
    pod_selector = CLUSTER_LABEL
    owner_label = CLUSTER_LABEL

    def is_child(self, metadata: Mapping[str, Any]) -> bool:
        return owned_by(metadata, ("RayJob",))

    def elastic_refusal(self, spec: Mapping[str, Any]) -> str | None:
        return None   # its worker groups' replicas, changed while it runs, make Kueue's slices

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        entries: list[Entry] = attempt(ray_cluster_entries, spec, annotations, default=[])
        return _sources(entries)

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        cluster = labels.get(CLUSTER_LABEL)
        return (ObjectRef(self.kind, namespace, str(cluster)), _pod_set_of_ray_pod(labels)) if cluster else None

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return _templates(obj)


class RayJobAdapter(Adapter):
    group = "ray.io"
    version = "v1"
    kind = "RayJob"
    plural = "rayjobs"
    pod_selector = CLUSTER_LABEL

    def skip(self, obj: Mapping[str, Any]) -> bool:
        """Kueue's RayJob.Skip: a RayJob naming an existing cluster (and no cluster of its own) is not Kueue's."""
        spec = obj.get("spec")
        return (isinstance(spec, dict) and isinstance(spec.get("clusterSelector"), dict)
                and bool(spec["clusterSelector"]) and spec.get("rayClusterSpec") is None)

    def elastic_refusal(self, spec: Mapping[str, Any]) -> str | None:
        if rayjob_autoscales(spec):
            return None
        return ("Kueue v0.17 follows a RayJob's worker counts (from the RayCluster it runs on) only with "
                "spec.rayClusterSpec.enableInTreeAutoscaling: true: without it the RayJob is planned as not "
                "elastic, at its declared size")

    def pod_sets(self, spec: dict[str, Any], annotations: dict[str, str], attempt: Attempt,
                 lookup: Lookup, namespace: str) -> list[PodSetSource]:
        none: list[Entry] | None = []
        entries = attempt(ray_job_entries, spec, annotations, default=none)
        return _sources(entries)

    def pod_owner(self, namespace: str, metadata: Mapping[str, Any],
                  labels: Mapping[str, Any]) -> tuple[ObjectRef, str] | None:
        cluster = labels.get(CLUSTER_LABEL)
        if cluster and len(str(cluster)) > SUFFIX and str(cluster)[-SUFFIX] == "-":
            return ObjectRef(self.kind, namespace, str(cluster)[:-SUFFIX]), _pod_set_of_ray_pod(labels)
        job = next((labels[k] for k in JOB_NAME_LABELS if labels.get(k)), None)
        return (ObjectRef(self.kind, namespace, str(job)), SUBMITTER) if job else None

    def templates(self, obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return _templates(obj)

    def write_admission(self, obj: dict[str, Any], specs: Mapping[str, Mapping[str, Any]]) -> str | None:
        """As every kind, but KubeRay's default submitter has no template to write (Kueue drops
        its placement too), and the submitter's one pod needs no gate: the node affinity to
        its one planned node already pins it (KubeRay's submitter pods are not listed for release)."""
        templates = self.templates(obj)
        wanted = {name: dict(fields) for name, fields in specs.items() if name != SUBMITTER or name in templates}
        if SUBMITTER in wanted:
            gates = [g for g in wanted[SUBMITTER].get("schedulingGates") or () if g.get("name") != STOWPLAN_GATE]
            wanted[SUBMITTER] = {k: v for k, v in wanted[SUBMITTER].items() if k != "schedulingGates"}
            if gates:
                wanted[SUBMITTER]["schedulingGates"] = gates
        return super().write_admission(obj, wanted)


# ---------------------------------------------------------------- resizing (elastic, planner.cycle.elastic)

def worker_groups(cluster: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod set name (the groupName lowercased) -> its worker group, in a RayCluster object (the same dicts)."""
    spec = cluster.get("spec")
    groups = spec.get("workerGroupSpecs") if isinstance(spec, dict) else None
    return {g["groupName"].lower(): g for g in groups or () if isinstance(g, dict) and isinstance(g.get("groupName"), str)}


def group_replicas(group: Mapping[str, Any]) -> int:
    """A worker group's `replicas` as Kueue counts it (absent: 1)."""
    replicas = group.get("replicas", 1)
    return replicas if type(replicas) is int else -1


def resize_refusal(cluster: Mapping[str, Any], counts: Mapping[str, tuple[int, int]]) -> str | None:
    """Why the worker groups of `cluster` cannot go from `from` to `to` pods (pod set -> (from, to)):
    a group it lacks, of several hosts a replica, or at a size that is neither (changed by
    someone else since the plan was made). None: it can."""
    name = (cluster.get("metadata") or {}).get("name")
    groups = worker_groups(cluster)
    for pod_set, (old, new) in sorted(counts.items()):
        group = groups.get(pod_set)
        if group is None:
            return f"RayCluster {name} has no worker group {pod_set}"
        hosts = group.get("numOfHosts", 1)
        if type(hosts) is int and hosts > 1:
            return f"worker group {pod_set} of RayCluster {name} has numOfHosts {hosts}: its replicas are not single pods"
        if group_replicas(group) not in (old, new):
            return f"worker group {pod_set} of RayCluster {name} has {group.get('replicas')} replicas, not {old}"
    return None


def write_resize(cluster: dict[str, Any], counts: Mapping[str, int], delete: Mapping[str, list[str]]) -> None:
    """Set each worker group's `replicas` (pod set -> pods) and name the pods KubeRay is to
    delete in `scaleStrategy.workersToDelete` (pod set -> pod names, added to any named
    before), in one RayCluster object: the write Ray's autoscaler makes. With autoscaling on,
    KubeRay deletes only the pods named there when replicas drop (never a random one)."""
    groups = worker_groups(cluster)
    for pod_set, count in counts.items():
        group = groups[pod_set]
        group["replicas"] = count
        names = delete.get(pod_set)
        if names:
            strategy = group.get("scaleStrategy")
            if not isinstance(strategy, dict):
                strategy = group["scaleStrategy"] = {}
            named = [n for n in strategy.get("workersToDelete") or () if isinstance(n, str)]
            strategy["workersToDelete"] = named + [n for n in names if n not in named]
