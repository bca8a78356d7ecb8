"""The search's persistent kernel: every pass of a call in one launch, and the launch itself."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import cuda

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
    IndexArrays,
    Seed,
    StatusArrays,
    clear_chunk,
    emit_words,
    expand,
    measure_words,
    seed,
    unflag,
)

__all__ = ["Batch", "ChunkArrays", "launch"]

_seed_all = make_map_extent_body(seed)
_fill_level = make_balanced_fill_body(measure_words, emit_words)
_expand_level = make_balanced_advance_body(expand)
_clear_level = make_map_body(clear_chunk)
_unflag_level = make_map_body(unflag)


class ChunkArrays(NamedTuple):
    """Two halves (alternate levels) of the balanced chunk rows and their first items."""

    rows: Any  # (2, capacity, 4) uint64
    starts: Any  # (2, capacity) int64


class Batch(NamedTuple):
    """A call's pairs and what its passes keep."""

    sources: Any  # DAG node ids
    destinations: Any
    size: int
    targets: Any  # (64 W, record words) the current pass's target table
    found: Any  # (passes, W) uint64: bit j of word w is pair 64 w + j of the pass
    extents: Any  # (passes, 2): lowest source level and highest target level of the open searches
    balanced: Any  # (passes, levels): each level's balanced counter
    overflow: Any  # (1,): a level's chunks outgrew their arrays


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


_kernels: dict[int, Any] = {}


def _search_kernel(max_registers: int) -> Any:
    """``_search_passes`` compiled with at most ``max_registers`` registers a thread (0: no cap)."""
    if max_registers not in _kernels:
        # The simulator takes no register cap.
        cap = {} if is_simulator() or max_registers <= 0 else {"max_registers": max_registers}
        _kernels[max_registers] = cuda.jit(**cap)(_search_passes)
    return _kernels[max_registers]


def launch(
    index: IndexArrays,
    status: StatusArrays,
    chunks: ChunkArrays,
    sources: Any,
    destinations: Any,
    targets: Any,
    levels: int,
    max_registers: int,
    cfg: EngineConfig,
) -> tuple[np.ndarray, bool, int]:
    """One launch over all passes of ``status``'s words: (found bits per pass, whether a level overflowed, passes)."""
    words = status.reach.shape[1]
    per_pass = 64 * words
    passes = -(-sources.size // per_pass)
    extents = np.empty((passes, 2), dtype=np.int64)
    extents[:, 0] = NO_LEVEL
    extents[:, 1] = -1
    batch = Batch(
        sources=sources,
        destinations=destinations,
        size=sources.size,
        targets=targets[:per_pass],
        found=cuda.to_device(np.zeros((passes, words), dtype=np.uint64)),
        extents=cuda.to_device(extents),
        balanced=cuda.to_device(np.zeros((passes, levels), dtype=np.int64)),
        overflow=cuda.to_device(np.zeros(1, dtype=np.int32)),
    )
    kernel = _search_kernel(max_registers)
    kernel[cooperative_blocks(kernel, cfg), cfg.block](index, status, chunks, batch)
    return batch.found.copy_to_host(), bool(batch.overflow.copy_to_host()[0]), passes
