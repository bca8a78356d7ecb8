"""``Labels``: what a build makes or a load reads, immutable: the names, the graph, the query arrays, the stats.

Labels describe one version of a graph (``version``) exactly; versions after it are that graph with edge
updates (``grail_core.version``). Nothing here searches: the search side (``grail_core.search``) and the
versions read the arrays. The forms of the graph that paths, listings and updates read (``GraphViews``) are
derived on first use and kept here, beside the arrays they come from. Files: ``grail_core.storage``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from .build import ProgressCallback, build_index_arrays
from .errors import InvalidParameterError
from .graph import Digraph
from .names import NodeNames
from .query import QueryArrays
from .readers.graph_input import GraphInput
from .stats import IndexStats
from .supportive import HUB_BITS
from .views import GraphViews

__all__ = ["Labels", "MAX_DIMS", "check_build_parameters"]

log = logging.getLogger(__name__)

MAX_DIMS = 8


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_build_parameters(dims: int, seed: int, hubs: int) -> None:
    """InvalidParameterError for build parameters out of their ranges."""
    if not _is_int(dims) or not 1 <= dims <= MAX_DIMS:
        raise InvalidParameterError(f"dims must be an integer from 1 to {MAX_DIMS}, got {dims!r}")
    if not _is_int(hubs) or not 0 <= hubs <= HUB_BITS:
        raise InvalidParameterError(f"hubs must be an integer from 0 to {HUB_BITS}, got {hubs!r}")
    if not _is_int(seed) or not 0 <= seed < 2**63:
        raise InvalidParameterError(f"seed must be a non-negative integer, got {seed!r}")


@dataclass(frozen=True, eq=False)
class Labels:
    """GRAIL interval labels over the SCC condensation, hub masks, and the graph they were built from."""

    names: NodeNames
    graph_csr: tuple[np.ndarray, np.ndarray]  # the graph's children (self loops and repeats removed)
    arrays: QueryArrays
    stats: IndexStats
    version: int = 1  # the version of the graph the labels describe
    # The checksum of the labels' files once saved or loaded: the same arrays always give the same one, so a
    # save only records what was not known yet (``saved_as``).
    checksum: str | None = field(default=None, compare=False)
    views: GraphViews = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "views", GraphViews(self.graph_csr, self.arrays))

    @classmethod
    def build(
        cls,
        graph: GraphInput,
        *,
        backend: str,
        dims: int = 2,
        seed: int = 0,
        hubs: int = HUB_BITS,
        progress: ProgressCallback | None = None,
        version: int = 1,
    ) -> Labels:
        """Labels of a parsed graph on a resolved backend ('cpu' or 'cuda'; ``grail_core.backends``)."""
        check_build_parameters(dims, seed, hubs)
        built = build_index_arrays(
            graph.num_nodes, graph.src, graph.dst, dims=dims, seed=seed, hubs=hubs, backend=backend, progress=progress
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
        return cls(graph.names, built.graph_csr, arrays, stats, version=version)

    def saved_as(self, checksum: str) -> None:
        """Records the checksum of files these labels were written to."""
        object.__setattr__(self, "checksum", checksum)

    @property
    def num_nodes(self) -> int:
        return self.names.size

    @property
    def graph(self) -> Digraph:
        """The graph (self loops and duplicate edges removed) over internal node ids."""
        return Digraph.from_csr(*self.graph_csr)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) int64 ids of every edge of the labels' graph."""
        indptr, indices = self.graph_csr
        return np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(indptr)), np.asarray(indices, np.int64)

    def rebuild_parameters(self) -> dict[str, int]:
        """The parameters these labels were built with, for new labels of a later version: dims, seed, hubs
        (all of them where the DAG had fewer nodes than hubs)."""
        stats = self.stats
        hubs = HUB_BITS if stats.hubs >= min(HUB_BITS, stats.dag_nodes) else stats.hubs
        return {"dims": stats.dims, "seed": stats.seed, "hubs": hubs}
