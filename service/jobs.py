"""Index builds, run in worker processes (service.worker) under a memory budget, in two lanes.

Every upload gets an estimate of the memory its build needs (grail_core.sizing, from the first MiB of its text
and its size); one over what a build may use here is refused at once (413, saying how much it needs). The budget
(``--max-build-memory-mb``) is split: a small lane (a quarter, at most ``SMALL_LANE_BYTES``) with its own worker
takes builds that fit in it, so that a small graph never waits behind a large one; the main lane's
``--build-workers`` workers take the others in order, each build reserving its share of the lane (or its
estimate, when larger) before it starts, and idle main workers help the small lane. A build that allocates
past its reservation fails (507) without touching the others or the server.
"""

from __future__ import annotations

import contextvars
import logging
import shutil
import threading
import time
import zlib
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from grail_core import sizing
from grail_core.backends import resolve_backend
from grail_core.errors import InputTooLargeError

from .errors import BUILD_CRASHED, GRAPH_TOO_LARGE, OVERLOADED, ServiceError
from .logs import current_request_id
from .metrics import Metrics
from .registry import GraphRecord, GraphRegistry
from .settings import Settings
from .worker import BuildJob, BuildOutcome, BuildWorker, RebuildSource

__all__ = ["BuildRunner", "estimate_upload", "SMALL_LANE_BYTES"]

log = logging.getLogger("grail.service.build")

SMALL_LANE_BYTES = 256 << 20
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class _Job:
    record: GraphRecord
    estimate: int
    future: Future[GraphRecord | None] = field(default_factory=Future)
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    rebuild_version: int | None = None  # a rebuild folding in the graph's edge updates up to this version


def estimate_upload(path: Path, format: str | None) -> sizing.BuildEstimate:
    """The build's memory from the upload's first MiB of text and its size. A gzip upload's text size is
    its trailer's (the size modulo 4 GiB) or its ratio in the first MiB times its size, whichever is larger."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(sizing.SAMPLE_BYTES)
        if head[:2] != _GZIP_MAGIC:
            return sizing.estimate(head, size, format)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            sample = inflater.decompress(head, sizing.SAMPLE_BYTES)
        except zlib.error:
            sample = b""
        if not sample:  # corrupt or cut short: its trailer means nothing, and the worker says what is wrong
            return sizing.estimate(b"", size, format)
        consumed = len(head) - len(inflater.unconsumed_tail)
        fh.seek(max(size - 4, 0))
        trailer = int.from_bytes(fh.read(4), "little")
    ratio = len(sample) / max(consumed, 1)
    text_bytes = size if inflater.eof else max(trailer, int(ratio * size))
    return sizing.estimate(sample, max(text_bytes, len(sample)), format)


class BuildRunner:
    """Queues builds and runs them in worker processes; ``submit`` gives a future of the final record."""

    def __init__(self, registry: GraphRegistry, metrics: Metrics, settings: Settings) -> None:
        self._registry = registry
        self._metrics = metrics
        self._settings = settings
        budget = settings.max_build_memory_bytes
        self.small_lane_bytes = min(SMALL_LANE_BYTES, budget // 4)
        self.main_lane_bytes = budget - self.small_lane_bytes
        self._share = self.main_lane_bytes // settings.build_workers
        self._cond = threading.Condition()
        self._small: deque[_Job] = deque()
        self._main: deque[_Job] = deque()
        self._reserved = 0
        self._stopping = False
        self._workers = [
            BuildWorker(f"grail-build-{lane}", settings.backend, settings.log_level, settings.log_format)
            for lane in ["small", *(f"main{i}" for i in range(settings.build_workers))]
        ]
        self._threads = [
            threading.Thread(target=self._drive, args=(worker, i == 0), name=worker.name, daemon=True)
            for i, worker in enumerate(self._workers)
        ]

    def start(self) -> None:
        """Start the workers (each warms up in the background) and their lanes."""
        for thread in self._threads:
            thread.start()

    def admit(self) -> None:
        """503 before an upload is read when the queue is full."""
        with self._cond:
            queued = len(self._small) + len(self._main)
        if queued >= self._settings.max_queued_builds:
            raise ServiceError(
                OVERLOADED,
                f"{queued} builds are waiting (--max-queued-builds); upload again later",
                {"Retry-After": "5"},
            )

    def check(self, estimate: sizing.BuildEstimate) -> None:
        """413 for a graph whose text is over --max-graph-mb (a gzip body by its ratio in the first MiB: a zip
        bomb is refused before anything decompresses it) or whose build needs more memory than any build may
        have here."""
        if estimate.text_bytes > self._settings.max_graph_bytes:
            raise InputTooLargeError(
                f"the graph decompresses to about {estimate.text_bytes >> 20} MiB (judging by its first MiB), more "
                f"than this server's {self._settings.max_graph_mb} MiB (--max-graph-mb)",
            )
        if estimate.bytes > self.main_lane_bytes:
            raise ServiceError(
                GRAPH_TOO_LARGE,
                f"this graph (about {estimate.text_bytes >> 20} MiB of {estimate.format} text, some "
                f"{estimate.edges} edges) needs about {estimate.bytes >> 20} MiB to build; this server builds with "
                f"at most {self.main_lane_bytes >> 20} MiB (--max-build-memory-mb)",
            )

    def submit(self, record: GraphRecord, estimate: int) -> Future[GraphRecord | None]:
        """Queue the build; the future gives the final record (None if the graph was deleted meanwhile).
        The build's log lines carry the request id of the upload that queued it."""
        job = _Job(record, estimate)
        with self._cond:
            (self._small if estimate <= self.small_lane_bytes else self._main).append(job)
            self._cond.notify_all()
        return job.future

    def rebuild_if_pending(self, graph_id: str) -> Future[GraphRecord | None] | None:
        """Queue a rebuild of a ready graph that has edge updates pending, unless one is queued or running
        (that one's end queues the next): the worker folds in every update journaled when it starts. In the lane
        its size takes, like a build; None when nothing was queued."""
        registry = self._registry
        try:
            version = registry.ready_version(graph_id)
            record = registry.get(graph_id)
        except ServiceError:
            return None
        if not version.pending.updates or self._stopping or not registry.start_rebuild(graph_id, version.number):
            return None
        edges = version.stats.edges + version.pending.added_edges
        estimate = sizing.build_bytes(record.params.format or "edgelist", 0, version.num_nodes, edges)
        job = _Job(record, estimate, rebuild_version=version.number)
        with self._cond:
            (self._small if estimate <= self.small_lane_bytes else self._main).append(job)
            self._cond.notify_all()
        return job.future

    def shutdown(self) -> None:
        # Queued and running builds are dropped: their records stay queued or building, and the next start
        # rebuilds them from their uploads.
        with self._cond:
            self._stopping = True
            pending = [*self._small, *self._main]
            self._small.clear()
            self._main.clear()
            self._cond.notify_all()
        for job in pending:
            job.future.cancel()
        for worker in self._workers:
            worker.stop()

    # ---- the lanes ---------------------------------------------------------------------------------------

    def _drive(self, worker: BuildWorker, small_lane: bool) -> None:
        try:
            worker.start()
        except Exception:  # retried at its first build, which fails with the reason if it fails again
            log.exception("build worker %s did not start", worker.name)
        while True:
            taken = self._next(small_lane)
            if taken is None:
                return
            job, reservation, from_main = taken
            try:
                run = self._run if job.rebuild_version is None else self._rebuild
                job.context.run(run, job, worker, reservation)
            except Exception as exc:  # never a dead lane: the build is failed, the next one runs
                log.exception("graph %s: build failed", job.record.id)
                job.future.set_exception(exc)
            finally:
                if from_main:
                    with self._cond:
                        self._reserved -= reservation
                        self._cond.notify_all()
            try:
                if not self._stopping:
                    worker.start()  # a worker that retired or died is replaced now, not at the next build
            except Exception:
                if self._stopping:  # shut down while it started (its warm-up reads a graph of every format)
                    log.info("build worker %s stopped while it started", worker.name)
                else:
                    log.exception("build worker %s did not start", worker.name)

    def _next(self, small_lane: bool) -> tuple[_Job, int, bool] | None:
        """The next job of this lane and the memory it may use (the job, its reservation, whether that is
        taken from the main lane's budget); blocks until there is one that fits, None once stopping."""
        with self._cond:
            while not self._stopping:
                if small_lane and self._small:
                    return self._small.popleft(), self.small_lane_bytes, False
                if not small_lane:
                    free = self.main_lane_bytes - self._reserved
                    if self._main:
                        need = min(self.main_lane_bytes, max(self._main[0].estimate, self._share))
                        if need <= free:
                            self._reserved += need
                            return self._main.popleft(), need, True
                    elif self._small and self.small_lane_bytes <= free:
                        self._reserved += self.small_lane_bytes
                        return self._small.popleft(), self.small_lane_bytes, True
                self._cond.wait()
            return None

    def _run(self, job: _Job, worker: BuildWorker, memory: int) -> None:
        record, registry = job.record, self._registry
        graph_id = record.id
        started = time.perf_counter()
        if not registry.set_progress(graph_id, "read", 0.0):
            job.future.set_result(self._current(graph_id))
            return
        build = self._build_job(record, memory, upload=registry.upload_path(graph_id))
        staging = build.staging
        try:
            outcome: BuildOutcome | None = worker.run(build, lambda p, f: registry.set_progress(graph_id, p, f))
        except Exception as exc:  # the worker could not start
            log.exception("graph %s: no build worker", graph_id)
            outcome = BuildOutcome(kind=BUILD_CRASHED.name, message=f"no build worker could start: {exc}")
        try:
            if outcome is None:  # deleted meanwhile, its record could not be written, or the server stops
                final = self._current(graph_id)
            elif outcome.stats is not None:
                final = registry.publish(graph_id, staging / "index")
            else:
                assert outcome.kind is not None
                final = registry.fail(graph_id, outcome.kind, outcome.message or "", outcome.line)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        elapsed = time.perf_counter() - started
        result = "ready" if final is not None and final.stats is not None and final.error is None else "failed"
        phases = (final.stats or {}).get("phase_seconds", {}) if final is not None else {}
        self._metrics.build_finished(result, elapsed, phases)
        if final is not None and final.error is not None:
            log.warning("graph %s (%r): build failed: %s", graph_id, record.name, final.error.get("message"))
        job.future.set_result(final)

    def _build_job(
        self, record: GraphRecord, memory: int, upload: Path | None = None, rebuild: RebuildSource | None = None
    ) -> BuildJob:
        """What a worker needs to build ``record``'s graph with ``memory`` bytes, from ``upload`` or, for a
        rebuild, from the served index and its journal; the backend resolved here, once."""
        return BuildJob(
            graph_id=record.id,
            name=record.name,
            staging=self._registry.staging_path(record.id),
            options=record.params.with_backend(resolve_backend(record.params.backend)),
            memory_bytes=memory,
            max_graph_bytes=self._settings.max_graph_bytes,
            max_name_bytes=self._settings.max_name_bytes,
            request_id=current_request_id(),
            upload=upload,
            rebuild=rebuild,
        )

    def _rebuild(self, job: _Job, worker: BuildWorker, memory: int) -> None:
        record, registry = job.record, self._registry
        graph_id = record.id
        assert job.rebuild_version is not None
        started = time.perf_counter()
        source = RebuildSource(registry.index_path(graph_id), registry.journal_of(graph_id).path)
        build = self._build_job(record, memory, rebuild=source)
        staging = build.staging
        final: GraphRecord | None = None
        try:
            outcome = worker.run(build, lambda p, f: registry.rebuild_progress(graph_id, p, f))
            if outcome is not None and outcome.stats is not None:
                if registry.publish_rebuild(graph_id, staging / "index") is not None:
                    final = self._current(graph_id)
                    log.info(
                        "graph %s: version %d rebuilt and published in %.3f s",
                        graph_id,
                        job.rebuild_version,
                        time.perf_counter() - started,
                    )
            elif outcome is not None:
                # The served index and its journal stay exact; the next update queues another try.
                log.warning("graph %s: rebuild failed: %s: %s", graph_id, outcome.kind, outcome.message)
        except Exception:
            log.exception("graph %s: rebuild failed", graph_id)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            registry.end_rebuild(graph_id)
        job.future.set_result(final)
        if final is not None:  # updates that came during the rebuild: the next one
            self.rebuild_if_pending(graph_id)

    def _current(self, graph_id: str) -> GraphRecord | None:
        try:
            return self._registry.get(graph_id)
        except ServiceError:
            return None
