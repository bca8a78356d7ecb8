"""The search's persistent kernel: every pass of a call in one launch, and the launch itself."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from ..compiled import copy_function, kernel
from ..device import is_simulator
from ..frontier import (
    EngineConfig,
    balanced_slots,
    cooperative_blocks,
    make_balanced_advance_body,
    make_balanced_fill_body,
    make_map_body,
    make_map_extent_body,
)
from .ops import (
    NO_LEVEL,
    Expand,
    Fill,
    Hop,
    IndexArrays,
    Queue,
    Seed,
    SeedQueue,
    StatusArrays,
    clear_chunk,
    clear_entry,
    emit_words,
    expand,
    expand_entry,
    measure_words,
    seed,
    seed_queue,
    unflag,
)

__all__ = [
    "MAX_REGISTERS",
    "Batch",
    "ChunkArrays",
    "EntryArrays",
    "kernel_name",
    "launch",
    "launch_frontier",
    "search_kernel",
]

_seed_all = make_map_extent_body(seed)
_fill_level = make_balanced_fill_body(measure_words, emit_words)
_expand_level = make_balanced_advance_body(expand)
_clear_level = make_map_body(clear_chunk)
_unflag_level = make_map_body(unflag)
_seed_queue = make_map_body(seed_queue)
_expand_hop = make_balanced_advance_body(expand_entry)
_clear_entries = make_map_body(clear_entry)


class ChunkArrays(NamedTuple):
    """Two halves (alternate levels) of the balanced chunk rows and their first items."""

    rows: Any  # (2, capacity, 4) uint64
    starts: Any  # (2, capacity) int64


class EntryArrays(NamedTuple):
    """Frontier mode's entries: every hop's (node, status word, bits) rows of a pass, one after another."""

    rows: Any  # (capacity, 4) uint64, the chunk row layout
    starts: Any  # (capacity,) int64
    counters: Any  # (3,) int64, zero between passes


class Batch(NamedTuple):
    """A call's pairs and what its passes keep."""

    sources: Any  # DAG node ids
    destinations: Any
    size: int
    targets: Any  # (64 W, record words) the current pass's target table
    found: Any  # (passes, W) uint64: bit j of word w is pair 64 w + j of the pass
    extents: Any  # (passes, 2): lowest source level and highest target level of the open searches
    balanced: Any  # (passes, levels): each level's balanced counter
    overflow: Any  # (1,): a level's chunks (or the frontier's entries) outgrew their arrays
    hops: Any  # (passes,): frontier mode's hops per pass (levels sweep: unused)


@cuda.jit(device=True)
def _start_batch(batch):
    """Every pass's found bits, extent, level counters and hops, and the overflow flag, set to their start:
    the call's buffers are reused from call to call, so the launch itself clears them (no copy or memset
    from the host)."""
    gtid = cuda.grid(1)
    threads = cuda.gridsize(1)
    words = batch.found.shape[1]
    for i in range(gtid, batch.found.size, threads):
        batch.found[i // words, i % words] = 0
    levels = batch.balanced.shape[1]
    for i in range(gtid, batch.balanced.size, threads):
        batch.balanced[i // levels, i % levels] = 0
    for p in range(gtid, batch.extents.shape[0], threads):
        batch.extents[p, 0] = NO_LEVEL
        batch.extents[p, 1] = -1
        batch.hops[p] = 0
    if gtid == 0:
        batch.overflow[0] = 0


def _search_passes(index, status, chunks, batch):
    """Every pass of a call in one persistent launch: seed, then per level fill the balanced chunks and expand them.

    Nodes are numbered in level order here (``index.position`` maps a DAG node id to its number), so
    that a level is a range of numbers. The seed step sets pass p's extent to (lowest source level,
    highest target level) over the searches it leaves open: a search only ever marks nodes below its
    target's level, so the levels from the first up to the last but one hold every node the pass
    reaches. Chunks alternate between two halves of the chunk arrays (level l uses half l % 2): a
    level's status words are zeroed from its chunks, and its flags by range, while the next level fills
    the other half. A level whose chunks outgrow a half sets ``batch.overflow[0]`` and ends the launch;
    the host then starts again with fewer searches a pass.
    """
    grid = cuda.cg.this_grid()
    threads = cuda.gridsize(1)
    _start_batch(batch)
    grid.sync()
    per_pass = batch.targets.shape[0]
    per_node = status.summary.shape[1]
    capacity = chunks.rows.shape[1]
    level_ptr = index.level_ptr
    for p in range(batch.extents.shape[0]):
        pass_found = batch.found[p]
        _seed_all(
            min(per_pass, batch.size - p * per_pass),
            batch.extents[p],
            Seed(index, status, batch.targets, batch.sources, batch.destinations, p * per_pass, pass_found),
        )
        grid.sync()
        first = batch.extents[p, 0]
        last = batch.extents[p, 1]
        for lvl in range(first, last + 1):
            half = lvl % 2
            if lvl > first:
                _clear_level(balanced_slots(batch.balanced[p, lvl - 1]), (status.reach, chunks.rows[1 - half]))
                _unflag_level(level_ptr[lvl] - level_ptr[lvl - 1], (status.touched, level_ptr[lvl - 1]))
            if lvl == last:
                break
            nodes_here = level_ptr[lvl + 1] - level_ptr[lvl]
            groups = min(per_node, max(1, threads // max(1, nodes_here)))
            _fill_level(
                nodes_here * groups,
                batch.balanced[p],
                lvl,
                capacity,
                batch.overflow,
                Fill(
                    level_ptr[lvl],
                    groups,
                    (per_node + groups - 1) // groups,
                    status,
                    index.indptr,
                    chunks.rows[half],
                    chunks.starts[half],
                ),
            )
            grid.sync()
            if batch.overflow[0]:
                return
            _expand_level(
                chunks.starts[half],
                batch.balanced[p, lvl],
                Expand(chunks.rows[half], index, batch.targets, pass_found, status),
            )
            grid.sync()
        grid.sync()


def _frontier_passes(index, seen, entries, batch):
    """Every pass of a call in one persistent launch, hop by hop: a queue of (node, status word, new bits)
    entries per hop, one grid barrier a hop.

    A pass takes as many rounds as its longest search takes hops, not as many as the levels it spans: on
    a DAG of 340,000 levels a search is answered within a few hops, rarely a thousand. Every push
    reserves its entry's row and items with one atomic on the hop's packed counter; ``seen`` keeps the
    bits that reached each node, so that each search expands a node once. Hop h reads counter h % 3,
    fills counter (h + 1) % 3 and clears counter (h + 2) % 3, which hop h - 1 read: a barrier lies
    between. The seen words of a pass are zeroed from its entries at its end. Entries that outgrow their
    rows set ``batch.overflow[0]`` and end the launch.
    """
    grid = cuda.cg.this_grid()
    gtid = cuda.grid(1)
    _start_batch(batch)
    grid.sync()
    per_pass = batch.targets.shape[0]
    counters = entries.counters
    for p in range(batch.found.shape[0]):
        pass_found = batch.found[p]
        _seed_queue(
            min(per_pass, batch.size - p * per_pass),
            SeedQueue(
                index,
                seen,
                Queue(entries.rows, entries.starts, counters, 0, 0, batch.overflow),
                batch.targets,
                batch.sources,
                batch.destinations,
                p * per_pass,
                pass_found,
            ),
        )
        grid.sync()
        base = np.int64(0)
        hop = 0
        while batch.overflow[0] == 0:
            packed = counters[hop % 3]
            slots = balanced_slots(packed)
            if slots == 0:
                break
            if gtid == 0:
                counters[(hop + 2) % 3] = 0
            following = base + slots
            _expand_hop(
                entries.starts[base:],
                packed,
                Hop(
                    entries.rows[base:],
                    index,
                    batch.targets,
                    pass_found,
                    seen,
                    Queue(entries.rows, entries.starts, counters, (hop + 1) % 3, following, batch.overflow),
                ),
            )
            grid.sync()
            base = following
            hop += 1
        if batch.overflow[0]:
            return
        _clear_entries(base, (seen, entries.rows))
        if gtid == 0:
            batch.hops[p] = hop
            for k in range(3):
                counters[k] = 0
        grid.sync()


# Registers a thread of the search kernels may use by default: 80 lets three blocks of 256 threads share an
# SM, and was the fastest of the counts tried (benchmarks/results/code-figures.md).
MAX_REGISTERS = 80
_BODIES = {"levels": _search_passes, "frontier": _frontier_passes}
_kernels: dict[tuple[str, int], Any] = {}
_kernels_lock = threading.Lock()


def kernel_name(mode: str, max_registers: int = MAX_REGISTERS) -> str:
    """The registered name of a search mode's kernel compiled with ``max_registers`` (0: no cap)."""
    return f"search.{mode}[r{max_registers}]"


def search_kernel(mode: str, max_registers: int = MAX_REGISTERS) -> Any:
    """The persistent kernel of ``mode`` ('levels' or 'frontier') with at most ``max_registers`` registers a
    thread (0: no cap); the default cap's are made at import, so that the warm-up compiles them."""
    key = (mode, max_registers)
    with _kernels_lock:
        if key not in _kernels:
            # The simulator takes no register cap.
            cap = {} if is_simulator() or max_registers <= 0 else {"max_registers": max_registers}
            _kernels[key] = kernel(copy_function(_BODIES[mode]), kernel_name(mode, max_registers), **cap)
        return _kernels[key]


for _mode in _BODIES:
    search_kernel(_mode)


def launch(
    index: IndexArrays, status: StatusArrays, chunks: ChunkArrays, batch: Batch, max_registers: int, cfg: EngineConfig
) -> tuple[np.ndarray, bool, np.ndarray]:
    """One level-sweep launch over all passes of ``batch``: (found bits per pass, whether a level overflowed,
    the levels each pass swept)."""
    compiled = search_kernel("levels", max_registers)
    compiled[cooperative_blocks(compiled, cfg), cfg.block](index, status, chunks, batch)
    extents = batch.extents.copy_to_host()
    swept = np.maximum(extents[:, 1] - extents[:, 0], 0)
    return batch.found.copy_to_host(), bool(batch.overflow.copy_to_host()[0]), swept


def launch_frontier(
    index: IndexArrays, seen: Any, entries: EntryArrays, batch: Batch, max_registers: int, cfg: EngineConfig
) -> tuple[np.ndarray, bool, np.ndarray]:
    """One frontier-mode launch over all passes of ``batch``: (found bits per pass, whether the entries
    overflowed, the hops each pass took)."""
    compiled = search_kernel("frontier", max_registers)
    compiled[cooperative_blocks(compiled, cfg), cfg.block](index, seen, entries, batch)
    return batch.found.copy_to_host(), bool(batch.overflow.copy_to_host()[0]), batch.hops.copy_to_host()
