"""The build pipeline from edge arrays to the index arrays: its phases, their backends, their progress.

Phases: ``graph`` (CSR both ways), ``condense`` (components, the DAG on topological ids, levels),
``labels`` (child orders and GRAIL labels), ``hubs`` (hub choice and reach masks), and on the GPU
``download``. On the CPU every phase runs on all cores (numba); on 'cuda' a graph of 1M edges or more is
built on the device (``kernels.build.DeviceBuild``: one upload, one download), and where each later phase
runs is chosen by a per-phase cost model (``BuildCosts``, fitted on an H200 host with 16 threads and
scaled by the threads in use): the labels and the hubs go to whichever backend it predicts faster once
the DAG's levels are known, and the components and the renumbering, whose levels are known only as they
are walked, run on the device within what the CPU would take (``kernels.frontier.LevelBudget``), the CPU
finishing them from there when that runs out. ``IndexStats.build_plan`` holds, per phase, both
predictions and where it ran; ``phase_backends`` says where each ran ('cuda+cpu': the CPU finished it);
the index is the same either way. A graph the device cannot take is built on the CPU. Progress is
reported from the work done (edges and nodes handled) against an estimate of the whole build's work that
is refined as sizes become known.
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
from .parallel import numba_threads
from .query import QueryArrays
from .scc import finish_components, strongly_connected_components
from .supportive import choose_hubs, hub_reach_masks

__all__ = [
    "COSTS",
    "DEVICE_BUILD_MIN_EDGES",
    "BuildCosts",
    "BuildModel",
    "BuiltArrays",
    "DagShape",
    "ProgressCallback",
    "build_index_arrays",
]

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
# On 'cuda', graphs with fewer edges are built on the CPU: below this the CPU build takes about what the GPU
# build's launches and transfers cost.
DEVICE_BUILD_MIN_EDGES = 1 << 20
# The threads BuildCosts' CPU constants were measured with.
_MEASURED_THREADS = 16


@dataclass(frozen=True)
class BuildCosts:
    """Seconds per unit of each phase's work on each backend: the build's cost model.

    CPU constants are for 16 threads (scaled by the threads in use; the labels' DFS runs one thread per
    dimension), per input edge and node for the graph and the components, per DAG node and edge after
    that. GPU constants add what a level costs: a level of more than ``EngineConfig.narrow`` nodes takes a
    grid barrier and its work (``*_wide``), a narrow one a block barrier (``*_narrow``); discoveries (the
    components, Kahn's levels) find their levels as they go, sweeps (labels, hubs) walk known ones. Fitted
    on an H200 with 16 host threads (benchmarks/results/build-*.md).
    """

    cpu_graph: tuple[float, float] = (8.5e-9, 1e-9)  # per edge, per node
    cpu_components: tuple[float, float] = (2e-9, 15e-9)
    cpu_components_level: float = 25e-6  # a level of its trim that averages 32 nodes or more (a round of threads)
    cpu_renumber: tuple[float, float, float] = (2e-9, 40e-9, 100e-9)  # per edge, per DAG node, per DAG edge
    cpu_orders: tuple[float, float] = (6e-9, 35e-9)  # per DAG edge and per root (the virtual root's long row)
    cpu_dfs: float = 37e-9  # per labeling node or edge, per dimension on its thread
    cpu_hubs: float = 35e-9  # per DAG node or edge
    gpu_graph: tuple[float, float] = (1.2e-9, 0.5e-9)  # upload, sort and both CSRs, per edge and node
    gpu_components: tuple[float, float] = (0.35e-9, 3e-9)
    gpu_renumber: tuple[float, float] = (0.25e-9, 4e-9)  # per edge, per DAG node
    gpu_labels: tuple[float, float] = (2e-9, 6e-9)  # per labeling node or edge and dimension: path counts, comparison
    gpu_hubs: float = 0.3e-9
    gpu_fixed: float = 2e-3  # a phase's launches, scans and sorts
    discover_level: tuple[float, float] = (30e-6, 10e-6)  # wide, narrow
    sweep_level: tuple[float, float] = (12e-6, 6e-6)  # wide, narrow (narrow: set by the hub sweeps' atomics)
    compare_level: tuple[float, float] = (190e-6, 82e-6)  # the labels' tree-parent sweep (jump-table walks)
    link_bytes_per_second: float = 12e9  # device to host, through the page-locked staging buffer


COSTS = BuildCosts()


@dataclass(frozen=True)
class DagShape:
    """What the cost model knows of the DAG: its nodes and edges and, once walked, its wide and narrow levels."""

    nodes: int
    edges: int
    roots: int = 0  # nodes without a parent: the virtual root's children
    wide: int = 8  # a guess until the levels are known: a shallow DAG
    narrow: int = 0

    @classmethod
    def of(cls, nodes: int, edges: int, roots: int, widths: np.ndarray, narrow: int) -> DagShape:
        """``widths``: nodes of each degree class per level (``DeviceBuild.level_widths``)."""
        is_narrow = (widths[2] + widths[3] == 0) & (widths[0] + widths[1] <= narrow)
        return cls(nodes, edges, roots, int((~is_narrow).sum()), int(is_narrow.sum()))

    def levels(self, cost: tuple[float, float]) -> float:
        return self.wide * cost[0] + self.narrow * cost[1]


class BuildModel:
    """Predicted seconds of each phase on 'cpu' and 'cuda' (``BuildCosts``) for a graph of ``n`` nodes and
    ``m`` edges and ``dims`` dimensions, on this process's threads."""

    def __init__(self, n: int, m: int, dims: int, costs: BuildCosts = COSTS) -> None:
        self.n, self.m, self.dims, self.costs = n, m, dims, costs
        threads = max(1, numba.get_num_threads())
        self.scale = _MEASURED_THREADS / threads
        self.dfs_rounds = -(-dims // threads)

    def graph(self) -> dict[str, float]:
        c = self.costs
        return {
            "cpu": (c.cpu_graph[0] * self.m + c.cpu_graph[1] * self.n) * self.scale,
            "cuda": c.gpu_fixed + c.gpu_graph[0] * self.m + c.gpu_graph[1] * self.n,
        }

    def components(self) -> dict[str, float]:
        """Without the levels their walk will take (known only as it goes: see ``components_per_level``)."""
        c = self.costs
        return {
            "cpu": (c.cpu_components[0] * self.m + c.cpu_components[1] * self.n) * self.scale,
            "cuda": c.gpu_fixed + c.gpu_components[0] * self.m + c.gpu_components[1] * self.n,
        }

    def components_per_level(self) -> float:
        """What each level of a walk averaging 32 nodes or more adds to the CPU's components."""
        return self.costs.cpu_components_level * self.scale

    def renumber(self, dag: DagShape) -> dict[str, float]:
        c = self.costs
        cpu = c.cpu_renumber[0] * self.m + c.cpu_renumber[1] * dag.nodes + c.cpu_renumber[2] * dag.edges
        gpu = c.gpu_fixed + c.gpu_renumber[0] * self.m + c.gpu_renumber[1] * dag.nodes
        return {"cpu": cpu * self.scale, "cuda": gpu + 2 * dag.levels(c.discover_level)}

    def labels(self, dag: DagShape, path_counts: bool) -> dict[str, float]:
        """CPU: child orders and one DFS a dimension; the GPU: path counts or tree-path comparison and four
        sweeps (from a GPU build the CPU first downloads the labeling graph)."""
        c = self.costs
        elements = dag.nodes + dag.edges + dag.roots  # the labeling graph's: the virtual root's edges included
        orders = self.dims * (c.cpu_orders[0] * dag.edges + c.cpu_orders[1] * dag.roots) * self.scale
        cpu = orders + c.cpu_dfs * elements * self.dfs_rounds
        per_element = c.gpu_labels[0] if path_counts else c.gpu_labels[1]
        parents = dag.levels(c.sweep_level) if path_counts else dag.levels(c.compare_level)
        gpu = c.gpu_fixed + per_element * self.dims * elements + parents + 4 * dag.levels(c.sweep_level)
        return {"cpu": cpu + 12 * elements / c.link_bytes_per_second, "cuda": gpu}

    def hubs(self, dag: DagShape) -> dict[str, float]:
        c = self.costs
        elements = dag.nodes + dag.edges
        return {
            "cpu": c.cpu_hubs * elements * self.scale,
            "cuda": c.gpu_fixed + c.gpu_hubs * elements + 2 * dag.levels(c.sweep_level),
        }

    def download(self, dag: DagShape) -> dict[str, float]:
        """The index arrays from the device: the graph's CSR and components, the DAG, its levels, labels, masks."""
        nbytes = 12 * self.n + 4 * self.m + 12 * dag.nodes + 4 * dag.edges + (16 + 12 * self.dims) * dag.nodes
        return {"cuda": nbytes / self.costs.link_bytes_per_second}

    def build(self) -> dict[str, float]:
        """A whole build of a shallow graph whose DAG is as large as the graph (an upper bound on both)."""
        dag = DagShape(self.n, self.m)
        phases = [self.graph(), self.components(), self.renumber(dag), self.labels(dag, True), self.hubs(dag)]
        return {backend: sum(phase[backend] for phase in phases) for backend in ("cpu", "cuda")}


# Below this many edges and nodes a build runs on one thread: its parallel regions (about a hundred) would
# cost more to start than the threads save.
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
    plan: dict[str, dict[str, Any]] = field(default_factory=dict)  # per phase: predicted s per backend, 'ran'


class _Progress:
    """Times the phases and turns the work each reports into a fraction of the whole build."""

    def __init__(self, callback: ProgressCallback | None, plan: dict[str, int]) -> None:
        self.callback = callback
        self.initial = dict(plan)
        self.plan = dict(plan)  # expected units per phase; a finished phase's entry is what it did
        self.seconds: dict[str, float] = {}
        self.backends: dict[str, str] = {}
        self.predicted: dict[str, dict[str, float]] = {}  # per phase: the cost model's seconds per backend
        self.current = ""
        self.units = 0
        self.finished = 0

    def restart(self) -> None:
        """Forgets the phases run so far (a GPU build that gave way to a CPU build)."""
        self.plan = dict(self.initial)
        self.seconds, self.backends, self.finished = {}, {}, 0
        self.predicted = {}

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
            plan={
                phase: {**{k: round(v, 6) for k, v in predicted.items()}, "ran": self.backends.get(phase, "-")}
                for phase, predicted in self.predicted.items()
            },
        )

    def predict(self, phase: str, seconds: dict[str, float]) -> dict[str, float]:
        """Keeps the cost model's seconds per backend for ``phase`` (shown in ``IndexStats.build_plan``)."""
        self.predicted[phase] = seconds
        return seconds

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
    model = BuildModel(n, m, dims)
    if backend == "cuda" and (force_device or m >= DEVICE_BUILD_MIN_EDGES):
        try:
            return _build_on_device(backends.device_build(n, m), work, model, src, dst, dims=dims, seed=seed, hubs=hubs)
        except (BackendUnavailableError, MemoryError) as error:
            log.warning("GPU build unavailable for %d nodes, %d edges (%s): building on the CPU", n, m, error)
            work.restart()
    backends_shown = ("cpu", "cuda") if backend == "cuda" else ("cpu",)

    def predict(phase: str, seconds: dict[str, float]) -> None:
        work.predict(phase, {key: value for key, value in seconds.items() if key in backends_shown})

    with numba_threads(1 if m + n < SERIAL_BUILD_ELEMENTS else numba.get_num_threads()):
        predict("graph", model.graph())
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
                dag = DagShape(count, raw.num_edges)
                components = model.components()
                renumbered = model.renumber(dag)
                predict("condense", {key: components[key] + renumbered[key] for key in components})
                condensation = renumber(raw, comp, work.report)
                del raw
        return _labels_and_hubs_on_cpu(
            work, model, backends_shown, graph_csr, condensation, dims=dims, seed=seed, hubs=hubs, backend=backend
        )


def _labels_and_hubs_on_cpu(
    work: _Progress,
    model: BuildModel,
    shown: tuple[str, ...],
    graph_csr: tuple[np.ndarray, np.ndarray],
    condensation: Condensation,
    *,
    dims: int,
    seed: int,
    hubs: int,
    backend: str,
) -> BuiltArrays:
    """The labels (on the GPU where ``compute_labels`` decides so) and the hubs, from a condensation; the cost
    model's predictions for the backends ``shown`` go to the build's record."""
    dag = condensation.dag
    n_dag, m_dag = dag.num_nodes, dag.num_edges
    work.expect("labels", dims * (2 * m_dag + n_dag))
    work.expect("hubs", _HUB_SWEEPS * (m_dag + n_dag))
    with work.phase("labels", backend):
        with work.part("orders"):
            indptr, indices, root = with_virtual_root(dag.out_indptr, dag.out_indices)
            shape = DagShape(n_dag, m_dag, indices.size - m_dag, wide=condensation.num_levels)
            for phase, seconds in (("labels", model.labels(shape, True)), ("hubs", model.hubs(shape))):
                work.predict(phase, {key: value for key, value in seconds.items() if key in shown})
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
    device: Any,
    work: _Progress,
    model: BuildModel,
    src: np.ndarray,
    dst: np.ndarray,
    *,
    dims: int,
    seed: int,
    hubs: int,
) -> BuiltArrays:
    """The GPU build (``kernels.build.DeviceBuild``): the components and the renumbering within what the
    CPU would take (the CPU finishes from where they stopped), the labels and the hubs where the cost
    model predicts them faster (see the module docstring)."""
    n, m = device.n, int(src.size)
    work.predict("graph", model.graph())
    with work.phase("graph", "cuda"):
        device.graph(src, dst)
        work.report(_GRAPH_UNITS_PER_EDGE * m)
    components = model.components()
    with work.phase("condense", "cuda"):
        with work.part("scc"):
            live = device.components(budget=components["cpu"], per_level=model.components_per_level())
            if live:
                log.info(
                    "%d of %d nodes are left by the GPU's components within their budget: the CPU finishes them",
                    live,
                    n,
                )
                work.backends["condense"] = "cuda+cpu"
                label, *csr = device.host_components()
                device.set_components(finish_components(Digraph(*csr), label))
            work.report(n)
        with work.part("dag"):
            count, m_raw = device.quotient()
            work.report(4 * m + 4 * m_raw)
            work.expect("condense", work.units + _RENUMBER_UNITS_PER_EDGE * m_raw)
            renumbered = model.renumber(DagShape(count, m_raw))
            work.predict("condense", {key: components[key] + renumbered[key] for key in components})
            deep = not device.renumber(budget=renumbered["cpu"])
            if deep:
                log.info("the DAG's levels outlast the GPU's budget: the CPU renumbers, labels and sweeps it")
                work.backends["condense"] = "cuda+cpu"
                comp, indptr, indices = device.host_quotient()
                condensation = renumber(Digraph.from_csr(indptr, indices), comp)
            work.report(_RENUMBER_UNITS_PER_EDGE * m_raw)
    if deep:
        graph_csr = device.host_graph()
        return _labels_and_hubs_on_cpu(
            work, model, ("cpu", "cuda"), graph_csr, condensation, dims=dims, seed=seed, hubs=hubs, backend="cpu"
        )
    work.expect("labels", dims * (2 * m_raw + count))
    work.expect("hubs", _HUB_SWEEPS * (m_raw + count))
    shape = DagShape.of(count, m_raw, device.roots, device.level_widths(), device.config.narrow)
    options = backends.device_labeling_options(device)
    predicted = work.predict("labels", model.labels(shape, shape.wide + shape.narrow <= options.path_count_levels))
    labels = None
    with work.phase("labels", "cuda"):
        if predicted["cuda"] <= predicted["cpu"]:
            phases = device.labels(dimension_seeds(dims, seed), options)
            work.seconds.update({f"labels.{name}": value for name, value in phases.items()})
        else:
            log.info("labeling %d DAG nodes on the CPU: the cost model predicts it faster", count)
            work.backends["labels"] = "cpu"
            indptr, children = device.host_labeling_graph()
            labels = label_all(indptr, make_child_orders(indptr, children, dims, seed), count)
        work.report(dims * (2 * m_raw + count))
    sweeps = work.predict("hubs", model.hubs(shape))
    hubs_on_device = sweeps["cuda"] <= sweeps["cpu"]
    if hubs_on_device:
        with work.phase("hubs", "cuda"):
            hub_count = device.hubs(hubs)
            work.report(_HUB_SWEEPS * (m_raw + count))
    work.predict("download", model.download(shape))
    with work.phase("download", "cuda"):
        host = device.download(with_labels=labels is None, with_hubs=hubs_on_device)
    if not hubs_on_device:
        with work.phase("hubs", "cpu"):
            dag = Digraph.from_csr(host["out_indptr"], host["out_indices"])
            hub_nodes = choose_hubs(dag, hubs)
            host["fwd"], host["bwd"] = hub_reach_masks(dag, hub_nodes, host["level"])
            hub_count = int(hub_nodes.size)
            work.report(_HUB_SWEEPS * (m_raw + count))
    if labels is not None:
        host["lo"], host["hi"], host["tree_lo"] = (
            _by_node(values, count) for values in (labels[1], labels[0], labels[2])
        )
    work.seconds.update({f"device.{name}": value for name, value in device.seconds.items()})
    arrays = QueryArrays(**{name: host[name] for name in QueryArrays._fields})
    levels = int(host["level"].max()) + 1 if count else 0
    return work.result((host["graph_indptr"], host["graph_indices"]), arrays, levels, hub_count)
