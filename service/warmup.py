"""Compile grail_core's query kernels at start-up instead of in the first user's request.

numba compiles one specialization per argument layout: freshly built indexes and memory-mapped
(read-only) loaded ones differ, and so do writable and read-only (zero-copy binary) pair arrays.
Without this, the first query of each kind after a start waits seconds for the compiler; with a warm
numba cache on disk this takes a few milliseconds.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from grail_core import GrailError, ReachabilityIndex

__all__ = ["warm_up", "warm_up_in_background"]

log = logging.getLogger("grail.service.warmup")

# A cycle, a tail and an isolated node: the filter, the search and the same-component cases all run.
_EDGES = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4], [1, 4]], dtype=np.int64)
_PAIRS = np.array([[0, 4], [4, 0], [1, 3], [3, 3], [5, 0]], dtype=np.int64)


def warm_up() -> None:
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
    log.info("query kernels ready in %.2f s", time.perf_counter() - started)


def _safely() -> None:
    try:
        warm_up()
    except (GrailError, OSError) as exc:  # a failed warm-up only costs the first query its compile time
        log.warning("warm-up failed: %s", exc)


def warm_up_in_background() -> threading.Thread:
    thread = threading.Thread(target=_safely, name="grail-warmup", daemon=True)
    thread.start()
    return thread
