"""Edge lists of updates, and a journal of updates folded into its net effect on the labels' graph.

``fold`` checks a whole journal as ``Overlay.plan`` checks each update (the error names the update), then
keeps, per edge, what the last update that named it did: the labels' edges the journal leaves removed, the
other edges it leaves added (in the order of their last addition), and the nodes it added (in order of
first appearance, as one update at a time numbers them). Sorting and one pass: linear in the journal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from .errors import InvalidParameterError, UnknownNodeError, UpdateConflictError
from .names import NodeNames
from .traversal import find_edge
from .views import GraphViews

__all__ = ["Folded", "fold", "edge_pairs", "distinct_edges", "edge_codes", "edge_positions", "MAX_NODES"]

MAX_NODES = 2**31 - 1
SHIFT = np.int64(32)
LOW = np.int64(0xFFFFFFFF)


@dataclass(frozen=True)
class Folded:
    """A journal's net effect on the labels' graph, and what its updates changed one after the other."""

    removed_positions: np.ndarray  # forward CSR positions of the labels' edges it leaves removed, sorted
    add_src: np.ndarray  # the other edges it leaves in the graph
    add_dst: np.ndarray
    new_keys: list[int | str]  # the nodes it added (stored keys)
    added: int  # edges that were not there when an update added them, summed over the updates
    removed: int  # edges that were there when an update removed them


def edge_pairs(edges: Any, what: str) -> list[Any]:
    """The names of (u, v) pairs, flat (u, v, u, v ...), from a list of pairs or an (k, 2) array."""
    if edges is None:
        return []
    if isinstance(edges, np.ndarray):
        if edges.size and (edges.ndim != 2 or edges.shape[1] != 2):
            raise InvalidParameterError(f"{what}: edges must have shape (k, 2), got {edges.shape}")
        return edges.reshape(-1).tolist()
    flat: list[Any] = []
    for edge in edges:
        if not isinstance(edge, (list, tuple)) or len(edge) != 2:
            raise InvalidParameterError(f"{what}: every edge is a pair [source, target], got {edge!r}")
        flat.extend(edge)
    return flat


def edge_codes(edges: np.ndarray) -> np.ndarray:
    """One int64 per (u, v) edge: u in the high 32 bits, v in the low ones."""
    return edges[:, 0].astype(np.int64) << SHIFT | edges[:, 1].astype(np.int64)


def distinct_edges(ids: np.ndarray) -> np.ndarray:
    """(k, 2) edges of flat ids, self loops dropped, each edge once (in order of first appearance)."""
    edges = ids.reshape(-1, 2)
    edges = edges[edges[:, 0] != edges[:, 1]]
    if edges.shape[0] > 1:
        _, first = np.unique(edge_codes(edges), return_index=True)
        edges = edges[np.sort(first)]
    return edges


@njit(nogil=True, cache=True)
def edge_positions(indptr, indices, src, dst):
    """The forward CSR position of each edge src[i] -> dst[i] (nodes of the labels' graph), -1 where it has
    none."""
    out = np.empty(src.size, dtype=np.int64)
    for i in range(src.size):
        out[i] = find_edge(indptr, indices, src[i], dst[i])
    return out


@njit(nogil=True, cache=True)
def _positions(indptr, indices, n_base, codes):
    """The forward CSR position of each edge code's edge, -1 where the labels' graph has none."""
    out = np.full(codes.size, -1, dtype=np.int64)
    for i in range(codes.size):
        u, v = codes[i] >> 32, codes[i] & 0xFFFFFFFF
        if u < n_base and v < n_base:
            out[i] = find_edge(indptr, indices, u, v)
    return out


def _update_error(error: InvalidParameterError, which: int, total: int) -> InvalidParameterError:
    """The error of one update of a journal, naming it (of the same class)."""
    return type(error)(f"update {which + 1} of {total}: {error}")


def fold(names: NodeNames, views: GraphViews, updates: list[tuple[Any, Any]], max_name_bytes: int) -> Folded:
    """A journal's net effect (see the module docstring). InvalidParameterError or UnknownNodeError as
    ``Overlay.plan`` raises them, for the first update that ``plan`` would refuse."""
    total = len(updates)
    n_base = views.num_nodes
    add_names: list[Any] = []
    remove_names: list[Any] = []
    add_counts = np.zeros(total, dtype=np.int64)
    remove_counts = np.zeros(total, dtype=np.int64)
    for k, (add, remove) in enumerate(updates):
        try:
            pairs, gone = edge_pairs(add, "add"), edge_pairs(remove, "remove")
        except InvalidParameterError as error:
            raise _update_error(error, k, total) from None
        add_names += pairs
        remove_names += gone
        add_counts[k], remove_counts[k] = len(pairs) // 2, len(gone) // 2
    add_update = np.repeat(np.arange(total), add_counts)
    remove_update = np.repeat(np.arange(total), remove_counts)
    add_ids = names.find_list(add_names) if add_names else np.zeros(0, dtype=np.int64)
    remove_ids = names.find_list(remove_names) if remove_names else np.zeros(0, dtype=np.int64)
    # New nodes, numbered in order of first appearance; a removal may name one an earlier update added.
    new_keys: list[int | str] = []
    new_ids: dict[int | str, int] = {}
    first_update: list[int] = []
    for i in np.flatnonzero(add_ids < 0).tolist():
        key = names.key_of(add_names[i])
        if key is None:
            kind = "integers" if names.are_integers else "strings"
            refused = UpdateConflictError(f"{add_names[i]!r} cannot name a node of this graph: its names are {kind}")
            raise _update_error(refused, int(add_update[i // 2]), total)
        j = new_ids.get(key)
        if j is None:
            j = new_ids[key] = len(new_keys)
            new_keys.append(key)
            first_update.append(int(add_update[i // 2]))
        add_ids[i] = n_base + j
    if new_keys and not names.are_integers:
        NodeNames.of(new_keys, False, max_name_bytes)  # the upload's rules for string names
    if n_base + len(new_keys) > MAX_NODES:
        raise UpdateConflictError(f"a graph with updates holds at most {MAX_NODES} nodes")
    for i in np.flatnonzero(remove_ids < 0).tolist():
        key = names.key_of(remove_names[i])
        j = new_ids.get(key, -1) if key is not None else -1
        if j < 0 or first_update[j] >= remove_update[i // 2]:
            raise UnknownNodeError(remove_names[i])
        remove_ids[i] = n_base + j
    # Each update's edges once, self loops dropped; none both added and removed in one update.
    ops = _operations(
        add_ids, add_update, remove_ids, remove_update, total, lambda u: _name(names, new_keys, n_base, u)
    )
    return _net_effect(ops, views, new_keys)


def _name(names: NodeNames, new_keys: list[int | str], n_base: int, node: int) -> int | str:
    return names.names_of([node])[0] if node < n_base else new_keys[node - n_base]


def _operations(
    add_ids: np.ndarray,
    add_update: np.ndarray,
    remove_ids: np.ndarray,
    remove_update: np.ndarray,
    total: int,
    names_of: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """(edge codes, order) of every distinct operation, order = 2 * update + 1 for an addition, 2 * update for
    a removal (an update's removals come first); InvalidParameterError for an edge both added and removed in
    one update."""
    codes, orders = [], []
    for ids, updates, adding in ((add_ids, add_update, 1), (remove_ids, remove_update, 0)):
        edges = ids.reshape(-1, 2)
        keep = edges[:, 0] != edges[:, 1]
        codes.append(edge_codes(edges[keep]))
        orders.append(2 * updates[keep] + adding)
    code, order = np.concatenate(codes), np.concatenate(orders)
    # One operation per (update, edge): an edge named twice in an update is one operation; the same edge
    # added and removed in one update is refused.
    by_update = np.lexsort((order, code, order // 2))
    code, order = code[by_update], order[by_update]
    same = (code[1:] == code[:-1]) & (order[1:] // 2 == order[:-1] // 2)
    clash = same & (order[1:] != order[:-1])
    if clash.any():
        at = int(np.argmax(clash))
        u, v = int(code[at] >> SHIFT), int(code[at] & LOW)
        error = UpdateConflictError(f"edge [{names_of(u)!r}, {names_of(v)!r}] is both added and removed in one update")
        raise _update_error(error, int(order[at] // 2), total)
    keep = np.concatenate([np.ones(min(1, code.size), dtype=np.bool_), ~same])
    return code[keep], order[keep]


def _net_effect(ops: tuple[np.ndarray, np.ndarray], views: GraphViews, new_keys: list[int | str]) -> Folded:
    code, order = ops
    if code.size == 0:
        nothing = np.zeros(0, dtype=np.int64)
        return Folded(nothing, nothing, nothing, new_keys, 0, 0)
    by_edge = np.lexsort((order, code))
    code, order = code[by_edge], order[by_edge]
    forward = views.forward()
    distinct, first = np.unique(code, return_index=True)
    position = _positions(forward.indptr, forward.indices, views.num_nodes, distinct)
    in_base = np.repeat(position >= 0, np.diff(np.append(first, code.size)))
    # Whether the edge is in the graph before each operation: the last operation's kind, or the labels'.
    adding = (order & 1) == 1
    starts = np.zeros(code.size, dtype=np.bool_)
    starts[first] = True
    before = np.where(starts, in_base, np.roll(adding, 1))
    added = int(np.count_nonzero(adding & ~before))
    removed = int(np.count_nonzero(~adding & before))
    last = np.append(first[1:], code.size) - 1
    final_add, final_code, final_order = adding[last], code[last], order[last]
    removed_positions = np.sort(position[~final_add & (position >= 0)])
    added_edges = final_add & (position < 0)
    entries = np.argsort(final_order[added_edges], kind="stable")
    codes = final_code[added_edges][entries]
    return Folded(removed_positions, codes >> SHIFT, codes & LOW, new_keys, added, removed)
