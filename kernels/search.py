"""Batched bitmask search on the GPU for the pairs the label filter could not decide.

One pass runs up to 64 x W searches at once: every node carries W status words, bit j of word w
meaning "search 64*w + j has reached this node", and a summary with one bit per non-zero word, so
that expanding a node costs what its live searches cost, not W. The pass sweeps the DAG's topological levels once,
from the lowest source level up to the highest target level, with the frontier engine: a node's
bits are all in when its level comes (every parent has a lower level), so each touched node is
expanded exactly once per pass, whatever the number of searches through it. Per edge and per live
bit the child gets the same tests as the CPU search (``grail_core.query.classify``): prune on level,
topological id, GRAIL intervals and hub bits; answer on the target itself, a DFS-tree interval or a
hub between. A search whose target was found is masked out of every later expansion.

A pass is three launches (seed, one persistent sweep over the levels with a grid barrier between
them, and a sweep that clears the touched nodes); the host reads the found bits once per pass. Device copies of the index arrays are cached per ``QueryArrays`` between calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from .device import free_memory
from .frontier import (
    EngineConfig,
    cooperative_blocks,
    degree_class,
    make_edge_map,
    make_edge_sweep,
    make_node_sweep,
)
from .memory import device_full

__all__ = ["SearchOptions", "SearchStats", "search_pairs", "words_for"]

NO, YES, UNDECIDED = 0, 1, 2
ONE = np.uint64(1)
# Work items per edge: a node's status words are split into at most this many groups, so a node that
# thousands of searches reach is expanded by a warp (or the grid), not one thread.
WORD_GROUPS = 32


@dataclass(frozen=True)
class SearchOptions:
    config: EngineConfig | None = None
    max_words: int = 0  # status words per node; 0: sized from free memory and the batch
    memory_fraction: float = 0.5  # share of free device memory the status words may take


@cuda.jit(device=True, inline=True)
def classify(s, t, level, fwd, bwd, lo, hi, tree_lo):
    """Device twin of ``grail_core.query.classify``: YES, NO or UNDECIDED for 's reaches t'."""
    if s == t:
        return YES
    if s > t or level[s] >= level[t]:
        return NO
    fs = fwd[s]
    ft = fwd[t]
    if fs & ~ft:
        return NO
    bs = bwd[s]
    if bwd[t] & ~bs:
        return NO
    if bs & ft:
        return YES
    dims = lo.shape[1]
    for k in range(dims):
        if lo[s, k] > lo[t, k] or hi[t, k] > hi[s, k]:
            return NO
    for k in range(dims):
        if tree_lo[s, k] <= hi[t, k]:
            return YES
    return UNDECIDED


@cuda.jit(device=True, inline=True)
def _enqueue(c, items, level, queues, ptr, cnt, touched, medium_min, large_min):
    """Puts c into its level's bucket the first time any search reaches it in this pass.

    The degree class counts c's (edge, word) work items, so a node that many searches pass through
    gets a warp or the whole grid even when it has two children.
    """
    if cuda.atomic.exch(touched, c, 1) == 0:
        cls = degree_class(items[c + 1] - items[c], medium_min, large_min)
        lvl = level[c]
        slot = cuda.atomic.add(cnt, (cls, lvl), 1)
        queues[cls, ptr[cls, lvl] + slot] = c


@cuda.jit(device=True, inline=True)
def _mark(reach, summary, c, w, bits):
    """Sets ``bits`` in word w of node c, and w in c's summary of non-zero words."""
    cuda.atomic.or_(reach, (c, w), bits)
    cuda.atomic.or_(summary, (c, w // 64), ONE << np.uint64(w % 64))


@cuda.jit(device=True)
def _seed(j, args):
    """Search j starts at its source, unless the source's own labels already answer it."""
    (_indptr, items, _groups, _indices, level, lo, hi, tree_lo, fwd, bwd, reach, summary, found, src, tgt, touched,
     queues, ptr, cnt, medium_min, large_min) = args
    s = src[j]
    w = j // 64
    bit = ONE << np.uint64(j % 64)
    code = classify(s, tgt[j], level, fwd, bwd, lo, hi, tree_lo)
    if code == YES:
        cuda.atomic.or_(found, w, bit)
    elif code == UNDECIDED:
        _mark(reach, summary, s, w, bit)
        _enqueue(s, items, level, queues, ptr, cnt, touched, medium_min, large_min)


@cuda.jit(device=True)
def _expand(v, item, lvl, args):
    """One work item of v: the live searches of one group of its status words, pushed over one out-edge.

    The engine walks ``items`` (``indptr * groups``) instead of ``indptr``: item ``i`` of v is edge
    ``i // groups`` and word group ``i % groups``, so the work of a node is split over its children
    *and* over the searches that reached it, while a node reached by few searches costs at most
    ``groups`` summary tests per edge.
    """
    (indptr, items, groups, indices, level, lo, hi, tree_lo, fwd, bwd, reach, summary, found, _src, tgt, touched,
     queues, ptr, cnt, medium_min, large_min) = args
    words = reach.shape[1]
    per_group = (words + groups - 1) // groups
    local = item - items[v]
    c = indices[indptr[v] + local // groups]
    first = (local % groups) * per_group
    stop = min(words, first + per_group)
    reached = False
    # Only the group's non-zero words, read off v's summary: cost follows the searches, not the group size.
    for sw in range(first // 64, (stop + 63) // 64):
        base = sw * 64
        nonzero = summary[v, sw]
        if first > base:
            nonzero &= ~((ONE << np.uint64(first - base)) - ONE)
        if stop < base + 64:
            nonzero &= (ONE << np.uint64(stop - base)) - ONE
        while nonzero:
            low_word = nonzero & (~nonzero + ONE)
            nonzero ^= low_word
            w = base + cuda.popc(low_word - ONE)
            live = reach[v, w] & ~found[w]
            passed = np.uint64(0)
            while live:
                low = live & (~live + ONE)
                live ^= low
                code = classify(c, tgt[w * 64 + cuda.popc(low - ONE)], level, fwd, bwd, lo, hi, tree_lo)
                if code == YES:
                    cuda.atomic.or_(found, w, low)
                elif code == UNDECIDED:
                    passed |= low
            if passed:
                _mark(reach, summary, c, w, passed)
                reached = True
    if reached:
        _enqueue(c, items, level, queues, ptr, cnt, touched, medium_min, large_min)


@cuda.jit(device=True)
def _scale_indptr(i, args):
    indptr, groups, items = args
    items[i] = indptr[i] * groups


@cuda.jit(device=True)
def _clear(v, lvl, args):
    """Zeroes what the pass wrote at v: its non-zero words, its summary and its queue flag."""
    reach, summary, touched = args
    for sw in range(summary.shape[1]):
        words = summary[v, sw]
        while words:
            low_word = words & (~words + ONE)
            words ^= low_word
            reach[v, sw * 64 + cuda.popc(low_word - ONE)] = np.uint64(0)
        summary[v, sw] = np.uint64(0)
    touched[v] = 0


_seed_pairs = make_edge_map(_seed)
_map_scale_indptr = make_edge_map(_scale_indptr)
_sweep_expand = make_edge_sweep(_expand)
_sweep_clear = make_node_sweep(_clear)


@dataclass
class _DeviceIndex:
    """Device copies of one QueryArrays, its level buckets, and status buffers for ``words`` words a node."""

    keep: Any  # the host QueryArrays: holding it keeps the ids in the cache key valid
    arrays: tuple[Any, ...]  # indptr, indices, level, lo, hi, tree_lo, fwd, bwd
    level_host: np.ndarray
    queues: Any
    ptr: Any  # (3, levels) bucket starts per degree class
    levels: int
    capacity: int = 0  # status words per node the flat buffers hold
    reach: Any = None  # flat; a pass views its first n * words elements as (n, words), all zero between passes
    summary: Any = None  # flat; per node one bit per non-zero word of reach
    touched: Any = None
    items_groups: int = 0
    items: Any = None  # indptr * items_groups: the work items the engine walks


_cache: dict[tuple[int, ...], _DeviceIndex] = {}


def _bucket_starts(level: np.ndarray) -> tuple[np.ndarray, int]:
    """Start of every (degree class, level) bucket: each class queue has room for every node of a level."""
    levels = int(level.max()) + 1 if level.size else 1
    ptr = np.zeros((3, levels), dtype=np.int64)
    ptr[:, 1:] = np.cumsum(np.bincount(level, minlength=levels))[:-1]
    return ptr, levels


def _device_index(arrays: Any, cfg: EngineConfig) -> _DeviceIndex:
    key = tuple(id(x) for x in arrays)
    cached = _cache.get(key)
    if cached is not None and cached.keep is arrays:
        return cached
    _cache.clear()
    n = arrays.level.size
    indptr = np.ascontiguousarray(arrays.out_indptr, dtype=np.int64)
    ptr, levels = _bucket_starts(np.asarray(arrays.level))
    device = tuple(
        cuda.to_device(np.ascontiguousarray(x))
        for x in (indptr, arrays.out_indices, arrays.level, arrays.lo, arrays.hi, arrays.tree_lo, arrays.fwd,
                  arrays.bwd)
    )
    entry = _DeviceIndex(arrays, device, np.asarray(arrays.level), cuda.device_array((3, max(n, 1)), np.int32),
                         cuda.to_device(ptr), levels)
    _cache[key] = entry
    return entry


def words_for(num_pairs: int, num_nodes: int, free_bytes: int, fraction: float) -> int:
    """Status words per node: enough for the whole batch if memory allows, at least one."""
    wanted = -(-num_pairs // 64)
    affordable = int(fraction * free_bytes * 64 / 65) // max(1, 8 * num_nodes)
    return max(1, min(wanted, affordable))


def _status_buffers(index: _DeviceIndex, words: int, cfg: EngineConfig) -> tuple[Any, Any, Any, int]:
    """(reach, summary, items, groups) for passes of ``words`` words; the flat buffers only ever grow.

    Views of a flat buffer's first elements stay C-contiguous (no second kernel specialisation) and
    are all zero, since every pass clears what it wrote.
    """
    n = max(index.level_host.size, 1)
    if index.capacity < words:
        index.reach = None  # free the old buffers before allocating larger ones
        index.summary = None
        index.reach = device_full(n * words, np.uint64, 0, cfg)
        index.summary = device_full(n * -(-words // 64), np.uint64, 0, cfg)
        index.touched = device_full(n, np.int32, 0, cfg)
        index.capacity = words
    groups = min(words, WORD_GROUPS)
    if index.items_groups != groups:
        index.items = cuda.device_array(n + 1, dtype=np.int64)
        _map_scale_indptr[cfg.grid(), cfg.block](n + 1, (index.arrays[0], groups, index.items))
        index.items_groups = groups
    summary_words = -(-words // 64)
    return (index.reach[: n * words].reshape(n, words), index.summary[: n * summary_words].reshape(n, summary_words),
            index.items, groups)


@dataclass
class SearchStats:
    """What one ``search_pairs`` call did: passes of 64 x ``words`` searches, and where the time went."""

    passes: int = 0
    words: int = 0
    upload_seconds: float = 0.0  # index arrays to the device (first call per index only)
    search_seconds: float = 0.0


last_stats = SearchStats()


def search_pairs(arrays: Any, sources: np.ndarray, targets: np.ndarray,
                 options: SearchOptions | None = None) -> np.ndarray:
    """Exact answers (bool per pair) to 'DAG node sources[i] reaches DAG node targets[i]'.

    ``arrays`` is a ``grail_core.query.QueryArrays``; the pairs may be any DAG node ids (the seed step
    applies the label filter to each pair first, so decided pairs cost nothing). ``last_stats``
    describes the call afterwards.
    """
    global last_stats
    opts = options or SearchOptions()
    cfg = opts.config or EngineConfig.default()
    sources = np.asarray(sources, dtype=np.int32)
    targets = np.asarray(targets, dtype=np.int32)
    if sources.size == 0:
        return np.zeros(0, dtype=np.bool_)
    began = time.perf_counter()
    index = _device_index(arrays, cfg)
    wanted = -(-sources.size // 64)
    # Buffers already allocated count as affordable: free memory no longer includes them.
    words = opts.max_words or max(index.capacity,
                                  words_for(sources.size, index.level_host.size, free_memory(), opts.memory_fraction))
    words = min(words, wanted)
    buffers = _status_buffers(index, words, cfg)
    per_pass = 64 * words
    passes = -(-sources.size // per_pass)
    # Every pass's pairs, found bits and bucket counters go up at once, so passes queue back to back
    # with no host round trip until the answers come back.
    pad = passes * per_pass - sources.size
    d_src = cuda.to_device(np.concatenate([sources, np.zeros(pad, np.int32)]).reshape(passes, per_pass))
    d_tgt = cuda.to_device(np.concatenate([targets, np.zeros(pad, np.int32)]).reshape(passes, per_pass))
    found = cuda.to_device(np.zeros((passes, words), dtype=np.uint64))
    cnt = cuda.to_device(np.zeros((passes, 3, index.levels), dtype=np.int64))
    cuda.synchronize()
    uploaded = time.perf_counter()
    for p in range(passes):
        size = min(per_pass, sources.size - p * per_pass)
        window = slice(p * per_pass, p * per_pass + size)
        levels = (int(index.level_host[sources[window]].min()), int(index.level_host[targets[window]].max()))
        _one_pass(index, buffers, d_src[p, :size], d_tgt[p, :size], found[p], cnt[p], levels, cfg)
    bits = found.copy_to_host().reshape(-1)
    positions = np.arange(sources.size)
    answers = ((bits[positions // 64] >> (positions % 64).astype(np.uint64)) & ONE).astype(np.bool_)
    last_stats = SearchStats(passes=passes, words=words, upload_seconds=uploaded - began,
                             search_seconds=time.perf_counter() - uploaded)
    return answers


def _one_pass(index: _DeviceIndex, buffers: tuple[Any, Any, Any, int], src: Any, tgt: Any, found: Any, cnt: Any,
              levels: tuple[int, int], cfg: EngineConfig) -> None:
    """Queues one pass: seed, expand level by level from ``levels[0]`` to ``levels[1]``, clear."""
    indptr, indices, level, lo, hi, tree_lo, fwd, bwd = index.arrays
    reach, summary, items, groups = buffers
    args = (indptr, items, groups, indices, level, lo, hi, tree_lo, fwd, bwd, reach, summary, found, src, tgt,
            index.touched, index.queues, index.ptr, cnt, cfg.medium_min, cfg.large_min)
    first, last = levels
    block = cfg.block
    _seed_pairs[cfg.grid(), block](src.size, args)
    _sweep_expand[cooperative_blocks(_sweep_expand, cfg), block](items, index.queues, index.ptr, cnt, first,
                                                                 last - first, 1, args)
    _sweep_clear[cooperative_blocks(_sweep_clear, cfg), block](index.queues, index.ptr, cnt, first, last - first + 1, 1,
                                                               (reach, summary, index.touched))
