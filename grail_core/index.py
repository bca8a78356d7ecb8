"""``ReachabilityIndex``: build a GRAIL index from a graph, answer reachability, update it, save and load it.

The index is a handle on the graph's current ``Version`` (``current()``), which answers every query: a
caller that must read one version from start to end takes it once. Updates make new versions; one staged
without being published waits until ``publish``.

With updates pending, a pair the updates' tests leave open is searched on the updated graph. On some graphs
(deep ones whose large strongly connected components removals split) most pairs are, at milliseconds each.
With ``auto_rebuild`` (the default), once the queries on one set of labels have spent searching as long as
those labels took to build (``rebuild_seconds``), the index rebuilds them in place, nothing pending after, and
answers on the new labels: a batch under way stops its searches for it (``Version.query_ids``' ``stop``) and
is answered again. Whatever the graph, pending updates then cost the queries at most about three times what
the cheaper of searching on and rebuilding at once would: searches up to a rebuild's price, the last part of
them (as long as the batch's searches before it, at most), then the rebuild. A batch whose searches are
forecast (from its first part on) to cost FORECAST_MARGIN rebuilds or more buys the rebuild then: about one
rebuild, not two. A forecast can be wrong (the first parts held the slow searches); such a rebuild costs at
most its price where searching on would have cost less.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .backends import resolve_backend
from .build import ProgressCallback
from .errors import InvalidParameterError, SearchStopped
from .graph import Digraph, edge_id_range
from .labels import MAX_DIMS, Labels
from .names import MAX_NAME_BYTES, NodeNames
from .query import HotArrays, QueryArrays
from .readers import GraphInput, GraphSource, read_graph
from .readers.columns import ColumnSpec
from .readers.objects import graph_from_networkx, graph_from_pandas, graph_from_scipy
from .scheduler import Scheduler
from .stats import IndexStats, QueryStats
from .supportive import HUB_BITS
from .version import (
    FORECAST_MARGIN,
    Listing,
    PairAnswer,
    PendingUpdates,
    ReachCount,
    StopCondition,
    UpdatePlan,
    UpdateResult,
    Version,
    load_version,
)

__all__ = [
    "ReachabilityIndex",
    "MAX_DIMS",
    "ProgressCallback",
    "PairAnswer",
    "ReachCount",
    "Listing",
    "PendingUpdates",
    "UpdatePlan",
    "UpdateResult",
    "MIN_REBUILD_S",
]

# The least a rebuild is taken to cost, in seconds (``rebuild_seconds``): a small graph builds in
# milliseconds, less than a first search's compilation, which the searches' seconds count.
MIN_REBUILD_S = 0.25
_Answer = TypeVar("_Answer")


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
    u to v (every node reaches itself). Each answers from the version current when it starts.
    """

    # Rebuild once the searches that pending updates leave have cost a rebuild (module docstring); per index
    # or for every index.
    auto_rebuild = True

    def __init__(self, version: Version) -> None:
        self._current = version  # what queries answer for
        self._latest = version  # the newest version staged, published or not
        self._staged: dict[int, Version] = {}
        self._updates = threading.RLock()  # plans, stages, publishes and rebuilds, in order
        self.auto_rebuilds = 0  # how many times ``auto_rebuild`` rebuilt it

    def current(self) -> Version:
        """The version queries answer for now: immutable, it answers for its ``number`` whatever comes after."""
        return self._current

    def release(self) -> None:
        """Frees the index's copies on GPUs now (they also go when the index is collected, or when another
        index needs the memory); a later batch copies it again."""
        self._current.search.release()

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
        resolved = resolve_backend(backend)
        labels = Labels.build(graph, backend=resolved, dims=dims, seed=seed, hubs=hubs, progress=progress)
        return cls(Version.of(labels, resolved))

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
        return cls.from_bytes(
            path,
            format,
            header=header,
            source_column=source_column,
            target_column=target_column,
            max_name_bytes=max_name_bytes,
            **build,
        )

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
        """Parse graph bytes (or a binary file object, or a path) and index them, as ``from_file``."""
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

    # What the current version is made of ---------------------------------------------------------

    @property
    def names(self) -> NodeNames:
        """The names of the labels' nodes (those that updates added are the current version's)."""
        return self._current.labels.names

    @property
    def names_are_integers(self) -> bool:
        return self._current.names_are_integers

    @property
    def graph(self) -> Digraph:
        """The labels' graph (self loops and duplicate edges removed) over internal node ids."""
        return self._current.labels.graph

    @property
    def arrays(self) -> QueryArrays:
        return self._current.labels.arrays

    @property
    def stats(self) -> IndexStats:
        return self._current.labels.stats

    @property
    def checksum(self) -> str | None:
        """The checksum of the labels' files, once saved or loaded."""
        return self._current.labels.checksum

    @property
    def search_backend(self) -> str:
        """Where undecided pairs may be searched: 'cuda' lets the scheduler send large batches to the GPU."""
        return self._current.search.backend

    @property
    def hot(self) -> HotArrays:
        """The CPU engine's records of the labels."""
        return self._current.search.hot

    @property
    def scheduler(self) -> Scheduler:
        """The engines and the scheduler that picks one per batch."""
        return self._current.search.scheduler

    @scheduler.setter
    def scheduler(self, scheduler: Scheduler) -> None:
        self._current.search.scheduler = scheduler

    @property
    def version(self) -> int:
        """The version of the graph that queries answer for: the labels' version plus the updates since."""
        return self._current.number

    @property
    def pending(self) -> PendingUpdates:
        """The updates the labels do not include yet (``rebuild`` folds them in)."""
        return self._current.pending

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph, those that updates added included."""
        return self._current.num_nodes

    # Queries: each answers from the current version -----------------------------------------------

    def reachable(self, source: Any, target: Any) -> bool:
        """True when a directed path leads from ``source`` to ``target`` (names as uploaded)."""
        return self._answered(lambda version, _: version.reachable(source, target))

    def query_pair(self, source: Any, target: Any) -> PairAnswer:
        """(reachable, whether the labels left the pair to a search, the version), for one pair of names."""
        return self._answered(lambda version, _: version.query_pair(source, target))

    def query_batch(self, pairs: Any) -> np.ndarray:
        """Answers (bool array) for an (M, 2) array-like of (source, target) names, or for ``NameTokens`` of
        2M names (source, target, source, target ...)."""
        return self._answered(lambda version, stop: version.query_batch(pairs, stop))

    def query_batch_with_stats(self, pairs: Any) -> tuple[np.ndarray, QueryStats]:
        """Answers and what they cost: the label filter first, then a search for the undecided pairs."""
        return self._answered(lambda version, stop: version.query_batch_with_stats(pairs, stop))

    def query_ids(self, pairs: np.ndarray, start: float | None = None) -> tuple[np.ndarray, QueryStats]:
        """``query_batch_with_stats`` on an (M, 2) int64 array of internal node ids."""
        return self._answered(lambda version, stop: version.query_ids(pairs, start, stop))

    def rebuild_seconds(self) -> float:
        """What ``auto_rebuild`` takes a rebuild of the current labels to cost: their build's seconds, at
        least MIN_REBUILD_S."""
        return max(self._current.stats.build_seconds, MIN_REBUILD_S)

    def _answered(self, ask: Callable[[Version, StopCondition | None], _Answer]) -> _Answer:
        """``ask`` on the current version, with ``auto_rebuild``: first rebuilt where the searches on its labels
        have cost ``rebuild_seconds``, else with a ``stop`` that ends its searches once they have, or once the
        batch's searches left are forecast to cost FORECAST_MARGIN rebuilds (a single pair's search is not
        stopped: the next query rebuilds), then answered again on the rebuilt labels."""
        version = self._current
        if not self.auto_rebuild or not version.updates_pending:
            return ask(version, None)
        cost = self.rebuild_seconds()

        def worth_a_rebuild(forecast: float) -> bool:
            return version.search_seconds >= cost or forecast >= FORECAST_MARGIN * cost

        if not worth_a_rebuild(0.0):
            try:
                return ask(version, worth_a_rebuild)
            except SearchStopped:
                pass
        return ask(self._rebuilt_from(version), None)

    def _rebuilt_from(self, version: Version) -> Version:
        """The current version after rebuilding ``version``'s labels, where it is still current and no update
        is staged past it (else the current one as it is: another query rebuilt it, or a rebuild would drop
        the staged updates)."""
        with self._updates:
            if self._current is version and self._latest.number == version.number:
                self.rebuild()
                self.auto_rebuilds += 1
            return self._current

    def path(self, source: Any, target: Any) -> list[int | str] | None:
        """A shortest path from ``source`` to ``target`` through the graph (names as uploaded, both ends
        included; ``[source]`` for a node to itself), or None when ``target`` is unreachable."""
        return self._current.path(source, target)

    def path_ids(self, source: int, target: int) -> np.ndarray | None:
        """``path`` between internal ids: the ids of a shortest path (int64), or None (``Version.path_ids``)."""
        return self._current.path_ids(source, target)

    def descendants(self, node: Any) -> np.ndarray:
        """The nodes ``node`` reaches, itself excepted, as a numpy array of names (``Version.descendants``)."""
        return self._current.descendants(node)

    def ancestors(self, node: Any) -> np.ndarray:
        """The nodes that reach ``node``, itself excepted, as ``descendants`` lists them."""
        return self._current.ancestors(node)

    def descendant_ids(self, node: Any) -> np.ndarray:
        """``descendants`` as sorted internal ids (int64)."""
        return self._current.descendant_ids(node)

    def ancestor_ids(self, node: Any) -> np.ndarray:
        """``ancestors`` as sorted internal ids (int64)."""
        return self._current.ancestor_ids(node)

    def listing(self, node: Any, forward: bool = True) -> Listing:
        """The descendants (``forward``) or ancestors of ``node``, counted and read page by page
        (``Version.listing``)."""
        return self._current.listing(node, forward)

    def count_descendants(self, node: Any) -> ReachCount:
        """How many nodes ``node`` reaches, itself excepted (``Version.count_descendants``)."""
        return self._current.count_descendants(node)

    def count_ancestors(self, node: Any) -> ReachCount:
        """How many nodes reach ``node``, itself excepted."""
        return self._current.count_ancestors(node)

    def names_of_ids(self, ids: Any) -> np.ndarray:
        """The names of internal ids as a numpy array (int64 for integer names, ``StringDType`` for strings)."""
        return self._current.names_of_ids(ids)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) int64 ids of every edge of the graph as it is now (self loops and repeats removed)."""
        return self._current.edges()

    # Edge updates -------------------------------------------------------------------------------

    def plan_update(self, add: Any = None, remove: Any = None) -> UpdatePlan:
        """Check an update and resolve its names against the latest version (nothing changes): see
        ``Version.plan_update``."""
        with self._updates:
            return self._latest.plan_update(add, remove)

    def stage_update(self, plan: UpdatePlan, publish: bool = True) -> UpdateResult:
        """Apply a planned update as the next version; queries answer for it once published (at once, or by
        ``publish(version)``). InvalidParameterError when another update came between plan and stage."""
        with self._updates:
            staged = self._latest.apply(plan)
            self._latest = self._staged[staged.number] = staged
            if publish:
                self._publish(staged.number)
            assert staged.last_update is not None
            return staged.last_update

    def update(self, add: Any = None, remove: Any = None, publish: bool = True) -> UpdateResult:
        """Add and remove edges (see ``plan_update``); every query after this answers for the updated graph.
        Adding an edge the graph has, or removing one it has not, changes nothing (``UpdateResult`` counts
        what changed); self loops add their node and nothing else."""
        with self._updates:
            return self.stage_update(self.plan_update(add, remove), publish)

    def update_many(self, updates: Any, publish: bool = True) -> UpdateResult:
        """Apply updates (``(add, remove)`` each) in order as one version (``Version.folded``: a journal folded
        at once into the labels' version, in linear time)."""
        with self._updates:
            staged = self._latest.folded(updates)
            if staged is self._latest:
                return UpdateResult(staged.number, 0, 0, 0)
            self._latest = self._staged[staged.number] = staged
            if publish:
                self._publish(staged.number)
            assert staged.last_update is not None
            return staged.last_update

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

    def _publish(self, number: int) -> None:
        if number <= self._current.number:
            return
        staged = self._staged.get(number)
        if staged is None:
            raise InvalidParameterError(f"version {number} was not staged")
        self._current = staged
        for older in [n for n in self._staged if n <= number]:
            del self._staged[older]

    @property
    def staged_version(self) -> int:
        """The latest version staged (published or not)."""
        return self._latest.number

    def rebuilt(self, *, progress: ProgressCallback | None = None, **build: Any) -> ReachabilityIndex:
        """A new index of the graph as published now (new labels, nothing pending), of the same version.
        Build parameters default to this index's (``dims``, ``seed``, ``hubs``, its backend)."""
        backend = resolve_backend(build.pop("backend", self.search_backend))
        labels = self._current.rebuilt_labels(backend=backend, progress=progress, **build)
        return ReachabilityIndex(Version.of(labels, backend))

    def rebuild(self, **build: Any) -> None:
        """New labels for the graph as it is now, in place (nothing pending afterwards); queries under way
        finish on the version they took."""
        with self._updates:
            if self._latest.number > self._current.number:
                raise InvalidParameterError("staged updates are not published; publish them before a rebuild")
            fresh = self.rebuilt(**build).current()
            self._current.search.release()
            self._current = self._latest = fresh
            self._staged.clear()

    # Files --------------------------------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Write the index to ``directory`` atomically (a temporary folder renamed when complete), with its
        version and, when updates are pending, those updates (``load`` applies them again)."""
        self._current.save(directory, overwrite=overwrite)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], mmap: bool = True, verify: bool = True, backend: str = "auto"
    ) -> ReachabilityIndex:
        """Read an index written by ``save``; IndexFileError when it is missing, truncated or corrupted.

        ``backend`` says where undecided pairs may be searched ('auto': the GPU when there is one).
        """
        return cls(load_version(directory, backend=resolve_backend(backend), mmap=mmap, verify=verify))
