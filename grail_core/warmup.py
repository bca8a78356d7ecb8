"""Compile every kernel of a build and of the queries before the first real one needs it.

numba compiles a kernel at its first call with a new argument layout; with ``cache=True`` it keeps
the machine code on disk (``NUMBA_CACHE_DIR``) and a later process only loads it (milliseconds).
``warm_up`` runs a small build and every query path on tiny graphs so that each kernel is compiled or
loaded once, with the layouts real requests use: edge arrays of int64 (the readers) and int32 (arrays
passed to ``from_edges``), freshly built and memory-mapped (read-only) indexes, writable and read-only
pair arrays. The thresholds that send small frontiers to a serial loop are lowered here so that the
parallel branches and the coloring rounds of the SCC run too. On 'cuda' every GPU kernel specialization
of ``kernels.specializations`` (one list, whatever the graph) is compiled or loaded from the same disk
cache, the GPU build's library steps (CuPy's kernels, kept on disk by CuPy) run once, the search runs in
both modes, and the search cost model is fitted or read (``search.start_calibration``).
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from . import backends
from .build import build_index_arrays
from .graph import Digraph
from .index import ReachabilityIndex
from .labeling import LONG_ROW
from .query import SERIAL_BATCH
from .scc import SccOptions, strongly_connected_components
from .scheduler import GPU_MODES
from .search import start_calibration
from .synthetic import layered_dag

__all__ = ["fill_caches", "warm_up", "warm_up_build", "warm_up_updates"]

log = logging.getLogger(__name__)

# A cycle, a tail and an isolated node: the filter, the search and the same-component cases all run.
_EDGES = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4], [1, 4]], dtype=np.int64)
_PAIRS = np.array([[0, 4], [4, 0], [1, 3], [3, 3], [5, 0]], dtype=np.int64)
# Several cycles in a row, each reached from the one before, and a self loop: every SCC step has work.
_CYCLES = np.array([[i, i + 1] for i in range(11)] + [[3, 0], [7, 4], [11, 8], [5, 5]], dtype=np.int64)
_EVERY_BRANCH = SccOptions(parallel_min_nodes=1, serial_below=0, min_round_share=0.0)
_MEDIUM = 1 << 18
_STAR = LONG_ROW + 1
# The deep DAG of ``warm_up_updates`` (a sixth as many edges added, a twentieth removed): tens of pairs of a
# batch across the order left to crossing, more than its threads start from (``dynamic.PARALLEL_CROSSING``).
_UPDATED_NODES = 2_000


def _queries(index: ReachabilityIndex) -> None:
    read_only = np.frombuffer(_PAIRS.astype("<i8").tobytes(), dtype="<i8").reshape(-1, 2)
    index.reachable(0, 4)
    index.reachable("4", "0")
    index.query_batch_with_stats(_PAIRS)
    index.query_batch_with_stats(read_only)
    index.query_batch_with_stats(_PAIRS.astype(str))
    # Small batches run on the calling thread; from SERIAL_BATCH pairs on, on all threads.
    index.query_batch_with_stats(np.resize(_PAIRS, (SERIAL_BATCH, 2)))


def warm_up_build(backend: str = "auto") -> str:
    """Compile (or load from numba's cache) the build kernels of ``backend``; returns the backend resolved."""
    resolved = backends.resolve_backend(backend)
    for dtype in (np.int32, np.int64):
        src, dst = (np.ascontiguousarray(column, dtype=dtype) for column in _CYCLES.T)
        graph = Digraph.from_edges(12, src, dst)
        strongly_connected_components(graph, _EVERY_BRANCH)
        ReachabilityIndex.from_edges(src, dst, num_nodes=13, backend="cpu", dims=2)
        # A star whose centre has more children than labeling.LONG_ROW: the long rows' radix passes.
        leaves = np.arange(1, _STAR + 1, dtype=dtype)
        ReachabilityIndex.from_edges(np.zeros_like(leaves), leaves, backend="cpu", dims=2)
    if resolved == "cuda":
        backends.warm_up_device()
        # A graph of 2**18 nodes through the whole GPU build: CuPy compiles the variants of its reductions
        # for large arrays on first use (and keeps them on disk), which a tiny graph does not reach.
        rng = np.random.default_rng(0)
        src, dst = (rng.integers(0, _MEDIUM, 4 * _MEDIUM).astype(np.int32) for _ in range(2))
        build_index_arrays(_MEDIUM, src, dst, dims=2, seed=0, hubs=64, backend="cuda", force_device=True)
    return resolved


def warm_up(backend: str = "auto") -> float:
    """Compile (or load from numba's cache) the build and query kernels of ``backend``; returns seconds."""
    started = time.perf_counter()
    resolved = warm_up_build(backend)
    with tempfile.TemporaryDirectory(prefix="grail-warmup-") as tmp:
        built = ReachabilityIndex.from_edges(_EDGES, num_nodes=6, backend=resolved)
        built.save(Path(tmp) / "index")
        loaded = ReachabilityIndex.load(Path(tmp) / "index", mmap=True, backend=resolved)
        for index in (built, loaded):
            _queries(index)
            gpu = index.scheduler.gpu
            if gpu is not None:
                comp = index.arrays.comp
                for mode in GPU_MODES:
                    gpu.answer(comp[_PAIRS[:, 0]], comp[_PAIRS[:, 1]], mode)
            touched = index.scheduler.touched_engine()
            if touched is not None:  # a version with updates, its graph written out and searched there
                version = index.current().updated(add=[[4, 0], [5, 6]], remove=[[2, 0]])
                touched.answer_touched(version.touched_graph(), _PAIRS[:, 0], _PAIRS[:, 1])
    if resolved == "cuda":
        start_calibration()
    seconds = time.perf_counter() - started
    log.info("build and query kernels (%s) ready in %.2f s", resolved, seconds)
    return seconds


def warm_up_updates() -> float:
    """Compile (or load) the kernels that answer batches on a version with edge updates on numba's threads:
    the verdicts, the crossing of pairs across the order and the searches of the updated graph, which small
    batches and single pairs do not reach. A deep DAG with edges added between random nodes and some removed,
    and batches whose sources lie among its last DAG nodes (many pairs across the order); returns seconds."""
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    n = _UPDATED_NODES
    indptr, indices = layered_dag(n, n // 4, 3.0, 4, seed=1)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    index.auto_rebuild = False  # its batches must run, and compile, on the version with updates
    added = rng.integers(0, n, size=(_UPDATED_NODES // 6, 2))
    index.update(add=added[added[:, 0] != added[:, 1]].tolist())
    removed = rng.choice(src.size, size=_UPDATED_NODES // 20, replace=False)
    index.update(remove=np.column_stack([src[removed], indices[removed]]).tolist())
    comp = index.current().labels.views.forward().comp
    last = np.flatnonzero(comp >= comp.max() - n // 40)
    pairs = np.column_stack([rng.choice(last, SERIAL_BATCH), rng.integers(0, n, SERIAL_BATCH)])
    index.query_batch_with_stats(pairs)
    index.query_batch_with_stats(pairs.astype(str))
    return time.perf_counter() - started


def fill_caches(backend: str = "auto") -> str:
    """Everything the warm-up compiles or fits, written to the disk caches and kept there (``python -m
    grail_core.warmup [backend]``: the container image's build runs it, so that a container's start only
    loads): numba's CPU kernels, those of batches on a version with updates included (``warm_up_updates``), on
    'cuda' the GPU kernels, CuPy's and the search cost model's fit (waited for here; a start fits it in the
    background). Returns the backend resolved."""
    resolved = backends.resolve_backend(backend)
    warm_up(resolved)
    warm_up_updates()
    if resolved == "cuda":
        start_calibration(wait=True)
    return resolved


if __name__ == "__main__":
    import sys

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"caches filled for {fill_caches(sys.argv[1] if len(sys.argv) > 1 else 'auto')}")
