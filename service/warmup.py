"""Compile grail_core's build and query kernels at start-up instead of in the first user's request.

``grail_core.warmup.warm_up`` runs a small build and every query path once (numba compiles one
specialization per argument layout). Without it, the first build and the first query of each kind
after a start wait seconds for the compiler; with a warm numba cache on disk it takes well under a
second on the CPU (the GPU's engine kernels are always compiled: a few seconds).

The warm-up is also numba's first parallel launch, which picks its threading layer for the process:
TBB or OpenMP when installed (``tbb`` from pip, or the system's ``libgomp``), else "workqueue", which
aborts the whole process when two threads launch parallel code at once. ``core_gate`` turns that into
a lock around every call into grail_core (correct, one call at a time) with a warning.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, nullcontext

import numba

from grail_core.warmup import warm_up as warm_up_kernels

__all__ = ["warm_up", "core_gate"]

_THREAD_SAFE_LAYERS = ("tbb", "omp")

log = logging.getLogger("grail.service.warmup")


def warm_up(backend: str = "auto") -> str:
    """Compile the build and query kernels of ``backend``; returns numba's threading layer."""
    seconds = warm_up_kernels(backend)
    layer = str(numba.threading_layer())
    log.info("kernels ready in %.2f s (numba threading layer %s)", seconds, layer)
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
