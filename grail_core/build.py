"""The build pipeline from edge arrays to the index arrays: its phases, their backends, their progress.

Phases: ``graph`` (CSR both ways), ``condense`` (components, the DAG on topological ids, levels),
``labels`` (child orders and GRAIL labels) and ``hubs`` (hub choice and reach masks). Each runs on the
CPU (parallel, numba) or, for the labels, on the GPU when the backend is 'cuda' and the graph suits it;
``IndexStats.phase_backends`` says which ran where. Progress is reported from the work done (edges and
nodes handled) against an estimate of the whole build's work that is refined as sizes become known.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numba
import numpy as np
from numba import njit, prange

from . import backends
from .condensation import quotient_graph, renumber
from .graph import Digraph, build_csr
from .labeling import make_child_orders, with_virtual_root
from .query import QueryArrays
from .scc import strongly_connected_components
from .supportive import choose_hubs, hub_reach_masks

__all__ = ["BuiltArrays", "ProgressCallback", "build_index_arrays"]

ProgressCallback = Callable[[str, float], None]

# Work units (edges or nodes handled) each phase reports, per edge and node of its input: the passes of
# graph.build_csr (4 per edge) and of the transpose (4); the SCC (each node once), the quotient graph
# (4 per graph edge, 4 per DAG edge) and its renumbering (10 per DAG edge; at most the graph's edges
# until the DAG is known); the labels (orders, then one DFS per dimension); the two hub sweeps.
_GRAPH_UNITS_PER_EDGE = 8
_CONDENSE_UNITS_PER_EDGE = 18
_RENUMBER_UNITS_PER_EDGE = 10
_HUB_SWEEPS = 2
# Below this many edges and nodes a build runs on one thread: its ~100 parallel regions would cost more
# (10-50 us each to start, more on a busy machine) than the threads save.
SERIAL_BUILD_ELEMENTS = 1 << 17


@dataclass
class BuiltArrays:
    """What a build produces: the graph's CSR (children), the query arrays and the build's record."""

    graph_csr: tuple[np.ndarray, np.ndarray]
    arrays: QueryArrays
    num_nodes: int
    num_edges: int
    levels: int
    hubs: int
    labels_backend: str
    phase_seconds: dict[str, float] = field(default_factory=dict)
    phase_backends: dict[str, str] = field(default_factory=dict)


class _Progress:
    """Times the phases and turns the work each reports into a fraction of the whole build."""

    def __init__(self, callback: ProgressCallback | None, plan: dict[str, int]) -> None:
        self.callback = callback
        self.plan = dict(plan)  # expected units per phase; a finished phase's entry is what it did
        self.seconds: dict[str, float] = {}
        self.backends: dict[str, str] = {}
        self.current = ""
        self.units = 0
        self.finished = 0

    def expect(self, phase: str, units: int) -> None:
        """A later phase's work, now that its input is known (never more than planned)."""
        self.plan[phase] = min(self.plan[phase], int(units))

    def report(self, units: int) -> None:
        self.units += int(units)
        self._tell(self.finished + min(self.units, self.plan[self.current]))

    def _tell(self, done: int) -> None:
        if self.callback:
            self.callback(self.current, min(1.0, done / max(1, sum(self.plan.values()))))

    @contextmanager
    def phase(self, name: str, backend: str = "cpu") -> Iterator[None]:
        self.current, self.units = name, 0
        self.backends[name] = backend
        self._tell(self.finished)
        start = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - start
        self.plan[name] = self.units
        self.finished += self.units
        self._tell(self.finished)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """A named part of the current phase, timed as ``phase.part``."""
        start = time.perf_counter()
        yield
        self.seconds[f"{self.current}.{name}"] = time.perf_counter() - start


@njit(nogil=True, parallel=True, cache=True)
def _node_major(labels, n, out):
    """out[v, k] = labels[k, v] for the first n columns (labels are (dims, N+1), the index keeps (N, dims))."""
    for v in prange(n):
        for k in range(labels.shape[0]):
            out[v, k] = labels[k, v]


def _by_node(labels: np.ndarray, n: int) -> np.ndarray:
    out = np.empty((n, labels.shape[0]), dtype=labels.dtype)
    _node_major(labels, n, out)
    return out


@contextmanager
def _threads(count: int) -> Iterator[None]:
    """numba's thread count for the calling thread only (it is thread-local), restored afterwards."""
    previous = numba.get_num_threads()
    numba.set_num_threads(min(count, previous))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def build_index_arrays(
    num_nodes: int,
    src: np.ndarray,
    dst: np.ndarray,
    *,
    dims: int,
    seed: int,
    hubs: int,
    backend: str,
    progress: ProgressCallback | None = None,
) -> BuiltArrays:
    """Every array of an index of the graph ``src[i] -> dst[i]`` (ids validated by the caller)."""
    small = int(src.size) + int(num_nodes) < SERIAL_BUILD_ELEMENTS
    with _threads(1 if small else numba.get_num_threads()):
        return _build(num_nodes, src, dst, dims=dims, seed=seed, hubs=hubs, backend=backend, progress=progress)


def _build(
    num_nodes: int,
    src: np.ndarray,
    dst: np.ndarray,
    *,
    dims: int,
    seed: int,
    hubs: int,
    backend: str,
    progress: ProgressCallback | None = None,
) -> BuiltArrays:
    m = int(src.size)
    n = int(num_nodes)
    work = _Progress(
        progress,
        {
            "graph": _GRAPH_UNITS_PER_EDGE * m,
            "condense": n + _CONDENSE_UNITS_PER_EDGE * m,
            "labels": dims * (2 * m + n),
            "hubs": _HUB_SWEEPS * (m + n),
        },
    )
    with work.phase("graph"):
        with work.part("csr"):
            graph_csr = build_csr(n, src, dst, work.report)
        with work.part("transpose"):
            digraph = Digraph.from_csr(*graph_csr, work.report)
    with work.phase("condense"):
        with work.part("scc"):
            comp, count = strongly_connected_components(digraph, report=work.report)
        del digraph
        with work.part("dag"):
            raw = quotient_graph(*graph_csr, comp, count, work.report)
            work.expect("condense", work.units + _RENUMBER_UNITS_PER_EDGE * raw.num_edges)
            condensation = renumber(raw, comp, work.report)
            del raw
    dag = condensation.dag
    n_dag, m_dag = dag.num_nodes, dag.num_edges
    work.expect("labels", dims * (2 * m_dag + n_dag))
    work.expect("hubs", _HUB_SWEEPS * (m_dag + n_dag))
    with work.phase("labels", backend):
        with work.part("orders"):
            indptr, indices, root = with_virtual_root(dag.out_indptr, dag.out_indices)
            orders = make_child_orders(indptr, indices, dims, seed)
            del indices
        work.report(dims * m_dag)
        labels = backends.compute_labels(backend, indptr, orders, root, num_levels=condensation.num_levels + 1)
        del orders
        work.backends["labels"] = labels.backend
        work.seconds.update({f"labels.{name}": value for name, value in labels.phase_seconds.items()})
        work.report(dims * (n_dag + m_dag))
        lo, hi, tree_lo = (_by_node(values, n_dag) for values in (labels.minpost, labels.post, labels.tree_low))
        del labels
    with work.phase("hubs"):
        hub_nodes = choose_hubs(dag, hubs)
        fwd, bwd = hub_reach_masks(dag, hub_nodes, condensation.level)
        work.report(_HUB_SWEEPS * (n_dag + m_dag))
    arrays = QueryArrays(
        comp=condensation.comp,
        out_indptr=dag.out_indptr,
        out_indices=dag.out_indices,
        level=condensation.level,
        lo=lo,
        hi=hi,
        tree_lo=tree_lo,
        fwd=fwd,
        bwd=bwd,
    )
    return BuiltArrays(
        graph_csr=graph_csr,
        arrays=arrays,
        num_nodes=n,
        num_edges=int(graph_csr[1].size),
        levels=condensation.num_levels,
        hubs=int(hub_nodes.size),
        labels_backend=work.backends["labels"],
        phase_seconds=work.seconds,
        phase_backends=work.backends,
    )
