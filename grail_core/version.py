"""``Version``: one version of a graph, frozen: what a request reads from start to end.

A version is the ``Labels`` of some version of the graph, plus the edge updates since (an
``overlay.Snapshot``; None for the labels' own graph), plus the index's search side (``search.Searcher``,
shared by every version of one loaded index). Its answers never change: a pair, a batch, a path, a listing
and its names all hold for ``number``. ``updated`` makes the next version; the one before stays as it was.

Updates extend the newest version only (``plan_update`` then ``apply``, ``updated``, or ``folded`` for a
journal); the state they share (``grail_core.overlay``: facts stamped with the update that made them, so a
version is a count and views of shared arrays) is kept by the first version of the labels and handed on.
Queries over pending updates reach the updates' tests and searches (``grail_core.dynamic``,
``grail_core.traversal``, ``grail_core.listing``) in three places only: ``_answers_under_updates`` and
``_search_updated`` (pairs), ``_shortest_path`` (paths) and ``listing``/``_count`` (listings and counts).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from .build import ProgressCallback
from .dynamic import UpdatedAnswers, answer_one, answer_pairs, search_pairs, walk_size
from .errors import IndexFileError, InvalidParameterError, SearchStopped, UnknownName, UnknownNodeError
from .labels import Labels
from .listing import Listing, ReachCount, count_reached, listing
from .names import NameTokens, NodeNames
from .overlay import AddedNames, Overlay, Snapshot, UpdatePlan, UpdateResult, no_pending
from .pending import Pending
from .readers.graph_input import GraphInput
from .search import Searcher
from .stats import IndexStats, QueryStats
from .storage import load_labels, save_labels
from .touched import TouchedGraph, write_touched_graph
from .traversal import shortest_path

__all__ = [
    "Version",
    "load_version",
    "PairAnswer",
    "ReachCount",
    "Listing",
    "PendingUpdates",
    "UpdatePlan",
    "UpdateResult",
    "MAX_LISTED_UNKNOWN",
    "FIRST_STOP_PART",
    "FORECAST_MARGIN",
    "StopCondition",
]

# How many unknown names an UnknownNodeError of a batch lists (with their pairs); it counts them all.
MAX_LISTED_UNKNOWN = 100
# Pairs in the first part of a batch's searches on the updated graph where its caller may stop it (``stop``);
# each part after doubles, so the checks cost nothing on cheap searches, and a stop comes at most as long again
# after the condition holds as the searches so far took.
FIRST_STOP_PART = 64
# A query's ``stop``: asked between parts of its searches on the updated graph, with the seconds the searches
# left are forecast to take (those done so far, per pair, times the pairs left; 0 before the first part);
# True gives up (SearchStopped).
StopCondition = Callable[[float], bool]
# How many times a rebuild's price the forecast of a batch's searches must be before a rebuild is bought ahead
# of them: a first part of 64 pairs may hold most of a batch's slow searches.
FORECAST_MARGIN = 2.0
_ENDS = ("source", "target")


class PairAnswer(NamedTuple):
    """One pair's answer: reachable, whether the labels left it to a search, the version it holds for."""

    reachable: bool
    searched: bool
    version: int


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

    def __init__(self, base: NodeNames, added: AddedNames | None) -> None:
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
    """What every version of one ``Labels`` shares: their updates' state (``Overlay``) and its lock, the
    empty update that the labels' own version searches with, and the seconds their queries spent searching
    the updated graph."""

    def __init__(self, labels: Labels, search: Searcher) -> None:
        self.labels = labels
        self.search = search
        self.lock = threading.RLock()  # plans and stages, one at a time
        self._overlay: Overlay | None = None
        self._no_updates: Pending | None = None
        self._searched = 0.0  # seconds of the searches done
        self._searching: dict[object, float] = {}  # the searches under way: when each started
        self._search_lock = threading.Lock()

    def search_seconds(self) -> float:
        """The searches' seconds, those under way included (a rebuild may be asked for during a long batch)."""
        now = time.perf_counter()
        with self._search_lock:
            return self._searched + sum(now - start for start in self._searching.values())

    def searched(self, seconds: float) -> None:
        with self._search_lock:
            self._searched += seconds

    @contextmanager
    def searching(self) -> Iterator[None]:
        """A search on the updated graph under way: counted while it runs."""
        key = object()
        with self._search_lock:
            self._searching[key] = time.perf_counter()
        try:
            yield
        finally:
            with self._search_lock:
                self._searched += time.perf_counter() - self._searching.pop(key)

    def overlay(self) -> Overlay:
        if self._overlay is None:
            self._overlay = Overlay(self.labels.views, self.search.hot, self.labels.names, self.labels.version)
        return self._overlay

    def latest(self) -> int:
        """The newest version staged."""
        return self.labels.version if self._overlay is None else self._overlay.latest.version

    def no_updates(self) -> Pending:
        if self._no_updates is None:
            self._no_updates = no_pending(self.labels.num_nodes)
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
        self._lineage = lineage or _Lineage(labels, search)
        self._names = _Names(labels.names, snapshot.extra if snapshot is not None else None)
        # The updated graph as an engine other than the CPU's walks it, written out on its first use.
        self._touched: TouchedGraph | None = None
        self._touched_lock = threading.Lock()

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
    def search_seconds(self) -> float:
        """Seconds that queries on the versions of these labels spent on pairs whose answer the updates may
        have changed and the tests left open (searched on the updated graph; the searches under way so far):
        what the updates pending cost, until a rebuild folds them in."""
        return self._lineage.search_seconds()

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
        if not self.updates_pending:
            return self.search.answer_pair(u, v)
        sides = (self.labels.views.forward(), self.labels.views.backward())
        pool = self.search.walk_buffers(self._walk_size())
        found, searched, seconds = answer_one(sides, self._updates(), self.search.hot, pool, self.search.buffers, u, v)
        if seconds:
            self._lineage.searched(seconds)
        return found, searched

    def query_batch(self, pairs: Any, stop: StopCondition | None = None) -> np.ndarray:
        """Answers (bool array) for an (M, 2) array-like of (source, target) names, or for ``NameTokens`` of
        2M names (source, target, source, target ...)."""
        return self.query_batch_with_stats(pairs, stop)[0]

    def query_batch_with_stats(self, pairs: Any, stop: StopCondition | None = None) -> tuple[np.ndarray, QueryStats]:
        """Answers and what they cost: the label filter first, then a search for the undecided pairs.
        UnknownNodeError when a pair names a node this version lacks, listing where (``unknown_error``).
        ``stop``: asked between parts of the searches on the updated graph; where it says True, SearchStopped
        ends the batch (its caller answers it on another version)."""
        start = time.perf_counter()
        names, as_list, shape = _pair_names(pairs)
        if shape[0] == 0:
            return np.zeros(0, dtype=np.bool_), self._no_pairs(start)
        try:
            ids = self._names.ids_of(names, as_list)
        except UnknownNodeError:
            raise self._names.unknown_error(names, as_list) from None
        return self.query_ids(ids.reshape(shape), start, stop)

    def query_batch_known(
        self, pairs: Any, stop: StopCondition | None = None
    ) -> tuple[np.ndarray, np.ndarray, QueryStats]:
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
            answers, stats = self.query_ids(ids, start, stop)
            return answers, unknown, stats
        answers = np.zeros(shape[0], dtype=np.bool_)
        known = ~unknown
        answers[known], stats = self.query_ids(ids[known], start, stop)
        return answers, unknown, replace(stats, pairs=shape[0], unknown_pairs=count)

    def _no_pairs(self, start: float) -> QueryStats:
        return QueryStats(0, 0, 0, 0, time.perf_counter() - start, "none", version=self.number)

    def query_ids(
        self, pairs: np.ndarray, start: float | None = None, stop: StopCondition | None = None
    ) -> tuple[np.ndarray, QueryStats]:
        """``query_batch_with_stats`` on an (M, 2) int64 array of internal node ids."""
        start = time.perf_counter() if start is None else start
        flagged = 0
        if not self.updates_pending:
            answers, searched, positives, decision = self.search.answer_ids(pairs)
        else:
            # The updates' tests decide most pairs, or search them on the updated graph; those whose answer
            # is the labels' graph's go to the labels' engines (GPU included).
            answers, left = self._answers_under_updates(pairs, stop)
            searched, decision = 0, None
            on_labels = np.concatenate((left.base, left.base_first))
            if on_labels.size:
                answers[on_labels], searched, _, decision = self.search.answer_ids(pairs[on_labels])
            lost = left.base_first[~answers[left.base_first]]
            flagged = left.searched + self._search_updated(pairs, lost, answers, stop)
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
        return self.listing(node, True).page()

    def ancestor_ids(self, node: Any) -> np.ndarray:
        """``ancestors`` as sorted internal ids (int64)."""
        return self.listing(node, False).page()

    def listing(self, node: Any, forward: bool = True) -> Listing:
        """The descendants (``forward``) or ancestors of ``node`` as sorted internal ids, counted at once and
        read page by page (``Listing.pages``): off the labels where they hold it, else from one search kept
        as a bit set over the node ids."""
        u = self.node_id(node)
        pool = self.search.walk_buffers(self._walk_size())
        return listing(self.labels.views, self._updates(), self.search.hot, pool, self.num_nodes, u, forward)

    def count_descendants(self, node: Any) -> ReachCount:
        """How many nodes ``node`` reaches (itself excepted): read off the labels where one dimension's DFS
        tree holds all of them, else counted by a search."""
        return self._count(self.node_id(node), True)

    def count_ancestors(self, node: Any) -> ReachCount:
        """How many nodes reach ``node`` (itself excepted), counted by a search (the labels describe what a
        node reaches, not what reaches it)."""
        return self._count(self.node_id(node), False)

    def _count(self, u: int, forward: bool) -> ReachCount:
        pool = self.search.walk_buffers(self._walk_size())
        return count_reached(self.labels.views, self._updates(), self.search.hot, pool, u, forward)

    # ---- the tests and searches over the updated graph: the only calls into them -----------------------

    def _updates(self) -> Pending:
        """This version's updates as the tests and searches read them (none for the labels' graph)."""
        snap = self.snapshot
        if snap is None:
            return self._lineage.no_updates()
        return snap.state

    def _walk_size(self) -> int:
        """Room for the searches' stacks over this version's keys (``dynamic.walk_size``)."""
        return walk_size(self.labels.views.num_dag_nodes, self.num_nodes)

    def _answers_under_updates(
        self, pairs: np.ndarray, stop: StopCondition | None
    ) -> tuple[np.ndarray, UpdatedAnswers]:
        """Answers of pairs of node ids on this version's graph, with updates pending, and what they left to
        the labels' engines (``dynamic.UpdatedAnswers``)."""
        views = self.labels.views
        answers = np.empty(pairs.shape[0], dtype=np.bool_)
        pool = self.search.walk_buffers(self._walk_size())
        sides = (views.forward(), views.backward())
        search = functools.partial(self._search_updated, stop=stop)
        left = answer_pairs(sides, self._updates(), self.search.hot, pool, pairs, answers, search)
        return answers, left

    def _search_updated(
        self, pairs: np.ndarray, which: np.ndarray, answers: np.ndarray, stop: StopCondition | None = None
    ) -> int:
        """Answers of ``pairs[which]`` by searches on this version's graph into ``answers``; how many. With
        ``stop``, in parts (FIRST_STOP_PART pairs, then twice as many each time), ``stop`` asked before each with
        the seconds the rest are forecast to take."""
        if stop is None:
            self._search_part(pairs, which, answers)
            return int(which.size)
        first, size, began = 0, FIRST_STOP_PART, time.perf_counter()
        while first < which.size:
            per_pair = (time.perf_counter() - began) / first if first else 0.0
            if stop(per_pair * (which.size - first)):
                raise SearchStopped(f"version {self.number}: stopped after {first} of {which.size} searches")
            self._search_part(pairs, which[first : first + size], answers)
            first, size = first + size, 2 * size
        return int(which.size)

    def _search_part(self, pairs: np.ndarray, which: np.ndarray, answers: np.ndarray) -> None:
        """``_search_updated`` of ``pairs[which]``: the scheduler sends them to the CPU's walk or to a GPU
        (``Scheduler.search_touched``), by cost."""
        if which.size:
            chosen = pairs[which]

            def on_cpu(part: np.ndarray) -> np.ndarray:
                found = np.zeros(chosen.shape[0], dtype=np.bool_)
                views = self.labels.views
                pool = self.search.walk_buffers(self._walk_size())
                search_pairs(
                    (views.forward(), views.backward()), self._updates(), self.search.hot, pool, chosen, part, found
                )
                return found[part]

            with self._lineage.searching():
                answers[which], _ = self.search.scheduler.search_touched(
                    self.touched_graph, self._touched_build_size(), chosen[:, 0], chosen[:, 1], on_cpu
                )

    def touched_graph(self) -> TouchedGraph:
        """This version's graph over search keys, as a GPU searches it (``grail_core.touched``): made once."""
        with self._touched_lock:
            if self._touched is None:
                self._touched = write_touched_graph(
                    self.labels.views.forward(), self._updates(), self.search.hot, self.num_nodes
                )
            return self._touched

    def _touched_build_size(self) -> int:
        """Keys and edges ``touched_graph`` still has to write (0 once made): the cost of a GPU's first batch."""
        if self._touched is not None:
            return 0
        forward = self.labels.views.forward()
        return int(forward.dag_indices.size + forward.indices.size + forward.dag_indptr.size + self.num_nodes)

    def _shortest_path(self, u: int, v: int) -> np.ndarray:
        """A shortest path from node u to node v, which reaches it, on this version's graph (node ids)."""
        views = self.labels.views
        with self.search.path_buffers(self.num_nodes).take() as (*buffers, mark):
            length = shortest_path(
                views.forward(), views.backward(), self._updates(), self.search.hot, u, v, tuple(buffers), mark
            )
            qf = buffers[3]
            return qf[:length].astype(np.int64)

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

    def folded(self, updates: Iterable[tuple[Any, Any]], number: int | None = None) -> Version:
        """The version that updates (``(add, remove)`` each, as ``updated`` takes them) make from this one, in
        order, as one step: numbered this one's plus their count, or ``number``. On the labels' own version
        the journal is folded into its net effect in time linear in the graph and the updates; after other
        updates they are applied one by one. Nothing changes when one is refused (the error names it)."""
        with self._lineage.lock:
            self._check_newest()
            overlay = self._lineage.overlay()
            result = overlay.stage_many(updates, version=number)
            if result.version == self.number:
                return self
            return Version(self.labels, self.search, overlay.latest, lineage=self._lineage, last_update=result)

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
        overlay = self._lineage.overlay()
        removed = overlay.removed_positions(snap)
        src = np.searchsorted(indptr, removed, side="right") - 1
        removed_edges = np.stack([src, np.asarray(indices)[removed]], axis=1).astype(np.int64)
        added_edges = np.stack(overlay.added_pairs(snap), axis=1)

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
        return self.folded([(add, updates["remove"])], number=int(updates["version"]))


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
