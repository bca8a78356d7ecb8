"""Exact reachability on the index arrays: a label filter per pair, then a pruned DFS for the rest.

Every test here is exact: a pair is answered by the filter only when a necessary condition fails
(topological order, level, hub reach sets, GRAIL intervals) or a sufficient one holds (a hub between
the two, a DFS-tree interval). The search follows the children that the same tests cannot rule out.

``QueryArrays`` is what the index files store and the GPU search reads. The CPU engine reads
``HotArrays``: the same per-node facts packed into one 64-byte record per DAG node, so a test on a
node costs one cache line, not seven (and, on graphs too large for the caches, a 16-byte record per
node for the first test of a pair).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .errors import InvalidParameterError
from .frontier import FOUND, SKIP, search, search_edges
from .records import (
    BWD,
    CACHE_LINE_WORDS,
    COMPACT_COLUMNS,
    COMPACT_HI,
    COMPACT_LO,
    FWD,
    HEADER_WORDS,
    HI,
    ID,
    LABEL_WORDS,
    LEVEL,
    LO,
    NO,
    TREE_LO,
    UNDECIDED,
    YES,
    label_end,
    record_words,
)

__all__ = [
    "QueryArrays",
    "HotArrays",
    "NO",
    "YES",
    "UNDECIDED",
    "pack",
    "filter_pairs",
    "answer_pairs",
    "search_pairs_cpu",
    "answer_pair",
    "pairs_per_chunk",
    "probe_pairs",
    "SearchBuffers",
    "frozen",
]


class QueryArrays(NamedTuple):
    """The arrays a query needs, one per fact; DAG node ids are a topological order."""

    comp: np.ndarray  # node id -> DAG node id
    out_indptr: np.ndarray  # DAG children, CSR (no virtual root)
    out_indices: np.ndarray
    level: np.ndarray  # longest path from a root; u->v implies level[u] < level[v]
    lo: np.ndarray  # (N, dims) min post-order below the node
    hi: np.ndarray  # (N, dims) post-order rank
    tree_lo: np.ndarray  # (N, dims) start of the DFS-tree interval [tree_lo, hi]
    fwd: np.ndarray  # uint64: bit i = hub i reaches the node
    bwd: np.ndarray  # uint64: bit i = the node reaches hub i


class HotArrays(NamedTuple):
    """The CPU engine's view: one 64-byte-aligned record of uint32 words per node and per DAG node.

    A DAG record holds the DAG node id (a topological rank), the level, the hub masks ``fwd`` and
    ``bwd`` (two words each), then lo, hi and tree_lo of every dimension (``grail_core.records``
    defines the layout). While the records fit in
    the caches, a node's record is its DAG node's record, and a pair's first test reads two lines.
    Beyond that (``compact``), a node's record is four words, the DAG node id, level, lo and hi of
    the first dimension, so that the first test of a random pair stays in cache; only pairs that
    pass it read the DAG records, which the batch loops fetch ahead of use.
    """

    rec_node: np.ndarray  # (n, words) or (n, 4) when compact, indexed by node id
    rec_dag: np.ndarray  # (N, words) indexed by DAG node id
    out_indptr: np.ndarray
    out_indices: np.ndarray
    label_end: int  # one past the last label word (the rest of a row is padding)
    compact: bool


# Beyond this size of full records the node records are compact and the DAG records prefetched.
COMPACT_ABOVE_BYTES = 8 << 20
# Pairs are handed to threads in chunks of this size as they free up: searches vary in length, and a
# thread that the OS pauses must not hold back the whole batch as a static split would.
PAIRS_PER_CHUNK = 2048
# Below this many pairs one thread answers faster than waking the others.
SERIAL_BATCH = 1024
PROBE_GROUP = 4  # pairs a probe searches before it decides whether the rest fit its budget


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only, contiguous view: fresh and memory-mapped arrays then share one compiled kernel."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view


def _aligned_rows(rows: int, words: int) -> np.ndarray:
    """Rows starting on cache lines; not cleared (the packing kernels write every word)."""
    buffer = np.empty(rows * words + CACHE_LINE_WORDS, dtype=np.uint32)
    offset = (-buffer.ctypes.data % 64) // 4
    return buffer[offset : offset + rows * words].reshape(rows, words)


@njit(nogil=True, parallel=True, cache=True)
def _dag_records(level, fwd, bwd, lo, hi, tree_lo, rec):
    low = np.uint64(0xFFFFFFFF)
    for v in prange(rec.shape[0]):
        for w in range(rec.shape[1]):
            rec[v, w] = 0
        rec[v, ID] = v
        rec[v, LEVEL] = level[v]
        rec[v, FWD] = fwd[v] & low
        rec[v, FWD + 1] = fwd[v] >> np.uint64(32)
        rec[v, BWD] = bwd[v] & low
        rec[v, BWD + 1] = bwd[v] >> np.uint64(32)
        for k in range(lo.shape[1]):
            base = HEADER_WORDS + LABEL_WORDS * k
            rec[v, base + LO] = lo[v, k]
            rec[v, base + HI] = hi[v, k]
            rec[v, base + TREE_LO] = tree_lo[v, k]


@njit(nogil=True, parallel=True, cache=True)
def _node_records(rec_dag, comp, columns, rec_node):
    for v in prange(comp.size):
        row = comp[v]
        for j in range(columns.size):
            rec_node[v, j] = rec_dag[row, columns[j]]


def pack(arrays: QueryArrays, compact: bool | None = None) -> HotArrays:
    """Records for the CPU engine (post-orders must fit 32 bits); ``compact`` None decides by size."""
    n_dag, dims = arrays.hi.shape
    if n_dag >= 2**31:
        raise InvalidParameterError("the CPU query engine handles up to 2**31 - 1 DAG nodes")
    words = record_words(dims)
    rec_dag = _aligned_rows(n_dag, words)
    level, fwd, bwd, lo, hi, tree_lo = (
        frozen(a) for a in (arrays.level, arrays.fwd, arrays.bwd, arrays.lo, arrays.hi, arrays.tree_lo)
    )
    _dag_records(level, fwd, bwd, lo, hi, tree_lo, rec_dag)
    if compact is None:
        compact = (arrays.comp.size + n_dag) * words * 4 > COMPACT_ABOVE_BYTES
    columns = np.array(COMPACT_COLUMNS) if compact else np.arange(words)
    rec_node = _aligned_rows(arrays.comp.size, columns.size)
    _node_records(rec_dag, frozen(arrays.comp), columns, rec_node)
    return HotArrays(rec_node, rec_dag, frozen(arrays.out_indptr), frozen(arrays.out_indices), label_end(dims), compact)


@njit(inline="always", nogil=True)
def _mask(rec, v, column):
    return (np.uint64(rec[v, column + 1]) << np.uint64(32)) | np.uint64(rec[v, column])


@njit(inline="always", nogil=True)
def _word(rec, v, column):
    return np.int64(rec[v, column])


@njit(inline="always", nogil=True)
def classify(ra, s, rb, t, label_end):
    """YES, NO or UNDECIDED for 'the DAG node of record ra[s] reaches that of rb[t]', labels alone.

    Each necessary condition is a difference that is negative when it fails, and the differences are
    OR-ed into one sign bit: on random pairs each condition is a coin toss, and a chain of branches
    (or of boolean ands, which compile to them) would mispredict more than it saves.
    """
    cs = _word(ra, s, ID)
    ct = _word(rb, t, ID)
    if cs == ct:
        return YES
    failed = (ct - cs - 1) | (_word(rb, t, LEVEL) - _word(ra, s, LEVEL) - 1)
    below = np.int64(0)
    for k in range(HEADER_WORDS, label_end, LABEL_WORDS):
        failed |= (_word(rb, t, k + LO) - _word(ra, s, k + LO)) | (_word(ra, s, k + HI) - _word(rb, t, k + HI))
        below |= _word(ra, s, k + TREE_LO) - _word(rb, t, k + HI) - 1
    if failed < 0:
        return NO
    fs = _mask(ra, s, FWD)
    ft = _mask(rb, t, FWD)
    bs = _mask(ra, s, BWD)
    if (fs & ~ft) | (_mask(rb, t, BWD) & ~bs):
        return NO
    return YES if below < 0 or bs & ft else UNDECIDED


@intrinsic
def _prefetch_row(typingctx, array, row):
    """Hint the CPU to fetch ``array[row, 0]``'s cache line (LLVM's prefetch: read, keep, data)."""

    def codegen(context, builder, signature, args):
        array_type, row_type = signature.args
        view = context.make_array(array_type)(context, builder, args[0])
        index = [context.cast(builder, args[1], row_type, types.intp), context.get_constant(types.intp, 0)]
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, index, wraparound=False)
        byte_pointer = ir.IntType(8).as_pointer()
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer] + [ir.IntType(32)] * 3)
        prefetch = cgutils.get_or_insert_function(builder.module, function_type, "llvm.prefetch.p0")
        flags = [ir.Constant(ir.IntType(32), value) for value in (0, 3, 1)]
        builder.call(prefetch, [builder.bitcast(pointer, byte_pointer), *flags])
        return context.get_dummy_value()

    return types.void(array, row), codegen


# How many pairs ahead the batch loops ask for records: far enough to hide a memory access, near
# enough that the lines are still cached when their pair comes. Node records are asked for twice as
# far ahead, since the DAG records' addresses are read from them.
_AHEAD = 8


@njit(inline="always", nogil=True)
def _node_verdict(a, u, v):
    """YES, NO or UNDECIDED from compact node records alone (conditions as in ``classify``)."""
    cs = _word(a, u, ID)
    ct = _word(a, v, ID)
    if cs == ct:
        return YES
    failed = (ct - cs - 1) | (_word(a, v, LEVEL) - _word(a, u, LEVEL) - 1)
    failed |= (_word(a, v, COMPACT_LO) - _word(a, u, COMPACT_LO)) | (_word(a, u, COMPACT_HI) - _word(a, v, COMPACT_HI))
    return NO if failed < 0 else UNDECIDED


@njit(inline="always", nogil=True)
def _prefetch_pairs(rec_node, rec_dag, pairs, i):
    far = i + 2 * _AHEAD
    if far < pairs.shape[0]:
        _prefetch_row(rec_node, pairs[far, 0])
        _prefetch_row(rec_node, pairs[far, 1])
    near = i + _AHEAD
    # Only pairs the node records leave open will read DAG records: fetch nothing for the others.
    if near < pairs.shape[0] and _node_verdict(rec_node, pairs[near, 0], pairs[near, 1]) == UNDECIDED:
        _prefetch_row(rec_dag, rec_node[pairs[near, 0], ID])
        _prefetch_row(rec_dag, rec_node[pairs[near, 1], ID])


@njit(inline="always", nogil=True)
def classify_nodes(h, u, v):
    """``classify`` for two node ids: compact node records first, the DAG records if still open."""
    if not h.compact:
        return classify(h.rec_node, u, h.rec_node, v, h.label_end)
    verdict = _node_verdict(h.rec_node, u, v)
    if verdict != UNDECIDED:
        return verdict
    return classify(h.rec_dag, h.rec_node[u, ID], h.rec_dag, h.rec_node[v, ID], h.label_end)


# Depth first, not on the breadth-first ``frontier.search``: most pairs of a batch end at a witness down one
# branch, found before a whole level would be held.
@njit(nogil=True, inline="always")
def _pruned_dfs(h, s, t, stamp, mark, stack):
    stamp[s] = mark
    stack[0] = s
    top = 1
    while top > 0:
        top -= 1
        x = stack[top]
        for e in range(h.out_indptr[x], h.out_indptr[x + 1]):
            w = h.out_indices[e]
            if stamp[w] == mark:
                continue
            stamp[w] = mark
            code = classify(h.rec_dag, w, h.rec_dag, t, h.label_end)
            if code == YES:
                return True
            if code == UNDECIDED:
                stack[top] = w
                top += 1
    return False


@njit(nogil=True, parallel=True, cache=True)
def _filter(h, pairs, codes):
    for i in prange(pairs.shape[0]):
        codes[i] = classify_nodes(h, pairs[i, 0], pairs[i, 1])


def filter_pairs(hot: HotArrays, pairs: np.ndarray) -> np.ndarray:
    """Codes (NO, YES, UNDECIDED) for an (M, 2) array of node ids, all pairs in parallel."""
    codes = np.empty(pairs.shape[0], dtype=np.int8)
    with numba.parallel_chunksize(PAIRS_PER_CHUNK):
        _filter(hot, frozen(pairs), codes)
    return codes


# Two loops, not one with a flag: a prefetch that may run keeps the compiler from optimizing the
# loop, and costs small graphs (whose records are cached anyway) a good part of their time per pair.
@njit(nogil=True, parallel=True, cache=True)
def _answer_cached(h, pairs, answers, stamps, stacks):
    searched = 0
    positives = 0
    for i in prange(pairs.shape[0]):
        u = pairs[i, 0]
        v = pairs[i, 1]
        code = classify_nodes(h, u, v)
        if code == UNDECIDED:
            thread = numba.get_thread_id()
            found = _pruned_dfs(
                h, h.rec_node[u, ID], h.rec_node[v, ID], stamps[thread], np.int32(i + 1), stacks[thread]
            )
            searched += 1
        else:
            found = code == YES
        answers[i] = found
        positives += found
    return searched, positives


@njit(nogil=True, parallel=True, cache=True)
def _answer_prefetched(h, pairs, answers, stamps, stacks):
    searched = 0
    positives = 0
    for i in prange(pairs.shape[0]):
        _prefetch_pairs(h.rec_node, h.rec_dag, pairs, i)
        u = pairs[i, 0]
        v = pairs[i, 1]
        code = classify_nodes(h, u, v)
        if code == UNDECIDED:
            thread = numba.get_thread_id()
            found = _pruned_dfs(
                h, h.rec_node[u, ID], h.rec_node[v, ID], stamps[thread], np.int32(i + 1), stacks[thread]
            )
            searched += 1
        else:
            found = code == YES
        answers[i] = found
        positives += found
    return searched, positives


@njit(nogil=True, cache=True)
def _answer_serial(h, pairs, answers, stamp, stack, first_mark):
    """``_answer_prefetched`` on the calling thread, pair i searched with mark ``first_mark + i`` of one
    stamp array: a small batch neither wakes the threads nor allocates stamps for them."""
    searched = 0
    positives = 0
    for i in range(pairs.shape[0]):
        if h.compact:
            _prefetch_pairs(h.rec_node, h.rec_dag, pairs, i)
        found, was_searched = _answer_one(h, pairs[i, 0], pairs[i, 1], stamp, stack, np.int32(first_mark + i))
        answers[i] = found
        searched += was_searched
        positives += found
    return searched, positives


@njit(nogil=True, inline="always")
def _search_one(h, s, t, stamp, mark, stack):
    """'DAG node s reaches DAG node t': the labels of the pair first, then a pruned DFS if still open."""
    code = classify(h.rec_dag, s, h.rec_dag, t, h.label_end)
    if code != UNDECIDED:
        return code == YES
    return _pruned_dfs(h, s, t, stamp, mark, stack)


@njit(nogil=True, parallel=True, cache=True)
def _search(h, sources, targets, answers, stamps, stacks):
    for i in prange(sources.size):
        thread = numba.get_thread_id()
        answers[i] = _search_one(h, sources[i], targets[i], stamps[thread], np.int32(i + 1), stacks[thread])


def pairs_per_chunk(count: int, threads: int) -> int:
    """Pairs numba hands a thread at a time: PAIRS_PER_CHUNK, or fewer (16 at least), so that a smaller
    batch still gives each thread about four chunks: a few costly pairs must not all land on one thread."""
    return max(16, min(PAIRS_PER_CHUNK, count // (4 * threads)))


def _with_thread_buffers(hot: HotArrays, count: int, run) -> None:
    """Run ``run(stamps, stacks)`` with one visit-stamp array and one stack per thread.

    The stamp is the pair number, so nothing is cleared between pairs. numba's thread count is
    thread-local: a small batch pays only for the buffers it uses.
    """
    available = numba.get_num_threads()
    threads = 1 if count < SERIAL_BATCH else available
    n = hot.rec_dag.shape[0]
    stamps = np.zeros((threads, n), dtype=np.int32)
    stacks = np.empty((threads, n), dtype=np.int32)
    numba.set_num_threads(threads)
    try:
        with numba.parallel_chunksize(pairs_per_chunk(count, threads)):
            run(stamps, stacks)
    finally:
        numba.set_num_threads(available)


def answer_pairs(hot: HotArrays, pairs: np.ndarray, buffers: SearchBuffers) -> tuple[np.ndarray, int, int]:
    """Filter and search in one pass over an (M, 2) array of node ids: in parallel, or below SERIAL_BATCH
    pairs on the calling thread with stamps from ``buffers``.

    Returns the answers, how many pairs needed a search, and how many are positive.
    """
    answers = np.empty(pairs.shape[0], dtype=np.bool_)
    pairs = frozen(pairs)
    if pairs.shape[0] < SERIAL_BATCH:
        with buffers.take(marks=max(1, pairs.shape[0])) as (stamp, stack, mark):
            searched, positives = _answer_serial(hot, pairs, answers, stamp, stack, mark)
        return answers, int(searched), int(positives)
    counts = [0, 0]
    kernel = _answer_prefetched if hot.compact else _answer_cached

    def run(stamps: np.ndarray, stacks: np.ndarray) -> None:
        counts[:] = kernel(hot, pairs, answers, stamps, stacks)

    _with_thread_buffers(hot, pairs.shape[0], run)
    return answers, counts[0], counts[1]


def search_pairs_cpu(hot: HotArrays, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Exact answers for pairs of DAG node ids (the pair's labels, then a pruned DFS for the pairs they
    leave open), pairs spread over all cores."""
    answers = np.zeros(sources.size, dtype=np.bool_)
    if sources.size:
        _with_thread_buffers(
            hot, sources.size, lambda stamps, stacks: _search(hot, sources, targets, answers, stamps, stacks)
        )
    return answers


@njit(nogil=True, cache=True)
def _answer_one(h, u, v, stamp, stack, mark):
    code = classify_nodes(h, u, v)
    if code != UNDECIDED:
        return code == YES, False
    return _pruned_dfs(h, h.rec_node[u, ID], h.rec_node[v, ID], stamp, mark, stack), True


class SearchBuffers:
    """Visit stamps and stacks for searches, reused across calls and threads: one of each for a thread's
    searches (``take``), or a row of each per thread of a parallel pass (``take_rows``); and small tables
    that searches keep their own generations in (``take_tables``).

    A stamp array is cleared only when its marks run out, so a single query costs what its search
    visits, not a pass over every node.
    """

    def __init__(self, num_dag_nodes: int) -> None:
        self._size = num_dag_nodes
        self._free: list[list] = []
        self._blocks: list[list] = []
        self._tables: list[np.ndarray] = []

    @contextmanager
    def take(self, marks: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray, np.int32]]:
        """A stamp array, a stack and the first of ``marks`` fresh marks (one per search)."""
        try:
            buffers = self._free.pop()
        except IndexError:
            buffers = [np.zeros(self._size, dtype=np.int32), np.empty(self._size, dtype=np.int32), 0]
        try:
            yield self._marked(buffers, marks)
        finally:
            self._free.append(buffers)

    @contextmanager
    def take_rows(self, rows: int, marks: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray, np.int32]]:
        """``take`` for ``rows`` threads at once: (rows, size) stamps and stacks, a row per thread, and the
        first of ``marks`` fresh marks that all rows share (a search takes its own, on its thread's row)."""
        try:
            block = self._blocks.pop()
        except IndexError:
            block = None
        if block is None or block[0].shape[0] < rows:
            block = [np.zeros((rows, self._size), dtype=np.int32), np.empty((rows, self._size), dtype=np.int32), 0]
        stamps, stacks, first = self._marked(block, marks)
        try:
            yield stamps[:rows], stacks[:rows], first
        finally:
            self._blocks.append(block)

    @contextmanager
    def take_tables(self, rows: int, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
        """``rows`` int64 tables of ``shape``, one per thread, zeroed when made and then handed on as the last
        call left them: their users keep generations in them, so they are never cleared."""
        try:
            block = self._tables.pop()
        except IndexError:
            block = None
        if block is None or block.shape[0] < rows or block.shape[1:] != shape:
            block = np.zeros((rows, *shape), dtype=np.int64)
        try:
            yield block[:rows]
        finally:
            self._tables.append(block)

    @staticmethod
    def _marked(buffers: list, marks: int) -> tuple[np.ndarray, np.ndarray, np.int32]:
        """The buffers and the first of ``marks`` marks above every stamp they hold (cleared where the
        marks run out)."""
        if buffers[2] > np.iinfo(np.int32).max - marks:
            buffers[0][...] = 0
            buffers[2] = 0
        buffers[2] += marks
        return buffers[0], buffers[1], np.int32(buffers[2] - marks + 1)


def answer_pair(hot: HotArrays, buffers: SearchBuffers, source: int, target: int) -> tuple[bool, bool]:
    """(reachable, needed a search) for one pair of node ids, on the calling thread."""
    with buffers.take() as (stamp, stack, mark):
        answer, searched = _answer_one(hot, source, target, stamp, stack, mark)
    return bool(answer), bool(searched)


class _Hops(NamedTuple):
    """A hop-by-hop search's own state: its target, visit stamp and mark, and ``tested[0]``, the children
    tested so far."""

    target: int
    stamp: np.ndarray
    mark: int
    tested: np.ndarray


@njit(nogil=True, inline="always")
def _hop_child(x, w, e, h, k, _):
    """Child w of DAG node x: queued while the labels leave 'w reaches the target' open."""
    k.tested[0] += 1
    if k.stamp[w] == k.mark:
        return SKIP
    k.stamp[w] = k.mark
    code = classify(h.rec_dag, w, h.rec_dag, k.target, h.label_end)
    if code == YES:
        return FOUND
    return w if code == UNDECIDED else SKIP


@njit(nogil=True, inline="always")
def _hop_children(x, h, k, _, queue, tail):
    return search_edges(x, h.out_indptr, h.out_indices, _hop_child, h, k, None, queue, tail)


@njit(nogil=True, cache=True)
def _hop_search(h, s, t, stamp, queue, mark):
    """(reached, hops, edges) of a hop-by-hop search from DAG node s for DAG node t, pruned by the same
    tests as every search: what the GPU search does for one pair (``edges``: the children it tested)."""
    code = classify(h.rec_dag, s, h.rec_dag, t, h.label_end)
    if code != UNDECIDED:
        return code == YES, 0, 0
    stamp[s] = mark
    queue[0] = s
    state = _Hops(t, stamp, mark, np.zeros(1, dtype=np.int64))
    _, found, hops = search(_hop_children, h, state, None, queue, 1)
    return found, hops, state.tested[0]


@njit(nogil=True, cache=True)
def _dfs_sample(h, sources, targets, answers, stamp, stack, first_mark):
    for i in range(sources.size):
        answers[i] = _search_one(h, sources[i], targets[i], stamp, first_mark + i, stack)


@njit(nogil=True, cache=True)
def _hop_sample(h, sources, targets, hops, edges, stamp, queue, first_mark):
    for i in range(sources.size):
        _, hops[i], edges[i] = _hop_search(h, sources[i], targets[i], stamp, queue, first_mark + i)


def probe_pairs(
    hot: HotArrays, buffers: SearchBuffers, sources: np.ndarray, targets: np.ndarray, budget: float = float("inf")
) -> tuple[int, float, np.ndarray, np.ndarray]:
    """A look at a few pairs of DAG node ids, on the calling thread: the CPU search of each, and a
    hop-by-hop search of each (what the GPU search does). The first ``PROBE_GROUP`` pairs always; the
    others if the first group says they fit in ``budget`` seconds. Returns how many pairs were looked at,
    the CPU search's seconds for them, and per pair the hops and the children tested hop by hop."""
    answers = np.zeros(sources.size, dtype=np.bool_)
    hops = np.zeros(sources.size, dtype=np.int64)
    edges = np.zeros(sources.size, dtype=np.int64)
    seconds = 0.0
    done = 0
    with buffers.take(2 * sources.size) as (stamp, stack, mark):
        began = time.perf_counter()
        for group in (slice(0, min(sources.size, PROBE_GROUP)), slice(PROBE_GROUP, sources.size)):
            if group.start >= sources.size:
                break
            if done and (time.perf_counter() - began) * (group.stop - group.start) / done > budget:
                break
            start = time.perf_counter()
            _dfs_sample(hot, sources[group], targets[group], answers[group], stamp, stack, mark + group.start)
            seconds += time.perf_counter() - start
            first = mark + sources.size + group.start
            _hop_sample(hot, sources[group], targets[group], hops[group], edges[group], stamp, stack, first)
            done = group.stop
    return done, seconds, hops[:done], edges[:done]
