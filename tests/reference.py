"""Brute-force reachability for checking the index: one BFS per source node."""

from __future__ import annotations

from collections import deque

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
