"""Bitmask search under the simulator: both modes, every engine and a batch split over two devices give
the answers of brute-force BFS; the device cache keeps several indexes and evicts the least recently used."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core.engines import CpuEngine, SplitEngine
from grail_core.index import ReachabilityIndex
from grail_core.query import QueryArrays, pack
from grail_core.scheduler import CostModel, Scheduler
from kernels.device import Device
from kernels.frontier import EngineConfig
from kernels.search import CudaSearchEngine, SearchOptions, search_pairs, search_pairs_with_stats, words_for
from kernels.search.device_index import DeviceCache, Workspace, total_memory

from ..reference import reachability_matrix
from ..strategies import digraphs
from .graphs import diamond_stack

SMALL_CONFIG = EngineConfig(block=32, blocks=1, medium_min=2, large_min=4, huge_min=8)


def random_graph(n: int, m: int, seed: int, cycles: bool) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    edges = [(int(u), int(v)) for u, v in rng.integers(0, n, size=(m, 2)) if u != v]
    return edges if cycles else [(min(u, v), max(u, v)) for u, v in edges]


def build(n: int, edges: list[tuple[int, int]]) -> ReachabilityIndex:
    src, dst = (np.array([e[k] for e in edges] or [0], dtype=np.int64) for k in (0, 1))
    return ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")


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


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    sources, targets = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    return sources, targets


@pytest.mark.parametrize("mode", ["levels", "frontier"])
@pytest.mark.parametrize(
    ("n", "m", "seed", "cycles", "words", "weaken"),
    [
        (18, 30, 1, False, 1, True),  # 364 pairs in 64-pair passes, no label help
        (16, 40, 2, True, 2, False),  # cycles: several nodes per DAG node, pairs inside one component
        (20, 24, 3, False, 0, True),  # words sized from memory: one pass
    ],
)
def test_all_pairs_match_bfs(n: int, m: int, seed: int, cycles: bool, words: int, weaken: bool, mode: str) -> None:
    edges = random_graph(n, m, seed, cycles)
    index = build(n, edges)
    truth = reachability_matrix(n, edges)
    arrays = blind(index.arrays) if weaken else index.arrays
    sources, targets = all_pairs(n)
    extra = np.random.default_rng(seed).integers(0, sources.size, size=40)  # repeated pairs
    sources, targets = np.concatenate([sources, sources[extra]]), np.concatenate([targets, targets[extra]])
    got, stats = search_pairs_with_stats(
        pack(arrays),
        arrays.comp[sources],
        arrays.comp[targets],
        SearchOptions(config=SMALL_CONFIG, max_words=words, mode=mode),
    )
    np.testing.assert_array_equal(got, truth[sources, targets])
    assert stats.mode == mode


@pytest.mark.parametrize("mode", ["levels", "frontier"])
def test_nodes_left_with_found_searches_only_are_cleared_for_the_next_pass(mode: str) -> None:
    """(0, 3) marks node 2 and finds 3 from node 1 in the same level, so node 2 carries nothing live: it
    must still be cleared, or the next pass's search (2, 3) finds it already reached and never runs."""
    edges = [(0, 1), (1, 2), (2, 3), (1, 3)]
    arrays = blind(build(4, edges).arrays)
    sources = np.array([0] * 64 + [2])
    targets = np.array([3] * 64 + [3])
    options = SearchOptions(max_words=1, mode=mode)
    assert search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets], options).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    digraphs(max_nodes=16),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([0, 1, 3]),
    st.booleans(),
    st.sampled_from(["levels", "frontier"]),
)
def test_random_graphs_and_batches_match_bfs(
    graph: tuple[int, list[tuple[int, int]]], seed: int, words: int, distinct: int, weaken: bool, mode: str
) -> None:
    """Random graphs (cycles, self loops, duplicate edges, isolated nodes) and random batches over several
    passes (pairs repeated, source == target, pairs inside one component), with labels that decide
    nothing or the real ones, in both modes. ``distinct`` > 0 draws the batch from that many pairs, in
    runs: a pass of one search repeated leaves nodes whose searches were all found, which a pass of
    another search reaches again."""
    n, edges = graph
    index = build(n, edges)
    arrays = blind(index.arrays) if weaken else index.arrays
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 64 * words * 4))
    pool = rng.integers(0, n, size=(distinct or count, 2))
    picks = rng.integers(0, len(pool), size=count)
    sources, targets = pool[np.sort(picks) if distinct else picks].T
    options = SearchOptions(max_words=words, mode=mode)
    got = search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets], options)
    np.testing.assert_array_equal(got, reachability_matrix(n, edges)[sources, targets])


def ladder(rungs: int) -> list[tuple[int, int]]:
    """Two rails of ``rungs`` nodes with crossings: 2 rungs levels deep, every pair of a rail open to a search."""
    edges = []
    for i in range(rungs - 1):
        a, b = 2 * i, 2 * i + 1
        edges += [(a, a + 2), (b, b + 2), (a, b + 2)]
    return edges


def test_frontier_mode_takes_hops_not_levels() -> None:
    """On a deep DAG the levels sweep walks every level between a pass's lowest source and highest target;
    the frontier queue takes as many hops as its longest search. Both answer exactly."""
    rungs = 40
    edges = ladder(rungs)
    n = 2 * rungs
    arrays = blind(build(n, edges).arrays)
    # Short searches spread over the whole depth: each source a few rungs above its target.
    sources = np.arange(0, n - 8)
    targets = sources + np.where(sources % 3 == 0, 8, 5)
    truth = reachability_matrix(n, edges)[sources, targets]
    hot = pack(arrays)
    results = {}
    for mode in ("levels", "frontier"):
        options = SearchOptions(max_words=1, mode=mode)
        got, stats = search_pairs_with_stats(hot, arrays.comp[sources], arrays.comp[targets], options)
        np.testing.assert_array_equal(got, truth)
        results[mode] = stats
    assert results["levels"].longest >= rungs - 6
    assert results["frontier"].longest <= 4


def test_frontier_mode_expands_a_node_once_per_search() -> None:
    """Ten diamonds in a row: 1,024 paths from the top node, 31 nodes. A search that expanded a node once
    per path reaching it would push thousands of entries; once per search, it pushes one per node."""
    n, edges = diamond_stack(10)
    arrays = blind(build(n, edges).arrays)
    sources, targets = np.zeros(1, np.int64), np.array([n - 1])
    truth = reachability_matrix(n, edges)[sources, targets]
    options = SearchOptions(mode="frontier", max_words=1, entries=n)
    got, stats = search_pairs_with_stats(pack(arrays), arrays.comp[sources], arrays.comp[targets], options)
    np.testing.assert_array_equal(got, truth)
    assert (stats.mode, stats.restarts) == ("frontier", 0)


def test_frontier_entries_that_overflow_halve_the_words_then_sweep_levels() -> None:
    """Entry rows for a fraction of a pass: the call starts again with fewer words, and where even one
    word's entries do not fit, sweeps the levels. (How many entries a pass pushes depends on the order
    in which parents reach a node, so the first case may end in either mode.)"""
    n = 14
    edges = random_graph(n, 26, 7, False)
    arrays = blind(build(n, edges).arrays)
    rng = np.random.default_rng(8)
    sources, targets = rng.integers(0, n, size=300), rng.integers(0, n, size=300)
    truth = reachability_matrix(n, edges)[sources, targets]
    for entries in (80, 2):
        got, stats = search_pairs_with_stats(
            pack(arrays), arrays.comp[sources], arrays.comp[targets], SearchOptions(mode="frontier", entries=entries)
        )
        np.testing.assert_array_equal(got, truth)
        assert stats.restarts >= 1 and stats.words < 5
    assert stats.mode == "levels"


def test_levels_that_outgrow_the_chunks_start_again_with_fewer_words() -> None:
    """4,500 pairs need 71 words (two summary words a node); chunk arrays for the widest level's nodes
    only overflow, and the call starts again with 35 words."""
    n = 14
    edges = random_graph(n, 26, 7, False)
    rng = np.random.default_rng(8)
    sources, targets = rng.integers(0, n, size=4500), rng.integers(0, n, size=4500)
    arrays = blind(build(n, edges).arrays)
    got, stats = search_pairs_with_stats(
        pack(arrays), arrays.comp[sources], arrays.comp[targets], SearchOptions(chunks=1, mode="levels")
    )
    np.testing.assert_array_equal(got, reachability_matrix(n, edges)[sources, targets])
    assert stats.restarts == 1 and stats.words == 35


def test_empty_batch() -> None:
    index = build(2, [(0, 1)])
    assert search_pairs(index.hot, np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0


def test_words_for_batch_and_memory() -> None:
    assert words_for(100_000, 1_000, 1 << 30, 0.25) == 1563
    assert words_for(100_000, 25_000_000, 16 << 30, 0.25) == 21
    assert words_for(10, 25_000_000, 0, 0.25) == 1


def test_more_words_than_one_summary_word() -> None:
    """4,500 pairs need 71 status words a node, so the per-node summary spans two words."""
    n = 14
    edges = random_graph(n, 26, 7, False)
    rng = np.random.default_rng(7)
    sources, targets = rng.integers(0, n, size=4500), rng.integers(0, n, size=4500)
    arrays = blind(build(n, edges).arrays)
    options = SearchOptions(config=SMALL_CONFIG, mode="levels")
    got = search_pairs(pack(arrays), arrays.comp[sources], arrays.comp[targets], options)
    np.testing.assert_array_equal(got, reachability_matrix(n, edges)[sources, targets])


def gpu_favoured() -> CostModel:
    """A cost model by which the GPU always looks cheaper."""
    return CostModel(constants={"cpu": (1.0, 1.0), "levels": (0.0,) * 5, "frontier": (0.0,) * 4})


def small_case(seed: int = 5, weaken: bool = True) -> tuple[QueryArrays, np.ndarray, np.ndarray, np.ndarray]:
    """A graph with cycles, its arrays (labels blinded), and every pair of DAG nodes with its answer."""
    n = 14
    edges = random_graph(n, 26, seed, True)
    arrays = build(n, edges).arrays
    arrays = blind(arrays) if weaken else arrays
    sources, targets = all_pairs(n)
    return arrays, arrays.comp[sources], arrays.comp[targets], reachability_matrix(n, edges)[sources, targets]


def test_every_engine_and_a_split_over_two_devices_match_bfs() -> None:
    """The CPU engine, a CUDA engine, and a batch split in two parts over two devices (two engines with
    caches of their own on the simulator's one GPU) all give the brute-force answers."""
    arrays, sources, targets, truth = small_case()
    hot = pack(arrays)
    first, second = CudaSearchEngine(hot, Device(0)), CudaSearchEngine(hot, Device(0))
    split = SplitEngine([first, second], min_part=64, concurrent=False)
    assert split.parts(sources.size) == 2
    for engine in (CpuEngine(hot), first, split):
        for mode in ("levels", "frontier"):
            result = engine.answer(sources, targets, mode)
            np.testing.assert_array_equal(result.answers, truth, err_msg=f"{engine.name} {mode}")
    assert result.engine == "cuda:0+cuda:0"
    assert first.resident and second.resident
    split.release()
    assert not first.resident and not second.resident


def test_scheduled_batches_over_two_devices_match_bfs() -> None:
    """The scheduler with a split GPU engine: whatever it picks, the answers are exact."""
    arrays, sources, targets, truth = small_case(seed=6)
    hot = pack(arrays)
    split = SplitEngine([CudaSearchEngine(hot, Device(0)), CudaSearchEngine(hot, Device(0))], 32, concurrent=False)
    scheduler = Scheduler(hot, CpuEngine(hot), split, model=gpu_favoured(), parts=split.parts, min_pairs=0)
    answers, decision = scheduler.search(sources, targets)
    np.testing.assert_array_equal(answers, truth)
    assert decision.engine == "cuda:0+cuda:0" and decision.probe_pairs > 0


def test_device_cache_keeps_several_indexes_and_evicts_the_least_recently_used() -> None:
    cases = [small_case(seed) for seed in (11, 12, 13)]
    hots = [pack(arrays) for arrays, *_ in cases]
    device = Device(0)
    engines = [CudaSearchEngine(hot, device) for hot in hots]
    for engine, (_arrays, sources, targets, truth) in zip(engines, cases, strict=True):
        np.testing.assert_array_equal(engine.answer(sources, targets).answers, truth)
    assert all(engine.resident for engine in engines)
    cache = engines[0]._cache
    held = cache.held
    # Room for about two of the three copies: using the first again makes the second the least recent.
    with device.context():
        cache.fraction = 2.5 * held / 3 / total_memory()
    cache.entries.popitem(last=False)  # the first goes out, and comes back on its next call
    _arrays, sources, targets, truth = cases[0]
    np.testing.assert_array_equal(engines[0].answer(sources, targets).answers, truth)
    assert engines[0].resident and not engines[1].resident and engines[2].resident
    engines[2].release()
    assert not engines[2].resident
    del engines[0]  # a collected engine's copy goes too
    assert len(cache.entries) == 0


def test_concurrent_calls_take_the_device_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A device's cache and workspace serve every call on it: threads must not use them at once."""
    arrays, sources, targets, truth = small_case(weaken=False)
    engine = CudaSearchEngine(pack(arrays), Device(0))
    inside, most, guard = [0], [0], threading.Lock()
    real = DeviceCache.index

    def watched(self: DeviceCache, key: int, hot: object) -> object:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        try:
            return real(self, key, hot)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(DeviceCache, "index", watched)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: engine.answer(sources, targets).answers, range(3)))
    assert most[0] == 1
    for got in results:
        np.testing.assert_array_equal(got, truth)


def test_out_of_device_memory_falls_back_to_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    class CudaAPIError(Exception):  # what numba-cuda raises when an allocation fails
        pass

    def no_memory(*args: object) -> None:
        raise CudaAPIError("[<CUresult.CUDA_ERROR_OUT_OF_MEMORY: 2>] Call to cuMemAlloc results in OUT_OF_MEMORY")

    arrays, sources, targets, truth = small_case()
    hot = pack(arrays)
    engine = CudaSearchEngine(hot, Device(0))
    monkeypatch.setattr(Workspace, "status", no_memory)
    with pytest.raises(MemoryError, match="out of device memory"):
        engine.answer(sources, targets)
    scheduler = Scheduler(hot, CpuEngine(hot), engine, model=gpu_favoured(), min_pairs=0)
    answers, decision = scheduler.search(sources, targets)
    assert decision.engine == "cpu"
    np.testing.assert_array_equal(answers, truth)
