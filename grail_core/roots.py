"""The root witnesses of broken components across their boundary: the writer's side of ``pending.ROOT_UP`` and
``ROOT_DOWN`` (``Pending.roots``).

A broken component keeps a root r and the bit sets ``to_root``/``from_root`` of its members (``staging``).
The first ``GROUPS`` components to break own a root bit each. Per DAG node d, ``roots[d, ROOT_UP]`` has the
bits of the roots that every member of d reaches, ``roots[d, ROOT_DOWN]`` those of the roots that reach every
member of d, in the base graph less every edge ever removed (as the YES masks: a subgraph of every version's
graph, so a bit is a witness in each, and removals only clear bits). A broken DAG node holds its own bit
alone, for its members in ``to_root`` (``from_root``). A whole DAG node holds what its children hold (parents,
for ROOT_DOWN) through DAG edges not dead, of a broken child its bit only where a base edge never removed
enters a member in ``to_root`` (leaves one in ``from_root``, for ROOT_DOWN): a whole component is strongly
connected in that graph, so each of its members takes such a path.

The bits are set when a component breaks (``mark_root``: the root's reach outside it, its first time) and
cleared where a removal takes a path away (``recheck``: a dead DAG edge, a component that breaks, a base
edge into a broken component, or members that left ``to_root``/``from_root``); a journal folded at once
lays them in one pass (``sweep_roots``). DAG node ids are a topological order: children come after parents.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .marking import mark, walk_sides
from .pending import ROOT_DOWN, ROOT_UP, bit_set

__all__ = ["mark_root", "recheck", "sweep_roots", "neighbours_of"]


@njit(nogil=True)
def _edge_at(edge, f):
    return f if edge.size == 0 else edge[f]


@njit(nogil=True)
def _joins(near, far, comp, removed_bits, reach, c, d):
    """Whether a base edge never removed joins a member of DAG node c to a member of the broken DAG node d
    in ``reach`` (c's out-edges into ``to_root`` for ROOT_UP: ``near`` the forward side; c's in-edges from
    ``from_root`` for ROOT_DOWN: the backward side), read from the component with fewer members."""
    mem_indptr, mem = near.mem_indptr, near.mem
    if mem_indptr[c + 1] - mem_indptr[c] <= mem_indptr[d + 1] - mem_indptr[d]:
        for i in range(mem_indptr[c], mem_indptr[c + 1]):
            m = mem[i]
            for f in range(near.indptr[m], near.indptr[m + 1]):
                w = near.indices[f]
                if comp[w] == d and bit_set(reach, w) and not bit_set(removed_bits, _edge_at(near.edge, f)):
                    return True
        return False
    for i in range(mem_indptr[d], mem_indptr[d + 1]):
        m = mem[i]
        if not bit_set(reach, m):
            continue
        for f in range(far.indptr[m], far.indptr[m + 1]):
            if comp[far.indices[f]] == c and not bit_set(removed_bits, _edge_at(far.edge, f)):
                return True
    return False


@njit(nogil=True)
def _held(fw, bw, roots, column, dead_bits, broken_bits, removed_bits, reach, c):
    """The root bits whole DAG node c may hold in ``column`` (module docstring), from its children's (ROOT_UP)
    or parents' (ROOT_DOWN)."""
    support, near, far = (fw, fw, bw) if column == ROOT_UP else (bw, bw, fw)
    held = np.uint64(0)
    for f in range(support.dag_indptr[c], support.dag_indptr[c + 1]):
        d = support.dag_indices[f]
        bits = roots[d, column]
        if (held | bits) == held or bit_set(dead_bits, _edge_at(support.dag_edge, f)):
            continue
        if not bit_set(broken_bits, d) or _joins(near, far, fw.comp, removed_bits, reach, c, d):
            held |= bits
    return held


@njit(nogil=True, cache=True)
def recheck(fw, bw, roots, column, dead_bits, broken_bits, removed_bits, reach, starts, count, queued, first, queue):
    """Clear, in ``column`` of ``roots``, the bits that whole DAG nodes ``starts[:count]`` no longer hold, and
    on from each node that lost one to its parents (ROOT_UP) or children (ROOT_DOWN), until nothing changes.
    ``reach``: ``to_root`` (ROOT_UP) or ``from_root``; ``queued``: an int32 stamp per DAG node (``first``
    marks a queued node, ``first - 1`` a done one); ``queue``: room for every DAG node."""
    onward = bw if column == ROOT_UP else fw
    n = queued.size
    head = size = 0
    for i in range(count):
        s = starts[i]
        if queued[s] != first and not bit_set(broken_bits, s) and roots[s, column] != 0:
            queued[s] = first
            queue[(head + size) % n] = s
            size += 1
    while size > 0:
        c = queue[head]
        head = (head + 1) % n
        size -= 1
        queued[c] = first - 1
        now = roots[c, column] & _held(fw, bw, roots, column, dead_bits, broken_bits, removed_bits, reach, c)
        if now == roots[c, column]:
            continue
        roots[c, column] = now
        for f in range(onward.dag_indptr[c], onward.dag_indptr[c + 1]):
            d = onward.dag_indices[f]
            if queued[d] != first and not bit_set(broken_bits, d) and roots[d, column] != 0:
                queued[d] = first
                queue[(head + size) % n] = d
                size += 1


@njit(nogil=True)
def neighbours_of(side, c, m, out, count, seen, first):
    """Appends to ``out[:count]`` the DAG nodes other than c of member m's neighbours along ``side`` (each once:
    ``seen``, an int32 stamp per DAG node, marked ``first``); returns the new count."""
    for f in range(side.indptr[m], side.indptr[m + 1]):
        d = side.comp[side.indices[f]]
        if d != c and seen[d] != first:
            seen[d] = first
            out[count] = d
            count += 1
    return count


@njit(nogil=True, cache=True)
def mark_root(fw, bw, roots, column, bit, c, dead_bits, broken_bits, removed_bits, reach, seen, first, queue, span):
    """``bit``, component c's own root bit, in ``column`` of every whole DAG node that reaches c's root
    (ROOT_UP) or that it reaches (ROOT_DOWN): from the DAG nodes that base edges never removed join to c's
    members in ``reach``, along DAG edges not dead and through whole nodes (``marking.mark``). ``seen``: an
    int32 stamp per DAG node, ``first`` fresh; ``queue``: room for every DAG node; ``span``: as
    ``marking.walk_sides`` takes it."""
    side = bw if column == ROOT_UP else fw
    starts = np.empty(side.dag_indptr.size - 1, dtype=np.int64)
    count = 0
    for i in range(side.mem_indptr[c], side.mem_indptr[c + 1]):
        m = side.mem[i]
        if not bit_set(reach, m):
            continue
        for f in range(side.indptr[m], side.indptr[m + 1]):
            d = fw.comp[side.indices[f]]
            if d == c or seen[d] == first or bit_set(removed_bits, _edge_at(side.edge, f)):
                continue
            seen[d] = first
            starts[count] = d
            count += 1
    walk = walk_sides(fw, bw, column == ROOT_DOWN, span)
    # int64 and a plain bool, as staging passes them: one compiled ``mark`` (marking's _LITERALS)
    mark(walk, roots, np.int64(column), bit, starts[:count], np.bool_(True), dead_bits, broken_bits, queue)


@njit(nogil=True, cache=True)
def sweep_roots(fw, bw, roots, dead_bits, broken_bits, removed_bits, to_root, from_root):
    """Every whole DAG node's root bits at once, from the broken ones' own (a journal folded at once): ROOT_UP
    in reverse id order (children first), ROOT_DOWN in id order (parents first)."""
    n = fw.dag_indptr.size - 1
    up, down = np.int64(ROOT_UP), np.int64(ROOT_DOWN)  # as recheck passes them: one compiled _held
    for step in range(n):
        c = n - 1 - step
        if not bit_set(broken_bits, c):
            roots[c, ROOT_UP] = _held(fw, bw, roots, up, dead_bits, broken_bits, removed_bits, to_root, c)
    for c in range(n):
        if not bit_set(broken_bits, c):
            roots[c, ROOT_DOWN] = _held(fw, bw, roots, down, dead_bits, broken_bits, removed_bits, from_root, c)
