"""Bitmask search under the simulator: answers equal brute-force BFS on random batches."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core import backends
from grail_core.index import ReachabilityIndex
from grail_core.query import QueryArrays, pack
from kernels.frontier import EngineConfig
from kernels.search import SearchOptions, search_pairs, search_pairs_with_stats, words_for
from kernels.search import device_index as device_module

from ..reference import reachability_matrix
from ..strategies import digraphs


def random_graph(n: int, m: int, seed: int, cycles: bool) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    edges = [(int(u), int(v)) for u, v in rng.integers(0, n, size=(m, 2)) if u != v]
    return edges if cycles else [(min(u, v), max(u, v)) for u, v in edges]


def blind(arrays: QueryArrays) -> QueryArrays:
    """The same DAG with labels and hub bits that decide nothing: the search must walk every path."""
    n = arrays.lo.shape[0]
    wide = np.iinfo(arrays.hi.dtype).max
    return arrays._replace(
        lo=np.zeros_like(arrays.lo),
        hi=np.full_like(arrays.hi, wide - 1),
        tree_lo=np.full_like(arrays.tree_lo, wide),
        fwd=np.zeros(n, np.uint64),
        bwd=np.zeros(n, np.uint64),
    )


@pytest.mark.parametrize(
    ("n", "m", "seed", "cycles", "words", "weaken"),
    [
        (18, 30, 1, False, 1, True),  # 364 pairs in 64-pair passes, no label help
        (16, 40, 2, True, 2, False),  # cycles: several nodes per DAG node, pairs inside one component
        (20, 24, 3, False, 0, True),  # words sized from memory: one pass
    ],
)
def test_all_pairs_match_bfs(n: int, m: int, seed: int, cycles: bool, words: int, weaken: bool) -> None:
    edges = random_graph(n, m, seed, cycles)
    index = ReachabilityIndex.from_edges(
        np.array([u for u, _ in edges] or [0]), np.array([v for _, v in edges] or [0]), num_nodes=n, backend="cpu"
    )
    truth = reachability_matrix(n, edges)
    arrays = blind(index.arrays) if weaken else index.arrays
    sources, targets = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    rng = np.random.default_rng(seed)
    extra = rng.integers(0, sources.size, size=40)  # repeated pairs
    sources, targets = np.concatenate([sources, sources[extra]]), np.concatenate([targets, targets[extra]])
    got = search_pairs(
        pack(arrays),
        arrays.comp[sources],
        arrays.comp[targets],
        SearchOptions(config=EngineConfig(block=32, blocks=1, medium_min=2, large_min=4, huge_min=8), max_words=words),
    )
    np.testing.assert_array_equal(got, truth[sources, targets])


def test_nodes_left_with_found_searches_only_are_cleared_for_the_next_pass() -> None:
    """(0, 3) marks node 2 and finds 3 from node 1 in the same level, so node 2 carries nothing live: it
    must still be cleared, or the next pass's search (2, 3) finds it already reached and never runs."""
    edges = np.array([[0, 1], [1, 2], [2, 3], [1, 3]])
    index = ReachabilityIndex.from_edges(edges[:, 0], edges[:, 1], num_nodes=4, backend="cpu")
    arrays = blind(index.arrays)
    sources = np.array([0] * 64 + [2])
    targets = np.array([3] * 64 + [3])
    got = search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets], SearchOptions(max_words=1))
    assert got.all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    digraphs(max_nodes=16),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([0, 1, 3]),
    st.booleans(),
)
def test_random_graphs_and_batches_match_bfs(
    graph: tuple[int, list[tuple[int, int]]], seed: int, words: int, distinct: int, weaken: bool
) -> None:
    """Random graphs (cycles, self loops, duplicate edges, isolated nodes) and random batches over several
    passes (pairs repeated, source == target, pairs inside one component), with labels that decide
    nothing or the real ones. ``distinct`` > 0 draws the batch from that many pairs, in runs: a pass
    of one search repeated leaves nodes whose searches were all found, which a pass of another search
    reaches again."""
    n, edges = graph
    src, dst = (np.array([e[k] for e in edges], dtype=np.int64) for k in (0, 1))
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
    arrays = blind(index.arrays) if weaken else index.arrays
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 64 * words * 4))
    pool = rng.integers(0, n, size=(distinct or count, 2))
    picks = rng.integers(0, len(pool), size=count)
    sources, targets = pool[np.sort(picks) if distinct else picks].T
    got = search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets], SearchOptions(max_words=words))
    np.testing.assert_array_equal(got, reachability_matrix(n, edges)[sources, targets])


def test_levels_that_outgrow_the_chunks_start_again_with_fewer_words() -> None:
    """4,500 pairs need 71 words (two summary words a node); chunk arrays for the widest level's nodes
    only overflow, and the call starts again with 35 words."""
    n = 14
    edges = random_graph(n, 26, 7, False)
    index = ReachabilityIndex.from_edges(
        np.array([u for u, _ in edges]), np.array([v for _, v in edges]), num_nodes=n, backend="cpu"
    )
    rng = np.random.default_rng(8)
    sources, targets = rng.integers(0, n, size=4500), rng.integers(0, n, size=4500)
    arrays = blind(index.arrays)
    got, stats = search_pairs_with_stats(
        pack(arrays), arrays.comp[sources], arrays.comp[targets], SearchOptions(chunks=1)
    )
    np.testing.assert_array_equal(got, reachability_matrix(n, edges)[sources, targets])
    assert stats.restarts == 1 and stats.words == 35


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
    index = ReachabilityIndex.from_edges(
        np.array([u for u, _ in edges]), np.array([v for _, v in edges]), num_nodes=n, backend="cpu"
    )
    truth = reachability_matrix(n, edges)
    rng = np.random.default_rng(7)
    sources, targets = rng.integers(0, n, size=4500), rng.integers(0, n, size=4500)
    arrays = blind(index.arrays)
    got = search_pairs(
        pack(arrays),
        arrays.comp[sources],
        arrays.comp[targets],
        SearchOptions(config=EngineConfig(block=32, blocks=1, medium_min=2, large_min=4, huge_min=8)),
    )
    np.testing.assert_array_equal(got, truth[sources, targets])


def small_index() -> tuple[ReachabilityIndex, np.ndarray, np.ndarray, np.ndarray]:
    n = 14
    edges = random_graph(n, 26, 5, True)
    index = ReachabilityIndex.from_edges(
        np.array([u for u, _ in edges]), np.array([v for _, v in edges]), num_nodes=n, backend="cpu"
    )
    sources, targets = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    return index, sources, targets, reachability_matrix(n, edges)[sources, targets]


def test_concurrent_calls_take_the_device_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device index cache and its status buffers serve every call: threads must not share them at once."""
    index, sources, targets, truth = small_index()
    inside, most, guard = [0], [0], threading.Lock()
    real = device_module.device_index

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

    monkeypatch.setattr(device_module, "device_index", watched)
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
    monkeypatch.setattr(device_module, "status_buffers", no_memory)
    with pytest.raises(MemoryError, match="out of device memory"):
        search_pairs(hot, arrays.comp[sources], arrays.comp[targets])
    # The backend's contract: pairs the label filter left open (here, with labels that decide nothing,
    # every pair of two different components).
    open_pairs = np.flatnonzero(arrays.comp[sources] != arrays.comp[targets])
    answers, engine = backends.search_pairs(
        "cuda", arrays, hot, arrays.comp[sources[open_pairs]], arrays.comp[targets[open_pairs]]
    )
    assert engine == "cpu"
    np.testing.assert_array_equal(answers, truth[open_pairs])
