"""Small labeling-graph builders shared by the kernel tests (tens of nodes: the simulator is slow)."""

from __future__ import annotations

import numpy as np

from grail_core.graph import build_csr
from grail_core.labeling import make_child_orders, with_virtual_root


def labeling_graph(
    n: int, edges: list[tuple[int, int]], dims: int = 2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, int]:
    """(indptr, child_orders, root) of a DAG whose edges go from lower to higher ids."""
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    indptr, indices = build_csr(n, src, dst)
    indptr, indices, root = with_virtual_root(indptr, indices)
    return indptr, make_child_orders(indptr, indices, dims, seed), root


def diamond_stack(k: int) -> tuple[int, list[tuple[int, int]]]:
    """k diamonds in a row: 2**k paths from the top node to the bottom one."""
    edges = []
    for i in range(k):
        a = 3 * i
        edges += [(a, a + 1), (a, a + 2), (a + 1, a + 3), (a + 2, a + 3)]
    return 3 * k + 1, edges


def hub_graph(roots: int, fan_out: int) -> tuple[int, list[tuple[int, int]]]:
    """Many roots into one hub with many children, plus a medium-degree node: all three degree classes."""
    hub = roots
    edges = [(r, hub) for r in range(roots)]
    edges += [(hub, hub + 1 + i) for i in range(fan_out)]
    mid = hub + 1
    edges += [(mid, c) for c in range(hub + 2, min(hub + 1 + fan_out, hub + 7))]
    return hub + 1 + fan_out, edges
