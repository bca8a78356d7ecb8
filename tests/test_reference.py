"""The brute force that the other tests trust: ``reachable_pairs`` (for large graphs: components, then their
topological order) answers every pair as the plain BFS matrix does, on graphs with cycles, self loops,
duplicate edges and isolated nodes, and with more sources than one round of bits."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reference import reachability_matrix, reachable_pairs
from tests.strategies import cycle_chains, digraphs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=st.one_of(digraphs(), cycle_chains()), round_size=st.sampled_from([64, 128, 4096]))
def test_reachable_pairs_match_the_bfs_matrix(graph: tuple[int, list[tuple[int, int]]], round_size: int) -> None:
    n, edges = graph
    truth = reachability_matrix(n, edges)
    sources, targets = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    pairs = np.stack([sources.ravel(), targets.ravel()], axis=1)[::-1]  # sources out of order
    # over 64 nodes: several rounds of 64 sources, or several words of bits a round
    answers = reachable_pairs(n, np.array(edges).reshape(-1, 2), pairs, round_size=round_size)
    np.testing.assert_array_equal(answers, truth.ravel()[::-1])
