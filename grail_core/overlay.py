"""Edge updates over a built index, exact at once: the state every version shares, and each version's handle.

``Overlay`` keeps one index's updates: ``plan`` resolves an update's names (nothing changes), ``stage``
applies it as the next version, ``stage_many`` folds a journal of updates into one version in time linear
in the graph and the journal. Every fact an update records carries its update count (``grail_core.pending``),
so a ``Snapshot`` (one version: that count and views of the shared arrays) stays exact while later updates
are staged, and costs nothing in the number of updates pending. An update costs its own size (one numba
call: ``grail_core.staging``) plus marks that pass each DAG node once per mask bit over all updates.

Updates are planned and staged in order under the owner's lock; a staged version may be published later
(when the service has made it durable).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidParameterError, UnknownNodeError, UpdateConflictError
from .folding import LOW, MAX_NODES, SHIFT, distinct_edges, edge_codes, edge_pairs, edge_positions, fold
from .marking import longest_edge, sweep
from .names import MAX_NAME_BYTES, NodeNames
from .pending import (
    BWD_YES,
    DOWN_NO,
    DOWN_YES,
    FWD_YES,
    GROUPS,
    HAS_ADDED,
    HAS_NEW_TARGET,
    HAS_REMOVED,
    HAS_ROOTS,
    HAS_UPWARD,
    MASK_COLUMNS,
    ORDER_BANDS,
    REMOVED_EDGE,
    RM_DOWN,
    RM_UP,
    UP_NO,
    UP_YES,
    Pending,
    band_shift,
    note_descending,
    order_floor,
)
from .probing import EMPTY, grown, needs_room, new_table
from .query import HotArrays
from .staging import (
    COUNTERS,
    ENTRIES,
    FOLD_SPLIT_BUDGET,
    LIVE,
    LIVE_USED,
    REMOVED_BACK,
    REMOVED_EVER,
    ROOT_BITS,
    SPLIT_BUDGET,
    TABLE_USED,
    Log,
    Shared,
    closures,
    fold_additions,
    fold_closure,
    fold_removals,
    fold_roots,
    stage_edges,
    stamps_in_effect,
)
from .views import GraphViews, frozen

__all__ = ["Overlay", "Snapshot", "UpdatePlan", "UpdateResult", "AddedNames", "MAX_NODES", "edge_pairs", "no_pending"]

_INITIAL_LOG = 64
_KEYS_PER_EDGE = (
    4  # table keys an update's edge may add (removal stamp, support, dead or broken, closed; or 4 list heads)
)


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


class AddedNames:
    """The names of the nodes that updates added up to one version (ids 0..size-1 here, the graph's ids from
    the labels' node count on): a view of the overlay's list, which only grows."""

    def __init__(self, base: NodeNames, keys: list[int | str], ids: dict[int | str, int], size: int) -> None:
        self._base = base
        self._keys = keys
        self._ids = ids
        self.size = size
        self._table: NodeNames | None = None

    def find_one(self, name: Any) -> int:
        key = self._base.key_of(name)
        found = self._ids.get(key, -1) if key is not None else -1
        return found if found < self.size else -1

    def _table_of(self) -> NodeNames:
        """A lookup table of these names for batches, made on the first that needs it (O(size), once a
        version; the names were checked when they were added)."""
        if self._table is None:
            self._table = NodeNames.of(self._keys[: self.size], self._base.are_integers, 1 << 62)
        return self._table

    def find(self, names: Any) -> np.ndarray:
        return self._table_of().find(names)

    def find_list(self, names: list[Any]) -> np.ndarray:
        return self._table_of().find_list(names)

    def names_of(self, ids: Any) -> list[int | str]:
        return [self._keys[i] for i in np.asarray(ids, dtype=np.int64).tolist()]

    def names_array(self, ids: Any) -> np.ndarray:
        names = self.names_of(ids)
        if self._base.are_integers:
            return np.array(names, dtype=np.int64)
        return np.array(names, dtype=np.dtypes.StringDType())


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One version of the graph: the labels' and the updates since, as the searches read them."""

    version: int
    base_version: int
    n_base: int  # nodes of the labels' graph
    num_nodes: int  # those and the nodes updates added
    state: Pending
    extra: AddedNames | None  # names of the nodes updates added
    added_edges: int  # edges in the graph that the labels' graph does not have
    removed_edges: int  # edges of the labels' graph no longer in the graph
    updates: int  # updates since the labels

    @property
    def pending(self) -> bool:
        """Whether the graph differs from the labels' graph."""
        return bool(self.added_edges or self.removed_edges or self.extra is not None)

    @property
    def new_nodes(self) -> int:
        return self.num_nodes - self.n_base


def no_pending(n_base: int) -> Pending:
    """The labels' own graph, as the searches read a version: no update."""
    ids = frozen(np.zeros(0, dtype=np.int64))
    bits = frozen(np.zeros(0, dtype=np.uint64))
    return Pending(
        seq=0,
        n_base=int(n_base),
        flags=0,
        masks=frozen(np.zeros((0, MASK_COLUMNS), dtype=np.uint64)),
        new_masks=frozen(np.zeros((0, 2), dtype=np.uint64)),
        removed_bits=bits,
        dead_bits=bits,
        broken_bits=bits,
        source_bits=bits,
        target_bits=bits,
        table=frozen(np.full((1, 2), EMPTY, dtype=np.int64)),
        src=ids,
        dst=ids,
        born=ids,
        died=ids,
        links=frozen(np.zeros((0, 4), dtype=np.int64)),
        closure_no=frozen(np.zeros(GROUPS, dtype=np.uint64)),
        closure_yes=frozen(np.zeros(GROUPS, dtype=np.uint64)),
        floor=ids,
        band_shift=0,
        node_marked=bits,
        to_root=bits,
        from_root=bits,
        source_words=bits,
        target_words=bits,
        roots=frozen(np.zeros((0, 2), dtype=np.uint64)),
        open_sources=bits,
        open_targets=bits,
    )


def _log(capacity: int) -> Log:
    def zeros() -> np.ndarray:
        return np.zeros(capacity, dtype=np.int64)

    return Log(zeros(), zeros(), zeros(), zeros(), zeros(), np.full((capacity, 4), EMPTY, dtype=np.int64))


class Overlay:
    """The latest state of one index's updates; ``plan``, ``stage`` and ``stage_many`` are called under the
    owner's lock."""

    def __init__(
        self, views: GraphViews, hot: HotArrays, names: NodeNames, version: int, max_name_bytes: int = MAX_NAME_BYTES
    ):
        self.views = views
        self.hot = hot
        self.names = names
        self.max_name_bytes = max_name_bytes
        self.n_base = views.num_nodes
        self.n_dag = views.num_dag_nodes
        self.base_version = version
        self.seq = 0
        self._new_keys: list[int | str] = []
        self._new_ids: dict[int | str, int] = {}
        self._shared: Shared | None = None
        self._upward = False  # ``pending.HAS_UPWARD`` from the first such added edge on
        self._new_target = False  # ``pending.HAS_NEW_TARGET``
        # per band of DAG node ids, the lowest id an added edge leaving it leads to (``pending.order_floor``)
        self._band_shift = band_shift(self.n_dag)
        bands = ((max(self.n_dag, 1) - 1) >> self._band_shift) + 1
        assert bands <= ORDER_BANDS
        self._lowest = np.full(bands, self.n_dag, dtype=np.int64)
        self._floor: np.ndarray | None = None  # the latest versions' ``pending.floor`` while ``_lowest`` holds
        self.latest = Snapshot(version, version, self.n_base, self.n_base, no_pending(self.n_base), None, 0, 0, 0)

    # ---- the shared state, made on the first update ---------------------------------------------------

    def _start(self) -> Shared:
        """The shared arrays (``grail_core.pending``): masks from the labels' hubs, empty sets and log."""
        if self._shared is not None:
            return self._shared
        views = self.views
        arrays = views.arrays
        n_dag = self.n_dag
        masks = np.zeros((n_dag, MASK_COLUMNS), dtype=np.uint64)
        fwd, bwd = np.asarray(arrays.fwd, dtype=np.uint64), np.asarray(arrays.bwd, dtype=np.uint64)
        masks[:, FWD_YES], masks[:, BWD_YES] = fwd, bwd
        hubs = np.flatnonzero(fwd & bwd)  # a hub is the one DAG node that both reaches and is reached by it
        words = (n_dag + 63) // 64
        # Components of one node need no check of what an inner removal left.
        nodes = views.num_nodes if views.num_nodes > n_dag else 0
        self._shared = Shared(
            masks=masks,
            removed_bits=np.zeros((views.num_edges + 63) // 64, dtype=np.uint64),
            dead_bits=np.zeros((int(arrays.out_indices.size) + 63) // 64, dtype=np.uint64),
            broken_bits=np.zeros(words, dtype=np.uint64),
            source_bits=np.zeros(words, dtype=np.uint64),
            target_bits=np.zeros(words, dtype=np.uint64),
            source_words=np.zeros((words + 63) // 64, dtype=np.uint64),
            target_words=np.zeros((words + 63) // 64, dtype=np.uint64),
            closure_no=np.zeros(GROUPS, dtype=np.uint64),
            hub_nodes=hubs.astype(np.int64),
            hub_bits=(fwd & bwd)[hubs],
            witness_src=np.zeros(GROUPS, dtype=np.int64),
            witness_dst=np.zeros(GROUPS, dtype=np.int64),
            witness_entry=np.zeros(GROUPS, dtype=np.int64),
            counters=np.zeros(COUNTERS, dtype=np.int64),
            marks=np.zeros(2, dtype=np.int64),
            queued=np.zeros(n_dag, dtype=np.int32),
            queue=np.empty(max(n_dag, 1), dtype=np.int64),
            node_stamp=np.zeros(nodes, dtype=np.int32),
            node_queues=np.empty((2, nodes), dtype=np.int64),
            node_marked=np.zeros((nodes + 63) // 64, dtype=np.uint64),
            to_root=np.zeros((nodes + 63) // 64, dtype=np.uint64),
            from_root=np.zeros((nodes + 63) // 64, dtype=np.uint64),
            to_parent=np.full(nodes, -1, dtype=np.int64),
            from_parent=np.full(nodes, -1, dtype=np.int64),
            roots=np.zeros((n_dag, 2), dtype=np.uint64),
            open_sources=np.zeros(words, dtype=np.uint64),
            open_targets=np.zeros(words, dtype=np.uint64),
            longest_edge=int(longest_edge(arrays.out_indptr, arrays.out_indices)),
        )
        self.log = _log(_INITIAL_LOG)
        self.table = new_table()
        self.live = new_table()  # edge code -> its log entry while the edge is in the graph (the writer's)
        self.new_masks = np.zeros((16, 2), dtype=np.uint64)
        self._views: dict[str, np.ndarray] = {}
        return self._shared

    def _room(self, adds: int, edges: int, new_nodes: int, split_keys: int = SPLIT_BUDGET) -> None:
        """Grow what an update of ``edges`` edges (``adds`` of them added) and ``new_nodes`` may fill (with
        removals, the members that splits mark one by one too: ``split_keys``). A new log
        comes with a new table: a table names only entries of the log arrays it was published with. Versions
        published before keep the arrays they read, which nothing writes any more."""
        shared = self._start()
        counters = shared.counters
        count, used = int(counters[ENTRIES]), int(counters[TABLE_USED])
        keys = _KEYS_PER_EDGE * edges + (split_keys if edges > adds else 0)
        if count + adds > self.log.src.size:
            log = _log(max(2 * self.log.src.size, count + adds))
            for old, new in zip(self.log, log, strict=True):
                new[:count] = old[:count]
            self.log = log
            self.table = grown(self.table, used, keys)
        elif needs_room(self.table, used, keys):
            self.table = grown(self.table, used, keys)
        if needs_room(self.live, int(counters[LIVE_USED]), adds):
            self.live = grown(self.live, int(counters[LIVE_USED]), adds)
        needed = len(self._new_keys) + new_nodes
        if needed > self.new_masks.shape[0]:
            bigger = np.zeros((max(needed, 2 * self.new_masks.shape[0]), 2), dtype=np.uint64)
            bigger[: self.new_masks.shape[0]] = self.new_masks
            self.new_masks = bigger

    # ---- planning --------------------------------------------------------------------------------------

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
        add_edges, remove_edges = distinct_edges(add_ids), distinct_edges(remove_ids)
        if add_edges.size and remove_edges.size:
            both = np.intersect1d(edge_codes(add_edges), edge_codes(remove_edges))
            if both.size:
                u, v = int(both[0] >> SHIFT), int(both[0] & LOW)
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
                found = self._new_ids.get(self.names.key_of(names[i]), -1)  # type: ignore[arg-type]
                ids[i] = -1 if found < 0 else self.n_base + found
        return ids

    def name_of(self, node: int) -> int | str:
        if node < self.n_base:
            return self.names.names_of([node])[0]
        return self._new_keys[node - self.n_base]

    # ---- staging ---------------------------------------------------------------------------------------

    def stage(self, plan: UpdatePlan, version: int | None = None) -> UpdateResult:
        """Apply a plan to the latest state: the next version (or ``version``, when restoring saved updates),
        now ``latest`` (not yet published)."""
        if plan.version != self.latest.version:
            raise InvalidParameterError(
                f"the update was planned against version {plan.version}; the graph is at {self.latest.version}"
            )
        adds, removes = plan.add.shape[0], plan.remove.shape[0]
        self._room(adds, adds + removes, len(plan.new_names))
        shared = self._start()
        views = self.views
        added, removed = stage_edges(
            views.forward(),
            views.backward(),
            self.hot,
            shared,
            self.table,
            self.live,
            self.log,
            self.new_masks,
            plan.remove,
            plan.add,
            self.seq + 1,
            self.n_dag,
        )
        self._name_nodes(plan.new_names)
        self._note_direction(plan.add[:, 0], plan.add[:, 1])
        self.seq += 1
        self.latest = self._snapshot(self.latest.version + 1 if version is None else version)
        return UpdateResult(self.latest.version, int(added), int(removed), len(plan.new_names))

    def _note_direction(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Whether added edges src -> dst (node ids) may lead against the labels' topological order, and how
        far (``pending.floor``): an edge into a node that updates added counts as leading to DAG node 0."""
        if src.size == 0:
            return
        n, comp = self.n_base, self.views.forward().comp
        from_base = src < n
        high = comp[src[from_base]].astype(np.int64)
        targets = dst[from_base]
        low = np.where(targets < n, comp[np.minimum(targets, n - 1)], 0).astype(np.int64)
        down = low < high
        upward = bool(down.any() or not from_base.all() or (dst >= n).any())
        if down.any() or (upward and not self._upward):
            self._floor = None  # made again for the next version
        self._upward = self._upward or upward
        self._new_target = self._new_target or bool((dst >= n).any())
        if down.any():
            note_descending(
                self._lowest, self._band_shift, np.ascontiguousarray(high[down]), np.ascontiguousarray(low[down])
            )

    def _name_nodes(self, keys: Iterable[int | str]) -> None:
        for key in keys:
            self._new_ids[key] = len(self._new_keys)
            self._new_keys.append(key)

    # ---- a journal at once ------------------------------------------------------------------------------

    def stage_many(self, updates: Iterable[tuple[Any, Any]], version: int | None = None) -> UpdateResult:
        """Apply updates (``(add, remove)`` each, as ``plan`` takes them) in order as one version (the latest
        plus their number, or ``version``): the graph and every answer as if each were staged in turn, in
        time linear in the graph and the updates. Nothing changes when one is refused (the error names it).
        On a state with updates already staged, they are staged one by one."""
        updates = list(updates)
        if not updates:
            return UpdateResult(self.latest.version, 0, 0, 0)
        if self._shared is not None:
            return self._stage_each(updates, version)
        folded = fold(self.names, self.views, updates, self.max_name_bytes)
        count = folded.add_src.size
        self._room(count, count + folded.removed_positions.size, len(folded.new_keys), FOLD_SPLIT_BUDGET)
        shared = self._start()
        self._name_nodes(folded.new_keys)
        views = self.views
        forward, backward = views.forward(), views.backward()
        stamp = len(updates)
        # removal marks laid on after the sweep (not spread by it): RM_DOWN, RM_UP
        later = np.zeros((self.n_dag if folded.removed_positions.size else 0, 2), dtype=np.uint64)
        fold_removals(forward, backward, shared, self.table, folded.removed_positions, stamp, self.n_dag, later)
        self.log.src[:count], self.log.dst[:count] = folded.add_src, folded.add_dst
        fold_additions(
            forward, self.hot, shared, self.table, self.live, self.log, self.new_masks, count, stamp, self.n_dag
        )
        self._sweep(shared)
        fold_roots(forward, backward, shared)
        if later.size:
            shared.masks[:, RM_DOWN] |= later[:, 0]
            shared.masks[:, RM_UP] |= later[:, 1]
        _open_all(shared)
        fold_closure(forward, shared, self.log, self.new_masks, count)
        self._note_direction(folded.add_src, folded.add_dst)
        self.seq = stamp
        self.latest = self._snapshot(self.latest.version + len(updates) if version is None else version)
        return UpdateResult(self.latest.version, folded.added, folded.removed, len(folded.new_keys))

    def _stage_each(self, updates: list[tuple[Any, Any]], version: int | None) -> UpdateResult:
        added = removed = new_nodes = 0
        for add, remove in updates:
            step = self.stage(self.plan(add, remove))
            added, removed, new_nodes = added + step.added, removed + step.removed, new_nodes + step.new_nodes
        if version is not None:
            self.latest = self._snapshot(version)
        return UpdateResult(self.latest.version, added, removed, new_nodes)

    def _sweep(self, shared: Shared) -> None:
        """Every mask column from the bits its nodes hold by themselves, one pass over the DAG each: the YES
        masks on the graph less the removed edges (no bit through a dead edge or a broken component)."""
        views = self.views
        children_indptr, children = views.dag_children()
        parents = views.dag_parents()
        none = parents[2][:0]  # no edge positions, of the type of the parents' (one compiled ``sweep``)
        masks = shared.masks
        masks[:, FWD_YES] = 0
        masks[:, BWD_YES] = 0
        masks[shared.hub_nodes, FWD_YES] = shared.hub_bits
        masks[shared.hub_nodes, BWD_YES] = shared.hub_bits
        for column in (FWD_YES, DOWN_YES, DOWN_NO, RM_DOWN):
            sweep(*parents, masks, column, column <= DOWN_YES, shared.dead_bits, shared.broken_bits, True)
        for column in (BWD_YES, UP_YES, UP_NO, RM_UP):
            sweep(
                children_indptr,
                children,
                none,
                masks,
                column,
                column <= UP_YES,
                shared.dead_bits,
                shared.broken_bits,
                False,
            )

    # ---- versions ---------------------------------------------------------------------------------------

    def _snapshot(self, version: int) -> Snapshot:
        """The latest state as a version: views of the shared arrays and this version's closures."""
        shared = self._start()
        n_new = len(self._new_keys)
        extra = AddedNames(self.names, self._new_keys, self._new_ids, n_new) if n_new else None
        counters = shared.counters
        closure_no = np.empty(GROUPS, dtype=np.uint64)
        closure_yes = np.empty(GROUPS, dtype=np.uint64)
        closures(shared, self.log.died, self.seq, closure_no, closure_yes)
        view = self._frozen
        flags = (HAS_ADDED if counters[ENTRIES] else 0) | (HAS_REMOVED if counters[REMOVED_EVER] else 0)
        flags |= HAS_UPWARD if self._upward else 0
        flags |= HAS_NEW_TARGET if self._new_target else 0
        flags |= HAS_ROOTS if counters[ROOT_BITS] else 0
        state = Pending(
            seq=self.seq,
            n_base=self.n_base,
            flags=flags,
            masks=view("masks", shared.masks),
            new_masks=view("new_masks", self.new_masks),
            removed_bits=view("removed_bits", shared.removed_bits),
            dead_bits=view("dead_bits", shared.dead_bits),
            broken_bits=view("broken_bits", shared.broken_bits),
            source_bits=view("source_bits", shared.source_bits),
            target_bits=view("target_bits", shared.target_bits),
            table=view("table", self.table),
            src=view("src", self.log.src),
            dst=view("dst", self.log.dst),
            born=view("born", self.log.born),
            died=view("died", self.log.died),
            links=view("links", self.log.links),
            closure_no=frozen(closure_no),
            closure_yes=frozen(closure_yes),
            floor=self._order_floor(),
            band_shift=self._band_shift,
            node_marked=view("node_marked", shared.node_marked),
            to_root=view("to_root", shared.to_root),
            from_root=view("from_root", shared.from_root),
            source_words=view("source_words", shared.source_words),
            target_words=view("target_words", shared.target_words),
            roots=view("roots", shared.roots),
            open_sources=view("open_sources", shared.open_sources),
            open_targets=view("open_targets", shared.open_targets),
        )
        back = int(counters[REMOVED_BACK])
        added, removed = int(counters[LIVE]) - back, int(counters[REMOVED_EVER]) - back
        return Snapshot(
            version, self.base_version, self.n_base, self.n_base + n_new, state, extra, added, removed, self.seq
        )

    def _order_floor(self) -> np.ndarray:
        """``pending.floor`` of the latest state (empty while no added edge leads against the order), shared
        by the versions until an added edge leads lower."""
        if self._floor is None:
            floor = np.empty_like(self._lowest) if self._upward else np.zeros(0, dtype=np.int64)
            if self._upward:
                order_floor(self._lowest, self._band_shift, self.n_dag, floor)
            self._floor = frozen(floor)
        return self._floor

    def _frozen(self, name: str, array: np.ndarray) -> np.ndarray:
        """A read-only view of a shared array, made once per array (they are written in place)."""
        view = self._views.get(name)
        if view is None or view.base is not array:
            view = self._views[name] = frozen(array)
        return view

    # ---- the graph as it is now -------------------------------------------------------------------------

    def removed_positions(self, snapshot: Snapshot) -> np.ndarray:
        """Forward CSR positions of the labels' edges that a version does not have (sorted)."""
        p = snapshot.state
        if not p.flags & HAS_REMOVED:
            return np.zeros(0, dtype=np.int64)
        words = np.flatnonzero(p.removed_bits)
        bits = np.unpackbits(np.asarray(p.removed_bits)[words].view(np.uint8), bitorder="little").reshape(-1, 64)
        rows, columns = np.nonzero(bits)
        positions = words[rows] * 64 + columns
        in_effect = _in_effect(p, positions)
        added_back = self._added_back(snapshot)
        return np.setdiff1d(positions[in_effect], added_back, assume_unique=True)

    def _added_back(self, snapshot: Snapshot) -> np.ndarray:
        """Positions of the labels' edges that a version has as added edges (removed, then added back)."""
        src, dst = self.added_pairs(snapshot, keep_back=True)
        base = (src < self.n_base) & (dst < self.n_base)
        forward = self.views.forward()
        found = edge_positions(forward.indptr, forward.indices, src[base], dst[base])
        return np.sort(found[found >= 0])

    def added_pairs(self, snapshot: Snapshot, keep_back: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of the edges a version has that the labels' graph does not, in the order they came
        (``keep_back``: the labels' edges added back after a removal, those only)."""
        p = snapshot.state
        if not p.flags & HAS_ADDED:
            nothing = np.zeros(0, dtype=np.int64)
            return nothing, nothing
        # Entries past the latest count are unwritten; those a later update wrote were born after the version.
        count = min(int(self._start().counters[ENTRIES]), p.src.size)
        born, died = p.born[:count], p.died[:count]
        alive = (born <= p.seq) & ((died == 0) | (died > p.seq))
        src, dst = np.asarray(p.src[:count][alive]), np.asarray(p.dst[:count][alive])
        forward = self.views.forward()
        base = (src < self.n_base) & (dst < self.n_base)
        back = np.zeros(src.size, dtype=np.bool_)
        back[base] = edge_positions(forward.indptr, forward.indices, src[base], dst[base]) >= 0
        keep = back if keep_back else ~back
        return src[keep], dst[keep]

    def edges(self, snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of every edge of a version (for a rebuild), in linear time: the labels' edges it still
        has, then the added ones."""
        views = self.views
        src = np.repeat(np.arange(views.num_nodes, dtype=np.int64), np.diff(views.out_indptr))
        dst = np.asarray(views.out_indices, dtype=np.int64)
        removed = self.removed_positions(snapshot)
        if removed.size:
            keep = np.ones(src.size, dtype=np.bool_)
            keep[removed] = False
            src, dst = src[keep], dst[keep]
        add_src, add_dst = self.added_pairs(snapshot)
        return np.concatenate([src, add_src]), np.concatenate([dst, add_dst])

    def new_names(self, snapshot: Snapshot) -> Sequence[int | str]:
        return self._new_keys[: snapshot.new_nodes]


def _open_all(shared: Shared) -> None:
    """``pending.Pending.open_sources`` and ``open_targets`` of every DAG node, after a fold has set its masks
    at once."""
    masks = shared.masks
    for bits, columns in ((shared.open_sources, (UP_NO, RM_UP)), (shared.open_targets, (DOWN_NO, RM_DOWN))):
        opened = (masks[:, columns[0]] | masks[:, columns[1]]) != 0
        packed = np.zeros(bits.size * 8, dtype=np.uint8)
        packed[: (opened.size + 7) // 8] = np.packbits(opened, bitorder="little")
        bits[:] = packed.view(np.uint64)


def _in_effect(p: Pending, positions: np.ndarray) -> np.ndarray:
    """Whether each removal of ``positions`` (base edges ever removed) is in effect in version ``p``."""
    return stamps_in_effect(p.table, REMOVED_EDGE, positions, p.seq)
