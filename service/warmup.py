"""Compile grail_core's query kernels at start-up instead of in the first user's request.

numba compiles one specialization per argument layout: freshly built indexes and memory-mapped
(read-only) loaded ones differ, and so do writable and read-only (zero-copy binary) pair arrays.
Without this, the first query of each kind after a start waits seconds for the compiler; with a warm
numba cache on disk this takes a few milliseconds.

The warm-up is also numba's first parallel launch, which picks its threading layer for the process:
TBB or OpenMP when installed (``tbb`` from pip, or the system's ``libgomp``), else "workqueue", which
aborts the whole process when two threads launch parallel code at once. ``core_gate`` turns that into
a lock around every call into grail_core (correct, one call at a time) with a warning.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numba
import numpy as np

from grail_core import ReachabilityIndex

__all__ = ["warm_up", "core_gate"]

_THREAD_SAFE_LAYERS = ("tbb", "omp")

log = logging.getLogger("grail.service.warmup")

# A cycle, a tail and an isolated node: the filter, the search and the same-component cases all run.
_EDGES = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4], [1, 4]], dtype=np.int64)
_PAIRS = np.array([[0, 4], [4, 0], [1, 3], [3, 3], [5, 0]], dtype=np.int64)


def warm_up() -> str:
    """Run every query path once; returns numba's threading layer."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grail-warmup-") as tmp:
        built = ReachabilityIndex.from_edges(_EDGES, num_nodes=6, backend="cpu")
        built.save(Path(tmp) / "index")
        loaded = ReachabilityIndex.load(Path(tmp) / "index", mmap=True)
        read_only = np.frombuffer(_PAIRS.astype("<i8").tobytes(), dtype="<i8").reshape(-1, 2)
        for index in (built, loaded):
            index.reachable(0, 4)
            index.reachable("4", "0")
            index.query_batch_with_stats(_PAIRS)
            index.query_batch_with_stats(read_only)
            index.query_batch_with_stats(_PAIRS.astype(str))
    layer = str(numba.threading_layer())
    log.info("query kernels ready in %.2f s (numba threading layer %s)", time.perf_counter() - started, layer)
    return layer


def core_gate(layer: str) -> AbstractContextManager[object]:
    """What to hold around calls into grail_core: nothing, unless the threading layer is not thread-safe."""
    if layer in _THREAD_SAFE_LAYERS:
        return nullcontext()
    log.warning(
        "numba threading layer %r is not thread-safe: queries and builds run one at a time "
        "(install tbb or libgomp1 to run them in parallel)",
        layer,
    )
    return threading.Lock()
