"""Deep DAGs on the device: both search modes and the scheduled index answer exactly, and the frontier
queue takes hops where the levels sweep takes levels."""

from __future__ import annotations

import numpy as np
import pytest

from grail_core.engines import CpuEngine
from grail_core.index import ReachabilityIndex
from grail_core.query import UNDECIDED, filter_pairs
from grail_core.scheduler import MIN_SCHEDULED_PAIRS
from grail_core.synthetic import downward_walk_pairs, layered_dag

from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]


def deep_index(nodes: int, levels: int, backend: str) -> tuple[ReachabilityIndex, np.ndarray, np.ndarray]:
    indptr, indices = layered_dag(nodes, levels, seed=levels)
    src = np.repeat(np.arange(nodes, dtype=np.int64), np.diff(indptr))
    index = ReachabilityIndex.from_edges(src, indices.astype(np.int64), num_nodes=nodes, backend=backend)
    return index, indptr, indices


def batches(indptr: np.ndarray, indices: np.ndarray, count: int) -> list[np.ndarray]:
    uniform = np.random.default_rng(5).integers(0, indptr.size - 1, size=(count, 2))
    return [uniform, np.stack(downward_walk_pairs(indptr, indices, count, seed=5), axis=1)]


@pytest.mark.parametrize(("nodes", "levels"), [(200_000, 2_000), (300_000, 60_000)])
def test_deep_dags_answer_exactly_in_both_modes(nodes: int, levels: int) -> None:
    from kernels.search import CudaSearchEngine

    index, indptr, indices = deep_index(nodes, levels, "cpu")
    engine = CudaSearchEngine(index.hot)
    for pairs in batches(indptr, indices, 200_000):
        undecided = np.flatnonzero(filter_pairs(index.hot, pairs) == UNDECIDED)
        sources, targets = (index.arrays.comp[pairs[undecided, k]] for k in (0, 1))
        expected = CpuEngine(index.hot).answer(sources, targets).answers
        rounds = {}
        for mode in ("levels", "frontier"):
            answers, stats = engine.answer_with_stats(sources, targets, mode)
            np.testing.assert_array_equal(answers, expected, err_msg=f"{nodes} nodes, {levels} levels, {mode}")
            assert stats.mode == mode
            rounds[mode] = stats.longest
        assert rounds["frontier"] * 10 < rounds["levels"]
    engine.release()


def test_an_index_on_the_gpu_schedules_deep_batches_exactly() -> None:
    """An index built for the GPU answers deep batches exactly whichever engine its scheduler picks."""
    index, indptr, indices = deep_index(300_000, 60_000, "cuda")
    reference, _, _ = deep_index(300_000, 60_000, "cpu")
    for pairs in batches(indptr, indices, 300_000):
        answers, stats = index.query_batch_with_stats(pairs)
        np.testing.assert_array_equal(answers, reference.query_batch(pairs))
        if stats.searched >= MIN_SCHEDULED_PAIRS:  # smaller batches go to the CPU unscheduled
            assert stats.search_backend in ("cpu", "cuda") and stats.search_seconds > 0
            assert set(stats.predicted_seconds) <= {"cpu", "levels", "frontier"}
    index.release()
