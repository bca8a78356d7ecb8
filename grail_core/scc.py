"""Strongly connected components in parallel: trim, forward-backward, coloring, then Tarjan for the rest.

This is Slota, Rajamanickam and Madduri's Multistep (IPDPS 2014) with a complete trim:

1. trim: a node with no live parent or no live child is a component of its own; removing it may
   strand its neighbours, so the trim peels until none is left (Kahn's algorithm from both sides;
   a DAG vanishes entirely here, and so does a 1M-node chain, one node at a time);
2. forward-backward: the nodes both reachable from and reaching a pivot of high in x out degree are
   its component, the giant one of a real graph;
3. coloring: every live node takes the largest id that reaches it (max-label propagation); a node
   that keeps its own id is a root, and the nodes of its color that reach it are its component. Each
   round removes at least the component of the largest id; the rounds stop when one removes too few,
   or when a round's propagation has made more visits than Tarjan would (``SccOptions.coloring_visits``:
   on deep graphs a color may rise dozens of times at each node);
4. Tarjan's algorithm, serially, on whatever is left (nothing on R-MAT graphs; most of a deep graph whose
   components span many levels, where the coloring gives up).

Every frontier (the trim's queue, a BFS, a propagation round) is a queue that runs serially while it
is short and in parallel levels once it is long (``grail_core.parallel``), so deep graphs cost what a
serial queue costs. The result does not depend on the schedule: components are numbered by their
smallest node id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from .frontier import Frontier, advance, no_pull, push_edges
from .graph import Digraph, WorkCallback
from .parallel import (
    LOCAL_QUEUE,
    PARALLEL_MIN_NODES,
    atomic_add,
    atomic_cas,
    atomic_max,
    atomic_min,
    chunk_count,
    chunk_range,
    exclusive_scan,
    queue_flush,
    queue_push,
)

__all__ = ["LIVE", "SccOptions", "finish_components", "strongly_connected_components", "tarjan_components"]

LIVE = -1  # label of a node not yet placed in a component


@dataclass(frozen=True)
class SccOptions:
    """Thresholds of the schedule; tests set them small to take every path on tiny graphs."""

    parallel_min_nodes: int = PARALLEL_MIN_NODES
    serial_below: int = 4096  # live nodes left for Tarjan without a coloring round
    min_round_share: float = 0.01  # a coloring round that removes less than this share of the live nodes is the last
    # Visits per live node and thread after which a coloring round gives up and Tarjan, serial, takes the
    # rest (a visit costs about what Tarjan spends on a node): a node's color rises once per larger id that
    # reaches it sooner, on deep graphs whose components span many levels dozens of times
    # (benchmarks/results/frontier-coloring-vm.md).
    coloring_visits: float = 1.0


# ---- trim ------------------------------------------------------------------------------------------


@njit(nogil=True, inline="always")
def _lose_neighbour(v, w, e, label, degree, _):
    """v left the graph: its live neighbour w loses a parent or a child (``degree``: in- or out-degrees); w
    leaves too when that was its last."""
    return label[w] == LIVE and atomic_add(degree, w, -1) == 1 and atomic_cas(label, w, LIVE, w) == LIVE


@njit(nogil=True, inline="always")
def _trim_visit(v, context, local, count, queue, tail):
    out_indptr, out_indices, in_indptr, in_indices, label, indeg, outdeg = context
    count = push_edges(v, out_indptr, out_indices, _lose_neighbour, label, indeg, None, local, count, queue, tail)
    return push_edges(v, in_indptr, in_indices, _lose_neighbour, label, outdeg, None, local, count, queue, tail)


@njit(nogil=True, parallel=True, cache=True)
def _live_degrees(out_indptr, out_indices, in_indptr, in_indices, label, indeg, outdeg, queue, tail, all_live, chunks):
    """Live in- and out-degrees of the live nodes; the live nodes with either at zero start the trim.

    ``all_live``: no node is placed yet, so the degrees are the rows' lengths.
    """
    n = label.size
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, n)
        local = np.empty(LOCAL_QUEUE, dtype=queue.dtype)
        count = 0
        for v in range(start, stop):
            if label[v] != LIVE:
                continue
            d_in = in_indptr[v + 1] - in_indptr[v]
            d_out = out_indptr[v + 1] - out_indptr[v]
            if not all_live:
                d_in = 0
                for e in range(in_indptr[v], in_indptr[v + 1]):
                    d_in += label[in_indices[e]] == LIVE
                d_out = 0
                for e in range(out_indptr[v], out_indptr[v + 1]):
                    d_out += label[out_indices[e]] == LIVE
            indeg[v] = d_in
            outdeg[v] = d_out
            if d_in == 0 or d_out == 0:
                count = queue_push(v, local, count, queue, tail)
        queue_flush(local, count, queue, tail)
    # Claimed only now: a node's degrees count every neighbour live at the start.
    for i in prange(tail[0]):
        label[queue[i]] = queue[i]


@njit(nogil=True, parallel=True, cache=True)
def _trim_queue(out_indptr, out_indices, in_indptr, in_indices, label, indeg, outdeg, queue, tail, frontier):
    context = (out_indptr, out_indices, in_indptr, in_indices, label, indeg, outdeg)
    return advance(_trim_visit, no_pull, context, queue, tail, frontier)


# ---- forward-backward ------------------------------------------------------------------------------


@njit(nogil=True, parallel=True, cache=True)
def _pivot(indeg, outdeg, label, chunks):
    """The live node with the largest live (in-degree) x (out-degree), smallest id first; -1 when none is live."""
    n = label.size
    best = np.full(chunks, -1, dtype=np.int64)
    scores = np.full(chunks, -1, dtype=np.int64)
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, n)
        for v in range(start, stop):
            if label[v] == LIVE:
                score = np.int64(indeg[v]) * np.int64(outdeg[v])
                if score > scores[chunk]:
                    scores[chunk] = score
                    best[chunk] = v
    pick = -1
    top = -1
    for chunk in range(chunks):
        if scores[chunk] > top:
            top = scores[chunk]
            pick = best[chunk]
    return pick


@njit(nogil=True, inline="always")
def _reach_child(v, w, e, mark, allowed, value):
    """w, marked ``allowed``, is reached (marked ``value``) from v."""
    return mark[w] == allowed and atomic_cas(mark, w, allowed, value) == allowed


@njit(nogil=True, inline="always")
def _reach_children(v, context, local, count, queue, tail):
    indptr, indices, _, _, mark, allowed, value = context
    return push_edges(v, indptr, indices, _reach_child, mark, allowed, value, local, count, queue, tail)


# A reach level goes bottom-up once its frontier holds more than this share of the nodes it may still
# reach (Beamer et al.'s direction-optimizing BFS): on a giant component the middle levels reach most of
# the graph, and a node asking its parents stops at the first reached one, where pushing from the
# frontier would try every edge.
_BOTTOM_UP_SHARE = 1 / 16


# Not inlined (numba 0.6x's inliner breaks this function inside the operator's parallel loop); the call
# is cheap beside the parents it reads.
@njit(nogil=True, cache=True)
def _reach_from_parents(v, context):
    """Bottom-up: v, marked ``allowed``, is reached when one of its parents is (a node reached in this same
    pass counts too: reachability, not distance, is what is wanted)."""
    _, _, rindptr, rindices, mark, allowed, value = context
    if mark[v] != allowed:
        return False
    for e in range(rindptr[v], rindptr[v + 1]):
        if mark[rindices[e]] == value:
            mark[v] = value
            return True
    return False


@njit(nogil=True, parallel=True, cache=True)
def _reach(indptr, indices, rindptr, rindices, mark, allowed, value, queue, tail, frontier):
    """BFS from the nodes already in ``queue`` (marked ``value``) along ``indptr`` through the nodes marked
    ``allowed``, marking them ``value``; ``rindptr``/``rindices``: the reverse CSR of the bottom-up levels.
    Returns how many nodes the queue holds (every node reached, once)."""
    context = (indptr, indices, rindptr, rindices, mark, allowed, value)
    return advance(_reach_children, _reach_from_parents, context, queue, tail, frontier)


@njit(nogil=True, parallel=True, cache=True)
def _live_marks(label, mark):
    """mark = 1 for live nodes, 0 for placed ones."""
    for v in prange(label.size):
        mark[v] = 1 if label[v] == LIVE else 0


@njit(nogil=True, parallel=True, cache=True)
def _label_marked(queue, count, mark, value, label, name):
    """The nodes of ``queue[:count]`` whose mark is ``value`` get label ``name``; returns how many."""
    placed = 0
    for i in prange(count):
        v = queue[i]
        if mark[v] == value:
            label[v] = name
            placed += 1
    return placed


# ---- coloring --------------------------------------------------------------------------------------


@njit(nogil=True, inline="always")
def _pass_color(v, w, e, label, color, queued):
    """w takes v's color when that is larger; it is queued unless it waits already."""
    c = color[v]
    if label[w] == LIVE and color[w] < c and atomic_max(color, w, c) < c:
        return queued[w] == 0 and atomic_cas(queued, w, 0, 1) == 0
    return False


@njit(nogil=True, inline="always")
def _color_visit(v, context, local, count, queue, tail):
    indptr, indices, label, color, queued = context
    # Unqueued before its color is read (the atomic orders the two): a raise that comes after the read finds
    # v unqueued and queues it again.
    atomic_cas(queued, v, 1, 0)
    return push_edges(v, indptr, indices, _pass_color, label, color, queued, local, count, queue, tail)


@njit(nogil=True, parallel=True, cache=True)
def _propagate_colors(indptr, indices, label, color, queued, queue, tail, frontier):
    """Largest-id propagation to a fixpoint; ``queue`` (2n entries, ``frontier.wrap`` n) starts with every
    live node. A node waits in the queue at most once at a time (``queued``), but may come back after its
    visit: the wrap keeps 2n entries enough. -1 where it gave up past ``frontier.limit`` visits."""
    return advance(_color_visit, no_pull, (indptr, indices, label, color, queued), queue, tail, frontier)


@njit(nogil=True, parallel=True, cache=True)
def _color_roots(label, color, queue, tail, mark, chunks):
    """Every live node starts with its own id as its color; afterwards, the roots (color == own id)."""
    n = label.size
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, n)
        local = np.empty(LOCAL_QUEUE, dtype=queue.dtype)
        count = 0
        for v in range(start, stop):
            mark[v] = 0
            if label[v] == LIVE and color[v] == v:
                mark[v] = 1
                count = queue_push(v, local, count, queue, tail)
        queue_flush(local, count, queue, tail)


@njit(nogil=True, inline="always")
def _join_component(v, u, e, label, color, mark):
    """A live parent u of v of the same color joins v's component."""
    return label[u] == LIVE and mark[u] == 0 and color[u] == color[v] and atomic_cas(mark, u, 0, 1) == 0


@njit(nogil=True, inline="always")
def _component_visit(v, context, local, count, queue, tail):
    in_indptr, in_indices, label, color, mark = context
    return push_edges(v, in_indptr, in_indices, _join_component, label, color, mark, local, count, queue, tail)


@njit(nogil=True, parallel=True, cache=True)
def _collect_components(in_indptr, in_indices, label, color, mark, queue, tail, frontier):
    """Backward BFS from every root through its own color; every node reached joins its root's component."""
    head = advance(_component_visit, no_pull, (in_indptr, in_indices, label, color, mark), queue, tail, frontier)
    for i in prange(head):
        v = queue[i]
        label[v] = color[v]
    return head


@njit(nogil=True, parallel=True, cache=True)
def _start_coloring(label, color, queued, queue, tail, chunks):
    n = label.size
    for chunk in prange(chunks):
        start, stop = chunk_range(chunk, chunks, n)
        local = np.empty(LOCAL_QUEUE, dtype=queue.dtype)
        count = 0
        for v in range(start, stop):
            color[v] = v
            queued[v] = 0
            if label[v] == LIVE:
                queued[v] = 1
                count = queue_push(v, local, count, queue, tail)
        queue_flush(local, count, queue, tail)


# ---- Tarjan (serial reference, and the remainder) --------------------------------------------------


@njit(nogil=True, cache=True)
def _tarjan_live(indptr, indices, label):
    """Iterative Tarjan over the live nodes; each component gets its first-finished node's id as label."""
    n = indptr.size - 1
    index = np.full(n, -1, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    on_stack = np.zeros(n, dtype=np.bool_)
    scc_stack = np.empty(n, dtype=np.int64)
    call_node = np.empty(n, dtype=np.int64)
    call_edge = np.empty(n, dtype=np.int64)
    next_index = 0
    scc_top = 0
    placed = 0
    for start in range(n):
        if label[start] != LIVE or index[start] >= 0:
            continue
        index[start] = next_index
        low[start] = next_index
        next_index += 1
        scc_stack[scc_top] = start
        scc_top += 1
        on_stack[start] = True
        call_node[0] = start
        call_edge[0] = indptr[start]
        depth = 1
        while depth > 0:
            v = call_node[depth - 1]
            e = call_edge[depth - 1]
            if e < indptr[v + 1]:
                call_edge[depth - 1] = e + 1
                w = indices[e]
                if label[w] != LIVE:
                    continue
                if index[w] < 0:
                    index[w] = next_index
                    low[w] = next_index
                    next_index += 1
                    scc_stack[scc_top] = w
                    scc_top += 1
                    on_stack[w] = True
                    call_node[depth] = w
                    call_edge[depth] = indptr[w]
                    depth += 1
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                depth -= 1
                if low[v] == index[v]:
                    members = 0
                    while True:
                        scc_top -= 1
                        w = scc_stack[scc_top]
                        on_stack[w] = False
                        index[w] = n + v  # finished: no longer LIVE for the rest of the search
                        members += 1
                        if w == v:
                            break
                    placed += members
                if depth > 0:
                    parent = call_node[depth - 1]
                    if low[v] < low[parent]:
                        low[parent] = low[v]
    for v in range(n):
        if label[v] == LIVE:
            label[v] = index[v] - n
    return placed


# ---- numbering ---------------------------------------------------------------------------------------


@njit(nogil=True, parallel=True, cache=True)
def _smallest_members(label, smallest):
    for v in prange(label.size):
        atomic_min(smallest, label[v], v)


@njit(nogil=True, parallel=True, cache=True)
def _representatives(label, smallest, is_first):
    for v in prange(label.size):
        is_first[v] = smallest[label[v]] == v


@njit(nogil=True, parallel=True, cache=True)
def _number(label, smallest, rank, comp):
    for v in prange(label.size):
        comp[v] = rank[smallest[label[v]]]


def _numbered(label: np.ndarray) -> tuple[np.ndarray, int]:
    """Component ids 0..count-1 in the order of each component's smallest node id."""
    n = label.size
    smallest = np.full(n, n, dtype=label.dtype)
    _smallest_members(label, smallest)
    is_first = np.empty(n, dtype=np.int32)
    _representatives(label, smallest, is_first)
    rank = np.empty(n + 1, dtype=np.int64)
    exclusive_scan(is_first, rank)
    count = int(rank[n])
    del is_first
    comp = np.empty(n, dtype=np.int32 if count < 2**31 - 1 else np.int64)
    _number(label, smallest, rank, comp)
    return comp, count


def tarjan_components(graph: Digraph) -> tuple[np.ndarray, int]:
    """The serial reference: Tarjan's algorithm, components numbered as ``strongly_connected_components``."""
    label = np.full(graph.num_nodes, LIVE, dtype=graph.out_indices.dtype)
    _tarjan_live(graph.out_indptr, graph.out_indices, label)
    return _numbered(label)


@njit(nogil=True, cache=True)
def _induced_live(out_indptr, out_indices, label, new_id):
    """The subgraph of the live nodes on ids 0..k-1 (``new_id`` maps to them), and the live nodes' ids."""
    k = 0
    for v in range(label.size):
        if label[v] == LIVE:
            new_id[v] = k
            k += 1
    ids = np.empty(k, dtype=out_indices.dtype)
    indptr = np.zeros(k + 1, dtype=np.int64)
    for v in range(label.size):
        if label[v] == LIVE:
            ids[new_id[v]] = v
            for e in range(out_indptr[v], out_indptr[v + 1]):
                indptr[new_id[v] + 1] += label[out_indices[e]] == LIVE
    for i in range(k):
        indptr[i + 1] += indptr[i]
    indices = np.empty(indptr[k], dtype=out_indices.dtype)
    at = 0
    for i in range(k):
        v = ids[i]
        for e in range(out_indptr[v], out_indptr[v + 1]):
            w = out_indices[e]
            if label[w] == LIVE:
                indices[at] = new_id[w]
                at += 1
    return indptr, indices, ids


@njit(nogil=True, parallel=True, cache=True)
def _adopt(label, ids, sub_label):
    for i in prange(ids.size):
        label[ids[i]] = ids[sub_label[i]]


class _Components:
    """The state of one run of the schedule: labels, live degrees, the frontier queue and marks."""

    def __init__(
        self, graph: Digraph, options: SccOptions, report: WorkCallback | None, label: np.ndarray | None
    ) -> None:
        n = graph.num_nodes
        dtype = graph.out_indices.dtype
        self.graph, self.options, self.report = graph, options, report
        self.chunks = chunk_count(n)
        self.label = np.full(n, LIVE, dtype=dtype) if label is None else label.astype(dtype)
        self.indeg = np.empty(n, dtype=dtype)
        self.outdeg = np.empty(n, dtype=dtype)
        self.queue = np.empty(2 * n, dtype=dtype)
        self.tail = np.zeros(1, dtype=np.int64)
        self.mark = np.zeros(n, dtype=np.int8)
        self.live = n if label is None else int(np.count_nonzero(self.label == LIVE))

    def _placed(self, count: int) -> None:
        self.live -= int(count)
        if self.report:
            self.report(count)

    def trim(self) -> None:
        g, o = self.graph, self.options
        arrays = (g.out_indptr, g.out_indices, g.in_indptr, g.in_indices, self.label, self.indeg, self.outdeg)
        self.tail[0] = 0
        _live_degrees(*arrays, self.queue, self.tail, self.live == self.label.size, self.chunks)
        self._placed(_trim_queue(*arrays, self.queue, self.tail, Frontier.over(self.label.size, o.parallel_min_nodes)))

    def forward_backward(self) -> None:
        g, mark, queue, tail = self.graph, self.mark, self.queue, self.tail
        n, parallel_min = self.label.size, self.options.parallel_min_nodes
        pivot = _pivot(self.indeg, self.outdeg, self.label, self.chunks)
        _live_marks(self.label, mark)
        mark[pivot] = 2
        queue[0] = pivot
        tail[0] = 1
        frontier = Frontier.over(n, parallel_min, pull_share=_BOTTOM_UP_SHARE, candidates=self.live)
        forward = _reach(g.out_indptr, g.out_indices, g.in_indptr, g.in_indices, mark, 1, 2, queue, tail, frontier)
        mark[pivot] = 3
        queue[0] = pivot
        tail[0] = 1
        frontier = Frontier.over(n, parallel_min, pull_share=_BOTTOM_UP_SHARE, candidates=forward)
        reached = _reach(g.in_indptr, g.in_indices, g.out_indptr, g.out_indices, mark, 2, 3, queue, tail, frontier)
        self._placed(_label_marked(queue, reached, mark, 3, self.label, pivot))

    def coloring_round(self, color: np.ndarray, queued: np.ndarray) -> bool:
        """One round of coloring; False where its propagation gave up (nothing placed)."""
        g, label, queue, tail = self.graph, self.label, self.queue, self.tail
        n, parallel_min = label.size, self.options.parallel_min_nodes
        tail[0] = 0
        _start_coloring(label, color, queued, queue, tail, self.chunks)
        visits = max(1, int(self.options.coloring_visits * self.live * numba.get_num_threads()))
        frontier = Frontier.over(n, parallel_min, wrap=n, limit=visits)
        if _propagate_colors(g.out_indptr, g.out_indices, label, color, queued, queue, tail, frontier) < 0:
            return False
        tail[0] = 0
        _color_roots(label, color, queue, tail, self.mark, self.chunks)
        frontier = Frontier.over(n, parallel_min)
        self._placed(_collect_components(g.in_indptr, g.in_indices, label, color, self.mark, queue, tail, frontier))
        return True

    def remainder(self) -> None:
        """Tarjan on the subgraph of the nodes still live (its arrays sized by them, not by the graph)."""
        indptr, indices, ids = _induced_live(self.graph.out_indptr, self.graph.out_indices, self.label, self.indeg)
        sub_label = np.full(ids.size, LIVE, dtype=ids.dtype)
        _tarjan_live(indptr, indices, sub_label)
        _adopt(self.label, ids, sub_label)
        self._placed(ids.size)


def finish_components(
    graph: Digraph,
    label: np.ndarray | None = None,
    options: SccOptions | None = None,
    report: WorkCallback | None = None,
) -> np.ndarray:
    """Every node's component label (the id of one of its members), from ``label`` where some nodes are
    already placed (``LIVE`` for the others; the GPU build hands over what its schedule left) or none.

    ``report`` gets the nodes placed in a component as they are placed.
    """
    opts = options or SccOptions()
    state = _Components(graph, opts, report, label)
    state.trim()
    if state.live:
        state.forward_backward()
        state.trim()
    if state.live > opts.serial_below:
        color = np.empty_like(state.label)
        queued = np.empty(state.label.size, dtype=np.int8)
        while state.live > opts.serial_below:
            before = state.live
            if not state.coloring_round(color, queued):
                break
            state.trim()
            if before - state.live < opts.min_round_share * before:
                break
    if state.live:
        state.remainder()
    return state.label


def strongly_connected_components(
    graph: Digraph, options: SccOptions | None = None, report: WorkCallback | None = None
) -> tuple[np.ndarray, int]:
    """Component id of every node (components numbered by their smallest node id) and their number.

    ``report`` gets the nodes placed in a component as they are placed (n in all).
    """
    return _numbered(finish_components(graph, None, options, report))
