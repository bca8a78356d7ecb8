"""Seeded synthetic DAGs and pair batches: the search calibration's workloads and the benchmarks' generators.

Graphs are CSR with topological ids (every edge goes from a lower id to a higher one), but for
``with_back_edges``'s.
"""

from __future__ import annotations

import numpy as np

__all__ = ["csr_from_edges", "downward_walk_pairs", "layered_dag", "with_back_edges"]


def csr_from_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of distinct edges (int64 indptr, int32 indices), rows sorted."""
    keys = np.unique(src.astype(np.int64) * n + dst.astype(np.int64))
    rows = keys // n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, (keys % n).astype(np.int32)


def layered_dag(
    nodes: int, levels: int, degree: float = 3.0, reach: int = 4, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``nodes`` in ``levels`` equal layers; each node has ~``degree`` out-edges to random nodes of the next
    ``reach`` layers, the next one most often (a jump of k + 1 layers with probability 0.6 x 0.4^k), so the
    DAG has about ``levels`` levels (at most ``nodes``: every layer holds a node)."""
    rng = np.random.default_rng(seed)
    levels = max(1, min(levels, nodes))
    layer = (np.arange(nodes, dtype=np.int64) * levels) // nodes
    starts = np.searchsorted(layer, np.arange(levels + 1))
    src = np.repeat(np.arange(nodes, dtype=np.int64), rng.poisson(degree, nodes).clip(1, None))
    target_layer = layer[src] + np.minimum(rng.geometric(0.6, src.size), reach)
    keep = target_layer < levels
    src, target_layer = src[keep], target_layer[keep]
    low, high = starts[target_layer], starts[target_layer + 1]
    dst = low + (rng.random(src.size) * (high - low)).astype(np.int64)
    return csr_from_edges(nodes, src, dst)


def with_back_edges(
    indptr: np.ndarray, indices: np.ndarray, share: float, seed: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """The graph with a random ``share`` of its edges also turned back: on a layered DAG, strongly connected
    components of thousands of nodes spread over many levels (10% on ``layered_dag(500_000, 10_000)``: 34,675
    components, the largest 24,232 nodes)."""
    src = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    dst = np.asarray(indices, dtype=np.int64)
    back = np.random.default_rng(seed).choice(src.size, size=int(share * src.size), replace=False)
    return csr_from_edges(indptr.size - 1, np.concatenate([src, dst[back]]), np.concatenate([dst, src[back]]))


def downward_walk_pairs(
    indptr: np.ndarray, indices: np.ndarray, count: int, positive_share: float = 0.8, max_steps: int = 8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` (source, target) pairs: a share from random downward walks (reachable), the rest uniform."""
    rng = np.random.default_rng(seed)
    n = indptr.size - 1
    walks = int(count * positive_share)
    degree = np.diff(indptr)
    sources = rng.choice(np.flatnonzero(degree > 0), size=walks)
    current = sources.copy()
    steps = rng.integers(1, max_steps + 1, size=walks)
    for step in range(max_steps):
        active = (steps > step) & (degree[current] > 0)
        pick = indptr[current[active]] + (rng.random(int(active.sum())) * degree[current[active]]).astype(np.int64)
        current[active] = indices[pick]
    random_src = rng.integers(0, n, size=count - walks)
    random_dst = rng.integers(0, n, size=count - walks)
    keep = sources != current
    return (
        np.concatenate([sources[keep], random_src]).astype(np.int64),
        np.concatenate([current[keep], random_dst]).astype(np.int64),
    )
