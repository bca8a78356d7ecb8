"""The search's per-item device functions: the label test, seeding a pass, filling a level's chunks, expanding them.

The engine's operators (``kernels.frontier``) own every loop; these functions say what one search,
one fill task, one chunk or one work item does. Their arguments travel as named tuples built next to
the launch in ``driver``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from grail_core.records import BWD, FWD, HEADER_WORDS, HI, ID, LABEL_WORDS, LEVEL, LO, NO, TREE_LO, UNDECIDED, YES

from ..frontier import ITEM_BITS, ITEM_MASK

__all__ = [
    "CHUNK_BITS",
    "CHUNK_DEGREE",
    "CHUNK_EDGES",
    "CHUNK_KEY",
    "NODE_BOXES",
    "NODE_ID",
    "NODE_LEVEL",
    "NO_LEVEL",
    "IndexArrays",
    "StatusArrays",
    "classify",
]

ONE = np.uint64(1)
LOW_HALF = np.uint64(0xFFFFFFFF)
NO_LEVEL = np.iinfo(np.int64).max  # a pass's extent before any search is left open
# A node row (``IndexArrays.nodes``): level, topological id (the DAG node id), then lo and hi of every dimension.
NODE_LEVEL, NODE_ID, NODE_BOXES = 0, 1, 2
# A chunk row: node | summary word << 32, the summary word's bits, the node's first out-edge, its out-degree.
CHUNK_KEY, CHUNK_BITS, CHUNK_EDGES, CHUNK_DEGREE = 0, 1, 2, 3


class IndexArrays(NamedTuple):
    """The device copy of an index, numbered in level order (see ``device_index``)."""

    indptr: Any  # children in level order, CSR
    indices: Any
    rec: Any  # the node records of grail_core.records, rows in level order
    nodes: Any  # (N, 8 or more) uint32 node rows: level, id, boxes (also in the records; this array stays in L2)
    position: Any  # DAG node id -> its number on the device
    level_ptr: Any  # the first number of each level, and N
    label_end: int  # one past the records' label words; a pass's target table keeps the target's number there


class StatusArrays(NamedTuple):
    """Per node: W status words (bit j of word w: search 64 w + j reached it), a summary bit per non-zero
    word, and a byte flag 'some search reached it'. All zero between passes."""

    reach: Any  # (N, W) uint64
    summary: Any  # (N, ceil(W / 64)) uint64
    touched: Any  # (N,) uint8


@cuda.jit(device=True, inline=True)
def _mask(rec, v, column):
    return (np.uint64(rec[v, column + 1]) << np.uint64(32)) | np.uint64(rec[v, column])


@cuda.jit(device=True, inline=True)
def classify(index, c, targets, j):
    """Device twin of ``grail_core.query.classify`` (the same tests, so the same answer for every pair):
    YES, NO or UNDECIDED for 'node c reaches the target of search j' (``targets[j]``: a copy of the
    target's record, with its number on the device in the spare word ``label_end``).

    Here the tests return as soon as one fails, cheapest first: a GPU thread pays for the words it
    loads, not for a mispredicted branch. The identity test needs no load, and the topological id,
    level and GRAIL intervals, which reject most children, come from ``nodes[c]`` (one 32-byte
    sector): a small array that stays in the L2 cache, where the 64-byte records of a large graph do not.
    """
    rec = index.rec
    nodes = index.nodes
    label_end = index.label_end
    if c == targets[j, label_end]:
        return YES
    if targets[j, ID] < nodes[c, NODE_ID] or targets[j, LEVEL] <= nodes[c, NODE_LEVEL]:
        return NO
    for k in range(HEADER_WORDS, label_end, LABEL_WORDS):
        box = NODE_BOXES + 2 * ((k - HEADER_WORDS) // LABEL_WORDS)
        if targets[j, k + LO] < nodes[c, box] or nodes[c, box + 1] < targets[j, k + HI]:
            return NO
    bs = _mask(rec, c, BWD)
    ft = _mask(targets, j, FWD)
    if (_mask(rec, c, FWD) & ~ft) | (_mask(targets, j, BWD) & ~bs):
        return NO
    for k in range(HEADER_WORDS, label_end, LABEL_WORDS):
        if rec[c, k + TREE_LO] <= targets[j, k + HI]:
            return YES
    return YES if bs & ft else UNDECIDED


@cuda.jit(device=True, inline=True)
def mark(status, c, w, bits):
    """Sets ``bits`` in word w of node c, w in c's summary, and c's flag.

    Atomics whose old value is not read are fire-and-forget on the GPU, and every writer of the flag
    writes the same value: a mark never waits for a round trip to memory.
    """
    cuda.atomic.or_(status.reach, (c, w), bits)
    cuda.atomic.or_(status.summary, (c, w // 64), ONE << np.uint64(w % 64))
    status.touched[c] = 1


class Seed(NamedTuple):
    graph: IndexArrays
    status: StatusArrays
    targets: Any  # the pass's target table: a copy of each search's target record
    sources: Any  # the call's pairs, DAG node ids
    destinations: Any
    offset: int  # the pass's first pair
    found: Any  # the pass's found bits


@cuda.jit(device=True)
def seed(j, args):
    """Search j copies its target's record into the pass's table and starts at its source, unless the
    source's own record already answers it. Returns the levels an open search spans (its source's and
    its target's), or an empty span."""
    index = args.graph
    targets = args.targets
    t = index.position[args.destinations[args.offset + j]]
    for k in range(index.rec.shape[1]):
        targets[j, k] = index.rec[t, k]
    targets[j, index.label_end] = t
    s = index.position[args.sources[args.offset + j]]
    w = j // 64
    bit = ONE << np.uint64(j % 64)
    code = classify(index, s, targets, j)
    if code == YES:
        cuda.atomic.or_(args.found, w, bit)
    elif code == UNDECIDED:
        mark(args.status, s, w, bit)
        return np.int64(index.nodes[s, NODE_LEVEL]), np.int64(targets[j, LEVEL])
    return NO_LEVEL, np.int64(-1)


class Fill(NamedTuple):
    first: int  # the level's first node number
    groups: int  # fill tasks per node
    per_group: int  # summary words per task
    status: StatusArrays
    indptr: Any
    chunks: Any  # this level's half of the chunk rows
    chunk_start: Any  # and of their first items


@cuda.jit(device=True, inline=True)
def _task_words(i, args):
    """Node and summary words [start, stop) of fill task i: the level's nodes each split into ``groups`` tasks."""
    words = args.status.summary.shape[1]
    if args.groups == 1:
        return args.first + i, 0, words
    node = np.int64(np.uint32(i) // np.uint32(args.groups)) if i < (1 << 31) else i // args.groups
    start = (i - node * args.groups) * args.per_group
    return args.first + node, start, min(words, start + args.per_group)


@cuda.jit(device=True)
def measure_words(i, args):
    """Task i of a level's fill: (chunks, work items) of a group of summary words of one of the level's nodes.

    A non-zero summary word of a node with children is a chunk, with one item per status word it marks
    and out-edge. A level of many nodes takes one task per node (neighbouring tasks read neighbouring
    flags); a level of few nodes splits each node's words over several tasks, so that a node that
    thousands of searches reached is spread over many threads.
    """
    v, start, stop = _task_words(i, args)
    if args.status.touched[v] == 0:
        return 0, np.int64(0)
    degree = args.indptr[v + 1] - args.indptr[v]
    count = 0
    words = 0
    if degree > 0:
        for sw in range(start, stop):
            bits = args.status.summary[v, sw]
            if bits:
                count += 1
                words += cuda.popc(bits)
    return count, words * degree


@cuda.jit(device=True)
def emit_words(i, position, args):
    """Writes the chunks of task i from ``position`` on and zeroes their summary words.

    Every parent of the node sits on a lower level, already expanded, so its words are final. Status
    words stay until the level is expanded, and the node's flag (other tasks of the node read it)
    until the next level's fill; those of a node without children go now.
    """
    v, start, stop = _task_words(i, args)
    status = args.status
    if status.touched[v] == 0:
        return position
    first_edge = args.indptr[v]
    degree = args.indptr[v + 1] - first_edge
    chunks = args.chunks
    for sw in range(start, stop):
        bits = status.summary[v, sw]
        if bits:
            status.summary[v, sw] = np.uint64(0)
            if degree == 0:
                _clear_words(status.reach, v, sw, bits)
                continue
            chunk = position >> ITEM_BITS
            chunks[chunk, CHUNK_KEY] = np.uint64(v) | (np.uint64(sw) << np.uint64(32))
            chunks[chunk, CHUNK_BITS] = bits
            chunks[chunk, CHUNK_EDGES] = first_edge
            chunks[chunk, CHUNK_DEGREE] = degree
            args.chunk_start[chunk] = position & ITEM_MASK
            position += (np.int64(1) << ITEM_BITS) + cuda.popc(bits) * degree
    return position


@cuda.jit(device=True, inline=True)
def _clear_words(reach, v, sw, bits):
    while bits:
        low = bits & (~bits + ONE)
        bits ^= low
        reach[v, sw * 64 + cuda.popc(low - ONE)] = np.uint64(0)


@cuda.jit(device=True)
def clear_chunk(i, args):
    """Zeroes the status words of chunk i of an expanded level."""
    reach, chunks = args
    key = chunks[i, CHUNK_KEY]
    _clear_words(reach, np.int64(key & LOW_HALF), np.int64(key >> np.uint64(32)), chunks[i, CHUNK_BITS])


@cuda.jit(device=True)
def unflag(i, args):
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


class Expand(NamedTuple):
    chunks: Any  # this level's half of the chunk rows
    graph: IndexArrays
    targets: Any
    found: Any  # the pass's found bits
    status: StatusArrays


@cuda.jit(device=True)
def expand(chunk, item, args):
    """One work item: the live searches of one status word of a chunk, pushed over one out-edge.

    Items are word-major (item = rank of the word in the chunk x out-degree + edge), so that
    neighbouring threads take neighbouring edges of one word: one code path, and the word's status,
    found bits and target records read once for the warp.
    """
    chunks = args.chunks
    found = args.found
    key = chunks[chunk, CHUNK_KEY]
    v = np.int64(key & LOW_HALF)
    degree = np.int64(chunks[chunk, CHUNK_DEGREE])
    if item < (1 << 31) and degree < (1 << 31):  # 32-bit division where it suffices: several times cheaper
        rank = np.int64(np.uint32(item) // np.uint32(degree))
    else:
        rank = item // degree
    w = np.int64(key >> np.uint64(32)) * 64 + _select_bit(chunks[chunk, CHUNK_BITS], rank)
    live = args.status.reach[v, w] & ~found[w]
    if live == 0:
        return
    c = args.graph.indices[np.int64(chunks[chunk, CHUNK_EDGES]) + item - rank * degree]
    passed = np.uint64(0)
    while live:
        low = live & (~live + ONE)
        live ^= low
        code = classify(args.graph, c, args.targets, w * 64 + cuda.popc(low - ONE))
        if code == YES:
            cuda.atomic.or_(found, w, low)
        elif code == UNDECIDED:
            passed |= low
    if passed:
        mark(args.status, c, w, passed)


# ---- frontier mode: a queue of (node, status word, new bits) entries per hop -----------------------------


class Queue(NamedTuple):
    """Where a hop's pushes go: the pass's entry rows (``CHUNK_*`` layout, one status word each) and
    their first items, appended hop after hop; hop h's entries start at row ``base``, and its packed
    counter (slots << ITEM_BITS | items) is ``counters[at]``."""

    rows: Any  # (capacity, 4) uint64
    starts: Any  # (capacity,) int64, relative to the hop's first item
    counters: Any  # (3,) int64: the hop being read, the one being filled, the one being cleared
    at: int
    base: int
    overflow: Any  # (1,) int32: the entries outgrew their rows


@cuda.jit(device=True, inline=True)
def push(queue, graph, c, w, bits):
    """Appends (c, w, bits) to the hop's queue, unless c has no children: its items are c's out-edges."""
    first_edge = graph.indptr[c]
    degree = graph.indptr[c + 1] - first_edge
    if degree == 0:
        return
    position = cuda.atomic.add(queue.counters, queue.at, (np.int64(1) << ITEM_BITS) + degree)
    slot = queue.base + (position >> ITEM_BITS)
    if slot >= queue.rows.shape[0]:
        queue.overflow[0] = 1
        return
    queue.rows[slot, CHUNK_KEY] = np.uint64(c) | (np.uint64(w) << np.uint64(32))
    queue.rows[slot, CHUNK_BITS] = bits
    queue.rows[slot, CHUNK_EDGES] = first_edge
    queue.rows[slot, CHUNK_DEGREE] = degree
    queue.starts[slot] = position & ITEM_MASK


@cuda.jit(device=True, inline=True)
def reach_new(seen, graph, c, w, bits, queue):
    """Marks ``bits`` as having reached c and queues the ones that had not: each search expands a node
    once. A node without children is never expanded, so it is not marked (nothing to clear later)."""
    if graph.indptr[c + 1] == graph.indptr[c]:
        return
    fresh = bits & ~cuda.atomic.or_(seen, (c, w), bits)
    if fresh:
        push(queue, graph, c, w, fresh)


class SeedQueue(NamedTuple):
    graph: IndexArrays
    seen: Any  # (N, W) uint64: bits of the searches that reached each node in this pass
    queue: Queue
    targets: Any
    sources: Any
    destinations: Any
    offset: int
    found: Any


@cuda.jit(device=True)
def seed_queue(j, args):
    """Frontier mode's seed: search j copies its target's record into the table, and its source, unless
    the source's own record answers it, goes on hop 0's queue."""
    graph = args.graph
    targets = args.targets
    t = graph.position[args.destinations[args.offset + j]]
    for k in range(graph.rec.shape[1]):
        targets[j, k] = graph.rec[t, k]
    targets[j, graph.label_end] = t
    s = graph.position[args.sources[args.offset + j]]
    w = j // 64
    bit = ONE << np.uint64(j % 64)
    code = classify(graph, s, targets, j)
    if code == YES:
        cuda.atomic.or_(args.found, w, bit)
    elif code == UNDECIDED:
        reach_new(args.seen, graph, s, w, bit, args.queue)


class Hop(NamedTuple):
    rows: Any  # the hop's entry rows (a view from its first row)
    graph: IndexArrays
    targets: Any
    found: Any
    seen: Any
    queue: Queue  # the next hop's


@cuda.jit(device=True)
def expand_entry(entry, item, args):
    """One work item of a hop: the live searches of an entry, pushed over out-edge ``item`` of its node."""
    rows = args.rows
    w = np.int64(rows[entry, CHUNK_KEY] >> np.uint64(32))
    live = rows[entry, CHUNK_BITS] & ~args.found[w]
    if live == 0:
        return
    c = args.graph.indices[np.int64(rows[entry, CHUNK_EDGES]) + item]
    passed = np.uint64(0)
    while live:
        low = live & (~live + ONE)
        live ^= low
        code = classify(args.graph, c, args.targets, w * 64 + cuda.popc(low - ONE))
        if code == YES:
            cuda.atomic.or_(args.found, w, low)
        elif code == UNDECIDED:
            passed |= low
    if passed:
        reach_new(args.seen, args.graph, c, w, passed, args.queue)


@cuda.jit(device=True)
def clear_entry(i, args):
    """Zeroes the seen word of entry i of an ended pass."""
    seen, rows = args
    key = rows[i, CHUNK_KEY]
    seen[np.int64(key & LOW_HALF), np.int64(key >> np.uint64(32))] = np.uint64(0)
