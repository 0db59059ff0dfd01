"""A generated family of snapshot shapes (issue 32): one seed draws a whole shape.

Issue 32's targets hold "on every snapshot of a generated family that varies flavors
(1-4), ClusterQueues (4-64), cohort depth (1-3), priority levels (2-5), borrowing and
lending limits, running share and job mix". `family(seed, scale)` is that family: the
scale fixes the size (nodes, levels, pending and running workloads, as the presets S,
M, L, XL; `tiny` for tests), and the seed draws every other shape parameter of
`GeneratorSpec` from the ranges in DRAWS; the same seed then drives the generator's
own draws (jobs, placements), so the same seed and scale give the same bytes.

Each parameter draws from a `random.Random` of its own (seeded by the family seed and
the parameter's name), so setting one parameter by hand (`fixed`) never shifts the
others' draws; a parameter that must fit another (cohort groups within the teams,
subsets only with several flavors) reads that one's final value. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from planner.tools.generate import (BLOCK, GPU_PRODUCTS, HOSTNAME, PHILLY, RACK, STANDARD_LEVELS, GeneratorSpec,
                                    format_value, parse_setting)

FAMILY = "family"

# Sizes per scale: the presets' (S, M, L, XL) and a tiny one for the property tests.
SCALES: dict[str, dict[str, Any]] = {
    "tiny": dict(levels=(BLOCK, RACK, HOSTNAME), fanout=(4, 2, 4), pending=40, running=60),
    "S": dict(fanout=(4, 8, 16), pending=300, running=300),
    "M": dict(fanout=(16, 16, 16), pending=2000, running=2000),
    "L": dict(levels=STANDARD_LEVELS[4], fanout=(4, 8, 32, 16), pending=10000, running=10000),
    "XL": dict(levels=STANDARD_LEVELS[4], fanout=(8, 16, 32, 16), pending=40000, running=40000),
}

# Priority ladder the levels are taken from (2 to 5 of them, keeping their order).
LADDER = (("critical", 10000), ("production", 1000), ("standard", 100), ("low", 10), ("best-effort", 0))
# A heavier small-job mix than Philly's: more 4- and 8-GPU jobs.
HEAVY = ((1, 40), (2, 15), (4, 25), (8, 20))

Pick = Callable[[random.Random, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Draw:
    """One drawn GeneratorSpec field: its range in words and how it is drawn."""

    field: str
    text: str
    pick: Pick


def _uniform(lo: float, hi: float) -> Pick:
    return lambda rng, _: round(rng.uniform(lo, hi), 2)


def _often_zero(p_zero: float, lo: float, hi: float) -> Pick:
    return lambda rng, _: 0.0 if rng.random() < p_zero else round(rng.uniform(lo, hi), 2)


def _flavors(rng: random.Random, spec: Mapping[str, Any]) -> str:
    count = rng.randint(1, min(4, spec["fanout"][0]))
    names = list(GPU_PRODUCTS)[:count]
    if count == 1:
        return names[0]
    return ",".join(f"{name}:{rng.uniform(0.5, 2.0):.1f}" for name in names)


def _flavor_count(spec: Mapping[str, Any]) -> int:
    if spec["gpu_flavors"]:
        return len(GeneratorSpec(gpu_flavors=spec["gpu_flavors"]).gpu_flavor_list())
    return 2 if spec["second_flavor"] else 1


def _teams(rng: random.Random, _: Mapping[str, Any]) -> int:
    """Log-uniform from 4 to 64: small counts as often as large ones, by ratio."""
    return min(64, max(4, round(4 * 16 ** rng.random())))


def _cohort_groups(rng: random.Random, spec: Mapping[str, Any]) -> int:
    """Depth 1 (0 groups), 2 or 3 alike; a depth-2 or -3 tree has 1 to 8 groups, at most half the teams."""
    depth = rng.choice((1, 2, 3))
    return 0 if depth == 1 else rng.randint(1, max(1, min(8, spec["teams"] // 2)))


def _cohort_subgroups(rng: random.Random, spec: Mapping[str, Any]) -> int:
    """Half the trees of depth 2 get a third level: 2 to 4 sub-cohorts each, every leaf with a queue."""
    groups = spec["cohort_groups"]
    most = min(4, spec["teams"] // groups) if groups else 0
    deeper, count = rng.random() < 0.5, rng.randint(2, 4)
    return min(count, most) if deeper and most >= 2 else 0


def _priorities(rng: random.Random, _: Mapping[str, Any]) -> tuple[tuple[str, int, float], ...]:
    levels = sorted(rng.sample(range(len(LADDER)), rng.randint(2, len(LADDER))))
    weights = [rng.uniform(0.5, 2.0) for _ in levels]
    return tuple((LADDER[i][0], LADDER[i][1], round(w / sum(weights), 2)) for i, w in zip(levels, weights))


def _idle_teams(rng: random.Random, spec: Mapping[str, Any]) -> int:
    idle = rng.randint(1, 3) if rng.random() < 0.3 else 0
    return min(idle, int(spec["teams"]) - 1)


# In this order (a draw may read the fields above it). Ranges in words for --help and BENCHMARKS.
DRAWS: tuple[Draw, ...] = (
    Draw("gpu_flavors", "1 to 4 GPU flavors (h100, a100, l40s, b200), each on a weighted share (0.5-2) "
                        "of the top-level domains", _flavors),
    Draw("flavor_order", "same or shuffled per queue, alike (several flavors)",
         lambda rng, spec: rng.choice(("same", "shuffled")) if _flavor_count(spec) > 1 else "same"),
    Draw("subset_share", "several flavors: 0 (40%) or 0.1-0.6 of the queues list only some flavors",
         lambda rng, spec: _often_zero(0.4, 0.1, 0.6)(rng, spec) if _flavor_count(spec) > 1 else 0.0),
    Draw("teams", "4 to 64 ClusterQueues, log-uniform", _teams),
    Draw("cohort_groups", "cohort depth 1, 2 or 3 alike; 1 to 8 groups (at most half the queues)",
         _cohort_groups),
    Draw("cohort_subgroups", "depth 3: 2 to 4 sub-cohorts per group", _cohort_subgroups),
    Draw("cohort_limit_share", "depth 2-3: 0 (40%) or 0.2-1 of the cohorts below org with a borrowingLimit",
         lambda rng, spec: _often_zero(0.4, 0.2, 1.0)(rng, spec) if spec["cohort_groups"] else 0.0),
    Draw("root_quota_share", "0 (half the shapes) or 0.05-0.3 of the quota held by org",
         _often_zero(0.5, 0.05, 0.3)),
    Draw("quota_share", "1 (60%) or 0.7-1 of the GPUs under nominal quota",
         lambda rng, _: 1.0 if rng.random() < 0.6 else round(rng.uniform(0.7, 1.0), 2)),
    Draw("borrowing_share", "0-1 of the queues with a borrowingLimit", _uniform(0.0, 1.0)),
    Draw("borrowing_limit", "borrowingLimit 0, 0.25, 0.5, 1 or 2 x nominal",
         lambda rng, _: rng.choice((0.0, 0.25, 0.5, 1.0, 2.0))),
    Draw("lending_share", "0-1 of the queues with a lendingLimit", _uniform(0.0, 1.0)),
    Draw("lending_limit", "lendingLimit 0, 0.25, 0.5 or 0.75 x nominal",
         lambda rng, _: rng.choice((0.0, 0.25, 0.5, 0.75))),
    Draw("policy_mix", "0-1 of the queues with drawn preemption and fungibility policies", _uniform(0.0, 1.0)),
    Draw("strict_fifo_share", "0 (half the shapes) or 0.1-0.5 of the queues StrictFIFO",
         _often_zero(0.5, 0.1, 0.5)),
    Draw("idle_teams", "0 (70%) or 1-3 queues with quota and no work", _idle_teams),
    Draw("priorities", "2 to 5 levels of critical 10000, production 1000, standard 100, low 10, best-effort "
                       "0, with weighted shares", _priorities),
    Draw("small_sizes", "Philly's mix (60%) or a heavier one (1: 40%, 2: 15%, 4: 25%, 8: 20%)",
         lambda rng, _: PHILLY if rng.random() < 0.6 else HEAVY),
    Draw("multi_node_share", "0.02-0.3 of the workloads multi-node", _uniform(0.02, 0.3)),
    Draw("required_share", "0-1 of those with required topology", _uniform(0.0, 1.0)),
    Draw("slice_share", "0-0.6 with slices", _uniform(0.0, 0.6)),
    Draw("jobset_share", "0-0.5 JobSets", _uniform(0.0, 0.5)),
    Draw("sweep_share", "0-0.4 of small multi-GPU jobs as sweeps", _uniform(0.0, 0.4)),
    Draw("elastic_share", "0-0.5 of pending sweeps elastic", _uniform(0.0, 0.5)),
    Draw("unconstrained_share", "0-0.3 of single-pod jobs unconstrained", _uniform(0.0, 0.3)),
    Draw("running_multi_node_share", "running share: 0.05-0.8 of running workloads multi-node",
         _uniform(0.05, 0.8)),
    Draw("running_large_budget", "running share: multi-node running work up to 0.5-1 of each queue's "
                                 "nominal (the cluster then runs from a fifth to nearly full before the plan; "
                                 "running work stays within nominal)",
         _uniform(0.5, 1.0)),
    Draw("checkpoint_share", "0.3-0.9 of running jobs checkpointed", _uniform(0.3, 0.9)),
    Draw("non_preemptible_share", "0-0.05 of running jobs non-preemptible", _uniform(0.0, 0.05)),
)
DRAWN = tuple(draw.field for draw in DRAWS)


def family(seed: int, scale: str = "S", **fixed: Any) -> GeneratorSpec:
    """The family's member `seed` at `scale`; `fixed` fields are taken as given, not drawn."""
    if scale not in SCALES:
        raise ValueError(f"unknown family scale {scale!r}: one of {', '.join(SCALES)}")
    values: dict[str, Any] = {**SCALES[scale], "seed": seed}
    values.update({k: v for k, v in fixed.items() if k not in DRAWN})
    for draw in DRAWS:
        rng = random.Random(f"stowplan-family:{seed}:{draw.field}")
        values[draw.field] = fixed[draw.field] if draw.field in fixed else draw.pick(rng, _spec_view(values))
    return dataclasses.replace(GeneratorSpec(), **values)


def from_options(seed: int, nodes: str | None, settings: list[tuple[str, str]]) -> GeneratorSpec:
    """`stowplan generate --preset family`: --set scale=NAME picks the size (default S);
    --nodes and every other --set KEY=VALUE fix that field (ValueError when wrong)."""
    scales = [value for key, value in settings if key == "scale"]
    scale = scales[-1] if scales else "S"
    base = family(seed, scale)
    fixed: dict[str, Any] = {}
    if nodes is not None:
        try:
            fixed.update(parse_setting(base, "nodes", nodes))
        except ValueError as error:   # the flag named, as generate names it
            raise ValueError(f"--nodes {str(error).partition('=')[2]}") from None
    for key, value in settings:
        if key != "scale":
            try:
                fixed.update(parse_setting(dataclasses.replace(base, **fixed), key, value))
            except ValueError as error:
                raise ValueError(f"--set {error}") from None
    return family(seed, scale, **fixed)


def _spec_view(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fields drawn or given so far, over GeneratorSpec's defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(GeneratorSpec)}
    return {**defaults, **values}


def describe(spec: GeneratorSpec) -> str:
    """A family member's shape in one line (what the seed drew), for tables and test ids."""
    flavors = spec.gpu_flavor_list() or [(spec.flavor, "", 1.0)]
    depth = 1 + bool(spec.cohort_groups) + bool(spec.cohort_subgroups)
    tree = "" if depth == 1 else f" ({spec.cohort_groups}" + (f"x{spec.cohort_subgroups}" if
                                                               spec.cohort_subgroups else "") + ")"
    parts = [f"{len(flavors)} flavor{'s' * (len(flavors) > 1)}"
             + (f" {spec.flavor_order}" if len(flavors) > 1 else "")
             + (f", {spec.subset_share:.0%} of queues lack some" if spec.subset_share else ""),
             f"{spec.teams} CQs" + (f" ({spec.idle_teams} idle)" if spec.idle_teams else ""),
             f"cohort depth {depth}{tree}" + (f", {spec.cohort_limit_share:.0%} limited"
                                              if spec.cohort_limit_share else ""),
             f"{len(spec.priorities)} priorities",
             f"borrowingLimit {spec.borrowing_limit:g}x on {spec.borrowing_share:.0%}, lendingLimit "
             f"{spec.lending_limit:g}x on {spec.lending_share:.0%}",
             f"drawn policies {spec.policy_mix:.0%}" + (f", StrictFIFO {spec.strict_fifo_share:.0%}"
                                                       if spec.strict_fifo_share else ""),
             f"multi-node {spec.multi_node_share:.0%} (running {spec.running_multi_node_share:.0%} within "
             f"{spec.running_large_budget:.0%} of nominal)",
             f"quota {spec.quota_share:.0%}" + (f", {spec.root_quota_share:.0%} at org" if spec.root_quota_share
                                                else "")]
    return "; ".join(parts)


def help_lines() -> list[str]:
    """The family's definition for `stowplan generate --help` (click's no-rewrap blocks)."""
    lines = ["\b", "Preset family (issue 32): --preset family --seed N [--set scale=S|M|L|XL|tiny]",
             "draws every parameter below that is not --set from the seed (each from a",
             "random stream of its own, so setting one never changes the others); the",
             "scale sets the size (nodes, levels, pending + running):"]
    for name, size in SCALES.items():
        lines.append(f"  {name:<5} fanout={format_value(size['fanout'])}, pending={size['pending']}, "
                     f"running={size['running']}")
    lines += ["", "\b", "Drawn per seed:"]
    for draw in DRAWS:
        lines.append(f"  {draw.field}: {draw.text}")
    return lines


def running_share(document: Mapping[str, Any]) -> float:
    """GPUs running work holds before the plan over the cluster's GPUs (a generated document)."""
    total = running = 0
    for item in document.get("items", []):
        kind = item.get("kind")
        if kind == "Node":
            total += sum(int(v) for k, v in item["status"]["allocatable"].items() if k.endswith("/gpu"))
        elif kind in ("Job", "JobSet") and not item["spec"].get("suspend"):
            running += _gpus(item)
    return running / total if total else math.nan


def _gpus(item: Mapping[str, Any]) -> int:
    """GPUs all pods of a generated Job or JobSet request."""
    if item["kind"] == "Job":
        jobs = [(1, item["spec"])]
    else:
        jobs = [(r["replicas"], r["template"]["spec"]) for r in item["spec"]["replicatedJobs"]]
    total = 0
    for replicas, job in jobs:
        for container in job["template"]["spec"]["containers"]:
            requests = container["resources"].get("requests", {})
            total += replicas * job["parallelism"] * sum(int(v) for k, v in requests.items() if k.endswith("/gpu"))
    return total
