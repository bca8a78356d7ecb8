"""Bitmask search under the simulator: answers equal brute-force BFS on random batches."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from grail_core import backends
from grail_core.index import ReachabilityIndex
from grail_core.query import QueryArrays, pack
from kernels import search as search_module
from kernels.frontier import EngineConfig
from kernels.search import SearchOptions, search_pairs, words_for

from ..reference import reachability_matrix


def random_graph(n: int, m: int, seed: int, cycles: bool) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    edges = [(int(u), int(v)) for u, v in rng.integers(0, n, size=(m, 2)) if u != v]
    return edges if cycles else [(min(u, v), max(u, v)) for u, v in edges]


def blind(arrays: QueryArrays) -> QueryArrays:
    """The same DAG with labels and hub bits that decide nothing: the search must walk every path."""
    n = arrays.lo.shape[0]
    wide = np.iinfo(arrays.hi.dtype).max
    return arrays._replace(lo=np.zeros_like(arrays.lo), hi=np.full_like(arrays.hi, wide - 1),
                           tree_lo=np.full_like(arrays.tree_lo, wide), fwd=np.zeros(n, np.uint64),
                           bwd=np.zeros(n, np.uint64))


@pytest.mark.parametrize(("n", "m", "seed", "cycles", "words", "weaken"), [
    (18, 30, 1, False, 1, True),  # 364 pairs in 64-pair passes, no label help
    (16, 40, 2, True, 2, False),  # cycles: several nodes per DAG node, pairs inside one component
    (20, 24, 3, False, 0, True),  # words sized from memory: one pass
])
def test_all_pairs_match_bfs(n: int, m: int, seed: int, cycles: bool, words: int, weaken: bool) -> None:
    edges = random_graph(n, m, seed, cycles)
    index = ReachabilityIndex.from_edges(np.array([u for u, _ in edges] or [0]),
                                         np.array([v for _, v in edges] or [0]), num_nodes=n, backend="cpu")
    truth = reachability_matrix(n, edges)
    arrays = blind(index.arrays) if weaken else index.arrays
    sources, targets = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    rng = np.random.default_rng(seed)
    extra = rng.integers(0, sources.size, size=40)  # repeated pairs
    sources, targets = np.concatenate([sources, sources[extra]]), np.concatenate([targets, targets[extra]])
    got = search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets],
                       SearchOptions(config=EngineConfig(block=32, blocks=1, medium_min=2, large_min=4, huge_min=8),
                                     max_words=words))
    np.testing.assert_array_equal(got, truth[sources, targets])


def test_empty_batch() -> None:
    index = ReachabilityIndex.from_edges(np.array([0]), np.array([1]), num_nodes=2, backend="cpu")
    assert search_pairs(index.hot, np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0


def test_words_for_batch_and_memory() -> None:
    assert words_for(100_000, 1_000, 1 << 30, 0.25) == 1563
    assert words_for(100_000, 25_000_000, 16 << 30, 0.25) == 21
    assert words_for(10, 25_000_000, 0, 0.25) == 1


def test_more_words_than_one_summary_word() -> None:
    """4,500 pairs need 71 status words a node, so the per-node summary spans two words."""
    n = 14
    edges = random_graph(n, 26, 7, False)
    index = ReachabilityIndex.from_edges(np.array([u for u, _ in edges]), np.array([v for _, v in edges]),
                                         num_nodes=n, backend="cpu")
    truth = reachability_matrix(n, edges)
    rng = np.random.default_rng(7)
    sources, targets = rng.integers(0, n, size=4500), rng.integers(0, n, size=4500)
    arrays = blind(index.arrays)
    got = search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets],
                       SearchOptions(config=EngineConfig(block=32, blocks=1, medium_min=2, large_min=4, huge_min=8)))
    np.testing.assert_array_equal(got, truth[sources, targets])


def small_index() -> tuple[ReachabilityIndex, np.ndarray, np.ndarray, np.ndarray]:
    n = 14
    edges = random_graph(n, 26, 5, True)
    index = ReachabilityIndex.from_edges(np.array([u for u, _ in edges]), np.array([v for _, v in edges]),
                                         num_nodes=n, backend="cpu")
    sources, targets = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    return index, sources, targets, reachability_matrix(n, edges)[sources, targets]


def test_concurrent_calls_take_the_device_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device index cache and its status buffers serve every call: threads must not share them at once."""
    index, sources, targets, truth = small_index()
    inside, most, guard = [0], [0], threading.Lock()
    real = search_module._device_index

    def watched(hot: object) -> object:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        try:
            return real(hot)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(search_module, "_device_index", watched)
    comp = index.arrays.comp
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: search_pairs(index.hot, comp[sources], comp[targets]), range(3)))
    assert most[0] == 1
    for got in results:
        np.testing.assert_array_equal(got, truth)


def test_out_of_device_memory_falls_back_to_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    class CudaAPIError(Exception):  # what numba-cuda raises when an allocation fails
        pass

    def no_memory(*args: object) -> None:
        raise CudaAPIError("[<CUresult.CUDA_ERROR_OUT_OF_MEMORY: 2>] Call to cuMemAlloc results in OUT_OF_MEMORY")

    index, sources, targets, truth = small_index()
    arrays = blind(index.arrays)
    hot = pack(arrays)
    monkeypatch.setattr(search_module, "_status_buffers", no_memory)
    with pytest.raises(MemoryError, match="out of device memory"):
        search_pairs(hot, arrays.comp[sources], arrays.comp[targets])
    # The backend's contract: pairs the label filter left open (here, with labels that decide nothing,
    # every pair of two different components).
    open_pairs = np.flatnonzero(arrays.comp[sources] != arrays.comp[targets])
    answers, engine = backends.search_pairs("cuda", arrays, hot, arrays.comp[sources[open_pairs]],
                                            arrays.comp[targets[open_pairs]])
    assert engine == "cpu"
    np.testing.assert_array_equal(answers, truth[open_pairs])
