"""The engine's level discovery under the simulator: a breadth-first rule one way and both ways against
a BFS on the host, its level bound, Kahn's levels against the CPU's, the build's trim both ways."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from numba import cuda

from grail_core.condensation import longest_path_levels
from grail_core.graph import Digraph
from grail_core.labeling import with_virtual_root
from grail_core.scc import LIVE
from kernels.arrays import to_device, to_host
from kernels.frontier import (
    DegreeSplit,
    Discovery,
    EngineConfig,
    LevelArrays,
    append_next,
    build_level_queues,
    degree_class,
    make_level_discovery,
    node_levels,
)
from kernels.scc import device_components

from .graphs import diamond_stack, hub_graph

CONFIG = EngineConfig.default()


def _labeling_graph(n: int, edges: list[tuple[int, int]]) -> tuple[Digraph, np.ndarray, np.ndarray]:
    dag = Digraph.from_edges(n, *np.array(edges, dtype=np.int64).reshape(-1, 2).T)
    indptr, indices, _ = with_virtual_root(dag.out_indptr, dag.out_indices)
    return dag, indptr, indices


@pytest.mark.parametrize("graph", [diamond_stack(3), hub_graph(roots=12, fan_out=10)], ids=["diamonds", "hub"])
def test_kahn_levels_are_the_longest_paths_from_the_root(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = graph
    dag, indptr, indices = _labeling_graph(n, edges)
    d_indptr, d_indices = cuda.to_device(indptr), cuda.to_device(indices)
    lq = build_level_queues(d_indptr, d_indices, n, n + 1, CONFIG, max_levels=64)
    assert lq is not None
    level = cuda.device_array(n + 1, dtype=np.int32)
    node_levels(lq, d_indptr, level, CONFIG)
    got = level.copy_to_host()
    assert got[n] == 0
    np.testing.assert_array_equal(got[:n] - 1, longest_path_levels(dag))
    assert lq.levels == int(got.max()) + 1
    np.testing.assert_array_equal(lq.host_cnt.sum(axis=0), np.bincount(got))  # each node on one level, once


def test_kahn_levels_stop_at_the_bound() -> None:
    # A 6-node chain below the virtual root: 7 levels, so a bound of 7 keeps them and 6 does not.
    n = 6
    _, indptr, indices = _labeling_graph(n, [(i, i + 1) for i in range(n - 1)])
    d_indptr, d_indices = cuda.to_device(indptr), cuda.to_device(indices)
    lq = build_level_queues(d_indptr, d_indices, n, n + 1, CONFIG, max_levels=n + 1)
    assert lq is not None and lq.levels == n + 1
    assert build_level_queues(d_indptr, d_indices, n, n + 1, CONFIG, max_levels=n) is None


def test_the_trim_peels_both_ways_before_and_after_the_reach() -> None:
    # A 4-clique (the pivot's component), and apart from it a 3-cycle with a chain of sources above it
    # and a chain of sinks below it: the trims peel both chains (one from the top, one from the bottom),
    # the reach places the clique, and only the 3-cycle is left for the CPU.
    clique = [(u, v) for u in range(4) for v in range(4) if u != v]
    cycle = [(4, 5), (5, 6), (6, 4)]
    sources = [(7, 8), (8, 9), (9, 4)]
    sinks = [(6, 10), (10, 11), (11, 12)]
    graph = Digraph.from_edges(13, *np.array(clique + cycle + sources + sinks).T)
    out_csr = (to_device(graph.out_indptr), to_device(graph.out_indices))
    in_csr = (to_device(graph.in_indptr), to_device(graph.in_indices))
    label, live = device_components(out_csr, in_csr, CONFIG)
    got = to_host(label)
    assert live == 3
    np.testing.assert_array_equal(np.flatnonzero(got == LIVE), [4, 5, 6])
    assert len(set(got[:4].tolist())) == 1 and got[0] in range(4)
    np.testing.assert_array_equal(got[7:], np.arange(7, 13))


class _Visit(NamedTuple):
    indptr: Any  # the CSR walked
    neighbours: Any
    dist: Any  # -1 until reached
    levels: LevelArrays
    split: DegreeSplit


@cuda.jit(device=True)
def _visit(v, e, lvl, args):
    """Breadth-first search as a rule: a node first reached goes on the next level."""
    c = args.neighbours[e]
    if cuda.atomic.cas(args.dist, c, -1, lvl + 1) == -1:
        append_next(c, degree_class(args.indptr[c + 1] - args.indptr[c], args.split), lvl, args.levels)


_bfs = make_level_discovery(_visit)
_bfs_both_ways = make_level_discovery(_visit, _visit)


def _bfs_distances(n: int, src: np.ndarray, dst: np.ndarray, start: int) -> np.ndarray:
    dist = np.full(n, -1)
    dist[start] = 0
    frontier = [start]
    while frontier:
        reached = {int(w) for v in frontier for w in dst[src == v] if dist[w] < 0}
        for w in reached:
            dist[w] = dist[frontier[0]] + 1
        frontier = sorted(reached)
    return dist


@pytest.mark.parametrize("both_ways", [False, True], ids=["out-edges", "both-ways"])
def test_a_rule_discovers_breadth_first_levels_from_a_start_set(both_ways: bool) -> None:
    # Cycles, self loops, repeated edges, an isolated node and a hub of every degree class (the
    # simulator's classes start at 4, 8 and 12 edges); one start node, as the levels then are BFS levels.
    rng = np.random.default_rng(5)
    n = 24
    src = np.concatenate([rng.integers(0, n - 1, 30), np.full(13, 3), [7, 7, 7]])
    dst = np.concatenate([rng.integers(0, n - 1, 30), np.arange(8, 21), [7, 9, 9]])
    graph = Digraph.from_edges(n, src, dst)
    start = 3
    want = _bfs_distances(
        n, *(np.concatenate([src, dst]), np.concatenate([dst, src])) if both_ways else (src, dst), start
    )
    dist = np.full(n, -1, dtype=np.int64)
    dist[start] = 0
    d_dist = cuda.to_device(dist)
    discovery = Discovery(n, n, CONFIG)
    out_indptr, in_indptr = cuda.to_device(graph.out_indptr), cuda.to_device(graph.in_indptr)
    forward = _Visit(out_indptr, cuda.to_device(graph.out_indices), d_dist, discovery.levels, discovery.split)
    starts = cuda.to_device(np.array([start], dtype=np.int32))
    backward = _Visit(in_indptr, cuda.to_device(graph.in_indices), d_dist, discovery.levels, discovery.split)

    def discover() -> tuple[int, bool]:
        if both_ways:
            return discovery.run(_bfs_both_ways, starts, out_indptr, forward, in_indptr, backward)
        return discovery.run(_bfs, starts, out_indptr, forward)

    levels, stopped = discover()
    got = d_dist.copy_to_host()
    np.testing.assert_array_equal(got, want)
    assert not stopped and levels == got.max() + 1
    lq = discovery.level_queues(levels)
    level = cuda.to_device(np.full(n, -1, dtype=np.int32))
    node_levels(lq, out_indptr, level, CONFIG)
    np.testing.assert_array_equal(level.copy_to_host(), got)  # the queues hold each reached node on its level

    # Again from the same queues, bounded at two levels: the bound stops it with the third level found.
    discovery.reset()
    dist[:] = -1
    dist[start] = 0
    d_dist.copy_to_device(dist)
    discovery.max_levels = 2
    assert discover() == (2, True)
    np.testing.assert_array_equal(d_dist.copy_to_host() >= 0, (want >= 0) & (want <= 2))


def test_a_rule_and_its_csrs_must_agree() -> None:
    discovery = Discovery(4, 4, CONFIG)
    indptr = cuda.to_device(np.zeros(5, dtype=np.int64))
    start = cuda.to_device(np.zeros(1, dtype=np.int32))
    with pytest.raises(ValueError, match="reverse_indptr"):
        discovery.run(_bfs_both_ways, start, indptr, ())
    with pytest.raises(ValueError, match="reverse_indptr"):
        discovery.run(_bfs, start, indptr, (), reverse_indptr=indptr)
