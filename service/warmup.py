"""Compile grail_core's build and query kernels at start-up instead of in the first user's request, in the background.

``grail_core.warmup.warm_up`` runs a small build and the core's query paths once (numba compiles one
specialization per argument layout); then every request body's path runs once on each kind of node names
(the range, integers, strings: each has its own lookups, from integers, from text and from JSON). Without
this, the first build and the first query of each kind after a start wait seconds for the compiler; with a
warm numba cache on disk (NUMBA_CACHE_DIR, see service.main) it takes well under a second on the CPU and a
few on a GPU (every GPU kernel is loaded from the same cache, CuPy's from its own). The server answers
``/health`` while it runs; ``/ready`` says when it is done (``Readiness``).

The warm-up is also numba's first parallel launch, which picks its threading layer for the process:
TBB or OpenMP when installed (``tbb`` from pip, or the system's ``libgomp``), else "workqueue", which
aborts the whole process when two threads launch parallel code at once. ``CoreGate`` holds every call
into grail_core to one at a time until the layer is known, and for good where it is not thread-safe.
"""

from __future__ import annotations

import json
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
from grail_core.warmup import warm_up as warm_up_kernels
from grail_core.warmup import warm_up_updates

from .codecs import decode_pairs

__all__ = [
    "warm_up",
    "warm_up_beyond",
    "warm_up_bodies",
    "fill_caches",
    "CoreGate",
    "Readiness",
    "KernelState",
    "start_warm_up",
]

_THREAD_SAFE_LAYERS = ("tbb", "omp")

KernelState = Literal["compiling", "ready", "failed"]

log = logging.getLogger("grail.service.warmup")

# A cycle, a tail and an isolated node: the filter, the search and the same-component cases all run. The
# same graph three times: names 0..5 (the range), sparse integers, and strings (one of them a number).
_GRAPHS = {
    "range": "0 1\n1 2\n2 0\n2 3\n3 4\n1 4\n5 5\n",
    "int": "10 -1\n-1 2000\n2000 10\n2000 3\n3 44\n-1 44\n5 5\n",
    "str": "a b\nb 7\n7 a\n7 d\nd é\nb é\nf f\n",
}
# An edge of the cycle a -> b -> 7 -> a of the "str" graph: removing it may split the component.
_EDGE_IN_A_CYCLE = ["b", "7"]
# Journals folded at once, as a restart replays one (an edge added, one of a cycle removed, a node added): the
# fold's kernels are compiled before a restart needs them.
_JOURNALS = {
    "str": [([["d", "a"]], []), ([], [_EDGE_IN_A_CYCLE]), ([["é", "new"]], [])],
    "int": [([[3, 10]], []), ([], [[-1, 2000]]), ([[44, 45]], [])],
}
_PAIRS = {
    "range": "0 4\n4 0\n1 3\n3 3\n5 0\n",
    "int": "10 44\n44 10\n-1 3\n3 3\n5 10\n",
    "str": "a é\né a\nb d\n7 7\nf a\n",
}


def warm_up(backend: str = "auto") -> str:
    """Compile the build and query kernels of ``backend`` and run every request body's path once; returns
    numba's threading layer."""
    started = time.perf_counter()
    warm_up_kernels(backend)
    with tempfile.TemporaryDirectory(prefix="grail-warmup-") as tmp:
        for kind, edges in _GRAPHS.items():
            built = ReachabilityIndex.from_bytes(edges.encode(), format="edgelist", backend="cpu")
            built.save(Path(tmp) / kind)
            loaded = ReachabilityIndex.load(Path(tmp) / kind, mmap=True)
            text = _body(_PAIRS[kind].encode())
            names = np.array(_PAIRS[kind].split()).reshape(-1, 2)
            json_body = _body(json.dumps({"pairs": names.tolist()}).encode())
            for index in (built, loaded):
                index.reachable(*names[0])
                index.query_batch_with_stats(names)
                index.query_batch_with_stats(names.tolist())  # ?pairs=
                index.query_batch_with_stats(decode_pairs(text, "text/plain"))
                index.query_batch_with_stats(decode_pairs(json_body, "application/json"))
                integers = names[3:4] if kind == "str" else names
                binary = _body(integers.astype("<i8").tobytes())
                index.query_batch_with_stats(integers.astype(np.int64))
                index.query_batch_with_stats(decode_pairs(binary, "application/octet-stream"))
    layer = str(numba.threading_layer())
    log.info("kernels ready in %.2f s (numba threading layer %s)", time.perf_counter() - started, layer)
    return layer


def warm_up_beyond() -> None:
    """Compile the kernels of paths, listings, edge updates, batches on a version with updates (on numba's
    threads: ``grail_core.warmup.warm_up_updates``) and journals folded at once (a minute on a cold
    numba cache, on two cores): after ``/ready``, since most graphs are only asked yes or no; a path asked
    meanwhile waits for them, and so does the first restart's replay where the cache did not hold the fold's."""
    started = time.perf_counter()
    names = np.array(_PAIRS["str"].split()).reshape(-1, 2)
    with tempfile.TemporaryDirectory(prefix="grail-warmup-") as tmp:
        built = ReachabilityIndex.from_bytes(_GRAPHS["str"].encode(), format="edgelist", backend="cpu")
        built.save(Path(tmp) / "index")
        for index in (ReachabilityIndex.load(Path(tmp) / "index", mmap=True), built):
            _beyond_yes_or_no(index, names)
        for kind, journal in _JOURNALS.items():
            built = ReachabilityIndex.from_bytes(_GRAPHS[kind].encode(), format="edgelist", backend="cpu")
            built.save(Path(tmp) / kind)
            ReachabilityIndex.load(Path(tmp) / kind, mmap=True).update_many(journal)
    warm_up_updates()
    log.info("path, listing and update kernels ready in %.2f s", time.perf_counter() - started)


def _beyond_yes_or_no(index: ReachabilityIndex, names: np.ndarray) -> None:
    """Paths, listings and counts, then the same and the queries with edge updates pending (an edge added,
    one inside a cycle removed), and the graph's edges as a rebuild reads them."""
    index.auto_rebuild = False  # the queries must run, and compile, on the version with updates
    for _ in range(2):
        index.path(*names[0])
        index.descendant_ids(names[0][0])
        index.ancestor_ids(names[0][1])
        index.count_descendants(names[0][0])
        index.count_ancestors(names[0][1])
        if index.pending.updates:
            break
        index.update(add=[names[0][::-1].tolist()])
        index.update(remove=[_EDGE_IN_A_CYCLE])
        index.reachable(*names[1])
        index.query_batch_with_stats(names)
    index.edges()


def warm_up_bodies() -> None:
    """Compile (or load) the request bodies' decoders (pairs as text and JSON of every kind of names): they
    need no index, nor the build kernels (a test run compiles both at once, on two cores)."""
    for pairs in _PAIRS.values():
        names = np.array(pairs.split()).reshape(-1, 2)
        decode_pairs(_body(pairs.encode()), "text/plain")
        decode_pairs(_body(json.dumps({"pairs": names.tolist()}).encode()), "application/json")


def _body(data: bytes) -> np.ndarray:
    """A request body as the queries route reads it (service.bodies.read_array): a writable uint8 array."""
    return np.frombuffer(data, dtype=np.uint8).copy()


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

    @property
    def serial(self) -> bool:
        """Whether calls run one at a time: a holder that waits stalls every other call."""
        return self._serial

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


def start_warm_up(
    warm: Callable[[], str], gate: CoreGate, readiness: Readiness, then: Callable[[], None] | None = None
) -> threading.Thread:
    """``warm`` (``warm_up``: returns numba's threading layer) in a daemon thread, so that a stop does not wait for
    the compiler, holding the gate throughout; ``readiness`` follows it. ``then`` runs once ready, under the
    gate too (its failure is logged: queries compile what it would have)."""

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
        if then is not None:
            try:
                with gate:
                    then()
            except Exception:
                log.exception("warm-up of the path, listing and update kernels failed")

    thread = threading.Thread(target=run, name="grail-warm-up", daemon=True)
    thread.start()
    return thread


def fill_caches(backend: str = "auto") -> str:
    """The disk caches a start of the service fills, filled now and kept (``python -m service.warmup
    [backend]``: the container image's build runs it, so that a container's server and build workers only
    load): a build worker's warm-up (every input format), the server's (every request body and kind of names;
    then the paths', listings' and updates' kernels, which a start compiles after ``/ready``), and where there
    is a GPU its kernels, CuPy's and the search cost model's fit (``grail_core.warmup.fill_caches``). Returns
    the backend resolved."""
    from grail_core.warmup import fill_caches as fill_core_caches

    from .worker import warm_up_builds

    resolved = fill_core_caches(backend)
    warm_up_builds(resolved)
    warm_up(resolved)
    warm_up_beyond()
    return resolved


if __name__ == "__main__":
    import sys

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"caches filled for {fill_caches(sys.argv[1] if len(sys.argv) > 1 else 'auto')}")
