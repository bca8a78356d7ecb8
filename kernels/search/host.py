"""The search's host API: answers for a batch of DAG-node pairs, with what the call did."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from numba import cuda

from ..device import free_memory
from ..frontier import BALANCED_BLOCK, ITEM_MASK, EngineConfig
from . import device_index as cache
from .driver import launch

__all__ = ["SearchOptions", "SearchStats", "search_pairs", "search_pairs_with_stats", "words_for"]

_device_lock = threading.Lock()  # held by a call for as long as it uses the cached device index and the device


@dataclass(frozen=True)
class SearchOptions:
    config: EngineConfig | None = None
    max_words: int = 0  # status words per node; 0: sized from free memory and the batch
    memory_fraction: float = 0.5  # share of free device memory the status words may take
    chunks: int = 0  # balanced chunks a level may have (one per non-zero summary word); 0: see chunk_capacity
    # Registers a thread of the search kernel may use (0: the compiler's choice, which is 255 with spills).
    # 80 lets three blocks of 256 threads share an SM; on an H200 it was the fastest of 64, 80, 96 and
    # 128 on both generated batches (benchmarks/results/search-NVIDIA_H200.md).
    max_registers: int = 80


@dataclass
class SearchStats:
    """What one ``search_pairs`` call did: passes of 64 x ``words`` searches, and where the time went."""

    passes: int = 0
    words: int = 0
    restarts: int = 0  # launches started again with half the words after a level outgrew the chunks
    upload_seconds: float = 0.0  # index arrays to the device (first call per index only)
    search_seconds: float = 0.0


def words_for(num_pairs: int, num_nodes: int, free_bytes: int, fraction: float) -> int:
    """Status words per node: enough for the whole batch if memory allows, at least one."""
    wanted = -(-num_pairs // 64)
    affordable = int(fraction * free_bytes * 64 / 65) // max(1, 8 * num_nodes)
    return max(1, min(wanted, affordable))


def search_pairs(
    hot: object, sources: np.ndarray, targets: np.ndarray, options: SearchOptions | None = None
) -> np.ndarray:
    """Exact answers (bool per pair) to 'DAG node sources[i] reaches DAG node targets[i]'.

    ``hot`` is a ``grail_core.query.HotArrays`` (its DAG records and children); the pairs may be any
    DAG node ids (the seed step applies the label filter to each pair first, so decided pairs cost
    nothing). Raises MemoryError for a graph or batch the device cannot hold or queue (the caller
    searches on the CPU instead).
    """
    return search_pairs_with_stats(hot, sources, targets, options)[0]


def search_pairs_with_stats(
    hot: object, sources: np.ndarray, targets: np.ndarray, options: SearchOptions | None = None
) -> tuple[np.ndarray, SearchStats]:
    """``search_pairs`` and what the call did. Calls take the device one at a time: the cached index and
    its status buffers serve every call."""
    opts = options or SearchOptions()
    sources = np.ascontiguousarray(sources, dtype=np.int32)
    targets = np.ascontiguousarray(targets, dtype=np.int32)
    if sources.size == 0:
        return np.zeros(0, dtype=np.bool_), SearchStats()
    with _device_lock:
        try:
            return _search(hot, sources, targets, opts, opts.config or EngineConfig.default())
        except Exception as error:
            if not _out_of_device_memory(error):
                raise
            cache.clear_cache()
            raise MemoryError(f"the GPU search ran out of device memory: {error}") from error


def _out_of_device_memory(error: Exception) -> bool:
    """numba-cuda reports a failed allocation as a CudaAPIError naming CUDA_ERROR_OUT_OF_MEMORY."""
    return type(error).__name__ == "CudaAPIError" and "OUT_OF_MEMORY" in str(error)


def _search(
    hot: object, sources: np.ndarray, targets: np.ndarray, opts: SearchOptions, cfg: EngineConfig
) -> tuple[np.ndarray, SearchStats]:
    if cfg.block > BALANCED_BLOCK:
        raise ValueError(f"the GPU search runs blocks of at most {BALANCED_BLOCK} threads, not {cfg.block}")
    began = time.perf_counter()
    index = cache.device_index(hot)
    wanted = -(-sources.size // 64)
    # Buffers already allocated count as affordable: free memory no longer includes them.
    words = opts.max_words or max(
        index.capacity, words_for(sources.size, index.num_nodes, free_memory(), opts.memory_fraction)
    )
    # A level's work items (status words x out-edges) must fit the balanced counter's item field.
    words = max(1, min(words, wanted, ITEM_MASK // max(1, index.widest_level_edges)))
    cache.status_buffers(index, words, opts.chunks, cfg)
    d_src = cuda.to_device(sources)
    d_tgt = cuda.to_device(targets)
    cuda.synchronize()
    uploaded = time.perf_counter()
    restarts = 0
    while True:
        status = cache.status_buffers(index, words, opts.chunks, cfg)
        found, overflowed, passes = launch(
            index.arrays, status, index.chunks, d_src, d_tgt, index.targets, index.levels, opts.max_registers, cfg
        )
        if not overflowed:
            break
        if words <= 64:
            raise RuntimeError("a level outgrew the GPU search's chunks with one summary word a node")
        cache.clear_status(index, cfg)
        words = max(1, words // 2)
        restarts += 1
    # Bit j of word w is pair 64 w + j: the words' bytes in little-endian order, their bits low first.
    answers = np.unpackbits(found.reshape(-1).view(np.uint8), bitorder="little")[: sources.size].astype(np.bool_)
    return answers, SearchStats(
        passes=passes,
        words=words,
        restarts=restarts,
        upload_seconds=uploaded - began,
        search_seconds=time.perf_counter() - uploaded,
    )
