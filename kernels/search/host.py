"""The search's host API: answers for a batch of DAG-node pairs, with what the call did."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from grail_core.batches import pass_spans

from ..device import free_memory
from ..frontier import BALANCED_BLOCK, ITEM_MASK, EngineConfig
from .device_index import DeviceCache
from .driver import MAX_REGISTERS, launch, launch_frontier

__all__ = [
    "FRONTIER_SPAN",
    "MODES",
    "SearchOptions",
    "SearchStats",
    "choose_mode",
    "out_of_device_memory",
    "run_search",
    "words_for",
]

MODES = ("auto", "levels", "frontier")
# Without a cost model (mode 'auto'): passes that span more levels than this on average run hop by hop.
# A swept level costs three grid barriers and a scan of its nodes, a hop one barrier, and searches end
# within a few hops, far fewer than the levels they span (the figures: benchmarks/results/code-figures.md).
FRONTIER_SPAN = 64


@dataclass(frozen=True)
class SearchOptions:
    config: EngineConfig | None = None
    max_words: int = 0  # status words per node; 0: sized from free memory and the batch
    memory_fraction: float = 0.5  # share of free device memory the status words may take
    chunks: int = 0  # balanced chunks a level may have (one per non-zero summary word); 0: see chunk_capacity
    # Registers a thread of the search kernels may use (0: the compiler's choice, which is 255 with spills).
    max_registers: int = MAX_REGISTERS
    mode: str = "auto"  # 'levels' (sweep the levels), 'frontier' (hop by hop) or 'auto' (by the passes' spans)
    entries: int = 0  # frontier mode's entry rows a pass may push; 0: see device_index.entry_capacity


@dataclass
class SearchStats:
    """What one ``search_pairs`` call did: passes of 64 x ``words`` searches, and where the time went."""

    mode: str = "levels"
    passes: int = 0
    words: int = 0
    rounds: int = 0  # levels swept (levels mode) or hops taken (frontier mode), over all passes
    longest: int = 0  # the most rounds of one pass
    restarts: int = 0  # launches started again with half the words after a level outgrew the chunks
    upload_seconds: float = 0.0  # index arrays to the device (first call per index only)
    search_seconds: float = 0.0


def words_for(num_pairs: int, num_nodes: int, free_bytes: int, fraction: float) -> int:
    """Status words per node: enough for the whole batch if memory allows, at least one."""
    wanted = -(-num_pairs // 64)
    affordable = int(fraction * free_bytes * 64 / 65) // max(1, 8 * num_nodes)
    return max(1, min(wanted, affordable))


def choose_mode(spans: np.ndarray) -> str:
    """'frontier' when the passes span more than FRONTIER_SPAN levels on average, else 'levels'."""
    return "frontier" if spans.size and spans.mean() > FRONTIER_SPAN else "levels"


def out_of_device_memory(error: Exception) -> bool:
    """numba-cuda reports a failed allocation as a CudaAPIError naming CUDA_ERROR_OUT_OF_MEMORY."""
    return type(error).__name__ == "CudaAPIError" and "OUT_OF_MEMORY" in str(error)


def run_search(
    cache: DeviceCache,
    key: int,
    hot: Any,
    level: Callable[[], np.ndarray],
    sources: np.ndarray,
    targets: np.ndarray,
    opts: SearchOptions,
) -> tuple[np.ndarray, SearchStats]:
    """Answers on ``cache``'s device (current, and held by the caller) for the index cached under ``key``
    (copied from ``hot`` when the cache lacks it; ``level()`` gives its DAG levels for mode 'auto').

    Raises MemoryError when the index or a pass of one status word does not fit: the caller searches on
    the CPU."""
    cfg = opts.config or EngineConfig.default()
    if cfg.block > BALANCED_BLOCK:
        raise ValueError(f"the GPU search runs blocks of at most {BALANCED_BLOCK} threads, not {cfg.block}")
    if opts.mode not in MODES:
        raise ValueError(f"unknown search mode {opts.mode!r}; choose one of {', '.join(MODES)}")
    sources = np.ascontiguousarray(sources, dtype=np.int32)
    targets = np.ascontiguousarray(targets, dtype=np.int32)
    if sources.size == 0:
        return np.zeros(0, dtype=np.bool_), SearchStats(mode=opts.mode)
    began = time.perf_counter()
    index = cache.index(key, hot)
    workspace = cache.workspace
    wanted = -(-sources.size // 64)
    # Buffers already allocated count as affordable: free memory no longer includes them (and is asked of
    # the driver only when a call wants more).
    words = opts.max_words or workspace.words // max(1, index.num_nodes)
    if not opts.max_words and words < wanted:
        words = max(words, words_for(sources.size, index.num_nodes, free_memory(), opts.memory_fraction))
    # A level's work items (status words x out-edges) must fit the balanced counter's item field.
    words = max(1, min(words, wanted, ITEM_MASK // max(1, index.widest_level_edges)))
    mode = opts.mode
    if mode == "auto":
        mode = choose_mode(pass_spans(level(), sources, targets, 64 * words))
    uploaded = time.perf_counter()
    restarts = 0
    while True:
        status, chunks, _table = workspace.status(index, words, opts.chunks, cfg)
        if mode == "frontier":
            entries = workspace.entry_rows(index, opts.entries)
            batch = workspace.batch(sources, targets, words, 1)
            found, overflowed, rounds = launch_frontier(
                index.arrays, status.reach, entries, batch, opts.max_registers, cfg
            )
        else:
            batch = workspace.batch(sources, targets, words, index.levels)
            found, overflowed, rounds = launch(index.arrays, status, chunks, batch, opts.max_registers, cfg)
        if not overflowed:
            break
        workspace.clear(cfg)
        restarts += 1
        if words > 1 and (mode == "frontier" or words > 64):
            words = max(1, words // 2)
        elif mode == "frontier":
            mode = "levels"  # one word's entries still overflow: the level sweep always fits
        else:
            raise RuntimeError("a level outgrew the GPU search's chunks with one summary word a node")
    # Bit j of word w is pair 64 w + j: the words' bytes in little-endian order, their bits low first.
    answers = np.unpackbits(found.reshape(-1).view(np.uint8), bitorder="little")[: sources.size].astype(np.bool_)
    return answers, SearchStats(
        mode=mode,
        passes=int(rounds.size),
        words=words,
        rounds=int(rounds.sum()),
        longest=int(rounds.max()) if rounds.size else 0,
        restarts=restarts,
        upload_seconds=uploaded - began,
        search_seconds=time.perf_counter() - uploaded,
    )


def with_mode(options: SearchOptions, mode: str) -> SearchOptions:
    """``options`` with ``mode`` unless it is 'auto' (the options' own mode then stays)."""
    return options if mode == "auto" else replace(options, mode=mode)
