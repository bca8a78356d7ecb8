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


def reachable_pairs(num_nodes: int, edges: np.ndarray, pairs: np.ndarray, round_size: int = 4096) -> np.ndarray:
    """``answers[i]``: does ``pairs[i, 0]`` reach ``pairs[i, 1]``? For graphs too large for the matrix above: the
    strongly connected components (scipy's), then, in their topological order, each component takes the bits of
    the pairs' sources that reach its parents (``round_size`` sources a round, one bit each: 512 bytes a
    component). Linear in the edges per round however deep the graph (a breadth-first search per 64 sources
    took a numpy pass over every node per level: minutes on a deep DAG of 60,000 nodes)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    edges = np.unique(np.asarray(edges, dtype=np.int64).reshape(-1, 2), axis=0)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    ones = np.ones(len(edges), dtype=np.int8)
    graph = csr_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(num_nodes, num_nodes))
    count, comp = connected_components(graph, directed=True, connection="strong")
    up, down = comp[edges[:, 0]], comp[edges[:, 1]]
    up, down = up[up != down], down[up != down]
    steps = _topological_steps(count, up, down)
    sources, which = np.unique(pairs[:, 0], return_inverse=True)
    answers = np.zeros(len(pairs), dtype=bool)
    for first in range(0, len(sources), round_size):
        batch = np.arange(min(round_size, len(sources) - first))
        reach = np.zeros((count, round_size // 64), dtype=np.uint64)
        np.bitwise_or.at(reach, (comp[sources[first + batch]], batch // 64), _bits(batch))
        for components, parents, starts in steps:  # every parent's bits are final before its children take them
            reach[components] |= np.bitwise_or.reduceat(reach[parents], starts, axis=0)
        mine = np.flatnonzero((which >= first) & (which < first + round_size))
        bit = which[mine] - first
        answers[mine] = reach[comp[pairs[mine, 1]], bit // 64] & _bits(bit) != 0
    return answers


def _bits(position: np.ndarray) -> np.ndarray:
    return np.left_shift(np.uint64(1), (position % 64).astype(np.uint64))


def _topological_steps(count: int, up: np.ndarray, down: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """Kahn's order of the DAG of components by levels: per level after the first, its components, their parents
    (grouped by component) and where each one's parents start."""
    by_up = np.argsort(up, kind="stable")
    by_down = np.argsort(down, kind="stable")
    out_start = np.searchsorted(up[by_up], np.arange(count + 1))
    in_start = np.searchsorted(down[by_down], np.arange(count + 1))
    indegree = np.diff(in_start)
    level = np.flatnonzero(indegree == 0)
    steps = []
    while level.size:
        children = down[by_up[_ranges(out_start, level)]]
        children, times = np.unique(children, return_counts=True)
        indegree[children] -= times
        level = children[indegree[children] == 0]
        if level.size:
            parents = up[by_down[_ranges(in_start, level)]]
            degree = in_start[level + 1] - in_start[level]
            steps.append((level, parents, np.cumsum(degree) - degree))
    return steps


def _ranges(start: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The positions ``start[v]`` to ``start[v + 1]`` of every node v, one after the other."""
    degree = start[nodes + 1] - start[nodes]
    return np.repeat(start[nodes] - np.cumsum(degree) + degree, degree) + np.arange(int(degree.sum()))


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
