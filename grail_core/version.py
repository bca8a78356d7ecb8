"""``Version``: one version of a graph, frozen: what a request reads from start to end.

A version is the ``Labels`` of some version of the graph, plus the edge updates since (an
``overlay.Snapshot``; None for the labels' own graph), plus the index's search side (``search.Searcher``,
shared by every version of one loaded index). Its answers never change: a pair, a batch, a path, a listing
and its names all hold for ``number``. ``updated`` makes the next version; the one before stays as it was.

Updates extend the newest version only (``plan_update`` then ``apply``, or ``updated``); the state they share
(``grail_core.overlay``: marks that only ever grow) is kept by the first version of the labels and handed on.
Queries over pending updates reach the updates' searches (``grail_core.traversal``) in three places only:
``_answers_under_updates`` (pairs), ``_shortest_path`` (paths) and ``_reached`` (listings and counts).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, NamedTuple

import numba
import numpy as np

from .build import ProgressCallback
from .errors import IndexFileError, InvalidParameterError, UnknownName, UnknownNodeError
from .labels import Labels
from .names import NameTokens, NodeNames
from .overlay import Overlay, Snapshot, UpdatePlan, UpdateResult
from .query import SERIAL_BATCH
from .readers.graph_input import GraphInput
from .search import Searcher
from .stats import IndexStats, QueryStats
from .storage import load_labels, save_labels
from .traversal import (
    UP_ADDED,
    UP_REMOVED,
    Added,
    Delta,
    count_keys,
    flag_pairs,
    keys_to_nodes,
    shortest_path,
    walk,
    walk_pairs,
)
from .views import frozen

__all__ = [
    "Version",
    "load_version",
    "PairAnswer",
    "ReachCount",
    "PendingUpdates",
    "UpdatePlan",
    "UpdateResult",
    "MAX_LISTED_UNKNOWN",
]

# How many unknown names an UnknownNodeError of a batch lists (with their pairs); it counts them all.
MAX_LISTED_UNKNOWN = 100
_ENDS = ("source", "target")


class PairAnswer(NamedTuple):
    """One pair's answer: reachable, whether the labels left it to a search, the version it holds for."""

    reachable: bool
    searched: bool
    version: int


class ReachCount(NamedTuple):
    """How many nodes a node reaches (or is reached from), and how that was found: ``"labels"`` (read off
    the labels at once) or ``"traversal"`` (a counting search)."""

    total: int
    method: str


class PendingUpdates(NamedTuple):
    """Updates since the labels were built: how many, and what they changed (edges the labels' graph does
    not have, its edges no longer in the graph, nodes added)."""

    updates: int
    added_edges: int
    removed_edges: int
    new_nodes: int


def _all_pairs(pairs: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every item is a list or a tuple of two (the common form of a batch of names, read without
    building an object array)."""
    return bool(pairs) and set(map(type, pairs)) <= {list, tuple} and set(map(len, pairs)) == {2}


def _pair_names(pairs: Any) -> tuple[Any, bool, tuple[int, ...]]:
    """A batch's names as the name tables take them: (names, whether they are a flat list, the (M, 2) shape)."""
    if isinstance(pairs, NameTokens):
        if len(pairs) % 2:
            raise InvalidParameterError(f"pairs need an even number of names, got {len(pairs)}")
        return pairs, False, (len(pairs) // 2, 2)
    if isinstance(pairs, list | tuple) and _all_pairs(pairs):
        flat = list(itertools.chain.from_iterable(pairs))
        return flat, True, (len(flat) // 2, 2)
    # Other sequences as objects, not np.asarray's common type: that would read [True, 1] as [1, 1].
    array = pairs if isinstance(pairs, np.ndarray) else np.array(pairs, dtype=object)
    if array.size == 0:
        return array, False, (0, 2)
    if array.ndim != 2 or array.shape[1] != 2:
        raise InvalidParameterError(f"pairs must have shape (M, 2), got {array.shape}")
    return array, False, array.shape


def _name_at(names: Any, i: int) -> Any:
    if isinstance(names, NameTokens):
        return names.text(i)
    value = names[i] if isinstance(names, list) else names.reshape(-1)[i]
    return value.item() if isinstance(value, np.generic) else value


class _Names:
    """The names of one version: the labels' nodes, then those that updates added (ids from the labels'
    node count on). Every name-to-id and id-to-name question of a version goes through here."""

    def __init__(self, base: NodeNames, added: NodeNames | None) -> None:
        self.base = base
        self.added = added
        self.n_base = base.size

    def id_of(self, name: Any) -> int:
        node = self.base.find_one(name)
        if node < 0 and self.added is not None:
            extra = self.added.find_one(name)
            node = -1 if extra < 0 else self.n_base + extra
        if node < 0:
            raise UnknownNodeError(name.item() if isinstance(name, np.generic) else name)
        return node

    def find_ids(self, names: Any, as_list: bool) -> np.ndarray:
        """Flat ids of names (a flat list, an array or NameTokens), -1 for each name this version lacks."""
        ids = (self.base.find_list(names) if as_list else self.base.find(names)).reshape(-1)
        if self.added is not None:
            missing = np.flatnonzero(ids < 0)
            if missing.size:
                ids = ids.copy()
                extra = (self.added.find_list(names) if as_list else self.added.find(names)).reshape(-1)[missing]
                ids[missing] = np.where(extra >= 0, extra + self.n_base, -1)
        return ids

    def unknown_error(self, names: Any, as_list: bool) -> UnknownNodeError:
        """The error naming where ``names`` (2M of them, source and target alternating) name unknown nodes:
        the first MAX_LISTED_UNKNOWN with their pairs, and how many in all."""
        missing = np.flatnonzero(self.find_ids(names, as_list) < 0)
        listed = [UnknownName(i // 2, _ENDS[i % 2], _name_at(names, i)) for i in missing[:MAX_LISTED_UNKNOWN].tolist()]
        return UnknownNodeError(listed[0].name if listed else None, listed, int(missing.size))

    def ids_of(self, names: Any, as_list: bool) -> np.ndarray:
        """Ids of names (a flat list, an array or NameTokens); UnknownNodeError for the first unknown one."""
        if self.added is None:
            return self.base.lookup_list(names) if as_list else self.base.lookup(names)
        ids = (self.base.find_list(names) if as_list else self.base.find(names)).reshape(-1)
        missing = np.flatnonzero(ids < 0)
        if missing.size:
            extra = (self.added.find_list(names) if as_list else self.added.find(names)).reshape(-1)[missing]
            ids[missing] = np.where(extra >= 0, extra + self.n_base, -1)
            if extra.min() < 0:
                raise UnknownNodeError(_name_at(names, int(missing[np.argmax(extra < 0)])))
        return ids

    def _split(self, ids: np.ndarray) -> np.ndarray | None:
        """Where ``ids`` name added nodes (None when none does)."""
        if self.added is None or ids.size == 0 or ids.max() < self.n_base:
            return None
        return ids >= self.n_base

    def names_of(self, ids: np.ndarray) -> list[int | str]:
        added = self._split(ids)
        if added is None:
            return self.base.names_of(ids)
        assert self.added is not None
        names = np.empty(ids.size, dtype=object)
        names[~added] = self.base.names_of(ids[~added])
        names[added] = self.added.names_of(ids[added] - self.n_base)
        return names.tolist()

    def names_array(self, ids: np.ndarray) -> np.ndarray:
        added = self._split(ids)
        if added is None:
            return self.base.names_array(ids)
        assert self.added is not None
        parts = np.concatenate([self.base.names_array(ids[~added]), self.added.names_array(ids[added] - self.n_base)])
        out = np.empty_like(parts)
        out[np.concatenate([np.flatnonzero(~added), np.flatnonzero(added)])] = parts
        return out


class _Lineage:
    """What every version of one ``Labels`` shares: their updates' state (``Overlay``) and its lock, and the
    empty update that the labels' own version searches with."""

    def __init__(self, labels: Labels) -> None:
        self.labels = labels
        self.lock = threading.RLock()  # plans and stages, one at a time
        self._overlay: Overlay | None = None
        self._no_updates: tuple[Delta, Added, Added] | None = None

    def overlay(self) -> Overlay:
        if self._overlay is None:
            self._overlay = Overlay(self.labels.views, self.labels.names, self.labels.version)
        return self._overlay

    def latest(self) -> int:
        """The newest version staged."""
        return self.labels.version if self._overlay is None else self._overlay.latest.version

    def no_updates(self) -> tuple[Delta, Added, Added]:
        if self._no_updates is None:
            views = self.labels.views
            nothing = frozen(np.zeros(0, dtype=np.int64))
            bits = frozen(np.zeros(0, dtype=np.uint64))
            delta = Delta(views.num_nodes, nothing, bits, nothing, bits, nothing, frozen(views.marks))
            added = Added(nothing, nothing, nothing, nothing)
            self._no_updates = (delta, added, added)
        return self._no_updates


class Version:
    """One version of a graph: its labels, the updates since (``snapshot``), and the index's search side.

    Queries take node names as uploaded; ``reachable(u, v)`` is True when a directed path leads from u to v
    (every node reaches itself). Immutable: make the next version with ``updated``.
    """

    def __init__(
        self,
        labels: Labels,
        search: Searcher,
        snapshot: Snapshot | None = None,
        *,
        lineage: _Lineage | None = None,
        last_update: UpdateResult | None = None,
    ) -> None:
        self.labels = labels
        self.search = search
        self.snapshot = snapshot
        # What the update that made this version did (None for the labels' own version).
        self.last_update = last_update
        self._lineage = lineage or _Lineage(labels)
        self._names = _Names(labels.names, snapshot.extra if snapshot is not None else None)

    @classmethod
    def of(cls, labels: Labels, backend: str = "cpu") -> Version:
        """The labels' own version, with a search side of its own (``backend``: 'cpu' or 'cuda', resolved); on
        'cuda' its GPU engines start copying the labels to their devices at once (``Searcher.prefetch``)."""
        search = Searcher(labels, backend)
        search.prefetch()
        return cls(labels, search)

    # ---- what it is ------------------------------------------------------------------------------------

    @property
    def number(self) -> int:
        """The version of the graph it answers for: the labels' version plus the updates since."""
        return self.labels.version if self.snapshot is None else self.snapshot.version

    @property
    def updates_pending(self) -> bool:
        """Whether the graph differs from the labels' graph."""
        return self.snapshot is not None and self.snapshot.pending

    @property
    def pending(self) -> PendingUpdates:
        """The updates the labels do not include yet (a rebuild folds them in)."""
        snap = self.snapshot
        if snap is None:
            return PendingUpdates(0, 0, 0, 0)
        return PendingUpdates(snap.updates, snap.added_edges, snap.removed_edges, snap.new_nodes)

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph, those that updates added included."""
        return self.labels.num_nodes if self.snapshot is None else self.snapshot.num_nodes

    @property
    def stats(self) -> IndexStats:
        return self.labels.stats

    @property
    def names_are_integers(self) -> bool:
        return self.labels.names.are_integers

    # ---- names -----------------------------------------------------------------------------------------

    def node_id(self, name: Any) -> int:
        """The internal id of a node name; UnknownNodeError when this version has no such node."""
        return self._names.id_of(name)

    def node_ids(self, names: Any) -> np.ndarray:
        """Internal ids (int64, flat) of a sequence of names, an array of names or ``NameTokens``."""
        if isinstance(names, NameTokens | np.ndarray):
            return self._names.ids_of(names, False).reshape(-1)
        return self._names.ids_of(list(names), True)

    def names_of_ids(self, ids: Any) -> np.ndarray:
        """The names of internal ids as a numpy array (int64 for integer names, ``StringDType`` for strings)."""
        return self._names.names_array(np.asarray(ids, dtype=np.int64))

    # ---- pairs -----------------------------------------------------------------------------------------

    def reachable(self, source: Any, target: Any) -> bool:
        """True when a directed path leads from ``source`` to ``target`` (names as uploaded)."""
        return self.query_pair(source, target)[0]

    def query_pair(self, source: Any, target: Any) -> PairAnswer:
        """(reachable, whether the labels left the pair to a search, the version), for one pair of names."""
        if not self.updates_pending:
            u, v = self.labels.names.lookup_one(source), self.labels.names.lookup_one(target)
            return PairAnswer(*self.search.answer_pair(u, v), self.number)
        reachable, searched = self._pair(self.node_id(source), self.node_id(target))
        return PairAnswer(reachable, searched, self.number)

    def _pair(self, u: int, v: int) -> tuple[bool, bool]:
        """(reachable, searched) for node ids u and v."""
        changed = self._answers_under_updates(np.array([[u, v]], dtype=np.int64))
        if changed is None:
            return self.search.answer_pair(u, v)
        return bool(changed[1][0]), True

    def query_batch(self, pairs: Any) -> np.ndarray:
        """Answers (bool array) for an (M, 2) array-like of (source, target) names, or for ``NameTokens`` of
        2M names (source, target, source, target ...)."""
        return self.query_batch_with_stats(pairs)[0]

    def query_batch_with_stats(self, pairs: Any) -> tuple[np.ndarray, QueryStats]:
        """Answers and what they cost: the label filter first, then a search for the undecided pairs.
        UnknownNodeError when a pair names a node this version lacks, listing where (``unknown_error``)."""
        start = time.perf_counter()
        names, as_list, shape = _pair_names(pairs)
        if shape[0] == 0:
            return np.zeros(0, dtype=np.bool_), self._no_pairs(start)
        try:
            ids = self._names.ids_of(names, as_list)
        except UnknownNodeError:
            raise self._names.unknown_error(names, as_list) from None
        return self.query_ids(ids.reshape(shape), start)

    def query_batch_known(self, pairs: Any) -> tuple[np.ndarray, np.ndarray, QueryStats]:
        """``query_batch_with_stats`` for pairs that may name nodes this version lacks: (answers, unknown,
        stats), where ``unknown`` marks the pairs that name such a node; their answers are False."""
        start = time.perf_counter()
        names, as_list, shape = _pair_names(pairs)
        if shape[0] == 0:
            return np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.bool_), self._no_pairs(start)
        ids = self._names.find_ids(names, as_list).reshape(shape)
        unknown: np.ndarray = np.any(ids < 0, axis=1)
        count = int(np.count_nonzero(unknown))
        if count == 0:
            answers, stats = self.query_ids(ids, start)
            return answers, unknown, stats
        answers = np.zeros(shape[0], dtype=np.bool_)
        known = ~unknown
        answers[known], stats = self.query_ids(ids[known], start)
        return answers, unknown, replace(stats, pairs=shape[0], unknown_pairs=count)

    def _no_pairs(self, start: float) -> QueryStats:
        return QueryStats(0, 0, 0, 0, time.perf_counter() - start, "none", version=self.number)

    def query_ids(self, pairs: np.ndarray, start: float | None = None) -> tuple[np.ndarray, QueryStats]:
        """``query_batch_with_stats`` on an (M, 2) int64 array of internal node ids."""
        start = time.perf_counter() if start is None else start
        changed = self._answers_under_updates(pairs)
        flagged = 0
        if changed is None:
            answers, searched, positives, decision = self.search.answer_ids(pairs)
        else:
            # Pairs that updates may have changed are searched on the updated graph; the others keep the
            # labels' answers (their engines, GPU included).
            which, found = changed
            flagged = int(which.size)
            plain = np.ones(pairs.shape[0], dtype=np.bool_)
            plain[which] = False
            answers = np.empty(pairs.shape[0], dtype=np.bool_)
            searched, decision = 0, None
            if flagged < pairs.shape[0]:
                answers[plain], searched, _, decision = self.search.answer_ids(pairs[plain])
            answers[which] = found
            positives = int(np.count_nonzero(answers))
        engine = decision.engine if decision is not None else ("cpu" if searched else "none")
        stats = QueryStats(
            pairs=int(pairs.shape[0]),
            decided_by_filter=int(pairs.shape[0]) - searched - flagged,
            searched=searched + flagged,
            positives=positives,
            seconds=time.perf_counter() - start,
            search_backend="none" if engine == "none" else engine.split(":")[0],
            search_engine=engine,
            search_mode=decision.mode if decision is not None else ("dfs" if searched else "none"),
            search_seconds=decision.seconds if decision is not None else 0.0,
            predicted_seconds=dict(decision.predicted) if decision is not None else {},
            probe_pairs=decision.probe_pairs if decision is not None else 0,
            version=self.number,
            searched_updated=flagged,
        )
        return answers, stats

    # ---- paths -----------------------------------------------------------------------------------------

    def path(self, source: Any, target: Any) -> list[int | str] | None:
        """A shortest path from ``source`` to ``target`` through the graph (names as uploaded, both ends
        included; ``[source]`` for a node to itself), or None when ``target`` is unreachable."""
        found = self.path_ids(self.node_id(source), self.node_id(target))
        return None if found is None else self._names.names_of(found)

    def path_ids(self, source: int, target: int) -> np.ndarray | None:
        """``path`` over internal node ids (0 to num_nodes - 1)."""
        for node in (source, target):
            if not 0 <= int(node) < self.num_nodes:
                raise InvalidParameterError(f"node ids lie in 0..{self.num_nodes - 1}, got {node}")
        # The labels answer first: an unreachable target costs a pair query, not a search.
        if not self._pair(int(source), int(target))[0]:
            return None
        return self._shortest_path(int(source), int(target))

    # ---- listings --------------------------------------------------------------------------------------

    def descendants(self, node: Any) -> np.ndarray:
        """The nodes ``node`` reaches, itself excepted (as networkx's ``descendants``), by internal id (the
        order of first appearance in the upload): a numpy array of names (see ``names_of_ids``)."""
        return self._names.names_array(self.descendant_ids(node))

    def ancestors(self, node: Any) -> np.ndarray:
        """The nodes that reach ``node``, itself excepted, as ``descendants`` lists them."""
        return self._names.names_array(self.ancestor_ids(node))

    def descendant_ids(self, node: Any) -> np.ndarray:
        """``descendants`` as sorted internal ids (int64)."""
        return self._reach_ids(self.node_id(node), True)

    def ancestor_ids(self, node: Any) -> np.ndarray:
        """``ancestors`` as sorted internal ids (int64)."""
        return self._reach_ids(self.node_id(node), False)

    def count_descendants(self, node: Any) -> ReachCount:
        """How many nodes ``node`` reaches (itself excepted): read off the labels where one dimension's DFS
        tree holds all of them, else counted by a search."""
        u = self.node_id(node)
        span = self._label_span(u)
        if span is not None:
            k, lo, hi = span
            before = self.labels.views.post_order()[1]
            return ReachCount(int(before[k, hi + 1] - before[k, lo]) - 1, "labels")
        return ReachCount(self._count_reached(u, True), "traversal")

    def count_ancestors(self, node: Any) -> ReachCount:
        """How many nodes reach ``node`` (itself excepted), counted by a search (the labels describe what a
        node reaches, not what reaches it)."""
        return ReachCount(self._count_reached(self.node_id(node), False), "traversal")

    def _label_span(self, u: int) -> tuple[int, int, int] | None:
        """(dimension, lo, hi) when the descendants of node u are exactly the DAG nodes of post-orders lo..hi
        in that dimension, else None.

        A node's labels bound its descendants' post-orders by [lo, hi] (GRAIL's interval) and its DFS tree's
        by [tree_lo, hi], a range that holds nothing else; where lo == tree_lo the two coincide. Updates
        leave that true for a node that reaches neither a removed nor an added edge."""
        labels = self.labels
        if u >= labels.num_nodes:
            return None
        c = int(labels.views.comp[u])
        if self.updates_pending and labels.views.marks[c] & (UP_REMOVED | UP_ADDED):
            return None
        a = labels.arrays
        lo, tree_lo, hi = np.asarray(a.lo[c]), np.asarray(a.tree_lo[c]), np.asarray(a.hi[c])
        exact = np.flatnonzero(lo == tree_lo)
        if exact.size == 0:
            return None
        k = int(exact[0])
        return k, int(lo[k]), int(hi[k])

    def _count_reached(self, u: int, forward: bool) -> int:
        mem_indptr, _ = self.labels.views.members()
        n_dag = self.labels.views.num_dag_nodes
        return self._reached(u, forward, lambda keys, count: int(count_keys(keys, count, n_dag, mem_indptr)) - 1)

    def _reach_ids(self, u: int, forward: bool) -> np.ndarray:
        views = self.labels.views
        mem_indptr, mem = views.members()
        n_dag = views.num_dag_nodes
        span = self._label_span(u) if forward else None
        if span is not None:
            k, lo, hi = span
            order, before = views.post_order()
            keys = order[k, lo : hi + 1]
            out = np.empty(int(before[k, hi + 1] - before[k, lo]), dtype=np.int64)
            written = keys_to_nodes(keys, keys.size, n_dag, mem_indptr, mem, u, out)
        else:

            def collect(keys: np.ndarray, count: int) -> tuple[np.ndarray, int]:
                out = np.empty(int(count_keys(keys, count, n_dag, mem_indptr)), dtype=np.int64)
                return out, int(keys_to_nodes(keys, count, n_dag, mem_indptr, mem, u, out))

            out, written = self._reached(u, forward, collect)
        out = out[:written]
        out.sort()
        return out

    # ---- the searches over the updated graph: the only calls into them ---------------------------------

    def _updates(self) -> tuple[Delta, Added, Added]:
        """This version's updates as the searches read them (none for the labels' graph)."""
        snap = self.snapshot
        if snap is None:
            return self._lineage.no_updates()
        return snap.delta, snap.forward, snap.backward

    def _walk_size(self) -> int:
        """Keys a walk may visit: every DAG node and every node."""
        return self.labels.views.num_dag_nodes + self.num_nodes

    def _answers_under_updates(self, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The positions of the pairs (node ids) whose answers pending updates may have changed, and their
        answers, searched on this version's graph (slices over the cores); None when there are none: every
        pair keeps the labels' answer."""
        snap = self.snapshot
        if snap is None or not snap.pending:
            return None
        views = self.labels.views
        flags = np.empty(pairs.shape[0], dtype=np.bool_)
        if not flag_pairs(pairs, views.comp, snap.delta.marks, snap.delta.n_base, flags):
            return None
        which = np.flatnonzero(flags)
        pairs = np.ascontiguousarray(pairs, dtype=np.int64)
        answers = np.empty(pairs.shape[0], dtype=np.bool_)
        delta, forward, _ = self._updates()
        pool = self.search.walk_buffers(self._walk_size())
        side = views.forward()
        hot = self.search.hot
        threads = 1 if which.size < SERIAL_BATCH else numba.get_num_threads()

        def run(part: np.ndarray) -> None:
            with pool.take(marks=max(1, part.size)) as (stamp, queue, mark):
                walk_pairs(side, delta, forward, hot, pairs, part, True, answers, stamp, mark, queue)

        if threads == 1:
            run(which)
        else:
            with ThreadPoolExecutor(threads) as executor:
                list(executor.map(run, np.array_split(which, threads)))
        return which, answers[which]

    def _shortest_path(self, u: int, v: int) -> np.ndarray:
        """A shortest path from node u to node v, which reaches it, on this version's graph (node ids)."""
        views = self.labels.views
        delta, forward, backward = self._updates()
        with self.search.path_buffers(self.num_nodes).take() as (stamp, parent, depth, qf, qb, mark):
            length = shortest_path(
                views.forward(),
                views.backward(),
                delta,
                forward,
                backward,
                self.search.hot,
                u,
                v,
                stamp,
                mark,
                parent,
                depth,
                qf,
                qb,
            )
            return qf[:length].astype(np.int64)

    def _reached(self, u: int, forward: bool, consume: Callable[[np.ndarray, int], Any]) -> Any:
        """Everything node u reaches (``forward``) or is reached from on this version's graph, as walk keys:
        ``consume(keys, count)`` reads them while the buffers are held."""
        views = self.labels.views
        delta, added_forward, added_backward = self._updates()
        side = views.forward() if forward else views.backward()
        added = added_forward if forward else added_backward
        with self.search.walk_buffers(self._walk_size()).take() as (stamp, queue, mark):
            _, count = walk(side, delta, added, self.search.hot, u, -1, False, stamp, mark, queue)
            return consume(queue, count)

    # ---- updates ---------------------------------------------------------------------------------------

    def plan_update(self, add: Any = None, remove: Any = None) -> UpdatePlan:
        """Check an update against this version, which must be the newest, and resolve its names (nothing
        changes): ``add`` and ``remove`` are lists of [source, target] names or (k, 2) arrays; ``add`` may
        name new nodes. InvalidParameterError for a malformed edge, a name the graph's nodes cannot have, an
        edge both added and removed, or an older version; UnknownNodeError for an unknown node in ``remove``."""
        with self._lineage.lock:
            self._check_newest()
            return self._lineage.overlay().plan(add, remove)

    def apply(self, plan: UpdatePlan, number: int | None = None) -> Version:
        """The next version: this one with a planned update (numbered ``number`` when restoring saved updates).
        InvalidParameterError when another update came between plan and apply."""
        with self._lineage.lock:
            overlay = self._lineage.overlay()
            result = overlay.stage(plan, version=number)
            return Version(self.labels, self.search, overlay.latest, lineage=self._lineage, last_update=result)

    def updated(self, add: Any = None, remove: Any = None) -> Version:
        """The next version: this one with edges added and removed (see ``plan_update``). Adding an edge the
        graph has, or removing one it has not, changes nothing (``last_update`` counts what changed); self
        loops add their node and nothing else."""
        with self._lineage.lock:
            return self.apply(self.plan_update(add, remove))

    def _check_newest(self) -> None:
        latest = self._lineage.latest()
        if latest != self.number:
            raise InvalidParameterError(f"version {self.number} is not the graph's newest ({latest}): update that")

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) int64 ids of every edge of the graph in this version (self loops and repeats removed)."""
        if self.snapshot is None:
            return self.labels.edges()
        return self._lineage.overlay().edges(self.snapshot)

    def _new_names(self) -> list[int | str]:
        """The nodes updates added, in id order."""
        snap = self.snapshot
        if snap is None or not snap.new_nodes:
            return []
        return list(self._lineage.overlay().new_names(snap))

    def graph_input(self) -> GraphInput:
        """The graph of this version as a build reads it."""
        src, dst = self.edges()
        names = self.labels.names
        new = self._new_names()
        if new:
            names = names.extended(new)
        return GraphInput(names.size, src, dst, names, "update")

    def rebuilt_labels(self, *, backend: str, progress: ProgressCallback | None = None, **build: Any) -> Labels:
        """New labels of this version's graph (nothing pending), on a resolved backend. Build parameters
        default to the labels' (``dims``, ``seed``, ``hubs``)."""
        params: dict[str, Any] = self.labels.rebuild_parameters() | build
        return Labels.build(self.graph_input(), backend=backend, progress=progress, version=self.number, **params)

    # ---- files -----------------------------------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str], overwrite: bool = False) -> str:
        """Write this version to ``directory`` atomically: its labels, and its updates by name when some are
        pending (loading applies them again). Returns the checksum of the files."""
        snap = self.snapshot
        if snap is None or not snap.pending:
            # Updates that changed nothing leave the labels exact for the version they made.
            return save_labels(self.labels, directory, version=self.number, overwrite=overwrite)
        return save_labels(
            self.labels, directory, version=self.labels.version, updates=self._pending_names(), overwrite=overwrite
        )

    def _pending_names(self) -> dict[str, Any]:
        """This version's updates by name: the nodes added (in id order), the edges added and removed."""
        snap = self.snapshot
        assert snap is not None
        indptr, indices = self.labels.graph_csr
        removed = snap.delta.removed
        src = np.searchsorted(indptr, removed, side="right") - 1
        removed_edges = np.stack([src, np.asarray(indices)[removed]], axis=1).astype(np.int64)
        added_edges = np.stack([snap.forward.key, snap.forward.other], axis=1)

        def by_name(edges: np.ndarray) -> list[Any]:
            return np.reshape(self._names.names_of(edges.reshape(-1)), (-1, 2)).tolist() if edges.size else []

        return {
            "version": snap.version,
            "nodes": self._new_names(),
            "add": by_name(added_edges),
            "remove": by_name(removed_edges),
        }

    def restored(self, updates: dict[str, Any]) -> Version:
        """This version with updates saved by ``save`` applied again, as the version they were at."""
        add = [[name, name] for name in updates["nodes"]] + list(updates["add"])
        with self._lineage.lock:
            return self.apply(self.plan_update(add, updates["remove"]), number=int(updates["version"]))


def load_version(
    directory: str | os.PathLike[str], *, backend: str = "cpu", mmap: bool = True, verify: bool = True
) -> Version:
    """The version saved in ``directory`` (``Version.save``: its labels, and its updates applied again), with a
    search side of its own on ``backend`` ('cpu' or 'cuda', resolved). IndexFileError when the files are
    missing, truncated or corrupted."""
    labels, updates = load_labels(directory, mmap=mmap, verify=verify)
    version = Version.of(labels, backend)
    if updates is None:
        return version
    try:
        return version.restored(updates)
    except (KeyError, TypeError, ValueError, UnknownNodeError) as error:
        raise IndexFileError(f"{directory} holds unreadable updates: {error}") from None
