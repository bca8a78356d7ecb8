"""Supportive vertices (as in O'Reach): a few hubs whose exact reach sets decide many pairs at once.

Bit i of ``fwd[v]`` says hub i reaches v; bit i of ``bwd[v]`` says v reaches hub i. Then, for u != v:
u reaches a hub that reaches v -> u reaches v; a hub reaches u but not v -> u cannot reach v;
v reaches a hub that u does not reach -> u cannot reach v.

The masks are swept level by level (a node's parents have lower levels, its children higher ones), the
nodes of a level in parallel when it has enough of them; each node pulls from its neighbours, so no
two threads write the same mask.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .condensation import longest_path_levels
from .graph import Digraph
from .parallel import PARALLEL_MIN_NODES, stable_order

__all__ = ["HUB_BITS", "choose_hubs", "hub_reach_masks"]

HUB_BITS = 64


def choose_hubs(dag: Digraph, count: int = HUB_BITS) -> np.ndarray:
    """The nodes with the largest (in-degree + 1) * (out-degree + 1), the ones most paths pass through;
    ties go to the smaller id, so the choice is defined by the DAG alone. Sorted ids."""
    n = dag.num_nodes
    count = min(count, n)
    if count == 0:
        return np.empty(0, dtype=np.int64)
    score = (np.diff(dag.in_indptr) + 1) * (np.diff(dag.out_indptr) + 1)
    threshold = np.partition(score, n - count)[n - count]
    above = np.flatnonzero(score > threshold)
    tied = np.flatnonzero(score == threshold)[: count - above.size]
    return np.sort(np.concatenate([above, tied]))


@njit(nogil=True, inline="always")
def _pull(v, indptr, indices, masks):
    acc = masks[v]
    for e in range(indptr[v], indptr[v + 1]):
        acc |= masks[indices[e]]
    masks[v] = acc


@njit(nogil=True, parallel=True, cache=True)
def _sweep(order, starts, indptr, indices, masks, downwards, parallel_min):
    """Each node ORs its neighbours' masks into its own, level by level (upwards: deepest level first)."""
    levels = starts.size - 1
    for step in range(levels):
        lvl = step if downwards else levels - 1 - step
        first = starts[lvl]
        stop = starts[lvl + 1]
        if stop - first < parallel_min:
            for i in range(first, stop):
                _pull(order[i], indptr, indices, masks)
        else:
            for i in prange(first, stop):
                _pull(order[i], indptr, indices, masks)


def hub_reach_masks(dag: Digraph, hubs: np.ndarray, level: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``fwd`` and ``bwd`` bit masks (uint64 per DAG node) for up to 64 hubs; ``level``: the DAG's levels
    (``longest_path_levels``, computed when not given)."""
    if level is None:
        level = longest_path_levels(dag)
    n = dag.num_nodes
    fwd = np.zeros(n, dtype=np.uint64)
    bwd = np.zeros(n, dtype=np.uint64)
    bits = np.left_shift(np.uint64(1), np.arange(hubs.size, dtype=np.uint64))
    fwd[hubs] = bits
    bwd[hubs] = bits
    top = int(level.max()) + 1 if n else 0
    order, starts = stable_order(level, top)
    _sweep(order, starts, dag.in_indptr, dag.in_indices, fwd, True, PARALLEL_MIN_NODES)
    _sweep(order, starts, dag.out_indptr, dag.out_indices, bwd, False, PARALLEL_MIN_NODES)
    return fwd, bwd
