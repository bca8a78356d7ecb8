"""Searches that answer more than yes or no, over the index's graph and any pending edge updates.

Three kinds, each a plain numba function over arrays (``Side``: the base graph in one direction; ``Delta``
and ``Added``: a version's edge updates, ``grail_core.overlay``):

- ``walk``: a breadth-first search over *keys*: a key below N (the DAG's size) is a whole strongly connected
  component (all its members reach each other), a key ``N + x`` is the single node x, used for the members of
  a component that an edge removal may have broken and for nodes that updates added. With a target it answers
  reachability on the updated graph, pruned and cut short by the labels; without one it lists everything
  reachable (descendants forward, ancestors backward).
- ``shortest_path``: a bidirectional breadth-first search over nodes (the witness must be a path of the
  graph, also inside a component), each side expanding only nodes that the labels do not rule out: forward
  only nodes that may still reach the target, backward only nodes the source may reach. Both sides expand
  whole levels, the smaller frontier first; the first level on which they meet is finished and its shortest
  meeting kept, so the path is a shortest one.
- ``flag_pairs``: which pairs of a batch pending updates may have changed (see ``grail_core.overlay``).

Everything here runs on the CPU.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .query import SERIAL_BATCH, classify
from .records import NO, YES

__all__ = [
    "UP_REMOVED",
    "DOWN_REMOVED",
    "UP_ADDED",
    "DOWN_ADDED",
    "MAYBE_BROKEN",
    "Side",
    "Delta",
    "Added",
    "walk",
    "walk_pairs",
    "shortest_path",
    "flag_pairs",
    "pair_changed",
    "keys_to_nodes",
    "count_keys",
    "mark_reachable",
    "transpose_with_edges",
    "group_members",
    "find_edge",
    "edges_between",
]

# Bits of the per-DAG-node marks that pending updates set (never cleared until a rebuild): the node reaches
# the source of a removed edge (UP_REMOVED) or is reached from its target (DOWN_REMOVED); likewise for the
# ends of added edges; MAYBE_BROKEN: the component had an inner edge removed (``Delta.broken`` says whether
# it still has, for a given version).
UP_REMOVED, DOWN_REMOVED, UP_ADDED, DOWN_ADDED, MAYBE_BROKEN = 1, 2, 4, 8, 16


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


class Delta(NamedTuple):
    """What a version removed from the base graph, and the marks every version shares."""

    n_base: int  # nodes of the base graph; ids from here on are nodes that updates added
    removed: np.ndarray  # sorted forward-CSR positions of removed base edges
    maybe_removed: np.ndarray  # uint64 bit set over those positions, a superset shared by all versions
    dead: np.ndarray  # sorted DAG-edge positions whose every base edge is removed
    maybe_dead: np.ndarray  # uint64 bit set, a superset
    broken: np.ndarray  # sorted DAG nodes with a removed inner edge
    marks: np.ndarray  # uint8 per DAG node, the bits above


class Added(NamedTuple):
    """A version's added edges as one direction reads them: by the node they leave on this side."""

    key: np.ndarray  # sorted: the node on this side (the source, forward)
    other: np.ndarray  # the node at the other end
    comp_key: np.ndarray  # sorted: the DAG node of the node on this side, for base nodes only
    comp_other: np.ndarray


# ---- small tests ------------------------------------------------------------------------------------


@njit(inline="always")
def _bit(bits, i):
    return (bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != 0


@njit(inline="always")
def _in_sorted(values, x):
    i = np.searchsorted(values, x)
    return i < values.size and values[i] == x


@njit(inline="always")
def edge_removed(d, e):
    return d.removed.size > 0 and _bit(d.maybe_removed, e) and _in_sorted(d.removed, e)


@njit(inline="always")
def _dag_edge_dead(d, e):
    return d.dead.size > 0 and _bit(d.maybe_dead, e) and _in_sorted(d.dead, e)


@njit(inline="always")
def _broken(d, c):
    return d.broken.size > 0 and (d.marks[c] & MAYBE_BROKEN) != 0 and _in_sorted(d.broken, c)


@njit(inline="always")
def _span(keys, x):
    """[lo, hi) of the entries equal to x in sorted ``keys``."""
    if keys.size == 0:
        return 0, 0
    return np.searchsorted(keys, x), np.searchsorted(keys, x, side="right")


@njit(inline="always")
def _key(g, d, y):
    """(key, DAG node for the label tests or -1) of node y."""
    n_dag = g.dag_indptr.size - 1
    if y < d.n_base:
        c = g.comp[y]
        if _broken(d, c):
            return n_dag + y, c
        return c, c
    return n_dag + y, -1


@njit(inline="always")
def _entry_edge(side_edge, f):
    return f if side_edge.size == 0 else side_edge[f]


# ---- walk: reachability and listings over keys --------------------------------------------------------


@njit(inline="always")
def _enter(key, c, target_key, target_dag, labels, h, d, stamp, mark, queue, tail):
    """Visit ``key`` (DAG node ``c`` for the label tests); returns (tail, reached the target).

    With ``labels`` (a forward search for a target): a key whose labels say it reaches the target is enough
    when no removed edge lies on a base path from it to the target; one whose labels say it cannot is not
    expanded unless it reaches the source of an added edge (only those lead elsewhere)."""
    if stamp[key] == mark:
        return tail, False
    stamp[key] = mark
    if key == target_key:
        return tail, True
    if labels and c >= 0:
        up = d.marks[c]
        if target_dag >= 0:
            code = classify(h.rec_dag, c, h.rec_dag, target_dag, h.label_end)
            if code == YES and ((up & UP_REMOVED) == 0 or (d.marks[target_dag] & DOWN_REMOVED) == 0):
                return tail, True
            if code == NO and (up & UP_ADDED) == 0:
                return tail, False
        elif (up & UP_ADDED) == 0:  # the target is a node updates added: only added edges lead to it
            return tail, False
    queue[tail] = key
    return tail + 1, False


@njit(nogil=True, cache=True)
def walk(g, d, a, h, start, target, labels, stamp, mark, queue):
    """Breadth-first from node ``start`` over keys; returns (reached ``target``, keys visited).

    ``target`` -1 visits everything reachable: ``queue[:count]`` then holds the keys (the start's first)."""
    n_dag = g.dag_indptr.size - 1
    target_key = -1
    target_dag = -1
    if target >= 0:
        target_key, target_dag = _key(g, d, target)
    key, c = _key(g, d, start)
    tail, found = _enter(key, c, target_key, target_dag, labels, h, d, stamp, mark, queue, 0)
    if found:
        return True, tail
    head = 0
    while head < tail:
        x = queue[head]
        head += 1
        if x < n_dag:
            into_broken = False
            for e in range(g.dag_indptr[x], g.dag_indptr[x + 1]):
                if _dag_edge_dead(d, _entry_edge(g.dag_edge, e)):
                    continue
                w = g.dag_indices[e]
                if _broken(d, w):
                    into_broken = True
                    continue
                tail, found = _enter(w, w, target_key, target_dag, labels, h, d, stamp, mark, queue, tail)
                if found:
                    return True, tail
            if into_broken:  # which members of a broken component the edges enter
                for i in range(g.mem_indptr[x], g.mem_indptr[x + 1]):
                    m = g.mem[i]
                    for f in range(g.indptr[m], g.indptr[m + 1]):
                        y = g.indices[f]
                        cy = g.comp[y]
                        if cy == x or not _broken(d, cy) or edge_removed(d, _entry_edge(g.edge, f)):
                            continue
                        tail, found = _enter(
                            n_dag + y, cy, target_key, target_dag, labels, h, d, stamp, mark, queue, tail
                        )
                        if found:
                            return True, tail
            lo, hi = _span(a.comp_key, x)
            for i in range(lo, hi):
                key, c = _key(g, d, a.comp_other[i])
                tail, found = _enter(key, c, target_key, target_dag, labels, h, d, stamp, mark, queue, tail)
                if found:
                    return True, tail
        else:
            y = x - n_dag
            if y < d.n_base:
                for f in range(g.indptr[y], g.indptr[y + 1]):
                    if edge_removed(d, _entry_edge(g.edge, f)):
                        continue
                    key, c = _key(g, d, g.indices[f])
                    tail, found = _enter(key, c, target_key, target_dag, labels, h, d, stamp, mark, queue, tail)
                    if found:
                        return True, tail
            lo, hi = _span(a.key, y)
            for i in range(lo, hi):
                key, c = _key(g, d, a.other[i])
                tail, found = _enter(key, c, target_key, target_dag, labels, h, d, stamp, mark, queue, tail)
                if found:
                    return True, tail
    return False, tail


@njit(nogil=True, cache=True)
def walk_pairs(g, d, a, h, pairs, which, labels, answers, stamp, first_mark, queue):
    """Answers of the pairs ``pairs[which]`` on the updated graph (``labels``: True), on the calling thread;
    callers spread slices of ``which`` over threads (the walk releases the GIL). One serial entry beside
    ``walk`` rather than a parallel loop: that would compile ``walk`` a second time (28 s more on the 2-core VM)."""
    for j in range(which.size):
        i = which[j]
        answers[i] = walk(g, d, a, h, pairs[i, 0], pairs[i, 1], labels, stamp, np.int32(first_mark + j), queue)[0]


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


@njit(inline="always")
def _forward_pruned(g, d, h, y, target_dag):
    """Whether node y cannot reach the target (which is in DAG node ``target_dag``, -1 for an added node)."""
    if y >= d.n_base:
        return False
    c = g.comp[y]
    if (d.marks[c] & UP_ADDED) != 0:
        return False
    return target_dag < 0 or classify(h.rec_dag, c, h.rec_dag, target_dag, h.label_end) == NO


@njit(inline="always")
def _backward_pruned(g, d, h, y, source_dag):
    """Whether the source (in DAG node ``source_dag``) cannot reach node y."""
    if y >= d.n_base:
        return False
    c = g.comp[y]
    if (d.marks[c] & DOWN_ADDED) != 0:
        return False
    return source_dag < 0 or classify(h.rec_dag, source_dag, h.rec_dag, c, h.label_end) == NO


@njit(nogil=True, cache=True)
def shortest_path(fw, bw, d, af, ab, h, s, t, stamp, mark, parent, depth, qf, qb):
    """A shortest path from node s to node t on the updated graph into ``qf[:length]``; returns its number of
    nodes, 0 when there is none. ``stamp`` takes the marks ``mark`` (forward), ``mark + 1`` (backward) and
    ``mark + 2`` (ruled out by the labels)."""
    if s == t:
        qf[0] = s
        return 1
    seen_f, seen_b, ruled_out = mark, mark + 1, mark + 2
    source_dag = fw.comp[s] if s < d.n_base else -1
    target_dag = fw.comp[t] if t < d.n_base else -1
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
                if x < d.n_base:
                    for f in range(fw.indptr[x], fw.indptr[x + 1]):
                        y = fw.indices[f]
                        if stamp[y] == seen_f or stamp[y] == ruled_out or edge_removed(d, f):
                            continue
                        if stamp[y] == seen_b:
                            if depth[x] + 1 + depth[y] < best:
                                best = depth[x] + 1 + depth[y]
                                meet_f, meet_b = x, y
                        elif _forward_pruned(fw, d, h, y, target_dag):
                            stamp[y] = ruled_out
                        else:
                            stamp[y] = seen_f
                            parent[y] = x
                            depth[y] = depth[x] + 1
                            qf[ft] = y
                            ft += 1
                lo, hi = _span(af.key, x)
                for j in range(lo, hi):
                    y = af.other[j]
                    if stamp[y] == seen_f or stamp[y] == ruled_out:
                        continue
                    if stamp[y] == seen_b:
                        if depth[x] + 1 + depth[y] < best:
                            best = depth[x] + 1 + depth[y]
                            meet_f, meet_b = x, y
                    elif _forward_pruned(fw, d, h, y, target_dag):
                        stamp[y] = ruled_out
                    else:
                        stamp[y] = seen_f
                        parent[y] = x
                        depth[y] = depth[x] + 1
                        qf[ft] = y
                        ft += 1
            fh = end
        else:
            end = bt
            for i in range(bh, end):
                y = qb[i]
                if y < d.n_base:
                    for f in range(bw.indptr[y], bw.indptr[y + 1]):
                        x = bw.indices[f]
                        if stamp[x] == seen_b or stamp[x] == ruled_out or edge_removed(d, bw.edge[f]):
                            continue
                        if stamp[x] == seen_f:
                            if depth[x] + 1 + depth[y] < best:
                                best = depth[x] + 1 + depth[y]
                                meet_f, meet_b = x, y
                        elif _backward_pruned(bw, d, h, x, source_dag):
                            stamp[x] = ruled_out
                        else:
                            stamp[x] = seen_b
                            parent[x] = y
                            depth[x] = depth[y] + 1
                            qb[bt] = x
                            bt += 1
                lo, hi = _span(ab.key, y)
                for j in range(lo, hi):
                    x = ab.other[j]
                    if stamp[x] == seen_b or stamp[x] == ruled_out:
                        continue
                    if stamp[x] == seen_f:
                        if depth[x] + 1 + depth[y] < best:
                            best = depth[x] + 1 + depth[y]
                            meet_f, meet_b = x, y
                    elif _backward_pruned(bw, d, h, x, source_dag):
                        stamp[x] = ruled_out
                    else:
                        stamp[x] = seen_b
                        parent[x] = y
                        depth[x] = depth[y] + 1
                        qb[bt] = x
                        bt += 1
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


# ---- batches: which pairs updates may have changed ------------------------------------------------------


@njit(inline="always")
def _changed(comp, marks, n_base, u, v):
    if u >= n_base or v >= n_base:
        return True
    mu = marks[comp[u]]
    mv = marks[comp[v]]
    return ((mu & UP_REMOVED) != 0 and (mv & DOWN_REMOVED) != 0) or ((mu & UP_ADDED) != 0 and (mv & DOWN_ADDED) != 0)


@njit(nogil=True, parallel=True, cache=True)
def _flag_parallel(pairs, comp, marks, n_base, flags):
    flagged = 0
    for i in prange(pairs.shape[0]):
        flags[i] = _changed(comp, marks, n_base, pairs[i, 0], pairs[i, 1])
        flagged += flags[i]
    return flagged


@njit(nogil=True, cache=True)
def pair_changed(comp, marks, n_base, u, v):
    """``flag_pairs`` for one pair, on the calling thread."""
    return _changed(comp, marks, n_base, u, v)


def flag_pairs(pairs: np.ndarray, comp: np.ndarray, marks: np.ndarray, n_base: int, flags: np.ndarray) -> int:
    """True for a pair whose answer pending updates may have changed: the source reaches a removed edge that
    leads to the target, or an added one (both by the base graph), or an end is a node updates added.
    Every other pair keeps the base index's answer. Returns how many are flagged."""
    if pairs.shape[0] < SERIAL_BATCH:
        flagged = 0
        for i in range(pairs.shape[0]):
            flags[i] = pair_changed(comp, marks, n_base, pairs[i, 0], pairs[i, 1])
            flagged += int(flags[i])
        return flagged
    return int(_flag_parallel(pairs, comp, marks, n_base, flags))


# ---- building blocks of the views and the overlay -------------------------------------------------------


@njit(nogil=True, cache=True)
def mark_reachable(indptr, indices, marks, bit, starts, queue):
    """Set ``bit`` in ``marks`` on every DAG node reachable from ``starts`` (through ``indptr``/``indices``),
    not entering nodes that have it already: over any number of calls, each node and edge is passed once."""
    tail = 0
    for s in starts:
        if (marks[s] & bit) == 0:
            marks[s] |= bit
            queue[tail] = s
            tail += 1
    head = 0
    while head < tail:
        x = queue[head]
        head += 1
        for e in range(indptr[x], indptr[x + 1]):
            w = indices[e]
            if (marks[w] & bit) == 0:
                marks[w] |= bit
                queue[tail] = w
                tail += 1
    return tail


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


@njit(nogil=True, cache=True)
def edges_between(indptr, indices, comp, mem_indptr, mem, cx, cy):
    """Forward-CSR positions of every base edge from a member of DAG node ``cx`` to one of ``cy``."""
    found = []
    for i in range(mem_indptr[cx], mem_indptr[cx + 1]):
        m = mem[i]
        for e in range(indptr[m], indptr[m + 1]):
            if comp[indices[e]] == cy:
                found.append(e)
    return np.array(found, dtype=np.int64)
