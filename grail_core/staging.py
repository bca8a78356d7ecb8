"""One update applied to the shared state of ``grail_core.pending``, in one numba call (the writer's side).

``stage_edges`` removes, then adds, an update's edges: a removed base edge gets its bit and stamp; a
component it leaves is checked (``marking.still_joined``) and marked broken if it split; a DAG edge
left without a base edge dies; either clears the YES bits that relied on it (``marking.lose``) and marks
the removal masks. An added edge goes into the log and its lists, marks the NO masks of its group and the
groups' closure, and becomes a witness (its own YES bit) while there is a free one and the labels say its
ends are unrelated. Closed marks pass each DAG node once per bit over all updates.

The removal masks keep one invariant: a pair of the base graph that no longer has a path in G_T (the base
graph less every edge removed up to update T) has a bit in RM_UP of its source's DAG node and in RM_DOWN of
its target's. Any removed edge h = x -> y marks (supersets of) Up(h) = anc(x) - anc(y) and Down(h) =
desc(y) - desc(x), both in G_T, with one bit: a pair (s, t) lost at T had a path in G_{T-1}, and each such
path used h; its parts s..x and y..t lie in G_T, so s reaches x, and does not reach y (it would reach t), and
y reaches t, which x does not (s would reach t). Marks only grow, so pairs lost earlier stay marked; a version
older than a mark only searches more. No pair is lost where x still reaches y in G_T (``still_joined``, inside
the components of x and y), nor where h leaves one strongly connected component for another and a base edge
between them is left (x reaches its tail, its head reaches y).

- A DAG edge that dies, or one whose end is a broken component: Up and Down over the DAG
  (``_mark_dead_edge``, ``marking.lost_side``; only paths through components still strongly connected
  count as x's). A side whose sweep passes more than ``SIDE_BUDGET`` nodes marks a superset instead.
- An inner edge of component C that x no longer joins to y (C is now broken: its members are searched one
  by one; ``_mark_split``): Down(h) within C is D = what y reaches inside C and x no longer does, and below
  C what the edges out of D reach (a path y..t leaves C from a member that y reaches and x does not, else x
  would reach t); Up(h) within C is U = what reaches x inside C and no longer reaches y, and above C what
  reaches the edges into U. Measured in the graph as it is now, D and U hold only what this removal cut,
  not what earlier ones did. A side whose members fit (``SPLIT_BUDGET`` an update, the smaller side first)
  is marked so, its members one by one (``pending.NODE_RM_DOWN``, ``NODE_RM_UP``), with one bit of C's
  rank group; a side that does not, whole (C's DAG node and everything past it on that side). Both too
  large (or C past ``SPLIT_SEARCH_BUDGET`` members), C's closed marks (everything that reaches it and
  everything it reaches, one bit), which cover every later removal in or at C (``CLOSED``).
- A broken component's root sets (``pending``: ``to_root``, ``from_root``) are found once, when C first
  splits, with a tree each of the edges that join their members to the root; later removals hang again only
  what lay below their edge in a tree (``_root_reach``). The sides of a split take them as known: when x
  reaches the root, x reaches all that the root reaches, so the walks cost what lies outside the root's sets,
  not C (``_split_side``).

A journal folded at once (``fold_removals``) removes its edges one after the other in the same way, within
budgets of its own; what a mark spreads to everything reached is spread by one sweep at the end.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .marking import (
    close_groups,
    count_between,
    dag_edge_of,
    lose,
    lost_side,
    mark,
    mark_reached,
    members_between,
    reached_inside,
    regraft,
    still_joined,
    walk_sides,
)
from .pending import (
    BROKEN_COMP,
    BWD_YES,
    CLOSED_MARK,
    DEAD_DAG_EDGE,
    DOWN_NO,
    DOWN_YES,
    FWD_YES,
    GROUPS,
    INTO_COMP,
    INTO_NODE,
    NARROW_UP,
    NEW_DOWN_NO,
    NEW_UP_NO,
    NODE_RM_DOWN,
    NODE_RM_UP,
    OUT_OF_COMP,
    OUT_OF_NODE,
    REMOVED_EDGE,
    RM_DOWN,
    RM_UP,
    ROOT_DOWN,
    ROOT_UP,
    UP_NO,
    UP_YES,
    WIDE_UP,
    bit_set,
    removal_bit,
    table_key,
)
from .probing import EMPTY, lookup, store
from .query import classify
from .records import NO
from .roots import mark_root, neighbours_of, recheck, sweep_roots
from .traversal import find_edge

__all__ = [
    "Shared",
    "Log",
    "SUPPORT",
    "WITNESSES",
    "REMOVED_EVER",
    "REMOVED_BACK",
    "LIVE",
    "ENTRIES",
    "TABLE_USED",
    "LIVE_USED",
    "SPLIT_KEYS",
    "ROOT_BITS",
    "COUNTERS",
    "SPLIT_BUDGET",
    "FOLD_SPLIT_BUDGET",
    "stage_edges",
    "closures",
    "group_of",
    "fold_removals",
    "fold_additions",
    "fold_closure",
    "fold_roots",
    "stamps_in_effect",
]

# Beyond pending's kinds, the writer keeps in the table how many base edges under a touched DAG edge are left,
# the root of each broken component (``_root_reach``) and the broken components with closed marks.
SUPPORT, ROOT, CLOSED = 8, 9, 10

# The nodes a side of a dead edge's sweep may take before that side is marked whole (``_mark_dead_edge``).
SIDE_BUDGET = 1 << 16
# The same in a journal folded at once, and the members its splits may mark one by one (``fold_removals``).
FOLD_SIDE_BUDGET = 1 << 10
FOLD_SPLIT_BUDGET = 1 << 16
# The members that splits may mark one by one in one update (the caller makes room for as many table keys),
# and the members of a component searched for a split before it takes the closed marks (``_mark_split``).
SPLIT_BUDGET = 1 << 12
SPLIT_SEARCH_BUDGET = 1 << 22

# Counters (``Shared.counters``): witnesses taken, base edges ever removed, those of them added back and in
# the graph, log entries in the graph, log entries, keys in the table and in the live table, the table
# keys of members that splits marked in the update being staged, and root bits taken (``grail_core.roots``).
WITNESSES, REMOVED_EVER, REMOVED_BACK, LIVE, ENTRIES, TABLE_USED, LIVE_USED, SPLIT_KEYS, ROOT_BITS = range(9)
COUNTERS = 9
_SCRATCH_MARK, _NODE_MARK = 0, 1

# _LITERALS: the wrappers whose arguments are literals at their calls (columns, flags, budgets) are inlined,
# typed in their callers, and pass int64 and plain bools to the kernels of ``marking`` and ``roots``: each of
# those compiles once, not once per literal (as marking's _LITERALS says).


class Shared(NamedTuple):
    """The arrays the writer changes in place and never reallocates."""

    masks: np.ndarray
    removed_bits: np.ndarray
    dead_bits: np.ndarray
    broken_bits: np.ndarray
    source_bits: np.ndarray
    target_bits: np.ndarray
    source_words: np.ndarray  # the words of source_bits (target_bits) that have a bit
    target_words: np.ndarray
    closure_no: np.ndarray  # (GROUPS,) uint64: group g may lead to these (not closed)
    hub_nodes: np.ndarray  # the labels' hubs: DAG node and bit
    hub_bits: np.ndarray
    witness_src: np.ndarray  # (GROUPS,) DAG nodes of the witness edges' ends, and their log entries
    witness_dst: np.ndarray
    witness_entry: np.ndarray
    counters: np.ndarray  # int64
    marks: np.ndarray  # int64: the last marks of the two scratch stamps
    queued: np.ndarray  # int32 per DAG node (``lose``)
    queue: np.ndarray  # int64 per DAG node
    node_stamp: np.ndarray  # int32 per node (component checks; empty when every component is one node)
    node_queues: np.ndarray  # (2, nodes) int64
    node_marked: np.ndarray  # per node: it has removal marks of its own (``pending.removal_mask``)
    to_root: np.ndarray  # per node: it reaches (is reached from) its broken component's root (``_root_reach``)
    from_root: np.ndarray
    to_parent: np.ndarray  # int64 per node: in a tree of to_root, its edge to the next member on its way to the root;
    from_parent: np.ndarray  # in a tree of from_root, the edge into it from the member before it
    roots: np.ndarray  # (DAG nodes, 2) uint64: ROOT_UP, ROOT_DOWN (``grail_core.roots``)
    open_sources: np.ndarray  # per DAG node: its UP_NO or RM_UP has a bit (``pending.labels_hold``),
    open_targets: np.ndarray  # its DOWN_NO or RM_DOWN
    longest_edge: int  # the most ids a DAG edge spans (``marking.walk_sides``)


class Log(NamedTuple):
    """The added edges' log (``pending.Pending``: src, dst, born, died, links) and each entry's group."""

    src: np.ndarray
    dst: np.ndarray
    born: np.ndarray
    died: np.ndarray
    group: np.ndarray
    links: np.ndarray


@njit(nogil=True)
def _set(bits, i):
    bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)


@njit(nogil=True, inline="always")  # ``column`` is a literal at each call (_LITERALS)
def _opened(sh, column, nodes, count):
    """Note the DAG nodes ``nodes[:count]``, just given bits in ``column``, in ``open_sources`` (UP_NO,
    RM_UP) or ``open_targets`` (DOWN_NO, RM_DOWN)."""
    if column == UP_NO or column == RM_UP:
        for i in range(count):
            _set(sh.open_sources, nodes[i])
    elif column == DOWN_NO or column == RM_DOWN:
        for i in range(count):
            _set(sh.open_targets, nodes[i])


@njit(nogil=True, inline="always")  # ``column`` is a literal at each call (_LITERALS)
def _give(sh, c, column, bit):
    """``bit`` in ``column`` of DAG node c alone."""
    sh.masks[c, column] |= bit
    if column == UP_NO or column == RM_UP:
        _set(sh.open_sources, c)
    elif column == DOWN_NO or column == RM_DOWN:
        _set(sh.open_targets, c)


@njit(nogil=True, inline="always")  # ``which`` and ``count`` are literals at each call (_LITERALS)
def _fresh_marks(sh, which, count):
    """The first of ``count`` fresh marks in a row for scratch stamp ``which`` (cleared when the int32 marks
    run out)."""
    if sh.marks[which] > np.iinfo(np.int32).max - count - 2:
        if which == _SCRATCH_MARK:
            sh.queued[:] = 0
        else:
            sh.node_stamp[:] = 0
        sh.marks[which] = 0
    first = sh.marks[which] + 1
    sh.marks[which] += count
    return np.int32(first)


@njit(nogil=True)
def _support(fw, bw, sh, cx, cy):
    """``marking.count_between``: the base edges from DAG node cx to cy never removed."""
    return count_between(
        fw.indptr,
        fw.indices,
        bw.indptr,
        bw.indices,
        bw.edge,
        fw.comp,
        fw.mem_indptr,
        fw.mem,
        sh.removed_bits,
        cx,
        cy,
    )


@njit(nogil=True, cache=True)
def _cut(fw, bw, sh, below, above):
    """Clear the YES bits that relied on a DAG edge now dead (or on a component now broken): what reaches
    ``below`` is rechecked downwards (a bit needs a parent that holds it), what ``above`` reaches upwards
    (a child). A node holds by itself the bits of the hubs it is and of the witness ends it is."""
    hubs = sh.hub_nodes.size
    witnesses = sh.counters[WITNESSES]
    nodes = np.empty(hubs + witnesses, dtype=np.int64)
    hub_bits = np.zeros(hubs + witnesses, dtype=np.uint64)
    witness_bits = np.zeros(hubs + witnesses, dtype=np.uint64)
    nodes[:hubs] = sh.hub_nodes
    hub_bits[:hubs] = sh.hub_bits
    for g in range(witnesses):
        witness_bits[hubs + g] = np.uint64(1) << np.uint64(g)
    nodes[hubs:] = sh.witness_dst[:witnesses]
    lose(
        sh.masks,
        np.int64(FWD_YES),
        np.int64(DOWN_YES),
        bw.dag_indptr,
        bw.dag_indices,
        bw.dag_edge,
        fw.dag_indptr,
        fw.dag_indices,
        nodes,
        hub_bits,
        witness_bits,
        sh.dead_bits,
        sh.broken_bits,
        np.array([below], dtype=np.int64),
        sh.queued,
        _fresh_marks(sh, _SCRATCH_MARK, 2),
        sh.queue,
    )
    nodes[hubs:] = sh.witness_src[:witnesses]
    lose(
        sh.masks,
        np.int64(BWD_YES),
        np.int64(UP_YES),
        fw.dag_indptr,
        fw.dag_indices,
        fw.dag_edge[:0],
        bw.dag_indptr,
        bw.dag_indices,
        nodes,
        hub_bits,
        witness_bits,
        sh.dead_bits,
        sh.broken_bits,
        np.array([above], dtype=np.int64),
        sh.queued,
        _fresh_marks(sh, _SCRATCH_MARK, 2),
        sh.queue,
    )


@njit(nogil=True, inline="always")  # its column and ``cut`` are literals at each call (_LITERALS)
def _mark_from(fw, bw, sh, column, bits, start, cut):
    """``marking.mark`` of ``bits`` from DAG node ``start``, downwards for the columns of what reaches a node
    (even ones), upwards for the others."""
    walk = walk_sides(fw, bw, column % 2 == 0, sh.longest_edge)
    starts = np.array([start], dtype=np.int64)
    count = mark(walk, sh.masks, np.int64(column), bits, starts, np.bool_(cut), sh.dead_bits, sh.broken_bits, sh.queue)
    _opened(sh, column, sh.queue, count)
    return count


@njit(nogil=True)
def group_of(comp, n_base, n_dag, x, y):
    """An added edge's group: the topological rank of its source's DAG node (of its target's when the
    source was added by updates) scaled to GROUPS."""
    node = x if x < n_base else y
    if node >= n_base:
        return x % GROUPS
    return comp[node] * GROUPS // max(n_dag, 1)


@njit(nogil=True)
def _mark_reach(fw, bw, sh, cx, cy, n_dag, later):
    """The closed removal marks: RM_UP on everything that reaches DAG node cx in the base DAG, RM_DOWN on
    everything cy reaches (a broken component's, cx == cy, or a dead edge's past the budget). In a fold
    (``later`` not empty) only on cx and cy: the fold's sweep spreads them."""
    bit = removal_bit(cy, n_dag, CLOSED_MARK)
    if later.shape[0]:
        _give(sh, cx, RM_UP, bit)
        _give(sh, cy, RM_DOWN, bit)
        return
    _mark_from(fw, bw, sh, RM_UP, bit, cx, False)
    _mark_from(fw, bw, sh, RM_DOWN, bit, cy, False)


@njit(nogil=True, inline="always")  # its column is a literal at two calls (_LITERALS)
def _mark_all_reached(fw, bw, sh, column, bit, start, later):
    """``bit`` in ``column`` of everything DAG node ``start`` reaches (itself included; downwards for the
    columns of what reaches a node, upwards for the others): at once, or in a fold (``later`` not empty) on
    ``start`` alone, which the fold's sweep spreads."""
    if later.shape[0]:
        _give(sh, start, column, bit)
        return
    walk = walk_sides(fw, bw, column % 2 == 0, sh.longest_edge)
    seen = _fresh_marks(sh, _SCRATCH_MARK, 1)
    count = mark_reached(walk, sh.masks, np.int64(column), bit, np.int64(start), sh.queued, seen, sh.queue)
    _opened(sh, column, sh.queue, count)


@njit(nogil=True, inline="always")  # ``below`` is a literal at each call (_LITERALS)
def _lost_side(fw, bw, sh, below, cx, cy, found):
    """``marking.lost_side`` of DAG edge cx -> cy: ``below`` it (what cy reaches), or above (what reaches cx)."""
    first = _fresh_marks(sh, _SCRATCH_MARK, 3)
    side = fw if below else bw
    start, other = (cy, cx) if below else (cx, cy)
    edge = fw.dag_edge[:0] if below else bw.dag_edge
    order = 1 if below else -1
    return lost_side(
        side.dag_indptr,
        side.dag_indices,
        edge,
        sh.dead_bits,
        sh.broken_bits,
        np.int64(start),
        np.int64(other),
        np.int64(order),
        sh.queued,
        first,
        sh.queue,
        found,
    )


@njit(nogil=True)
def _mark_dead_edge(fw, bw, sh, cx, cy, n_dag, later):
    """The removal marks of a base edge from DAG node cx to cy (the DAG edge dead now, or an end broken): RM_UP
    on what reaches cx and no longer reaches cy, RM_DOWN on what cy reaches and cx no longer does, both in the
    graph as it is now (dead edges not passed; see ``marking.lost_side``).
    A side past ``SIDE_BUDGET`` nodes marks, with the same bit, everything its end reaches in the base DAG
    (the other side stays small); both past it, the closed marks (``_mark_reach``). In a fold (``later``
    not empty: (DAG nodes, 2) masks, RM_DOWN then RM_UP, laid on after the fold's sweep, which must not spread
    them) a side may take ``FOLD_SIDE_BUDGET`` nodes, so that a fold costs its journal's size."""
    budget = SIDE_BUDGET if later.shape[0] == 0 else FOLD_SIDE_BUDGET
    below = np.empty(budget, dtype=np.int64)
    above = np.empty(budget, dtype=np.int64)
    down = _lost_side(fw, bw, sh, True, cx, cy, below)
    up = _lost_side(fw, bw, sh, False, cx, cy, above) if down != 0 else 0
    if down < 0 and up < 0:
        _mark_reach(fw, bw, sh, cx, cy, n_dag, later)
        return
    wide_up = up < 0 or (down >= 0 and up > down)
    bit = removal_bit(cy, n_dag, WIDE_UP if wide_up else NARROW_UP)
    marks, down_column, up_column = (sh.masks, RM_DOWN, RM_UP) if later.shape[0] == 0 else (later, 0, 1)
    for i in range(down):
        marks[below[i], down_column] |= bit
    for i in range(up):
        marks[above[i], up_column] |= bit
    _opened(sh, RM_DOWN, below, down)
    _opened(sh, RM_UP, above, up)
    if down < 0:
        _mark_all_reached(fw, bw, sh, RM_DOWN, bit, cy, later)
    elif up < 0:
        _mark_all_reached(fw, bw, sh, RM_UP, bit, cx, later)


@njit(nogil=True, inline="always")  # ``below`` is a literal at each call (_LITERALS)
def _split_side(fw, bw, sh, x, y, below, found):
    """A side of ``_mark_split`` (``below``: the members that y reaches and x no longer does; else those
    that reach x and no longer reach y) into ``found``: how many, or -1 when they do not fit. When x reaches
    the component's root, x reaches all that the root does (``from_root``), and when the root reaches y, all
    that reaches the root (``to_root``) reaches y: the walk from x (y) then costs what lies outside them."""
    side = fw if below else bw
    start, other = (y, x) if below else (x, y)
    closed = sh.from_root if below else sh.to_root
    if not bit_set(sh.to_root if below else sh.from_root, other):
        closed = closed[:0]
    return members_between(
        side.indptr,
        side.indices,
        side.edge,
        fw.comp,
        sh.removed_bits,
        np.int64(start),
        np.int64(other),
        closed,
        sh.node_stamp,
        _fresh_marks(sh, _NODE_MARK, 2),
        sh.node_queues[0],
        found,
    )


@njit(nogil=True)
def _mark_members(fw, bw, sh, table, c, bit, below, found, count, later):
    """One side of a split marked narrowly: its members ``found[:count]`` one by one (``pending.NODE_RM_DOWN``
    below the removed edge, ``NODE_RM_UP`` above) and what their edges out of component c lead to (below), or
    what reaches their edges into it (above)."""
    side = fw if below else bw
    kind, column = (NODE_RM_DOWN, RM_DOWN) if below else (NODE_RM_UP, RM_UP)
    walk = walk_sides(fw, bw, below, sh.longest_edge)
    seen = _fresh_marks(sh, _SCRATCH_MARK, 1)
    for i in range(count):
        z = found[i]
        own = lookup(table, table_key(kind, z))
        mask = bit if own == EMPTY else np.uint64(own) | bit
        new = store(table, table_key(kind, z), np.int64(mask))
        _set(sh.node_marked, z)
        sh.counters[TABLE_USED] += new
        sh.counters[SPLIT_KEYS] += new
        for f in range(side.indptr[z], side.indptr[z + 1]):
            if bit_set(sh.removed_bits, f if side.edge.size == 0 else side.edge[f]):
                continue
            w = fw.comp[side.indices[f]]
            if w == c:
                continue
            if later.shape[0]:
                _give(sh, w, column, bit)
            elif sh.queued[w] != seen:
                entered = mark_reached(walk, sh.masks, np.int64(column), bit, np.int64(w), sh.queued, seen, sh.queue)
                _opened(sh, column, sh.queue, entered)


@njit(nogil=True)
def _mark_split(fw, bw, sh, table, x, y, c, n_dag, later, budget):
    """The removal marks of inner edge x -> y of component c, which x no longer joins to y (see the module
    docstring): each side whose members fit one by one (within ``budget`` members an update) narrowly, the
    smaller first; a side that does not fit whole (c's DAG node and everything past it on that side); both
    too large (or c past ``SPLIT_SEARCH_BUDGET`` members), c's closed marks. ``later``: as
    ``_mark_dead_edge`` takes it."""
    room = budget - sh.counters[SPLIT_KEYS]
    if room > 0 and fw.mem_indptr[c + 1] - fw.mem_indptr[c] <= SPLIT_SEARCH_BUDGET:
        below = np.empty(room, dtype=np.int64)
        above = np.empty(room, dtype=np.int64)
        down = _split_side(fw, bw, sh, x, y, True, below)
        up = _split_side(fw, bw, sh, x, y, False, above)
        if down >= 0 or up >= 0:
            narrow_up = down < 0 or (up >= 0 and up <= down)
            bit = removal_bit(c, n_dag, NARROW_UP if narrow_up else WIDE_UP)
            first = up if narrow_up else down
            _mark_members(fw, bw, sh, table, c, bit, not narrow_up, above if narrow_up else below, first, later)
            second = down if narrow_up else up
            if 0 <= second <= room - first:
                _mark_members(fw, bw, sh, table, c, bit, narrow_up, below if narrow_up else above, second, later)
            else:  # the wide side: everything that c reaches (Z above), or that reaches c
                _mark_all_reached(fw, bw, sh, RM_DOWN if narrow_up else RM_UP, bit, c, later)
            return
    sh.counters[TABLE_USED] += store(table, table_key(CLOSED, c), 1)
    _mark_reach(fw, bw, sh, c, c, n_dag, later)


@njit(nogil=True)
def _root_reach(fw, bw, sh, table, c, e, x, y, later):
    """``to_root`` and ``from_root`` of component c's members after base edge e = x -> y inside it was removed. The
    first time (a removal split c) from a root chosen now, a member with the most edges, each set with a
    tree of the edges that join its members to the root (``to_parent``, ``from_parent``); later, when e was
    in a tree, the members below it hang again or leave the set (``marking.regraft``: it costs what hung
    below e, not c), so that a bit a version reads stays a witness. With them the root bits
    (``grail_core.roots``): the first time c takes one while any is left, in place of the bits it held whole,
    and lays it outside c (``_first_root_bits``); later the DAG nodes next to members that left ``to_root``
    (``from_root``) are rechecked. In a fold (``later`` not empty) ``fold_roots`` lays them at the end."""
    root = lookup(table, table_key(ROOT, c))
    if root == EMPTY:
        most = -1
        for i in range(fw.mem_indptr[c], fw.mem_indptr[c + 1]):
            m = fw.mem[i]
            edges = fw.indptr[m + 1] - fw.indptr[m] + bw.indptr[m + 1] - bw.indptr[m]
            if edges > most:
                most, root = edges, m
        sh.counters[TABLE_USED] += store(table, table_key(ROOT, c), root)
        for column in (ROOT_DOWN, ROOT_UP):
            bits, parent, side = (
                (sh.from_root, sh.from_parent, fw) if column == ROOT_DOWN else (sh.to_root, sh.to_parent, bw)
            )
            queue = sh.node_queues[0]
            none = sh.removed_bits[:0]
            seen = _fresh_marks(sh, _NODE_MARK, 1)
            count = reached_inside(
                side.indptr,
                side.indices,
                side.edge,
                fw.comp,
                sh.removed_bits,
                root,
                none,
                parent,
                sh.node_stamp,
                seen,
                queue,
            )
            for i in range(count):
                _set(bits, queue[i])
        _first_root_bits(fw, bw, sh, c, later.shape[0] == 0)
        return
    for column in (ROOT_DOWN, ROOT_UP):
        if column == ROOT_DOWN:
            bits, parent, down, up, start = sh.from_root, sh.from_parent, fw, bw, y
        else:
            bits, parent, down, up, start = sh.to_root, sh.to_parent, bw, fw, x
        if parent[start] != e:
            continue
        queue = sh.node_queues[0]
        lost = regraft(
            down.indptr,
            down.indices,
            down.edge,
            up.indptr,
            up.indices,
            up.edge,
            fw.comp,
            sh.removed_bits,
            parent,
            bits,
            start,
            sh.node_stamp,
            _fresh_marks(sh, _NODE_MARK, 2),
            queue,
        )
        if lost == 0 or later.shape[0] or sh.roots[c, column] == 0:
            continue
        edges = 0
        for i in range(lost):
            edges += down.indptr[queue[i] + 1] - down.indptr[queue[i]]
        starts = np.empty(min(edges, sh.queued.size), dtype=np.int64)
        near = _fresh_marks(sh, _SCRATCH_MARK, 1)
        found = 0
        for i in range(lost):
            found = neighbours_of(down, c, queue[i], starts, found, sh.queued, near)
        if found:
            _recheck(fw, bw, sh, column, starts[:found])


@njit(nogil=True, inline="always")  # its column is a literal at two calls (_LITERALS)
def _recheck(fw, bw, sh, column, starts):
    """``roots.recheck`` of ``column`` from DAG nodes ``starts``."""
    reach = sh.to_root if column == ROOT_UP else sh.from_root
    first = _fresh_marks(sh, _SCRATCH_MARK, 2)
    recheck(
        fw,
        bw,
        sh.roots,
        np.int64(column),
        sh.dead_bits,
        sh.broken_bits,
        sh.removed_bits,
        reach,
        starts,
        starts.size,
        sh.queued,
        first,
        sh.queue,
    )


@njit(nogil=True)
def _first_root_bits(fw, bw, sh, c, at_once):
    """Component c, broken now, holds its own root bit alone (none when all are taken); ``at_once``: what its
    parents (children) held through it is rechecked, and the bit laid on what reaches its root (it reaches)."""
    bit = np.uint64(0)
    if sh.counters[ROOT_BITS] < GROUPS:
        bit = np.uint64(1) << np.uint64(sh.counters[ROOT_BITS])
        sh.counters[ROOT_BITS] += 1
    held = sh.roots[c, ROOT_UP] | sh.roots[c, ROOT_DOWN]
    sh.roots[c, ROOT_UP] = sh.roots[c, ROOT_DOWN] = bit
    if not at_once:
        return
    for column in (ROOT_UP, ROOT_DOWN):
        onward, reach = (bw, sh.to_root) if column == ROOT_UP else (fw, sh.from_root)
        if held != 0:
            children = onward.dag_indices[onward.dag_indptr[c] : onward.dag_indptr[c + 1]]
            _recheck(fw, bw, sh, column, children.astype(np.int64))  # int64 starts, as every other call's
        if bit != 0:
            seen = _fresh_marks(sh, _SCRATCH_MARK, 1)
            mark_root(
                fw,
                bw,
                sh.roots,
                column,
                bit,
                c,
                sh.dead_bits,
                sh.broken_bits,
                sh.removed_bits,
                reach,
                sh.queued,
                seen,
                sh.queue,
                sh.longest_edge,
            )


@njit(nogil=True)
def _closed(table, c):
    """Whether component c has closed marks: they cover every pair a removal in or at it may cut."""
    return lookup(table, table_key(CLOSED, c)) != EMPTY


@njit(nogil=True)
def _joined(fw, bw, sh, x, y):
    """``marking.still_joined`` of x and y inside their components."""
    return still_joined(
        fw.indptr,
        fw.indices,
        bw.indptr,
        bw.indices,
        bw.edge,
        fw.comp,
        sh.removed_bits,
        x,
        y,
        sh.node_stamp,
        _fresh_marks(sh, _NODE_MARK, 2),
        sh.node_queues[0],
        sh.node_queues[1],
    )


@njit(nogil=True)
def _remove_base(fw, bw, sh, table, x, y, stamp, n_dag, later, budget):
    """Remove base edge x -> y; returns 1 when the graph had it. One update's (``later`` empty), or one of a
    fold's (``later``: as ``_mark_dead_edge`` takes it; the YES masks are swept afresh after a fold, so the
    bits that relied on the edge are not cleared here). ``budget``: ``_mark_split``'s."""
    e = find_edge(fw.indptr, fw.indices, x, y)
    if e < 0 or bit_set(sh.removed_bits, e):
        return 0
    _set(sh.removed_bits, e)
    sh.counters[TABLE_USED] += store(table, table_key(REMOVED_EDGE, e), stamp)
    sh.counters[REMOVED_EVER] += 1
    cx, cy = fw.comp[x], fw.comp[y]
    if cx == cy:
        if _joined(fw, bw, sh, x, y):
            if lookup(table, table_key(ROOT, cx)) != EMPTY:  # no reach is lost, but the trees may have used e
                _root_reach(fw, bw, sh, table, cx, e, x, y, later)
            return 1
        if not bit_set(sh.broken_bits, cx):
            _set(sh.broken_bits, cx)
            sh.counters[TABLE_USED] += store(table, table_key(BROKEN_COMP, cx), stamp)
            if later.shape[0] == 0:
                _cut(fw, bw, sh, cx, cx)
        _root_reach(fw, bw, sh, table, cx, e, x, y, later)
        if not _closed(table, cx):
            _mark_split(fw, bw, sh, table, x, y, cx, n_dag, later, budget)
        return 1
    de = dag_edge_of(fw.dag_indptr, fw.dag_indices, bw.dag_indptr, bw.dag_indices, bw.dag_edge, cx, cy)
    left = lookup(table, table_key(SUPPORT, de))
    if left == EMPTY:
        left = _support(fw, bw, sh, cx, cy)
    else:
        left -= 1
    sh.counters[TABLE_USED] += store(table, table_key(SUPPORT, de), left)
    if left == 0:
        _set(sh.dead_bits, de)
        sh.counters[TABLE_USED] += store(table, table_key(DEAD_DAG_EDGE, de), stamp)
        if later.shape[0] == 0:
            _cut(fw, bw, sh, cy, cx)
        _mark_dead_edge(fw, bw, sh, cx, cy, n_dag, later)
    elif bit_set(sh.broken_bits, cx) or bit_set(sh.broken_bits, cy):
        if not (_closed(table, cx) or _closed(table, cy) or _joined(fw, bw, sh, x, y)):
            _mark_dead_edge(fw, bw, sh, cx, cy, n_dag, later)
    # The root bits that reached a broken end through this edge, or through the DAG edge now dead.
    if (
        later.shape[0] == 0
        and sh.counters[ROOT_BITS]
        and (left == 0 or bit_set(sh.broken_bits, cx) or bit_set(sh.broken_bits, cy))
    ):
        _recheck(fw, bw, sh, ROOT_UP, np.array([cx], dtype=np.int64))
        _recheck(fw, bw, sh, ROOT_DOWN, np.array([cy], dtype=np.int64))
    return 1


@njit(nogil=True, inline="always")  # ``column`` and ``kind`` are literals at each call (_LITERALS)
def _push(table, sh, links, i, column, kind, node):
    key = table_key(kind, node)
    links[i, column] = lookup(table, key)
    sh.counters[TABLE_USED] += store(table, key, i)


@njit(nogil=True)
def _link(table, sh, log, comp, n_base, i):
    """Entry i at the head of its four lists (its DAG nodes' lists only for nodes of the labels' graph)."""
    x, y = log.src[i], log.dst[i]
    _push(table, sh, log.links, i, OUT_OF_NODE - OUT_OF_COMP, OUT_OF_NODE, x)
    _push(table, sh, log.links, i, INTO_NODE - OUT_OF_COMP, INTO_NODE, y)
    log.links[i, 0] = EMPTY
    log.links[i, INTO_COMP - OUT_OF_COMP] = EMPTY
    if x < n_base:
        _push(table, sh, log.links, i, 0, OUT_OF_COMP, comp[x])
        _set(sh.source_bits, comp[x])
        _set(sh.source_words, comp[x] >> 6)
    if y < n_base:
        _push(table, sh, log.links, i, INTO_COMP - OUT_OF_COMP, INTO_COMP, comp[y])
        _set(sh.target_bits, comp[y])
        _set(sh.target_words, comp[y] >> 6)


@njit(nogil=True)
def _add(fw, bw, h, sh, table, live, log, new_masks, x, y, stamp, n_base, n_dag):
    """Add edge x -> y as a log entry; returns 1 when the graph did not have it."""
    code = (np.int64(x) << 32) | np.int64(y)
    if lookup(live, code) >= 0:
        return 0
    back = False
    if x < n_base and y < n_base:
        e = find_edge(fw.indptr, fw.indices, x, y)
        if e >= 0:
            if not bit_set(sh.removed_bits, e):
                return 0
            back = True
    i = sh.counters[ENTRIES]
    sh.counters[ENTRIES] += 1
    sh.counters[LIVE] += 1
    sh.counters[REMOVED_BACK] += back
    comp = fw.comp
    g = group_of(comp, n_base, n_dag, x, y)
    log.src[i], log.dst[i], log.born[i], log.died[i], log.group[i] = x, y, stamp, 0, g
    sh.counters[LIVE_USED] += store(live, code, i)
    _link(table, sh, log, comp, n_base, i)
    bit = np.uint64(1) << np.uint64(g)
    # The groups whose targets reach x now lead to g; x's ancestors reach a source of g.
    if x < n_base:
        before = sh.masks[comp[x], DOWN_NO]
        _mark_from(fw, bw, sh, UP_NO, bit, comp[x], False)
    else:
        before = new_masks[x - n_base, NEW_DOWN_NO]
        new_masks[x - n_base, NEW_UP_NO] |= bit
    for k in range(GROUPS):
        if (before >> np.uint64(k)) & np.uint64(1):
            sh.closure_no[k] |= bit
    # g leads to the groups of the edges leaving what y reaches.
    if y < n_base:
        count = _mark_from(fw, bw, sh, DOWN_NO, bit, comp[y], False)
        close_groups(sh.queue, count, bit, sh.source_bits, table, log.links, log.group, sh.closure_no)
    else:
        new_masks[y - n_base, NEW_DOWN_NO] |= bit
        sh.closure_no[g] |= new_masks[y - n_base, NEW_UP_NO]
    w = sh.counters[WITNESSES]
    if x < n_base and y < n_base and w < GROUPS and not back:
        cx, cy = comp[x], comp[y]
        if cx != cy and classify(h.rec_dag, cx, h.rec_dag, cy, h.label_end) == NO:
            sh.witness_src[w], sh.witness_dst[w], sh.witness_entry[w] = cx, cy, i
            sh.counters[WITNESSES] += 1
            witness = np.uint64(1) << np.uint64(w)
            _mark_from(fw, bw, sh, UP_YES, witness, cx, True)
            _mark_from(fw, bw, sh, DOWN_YES, witness, cy, True)
    return 1


@njit(nogil=True, cache=True)
def stage_edges(fw, bw, h, sh, table, live, log, new_masks, removes, adds, stamp, n_dag):
    """One update's removals, then its additions (each an (k, 2) int64 array of node ids), with ``stamp``;
    returns (added, removed): edges the graph did not have and now has, and the reverse. The caller made
    room: log entries for every addition, table keys for 4 an edge and SPLIT_BUDGET more, live keys for every
    addition, and
    ``new_masks`` rows for the nodes the update adds."""
    n_base = fw.indptr.size - 1
    removed = 0
    sh.counters[SPLIT_KEYS] = 0
    at_once = np.zeros((0, 2), dtype=np.uint64)
    for k in range(removes.shape[0]):
        x, y = removes[k, 0], removes[k, 1]
        code = (np.int64(x) << 32) | np.int64(y)
        entry = lookup(live, code)
        if entry >= 0:
            store(live, code, EMPTY)
            log.died[entry] = stamp
            sh.counters[LIVE] -= 1
            if x < n_base and y < n_base and find_edge(fw.indptr, fw.indices, x, y) >= 0:
                sh.counters[REMOVED_BACK] -= 1
            removed += 1
        elif x < n_base and y < n_base:
            removed += _remove_base(fw, bw, sh, table, x, y, stamp, n_dag, at_once, np.int64(SPLIT_BUDGET))
    added = 0
    for k in range(adds.shape[0]):
        added += _add(fw, bw, h, sh, table, live, log, new_masks, adds[k, 0], adds[k, 1], stamp, n_base, n_dag)
    return added, removed


@njit(nogil=True, cache=True)
def closures(sh, died, seq, closure_no, closure_yes):
    """A version's closures: the groups' (``closure_no``, reflexive and transitive) and the witnesses'
    (``closure_yes``: row g, the witnesses g leads to, none for a witness edge not in the version)."""
    closure_no[:] = sh.closure_no
    for g in range(GROUPS):
        closure_no[g] |= np.uint64(1) << np.uint64(g)
    _close(closure_no)
    closure_yes[:] = 0
    valid = np.uint64(0)
    witnesses = sh.counters[WITNESSES]
    for g in range(witnesses):
        d = died[sh.witness_entry[g]]
        if d == 0 or d > seq:
            valid |= np.uint64(1) << np.uint64(g)
    for g in range(witnesses):
        if (valid >> np.uint64(g)) & np.uint64(1):
            closure_yes[g] = (sh.masks[sh.witness_dst[g], UP_YES] & valid) | (np.uint64(1) << np.uint64(g))
    _close(closure_yes)


@njit(nogil=True)
def _close(rows):
    for k in range(rows.size):
        bit = np.uint64(1) << np.uint64(k)
        for i in range(rows.size):
            if rows[i] & bit:
                rows[i] |= rows[k]


# ---- a journal folded at once (``Overlay.stage_many``): stamps, then the masks by sweeps -----------------


@njit(nogil=True, cache=True)
def fold_removals(fw, bw, sh, table, positions, stamp, n_dag, later):
    """The base edges a journal leaves removed (``positions``, forward CSR), one after the other as updates
    would remove them (``_remove_base``): bits and stamps, dead DAG edges, broken components and the same
    refined removal marks, except that what a mark spreads to everything reached is left on its start for the
    fold's sweep, and the marks the sweep must not spread go to ``later`` ((DAG nodes, 2): RM_DOWN, RM_UP).
    A dead edge's sides take at most ``FOLD_SIDE_BUDGET`` nodes, the members splits mark one by one at most
    ``FOLD_SPLIT_BUDGET``: the caller made room for 4 table keys a position and as many more."""
    sh.counters[SPLIT_KEYS] = 0
    x = 0
    for e in positions:
        while fw.indptr[x + 1] <= e:
            x += 1
        # int64 ends and budget, as stage_edges passes them: _remove_base compiles once (_LITERALS)
        y = np.int64(fw.indices[e])
        _remove_base(fw, bw, sh, table, x, y, stamp, n_dag, later, np.int64(FOLD_SPLIT_BUDGET))


@njit(nogil=True, cache=True)
def fold_additions(fw, h, sh, table, live, log, new_masks, count, stamp, n_dag):
    """Log entries ``0..count-1`` (src and dst written) as a journal leaves them: stamps, groups, lists, live
    keys; the bits their ends hold by themselves (NO masks, and witnesses for the first that the labels say
    join unrelated nodes). The caller made room for 4 table keys and a live key an entry."""
    n_base = fw.indptr.size - 1
    comp = fw.comp
    for i in range(count):
        x, y = log.src[i], log.dst[i]
        g = group_of(comp, n_base, n_dag, x, y)
        log.born[i], log.died[i], log.group[i] = stamp, 0, g
        sh.counters[LIVE_USED] += store(live, (np.int64(x) << 32) | np.int64(y), i)
        _link(table, sh, log, comp, n_base, i)
        bit = np.uint64(1) << np.uint64(g)
        if x < n_base:
            _give(sh, comp[x], UP_NO, bit)
        else:
            new_masks[x - n_base, NEW_UP_NO] |= bit
        if y < n_base:
            _give(sh, comp[y], DOWN_NO, bit)
        else:
            new_masks[y - n_base, NEW_DOWN_NO] |= bit
        w = sh.counters[WITNESSES]
        if x < n_base and y < n_base and w < GROUPS and comp[x] != comp[y]:
            cx, cy = comp[x], comp[y]
            if classify(h.rec_dag, cx, h.rec_dag, cy, h.label_end) == NO:
                sh.witness_src[w], sh.witness_dst[w], sh.witness_entry[w] = cx, cy, i
                sh.counters[WITNESSES] += 1
                sh.masks[cx, UP_YES] |= np.uint64(1) << np.uint64(w)
                sh.masks[cy, DOWN_YES] |= np.uint64(1) << np.uint64(w)
    sh.counters[ENTRIES] = count
    sh.counters[LIVE] = count


@njit(nogil=True, cache=True)
def fold_closure(fw, sh, log, new_masks, count):
    """The groups' closure once the NO masks are swept: an entry of group g whose source some target of
    group k reaches makes k lead to g; every group leads to itself."""
    n_base = fw.indptr.size - 1
    for i in range(count):
        x = log.src[i]
        bit = np.uint64(1) << np.uint64(log.group[i])
        reached_by = sh.masks[fw.comp[x], DOWN_NO] if x < n_base else new_masks[x - n_base, NEW_DOWN_NO]
        for k in range(GROUPS):
            if (reached_by >> np.uint64(k)) & np.uint64(1):
                sh.closure_no[k] |= bit
        sh.closure_no[log.group[i]] |= bit


@njit(nogil=True, cache=True)
def fold_roots(fw, bw, sh):
    """The root bits of every whole DAG node once a fold's removals are in (``roots.sweep_roots``)."""
    if sh.counters[ROOT_BITS]:
        sweep_roots(fw, bw, sh.roots, sh.dead_bits, sh.broken_bits, sh.removed_bits, sh.to_root, sh.from_root)


@njit(nogil=True, cache=True)
def stamps_in_effect(table, kind, ids, seq):
    """Whether the stamp of each (kind, id) in ``table`` is in effect in a version of ``seq`` updates."""
    out = np.empty(ids.size, dtype=np.bool_)
    for i in range(ids.size):
        stamp = lookup(table, table_key(kind, ids[i]))
        out[i] = 0 < stamp <= seq
    return out
