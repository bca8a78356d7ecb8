"""Compile grail_core's query kernels at start-up instead of in the first user's request, in the background.

numba compiles one specialization per argument layout: freshly built indexes and memory-mapped
(read-only) loaded ones differ, and so do writable and read-only (zero-copy binary) pair arrays.
Without this, the first query of each kind after a start waits seconds for the compiler; with a warm
numba cache on disk (NUMBA_CACHE_DIR, see service.main) this takes well under a second. The server
answers ``/health`` while it runs; ``/ready`` says when it is done (``Readiness``).

The warm-up is also numba's first parallel launch, which picks its threading layer for the process:
TBB or OpenMP when installed (``tbb`` from pip, or the system's ``libgomp``), else "workqueue", which
aborts the whole process when two threads launch parallel code at once. ``CoreGate`` holds every call
into grail_core to one at a time until the layer is known, and for good where it is not thread-safe.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import numba
import numpy as np

from grail_core import ReachabilityIndex

__all__ = ["warm_up", "CoreGate", "Readiness", "KernelState", "start_warm_up"]

_THREAD_SAFE_LAYERS = ("tbb", "omp")

KernelState = Literal["compiling", "ready", "failed"]

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


class CoreGate:
    """What every call into grail_core holds (``with gate:``): a lock while numba's threading layer is unknown
    or not thread-safe, nothing once a thread-safe layer is in use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serial = True
        self._held = threading.local()  # whether this thread took the lock, for __exit__

    def __enter__(self) -> None:
        if self._serial:
            self._lock.acquire()
            self._held.lock = True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if getattr(self._held, "lock", False):
            self._held.lock = False
            self._lock.release()

    def settle(self, layer: str) -> None:
        """The layer is known: calls run side by side from now on where it is thread-safe."""
        if layer in _THREAD_SAFE_LAYERS:
            self._serial = False
            return
        log.warning(
            "numba threading layer %r is not thread-safe: queries and builds run one at a time "
            "(install tbb or libgomp1 to run them in parallel)",
            layer,
        )


@dataclass
class Readiness:
    """What ``/ready`` reports: the kernels compiled (``kernels``: compiling, ready or failed) and the graphs
    on disk loaded."""

    kernels: KernelState = "compiling"
    kernels_seconds: float | None = None
    threading_layer: str | None = None
    error: str | None = None
    graphs_loaded: bool = False

    @property
    def ready(self) -> bool:
        return self.kernels == "ready" and self.graphs_loaded


def start_warm_up(warm: Callable[[], str], gate: CoreGate, readiness: Readiness) -> threading.Thread:
    """``warm`` (``warm_up``: returns numba's threading layer) in a daemon thread, so that a stop does not wait for
    the compiler, holding the gate throughout; ``readiness`` follows it."""

    def run() -> None:
        started = time.perf_counter()
        try:
            with gate:
                layer = warm()
            gate.settle(layer)
        except Exception as exc:  # the server stays up and says so on /ready; queries compile on demand
            log.exception("warm-up failed")
            readiness.error = f"{type(exc).__name__}: {exc}"
            readiness.kernels = "failed"
            return
        readiness.threading_layer = layer
        readiness.kernels_seconds = round(time.perf_counter() - started, 3)
        readiness.kernels = "ready"

    thread = threading.Thread(target=run, name="grail-warm-up", daemon=True)
    thread.start()
    return thread
