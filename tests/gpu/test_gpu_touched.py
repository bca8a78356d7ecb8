"""The pairs edge updates touch, searched on the device: on a deep DAG and an R-MAT graph with cycles, with
1,000 updates pending (half removed edges, half added ones closing cycles), the GPU's answers equal the CPU
walk's, both called directly on every pair and routed by the scheduler, and the device answered pairs."""

from __future__ import annotations

import numpy as np
import pytest

import grail_core.scheduler
from grail_core.engines import CpuEngine
from grail_core.index import ReachabilityIndex
from grail_core.scheduler import CostModel, Scheduler
from grail_core.synthetic import downward_walk_pairs, layered_dag

from . import device_present

pytestmark = [
    pytest.mark.usefixtures("updates_kept"),  # they test the answers with updates pending
    pytest.mark.gpu,
    pytest.mark.skipif(not device_present(), reason="needs a CUDA device"),
]

PENDING = 1_000
PAIRS = 50_000


def _graph(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "deep":
        return layered_dag(200_000, 2_000, seed=7)
    from benchmarks.generate import rmat

    return rmat(nodes=1 << 17, edges=1 << 20, seed=7)


def _updated(indptr: np.ndarray, indices: np.ndarray, backend: str = "cpu") -> ReachabilityIndex:
    n = indptr.size - 1
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend=backend)
    rng = np.random.default_rng(11)
    gone = rng.choice(src.size, size=PENDING // 2, replace=False)
    added = rng.integers(0, n, size=(PENDING // 2, 2))
    index.update_many([([], [[int(src[e]), int(dst[e])]]) for e in gone] + [([[int(u), int(v)]], []) for u, v in added])
    return index


def gpu_favoured() -> CostModel:
    return CostModel(constants={"cpu": (1.0, 1.0), "levels": (0.0,) * 5, "frontier": (0.0,) * 4})


@pytest.mark.parametrize("name", ["deep", "rmat"])
def test_touched_pairs_on_the_gpu_equal_the_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels.search import CudaSearchEngine

    indptr, indices = _graph(name)
    index = _updated(indptr, indices)
    version = index.current()
    assert version.number - version.labels.version == PENDING
    rng = np.random.default_rng(3)
    walks = np.stack(downward_walk_pairs(indptr, indices, PAIRS, seed=3), axis=1)
    pairs = np.concatenate([rng.integers(0, indptr.size - 1, size=(PAIRS, 2)), walks])
    expected, cpu_stats = index.query_ids(pairs)  # the CPU scheduler's: walks on the CPU
    assert cpu_stats.searched_updated > 0

    hot = index.hot
    engine = CudaSearchEngine(hot)
    # Every pair, decided or not, searched on the device's copy of the updated graph.
    direct = engine.answer_touched(version.touched_graph(), pairs[:, 0], pairs[:, 1])
    np.testing.assert_array_equal(direct.answers, expected)
    assert direct.rounds > 0
    # Routed: the scheduler sends the pairs searched on the updated graph to the GPU.
    version.search.scheduler = Scheduler(
        hot, CpuEngine(hot), engine, model=gpu_favoured(), min_pairs=0, min_touched_pairs=0
    )
    monkeypatch.setattr(grail_core.scheduler, "PROBE_PAIRS", 1)
    before = engine.touched_pairs
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, expected)
    # A probe of one pair a search: each of the batch's two searches that has two pairs or more sends some on.
    assert stats.searched_updated > 2 and engine.touched_pairs > before
    engine.release()


def test_an_index_on_the_gpu_answers_touched_pairs_exactly() -> None:
    """backend 'cuda' with the machine's own cost model: whichever engine it picks, the answers are the CPU's."""
    indptr, indices = _graph("rmat")
    cpu, gpu = _updated(indptr, indices, "cpu"), _updated(indptr, indices, "cuda")
    pairs = np.random.default_rng(4).integers(0, indptr.size - 1, size=(PAIRS, 2))
    np.testing.assert_array_equal(gpu.query_ids(pairs)[0], cpu.query_ids(pairs)[0])
