"""The graphs' versions loaded at start-up, in the background: the server answers ``/health`` at once, each
graph answers 409 GraphLoading (with Retry-After) until its published version is loaded and its journal
replayed, ``/ready`` lists what is still loading, and a graph with journaled updates past its version gets a
rebuild queued once it is loaded."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .jobs import BuildRunner
from .registry import GraphRegistry
from .state.errors import StateError
from .warmup import Readiness

__all__ = ["GraphLoader", "LOAD_THREADS"]

log = logging.getLogger("grail.service.loader")

# Graphs loading at once: reading files and replaying journals, mostly one core each.
LOAD_THREADS = 2
_TRIES = 60


class GraphLoader:
    def __init__(self, registry: GraphRegistry, runner: BuildRunner, readiness: Readiness) -> None:
        self._registry = registry
        self._runner = runner
        self._readiness = readiness
        self._pool = ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="grail-load")
        self._left = 0
        self._lock = threading.Lock()

    def start(self, graph_ids: list[str]) -> None:
        self._left = len(graph_ids)
        if not graph_ids:
            self._readiness.graphs_loaded = True
        for graph_id in graph_ids:
            self._pool.submit(self._load, graph_id)

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _load(self, graph_id: str) -> None:
        try:
            for attempt in range(_TRIES):
                try:
                    self._registry.load(graph_id)
                    break
                except StateError as exc:  # the store is away for now (a database restarting)
                    log.warning("graph %s: cannot load it now (%s); trying again", graph_id, exc.message)
                    if attempt == _TRIES - 1:
                        raise
                    time.sleep(1.0)
            if self._registry.rebuild_if_pending(graph_id):
                self._runner.wake()
        except Exception:  # its record says loading until something changes it; the others go on
            log.exception("graph %s: loading failed", graph_id)
        finally:
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self._readiness.graphs_loaded = True
                    log.info("every graph is loaded")
