"""Batched bitmask search on the GPU for the pairs the label filter could not decide.

One pass runs up to 64 x W searches at once: every node carries W status words, bit j of word w
meaning "search 64*w + j has reached this node", and a summary with one bit per non-zero word, so
that expanding a node costs what its live searches cost, not W. The pass sweeps the DAG's
topological levels once, from the lowest source level up to the highest target level, with the
frontier engine: a node's bits are all in when its level comes (every parent has a lower level), so
each touched node is expanded exactly once per pass, whatever the number of searches through it.
Reached nodes wait on a pending list until then, and then move to the engine's balanced queue with
their real work (out-edges x non-zero status words), which every thread shares equally. Per edge and per live bit the child gets the
CPU search's test (``grail_core.query.classify``, on the same 64-byte node records): prune on level,
topological id, GRAIL intervals and hub bits; answer on the target itself, a DFS-tree interval or a
hub between. A search whose target was found is masked out of every later expansion.

A pass first copies its searches' target records into one small table, so that its tests read
targets from the L2 cache instead of one random record of the whole graph per test. All passes of a
call run in one persistent launch, so a call costs one launch and one read of the found bits.
Device copies of the index are cached per ``HotArrays`` between calls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from .device import free_memory, is_simulator
from .frontier import (
    ITEM_BITS,
    MAX_BALANCED_NODES,
    EngineConfig,
    balanced_nodes,
    balanced_push,
    cooperative_blocks,
    make_balanced_advance_body,
    make_map_body,
)
from .memory import device_full

__all__ = ["SearchOptions", "SearchStats", "search_pairs", "search_pairs_with_stats", "words_for"]

NO, YES, UNDECIDED = 0, 1, 2
ONE = np.uint64(1)
# Queue rows: where a pass collects the nodes a level's searches reach, and, once the level below is
# done, the balanced queue those nodes move to with the work they carry.
PENDING, BALANCED = 0, 1
# Record layout of grail_core.query.pack: DAG id, level, fwd (2 words), bwd (2 words), then per dimension
# lo, hi, tree_lo.
_HEADER_WORDS = 6


@dataclass(frozen=True)
class SearchOptions:
    config: EngineConfig | None = None
    max_words: int = 0  # status words per node; 0: sized from free memory and the batch
    memory_fraction: float = 0.5  # share of free device memory the status words may take
    # Registers a thread of the search kernel may use (0: no cap). 128 gives two resident blocks per SM
    # instead of one, which the latency-bound searches of a citation graph need (H200: 125 against
    # 178 ms); 64 gives four but spills on the uniprot-like graph (16.6 against 11.9 ms).
    max_registers: int = 128


@cuda.jit(device=True, inline=True)
def _mask(rec, v, column):
    return (np.uint64(rec[v, column + 1]) << np.uint64(32)) | np.uint64(rec[v, column])


@cuda.jit(device=True, inline=True)
def classify(rec, boxes, c, level_c, targets, j, label_end):
    """Device twin of ``grail_core.query.classify`` (the same answer for every pair): YES, NO or UNDECIDED
    for 'DAG node c (record ``rec[c]``, level ``level_c``) reaches the target of search j' (``targets[j]``).

    Here the tests return as soon as one fails, cheapest first: a GPU thread pays for the words it
    loads, not for a mispredicted branch. The id and level tests need no load of c's record (a node's
    id is its row; the caller holds its level), and the GRAIL intervals, which reject most children,
    come from ``boxes`` (lo, hi per dimension): small arrays that stay in the L2 cache, where the
    records of a large graph do not.
    """
    t = targets[j, 0]
    if c == t:
        return YES
    if t < c or targets[j, 1] <= level_c:
        return NO
    for k in range(_HEADER_WORDS, label_end, 3):
        box = 2 * ((k - _HEADER_WORDS) // 3)
        if targets[j, k] < boxes[c, box] or boxes[c, box + 1] < targets[j, k + 1]:
            return NO
    bs = _mask(rec, c, 4)
    ft = _mask(targets, j, 2)
    if (_mask(rec, c, 2) & ~ft) | (_mask(targets, j, 4) & ~bs):
        return NO
    for k in range(_HEADER_WORDS, label_end, 3):
        if rec[c, k + 2] <= targets[j, k + 1]:
            return YES
    return YES if bs & ft else UNDECIDED


@cuda.jit(device=True, inline=True)
def _enqueue(c, level, queues, ptr, cnt, touched):
    """Puts c on its level's pending list the first time any search reaches it in this pass."""
    if cuda.atomic.exch(touched, c, 1) == 0:
        lvl = level[c]
        queues[PENDING, ptr[PENDING, lvl] + cuda.atomic.add(cnt, (PENDING, lvl), 1)] = c


@cuda.jit(device=True, inline=True)
def _mark(reach, summary, c, w, bits):
    """Sets ``bits`` in word w of node c and w in c's summary.

    Atomics whose old value is not read are fire-and-forget on the GPU; reading first to skip them
    would make every mark wait for a round trip to memory.
    """
    cuda.atomic.or_(reach, (c, w), bits)
    cuda.atomic.or_(summary, (c, w // 64), ONE << np.uint64(w % 64))


@cuda.jit(device=True)
def _seed(j, args):
    """Search j copies its target's record into the pass's table and starts at its source, unless the
    source's own record already answers it."""
    rec, boxes, level, label_end, targets, src, tgt, found, reach, summary, touched, queues, ptr, cnt = args
    t = tgt[j]
    for k in range(rec.shape[1]):
        targets[j, k] = rec[t, k]
    s = src[j]
    w = j // 64
    bit = ONE << np.uint64(j % 64)
    code = classify(rec, boxes, s, level[s], targets, j, label_end)
    if code == YES:
        cuda.atomic.or_(found, w, bit)
    elif code == UNDECIDED:
        _mark(reach, summary, s, w, bit)
        _enqueue(s, level, queues, ptr, cnt, touched)


@cuda.jit(device=True)
def _bucket(i, args):
    """Pending node i of the level gets its word groups and moves to the balanced queue with its work.

    Once a node's searches are all in, its work is (out-edges) x (non-zero status words), about one
    non-zero word per item: a node that thousands of searches reached is spread over many threads,
    however few its children, while a node that one search reached is one item per edge.
    """
    indptr, groups, summary, words, queues, starts, ptr, cnt, lvl = args
    v = queues[PENDING, ptr[PENDING, lvl] + i]
    nonzero = 0
    for sw in range(summary.shape[1]):
        nonzero += cuda.popc(summary[v, sw])
    per_group = max(1, words // max(1, nonzero))
    g = (words + per_group - 1) // per_group
    groups[v] = g
    balanced_push(queues, starts, ptr, cnt, BALANCED, lvl, v, (indptr[v + 1] - indptr[v]) * g)


@cuda.jit(device=True)
def _expand(v, item, lvl, args):
    """One work item of v: the live searches of one group of its status words, pushed over one out-edge.

    Items are edge-major (item = edge * groups + group), so that neighbouring threads share a child.
    """
    (indptr, groups, indices, rec, boxes, level, label_end, targets, found, reach, summary, touched, queues, ptr,
     cnt) = args
    words = reach.shape[1]
    g = groups[v]
    per_group = (words + g - 1) // g
    c = indices[indptr[v] + item // g]
    level_c = level[c]
    first = (item % g) * per_group
    stop = min(words, first + per_group)
    reached = False
    # Only the group's non-zero words, read off v's summary: cost follows the searches, not the group size.
    for sw in range(first // 64, (stop + 63) // 64):
        base = sw * 64
        nonzero_words = summary[v, sw]
        if first > base:
            nonzero_words &= ~((ONE << np.uint64(first - base)) - ONE)
        if stop < base + 64:
            nonzero_words &= (ONE << np.uint64(stop - base)) - ONE
        while nonzero_words:
            low_word = nonzero_words & (~nonzero_words + ONE)
            nonzero_words ^= low_word
            w = base + cuda.popc(low_word - ONE)
            live = reach[v, w] & ~found[w]
            passed = np.uint64(0)
            while live:
                low = live & (~live + ONE)
                live ^= low
                code = classify(rec, boxes, c, level_c, targets, w * 64 + cuda.popc(low - ONE), label_end)
                if code == YES:
                    cuda.atomic.or_(found, w, low)
                elif code == UNDECIDED:
                    passed |= low
            if passed:
                _mark(reach, summary, c, w, passed)
                reached = True
    if reached:
        _enqueue(c, level, queues, ptr, cnt, touched)


@cuda.jit(device=True)
def _clear(i, args):
    """Zeroes what the pass wrote at node i of a level: its non-zero words, its summary and its queue flag."""
    reach, summary, touched, queues, ptr, lvl = args
    v = queues[BALANCED, ptr[BALANCED, lvl] + i]
    for sw in range(summary.shape[1]):
        words = summary[v, sw]
        while words:
            low_word = words & (~words + ONE)
            words ^= low_word
            reach[v, sw * 64 + cuda.popc(low_word - ONE)] = np.uint64(0)
        summary[v, sw] = np.uint64(0)
    touched[v] = 0


_seed_all = make_map_body(_seed)
_bucket_all = make_map_body(_bucket)
_expand_level = make_balanced_advance_body(_expand)
_clear_all = make_map_body(_clear)


def _search_passes(spans, total, indptr, indices, rec, boxes, level, label_end, reach, summary, groups, touched, queues,
                   starts, ptr, src, tgt, targets, found, cnt):
    """Every pass of a call in one persistent launch: seed, then per level expand, clear and bucket the next.

    After level l is expanded (barrier), the nodes of level l + 1 have all their searches, since every
    parent sits on a lower level: they are bucketed by their work while level l is cleared.
    ``spans[p]`` is pass p's (lowest source level, highest target level); its searches only ever
    mark nodes below that target level.
    """
    grid = cuda.cg.this_grid()
    per_pass = src.shape[1]
    words = reach.shape[1]
    for p in range(spans.shape[0]):
        pass_found = found[p]
        pass_cnt = cnt[p]
        _seed_all(min(per_pass, total - p * per_pass),
                  (rec, boxes, level, label_end, targets, src[p], tgt[p], pass_found, reach, summary, touched, queues,
                   ptr, pass_cnt))
        grid.sync()
        first = spans[p, 0]
        count = spans[p, 1] - first
        _bucket_all(pass_cnt[PENDING, first], (indptr, groups, summary, words, queues, starts, ptr, pass_cnt, first))
        grid.sync()
        expand_args = (indptr, groups, indices, rec, boxes, level, label_end, targets, pass_found, reach, summary,
                       touched, queues, ptr, pass_cnt)
        for i in range(count + 1):
            lvl = first + i
            if i < count:
                _expand_level(queues, starts, ptr, pass_cnt, BALANCED, lvl, expand_args)
            grid.sync()
            _clear_all(balanced_nodes(pass_cnt, BALANCED, lvl), (reach, summary, touched, queues, ptr, lvl))
            if i < count:
                _bucket_all(pass_cnt[PENDING, lvl + 1],
                            (indptr, groups, summary, words, queues, starts, ptr, pass_cnt, lvl + 1))
            grid.sync()


_kernels: dict[int, Any] = {}


def _search_kernel(max_registers: int) -> Any:
    """``_search_passes`` compiled with at most ``max_registers`` registers a thread (0: no cap)."""
    if max_registers not in _kernels:
        # The simulator takes no register cap.
        cap = {} if is_simulator() or max_registers <= 0 else {"max_registers": max_registers}
        _kernels[max_registers] = cuda.jit(**cap)(_search_passes)
    return _kernels[max_registers]


@dataclass
class _DeviceIndex:
    """Device copies of one HotArrays, its level buckets, and status buffers for ``capacity`` words a node."""

    keep: Any  # the host HotArrays: holding it keeps the ids in the cache key valid
    indptr: Any
    indices: Any
    rec: Any  # the 64-byte node records, as on the CPU
    boxes: Any  # (N, 2 * dims) int32: lo, hi per dimension (also in the records; this copy stays in cache)
    device_level: Any  # int32 levels (likewise)
    level: np.ndarray  # host copy of the levels, for each pass's level span
    queues: Any  # rows PENDING and BALANCED
    starts: Any  # per BALANCED slot: where its node's work items start in the level's item range
    ptr: Any  # (2, levels) bucket starts per row
    levels: int
    widest_level_edges: int  # out-edges of the level that has most: bounds a level's work items per word
    groups: Any  # per node: word groups of its current pass
    capacity: int = 0  # status words per node the flat buffers hold
    reach: Any = None  # flat; a pass views its first n * words elements as (n, words), all zero between passes
    summary: Any = None  # flat; per node one bit per non-zero word of reach
    touched: Any = None


_cache: dict[tuple[int, ...], _DeviceIndex] = {}
_device_lock = threading.Lock()  # held by a call for as long as it uses _cache and the device


def _bucket_starts(level: np.ndarray) -> tuple[np.ndarray, int]:
    """Start of every (queue row, level) bucket: each row has room for every node of a level."""
    levels = int(level.max()) + 1 if level.size else 1
    ptr = np.zeros((BALANCED + 1, levels), dtype=np.int64)
    ptr[:, 1:] = np.cumsum(np.bincount(level, minlength=levels))[:-1]
    return ptr, levels


def _boxes(hot: Any) -> np.ndarray:
    """lo and hi of every dimension, per node, from the records."""
    dims = (hot.label_end - _HEADER_WORDS) // 3
    columns = [_HEADER_WORDS + 3 * k + offset for k in range(dims) for offset in (0, 1)]
    return np.ascontiguousarray(hot.rec_dag[:, columns])


def _device_index(hot: Any) -> _DeviceIndex:
    key = (id(hot.rec_dag), id(hot.out_indptr), id(hot.out_indices))
    cached = _cache.get(key)
    if cached is not None and cached.keep is hot:
        return cached
    _cache.clear()
    n = hot.rec_dag.shape[0]
    level = hot.rec_dag[:, 1].astype(np.int64)
    ptr, levels = _bucket_starts(level)
    if n and np.bincount(level).max() >= MAX_BALANCED_NODES:
        raise MemoryError(f"a level of more than {MAX_BALANCED_NODES} nodes is beyond the GPU search's queues")
    degree = np.diff(np.asarray(hot.out_indptr, dtype=np.int64))
    entry = _DeviceIndex(
        keep=hot,
        indptr=cuda.to_device(np.ascontiguousarray(hot.out_indptr, dtype=np.int64)),
        indices=cuda.to_device(np.ascontiguousarray(hot.out_indices)),
        rec=cuda.to_device(np.ascontiguousarray(hot.rec_dag)),
        boxes=cuda.to_device(_boxes(hot)),
        device_level=cuda.to_device(level.astype(np.int32)),
        level=level,
        queues=cuda.device_array((BALANCED + 1, max(n, 1)), np.int32),
        starts=cuda.device_array(max(n, 1), np.int64),
        ptr=cuda.to_device(ptr),
        levels=levels,
        widest_level_edges=int(np.bincount(level, weights=degree).max()) if n else 0,
        groups=cuda.device_array(max(n, 1), np.int32),
    )
    _cache[key] = entry
    return entry


def words_for(num_pairs: int, num_nodes: int, free_bytes: int, fraction: float) -> int:
    """Status words per node: enough for the whole batch if memory allows, at least one."""
    wanted = -(-num_pairs // 64)
    affordable = int(fraction * free_bytes * 64 / 65) // max(1, 8 * num_nodes)
    return max(1, min(wanted, affordable))


def _status_buffers(index: _DeviceIndex, words: int, cfg: EngineConfig) -> tuple[Any, Any]:
    """(reach, summary) views for passes of ``words`` words; the flat buffers only ever grow.

    Views of a flat buffer's first elements stay C-contiguous (no second kernel specialisation) and
    are all zero, since every pass clears what it wrote.
    """
    n = max(index.level.size, 1)
    if index.capacity < words:
        index.reach = None  # free the old buffers before allocating larger ones
        index.summary = None
        index.reach = device_full(n * words, np.uint64, 0, cfg)
        index.summary = device_full(n * -(-words // 64), np.uint64, 0, cfg)
        index.touched = device_full(n, np.int32, 0, cfg)
        index.capacity = words
    summary_words = -(-words // 64)
    return index.reach[: n * words].reshape(n, words), index.summary[: n * summary_words].reshape(n, summary_words)


@dataclass
class SearchStats:
    """What one ``search_pairs`` call did: passes of 64 x ``words`` searches, and where the time went."""

    passes: int = 0
    words: int = 0
    upload_seconds: float = 0.0  # index arrays to the device (first call per index only)
    search_seconds: float = 0.0


last_stats = SearchStats()


def search_pairs(hot: Any, sources: np.ndarray, targets: np.ndarray,
                 options: SearchOptions | None = None) -> np.ndarray:
    """Exact answers (bool per pair) to 'DAG node sources[i] reaches DAG node targets[i]'.

    ``hot`` is a ``grail_core.query.HotArrays`` (its DAG records and children); the pairs may be any
    DAG node ids (the seed step applies the label filter to each pair first, so decided pairs cost
    nothing). Raises MemoryError for a graph or batch the device cannot hold or queue (the caller
    searches on the CPU instead).
    """
    return search_pairs_with_stats(hot, sources, targets, options)[0]


def search_pairs_with_stats(hot: Any, sources: np.ndarray, targets: np.ndarray,
                            options: SearchOptions | None = None) -> tuple[np.ndarray, SearchStats]:
    """``search_pairs`` and what the call did; ``last_stats`` keeps the latest call's for benchmarks.

    Calls take the device one at a time: the cached index and its status buffers serve every call.
    """
    global last_stats
    opts = options or SearchOptions()
    sources = np.asarray(sources, dtype=np.int32)
    targets = np.asarray(targets, dtype=np.int32)
    if sources.size == 0:
        return np.zeros(0, dtype=np.bool_), SearchStats()
    with _device_lock:
        try:
            answers, stats = _search(hot, sources, targets, opts, opts.config or EngineConfig.default())
        except Exception as error:
            if not _out_of_device_memory(error):
                raise
            _cache.clear()
            raise MemoryError(f"the GPU search ran out of device memory: {error}") from error
    last_stats = stats
    return answers, stats


def _out_of_device_memory(error: Exception) -> bool:
    """numba-cuda reports a failed allocation as a CudaAPIError naming CUDA_ERROR_OUT_OF_MEMORY."""
    return type(error).__name__ == "CudaAPIError" and "OUT_OF_MEMORY" in str(error)


def _search(hot: Any, sources: np.ndarray, targets: np.ndarray, opts: SearchOptions,
            cfg: EngineConfig) -> tuple[np.ndarray, SearchStats]:
    began = time.perf_counter()
    index = _device_index(hot)
    wanted = -(-sources.size // 64)
    # Buffers already allocated count as affordable: free memory no longer includes them.
    words = opts.max_words or max(index.capacity,
                                  words_for(sources.size, index.level.size, free_memory(), opts.memory_fraction))
    # A level's work items (edges x word groups) must fit the balanced queue's item counter.
    words = max(1, min(words, wanted, ((1 << ITEM_BITS) - 1) // max(1, index.widest_level_edges)))
    reach, summary = _status_buffers(index, words, cfg)
    per_pass = 64 * words
    passes = -(-sources.size // per_pass)
    spans = np.empty((passes, 2), dtype=np.int64)
    for p in range(passes):
        window = slice(p * per_pass, (p + 1) * per_pass)
        spans[p] = index.level[sources[window]].min(), index.level[targets[window]].max()
    pad = passes * per_pass - sources.size
    d_src = cuda.to_device(np.concatenate([sources, np.zeros(pad, np.int32)]).reshape(passes, per_pass))
    d_tgt = cuda.to_device(np.concatenate([targets, np.zeros(pad, np.int32)]).reshape(passes, per_pass))
    d_spans = cuda.to_device(spans)
    found = cuda.to_device(np.zeros((passes, words), dtype=np.uint64))
    cnt = cuda.to_device(np.zeros((passes, BALANCED + 1, index.levels), dtype=np.int64))
    target_records = cuda.device_array((per_pass, index.rec.shape[1]), dtype=index.rec.dtype)
    cuda.synchronize()
    uploaded = time.perf_counter()
    kernel = _search_kernel(opts.max_registers)
    kernel[cooperative_blocks(kernel, cfg), cfg.block](
        d_spans, sources.size, index.indptr, index.indices, index.rec, index.boxes, index.device_level, hot.label_end,
        reach, summary, index.groups, index.touched, index.queues, index.starts, index.ptr, d_src, d_tgt,
        target_records, found, cnt)
    bits = found.copy_to_host().reshape(-1)
    positions = np.arange(sources.size)
    answers = ((bits[positions // 64] >> (positions % 64).astype(np.uint64)) & ONE).astype(np.bool_)
    return answers, SearchStats(passes=passes, words=words, upload_seconds=uploaded - began,
                                search_seconds=time.perf_counter() - uploaded)
