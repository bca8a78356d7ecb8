"""The device copy of an index, numbered in level order, and the status buffers a call's passes use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, njit

from grail_core.records import HEADER_WORDS, HI, ID, LABEL_WORDS, LEVEL, LO

from ..frontier import MAX_BALANCED_SLOTS, EngineConfig
from ..memory import device_fill, device_full
from .driver import ChunkArrays
from .ops import NODE_BOXES, NODE_ID, NODE_LEVEL, IndexArrays, StatusArrays

__all__ = ["DeviceIndex", "chunk_capacity", "clear_status", "device_index", "status_buffers"]


@dataclass
class DeviceIndex:
    """Device copies of one HotArrays and its levels, the balanced chunks, the target table and status buffers."""

    keep: Any  # the host HotArrays: holding it keeps the ids in the cache key valid
    arrays: IndexArrays
    levels: int
    widest_level: int  # nodes of the level that has most
    widest_level_edges: int  # out-edges of the level that has most: bounds a level's work items per word
    chunks: ChunkArrays | None = None
    targets: Any = None  # a pass's copies of its targets' records, grown as passes grow
    capacity: int = 0  # status words per node the flat buffers hold
    reach: Any = None  # flat; a pass views its first n * words elements as (n, words), all zero between passes
    summary: Any = None  # flat; per node one bit per non-zero word of reach
    touched: Any = None  # a byte per node: some search reached it in this pass

    @property
    def num_nodes(self) -> int:
        return int(self.arrays.position.size)


_cache: dict[tuple[int, ...], DeviceIndex] = {}


@njit(cache=True)
def _level_order_csr(indptr, indices, order, position):
    """The children of DAG node order[i] as row i, each child as its number: the CSR in level order."""
    new_indptr = np.zeros(order.size + 1, dtype=np.int64)
    for i in range(order.size):
        new_indptr[i + 1] = new_indptr[i] + indptr[order[i] + 1] - indptr[order[i]]
    new_indices = np.empty(indices.size, dtype=np.int32)
    for i in range(order.size):
        at = new_indptr[i]
        for e in range(indptr[order[i]], indptr[order[i] + 1]):
            new_indices[at] = position[indices[e]]
            at += 1
    return new_indptr, new_indices


def _node_rows(rec: np.ndarray, label_end: int) -> np.ndarray:
    """Node rows from records: level, topological id, then lo and hi of every dimension; padded to 32 bytes."""
    dims = (label_end - HEADER_WORDS) // LABEL_WORDS
    rows = np.zeros((rec.shape[0], -(-(NODE_BOXES + 2 * dims) // 8) * 8), dtype=np.uint32)
    rows[:, NODE_LEVEL] = rec[:, LEVEL]
    rows[:, NODE_ID] = rec[:, ID]
    for k in range(dims):
        base = HEADER_WORDS + LABEL_WORDS * k
        rows[:, NODE_BOXES + 2 * k] = rec[:, base + LO]
        rows[:, NODE_BOXES + 2 * k + 1] = rec[:, base + HI]
    return rows


def chunk_capacity(widest_level: int, words: int, requested: int = 0) -> int:
    """Chunks each half of the chunk arrays holds for passes of ``words`` words: ``requested`` if given,
    else what the widest level could ever need (a chunk for each of its nodes' summary words), at
    most MAX_BALANCED_SLOTS; never fewer than the widest level's nodes, so that passes of at most 64
    words (one summary word a node) always fit."""
    wanted = requested or min(MAX_BALANCED_SLOTS, widest_level * -(-words // 64))
    return max(wanted, widest_level, 1)


def device_index(hot: Any) -> DeviceIndex:
    """The device copy of ``hot``, numbered in level order: each level is a range of numbers, so the fill
    reads a level's flags in order, and a level's nodes, records and status rows sit side by side.
    Level order is a topological order, and every test keeps the DAG node ids, so answers do not change."""
    key = (id(hot.rec_dag), id(hot.out_indptr), id(hot.out_indices))
    cached = _cache.get(key)
    if cached is not None and cached.keep is hot:
        return cached
    _cache.clear()
    n = hot.rec_dag.shape[0]
    level = hot.rec_dag[:, LEVEL].astype(np.int64)
    levels = int(level.max()) + 1 if n else 1
    per_level = np.bincount(level, minlength=levels)
    if per_level.max() > MAX_BALANCED_SLOTS:
        raise MemoryError(f"a level of more than {MAX_BALANCED_SLOTS} nodes is beyond the GPU search's queues")
    order = np.argsort(level, kind="stable")
    position = np.empty(n, dtype=np.int32)
    position[order] = np.arange(n, dtype=np.int32)
    indptr, indices = _level_order_csr(
        np.asarray(hot.out_indptr, dtype=np.int64), np.asarray(hot.out_indices), order, position
    )
    rec = np.ascontiguousarray(hot.rec_dag[order])
    entry = DeviceIndex(
        keep=hot,
        arrays=IndexArrays(
            indptr=cuda.to_device(indptr),
            indices=cuda.to_device(indices),
            rec=cuda.to_device(rec),
            nodes=cuda.to_device(_node_rows(rec, hot.label_end)),
            position=cuda.to_device(position),
            level_ptr=cuda.to_device(np.concatenate([[0], np.cumsum(per_level)]).astype(np.int64)),
            label_end=hot.label_end,
        ),
        levels=levels,
        widest_level=int(per_level.max()),
        widest_level_edges=int(np.bincount(level, weights=np.diff(indptr)[position]).max()) if n else 0,
    )
    _cache[key] = entry
    return entry


def clear_cache() -> None:
    """Drops every device copy (after the device ran out of memory)."""
    _cache.clear()


def status_buffers(index: DeviceIndex, words: int, requested_chunks: int, cfg: EngineConfig) -> StatusArrays:
    """Status arrays for passes of ``words`` words, with the chunks and target table they need; the flat
    buffers only ever grow.

    Views of a flat buffer's first elements stay C-contiguous (no second kernel specialisation) and
    are all zero, since every pass clears what it wrote.
    """
    n = max(index.num_nodes, 1)
    chunks = chunk_capacity(index.widest_level, words, requested_chunks)
    held = 0 if index.chunks is None else index.chunks.starts.shape[1]
    if held < chunks or (requested_chunks and held != chunks):
        index.chunks = None
        index.chunks = ChunkArrays(
            cuda.device_array((2, chunks, 4), np.uint64), cuda.device_array((2, chunks), np.int64)
        )
    rec = index.arrays.rec
    if index.targets is None or index.targets.shape[0] < 64 * words:
        index.targets = None
        index.targets = cuda.device_array((64 * words, rec.shape[1]), dtype=rec.dtype)
    if index.capacity < words:
        index.reach = None  # free the old buffers before allocating larger ones
        index.summary = None
        index.reach = device_full(n * words, np.uint64, 0, cfg)
        index.summary = device_full(n * -(-words // 64), np.uint64, 0, cfg)
        index.touched = device_full(n, np.uint8, 0, cfg)
        index.capacity = words
    summary_words = -(-words // 64)
    return StatusArrays(
        index.reach[: n * words].reshape(n, words),
        index.summary[: n * summary_words].reshape(n, summary_words),
        index.touched,
    )


def clear_status(index: DeviceIndex, cfg: EngineConfig) -> None:
    """Zeroes the status buffers after a launch that stopped part way (a level outgrew the chunks)."""
    for flat in (index.reach, index.summary, index.touched):
        device_fill(flat, 0, cfg)
