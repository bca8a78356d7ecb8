"""Index builds off the event loop: a thread pool, since grail_core's numba kernels release the GIL."""

from __future__ import annotations

import contextvars
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor

from grail_core import GrailError, ReachabilityIndex, read_graph

from .metrics import Metrics
from .registry import GraphRecord, GraphRegistry
from .warmup import CoreGate

__all__ = ["BuildRunner"]

log = logging.getLogger("grail.service.build")


class BuildRunner:
    """Runs read_graph -> build -> save -> publish for one graph per job."""

    def __init__(
        self,
        registry: GraphRegistry,
        metrics: Metrics,
        workers: int,
        core_gate: CoreGate,
        max_graph_bytes: int,
        max_name_bytes: int,
    ) -> None:
        self._registry = registry
        self._max_graph_bytes = max_graph_bytes
        self._max_name_bytes = max_name_bytes
        self._core_gate = core_gate
        self._metrics = metrics
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grail-build")

    def submit(self, record: GraphRecord) -> Future[GraphRecord | None]:
        """Queue the build; the future gives the final record (None if the graph was deleted meanwhile).
        The build's log lines carry the request id of the upload that queued it."""
        return self._pool.submit(contextvars.copy_context().run, self._build, record)

    def shutdown(self) -> None:
        # Queued builds are dropped: their records stay "queued" and the next start rebuilds them from the uploads.
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _build(self, record: GraphRecord) -> GraphRecord | None:
        graph_id, params = record.id, record.params
        started = time.perf_counter()

        def progress(phase: str, fraction: float) -> None:
            self._registry.set_progress(graph_id, phase, fraction)

        try:
            progress("read", 0.0)
            with self._core_gate:
                graph = read_graph(
                    self._registry.upload_path(graph_id),
                    format=params.format,
                    header=params.header,
                    source_column=params.source_column,
                    target_column=params.target_column,
                    max_bytes=self._max_graph_bytes,
                    max_name_bytes=self._max_name_bytes,
                )
                index = ReachabilityIndex.build(
                    graph, dims=params.dims, seed=params.seed, backend=params.backend, progress=progress
                )
            progress("save", 1.0)
            index.save(self._registry.index_path(graph_id))
        except Exception as exc:  # every failure becomes the graph's error, never a dead worker
            if isinstance(exc, GrailError):
                log.warning("graph %s (%s): build failed: %s", graph_id, record.name, exc)
            else:
                log.exception("graph %s (%s): build failed", graph_id, record.name)
            self._metrics.build_finished("failed", time.perf_counter() - started, {})
            return self._registry.fail(graph_id, exc)
        elapsed = time.perf_counter() - started
        stats = index.stats.to_dict()
        phases = stats.get("phase_seconds") or {}
        log.info(
            "graph %s (%s): built in %.3f s: %d nodes, %d edges, %d components, backend %s; phases %s",
            graph_id,
            record.name,
            elapsed,
            stats.get("nodes", -1),
            stats.get("edges", -1),
            stats.get("components", -1),
            stats.get("backend"),
            ", ".join(f"{k} {v:.3f}s" for k, v in phases.items()),
        )
        self._metrics.build_finished("ready", elapsed, phases)
        return self._registry.publish(graph_id, index)
