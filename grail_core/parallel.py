"""Building blocks of the parallel CPU build (numba): atomics, chunked loops, scans and frontiers.

numba has no atomic operations on the CPU; ``atomic_add``, ``atomic_min``, ``atomic_max`` and
``atomic_cas`` are LLVM's ``atomicrmw`` and ``cmpxchg`` on one array element, sequentially consistent:
a plain load after one is not moved before it (the coloring's handshake relies on that), and on x86
every locked instruction is a full barrier anyway.

A *frontier* loop (Kahn's levels, the trim, a BFS) runs a level in parallel only when it holds enough
work to pay for waking the threads (``PARALLEL_MIN_NODES``); a 1M-node chain or cycle has 1M levels of
one node each and runs them serially, at the speed of a plain queue. A frontier is one array: a serial
step takes the node at its head, a parallel level the nodes between head and tail, and new nodes are
appended at the tail (through a per-thread buffer and one atomic per buffer).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba
import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "LOCAL_QUEUE",
    "PARALLEL_MIN_NODES",
    "atomic_add",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "chunk_count",
    "chunk_range",
    "exclusive_scan",
    "flagged",
    "key_cursors",
    "numba_threads",
    "queue_flush",
    "queue_push",
    "stable_order",
]

# Nodes a frontier level needs before it is processed by all threads: starting a parallel region costs
# what many serial steps do.
PARALLEL_MIN_NODES = 2048
# Nodes a thread collects before appending them to a shared queue with one atomic.
LOCAL_QUEUE = 256
# Chunks per thread in chunked loops: enough to even out chunks of unequal cost.
CHUNKS_PER_THREAD = 8


def _atomic_rmw(operation: str, doc: str):
    @intrinsic
    def rmw(typingctx, array, index, value):
        if not isinstance(array, types.Array) or not isinstance(array.dtype, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            array_type, index_type, value_type = signature.args
            view = context.make_array(array_type)(context, builder, args[0])
            position = context.cast(builder, args[1], index_type, types.intp)
            pointer = cgutils.get_item_pointer(context, builder, array_type, view, [position], wraparound=False)
            operand = context.cast(builder, args[2], value_type, array_type.dtype)
            return builder.atomic_rmw(operation, pointer, operand, "seq_cst")

        return array.dtype(array, index, value), codegen

    rmw.__doc__ = doc
    return rmw


atomic_add = _atomic_rmw("add", "``array[index] += value`` atomically; returns the old value.")
atomic_min = _atomic_rmw(
    "min", "``array[index] = min(array[index], value)`` atomically (signed); returns the old value."
)
atomic_max = _atomic_rmw(
    "max", "``array[index] = max(array[index], value)`` atomically (signed); returns the old value."
)


@intrinsic
def atomic_cas(typingctx, array, index, expected, value):
    """Sets ``array[index] = value`` if it equals ``expected``, atomically; returns the old value."""
    if not isinstance(array, types.Array) or not isinstance(array.dtype, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type, expected_type, value_type = signature.args
        view = context.make_array(array_type)(context, builder, args[0])
        position = context.cast(builder, args[1], index_type, types.intp)
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [position], wraparound=False)
        old = context.cast(builder, args[2], expected_type, array_type.dtype)
        new = context.cast(builder, args[3], value_type, array_type.dtype)
        pair = builder.cmpxchg(pointer, old, new, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 0)

    return array.dtype(array, index, expected, value), codegen


@contextmanager
def numba_threads(count: int) -> Iterator[None]:
    """At most ``count`` of numba's threads for the parallel loops the calling thread starts (the setting is
    thread-local), restored afterwards."""
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(count, previous)))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def chunk_count(items: int) -> int:
    """How many chunks a parallel loop over ``items`` items is cut into (decided in Python: a kernel that
    asks numba for its thread count cannot be cached)."""
    return max(1, min(int(items), CHUNKS_PER_THREAD * numba.get_num_threads()))


@njit(nogil=True, inline="always")
def chunk_range(chunk, chunks, items):
    """Items [start, stop) of chunk ``chunk`` of ``chunks`` equal ones."""
    return chunk * items // chunks, (chunk + 1) * items // chunks


def exclusive_scan(values: np.ndarray, out: np.ndarray) -> None:
    """``out[0] = 0``, ``out[i + 1] = values[0] + ... + values[i]``; ``out`` has ``values.size + 1`` entries."""
    _exclusive_scan(values, out, chunk_count(values.size))


@njit(nogil=True, parallel=True, cache=True)
def _exclusive_scan(values, out, chunks):
    items = values.size
    sums = np.zeros(chunks + 1, dtype=np.int64)
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, items)
        total = 0
        for i in range(start, stop):
            total += values[i]
        sums[chunk + 1] = total
    for chunk in range(chunks):
        sums[chunk + 1] += sums[chunk]
    out[0] = 0
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, items)
        running = sums[chunk]
        for i in range(start, stop):
            running += values[i]
            out[i + 1] = running


# Loops, not slices: in a parallel function numba turns a slice assignment into a parallel region of
# its own, which would cost a serial queue step microseconds.
@njit(nogil=True, inline="always")
def queue_flush(local, count, queue, tail):
    """Appends ``local[:count]`` to ``queue`` at a place reserved with one atomic on ``tail[0]``."""
    if count > 0:
        at = atomic_add(tail, 0, count)
        for k in range(count):
            queue[at + k] = local[k]


@njit(nogil=True, inline="always")
def queue_push(w, local, count, queue, tail):
    """Collects w in a thread's ``local`` buffer, flushed to ``queue`` when full; returns the new count."""
    local[count] = w
    count += 1
    if count == local.size:
        queue_flush(local, count, queue, tail)
        count = 0
    return count


def flagged(flags: np.ndarray, out: np.ndarray) -> int:
    """Positions i with ``flags[i]`` set, in increasing order, into ``out``; returns how many."""
    return int(_flagged(flags, out, chunk_count(flags.size)))


@njit(nogil=True, parallel=True, cache=True)
def _flagged(flags, out, chunks):
    items = flags.size
    counts = np.zeros(chunks + 1, dtype=np.int64)
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, items)
        found = 0
        for i in range(start, stop):
            found += flags[i] != 0
        counts[chunk + 1] = found
    for chunk in range(chunks):
        counts[chunk + 1] += counts[chunk]
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, items)
        at = counts[chunk]
        for i in range(start, stop):
            if flags[i] != 0:
                out[at] = i
                at += 1
    return counts[chunks]


# Chunk-by-key tables larger than this are not worth it: few nodes per key, and the serial sort is O(n).
_MAX_TABLE = 1 << 22


def stable_order(keys: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions sorted by ``keys`` (ints in 0..num_keys-1), equal keys in increasing position, and where
    each key's run starts (``num_keys + 1`` entries). A parallel counting sort while the per-chunk
    tables stay small, else a serial one (many keys: a 1M-level chain has one node per key)."""
    chunks = chunk_count(keys.size)
    if chunks * num_keys > _MAX_TABLE:
        chunks = 1
    counts = np.zeros((chunks, num_keys), dtype=np.int64)
    starts = np.empty(num_keys + 1, dtype=np.int64)
    order = np.empty(keys.size, dtype=np.int32 if keys.size < 2**31 - 1 else np.int64)
    _count_keys(keys, counts)
    key_cursors(counts, starts)
    _place_keys(keys, counts, order)
    return order, starts


@njit(nogil=True, parallel=True, cache=True)
def _count_keys(keys, counts):
    chunks = counts.shape[0]
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, keys.size)
        for i in range(start, stop):
            counts[chunk, keys[i]] += 1


@njit(nogil=True, cache=True)
def key_cursors(counts, starts):
    """counts[c, k] becomes where chunk c's run of key k starts; ``starts`` where key k's run starts."""
    chunks, num_keys = counts.shape
    at = 0
    for k in range(num_keys):
        starts[k] = at
        for chunk in range(chunks):
            count = counts[chunk, k]
            counts[chunk, k] = at
            at += count
    starts[num_keys] = at


@njit(nogil=True, parallel=True, cache=True)
def _place_keys(keys, cursors, order):
    chunks = cursors.shape[0]
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, keys.size)
        for i in range(start, stop):
            k = keys[i]
            order[cursors[chunk, k]] = i
            cursors[chunk, k] += 1
