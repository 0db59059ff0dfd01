"""Seeded, deterministic snapshots of realistic GPU clusters (REFERENCE §2 form).

`generate(spec)` returns one `kind: List` as a plain dict, exactly as `kubectl get
-o json` would print the objects: Namespaces, Nodes (topology labels, allocatable,
Ready), one Kueue v1beta2 Topology, ResourceFlavors tied to it, Cohorts (one, or a
two-level tree), one ClusterQueue + LocalQueue per team, WorkloadPriorityClasses,
batch/v1 Jobs and jobset.x-k8s.io/v1alpha2 JobSets. Pure: no I/O and no clock;
the same spec (seed included) gives the same dict, so the same JSON bytes
(`stowplan generate` does the writing).

What it draws, all from one `random.Random(seed)`:

- **Cluster.** `fanout[i]` domains of `levels[i]` inside each domain of the level
  above (the last level is `kubernetes.io/hostname`, its fan-out the nodes per
  leaf domain). Nodes are numbered in topology order, so every domain is a
  contiguous range; label values are the path, e.g. `b02-r07` and node `b02-r07-n05`.
  One GPU flavor, optionally a second GPU type on the last top-level domains, or
  `gpu_flavors`: any number, each on a weighted share of the top-level domains.
- **Queues.** `teams` ClusterQueues in cohort `org` (or in `cohort_groups`
  sub-cohorts of it, each optionally with `cohort_subgroups` of its own), nominal
  quotas splitting `quota_share` of each flavor's GPUs among the queues that list it
  (cpu and memory in the nodes' proportion) with random weights; half have a
  `borrowingLimit` (= nominal; `borrowing_limit` x nominal), 30% a `lendingLimit`
  (= nominal / 2; `lending_limit` x nominal), and
  `cohort_limit_share` of the cohorts a borrowingLimit of their own. Queues list
  every flavor in the spec's order unless `flavor_order` / `subset_share` say
  otherwise. Preemption: LowerPriority within the queue, reclaim Any, borrow
  LowerPriority up to the middle priority (or drawn per queue: `policy_mix`);
  BestEffortFIFO (or StrictFIFO: `strict_fifo_share`).
- **Jobs.** Small jobs follow the Philly mix (1 GPU 70%, 2: 10%, 4: 15%, 8: 5%),
  some as sweeps of 1-GPU pods (a few elastic); `multi_node_share` of workloads are
  multi-node training jobs of 16 to 2,048 GPUs (whole-node pods) with Kueue TAS
  annotations: required or preferred at the finest level that holds them, some with
  slices at the leaf domain, a share of them JobSets (launcher + workers, one
  pod-set group when required). Priorities from WorkloadPriorityClasses by share.
- **State.** Pending jobs are suspended, created over the last `history_hours`.
  Running ones are unsuspended with `stowplan.io/assignment` (REFERENCE §2),
  `stowplan.io/admitted-at` (runtimes after Philly's duration mix: 80% 30 min-17 h,
  20% 17 h-7 days), mostly a `stowplan.io/checkpointed-at`, a few
  `stowplan.io/non-preemptible`. They are placed within node capacity, within their
  queue's nominal quota (so no queue borrows before the plan), and by their own
  topology request (required: one domain; slices whole). Multi-node running work
  takes at most `running_large_budget` of each queue's nominal, so small jobs fit.
  If quota or nodes run out, fewer jobs run than asked (`generate` never overfills).

Performance: objects are built directly as dicts (no templates deep-copied); the
container `resources` dict of each pod shape is shared between jobs of that shape,
which JSON output cannot tell apart (do not mutate the result in place).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import math
import random
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence
from planner.k8s.annotations import (
    ADMITTED_AT, ASSIGNMENT, CHECKPOINTED_AT, GENERATOR, GROUP, MIN_PARALLELISM, NON_PREEMPTIBLE, PREFERRED,
    PRIORITY_LABEL, QUEUE_LABEL, REQUIRED, SLICE_SIZE, SLICE_TOPOLOGY, SNAPSHOT_TIME, UNCONSTRAINED,
)

HOSTNAME = "kubernetes.io/hostname"
DATACENTER = "cloud.provider.com/topology-datacenter"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
KUEUE = "kueue.x-k8s.io/v1beta2"

PHILLY = ((1, 70), (2, 10), (4, 15), (8, 5))
MULTI_NODE_SIZES = ((16, 30), (32, 25), (64, 20), (128, 12), (256, 7), (512, 3), (1024, 2), (2048, 1))
PRIORITIES = (("production", 1000, 0.15), ("standard", 100, 0.55), ("best-effort", 0, 0.30))
TEAM_NAMES = ("llm", "vision", "speech", "recsys", "search", "ads", "robotics", "research",
              "safety", "infra", "multimodal", "video", "translation", "bio", "code", "agents")
SMALL_WORDS = ("finetune", "eval", "train", "ablation", "hpo", "distill", "bench", "notebook", "embed", "rl")
LARGE_WORDS = ("pretrain", "train", "sft", "rlhf", "moe")
IMAGES = ("nvcr.io/nvidia/pytorch:25.10-py3", "nvcr.io/nvidia/nemo:25.09", "ghcr.io/acme/trainer:3.4",
          "ghcr.io/acme/eval-harness:1.9", "us-docker.pkg.dev/acme/ml/jax:0.7")
LEVEL_PREFIX = {DATACENTER: "dc", BLOCK: "b", RACK: "r", HOSTNAME: "n"}
STANDARD_LEVELS = {1: (HOSTNAME,), 2: (RACK, HOSTNAME), 3: (BLOCK, RACK, HOSTNAME),
                   4: (DATACENTER, BLOCK, RACK, HOSTNAME)}
# GPU flavor name -> its nodes' product label (gpu_flavors: a count takes the first N, in this order)
GPU_PRODUCTS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB", "l40s": "NVIDIA-L40S",
                "b200": "NVIDIA-B200", "h200": "NVIDIA-H200", "gb200": "NVIDIA-GB200"}
FLAVOR_ORDERS = ("same", "shuffled")
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _f(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class GeneratorSpec:
    """Everything `generate` draws from; each field's `doc` metadata says what it does.

    The defaults are the S preset (512 nodes, 300 pending + 300 running).
    """

    seed: int = _f(0, "seed of the one random.Random everything is drawn from")
    levels: tuple[str, ...] = _f((BLOCK, RACK, HOSTNAME),
                                 "topology node labels, coarse to fine; the last must be kubernetes.io/hostname")
    fanout: tuple[int, ...] = _f((4, 8, 16), "domains of each level inside one domain of the level above (the "
                                             "first: how many in all; the last: nodes per leaf domain); "
                                             "nodes = their product")
    gpus_per_node: int = _f(8, "GPUs per node (allocatable); multi-node jobs use whole nodes")
    cpu_per_node: int = _f(192, "allocatable cpu cores per node")
    memory_per_node_gi: int = _f(2000, "allocatable memory per node, in Gi")
    pods_per_node: int = _f(110, "allocatable pods per node")
    gpu_resource: str = _f("nvidia.com/gpu", "the GPU extended resource name")
    flavor_label: str = _f("nvidia.com/gpu.product", "node label whose value selects a flavor's nodes")
    flavor: str = _f("h100", "the (first) GPU ResourceFlavor, tied to the Topology")
    gpu_product: str = _f("NVIDIA-H100-80GB-HBM3", "flavor_label value of the first flavor's nodes")
    second_flavor: str = _f("", "a second GPU flavor on the last top-level domains ('' for none); "
                                "queues list it after the first")
    second_gpu_product: str = _f("NVIDIA-A100-SXM4-80GB", "flavor_label value of the second flavor's nodes")
    second_flavor_share: float = _f(0.25, "share of top-level domains with the second flavor (at least one, "
                                          "at most all but one)")
    gpu_flavors: str = _f("", "GPU flavors as NAME[:WEIGHT], comma-separated, in the order queues prefer them, "
                              "or a count N for the first N of " + ", ".join(GPU_PRODUCTS) + "; when set they "
                              "replace flavor and second_flavor: each takes its WEIGHT's share (default 1) of "
                              "the top-level domains, at least one, its nodes labelled with its product "
                              "(a known name's, else the name in capitals)")
    flavor_order: str = _f("same", "same: every ClusterQueue lists the flavors in their order; shuffled: each "
                                   "ClusterQueue in an order of its own")
    subset_share: float = _f(0.0, "with several flavors: share of ClusterQueues (rounded, at least one when > 0) "
                                  "that list only some of them (each flavor stays on at least one queue)")
    topology_name: str = _f("default", "name of the Kueue Topology")
    teams: int = _f(8, "teams: one Namespace, LocalQueue and ClusterQueue each")
    cohort_groups: int = _f(0, "0: every ClusterQueue in cohort org; k > 0: a two-level tree, org with k "
                               "sub-cohorts org-1..org-k, teams round-robin")
    cohort_subgroups: int = _f(0, "with cohort_groups k > 0: each org-g gets this many sub-cohorts org-g-1.. "
                                  "(a three-level tree); team t goes to org-(t mod k + 1)-(t div k mod this + 1)")
    cohort_limit_share: float = _f(0.0, "share of the cohorts below org (rounded, at least one when > 0) with "
                                        "resourceGroups of their own: nominal 0, borrowingLimit = borrowing_limit "
                                        "x the nominal of their subtree's queues")
    quota_share: float = _f(1.0, "nominal quotas (queues plus org's own) add up to this share of each "
                                 "flavor's GPUs; cpu and memory in the nodes' proportion")
    root_quota_share: float = _f(0.0, "share of that quota held by cohort org itself")
    borrowing_share: float = _f(0.5, "share of queues (rounded, at least one) with a borrowingLimit (the "
                                     "others: unlimited)")
    borrowing_limit: float = _f(1.0, "borrowingLimit as a multiple of nominal (0: the queue never borrows)")
    lending_share: float = _f(0.3, "share of queues (rounded, at least one) with a lendingLimit (the others: "
                                   "no limit)")
    lending_limit: float = _f(0.5, "lendingLimit as a share of nominal (0: the queue lends nothing)")
    policy_mix: float = _f(0.0, "share of ClusterQueues (rounded, at least one when > 0) whose policies are drawn "
                                "(the others: withinClusterQueue LowerPriority, reclaimWithinCohort Any, "
                                "borrowWithinCohort LowerPriority up to the middle priority, whenCanBorrow "
                                "MayStopSearch, whenCanPreempt TryNextFlavor): withinClusterQueue, "
                                "reclaimWithinCohort, borrowWithinCohort (Never, or LowerPriority with or "
                                "without a maxPriorityThreshold; Never when reclaim is Never, as Kueue requires) "
                                "and flavorFungibility, each uniformly")
    strict_fifo_share: float = _f(0.0, "share of ClusterQueues (rounded, at least one when > 0) with "
                                       "queueingStrategy StrictFIFO (the others: BestEffortFIFO)")
    pending: int = _f(300, "pending (suspended) workloads")
    running: int = _f(300, "running workloads asked for (fewer if quota or nodes run out)")
    multi_node_share: float = _f(0.1, "share of workloads that are multi-node training jobs, by count")
    multi_node_sizes: tuple[tuple[int, int], ...] = _f(MULTI_NODE_SIZES, "multi-node job sizes as "
                                                                         "GPUS:WEIGHT pairs")
    max_job_gpus: int = _f(2048, "largest multi-node job (also at most half the cluster's GPUs)")
    required_share: float = _f(0.5, "multi-node jobs with podset-required-topology at the finest level that "
                                    "holds them (the others: podset-preferred-topology)")
    slice_share: float = _f(0.4, "multi-node jobs spanning leaf domains with podset-slice-required-topology "
                                 "at the leaf level (slice size: the largest divisor of the pod count that "
                                 "fits a leaf)")
    jobset_share: float = _f(0.3, "multi-node jobs that are JobSets (launcher + workers; one pod-set group "
                                  "when required)")
    small_sizes: tuple[tuple[int, int], ...] = _f(PHILLY, "small job sizes as GPUS:WEIGHT pairs (Philly)")
    sweep_share: float = _f(0.2, "small multi-GPU jobs submitted as N pods of 1 GPU")
    elastic_share: float = _f(0.3, "pending sweeps of 4+ pods with job-min-parallelism N/2")
    unconstrained_share: float = _f(0.1, "single-pod jobs with podset-unconstrained-topology: true")
    priorities: tuple[tuple[str, int, float], ...] = _f(PRIORITIES, "WorkloadPriorityClasses as "
                                                                    "NAME:VALUE:SHARE triples")
    history_hours: float = _f(72.0, "pending jobs were created over this many hours before now")
    running_multi_node_share: float = _f(0.15, "share of running workloads drawn as multi-node jobs (by "
                                                "count, within running_large_budget)")
    running_large_budget: float = _f(0.75, "running multi-node work takes at most this share of a queue's "
                                          "nominal")
    checkpoint_share: float = _f(0.6, "running jobs with stowplan.io/checkpointed-at (multi-node: 0.9)")
    non_preemptible_share: float = _f(0.02, "running jobs with stowplan.io/non-preemptible: true")
    now: str = _f("2026-12-01T12:00:00Z", "planning time, written as stowplan.io/snapshot-time")
    fair_sharing: bool = _f(False, "write Kueue's Configuration (ConfigMap kueue-system/kueue-manager-config) "
                                   "with fairSharing on, both preemption strategies")
    fair_weights: str = _f("", "ClusterQueues' spec.fairSharing.weight, comma-separated, cycled over the "
                               "teams ('': none set, weight 1)")
    idle_teams: int = _f(0, "the last N teams have quota but no work (their nominal is lendable)")

    @property
    def nodes(self) -> int:
        return math.prod(self.fanout)

    def validate(self) -> None:
        self._bounded()
        if len(self.levels) != len(self.fanout) or not self.levels:
            raise ValueError(f"levels ({len(self.levels)}) and fanout ({len(self.fanout)}) must have the same "
                             "length, at least 1")
        if self.levels[-1] != HOSTNAME:
            raise ValueError(f"the last level must be {HOSTNAME}")
        if len(set(self.levels)) != len(self.levels):
            raise ValueError("levels must be distinct")
        if any(f < 1 for f in self.fanout):
            raise ValueError("every fanout must be at least 1")
        if self.gpus_per_node < 1 or self.cpu_per_node < 8 or self.memory_per_node_gi < 8:
            raise ValueError("nodes need at least 1 GPU, 8 cpu and 8Gi")
        if self.teams < 1 or self.cohort_groups < 0 or self.cohort_groups > self.teams:
            raise ValueError("teams >= 1 and 0 <= cohort_groups <= teams")
        if self.second_flavor and (self.fanout[0] < 2 or len(self.levels) < 2):
            raise ValueError("a second flavor needs at least 2 top-level domains")
        if self.second_flavor == self.flavor:
            raise ValueError("second_flavor must differ from flavor")
        self._check_gpu_flavors()
        if self.gpu_flavors.strip() and self.second_flavor:
            raise ValueError("gpu_flavors replaces flavor and second_flavor: set gpu_flavors or second_flavor")
        if self.flavor_order not in FLAVOR_ORDERS:
            raise ValueError(f"flavor_order must be one of {', '.join(FLAVOR_ORDERS)}")
        if self.cohort_subgroups < 0 or (self.cohort_subgroups and not self.cohort_groups):
            raise ValueError("cohort_subgroups needs cohort_groups > 0")
        if self.cohort_groups * max(1, self.cohort_subgroups) > self.teams:
            raise ValueError("cohort_groups x cohort_subgroups must be at most teams (every leaf cohort gets a "
                             "ClusterQueue)")
        if self.borrowing_limit < 0:
            raise ValueError("borrowing_limit must be >= 0")
        if not 0 <= self.idle_teams < self.teams:
            raise ValueError("0 <= idle_teams < teams")
        for text in filter(None, (v.strip() for v in self.fair_weights.split(","))):
            if not 0.0 <= float(text) <= 1e6:
                raise ValueError("fair_weights: numbers from 0 to 1,000,000")
        if self.pending < 0 or self.running < 0:
            raise ValueError("pending and running must be >= 0")
        if not self.priorities or not self.small_sizes or not self.multi_node_sizes:
            raise ValueError("priorities, small_sizes and multi_node_sizes must not be empty")
        for name in ("quota_share", "root_quota_share", "borrowing_share", "lending_share", "multi_node_share",
                     "required_share", "slice_share", "jobset_share", "sweep_share", "elastic_share",
                     "unconstrained_share", "running_multi_node_share", "running_large_budget", "checkpoint_share", "non_preemptible_share",
                     "second_flavor_share", "subset_share", "cohort_limit_share", "lending_limit", "policy_mix",
                     "strict_fifo_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        parse_time(self.now)

    def gpu_flavor_list(self) -> list[tuple[str, str, float]]:
        """gpu_flavors as (name, product label, weight), in the queues' order; [] when not set."""
        text = self.gpu_flavors.strip()
        if not text:
            return []
        if text.isdigit():
            names = list(GPU_PRODUCTS)[:int(text)]
            if not 1 <= int(text) <= len(GPU_PRODUCTS):
                raise ValueError(f"gpu_flavors: a count from 1 to {len(GPU_PRODUCTS)}, or names")
            return [(name, GPU_PRODUCTS[name], 1.0) for name in names]
        out = []
        for item in text.split(","):
            name, _, weight = (part.strip() for part in item.partition(":"))
            out.append((name, GPU_PRODUCTS.get(name, name.upper()), float(weight) if weight else 1.0))
        return out

    def _check_gpu_flavors(self) -> None:
        flavors = self.gpu_flavor_list()
        names = [name for name, _, _ in flavors]
        if len(set(names)) != len(names) or not all(_DNS_LABEL.fullmatch(name) for name in names):
            raise ValueError("gpu_flavors: distinct lower-case names (letters, digits, '-')")
        if any(not (math.isfinite(w) and 0 < w <= 1e6) for _, _, w in flavors):
            raise ValueError("gpu_flavors: weights are numbers above 0, at most 1,000,000")
        if len(flavors) > self.fanout[0]:
            raise ValueError(f"gpu_flavors: {len(flavors)} flavors need as many top-level domains "
                             f"(fanout starts with {self.fanout[0]})")


    def _bounded(self) -> None:
        """Sizes a machine can hold (generate builds the whole snapshot in memory) and finite numbers;
        checked first, so a typo such as --nodes 100000x100000x100000 is refused at once."""
        if len(self.fanout) > MAX_LEVELS or any(f > MAX_NODES for f in self.fanout) or self.nodes > MAX_NODES:
            raise ValueError(f"at most {MAX_NODES:,} nodes in at most {MAX_LEVELS} levels "
                             f"(asked for {self.nodes:,} in {len(self.fanout)}); XL has 65,536")
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number")
            if value > limit:
                raise ValueError(f"{name} must be at most {limit:,}, got {value:,}")
        for name in ("small_sizes", "multi_node_sizes"):
            pairs = getattr(self, name)
            if len(pairs) > 64 or any(not 1 <= gpus <= MAX_JOB_GPUS or not 0 <= weight <= 10**6
                                      for gpus, weight in pairs):
                raise ValueError(f"{name}: at most 64 GPUS:WEIGHT pairs, GPUS 1 to {MAX_JOB_GPUS:,}, "
                                 "WEIGHT 0 to 1,000,000")
        if len(self.priorities) > 64 or any(not -(2**31) <= value < 2**31 or not math.isfinite(share)
                                            for _, value, share in self.priorities):
                raise ValueError("priorities: at most 64 NAME:VALUE:SHARE triples, VALUE an int32, SHARE finite")


MAX_NODES = 262_144           # four times XL
MAX_LEVELS = 8
MAX_JOB_GPUS = 1_048_576
# field -> largest value generate accepts (the presets stay far below)
LIMITS: dict[str, float] = {
    "pending": 1_000_000, "running": 1_000_000, "teams": 10_000, "cohort_groups": 10_000,
    "gpus_per_node": 1024, "cpu_per_node": 100_000, "memory_per_node_gi": 1_000_000, "pods_per_node": 10_000,
    "max_job_gpus": MAX_JOB_GPUS, "history_hours": 100_000.0,
    **{name: 1.0 for name in ("quota_share", "root_quota_share", "borrowing_share", "lending_share",
                              "multi_node_share", "required_share", "slice_share", "jobset_share", "sweep_share",
                              "elastic_share", "unconstrained_share", "running_multi_node_share",
                              "running_large_budget", "checkpoint_share", "non_preemptible_share",
                              "second_flavor_share", "subset_share", "cohort_limit_share", "lending_limit",
                              "policy_mix", "strict_fifo_share")},
    "cohort_subgroups": 10_000, "borrowing_limit": 1000.0,
}


# The fixtures' and benchmarks' shapes. Parameters not named keep the defaults above.
PRESETS: dict[str, dict[str, Any]] = {
    "S": dict(fanout=(4, 8, 16), pending=300, running=300),
    "M": dict(fanout=(16, 16, 16), teams=16, pending=2000, running=2000),
    "L": dict(levels=STANDARD_LEVELS[4], fanout=(4, 8, 32, 16), teams=32, cohort_groups=4,
              pending=10000, running=10000),
    "XL": dict(levels=STANDARD_LEVELS[4], fanout=(8, 16, 32, 16), teams=64, cohort_groups=8,
               pending=40000, running=40000),
    # Meta-like: 8-GPU hosts, racks of 16, blocks of 256 hosts (2,048 GPUs); 1,024 nodes.
    "meta-like": dict(seed=1, fanout=(4, 16, 16), teams=6, pending=300, running=200,
                      multi_node_share=0.15, running_multi_node_share=0.35, max_job_gpus=1024),
    # NVL72-like: GB200 trays of 4 GPUs, 18 per rack (72 GPUs in one NVLink domain), 16 racks.
    "nvl72": dict(seed=2, fanout=(2, 8, 18), gpus_per_node=4, cpu_per_node=144, memory_per_node_gi=880,
                  flavor="gb200", gpu_product="NVIDIA-GB200", teams=4, pending=150, running=90,
                  multi_node_share=0.2, multi_node_sizes=((16, 20), (32, 20), (64, 15), (72, 25), (144, 12),
                                                          (288, 8)),
                  required_share=0.7, slice_share=0.6, max_job_gpus=288),
    # Fair sharing: 4 teams weighted 1/3/2/1 in a two-level cohort tree whose root holds half
    # the quota (the pool they share), the last team idle; 128 nodes, 1,024 GPUs.
    "fair": dict(seed=4, fanout=(2, 8, 8), teams=4, cohort_groups=2, root_quota_share=0.5,
                 borrowing_share=0.0, lending_share=0.0, pending=400, running=120, multi_node_share=0.05,
                 running_multi_node_share=0.1, max_job_gpus=64, fair_sharing=True, fair_weights="1,3,2,1",
                 idle_teams=1),
    # Four levels: datacenter / block / rack / host, 192 nodes, A100s in the second datacenter,
    # queues in a two-level cohort tree with quota at the root.
    "four-level": dict(seed=3, levels=STANDARD_LEVELS[4], fanout=(2, 2, 4, 12), teams=6, cohort_groups=2,
                       second_flavor="a100", second_flavor_share=0.5, root_quota_share=0.1,
                       pending=120, running=80, multi_node_share=0.15, running_multi_node_share=0.3,
                       max_job_gpus=512),
    # Fragmented (issue 28's benchmark): 8-GPU hosts, racks of 8 (64 GPUs), 300 small jobs
    # spread over every rack, 20 pending jobs that require half a rack or a whole one, all
    # of one priority (so no preemption frees a rack: only moving running work can).
    "fragmented": dict(seed=4, fanout=(2, 8, 8), teams=4, pending=20, running=300, multi_node_share=1.0,
                       multi_node_sizes=((32, 1), (64, 2)), max_job_gpus=64, required_share=1.0,
                       slice_share=0.0, jobset_share=0.0, running_multi_node_share=0.0, checkpoint_share=0.9,
                       priorities=(("standard", 100, 1.0),)),
}


def preset(name: str, **overrides: Any) -> GeneratorSpec:
    """The named preset (PRESETS), with fields overridden."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}: one of {', '.join(PRESETS)}")
    return dataclasses.replace(GeneratorSpec(**PRESETS[name]), **overrides)


_PAIRS = ("multi_node_sizes", "small_sizes")


def format_value(value: Any) -> str:
    """A parameter's value as --set takes it (inverse of parse_setting)."""
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return ",".join(":".join(str(v) for v in item) for item in value)
    if isinstance(value, tuple):
        return ("x" if value and isinstance(value[0], int) else ",").join(str(v) for v in value)
    return str(value)


def parse_setting(spec: GeneratorSpec, key: str, text: str) -> dict[str, Any]:
    """`key=text` from the command line -> fields to replace (ValueError when wrong).

    `nodes` (or `fanout`) is the fan-out, AxBxC; with another number of levels than
    `spec.levels`, the standard levels of that depth replace them.
    """
    names = {f.name: f for f in dataclasses.fields(GeneratorSpec)}
    try:
        if key in ("nodes", "fanout"):
            fanout = tuple(_whole(v, "AxBx... of whole numbers above 0, e.g. 8x16x16", low=1)
                           for v in text.replace(",", "x").split("x"))
            out: dict[str, Any] = {"fanout": fanout}
            if len(fanout) != len(spec.levels):
                if len(fanout) not in STANDARD_LEVELS:
                    raise ValueError(f"{len(fanout)} levels: give levels=... too (standard levels exist for 1 to 4)")
                out["levels"] = STANDARD_LEVELS[len(fanout)]
            return out
        if key not in names:
            raise ValueError(f"unknown parameter {key!r}; parameters: {', '.join(names)}")
        default = names[key].default
        if key == "levels":
            return {key: tuple(v.strip() for v in text.split(",") if v.strip())}
        if key in _PAIRS:
            pairs = []
            for item in text.split(","):
                gpus, _, weight = item.partition(":")
                pairs.append((_whole(gpus, "GPUS:WEIGHT,... of whole numbers"),
                               _whole(weight or "1", "GPUS:WEIGHT,... of whole numbers")))
            return {key: tuple(pairs)}
        if key == "priorities":
            triples = []
            for item in text.split(","):
                parts = item.split(":")
                if len(parts) != 3 or not parts[0].strip():
                    raise ValueError("expected NAME:VALUE:SHARE,...")
                name, value, share = parts
                triples.append((name.strip(), _whole(value, "NAME:VALUE:SHARE,... with a whole VALUE"),
                                _real(share, "NAME:VALUE:SHARE,... with a number SHARE")))
            return {key: tuple(triples)}
        if isinstance(default, bool):
            return {key: text.lower() in ("1", "true", "yes")}
        if isinstance(default, int):
            return {key: _whole(text, "a whole number")}
        if isinstance(default, float):
            return {key: _real(text, "a number")}
        return {key: text}
    except ValueError as error:
        raise ValueError(f"{key}={text!r}: {error}") from None


def _whole(text: str, expected: str, low: int | None = None) -> int:
    """An integer from the command line, or a ValueError that says what was expected
    (not Python's `invalid literal for int() with base 10`)."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"expected {expected}") from None
    if low is not None and value < low:
        raise ValueError(f"expected {expected}")
    return value


def _real(text: str, expected: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"expected {expected}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected {expected} (finite)")
    return value


# ---------------------------------------------------------------- helpers

def parse_time(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cpu_text(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _weighted(rng: random.Random, pairs: Sequence[tuple[Any, float]]) -> Any:
    total = sum(w for _, w in pairs)
    x = rng.random() * total
    for value, weight in pairs:
        x -= weight
        if x < 0:
            return value
    return pairs[-1][0]


def _split(total: int, weights: Sequence[float]) -> list[int]:
    """`total` items in len(weights) parts by weight, at least one each (largest remainder)."""
    spare = total - len(weights)
    raw = [spare * w / sum(weights) for w in weights]
    counts = [1 + int(r) for r in raw]
    by_remainder = sorted(range(len(weights)), key=lambda i: (int(raw[i]) - raw[i], i))
    for i in by_remainder[:total - sum(counts)]:
        counts[i] += 1
    return counts


@dataclass
class _PodSet:
    name: str
    count: int
    gpus: int             # per pod
    cpu: int              # milli per pod
    mem: int              # Gi per pod
    annotations: dict[str, str]
    replicas: int = 1     # JobSet replicatedJob replicas (count = replicas x parallelism)
    min_count: int | None = None


@dataclass
class _Job:
    kind: str
    team: int
    name: str
    priority: str
    pod_sets: list[_PodSet]
    large: bool
    placed: list[tuple[str, dict[int, int]]] = field(default_factory=list)   # (pod set, node -> pods)
    flavor: str = ""


class _Cluster:
    """Nodes in topology order with free capacity, and whole-free-node counts per leaf domain."""

    def __init__(self, spec: GeneratorSpec):
        self.spec = spec
        n = spec.nodes
        self.n = n
        self.gpn = spec.gpus_per_node
        self.cpu_node = spec.cpu_per_node * 1000
        self.mem_node = spec.memory_per_node_gi
        self.free_gpu = [self.gpn] * n
        self.free_cpu = [self.cpu_node] * n
        self.free_mem = [self.mem_node] * n
        self.free_pods = [spec.pods_per_node] * n
        # span[k]: nodes in one domain of level k (the hostname level spans 1)
        self.span = [math.prod(spec.fanout[k + 1:]) for k in range(len(spec.fanout))]
        self.leaf = self.span[-2] if len(self.span) > 1 else 1       # nodes per leaf (e.g. rack) domain
        self.leaf_level = len(spec.levels) - 2                        # -1 when hostname is the only level
        self.whole = [self.leaf] * (n // self.leaf)                    # whole free nodes per leaf domain
        self.names, self.values = self._names()

    def _names(self) -> tuple[list[str], list[list[str]]]:
        spec = self.spec
        parts_per_level = []
        for k, (level, fan) in enumerate(zip(spec.levels, spec.fanout)):
            prefix = LEVEL_PREFIX.get(level, f"l{k}-")
            width = len(str(fan))
            parts_per_level.append([f"{prefix}{i + 1:0{width}d}" for i in range(fan)])
        values: list[list[str]] = [[] for _ in spec.levels]
        names = []
        for i in range(self.n):
            path = []
            for k, fan in enumerate(spec.fanout):
                path.append(parts_per_level[k][(i // self.span[k]) % fan])
            text = ""
            for k, part in enumerate(path):
                text = part if k == 0 else f"{text}-{part}"
                values[k].append(text)
            names.append(text)
        return names, values

    def is_whole(self, i: int, cpu: int, mem: int) -> bool:
        return self.free_gpu[i] == self.gpn and self.free_cpu[i] >= cpu and self.free_mem[i] >= mem \
            and self.free_pods[i] >= 1

    def fits(self, i: int, gpus: int, cpu: int, mem: int) -> bool:
        return self.free_gpu[i] >= gpus and self.free_cpu[i] >= cpu and self.free_mem[i] >= mem \
            and self.free_pods[i] >= 1

    def take(self, i: int, gpus: int, cpu: int, mem: int, log: list[tuple[int, int, int, int]]) -> None:
        self.free_gpu[i] -= gpus
        self.free_cpu[i] -= cpu
        self.free_mem[i] -= mem
        self.free_pods[i] -= 1
        log.append((i, gpus, cpu, mem))
        self._recount(i)

    def undo(self, log: list[tuple[int, int, int, int]]) -> None:
        for i, gpus, cpu, mem in reversed(log):
            self.free_gpu[i] += gpus
            self.free_cpu[i] += cpu
            self.free_mem[i] += mem
            self.free_pods[i] += 1
            self._recount(i)
        log.clear()

    def _recount(self, i: int) -> None:
        leaf = i // self.leaf
        start = leaf * self.leaf
        gpn, fg = self.gpn, self.free_gpu
        self.whole[leaf] = sum(1 for j in range(start, start + self.leaf) if fg[j] == gpn)


class _Generator:
    def __init__(self, spec: GeneratorSpec):
        spec.validate()
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.now = parse_time(spec.now)
        self.cluster = _Cluster(spec)
        self.version = 1000
        self.gpn = spec.gpus_per_node
        # job shapes: at most 3/4 of a node's cpu and memory per GPU, so GPUs bind first
        self.cpu_per_gpu = max(1, spec.cpu_per_node * 3 // 4 // self.gpn) * 1000
        self.mem_per_gpu = max(1, spec.memory_per_node_gi * 3 // 4 // self.gpn)
        self.launcher_cpu = min(4000, spec.cpu_per_node * 1000 // 8)
        self.launcher_mem = min(16, spec.memory_per_node_gi // 8)
        self.resources_cache: dict[tuple[int, int, int], dict[str, Any]] = {}
        self.counter = 0
        self.partly: list[int] = []   # nodes small pods went to (packing bias)

    # ------------------------------------------------------------ ids

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def meta(self, name: str, created: float, namespace: str | None = None,
             labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        self.version += 1
        meta: dict[str, Any] = {}
        if annotations:
            meta["annotations"] = annotations
        meta["creationTimestamp"] = _stamp(created)
        if labels:
            meta["labels"] = labels
        meta["name"] = name
        if namespace is not None:
            meta["namespace"] = namespace
        meta["resourceVersion"] = str(self.version)
        meta["uid"] = self.uid()
        return meta

    # ------------------------------------------------------------ the recipe

    def build(self) -> dict[str, Any]:
        spec = self.spec
        self.setup_flavors()
        self.setup_teams()
        items: list[dict[str, Any]] = []
        items += self.namespaces()
        items += self.nodes()
        items += self.kueue_objects()
        if spec.fair_sharing:
            items.append(self.kueue_configuration())
        running = self.running_jobs()
        pending = [self.draw_job(self.pick_team(), running=False) for _ in range(spec.pending)]
        for job in running:
            items.append(self.job_object(job, running=True))
        for job in pending:
            items.append(self.job_object(job, running=False))
        generator = {"seed": spec.seed, "nodes": spec.nodes, "pending": len(pending), "running": len(running),
                     "runningAsked": spec.running}
        return {
            "apiVersion": "v1",
            "items": items,
            "kind": "List",
            "metadata": {"annotations": {SNAPSHOT_TIME: spec.now,
                                         GENERATOR: json.dumps(generator, separators=(",", ":"))},
                         "resourceVersion": ""},
        }

    # ------------------------------------------------------------ cluster

    def setup_flavors(self) -> None:
        """Flavor name -> (first node, end node, product label); flavors in queue order."""
        spec = self.spec
        n = self.cluster.n
        self.flavors: list[tuple[str, int, int, str]] = []
        many = spec.gpu_flavor_list()
        if many:
            counts = _split(spec.fanout[0], [weight for _, _, weight in many])
            cuts = [c * self.cluster.span[0] for c in itertools.accumulate(counts, initial=0)]
            for (name, product, _), lo, hi in zip(many, cuts, cuts[1:]):
                self.flavors.append((name, lo, hi, product))
        elif spec.second_flavor:
            top = spec.fanout[0]
            second = min(top - 1, max(1, round(top * spec.second_flavor_share)))
            cut = (top - second) * self.cluster.span[0]
            self.flavors.append((spec.flavor, 0, cut, spec.gpu_product))
            self.flavors.append((spec.second_flavor, cut, n, spec.second_gpu_product))
        else:
            self.flavors.append((spec.flavor, 0, n, spec.gpu_product))
        self.nodes_of = {name: (lo, hi) for name, lo, hi, _ in self.flavors}

    def namespaces(self) -> list[dict[str, Any]]:
        created = self.now - 90 * 86400
        out = []
        for team in self.team_names:
            out.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": self.meta(team, created, labels={"kubernetes.io/metadata.name": team}),
                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        return out

    def nodes(self) -> list[dict[str, Any]]:
        spec, cl = self.spec, self.cluster
        created = self.now - 60 * 86400
        allocatable = {"cpu": str(spec.cpu_per_node), "ephemeral-storage": "7000Gi",
                       "memory": f"{spec.memory_per_node_gi}Gi", spec.gpu_resource: str(spec.gpus_per_node),
                       "pods": str(spec.pods_per_node)}
        capacity = {"cpu": str(spec.cpu_per_node + 16 * (spec.cpu_per_node >= 64)), "ephemeral-storage": "7450Gi",
                    "memory": f"{spec.memory_per_node_gi + 48}Gi", spec.gpu_resource: str(spec.gpus_per_node),
                    "pods": str(spec.pods_per_node)}
        conditions = [{"lastHeartbeatTime": spec.now, "lastTransitionTime": _stamp(created),
                       "message": "kubelet is posting ready status", "reason": "KubeletReady",
                       "status": "True", "type": "Ready"}]
        status = {"allocatable": allocatable, "capacity": capacity, "conditions": conditions}
        out = []
        levels = spec.levels[:-1]
        for flavor, lo, hi, product in self.flavors:
            for i in range(lo, hi):
                name = cl.names[i]
                labels = {spec.flavor_label: product}
                for k, level in enumerate(levels):
                    labels[level] = cl.values[k][i]
                labels[HOSTNAME] = name
                labels["node.kubernetes.io/instance-type"] = f"{flavor}-x{spec.gpus_per_node}"
                out.append({"apiVersion": "v1", "kind": "Node",
                            "metadata": self.meta(name, created, labels=labels),
                            "spec": {}, "status": status})
        return out

    # ------------------------------------------------------------ queues

    def setup_teams(self) -> None:
        spec, rng = self.spec, self.rng
        names = []
        for t in range(spec.teams):
            base = TEAM_NAMES[t % len(TEAM_NAMES)]
            names.append(f"team-{base}" if t < len(TEAM_NAMES) else f"team-{base}-{t // len(TEAM_NAMES) + 1}")
        self.team_names = names
        weights = [rng.uniform(0.5, 2.0) for _ in names]
        total = sum(weights)
        self.team_weights = [w / total for w in weights]
        self.borrowing = self.some(spec.borrowing_share, len(names))
        self.lending = self.some(spec.lending_share, len(names))
        # What only the newer parameters draw comes after what every preset draws, so
        # that the presets' bytes stay as they were.
        self.queue_flavors = self.draw_queue_flavors()
        self.policies = [self.draw_policy() if mixed else None for mixed in self.some(spec.policy_mix, len(names))]
        self.strict = self.some(spec.strict_fifo_share, len(names))
        self.cohort_of = [self.cohort_name(t) for t in range(len(names))]
        below_org = self.cohort_names()[1:]
        self.limited = {c for c, chosen in zip(below_org, self.some(spec.cohort_limit_share, len(below_org)))
                        if chosen}
        self.set_nominal()
        # usage of running work per team and flavor: [gpu, cpu milli, mem Gi]
        self.usage = [{f: [0, 0, 0] for f, *_ in self.flavors} for _ in names]
        self.large_usage = [{f: 0 for f, *_ in self.flavors} for _ in names]

    def some(self, share: float, n: int) -> list[bool]:
        """round(share x n) of n items at random (at least one when share > 0; no draw when 0)."""
        k = min(n, max(1 if share > 0 else 0, round(share * n)))
        chosen = set(self.rng.sample(range(n), k)) if k else set()
        return [i in chosen for i in range(n)]

    def set_nominal(self) -> None:
        """Per flavor: the root's own nominal GPUs, and the rest split among the queues that
        list the flavor by their weights (largest weights take the remainder)."""
        spec, teams = self.spec, range(len(self.team_names))
        self.nominal: list[dict[str, int]] = [dict() for _ in teams]
        self.root_nominal: dict[str, int] = {}
        for flavor, lo, hi, _ in self.flavors:
            pool = int((hi - lo) * self.gpn * spec.quota_share)
            root = int(pool * spec.root_quota_share)
            self.root_nominal[flavor] = root
            rest = pool - root
            members = [t for t in teams if flavor in self.queue_flavors[t]]
            weight = {t: self.team_weights[t] for t in members}
            if len(members) < len(teams):   # renormalised over the queues that list the flavor
                listed = sum(weight.values())
                weight = {t: w / listed for t, w in weight.items()}
            shares = {t: int(rest * w) for t, w in weight.items()}
            order = sorted(members, key=lambda t: (-self.team_weights[t], t))
            for j in range(rest - sum(shares.values())):
                shares[order[j % len(order)]] += 1
            for t in teams:
                self.nominal[t][flavor] = shares.get(t, 0)

    def draw_queue_flavors(self) -> list[list[str]]:
        """Each queue's flavors in its order of preference: all of them in the spec's order,
        unless subset_share or flavor_order say otherwise; every flavor stays on a queue
        (its nodes would be no one's otherwise)."""
        spec, rng = self.spec, self.rng
        names = [f for f, *_ in self.flavors]
        lists = [list(names) for _ in self.team_names]
        if len(names) < 2:
            return lists
        for t, partial in enumerate(self.some(spec.subset_share, len(lists))):
            if partial:
                keep = set(rng.sample(names, rng.randint(1, len(names) - 1)))
                lists[t] = [f for f in names if f in keep]
        if spec.flavor_order == "shuffled":
            for flavors in lists:
                rng.shuffle(flavors)
        for i, flavor in enumerate(names):
            if not any(flavor in flavors for flavors in lists):
                lists[i % len(lists)].append(flavor)
        return lists

    def draw_policy(self) -> tuple[dict[str, Any], dict[str, str]]:
        """One ClusterQueue's preemption and flavorFungibility, each field uniformly (policy_mix).
        Kueue refuses borrowWithinCohort other than Never when reclaimWithinCohort is Never."""
        rng = self.rng
        within, reclaim = rng.choice(WITHIN_CLUSTER_QUEUE), rng.choice(RECLAIM_WITHIN_COHORT)
        borrow_kind, threshold = rng.randrange(3), rng.choice(sorted(v for _, v, _ in self.spec.priorities))
        borrow: dict[str, Any] = {"policy": "Never"}
        if reclaim != "Never" and borrow_kind:
            borrow = {"policy": "LowerPriority"}
            if borrow_kind == 2:
                borrow = {"maxPriorityThreshold": threshold, "policy": "LowerPriority"}
        fungibility = {"whenCanBorrow": rng.choice(("MayStopSearch", "TryNextFlavor")),
                       "whenCanPreempt": rng.choice(("TryNextFlavor", "MayStopSearch"))}
        return ({"borrowWithinCohort": borrow, "reclaimWithinCohort": reclaim, "withinClusterQueue": within},
                fungibility)

    def cohort_name(self, t: int) -> str:
        """Team t's cohort: org, org-G (round-robin over cohort_groups), or org-G-S."""
        groups, subgroups = self.spec.cohort_groups, self.spec.cohort_subgroups
        if not groups:
            return "org"
        group = f"org-{t % groups + 1}"
        return f"{group}-{t // groups % subgroups + 1}" if subgroups else group

    def cohort_names(self) -> list[str]:
        """Every cohort, parents first: org, org-1..org-k, then org-1-1.. ."""
        groups = [f"org-{g + 1}" for g in range(self.spec.cohort_groups)]
        return ["org", *groups, *(f"{g}-{s + 1}" for g in groups for s in range(self.spec.cohort_subgroups))]

    def quota_of(self, gpus: int) -> tuple[int, int]:
        """cpu (milli) and memory (Gi) quota that goes with `gpus` GPUs of quota: the nodes' proportion."""
        spec = self.spec
        return gpus * spec.cpu_per_node * 1000 // self.gpn // 1000 * 1000, gpus * spec.memory_per_node_gi // self.gpn

    def resources_entry(self, gpus: int, with_limits: bool, borrowing: bool, lending: bool) -> list[dict[str, Any]]:
        spec = self.spec
        cpu, mem = self.quota_of(gpus)
        out = []
        for name, amount in (("cpu", cpu), ("memory", mem), (spec.gpu_resource, gpus)):
            entry: dict[str, Any] = {}
            if with_limits and borrowing:
                entry["borrowingLimit"] = self.quantity(name, int(amount * spec.borrowing_limit))
            if with_limits and lending:
                entry["lendingLimit"] = self.quantity(name, int(amount * spec.lending_limit))
            entry["name"] = name
            entry["nominalQuota"] = self.quantity(name, amount)
            out.append(entry)
        return out

    def quantity(self, resource: str, amount: int) -> str:
        """A quota amount as Kueue's objects write it: whole cores, Gi, units."""
        if resource == "cpu":
            return _cpu_text(amount // 1000 * 1000)
        return f"{amount}Gi" if resource == "memory" else str(amount)

    def cohort_limits(self, cohort: str, covered: list[str]) -> list[dict[str, Any]]:
        """A limited cohort's resourceGroups: nominal 0 and borrowingLimit = borrowing_limit x
        the nominal of its subtree's queues, for each flavor they list."""
        members = [t for t, c in enumerate(self.cohort_of) if c == cohort or c.startswith(cohort + "-")]
        flavors = []
        for f, *_ in self.flavors:
            if not any(f in self.queue_flavors[t] for t in members):
                continue
            gpus = int(sum(self.nominal[t][f] for t in members) * self.spec.borrowing_limit)
            cpu, mem = self.quota_of(gpus)
            flavors.append({"name": f, "resources": [
                {"borrowingLimit": self.quantity(name, amount), "name": name, "nominalQuota": self.quantity(name, 0)}
                for name, amount in (("cpu", cpu), ("memory", mem), (self.spec.gpu_resource, gpus))]})
        return [{"coveredResources": covered, "flavors": flavors}]

    def kueue_objects(self) -> list[dict[str, Any]]:
        spec = self.spec
        created = self.now - 30 * 86400
        out: list[dict[str, Any]] = []
        out.append({"apiVersion": KUEUE, "kind": "Topology", "metadata": self.meta(spec.topology_name, created),
                    "spec": {"levels": [{"nodeLabel": level} for level in spec.levels]}})
        for flavor, _, _, product in self.flavors:
            out.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": self.meta(flavor, created),
                        "spec": {"nodeLabels": {spec.flavor_label: product}, "topologyName": spec.topology_name}})
        covered = ["cpu", "memory", spec.gpu_resource]
        root_spec: dict[str, Any] = {}
        if any(self.root_nominal.values()):
            root_spec["resourceGroups"] = [{"coveredResources": covered, "flavors": [
                {"name": f, "resources": self.resources_entry(self.root_nominal[f], False, False, False)}
                for f, *_ in self.flavors]}]
        out.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": self.meta("org", created), "spec": root_spec})
        for cohort in self.cohort_names()[1:]:
            cohort_spec: dict[str, Any] = {"parentName": cohort.rsplit("-", 1)[0]}
            if cohort in self.limited:
                cohort_spec["resourceGroups"] = self.cohort_limits(cohort, covered)
            out.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": self.meta(cohort, created),
                        "spec": cohort_spec})
        middle = sorted(value for _, value, _ in spec.priorities)[(len(spec.priorities) - 1) // 2]
        default_policy = ({"borrowWithinCohort": {"maxPriorityThreshold": middle, "policy": "LowerPriority"},
                           "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                          {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"})
        weights = [v.strip() for v in spec.fair_weights.split(",") if v.strip()]
        for t, team in enumerate(self.team_names):
            flavors = [{"name": f, "resources": self.resources_entry(self.nominal[t][f], True, self.borrowing[t],
                                                                     self.lending[t])}
                       for f in self.queue_flavors[t]]
            preemption, fungibility = self.policies[t] or default_policy
            out.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": self.meta(f"{team}-cq", created),
                        "spec": {"cohortName": self.cohort_of[t],
                                 "flavorFungibility": fungibility,
                                 "namespaceSelector": {},
                                 "preemption": preemption,
                                 "queueingStrategy": "StrictFIFO" if self.strict[t] else "BestEffortFIFO",
                                 "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
                                 "stopPolicy": "None",
                                 **({"fairSharing": {"weight": weights[t % len(weights)]}} if weights else {})}})
        for team in self.team_names:
            out.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                        "metadata": self.meta(f"{team}-queue", created, namespace=team),
                        "spec": {"clusterQueue": f"{team}-cq", "stopPolicy": "None"}})
        for name, value, _ in spec.priorities:
            out.append({"apiVersion": KUEUE, "description": f"{name} workloads", "kind": "WorkloadPriorityClass",
                        "metadata": self.meta(name, created), "value": value})
        return out

    def kueue_configuration(self) -> dict[str, Any]:
        """Kueue's Configuration as its manager reads it, fair sharing on (v1beta2: the
        section present is on)."""
        config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                  "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": self.meta("kueue-manager-config", self.now - 30 * 86400, namespace="kueue-system"),
                "data": {"controller_manager_config.yaml": json.dumps(config, indent=2, sort_keys=True) + "\n"}}

    # ------------------------------------------------------------ drawing jobs

    def pick_team(self) -> int:
        busy = len(self.team_weights) - self.spec.idle_teams
        team: int = _weighted(self.rng, list(enumerate(self.team_weights))[:busy])
        return team

    def next_name(self, team: int, word: str) -> str:
        self.counter += 1
        return f"{self.team_names[team].removeprefix('team-')}-{word}-{self.counter:05d}"

    def pick_priority(self) -> str:
        name: str = _weighted(self.rng, [(name, share) for name, _, share in self.spec.priorities])
        return name

    def large_sizes(self) -> list[tuple[int, int]]:
        cap = min(self.spec.max_job_gpus, self.cluster.n * self.gpn // 2)
        sizes = [(g, w) for g, w in self.spec.multi_node_sizes if g <= cap and g >= 2 * self.gpn]
        return sizes

    def draw_job(self, team: int, running: bool, max_gpus: int | None = None) -> _Job:
        spec, rng = self.spec, self.rng
        sizes = self.large_sizes()
        if max_gpus is not None:
            sizes = [(g, w) for g, w in sizes if g <= max_gpus]
        if sizes and rng.random() < spec.multi_node_share:
            return self.draw_large(team, _weighted(rng, sizes), running)
        return self.draw_small(team, _weighted(rng, spec.small_sizes), running)

    def draw_small(self, team: int, gpus: int, running: bool) -> _Job:
        spec, rng = self.spec, self.rng
        annotations: dict[str, str] = {}
        min_count = None
        if gpus > 1 and rng.random() < spec.sweep_share:
            count, per_pod = gpus, 1
            if not running and count >= 4 and rng.random() < spec.elastic_share:
                min_count = count // 2
        else:
            per_pod = min(gpus, self.gpn)
            count = -(-gpus // per_pod)
        if count > 1:
            if rng.random() < 0.5 and len(spec.levels) > 1:
                annotations[PREFERRED] = spec.levels[-2]
        elif rng.random() < spec.unconstrained_share:
            annotations[UNCONSTRAINED] = "true"
        frac = rng.choice((2, 3, 4))   # quarters of the largest cpu/memory per GPU
        cpu = self.cpu_per_gpu * per_pod * frac // 4 // 1000 * 1000 or 1000
        mem = max(1, self.mem_per_gpu * per_pod * frac // 4)
        word = "sweep" if per_pod == 1 and count > 1 else rng.choice(SMALL_WORDS)
        ps = _PodSet("main", count, per_pod, cpu, mem, annotations, min_count=min_count)
        return _Job("Job", team, self.next_name(team, word), self.pick_priority(), [ps], False)

    def draw_large(self, team: int, gpus: int, running: bool) -> _Job:
        spec, rng, cl = self.spec, self.rng, self.cluster
        pods = -(-gpus // self.gpn)
        annotations: dict[str, str] = {}
        nonhost = spec.levels[:-1]
        fit = None   # finest level whose one domain has enough nodes
        for k in range(len(nonhost) - 1, -1, -1):
            if cl.span[k] >= pods:
                fit = k
                break
        required = fit is not None and rng.random() < spec.required_share
        level = nonhost[fit] if fit is not None else (nonhost[0] if nonhost else None)
        if level is not None:
            annotations[REQUIRED if required else PREFERRED] = level
        jobset = rng.random() < spec.jobset_share
        sliced = False
        if nonhost and pods > cl.leaf and not (jobset and required) and rng.random() < spec.slice_share:
            size = max(d for d in range(1, cl.leaf + 1) if pods % d == 0)
            if size >= 2:
                annotations[SLICE_TOPOLOGY] = nonhost[-1]
                annotations[SLICE_SIZE] = str(size)
                sliced = True
        cpu = self.cpu_per_gpu * self.gpn
        mem = self.mem_per_gpu * self.gpn
        word = rng.choice(LARGE_WORDS)
        priority = self.pick_priority()
        if not jobset:
            ps = _PodSet("main", pods, self.gpn, cpu, mem, annotations)
            return _Job("Job", team, self.next_name(team, word), priority, [ps], True)
        launcher_ann: dict[str, str] = {}
        if required and level is not None:
            annotations[GROUP] = "trainer"
            launcher_ann = {GROUP: "trainer", REQUIRED: level}
        elif level is not None:
            launcher_ann = {PREFERRED: level}
        replicas = 1
        if not sliced:
            for r in (4, 2):
                if pods % r == 0 and rng.random() < 0.3:
                    replicas = pods // r
                    break
        workers = _PodSet("workers", pods, self.gpn, cpu, mem, annotations, replicas=replicas)
        launcher = _PodSet("launcher", 1, 0, self.launcher_cpu, self.launcher_mem, launcher_ann)
        return _Job("JobSet", team, self.next_name(team, word), priority, [launcher, workers], True)

    # ------------------------------------------------------------ running work

    def running_jobs(self) -> list[_Job]:
        spec, rng = self.spec, self.rng
        placed: list[_Job] = []
        n_large = round(spec.running * spec.running_multi_node_share) if self.large_sizes() else 0
        for _ in range(n_large):
            team = self.pick_team()
            budgets = {f: int(self.nominal[team][f] * spec.running_large_budget) - self.large_usage[team][f]
                       for f, *_ in self.flavors}
            sizes = [(g, w) for g, w in self.large_sizes() if g <= max(budgets.values())]
            if not sizes:
                continue
            gpus = _weighted(rng, sizes)
            while gpus >= 2 * self.gpn:
                job = self.draw_large(team, gpus, running=True)
                if self.place(job, budgets):
                    placed.append(job)
                    break
                gpus //= 2
        failures = 0
        while len(placed) < spec.running and failures < 50:
            team = self.pick_team()
            job = self.draw_small(team, _weighted(rng, spec.small_sizes), running=True)
            busy = len(self.team_names) - spec.idle_teams
            for attempt in range(busy):
                if self.place(job, None):
                    placed.append(job)
                    break
                job.team = (job.team + 1) % busy
            else:
                failures += 1
        return placed

    def place(self, job: _Job, large_budget: dict[str, int] | None) -> bool:
        """Place a running job within its queue's nominal quota and node capacity, or change nothing."""
        t = job.team
        gpus = sum(ps.count * ps.gpus for ps in job.pod_sets)
        cpu = sum(ps.count * ps.cpu for ps in job.pod_sets)
        mem = sum(ps.count * ps.mem for ps in job.pod_sets)
        for flavor in self.queue_flavors[t]:   # in the queue's order, as Kueue tries them
            lo, hi = self.nodes_of[flavor]
            use = self.usage[t][flavor]
            qcpu, qmem = self.quota_of(self.nominal[t][flavor])
            if use[0] + gpus > self.nominal[t][flavor] or use[1] + cpu > qcpu or use[2] + mem > qmem:
                continue
            if large_budget is not None and gpus > large_budget[flavor]:
                continue
            log: list[tuple[int, int, int, int]] = []
            placements = self.place_pod_sets(job, lo, hi, log)
            if placements is None:
                continue
            job.placed = placements
            job.flavor = flavor
            use[0] += gpus
            use[1] += cpu
            use[2] += mem
            if job.large:
                self.large_usage[t][flavor] += gpus
            return True
        return False

    def place_pod_sets(self, job: _Job, lo: int, hi: int, log: list[tuple[int, int, int, int]]
                       ) -> list[tuple[str, dict[int, int]]] | None:
        out: list[tuple[str, dict[int, int]]] = []
        if job.large:
            workers = job.pod_sets[-1]
            nodes = self.place_large(workers, lo, hi, log)
            if nodes is None:
                return None
            if job.kind == "JobSet":
                launcher = job.pod_sets[0]
                node = self.place_launcher(launcher, nodes, log)
                if node is None:
                    self.cluster.undo(log)
                    return None
                out.append((launcher.name, {node: 1}))
            out.append((workers.name, {i: 1 for i in nodes}))
            return out
        ps = job.pod_sets[0]
        per_node: dict[int, int] = {}
        for _ in range(ps.count):
            near = next(iter(per_node), None)
            node = self.place_small(ps, lo, hi, near)
            if node is None:
                self.cluster.undo(log)
                return None
            self.cluster.take(node, ps.gpus, ps.cpu, ps.mem, log)
            per_node[node] = per_node.get(node, 0) + 1
        out.append((ps.name, per_node))
        return out

    def place_small(self, ps: _PodSet, lo: int, hi: int, near: int | None) -> int | None:
        cl, rng = self.cluster, self.rng
        if near is not None:   # keep a job's pods close: same leaf domain first
            start = near // cl.leaf * cl.leaf
            for i in range(start, start + cl.leaf):
                if cl.fits(i, ps.gpus, ps.cpu, ps.mem):
                    return i
        # pack onto partly used nodes most of the time, spread otherwise (real clusters fragment)
        partly = self.partly
        for _ in range(6):
            if not partly:
                break
            i = partly[rng.randrange(len(partly))]
            if lo <= i < hi and cl.fits(i, ps.gpus, ps.cpu, ps.mem):
                return i
        for _ in range(24):
            i = rng.randrange(lo, hi)
            if cl.fits(i, ps.gpus, ps.cpu, ps.mem):
                partly.append(i)
                if len(partly) > 4096:
                    del partly[: len(partly) // 2]
                return i
        start = rng.randrange(lo, hi)
        for j in range(hi - lo):
            i = lo + (start - lo + j) % (hi - lo)
            if cl.fits(i, ps.gpus, ps.cpu, ps.mem):
                return i
        return None

    def place_launcher(self, ps: _PodSet, workers: list[int], log: list[tuple[int, int, int, int]]) -> int | None:
        """The launcher in the workers' domain at its required level (or near the first worker)."""
        cl = self.cluster
        level = ps.annotations.get(REQUIRED) or ps.annotations.get(PREFERRED)
        span = cl.span[self.spec.levels.index(level)] if level else cl.leaf
        start = workers[0] // span * span
        for i in list(workers) + list(range(start, start + span)):
            if cl.fits(i, 0, ps.cpu, ps.mem):
                cl.take(i, 0, ps.cpu, ps.mem, log)
                return i
        return None

    def place_large(self, ps: _PodSet, lo: int, hi: int, log: list[tuple[int, int, int, int]]) -> list[int] | None:
        """Whole-node pods: one domain at the required level (slices whole), preferred falling back up."""
        cl, rng, spec = self.cluster, self.rng, self.spec
        pods = ps.count
        ann = ps.annotations
        slice_size = int(ann[SLICE_SIZE]) if SLICE_SIZE in ann else 1
        level = ann.get(REQUIRED) or ann.get(PREFERRED)
        k = spec.levels.index(level) if level else 0
        first_leaf = lo // cl.leaf
        whole = cl.whole
        usable_list = [w // slice_size * slice_size for w in whole[first_leaf:hi // cl.leaf]]
        usable = dict(enumerate(usable_list, first_leaf))
        prefix = [0, *itertools.accumulate(usable_list)]
        count = len(usable_list)

        chosen: list[int] | None = None
        if level is not None and cl.span[k] >= cl.leaf:
            levels_to_try = [k] if REQUIRED in ann else list(range(k, -1, -1))
            for level_k in levels_to_try:
                per = max(1, cl.span[level_k] // cl.leaf)   # leaf domains in one domain of level_k
                fitting = [start for start in range(0, count, per)
                           if prefix[min(start + per, count)] - prefix[start] >= pods]
                if fitting:
                    start = rng.choice(fitting)
                    chosen = list(range(first_leaf + start, first_leaf + min(start + per, count)))
                    break
        if chosen is None and (REQUIRED not in ann or level is None):
            if prefix[-1] >= pods:
                chosen = sorted(usable, key=lambda m: (-usable[m], m))
        if chosen is None:
            return None
        nodes: list[int] = []
        left = pods
        order = list(chosen)
        rng.shuffle(order)
        for leaf in order:
            if left == 0:
                break
            take = min(usable[leaf], left)
            if take == 0:
                continue
            start = leaf * cl.leaf
            got = 0
            for i in range(start, start + cl.leaf):
                if got == take:
                    break
                if cl.is_whole(i, ps.cpu, ps.mem):
                    cl.take(i, ps.gpus, ps.cpu, ps.mem, log)
                    nodes.append(i)
                    got += 1
            if got < take:   # whole-node count said yes but cpu/memory said no
                cl.undo(log)
                return None
            left -= take
        if left:
            cl.undo(log)
            return None
        return nodes

    # ------------------------------------------------------------ objects

    def container_resources(self, gpus: int, cpu: int, mem: int) -> dict[str, Any]:
        key = (gpus, cpu, mem)
        cached = self.resources_cache.get(key)
        if cached is None:
            requests: dict[str, str] = {"cpu": _cpu_text(cpu), "memory": f"{mem}Gi"}
            if gpus:
                requests[self.spec.gpu_resource] = str(gpus)
                cached = {"limits": {self.spec.gpu_resource: str(gpus)}, "requests": requests}
            else:
                cached = {"requests": requests}
            self.resources_cache[key] = cached
        return cached

    def pod_template(self, ps: _PodSet, image: str) -> dict[str, Any]:
        template: dict[str, Any] = {}
        if ps.annotations:
            template["metadata"] = {"annotations": ps.annotations}
        template["spec"] = {"containers": [{"image": image, "imagePullPolicy": "IfNotPresent", "name": ps.name
                                            if ps.name != "main" else "trainer",
                                            "resources": self.container_resources(ps.gpus, ps.cpu, ps.mem)}],
                            "restartPolicy": "Never", "schedulerName": "default-scheduler",
                            "terminationGracePeriodSeconds": 30}
        return template

    def times(self, job: _Job, running: bool) -> tuple[float, dict[str, str]]:
        """Creation time and Stowplan's time annotations."""
        spec, rng = self.spec, self.rng
        annotations: dict[str, str] = {}
        if not running:
            created = self.now - rng.random() * spec.history_hours * 3600
            return created, annotations
        if rng.random() < 0.8:   # Philly: 80% of jobs run 30 min to 17 h, 20% 17 h to 7 days
            duration = math.exp(rng.uniform(math.log(1800), math.log(17 * 3600)))
        else:
            duration = math.exp(rng.uniform(math.log(17 * 3600), math.log(7 * 86400)))
        elapsed = max(60.0, rng.uniform(0.02, 1.0) * duration)
        admitted = self.now - elapsed
        created = admitted - rng.expovariate(1 / 1800)
        annotations[ADMITTED_AT] = _stamp(admitted)
        if rng.random() < (0.9 if job.large else spec.checkpoint_share):
            checkpoint = self.now - rng.random() * rng.choice((1800, 3600, 7200))
            if checkpoint > admitted:
                annotations[CHECKPOINTED_AT] = _stamp(checkpoint)
        if rng.random() < spec.non_preemptible_share:
            annotations[NON_PREEMPTIBLE] = "true"
        return created, annotations

    def assignment(self, job: _Job) -> str:
        spec, cl = self.spec, self.cluster
        entries = []
        by_name = {ps.name: ps for ps in job.pod_sets}
        for name, per_node in sorted(job.placed):
            ps = by_name[name]
            resources = ["cpu", "memory"] + ([spec.gpu_resource] if ps.gpus else [])
            domains = [{"values": [cl.names[i]], "count": c} for i, c in sorted(per_node.items(),
                                                                                key=lambda ic: cl.names[ic[0]])]
            entries.append({"name": name, "count": sum(per_node.values()),
                            "flavors": {r: job.flavor for r in sorted(resources)},
                            "topologyAssignment": {"levels": [HOSTNAME], "domains": domains}})
        return json.dumps(entries, separators=(",", ":"))

    def job_object(self, job: _Job, running: bool) -> dict[str, Any]:
        rng = self.rng
        team = self.team_names[job.team]
        created, annotations = self.times(job, running)
        if running:
            annotations[ASSIGNMENT] = self.assignment(job)
        labels = {PRIORITY_LABEL: job.priority, QUEUE_LABEL: f"{team}-queue"}
        image = rng.choice(IMAGES)
        pods = sum(ps.count for ps in job.pod_sets)
        status: dict[str, Any] = {}
        if running:
            status = {"active": pods, "startTime": annotations[ADMITTED_AT]}
        if job.kind == "Job":
            ps = job.pod_sets[0]
            if ps.min_count is not None:
                annotations[MIN_PARALLELISM] = str(ps.min_count)
            spec: dict[str, Any] = {"backoffLimit": 6 if not job.large else 0,
                                    "completionMode": "Indexed" if job.large else "NonIndexed",
                                    "completions": ps.count, "parallelism": ps.count,
                                    "suspend": not running, "template": self.pod_template(ps, image)}
            return {"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": self.meta(job.name, created, team, labels, dict(sorted(annotations.items()))),
                    "spec": spec, "status": status}
        replicated = []
        for ps in job.pod_sets:
            parallelism = ps.count // ps.replicas
            replicated.append({"name": ps.name, "replicas": ps.replicas, "template": {"spec": {
                "backoffLimit": 0, "completionMode": "Indexed", "completions": parallelism,
                "parallelism": parallelism, "template": self.pod_template(ps, image)}}})
        spec = {"failurePolicy": {"maxRestarts": 3}, "replicatedJobs": replicated,
                "startupPolicy": {"startupPolicyOrder": "AnyOrder"}, "successPolicy": {"operator": "All"},
                "suspend": not running}
        if running:
            status = {"replicatedJobsStatus": [{"active": ps.replicas, "failed": 0, "name": ps.name, "ready": 0,
                                                "succeeded": 0, "suspended": 0} for ps in job.pod_sets]}
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": self.meta(job.name, created, team, labels, dict(sorted(annotations.items()))),
                "spec": spec, "status": status}


def generate(spec: GeneratorSpec) -> dict[str, Any]:
    """A snapshot (`kind: List`) drawn from `spec`; pure and deterministic."""
    return _Generator(spec).build()


def to_json(snapshot: dict[str, Any]) -> str:
    """Compact JSON, one line, newline-terminated: the reader's fast path."""
    return json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False) + "\n"


def to_yaml(snapshot: dict[str, Any]) -> str:
    """Block YAML with libyaml's CSafeDumper, no anchors (shared sub-dicts are written out)."""
    import yaml

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    dumper = type("Dumper", (base,), {"ignore_aliases": lambda self, data: True})
    return str(yaml.dump(snapshot, Dumper=dumper, sort_keys=False, allow_unicode=True, width=4096))


# ---------------------------------------------------------------- traces (docs/simulate.md)

TRACE_API_VERSION = "stowplan.io/v1alpha1"
CHECKPOINT_INTERVALS = (1800.0, 3600.0, 7200.0)
_TRACE_TOPOLOGY = {REQUIRED: "required", PREFERRED: "preferred", UNCONSTRAINED: "unconstrained",
                   SLICE_TOPOLOGY: "sliceRequired", SLICE_SIZE: "sliceSize", GROUP: "group"}


def philly_duration(rng: random.Random) -> float:
    """Seconds of running a job needs: Philly's mix as Gavel uses it (REFERENCE §7), 80% between
    30 min and 17 h, 20% between 17 h and 7 days, log-uniform within each range."""
    if rng.random() < 0.8:
        return math.exp(rng.uniform(math.log(1800), math.log(17 * 3600)))
    return math.exp(rng.uniform(math.log(17 * 3600), math.log(7 * 86400)))


def mean_philly_duration() -> float:
    """The mix's mean: a log-uniform range [a, b] has mean (b - a) / ln(b / a)."""
    def mean(a: float, b: float) -> float:
        return (b - a) / math.log(b / a)

    return 0.8 * mean(1800, 17 * 3600) + 0.2 * mean(17 * 3600, 7 * 86400)


def generate_trace(spec: GeneratorSpec, hours: float, load: float = 1.0) -> list[dict[str, Any]]:
    """A trace for `spec`'s cluster (the snapshot `generate(spec)` writes, whatever its seed):
    the header line, then jobs drawn as the snapshot's pending jobs are (sizes, shapes, topology
    requests, priorities, teams), submitted as a Poisson process whose rate offers `load` times
    the cluster's GPUs in GPU-seconds per second, each with a Philly duration and a checkpoint
    interval as the snapshot's running work has (`checkpoint_share`; multi-node 0.9). Pure and
    deterministic for the spec (seed included)."""
    if not 0 < hours <= 24 * 366:
        raise ValueError("hours: above 0 and at most a year")
    if not 0 < load <= 100:
        raise ValueError("load: above 0 and at most 100")
    gen = _Generator(spec)
    gen.setup_flavors()
    gen.setup_teams()
    rng = gen.rng
    # the mean GPUs of a job, from a sample of the same draws (a separate stream: the trace's
    # own draws stay those of its seed)
    sample = _Generator(dataclasses.replace(spec, seed=spec.seed + 1))
    sample.setup_flavors()
    sample.setup_teams()
    drawn = [sample.draw_job(sample.pick_team(), running=False) for _ in range(2000)]
    mean_gpus = sum(ps.count * ps.gpus for j in drawn for ps in j.pod_sets) / len(drawn)
    rate = load * spec.nodes * spec.gpus_per_node / (max(mean_gpus, 1e-9) * mean_philly_duration())
    header = {"apiVersion": TRACE_API_VERSION, "kind": "Trace", "hours": hours,
              "generator": {"seed": spec.seed, "nodes": spec.nodes, "load": load,
                            "jobsPerHour": round(rate * 3600, 3), "durations": "philly"}}
    lines: list[dict[str, Any]] = [header]
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= hours * 3600:
            break
        job = gen.draw_job(gen.pick_team(), running=False)
        lines.append(_trace_line(gen, job, round(t, 3), rng))
    return lines


def _trace_line(gen: _Generator, job: _Job, submit: float, rng: random.Random) -> dict[str, Any]:
    spec = gen.spec
    team = gen.team_names[job.team]
    pod_sets = []
    for ps in job.pod_sets:
        requests: dict[str, str] = {"cpu": _cpu_text(ps.cpu), "memory": f"{ps.mem}Gi"}
        if ps.gpus:
            requests[spec.gpu_resource] = str(ps.gpus)
        entry: dict[str, Any] = {"name": ps.name, "count": ps.count, "requests": requests}
        if ps.min_count is not None:
            entry["minCount"] = ps.min_count
        topology: dict[str, Any] = {}
        for key, value in ps.annotations.items():
            name = _TRACE_TOPOLOGY[key]
            topology[name] = True if name == "unconstrained" else int(value) if name == "sliceSize" else value
        if topology:
            entry["topology"] = dict(sorted(topology.items()))
        pod_sets.append(entry)
    line: dict[str, Any] = {"submit": submit, "namespace": team, "queue": f"{team}-queue", "name": f"{job.name}-t",
                            "kind": job.kind, "priorityClass": job.priority, "podSets": pod_sets,
                            "duration": round(philly_duration(rng), 1)}
    if rng.random() < (0.9 if job.large else spec.checkpoint_share):
        line["checkpointInterval"] = rng.choice(CHECKPOINT_INTERVALS)
    return line


def to_json_lines(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines)
