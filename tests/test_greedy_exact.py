"""Greedy's shortcuts change how much it computes, never what it decides.

`greedy(..., shortcuts=False)` runs every preemption search in full, as Kueue's
classical preemption reads: the plain path. On seeded instances of many shapes
(generated clusters varying teams, cohort trees, priority levels, borrowing and
lending limits, required topology, a second flavor, fair sharing; and the small
random snapshots of tests/randomgen.py) both paths must give the same admissions
(pod sets, flavors, nodes), the same evictions (reason, for whom) and the same
pending reasons.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from models import Snapshot
from planner.greedy import GreedyResult, greedy
from planner.snapshot import read_snapshot
from planner.tools.generate import generate, preset
from randomgen import random_snapshot

PRIORITY_LEVELS = (("low", 0), ("mid", 100), ("high", 1000), ("top", 5000), ("crit", 10000))


def generated(tmp_path: Path, seed: int, medium: bool = False) -> Snapshot:
    """A generated cluster whose shape is drawn from `seed`: 64 nodes, or 256 with a few
    hundred workloads and more multi-node jobs (`medium`: long searches, many victims)."""
    rng = random.Random(seed)
    teams = rng.randint(2, 8)
    levels = rng.randint(2, 5)
    chosen = sorted(rng.sample(range(len(PRIORITY_LEVELS)), levels))
    priorities = tuple((PRIORITY_LEVELS[i][0], PRIORITY_LEVELS[i][1], rng.choice((0.1, 0.3, 0.5))) for i in chosen)
    fair = rng.random() < 0.2
    spec = preset("S", seed=seed, fanout=rng.choice(((2, 4, 8), (2, 2, 16), (4, 4, 4))), teams=teams,
                  cohort_groups=rng.choice((0, 0, 1, 2)) if teams >= 2 else 0,
                  priorities=priorities, borrowing_share=rng.choice((0.0, 0.5, 1.0)),
                  lending_share=rng.choice((0.0, 0.3, 1.0)), required_share=rng.choice((0.0, 0.5, 1.0)),
                  second_flavor=rng.choice(("", "", "a100")), root_quota_share=rng.choice((0.0, 0.0, 0.2)),
                  pending=rng.randint(40, 90), running=rng.randint(40, 90),
                  multi_node_share=rng.choice((0.1, 0.25, 0.4)), running_multi_node_share=rng.choice((0.15, 0.4)),
                  max_job_gpus=64, fair_sharing=fair, fair_weights="1,3,2" if fair else "")
    if medium:
        spec = dataclasses.replace(spec, fanout=(4, 4, 16), pending=200, running=200, multi_node_share=0.3,
                                   max_job_gpus=256, fair_sharing=False, fair_weights="")
    path = tmp_path / f"generated-{seed}.json"
    path.write_text(json.dumps(generate(spec)))
    return read_snapshot([str(path)])


def same(fast: GreedyResult, plain: GreedyResult) -> None:
    assert fast.decisions.admissions == plain.decisions.admissions
    assert fast.decisions.evictions == plain.decisions.evictions
    assert fast.reasons == plain.reasons


@pytest.mark.parametrize("seed", range(40))
def test_shortcuts_decide_as_the_plain_path_on_generated_clusters(tmp_path: Path, seed: int) -> None:
    snap = generated(tmp_path, seed)
    same(greedy(snap), greedy(snap, shortcuts=False))


@pytest.mark.parametrize("seed", range(100, 112))
def test_shortcuts_decide_as_the_plain_path_on_medium_clusters(tmp_path: Path, seed: int) -> None:
    snap = generated(tmp_path, seed, medium=True)
    same(greedy(snap), greedy(snap, shortcuts=False))


@pytest.mark.parametrize("seed", range(60))
def test_shortcuts_decide_as_the_plain_path_on_random_snapshots(seed: int) -> None:
    snap = random_snapshot(30_000 + seed, nodes=(2, 16), workloads=(1, 40), with_running=True,
                           with_topology=seed % 2 == 0)
    same(greedy(snap), greedy(snap, shortcuts=False))
