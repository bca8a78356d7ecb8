"""The tests' own brute force and graph files, checked against the plainest reference (one BFS per node)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.generated import GENERATORS, write_gra
from tests.reference import dag_levels, reachability_matrix, reachable_pairs
from tests.strategies import digraphs


@settings(max_examples=150, deadline=None)
@given(digraphs(max_nodes=150), st.integers(0, 2**32 - 1), st.sampled_from([64, 4096]))
def test_reachable_pairs_agrees_with_the_matrix(
    graph: tuple[int, list[tuple[int, int]]], seed: int, round_size: int
) -> None:
    n, edges = graph
    # > 64 sources: several words of bits a round, or several rounds of 64
    pairs = np.random.default_rng(seed).integers(0, n, size=(400, 2))
    matrix = reachability_matrix(n, edges)
    answers = reachable_pairs(n, np.array(edges).reshape(-1, 2), pairs, round_size=round_size)
    assert np.array_equal(answers, matrix[pairs[:, 0], pairs[:, 1]])


@settings(max_examples=100, deadline=None)
@given(digraphs(max_nodes=40, acyclic=True))
def test_dag_levels_is_the_longest_path(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = graph[0], [(u, v) for u, v in graph[1] if u != v]
    matrix = reachability_matrix(n, edges)
    # In a DAG a node is reached by more nodes than any of its parents: that count is a topological order.
    longest = dict.fromkeys(range(n), 1)
    for v in sorted(range(n), key=lambda v: matrix[:, v].sum()):
        for u, w in edges:
            if w == v:
                longest[v] = max(longest[v], longest[u] + 1)
    assert dag_levels(n, np.array(edges).reshape(-1, 2)) == max(longest.values())


def test_gra_files_hold_the_generated_edges(tmp_path) -> None:
    for name in ("dag", "cyclic"):
        graph = GENERATORS[name]()
        write_gra(tmp_path / "g.gra", graph.num_nodes, graph.edges)
        lines = (tmp_path / "g.gra").read_text().splitlines()
        assert lines[:2] == ["graph_for_greach", str(graph.num_nodes)] and len(lines) == graph.num_nodes + 2
        assert all(line.endswith("#") for line in lines[2:])
        rows = (line.split() for line in lines[2:])
        read = [(int(head.rstrip(":")), int(v)) for head, *rest in rows for v in rest[:-1]]
        assert sorted(read) == sorted(map(tuple, graph.edges.tolist()))
        assert graph.answers.any() and not graph.answers.all() and 0.5 < graph.positive_answers.mean() < 1


def test_generated_answers_are_the_matrix_answers() -> None:
    graph = GENERATORS["cyclic"]()
    truth = reachability_matrix(graph.num_nodes, [(u, v) for u, v in graph.edges.tolist()])
    for pairs, answers in ((graph.pairs, graph.answers), (graph.positive_pairs, graph.positive_answers)):
        assert np.array_equal(answers, truth[pairs[:, 0], pairs[:, 1]])
