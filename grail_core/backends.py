"""The seam between grail_core and the GPU code in ``kernels``: backend choice for labeling and search.

grail_core never imports ``kernels`` anywhere else. Both backends take and return plain numpy arrays
and give identical answers; the GPU one is used when numba finds a CUDA device (or when forced).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import BackendUnavailableError, InvalidParameterError
from .labeling import label_all
from .query import HotArrays, QueryArrays, search_pairs_cpu

__all__ = [
    "BACKENDS",
    "LabelResult",
    "choose_search_backend",
    "compute_labels",
    "cuda_available",
    "device_name",
    "resolve_backend",
    "search_pairs",
    "DeviceBuildUnavailable",
    "device_build",
    "warm_up_device",
]

log = logging.getLogger(__name__)

BACKENDS = ("auto", "cpu", "cuda")


@dataclass
class LabelResult:
    """Labels of every dimension, shape (dims, N+1), and the time each phase took."""

    post: np.ndarray
    minpost: np.ndarray
    tree_low: np.ndarray
    backend: str
    phase_seconds: dict[str, float] = field(default_factory=dict)


def cuda_available() -> bool:
    """True when numba-cuda is installed and finds a device; never raises."""
    try:
        from kernels.device import cuda_available as probe
    except ImportError:
        return False
    return probe()


def device_name() -> str | None:
    """The CUDA device's name, or None without one (or without numba-cuda)."""
    try:
        from kernels.device import device_name as probe
    except ImportError:
        return None
    return probe()


def resolve_backend(name: str) -> str:
    """'cpu' or 'cuda' for a requested backend name; 'auto' picks the GPU when there is one."""
    if name not in BACKENDS:
        raise InvalidParameterError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name == "cuda" and not cuda_available():
        raise BackendUnavailableError("backend 'cuda' was requested but no CUDA device is available")
    return name


def compute_labels(
    backend: str,
    indptr: np.ndarray,
    child_orders: np.ndarray,
    root: int,
    progress: Callable[[str, float], None] | None = None,
    num_levels: int | None = None,
) -> LabelResult:
    """Labels of the labeling graph (DAG + virtual root) on the resolved backend.

    ``num_levels`` (the labeling graph's levels, i.e. the DAG's plus one) lets the GPU pipeline
    decline a deep graph at once. The GPU declines graphs that the CPU labels faster (small or deep
    ones, by a cost model in ``kernels.labeling``) and graphs that do not fit; those go to the CPU.
    """
    if backend == "cuda":
        from kernels.labeling import LabelingDeclined, label_dag

        try:
            post, minpost, tree_low, phase_seconds = label_dag(indptr, child_orders, root, level_hint=num_levels)
            return LabelResult(post, minpost, tree_low, "cuda", dict(phase_seconds))
        except MemoryError as error:
            log.warning("GPU labeling did not fit (%s); labeling %d nodes on the CPU instead", error, indptr.size - 1)
        except LabelingDeclined as reason:
            log.info("GPU labeling declined (%s); labeling %d nodes on the CPU", reason, indptr.size - 1)
    post, minpost, tree_low = label_all(indptr, child_orders, root)
    return LabelResult(post, minpost, tree_low, "cpu")


class DeviceBuildUnavailable(RuntimeError):
    """The GPU build cannot run here (no CuPy, graph too large for the device): build on the CPU."""


def device_build(num_nodes: int, num_edges: int) -> Any:
    """A ``kernels.build.DeviceBuild`` for a graph of this size; ``DeviceBuildUnavailable`` when the GPU
    build cannot take it (the reason is the message)."""
    try:
        from kernels.arrays import DeviceArraysUnavailable
        from kernels.build import DeviceBuild
    except ImportError as error:
        raise DeviceBuildUnavailable(str(error)) from None
    try:
        return DeviceBuild(num_nodes, num_edges)
    except (DeviceArraysUnavailable, MemoryError) as error:
        raise DeviceBuildUnavailable(str(error)) from None


def warm_up_device() -> None:
    """Compiles the GPU build's kernels (``kernels.build.warm_up``); the search's compile with its first call."""
    from kernels.build import warm_up

    warm_up()


def search_pairs(
    engine: str, arrays: QueryArrays, hot: HotArrays, sources: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, str]:
    """Answers for undecided pairs of DAG nodes on ``engine`` ('cpu' or 'cuda'), and the engine used.

    The time per pair is remembered per index, for ``choose_search_backend``.
    """
    start = time.perf_counter()
    answers = None
    if engine == "cuda" and sources.size > 0:
        from kernels import search as gpu

        try:
            answers, stats = gpu.search_pairs_with_stats(hot, sources, targets)
            # The index's one-time upload to the device is not a cost of later batches.
            seconds = time.perf_counter() - start - stats.upload_seconds
        except MemoryError as error:
            log.warning("GPU search did not fit (%s); searching %d pairs on the CPU instead", error, sources.size)
    if answers is None:
        engine = "cpu"
        answers = search_pairs_cpu(hot, sources, targets)
        seconds = time.perf_counter() - start
    if sources.size >= GPU_SEARCH_MIN_PAIRS:
        _remember(arrays, engine, seconds / sources.size)
    return answers, engine


# Measured on an H200 with 16 CPU threads (benchmarks/results/search-NVIDIA_H200.md): the CPU search
# of the shared datasets' batches takes under 10 ms, so a GPU round trip never pays off below these.
GPU_SEARCH_MIN_PAIRS = 4096
GPU_SEARCH_MIN_NODES = 1_000_000
_REMEMBERED = 16
_seconds_per_pair: dict[int, tuple[QueryArrays, dict[str, float]]] = {}


def _remember(arrays: QueryArrays, engine: str, seconds: float) -> None:
    """Running mean (weight 1/2 on the newest batch) of one engine's seconds per searched pair."""
    kept = _seconds_per_pair.get(id(arrays))
    if kept is None or kept[0] is not arrays:
        if len(_seconds_per_pair) >= _REMEMBERED:
            _seconds_per_pair.pop(next(iter(_seconds_per_pair)))
        kept = (arrays, {})
        _seconds_per_pair[id(arrays)] = kept
    costs = kept[1]
    costs[engine] = seconds if engine not in costs else 0.5 * (costs[engine] + seconds)


def choose_search_backend(num_pairs: int, arrays: QueryArrays) -> str:
    """The hybrid scheduler: where a batch's undecided pairs are searched, for an index allowed the GPU.

    Small batches and small graphs stay on the CPU (a GPU round trip never paid off there). For the
    rest it measures: the first large batch of an index goes to the GPU, the next to the CPU, and
    then each batch to the engine with the lower measured time per pair.
    """
    if num_pairs < GPU_SEARCH_MIN_PAIRS or arrays.level.size < GPU_SEARCH_MIN_NODES:
        return "cpu"
    kept = _seconds_per_pair.get(id(arrays))
    costs = kept[1] if kept is not None and kept[0] is arrays else {}
    for engine in ("cuda", "cpu"):
        if engine not in costs:
            return engine
    return "cuda" if costs["cuda"] < costs["cpu"] else "cpu"
