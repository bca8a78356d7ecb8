"""The bitmask search on a version's updated graph: the pairs that edge updates touch, on the GPU.

A version with updates pending searches its undecided pairs over *keys* (``grail_core.touched``: a DAG node
whose component stands whole, or a single node), whose out-edges and per-key test inputs the version writes
out once (``TouchedGraph``). Its device copy (``TouchedArrays``) lives as long as the version's host graph.
Up to 64 x W searches run at once, hop by hop: every key carries W words of 'search 64 w + j reached it'
(``seen``), the bits new at a hop (``fresh``, one half per hop parity) and a queue of (key, word) entries,
each pushed once a hop by the thread whose atomic first set its fresh bits. An entry pushes its live bits
(searches not yet found) over the key's out-edges; each child key gets the CPU walk's test
(``grail_core.pending.verdict``: the labels' ``classify`` on the device copy of the index, the routes through
added edges, the removal masks): NO leaves it out, YES marks the search found, anything else moves the bit
on. The labels' levels and ids hold only on the labels' graph, so no level sweep here: hops only.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from grail_core.records import NO, UNDECIDED, YES

from ..frontier import EngineConfig, make_edge_map
from ..memory import device_fill
from .ops import IndexArrays, classify

__all__ = ["TouchedArrays", "TouchedCopies", "TouchedSearchArrays", "TouchedStatus", "TouchedStats", "run_touched"]

ONE = np.uint64(1)
# Status arrays per key and status word: seen, two halves of fresh bits, two halves of the queue.
_STATUS_WORDS_PER_KEY = 5


class TouchedArrays(NamedTuple):
    """The device copy of a ``grail_core.touched.TouchedGraph`` (the same fields)."""

    indptr: Any  # int64
    indices: Any  # int32
    key_dag: Any  # int32
    key_broken: Any  # uint8
    key_floor: Any  # int32
    rm_up: Any  # uint64
    up_no: Any
    bwd_yes: Any
    up_yes: Any
    root_up: Any
    closure_no: Any
    closure_yes: Any
    has_added: int
    plain: int


class TouchedSearchArrays(NamedTuple):
    """A call's searches (``grail_core.touched.TouchedSearches``) on the device, the pass's target records
    (for ``ops.classify``) and its found bits."""

    sources: Any  # int32 keys
    targets: Any
    target_dags: Any  # int32
    rm_down: Any  # uint64
    down_no: Any
    fwd_yes: Any
    down_yes: Any
    root_down: Any
    records: Any  # (64 W, record words) uint32: the pass's target records
    offset: int  # the pass's first search
    found: Any  # (W,) uint64


class TouchedStatus(NamedTuple):
    seen: Any  # (keys, W) uint64
    fresh: Any  # (2, keys, W) uint64: bits new at a hop, by its parity
    queue: Any  # (2, keys x W) int64: key x W + word, by parity
    counters: Any  # (2,) int64: entries queued, by parity
    parity: int  # the half a hop reads


@cuda.jit(device=True, inline=True)
def _through(closure, up, down):
    """Whether some group of ``up`` leads, by ``closure``, to some group of ``down`` (``pending._through``)."""
    if down == 0:
        return False
    while up != 0:
        low = up & (~up + ONE)
        if closure[cuda.popc(low - ONE)] & down:
            return True
        up ^= low
    return False


@cuda.jit(device=True)
def test_key(graph, index, searches, x, j):
    """``pending.verdict`` of 'key x reaches the target of search j of the pass' on the updated graph:
    YES, NO or UNDECIDED (then the search goes on through x)."""
    pair = searches.offset + j
    if x == searches.targets[pair]:
        return YES
    cs = graph.key_dag[x]
    ct = searches.target_dags[pair]
    if graph.plain:
        if cs >= 0 and ct >= 0:
            return classify(index, index.position[cs], searches.records, j)
        return NO
    if cs >= 0 and cs == ct:
        if graph.key_broken[x] == 0 or (graph.rm_up[x] & searches.rm_down[pair]) == 0:
            return YES
        if graph.root_up[x] & searches.root_down[pair]:
            return YES
        return UNDECIDED
    if cs > ct and ct >= 0 and ct < graph.key_floor[x]:
        return NO
    base = NO
    if cs >= 0 and ct >= 0:
        if graph.bwd_yes[x] & searches.fwd_yes[pair]:
            return YES
        relevant = (graph.rm_up[x] & searches.rm_down[pair]) != 0
        base = classify(index, index.position[cs], searches.records, j)
        if base == YES and not relevant:
            return YES
    route = graph.has_added != 0 and _through(graph.closure_no, graph.up_no[x], searches.down_no[pair])
    if base == NO and not route:
        return NO
    if route and cs >= 0 and ct >= 0 and _through(graph.closure_yes, graph.up_yes[x], searches.down_yes[pair]):
        return YES
    if graph.root_up[x] & searches.root_down[pair]:
        return YES
    return UNDECIDED


@cuda.jit(device=True, inline=True)
def _enqueue(status, half, x, w, bits):
    """Adds ``bits`` to key x's fresh word w for the hop of ``half``; the first writer queues (x, w)."""
    if cuda.atomic.or_(status.fresh, (half, x, w), bits) == 0:
        slot = cuda.atomic.add(status.counters, half, 1)
        status.queue[half, slot] = np.int64(x) * status.seen.shape[1] + w


@cuda.jit(device=True)
def _seed(j, args):
    """Search j of the pass copies its target's record into the pass's table (a target that updates added
    has none: its tests need none) and starts at its source's key."""
    _graph, index, searches, status = args
    pair = searches.offset + j
    ct = searches.target_dags[pair]
    if ct >= 0:
        t = index.position[ct]
        for k in range(index.rec.shape[1]):
            searches.records[j, k] = index.rec[t, k]
        searches.records[j, index.label_end] = t
    w = j // 64
    bit = ONE << np.uint64(j % 64)
    s = searches.sources[pair]
    if s == searches.targets[pair]:
        cuda.atomic.or_(searches.found, w, bit)
        return
    cuda.atomic.or_(status.seen, (s, w), bit)
    _enqueue(status, 0, s, w, bit)


@cuda.jit(device=True)
def _expand(e, args):
    """Entry e of the hop: the live bits of one key's word pushed over the key's out-edges."""
    graph, index, searches, status = args
    words = status.seen.shape[1]
    packed = status.queue[status.parity, e]
    x = packed // words
    w = packed - x * words
    bits = status.fresh[status.parity, x, w]
    status.fresh[status.parity, x, w] = np.uint64(0)
    live = bits & ~searches.found[w]
    if live == 0:
        return
    following = 1 - status.parity
    for f in range(graph.indptr[x], graph.indptr[x + 1]):
        y = graph.indices[f]
        passed = np.uint64(0)
        rest = live
        while rest:
            low = rest & (~rest + ONE)
            rest ^= low
            code = test_key(graph, index, searches, y, w * 64 + cuda.popc(low - ONE))
            if code == YES:
                cuda.atomic.or_(searches.found, w, low)
            elif code != NO:
                passed |= low
        if passed:
            new = passed & ~cuda.atomic.or_(status.seen, (y, w), passed)
            if new:
                _enqueue(status, following, y, w, new)


_seed_kernel = make_edge_map(_seed)
_expand_kernel = make_edge_map(_expand)


@dataclass
class TouchedStats:
    passes: int = 0
    words: int = 0
    hops: int = 0  # over all passes
    longest: int = 0  # the most hops of one pass
    upload_seconds: float = 0.0  # the version's graph to the device (its first call only)
    search_seconds: float = 0.0


def _upload(graph: Any) -> TouchedArrays:
    def put(array: np.ndarray) -> Any:
        return cuda.to_device(np.ascontiguousarray(array))

    return TouchedArrays(
        put(graph.indptr),
        put(graph.indices),
        put(graph.key_dag),
        put(graph.key_broken),
        put(graph.key_floor),
        put(graph.rm_up),
        put(graph.up_no),
        put(graph.bwd_yes),
        put(graph.up_yes),
        put(graph.root_up),
        put(graph.closure_no),
        put(graph.closure_yes),
        int(graph.has_added),
        int(graph.plain),
    )


@dataclass
class _Buffers:
    """A call's status arrays (``TouchedStatus``), target records and found bits: for up to ``keys`` keys and
    passes of ``words`` words. All zero between passes but ``records`` and ``found`` (each pass sets them)."""

    keys: int
    words: int
    records: Any
    found: Any
    seen: Any
    fresh: Any
    queue: Any
    counters: Any


class TouchedCopies:
    """The device copy of the latest version's graph an engine searched (one: versions follow each other),
    dropped when that version's host graph is collected or another version's comes; and the calls' buffers,
    kept from call to call while they fit."""

    def __init__(self) -> None:
        self._graph: weakref.ref[Any] | None = None
        self._arrays: TouchedArrays | None = None
        self._buffers: _Buffers | None = None

    def arrays(self, graph: Any) -> tuple[TouchedArrays, float]:
        """The device copy of ``graph`` (uploaded now if absent) and the seconds the upload took."""
        if self._graph is not None and self._graph() is graph and self._arrays is not None:
            return self._arrays, 0.0
        self.drop()
        began = time.perf_counter()
        self._arrays = _upload(graph)
        self._graph = weakref.ref(graph, lambda _: self.drop())
        return self._arrays, time.perf_counter() - began

    def buffers(self, keys: int, words: int, record_words: int, cfg: EngineConfig) -> _Buffers:
        """Buffers for ``keys`` keys and passes of ``words`` words (or of up to twice as many, held already)."""
        held = self._buffers
        if held is not None and held.keys >= keys and words <= held.words <= 2 * words:
            return held
        self._buffers = None  # the old ones go before the new ones are allocated
        keys = max(keys, 1)
        seen = cuda.device_array((keys, words), dtype=np.uint64)
        fresh = cuda.device_array((2, keys, words), dtype=np.uint64)
        device_fill(seen, 0, cfg)
        device_fill(fresh, 0, cfg)
        self._buffers = _Buffers(
            keys,
            words,
            cuda.device_array((64 * words, record_words), dtype=np.uint32),
            cuda.device_array(words, dtype=np.uint64),
            seen,
            fresh,
            cuda.device_array((2, keys * words), dtype=np.int64),
            cuda.to_device(np.zeros(2, dtype=np.int64)),
        )
        return self._buffers

    def drop(self, buffers: bool = False) -> None:
        """Forgets the graph's copy (and the buffers, with ``buffers``: after a call that stopped part way)."""
        self._graph = None
        self._arrays = None
        if buffers:
            self._buffers = None


def _launch(compiled: Any, count: int, args: tuple[Any, ...], cfg: EngineConfig) -> None:
    blocks = max(1, min(cfg.grid(), -(-count // cfg.block)))
    compiled[blocks, cfg.block](count, args)


def run_touched(
    graph: TouchedArrays, index: IndexArrays, searches: Any, words: int, copies: TouchedCopies, cfg: EngineConfig
) -> tuple[np.ndarray, TouchedStats]:
    """Answers of ``searches`` (a ``grail_core.touched.TouchedSearches``) on the device copy ``graph``, in
    passes of 64 x ``words`` searches (or a few more, as ``copies`` holds buffers), on the current device
    (the caller holds it)."""
    began = time.perf_counter()
    count = int(searches.sources.size)
    words = max(1, min(words, -(-count // 64)))
    held = copies.buffers(int(graph.key_dag.size), words, index.rec.shape[1], cfg)
    words = held.words
    device = [cuda.to_device(np.ascontiguousarray(array)) for array in searches]
    zeros = np.zeros(2, dtype=np.int64)
    answers = np.zeros(count, dtype=np.bool_)
    stats = TouchedStats(words=words)
    counters = held.counters
    for offset in range(0, count, 64 * words):
        size = min(64 * words, count - offset)
        device_fill(held.found, 0, cfg)
        counters.copy_to_device(zeros)
        table = TouchedSearchArrays(*device, records=held.records, offset=offset, found=held.found)
        status = TouchedStatus(held.seen, held.fresh, held.queue, counters, 0)
        _launch(_seed_kernel, size, (graph, index, table, status), cfg)
        queued = int(counters.copy_to_host()[0])
        hops = 0
        while queued:
            parity = hops % 2
            counters.copy_to_device(zeros)
            status = TouchedStatus(held.seen, held.fresh, held.queue, counters, parity)
            _launch(_expand_kernel, queued, (graph, index, table, status), cfg)
            queued = int(counters.copy_to_host()[1 - parity])
            hops += 1
        bits = np.unpackbits(held.found.copy_to_host().view(np.uint8), bitorder="little")[:size]
        answers[offset : offset + size] = bits.astype(np.bool_)
        device_fill(held.seen, 0, cfg)
        stats.passes += 1
        stats.hops += hops
        stats.longest = max(stats.longest, hops)
    stats.search_seconds = time.perf_counter() - began
    return answers, stats


def touched_words(count: int, keys: int, free_bytes: int, fraction: float) -> int:
    """Status words per key for ``count`` searches over ``keys`` keys: the whole batch if memory allows."""
    affordable = int(fraction * free_bytes) // max(1, 8 * _STATUS_WORDS_PER_KEY * keys)
    return max(1, min(-(-count // 64), affordable))
