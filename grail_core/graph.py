"""The digraph: CSR in both directions, self loops and duplicate edges removed, rows sorted.

CSR construction is a parallel two-level counting sort (numba ``prange``). The nodes are cut into
buckets of ``2**shift`` consecutive ids; pass 1 counts each chunk's edges per bucket, pass 2 scatters
them to their bucket (each chunk into its own reserved run, so the order inside a bucket is the input
order: stable), pass 3 counting-sorts every bucket by row in a cache-sized table, sorts each row and
drops duplicates and self loops, and a last pass packs the rows into the final array. No atomics, and
the same result whatever the thread count. The transpose and the condensation's quotient graph run
the same passes over a CSR (the transpose's rows come out sorted because the sort is stable).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .parallel import chunk_count, chunk_range, exclusive_scan

__all__ = [
    "Digraph",
    "index_dtype",
    "build_csr",
    "edge_id_range",
    "mapped_csr",
    "permuted_csr",
    "row_chunks",
    "WorkCallback",
]

# Reports units of work done (edges or nodes processed), for progress within a phase.
WorkCallback = Callable[[int], None]

# Node ids per bucket: 2**14 to 2**16 (the per-bucket row table stays in L2; rows are stored in 16 bits).
_MIN_BUCKET_BITS = 14
_MAX_BUCKET_BITS = 16
_MAX_BUCKETS_BITS = 15


def index_dtype(num_nodes: int, num_edges: int) -> type[np.integer]:
    """int32 while node ids and edge offsets fit, int64 beyond."""
    return np.int32 if max(num_nodes, num_edges) < 2**31 - 1 else np.int64


def _bucket_shift(num_nodes: int) -> int:
    bits = max(1, int(num_nodes - 1).bit_length())
    return min(_MAX_BUCKET_BITS, max(_MIN_BUCKET_BITS, bits - _MAX_BUCKETS_BITS))


def edge_id_range(src: np.ndarray, dst: np.ndarray) -> tuple[int, int]:
    """(smallest, largest) node id in two equally long, non-empty edge arrays (one parallel pass)."""
    low, high = _edge_id_range(src, dst, chunk_count(src.size))
    return int(low), int(high)


@njit(nogil=True, parallel=True, cache=True)
def _edge_id_range(src, dst, chunks):
    lows = np.empty(chunks, dtype=np.int64)
    highs = np.empty(chunks, dtype=np.int64)
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, src.size)
        low = np.int64(np.iinfo(np.int64).max)
        high = np.int64(np.iinfo(np.int64).min)
        for i in range(start, stop):
            low = min(low, np.int64(src[i]), np.int64(dst[i]))
            high = max(high, np.int64(src[i]), np.int64(dst[i]))
        lows[chunk] = low
        highs[chunk] = high
    return lows.min(), highs.max()


@njit(nogil=True, inline="always")
def _mapped(mapping, v):
    if mapping is None:
        return v
    return mapping[v]


@njit(nogil=True, inline="always")
def _csr_edge(indptr, indices, mapping, transpose, u, e):
    a = _mapped(mapping, u)
    b = _mapped(mapping, indices[e])
    if transpose:
        return b, a
    return a, b


@njit(nogil=True, parallel=True, cache=True)
def _count_arrays(src, dst, shift, counts):
    chunks = counts.shape[0]
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, src.size)
        row = counts[chunk]
        for i in range(start, stop):
            if src[i] != dst[i]:
                row[src[i] >> shift] += 1


@njit(nogil=True, parallel=True, cache=True)
def _scatter_arrays(src, dst, shift, cursors, local_rows, columns):
    chunks = cursors.shape[0]
    mask = (1 << shift) - 1
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, src.size)
        cursor = cursors[chunk]
        for i in range(start, stop):
            u = src[i]
            w = dst[i]
            if u != w:
                at = cursor[u >> shift]
                cursor[u >> shift] = at + 1
                local_rows[at] = u & mask
                columns[at] = w


@njit(nogil=True, inline="always")
def _in_set(bits, v):
    """Whether v is in the set of the bitmap ``bits`` (None: the empty set)."""
    if bits is None:
        return False
    return (bits[v >> 6] >> np.uint64(v & 63)) & np.uint64(1) != 0


@njit(nogil=True, parallel=True, cache=True)
def _count_csr(indptr, indices, mapping, transpose, inside, shift, bounds, counts):
    for chunk in prange(bounds.size - 1):
        row = counts[chunk]
        for u in range(bounds[chunk], bounds[chunk + 1]):
            skip = _in_set(inside, u)
            for e in range(indptr[u], indptr[u + 1]):
                if skip and _in_set(inside, indices[e]):
                    continue
                a, b = _csr_edge(indptr, indices, mapping, transpose, u, e)
                if a != b:
                    row[a >> shift] += 1


@njit(nogil=True, parallel=True, cache=True)
def _scatter_csr(indptr, indices, mapping, transpose, inside, shift, bounds, cursors, local_rows, columns):
    mask = (1 << shift) - 1
    for chunk in prange(bounds.size - 1):
        cursor = cursors[chunk]
        for u in range(bounds[chunk], bounds[chunk + 1]):
            skip = _in_set(inside, u)
            for e in range(indptr[u], indptr[u + 1]):
                if skip and _in_set(inside, indices[e]):
                    continue
                a, b = _csr_edge(indptr, indices, mapping, transpose, u, e)
                if a != b:
                    at = cursor[a >> shift]
                    cursor[a >> shift] = at + 1
                    local_rows[at] = a & mask
                    columns[at] = b


def row_chunks(indptr: np.ndarray, chunks: int) -> np.ndarray:
    """Row boundaries of ``chunks`` runs of consecutive rows with about equal numbers of edges."""
    edges = int(indptr[-1])
    bounds = np.searchsorted(indptr, np.linspace(0, edges, chunks + 1).astype(np.int64), side="right") - 1
    bounds[0], bounds[-1] = 0, indptr.size - 1
    return np.maximum.accumulate(bounds)


@njit(nogil=True, cache=True)
def _cursors(counts, bucket_start):
    """Where each chunk's run of each bucket starts (bucket-major, chunk-minor), and the bucket starts."""
    chunks, buckets = counts.shape
    cursors = np.empty_like(counts)
    at = 0
    for b in range(buckets):
        bucket_start[b] = at
        for chunk in range(chunks):
            cursors[chunk, b] = at
            at += counts[chunk, b]
    bucket_start[buckets] = at
    return cursors


@njit(nogil=True, parallel=True, cache=True)
def _sort_buckets(num_nodes, shift, bucket_start, local_rows, columns, degree, kept):
    """Per bucket: counting sort by row, each row sorted and de-duplicated, packed at the bucket's start."""
    buckets = bucket_start.size - 1
    for b in prange(buckets):
        start = bucket_start[b]
        stop = bucket_start[b + 1]
        base = b << shift
        rows = min(1 << shift, num_nodes - base)
        offsets = np.zeros(rows + 1, dtype=np.int64)
        for p in range(start, stop):
            offsets[local_rows[p] + 1] += 1
        for r in range(rows):
            offsets[r + 1] += offsets[r]
        cursor = offsets[:-1].copy()
        grouped = np.empty(stop - start, dtype=columns.dtype)
        for p in range(start, stop):
            r = local_rows[p]
            grouped[cursor[r]] = columns[p]
            cursor[r] += 1
        write = start
        for r in range(rows):
            first = offsets[r]
            stop_row = offsets[r + 1]
            if stop_row - first > 16:
                grouped[first:stop_row].sort()
            else:
                # Insertion sort by index: a slice costs a reference count, per row, in a parallel loop.
                for i in range(first + 1, stop_row):
                    value = grouped[i]
                    j = i - 1
                    while j >= first and grouped[j] > value:
                        grouped[j + 1] = grouped[j]
                        j -= 1
                    grouped[j + 1] = value
            row_start = write
            previous = -1
            for i in range(first, stop_row):
                w = grouped[i]
                if w != previous:
                    columns[write] = w
                    write += 1
                previous = w
            degree[base + r] = write - row_start
        kept[b] = write - start


@njit(nogil=True, parallel=True, cache=True)
def _pack_buckets(shift, bucket_start, kept, columns, indptr, out):
    for b in prange(bucket_start.size - 1):
        at = indptr[b << shift]
        out[at : at + kept[b]] = columns[bucket_start[b] : bucket_start[b] + kept[b]]


def _finish(
    num_nodes: int,
    shift: int,
    counts: np.ndarray,
    scatter: Callable[[np.ndarray, np.ndarray, np.ndarray], None],
    dtype: type[np.integer],
    report: WorkCallback | None,
    work: int,
) -> tuple[np.ndarray, np.ndarray]:
    bucket_start = np.empty(counts.shape[1] + 1, dtype=np.int64)
    cursors = _cursors(counts, bucket_start)
    total = int(bucket_start[-1])
    local_rows = np.empty(total, dtype=np.uint16)
    columns = np.empty(total, dtype=dtype)
    scatter(cursors, local_rows, columns)
    if report:
        report(work)
    degree = np.empty(num_nodes, dtype=np.int64)
    kept = np.empty(counts.shape[1], dtype=np.int64)
    _sort_buckets(num_nodes, shift, bucket_start, local_rows, columns, degree, kept)
    del local_rows
    if report:
        report(work)
    indptr = np.empty(num_nodes + 1, dtype=np.int64)
    exclusive_scan(degree, indptr)
    del degree
    indices = np.empty(int(indptr[-1]), dtype=dtype)
    _pack_buckets(shift, bucket_start, kept, columns, indptr, indices)
    if report:
        report(work)
    return indptr, indices


def build_csr(
    num_nodes: int, src: np.ndarray, dst: np.ndarray, report: WorkCallback | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, de-duplicated CSR (indptr int64, indices int32/int64) without self loops.

    Node ids must lie in 0..num_nodes-1 (the caller validates them). ``report`` gets the edges handled
    after each of the four passes (4 x len(src) in all).
    """
    dtype = index_dtype(num_nodes, src.size)
    shift = _bucket_shift(num_nodes)
    counts = np.zeros((chunk_count(src.size), ((num_nodes - 1) >> shift) + 1), dtype=np.int64)
    _count_arrays(src, dst, shift, counts)
    if report:
        report(src.size)

    def scatter(cursors: np.ndarray, local_rows: np.ndarray, columns: np.ndarray) -> None:
        _scatter_arrays(src, dst, shift, cursors, local_rows, columns)

    return _finish(num_nodes, shift, counts, scatter, dtype, report, src.size)


def mapped_csr(
    num_nodes: int,
    indptr: np.ndarray,
    indices: np.ndarray,
    mapping: np.ndarray | None = None,
    transpose: bool = False,
    report: WorkCallback | None = None,
    inside: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the edges ``mapping[u] -> mapping[w]`` (reversed if ``transpose``) of a CSR, as ``build_csr``.

    ``mapping`` None is the identity (so ``transpose=True`` gives the parents' CSR); a mapping onto
    fewer nodes gives a quotient graph (edges inside a class vanish as self loops, repeats merge).
    ``inside``: a bitmap (uint64 words) of nodes of one class, whose edges among themselves are dropped
    without looking their ends up in ``mapping`` (a cache-resident test for most edges of a graph with
    a giant component).
    """
    dtype = index_dtype(num_nodes, indices.size)
    shift = _bucket_shift(num_nodes)
    bounds = row_chunks(indptr, chunk_count(indices.size))
    counts = np.zeros((bounds.size - 1, ((num_nodes - 1) >> shift) + 1), dtype=np.int64)
    _count_csr(indptr, indices, mapping, transpose, inside, shift, bounds, counts)
    if report:
        report(indices.size)

    def scatter(cursors: np.ndarray, local_rows: np.ndarray, columns: np.ndarray) -> None:
        _scatter_csr(indptr, indices, mapping, transpose, inside, shift, bounds, cursors, local_rows, columns)

    return _finish(num_nodes, shift, counts, scatter, dtype, report, indices.size)


@njit(nogil=True, parallel=True, cache=True)
def _permuted_degrees(indptr, order, degree):
    for i in prange(order.size):
        degree[i] = indptr[order[i] + 1] - indptr[order[i]]


@njit(nogil=True, parallel=True, cache=True)
def _permuted_rows(indptr, indices, order, rank, new_indptr, out):
    for i in prange(order.size):
        old = order[i]
        start = new_indptr[i]
        first = indptr[old]
        size = indptr[old + 1] - first
        if size > 16:
            for j in range(size):
                out[start + j] = rank[indices[first + j]]
            out[start : start + size].sort()
            continue
        # Insertion as the row is read (no slice: a view costs a reference count in a parallel loop).
        for j in range(size):
            value = rank[indices[first + j]]
            k = start + j - 1
            while k >= start and out[k] > value:
                out[k + 1] = out[k]
                k -= 1
            out[k + 1] = value


def permuted_csr(
    indptr: np.ndarray, indices: np.ndarray, order: np.ndarray, rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The CSR renumbered by a permutation: new node i is old node ``order[i]``, old v is new ``rank[v]``;
    rows sorted again (one pass over the rows, where ``mapped_csr`` would sort all edges anew)."""
    degree = np.empty(order.size, dtype=np.int64)
    _permuted_degrees(indptr, order, degree)
    new_indptr = np.empty(order.size + 1, dtype=np.int64)
    exclusive_scan(degree, new_indptr)
    del degree
    out = np.empty(indices.size, dtype=indices.dtype)
    _permuted_rows(indptr, indices, order, rank, new_indptr, out)
    return new_indptr, out


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
    def from_edges(
        cls, num_nodes: int, src: np.ndarray, dst: np.ndarray, report: WorkCallback | None = None
    ) -> Digraph:
        """Build from edge arrays of node ids in 0..num_nodes-1 (validated by the caller)."""
        out_indptr, out_indices = build_csr(num_nodes, src, dst, report)
        return cls.from_csr(out_indptr, out_indices, report)

    @classmethod
    def from_csr(cls, out_indptr: np.ndarray, out_indices: np.ndarray, report: WorkCallback | None = None) -> Digraph:
        """Add the parents' CSR to a de-duplicated children's CSR."""
        in_indptr, in_indices = mapped_csr(out_indptr.size - 1, out_indptr, out_indices, transpose=True, report=report)
        return cls(out_indptr, out_indices, in_indptr, in_indices)
