"""Property tests: the index answers every pair exactly as a brute-force BFS does."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core import ReachabilityIndex
from grail_core.engines import CpuEngine
from grail_core.labeling import label_all, make_child_orders, with_virtual_root
from grail_core.query import (
    NO,
    SERIAL_BATCH,
    UNDECIDED,
    SearchBuffers,
    answer_pair,
    answer_pairs,
    filter_pairs,
    pack,
)
from grail_core.records import ID
from grail_core.scheduler import CostModel, Scheduler
from tests.reference import reachability_matrix
from tests.strategies import digraphs

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _index(n: int, edges: list[tuple[int, int]], **build: object) -> ReachabilityIndex:
    array = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return ReachabilityIndex.from_edges(array[:, 0], array[:, 1], num_nodes=n, backend="cpu", **build)


@SETTINGS
@given(graph=digraphs(), dims=st.integers(1, 8), seed=st.integers(0, 2**32), hubs=st.sampled_from([0, 3, 64]))
def test_every_pair_matches_bfs(graph: tuple[int, list[tuple[int, int]]], dims: int, seed: int, hubs: int) -> None:
    n, edges = graph
    truth = reachability_matrix(n, edges)
    # Few or no hubs leave more pairs to the search: with 64, small graphs are decided by the masks alone.
    index = _index(n, edges, dims=dims, seed=seed, hubs=hubs)
    sources, targets = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    pairs = np.stack([sources.ravel(), targets.ravel()], axis=1)
    answers, stats = index.query_batch_with_stats(pairs)
    np.testing.assert_array_equal(answers, truth.ravel())
    assert stats.pairs == n * n and stats.positives == int(truth.sum())
    assert stats.decided_by_filter + stats.searched == n * n


@SETTINGS
@given(graph=digraphs(max_nodes=40), data=st.data())
def test_single_pair_api_matches_bfs(graph: tuple[int, list[tuple[int, int]]], data: st.DataObject) -> None:
    n, edges = graph
    truth = reachability_matrix(n, edges)
    index = _index(n, edges, hubs=0)
    for _ in range(20):
        u = data.draw(st.integers(0, n - 1))
        v = data.draw(st.integers(0, n - 1))
        assert index.reachable(u, v) == truth[u, v] == index.query_pair(u, v)[0]


@SETTINGS
@given(graph=digraphs(acyclic=True), dims=st.integers(1, 4), seed=st.integers(0, 1000))
def test_labels_are_valid_grail_intervals(graph: tuple[int, list[tuple[int, int]]], dims: int, seed: int) -> None:
    n, edges = graph
    index = _index(n, edges, dims=dims, seed=seed)
    a = index.arrays
    truth = reachability_matrix(n, edges)
    dag_truth = np.zeros((a.level.size,) * 2, dtype=bool)
    dag_truth[a.comp[:, None], a.comp[None, :]] |= truth
    for k in range(dims):
        assert sorted(a.hi[:, k]) == list(range(a.level.size))  # post-orders are a permutation
        contained = (a.lo[:, None, k] <= a.lo[None, :, k]) & (a.hi[None, :, k] <= a.hi[:, None, k])
        assert not (dag_truth & ~contained).any()  # reachable implies contained: no false negatives
        in_tree = (a.tree_lo[:, None, k] <= a.hi[None, :, k]) & (a.hi[None, :, k] <= a.hi[:, None, k])
        assert not (in_tree & ~dag_truth).any()  # the DFS-tree interval never claims a false positive


def test_labels_follow_the_given_child_order() -> None:
    # Diamond 0->1, 0->2, 1->3, 2->3: which child is visited first decides the post-orders.
    indptr, _indices, root = with_virtual_root(np.array([0, 2, 3, 4, 4]), np.array([1, 2, 3, 3], dtype=np.int32))
    orders = np.array([[1, 2, 3, 3, 0], [2, 1, 3, 3, 0]], dtype=np.int32)
    post, minpost, tree_low = label_all(indptr, orders, root)
    np.testing.assert_array_equal(post, [[3, 1, 2, 0, 4], [3, 2, 1, 0, 4]])
    np.testing.assert_array_equal(minpost, np.zeros((2, 5)))
    np.testing.assert_array_equal(tree_low, [[0, 0, 2, 0, 0], [0, 2, 0, 0, 0]])


def test_child_orders_are_seeded_row_permutations() -> None:
    indptr = np.array([0, 5, 5, 9], dtype=np.int64)
    indices = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9], dtype=np.int32)
    first = make_child_orders(indptr, indices, 3, seed=7)
    np.testing.assert_array_equal(first, make_child_orders(indptr, indices, 3, seed=7))
    assert not np.array_equal(first, make_child_orders(indptr, indices, 3, seed=8))
    for row in first:
        assert sorted(row[:5]) == [1, 2, 3, 4, 5] and sorted(row[5:]) == [6, 7, 8, 9]


def test_single_pair_buffers_survive_running_out_of_marks() -> None:
    # A stack of diamonds: a DFS tree covers only one side of each, so many pairs need a search.
    edges = [(3 * i + j, 3 * i + k) for i in range(8) for j, k in ((0, 1), (0, 2), (1, 3), (2, 3))]
    n = 25
    index = _index(n, edges, dims=1, hubs=0)
    truth = reachability_matrix(n, edges)
    buffers = index.current().search.buffers
    searched_positive = [
        (u, v) for u in range(n) for v in range(n) if truth[u, v] and answer_pair(index.hot, buffers, u, v)[1]
    ]
    assert searched_positive
    with buffers.take() as (stamp, _, _):
        stamp[:] = 1  # left over from the first mark of an earlier cycle
    buffers._free[0][2] = np.iinfo(np.int32).max  # marks run out: the next take starts over
    for u, v in searched_positive:
        assert answer_pair(index.hot, buffers, u, v) == (True, True)
    for u in range(n):
        for v in range(n):
            assert index.reachable(u, v) == truth[u, v] == index.query_pair(u, v)[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=digraphs())
def test_filter_then_search_path_matches_the_fused_path(graph: tuple[int, list[tuple[int, int]]]) -> None:
    # An index with a GPU engine filters first and searches the undecided pairs apart (here a second
    # CPU engine stands in for the GPU, and a scheduler that schedules every batch); it must agree
    # with the one-pass CPU engine.
    n, edges = graph
    index = _index(n, edges, hubs=0)
    pairs = np.random.default_rng(n).integers(0, n, size=(min(n * n, 4000), 2))
    fused, fused_stats = index.query_batch_with_stats(pairs)
    index.scheduler = Scheduler(index.hot, CpuEngine(index.hot), CpuEngine(index.hot), model=CostModel(), min_pairs=0)
    split, split_stats = index.query_batch_with_stats(pairs)
    np.testing.assert_array_equal(split, fused)
    np.testing.assert_array_equal(fused, reachability_matrix(n, edges)[pairs[:, 0], pairs[:, 1]])
    assert (split_stats.searched, split_stats.positives) == (fused_stats.searched, fused_stats.positives)


@SETTINGS
@given(graph=digraphs(), hubs=st.sampled_from([0, 64]))
def test_both_record_layouts_answer_alike(graph: tuple[int, list[tuple[int, int]]], hubs: int) -> None:
    # Large graphs get compact node records (and prefetching); force both layouts on small ones.
    n, edges = graph
    index = _index(n, edges, hubs=hubs)
    sources, targets = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    pairs = np.stack([sources.ravel(), targets.ravel()], axis=1)
    truth = reachability_matrix(n, edges).ravel()
    for compact in (False, True):
        hot = pack(index.arrays, compact=compact)
        assert hot.compact == compact
        # The verdicts of pending updates read a node's DAG node off its record, not off ``comp``.
        np.testing.assert_array_equal(hot.rec_node[:, ID], index.arrays.comp)
        # All pairs on the calling thread in two calls on one stamp array (the second's marks above the
        # first's), then repeated past SERIAL_BATCH, in parallel.
        buffers = SearchBuffers(hot.rec_dag.shape[0])
        half = pairs.shape[0] // 2
        first, second = answer_pairs(hot, pairs[:half], buffers), answer_pairs(hot, pairs[half:], buffers)
        np.testing.assert_array_equal(np.concatenate([first[0], second[0]]), truth)
        repeats = SERIAL_BATCH // pairs.shape[0] + 1
        answers, searched, positives = answer_pairs(hot, np.tile(pairs, (repeats, 1)), buffers)
        np.testing.assert_array_equal(answers, np.tile(truth, repeats))
        assert (searched, positives) == (repeats * (first[1] + second[1]), repeats * np.count_nonzero(truth))
        np.testing.assert_array_equal(filter_pairs(hot, pairs) != NO, truth | (filter_pairs(hot, pairs) == UNDECIDED))
