"""Supportive vertices (as in O'Reach): a few hubs whose exact reach sets decide many pairs at once.

Bit i of ``fwd[v]`` says hub i reaches v; bit i of ``bwd[v]`` says v reaches hub i. Then, for u != v:
u reaches a hub that reaches v -> u reaches v; a hub reaches u but not v -> u cannot reach v;
v reaches a hub that u does not reach -> u cannot reach v.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .graph import Digraph

__all__ = ["HUB_BITS", "choose_hubs", "hub_reach_masks"]

HUB_BITS = 64


def choose_hubs(dag: Digraph, count: int = HUB_BITS) -> np.ndarray:
    """The nodes with the largest (in-degree + 1) * (out-degree + 1): the ones most paths pass through."""
    score = (np.diff(dag.in_indptr) + 1) * (np.diff(dag.out_indptr) + 1)
    count = min(count, dag.num_nodes)
    hubs = np.argpartition(-score, count - 1)[:count] if count else np.empty(0, dtype=np.int64)
    return np.sort(hubs)


@njit(nogil=True, cache=True)
def _propagate(hubs, out_indptr, out_indices, in_indptr, in_indices):
    n = out_indptr.size - 1
    fwd = np.zeros(n, dtype=np.uint64)
    bwd = np.zeros(n, dtype=np.uint64)
    for i in range(hubs.size):
        bit = np.uint64(1) << np.uint64(i)
        fwd[hubs[i]] |= bit
        bwd[hubs[i]] |= bit
    # Ids are a topological order: parents come before children.
    for v in range(n):
        acc = fwd[v]
        for e in range(in_indptr[v], in_indptr[v + 1]):
            acc |= fwd[in_indices[e]]
        fwd[v] = acc
    for v in range(n - 1, -1, -1):
        acc = bwd[v]
        for e in range(out_indptr[v], out_indptr[v + 1]):
            acc |= bwd[out_indices[e]]
        bwd[v] = acc
    return fwd, bwd


def hub_reach_masks(dag: Digraph, hubs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fwd`` and ``bwd`` bit masks (uint64 per DAG node) for up to 64 hubs."""
    return _propagate(hubs.astype(np.int64), dag.out_indptr, dag.out_indices, dag.in_indptr, dag.in_indices)
