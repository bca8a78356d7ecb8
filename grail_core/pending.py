"""One version's edge updates as the searches read them (``Pending``), and the tests that decide a pair from it.

The state behind it is written by one thread (``grail_core.overlay``) and shared by every version; each
fact carries the update count (*stamp*) that made it, and a version reads only the stamps up to its own
(``seq``), so that a version never changes while later updates are staged:

- removed base edges, dead DAG edges (every base edge under them removed) and *broken* components (an inner
  edge removed that split them, or may have): a bit set each (set once, never cleared) and the stamp in
  ``table``;
- added edges: an append-only log (``src``, ``dst``, the stamp that added it, ``born``, and the one that
  removed it, ``died``, 0 while it stays), linked four ways (out of and into each DAG node and each node;
  the heads in ``table``);
- the removal masks of single members of broken components (``table``, kinds NODE_RM_UP and NODE_RM_DOWN:
  the mask's bits as the value; these take no closed mark, so a value is never all ones, EMPTY).

Per DAG node, eight 64-bit masks decide most pairs at once (columns below). The YES masks are exact on the
base graph less every edge ever removed (a subgraph of every version's graph): a bit they show is a witness
path; removals clear bits (never set them), so a version may read them while later updates are staged. The
NO masks and the removal masks only ever grow and over-approximate: a bit they lack rules a path out.

- ``FWD_YES``/``BWD_YES``: hub i reaches the node / the node reaches hub i (the labels' hubs).
- ``DOWN_YES``/``UP_YES``: witness edge g's target reaches the node / the node reaches its source. The first
  64 added edges that the labels say join unrelated nodes are the witnesses; ``closure_yes[g]`` holds the
  witnesses g leads to in this version (itself included), through their ends' masks.
- ``DOWN_NO``/``UP_NO``: the target of some added edge of group g reaches the node / the node reaches the
  source of one (base graph, edges ever added). Groups are ranges of topological ranks (of the source), so
  on a DAG that stays one a group leads only to groups below; ``closure_no[g]``: the groups g may lead to.
- ``RM_DOWN``/``RM_UP``: a pair (s, t) of the base graph that may have lost its paths has a bit in both
  RM_UP of s and RM_DOWN of t; a pair with none keeps its base paths. The low ``RM_GROUPS`` bits (groups of
  the topological rank of the removal's node) mark everything that reaches, and is reached from, a broken
  component or a dead DAG edge: each such set is closed along the base DAG's edges, so a mark stops where it
  finds its bit. The high ones mark, for a DAG edge x -> y that died, only the nodes that reach x and no longer
  reach y, and those that y reaches and x no longer does (``marking.lost_side``): a pair lost when the edge
  died is such a pair, since its every path used the edge (see ``staging``). Edges whose side above is the
  larger take bits of their own, so that a wide side above and another edge's wide side below share none.
  A member of a broken component reads its own removal marks besides its DAG node's (``removal_mask``; the
  members with marks of their own have a bit in ``node_marked``, so that the others cost no lookup): a
  removal that splits a component marks the members of its narrow sides one by one (``staging``), so that the
  pairs it did not separate stay decided: two members of one component reached each other in the base graph,
  and a pair without a common bit still does.

A broken component keeps one member, its *root*, for witnesses: ``to_root`` has the members that reach it,
``from_root`` those it reaches, inside the component, in the base graph less every edge ever removed (so
bits only clear, as the YES masks' do). Two members s and t with s in the first and t in the second reach
each other in every version, whatever the removal masks say. The first GROUPS broken components own a root
bit each, and ``roots`` lays their witnesses across their boundary (``grail_core.roots``): per DAG node,
ROOT_UP has the roots every member reaches and ROOT_DOWN those that reach every member, in the same graph; a
broken DAG node holds its own bit alone, for its members in ``to_root`` (``from_root``). A pair whose source's
ROOT_UP meets its target's ROOT_DOWN (``root_side``) is YES: s above a broken component (or in it), t below it
(or in it).

A pair whose ends are nodes that updates added reads ``new_masks`` (the groups of its own added edges).

``open_sources`` has a bit per DAG node whose UP_NO or RM_UP holds one, ``open_targets`` per DAG node whose
DOWN_NO or RM_DOWN does (set by every writer of those columns, never cleared but by the fold's sweep, which
sets them all again). A pair of nodes of the labels' graph in different DAG nodes keeps the labels' YES and
NO where its source's bit or its target's is clear, that end without removal marks of its own
(``labels_hold``): no added edge leads from the source (to the target), and no removal cut a path from it
(to it). The bit sets fit in cache where the mask rows do not, so on a graph where few DAG nodes are open
most pairs of a batch read no mask row (``grail_core.dynamic``). A version may see bits that later updates
set, which only sends it to the masks.

DAG node ids are a topological order: base edges never lead to a lower id, so a path from a higher id to a
lower one takes added edges that do (*descending* ones: to a lower DAG node, or from a node of the labels'
graph to one that updates added, which counts as leading to id 0). ``floor`` bounds how far they lead, per
*band* of ids (at most ``ORDER_BANDS`` ranges of ``1 << band_shift`` ids, ``band_of``): no node of band b
reaches a DAG node below ``floor[b]``. From id x a path takes a descending edge leaving id x or above (base
edges only climb), which leads to its target's id y, and on from y; ``order_floor`` follows that from the
first id of each band, with edges ever added (a superset of any version's), in one pass over the bands.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit, typeof, types
from numba.cpython.unsafe.numbers import trailing_zeros

from .probing import EMPTY, lookup
from .records import NO, UNDECIDED, YES

__all__ = [
    "Pending",
    "BASE",
    "GROUPS",
    "FWD_YES",
    "BWD_YES",
    "DOWN_YES",
    "UP_YES",
    "DOWN_NO",
    "UP_NO",
    "RM_DOWN",
    "RM_UP",
    "MASK_COLUMNS",
    "RM_GROUPS",
    "CLOSED_MARK",
    "NARROW_UP",
    "WIDE_UP",
    "NEW_DOWN_NO",
    "NEW_UP_NO",
    "HAS_ADDED",
    "HAS_REMOVED",
    "HAS_UPWARD",
    "REMOVED_EDGE",
    "DEAD_DAG_EDGE",
    "BROKEN_COMP",
    "OUT_OF_COMP",
    "INTO_COMP",
    "OUT_OF_NODE",
    "INTO_NODE",
    "NODE_RM_UP",
    "NODE_RM_DOWN",
    "ROOT_UP",
    "ROOT_DOWN",
    "HAS_ROOTS",
    "root_side",
    "table_key",
    "removal_bit",
    "bit_set",
    "marked",
    "edge_removed",
    "dag_edge_dead",
    "comp_broken",
    "removal_mask",
    "entry_alive",
    "first_entry",
    "next_entry",
    "verdict",
    "inlined_verdict",
    "BASE_FIRST",
    "ORDER_BANDS",
    "band_of",
    "order_floor",
    "note_descending",
    "band_shift",
    "HAS_NEW_TARGET",
    "labels_hold",
]

GROUPS = 64  # bits of a mask
# Even columns: what reaches the node (marked downwards); odd ones: what the node reaches (marked upwards).
FWD_YES, BWD_YES, DOWN_YES, UP_YES, DOWN_NO, UP_NO, RM_DOWN, RM_UP = range(8)
MASK_COLUMNS = 8  # one 64-byte line per DAG node
RM_GROUPS = GROUPS // 2  # groups of the removal masks' closed marks; as many again for a dead edge's sides
# Kinds of removal marks (``removal_bit``): closed, and a dead edge's sides (its side above the smaller, the larger).
CLOSED_MARK, NARROW_UP, WIDE_UP = range(3)
NEW_DOWN_NO, NEW_UP_NO = 0, 1
ORDER_BANDS = 4096  # bands of DAG node ids of ``floor`` (as many as DAG nodes on a smaller DAG)

# What a pair's tests say beyond the labels' NO, YES and UNDECIDED (a search on the updated graph): the
# labels' graph's answer holds, which the index's own search (CPU or GPU) finds.
BASE = np.int8(3)
# A pair only added edges may have joined: the labels' graph's YES holds (nothing it relies on was removed),
# its NO leaves a search on the updated graph. Most such pairs of a positive batch are decided by the first.
BASE_FIRST = np.int8(4)

HAS_ADDED, HAS_REMOVED = 1, 2  # ``Pending.flags``
# Some added edge may lead against the labels' topological order (to a lower DAG node, or through a node that
# updates added): without one, a pair whose source's DAG node comes after its target's stays unreachable.
HAS_UPWARD = 4
# Some added edge enters a node that updates added (``crossing`` then reads the lists out of DAG nodes only).
HAS_NEW_TARGET = 8
HAS_ROOTS = 16  # some broken component owns a root bit (``roots``)
# Columns of ``Pending.roots``: the roots a DAG node reaches, and those that reach it.
ROOT_UP, ROOT_DOWN = 0, 1

# Kinds of keys in ``Pending.table`` (kind << 48 | id): stamps of removals, then the heads of the four lists
# of added edges (the list's column in ``links`` is its kind less OUT_OF_COMP).
REMOVED_EDGE, DEAD_DAG_EDGE, BROKEN_COMP, OUT_OF_COMP, INTO_COMP, OUT_OF_NODE, INTO_NODE = range(1, 8)
# The removal masks of a member of a broken component (kinds 8 to 10 are the writer's: ``staging``).
NODE_RM_UP, NODE_RM_DOWN = 11, 12
_KIND_SHIFT = 48


class Pending(NamedTuple):
    """A version's updates, for the numba searches (every array read-only; see the module docstring)."""

    seq: int  # updates since the labels in this version: stamps 1..seq are in effect
    n_base: int  # nodes of the labels' graph; ids from here on are nodes that updates added
    flags: int  # HAS_ADDED, HAS_REMOVED, HAS_UPWARD: whether any update ever added (removed) such an edge
    masks: np.ndarray  # (DAG nodes, MASK_COLUMNS) uint64; (0, MASK_COLUMNS) before the first update
    new_masks: np.ndarray  # (capacity, 2) uint64 per added node: NEW_DOWN_NO, NEW_UP_NO
    removed_bits: np.ndarray  # uint64 bit sets: base edges (forward CSR positions) ever removed,
    dead_bits: np.ndarray  # DAG edges (forward DAG CSR positions) ever dead,
    broken_bits: np.ndarray  # DAG nodes ever broken,
    source_bits: np.ndarray  # DAG nodes with a member that an added edge ever left,
    target_bits: np.ndarray  # and one that an added edge ever entered
    table: np.ndarray  # grail_core.probing table: stamps and list heads
    src: np.ndarray  # the added edges' log, int64 each
    dst: np.ndarray
    born: np.ndarray
    died: np.ndarray
    links: np.ndarray  # (capacity, 4): the next entry of each list, -1 at the end
    closure_no: np.ndarray  # (GROUPS,) uint64
    closure_yes: np.ndarray  # (GROUPS,) uint64
    floor: np.ndarray  # (bands,) int64, per band of DAG node ids; empty without HAS_UPWARD
    band_shift: int  # DAG node c lies in band c >> band_shift
    node_marked: np.ndarray  # uint64 bit set of the nodes with removal marks of their own (NODE_RM_UP/DOWN)
    to_root: np.ndarray  # uint64 bit sets of the members of broken components that reach their root,
    from_root: np.ndarray  # and that it reaches (see the module docstring)
    source_words: np.ndarray  # uint64 bit sets of the words of source_bits and target_bits that have a bit
    target_words: np.ndarray
    roots: np.ndarray  # (DAG nodes, 2) uint64: ROOT_UP, ROOT_DOWN (see the module docstring)
    open_sources: np.ndarray  # uint64 bit sets of the DAG nodes whose UP_NO or RM_UP has a bit,
    open_targets: np.ndarray  # and whose DOWN_NO or RM_DOWN has one


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


# The one numba type of every version's ``Pending`` (ints, read-only C arrays): the tests below are compiled
# once each for it, with int64 ids, whatever integer types their callers pass.
_IDS = _read_only(np.zeros(0, dtype=np.int64))
_WORDS = _read_only(np.zeros(0, dtype=np.uint64))
_CLOSURE = _read_only(np.zeros(GROUPS, dtype=np.uint64))
PENDING_TYPE = typeof(
    Pending(
        seq=0,
        n_base=0,
        flags=0,
        masks=_read_only(np.zeros((0, MASK_COLUMNS), dtype=np.uint64)),
        new_masks=_read_only(np.zeros((0, 2), dtype=np.uint64)),
        removed_bits=_WORDS,
        dead_bits=_WORDS,
        broken_bits=_WORDS,
        source_bits=_WORDS,
        target_bits=_WORDS,
        table=_read_only(np.zeros((1, 2), dtype=np.int64)),
        src=_IDS,
        dst=_IDS,
        born=_IDS,
        died=_IDS,
        links=_read_only(np.zeros((0, 4), dtype=np.int64)),
        closure_no=_CLOSURE,
        closure_yes=_CLOSURE,
        floor=_IDS,
        band_shift=0,
        node_marked=_WORDS,
        to_root=_WORDS,
        from_root=_WORDS,
        source_words=_WORDS,
        target_words=_WORDS,
        roots=_read_only(np.zeros((0, 2), dtype=np.uint64)),
        open_sources=_WORDS,
        open_targets=_WORDS,
    )
)
_BITS = types.Array(types.uint64, 1, "C")
_READ_ONLY_BITS = types.Array(types.uint64, 1, "C", readonly=True)
_I64 = types.int64


def _tested(*signatures: object) -> Any:
    """Compiled eagerly for ``signatures`` alone (kept in numba's disk cache)."""
    return njit(list(signatures), nogil=True, cache=True)


# The tests ``verdict`` runs on every pair, inlined into it (numba's IR): a call to one compiled apart passes
# the whole ``Pending`` by value, which cost more than the test itself (~0.2 us a call).
_inlined = njit(nogil=True, inline="always")


@_tested(_I64(_I64, _I64))
def table_key(kind, i):
    return (np.int64(kind) << _KIND_SHIFT) | np.int64(i)


@_tested(types.uint64(_I64, _I64, _I64))
def removal_bit(c, n_dag, kind):
    """The removal masks' bit of DAG node c (of ``n_dag``) for a mark of ``kind``: CLOSED_MARK, or a dead
    edge's sides, NARROW_UP or WIDE_UP (its side above is the larger)."""
    if kind == CLOSED_MARK:
        return np.uint64(1) << np.uint64(c * RM_GROUPS // max(n_dag, 1))
    half = RM_GROUPS // 2
    first = RM_GROUPS if kind == NARROW_UP else RM_GROUPS + half
    return np.uint64(1) << np.uint64(first + c * half // max(n_dag, 1))


@_tested(types.boolean(_READ_ONLY_BITS, _I64), types.boolean(_BITS, _I64))
def bit_set(bits, i):
    return bits.size > 0 and (bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != 0


_TABLE = types.Array(types.int64, 2, "C")
_READ_ONLY_TABLE = types.Array(types.int64, 2, "C", readonly=True)


@_tested(
    types.boolean(_READ_ONLY_BITS, _READ_ONLY_TABLE, _I64, _I64, _I64),
    types.boolean(_BITS, _TABLE, _I64, _I64, _I64),
)
def marked(bits, table, seq, kind, i):
    """Whether ``i`` is set in ``bits`` by an update of ``kind`` in effect in this version (stamped 1..seq):
    ``edge_removed``, ``dag_edge_dead`` and ``comp_broken`` on the arrays they read. A search's per-edge
    tests call it so: numba reference-counts every array of a ``Pending`` passed whole at every call."""
    if not bit_set(bits, i):
        return False
    stamp = lookup(table, table_key(kind, i))
    return 0 < stamp <= seq


@_tested(types.boolean(PENDING_TYPE, _I64))
def edge_removed(p, e):
    """Whether base edge e (forward CSR position) is removed in this version."""
    return marked(p.removed_bits, p.table, p.seq, REMOVED_EDGE, e)


@_tested(types.boolean(PENDING_TYPE, _I64))
def dag_edge_dead(p, e):
    """Whether DAG edge e (forward DAG CSR position) has every base edge under it removed."""
    return marked(p.dead_bits, p.table, p.seq, DEAD_DAG_EDGE, e)


@_tested(types.boolean(PENDING_TYPE, _I64))
def comp_broken(p, c):
    """Whether component c may have split: its members are searched one by one."""
    return marked(p.broken_bits, p.table, p.seq, BROKEN_COMP, c)


@_inlined
def removal_mask(p, node, c, column):
    """RM_UP or RM_DOWN (``column``) of node ``node`` of DAG node c: the DAG node's, and in a component ever
    broken the node's own (node -1: the DAG node's alone)."""
    mask = p.masks[c, column]
    if node >= 0 and bit_set(p.node_marked, node):
        own = lookup(p.table, table_key(NODE_RM_UP if column == RM_UP else NODE_RM_DOWN, node))
        if own != EMPTY:
            mask |= np.uint64(own)
    return mask


@_inlined
def root_side(p, node, c, column):
    """ROOT_UP or ROOT_DOWN (``column``) of node ``node`` of DAG node c (-1 for a node updates added, or for
    the DAG node itself: node -1): the DAG node's, of a component ever broken only for a member in
    ``to_root`` (``from_root``)."""
    if not p.flags & HAS_ROOTS or c < 0:
        return np.uint64(0)
    mask = p.roots[c, column]
    if mask != 0 and bit_set(p.broken_bits, c):
        if node < 0 or not bit_set(p.to_root if column == ROOT_UP else p.from_root, node):
            return np.uint64(0)
    return mask


@_tested(types.boolean(PENDING_TYPE, _I64))
def entry_alive(p, i):
    return p.born[i] <= p.seq and (p.died[i] == 0 or p.died[i] > p.seq)


@_tested(_I64(PENDING_TYPE, _I64, _I64))
def first_entry(p, kind, i):
    """The newest entry of list ``kind`` for DAG node or node i, or EMPTY (alive or not: see entry_alive)."""
    if kind == OUT_OF_COMP and not bit_set(p.source_bits, i):
        return EMPTY
    if kind == INTO_COMP and not bit_set(p.target_bits, i):
        return EMPTY
    if p.src.size == 0:
        return EMPTY
    return lookup(p.table, table_key(kind, i))


@_tested(_I64(PENDING_TYPE, _I64, _I64))
def next_entry(p, kind, i):
    return p.links[i, kind - OUT_OF_COMP]


def band_shift(n_dag: int) -> int:
    """The shift of ``band_of`` on a DAG of ``n_dag`` nodes: bands of a power of two ids, at most ORDER_BANDS."""
    shift = 0
    while (max(n_dag, 1) - 1) >> shift >= ORDER_BANDS:
        shift += 1
    return shift


@_tested(_I64(_I64, _I64))
def band_of(c, shift):
    """The band of DAG node c (bands of ``1 << shift`` ids: a shift, not a division, on the verdicts' path)."""
    return c >> shift


_INTS = types.Array(types.int64, 1, "C")


@_tested(types.void(_INTS, _I64, _INTS, _INTS))
def note_descending(lowest, shift, sources, targets):
    """Descending edges (DAG node ids ``sources[i] -> targets[i]``) into ``lowest``, per band of their source
    the lowest target id (``order_floor``)."""
    for i in range(sources.size):
        b = band_of(sources[i], shift)
        lowest[b] = min(lowest[b], targets[i])


@_tested(types.void(_INTS, _I64, _I64, _INTS))
def order_floor(lowest, shift, n_dag, floor):
    """``floor`` (module docstring) from ``lowest``: per band, the lowest target id of the descending edges
    leaving it (``n_dag`` where none). A band's first id reaches only what the descending edges leaving it
    or a later band lead to, and on from there (a band below, done before it)."""
    bands = lowest.size
    below = n_dag
    for b in range(bands - 1, -1, -1):
        below = min(below, lowest[b])
        floor[b] = below
    for b in range(bands):
        first = b << shift
        target = floor[b]
        floor[b] = min(first, floor[band_of(target, shift)]) if target < first else first


@_tested(types.boolean(_READ_ONLY_BITS, types.uint64, types.uint64))
def _through(closure, up, down):
    """Whether some group of ``up`` leads, by ``closure``, to some group of ``down``."""
    if down == 0:
        return False
    while up != 0:
        if closure[trailing_zeros(up)] & down:
            return True
        up &= up - np.uint64(1)
    return False


@_inlined
def _up_no(p, node, c):
    return p.masks[c, UP_NO] if c >= 0 else p.new_masks[node - p.n_base, NEW_UP_NO]


@_inlined
def _down_no(p, node, c):
    return p.masks[c, DOWN_NO] if c >= 0 else p.new_masks[node - p.n_base, NEW_DOWN_NO]


@_inlined
def labels_hold(p, s, cs, t, ct):
    """Whether the labels' YES or NO of a pair of nodes s and t of different DAG nodes cs and ct holds in this
    version, by ``open_sources`` and ``open_targets`` (see the module docstring): then ``verdict`` says what
    the labels do, or BASE where they leave the pair open (the YES masks hold no hub the labels lack)."""
    if not bit_set(p.open_sources, cs) and not bit_set(p.node_marked, s):
        return True
    return not bit_set(p.open_targets, ct) and not bit_set(p.node_marked, t)


@_inlined
def inlined_verdict(p, s, cs, t, ct, base):
    """``verdict``, compiled into its caller (numba's IR): the verdict loops run it on every pair of a batch,
    where a call passing the whole ``Pending`` by value cost more than the tests."""
    if p.flags == 0:
        return BASE if base == UNDECIDED else base
    if cs >= 0 and cs == ct:
        if not marked(p.broken_bits, p.table, p.seq, BROKEN_COMP, cs) or (
            bit_set(p.to_root, s) and bit_set(p.from_root, t)
        ):
            return YES
        return UNDECIDED if removal_mask(p, s, cs, RM_UP) & removal_mask(p, t, ct, RM_DOWN) else YES
    if cs > ct >= 0 and (not p.flags & HAS_UPWARD or ct < p.floor[band_of(cs, p.band_shift)]):
        return NO
    relevant = False
    if cs >= 0 and ct >= 0:
        if p.masks[cs, BWD_YES] & p.masks[ct, FWD_YES]:
            return YES
        relevant = (removal_mask(p, s, cs, RM_UP) & removal_mask(p, t, ct, RM_DOWN)) != 0
        if base == YES and not relevant:
            return YES
    route = (p.flags & HAS_ADDED) != 0 and _through(p.closure_no, _up_no(p, s, cs), _down_no(p, t, ct))
    if base == NO and not route:
        return NO
    if route and cs >= 0 and ct >= 0 and _through(p.closure_yes, p.masks[cs, UP_YES], p.masks[ct, DOWN_YES]):
        return YES
    if base == UNDECIDED and not relevant:
        return BASE_FIRST if route else BASE
    if root_side(p, s, cs, ROOT_UP) & root_side(p, t, ct, ROOT_DOWN):
        return YES
    return UNDECIDED


@_tested(types.int8(PENDING_TYPE, _I64, _I64, _I64, _I64, types.int8))
def verdict(p, s, cs, t, ct, base):
    """'Node s reaches node t' (s != t) in this version: NO, YES, UNDECIDED (a search on the updated graph
    decides), BASE (the labels' graph's answer holds) or BASE_FIRST (its YES holds, its NO needs the search).
    ``cs``/``ct``: their DAG nodes, -1 for a node that
    updates added; ``base``: the labels' code for (cs, ct), NO when an end was added."""
    return inlined_verdict(p, s, cs, t, ct, base)
