"""``ReachabilityIndex``: build a GRAIL index from a graph, answer reachability, save and load it."""

from __future__ import annotations

import itertools
import logging
import os
import time
from typing import Any

import numpy as np

from . import backends
from .build import ProgressCallback, build_index_arrays
from .errors import IndexFileError, InvalidParameterError
from .graph import Digraph, edge_id_range
from .names import MAX_NAME_BYTES, NameTokens, NodeNames
from .query import UNDECIDED, YES, QueryArrays, SearchBuffers, answer_pair, filter_pairs, pack
from .readers import GraphInput, GraphSource, read_graph
from .readers.columns import ColumnSpec
from .readers.objects import graph_from_networkx, graph_from_pandas, graph_from_scipy
from .stats import IndexStats, QueryStats
from .storage import read_index_dir, write_index_dir
from .supportive import HUB_BITS

__all__ = ["ReachabilityIndex", "MAX_DIMS", "ProgressCallback"]

log = logging.getLogger(__name__)

MAX_DIMS = 8


def _all_pairs(pairs: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every item is a list or a tuple of two (the common form of a batch of names, read without
    building an object array)."""
    return bool(pairs) and set(map(type, pairs)) <= {list, tuple} and set(map(len, pairs)) == {2}


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

    def reachable(self, source: Any, target: Any) -> bool:
        """True when a directed path leads from ``source`` to ``target`` (names as uploaded)."""
        return self.query_pair(source, target)[0]

    def query_pair(self, source: Any, target: Any) -> tuple[bool, bool]:
        """(reachable, whether the labels left the pair to a search), for one pair of names."""
        u, v = self.names.lookup_one(source), self.names.lookup_one(target)
        return answer_pair(self.hot, self._buffers, u, v)

    def query_batch(self, pairs: Any) -> np.ndarray:
        """Answers (bool array) for an (M, 2) array-like of (source, target) names, or for ``NameTokens`` of
        2M names (source, target, source, target ...)."""
        return self.query_batch_with_stats(pairs)[0]

    def query_batch_with_stats(self, pairs: Any) -> tuple[np.ndarray, QueryStats]:
        """Answers and what they cost: the label filter first, then a search for the undecided pairs."""
        start = time.perf_counter()
        if isinstance(pairs, NameTokens):
            if len(pairs) % 2:
                raise InvalidParameterError(f"pairs need an even number of names, got {len(pairs)}")
            shape: tuple[int, ...] = (len(pairs) // 2, 2)
            lookup = self.names.lookup
        elif isinstance(pairs, list | tuple) and _all_pairs(pairs):
            pairs = list(itertools.chain.from_iterable(pairs))
            shape, lookup = (len(pairs) // 2, 2), self.names.lookup_list
        else:
            # Other sequences as objects, not np.asarray's common type: that would read [True, 1] as [1, 1].
            pairs = pairs if isinstance(pairs, np.ndarray) else np.array(pairs, dtype=object)
            shape, lookup = pairs.shape, self.names.lookup
        if np.prod(shape) == 0:
            return np.zeros(0, dtype=np.bool_), QueryStats(0, 0, 0, 0, time.perf_counter() - start, "none")
        if len(shape) != 2 or shape[1] != 2:
            raise InvalidParameterError(f"pairs must have shape (M, 2), got {shape}")
        return self.query_ids(lookup(pairs).reshape(shape), start)

    def query_ids(self, pairs: np.ndarray, start: float | None = None) -> tuple[np.ndarray, QueryStats]:
        """``query_batch_with_stats`` on an (M, 2) int64 array of internal node ids."""
        start = time.perf_counter() if start is None else start
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
        engine = decision.engine if decision is not None else ("cpu" if searched else "none")
        stats = QueryStats(
            pairs=int(pairs.shape[0]),
            decided_by_filter=int(pairs.shape[0]) - searched,
            searched=searched,
            positives=positives,
            seconds=time.perf_counter() - start,
            search_backend="none" if engine == "none" else engine.split(":")[0],
            search_engine=engine,
            search_mode=decision.mode if decision is not None else ("dfs" if searched else "none"),
            search_seconds=decision.seconds if decision is not None else 0.0,
            predicted_seconds=dict(decision.predicted) if decision is not None else {},
            probe_pairs=decision.probe_pairs if decision is not None else 0,
        )
        return answers, stats

    # Files --------------------------------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Write the index to ``directory`` atomically (a temporary folder renamed when complete)."""
        arrays = {f"query_{name}": value for name, value in self.arrays._asdict().items()}
        arrays |= {
            "graph_out_indptr": self._graph_csr[0],
            "graph_out_indices": self._graph_csr[1],
        }
        arrays |= self.names.to_arrays()
        metadata = {"stats": self.stats.to_dict(), "num_nodes": self.names.size, "names": self.names.metadata()}
        write_index_dir(directory, arrays, metadata, overwrite=overwrite)

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
        except (KeyError, TypeError) as error:
            raise IndexFileError(f"{directory} is incomplete: {error}") from None
        return cls(names, graph_csr, query, stats, search_backend=search_backend)
