"""Edge updates over a built index, answered exactly at once: the index proves what it still can.

Added edges only add reachability and removed ones only remove it. So a pair's base answer stands unless
the source reaches (by the base graph) the source of a removed edge whose target reaches the pair's target,
or likewise an added edge. Each update marks, once, every DAG node that reaches an updated edge's source and
every one its target reaches (``grail_core.traversal``: bits per DAG node, never cleared before a rebuild,
so that the marking of any number of updates passes each node and edge once); a batch flags its pairs from
two bytes each and searches only the flagged ones, on the updated graph (``traversal.walk``): a label that
proves 'no' still rules a node out unless it reaches an added edge, a label that proves 'yes' ends the search
where no removed edge lies on a base path to the target. An edge removed inside a strongly connected
component may have broken it: the search then goes through that component node by node.

Versions: each update makes a new, immutable ``Snapshot`` (the version's sorted arrays of removed and added
edges; the marks and 'maybe removed' bit sets are shared and only ever grow, which is safe for older
versions). Queries read one snapshot from start to end. Updates are planned (names resolved, nothing
changed) and then staged in order under the owner's lock; a staged version may be published later (when
the service has made it durable).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidParameterError, UnknownNodeError, UpdateConflictError
from .names import MAX_NAME_BYTES, NodeNames
from .traversal import (
    DOWN_ADDED,
    DOWN_REMOVED,
    MAYBE_BROKEN,
    UP_ADDED,
    UP_REMOVED,
    Added,
    Delta,
    edges_between,
    find_edge,
    mark_reachable,
)
from .views import GraphViews, frozen

__all__ = ["Overlay", "Snapshot", "UpdatePlan", "UpdateResult", "MAX_NODES"]

# Added edges are kept as int64 codes (one node id in the high 32 bits, the other in the low ones).
MAX_NODES = 2**31 - 1
_SHIFT = np.int64(32)
_LOW = np.int64(0xFFFFFFFF)
_NO_IDS = frozen(np.zeros(0, dtype=np.int64))
_NO_BITS = frozen(np.zeros(0, dtype=np.uint64))


@dataclass(frozen=True)
class UpdatePlan:
    """An update with its names resolved: nothing changed yet. ``add``/``remove``: (k, 2) int64 node ids
    (self loops dropped, repeats kept once); ``new_names``: the stored keys of the nodes it adds, whose ids
    follow the graph's, in order of first appearance."""

    version: int  # the version it was planned against
    add: np.ndarray
    remove: np.ndarray
    new_names: tuple[int | str, ...]


@dataclass(frozen=True)
class UpdateResult:
    """What an update did: the graph's new version, edges that were not there and are (``added``), edges
    that were there and are not (``removed``), and the nodes it added."""

    version: int
    added: int
    removed: int
    new_nodes: int


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One version of the graph: the base index's and the updates since, as the searches read them."""

    version: int
    base_version: int
    num_nodes: int  # the base's nodes and those updates added
    delta: Delta
    forward: Added  # added edges by source
    backward: Added  # added edges by target
    extra: NodeNames | None  # names of the nodes updates added (ids from the base's node count on)
    added_edges: int  # edges in the graph that the base does not have
    removed_edges: int  # base edges no longer in the graph
    updates: int  # updates since the base

    @property
    def pending(self) -> bool:
        """Whether the graph differs from the base index's."""
        return bool(self.added_edges or self.removed_edges or self.extra is not None)

    @property
    def new_nodes(self) -> int:
        return self.num_nodes - self.delta.n_base


def _added(codes: np.ndarray, comp_codes: np.ndarray) -> Added:
    return Added(frozen(codes >> _SHIFT), frozen(codes & _LOW), frozen(comp_codes >> _SHIFT), frozen(comp_codes & _LOW))


def _with(codes: np.ndarray, new: list[int], gone: list[int]) -> np.ndarray:
    """Sorted ``codes`` with ``new`` in and ``gone`` out (each O(k) copies, never a resort of the whole)."""
    if gone:
        codes = np.delete(codes, np.searchsorted(codes, np.sort(np.array(gone, dtype=np.int64))))
    if new:
        added = np.sort(np.array(new, dtype=np.int64))
        codes = np.insert(codes, np.searchsorted(codes, added), added)
    return codes


def _set_bits(bits: np.ndarray, positions: Iterable[int]) -> None:
    for p in positions:
        bits[p >> 6] |= np.uint64(1) << np.uint64(p & 63)


def _sorted_ids(values: Any) -> np.ndarray:
    return frozen(np.sort(np.fromiter(values, dtype=np.int64, count=len(values)))) if values else _NO_IDS


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


class Overlay:
    """The latest state of one index's updates; ``plan`` and ``stage`` are called under the owner's lock."""

    def __init__(self, views: GraphViews, names: NodeNames, version: int, max_name_bytes: int = MAX_NAME_BYTES):
        self.views = views
        self.names = names
        self.max_name_bytes = max_name_bytes
        self.n_base = views.num_nodes
        self.base_version = version
        self._added: set[tuple[int, int]] = set()
        self._removed: set[int] = set()
        self._support: dict[int, int] = {}  # DAG edge -> base edges under it still in the graph (once touched)
        self._dead: set[int] = set()
        self._broken: dict[int, int] = {}  # DAG node -> its inner edges removed
        self._new_names: list[int | str] = []
        self._new_ids: dict[int | str, int] = {}
        self._codes = [np.zeros(0, dtype=np.int64) for _ in range(4)]  # forward, forward by DAG node, backward, ...
        self._maybe_removed = np.zeros(0, dtype=np.uint64)
        self._maybe_dead = np.zeros(0, dtype=np.uint64)
        self.latest = self._snapshot(version, 0, None)

    # ---- planning ----------------------------------------------------------------------------------------

    def plan(self, add: Any = None, remove: Any = None) -> UpdatePlan:
        """Resolve an update's names against the latest version: InvalidParameterError for a malformed edge;
        UpdateConflictError for a name this graph's nodes cannot have (``add``), an edge both added and removed
        or too many nodes; UnknownNodeError
        for a node ``remove`` names that the graph does not have."""
        add_names, remove_names = edge_pairs(add, "add"), edge_pairs(remove, "remove")
        size = self.latest.num_nodes
        new_names: list[int | str] = []
        fresh: dict[int | str, int] = {}
        add_ids = self._ids(add_names)
        for i in np.flatnonzero(add_ids < 0).tolist():
            key = self.names.key_of(add_names[i])
            if key is None:
                kind = "integers" if self.names.are_integers else "strings"
                raise UpdateConflictError(f"{add_names[i]!r} cannot name a node of this graph: its names are {kind}")
            if key not in fresh:
                fresh[key] = size + len(new_names)
                new_names.append(key)
            add_ids[i] = fresh[key]
        if new_names and not self.names.are_integers:
            NodeNames.of(new_names, False, self.max_name_bytes)  # the upload's rules for string names
        remove_ids = self._ids(remove_names)
        if remove_ids.size and remove_ids.min() < 0:
            raise UnknownNodeError(remove_names[int(np.argmax(remove_ids < 0))])
        add_edges, remove_edges = _edges(add_ids), _edges(remove_ids)
        if add_edges.size and remove_edges.size:
            both = np.intersect1d(_codes_of(add_edges), _codes_of(remove_edges))
            if both.size:
                u, v = int(both[0] >> _SHIFT), int(both[0] & _LOW)
                raise UpdateConflictError(
                    f"edge [{self.name_of(u)!r}, {self.name_of(v)!r}] is both added and removed in one update"
                )
        if size + len(new_names) > MAX_NODES:
            raise UpdateConflictError(f"a graph with updates holds at most {MAX_NODES} nodes")
        return UpdatePlan(self.latest.version, add_edges, remove_edges, tuple(new_names))

    def _ids(self, names: list[Any]) -> np.ndarray:
        """Ids of names in the latest version, -1 where unknown."""
        ids = self.names.find_list(names) if names else np.zeros(0, dtype=np.int64)
        if self._new_ids:
            for i in np.flatnonzero(ids < 0).tolist():
                ids[i] = self._new_ids.get(self.names.key_of(names[i]), -1)  # type: ignore[arg-type]
        return ids

    def name_of(self, node: int) -> int | str:
        if node < self.n_base:
            return self.names.names_of([node])[0]
        return self._new_names[node - self.n_base]

    # ---- staging -----------------------------------------------------------------------------------------

    def stage(self, plan: UpdatePlan, version: int | None = None) -> UpdateResult:
        """Apply a plan to the latest state: the next version (or ``version``, when restoring saved updates),
        now ``latest`` (not yet published)."""
        if plan.version != self.latest.version:
            raise InvalidParameterError(
                f"the update was planned against version {plan.version}; the graph is at {self.latest.version}"
            )
        views = self.views
        comp = views.comp
        forward = views.forward()
        marks = views.marks
        starts: dict[int, list[int]] = {UP_REMOVED: [], DOWN_REMOVED: [], UP_ADDED: [], DOWN_ADDED: []}
        gone_codes: list[int] = []
        new_codes: list[int] = []
        removed = added = 0
        n_base = self.n_base
        for x, y in plan.remove.tolist():
            if (x, y) in self._added:
                self._added.discard((x, y))
                gone_codes.append(x << 32 | y)
                removed += 1
                continue
            e = find_edge(forward.indptr, forward.indices, x, y) if x < n_base and y < n_base else -1
            if e < 0 or e in self._removed:
                continue
            removed += 1
            if not self._removed:
                self._maybe_removed = np.zeros((views.num_edges + 63) // 64, dtype=np.uint64)
            self._removed.add(e)
            _set_bits(self._maybe_removed, (e,))
            cx, cy = int(comp[x]), int(comp[y])
            if cx == cy:
                self._broken[cx] = self._broken.get(cx, 0) + 1
                marks[cx] |= MAYBE_BROKEN
            else:
                self._lose_support(cx, cy)
            starts[UP_REMOVED].append(cx)
            starts[DOWN_REMOVED].append(cy)
        for x, y in plan.add.tolist():
            if x < n_base and y < n_base:
                e = find_edge(forward.indptr, forward.indices, x, y)
                if e >= 0:
                    if e in self._removed:
                        self._revive(e, int(comp[x]), int(comp[y]))
                        added += 1
                    continue
            if (x, y) in self._added:
                continue
            self._added.add((x, y))
            new_codes.append(x << 32 | y)
            added += 1
            if x < n_base:
                starts[UP_ADDED].append(int(comp[x]))
            if y < n_base:
                starts[DOWN_ADDED].append(int(comp[y]))
        if plan.new_names:
            for key in plan.new_names:
                self._new_ids[key] = n_base + len(self._new_names)
                self._new_names.append(key)
        self._mark(starts)
        self._update_codes(new_codes, gone_codes)
        next_version = self.latest.version + 1 if version is None else version
        self.latest = self._snapshot(next_version, self.latest.updates + 1, self.latest.extra)
        return UpdateResult(self.latest.version, added, removed, len(plan.new_names))

    def _lose_support(self, cx: int, cy: int) -> None:
        """A base edge from DAG node cx to cy is gone: the DAG edge dies with the last one."""
        forward = self.views.forward()
        de = int(find_edge(forward.dag_indptr, forward.dag_indices, cx, cy))
        if de in self._support:
            self._support[de] -= 1
        else:
            under = edges_between(
                forward.indptr, forward.indices, forward.comp, forward.mem_indptr, forward.mem, cx, cy
            )
            self._support[de] = sum(1 for e in under.tolist() if e not in self._removed)
        if self._support[de] == 0:
            if not self._dead:
                self._maybe_dead = np.zeros((int(forward.dag_indices.size) + 63) // 64, dtype=np.uint64)
            self._dead.add(de)
            _set_bits(self._maybe_dead, (de,))

    def _revive(self, e: int, cx: int, cy: int) -> None:
        """A removed base edge is added back."""
        self._removed.discard(e)
        if cx == cy:
            self._broken[cx] -= 1
            if not self._broken[cx]:
                del self._broken[cx]
            return
        forward = self.views.forward()
        de = int(find_edge(forward.dag_indptr, forward.dag_indices, cx, cy))
        self._support[de] += 1
        self._dead.discard(de)

    def _mark(self, starts: dict[int, list[int]]) -> None:
        views = self.views
        for bit, nodes in starts.items():
            if not nodes:
                continue
            indptr, indices = views.dag_parents()[:2] if bit in (UP_REMOVED, UP_ADDED) else views.dag_children()
            queue = np.empty(views.num_dag_nodes, dtype=np.int64)
            mark_reachable(indptr, indices, views.marks, np.uint8(bit), np.array(nodes, dtype=np.int64), queue)

    def _update_codes(self, new: list[int], gone: list[int]) -> None:
        comp = self.views.comp
        n_base = self.n_base

        def by_comp(codes: list[int], source_high: bool) -> list[int]:
            out = []
            for code in codes:
                high, low = code >> 32, code & 0xFFFFFFFF
                node, other = (high, low) if source_high else (low, high)
                if node < n_base:
                    out.append(int(comp[node]) << 32 | other)
            return out

        def swapped(codes: list[int]) -> list[int]:
            return [(code & 0xFFFFFFFF) << 32 | code >> 32 for code in codes]

        self._codes[0] = _with(self._codes[0], new, gone)
        self._codes[1] = _with(self._codes[1], by_comp(new, True), by_comp(gone, True))
        self._codes[2] = _with(self._codes[2], swapped(new), swapped(gone))
        self._codes[3] = _with(self._codes[3], by_comp(swapped(new), True), by_comp(swapped(gone), True))

    def _snapshot(self, version: int, updates: int, extra: NodeNames | None) -> Snapshot:
        if self._new_names and (extra is None or extra.size != len(self._new_names)):
            extra = NodeNames.of(self._new_names, self.names.are_integers, self.max_name_bytes)
        delta = Delta(
            self.n_base,
            _sorted_ids(self._removed),
            frozen(self._maybe_removed) if self._removed else _NO_BITS,
            _sorted_ids(self._dead),
            frozen(self._maybe_dead) if self._dead else _NO_BITS,
            _sorted_ids(self._broken.keys()),
            frozen(self.views.marks),
        )
        return Snapshot(
            version=version,
            base_version=self.base_version,
            num_nodes=self.n_base + len(self._new_names),
            delta=delta,
            forward=_added(self._codes[0], self._codes[1]),
            backward=_added(self._codes[2], self._codes[3]),
            extra=extra,
            added_edges=len(self._added),
            removed_edges=len(self._removed),
            updates=updates,
        )

    # ---- the graph as it is now --------------------------------------------------------------------------

    def edges(self, snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of every edge of a version (for a rebuild): the base edges not removed, then the added."""
        views = self.views
        src = np.repeat(np.arange(views.num_nodes, dtype=np.int64), np.diff(views.out_indptr))
        dst = np.asarray(views.out_indices, dtype=np.int64)
        if snapshot.delta.removed.size:
            keep = np.ones(src.size, dtype=np.bool_)
            keep[snapshot.delta.removed] = False
            src, dst = src[keep], dst[keep]
        return np.concatenate([src, snapshot.forward.key]), np.concatenate([dst, snapshot.forward.other])

    def new_names(self, snapshot: Snapshot) -> Sequence[int | str]:
        return self._new_names[: snapshot.new_nodes]


def _edges(ids: np.ndarray) -> np.ndarray:
    """(k, 2) edges of flat ids, self loops dropped, each edge once (in order of first appearance)."""
    edges = ids.reshape(-1, 2)
    edges = edges[edges[:, 0] != edges[:, 1]]
    if edges.shape[0] > 1:
        _, first = np.unique(_codes_of(edges), return_index=True)
        edges = edges[np.sort(first)]
    return edges


def _codes_of(edges: np.ndarray) -> np.ndarray:
    return edges[:, 0].astype(np.int64) << _SHIFT | edges[:, 1].astype(np.int64)
