"""The build pipeline from edge arrays to the index arrays: its phases, their backends, their progress.

Phases: ``graph`` (CSR both ways), ``condense`` (components, the DAG on topological ids, levels),
``labels`` (child orders and GRAIL labels), ``hubs`` (hub choice and reach masks), and on the GPU
``download``. On the CPU every phase runs on all cores (numba); on 'cuda' a graph of 1M edges or more is
built on the device (``kernels.build.DeviceBuild``: one upload, one download), a step that does not suit
the graph is finished on the CPU with one log line, and a graph the device cannot take is built on the
CPU. ``IndexStats.phase_backends`` says which ran where ('cuda+cpu': the CPU finished that phase); the
index is the same either way. Progress is reported from the work done (edges and nodes handled) against
an estimate of the whole build's work that is refined as sizes become known.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from . import backends
from .condensation import Condensation, quotient_graph, renumber
from .errors import BackendUnavailableError
from .graph import Digraph, build_csr
from .labeling import dimension_seeds, label_all, make_child_orders, with_virtual_root
from .query import QueryArrays
from .scc import finish_components, strongly_connected_components
from .supportive import choose_hubs, hub_reach_masks

__all__ = ["DEVICE_BUILD_MIN_EDGES", "BuiltArrays", "ProgressCallback", "build_index_arrays"]

log = logging.getLogger(__name__)

ProgressCallback = Callable[[str, float], None]

# Work units (edges or nodes handled) each phase reports, per edge and node of its input: the passes of
# graph.build_csr (4 per edge) and of the transpose (4); the SCC (each node once), the quotient graph
# (4 per graph edge, 4 per DAG edge) and its renumbering (10 per DAG edge; at most the graph's edges
# until the DAG is known); the labels (orders, then one DFS per dimension); the two hub sweeps.
_GRAPH_UNITS_PER_EDGE = 8
_CONDENSE_UNITS_PER_EDGE = 18
_RENUMBER_UNITS_PER_EDGE = 10
_HUB_SWEEPS = 2
# On 'cuda', graphs with fewer edges are built on the CPU: below ~1M edges the CPU build takes tens of
# milliseconds, about what the GPU build's launches and transfers cost.
DEVICE_BUILD_MIN_EDGES = 1 << 20
# Levels a DAG may have for the GPU's level-synchronous steps (renumbering, labels, hub sweeps); deeper
# ones are finished on the CPU, which takes a long chain in milliseconds.
DEVICE_MAX_LEVELS = 4096
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
        self.initial = dict(plan)
        self.plan = dict(plan)  # expected units per phase; a finished phase's entry is what it did
        self.seconds: dict[str, float] = {}
        self.backends: dict[str, str] = {}
        self.current = ""
        self.units = 0
        self.finished = 0

    def restart(self) -> None:
        """Forgets the phases run so far (a GPU build that gave way to a CPU build)."""
        self.plan = dict(self.initial)
        self.seconds, self.backends, self.finished = {}, {}, 0

    def result(
        self, graph_csr: tuple[np.ndarray, np.ndarray], arrays: QueryArrays, levels: int, hubs: int
    ) -> BuiltArrays:
        return BuiltArrays(
            graph_csr=graph_csr,
            arrays=arrays,
            num_nodes=int(graph_csr[0].size - 1),
            num_edges=int(graph_csr[1].size),
            levels=levels,
            hubs=hubs,
            labels_backend=self.backends["labels"],
            phase_seconds=self.seconds,
            phase_backends=self.backends,
        )

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
        self.plan.setdefault(name, 0)
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
    force_device: bool = False,
) -> BuiltArrays:
    """Every array of an index of the graph ``src[i] -> dst[i]`` (ids validated by the caller).

    On 'cuda' a graph of at least ``DEVICE_BUILD_MIN_EDGES`` edges (or any, with ``force_device``) is
    built on the GPU; smaller ones, and any the GPU build cannot take, on the CPU (labels on the GPU where
    ``backends.compute_labels``'s cost model says so). The index is the same either way.
    """
    m, n = int(src.size), int(num_nodes)
    work = _Progress(
        progress,
        {
            "graph": _GRAPH_UNITS_PER_EDGE * m,
            "condense": n + _CONDENSE_UNITS_PER_EDGE * m,
            "labels": dims * (2 * m + n),
            "hubs": _HUB_SWEEPS * (m + n),
        },
    )
    if backend == "cuda" and (force_device or m >= DEVICE_BUILD_MIN_EDGES):
        try:
            return _build_on_device(backends.device_build(n, m), work, src, dst, dims=dims, seed=seed, hubs=hubs)
        except (BackendUnavailableError, MemoryError) as error:
            log.warning("GPU build unavailable for %d nodes, %d edges (%s): building on the CPU", n, m, error)
            work.restart()
    with _threads(1 if m + n < SERIAL_BUILD_ELEMENTS else numba.get_num_threads()):
        with work.phase("graph"):
            with work.part("csr"):
                graph_csr = build_csr(n, src, dst, work.report)
            with work.part("transpose"):
                digraph = Digraph.from_csr(*graph_csr, work.report)
        with work.phase("condense"):
            with work.part("scc"):
                comp, count = strongly_connected_components(digraph, report=work.report)
            with work.part("dag"):
                raw = quotient_graph(digraph, comp, count, work.report)
                del digraph
                work.expect("condense", work.units + _RENUMBER_UNITS_PER_EDGE * raw.num_edges)
                condensation = renumber(raw, comp, work.report)
                del raw
        return _labels_and_hubs_on_cpu(work, graph_csr, condensation, dims=dims, seed=seed, hubs=hubs, backend=backend)


def _labels_and_hubs_on_cpu(
    work: _Progress,
    graph_csr: tuple[np.ndarray, np.ndarray],
    condensation: Condensation,
    *,
    dims: int,
    seed: int,
    hubs: int,
    backend: str,
) -> BuiltArrays:
    """The labels (on the GPU where ``compute_labels`` decides so) and the hubs, from a condensation."""
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
    return work.result(graph_csr, arrays, condensation.num_levels, int(hub_nodes.size))


def _build_on_device(
    device: Any, work: _Progress, src: np.ndarray, dst: np.ndarray, *, dims: int, seed: int, hubs: int
) -> BuiltArrays:
    """The GPU build (``kernels.build.DeviceBuild``); a step that does not suit the graph is finished on
    the CPU from that point on, with one log line (see the module docstring)."""
    n, m = device.n, int(src.size)
    with work.phase("graph", "cuda"):
        device.graph(src, dst)
        work.report(_GRAPH_UNITS_PER_EDGE * m)
    with work.phase("condense", "cuda"):
        with work.part("scc"):
            live = device.components()
            if live:
                log.info(
                    "%d of %d nodes are left by the GPU's trim and forward-backward: the CPU finishes them", live, n
                )
                work.backends["condense"] = "cuda+cpu"
                label, *csr = device.host_components()
                device.set_components(finish_components(Digraph(*csr), label))
            work.report(n)
        with work.part("dag"):
            count, m_raw = device.quotient()
            work.report(4 * m + 4 * m_raw)
            work.expect("condense", work.units + _RENUMBER_UNITS_PER_EDGE * m_raw)
            deep = not device.renumber(DEVICE_MAX_LEVELS)
            if deep:
                log.info("the DAG has more than %d levels: the CPU renumbers, labels and sweeps it", DEVICE_MAX_LEVELS)
                work.backends["condense"] = "cuda+cpu"
                comp, indptr, indices = device.host_quotient()
                condensation = renumber(Digraph.from_csr(indptr, indices), comp)
            work.report(_RENUMBER_UNITS_PER_EDGE * m_raw)
    if deep:
        graph_csr = device.host_graph()
        return _labels_and_hubs_on_cpu(work, graph_csr, condensation, dims=dims, seed=seed, hubs=hubs, backend="cpu")
    work.expect("labels", dims * (2 * m_raw + count))
    work.expect("hubs", _HUB_SWEEPS * (m_raw + count))
    labels = None
    with work.phase("labels", "cuda"):
        phases = backends.label_on_device(device, dimension_seeds(dims, seed))
        if phases is not None:
            work.seconds.update({f"labels.{name}": value for name, value in phases.items()})
        else:
            work.backends["labels"] = "cpu"
            indptr, children = device.host_labeling_graph()
            labels = label_all(indptr, make_child_orders(indptr, children, dims, seed), count)
        work.report(dims * (2 * m_raw + count))
    with work.phase("hubs", "cuda"):
        hub_count = device.hubs(hubs)
        work.report(_HUB_SWEEPS * (m_raw + count))
    with work.phase("download", "cuda"):
        host = device.download(with_labels=labels is None)
    if labels is not None:
        host["lo"], host["hi"], host["tree_lo"] = (
            _by_node(values, count) for values in (labels[1], labels[0], labels[2])
        )
    work.seconds.update({f"device.{name}": value for name, value in device.seconds.items()})
    arrays = QueryArrays(**{name: host[name] for name in QueryArrays._fields})
    levels = int(host["level"].max()) + 1 if count else 0
    return work.result((host["graph_indptr"], host["graph_indices"]), arrays, levels, hub_count)
