"""The digraph: CSR in both directions, self loops and duplicate edges removed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

__all__ = ["Digraph", "index_dtype", "build_csr"]


def index_dtype(num_nodes: int, num_edges: int) -> type[np.integer]:
    """int32 while node ids and edge offsets fit, int64 beyond."""
    return np.int32 if max(num_nodes, num_edges) < 2**31 - 1 else np.int64


@njit(nogil=True, inline="always")
def _insertion_sort(row):
    # Most rows are short; np.sort's call overhead would dominate them.
    for i in range(1, row.size):
        value = row[i]
        j = i - 1
        while j >= 0 and row[j] > value:
            row[j + 1] = row[j]
            j -= 1
        row[j + 1] = value


@njit(nogil=True, cache=True)
def _csr_dedup(n, src, dst, out_indices):
    """Counting sort of the edges by source, then each row sorted and de-duplicated, self loops dropped."""
    counts = np.zeros(n + 1, dtype=np.int64)
    for i in range(src.size):
        counts[src[i] + 1] += 1
    for v in range(n):
        counts[v + 1] += counts[v]
    cursor = counts[:-1].copy()
    scratch = np.empty(src.size, dtype=out_indices.dtype)
    for i in range(src.size):
        scratch[cursor[src[i]]] = dst[i]
        cursor[src[i]] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    write = 0
    for v in range(n):
        row = scratch[counts[v] : counts[v + 1]]
        if row.size > 16:
            row.sort()
        else:
            _insertion_sort(row)
        previous = -1
        for w in row:
            if w != previous and w != v:
                out_indices[write] = w
                write += 1
            previous = w
        indptr[v + 1] = write
    return indptr, write


@njit(nogil=True, cache=True)
def _transpose(n, indptr, indices, out_indices):
    counts = np.zeros(n + 1, dtype=np.int64)
    for e in range(indices.size):
        counts[indices[e] + 1] += 1
    for v in range(n):
        counts[v + 1] += counts[v]
    cursor = counts[:-1].copy()
    for u in range(n):
        for e in range(indptr[u], indptr[u + 1]):
            w = indices[e]
            out_indices[cursor[w]] = u
            cursor[w] += 1
    return counts


def build_csr(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, de-duplicated CSR (indptr int64, indices int32/int64) without self loops."""
    dtype = index_dtype(num_nodes, src.size)
    buffer = np.empty(src.size, dtype=dtype)
    indptr, used = _csr_dedup(num_nodes, src, dst, buffer)
    return indptr, buffer[:used].copy()


@dataclass(frozen=True)
class Digraph:
    """A directed graph on nodes 0..n-1 with children (``out_*``) and parents (``in_*``) in CSR."""

    out_indptr: np.ndarray
    out_indices: np.ndarray
    in_indptr: np.ndarray
    in_indices: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.out_indptr.size - 1

    @property
    def num_edges(self) -> int:
        return self.out_indices.size

    @classmethod
    def from_edges(cls, num_nodes: int, src: np.ndarray, dst: np.ndarray) -> Digraph:
        """Build from edge arrays of node ids in 0..num_nodes-1 (validated by the caller)."""
        out_indptr, out_indices = build_csr(num_nodes, src, dst)
        return cls.from_csr(out_indptr, out_indices)

    @classmethod
    def from_csr(cls, out_indptr: np.ndarray, out_indices: np.ndarray) -> Digraph:
        """Add the parents' CSR to a de-duplicated children's CSR."""
        n = out_indptr.size - 1
        in_indices = np.empty_like(out_indices)
        in_indptr = _transpose(n, out_indptr, out_indices, in_indices)
        return cls(out_indptr, out_indices, in_indptr, in_indices)
