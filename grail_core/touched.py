"""One version's updated graph as plain arrays, for search engines other than the CPU's walk (the GPU's).

The CPU searches of a version with updates pending (``grail_core.traversal.walk``) go over *keys*: a DAG
node whose component stands whole, or a single node (a member of a component that a removal may have
split, or a node that updates added). ``write_touched_graph`` writes that graph out once per version: the keys'
out-edges as a CSR (each key's row is what ``traversal`` expands it to, so both walk the same graph), and
per key what ``pending.verdict`` reads of its source side, so that an engine tests every key it meets as
the CPU search does (a NO leaves the key out, a YES ends the search) without the version's hash table
and stamps. ``TouchedGraph.searches`` gives the target side of a batch of pairs the same way.

Keys are numbered compactly: DAG node c is key c, the i-th node with a key of its own (``node_keys``,
ascending) is key ``n_dag + i``. Everything here is exact for the one version it was made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from .pending import (
    BWD_YES,
    DOWN_NO,
    DOWN_YES,
    FWD_YES,
    HAS_ADDED,
    HAS_UPWARD,
    NEW_DOWN_NO,
    NEW_UP_NO,
    RM_DOWN,
    RM_UP,
    ROOT_DOWN,
    ROOT_UP,
    UP_NO,
    UP_YES,
    Pending,
    band_of,
    comp_broken,
    removal_mask,
    root_side,
)
from .query import HotArrays
from .traversal import Side, _expand, _walk

__all__ = ["TouchedGraph", "TouchedSearches", "write_touched_graph"]


class TouchedSearches(NamedTuple):
    """A batch of pairs on a ``TouchedGraph``: the source and target keys, the target's DAG node (-1 for an
    added node), and the target side of ``pending.verdict``'s masks."""

    sources: np.ndarray  # int32 keys
    targets: np.ndarray  # int32 keys
    target_dags: np.ndarray  # int32
    rm_down: np.ndarray  # uint64: removal_mask(t, RM_DOWN)
    down_no: np.ndarray  # uint64: DOWN_NO of t's DAG node, or NEW_DOWN_NO of an added t
    fwd_yes: np.ndarray  # uint64
    down_yes: np.ndarray  # uint64
    root_down: np.ndarray  # uint64: root_side(t, ROOT_DOWN)


@dataclass(frozen=True, eq=False)
class TouchedGraph:
    """One version's graph over keys (module docstring). ``key_*`` arrays hold the source side of
    ``pending.verdict`` per key: its DAG node (-1 for an added node), whether that component may have split,
    the lowest DAG node it may reach against the topological order (``key_floor``), and its masks
    (``root_up``: ``root_side`` of ROOT_UP)."""

    n_dag: int
    comp: np.ndarray  # node -> DAG node, of the labels' graph
    node_keys: np.ndarray  # int64, ascending: the nodes with a key of their own
    indptr: np.ndarray  # int64 (keys + 1)
    indices: np.ndarray  # int32 keys
    key_dag: np.ndarray  # int32
    key_broken: np.ndarray  # uint8
    key_floor: np.ndarray  # int32: a DAG node below this one the key cannot reach (n_dag: only those above)
    rm_up: np.ndarray  # uint64: removal_mask(key, RM_UP)
    up_no: np.ndarray  # uint64
    bwd_yes: np.ndarray  # uint64
    up_yes: np.ndarray  # uint64
    root_up: np.ndarray  # uint64
    closure_no: np.ndarray  # (64,) uint64
    closure_yes: np.ndarray  # (64,) uint64
    has_added: bool  # some update ever added an edge (the routes through added edges count)
    plain: bool  # no edge ever changed: the labels' own tests decide
    pending: Pending

    @property
    def num_keys(self) -> int:
        return int(self.key_dag.size)

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)

    @property
    def nbytes(self) -> int:
        arrays = (self.indptr, self.indices, self.key_dag, self.key_broken, self.key_floor)
        return sum(a.nbytes for a in arrays) + 5 * 8 * self.num_keys

    def keys(self, nodes: np.ndarray) -> np.ndarray:
        """The key (int32) of each node id."""
        nodes = np.asarray(nodes, dtype=np.int64)
        at = np.searchsorted(self.node_keys, nodes)
        own = at < self.node_keys.size
        own[own] = self.node_keys[at[own]] == nodes[own]
        base = np.minimum(nodes, self.comp.size - 1)
        return np.where(own, self.n_dag + at, self.comp[base] if self.comp.size else 0).astype(np.int32)

    def searches(self, sources: np.ndarray, targets: np.ndarray) -> TouchedSearches:
        """The searches 'node sources[i] reaches node targets[i]' on this graph."""
        targets = np.ascontiguousarray(targets, dtype=np.int64)
        dags = np.empty(targets.size, dtype=np.int32)
        masks = np.zeros((5, targets.size), dtype=np.uint64)
        _target_sides(self.pending, self.comp, targets, dags, masks)
        return TouchedSearches(self.keys(sources), self.keys(targets), dags, *masks)


@njit(nogil=True, cache=True)
def _node_keys(side, p, n_dag, num_nodes):
    """The nodes with a key of their own, ascending: members of split components, and added nodes."""
    count = 0
    for c in range(n_dag):
        if comp_broken(p, c):
            count += side.mem_indptr[c + 1] - side.mem_indptr[c]
    out = np.empty(count + num_nodes - p.n_base, dtype=np.int64)
    at = 0
    for c in range(n_dag):
        if comp_broken(p, c):
            for i in range(side.mem_indptr[c], side.mem_indptr[c + 1]):
                out[at] = side.mem[i]
                at += 1
    for v in range(p.n_base, num_nodes):
        out[at] = v
        at += 1
    return np.sort(out)


@njit(nogil=True, cache=True)
def _rows(side, p, h, n_dag, node_keys, stamp, queue, indptr, indices, fill):
    """Each key's out-keys as ``traversal`` expands it: counts into ``indptr`` (``fill`` False), then the
    keys into ``indices``. A DAG node of a split component has no row: its members stand for it."""
    keys = n_dag + node_keys.size
    at = 0
    for i in range(keys):
        if i < n_dag and comp_broken(p, i):
            tail = 0
        else:
            x = i if i < n_dag else n_dag + node_keys[i - n_dag]
            mark = np.int32(i + 1 + (keys if fill else 0))
            walk = _walk(side, p, h, stamp, mark, -1, True, False, -1, -1, -1, -1)
            tail, _ = _expand(x, side, p, walk, queue, 0)
        if fill:
            for k in range(tail):
                key = queue[k]
                indices[at + k] = key if key < n_dag else n_dag + np.searchsorted(node_keys, key - n_dag)
        else:
            indptr[i + 1] = indptr[i] + tail
        at += tail


@njit(nogil=True, cache=True)
def _key_sides(p, comp, n_dag, node_keys, key_dag, key_broken, key_floor, masks):
    """The source side of ``verdict`` per key (see ``TouchedGraph``); ``masks``: rm_up, up_no, bwd_yes, up_yes,
    root_up."""
    has_masks = p.masks.shape[0] > 0
    upward = (p.flags & HAS_UPWARD) != 0
    for i in range(key_dag.size):
        node = -1 if i < n_dag else node_keys[i - n_dag]
        c = i if i < n_dag else (comp[node] if node < p.n_base else -1)
        key_dag[i] = c
        key_floor[i] = n_dag
        if c < 0:
            masks[1, i] = p.new_masks[node - p.n_base, NEW_UP_NO]
            continue
        key_broken[i] = comp_broken(p, c)
        if upward:
            key_floor[i] = p.floor[band_of(c, p.band_shift)]
        if has_masks:
            masks[0, i] = removal_mask(p, node, c, RM_UP)
            masks[1, i] = p.masks[c, UP_NO]
            masks[2, i] = p.masks[c, BWD_YES]
            masks[3, i] = p.masks[c, UP_YES]
        masks[4, i] = root_side(p, node, c, ROOT_UP)


@njit(nogil=True, cache=True)
def _target_sides(p, comp, targets, dags, masks):
    """The target side of ``verdict`` per target node; ``masks``: rm_down, down_no, fwd_yes, down_yes,
    root_down."""
    has_masks = p.masks.shape[0] > 0
    for i in range(targets.size):
        t = targets[i]
        c = comp[t] if t < p.n_base else -1
        dags[i] = c
        if c < 0:
            masks[1, i] = p.new_masks[t - p.n_base, NEW_DOWN_NO]
        elif has_masks:
            masks[0, i] = removal_mask(p, t, c, RM_DOWN)
            masks[1, i] = p.masks[c, DOWN_NO]
            masks[2, i] = p.masks[c, FWD_YES]
            masks[3, i] = p.masks[c, DOWN_YES]
        masks[4, i] = root_side(p, t, c, ROOT_DOWN)


def write_touched_graph(forward: Side, pending: Pending, hot: HotArrays, num_nodes: int) -> TouchedGraph:
    """The graph of the version ``pending`` (of ``num_nodes`` nodes) over keys, from the labels' forward view."""
    n_dag = int(forward.dag_indptr.size - 1)
    node_keys = _node_keys(forward, pending, n_dag, num_nodes)
    keys = n_dag + node_keys.size
    stamp = np.zeros(n_dag + num_nodes, dtype=np.int32)
    queue = np.empty(n_dag + num_nodes, dtype=np.int32)
    indptr = np.zeros(keys + 1, dtype=np.int64)
    _rows(forward, pending, hot, n_dag, node_keys, stamp, queue, indptr, indptr[:0].astype(np.int32), False)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    _rows(forward, pending, hot, n_dag, node_keys, stamp, queue, indptr, indices, True)
    key_dag = np.empty(keys, dtype=np.int32)
    key_broken = np.zeros(keys, dtype=np.uint8)
    key_floor = np.empty(keys, dtype=np.int32)
    masks = np.zeros((5, keys), dtype=np.uint64)
    _key_sides(pending, forward.comp, n_dag, node_keys, key_dag, key_broken, key_floor, masks)
    return TouchedGraph(
        n_dag=n_dag,
        comp=forward.comp,
        node_keys=node_keys,
        indptr=indptr,
        indices=indices,
        key_dag=key_dag,
        key_broken=key_broken,
        key_floor=key_floor,
        rm_up=masks[0],
        up_no=masks[1],
        bwd_yes=masks[2],
        up_yes=masks[3],
        root_up=masks[4],
        closure_no=np.ascontiguousarray(pending.closure_no),
        closure_yes=np.ascontiguousarray(pending.closure_yes),
        has_added=bool(pending.flags & HAS_ADDED),
        plain=pending.flags == 0,
        pending=pending,
    )
