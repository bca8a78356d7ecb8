"""Witness paths, descendants and ancestors against brute force: every path checked edge by edge and as
short as a BFS finds; listings and counts equal to BFS reach sets."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core import ReachabilityIndex
from tests.reference import bfs_distances, reachability_matrix
from tests.strategies import digraphs

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _index(n: int, edges: list[tuple[int, int]], **build: object) -> ReachabilityIndex:
    array = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return ReachabilityIndex.from_edges(array[:, 0], array[:, 1], num_nodes=n, backend="cpu", **build)


def check_path(path: list | None, source, target, edges: set, distance: int) -> None:
    """``path`` is None exactly when ``distance`` is -1, else a walk of the graph's edges from source to target
    of ``distance`` edges."""
    if distance < 0:
        assert path is None
        return
    assert path is not None and path[0] == source and path[-1] == target
    assert all((a, b) in edges for a, b in itertools.pairwise(path)), path
    assert len(path) - 1 == distance


@SETTINGS
@given(graph=digraphs(max_nodes=60), dims=st.integers(1, 4), hubs=st.sampled_from([0, 3, 64]))
def test_paths_are_shortest_walks_of_the_graph(graph: tuple[int, list[tuple[int, int]]], dims: int, hubs: int) -> None:
    n, edges = graph
    index = _index(n, edges, dims=dims, hubs=hubs)
    edge_set = set(edges)
    for source in range(n):
        distances = bfs_distances(n, edges, source)
        for target in range(n):
            check_path(index.path(source, target), source, target, edge_set, distances[target])


@SETTINGS
@given(graph=digraphs(max_nodes=60), dims=st.integers(1, 4), hubs=st.sampled_from([0, 64]))
def test_descendants_and_ancestors_match_bfs(graph: tuple[int, list[tuple[int, int]]], dims: int, hubs: int) -> None:
    n, edges = graph
    index = _index(n, edges, dims=dims, hubs=hubs)
    truth = reachability_matrix(n, edges)
    np.fill_diagonal(truth, False)  # a node is not its own descendant (networkx's convention)
    methods = set()
    for node in range(n):
        below, above = np.flatnonzero(truth[node]), np.flatnonzero(truth[:, node])
        np.testing.assert_array_equal(index.descendants(node), below)
        np.testing.assert_array_equal(index.descendant_ids(node), below)
        np.testing.assert_array_equal(index.ancestors(node), above)
        count = index.count_descendants(node)
        assert count.total == below.size
        assert index.count_ancestors(node) == (above.size, "traversal")
        methods.add(count.method)
    if n > 1 and not edges:
        assert methods == {"labels"}  # isolated nodes: every DFS tree holds a node's (empty) reach


def test_descendants_from_labels_on_a_tree_and_by_search_on_a_diamond() -> None:
    # A tree: every dimension's DFS tree is the tree itself, so the labels hold every node's descendants.
    tree = _index(7, [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)])
    assert tree.count_descendants(0) == (6, "labels") and tree.count_descendants(1) == (2, "labels")
    np.testing.assert_array_equal(tree.descendants(1), [3, 4])
    # A diamond with a tail: one DFS tree cannot hold both ways down, but a count is still exact.
    diamond = _index(5, [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)], dims=1)
    assert diamond.count_descendants(0).total == 4
    np.testing.assert_array_equal(diamond.descendants(0), [1, 2, 3, 4])


def test_paths_inside_a_component_and_named_nodes() -> None:
    index = ReachabilityIndex.from_bytes(b"a b\nb c\nc a\nc d\nd e\nx y\n", backend="cpu")
    assert index.path("b", "a") == ["b", "c", "a"]
    assert index.path("a", "e") == ["a", "b", "c", "d", "e"]
    assert index.path("e", "a") is None and index.path("x", "a") is None
    assert index.path("d", "d") == ["d"]
    assert index.descendants("c").tolist() == ["a", "b", "d", "e"]
    assert index.ancestors("d").tolist() == ["a", "b", "c"]
    assert index.descendants("e").size == 0
