"""The GPU search of the pairs edge updates touch, under the simulator: on versions whose updates add and
remove edges, merge and split components and add nodes, its answers equal brute-force BFS and the CPU
walk's, called directly and routed by the scheduler; the CPU takes over when the device runs out of memory;
a version's device copy goes with it."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core.engines import CpuEngine
from grail_core.index import ReachabilityIndex
from grail_core.scheduler import Scheduler
from grail_core.version import Version
from kernels.device import Device
from kernels.search import CudaSearchEngine

from ..reference import reachable_pairs
from ..strategies import digraphs
from .test_search import gpu_favoured

pytestmark = pytest.mark.usefixtures("updates_kept")  # they test the answers with updates pending

Update = tuple[list[list[int]], list[list[int]]]


class Replay:
    """An index and the edge set its updates make, for brute force."""

    def __init__(self, n: int, edges: list[tuple[int, int]], hubs: int = 4) -> None:
        src, dst = (np.array([e[k] for e in edges] or [0], dtype=np.int64) for k in (0, 1))
        self.index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu", hubs=hubs)
        self.nodes = n
        self.edges = {(u, v) for u, v in edges if u != v}

    def update(self, add: list[list[int]], remove: list[list[int]]) -> None:
        self.index.update(add, remove)
        self.edges -= {(u, v) for u, v in remove}
        for u, v in add:
            self.nodes = max(self.nodes, u + 1, v + 1)
            if u != v:
                self.edges.add((u, v))

    def pairs(self) -> np.ndarray:
        return np.argwhere(np.ones((self.nodes, self.nodes), dtype=bool)).astype(np.int64)

    def truth(self, pairs: np.ndarray) -> np.ndarray:
        edges = np.array(sorted(self.edges), dtype=np.int64).reshape(-1, 2)
        return reachable_pairs(self.nodes, edges, pairs)


def routed_to_gpu(index: ReachabilityIndex) -> CudaSearchEngine:
    """A GPU engine that the index's scheduler always prefers (its versions share the scheduler)."""
    hot = index.hot
    engine = CudaSearchEngine(hot, Device(0))
    index.current().search.scheduler = Scheduler(
        hot, CpuEngine(hot), engine, model=gpu_favoured(), min_pairs=0, min_touched_pairs=0
    )
    return engine


def touched_case() -> tuple[Version, np.ndarray, np.ndarray]:
    """A version whose updates split a component (its cycle cut), merge two (a back edge), and add a node on
    a new path; with a self loop, a repeated edge and an isolated node; (version, every pair, answers)."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (2, 4), (4, 5), (5, 6), (6, 7), (7, 5), (8, 8), (4, 5), (3, 9)]
    case = Replay(11, edges)
    case.update([[6, 4], [11, 0], [9, 11]], [[3, 0], [5, 6]])
    pairs = case.pairs()
    return case.index.current(), pairs, case.truth(pairs)


def test_touched_case_matches_bfs() -> None:
    version, pairs, truth = touched_case()
    engine = CudaSearchEngine(version.search.hot, Device(0))
    result = engine.answer_touched(version.touched_graph(), pairs[:, 0], pairs[:, 1])
    np.testing.assert_array_equal(result.answers, truth)
    assert result.mode == "touched" and result.rounds > 0 and engine.touched_pairs == pairs.shape[0]


def _random_updates(case: Replay, rng: np.random.Generator, count: int) -> None:
    """Removals of edges present (cutting cycles, splitting components), edges added at random (closing
    cycles, merging them) and now and then a new node."""
    for step in range(count):
        if step % 2 == 0 and case.edges:
            edge = sorted(case.edges)[int(rng.integers(len(case.edges)))]
            case.update([], [list(edge)])
        else:
            case.update([[int(rng.integers(case.nodes + 1)), int(rng.integers(case.nodes))]], [])


@pytest.mark.parametrize("seed", [0, 1])
def test_touched_pairs_match_bfs_and_the_cpu_walk(seed: int) -> None:
    """A graph with cycles, self loops, repeats and isolated nodes, 16 updates; every pair answered by the
    GPU directly, and by the index with the scheduler routing its searched pairs to the GPU, equals BFS
    and the same index on the CPU."""
    rng = np.random.default_rng(seed)
    n = 22
    edges = [tuple(e) for e in rng.integers(0, n - 3, size=(34, 2)).tolist()]  # the last three isolated
    edges += [(3, 3), edges[0], edges[1]]
    gpu, cpu = Replay(n, edges), Replay(n, edges)
    engine = routed_to_gpu(gpu.index)
    state = rng.bit_generator.state
    _random_updates(gpu, rng, 16)
    rng.bit_generator.state = state
    _random_updates(cpu, rng, 16)
    pairs = gpu.pairs()
    truth = gpu.truth(pairs)
    version = gpu.index.current()
    direct = engine.answer_touched(version.touched_graph(), pairs[:, 0], pairs[:, 1])
    np.testing.assert_array_equal(direct.answers, truth)
    answers, stats = gpu.index.query_ids(pairs)
    np.testing.assert_array_equal(answers, truth)
    np.testing.assert_array_equal(cpu.index.query_ids(pairs)[0], truth)
    assert stats.searched_updated > 0 and engine.touched_pairs > pairs.shape[0]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(digraphs(max_nodes=14), st.lists(st.tuples(st.booleans(), st.integers(0, 15), st.integers(0, 14)), max_size=8))
def test_touched_search_equals_bfs_on_random_updates(graph: Any, steps: list[tuple[bool, int, int]]) -> None:
    n, edges = graph
    case = Replay(n, edges)
    for remove, a, b in steps:
        if remove and case.edges:
            case.update([], [list(sorted(case.edges)[a % len(case.edges)])])
        else:
            case.update([[a % (case.nodes + 1), b % case.nodes]], [])
    pairs = case.pairs()
    version = case.index.current()
    if not version.updates_pending:
        return
    engine = CudaSearchEngine(version.search.hot, Device(0))
    np.testing.assert_array_equal(
        engine.answer_touched(version.touched_graph(), pairs[:, 0], pairs[:, 1]).answers, case.truth(pairs)
    )


def test_a_split_component_matches_bfs_on_the_gpu() -> None:
    """A component of a cycle with chords loses the only edge into one member (split off alone) and an edge
    out of another: the members become keys of their own, and the answers stay exact."""
    n = 10
    edges = [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 2) % n) for i in range(n) if (i + 2) % n != 0]
    edges += [(0, n), (n, n + 1)]
    case = Replay(n + 2, edges)
    engine = routed_to_gpu(case.index)
    case.update([], [[n - 1, 0], [4, 6]])
    pairs = case.pairs()
    graph = case.index.current().touched_graph()
    assert graph.node_keys.size >= n  # the split component's members
    np.testing.assert_array_equal(case.index.query_ids(pairs)[0], case.truth(pairs))
    assert engine.touched_pairs > 0


def test_a_gpu_out_of_memory_leaves_the_pairs_to_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    version, pairs, truth = touched_case()
    engine = CudaSearchEngine(version.search.hot, Device(0))
    hot = version.search.hot
    version.search.scheduler = Scheduler(
        hot, CpuEngine(hot), engine, model=gpu_favoured(), min_pairs=0, min_touched_pairs=0
    )

    def no_memory(*args: object) -> None:
        raise MemoryError("the GPU search ran out of device memory")

    monkeypatch.setattr(CudaSearchEngine, "answer_touched", no_memory)
    answers, stats = version.query_ids(pairs)
    np.testing.assert_array_equal(answers, truth)
    assert stats.searched_updated > 0 and engine.touched_pairs == 0


def test_a_versions_device_copy_goes_with_it() -> None:
    version, pairs, _truth = touched_case()
    engine = CudaSearchEngine(version.search.hot, Device(0))
    engine.answer_touched(version.touched_graph(), pairs[:4, 0], pairs[:4, 1])
    held = engine._touched._arrays
    engine.answer_touched(version.touched_graph(), pairs[:4, 0], pairs[:4, 1])
    assert held is not None and engine._touched._arrays is held  # uploaded once
    del version
    gc.collect()
    assert engine._touched._arrays is None
