"""Searches over the index's graph as one version has it (its edge updates: ``grail_core.pending``).

- ``walk``: a search over *keys*: a key below N (the DAG's size) is a whole strongly connected component
  (all its members reach each other), a key ``N + x`` is the single node x, used for the members of a
  component that a removal may have split and for nodes that updates added. With a target it answers
  reachability, depth first, every key it meets tested by ``pending.verdict`` (a witness ends the search, a
  key that cannot reach the target is not entered); without one it lists everything reachable (descendants
  forward, ancestors backward). A listing runs on ``frontier.search``, reachability on two stacks; a key's
  visit (``_expand``) is one for both, its edges handed to ``frontier.search_edges``.
- ``shortest_path``: a bidirectional breadth-first search over nodes (the witness must be a path of the
  graph, also inside a component), each side expanding only nodes that the same tests do not rule out:
  forward only nodes that may still reach the target, backward only nodes the source may reach. Both sides
  expand whole levels, the smaller frontier first; the first level on which they meet is finished and its
  shortest meeting kept, so the path is a shortest one. A level runs on ``frontier.search_level``; one visit
  serves either side, whose direction, marks and buffers are its context (``_PathSide``).

Everything here runs on the CPU.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from .borrowed import borrowed
from .frontier import FOUND, SKIP, append_step, search, search_edges, search_level
from .pending import (
    BROKEN_COMP,
    DEAD_DAG_EDGE,
    INTO_COMP,
    INTO_NODE,
    OUT_OF_COMP,
    OUT_OF_NODE,
    REMOVED_EDGE,
    comp_broken,
    entry_alive,
    first_entry,
    marked,
    next_entry,
    verdict,
)
from .query import HotArrays, classify
from .records import NO, YES

__all__ = [
    "Side",
    "walk",
    "reaches",
    "walk_pairs_parallel",
    "shortest_path",
    "keys_to_nodes",
    "count_keys",
    "transpose_with_edges",
    "group_members",
    "find_edge",
]


class Side(NamedTuple):
    """The base graph in one direction: children forward, parents backward."""

    indptr: np.ndarray  # node CSR
    indices: np.ndarray
    edge: np.ndarray  # forward-CSR position of each entry (empty forward: the entries' own positions)
    dag_indptr: np.ndarray  # DAG CSR
    dag_indices: np.ndarray
    dag_edge: np.ndarray  # forward DAG-CSR position of each entry (empty forward)
    comp: np.ndarray  # node -> DAG node
    mem_indptr: np.ndarray  # DAG node -> its members, CSR
    mem: np.ndarray


@njit(nogil=True)
def _entry_edge(side_edge, f):
    return f if side_edge.size == 0 else side_edge[f]


@njit(nogil=True)
def _key(g, p, y):
    """(key, DAG node or -1) of node y."""
    n_dag = g.dag_indptr.size - 1
    if y < p.n_base:
        c = np.int64(g.comp[y])
        if comp_broken(p, c):
            return n_dag + y, c
        return c, c
    return n_dag + y, -1


@njit(nogil=True)
def _other_end(p, i, forward):
    return p.dst[i] if forward else p.src[i]


# ---- walks over keys: listings, and reachability searched from both ends ---------------------------------
#
# A walk runs on ``frontier.search`` (a listing: breadth first) or on its own two stacks (``reaches``); the
# visit of a key (``_expand``) hands its edges to ``frontier.search_edges`` with a per-edge function. The
# per-edge functions read three small contexts, never a whole ``Side`` or ``Pending``: numba reference-counts
# every array of a tuple at every call that binds it, and inlines a small function where a large one stays a
# call.


class _Ends(NamedTuple):
    """What the per-edge functions read of a side (``Side``): each entry's forward position, node -> DAG node."""

    edge: np.ndarray
    dag_edge: np.ndarray
    comp: np.ndarray
    n_dag: int


class _Marks(NamedTuple):
    """What the per-edge functions read of the version's updates (``Pending``): the removal bit sets, the
    table of their stamps, the updates in effect and the base graph's nodes."""

    removed_bits: np.ndarray
    dead_bits: np.ndarray
    broken_bits: np.ndarray
    table: np.ndarray
    seq: int
    n_base: int


class _Stamps(NamedTuple):
    """A side's visit stamps: ``mine`` its own mark, ``theirs`` the other side's (-1: none); ``broken[0]``:
    whether the DAG node being visited leads into a broken one."""

    stamp: np.ndarray
    mine: int
    theirs: int
    broken: np.ndarray


class _Walk(NamedTuple):
    """One side of a walk, the visit's context: the per-edge functions' (``ends``, ``marks``, ``stamps``), the
    direction, and with ``test`` the pair (s and t, their DAG nodes or -1) whose verdicts the keys take."""

    ends: _Ends
    marks: _Marks
    stamps: _Stamps
    forward: bool
    h: HotArrays
    test: bool
    s: int
    cs: int
    t: int
    ct: int


_NO_NODE = np.int64(-1)  # the node of a DAG node's key; the DAG node of a node that updates added


@njit(nogil=True)
def _walk(g, p, h, stamp, mine, theirs, forward, test, s, cs, t, ct):
    """A ``_Walk`` of one type whatever the integers' (one compiled ``_expand``)."""
    i = np.int64
    ends = _Ends(g.edge, g.dag_edge, g.comp, i(g.dag_indptr.size - 1))
    marks = _Marks(p.removed_bits, p.dead_bits, p.broken_bits, p.table, i(p.seq), i(p.n_base))
    stamps = _Stamps(stamp, i(mine), i(theirs), np.zeros(1, dtype=np.bool_))
    return _Walk(ends, marks, stamps, forward, h, test, i(s), i(cs), i(t), i(ct))


@njit(nogil=True)
def _enter(k, key):
    """A key met along an edge: appended unless seen; ``FOUND`` where the other side has seen it."""
    if k.stamp[key] == k.mine:
        return SKIP
    if k.stamp[key] == k.theirs:
        return FOUND
    k.stamp[key] = k.mine
    return key


@njit(nogil=True)
def _node_key(a, u, y):
    """The key of node y: its DAG node's, unless that may have split or y is a node updates added."""
    if y < u.n_base and not marked(u.broken_bits, u.table, u.seq, BROKEN_COMP, a.comp[y]):
        return np.int64(a.comp[y])
    return a.n_dag + y


@njit(nogil=True)
def _into_dag_node(x, w, e, a, u, k):
    """DAG edge x -> w: w's key, unless the edge is dead; a broken w is entered by its members' edges."""
    if marked(u.dead_bits, u.table, u.seq, DEAD_DAG_EDGE, _entry_edge(a.dag_edge, e)):
        return SKIP
    if marked(u.broken_bits, u.table, u.seq, BROKEN_COMP, w):
        k.broken[0] = True
        return SKIP
    return _enter(k, np.int64(w))


@njit(nogil=True)
def _into_broken(m, y, f, a, u, k):
    """Base edge m -> y from a member of the DAG node being visited: y's node key where it enters another,
    broken one."""
    cy = a.comp[y]
    if cy == a.comp[m] or not marked(u.broken_bits, u.table, u.seq, BROKEN_COMP, cy):
        return SKIP
    if marked(u.removed_bits, u.table, u.seq, REMOVED_EDGE, _entry_edge(a.edge, f)):
        return SKIP
    return _enter(k, a.n_dag + y)


@njit(nogil=True)
def _along_base_edge(y, z, f, a, u, k):
    """Base edge y -> z of a node key: z's key, unless the edge is removed."""
    if marked(u.removed_bits, u.table, u.seq, REMOVED_EDGE, _entry_edge(a.edge, f)):
        return SKIP
    return _enter(k, _node_key(a, u, np.int64(z)))


@njit(nogil=True, inline="always")
def _added_edges(v, kind, p, step, k, queue, tail):
    """``step(v, z, k)`` for every edge that updates added, alive in the version, out of (forward) or into
    DAG node or node v (``kind``: which list; z its other end), appending what it answers; returns (tail,
    found)."""
    forward = kind == OUT_OF_COMP or kind == OUT_OF_NODE
    i = first_entry(p, kind, v)
    while i >= 0:
        if entry_alive(p, i):
            tail, found = append_step(step(v, np.int64(_other_end(p, i, forward)), k), queue, tail)
            if found:
                return tail, True
        i = next_entry(p, kind, i)
    return tail, False


@njit(nogil=True)
def _walk_added(v, z, w):
    """Added edge v -> z of a walk: z's key, unless seen."""
    return _enter(w.stamps, _node_key(w.ends, w.marks, z))


@njit(nogil=True)
def _tested(p, w, queue, start, tail):
    """The keys ``queue[start:tail]`` a visit appended, each by its verdict (forward: 'it reaches t';
    backward: 's reaches it'): 'yes' ends the search, 'no' leaves the key out; returns (tail, found)."""
    h, a, kept = w.h, w.ends, start
    for i in range(start, tail):
        key = np.int64(queue[i])
        node = key - a.n_dag if key >= a.n_dag else _NO_NODE
        c = key if key < a.n_dag else (np.int64(a.comp[node]) if node < p.n_base else _NO_NODE)
        if w.forward:
            base = classify(h.rec_dag, c, h.rec_dag, w.ct, h.label_end) if c >= 0 and w.ct >= 0 else NO
            code = verdict(p, node, c, w.t, w.ct, base)
        else:
            base = classify(h.rec_dag, w.cs, h.rec_dag, c, h.label_end) if c >= 0 and w.cs >= 0 else NO
            code = verdict(p, w.s, w.cs, node, c, base)
        if code == YES:
            return kept, True
        if code != NO:
            queue[kept] = key
            kept += 1
    return kept, False


@njit(nogil=True)
def _expand(x, g, p, w, queue, tail):
    """The visit of key x: every key it leads to in the version's graph (``g``: that direction's view), unseen
    on its side, with ``w.test`` those the verdicts keep; returns (tail, found)."""
    a, u, k = w.ends, w.marks, w.stamps
    start = tail
    if x < a.n_dag:
        k.broken[0] = False
        tail, found = search_edges(x, g.dag_indptr, g.dag_indices, _into_dag_node, a, u, k, queue, tail)
        if found:
            return tail, True
        if k.broken[0]:  # which members of a broken component the edges enter
            for i in range(g.mem_indptr[x], g.mem_indptr[x + 1]):
                tail, found = search_edges(g.mem[i], g.indptr, g.indices, _into_broken, a, u, k, queue, tail)
                if found:
                    return tail, True
        v, kind = x, OUT_OF_COMP if w.forward else INTO_COMP
    else:
        v, kind = x - a.n_dag, OUT_OF_NODE if w.forward else INTO_NODE
        if v < u.n_base:
            tail, found = search_edges(v, g.indptr, g.indices, _along_base_edge, a, u, k, queue, tail)
            if found:
                return tail, True
    tail, found = _added_edges(v, kind, p, _walk_added, w, queue, tail)
    if found or not w.test:
        return tail, found
    return _tested(p, w, queue, start, tail)


@njit(nogil=True, cache=True)
def walk(g, p, h, start, forward, stamp, mark, queue):
    """Every key node ``start`` reaches (``forward``; else that reach it) on the version's graph, breadth
    first: returns how many, ``queue[:count]`` (the start's key first)."""
    g, p, h = borrowed(g), borrowed(p), borrowed(h)
    key, _ = _key(g, p, start)
    stamp[key] = mark
    queue[0] = key
    side = _walk(g, p, h, stamp, mark, -1, forward, False, -1, -1, -1, -1)
    count, _, _ = search(_expand, g, p, side, queue, np.int64(1))
    return count


@njit(nogil=True, cache=True)
def reaches(fw, bw, p, h, s, t, stamp, mark, queue):
    """Whether node s reaches node t on the version's graph: depth first from both ends at once, forward
    from s (keys that may still reach t) and backward from t (keys s may reach), each key tested by its
    verdict; the side that has seen fewer keys goes next, and the first side to run out proves 'no'.
    ``stamp`` takes ``mark`` (forward) and ``mark + 1``; ``queue`` holds two stacks of every key each.
    Depth first, not on the breadth-first ``frontier.search`` (a witness down one branch ends the search
    before a whole level is held); a key's visit is a listing's."""
    if s == t:
        return True
    fw, bw, p, h = borrowed(fw), borrowed(bw), borrowed(p), borrowed(h)
    half = queue.size // 2
    fkey, cs = _key(fw, p, s)
    bkey, ct = _key(fw, p, t)
    stamp[fkey] = mark
    stamp[bkey] = mark + 1
    queue[0] = fkey
    queue[half] = bkey
    ahead = _walk(fw, p, h, stamp, mark, mark + 1, True, True, s, cs, t, ct)
    behind = _walk(bw, p, h, stamp, mark + 1, mark, False, True, s, cs, t, ct)
    ftop, btop = np.int64(1), np.int64(half + 1)
    fseen, bseen = 1, 1
    while ftop > 0 and btop > half:
        if fseen <= bseen:
            ftop -= 1
            before = ftop
            ftop, found = _expand(queue[ftop], fw, p, ahead, queue, ftop)
            fseen += ftop - before
        else:
            btop -= 1
            before = btop
            btop, found = _expand(queue[btop], bw, p, behind, queue, btop)
            bseen += btop - before
        if found:
            return True
    return False


@njit(nogil=True, parallel=True, cache=True)
def walk_pairs_parallel(fw, bw, p, h, pairs, which, answers, stamps, first_mark, queues):
    """Answers of the pairs ``pairs[which]`` on the version's graph (``reaches``), over numba's threads: a
    pair on the stamps and queue of the thread that takes it (``stamps[thread]``, ``queues[thread]``), with
    its own two marks from ``first_mark``."""
    for j in prange(which.size):
        thread = numba.get_thread_id()
        i = which[j]
        answers[i] = reaches(
            borrowed(fw),
            borrowed(bw),
            borrowed(p),
            borrowed(h),
            pairs[i, 0],
            pairs[i, 1],
            stamps[thread],
            np.int32(first_mark + 2 * j),
            queues[thread],
        )


@njit(nogil=True, cache=True)
def keys_to_nodes(keys, count, n_dag, mem_indptr, mem, skip, out):
    """The nodes of ``keys[:count]`` (a DAG node's members, or the node of a node key) into ``out``, without
    ``skip``; returns how many."""
    written = 0
    for i in range(count):
        k = keys[i]
        if k < n_dag:
            for j in range(mem_indptr[k], mem_indptr[k + 1]):
                if mem[j] != skip:
                    out[written] = mem[j]
                    written += 1
        elif k - n_dag != skip:
            out[written] = k - n_dag
            written += 1
    return written


@njit(nogil=True, cache=True)
def count_keys(keys, count, n_dag, mem_indptr):
    """How many nodes ``keys[:count]`` stand for."""
    total = 0
    for i in range(count):
        k = keys[i]
        total += mem_indptr[k + 1] - mem_indptr[k] if k < n_dag else 1
    return total


# ---- shortest witness paths over nodes -----------------------------------------------------------------
#
# Each side expands a level with ``frontier.search_level``: a node's visit hands its base edges to
# ``frontier.search_edges`` with ``_path_step`` and its added ones to ``_added_edges``, then drops the nodes
# the tests rule out (``_kept``): the per-edge function reads only ``_Ends``, ``_Marks`` and ``_Trail``.


class _Trail(NamedTuple):
    """A path side's marks (``mine``, the other side's ``theirs``, ``ruled_out`` for a node the tests
    exclude) and the buffers both sides share: stamps, each node's parent and depth on its side, and
    ``meet``, the shortest meeting so far (its length, forward node, backward node)."""

    stamp: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    meet: np.ndarray
    mine: int
    theirs: int
    ruled_out: int
    forward: bool


class _PathSide(NamedTuple):
    """One side of a path search, the visit's context: the per-edge functions' (``ends``, ``marks``,
    ``trail``), and the far end of the pair (t forward, s backward, with its DAG node or -1) against which
    the tests rule nodes out."""

    ends: _Ends
    marks: _Marks
    trail: _Trail
    h: HotArrays
    end: int
    end_dag: int


@njit(nogil=True)
def _path_side(g, p, h, forward, mine, theirs, ruled_out, end, end_dag, stamp, parent, depth, meet):
    """A ``_PathSide`` of one type whatever the integers' (one compiled visit)."""
    i = np.int64
    ends = _Ends(g.edge, g.dag_edge, g.comp, i(g.dag_indptr.size - 1))
    marks = _Marks(p.removed_bits, p.dead_bits, p.broken_bits, p.table, i(p.seq), i(p.n_base))
    trail = _Trail(stamp, parent, depth, meet, i(mine), i(theirs), i(ruled_out), forward)
    return _PathSide(ends, marks, trail, h, i(end), i(end_dag))


@njit(nogil=True)
def _dag_of(g, p, y):
    return g.comp[y] if y < p.n_base else -1


@njit(nogil=True)
def _ruled_out(h, p, s, cs, t, ct):
    """Whether node s (DAG node cs, -1 for an added node) cannot reach node t on the version's graph."""
    if s == t:
        return False
    base = NO
    if cs >= 0 and ct >= 0:
        base = classify(h.rec_dag, cs, h.rec_dag, ct, h.label_end)
    return verdict(p, s, cs, t, ct, base) == NO


@njit(nogil=True)
def _met_or_entered(k, x, y):
    """Node y met from node x: a meeting with the other side (kept if the shortest), else appended unless
    seen or ruled out on this side."""
    seen = k.stamp[y]
    if seen == k.mine or seen == k.ruled_out:
        return SKIP
    if seen == k.theirs:
        if k.depth[x] + 1 + k.depth[y] < k.meet[0]:
            k.meet[0] = k.depth[x] + 1 + k.depth[y]
            k.meet[1] = x if k.forward else y
            k.meet[2] = y if k.forward else x
        return SKIP
    k.stamp[y] = k.mine
    k.parent[y] = x
    k.depth[y] = k.depth[x] + 1
    return y


@njit(nogil=True)
def _path_step(x, y, f, a, u, k):
    """Base edge x -> y (forward position f): y, unless the edge is removed (``_met_or_entered``)."""
    if marked(u.removed_bits, u.table, u.seq, REMOVED_EDGE, _entry_edge(a.edge, f)):
        return SKIP
    return _met_or_entered(k, x, np.int64(y))


@njit(nogil=True)
def _kept(p, side, queue, start, tail):
    """The nodes ``queue[start:tail]`` a visit appended, less those the tests rule out (forward: they cannot
    reach the far end; backward: it cannot reach them), marked so; returns the new tail."""
    k, h, kept = side.trail, side.h, start
    for i in range(start, tail):
        y = np.int64(queue[i])
        y_dag = np.int64(side.ends.comp[y]) if y < p.n_base else _NO_NODE
        if k.forward:
            excluded = _ruled_out(h, p, y, y_dag, side.end, side.end_dag)
        else:
            excluded = _ruled_out(h, p, side.end, side.end_dag, y, y_dag)
        if excluded:
            k.stamp[y] = k.ruled_out
        else:
            queue[kept] = y
            kept += 1
    return kept


@njit(nogil=True)
def _path_visit(x, g, p, side, queue, tail):
    """The visit of node x on one side: its base edges (none for a node that updates added), then those
    updates added, the nodes not ruled out appended; returns (tail, False): a meeting does not stop the
    level, whose shortest meeting is kept."""
    a, u, k = side.ends, side.marks, side.trail
    start = tail
    if x < u.n_base:
        tail, _ = search_edges(x, g.indptr, g.indices, _path_step, a, u, k, queue, tail)
    tail, _ = _added_edges(x, OUT_OF_NODE if k.forward else INTO_NODE, p, _path_added, k, queue, tail)
    return _kept(p, side, queue, start, tail), False


@njit(nogil=True)
def _path_added(x, y, k):
    return _met_or_entered(k, x, y)


@njit(nogil=True)
def _start(k, node, queue):
    k.stamp[node] = k.mine
    k.parent[node] = -1
    k.depth[node] = 0
    queue[0] = node


@njit(nogil=True)
def _unwind(parent, x, position, step, out):
    """Writes x and its parents into ``out`` from ``position`` on, ``step`` apart."""
    while x != -1:
        out[position] = x
        position += step
        x = parent[x]


@njit(nogil=True, cache=True)
def shortest_path(fw, bw, p, h, s, t, buffers, mark):
    """A shortest path from node s to node t on the version's graph into ``buffers[3][:length]`` (``buffers``:
    stamps, parents, depths and the two sides' queues, each over the nodes); returns its number of nodes, 0
    when there is none. The stamps take the marks ``mark`` (forward), ``mark + 1`` (backward) and
    ``mark + 2`` (ruled out by the tests)."""
    fw, bw, p, h = borrowed(fw), borrowed(bw), borrowed(p), borrowed(h)
    # The buffers too: the visits and per-edge functions are calls that take them (``meet`` stays alive to
    # the end, where it is read).
    stamp, parent, depth = borrowed(buffers[0]), borrowed(buffers[1]), borrowed(buffers[2])
    qf, qb = borrowed(buffers[3]), borrowed(buffers[4])
    if s == t:
        qf[0] = s
        return 1
    meet = np.array([np.int64(1) << 62, -1, -1], dtype=np.int64)
    forward, backward, ruled_out = mark, mark + 1, mark + 2
    cs, ct = _dag_of(fw, p, s), _dag_of(fw, p, t)
    shared = borrowed(meet)
    front = _path_side(fw, p, h, True, forward, backward, ruled_out, t, ct, stamp, parent, depth, shared)
    back = _path_side(bw, p, h, False, backward, forward, ruled_out, s, cs, stamp, parent, depth, shared)
    _start(front.trail, s, qf)
    _start(back.trail, t, qb)
    fh, ft, bh, bt = 0, 1, 0, 1
    # Whole levels, the side with fewer nodes waiting first, until the sides meet (the level is finished, so
    # that its shortest meeting is kept) or one runs out.
    while fh < ft and bh < bt and meet[1] < 0:
        if ft - fh <= bt - bh:
            stop = ft
            ft, _ = search_level(_path_visit, fw, p, front, qf, fh, ft)
            fh = stop
        else:
            stop = bt
            bt, _ = search_level(_path_visit, bw, p, back, qb, bh, bt)
            bh = stop
    meet_f, meet_b = meet[1], meet[2]
    if meet_f < 0:
        return 0
    # The queues are no longer needed: the path goes into qf, the source's half by the forward parents, the
    # target's half by the backward ones.
    _unwind(parent, meet_f, depth[meet_f], -1, qf)
    _unwind(parent, meet_b, depth[meet_f] + 1, 1, qf)
    return depth[meet_f] + depth[meet_b] + 2


# ---- building blocks of the views ---------------------------------------------------------------------


@njit(nogil=True, cache=True)
def transpose_with_edges(indptr, indices, out_indices, out_edge):
    """The reverse CSR (``out_indices`` and the returned indptr) and, per entry, its forward position."""
    n = indptr.size - 1
    counts = np.zeros(n + 1, dtype=np.int64)
    for e in range(indices.size):
        counts[indices[e] + 1] += 1
    for v in range(n):
        counts[v + 1] += counts[v]
    cursor = counts[:-1].copy()
    for u in range(n):
        for e in range(indptr[u], indptr[u + 1]):
            w = indices[e]
            out_indices[cursor[w]] = u
            out_edge[cursor[w]] = e
            cursor[w] += 1
    return counts


@njit(nogil=True, cache=True)
def group_members(comp, n_dag, out):
    """Nodes grouped by DAG node (a counting sort, ids ascending in each group); returns the indptr."""
    counts = np.zeros(n_dag + 1, dtype=np.int64)
    for v in range(comp.size):
        counts[comp[v] + 1] += 1
    for c in range(n_dag):
        counts[c + 1] += counts[c]
    cursor = counts[:-1].copy()
    for v in range(comp.size):
        out[cursor[comp[v]]] = v
        cursor[comp[v]] += 1
    return counts


@njit(nogil=True, cache=True)
def find_edge(indptr, indices, x, y):
    """The CSR position of edge x -> y, or -1 (a scan of x's row: rows need not be sorted)."""
    for e in range(indptr[x], indptr[x + 1]):
        if indices[e] == y:
            return e
    return -1
