"""Descendants and ancestors of a node on one version of a graph: counted cheaply, listed page by page.

A node's descendants are read off the labels when one dimension's DFS tree holds exactly them (GRAIL's
interval and the tree's coincide) and no pending update touches what the node reaches: the count is a
difference of running totals, and a page is found by scanning node ids in order against the interval
(nothing held but the page). Otherwise one search on the version's graph (``traversal.walk``) collects
them into a bit set over the node ids (an eighth of a byte a node), from which pages are read in id order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
from numba import njit

from .pending import RM_UP, UP_NO, Pending, removal_mask
from .query import HotArrays, SearchBuffers
from .traversal import count_keys, walk
from .views import GraphViews

__all__ = ["Listing", "ReachCount", "PAGE", "label_span", "count_reached", "listing"]

PAGE = 65536  # ids a page holds unless asked otherwise

# Fills ``out`` with up to ``wanted`` ids from ``start`` on; returns (how many, the id to go on from).
Scan = Callable[[int, int, np.ndarray], tuple[int, int]]


class ReachCount(NamedTuple):
    """How many nodes a node reaches (or is reached from), and how that was found: ``"labels"`` (read off
    the labels at once) or ``"traversal"`` (a counting search)."""

    total: int
    method: str


def label_span(views: GraphViews, pending: Pending, u: int) -> tuple[int, int, int] | None:
    """(dimension, lo, hi) when the descendants of node u in the version are exactly the DAG nodes of
    post-orders lo..hi in that dimension, else None.

    A node's labels bound its descendants' post-orders by [lo, hi] (GRAIL's interval) and its DFS tree's by
    [tree_lo, hi], a range that holds nothing else; where lo == tree_lo the two coincide. That stays true in a
    version where the node reaches no removed edge, no split component and no added edge (its masks say)."""
    if u >= pending.n_base:
        return None
    c = int(views.comp[u])
    if pending.flags and (removal_mask(pending, u, c, RM_UP) | pending.masks[c, UP_NO]):
        return None
    a = views.arrays
    lo, tree_lo, hi = np.asarray(a.lo[c]), np.asarray(a.tree_lo[c]), np.asarray(a.hi[c])
    exact = np.flatnonzero(lo == tree_lo)
    if exact.size == 0:
        return None
    k = int(exact[0])
    return k, int(lo[k]), int(hi[k])


def _walk_keys(
    views: GraphViews,
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    u: int,
    forward: bool,
    consume: Callable[[np.ndarray, int], int],
) -> int:
    """``consume(keys, count)`` of the keys a walk from node u visits (``forward`` or backward)."""
    side = views.forward() if forward else views.backward()
    with pool.take() as (stamp, queue, mark):
        count = walk(side, pending, hot, u, forward, stamp, mark, queue)
        return consume(queue, count)


def count_reached(
    views: GraphViews, pending: Pending, hot: HotArrays, pool: SearchBuffers, u: int, forward: bool
) -> ReachCount:
    """How many nodes node u reaches (``forward``) or is reached from, itself excepted: off the labels where
    they hold it, else by a counting search (no listing is made)."""
    span = label_span(views, pending, u) if forward else None
    if span is not None:
        k, lo, hi = span
        before = views.post_order()[1]
        return ReachCount(int(before[k, hi + 1] - before[k, lo]) - 1, "labels")
    mem_indptr, _ = views.members()
    n_dag = views.num_dag_nodes
    total = _walk_keys(
        views, pending, hot, pool, u, forward, lambda keys, count: int(count_keys(keys, count, n_dag, mem_indptr))
    )
    return ReachCount(total - 1, "traversal")


@njit(nogil=True, cache=True)
def _scan_span(comp, post, k, lo, hi, skip, start, stop, wanted, out):
    """Node ids from ``start`` (below ``stop``) whose DAG node's post-order in dimension k (``post[:, k]``)
    lies in lo..hi, ``skip`` left out, until ``wanted`` are in ``out``; returns (how many, where it stopped)."""
    written = 0
    x = start
    while x < stop and written < wanted:
        q = post[comp[x], k]
        if lo <= q <= hi and x != skip:
            out[written] = x
            written += 1
        x += 1
    return written, x


@njit(nogil=True, cache=True)
def _scan_bits(bits, start, stop, wanted, out):
    """As ``_scan_span`` over the ids set in a bit set."""
    written = 0
    x = start
    while x < stop and written < wanted:
        word = bits[x >> 6] >> np.uint64(x & 63)
        if word == 0:
            x = (x | 63) + 1
            continue
        if word & np.uint64(1):
            out[written] = x
            written += 1
        x += 1
    return written, min(x, stop)


@njit(nogil=True, cache=True)
def _keys_to_bits(keys, count, n_dag, mem_indptr, mem, skip, bits):
    """Set the bits of the nodes of ``keys[:count]``, ``skip`` left out; returns how many."""
    total = 0
    for i in range(count):
        k = keys[i]
        if k < n_dag:
            for j in range(mem_indptr[k], mem_indptr[k + 1]):
                m = mem[j]
                if m != skip:
                    bits[m >> 6] |= np.uint64(1) << np.uint64(m & 63)
                    total += 1
        elif k - n_dag != skip:
            m = k - n_dag
            bits[m >> 6] |= np.uint64(1) << np.uint64(m & 63)
            total += 1
    return total


class Listing:
    """The nodes one node reaches (or that reach it), itself excepted, in id order: ``count``, ``method``
    (as ``ReachCount``), and pages of ids (int64 arrays) read on demand."""

    def __init__(self, count: int, method: str, size: int, scan: Scan) -> None:
        self.count = count
        self.method = method
        self._size = size  # ids lie below it
        self._scan = scan  # (start, wanted, out) -> (written, next start)

    def pages(self, offset: int = 0, limit: int | None = None, size: int = PAGE) -> Iterator[np.ndarray]:
        """The ids from the ``offset``-th on (at most ``limit``), ``size`` at a time."""
        left = self.count - offset if limit is None else min(limit, self.count - offset)
        position = self.skip(offset)
        while left > 0:
            page, position = self.read(position, min(size, left))
            if page.size == 0:
                return
            left -= page.size
            yield page

    def page(self, offset: int = 0, limit: int | None = None) -> np.ndarray:
        """The ids from the ``offset``-th on, at most ``limit`` (all: the whole listing)."""
        parts = list(self.pages(offset, limit, max(1, self.count)))
        return parts[0] if len(parts) == 1 else np.concatenate([np.zeros(0, dtype=np.int64), *parts])

    def read(self, position: int, wanted: int) -> tuple[np.ndarray, int]:
        """(up to ``wanted`` ids from id ``position`` on, the id to go on from): what ``pages`` reads a page at
        a time, for a reader that keeps nothing but the position between pages."""
        page = np.empty(wanted, dtype=np.int64)
        written, position = self._scan(position, wanted, page)
        return page[:written], position

    def skip(self, offset: int) -> int:
        """The id to read from so that ``offset`` ids are skipped."""
        position = 0
        buffer = np.empty(min(max(offset, 1), PAGE), dtype=np.int64)
        while offset > 0 and position < self._size:
            written, position = self._scan(position, min(offset, buffer.size), buffer)
            offset -= written
        return position


def listing(
    views: GraphViews, pending: Pending, hot: HotArrays, pool: SearchBuffers, num_nodes: int, u: int, forward: bool
) -> Listing:
    """The descendants (``forward``) or ancestors of node u on the version ``pending`` (``num_nodes``
    nodes), as a ``Listing``: off the labels (no search, nothing held) where they hold it, else one search
    into a bit set."""
    span = label_span(views, pending, u) if forward else None
    if span is not None:
        k, lo, hi = span
        count = count_reached(views, pending, hot, pool, u, True).total
        comp, post, n_base = views.comp, views.arrays.hi, pending.n_base

        def scan_span(start: int, wanted: int, out: np.ndarray) -> tuple[int, int]:
            written, stop = _scan_span(comp, post, k, lo, hi, u, start, n_base, wanted, out)
            return int(written), int(stop)

        return Listing(count, "labels", n_base, scan_span)
    mem_indptr, mem = views.members()
    n_dag = views.num_dag_nodes
    bits = np.zeros((num_nodes + 63) // 64, dtype=np.uint64)
    count = _walk_keys(
        views,
        pending,
        hot,
        pool,
        u,
        forward,
        lambda keys, n: int(_keys_to_bits(keys, n, n_dag, mem_indptr, mem, u, bits)),
    )

    def scan_bits(start: int, wanted: int, out: np.ndarray) -> tuple[int, int]:
        written, stop = _scan_bits(bits, start, num_nodes, wanted, out)
        return int(written), int(stop)

    return Listing(count, "traversal", num_nodes, scan_bits)
