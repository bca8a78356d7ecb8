"""The CPU frontier operator: the one loop of every breadth-first pass of the build, the work per node and edge
the caller's.

Gunrock's shape, as ``kernels/frontier`` has it on the GPU. A pass is a queue of nodes, one array: the nodes
still to visit are ``queue[head:tail[0]]`` (``tail`` a one-element array, so that threads append with an
atomic). ``advance`` owns the loop: it calls the caller's ``visit(v, context, local, count, queue, tail)``
for every node it takes, and ``visit`` hands the node's edges (out-edges, in-edges, or both: the caller's
to say) to ``push_edges`` with a per-edge function ``edge(v, w, e, x, y, z)``, which appends w to the queue
where that answers True. The queue runs one node at a time while fewer than ``Frontier.parallel_min`` nodes
wait (a 1M-node chain has 1M levels of one node: it runs at the speed of a plain queue), and a level at a
time over all threads otherwise, each thread collecting what it appends in a buffer of its own
(``parallel.queue_push``: ``local`` and its ``count``).

``Frontier`` chooses two variations:

- ``pull_share``: a level larger than this share of the nodes not yet queued (of ``candidates``) is replaced
  by a pass over all ``nodes``, appending those for which ``pull(v, context)`` answers True (Beamer et al.'s
  direction-optimizing BFS: a node asking its parents stops at the first reached one, where pushing from a
  frontier that holds most of the graph would try every edge);
- ``wrap``: nodes may come back after their visit (label propagation to a fixpoint) in a queue of twice
  ``wrap`` entries: the entries still to visit move to the front before a parallel level, and once ``wrap``
  entries lie behind the head;
- ``limit``: the pass gives up once it has made more than this many visits (a propagation whose cost has
  no bound in the graph's size; 0: none).

Searches (``search``, ``search_level``) are the second shape: one node's or one pair's breadth-first search
on the calling thread (many run at once, one per request or pair), which stops at the first witness. Its
``visit(v, x, y, z, queue, tail)`` returns ``(tail, found)`` and hands edges to ``search_edges``, whose
per-edge function ``edge(v, w, e, x, y, z)`` answers the entry to append (``append_step``), ``SKIP`` or
``FOUND``. The context comes in three parts, passed apart as the edge functions' are, and a per-edge
function's parts are small tuples of the few arrays it reads: numba reference-counts every array of a tuple
wherever it is bound, and inlines a small compiled function into the loop (where the counting cancels out)
while a large one stays a call.

The operator is inlined into the caller (``inline="always"``): each pass is a small cached kernel that names its
functions, so the operator costs nothing over a loop written out (``benchmarks/bench_frontier.py``); numba
cannot cache a kernel that receives its functions at run time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .parallel import LOCAL_QUEUE, PARALLEL_MIN_NODES, chunk_count, chunk_range, queue_flush, queue_push

__all__ = [
    "Frontier",
    "advance",
    "push_edges",
    "no_pull",
    "SKIP",
    "FOUND",
    "search",
    "search_edges",
    "append_step",
    "search_level",
]

# What a search's per-edge function answers when it appends nothing (an entry to append is >= 0).
SKIP = -1  # go on with the next edge
FOUND = -2  # the search has its witness: stop


class Frontier(NamedTuple):
    """How a pass over a graph of ``nodes`` nodes runs: levels of ``parallel_min`` nodes or more over all
    threads, in ``chunks`` chunks; the pull and wrap variations (module docstring) where set."""

    nodes: int
    parallel_min: int
    chunks: int
    pull_share: float = 0.0
    candidates: int = 0
    wrap: int = 0
    limit: int = 0

    @classmethod
    def over(
        cls,
        nodes: int,
        parallel_min: int = PARALLEL_MIN_NODES,
        *,
        pull_share: float = 0.0,
        candidates: int = 0,
        wrap: int = 0,
        limit: int = 0,
    ) -> Frontier:
        """A pass over a graph of ``nodes`` nodes (its chunks are decided here: a kernel that asks numba for
        its thread count cannot be cached)."""
        return cls(
            int(nodes), int(parallel_min), chunk_count(nodes), float(pull_share), int(candidates), int(wrap), int(limit)
        )


@njit(nogil=True, inline="always")
def no_pull(v, context):
    """The ``pull`` of a pass that never pulls."""
    return False


@njit(nogil=True, inline="always")
def push_edges(v, indptr, indices, edge, x, y, z, local, count, queue, tail):
    """Calls ``edge(v, w, e, x, y, z)`` for every edge v -> w at position e of the CSR graph (indptr, indices),
    appending the w it accepts; returns the new count. ``x``, ``y``, ``z``: what the edge function reads (arrays
    or scalars, None where unused), passed apart rather than in a tuple, which numba would reference-count on
    every edge."""
    for e in range(indptr[v], indptr[v + 1]):
        w = indices[e]
        if edge(v, w, e, x, y, z):
            count = queue_push(w, local, count, queue, tail)
    return count


@njit(nogil=True, inline="always")
def _move_front(queue, start, stop):
    """Moves queue[start:stop] to the front; returns its length (a forward copy, safe for overlapping ranges)."""
    for k in range(stop - start):
        queue[k] = queue[start + k]
    return stop - start


@njit(nogil=True, inline="always")
def advance(visit, pull, context, queue, tail, frontier):
    """Runs the pass of the nodes in ``queue[0:tail[0]]`` until none is left; returns how many entries the
    queue holds (without ``wrap``: every node queued, once each, in ``queue[:returned]``), or -1 where it gave
    up past ``frontier.limit`` visits."""
    head = 0
    local = np.empty(LOCAL_QUEUE, dtype=queue.dtype)
    chunks = frontier.chunks
    visits = 0
    while head < tail[0]:
        stop = tail[0]
        if frontier.limit and visits > frontier.limit:
            return -1
        if stop - head < frontier.parallel_min:
            count = visit(queue[head], context, local, 0, queue, tail)
            queue_flush(local, count, queue, tail)
            head += 1
            visits += 1
            if frontier.wrap and head >= frontier.wrap:
                tail[0] = _move_front(queue, head, tail[0])
                head = 0
            continue
        if frontier.wrap and head > 0:
            stop = _move_front(queue, head, stop)
            tail[0] = stop
            head = 0
        if frontier.pull_share > 0 and stop - head > frontier.pull_share * (frontier.candidates - stop):
            for part in prange(chunks):
                first, last = chunk_range(part, chunks, frontier.nodes)
                pulled = np.empty(LOCAL_QUEUE, dtype=queue.dtype)
                held = 0
                for v in range(first, last):
                    if pull(v, context):
                        held = queue_push(v, pulled, held, queue, tail)
                queue_flush(pulled, held, queue, tail)
        else:
            for chunk in prange(chunks):
                start, end = chunk_range(chunk, chunks, stop - head)
                mine = np.empty(LOCAL_QUEUE, dtype=queue.dtype)
                count = 0
                for i in range(head + start, head + end):
                    count = visit(queue[i], context, mine, count, queue, tail)
                queue_flush(mine, count, queue, tail)
        visits += stop - head
        head = stop
    return head


# ---- searches: one node or one pair, on the calling thread, stopping at the first witness ----------------


@njit(nogil=True, inline="always")
def append_step(step, queue, tail):
    """Appends what a per-edge function answered (an entry, ``SKIP`` or ``FOUND``); returns (tail, found)."""
    if step >= 0:
        queue[tail] = step
        return tail + 1, False
    return tail, step == FOUND


@njit(nogil=True, inline="always")
def search_edges(v, indptr, indices, edge, x, y, z, queue, tail):
    """Calls ``edge(v, w, e, x, y, z)`` for every edge v -> w at position e of the CSR graph (indptr,
    indices), appending the entries it answers, until one is ``FOUND``; returns (tail, found)."""
    for e in range(indptr[v], indptr[v + 1]):
        tail, found = append_step(edge(v, indices[e], e, x, y, z), queue, tail)
        if found:
            return tail, True
    return tail, False


@njit(nogil=True, inline="always")
def search_level(visit, x, y, z, queue, head, tail):
    """Visits the level ``queue[head:tail]``, the next one appended behind it, until a visit finds; returns
    (tail, found)."""
    for i in range(head, tail):
        tail, found = visit(queue[i], x, y, z, queue, tail)
        if found:
            return tail, True
    return tail, False


@njit(nogil=True, inline="always")
def search(visit, x, y, z, queue, tail):
    """Breadth first from the nodes in ``queue[:tail]`` until a visit finds or none is left; returns (tail,
    found, levels visited): every node queued in ``queue[:tail]``."""
    head = 0
    levels = 0
    while head < tail:
        levels += 1
        stop = tail
        tail, found = search_level(visit, x, y, z, queue, head, tail)
        if found:
            return tail, True, levels
        head = stop
    return tail, False, levels
