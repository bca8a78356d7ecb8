"""The device copy of an index, numbered in level order; a per-device cache of several such copies (least
recently used out, by memory); and the per-device workspace (status buffers, chunks, entries) of a call."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from grail_core.records import HEADER_WORDS, HI, ID, LABEL_WORDS, LEVEL, LO

from ..arrays import as_numba, device_arrays, to_device
from ..device import Device, free_memory, is_simulator
from ..frontier import MAX_BALANCED_SLOTS, EngineConfig
from ..memory import copy_into, device_fill, device_full
from .driver import Batch, ChunkArrays, EntryArrays
from .ops import NODE_BOXES, NODE_ID, NODE_LEVEL, IndexArrays, StatusArrays

__all__ = [
    "CACHE_FRACTION",
    "DeviceCache",
    "DeviceIndex",
    "index_bytes",
    "Workspace",
    "cache_for",
    "chunk_capacity",
    "entry_capacity",
    "total_memory",
]

# Share of a device's memory that cached index copies may hold together; the rest is the calls' status
# buffers (which size their passes from what is free).
CACHE_FRACTION = 0.5


def _node_rows(xp: Any, rec: Any, label_end: int) -> Any:
    """Node rows from records: level, topological id, then lo and hi of every dimension; padded to 32 bytes."""
    dims = (label_end - HEADER_WORDS) // LABEL_WORDS
    rows = xp.zeros((rec.shape[0], -(-(NODE_BOXES + 2 * dims) // 8) * 8), dtype=np.uint32)
    rows[:, NODE_LEVEL] = rec[:, LEVEL]
    rows[:, NODE_ID] = rec[:, ID]
    for k in range(dims):
        base = HEADER_WORDS + LABEL_WORDS * k
        rows[:, NODE_BOXES + 2 * k] = rec[:, base + LO]
        rows[:, NODE_BOXES + 2 * k + 1] = rec[:, base + HI]
    return rows


def index_bytes(hot: Any) -> int:
    """Device bytes an index's copy holds: records, node rows, CSR, numbering (``DeviceIndex.nbytes``)."""
    n = hot.rec_dag.shape[0]
    dims = (hot.label_end - HEADER_WORDS) // LABEL_WORDS
    node_row = 4 * -(-(NODE_BOXES + 2 * dims) // 8) * 8
    return hot.rec_dag.nbytes + (node_row + 16) * n + 4 * np.asarray(hot.out_indices).size


@dataclass
class DeviceIndex:
    """Device copies of one index, numbered in level order (on the device whose cache holds it).

    Each level is then a range of numbers, so the fill reads a level's flags in order, and a level's
    nodes, records and status rows sit side by side. Level order is a topological order, and every test
    keeps the DAG node ids, so answers do not change. The copy is made on the device from the index's
    own arrays (one upload; a stable sort by level, gathers and a scan), not on the host."""

    arrays: IndexArrays
    levels: int
    widest_level: int
    widest_level_edges: int
    nbytes: int
    owners: tuple[Any, ...] = ()  # the library arrays the numba views in ``arrays`` share memory with

    @property
    def num_nodes(self) -> int:
        return int(self.arrays.position.size)

    @classmethod
    def upload(cls, hot: Any) -> DeviceIndex:
        xp = device_arrays()
        n = hot.rec_dag.shape[0]
        records = to_device(hot.rec_dag)
        level = records[:, LEVEL].astype(np.int64)
        levels = int(level.max()) + 1 if n else 1
        per_level = xp.bincount(level, minlength=levels)
        widest_level = int(per_level.max()) if n else 0
        if widest_level > MAX_BALANCED_SLOTS:
            raise MemoryError(f"a level of more than {MAX_BALANCED_SLOTS} nodes is beyond the GPU search's queues")
        old_indptr = to_device(np.asarray(hot.out_indptr, dtype=np.int64))
        degree = xp.diff(old_indptr)
        widest_level_edges = int(xp.bincount(level, weights=degree, minlength=levels).max()) if n else 0
        order = xp.argsort(level, kind="stable")
        del level
        position = xp.empty(n, dtype=np.int32)
        position[order] = xp.arange(n, dtype=np.int32)
        rec = records[order]
        del records
        indptr = xp.zeros(n + 1, dtype=np.int64)
        xp.cumsum(degree[order], out=indptr[1:])
        old_indices = to_device(np.asarray(hot.out_indices, dtype=np.int32))
        slot = xp.arange(old_indices.size, dtype=np.int64)
        row = xp.searchsorted(indptr, slot, side="right") - 1
        indices = position[old_indices[old_indptr[order[row]] + slot - indptr[row]]]
        del old_indices, old_indptr, slot, row, order, degree
        nodes = _node_rows(xp, rec, hot.label_end)
        level_ptr = xp.zeros(levels + 1, dtype=np.int64)
        xp.cumsum(per_level, out=level_ptr[1:])
        owners = (indptr, indices, rec, nodes, position, level_ptr)
        return cls(
            arrays=IndexArrays(*(as_numba(array) for array in owners), label_end=hot.label_end),
            levels=levels,
            widest_level=widest_level,
            widest_level_edges=widest_level_edges,
            nbytes=sum(int(array.nbytes) for array in owners),
            owners=owners,
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
    MAX_BALANCED_SLOTS (40 bytes each): four a node overflowed on a deep DAG's batch of walks, which then
    took more passes."""
    return requested or min(MAX_BALANCED_SLOTS, max(8 * num_nodes, 1 << 16))


def _grown(array: Any, needed: int, dtype: Any) -> Any:
    """``array`` if it holds ``needed`` elements, else a new device array of twice that (the old one freed
    first)."""
    if array is not None and array.size >= needed:
        return array
    del array
    return cuda.device_array(max(2 * needed, 64), dtype=dtype)


@dataclass
class Workspace:
    """A device's buffers for the call it runs: status words, chunks, the target table, the frontier's
    entries, and the call's pairs and per-pass results. Shared by the indexes cached there (calls take the
    device one at a time); they only ever grow. The status words are all zero between calls (every pass
    clears what it wrote); the per-pass results are set by the launch itself. Views of the buffers are kept
    per shape, so that a call of a shape seen before builds no array objects."""

    words: int = 0  # reach elements held (flat): nodes x status words of the largest call so far
    reach: Any = None
    summary: Any = None
    touched: Any = None
    chunks: ChunkArrays | None = None
    targets: Any = None
    entries: EntryArrays | None = None
    sources: Any = None  # the call's pairs (int32, capacity grown as calls need)
    destinations: Any = None
    found: Any = None  # flat per-pass results, viewed by each call's shape
    extents: Any = None
    balanced: Any = None
    hops: Any = None
    overflow: Any = None
    _views: dict[tuple[Any, ...], Any] = field(default_factory=dict)

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
            self._views.clear()
        if self.words < n * words or self.touched.size < n or self.summary.size < n * summary_words:
            self.reach = self.summary = self.touched = None  # free the old buffers before allocating larger ones
            self.words = max(self.words, n * words)
            self.reach = device_full(self.words, np.uint64, 0, cfg)
            self.summary = device_full(-(-self.words // 64) + n, np.uint64, 0, cfg)
            self.touched = device_full(n, np.uint8, 0, cfg)
            self._views.clear()
        key = ("status", n, words)
        if key not in self._views:
            self._views[key] = StatusArrays(
                self.reach[: n * words].reshape(n, words),
                self.summary[: n * summary_words].reshape(n, summary_words),
                self.touched[:n],
            )
        return self._views[key], self.chunks, self.targets

    def batch(self, sources: np.ndarray, targets: np.ndarray, words: int, levels: int) -> Batch:
        """The call's pairs on the device and its per-pass results, for passes of ``words`` words over
        ``levels`` levels (1 in frontier mode); ``status`` must have sized the target table."""
        count = sources.size
        passes = -(-count // (64 * words))
        grown = (
            self.sources is None
            or self.sources.size < count
            or self.found.size < passes * words
            or self.balanced.size < passes * levels
            or self.extents.size < 2 * passes
        )
        if grown:
            self.sources = _grown(self.sources, count, np.int32)
            self.destinations = _grown(self.destinations, count, np.int32)
            self.found = _grown(self.found, passes * words, np.uint64)
            self.balanced = _grown(self.balanced, passes * levels, np.int64)
            self.extents = _grown(self.extents, 2 * passes, np.int64)
            self.hops = _grown(self.hops, passes, np.int64)
            if self.overflow is None:
                self.overflow = cuda.device_array(1, dtype=np.int32)
            self._views = {key: view for key, view in self._views.items() if key[0] == "status"}
        if count:
            copy_into(self.sources, sources)
            copy_into(self.destinations, targets)
        key = ("batch", passes, words, levels)
        if key not in self._views:
            self._views[key] = (
                self.targets[: 64 * words],
                self.found[: passes * words].reshape(passes, words),
                self.extents[: 2 * passes].reshape(passes, 2),
                self.balanced[: passes * levels].reshape(passes, levels),
                self.hops[:passes],
            )
        table, found, extents, balanced, hops = self._views[key]
        return Batch(self.sources, self.destinations, count, table, found, extents, balanced, self.overflow, hops)

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
        held = [self.reach, self.summary, self.touched, self.targets, self.sources, self.destinations]
        held += [self.found, self.extents, self.balanced, self.hops, self.overflow]
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

    def index(self, key: int, hot: Any) -> DeviceIndex:
        """The copy cached under ``key``, made from ``hot`` (``HotArrays``) if absent (evicting others to fit)."""
        cached = self.entries.get(key)
        if cached is not None:
            self.entries.move_to_end(key)
            return cached
        # While it is made, the records are on the device twice (as given, then in level order).
        self._make_room(index_bytes(hot), hot.rec_dag.nbytes)
        entry = DeviceIndex.upload(hot)
        self.entries[key] = entry
        return entry

    def _make_room(self, nbytes: int, transient: int = 0) -> None:
        total = total_memory()
        while self.entries and (self.held + nbytes > self.fraction * total or free_memory() < nbytes + transient):
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
    """numba frees device memory in batches and CuPy keeps freed blocks in its pool: give what was dropped
    back to the driver now, before the next allocation (the cache sizes itself by the driver's free memory)."""
    if not is_simulator():
        context = cuda.current_context()
        for owner in (getattr(context, "memory_manager", None), context):
            pending = getattr(owner, "deallocations", None)
            if pending is not None:
                pending.clear()
        device_arrays().get_default_memory_pool().free_all_blocks()


_caches: dict[Device, DeviceCache] = {}
_caches_lock = threading.Lock()


def cache_for(device: Device) -> DeviceCache:
    """The one cache of ``device``."""
    with _caches_lock:
        if device not in _caches:
            _caches[device] = DeviceCache(device)
        return _caches[device]
