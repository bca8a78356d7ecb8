"""Searches over the index's graph as one version has it (its edge updates: ``grail_core.pending``).

- ``walk``: a search over *keys*: a key below N (the DAG's size) is a whole strongly connected component
  (all its members reach each other), a key ``N + x`` is the single node x, used for the members of a
  component that a removal may have split and for nodes that updates added. With a target it answers
  reachability, depth first, every key it meets tested by ``pending.verdict`` (a witness ends the search, a
  key that cannot reach the target is not entered); without one it lists everything reachable (descendants
  forward, ancestors backward).
- ``shortest_path``: a bidirectional breadth-first search over nodes (the witness must be a path of the
  graph, also inside a component), each side expanding only nodes that the same tests do not rule out:
  forward only nodes that may still reach the target, backward only nodes the source may reach. Both sides
  expand whole levels, the smaller frontier first; the first level on which they meet is finished and its
  shortest meeting kept, so the path is a shortest one.

The breadth-first searches run on ``grail_core.frontier``'s search operator (``search``, ``search_both``);
here are only their visits and per-edge functions, over the base graph's edges and those updates added
(``_added_edges``). Everything here runs on the CPU.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .frontier import FOUND, SKIP, search, search_both, search_edges, search_entry
from .pending import (
    INTO_COMP,
    INTO_NODE,
    OUT_OF_COMP,
    OUT_OF_NODE,
    comp_broken,
    dag_edge_dead,
    edge_removed,
    entry_alive,
    first_entry,
    next_entry,
    verdict,
)
from .query import HotArrays, classify
from .records import NO, YES

__all__ = [
    "Side",
    "walk",
    "reaches",
    "walk_pairs",
    "shortest_path",
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


@njit(nogil=True, inline="always")
def _entry_edge(side_edge, f):
    return f if side_edge.size == 0 else side_edge[f]


@njit(nogil=True)
def _key(g, p, y):
    """(key, DAG node or -1) of node y."""
    n_dag = g.dag_indptr.size - 1
    if y < p.n_base:
        c = g.comp[y]
        if comp_broken(p, c):
            return n_dag + y, c
        return c, c
    return n_dag + y, -1


@njit(nogil=True, inline="always")
def _added_edges(v, p, forward, kind, edge, x, y, z, queue, tail):
    """``search_edges`` over the edges that updates added, alive in the version, out of (``forward``) or
    into DAG node or node v (``kind``: which list); ``e`` is the entry's number."""
    i = first_entry(p, kind, v)
    while i >= 0:
        if entry_alive(p, i):
            tail, found = search_entry(edge(v, p.dst[i] if forward else p.src[i], i, x, y, z), queue, tail)
            if found:
                return tail, True
        i = next_entry(p, kind, i)
    return tail, False


# ---- walks over keys: listings, and reachability searched from both ends ---------------------------------


class _Walk(NamedTuple):
    """A walk's own state on one side (the graph and its updates come apart): ``mine`` the side's stamp,
    ``theirs`` the other side's (-1: none); with ``test``, a key's verdict (forward: 'it reaches t';
    backward: 's reaches it') may end the search or leave the key out. ``broken[0]``: whether the DAG node
    being visited leads into a broken one."""

    h: HotArrays
    forward: bool
    stamp: np.ndarray
    mine: int
    theirs: int
    test: bool
    s: int
    cs: int
    t: int
    ct: int
    broken: np.ndarray


@njit(nogil=True, inline="always")
def _walk(h, forward, stamp, mine, theirs, test, s, cs, t, ct, broken):
    """A ``_Walk`` of one type whatever the integers' (one compiled ``_expand``)."""
    i = np.int64
    return _Walk(h, forward, stamp, i(mine), i(theirs), test, i(s), i(cs), i(t), i(ct), broken)


@njit(nogil=True)
def _enter(p, k, key, node, c):
    """The visit of ``key`` (node ``node`` for a node key, DAG node ``c`` or -1), as a per-edge answer."""
    if k.stamp[key] == k.mine:
        return SKIP
    if k.stamp[key] == k.theirs:
        return FOUND
    k.stamp[key] = k.mine
    if k.test:
        h = k.h
        if k.forward:
            base = classify(h.rec_dag, c, h.rec_dag, k.ct, h.label_end) if c >= 0 and k.ct >= 0 else NO
            code = verdict(p, node, c, k.t, k.ct, base)
        else:
            base = classify(h.rec_dag, k.cs, h.rec_dag, c, h.label_end) if c >= 0 and k.cs >= 0 else NO
            code = verdict(p, k.s, k.cs, node, c, base)
        if code == YES:
            return FOUND
        if code == NO:
            return SKIP
    return key


@njit(nogil=True, inline="always")
def _into_dag_node(x, w, e, g, p, k):
    """DAG edge x -> w: w's key, unless the edge is dead; a broken w is entered by its members' edges."""
    if dag_edge_dead(p, _entry_edge(g.dag_edge, e)):
        return SKIP
    if comp_broken(p, w):
        k.broken[0] = True
        return SKIP
    return _enter(p, k, w, -1, w)


@njit(nogil=True, inline="always")
def _into_broken(m, y, f, g, p, k):
    """Base edge m -> y from a member of the DAG node being visited: y's node key where it enters another,
    broken one."""
    cy = g.comp[y]
    if cy == g.comp[m] or not comp_broken(p, cy) or edge_removed(p, _entry_edge(g.edge, f)):
        return SKIP
    return _enter(p, k, g.dag_indptr.size - 1 + y, y, cy)


@njit(nogil=True, inline="always")
def _into_node(v, z, e, g, p, k):
    """An edge that updates added (from a DAG node or a node): z's key."""
    key, c = _key(g, p, z)
    return _enter(p, k, key, z, c)


@njit(nogil=True, inline="always")
def _along_base_edge(y, z, f, g, p, k):
    """Base edge y -> z of a node key: z's key, unless the edge is removed."""
    if edge_removed(p, _entry_edge(g.edge, f)):
        return SKIP
    return _into_node(y, z, f, g, p, k)


@njit(nogil=True)
def _expand(x, g, p, k, queue, tail):
    """The visit of key x: every key it leads to in the version's graph (``g``: that direction's view)."""
    n_dag = g.dag_indptr.size - 1
    if x < n_dag:
        k.broken[0] = False
        tail, found = search_edges(x, g.dag_indptr, g.dag_indices, _into_dag_node, g, p, k, queue, tail)
        if found:
            return tail, True
        if k.broken[0]:  # which members of a broken component the edges enter
            for i in range(g.mem_indptr[x], g.mem_indptr[x + 1]):
                tail, found = search_edges(g.mem[i], g.indptr, g.indices, _into_broken, g, p, k, queue, tail)
                if found:
                    return tail, True
        v, kind = x, OUT_OF_COMP if k.forward else INTO_COMP
    else:
        v, kind = x - n_dag, OUT_OF_NODE if k.forward else INTO_NODE
        if v < p.n_base:
            tail, found = search_edges(v, g.indptr, g.indices, _along_base_edge, g, p, k, queue, tail)
            if found:
                return tail, True
    return _added_edges(v, p, k.forward, kind, _into_node, g, p, k, queue, tail)


@njit(nogil=True, cache=True)
def walk(g, p, h, start, forward, stamp, mark, queue):
    """Every key node ``start`` reaches (``forward``; else that reach it) on the version's graph, breadth
    first: returns how many, ``queue[:count]`` (the start's key first)."""
    key, _ = _key(g, p, start)
    stamp[key] = mark
    queue[0] = key
    state = _walk(h, forward, stamp, mark, -1, False, -1, -1, -1, -1, np.zeros(1, dtype=np.bool_))
    count, _, _ = search(_expand, g, p, state, queue, 1)
    return count


@njit(nogil=True, cache=True)
def reaches(fw, bw, p, h, s, t, stamp, mark, queue):
    """Whether node s reaches node t on the version's graph: depth first from both ends at once, forward
    from s (keys that may still reach t) and backward from t (keys s may reach), each key tested by its
    verdict; the side that has seen fewer keys goes next, and the first side to run out proves 'no'.
    ``stamp`` takes ``mark`` (forward) and ``mark + 1``; ``queue`` holds two stacks of every key each.
    Depth first, not on the breadth-first ``frontier.search``: a witness down one branch ends the search
    before a whole level is held."""
    if s == t:
        return True
    half = queue.size // 2
    fkey, cs = _key(fw, p, s)
    bkey, ct = _key(fw, p, t)
    stamp[fkey] = mark
    stamp[bkey] = mark + 1
    queue[0] = fkey
    queue[half] = bkey
    broken = np.zeros(1, dtype=np.bool_)
    ahead = _walk(h, True, stamp, mark, mark + 1, True, s, cs, t, ct, broken)
    behind = _walk(h, False, stamp, mark + 1, mark, True, s, cs, t, ct, broken)
    ftop, btop = 1, half + 1
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


@njit(nogil=True, cache=True)
def walk_pairs(fw, bw, p, h, pairs, which, answers, stamp, first_mark, queue):
    """Answers of the pairs ``pairs[which]`` on the version's graph, on the calling thread (two marks a pair);
    callers spread slices of ``which`` over threads (the search releases the GIL)."""
    for j in range(which.size):
        i = which[j]
        answers[i] = reaches(fw, bw, p, h, pairs[i, 0], pairs[i, 1], stamp, np.int32(first_mark + 2 * j), queue)


@njit(nogil=True, cache=True)
def count_keys(keys, count, n_dag, mem_indptr):
    """How many nodes ``keys[:count]`` stand for."""
    total = 0
    for i in range(count):
        k = keys[i]
        total += mem_indptr[k + 1] - mem_indptr[k] if k < n_dag else 1
    return total


# ---- shortest witness paths over nodes -----------------------------------------------------------------


@njit(nogil=True)
def _dag_of(fw, p, y):
    return fw.comp[y] if y < p.n_base else -1


@njit(nogil=True)
def _ruled_out(h, p, s, cs, t, ct):
    """Whether node s (DAG node cs, -1 for an added node) cannot reach node t on the version's graph."""
    if s == t:
        return False
    base = NO
    if cs >= 0 and ct >= 0:
        base = classify(h.rec_dag, cs, h.rec_dag, ct, h.label_end)
    return verdict(p, s, cs, t, ct, base) == NO


class _Paths(NamedTuple):
    """One side's own state in a shortest-path search (the graph and its updates come apart): its stamp
    ``mine`` (the other side's ``theirs``; nodes either rules out: ``ruled_out``), the parent and depth of
    every node queued, and what both sides share: ``meeting`` = [the shortest length through a meeting, its
    forward end, its backward end] (-1: not met); s and t with their DAG nodes, for the tests."""

    h: HotArrays
    forward: bool
    stamp: np.ndarray
    mine: int
    theirs: int
    ruled_out: int
    parent: np.ndarray
    depth: np.ndarray
    meeting: np.ndarray
    s: int
    cs: int
    t: int
    ct: int


@njit(nogil=True)
def _reach(p, k, x, y, cy):
    """Edge x -> y seen from x's side (backward: y -> x; ``cy``: y's DAG node or -1): y is queued unless
    seen, met or ruled out."""
    if k.stamp[y] == k.mine or k.stamp[y] == k.ruled_out:
        return SKIP
    if k.stamp[y] == k.theirs:
        length = k.depth[x] + 1 + k.depth[y]
        if length < k.meeting[0]:
            k.meeting[0] = length
            k.meeting[1], k.meeting[2] = (x, y) if k.forward else (y, x)
        return SKIP
    if _ruled_out(k.h, p, y, cy, k.t, k.ct) if k.forward else _ruled_out(k.h, p, k.s, k.cs, y, cy):
        k.stamp[y] = k.ruled_out
        return SKIP
    k.stamp[y] = k.mine
    k.parent[y] = x
    k.depth[y] = k.depth[x] + 1
    return y


@njit(nogil=True, inline="always")
def _reach_node(x, y, e, g, p, k):
    """The per-edge function of a shortest-path search (``_reach``)."""
    return _reach(p, k, x, y, _dag_of(g, p, y))


@njit(nogil=True, inline="always")
def _along_node_edge(x, y, f, g, p, k):
    """Base edge at position f of x's row: ``_reach_node`` unless the edge is removed."""
    if edge_removed(p, _entry_edge(g.edge, f)):
        return SKIP
    return _reach_node(x, y, f, g, p, k)


@njit(nogil=True, inline="always")
def _expand_nodes(x, g, p, k, queue, tail):
    """The visit of node x on one side of a shortest-path search: its base edges, then those updates added."""
    if x < p.n_base:
        tail, _ = search_edges(x, g.indptr, g.indices, _along_node_edge, g, p, k, queue, tail)
    kind = OUT_OF_NODE if k.forward else INTO_NODE
    return _added_edges(x, p, k.forward, kind, _reach_node, g, p, k, queue, tail)


@njit(nogil=True, inline="always")
def _met(k):
    return k.meeting[1] >= 0


@njit(nogil=True, cache=True)
def shortest_path(fw, bw, p, h, s, t, stamp, mark, parent, depth, qf, qb):
    """A shortest path from node s to node t on the version's graph into ``qf[:length]``; returns its number
    of nodes, 0 when there is none. ``stamp`` takes the marks ``mark`` (forward), ``mark + 1`` (backward)
    and ``mark + 2`` (ruled out by the tests)."""
    if s == t:
        qf[0] = s
        return 1
    seen_f, seen_b, ruled_out = np.int64(mark), np.int64(mark) + 1, np.int64(mark) + 2
    source_dag, target_dag = _dag_of(fw, p, s), _dag_of(fw, p, t)
    stamp[s] = seen_f
    parent[s] = -1
    depth[s] = 0
    qf[0] = s
    stamp[t] = seen_b
    parent[t] = -1
    depth[t] = 0
    qb[0] = t
    meeting = np.array([np.int64(1) << 62, -1, -1], dtype=np.int64)
    ends = (np.int64(s), np.int64(source_dag), np.int64(t), np.int64(target_dag))
    ahead = _Paths(h, True, stamp, seen_f, seen_b, ruled_out, parent, depth, meeting, *ends)
    behind = _Paths(h, False, stamp, seen_b, seen_f, ruled_out, parent, depth, meeting, *ends)
    if not search_both(_expand_nodes, p, (fw, ahead, qf), (bw, behind, qb), _met):
        return 0
    meet_f, meet_b = meeting[1], meeting[2]
    length = depth[meet_f] + depth[meet_b] + 2
    # The queues are no longer needed: the path goes into qf, the source's half by the forward parents, the
    # target's half by the backward ones.
    position = depth[meet_f]
    x = meet_f
    while x != -1:
        qf[position] = x
        position -= 1
        x = parent[x]
    position = depth[meet_f] + 1
    y = meet_b
    while y != -1:
        qf[position] = y
        position += 1
        y = parent[y]
    return length


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
