"""The GPU build: every step from edge arrays to the index arrays on the device, one upload, one download.

``DeviceBuild`` holds the build's device arrays and runs its steps, each the device twin of a CPU step
of ``grail_core.build`` with the same result: the CSR both ways (``csr``: sorted keys), the components
(``scc``: trim, forward-backward, trim), their numbering by smallest node, the quotient DAG, the heights
(Kahn's levels from the sinks, the engine's ``build_level_queues``) that give the canonical topological
ids, the renumbered DAG with its virtual root, its levels (the same queues serve the labels and the hub
sweeps), the child orders (one stable sort per dimension), the five labeling phases and the hub masks.
The steps that walk levels take a time budget (what the CPU would take, from ``grail_core.build``'s cost
model): a step that runs out of it says so (``components`` leaves nodes live, ``renumber`` returns False)
and ``grail_core.build`` finishes that phase on the CPU from the arrays the ``host_*`` methods download;
it also chooses where the labels and the hubs are computed (``level_widths`` tells it the DAG's levels).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .arrays import as_xp, device_arrays, to_device, to_host, to_host_many
from .csr import MAX_DEVICE_NODES, csr_from_keys, edge_keys, mapped_keys, transposed_keys
from .device import free_memory
from .frontier import MAX_LEVELS, EngineConfig, LevelBudget, LevelQueues, build_level_queues, node_levels
from .hubs import choose_hubs, hub_reach_masks
from .labeling import LabelingOptions, build_labels, device_child_orders
from .scc import device_components, number_components

__all__ = ["DEVICE_BYTES_PER_EDGE", "DeviceBuild", "warm_up"]

# Device memory a build needs per input edge at its peak (the edges, their keys, the sort's buffers).
DEVICE_BYTES_PER_EDGE = 40


def _with_virtual_root(indptr: Any, indices: Any) -> tuple[Any, Any]:
    """The CSR plus a last node whose children are the nodes that no row lists (``with_virtual_root``)."""
    xp = device_arrays()
    n = indptr.size - 1
    listed = xp.zeros(n, dtype=np.bool_)
    listed[indices] = True
    roots = xp.flatnonzero(~listed).astype(indices.dtype)
    root_indptr = xp.concatenate([indptr, (indptr[-1:] + roots.size)])
    return root_indptr, xp.concatenate([indices, roots])


def _levels(
    indptr: Any, children: Any, config: EngineConfig, budget: LevelBudget | None
) -> tuple[LevelQueues, Any] | None:
    """Level queues (Kahn's, from the virtual root, the last node) and every node's level; None when the
    ``budget`` ran out first."""
    xp = device_arrays()
    n1 = indptr.size - 1
    lq = build_level_queues(indptr, children, n1 - 1, n1, config, MAX_LEVELS, budget)
    if lq is None:
        return None
    level = xp.empty(n1, dtype=np.int32)
    node_levels(lq, indptr, level, config)
    return lq, level


class DeviceBuild:
    """One build's device arrays; the steps run in the order of the methods below."""

    def __init__(self, num_nodes: int, num_edges: int, config: EngineConfig | None = None) -> None:
        if num_nodes >= MAX_DEVICE_NODES:
            raise MemoryError(f"{num_nodes} nodes: the device build handles node ids below 2**31")
        need = DEVICE_BYTES_PER_EDGE * num_edges + 64 * num_nodes
        free = free_memory()
        if need > 0.85 * free:
            raise MemoryError(f"the device build needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
        self.xp = device_arrays()
        self.config = config or EngineConfig.default()
        self.n = int(num_nodes)
        self.seconds: dict[str, float] = {}

    def _sync(self, name: str, start: float) -> None:
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    # ---- graph ------------------------------------------------------------------------------------
    def graph(self, src: np.ndarray, dst: np.ndarray) -> int:
        """Uploads the edges; the CSR of children and of parents. Returns the number of distinct edges."""
        start = time.perf_counter()
        self.keys = edge_keys(to_device(src), to_device(dst))
        self._sync("upload and sort", start)
        start = time.perf_counter()
        self.out_csr = csr_from_keys(self.n, self.keys)
        self.in_csr = csr_from_keys(self.n, transposed_keys(self.keys))
        self._sync("csr", start)
        return int(self.keys.size)

    # ---- components -------------------------------------------------------------------------------
    def components(self, budget: float | None = None, per_level: float = 0.0) -> int:
        """Trim, forward-backward, trim within what the CPU would take (``LevelBudget``: ``budget`` seconds and
        ``per_level`` a wide level walked; None: no limit); returns how many nodes are left for the CPU
        (none on R-MAT graphs and DAGs)."""
        start = time.perf_counter()
        limit = None if budget is None else LevelBudget(budget, self.n, per_level)
        self.label, live = device_components(self.out_csr, self.in_csr, self.config, limit)
        self._sync("scc", start)
        return live

    def host_components(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(labels, out_indptr, out_indices, in_indptr, in_indices) for the CPU to finish the components."""
        return (to_host(self.label), *(to_host(a) for a in (*self.out_csr, *self.in_csr)))

    def set_components(self, label: np.ndarray) -> None:
        self.label = to_device(label)

    def host_graph(self) -> tuple[np.ndarray, np.ndarray]:
        """The graph's CSR of children on the host."""
        return to_host(self.out_csr[0]), to_host(self.out_csr[1])

    # ---- condensation -----------------------------------------------------------------------------
    def quotient(self) -> tuple[int, int]:
        """Components numbered by smallest node, and the DAG between them; returns (nodes, edges)."""
        start = time.perf_counter()
        self.comp, count = number_components(self.label, self.config)
        del self.label, self.in_csr
        self.raw_keys = mapped_keys(self.keys, self.comp)
        del self.keys
        self.raw_count = count
        self._sync("quotient", start)
        return count, int(self.raw_keys.size)

    def host_quotient(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(comp, out_indptr, out_indices) of the DAG on the smallest-node numbering, for the CPU."""
        indptr, indices = csr_from_keys(self.raw_count, self.raw_keys)
        return to_host(self.comp), to_host(indptr), to_host(indices)

    def renumber(self, budget: float | None = None) -> bool:
        """Canonical ids (by height, then smallest node), the DAG on them, its labeling graph and levels.

        False, with nothing changed, when the two level discoveries would take more than ``budget`` seconds
        (None: no limit; each gets half of it).
        """
        xp, cfg, count = self.xp, self.config, self.raw_count
        start = time.perf_counter()
        reverse = _with_virtual_root(*csr_from_keys(count, transposed_keys(self.raw_keys)))
        half = None if budget is None else LevelBudget(budget / 2, count + 1, restarts=True)
        heights = _levels(*reverse, cfg, half)
        if heights is None:
            return False
        del reverse
        height = heights[1][:count].astype(np.uint64) - np.uint64(1)
        top = int(height.max()) if count else 0
        order = (xp.sort(((np.uint64(top) - height) << np.uint64(32)) | xp.arange(count, dtype=np.uint64))).astype(
            np.uint32
        )
        rank = xp.empty(count, dtype=np.int32)
        rank[order.astype(np.int64)] = xp.arange(count, dtype=np.int32)
        del heights, height, order
        dag_keys = mapped_keys(self.raw_keys, rank)
        del self.raw_keys
        self.comp = rank[self.comp]
        self.dag_out = csr_from_keys(count, dag_keys)
        self.dag_in_indptr = csr_from_keys(count, transposed_keys(dag_keys))[0]
        del dag_keys
        self.lab_indptr, self.lab_children = _with_virtual_root(*self.dag_out)
        depths = _levels(self.lab_indptr, self.lab_children, cfg, None)  # as deep as the heights, which fit
        self.lq, level = depths
        self.level = level[:count] - 1
        self._sync("renumber", start)
        return True

    def host_labeling_graph(self) -> tuple[np.ndarray, np.ndarray]:
        """The labeling graph (DAG + virtual root) on the host, for labels on the CPU."""
        return to_host(self.lab_indptr), to_host(self.lab_children)

    # ---- labels and hubs ----------------------------------------------------------------------------
    @property
    def roots(self) -> int:
        """DAG nodes without a parent (the virtual root's children)."""
        return int(self.lab_children.size - self.dag_out[1].size)

    def level_widths(self) -> np.ndarray:
        """Nodes of each class on each level of the labeling graph (``LevelQueues.host_cnt``), for the cost model."""
        return self.lq.host_cnt

    def labels(self, seeds: np.ndarray, options: LabelingOptions | None = None) -> dict[str, float]:
        """Child orders and the labeling phases; returns the phases' seconds."""
        if self.xp is not np:  # the labeling's memory check asks the driver, which counts CuPy's cached blocks
            self.xp.get_default_memory_pool().free_all_blocks()
        start = time.perf_counter()
        orders = device_child_orders(self.lab_indptr, self.lab_children, seeds, self.config)
        self._sync("child orders", start)
        opts = options or LabelingOptions(config=self.config, max_levels=MAX_LEVELS)
        built = build_labels(
            self.lab_indptr,
            orders,
            self.lab_indptr.size - 2,
            opts,
            level_hint=self.lq.levels,
            level_queues=self.lq,
            keep_on_device=True,
        )
        self.post, self.minpost, self.tree_low = built.post, built.minpost, built.tree_low
        return built.phase_seconds

    def hubs(self, count: int) -> int:
        """Hub choice and reach masks; returns the number of hubs."""
        start = time.perf_counter()
        hubs = choose_hubs(self.dag_out[0], self.dag_in_indptr, count)
        self.fwd, self.bwd = hub_reach_masks(self.lq, self.lab_indptr, self.lab_children, hubs, self.config)
        self._sync("hubs", start)
        return int(hubs.size)

    # ---- the one download ---------------------------------------------------------------------------
    def download(self, with_labels: bool, with_hubs: bool = True) -> dict[str, np.ndarray]:
        """Every index array on the host (labels node-major, (N, dims), and hub masks, when they were built
        here)."""
        start = time.perf_counter()
        count = self.raw_count
        wanted = {
            "graph_indptr": self.out_csr[0],
            "graph_indices": self.out_csr[1],
            "comp": self.comp,
            "out_indptr": self.dag_out[0],
            "out_indices": self.dag_out[1],
            "level": self.level,
        }
        if with_hubs:
            wanted.update(fwd=self.fwd[:count], bwd=self.bwd[:count])
        if with_labels:
            xp = self.xp
            for name, values in (("lo", self.minpost), ("hi", self.post), ("tree_lo", self.tree_low)):
                wanted[name] = xp.ascontiguousarray(as_xp(values)[:, :count].T)
        host = dict(zip(wanted, to_host_many(list(wanted.values())), strict=True))
        self._sync("download", start)
        return host


def warm_up() -> None:
    """Runs every step of the device build once (the labels forced onto the device), for int64 and int32
    edges, on a graph whose trim, forward-backward reach and hand-over to the CPU all have work (a 10-cycle
    with a tail and a branch, and a 3-cycle below it that the forward-backward step leaves live): the array
    library compiles its kernels at their first use (CuPy keeps them on disk). numba's kernels are
    compiled from ``kernels.specializations`` before."""
    ring = [(i, (i + 1) % 10) for i in range(10)]
    edges = np.array(
        [*ring, (9, 10), (10, 11), (11, 12), (11, 13), (9, 15), (15, 16), (16, 17), (17, 15), (4, 4), (0, 1)]
    )
    seeds = np.arange(1, 3, dtype=np.uint64)
    for dtype in (np.int64, np.int32):
        build = DeviceBuild(18, edges.shape[0])
        build.graph(*(np.ascontiguousarray(column, dtype=dtype) for column in edges.T))
        build.components(budget=1.0)
        label = to_host(build.label)  # the 10-cycle is left live: the CPU would find it one component
        label[label < 0] = 0
        build.set_components(label)
        build.quotient()
        build.renumber(budget=1.0)
        for deep in (False, True):  # parents from path counts, and by comparing tree paths
            build.labels(
                seeds, LabelingOptions(config=build.config, max_levels=MAX_LEVELS, path_count_levels=0 if deep else 512)
            )
        build.hubs(8)
        build.download(with_labels=True)
