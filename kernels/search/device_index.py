"""The device copy of an index, numbered in level order; a per-device cache of several such copies (least
recently used out, by memory); and the per-device workspace (status buffers, chunks, entries) of a call."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda, njit

from grail_core.records import HEADER_WORDS, HI, ID, LABEL_WORDS, LEVEL, LO

from ..device import Device, free_memory, is_simulator
from ..frontier import MAX_BALANCED_SLOTS, EngineConfig
from ..memory import device_fill, device_full
from .driver import ChunkArrays, EntryArrays
from .ops import NODE_BOXES, NODE_ID, NODE_LEVEL, IndexArrays, StatusArrays

__all__ = [
    "CACHE_FRACTION",
    "DeviceCache",
    "DeviceIndex",
    "LevelOrder",
    "Workspace",
    "cache_for",
    "chunk_capacity",
    "entry_capacity",
    "total_memory",
]

# Share of a device's memory that cached index copies may hold together; the rest is the calls' status
# buffers (which size their passes from what is free).
CACHE_FRACTION = 0.5


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


@dataclass
class LevelOrder:
    """The host side of a device copy: an index's arrays numbered in level order. Each level is then a
    range of numbers, so the fill reads a level's flags in order, and a level's nodes, records and status
    rows sit side by side. Level order is a topological order, and every test keeps the DAG node ids, so
    answers do not change. Computed once and uploaded to every device that needs it."""

    indptr: np.ndarray
    indices: np.ndarray
    rec: np.ndarray
    nodes: np.ndarray
    position: np.ndarray  # DAG node id -> its number
    level_ptr: np.ndarray
    label_end: int
    widest_level: int  # nodes of the level that has most
    widest_level_edges: int  # out-edges of the level that has most: bounds a level's work items per word

    @classmethod
    def of(cls, hot: Any) -> LevelOrder:
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
        return cls(
            indptr=indptr,
            indices=indices,
            rec=rec,
            nodes=_node_rows(rec, hot.label_end),
            position=position,
            level_ptr=np.concatenate([[0], np.cumsum(per_level)]).astype(np.int64),
            label_end=hot.label_end,
            widest_level=int(per_level.max()),
            widest_level_edges=int(np.bincount(level, weights=np.diff(indptr)[position]).max()) if n else 0,
        )

    @property
    def nbytes(self) -> int:
        arrays = (self.indptr, self.indices, self.rec, self.nodes, self.position, self.level_ptr)
        return sum(array.nbytes for array in arrays)


@dataclass
class DeviceIndex:
    """Device copies of one index in level order (on the device whose cache holds it)."""

    arrays: IndexArrays
    levels: int
    widest_level: int
    widest_level_edges: int
    nbytes: int

    @property
    def num_nodes(self) -> int:
        return int(self.arrays.position.size)

    @classmethod
    def upload(cls, order: LevelOrder) -> DeviceIndex:
        return cls(
            arrays=IndexArrays(
                indptr=cuda.to_device(order.indptr),
                indices=cuda.to_device(order.indices),
                rec=cuda.to_device(order.rec),
                nodes=cuda.to_device(order.nodes),
                position=cuda.to_device(order.position),
                level_ptr=cuda.to_device(order.level_ptr),
                label_end=order.label_end,
            ),
            levels=order.level_ptr.size - 1,
            widest_level=order.widest_level,
            widest_level_edges=order.widest_level_edges,
            nbytes=order.nbytes,
        )


def chunk_capacity(widest_level: int, words: int, requested: int = 0) -> int:
    """Chunks each half of the chunk arrays holds for passes of ``words`` words: ``requested`` if given,
    else what the widest level could ever need (a chunk for each of its nodes' summary words), at
    most MAX_BALANCED_SLOTS; never fewer than the widest level's nodes, so that passes of at most 64
    words (one summary word a node) always fit."""
    wanted = requested or min(MAX_BALANCED_SLOTS, widest_level * -(-words // 64))
    return max(wanted, widest_level, 1)


def entry_capacity(num_nodes: int, requested: int = 0) -> int:
    """Entry rows of a frontier-mode pass: ``requested`` if given, else eight per node, at most
    MAX_BALANCED_SLOTS (40 bytes each). (On an H200 the 2M-node, 3,000-level benchmark DAG's walk batch
    overflowed four per node at 4,546 words a pass and took five passes instead of three.)"""
    return requested or min(MAX_BALANCED_SLOTS, max(8 * num_nodes, 1 << 16))


@dataclass
class Workspace:
    """A device's buffers for the call it runs: status words, chunks, the target table and the frontier's
    entries. Shared by the indexes cached there (calls take the device one at a time); they only ever
    grow, and are all zero between calls, since every pass clears what it wrote."""

    words: int = 0  # reach elements held (flat): nodes x status words of the largest call so far
    reach: Any = None
    summary: Any = None
    touched: Any = None
    chunks: ChunkArrays | None = None
    targets: Any = None
    entries: EntryArrays | None = None

    def status(
        self, index: DeviceIndex, words: int, requested_chunks: int, cfg: EngineConfig
    ) -> tuple[StatusArrays, ChunkArrays, Any]:
        """Status arrays of ``index`` for passes of ``words`` words, its chunks and a target table.

        Views of a flat buffer's first elements stay C-contiguous (no second kernel specialisation)."""
        n = max(index.num_nodes, 1)
        summary_words = -(-words // 64)
        chunks = chunk_capacity(index.widest_level, words, requested_chunks)
        held = 0 if self.chunks is None else self.chunks.starts.shape[1]
        if held < chunks or (requested_chunks and held != chunks):
            self.chunks = None
            self.chunks = ChunkArrays(
                cuda.device_array((2, chunks, 4), np.uint64), cuda.device_array((2, chunks), np.int64)
            )
        rec = index.arrays.rec
        if self.targets is None or self.targets.shape[0] < 64 * words or self.targets.shape[1] != rec.shape[1]:
            self.targets = None
            self.targets = cuda.device_array((64 * words, rec.shape[1]), dtype=rec.dtype)
        if self.words < n * words or self.touched.size < n or self.summary.size < n * summary_words:
            self.reach = self.summary = self.touched = None  # free the old buffers before allocating larger ones
            self.words = max(self.words, n * words)
            self.reach = device_full(self.words, np.uint64, 0, cfg)
            self.summary = device_full(-(-self.words // 64) + n, np.uint64, 0, cfg)
            self.touched = device_full(n, np.uint8, 0, cfg)
        status = StatusArrays(
            self.reach[: n * words].reshape(n, words),
            self.summary[: n * summary_words].reshape(n, summary_words),
            self.touched[:n],
        )
        return status, self.chunks, self.targets

    def entry_rows(self, index: DeviceIndex, requested: int = 0) -> EntryArrays:
        """Frontier mode's entry rows, allocated at the device's first frontier-mode call."""
        capacity = entry_capacity(index.num_nodes, requested)
        if (
            self.entries is None
            or self.entries.starts.size < capacity
            or (requested and self.entries.starts.size != capacity)
        ):
            self.entries = None
            self.entries = EntryArrays(
                cuda.device_array((capacity, 4), np.uint64),
                cuda.device_array(capacity, np.int64),
                cuda.to_device(np.zeros(3, dtype=np.int64)),
            )
        return self.entries

    def clear(self, cfg: EngineConfig) -> None:
        """Zeroes every buffer after a launch that stopped part way (a level outgrew the chunks, or a
        pass the frontier's entries)."""
        for flat in (self.reach, self.summary, self.touched):
            if flat is not None:
                device_fill(flat, 0, cfg)
        if self.entries is not None:
            device_fill(self.entries.counters, 0, cfg)

    @property
    def nbytes(self) -> int:
        held = [self.reach, self.summary, self.touched, self.targets]
        held += list(self.chunks or ()) + list(self.entries or ())
        return sum(array.nbytes for array in held if array is not None)


@dataclass
class DeviceCache:
    """The index copies on one device, least recently used first, and its workspace.

    An index copy goes in when a call needs it; copies used least recently go out while the cached
    copies would pass ``fraction`` of the device's memory, or the new one does not fit in what is free.
    Callers hold ``device.lock`` around every use (one call at a time on a device).
    """

    device: Device
    fraction: float = CACHE_FRACTION
    entries: OrderedDict[int, DeviceIndex] = field(default_factory=OrderedDict)
    workspace: Workspace = field(default_factory=Workspace)

    def index(self, key: int, prepare: Callable[[], LevelOrder]) -> DeviceIndex:
        """The copy cached under ``key``, uploaded from ``prepare()`` if absent (evicting others to fit)."""
        cached = self.entries.get(key)
        if cached is not None:
            self.entries.move_to_end(key)
            return cached
        order = prepare()
        self._make_room(order.nbytes)
        entry = DeviceIndex.upload(order)
        self.entries[key] = entry
        return entry

    def _make_room(self, nbytes: int) -> None:
        total = total_memory()
        while self.entries and (self.held + nbytes > self.fraction * total or free_memory() < nbytes):
            self.entries.popitem(last=False)
            _free_pending()

    @property
    def held(self) -> int:
        return sum(entry.nbytes for entry in self.entries.values())

    def drop(self, key: int) -> None:
        if self.entries.pop(key, None) is not None:
            _free_pending()

    def clear(self) -> None:
        """Drops every copy and the workspace (after the device ran out of memory)."""
        self.entries.clear()
        self.workspace = Workspace()
        _free_pending()


def total_memory() -> int:
    """Bytes of the current device's memory (the simulator: 1 GiB)."""
    if is_simulator():
        return 1 << 30
    return int(cuda.current_context().get_memory_info()[1])


def _free_pending() -> None:
    """numba frees device memory in batches; free what was dropped now, before the next allocation."""
    if not is_simulator():
        context = cuda.current_context()
        for owner in (getattr(context, "memory_manager", None), context):
            pending = getattr(owner, "deallocations", None)
            if pending is not None:
                pending.clear()


_caches: dict[Device, DeviceCache] = {}
_caches_lock = threading.Lock()


def cache_for(device: Device) -> DeviceCache:
    """The one cache of ``device``."""
    with _caches_lock:
        if device not in _caches:
            _caches[device] = DeviceCache(device)
        return _caches[device]
