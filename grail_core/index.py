"""``ReachabilityIndex``: build a GRAIL index from a graph, answer reachability, save and load it."""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, NamedTuple

import numba
import numpy as np

from . import backends
from .build import ProgressCallback, build_index_arrays
from .errors import IndexFileError, InvalidParameterError, UnknownNodeError
from .graph import Digraph, edge_id_range
from .names import MAX_NAME_BYTES, NameTokens, NodeNames
from .overlay import Overlay, Snapshot, UpdatePlan, UpdateResult
from .query import (
    SERIAL_BATCH,
    UNDECIDED,
    YES,
    QueryArrays,
    SearchBuffers,
    answer_pair,
    filter_pairs,
    pack,
)
from .readers import GraphInput, GraphSource, read_graph
from .readers.columns import ColumnSpec
from .readers.objects import graph_from_networkx, graph_from_pandas, graph_from_scipy
from .stats import IndexStats, QueryStats
from .storage import index_checksum, read_index_dir, write_index_dir
from .supportive import HUB_BITS
from .traversal import (
    UP_ADDED,
    UP_REMOVED,
    Added,
    Delta,
    count_keys,
    flag_pairs,
    keys_to_nodes,
    pair_changed,
    shortest_path,
    walk,
    walk_pairs,
)
from .views import GraphViews, frozen

__all__ = [
    "ReachabilityIndex",
    "MAX_DIMS",
    "ProgressCallback",
    "PairAnswer",
    "ReachCount",
    "PendingUpdates",
    "UpdatePlan",
    "UpdateResult",
]

log = logging.getLogger(__name__)

MAX_DIMS = 8


def _all_pairs(pairs: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every item is a list or a tuple of two (the common form of a batch of names, read without
    building an object array)."""
    return bool(pairs) and set(map(type, pairs)) <= {list, tuple} and set(map(len, pairs)) == {2}


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


class _PathBuffers:
    """Visit stamps, parents, depths and the two queues of path searches, reused like ``SearchBuffers``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[list[Any]] = []

    @contextmanager
    def take(self) -> Iterator[tuple[np.ndarray, ...]]:
        try:
            buffers = self._free.pop()
        except IndexError:
            arrays = [np.zeros(self.size, dtype=np.int32)] + [np.empty(self.size, dtype=np.int32) for _ in range(4)]
            buffers = [*arrays, 0]
        if buffers[-1] > np.iinfo(np.int32).max - 3:
            buffers[0][:] = 0
            buffers[-1] = 0
        buffers[-1] += 3
        try:
            yield (*buffers[:5], np.int32(buffers[-1] - 2))
        finally:
            self._free.append(buffers)


def _walk_size(views: GraphViews, snap: Snapshot | None) -> int:
    """Keys a walk may visit: every DAG node and every node."""
    return views.num_dag_nodes + (snap.num_nodes if snap is not None else views.num_nodes)


def _name_at(names: Any, i: int) -> Any:
    if isinstance(names, NameTokens):
        return names.text(i)
    value = names[i] if isinstance(names, list) else names.reshape(-1)[i]
    return value.item() if isinstance(value, np.generic) else value


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_parameters(dims: int, seed: int, hubs: int) -> None:
    if not _is_int(dims) or not 1 <= dims <= MAX_DIMS:
        raise InvalidParameterError(f"dims must be an integer from 1 to {MAX_DIMS}, got {dims!r}")
    if not _is_int(hubs) or not 0 <= hubs <= HUB_BITS:
        raise InvalidParameterError(f"hubs must be an integer from 0 to {HUB_BITS}, got {hubs!r}")
    if not _is_int(seed) or not 0 <= seed < 2**63:
        raise InvalidParameterError(f"seed must be a non-negative integer, got {seed!r}")


def _edge_array(ids: np.ndarray) -> np.ndarray:
    """int32 and int64 ids are used as they are (no copy); other integer types become int64 (ids that do
    not fit int64 are refused)."""
    if ids.dtype in (np.int32, np.int64) and ids.flags.c_contiguous:
        return ids
    if ids.dtype.kind == "u" and ids.size and int(ids.max()) >= 2**63:
        raise InvalidParameterError("node ids must lie below 2**63")
    return np.ascontiguousarray(ids, dtype=np.int64)


class ReachabilityIndex:
    """An exact reachability index: GRAIL interval labels over the SCC condensation, plus hub masks.

    Queries take node names as uploaded; ``reachable(u, v)`` is True when a directed path leads from
    u to v (every node reaches itself).
    """

    def __init__(
        self,
        names: NodeNames,
        graph_csr: tuple[np.ndarray, np.ndarray],
        arrays: QueryArrays,
        stats: IndexStats,
        search_backend: str = "cpu",
        *,
        version: int = 1,
        checksum: str | None = None,
    ) -> None:
        self.names = names
        self._graph_csr = graph_csr
        self.arrays = arrays
        # Where undecided pairs may be searched: 'cuda' lets the scheduler send large batches to the GPU.
        self.search_backend = search_backend
        self.hot = pack(arrays)
        self._buffers = SearchBuffers(self.hot.rec_dag.shape[0])
        self.stats = stats
        # The index's engines (the CPU's, and one per GPU for 'cuda') and the scheduler that picks per batch.
        self.scheduler = backends.search_scheduler(self.hot, search_backend)
        # The version of the graph the labels describe, and the checksum of its files once saved or loaded.
        self.base_version = int(version)
        self.checksum = checksum
        # Paths, listings and updates read the graph in more forms than the labels' (built on first use).
        self.views = GraphViews(graph_csr, arrays)
        self._updates = threading.RLock()  # plans, stages, publishes and rebuilds, in order
        self._overlay: Overlay | None = None
        self._visible: Snapshot | None = None  # the published version; None: the labels' graph, unchanged
        self._staged: dict[int, Snapshot] = {}  # versions staged but not yet published
        self._walk_buffers = SearchBuffers(0)
        self._path_buffers = _PathBuffers(0)
        self._empty: tuple[Delta, Added, Added] | None = None

    def release(self) -> None:
        """Frees the index's copies on GPUs now (they also go when the index is collected, or when another
        index needs the memory); a later batch copies it again."""
        self.scheduler.release()

    # Building -----------------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        graph: GraphInput,
        *,
        dims: int = 2,
        seed: int = 0,
        backend: str = "auto",
        hubs: int = HUB_BITS,
        progress: ProgressCallback | None = None,
    ) -> ReachabilityIndex:
        """Index a parsed graph; ``backend`` is 'auto' (GPU when there is one), 'cpu' or 'cuda'.

        ``dims`` GRAIL dimensions (1..8), ``seed`` for their random child orders, ``hubs`` nodes (0..64)
        whose reach sets are kept exactly.
        """
        _check_parameters(dims, seed, hubs)
        resolved = backends.resolve_backend(backend)
        built = build_index_arrays(
            graph.num_nodes, graph.src, graph.dst, dims=dims, seed=seed, hubs=hubs, backend=resolved, progress=progress
        )
        arrays = built.arrays
        stats = IndexStats(
            nodes=built.num_nodes,
            edges=built.num_edges,
            edge_entries=graph.num_edge_entries,
            components=arrays.level.size,
            dag_nodes=arrays.level.size,
            dag_edges=arrays.out_indices.size,
            levels=built.levels,
            dims=int(dims),
            seed=int(seed),
            backend=built.labels_backend,
            hubs=built.hubs,
            names=graph.names.kind,
            phase_seconds=built.phase_seconds,
            phase_backends=built.phase_backends,
            build_plan=built.plan,
        )
        log.info(
            "indexed %d nodes, %d edges (%d DAG nodes) on %s in %.3f s",
            stats.nodes,
            stats.edges,
            stats.dag_nodes,
            stats.backend,
            stats.build_seconds,
        )
        return cls(graph.names, built.graph_csr, arrays, stats, search_backend=resolved)

    @classmethod
    def from_edges(cls, src: Any, dst: Any = None, *, num_nodes: int | None = None, **build: Any) -> ReachabilityIndex:
        """Index integer edge arrays: ``from_edges(src, dst)`` or ``from_edges(edges_m_by_2)``.

        Nodes are 0..num_nodes-1 (default: one more than the largest id); names are those integers.
        """
        if dst is None:
            edges = np.asarray(src)
            if edges.ndim != 2 or edges.shape[1] != 2:
                raise InvalidParameterError(f"edges must have shape (m, 2), got {edges.shape}")
            src, dst = edges[:, 0], edges[:, 1]
        src = np.asarray(src)
        dst = np.asarray(dst)
        if src.shape != dst.shape or src.ndim != 1:
            raise InvalidParameterError("src and dst must be one-dimensional arrays of equal length")
        if src.size and (src.dtype.kind not in "iu" or dst.dtype.kind not in "iu"):
            raise InvalidParameterError("edge arrays must hold integer node ids")
        src, dst = _edge_array(src), _edge_array(dst)
        smallest, largest = edge_id_range(src, dst) if src.size else (0, -1)
        n = largest + 1 if num_nodes is None else int(num_nodes)
        if smallest < 0 or largest >= n:
            raise InvalidParameterError(f"node ids must lie in 0..{n - 1}")
        if n == 0:
            raise InvalidParameterError("empty graph: no nodes")
        graph = GraphInput(n, src, dst, NodeNames.identity(n), "arrays")
        return cls.build(graph, **build)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        format: str | None = None,
        *,
        header: bool | None = None,
        source_column: ColumnSpec = None,
        target_column: ColumnSpec = None,
        max_name_bytes: int = MAX_NAME_BYTES,
        **build: Any,
    ) -> ReachabilityIndex:
        """Read a graph file in any of ``readers.FORMATS`` (optionally gzip) and index it; the reading options
        are ``read_graph``'s, the rest ``build``'s."""
        graph = read_graph(
            path,
            format,
            header=header,
            source_column=source_column,
            target_column=target_column,
            max_name_bytes=max_name_bytes,
        )
        return cls.build(graph, **build)

    @classmethod
    def from_bytes(
        cls,
        data: GraphSource,
        format: str | None = None,
        *,
        header: bool | None = None,
        source_column: ColumnSpec = None,
        target_column: ColumnSpec = None,
        max_name_bytes: int = MAX_NAME_BYTES,
        **build: Any,
    ) -> ReachabilityIndex:
        """Parse graph bytes (or a binary file object) and index them, as ``from_file``."""
        graph = read_graph(
            data,
            format,
            header=header,
            source_column=source_column,
            target_column=target_column,
            max_name_bytes=max_name_bytes,
        )
        return cls.build(graph, **build)

    @classmethod
    def from_networkx(cls, graph: Any, *, max_name_bytes: int = MAX_NAME_BYTES, **build: Any) -> ReachabilityIndex:
        """Index a networkx graph: its nodes (integers or strings) are the names, isolated nodes included; an
        undirected graph's edges run both ways."""
        return cls.build(graph_from_networkx(graph, max_name_bytes), **build)

    @classmethod
    def from_scipy(cls, matrix: Any, **build: Any) -> ReachabilityIndex:
        """Index the graph of a square adjacency matrix (scipy sparse, or a dense numpy array): nodes
        0..n-1, an edge i -> j for every stored (sparse) or nonzero (dense) entry (i, j)."""
        return cls.build(graph_from_scipy(matrix), **build)

    @classmethod
    def from_pandas(
        cls,
        frame: Any,
        source: ColumnSpec = None,
        target: ColumnSpec = None,
        *,
        max_name_bytes: int = MAX_NAME_BYTES,
        **build: Any,
    ) -> ReachabilityIndex:
        """Index the edges of a data frame: ``source`` and ``target`` name its columns (a label or a 0-based
        position; default: recognised by their names, like an edge list's header). Integer or string names."""
        return cls.build(graph_from_pandas(frame, source, target, max_name_bytes), **build)

    # Queries ------------------------------------------------------------------------------------

    @property
    def graph(self) -> Digraph:
        """The uploaded graph (self loops and duplicate edges removed) over internal node ids."""
        return Digraph.from_csr(*self._graph_csr)

    @property
    def names_are_integers(self) -> bool:
        return self.names.are_integers

    @property
    def version(self) -> int:
        """The version of the graph that queries answer for: the labels' version plus the updates since."""
        snap = self._visible
        return self.base_version if snap is None else snap.version

    @property
    def pending(self) -> PendingUpdates:
        """The updates the labels do not include yet (``rebuild`` folds them in)."""
        snap = self._visible
        if snap is None:
            return PendingUpdates(0, 0, 0, 0)
        return PendingUpdates(snap.updates, snap.added_edges, snap.removed_edges, snap.new_nodes)

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph, those that updates added included."""
        snap = self._visible
        return self.names.size if snap is None else snap.num_nodes

    def reachable(self, source: Any, target: Any) -> bool:
        """True when a directed path leads from ``source`` to ``target`` (names as uploaded)."""
        return self.query_pair(source, target)[0]

    def query_pair(self, source: Any, target: Any) -> PairAnswer:
        """(reachable, whether the labels left the pair to a search, the version), for one pair of names."""
        snap = self._visible
        if snap is None or not snap.pending:
            u, v = self.names.lookup_one(source), self.names.lookup_one(target)
            answer, searched = answer_pair(self.hot, self._buffers, u, v)
            return PairAnswer(answer, searched, self.base_version if snap is None else snap.version)
        u, v = self._node_id(snap, source), self._node_id(snap, target)
        if not pair_changed(self.views.comp, snap.delta.marks, snap.delta.n_base, u, v):
            answer, searched = answer_pair(self.hot, self._buffers, u, v)
            return PairAnswer(answer, searched, snap.version)
        return PairAnswer(self._walk_reaches(snap, u, v), True, snap.version)

    def query_batch(self, pairs: Any) -> np.ndarray:
        """Answers (bool array) for an (M, 2) array-like of (source, target) names, or for ``NameTokens`` of
        2M names (source, target, source, target ...)."""
        return self.query_batch_with_stats(pairs)[0]

    def query_batch_with_stats(self, pairs: Any) -> tuple[np.ndarray, QueryStats]:
        """Answers and what they cost: the label filter first, then a search for the undecided pairs."""
        start = time.perf_counter()
        snap = self._visible
        as_list = False
        if isinstance(pairs, NameTokens):
            if len(pairs) % 2:
                raise InvalidParameterError(f"pairs need an even number of names, got {len(pairs)}")
            shape: tuple[int, ...] = (len(pairs) // 2, 2)
        elif isinstance(pairs, list | tuple) and _all_pairs(pairs):
            pairs = list(itertools.chain.from_iterable(pairs))
            shape, as_list = (len(pairs) // 2, 2), True
        else:
            # Other sequences as objects, not np.asarray's common type: that would read [True, 1] as [1, 1].
            pairs = pairs if isinstance(pairs, np.ndarray) else np.array(pairs, dtype=object)
            shape = pairs.shape
        if np.prod(shape) == 0:
            empty = QueryStats(0, 0, 0, 0, time.perf_counter() - start, "none", version=self._version_of(snap))
            return np.zeros(0, dtype=np.bool_), empty
        if len(shape) != 2 or shape[1] != 2:
            raise InvalidParameterError(f"pairs must have shape (M, 2), got {shape}")
        return self._answer_ids(snap, self._lookup(snap, pairs, as_list).reshape(shape), start)

    def query_ids(self, pairs: np.ndarray, start: float | None = None) -> tuple[np.ndarray, QueryStats]:
        """``query_batch_with_stats`` on an (M, 2) int64 array of internal node ids."""
        return self._answer_ids(self._visible, pairs, start)

    def _answer_ids(
        self, snap: Snapshot | None, pairs: np.ndarray, start: float | None
    ) -> tuple[np.ndarray, QueryStats]:
        start = time.perf_counter() if start is None else start
        flagged = 0
        if snap is not None and snap.pending:
            flags = np.empty(pairs.shape[0], dtype=np.bool_)
            flagged = int(flag_pairs(pairs, self.views.comp, snap.delta.marks, snap.delta.n_base, flags))
        if not flagged:
            answers, searched, positives, decision = self._base_answers(pairs)
        else:
            # Pairs that updates may have changed are searched on the updated graph; the others keep the
            # labels' answers (their engines, GPU included).
            plain = np.flatnonzero(~flags)
            answers = np.empty(pairs.shape[0], dtype=np.bool_)
            searched, positives, decision = 0, 0, None
            if plain.size:
                answers[plain], searched, positives, decision = self._base_answers(pairs[plain])
            assert snap is not None  # flagged pairs come from pending updates
            self._walk_batch(snap, np.ascontiguousarray(pairs, dtype=np.int64), np.flatnonzero(flags), answers)
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
            version=self._version_of(snap),
            searched_updated=flagged,
        )
        return answers, stats

    def _base_answers(self, pairs: np.ndarray) -> tuple[np.ndarray, int, int, Any]:
        """The labels' answers (exact for the labels' graph): answers, pairs searched, positives, the
        scheduler's decision (None when the CPU answered the whole batch)."""
        scheduler = self.scheduler
        decision = None
        if scheduler.gpu is None:
            answers, searched, positives = scheduler.cpu.answer_ids(pairs)
        else:
            codes = filter_pairs(self.hot, pairs)
            answers = codes == YES
            undecided = np.flatnonzero(codes == UNDECIDED)
            searched = int(undecided.size)
            if searched:
                comp = self.arrays.comp
                found, decision = scheduler.search(comp[pairs[undecided, 0]], comp[pairs[undecided, 1]])
                answers[undecided] = found
            positives = int(np.count_nonzero(answers))
        return answers, searched, positives, decision

    def _version_of(self, snap: Snapshot | None) -> int:
        return self.base_version if snap is None else snap.version

    # Names over versions ------------------------------------------------------------------------

    def _node_id(self, snap: Snapshot | None, name: Any) -> int:
        """The id of one name in a version (nodes that updates added included)."""
        node = self.names.find_one(name)
        if node < 0 and snap is not None and snap.extra is not None:
            extra = snap.extra.find_one(name)
            node = -1 if extra < 0 else snap.delta.n_base + extra
        if node < 0:
            raise UnknownNodeError(name.item() if isinstance(name, np.generic) else name)
        return node

    def _lookup(self, snap: Snapshot | None, names: Any, as_list: bool) -> np.ndarray:
        """Ids of names (a flat list, an array or NameTokens) in a version; UnknownNodeError for the first
        name it does not have."""
        if snap is None or snap.extra is None:
            return self.names.lookup_list(names) if as_list else self.names.lookup(names)
        ids = (self.names.find_list(names) if as_list else self.names.find(names)).reshape(-1)
        missing = np.flatnonzero(ids < 0)
        if missing.size:
            extra = (snap.extra.find_list(names) if as_list else snap.extra.find(names)).reshape(-1)[missing]
            ids[missing] = np.where(extra >= 0, extra + snap.delta.n_base, -1)
            if extra.min() < 0:
                raise UnknownNodeError(_name_at(names, int(missing[np.argmax(extra < 0)])))
        return ids

    def _names_of(self, snap: Snapshot | None, ids: np.ndarray) -> list[int | str]:
        n_base = self.names.size
        if snap is None or snap.extra is None or ids.size == 0 or ids.max() < n_base:
            return self.names.names_of(ids)
        return [
            self.names.names_of([i])[0] if i < n_base else snap.extra.names_of([i - n_base])[0] for i in ids.tolist()
        ]

    def names_of_ids(self, ids: Any) -> np.ndarray:
        """The names of internal ids as a numpy array (int64 for integer names, ``StringDType`` for strings)."""
        return self._names_array(self._visible, np.asarray(ids, dtype=np.int64))

    def _names_array(self, snap: Snapshot | None, ids: np.ndarray) -> np.ndarray:
        n_base = self.names.size
        if snap is None or snap.extra is None or ids.size == 0 or ids.max() < n_base:
            return self.names.names_array(ids)
        added = ids >= n_base  # ids are sorted here: the added nodes come last
        return np.concatenate([self.names.names_array(ids[~added]), snap.extra.names_array(ids[added] - n_base)])

    # Beyond yes or no -------------------------------------------------------------------------------

    def _delta(self, snap: Snapshot | None) -> tuple[Delta, Added, Added]:
        """A version's updates as the searches read them (none for the labels' graph)."""
        if snap is not None:
            return snap.delta, snap.forward, snap.backward
        if self._empty is None:
            nothing = frozen(np.zeros(0, dtype=np.int64))
            bits = frozen(np.zeros(0, dtype=np.uint64))
            delta = Delta(self.names.size, nothing, bits, nothing, bits, nothing, frozen(self.views.marks))
            added = Added(nothing, nothing, nothing, nothing)
            self._empty = (delta, added, added)
        return self._empty

    def _walk_pool(self, size: int) -> SearchBuffers:
        pool = self._walk_buffers
        if pool._size < size:
            pool = self._walk_buffers = SearchBuffers(max(size, 2 * pool._size))
        return pool

    def _walk_reaches(self, snap: Snapshot, u: int, v: int) -> bool:
        """'u reaches v' on a version's graph, by a search over it (one pair, the calling thread)."""
        delta, forward, _ = self._delta(snap)
        with self._walk_pool(_walk_size(self.views, snap)).take() as (stamp, queue, mark):
            found, _ = walk(self.views.forward(), delta, forward, self.hot, u, v, True, stamp, mark, queue)
        return bool(found)

    def _walk_batch(self, snap: Snapshot, pairs: np.ndarray, which: np.ndarray, answers: np.ndarray) -> None:
        """Answers of ``pairs[which]`` on a version's graph into ``answers``, slices over the cores."""
        delta, forward, _ = self._delta(snap)
        pool = self._walk_pool(_walk_size(self.views, snap))
        side = self.views.forward()
        threads = 1 if which.size < SERIAL_BATCH else numba.get_num_threads()

        def run(part: np.ndarray) -> None:
            with pool.take(marks=max(1, part.size)) as (stamp, queue, mark):
                walk_pairs(side, delta, forward, self.hot, pairs, part, True, answers, stamp, mark, queue)

        if threads == 1:
            run(which)
            return
        with ThreadPoolExecutor(threads) as executor:
            list(executor.map(run, np.array_split(which, threads)))

    def path(self, source: Any, target: Any) -> list[int | str] | None:
        """A shortest path from ``source`` to ``target`` through the graph (names as uploaded, both ends
        included; ``[source]`` for a node to itself), or None when ``target`` is unreachable."""
        snap = self._visible
        ids = self._path_ids(snap, self._node_id(snap, source), self._node_id(snap, target))
        return None if ids is None else self._names_of(snap, ids)

    def path_ids(self, source: int, target: int) -> np.ndarray | None:
        """``path`` over internal node ids."""
        snap = self._visible
        size = self.num_nodes
        for node in (source, target):
            if not 0 <= int(node) < size:
                raise InvalidParameterError(f"node ids lie in 0..{size - 1}, got {node}")
        return self._path_ids(snap, int(source), int(target))

    def _path_ids(self, snap: Snapshot | None, u: int, v: int) -> np.ndarray | None:
        # The labels answer first: an unreachable target costs a pair query, not a search.
        if snap is not None and snap.pending:
            if pair_changed(self.views.comp, snap.delta.marks, snap.delta.n_base, u, v):
                reachable = self._walk_reaches(snap, u, v)
            else:
                reachable = answer_pair(self.hot, self._buffers, u, v)[0]
        else:
            reachable = answer_pair(self.hot, self._buffers, u, v)[0]
        if not reachable:
            return None
        delta, forward, backward = self._delta(snap)
        size = self.num_nodes if snap is None else snap.num_nodes
        pool = self._path_buffers
        if pool.size < size:
            pool = self._path_buffers = _PathBuffers(max(size, 2 * pool.size))
        with pool.take() as (stamp, parent, depth, qf, qb, mark):
            length = shortest_path(
                self.views.forward(),
                self.views.backward(),
                delta,
                forward,
                backward,
                self.hot,
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

    def descendants(self, node: Any) -> np.ndarray:
        """The nodes ``node`` reaches, itself excepted (as networkx's ``descendants``), by internal id (the
        order of first appearance in the upload): a numpy array of names (see ``names_of_ids``)."""
        snap = self._visible
        return self._names_array(snap, self._reach_ids(snap, self._node_id(snap, node), True))

    def ancestors(self, node: Any) -> np.ndarray:
        """The nodes that reach ``node``, itself excepted, as ``descendants`` lists them."""
        snap = self._visible
        return self._names_array(snap, self._reach_ids(snap, self._node_id(snap, node), False))

    def descendant_ids(self, node: Any) -> np.ndarray:
        """``descendants`` as sorted internal ids (int64)."""
        snap = self._visible
        return self._reach_ids(snap, self._node_id(snap, node), True)

    def ancestor_ids(self, node: Any) -> np.ndarray:
        """``ancestors`` as sorted internal ids (int64)."""
        snap = self._visible
        return self._reach_ids(snap, self._node_id(snap, node), False)

    def count_descendants(self, node: Any) -> ReachCount:
        """How many nodes ``node`` reaches (itself excepted): read off the labels where one dimension's DFS
        tree holds all of them, else counted by a search."""
        snap = self._visible
        u = self._node_id(snap, node)
        span = self._label_span(snap, u)
        if span is not None:
            k, lo, hi = span
            before = self.views.post_order()[1]
            return ReachCount(int(before[k, hi + 1] - before[k, lo]) - 1, "labels")
        return ReachCount(self._walk_count(snap, u, True), "traversal")

    def count_ancestors(self, node: Any) -> ReachCount:
        """How many nodes reach ``node`` (itself excepted), counted by a search (the labels describe what a
        node reaches, not what reaches it)."""
        snap = self._visible
        return ReachCount(self._walk_count(snap, self._node_id(snap, node), False), "traversal")

    def _label_span(self, snap: Snapshot | None, u: int) -> tuple[int, int, int] | None:
        """(dimension, lo, hi) when the descendants of node u are exactly the DAG nodes of post-orders lo..hi
        in that dimension, else None.

        A node's labels bound its descendants' post-orders by [lo, hi] (GRAIL's interval) and its DFS tree's
        by [tree_lo, hi], a range that holds nothing else; where lo == tree_lo the two coincide. Updates
        leave that true for a node that reaches neither a removed nor an added edge."""
        if u >= self.names.size:
            return None
        c = int(self.views.comp[u])
        if snap is not None and snap.pending and self.views.marks[c] & (UP_REMOVED | UP_ADDED):
            return None
        a = self.arrays
        lo, tree_lo, hi = np.asarray(a.lo[c]), np.asarray(a.tree_lo[c]), np.asarray(a.hi[c])
        exact = np.flatnonzero(lo == tree_lo)
        if exact.size == 0:
            return None
        k = int(exact[0])
        return k, int(lo[k]), int(hi[k])

    def _walk(self, snap: Snapshot | None, u: int, forward: bool, consume: Callable[..., Any]) -> Any:
        """Everything node u reaches (``forward``) or is reached from, as walk keys: ``consume(keys,
        count)`` reads them while the buffers are held."""
        delta, added_forward, added_backward = self._delta(snap)
        side = self.views.forward() if forward else self.views.backward()
        added = added_forward if forward else added_backward
        with self._walk_pool(_walk_size(self.views, snap)).take() as (stamp, queue, mark):
            _, count = walk(side, delta, added, self.hot, u, -1, False, stamp, mark, queue)
            return consume(queue, count)

    def _walk_count(self, snap: Snapshot | None, u: int, forward: bool) -> int:
        mem_indptr, _ = self.views.members()
        n_dag = self.views.num_dag_nodes
        return self._walk(snap, u, forward, lambda keys, count: int(count_keys(keys, count, n_dag, mem_indptr)) - 1)

    def _reach_ids(self, snap: Snapshot | None, u: int, forward: bool) -> np.ndarray:
        mem_indptr, mem = self.views.members()
        n_dag = self.views.num_dag_nodes
        span = self._label_span(snap, u) if forward else None
        if span is not None:
            k, lo, hi = span
            order, before = self.views.post_order()
            keys = order[k, lo : hi + 1]
            out = np.empty(int(before[k, hi + 1] - before[k, lo]), dtype=np.int64)
            written = keys_to_nodes(keys, keys.size, n_dag, mem_indptr, mem, u, out)
        else:

            def collect(keys: np.ndarray, count: int) -> tuple[np.ndarray, int]:
                out = np.empty(int(count_keys(keys, count, n_dag, mem_indptr)), dtype=np.int64)
                return out, int(keys_to_nodes(keys, count, n_dag, mem_indptr, mem, u, out))

            out, written = self._walk(snap, u, forward, collect)
        out = out[:written]
        out.sort()
        return out

    # Edge updates -------------------------------------------------------------------------------

    def plan_update(self, add: Any = None, remove: Any = None) -> UpdatePlan:
        """Check an update and resolve its names against the latest version (nothing changes): ``add`` and
        ``remove`` are lists of [source, target] names or (k, 2) arrays; ``add`` may name new nodes.
        InvalidParameterError for a malformed edge, a name the graph's nodes cannot have, or an edge both
        added and removed; UnknownNodeError for an unknown node in ``remove``."""
        with self._updates:
            return self._overlay_of().plan(add, remove)

    def stage_update(self, plan: UpdatePlan, publish: bool = True) -> UpdateResult:
        """Apply a planned update as the next version; queries answer for it once published (at once, or by
        ``publish(version)``). InvalidParameterError when another update came between plan and stage."""
        with self._updates:
            overlay = self._overlay_of()
            result = overlay.stage(plan)
            self._staged[result.version] = overlay.latest
            if publish:
                self._publish(result.version)
            return result

    def update(self, add: Any = None, remove: Any = None, publish: bool = True) -> UpdateResult:
        """Add and remove edges (see ``plan_update``); every query after this answers for the updated graph.
        Adding an edge the graph has, or removing one it has not, changes nothing (``UpdateResult`` counts
        what changed); self loops add their node and nothing else."""
        with self._updates:
            return self.stage_update(self.plan_update(add, remove), publish)

    def add_edges(self, edges: Any) -> UpdateResult:
        """``update(add=edges)``."""
        return self.update(add=edges)

    def remove_edges(self, edges: Any) -> UpdateResult:
        """``update(remove=edges)``."""
        return self.update(remove=edges)

    def publish(self, version: int) -> None:
        """Queries answer for staged ``version`` from now on (a published version is never taken back)."""
        with self._updates:
            self._publish(version)

    def _publish(self, version: int) -> None:
        if version <= self.version:
            return
        snap = self._staged.get(version)
        if snap is None:
            raise InvalidParameterError(f"version {version} was not staged")
        self._visible = snap
        for staged in [v for v in self._staged if v <= version]:
            del self._staged[staged]

    @property
    def staged_version(self) -> int:
        """The latest version staged (published or not)."""
        overlay = self._overlay
        return self.version if overlay is None else max(overlay.latest.version, self.version)

    def _overlay_of(self) -> Overlay:
        if self._overlay is None:
            self._overlay = Overlay(self.views, self.names, self.base_version)
        return self._overlay

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) int64 ids of every edge of the graph as it is now (self loops and repeats removed)."""
        snap = self._visible
        if snap is None:
            src = np.repeat(np.arange(self.names.size, dtype=np.int64), np.diff(self._graph_csr[0]))
            return src, np.asarray(self._graph_csr[1], dtype=np.int64)
        return self._overlay_of().edges(snap)

    def rebuilt(self, *, progress: ProgressCallback | None = None, **build: Any) -> ReachabilityIndex:
        """A new index of the graph as published now (new labels, nothing pending), of the same version.
        Build parameters default to this index's (``dims``, ``seed``, ``hubs``, its backend)."""
        snap = self._visible
        src, dst = self.edges()
        names = self.names
        if snap is not None and snap.new_nodes:
            names = names.extended(self._overlay_of().new_names(snap))
        stats = self.stats
        hubs = HUB_BITS if stats.hubs >= min(HUB_BITS, stats.dag_nodes) else stats.hubs
        params: dict[str, Any] = {"dims": stats.dims, "seed": stats.seed, "hubs": hubs, "backend": self.search_backend}
        params |= build
        graph = GraphInput(names.size, src, dst, names, "update")
        fresh = ReachabilityIndex.build(graph, progress=progress, **params)
        fresh.base_version = self._version_of(snap)
        return fresh

    def rebuild(self, **build: Any) -> None:
        """New labels for the graph as it is now, in place (nothing pending afterwards). Not while other
        threads query this object: for that, build with ``rebuilt`` and swap the object (as the service does)."""
        with self._updates:
            fresh = self.rebuilt(**build)
            if self._overlay is not None and self._overlay.latest.version > fresh.base_version:
                raise InvalidParameterError("staged updates are not published; publish them before a rebuild")
            self.scheduler.release()
            # Every attribute at once: the fresh index's own (its lock included).
            self.__dict__.update(fresh.__dict__)

    # Files --------------------------------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Write the index to ``directory`` atomically (a temporary folder renamed when complete), with its
        version and, when updates are pending, those updates (``load`` applies them again)."""
        arrays = {f"query_{name}": value for name, value in self.arrays._asdict().items()}
        arrays |= {
            "graph_out_indptr": self._graph_csr[0],
            "graph_out_indices": self._graph_csr[1],
        }
        arrays |= self.names.to_arrays()
        metadata = {"stats": self.stats.to_dict(), "num_nodes": self.names.size, "names": self.names.metadata()}
        snap = self._visible
        # Updates that changed nothing leave the labels exact for the version they made.
        metadata["version"] = self.version
        if snap is not None and snap.pending:
            metadata["version"] = self.base_version
            metadata["updates"] = self._pending_names(snap)
        write_index_dir(directory, arrays, metadata, overwrite=overwrite)
        self.checksum = index_checksum(directory)

    def _pending_names(self, snap: Snapshot) -> dict[str, Any]:
        """A version's updates by name: the nodes added (in id order), the edges added and removed."""
        indptr, indices = self._graph_csr
        removed = snap.delta.removed
        src = np.searchsorted(indptr, removed, side="right") - 1
        edges = np.stack([src, np.asarray(indices)[removed]], axis=1).astype(np.int64)
        added = np.stack([snap.forward.key, snap.forward.other], axis=1)
        return {
            "version": snap.version,
            "nodes": list(self._overlay_of().new_names(snap)),
            "add": np.reshape(self._names_of(snap, added.reshape(-1)), (-1, 2)).tolist() if added.size else [],
            "remove": np.reshape(self._names_of(snap, edges.reshape(-1)), (-1, 2)).tolist() if edges.size else [],
        }

    def _restore(self, updates: dict[str, Any]) -> None:
        """Apply updates saved by ``save`` as the version they were at."""
        with self._updates:
            overlay = self._overlay_of()
            add = [[name, name] for name in updates["nodes"]] + list(updates["add"])
            result = overlay.stage(overlay.plan(add, updates["remove"]), version=int(updates["version"]))
            self._staged[result.version] = overlay.latest
            self._publish(result.version)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], mmap: bool = True, verify: bool = True, backend: str = "auto"
    ) -> ReachabilityIndex:
        """Read an index written by ``save``; IndexFileError when it is missing, truncated or corrupted.

        ``backend`` says where undecided pairs may be searched ('auto': the GPU when there is one).
        """
        search_backend = backends.resolve_backend(backend)
        arrays, metadata = read_index_dir(directory, mmap=mmap, verify=verify)
        try:
            query = QueryArrays(**{name: arrays[f"query_{name}"] for name in QueryArrays._fields})
            graph_csr = (arrays["graph_out_indptr"], arrays["graph_out_indices"])
            size = int(metadata["num_nodes"])
            if "names" in metadata:
                names = NodeNames.from_arrays(size, metadata["names"], arrays)
            else:  # format version 1: sorted names; the table is built now
                names = NodeNames.from_sorted_array(size, np.asarray(arrays["names"]))
            stats = IndexStats.from_dict(metadata["stats"])
            version = int(metadata.get("version", 1))
        except (KeyError, TypeError, ValueError) as error:
            raise IndexFileError(f"{directory} is incomplete: {error}") from None
        index = cls(
            names,
            graph_csr,
            query,
            stats,
            search_backend=search_backend,
            version=version,
            checksum=index_checksum(directory),
        )
        if "updates" in metadata:
            try:
                index._restore(metadata["updates"])
            except (KeyError, TypeError, ValueError, UnknownNodeError) as error:
                raise IndexFileError(f"{directory} holds unreadable updates: {error}") from None
        return index
