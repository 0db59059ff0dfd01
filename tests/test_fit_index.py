"""FitIndex answers what the argmin over every leaf answers, through any updates."""

import random

import numpy as np

from planner.kueue.placement import FitIndex, fullest_fitting_node


def test_fit_index_matches_the_full_pass_through_random_updates() -> None:
    rng = random.Random(7)
    for trial in range(20):
        n = rng.randint(1, 60)
        counts = np.array([rng.randint(0, 6) for _ in range(n)], dtype=np.int64)
        index = FitIndex()
        index.update(np.arange(n), counts, counts + 1)  # before the first question: ignored
        for step in range(200):
            if rng.random() < 0.5:
                want = rng.randint(1, 7)
                assert index.fullest_fitting(counts, want) == fullest_fitting_node(counts, want), (trial, step)
            else:  # some leaves change, one maybe listed twice with the same change
                leaves = np.array([rng.randrange(n) for _ in range(rng.randint(1, 4))], dtype=np.int64)
                leaves = np.concatenate([leaves, leaves[:1]])
                new = np.array([rng.randint(0, 6) for _ in range(len(leaves))], dtype=np.int64)
                new[-1] = new[0]
                _, first = np.unique(leaves, return_index=True)
                keep = np.zeros(len(leaves), dtype=bool)
                keep[first] = True
                keep[-1] = True   # the repeat of leaves[0], same change
                leaves, new = leaves[keep], new[keep]
                index.update(leaves, counts[leaves], new)
                counts[leaves] = new
