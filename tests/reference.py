"""Brute-force reachability for checking the index: one BFS per source node."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np


def reachability_matrix(num_nodes: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """``matrix[u, v]`` is True when v is reachable from u (every node reaches itself)."""
    children: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in edges:
        children[u].append(v)
    matrix = np.zeros((num_nodes, num_nodes), dtype=bool)
    for source in range(num_nodes):
        matrix[source, source] = True
        queue = deque([source])
        while queue:
            node = queue.popleft()
            for child in children[node]:
                if not matrix[source, child]:
                    matrix[source, child] = True
                    queue.append(child)
    return matrix


def named_reachability(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> np.ndarray:
    """``reachability_matrix`` over named nodes: ``matrix[i, j]`` is True when ``nodes[j]`` is reachable from
    ``nodes[i]``."""
    position = {node: i for i, node in enumerate(nodes)}
    return reachability_matrix(len(nodes), [(position[u], position[v]) for u, v in edges])


def reachable_pairs(num_nodes: int, edges: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``answers[i]``: does ``pairs[i, 0]`` reach ``pairs[i, 1]``? Breadth-first from every distinct source,
    64 sources at a time as the bits of one word per node, for graphs too large for the matrix above."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    order = np.argsort(edges[:, 0], kind="stable")
    src, dst = edges[order, 0], edges[order, 1]
    indptr = np.searchsorted(src, np.arange(num_nodes + 1))
    sources, which = np.unique(pairs[:, 0], return_inverse=True)
    answers = np.zeros(len(pairs), dtype=bool)
    for first in range(0, len(sources), 64):
        batch = sources[first : first + 64]
        reach = np.zeros(num_nodes, dtype=np.uint64)
        reach[batch] = np.left_shift(np.uint64(1), np.arange(len(batch), dtype=np.uint64))
        frontier = batch
        while frontier.size:  # nodes whose bits grew last round pass all their bits on
            degree = indptr[frontier + 1] - indptr[frontier]
            offsets = np.repeat(indptr[frontier] - np.cumsum(degree) + degree, degree)
            edge_ids = offsets + np.arange(int(degree.sum()))
            grown = np.zeros(num_nodes, dtype=np.uint64)
            np.bitwise_or.at(grown, dst[edge_ids], np.repeat(reach[frontier], degree))
            frontier = np.flatnonzero(grown & ~reach)
            reach |= grown
        mine = (which >= first) & (which < first + 64)
        bit = (which[mine] - first).astype(np.uint64)
        answers[mine] = (reach[pairs[mine, 1]] >> bit) & np.uint64(1) == 1
    return answers


def dag_levels(num_nodes: int, edges: np.ndarray) -> int:
    """Levels of a DAG: nodes on its longest path (Kahn's order, then one pass in it)."""
    children: list[list[int]] = [[] for _ in range(num_nodes)]
    indegree = [0] * num_nodes
    for u, v in np.asarray(edges).tolist():
        children[u].append(v)
        indegree[v] += 1
    order = [v for v in range(num_nodes) if indegree[v] == 0]
    level = [0] * num_nodes
    for u in order:  # grows while it is walked
        for v in children[u]:
            level[v] = max(level[v], level[u] + 1)
            indegree[v] -= 1
            if indegree[v] == 0:
                order.append(v)
    assert len(order) == num_nodes, "not a DAG"
    return max(level, default=-1) + 1


def bfs_distances(num_nodes: int, edges: list[tuple[int, int]], source: int) -> list[int]:
    """Edges on a shortest path from ``source`` to every node (-1 where unreachable; 0 for itself)."""
    children: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in edges:
        children[u].append(v)
    distance = [-1] * num_nodes
    distance[source] = 0
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for child in children[node]:
            if distance[child] < 0:
                distance[child] = distance[node] + 1
                queue.append(child)
    return distance
