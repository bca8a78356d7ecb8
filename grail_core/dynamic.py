"""Pairs answered on one version of a graph with edge updates pending: tests first, searches for the rest.

Every pair gets one verdict (``grail_core.pending.verdict``), from the labels and the version's masks, in
parallel (then, for a pair they leave open, ``crossing`` where its source comes after its target in the
topological order, else a path of the labels' graph that no removal cut, ``_live_path``): YES or NO
(decided), BASE (the updates cannot have changed it: the labels' graph's answer holds, which the index's own
search engine finds, on the CPU or a GPU), BASE_FIRST (that engine's YES holds, its NO is searched again on
the updated graph), or UNDECIDED. The undecided pairs are a list of (source, target) searches on the updated
graph (``traversal.walk``, depth first, each key it meets tested by the same verdict), spread over the cores.
Exact throughout: a verdict states only what a witness path or a test on the labels proves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import numba
import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from .borrowed import borrowed
from .pending import (
    BASE,
    BASE_FIRST,
    HAS_NEW_TARGET,
    INTO_COMP,
    OUT_OF_COMP,
    Pending,
    bit_set,
    comp_broken,
    dag_edge_dead,
    entry_alive,
    first_entry,
    inlined_verdict,
    labels_hold,
    next_entry,
    verdict,
)
from .query import (
    _AHEAD,
    SERIAL_BATCH,
    HotArrays,
    SearchBuffers,
    _prefetch_row,
    _search_one,
    answer_pair,
    classify,
    classify_nodes,
    frozen,
)
from .records import ID, NO, UNDECIDED, YES
from .traversal import Side, reaches, walk_pairs_parallel

__all__ = [
    "UpdatedAnswers",
    "crossing",
    "CROSSING_EDGES",
    "verdicts",
    "answer_pairs",
    "search_pairs",
    "answer_one",
    "walk_size",
]


class UpdatedAnswers(NamedTuple):
    """What ``answer_pairs`` left to the index's search engine: the positions of the pairs whose answer is
    the labels' graph's (BASE), of those whose YES only is (BASE_FIRST: a NO goes to ``search_pairs``), and
    how many pairs it searched on the updated graph."""

    base: np.ndarray
    base_first: np.ndarray
    searched: int


def walk_size(n_dag: int, num_nodes: int) -> int:
    """The size of the buffers of walks (``SearchBuffers``): room for two stacks of every key a walk may
    visit, every DAG node and every node (those updates added included)."""
    return 2 * (n_dag + num_nodes)


# How many added edges ``crossing`` weighs from one end of a pair (on one side), and from all its ends; how
# many pairs of ends (one from each side) it tries after that.
CROSSING_EDGES = 32
CHAINED_EDGES = 2 * CROSSING_EDGES
MEETING_PAIRS = 32
# Marks ``crossing`` may take for one pair: a ``_settled`` search for either end of each edge it weighs on
# either side, and one for each pair of ends it tries.
CROSSING_MARKS = 2 * 2 * CHAINED_EDGES + MEETING_PAIRS
# DAG nodes a ``_live_path`` search visits at most (a pair along the order: one mark of its CROSSING_MARKS).
LIVE_PATH_NODES = 256
# ``_labels_reach``'s set of the DAG nodes a search met (``seen``): its slots, and the most it holds (at most
# half full, so that a probe ends soon) before the search goes on to the stamps. A table, of _SEEN_SHAPE from
# ``SearchBuffers.take_tables``, holds per slot of an open-addressing set of DAG node ids the generation that
# filled it and its id, and a stack (rows _SEEN_MARKS, _SEEN_KEYS, _SEEN_STACK); a search takes a new
# generation (kept in the last slot of the first row), so a table is never cleared.
_SEEN_BITS = 12
SEEN_SLOTS = 1 << _SEEN_BITS
SEEN_NODES = SEEN_SLOTS // 2
_SEEN_MARKS, _SEEN_KEYS, _SEEN_STACK = range(3)
_SEEN_SHAPE = (3, SEEN_SLOTS + 1)
_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)  # multiplicative hashing's constant (2^64 over the golden ratio)
# From this many pairs ``_cross`` runs on numba's threads (the verdicts' own, so none wait on the other): a pair
# costs 5-40 microseconds (searches of the labels' graph), a parallel pass's start about 10.
PARALLEL_CROSSING = 4
# Pairs ``_cross`` passes at once: their marks fit an int32 stamp array (half of it, so that a pool's
# buffers are cleared at most every other part).
_CROSSING_PART = np.iinfo(np.int32).max // (2 * CROSSING_MARKS)
# Pairs a thread of the verdict pass takes at a time: each slice is one call that borrows the version's
# arrays (a parallel loop's own body counts references to them at every pair, an atomic operation that the
# threads contend for).
VERDICT_SLICE = 512
# ``_cross_side``'s state: edges counted, whether some edge is still open, ends queued.
_COUNTED, _OPEN, _ENDS = range(3)


# Inlined into the verdict loops with ``inlined_verdict``: a call per pair cost more than its tests. The DAG
# node comes off the node's record (``pack`` writes it there), which the labels' test reads anyway: reading
# ``comp`` as well cost random pairs a cache miss each. Where the labels decide and hold (``labels_hold``), no
# mask row is read: a row is a line of its own, and on a large graph a miss.
@njit(nogil=True, inline="always")
def _verdict_of(h, p, u, v):
    if u == v:
        return YES
    cu = np.int64(h.rec_node[u, ID]) if u < p.n_base else np.int64(-1)
    cv = np.int64(h.rec_node[v, ID]) if v < p.n_base else np.int64(-1)
    base = classify_nodes(h, u, v) if cu >= 0 and cv >= 0 else NO
    if cu >= 0 and cv >= 0 and cu != cv and labels_hold(p, u, cu, v, cv):
        return BASE if base == UNDECIDED else base
    return inlined_verdict(p, u, cu, v, cv, base)


@njit(nogil=True)
def _settled(h, p, comp, u, v, stamp, stack, marks, seen):
    """``_verdict_of``, with the labels' graph searched where the labels leave the pair open (``_searched``):
    NO, YES or UNDECIDED."""
    return _searched(h, p, comp, u, v, _verdict_of(h, p, u, v), stamp, stack, marks, seen)


@njit(nogil=True)
def _searched(h, p, comp, u, v, code, stamp, stack, marks, seen):
    """The verdict ``code`` of (u, v), settled where it is BASE or BASE_FIRST by a search of the labels' graph
    (``_labels_reach``): NO, YES or UNDECIDED."""
    if code == BASE or code == BASE_FIRST:
        cu, cv = comp[u], comp[v]
        base = YES if _labels_reach(h, cu, cv, stamp, stack, marks, seen) else NO
        code = verdict(p, u, cu, v, cv, base)
    return code


@njit(nogil=True)
def _labels_reach(h, cs, ct, stamp, stack, marks, seen):
    """'DAG node cs reaches ct' on the labels' graph (``query._search_one``'s pruned DFS): first with the
    DAG nodes it meets held in ``seen`` (a table of _SEEN_SHAPE), and only where more than SEEN_NODES of them are
    met again on ``stamp`` (a fresh mark of ``marks[0]``). Most of crossing's searches meet a few dozen DAG
    nodes; on a large graph their stamps, spread over an array of every DAG node, cost a cache miss (and on
    a fresh buffer a page fault) each."""
    code = classify(h.rec_dag, cs, h.rec_dag, ct, h.label_end)
    if code != UNDECIDED:
        return code == YES
    found = _reach_within(h, cs, ct, seen)
    if found != UNDECIDED:
        return found == YES
    marks[0] += 1
    return _search_one(h, cs, ct, stamp, np.int32(marks[0]), stack)


@njit(nogil=True)
def _reach_within(h, cs, ct, seen):
    """``_labels_reach``'s pruned DFS from cs (which the labels leave open) on ``seen``: YES, NO, or UNDECIDED
    where it meets more than SEEN_NODES DAG nodes."""
    generation = _next_generation(seen)
    keys, stack = seen[_SEEN_KEYS], seen[_SEEN_STACK]
    _enter_seen(seen, keys, generation, cs)
    stack[0] = cs
    top, met = 1, 1
    while top > 0:
        top -= 1
        x = stack[top]
        for e in range(h.out_indptr[x], h.out_indptr[x + 1]):
            w = h.out_indices[e]
            if not _enter_seen(seen, keys, generation, w):
                continue
            met += 1
            if met > SEEN_NODES:
                return UNDECIDED
            code = classify(h.rec_dag, w, h.rec_dag, ct, h.label_end)
            if code == YES:
                return YES
            if code == UNDECIDED:
                stack[top] = w
                top += 1
    return NO


@njit(nogil=True)
def _next_generation(seen):
    seen[_SEEN_MARKS, SEEN_SLOTS] += 1
    return seen[_SEEN_MARKS, SEEN_SLOTS]


@njit(nogil=True)
def _enter_seen(seen, keys, generation, x):
    """Adds DAG node x to this generation's set: False where it was already in it."""
    slot = np.int64((np.uint64(x) * _FIBONACCI) >> np.uint64(64 - _SEEN_BITS))
    while seen[_SEEN_MARKS, slot] == generation:
        if keys[slot] == x:
            return False
        slot = (slot + 1) & (SEEN_SLOTS - 1)
    seen[_SEEN_MARKS, slot] = generation
    keys[slot] = x
    return True


@njit(nogil=True)
def _far(p, comp, cs, ct, below, x, y):
    """Whether a path from DAG node cs down to ct may take added edge x -> y first (or last, ``below``)
    across the order."""
    return (x < p.n_base and comp[x] > ct) if below else (y >= p.n_base or comp[y] < cs)


@njit(nogil=True)
def _queue_end(state, ends, node):
    """Queues ``node`` as a further end of the pair (once; the edge stays open where ``ends`` is full)."""
    for k in range(state[_ENDS]):
        if ends[k] == node:
            return
    if state[_ENDS] == ends.size:
        state[_OPEN] = 1
        return
    ends[state[_ENDS]] = node
    state[_ENDS] += 1


@njit(nogil=True)
def _weigh(h, p, comp, s, t, below, x, y, stamp, stack, marks, seen, state, ends):
    """Weighs added edge x -> y for ``crossing`` if a path from s to t may take it first (or last, ``below``)
    across the order: YES when it passes both, else NO. Where the end of the edge away from the pair's own
    end (y, or x ``below``) is reached (reaches t) but is still open itself, and lies across the order from
    the pair's other end, it is queued in ``ends`` as a further end (a pair of its own for ``_weighed_side``);
    other edges still open set ``state[_OPEN]``."""
    if not _far(p, comp, comp[s], comp[t], below, x, y):
        return NO
    # Both ends' verdicts before either's search: a NO of one spares the other's search.
    into = _verdict_of(h, p, y, t)
    out = _verdict_of(h, p, s, x)
    if into == NO or out == NO:
        return NO
    into = _searched(h, p, comp, y, t, into, stamp, stack, marks, seen)
    if into == NO:
        return NO
    out = _searched(h, p, comp, s, x, out, stamp, stack, marks, seen)
    if out == NO:
        return NO
    if into == YES and out == YES:
        return YES
    if below and into == YES and comp[s] > comp[x]:
        _queue_end(state, ends, x)
    elif not below and out == YES and y < p.n_base and comp[y] > comp[t]:
        _queue_end(state, ends, y)
    else:
        state[_OPEN] = 1
    return NO


@njit(nogil=True)
def _cross_side(h, p, comp, s, t, below, stamp, stack, marks, seen, counting, state, ends):
    """``crossing`` from the added edges a path from s to t takes first across the order (or last,
    ``below``): YES, or NO with the edges still open noted in ``state`` and ``ends`` (``_weigh``).
    ``counting``: only counts the edges it would weigh in ``state[_COUNTED]``, UNDECIDED past
    CROSSING_EDGES, else NO."""
    cs, ct = comp[s], comp[t]
    words = p.source_bits.size
    first_word, last_word = (0, (ct >> 6) + 1) if below else (cs >> 6, words)
    bits, summary, kind = (
        (p.target_bits, p.target_words, INTO_COMP) if below else (p.source_bits, p.source_words, OUT_OF_COMP)
    )
    for v in range(first_word >> 6, ((last_word - 1) >> 6) + 1):
        used = summary[v]
        while used != 0:
            w = (v << 6) + trailing_zeros(used)
            used &= used - np.uint64(1)
            if w < first_word or w >= last_word:
                continue
            word = bits[w]
            while word != 0:
                c = (w << 6) + trailing_zeros(word)
                word &= word - np.uint64(1)
                if (below and c > ct) or (not below and c < cs):
                    continue
                i = first_entry(p, kind, c)
                while i >= 0:
                    if entry_alive(p, i):
                        if counting:
                            if _far(p, comp, cs, ct, below, p.src[i], p.dst[i]):
                                state[_COUNTED] += 1
                                if state[_COUNTED] > CROSSING_EDGES:
                                    return UNDECIDED
                        else:
                            code = _weigh(
                                h, p, comp, s, t, below, p.src[i], p.dst[i], stamp, stack, marks, seen, state, ends
                            )
                            if code != NO:
                                return code
                    i = next_entry(p, kind, i)
    return NO


@njit(nogil=True)
def crossing(h, p, comp, s, t, stamp, stack, marks, seen):
    """NO, YES or UNDECIDED for 's reaches t' where s's DAG node cs comes after t's, ct (both nodes of the
    labels' graph), from the added edges a path must take across the order.

    Base edges never lead to a lower DAG id, and a node that updates added counts as id 0: a path from cs
    down to ct takes a first added edge x -> y from an id >= cs to one below cs, and a last one from an id
    above ct to one at most ct (when no added edge enters an added node). Either set decides the pair when
    it is small (``_weighed_side``: the bit sets of DAG nodes that added edges leave or enter, read through
    their words' bit sets, a cost in the edges, not the ids): YES where s reaches some x and its y reaches
    t, NO where each such edge fails one of the two (``_weigh``; ``_settled`` of each end may search the
    labels' graph: up to CROSSING_MARKS marks in all). The side with fewer ids goes first; the other where
    it leaves the pair open. Each side goes on from the far ends of the edges it leaves open (``ends``: s
    reaches each of row 0, each of row 1 reaches t); where both leave the pair open, a pair of such ends,
    one of each row, that reach each other is a witness (``_meet``)."""
    cs, ct = comp[s], comp[t]
    ends = np.empty((2, CHAINED_EDGES), dtype=np.int64)
    states = np.zeros((2, 3), dtype=np.int64)
    ends[0, 0], ends[1, 0] = s, t
    states[0, _ENDS] = states[1, _ENDS] = 1
    below = (p.flags & HAS_NEW_TARGET) == 0 and ct < p.source_bits.size * 64 - cs
    code = _weighed_side(h, p, comp, s, t, below, stamp, stack, marks, seen, states[int(below)], ends[int(below)])
    if code == UNDECIDED and (p.flags & HAS_NEW_TARGET) == 0:
        other = int(not below)
        code = _weighed_side(h, p, comp, s, t, not below, stamp, stack, marks, seen, states[other], ends[other])
    if code == UNDECIDED:
        code = _meet(h, p, comp, ends, states, stamp, stack, marks, seen)
    return code


@njit(nogil=True)
def _weighed_side(h, p, comp, s, t, below, stamp, stack, marks, seen, state, ends):
    """One side of ``crossing`` (its edges counted before any is weighed: weighing one may search the labels'
    graph), from the pair's own end (s, or t ``below``: ``ends[0]``) and on from the ends it queues: an edge
    that s reaches (``below``: that reaches t) whose far end y (x) is itself a pair across the order with t
    (s) needs another added edge across it, which that pair's own side weighs. YES where some end decides
    YES, NO where every end's edges fail, else UNDECIDED: an edge still open, or an end with more than
    CROSSING_EDGES edges or past CHAINED_EDGES edges weighed for the pair in all."""
    budget = CHAINED_EDGES
    k = 0
    while k < state[_ENDS]:
        end = ends[k]
        k += 1
        u, v = (s, end) if below else (end, t)
        state[_COUNTED] = 0
        if _cross_side(h, p, comp, u, v, below, stamp, stack, marks, seen, True, state, ends) == UNDECIDED:
            state[_OPEN] = 1
            continue
        if state[_COUNTED] > budget:
            state[_OPEN] = 1
            continue
        budget -= state[_COUNTED]
        if _cross_side(h, p, comp, u, v, below, stamp, stack, marks, seen, False, state, ends) == YES:
            return YES
    return UNDECIDED if state[_OPEN] else NO


@njit(nogil=True)
def _meet(h, p, comp, ends, states, stamp, stack, marks, seen):
    """YES where a queued end that s reaches (``ends[0]``) reaches one that reaches t (``ends[1]``), else
    UNDECIDED; up to MEETING_PAIRS pairs of ends, the pair's own ends left out (``_weigh`` tried those)."""
    tried = 0
    for i in range(1, states[0, _ENDS]):
        for j in range(1, states[1, _ENDS]):
            if tried == MEETING_PAIRS:
                return UNDECIDED
            tried += 1
            if _settled(h, p, comp, ends[0, i], ends[1, j], stamp, stack, marks, seen) == YES:
                return YES
    return UNDECIDED


@njit(nogil=True)
def _live_path(h, p, cs, ct, stamp, stack, marks):
    """Whether a path of the labels' graph from DAG node cs to ct (cs < ct, neither broken) is whole in this
    version: its DAG edges alive, the DAG nodes it passes through unbroken (each of their members still
    reaches the others), so that every member of cs reaches every member of ct. A proof of YES for a pair
    that the removal masks' coarse groups leave open, most of which keep their paths; depth first over at
    most LIVE_PATH_NODES DAG nodes (one mark of ``marks[0]``), leaving out ids past ct and the DAG nodes the
    labels say do not reach ct. False: no such path found (the pair stays open)."""
    if classify(h.rec_dag, cs, h.rec_dag, ct, h.label_end) == NO:
        return False
    marks[0] += 1
    mark = np.int32(marks[0])
    stamp[cs] = mark
    stack[0] = cs
    top, visits = 1, 0
    while top > 0 and visits < LIVE_PATH_NODES:
        top -= 1
        x = stack[top]
        visits += 1
        for e in range(h.out_indptr[x], h.out_indptr[x + 1]):
            w = h.out_indices[e]
            if w > ct or stamp[w] == mark or dag_edge_dead(p, e):
                continue
            if w == ct:
                return True
            stamp[w] = mark
            if comp_broken(p, w) or classify(h.rec_dag, w, h.rec_dag, ct, h.label_end) == NO:
                continue
            stack[top] = w
            top += 1
    return False


@njit(nogil=True)
def _decided(h, p, comp, s, t, stamp, stack, marks, seen):
    """What the verdicts left open, for s and t of the labels' graph in different DAG nodes: ``crossing``
    where s's DAG node comes after t's; YES where a ``_live_path`` joins them, else UNDECIDED."""
    cs, ct = comp[s], comp[t]
    if cs > ct:
        # A broken end leaves crossing's own searches open: the search on the updated graph costs less.
        if comp_broken(p, cs) or comp_broken(p, ct):
            return UNDECIDED
        return crossing(h, p, comp, s, t, stamp, stack, marks, seen)
    if not comp_broken(p, cs) and not comp_broken(p, ct) and _live_path(h, p, cs, ct, stamp, stack, marks):
        return YES
    return UNDECIDED


@njit(nogil=True, parallel=True, cache=True)
def _cross_parallel(h, p, comp, pairs, which, codes, stamps, stacks, first_mark, seen, marks):
    """``_decided`` for the pairs ``pairs[which]`` of nodes of the labels' graph in different DAG nodes, into
    ``codes``, over numba's threads: a pair on the stamps, stack, table and marks counter (``marks[thread]``)
    of the thread that takes it, with its own CROSSING_MARKS marks from ``first_mark``."""
    for j in prange(which.size):
        thread = numba.get_thread_id()
        i = which[j]
        s, t = pairs[i, 0], pairs[i, 1]
        hb, pb = borrowed(h), borrowed(p)
        if s < pb.n_base and t < pb.n_base and comp[s] != comp[t]:
            marks[thread, 0] = first_mark - 1 + CROSSING_MARKS * j
            codes[i] = _decided(hb, pb, comp, s, t, stamps[thread], stacks[thread], marks[thread], seen[thread])


@njit(nogil=True, cache=True)
def _cross_one(h, p, comp, s, t, stamp, stack, first_mark, seen):
    h, p = borrowed(h), borrowed(p)
    marks = np.array([first_mark - 1], dtype=np.int64)
    return _decided(h, p, comp, s, t, stamp, stack, marks, seen)


@njit(nogil=True, inline="always")
def _prefetch_node(h, p, u):
    if u < p.n_base:
        _prefetch_row(h.rec_node, u)


@njit(nogil=True, inline="always")
def _prefetch_masks(h, p, u, v):
    """The mask rows of pair (u, v) where its verdict may read them: not where the open bits say that the
    labels hold (``labels_hold``), as on most pairs of a graph where few DAG nodes are open, nor in a component
    never broken."""
    cu = h.rec_node[u, ID] if u < p.n_base else -1
    cv = h.rec_node[v, ID] if v < p.n_base else -1
    if cu >= 0 and cv >= 0 and (labels_hold(p, u, cu, v, cv) if cu != cv else not bit_set(p.broken_bits, cu)):
        return
    if cu >= 0:
        _prefetch_row(p.masks, cu)
    if cv >= 0:
        _prefetch_row(p.masks, cv)


@njit(nogil=True)
def _verdicts_slice(h, p, pairs, codes, first, end):
    """``_verdict_of`` of ``pairs[first:end]`` into ``codes``. As the labels' batch loops do, it asks early
    for what the pairs ahead read: their node records, then (half as far ahead, since their rows are found
    from the DAG nodes the records hold) the version's masks where the verdicts may read them. Random pairs
    miss the cache on each of them, and the labels' filter alone pays only for the records."""
    h, p = borrowed(h), borrowed(p)
    masked = p.masks.shape[0] > 0
    for i in range(first, end):
        far = i + 2 * _AHEAD
        if far < end:
            _prefetch_node(h, p, pairs[far, 0])
            _prefetch_node(h, p, pairs[far, 1])
        near = i + _AHEAD
        if near < end and masked:
            _prefetch_masks(h, p, pairs[near, 0], pairs[near, 1])
        codes[i] = _verdict_of(h, p, pairs[i, 0], pairs[i, 1])


@njit(nogil=True, parallel=True, cache=True)
def _verdicts_parallel(h, p, pairs, codes):
    count = pairs.shape[0]
    for k in prange((count + VERDICT_SLICE - 1) // VERDICT_SLICE):
        _verdicts_slice(h, p, pairs, codes, k * VERDICT_SLICE, min(count, (k + 1) * VERDICT_SLICE))


@njit(nogil=True, cache=True)
def _verdicts_serial(h, p, pairs, codes):
    _verdicts_slice(h, p, pairs, codes, 0, pairs.shape[0])


@njit(nogil=True, cache=True)
def pair_verdict(h, p, u, v):
    """``verdicts`` of one pair, on the calling thread."""
    h, p = borrowed(h), borrowed(p)
    return _verdict_of(h, p, u, v)


def verdicts(hot: HotArrays, pending: Pending, pairs: np.ndarray) -> np.ndarray:
    """NO, YES, UNDECIDED or BASE (int8) for each pair of node ids (an (M, 2) int64 array)."""
    pairs = frozen(pairs)  # read-only like every caller's: one compiled kernel, not one per flag
    codes = np.empty(pairs.shape[0], dtype=np.int8)
    if pairs.shape[0] < SERIAL_BATCH:
        _verdicts_serial(hot, pending, pairs, codes)
    else:
        _verdicts_parallel(hot, pending, pairs, codes)
    return codes


def answer_pairs(
    sides: tuple[Side, Side],
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    pairs: np.ndarray,
    answers: np.ndarray,
    search: Callable[[np.ndarray, np.ndarray, np.ndarray], Any] | None = None,
) -> UpdatedAnswers:
    """Answers of an (M, 2) int64 array of node ids on the version ``pending`` into ``answers``, except for
    the pairs it leaves to the index's search engine (``UpdatedAnswers.base``: their answer is the labels'
    graph's). ``sides``: the forward and backward views of the graph; ``pool``: buffers of ``walk_size``;
    ``search(pairs, which, answers)``: what searches the undecided pairs on the updated graph (the CPU's
    ``search_pairs`` when None)."""
    pairs = frozen(np.asarray(pairs, dtype=np.int64))  # one compiled verdict and crossing kernel (``verdicts``)
    codes = verdicts(hot, pending, pairs)
    undecided = np.flatnonzero(codes == UNDECIDED)
    if undecided.size:
        _cross(sides[0].comp, pending, hot, pool, pairs, undecided, codes)
        undecided = np.flatnonzero(codes == UNDECIDED)
    np.equal(codes, YES, out=answers)
    if undecided.size and search is not None:
        search(pairs, undecided, answers)
    elif undecided.size:
        search_pairs(sides, pending, hot, pool, pairs, undecided, answers)
    return UpdatedAnswers(np.flatnonzero(codes == BASE), np.flatnonzero(codes == BASE_FIRST), int(undecided.size))


def _cross(
    comp: np.ndarray,
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    pairs: np.ndarray,
    which: np.ndarray,
    codes: np.ndarray,
) -> None:
    """``crossing`` for the undecided pairs ``pairs[which]`` into ``codes``: on numba's threads from
    PARALLEL_CROSSING pairs (``_cross_parallel``), else one by one; in parts whose marks fit the stamps."""
    for start in range(0, which.size, _CROSSING_PART):
        part = which[start : start + _CROSSING_PART]
        if part.size < PARALLEL_CROSSING:
            for i in part:
                codes[i] = _cross_of(hot, pending, comp, pool, pairs[i, 0], pairs[i, 1])
            continue
        with _on_threads() as threads, pool.take_rows(threads, CROSSING_MARKS * part.size) as (stamps, stacks, mark):
            marks = np.empty((threads, 1), dtype=np.int64)
            with pool.take_tables(threads, _SEEN_SHAPE) as seen:
                _cross_parallel(hot, pending, comp, pairs, part, codes, stamps, stacks, mark, seen, marks)


def _cross_of(hot: HotArrays, pending: Pending, comp: np.ndarray, pool: SearchBuffers, u: int, v: int) -> int:
    """``_decided`` for one pair the verdicts left open (UNDECIDED where it is not a pair of nodes of the
    labels' graph in different DAG nodes), on the calling thread."""
    if u >= pending.n_base or v >= pending.n_base or comp[u] == comp[v]:
        return UNDECIDED
    with pool.take(marks=CROSSING_MARKS + 1) as (stamp, stack, mark), pool.take_tables(1, _SEEN_SHAPE) as seen:
        return int(_cross_one(hot, pending, comp, u, v, stamp, stack, mark, seen[0]))


def search_pairs(
    sides: tuple[Side, Side],
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    pairs: np.ndarray,
    which: np.ndarray,
    answers: np.ndarray,
) -> None:
    """Answers of ``pairs[which]`` by searches on the updated graph into ``answers``: on numba's threads where
    there are several (one search may cost milliseconds)."""
    if which.size == 1:
        source, target = pairs[which[0]]
        with pool.take(marks=2) as (stamp, queue, mark):
            answers[which[0]] = reaches(*sides, pending, hot, source, target, stamp, mark, queue)
        return
    with _on_threads() as threads, pool.take_rows(threads, marks=2 * which.size) as (stamps, queues, mark):
        walk_pairs_parallel(*sides, pending, hot, pairs, which, answers, stamps, mark, queues)


@contextmanager
def _on_threads() -> Iterator[int]:
    """numba's parallel loops a pair at a time (the pairs' costs differ by orders of magnitude), on all its
    threads: how many (a row of buffers each). A different count would cost the next parallel pass
    (verdicts) a resize of the team."""
    with numba.parallel_chunksize(1):
        yield numba.get_num_threads()


def answer_one(
    sides: tuple[Side, Side],
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    base_buffers: SearchBuffers,
    u: int,
    v: int,
) -> tuple[bool, bool, float]:
    """(reachable, needed a search, seconds its search on the updated graph took: 0.0 for none) for one pair
    of node ids on the version ``pending``, on the calling thread: its verdict, then the labels' graph's
    search (BASE, BASE_FIRST) or one on the updated graph."""
    code = pair_verdict(hot, pending, u, v)
    if code == BASE or code == BASE_FIRST:
        found, searched = answer_pair(hot, base_buffers, u, v)
        if found or code == BASE:
            return found, searched, 0.0
    if code == UNDECIDED:
        code = _cross_of(hot, pending, sides[0].comp, pool, u, v)
    if code == YES or code == NO:
        return bool(code == YES), False, 0.0
    start = time.perf_counter()
    with pool.take(marks=2) as (stamp, queue, mark):
        found = reaches(*sides, pending, hot, u, v, stamp, mark, queue)
    return bool(found), True, time.perf_counter() - start
