"""Batched bitmask search on the GPU for the pairs the label filter could not decide.

One pass runs up to 64 x W searches at once: every node carries W status words, bit j of word w
meaning "search 64*w + j has reached this node", a summary with one bit per non-zero word, and a flag
saying that some search reached it. The pass sweeps the DAG's topological levels once, from the
lowest source level up to the highest target level of the searches its seed step leaves open: a
node's bits are all in when its level comes (every parent has a lower level), so each reached node
is expanded once per pass, whatever the number of searches through it. Per level, the frontier
engine's balanced fill walks the level's nodes and turns each non-zero summary word of a reached
node into a *chunk*, whose work items are its status words x the node's out-edges; the balanced
advance then gives every thread an equal share of the level's items, neighbouring threads taking
neighbouring edges of one status word. Per item and per live bit (a search not yet found) the child
gets the CPU search's test (``grail_core.query.classify``, on the same 64-byte node records): prune
on level, topological id, GRAIL intervals and hub bits; answer on the target itself, a DFS-tree
interval or a hub between. A search whose target was found is masked out of every later expansion.
Marking a child takes two atomics whose results nobody waits for and one plain store: no round trip
to memory and no counter shared by the threads.

A pass first copies its searches' target records into one small table, so that its tests read
targets from the L2 cache instead of one random record of the whole graph per test. All passes of a
call run in one persistent launch, so a call costs one launch and one read of the found bits. A
level whose chunks outgrow the chunk arrays ends the launch, and the call starts again with half the
searches a pass (at 64 searches or fewer a pass a node has one summary word, so a level has at most
as many chunks as nodes, which the arrays hold). Device copies of the index are cached per
``HotArrays`` between calls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, njit

from .device import free_memory, is_simulator
from .frontier import (
    BALANCED_BLOCK,
    ITEM_BITS,
    ITEM_MASK,
    MAX_BALANCED_SLOTS,
    EngineConfig,
    balanced_slots,
    cooperative_blocks,
    make_balanced_advance_body,
    make_balanced_fill_body,
    make_map_body,
    make_map_extent_body,
)
from .memory import device_fill, device_full

__all__ = ["SearchOptions", "SearchStats", "chunk_capacity", "search_pairs", "search_pairs_with_stats", "words_for"]

NO, YES, UNDECIDED = 0, 1, 2
ONE = np.uint64(1)
LOW_HALF = np.uint64(0xFFFFFFFF)
NO_LEVEL = np.iinfo(np.int64).max  # a pass's extent before any search is left open
# Record layout of grail_core.query.pack: DAG id, level, fwd (2 words), bwd (2 words), then per dimension
# lo, hi, tree_lo.
_HEADER_WORDS = 6
# A node row (``nodes``): level, topological id (the DAG node id), then lo and hi of every dimension.
_NODE_LEVEL, _NODE_ID, _NODE_BOXES = 0, 1, 2
# A chunk row: node | summary word << 32, the summary word's bits, the node's first out-edge, its out-degree.
_CHUNK_KEY, _CHUNK_BITS, _CHUNK_EDGES, _CHUNK_DEGREE = 0, 1, 2, 3


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


@cuda.jit(device=True, inline=True)
def _mask(rec, v, column):
    return (np.uint64(rec[v, column + 1]) << np.uint64(32)) | np.uint64(rec[v, column])


@cuda.jit(device=True, inline=True)
def classify(rec, nodes, c, targets, j, label_end):
    """Device twin of ``grail_core.query.classify`` (the same tests, so the same answer for every pair):
    YES, NO or UNDECIDED for 'node c reaches the target of search j' (``targets[j]``: a copy of the
    target's record, with its id on the device in the spare word ``label_end``).

    Here the tests return as soon as one fails, cheapest first: a GPU thread pays for the words it
    loads, not for a mispredicted branch. The identity test needs no load, and the topological id,
    level and GRAIL intervals, which reject most children, come from ``nodes[c]`` (one 32-byte
    sector): a small array that stays in the L2 cache, where the 64-byte records of a large graph do not.
    """
    if c == targets[j, label_end]:
        return YES
    if targets[j, 0] < nodes[c, _NODE_ID] or targets[j, 1] <= nodes[c, _NODE_LEVEL]:
        return NO
    for k in range(_HEADER_WORDS, label_end, 3):
        box = _NODE_BOXES + 2 * ((k - _HEADER_WORDS) // 3)
        if targets[j, k] < nodes[c, box] or nodes[c, box + 1] < targets[j, k + 1]:
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
def _mark(reach, summary, touched, c, w, bits):
    """Sets ``bits`` in word w of node c, w in c's summary, and c's flag.

    Atomics whose old value is not read are fire-and-forget on the GPU, and every writer of the flag
    writes the same value: a mark never waits for a round trip to memory.
    """
    cuda.atomic.or_(reach, (c, w), bits)
    cuda.atomic.or_(summary, (c, w // 64), ONE << np.uint64(w % 64))
    touched[c] = 1


@cuda.jit(device=True)
def _seed(j, args):
    """Search j copies its target's record into the pass's table and starts at its source, unless the
    source's own record already answers it. Returns the levels an open search spans (its source's and
    its target's), or an empty span."""
    rec, nodes, position, label_end, targets, src, tgt, offset, found, reach, summary, touched = args
    t = position[tgt[offset + j]]
    for k in range(rec.shape[1]):
        targets[j, k] = rec[t, k]
    targets[j, label_end] = t
    s = position[src[offset + j]]
    w = j // 64
    bit = ONE << np.uint64(j % 64)
    code = classify(rec, nodes, s, targets, j, label_end)
    if code == YES:
        cuda.atomic.or_(found, w, bit)
    elif code == UNDECIDED:
        _mark(reach, summary, touched, s, w, bit)
        return np.int64(nodes[s, _NODE_LEVEL]), np.int64(targets[j, 1])
    return NO_LEVEL, np.int64(-1)


@cuda.jit(device=True, inline=True)
def _task_words(i, first, groups, per_group, summary):
    """Node and summary words [start, stop) of fill task i: the level's nodes each split into ``groups`` tasks."""
    if groups == 1:
        return first + i, 0, summary.shape[1]
    node = np.int64(np.uint32(i) // np.uint32(groups)) if i < (1 << 31) else i // groups
    start = (i - node * groups) * per_group
    return first + node, start, min(summary.shape[1], start + per_group)


@cuda.jit(device=True)
def _measure_words(i, args):
    """Task i of a level's fill: (chunks, work items) of a group of summary words of one of the level's nodes.

    A non-zero summary word of a node with children is a chunk, with one item per status word it marks
    and out-edge. A level of many nodes takes one task per node (neighbouring tasks read neighbouring
    flags); a level of few nodes splits each node's words over several tasks, so that a node that
    thousands of searches reached is spread over many threads.
    """
    first, groups, per_group, touched, summary, _reach, indptr, _chunks, _chunk_start = args
    v, start, stop = _task_words(i, first, groups, per_group, summary)
    if touched[v] == 0:
        return 0, np.int64(0)
    degree = indptr[v + 1] - indptr[v]
    count = 0
    words = 0
    if degree > 0:
        for sw in range(start, stop):
            bits = summary[v, sw]
            if bits:
                count += 1
                words += cuda.popc(bits)
    return count, words * degree


@cuda.jit(device=True)
def _emit_words(i, position, args):
    """Writes the chunks of task i from ``position`` on and zeroes their summary words.

    Every parent of the node sits on a lower level, already expanded, so its words are final. Status
    words stay until the level is expanded, and the node's flag (other tasks of the node read it)
    until the next level's fill; those of a node without children go now.
    """
    first, groups, per_group, touched, summary, reach, indptr, chunks, chunk_start = args
    v, start, stop = _task_words(i, first, groups, per_group, summary)
    if touched[v] == 0:
        return position
    first_edge = indptr[v]
    degree = indptr[v + 1] - first_edge
    for sw in range(start, stop):
        bits = summary[v, sw]
        if bits:
            summary[v, sw] = np.uint64(0)
            if degree == 0:
                _clear_words(reach, v, sw, bits)
                continue
            chunk = position >> ITEM_BITS
            chunks[chunk, _CHUNK_KEY] = np.uint64(v) | (np.uint64(sw) << np.uint64(32))
            chunks[chunk, _CHUNK_BITS] = bits
            chunks[chunk, _CHUNK_EDGES] = first_edge
            chunks[chunk, _CHUNK_DEGREE] = degree
            chunk_start[chunk] = position & ITEM_MASK
            position += (np.int64(1) << ITEM_BITS) + cuda.popc(bits) * degree
    return position


@cuda.jit(device=True, inline=True)
def _clear_words(reach, v, sw, bits):
    while bits:
        low = bits & (~bits + ONE)
        bits ^= low
        reach[v, sw * 64 + cuda.popc(low - ONE)] = np.uint64(0)


@cuda.jit(device=True)
def _clear_chunk(i, args):
    """Zeroes the status words of chunk i of an expanded level."""
    reach, chunks = args
    key = chunks[i, _CHUNK_KEY]
    _clear_words(reach, np.int64(key & LOW_HALF), np.int64(key >> np.uint64(32)), chunks[i, _CHUNK_BITS])


@cuda.jit(device=True)
def _unflag(i, args):
    """Zeroes the flag of the i-th node of an expanded level."""
    touched, first = args
    touched[first + i] = 0


@cuda.jit(device=True, inline=True)
def _select_bit(bits, rank):
    """Position of the set bit of ``bits`` that has ``rank`` set bits below it."""
    position = 0
    width = 32
    while width:
        below = cuda.popc(bits & ((ONE << np.uint64(width)) - ONE))
        if rank >= below:
            rank -= below
            bits >>= np.uint64(width)
            position += width
        width //= 2
    return position


@cuda.jit(device=True)
def _expand(chunk, item, args):
    """One work item: the live searches of one status word of a chunk, pushed over one out-edge.

    Items are word-major (item = rank of the word in the chunk x out-degree + edge), so that
    neighbouring threads take neighbouring edges of one word: one code path, and the word's status,
    found bits and target records read once for the warp.
    """
    chunks, indices, rec, nodes, label_end, targets, found, reach, summary, touched = args
    key = chunks[chunk, _CHUNK_KEY]
    v = np.int64(key & LOW_HALF)
    degree = np.int64(chunks[chunk, _CHUNK_DEGREE])
    if item < (1 << 31) and degree < (1 << 31):  # 32-bit division where it suffices: several times cheaper
        rank = np.int64(np.uint32(item) // np.uint32(degree))
    else:
        rank = item // degree
    w = np.int64(key >> np.uint64(32)) * 64 + _select_bit(chunks[chunk, _CHUNK_BITS], rank)
    live = reach[v, w] & ~found[w]
    if live == 0:
        return
    c = indices[np.int64(chunks[chunk, _CHUNK_EDGES]) + item - rank * degree]
    passed = np.uint64(0)
    while live:
        low = live & (~live + ONE)
        live ^= low
        code = classify(rec, nodes, c, targets, w * 64 + cuda.popc(low - ONE), label_end)
        if code == YES:
            cuda.atomic.or_(found, w, low)
        elif code == UNDECIDED:
            passed |= low
    if passed:
        _mark(reach, summary, touched, c, w, passed)


_seed_all = make_map_extent_body(_seed)
_fill_level = make_balanced_fill_body(_measure_words, _emit_words)
_expand_level = make_balanced_advance_body(_expand)
_clear_level = make_map_body(_clear_chunk)
_unflag_level = make_map_body(_unflag)


def _search_passes(
    extents,
    total,
    indptr,
    indices,
    rec,
    nodes,
    position,
    level_ptr,
    label_end,
    reach,
    summary,
    touched,
    chunks,
    chunk_start,
    src,
    tgt,
    targets,
    found,
    balanced,
    overflow,
):
    """Every pass of a call in one persistent launch: seed, then per level fill the balanced chunks and expand them.

    Nodes are numbered in level order here (``position`` maps a DAG node id to its number), so that a
    level is a range of numbers. The seed step sets ``extents[p]`` to pass p's (lowest source level,
    highest target level) over the searches it leaves open: a search only ever marks nodes below its
    target's level, so the levels from the first up to the last but one hold every node the pass
    reaches. ``balanced[p, l]`` is level l's balanced counter. Chunks alternate between two halves of
    the chunk arrays (``chunks[l % 2]``): a level's status words are zeroed from its chunks, and its
    flags by range, while the next level fills the other half. A level whose chunks outgrow a half sets
    ``overflow[0]`` and ends the launch; the host then starts again with fewer searches a pass.
    """
    grid = cuda.cg.this_grid()
    threads = cuda.gridsize(1)
    per_pass = targets.shape[0]
    per_node = summary.shape[1]
    capacity = chunks.shape[1]
    for p in range(extents.shape[0]):
        pass_found = found[p]
        _seed_all(
            min(per_pass, total - p * per_pass),
            extents[p],
            (rec, nodes, position, label_end, targets, src, tgt, p * per_pass, pass_found, reach, summary, touched),
        )
        grid.sync()
        first = extents[p, 0]
        last = extents[p, 1]
        for lvl in range(first, last + 1):
            half = lvl % 2
            if lvl > first:
                _clear_level(balanced_slots(balanced[p, lvl - 1]), (reach, chunks[1 - half]))
                _unflag_level(level_ptr[lvl] - level_ptr[lvl - 1], (touched, level_ptr[lvl - 1]))
            if lvl == last:
                break
            nodes_here = level_ptr[lvl + 1] - level_ptr[lvl]
            groups = min(per_node, max(1, threads // max(1, nodes_here)))
            _fill_level(
                nodes_here * groups,
                balanced[p],
                lvl,
                capacity,
                overflow,
                (
                    level_ptr[lvl],
                    groups,
                    (per_node + groups - 1) // groups,
                    touched,
                    summary,
                    reach,
                    indptr,
                    chunks[half],
                    chunk_start[half],
                ),
            )
            grid.sync()
            if overflow[0]:
                return
            _expand_level(
                chunk_start[half],
                balanced[p, lvl],
                (chunks[half], indices, rec, nodes, label_end, targets, pass_found, reach, summary, touched),
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


@dataclass
class _DeviceIndex:
    """Device copies of one HotArrays and its levels, the balanced chunks, the target table and status buffers."""

    keep: Any  # the host HotArrays: holding it keeps the ids in the cache key valid
    indptr: Any
    indices: Any
    rec: Any  # the 64-byte node records, as on the CPU
    nodes: Any  # (N, 8 or more) uint32 node rows (also in the records; this array stays in cache)
    position: Any  # DAG node id -> its number on the device (numbers follow the levels)
    level_ptr: Any  # the first number of each level, and N
    levels: int
    widest_level: int  # nodes of the level that has most
    widest_level_edges: int  # out-edges of the level that has most: bounds a level's work items per word
    chunks: tuple[Any, Any] | None = None  # (2, capacity, 4) chunk rows and (2, capacity) item starts
    targets: Any = None  # a pass's copies of its targets' records, grown as passes grow
    capacity: int = 0  # status words per node the flat buffers hold
    reach: Any = None  # flat; a pass views its first n * words elements as (n, words), all zero between passes
    summary: Any = None  # flat; per node one bit per non-zero word of reach
    touched: Any = None  # a byte per node: some search reached it in this pass


_cache: dict[tuple[int, ...], _DeviceIndex] = {}
_device_lock = threading.Lock()  # held by a call for as long as it uses _cache and the device


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
    dims = (label_end - _HEADER_WORDS) // 3
    rows = np.zeros((rec.shape[0], -(-(_NODE_BOXES + 2 * dims) // 8) * 8), dtype=np.uint32)
    rows[:, _NODE_LEVEL] = rec[:, 1]
    rows[:, _NODE_ID] = rec[:, 0]
    for k in range(dims):
        rows[:, _NODE_BOXES + 2 * k : _NODE_BOXES + 2 * k + 2] = rec[
            :, _HEADER_WORDS + 3 * k : _HEADER_WORDS + 3 * k + 2
        ]
    return rows


def chunk_capacity(widest_level: int, words: int, requested: int = 0) -> int:
    """Chunks each half of the chunk arrays holds for passes of ``words`` words: ``requested`` if given,
    else what the widest level could ever need (a chunk for each of its nodes' summary words), at
    most MAX_BALANCED_SLOTS; never fewer than the widest level's nodes, so that passes of at most 64
    words (one summary word a node) always fit."""
    wanted = requested or min(MAX_BALANCED_SLOTS, widest_level * -(-words // 64))
    return max(wanted, widest_level, 1)


def _device_index(hot: Any) -> _DeviceIndex:
    """The device copy of ``hot``, numbered in level order: each level is a range of numbers, so the fill
    reads a level's flags in order, and a level's nodes, records and status rows sit side by side.
    Level order is a topological order, and every test keeps the DAG node ids, so answers do not change."""
    key = (id(hot.rec_dag), id(hot.out_indptr), id(hot.out_indices))
    cached = _cache.get(key)
    if cached is not None and cached.keep is hot:
        return cached
    _cache.clear()
    n = hot.rec_dag.shape[0]
    level = hot.rec_dag[:, 1].astype(np.int64)
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
    entry = _DeviceIndex(
        keep=hot,
        indptr=cuda.to_device(indptr),
        indices=cuda.to_device(indices),
        rec=cuda.to_device(rec),
        nodes=cuda.to_device(_node_rows(rec, hot.label_end)),
        position=cuda.to_device(position),
        level_ptr=cuda.to_device(np.concatenate([[0], np.cumsum(per_level)]).astype(np.int64)),
        levels=levels,
        widest_level=int(per_level.max()),
        widest_level_edges=int(np.bincount(level, weights=np.diff(indptr)[position]).max()) if n else 0,
    )
    _cache[key] = entry
    return entry


def words_for(num_pairs: int, num_nodes: int, free_bytes: int, fraction: float) -> int:
    """Status words per node: enough for the whole batch if memory allows, at least one."""
    wanted = -(-num_pairs // 64)
    affordable = int(fraction * free_bytes * 64 / 65) // max(1, 8 * num_nodes)
    return max(1, min(wanted, affordable))


def _status_buffers(index: _DeviceIndex, words: int, requested_chunks: int, cfg: EngineConfig) -> tuple[Any, Any]:
    """(reach, summary) views for passes of ``words`` words, with the chunks and target table they need;
    the flat buffers only ever grow.

    Views of a flat buffer's first elements stay C-contiguous (no second kernel specialisation) and
    are all zero, since every pass clears what it wrote.
    """
    n = max(index.position.size, 1)
    chunks = chunk_capacity(index.widest_level, words, requested_chunks)
    held = 0 if index.chunks is None else index.chunks[1].shape[1]
    if held < chunks or (requested_chunks and held != chunks):
        index.chunks = None
        index.chunks = (cuda.device_array((2, chunks, 4), np.uint64), cuda.device_array((2, chunks), np.int64))
    if index.targets is None or index.targets.shape[0] < 64 * words:
        index.targets = None
        index.targets = cuda.device_array((64 * words, index.rec.shape[1]), dtype=index.rec.dtype)
    if index.capacity < words:
        index.reach = None  # free the old buffers before allocating larger ones
        index.summary = None
        index.reach = device_full(n * words, np.uint64, 0, cfg)
        index.summary = device_full(n * -(-words // 64), np.uint64, 0, cfg)
        index.touched = device_full(n, np.uint8, 0, cfg)
        index.capacity = words
    summary_words = -(-words // 64)
    return index.reach[: n * words].reshape(n, words), index.summary[: n * summary_words].reshape(n, summary_words)


def _clear_status(index: _DeviceIndex, cfg: EngineConfig) -> None:
    """Zeroes the status buffers after a launch that stopped part way (a level outgrew the chunks)."""
    for flat in (index.reach, index.summary, index.touched):
        device_fill(flat, 0, cfg)


@dataclass
class SearchStats:
    """What one ``search_pairs`` call did: passes of 64 x ``words`` searches, and where the time went."""

    passes: int = 0
    words: int = 0
    restarts: int = 0  # launches started again with half the words after a level outgrew the chunks
    upload_seconds: float = 0.0  # index arrays to the device (first call per index only)
    search_seconds: float = 0.0


last_stats = SearchStats()


def search_pairs(
    hot: Any, sources: np.ndarray, targets: np.ndarray, options: SearchOptions | None = None
) -> np.ndarray:
    """Exact answers (bool per pair) to 'DAG node sources[i] reaches DAG node targets[i]'.

    ``hot`` is a ``grail_core.query.HotArrays`` (its DAG records and children); the pairs may be any
    DAG node ids (the seed step applies the label filter to each pair first, so decided pairs cost
    nothing). Raises MemoryError for a graph or batch the device cannot hold or queue (the caller
    searches on the CPU instead).
    """
    return search_pairs_with_stats(hot, sources, targets, options)[0]


def search_pairs_with_stats(
    hot: Any, sources: np.ndarray, targets: np.ndarray, options: SearchOptions | None = None
) -> tuple[np.ndarray, SearchStats]:
    """``search_pairs`` and what the call did; ``last_stats`` keeps the latest call's for benchmarks.

    Calls take the device one at a time: the cached index and its status buffers serve every call.
    """
    global last_stats
    opts = options or SearchOptions()
    sources = np.ascontiguousarray(sources, dtype=np.int32)
    targets = np.ascontiguousarray(targets, dtype=np.int32)
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


def _search(
    hot: Any, sources: np.ndarray, targets: np.ndarray, opts: SearchOptions, cfg: EngineConfig
) -> tuple[np.ndarray, SearchStats]:
    if cfg.block > BALANCED_BLOCK:
        raise ValueError(f"the GPU search runs blocks of at most {BALANCED_BLOCK} threads, not {cfg.block}")
    began = time.perf_counter()
    index = _device_index(hot)
    wanted = -(-sources.size // 64)
    # Buffers already allocated count as affordable: free memory no longer includes them.
    words = opts.max_words or max(
        index.capacity, words_for(sources.size, index.position.size, free_memory(), opts.memory_fraction)
    )
    # A level's work items (status words x out-edges) must fit the balanced counter's item field.
    words = max(1, min(words, wanted, ITEM_MASK // max(1, index.widest_level_edges)))
    _status_buffers(index, words, opts.chunks, cfg)
    d_src = cuda.to_device(sources)
    d_tgt = cuda.to_device(targets)
    cuda.synchronize()
    uploaded = time.perf_counter()
    kernel = _search_kernel(opts.max_registers)
    restarts = 0
    while True:
        found, overflowed, passes = _launch(kernel, index, hot.label_end, d_src, d_tgt, words, opts.chunks, cfg)
        if not overflowed:
            break
        if words <= 64:
            raise RuntimeError("a level outgrew the GPU search's chunks with one summary word a node")
        _clear_status(index, cfg)
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


def _launch(
    kernel: Any,
    index: _DeviceIndex,
    label_end: int,
    d_src: Any,
    d_tgt: Any,
    words: int,
    requested_chunks: int,
    cfg: EngineConfig,
) -> tuple[np.ndarray, bool, int]:
    """One launch over all passes of ``words`` words: (found bits per pass, whether a level overflowed, passes)."""
    reach, summary = _status_buffers(index, words, requested_chunks, cfg)
    per_pass = 64 * words
    passes = -(-d_src.size // per_pass)
    extents = np.empty((passes, 2), dtype=np.int64)
    extents[:, 0] = NO_LEVEL
    extents[:, 1] = -1
    found = cuda.to_device(np.zeros((passes, words), dtype=np.uint64))
    balanced = cuda.to_device(np.zeros((passes, index.levels), dtype=np.int64))
    overflow = cuda.to_device(np.zeros(1, dtype=np.int32))
    kernel[cooperative_blocks(kernel, cfg), cfg.block](
        cuda.to_device(extents),
        d_src.size,
        index.indptr,
        index.indices,
        index.rec,
        index.nodes,
        index.position,
        index.level_ptr,
        label_end,
        reach,
        summary,
        index.touched,
        *index.chunks,
        d_src,
        d_tgt,
        index.targets[:per_pass],
        found,
        balanced,
        overflow,
    )
    return found.copy_to_host(), bool(overflow.copy_to_host()[0]), passes
