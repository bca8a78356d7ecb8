"""GRAIL interval labels on the CPU: randomized child orders and an iterative DFS per dimension.

The labeling graph is the condensation DAG plus one virtual root (the last node) whose children are
the DAG's roots, so that one DFS per dimension covers every node. The child order of each dimension
is explicit (``make_child_orders``), which lets the GPU pipeline in ``kernels`` reproduce the very
same labels from the same orders.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .graph import row_chunks
from .parallel import chunk_count, chunk_range, key_cursors

__all__ = [
    "make_child_orders",
    "dimension_seeds",
    "order_key",
    "label_all",
    "with_virtual_root",
    "label_dtype",
]


def label_dtype(num_nodes: int) -> type[np.integer]:
    """int32 while every post-order rank fits, int64 beyond."""
    return np.int32 if num_nodes < 2**31 - 1 else np.int64


def with_virtual_root(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """CSR of the DAG plus a virtual root (id N) whose children are all nodes of in-degree zero."""
    n = indptr.size - 1
    has_parent = np.zeros(n, dtype=np.bool_)
    has_parent[indices] = True
    roots = np.flatnonzero(~has_parent).astype(indices.dtype)
    root_indptr = np.empty(n + 2, dtype=np.int64)
    root_indptr[: n + 1] = indptr
    root_indptr[n + 1] = indptr[n] + roots.size
    return root_indptr, np.concatenate([indices, roots]), n


@njit(nogil=True, inline="always")
def order_key(seed, position):
    """The random sort key (32 bits) of the edge at ``position`` in one dimension's child order.

    splitmix64's output function of the dimension's seed plus the position times its increment: one
    independent draw per edge, computed where it is needed (the GPU build draws the very same keys).
    """
    z = np.uint64(seed) + (np.uint64(position) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.uint32((z ^ (z >> np.uint64(31))) >> np.uint64(32))


# Rows longer than this are ordered by parallel radix passes over their keys, not inside the loop over
# rows, where one thread would sort a hub row (the virtual root has one child per DAG root: millions) alone.
LONG_ROW = 1 << 14
_RADIX_BITS = 8  # four passes: wider digits make fewer passes but more scatter streams
_DIGIT_MASK = (1 << _RADIX_BITS) - 1


@njit(nogil=True, inline="always")
def _insertion_order(keys, size, indices, start, out, k):
    """out[k, start:start+size] = the row's children by key, ties by position (short rows)."""
    for i in range(size):
        key = keys[i]
        child = indices[start + i]
        j = i - 1
        while j >= 0 and keys[j] > key:
            keys[j + 1] = keys[j]
            out[k, start + j + 1] = out[k, start + j]
            j -= 1
        keys[j + 1] = key
        out[k, start + j + 1] = child


@njit(nogil=True, parallel=True, cache=True)
def _order_rows(indptr, indices, seeds, orders, bounds, long_row):
    """Each row of at most ``long_row`` children sorted by their edges' keys (ties by position); rows cut
    into chunks of about equal edges (``bounds``), one key buffer a chunk."""
    for chunk in prange(bounds.size - 1):
        keys = np.empty(long_row, dtype=np.uint32)
        for row in range(bounds[chunk], bounds[chunk + 1]):
            start = indptr[row]
            size = indptr[row + 1] - start
            if size > long_row:
                continue
            for k in range(seeds.size):
                for i in range(size):
                    keys[i] = order_key(seeds[k], start + i)
                if size <= 16:
                    _insertion_order(keys, size, indices, start, orders, k)
                    continue
                ranked = np.argsort(keys[:size], kind="mergesort")
                for i in range(size):
                    orders[k, start + i] = indices[start + ranked[i]]


@njit(nogil=True, parallel=True, cache=True)
def _row_keys(seed, start, keys, positions):
    for i in prange(keys.size):
        keys[i] = order_key(seed, start + i)
        positions[i] = i


@njit(nogil=True, parallel=True, cache=True)
def _digit_counts(keys, shift, counts):
    chunks = counts.shape[0]
    for chunk in prange(chunks):
        first, stop = chunk_range(chunk, chunks, keys.size)
        for i in range(first, stop):
            counts[chunk, (keys[i] >> shift) & _DIGIT_MASK] += 1


@njit(nogil=True, parallel=True, cache=True)
def _digit_scatter(keys, positions, shift, cursors, keys_out, positions_out):
    chunks = cursors.shape[0]
    for chunk in prange(chunks):
        first, stop = chunk_range(chunk, chunks, keys.size)
        for i in range(first, stop):
            digit = (keys[i] >> shift) & _DIGIT_MASK
            at = cursors[chunk, digit]
            cursors[chunk, digit] = at + 1
            keys_out[at] = keys[i]
            positions_out[at] = positions[i]


def _order_long_row(indices: np.ndarray, start: int, size: int, seed: np.uint64) -> np.ndarray:
    """The row's children by key, ties by position: a least-significant-digit radix sort of the keys
    (every pass stable: each chunk writes its run of a digit in order, the chunks in order)."""
    keys, positions = np.empty(size, dtype=np.uint32), np.empty(size, dtype=np.int64)
    spare_keys, spare_positions = np.empty_like(keys), np.empty_like(positions)
    _row_keys(seed, start, keys, positions)
    chunks = chunk_count(size)
    starts = np.empty((1 << _RADIX_BITS) + 1, dtype=np.int64)
    for shift in range(0, 32, _RADIX_BITS):
        counts = np.zeros((chunks, 1 << _RADIX_BITS), dtype=np.int64)
        _digit_counts(keys, shift, counts)
        key_cursors(counts, starts)
        _digit_scatter(keys, positions, shift, counts, spare_keys, spare_positions)
        keys, spare_keys, positions, spare_positions = spare_keys, keys, spare_positions, positions
    return indices[start + positions]


def make_child_orders(indptr: np.ndarray, indices: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """One randomly ordered copy of ``indices`` per dimension (rows permuted independently), seeded.

    Returns an array of shape (dims, m); row k is the child order the DFS of dimension k follows. Row r
    of dimension k holds the row's children sorted by ``order_key(dimension_seeds(dims, seed)[k], e)``
    of their positions e (ties by position), which the GPU build computes with one sort.
    """
    seeds = dimension_seeds(dims, seed)
    orders = np.empty((dims, indices.size), dtype=indices.dtype)
    _order_rows(indptr, indices, seeds, orders, row_chunks(indptr, chunk_count(indices.size)), LONG_ROW)
    sizes = np.diff(indptr)
    for row in np.flatnonzero(sizes > LONG_ROW):
        for k in range(dims):
            orders[k, indptr[row] : indptr[row + 1]] = _order_long_row(
                indices, int(indptr[row]), int(sizes[row]), seeds[k]
            )
    return orders


def dimension_seeds(dims: int, seed: int) -> np.ndarray:
    """The generator seed of each dimension (uint64) from the build's seed."""
    return np.random.SeedSequence(seed).generate_state(dims, dtype=np.uint64)


@njit(nogil=True, cache=True)
def _dfs_into(indptr, children, root, post, minpost, tree_low):
    """One DFS; ``minpost`` doubles as the visited mark (-1 until discovered), saving a cache miss per edge."""
    n = indptr.size - 1
    minpost[:] = -1
    stack_node = np.empty(n, dtype=np.int64)
    stack_edge = np.empty(n, dtype=np.int64)
    counter = 0
    tree_low[root] = 0
    minpost[root] = n
    stack_node[0] = root
    stack_edge[0] = indptr[root]
    top = 1
    while top > 0:
        v = stack_node[top - 1]
        e = stack_edge[top - 1]
        if e < indptr[v + 1]:
            stack_edge[top - 1] = e + 1
            w = children[e]
            seen = minpost[w]
            if seen >= 0:
                # In a DAG a visited child is finished, so its minpost is final.
                if seen < minpost[v]:
                    minpost[v] = seen
            else:
                # The first post-order rank handed out after discovery is the lowest in w's subtree.
                tree_low[w] = counter
                minpost[w] = n
                stack_node[top] = w
                stack_edge[top] = indptr[w]
                top += 1
        else:
            post[v] = counter
            counter += 1
            if post[v] < minpost[v]:
                minpost[v] = post[v]
            top -= 1
            if top > 0:
                parent = stack_node[top - 1]
                if minpost[v] < minpost[parent]:
                    minpost[parent] = minpost[v]
    return counter


@njit(nogil=True, parallel=True, cache=True)
def _label_dims(indptr, child_orders, root, post, minpost, tree_low):
    for k in prange(child_orders.shape[0]):
        _dfs_into(indptr, child_orders[k], root, post[k], minpost[k], tree_low[k])


def label_all(indptr: np.ndarray, child_orders: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Post-order rank, min post-order below, and DFS-tree interval start of every node, one DFS per
    dimension (dimensions in parallel); arrays of shape (dims, N+1).

    Every node must be reachable from ``root`` (true for the labeling graph of ``with_virtual_root``).
    """
    n = indptr.size - 1
    dims = child_orders.shape[0]
    dtype = label_dtype(n)
    post, minpost, tree_low = (np.empty((dims, n), dtype=dtype) for _ in range(3))
    _label_dims(indptr, child_orders, root, post, minpost, tree_low)
    return post, minpost, tree_low
