"""Deep and wide extremes: a 1M-node chain, a 1M-node cycle and a hub with 1M parents."""

from __future__ import annotations

import numpy as np
import pytest

from grail_core import ReachabilityIndex

N = 1_000_000
pytestmark = pytest.mark.slow


def test_million_node_chain() -> None:
    nodes = np.arange(N)
    index = ReachabilityIndex.from_edges(nodes[:-1], nodes[1:], backend="cpu")
    assert index.stats.levels == N and index.stats.dag_nodes == N
    pairs = np.array([[0, N - 1], [N - 1, 0], [500_000, 500_001], [500_001, 500_000], [7, 7]])
    assert index.query_batch(pairs).tolist() == [True, False, True, False, True]
    rng = np.random.default_rng(1)
    random_pairs = rng.integers(0, N, size=(10_000, 2))
    np.testing.assert_array_equal(index.query_batch(random_pairs), random_pairs[:, 0] <= random_pairs[:, 1])


def test_million_node_cycle_is_one_component() -> None:
    nodes = np.arange(N)
    index = ReachabilityIndex.from_edges(nodes, (nodes + 1) % N, backend="cpu")
    assert index.stats.components == 1
    assert index.query_batch(np.random.default_rng(2).integers(0, N, size=(1000, 2))).all()


def test_million_parent_hub() -> None:
    leaves = np.arange(1, N)
    # Every leaf points at hub 0; the hub points at a sink and back at leaf 5 (a cycle {0, 5}).
    src = np.concatenate([leaves, [0, 0]])
    dst = np.concatenate([np.zeros(N - 1, dtype=np.int64), [N, 5]])
    index = ReachabilityIndex.from_edges(src, dst, backend="cpu")
    pairs = np.array([[3, N], [N, 3], [3, 4], [5, 9], [N - 1, 5], [0, 5], [5, 0], [9, 5]])
    assert index.stats.components == N
    assert index.query_batch(pairs).tolist() == [True, False, False, False, True, True, True, True]
