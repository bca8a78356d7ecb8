"""The writer's kernels behind ``grail_core.pending``: marking masks, clearing the YES masks a removal cuts,
whole-DAG sweeps for a journal folded at once, and the checks of a component an inner edge left.

DAG node ids are a topological order (every DAG edge goes from a lower id to a higher one), so a sweep in
id order sees a node's parents before it, and one in reverse order its children.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .pending import GROUPS, INTO_COMP, INTO_NODE, OUT_OF_COMP, OUT_OF_NODE, bit_set, table_key
from .probing import EMPTY, lookup, store

__all__ = [
    "mark",
    "walk_sides",
    "longest_edge",
    "lost_side",
    "mark_reached",
    "close_groups",
    "lose",
    "sweep",
    "link_entries",
    "set_bits",
    "store_stamps",
    "still_joined",
    "members_between",
    "reached_inside",
    "regraft",
    "count_between",
    "dag_edge_of",
    "own_bits",
]


@njit(nogil=True)
def _edge_at(edge, f):
    return f if edge.size == 0 else edge[f]


# A mark enters nodes one by one (breadth first) until it has entered ``SWEEP_AFTER`` nodes that are at least
# 1 / ``SWEEP_DENSITY`` of the ids it has passed (from its nearest start to the farthest node entered) and of the
# ids a sweep may pass past the last node it enters (the longest edge's span); then it sweeps the rest in id
# order, each node testing its neighbours behind it. A node entered costs the walk a few scattered reads and a
# branch it cannot predict; an id passed costs the sweep a read in sequence (measured on a DAG of 10,000 levels:
# ~50 ns a node entered, ~12 ns an id swept), so a dense mark (the whole of a deep DAG below a node) is swept
# ~3x cheaper, and a sparse one, or one on a DAG with an edge across most ids (R-MAT's), is not swept.
SWEEP_AFTER = 1 << 10
SWEEP_DENSITY = 4

# _LITERALS: numba compiles a kernel once per mix of argument types, a literal (a column, flag or count named at
# the call) being a type of its own, and each kernel again into every kernel that calls it. So ``mark`` and
# ``mark_reached`` pass ``_spread`` int64 columns and counts, int32 stamps and a plain bool (their callers pass
# them the same): ``_spread`` compiles once per mode.


@njit(nogil=True)
def _entered(masks, column, bits, seen, mark_value, w):
    """Whether node w was entered: it holds ``bits`` (``seen`` None: compiled apart, as a test costs a sweep
    more than the rest of its step) or is stamped ``mark_value``."""
    if seen is None:
        return (masks[w, column] & bits) == bits
    return seen[w] == mark_value


@njit(nogil=True)
def _enter(masks, column, bits, seen, mark_value, queue, tail, w):
    masks[w, column] |= bits
    if seen is not None:
        seen[w] = mark_value
    queue[tail] = w
    return tail + 1


@njit(nogil=True)
def _spread(walk, masks, column, bits, cut, dead_bits, broken_bits, seen, mark_value, queue, tail):
    """Enter every node that the nodes ``queue[:tail]`` (entered already) reach along ``walk`` (``walk_sides``)
    and that was not entered: set ``bits`` in ``masks[:, column]``, stamp it in ``seen`` (unless None: then a
    node was entered when stamped, else when it holds ``bits``) and append it to ``queue``; returns the count.
    ``cut``: dead edges and broken nodes are not passed. Breadth first, then, once dense, a sweep in id order
    (``SWEEP_AFTER``): the nodes entered are the same either way."""
    ahead, _, order, span = walk
    indptr, indices, edge = ahead
    near = far = order * queue[0]
    for i in range(tail):
        near = min(near, order * queue[i])
        far = max(far, order * queue[i])
    head = np.int64(0)
    while head < tail:
        if tail >= SWEEP_AFTER and tail * SWEEP_DENSITY >= far - near + span:
            return _sweep_rest(
                walk, masks, column, bits, cut, dead_bits, broken_bits, seen, mark_value, queue, head, tail
            )
        x = queue[head]
        head += 1
        for f in range(indptr[x], indptr[x + 1]):
            w = indices[f]
            if _entered(masks, column, bits, seen, mark_value, w):
                continue
            if cut and (bit_set(dead_bits, _edge_at(edge, f)) or bit_set(broken_bits, w)):
                continue
            tail = _enter(masks, column, bits, seen, mark_value, queue, tail, w)
            far = max(far, order * w)
    return tail


@njit(nogil=True)
def _sweep_rest(walk, masks, column, bits, cut, dead_bits, broken_bits, seen, mark_value, queue, head, tail):
    """``_spread`` on from ``queue[head:tail]`` (entered, their neighbours ahead not yet tested) by a sweep in
    the walk's order: a node is entered when a neighbour behind it was (and passes to it). No DAG edge spans
    more than the walk's ``span`` ids, so the sweep ends that far past the last node entered. A node that
    holds ``bits`` without being entered (an earlier mark's) passes them on as an entered one does: the masks
    a mark keeps are closed along the edges it passes, so its neighbours hold them already."""
    _, behind, order, span = walk
    back_indptr, back_indices, back_edge = behind
    n = back_indptr.size - 1
    position = last = order * queue[head]
    for i in range(head, tail):
        position = min(position, order * queue[i])
        last = max(last, order * queue[i])
    end = n - 1 if order == 1 else 0  # the last position of the ids
    stop = min(last + span, end)
    while position < stop:
        position += 1
        w = order * position
        if _entered(masks, column, bits, seen, mark_value, w) or (cut and bit_set(broken_bits, w)):
            continue
        for f in range(back_indptr[w], back_indptr[w + 1]):
            q = back_indices[f]
            if not _entered(masks, column, bits, seen, mark_value, q):
                continue
            if cut and (bit_set(dead_bits, _edge_at(back_edge, f)) or bit_set(broken_bits, q)):
                continue
            tail = _enter(masks, column, bits, seen, mark_value, queue, tail, w)
            stop = min(position + span, end)
            break
    return tail


@njit(nogil=True)
def walk_sides(fw, bw, downwards, span):
    """The walk of ``mark`` over the DAG of sides ``fw`` and ``bw`` (``traversal.Side``), along children when
    ``downwards``, else along parents: (ahead, behind, order, span), ``ahead`` the (indptr, indices, edge) it
    follows (``edge``: each entry's forward position, empty for the forward CSR itself), ``behind`` the same
    edges the other way, ``order`` 1 when ``ahead`` leads to higher ids, else -1, and ``span`` the most ids
    that a DAG edge spans (``longest_edge``)."""
    children = (fw.dag_indptr, fw.dag_indices, fw.dag_edge[:0])
    parents = (bw.dag_indptr, bw.dag_indices, bw.dag_edge)
    return (children, parents, 1, span) if downwards else (parents, children, -1, span)


@njit(nogil=True, cache=True)
def longest_edge(indptr, indices):
    """The most ids that an edge of the DAG CSR ``indptr``/``indices`` spans (0 with none)."""
    longest = 0
    for x in range(indptr.size - 1):
        for f in range(indptr[x], indptr[x + 1]):
            longest = max(longest, abs(indices[f] - x))
    return longest


@njit(nogil=True, cache=True)
def mark(walk, masks, column, bits, starts, cut, dead_bits, broken_bits, queue):
    """Set ``bits`` in ``masks[:, column]`` on every DAG node reachable from ``starts`` along ``walk``
    (``walk_sides``), entering only nodes that lack one of them: over any number of calls each node is entered
    once per bit. With ``cut``, dead edges and broken nodes are not passed (the YES masks). Returns how many
    nodes were entered; they are ``queue[:count]``."""
    column, cut, no_mark = np.int64(column), np.bool_(cut), np.int32(0)  # _LITERALS
    tail = np.int64(0)
    for s in starts:
        if (masks[s, column] & bits) == bits or (cut and bit_set(broken_bits, s)):
            continue
        tail = _enter(masks, column, bits, None, no_mark, queue, tail, np.int64(s))
    if tail == 0:
        return 0
    return _spread(walk, masks, column, bits, cut, dead_bits, broken_bits, None, no_mark, queue, tail)


@njit(nogil=True)
def _heap_push(heap, size, key):
    i = size
    heap[i] = key
    while i > 0:
        up = (i - 1) >> 1
        if heap[up] <= heap[i]:
            break
        heap[up], heap[i] = heap[i], heap[up]
        i = up
    return size + 1


@njit(nogil=True)
def _heap_pop(heap, size):
    """The smallest key; the heap keeps ``size - 1``."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        low = 2 * i + 1
        if low >= size:
            break
        if low + 1 < size and heap[low + 1] < heap[low]:
            low += 1
        if heap[i] <= heap[low]:
            break
        heap[low], heap[i] = heap[i], heap[low]
        i = low
    return top


@njit(nogil=True, cache=True)
def mark_reached(walk, masks, column, bit, start, seen, mark_value, queue):
    """Set ``bit`` in ``masks[:, column]`` on every DAG node reachable from ``start`` along ``walk``
    (``walk_sides``; every edge, dead ones too), passing each once (``seen``: an int32 stamp per DAG
    node): unlike ``mark``, it does not stop where the bit is, for a bit whose nodes need not hold what they
    reach."""
    column, mark_value = np.int64(column), np.int32(mark_value)  # _LITERALS
    tail = _enter(masks, column, bit, seen, mark_value, queue, np.int64(0), np.int64(start))
    none = np.zeros(0, dtype=np.uint64)
    return _spread(walk, masks, column, bit, np.bool_(False), none, none, seen, mark_value, queue, tail)


# What ``lost_side`` knows of a node: reached from its start, from the other end's other neighbours, both.
_FROM_START, _FROM_OTHER = 1, 2


@njit(nogil=True)
def _lonely(known, broken):
    """Whether a node with flags ``known`` is found once taken (a broken node keeps only _FROM_START)."""
    return known == _FROM_START or (broken and (known & _FROM_START) != 0)


@njit(nogil=True, cache=True)
def lost_side(indptr, indices, edge, dead_bits, broken_bits, start, other, order, flags, first, heap, found):
    """The DAG nodes that ``start`` reaches and ``other`` no longer does, ``other -> start`` (in the direction
    of ``indptr``/``indices``) being a DAG edge whose base edge x -> y was just removed (the DAG edge dead or
    not), into ``found``: how many, or -1 when the sweep would take more nodes than ``found`` holds. Only edges
    not dead are passed. A node found is one that y may reach and x no longer does: x reaches what ``other``'s
    other neighbours reach through components still strongly connected, so a broken node (``broken_bits``)
    passes on only what ``start`` reaches, and a broken ``other`` nothing.

    A sweep in topological order (``order`` 1: ids up, along children; -1: down, along parents) from ``start``
    and from ``other``'s other neighbours: a node taken from the heap has every flag its neighbours on the
    near side give it, and is found when it is reached from ``start`` alone. Once no waiting node is, none
    can be any more, and the sweep ends. ``flags``: an int32 stamp per DAG node (``first``, ``first + 1``,
    ``first + 2``: the flags 1, 2, 3); ``heap``: room for every DAG node."""
    flags[start] = first + _FROM_START - 1
    size = _heap_push(heap, 0, order * start)
    lonely = 1  # nodes waiting that will be found
    taken = 1
    count = 0
    for f in range(indptr[other], indptr[other + 1]):
        w = indices[f]
        if w == start or bit_set(dead_bits, _edge_at(edge, f)) or bit_set(broken_bits, other):
            continue
        flags[w] = first + _FROM_OTHER - 1
        size = _heap_push(heap, size, order * w)
        taken += 1
    while lonely > 0:
        if taken > found.size:
            return -1
        w = order * _heap_pop(heap, size)
        size -= 1
        known = flags[w] - first + 1
        if bit_set(broken_bits, w):
            known &= _FROM_START
        if known == _FROM_START:
            found[count] = w
            count += 1
            lonely -= 1
        if known == 0:
            continue
        for f in range(indptr[w], indptr[w + 1]):
            if bit_set(dead_bits, _edge_at(edge, f)):
                continue
            v = indices[f]
            had = flags[v] - first + 1
            if had < _FROM_START or had > _FROM_START + _FROM_OTHER:
                had = 0
            now = had | known
            if now == had:
                continue
            flags[v] = first + now - 1
            broken = bit_set(broken_bits, v)
            lonely += int(_lonely(now, broken)) - int(_lonely(had, broken))
            if had == 0:
                size = _heap_push(heap, size, order * v)
                taken += 1
    return count


@njit(nogil=True, cache=True)
def close_groups(nodes, count, groups, source_bits, table, links, entry_group, closure):
    """``closure[g] |= `` the groups of the added edges leaving ``nodes[:count]`` (DAG nodes), for each group
    g of ``groups``: those nodes were just found reached from an added edge of group g."""
    for j in range(count):
        c = nodes[j]
        if not bit_set(source_bits, c):
            continue
        leaving = np.uint64(0)
        i = lookup(table, table_key(OUT_OF_COMP, c))
        while i != EMPTY:
            leaving |= np.uint64(1) << np.uint64(entry_group[i])
            i = links[i, 0]
        for g in range(GROUPS):
            if (groups >> np.uint64(g)) & np.uint64(1):
                closure[g] |= leaving


@njit(nogil=True)
def own_bits(nodes, bits, c):
    """The bits that node c holds by itself (it is a hub, or a witness edge's end): ``bits[i]`` where
    ``nodes[i] == c``."""
    found = np.uint64(0)
    for i in range(nodes.size):
        if nodes[i] == c:
            found |= bits[i]
    return found


@njit(nogil=True, cache=True)
def lose(
    masks,
    first,
    second,
    support_indptr,
    support_indices,
    support_edge,
    onward_indptr,
    onward_indices,
    own_nodes,
    own_first,
    own_second,
    dead_bits,
    broken_bits,
    starts,
    queued,
    mark_value,
    queue,
):
    """Clear, in columns ``first`` and ``second`` of ``masks`` (one direction), every bit that no longer has a witness:
    a node keeps a bit it holds by itself (``own_*``) or that a neighbour on the support side (parents for the
    masks of what reaches a node, children for those of what it reaches) holds through an edge that is not
    dead; a broken node keeps none. Rechecks ``starts`` and, from each node that lost a bit, its onward
    neighbours, until nothing changes. ``queued``: an int32 stamp per DAG node (``mark_value`` marks a queued
    node); ``queue``: room for every DAG node."""
    n = queued.size
    head = 0
    size = 0
    for s in starts:
        if queued[s] != mark_value:
            queued[s] = mark_value
            queue[(head + size) % n] = s
            size += 1
    while size > 0:
        w = queue[head]
        head = (head + 1) % n
        size -= 1
        queued[w] = mark_value - 1
        keep_first = np.uint64(0)
        keep_second = np.uint64(0)
        if not bit_set(broken_bits, w):
            keep_first = own_bits(own_nodes, own_first, w)
            keep_second = own_bits(own_nodes, own_second, w)
            for f in range(support_indptr[w], support_indptr[w + 1]):
                if bit_set(dead_bits, _edge_at(support_edge, f)):
                    continue
                q = support_indices[f]
                keep_first |= masks[q, first]
                keep_second |= masks[q, second]
        now_first = masks[w, first] & keep_first
        now_second = masks[w, second] & keep_second
        if now_first == masks[w, first] and now_second == masks[w, second]:
            continue
        masks[w, first] = now_first
        masks[w, second] = now_second
        for f in range(onward_indptr[w], onward_indptr[w + 1]):
            x = onward_indices[f]
            if queued[x] != mark_value:
                queued[x] = mark_value
                queue[(head + size) % n] = x
                size += 1


@njit(nogil=True, cache=True)
def sweep(indptr, indices, edge, masks, column, cut, dead_bits, broken_bits, downwards):
    """Every node ORs the masks of its neighbours in ``indptr``/``indices`` (parents when ``downwards``, in
    id order; children otherwise, in reverse) into its own: from the bits the nodes hold by themselves, the
    masks of a whole DAG in one pass. ``cut``: as in ``mark`` (a broken node ends with no bit)."""
    n = indptr.size - 1
    for step in range(n):
        w = step if downwards else n - 1 - step
        if cut and bit_set(broken_bits, w):
            masks[w, column] = 0
            continue
        acc = masks[w, column]
        for f in range(indptr[w], indptr[w + 1]):
            if cut and bit_set(dead_bits, _edge_at(edge, f)):
                continue
            acc |= masks[indices[f], column]
        masks[w, column] = acc


@njit(nogil=True, cache=True)
def link_entries(table, links, src, dst, comp, n_base, first, stop, source_bits, target_bits):
    """Put log entries ``first..stop-1`` at the head of their four lists (out of and into their DAG nodes, for
    nodes of the labels' graph, and their nodes), in order; marks the DAG nodes in ``source_bits``/
    ``target_bits``. Returns how many keys the table gained (the caller made room for 4 a entry)."""
    added = 0
    for i in range(first, stop):
        x = src[i]
        y = dst[i]
        key = table_key(OUT_OF_NODE, x)
        links[i, OUT_OF_NODE - OUT_OF_COMP] = lookup(table, key)
        added += store(table, key, i)
        key = table_key(INTO_NODE, y)
        links[i, INTO_NODE - OUT_OF_COMP] = lookup(table, key)
        added += store(table, key, i)
        if x < n_base:
            c = comp[x]
            key = table_key(OUT_OF_COMP, c)
            links[i, 0] = lookup(table, key)
            added += store(table, key, i)
            source_bits[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
        else:
            links[i, 0] = EMPTY
        if y < n_base:
            c = comp[y]
            key = table_key(INTO_COMP, c)
            links[i, INTO_COMP - OUT_OF_COMP] = lookup(table, key)
            added += store(table, key, i)
            target_bits[c >> 6] |= np.uint64(1) << np.uint64(c & 63)
        else:
            links[i, INTO_COMP - OUT_OF_COMP] = EMPTY
    return added


@njit(nogil=True, cache=True)
def set_bits(bits, ids):
    for i in ids:
        bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)


@njit(nogil=True, cache=True)
def store_stamps(table, kind, ids, stamp):
    """``table[kind, id] = stamp`` for each id; returns how many keys are new."""
    added = 0
    for i in ids:
        added += store(table, table_key(kind, i), stamp)
    return added


@njit(nogil=True, cache=True)
def still_joined(
    fw_indptr, fw_indices, bw_indptr, bw_indices, bw_edge, comp, removed_bits, x, y, stamp, mark_value, qf, qb
):
    """Whether node x still reaches node y inside their components (the DAG nodes of x and y), by base edges
    never removed: a search from both ends, the smaller frontier first (``stamp``: int32 per node,
    ``mark_value`` and ``mark_value + 1``)."""
    c = comp[x]
    d = comp[y]
    seen_f = mark_value
    seen_b = mark_value + 1
    stamp[x] = seen_f
    stamp[y] = seen_b
    qf[0] = x
    qb[0] = y
    fh, ft, bh, bt = 0, 1, 0, 1
    while fh < ft and bh < bt:
        if ft - fh <= bt - bh:
            end = ft
            for i in range(fh, end):
                u = qf[i]
                for f in range(fw_indptr[u], fw_indptr[u + 1]):
                    w = fw_indices[f]
                    if (comp[w] != c and comp[w] != d) or stamp[w] == seen_f or bit_set(removed_bits, f):
                        continue
                    if stamp[w] == seen_b:
                        return True
                    stamp[w] = seen_f
                    qf[ft] = w
                    ft += 1
            fh = end
        else:
            end = bt
            for i in range(bh, end):
                u = qb[i]
                for f in range(bw_indptr[u], bw_indptr[u + 1]):
                    w = bw_indices[f]
                    if (comp[w] != c and comp[w] != d) or stamp[w] == seen_b or bit_set(removed_bits, bw_edge[f]):
                        continue
                    if stamp[w] == seen_f:
                        return True
                    stamp[w] = seen_b
                    qb[bt] = w
                    bt += 1
            bh = end
    return False


@njit(nogil=True, cache=True)
def reached_inside(indptr, indices, edge, comp, removed_bits, start, closed, parent, stamp, mark_value, queue):
    """The members of ``start``'s component that it reaches inside it by base edges never removed (in the
    direction of ``indptr``/``indices``; ``edge`` as in ``mark``), into ``queue``: how many; each marked
    ``mark_value`` in ``stamp``. Members in ``closed`` (a bit set; empty for none) are not entered: the caller
    knows what they reach. ``parent`` (empty for none): each member reached gets the edge it was reached by
    (a forward CSR position), ``start`` -1."""
    c = comp[start]
    stamp[start] = mark_value
    queue[0] = start
    if parent.size:
        parent[start] = -1
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        for f in range(indptr[u], indptr[u + 1]):
            w = indices[f]
            e = _edge_at(edge, f)
            if comp[w] != c or stamp[w] == mark_value or bit_set(removed_bits, e):
                continue
            if closed.size and bit_set(closed, w):
                continue
            stamp[w] = mark_value
            queue[tail] = w
            tail += 1
            if parent.size:
                parent[w] = e
    return tail


@njit(nogil=True, cache=True)
def members_between(indptr, indices, edge, comp, removed_bits, start, other, closed, stamp, mark_value, queue, found):
    """The members of ``start``'s component that ``start`` reaches inside it and ``other`` (a member too)
    does not, by base edges never removed (in the direction of ``indptr``/``indices``; ``edge`` as in
    ``mark``), into ``found``: how many, or -1 when more than ``found`` holds. A member that ``other``
    reaches passes nothing on: ``other`` reaches what it reaches. ``closed``: a bit set of members that
    ``other`` is known to reach, with everything they reach (empty for none); the walk from ``other`` does
    not enter them, so it costs what ``other`` reaches outside them. ``stamp``: int32 per node, marked
    ``mark_value`` (``other``'s) and ``mark_value + 1``."""
    reached_inside(indptr, indices, edge, comp, removed_bits, other, closed, queue[:0], stamp, mark_value, queue)
    if stamp[start] == mark_value or (closed.size and bit_set(closed, start)):
        return 0
    c = comp[start]
    own = mark_value + 1
    stamp[start] = own
    queue[0] = start
    head, tail = 0, 1
    while head < tail:
        if tail > found.size:
            return -1
        u = queue[head]
        head += 1
        for f in range(indptr[u], indptr[u + 1]):
            w = indices[f]
            if comp[w] != c or stamp[w] == own or stamp[w] == mark_value or bit_set(removed_bits, _edge_at(edge, f)):
                continue
            if closed.size and bit_set(closed, w):
                continue
            stamp[w] = own
            queue[tail] = w
            tail += 1
    if tail > found.size:
        return -1
    found[:tail] = queue[:tail]
    return tail


@njit(nogil=True, cache=True)
def regraft(
    down_indptr,
    down_indices,
    down_edge,
    up_indptr,
    up_indices,
    up_edge,
    comp,
    removed_bits,
    parent,
    reached,
    start,
    stamp,
    mark_value,
    queue,
):
    """A tree of ``reached`` (its members' edges from the member before them along ``down``, in ``parent``;
    ``reached_inside`` grows it) after the edge into ``start`` was removed: the members below ``start``
    hang again by base edges never removed, from members outside them that ``reached`` holds (their own tree
    paths are whole) and then from each other; those left hanging leave ``reached``, into ``queue``: how
    many. It costs the members below ``start`` and their edges, not the tree. ``stamp``: int32 per node,
    marked ``mark_value`` (below ``start``) and ``mark_value + 1`` (hung again)."""
    c = comp[start]
    hung = mark_value + 1
    stamp[start] = mark_value
    queue[0] = start
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        for f in range(down_indptr[u], down_indptr[u + 1]):
            w = down_indices[f]
            if comp[w] == c and stamp[w] != mark_value and parent[w] == _edge_at(down_edge, f):
                stamp[w] = mark_value
                queue[tail] = w
                tail += 1
    below = tail
    for i in range(below):
        w = queue[i]
        for g in range(up_indptr[w], up_indptr[w + 1]):
            p = up_indices[g]
            e = _edge_at(up_edge, g)
            if comp[p] == c and stamp[p] != mark_value and bit_set(reached, p) and not bit_set(removed_bits, e):
                parent[w] = e
                stamp[w] = hung
                queue[tail] = w
                tail += 1
                break
    head = below
    while head < tail:
        u = queue[head]
        head += 1
        for f in range(down_indptr[u], down_indptr[u + 1]):
            w = down_indices[f]
            e = _edge_at(down_edge, f)
            if comp[w] == c and stamp[w] == mark_value and not bit_set(removed_bits, e):
                parent[w] = e
                stamp[w] = hung
                queue[tail] = w
                tail += 1
    lost = 0
    for i in range(below):
        w = queue[i]
        if stamp[w] == mark_value:
            parent[w] = -1
            reached[w >> 6] &= ~(np.uint64(1) << np.uint64(w & 63))
            queue[lost] = w
            lost += 1
    return lost


@njit(nogil=True, cache=True)
def count_between(fw_indptr, fw_indices, bw_indptr, bw_indices, bw_edge, comp, mem_indptr, mem, removed_bits, cx, cy):
    """Base edges from a member of DAG node cx to one of cy that were never removed, read from the side with
    fewer edges (a giant component has many)."""
    out_edges = 0
    for i in range(mem_indptr[cx], mem_indptr[cx + 1]):
        m = mem[i]
        out_edges += fw_indptr[m + 1] - fw_indptr[m]
    in_edges = 0
    for i in range(mem_indptr[cy], mem_indptr[cy + 1]):
        m = mem[i]
        in_edges += bw_indptr[m + 1] - bw_indptr[m]
    kept = 0
    if out_edges <= in_edges:
        for i in range(mem_indptr[cx], mem_indptr[cx + 1]):
            m = mem[i]
            for f in range(fw_indptr[m], fw_indptr[m + 1]):
                if comp[fw_indices[f]] == cy and not bit_set(removed_bits, f):
                    kept += 1
    else:
        for i in range(mem_indptr[cy], mem_indptr[cy + 1]):
            m = mem[i]
            for f in range(bw_indptr[m], bw_indptr[m + 1]):
                if comp[bw_indices[f]] == cx and not bit_set(removed_bits, bw_edge[f]):
                    kept += 1
    return kept


@njit(nogil=True, cache=True)
def dag_edge_of(out_indptr, out_indices, in_indptr, in_indices, in_edge, cx, cy):
    """The forward DAG CSR position of edge cx -> cy, read from the shorter of the two rows (-1 if none)."""
    if out_indptr[cx + 1] - out_indptr[cx] <= in_indptr[cy + 1] - in_indptr[cy]:
        for e in range(out_indptr[cx], out_indptr[cx + 1]):
            if out_indices[e] == cy:
                return e
        return -1
    for f in range(in_indptr[cy], in_indptr[cy + 1]):
        if in_indices[f] == cx:
            return in_edge[f]
    return -1
