"""Index builds and rebuilds: jobs of the metadata store, claimed with a lease and run in worker processes
(service.worker) under a memory budget, in two lanes.

Every upload gets an estimate of the memory its build needs (grail_core.sizing, from the first MiB of its text
and its size); one over what a build may use here is refused at once (413, saying how much it needs). The
estimate goes with the build job (``memory_bytes``), and a rebuild's is made from the graph's size when it is
queued. The budget (``--max-build-memory-mb``) is split: a small lane (a quarter, at most ``SMALL_LANE_BYTES``)
with its own worker claims the jobs that fit in it, so that a small graph never waits behind a large one; the
main lane's ``--build-workers`` workers claim any job that fits in what the lane has free (those that fit the
small lane only while it is busy), each reserving its share of the lane (or its estimate, when larger) before it
starts. A build that allocates past its
reservation fails (507) without touching the others or the server.

A claimed job is leased to this server (``--job-lease-s``, renewed by a heartbeat while it runs): a server that dies
loses its jobs to the next claim once their leases expire, and every write that ends a job presents its fencing
token, so that a job taken over is never published twice. A lane claims when it is free, woken at once by this
server's uploads and updates and every ``POLL_S`` otherwise (jobs queued elsewhere, retries coming due).

A build that fails is failed for good (the graph keeps the error; bad input fails the same way every time); a
rebuild that fails is tried again after a backoff (the job's attempts and next attempt, shown in the graph's
record), the graph served exactly from its version and journal meanwhile. A job that finds a store unreachable
(StoreUnavailable: the artifact store, or the database) is neither: it is put off (queued again a few seconds
later, its attempt not counted) until the store answers again, so that an acknowledged upload is built once the
store is back. A stopping server gives its
running jobs back (``release_jobs``): the next start, or another server, takes them at once.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import zlib
from pathlib import Path

from grail_core import IndexFileError, sizing
from grail_core.backends import resolve_backend
from grail_core.errors import InputTooLargeError

from .errors import (
    BUILD_CRASHED,
    GRAPH_TOO_LARGE,
    INTERRUPTED,
    OVERLOADED,
    STORAGE_ERROR,
    STORE_UNAVAILABLE,
    ServiceError,
    storage_error,
)
from .logs import set_request_id
from .metrics import Metrics
from .options import UploadOptions
from .registry import GraphRegistry, describe_error
from .settings import Settings
from .state import ArtifactStore, MetadataStore
from .state.errors import LeaseLost, StateError, StoreUnavailable, UploadNotFound
from .state.metadata import Job, JobKind, JobState
from .updates import write_rows
from .worker import BuildJob, BuildOutcome, BuildWorker, RebuildSource

__all__ = ["BuildRunner", "estimate_upload", "SMALL_LANE_BYTES", "POLL_S", "UploadHead"]

log = logging.getLogger("grail.service.build")

SMALL_LANE_BYTES = 256 << 20
POLL_S = 1.0
_GZIP_MAGIC = b"\x1f\x8b"


class UploadHead:
    """What an upload's estimate reads, kept while the upload streams by: its first ``sizing.SAMPLE_BYTES``
    and its last 4 bytes (a gzip stream's trailer), and its size."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = b""
        self.size = 0

    def __call__(self, chunk: bytes) -> None:
        if len(self.head) < sizing.SAMPLE_BYTES:
            self.head += chunk[: sizing.SAMPLE_BYTES - len(self.head)]
        self.tail = (self.tail + chunk)[-4:]
        self.size += len(chunk)


def estimate_upload(upload: UploadHead, format: str | None) -> sizing.BuildEstimate:
    """The build's memory from the upload's first MiB of text and its size. A gzip upload's text size is
    its trailer's (the size modulo 4 GiB) or its ratio in the first MiB times its size, whichever is larger."""
    head, size = bytes(upload.head), upload.size
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
    trailer = int.from_bytes(upload.tail, "little")
    ratio = len(sample) / max(consumed, 1)
    text_bytes = size if inflater.eof else max(trailer, int(ratio * size))
    return sizing.estimate(sample, max(text_bytes, len(sample)), format)


class BuildRunner:
    """Claims build and rebuild jobs and runs them in worker processes (see the module doc)."""

    def __init__(
        self,
        registry: GraphRegistry,
        metadata: MetadataStore,
        artifacts: ArtifactStore,
        metrics: Metrics,
        settings: Settings,
        owner: str,
    ) -> None:
        self._registry = registry
        self._metadata = metadata
        self._artifacts = artifacts
        self._metrics = metrics
        self._settings = settings
        self.owner = owner
        self._lease_s = settings.job_lease_s
        self.staging_dir = settings.data_dir / "staging"
        budget = settings.max_build_memory_bytes
        self.small_lane_bytes = min(SMALL_LANE_BYTES, budget // 4)
        self.main_lane_bytes = budget - self.small_lane_bytes
        self._share = self.main_lane_bytes // settings.build_workers
        self._cond = threading.Condition()
        self._claim_lock = threading.Lock()
        self._reserved = 0
        self._small_lane_free = True
        self._stopping = False
        self._running: dict[int, Job] = {}  # by job id, with the lease this server holds
        self._lost: set[int] = set()  # jobs whose lease this server lost (deleted, or taken over)
        self._workers = [
            BuildWorker(f"grail-build-{lane}", settings.backend, settings.log_level, settings.log_format)
            for lane in ["small", *(f"main{i}" for i in range(settings.build_workers))]
        ]
        self._threads = [
            threading.Thread(target=self._drive, args=(worker, i == 0), name=worker.name, daemon=True)
            for i, worker in enumerate(self._workers)
        ]
        self._threads.append(threading.Thread(target=self._heartbeat, name="grail-build-leases", daemon=True))

    def start(self) -> None:
        """Start the workers (each warms up in the background), their lanes and the leases' heartbeat."""
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        """A job was queued: free lanes claim now rather than at their next poll."""
        with self._cond:
            self._cond.notify_all()

    def admit(self) -> None:
        """503 before an upload is read when the queue is full."""
        queued = len(self._metadata.list_jobs(states=[JobState.queued]))
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

    def shutdown(self) -> None:
        """Stop claiming, kill the workers (a build under way is lost) and give the running jobs back."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.stop()
        for thread in self._threads:
            if thread.ident is not None:  # an API replica never starts its lanes
                thread.join(timeout=10)
        try:
            released = self._metadata.release_jobs(self.owner)
        except StateError as exc:  # their leases expire instead
            log.warning("cannot give the running jobs back: %s", exc.message)
            return
        if released:
            log.info("gave %d running jobs back for the next start", released)

    # ---- the lanes ---------------------------------------------------------------------------------

    def _drive(self, worker: BuildWorker, small_lane: bool) -> None:
        try:
            worker.start()
        except Exception:  # retried at its first build, which fails with the reason if it fails again
            log.exception("build worker %s did not start", worker.name)
        while not self._stopping:
            claimed = self._claim(small_lane)
            if claimed is None:
                continue
            job, reservation = claimed
            self._running[job.id] = job
            set_request_id(str(job.payload.get("request_id") or "-"))
            try:
                (self._build if job.kind is JobKind.build else self._rebuild)(job, worker, reservation)
            except StoreUnavailable as exc:  # not the job's fault: it waits for the store, its attempt not counted
                log.warning("graph %s: %s put off: %s", job.graph_id, job.kind.value, exc.message)
                self._defer(job, describe_error(exc.kind, exc.message))
            except Exception as exc:  # never a dead lane: the job fails, the next one runs
                log.exception("graph %s: %s failed", job.graph_id, job.kind.value)
                self._failed(job, describe_error(BUILD_CRASHED.name, f"the {job.kind.value} failed: {exc}"))
            finally:
                self._running.pop(job.id, None)
                self._lost.discard(job.id)
                set_request_id("-")
                with self._cond:
                    if small_lane:
                        self._small_lane_free = True
                    else:
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

    def _claim(self, small_lane: bool) -> tuple[Job, int] | None:
        """The next job that fits this lane, claimed, and the memory it may use; None (after waiting up to
        ``POLL_S`` or until woken) when there is none or the lane has nothing free."""
        job = None
        with self._claim_lock:
            if self._stopping:
                return None
            limit: int | None = self.small_lane_bytes
            least: int | None = None
            if not small_lane:
                free = self.main_lane_bytes - self._reserved
                limit = free if free >= min(self._share, self.main_lane_bytes) else None
                # Jobs that fit the small lane are its own while it is free (its worker's smaller memory limit
                # holds them), whichever lane wakes first.
                least = self.small_lane_bytes + 1 if self._small_lane_free else None
            if limit is not None:
                try:
                    job = self._metadata.claim_job(
                        self.owner, self._lease_s, max_memory_bytes=limit, min_memory_bytes=least
                    )
                except StateError as exc:
                    log.warning("cannot claim jobs now: %s", exc.message)
            if job is not None:
                if small_lane:
                    self._small_lane_free = False
                    return job, self.small_lane_bytes
                reservation = min(self.main_lane_bytes, max(job.memory_bytes, self._share))
                with self._cond:
                    self._reserved += reservation
                return job, reservation
        with self._cond:
            if not self._stopping:
                self._cond.wait(POLL_S)
        return None

    def _heartbeat(self) -> None:
        """Renew the leases of the running jobs; a lease lost (the graph deleted, or the job taken over after
        this server stalled) stops its job."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping, self._lease_s / 3)
                if self._stopping:
                    return
            for job in list(self._running.values()):
                try:
                    self._running[job.id] = self._metadata.heartbeat_job(job, self._lease_s)
                except LeaseLost:
                    log.info("graph %s: its %s job is no longer this server's; stopping it", job.graph_id, job.kind)
                    self._lost.add(job.id)
                except StateError as exc:
                    log.warning("cannot renew the lease of job %d: %s", job.id, exc.message)

    def _progress(self, job: Job, phase: str, fraction: float) -> bool:
        return job.id not in self._lost and not self._stopping and self._registry.progress(job, phase, fraction)

    def _current(self, job: Job) -> Job:
        """The job as this server holds it now (a heartbeat renews its lease)."""
        return self._running.get(job.id, job)

    def _staging(self, job: Job) -> Path:
        """Where a worker writes the job's files (and a decompressed or fetched upload): its own folder."""
        return self.staging_dir / f"{job.graph_id}-{job.id}-{job.lease_token}"

    def _worker_job(self, job: Job, options: UploadOptions, memory: int, staging: Path) -> BuildJob:
        return BuildJob(
            graph_id=job.graph_id,
            staging=staging,
            options=options.with_backend(resolve_backend(options.backend)),
            memory_bytes=memory,
            max_graph_bytes=self._settings.max_graph_bytes,
            max_name_bytes=self._settings.max_name_bytes,
            request_id=str(job.payload.get("request_id") or "-"),
        )

    def _failed(self, job: Job, error: dict[str, object]) -> None:
        try:
            if job.kind is JobKind.build:
                self._registry.build_failed(self._current(job), error)
            else:
                self._registry.rebuild_failed(self._current(job), error)
        except StateError as exc:  # its lease expires, and the job is tried again
            log.error("graph %s: cannot record that its %s failed: %s", job.graph_id, job.kind.value, exc.message)

    def _defer(self, job: Job, error: dict[str, object]) -> None:
        try:
            self._registry.job_deferred(self._current(job), error, float(STORE_UNAVAILABLE.retry_after or 1))
        except StateError as exc:  # its lease expires, and the job is tried again
            log.error("graph %s: cannot put its %s off: %s", job.graph_id, job.kind.value, exc.message)

    def _build(self, job: Job, worker: BuildWorker, memory: int) -> None:
        started = time.perf_counter()
        if not self._registry.building(job):
            return
        graph = self._metadata.get_graph(job.graph_id)
        options = UploadOptions.from_json(graph.params)
        staging = self._staging(job)
        outcome: BuildOutcome | None = None
        try:
            staging.mkdir(parents=True, exist_ok=True)
            try:
                if graph.upload_key is None:
                    raise UploadNotFound(job.graph_id)
                upload = self._artifacts.upload_file(graph.upload_key, staging / "upload")
            except UploadNotFound:
                self._failed(
                    job, describe_error(INTERRUPTED.name, "the graph's upload is gone; upload the graph again")
                )
                return
            build = self._worker_job(job, options, memory, staging)
            outcome = worker.run(build.with_upload(upload), lambda p, f: self._progress(job, p, f))
            if outcome is None:  # deleted meanwhile, the job no longer this server's, or the server stops
                return
            if outcome.stats is None:
                assert outcome.kind is not None
                self._failed(job, describe_error(outcome.kind, outcome.message or "", outcome.line))
                return
            if not self._publish(job, staging, outcome, options):
                outcome = None
        except OSError as exc:
            self._failed(job, _disk_error(exc, "fetching the upload"))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            stats = outcome.stats if outcome is not None else None
            self._metrics.build_finished(
                "ready" if stats is not None else "failed",
                time.perf_counter() - started,
                (stats or {}).get("phase_seconds") or {},
            )

    def _publish(self, job: Job, staging: Path, outcome: BuildOutcome, options: UploadOptions, base: int = 0) -> bool:
        """The worker's index published as the graph's next version; False when it was not (the graph was
        deleted, or the job lost), or could not be (the failure recorded)."""
        try:
            published = self._registry.publish(
                self._current(job), staging / "index", outcome.stats, options.backend, base_version=base or None
            )
        except IndexFileError as exc:  # the index the worker saved does not load
            log.error("graph %s: the built index does not load: %s", job.graph_id, exc)
            self._failed(job, describe_error(STORAGE_ERROR.name, "the built index could not be read back"))
            return False
        except StateError as exc:
            if exc.kind in ("DiskFull", "ReadOnlyStorage"):
                self._failed(job, describe_error(exc.kind, exc.message))
                return False
            raise
        return published is not None

    def _rebuild(self, job: Job, worker: BuildWorker, memory: int) -> None:
        started = time.perf_counter()
        delay = self._registry.rebuild_delay_of(job)
        if delay > 0:  # its updates still stream in: one rebuild folds them later
            self._registry.rebuild_deferred(self._current(job), delay)
            return
        source = self._registry.rebuild_source(job)
        if source is None:  # deleted: its job was cancelled
            return
        published, through = source
        if through <= published:
            self._registry.rebuild_done(self._current(job))
            return
        graph = self._metadata.get_graph(job.graph_id)
        options = UploadOptions.from_json(graph.params)
        staging = self._staging(job)
        try:
            staging.mkdir(parents=True, exist_ok=True)
            self._registry.progress(job, "journal", 0.0)
            index = self._artifacts.fetch(job.graph_id, published, verify=False)
            journal = staging / "journal.jsonl"
            write_rows(journal, self._registry.journal(job.graph_id, published, through))
            build = self._worker_job(job, options, memory, staging)
            outcome = worker.run(
                build.with_rebuild(RebuildSource(index, journal, through - published)),
                lambda p, f: self._progress(job, p, f),
            )
            if outcome is None:
                return
            if outcome.stats is None:
                assert outcome.kind is not None
                log.warning("graph %s: rebuild failed: %s: %s", job.graph_id, outcome.kind, outcome.message)
                self._failed(job, describe_error(outcome.kind, outcome.message or "", outcome.line))
                return
            if self._publish(job, staging, outcome, options, base=published):
                log.info(
                    "graph %s: version %d rebuilt and published in %.3f s",
                    job.graph_id,
                    through,
                    time.perf_counter() - started,
                )
                if self._registry.rebuild_if_pending(job.graph_id):  # updates that came meanwhile: the next one
                    self.wake()
        except OSError as exc:
            self._failed(job, _disk_error(exc, "writing the rebuild's journal"))
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _disk_error(exc: OSError, doing: str) -> dict[str, object]:
    """A job's error for a disk that refused its files: full, read-only, or another failure (no path named)."""
    known = storage_error(exc, doing)
    if known is not None:
        return describe_error(known.kind, known.detail)
    log.error("%s failed: %s", doing, exc)
    return describe_error(STORAGE_ERROR.name, f"{doing} failed ({exc.strerror or type(exc).__name__})")
