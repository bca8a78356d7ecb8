"""Every shared query set answered exactly as its ground truth (skipped where the datasets are absent)."""

from __future__ import annotations

import numpy as np
import pytest

from grail_core import ReachabilityIndex
from tests.conftest import dataset_graphs


def read_pairs(path) -> np.ndarray:
    return np.loadtxt(path, dtype=np.int64, ndmin=2)


@pytest.mark.parametrize("graph", dataset_graphs() or ["(no datasets)"])
def test_query_sets_match_ground_truth(datasets, graph: str) -> None:
    index = ReachabilityIndex.from_file(datasets / f"{graph}.gra", backend="cpu")
    for kind in ("", ".pos"):
        pairs = read_pairs(datasets / f"{graph}{kind}.que")
        truth = np.loadtxt(datasets / f"{graph}{kind}.ans", dtype=np.int64).astype(bool)
        answers, stats = index.query_batch_with_stats(pairs)
        mismatches = np.flatnonzero(answers != truth)
        assert mismatches.size == 0, f"{graph}{kind}: {mismatches.size} wrong, first pair {pairs[mismatches[0]]}"
        assert stats.positives == int(truth.sum())
        sample = np.random.default_rng(0).choice(len(pairs), 50, replace=False)
        assert [index.reachable(*pairs[i]) for i in sample] == truth[sample].tolist()
