"""The shared datasets (GRAIL_DATASETS), an extra layer over the generated graphs the rest of the suite uses:
every query set answered exactly as its ground truth, the largest file parsed into compact arrays. Skipped as a
whole where the datasets are absent (a fresh clone)."""

from __future__ import annotations

import numpy as np
import pytest

from grail_core import ReachabilityIndex, read_graph
from tests.conftest import dataset_graphs, datasets_dir

if not datasets_dir().is_dir():
    pytest.skip(f"datasets folder {datasets_dir()} is absent (set GRAIL_DATASETS)", allow_module_level=True)


def read_pairs(path) -> np.ndarray:
    return np.loadtxt(path, dtype=np.int64, ndmin=2)


@pytest.mark.parametrize("graph", dataset_graphs())
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


def test_large_gra_parses_in_seconds_into_compact_arrays(datasets) -> None:
    graph = read_graph(datasets / "uniprotenc_22m.scc.gra")
    assert graph.num_nodes == 1595444 and graph.src.size == 1595442
    # One int64 per edge end and nothing else: no Python object per edge, no spare capacity kept.
    assert graph.src.base is None and graph.src.nbytes == 8 * graph.src.size
