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

Everything here runs on the CPU.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

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
from .query import classify
from .records import NO, YES

__all__ = [
    "Side",
    "walk",
    "reaches",
    "walk_pairs",
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


_NO_NODE = np.int64(-1)  # _visit's node of a DAG node's key


@njit(nogil=True)
def _visit(p, h, key, node, c, stamp, mine, theirs, queue, tail, test, s, cs, t, ct, forward):
    """Visit ``key`` (node ``node`` for a node key, DAG node ``c`` or -1); returns (tail, reached).

    A key the other side of a search has seen (``theirs``) joins the two. With ``test``, the key's verdict
    (forward: 'it reaches t'; backward: 's reaches it') may end the search or leave the key out."""
    if stamp[key] == mine:
        return tail, False
    if stamp[key] == theirs:
        return tail, True
    stamp[key] = mine
    if test:
        if forward:
            base = classify(h.rec_dag, c, h.rec_dag, ct, h.label_end) if c >= 0 and ct >= 0 else NO
            code = verdict(p, node, c, t, ct, base)
        else:
            base = classify(h.rec_dag, cs, h.rec_dag, c, h.label_end) if c >= 0 and cs >= 0 else NO
            code = verdict(p, s, cs, node, c, base)
        if code == YES:
            return tail, True
        if code == NO:
            return tail, False
    queue[tail] = key
    return tail + 1, False


@njit(nogil=True)
def _expand(g, p, h, x, forward, stamp, mine, theirs, queue, tail, test, s, cs, t, ct):
    """Visit every key that key x leads to in the version's graph (``g``: that direction's view)."""
    # Every integer passed to _visit is an int64: one compiled _visit per _expand, not one per mix of the
    # int32 arrays, int64 sums and literals of its four calls.
    tail = np.int64(tail)
    n_dag = g.dag_indptr.size - 1
    if x < n_dag:
        into_broken = False
        for e in range(g.dag_indptr[x], g.dag_indptr[x + 1]):
            if dag_edge_dead(p, _entry_edge(g.dag_edge, e)):
                continue
            w = np.int64(g.dag_indices[e])
            if comp_broken(p, w):
                into_broken = True
                continue
            tail, found = _visit(p, h, w, _NO_NODE, w, stamp, mine, theirs, queue, tail, test, s, cs, t, ct, forward)
            if found:
                return tail, True
        if into_broken:  # which members of a broken component the edges enter
            for i in range(g.mem_indptr[x], g.mem_indptr[x + 1]):
                m = g.mem[i]
                for f in range(g.indptr[m], g.indptr[m + 1]):
                    y = np.int64(g.indices[f])
                    cy = np.int64(g.comp[y])
                    if cy == x or not comp_broken(p, cy) or edge_removed(p, _entry_edge(g.edge, f)):
                        continue
                    tail, found = _visit(
                        p, h, n_dag + y, y, cy, stamp, mine, theirs, queue, tail, test, s, cs, t, ct, forward
                    )
                    if found:
                        return tail, True
        v, kind = x, OUT_OF_COMP if forward else INTO_COMP
    else:
        v, kind = x - n_dag, OUT_OF_NODE if forward else INTO_NODE
        if v < p.n_base:
            for f in range(g.indptr[v], g.indptr[v + 1]):
                if edge_removed(p, _entry_edge(g.edge, f)):
                    continue
                z = np.int64(g.indices[f])
                key, c = _key(g, p, z)
                tail, found = _visit(p, h, key, z, c, stamp, mine, theirs, queue, tail, test, s, cs, t, ct, forward)
                if found:
                    return tail, True
    # the edges that updates added out of (forward) or into the DAG node or node
    i = first_entry(p, kind, v)
    while i >= 0:
        if entry_alive(p, i):
            z = np.int64(_other_end(p, i, forward))
            key, c = _key(g, p, z)
            tail, found = _visit(p, h, key, z, c, stamp, mine, theirs, queue, tail, test, s, cs, t, ct, forward)
            if found:
                return tail, True
        i = next_entry(p, kind, i)
    return tail, False


@njit(nogil=True, cache=True)
def walk(g, p, h, start, forward, stamp, mark, queue):
    """Every key node ``start`` reaches (``forward``; else that reach it) on the version's graph, breadth
    first: returns how many, ``queue[:count]`` (the start's key first)."""
    key, _ = _key(g, p, start)
    stamp[key] = mark
    queue[0] = key
    head, tail = 0, 1
    while head < tail:
        tail, _ = _expand(g, p, h, queue[head], forward, stamp, mark, -1, queue, tail, False, -1, -1, -1, -1)
        head += 1
    return tail


@njit(nogil=True, cache=True)
def reaches(fw, bw, p, h, s, t, stamp, mark, queue):
    """Whether node s reaches node t on the version's graph: depth first from both ends at once, forward
    from s (keys that may still reach t) and backward from t (keys s may reach), each key tested by its
    verdict; the side that has seen fewer keys goes next, and the first side to run out proves 'no'.
    ``stamp`` takes ``mark`` (forward) and ``mark + 1``; ``queue`` holds two stacks of every key each."""
    if s == t:
        return True
    half = queue.size // 2
    fkey, cs = _key(fw, p, s)
    bkey, ct = _key(fw, p, t)
    stamp[fkey] = mark
    stamp[bkey] = mark + 1
    queue[0] = fkey
    queue[half] = bkey
    ftop, btop = 1, half + 1
    fseen, bseen = 1, 1
    while ftop > 0 and btop > half:
        if fseen <= bseen:
            ftop -= 1
            before = ftop
            ftop, found = _expand(fw, p, h, queue[ftop], True, stamp, mark, mark + 1, queue, ftop, True, s, cs, t, ct)
            fseen += ftop - before
        else:
            btop -= 1
            before = btop
            btop, found = _expand(bw, p, h, queue[btop], False, stamp, mark + 1, mark, queue, btop, True, s, cs, t, ct)
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


@njit(nogil=True)
def _step(x, y, parent, depth, stamp, seen, queue, tail):
    stamp[y] = seen
    parent[y] = x
    depth[y] = depth[x] + 1
    queue[tail] = y
    return tail + 1


@njit(nogil=True, cache=True)
def shortest_path(fw, bw, p, h, s, t, stamp, mark, parent, depth, qf, qb):
    """A shortest path from node s to node t on the version's graph into ``qf[:length]``; returns its number
    of nodes, 0 when there is none. ``stamp`` takes the marks ``mark`` (forward), ``mark + 1`` (backward)
    and ``mark + 2`` (ruled out by the tests)."""
    if s == t:
        qf[0] = s
        return 1
    seen_f, seen_b, ruled_out = mark, mark + 1, mark + 2
    source_dag, target_dag = _dag_of(fw, p, s), _dag_of(fw, p, t)
    stamp[s] = seen_f
    parent[s] = -1
    depth[s] = 0
    qf[0] = s
    stamp[t] = seen_b
    parent[t] = -1
    depth[t] = 0
    qb[0] = t
    fh, ft, bh, bt = 0, 1, 0, 1
    best = np.int64(1) << 62
    meet_f = -1
    meet_b = -1
    while fh < ft and bh < bt and meet_f < 0:
        if ft - fh <= bt - bh:
            end = ft
            for i in range(fh, end):
                x = qf[i]
                f = fw.indptr[x] if x < p.n_base else 0
                stop = fw.indptr[x + 1] if x < p.n_base else 0
                entry = first_entry(p, OUT_OF_NODE, x)
                while f < stop or entry >= 0:
                    if f < stop:
                        y = fw.indices[f]
                        f += 1
                        if edge_removed(p, f - 1):
                            continue
                    else:
                        y = p.dst[entry]
                        alive = entry_alive(p, entry)
                        entry = next_entry(p, OUT_OF_NODE, entry)
                        if not alive:
                            continue
                    if stamp[y] == seen_f or stamp[y] == ruled_out:
                        continue
                    if stamp[y] == seen_b:
                        if depth[x] + 1 + depth[y] < best:
                            best = depth[x] + 1 + depth[y]
                            meet_f, meet_b = x, y
                    elif _ruled_out(h, p, y, _dag_of(fw, p, y), t, target_dag):
                        stamp[y] = ruled_out
                    else:
                        ft = _step(x, y, parent, depth, stamp, seen_f, qf, ft)
            fh = end
        else:
            end = bt
            for i in range(bh, end):
                y = qb[i]
                f = bw.indptr[y] if y < p.n_base else 0
                stop = bw.indptr[y + 1] if y < p.n_base else 0
                entry = first_entry(p, INTO_NODE, y)
                while f < stop or entry >= 0:
                    if f < stop:
                        x = bw.indices[f]
                        f += 1
                        if edge_removed(p, bw.edge[f - 1]):
                            continue
                    else:
                        x = p.src[entry]
                        alive = entry_alive(p, entry)
                        entry = next_entry(p, INTO_NODE, entry)
                        if not alive:
                            continue
                    if stamp[x] == seen_b or stamp[x] == ruled_out:
                        continue
                    if stamp[x] == seen_f:
                        if depth[x] + 1 + depth[y] < best:
                            best = depth[x] + 1 + depth[y]
                            meet_f, meet_b = x, y
                    elif _ruled_out(h, p, s, source_dag, x, _dag_of(fw, p, x)):
                        stamp[x] = ruled_out
                    else:
                        bt = _step(y, x, parent, depth, stamp, seen_b, qb, bt)
            bh = end
    if meet_f < 0:
        return 0
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
