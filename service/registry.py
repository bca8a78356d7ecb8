"""The graphs this server serves: the metadata store's rows, and the version of each that queries read.

The metadata store (service.state) is the truth: graphs and their names, published versions, the edge-update
journal, build jobs. The registry keeps, for each live graph, its row as this server last wrote or read it and
its current ``Version`` (grail_core.version): the published version's index, loaded from the artifact store,
with the journal rows past it applied. A request takes that Version once (``ready_version``: a dictionary
lookup, no lock, no database) and answers from it to the end, whatever comes after: the next version replaces
it for the next request only, and a replaced version's files are removed after a grace period (a
memory-mapped file stays readable after its unlink anyway).

Every write reaches the store first and memory only once it has committed:

- ``add``: the graph's row and its build job, in one transaction (its upload is in the artifact store).
- ``update``: planned against the current Version, journaled (one row, group commit), then applied; one
  graph's updates take turns on that graph's lock, no other graph waits. ``update_many`` does the same for
  updates of several graphs (service.update_queue's batches), their rows in one transaction.
- ``publish``: a build's or a rebuild's index stored as a new version (create-only, checksummed), loaded, then
  published (one transaction: ready, the journal rows it folds in dropped, a replacement takes its name) and
  served with the journal rows past it applied.
- ``delete``: one transaction; gone from memory once it has committed.

A graph's journal is folded into new labels by a rebuild (a build worker's job): at once after a lone update,
under a stream of updates once it pauses (``rebuild_wait``), and at once, stream or not, once queries on its
version have spent ``REBUILD_SEARCH_S`` searching the updated graph (``ready_version``: the job made urgent).

At start every graph is listed at once (``/health`` answers), and each ready one loads its version and
replays its journal in the background (``load_all``), answering 409 GraphLoading with Retry-After until it is
current. ``sync`` brings one graph in line with the store (what another server wrote, on PostgreSQL).

With a version cache (``cache_bytes``: an API replica, service.cache) nothing loads at start: a graph's version is
loaded on its first use (``acquire``, before the request's route), and the least recently used versions are
dropped while the loaded ones take more memory than the bound; ``sync`` then keeps the rows of graphs not loaded
and loads new versions only of those that are.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from grail_core import IndexFileError, sizing
from grail_core.backends import resolve_backend
from grail_core.errors import SearchStopped
from grail_core.labels import Labels
from grail_core.storage import read_index_dir
from grail_core.version import FORECAST_MARGIN, StopCondition, Version, load_version

from .cache import VersionCache, memory_bytes
from .errors import GRAPH_FAILED, GRAPH_LOADING, GRAPH_NOT_READY, ServiceError, truncate
from .options import UploadOptions
from .state import ArtifactStore, MetadataStore
from .state.artifacts import artifact_key
from .state.errors import (
    ArtifactCorrupt,
    ArtifactExists,
    ArtifactNotFound,
    GraphNotFound,
    LeaseLost,
    StateError,
    VersionConflict,
    VersionStateError,
)
from .state.metadata import URGENT, Change, ChangeKind, Graph, GraphStatus, Job, JobKind, JobState, JournalTimes
from .updates import Journal, JournalGap, Row, encode, fold_journal

__all__ = [
    "GraphRegistry",
    "GraphRecord",
    "Progress",
    "JOURNAL_PAGE",
    "REBUILD_QUIET_S",
    "REBUILD_MAX_WAIT_S",
    "REBUILD_MAX_PENDING",
    "UpdateOutcome",
    "rebuild_wait",
]

log = logging.getLogger("grail.service.registry")

# Journal rows read from the store at a time (a replay's memory is a page of rows, not the whole journal).
JOURNAL_PAGE = 10_000
# An update that meets another server's newer version catches up and is planned again, this many times.
_UPDATE_TRIES = 3
# A rebuild this server queued is assumed to be under way for this long before it asks the store again.
_REBUILD_RECHECK_S = 30.0
# Under a stream of updates (one graph's updates less than REBUILD_QUIET_S apart) its rebuild waits until the
# stream pauses for that long, but no longer than REBUILD_MAX_WAIT_S after the oldest update it would fold in (or
# the publication of the version before, if later), and not at all once REBUILD_MAX_PENDING updates are pending:
# each rebuild costs a build worker's CPU and every server a publish and a load, so under a stream one rebuild
# folds many updates, and queries (exact with any number pending) never answer past that many. A lone update is
# folded in at once. The times are the journal's, in the metadata store: every server and builder sharing it
# decides alike, whichever server the updates came through (``rebuild_wait``).
REBUILD_QUIET_S = 2.0
REBUILD_MAX_WAIT_S = 30.0
REBUILD_MAX_PENDING = 1_000
# Once queries on a graph's version have spent this many seconds on pairs that its updates left to a search on
# the updated graph (``Version.search_seconds``: on some graphs, updates that split large strongly connected
# components leave most pairs to searches of milliseconds each), its rebuild runs at once, stream or not: the
# rebuild costs a build worker's CPU, the searches would go on costing the queries'.
REBUILD_SEARCH_S = 1.0
# How long a batch whose searches made the rebuild urgent waits for it, at a time, before it searches on: on a
# machine of few cores the searches beside the build worker slowed the rebuild from 1.4 s to 18 s
# (benchmarks/results/updates-auto-rebuild-vm.md).
REBUILD_PATIENCE_S = 10.0
# An update of ``update_many``: its answer, its refusal, or None (left to ``update``).
UpdateOutcome = dict[str, Any] | BaseException | None
_T = TypeVar("_T")
_DAMAGED = {"type": IndexFileError.kind, "message": "index files are missing or corrupt; upload the graph again"}


@dataclass
class Progress:
    """Long work on a graph, as its record shows it: a phase and the fraction of it done."""

    phase: str
    fraction: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "progress": round(min(max(self.fraction, 0.0), 1.0), 4)}


class _Entry:
    """One live graph in memory."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.options = UploadOptions.from_json(graph.params)
        self.lock = threading.RLock()  # orders this graph's updates and version swaps
        self.version: Version | None = None  # what queries read; None until loaded
        self.loading: Progress | None = None  # its version loads (after a start, or another server built it)
        self.load_error: dict[str, Any] | None = None  # its published version does not load here
        self.build: Progress | None = None  # this server builds it
        self.rebuild: Progress | None = None  # this server rebuilds it
        self.rebuild_asked_at = 0.0  # when this server last made sure a rebuild is queued (0: not since the last)
        self.hastened: Labels | None = None  # the labels whose versions' searches made this server hasten it
        self.relabeled = threading.Condition()  # notified as a version is served (new labels: a rebuild)
        self.deleted = False
        self.settled: Future[None] = Future()  # done once ready and loaded here, failed, or deleted

    @property
    def id(self) -> str:
        return self.graph.id

    def settle(self) -> None:
        if not self.settled.done():
            self.settled.set_result(None)


@dataclass(frozen=True)
class GraphRecord:
    """A graph as its record shows it: the store's row and what this server adds (progress, its version)."""

    graph: Graph
    options: UploadOptions
    status: str
    error: dict[str, Any] | None
    progress: Progress | None
    version: Version | None
    loading: Progress | None
    rebuild: dict[str, Any] | None


class GraphRegistry:
    """See the module doc. ``gate``: held around every call into grail_core (service.warmup.CoreGate).
    ``serving``: False in a builder (service.roles), which publishes versions and serves none: what it builds is
    loaded once, to check it, and not kept. ``cache_bytes``: the bound of the version cache of an API replica
    (None: every ready graph loaded at start and kept)."""

    def __init__(
        self,
        metadata: MetadataStore,
        artifacts: ArtifactStore,
        gate: AbstractContextManager[Any] | None = None,
        serving: bool = True,
        cache_bytes: int | None = None,
    ) -> None:
        self.metadata = metadata
        self.artifacts = artifacts
        self.serving = serving
        self._gate = gate if gate is not None else contextlib.nullcontext()
        self._graphs: dict[str, _Entry] = {}  # by id
        self._names: dict[str, str] = {}  # name -> id, for graphs that hold their name
        self._lock = threading.Lock()  # the two maps' writers
        self.cache = VersionCache(cache_bytes, self._drop) if cache_bytes is not None and serving else None

    # ---- the maps ----------------------------------------------------------------------------------

    def _entry(self, ref: str) -> _Entry:
        """The live graph with this id or name (an id first); GraphNotFound otherwise."""
        entry = self._graphs.get(ref)
        if entry is None:
            graph_id = self._names.get(ref)
            entry = self._graphs.get(graph_id) if graph_id is not None else None
        if entry is None or entry.deleted:
            raise GraphNotFound(ref)
        return entry

    def _remember(self, graph: Graph, fresh: _Entry | None = None) -> _Entry:
        """The entry of a live graph, made (``fresh`` when given) or refreshed from its row; its name indexed. A
        graph that held the name here is gone (names are unique among live graphs: a replacement's publish
        deleted it). A ready row is remembered only once its entry holds a version: the name, and the id's
        record saying ready, come with something to answer from."""
        with self._lock:
            entry = self._graphs.get(graph.id)
            if entry is None:
                entry = self._graphs[graph.id] = fresh if fresh is not None else _Entry(graph)
            else:
                if self._names.get(entry.graph.name) == graph.id and entry.graph.name != graph.name:
                    del self._names[entry.graph.name]
                entry.graph = graph
            holder = self._names.get(graph.name)
            self._names[graph.name] = graph.id
        if holder is not None and holder != graph.id:
            self._forget(holder)
        return entry

    def _forget(self, graph_id: str) -> None:
        """A graph deleted in the store: gone from memory (requests holding its version finish on it)."""
        with self._lock:
            entry = self._graphs.pop(graph_id, None)
            if entry is None:
                return
            if self._names.get(entry.graph.name) == graph_id:
                del self._names[entry.graph.name]
            entry.deleted = True
        if self.cache is not None:
            self.cache.discard(graph_id)
        entry.settle()

    # ---- the version cache -------------------------------------------------------------------------

    def _set_version(self, entry: _Entry, version: Version) -> None:
        """The version queries of the graph read from now on (under the graph's lock), counted in the cache."""
        if self.cache is None:
            entry.version = version
            return
        held = entry.version
        # An update shares its labels with the version it updates: its size is measured again later (``release``).
        nbytes = None if held is not None and held.labels is version.labels else memory_bytes(version)
        self.cache.install(entry.id, nbytes, functools.partial(setattr, entry, "version", version))

    def _drop(self, graph_id: str) -> None:
        """The cache's eviction: the graph's version forgotten (requests that hold it finish on it); it loads
        again on its next use. Takes no lock (the cache's is held)."""
        entry = self._graphs.get(graph_id)
        if entry is not None:
            entry.version = None
            log.info("graph %s: version dropped from the cache (least recently used)", graph_id)

    def _loads_on_use(self, entry: _Entry) -> bool:
        """A graph with a published version that the cache does not hold now (it loads on its next use)."""
        graph = entry.graph
        return (
            self.cache is not None
            and entry.version is None
            and not entry.deleted
            and entry.load_error is None
            and graph.status is GraphStatus.ready
            and graph.published_version is not None
        )

    def acquire(self, ref: str) -> str | None:
        """The graph (by id or name) loaded, unless the cache holds it, and kept until ``release``: its id. None
        when there is no cache, no such graph, or its version does not load now (the route answers as the
        registry says)."""
        if self.cache is None:
            return None
        try:
            entry = self._entry(ref)
            self.cache.acquire(entry.id, functools.partial(self._load_on_use, entry))
        except GraphNotFound:
            return None
        except Exception as exc:  # the store is away for now: the route answers 409 GraphLoading
            log.warning("graph %s: cannot load it now: %s", ref, exc)
            return None
        return entry.id

    def acquire_held(self, ref: str) -> str | None:
        """``acquire`` of a graph the cache holds (no load: no thread needed); None otherwise."""
        if self.cache is None:
            return None
        entry = self._graphs.get(ref)
        if entry is None:
            graph_id = self._names.get(ref)
            entry = self._graphs.get(graph_id) if graph_id is not None else None
        if entry is None or not self.cache.acquire_held(entry.id):
            return None
        return entry.id

    def release(self, graph_id: str) -> None:
        """A request done with the graph ``acquire`` kept; its version measured again from time to time."""
        if self.cache is None:
            return
        entry = self._graphs.get(graph_id)
        version = entry.version if entry is not None else None
        due = version is not None and self.cache.measure_due(graph_id)
        self.cache.release(graph_id, memory_bytes(version) if due and version is not None else None)

    def _load_on_use(self, entry: _Entry) -> None:
        if not self._loads_on_use(entry):
            return
        started = time.perf_counter()
        self._refresh(entry)
        version = entry.version
        if version is not None:
            log.info(
                "graph %s: version %d loaded on use in %.3f s (%d journaled updates replayed)",
                entry.id,
                version.number,
                time.perf_counter() - started,
                version.number - version.labels.version,
            )
        self.rebuild_if_pending(entry.id)

    # ---- start-up ----------------------------------------------------------------------------------

    def start(self) -> list[str]:
        """Every live graph of the store, in memory (not loaded yet); returns the ids of those to load."""
        to_load = []
        for graph in self.metadata.list_graphs():
            entry = self._remember(graph)
            if not self.serving:
                continue
            if graph.status is GraphStatus.ready and graph.published_version is not None:
                if self.cache is not None:  # loaded on its first use
                    entry.settle()
                    continue
                entry.loading = Progress("queued")
                to_load.append(graph.id)
            elif graph.status is GraphStatus.failed:
                entry.settle()
        return to_load

    def load(self, graph_id: str) -> None:
        """Load a graph's published version and replay its journal (``start``'s graphs, one by one)."""
        entry = self._graphs.get(graph_id)
        if entry is None or entry.deleted:
            return
        started = time.perf_counter()
        self._refresh(entry)
        if entry.version is not None:
            pending = entry.version.number - entry.version.labels.version
            log.info(
                "graph %s: version %d loaded in %.3f s (%d journaled updates replayed)",
                graph_id,
                entry.version.number,
                time.perf_counter() - started,
                pending,
            )

    def loading(self) -> list[dict[str, Any]]:
        """What is loading now, for /ready: each graph with its phase and progress."""
        return [
            {"id": e.id, "name": e.graph.name, **e.loading.to_json()}
            for e in list(self._graphs.values())
            if e.loading is not None and not e.deleted
        ]

    # ---- reads -------------------------------------------------------------------------------------

    def ready_version(self, ref: str) -> Version:
        """The graph's current version, for a request to answer from: 404 when there is no such graph, 409
        while it is not ready (GraphLoading, with Retry-After, while its version loads), 424 when its build
        failed."""
        entry = self._entry(ref)
        version = entry.version
        if version is None:
            if entry.loading is not None or self._loads_on_use(entry):
                phase = entry.loading.phase if entry.loading is not None else "not loaded on this server now"
                raise ServiceError(GRAPH_LOADING, f"graph {entry.id!r} is loading ({phase}); try again in a moment")
            record = self._record(entry, [])
            if record.status == GraphStatus.failed.value:  # for good: 424, the build it depends on failed
                error = record.error or {}
                message = error.get("message", "unknown error")
                raise ServiceError(GRAPH_FAILED, f"graph {entry.id!r} failed to build: {message}", build=error)
            raise ServiceError(GRAPH_NOT_READY, f"graph {entry.id!r} is {record.status}, not ready")
        self._hasten_if_searched(entry, version)
        return version

    def answered(
        self, ref: str, version: Version, ask: Callable[[Version, StopCondition | None], _T]
    ) -> tuple[_T, Version]:
        """``ask`` (a batch) on ``version``, and the version that answered it. Its searches of pairs that the
        updates left open ask, between parts, for the graph's rebuild once they have cost REBUILD_SEARCH_S
        (``_hasten_if_searched``), then wait for it (REBUILD_PATIENCE_S at a time, searching a part in between)
        and stop once a version with new labels is published: the whole batch is
        then answered on the newest version (read from start to end; its searches on some graphs cost
        milliseconds a pair, the new labels' tests microseconds)."""
        if not version.updates_pending:
            return ask(version, None), version
        entry = self._entry(ref)

        def relabeled() -> bool:
            newest = entry.version
            return newest is not None and newest.labels is not version.labels

        def rebuilt(forecast: float) -> bool:
            self._hasten_if_searched(entry, version, forecast)
            # The rebuild is urgent: the cores are its, for a while; not where calls run one at a time (the
            # batch holds the gate that the new version's load needs).
            if entry.hastened is version.labels and not getattr(self._gate, "serial", False):
                with entry.relabeled:
                    entry.relabeled.wait_for(relabeled, timeout=REBUILD_PATIENCE_S)
            return relabeled()

        try:
            return ask(version, rebuilt), version
        except SearchStopped:
            newest = self.ready_version(ref)
            log.info(
                "graph %s: a batch stopped its searches on version %d for the rebuilt labels of version %d",
                entry.id,
                version.number,
                newest.number,
            )
            return ask(newest, None), newest

    def _hasten_if_searched(self, entry: _Entry, version: Version, forecast: float = 0.0) -> None:
        """Once queries on ``version`` have spent REBUILD_SEARCH_S searching the updated graph (checked as a
        query starts, after an update, and between a batch's parts of searches), or a batch's searches left are
        ``forecast`` to take FORECAST_MARGIN times as long, the graph's rebuild is made due now and urgent, or
        queued so (a store's write, on a thread of its own, off the request)."""
        searched = version.search_seconds
        if entry.hastened is version.labels or (
            searched < REBUILD_SEARCH_S and forecast < FORECAST_MARGIN * REBUILD_SEARCH_S
        ):
            return
        entry.hastened = version.labels
        log.info(
            "graph %s: queries spent %.1f s searching %d pending updates (a batch's searches left: %.1f s more): "
            "rebuild now",
            entry.id,
            searched,
            version.pending.updates,
            forecast,
        )

        def hasten() -> None:
            try:
                job = self.metadata.hasten_job(entry.id, JobKind.rebuild)
                if job is None:
                    memory = self._rebuild_memory(entry, version)
                    job = self.metadata.enqueue_job(entry.id, JobKind.rebuild, {URGENT: True}, memory_bytes=memory)
                    entry.rebuild_asked_at = time.monotonic()
                    if job.state is JobState.queued and not job.urgent:  # queued meanwhile, to wait for a pause
                        self.metadata.hasten_job(entry.id, JobKind.rebuild)
            except GraphNotFound:
                pass
            except StateError as exc:  # a full disk: the next query asks again
                entry.hastened = None
                log.warning("graph %s: cannot hasten its rebuild now: %s", entry.id, exc.message)

        threading.Thread(target=hasten, name=f"grail-hasten-{entry.id}", daemon=True).start()

    def holds_name(self, name: str) -> bool:
        """Whether a graph holds ``name`` (the store has the last word when a graph is added)."""
        return name in self._names

    def record(self, ref: str) -> GraphRecord:
        entry = self._entry(ref)
        return self._record(entry, self.metadata.list_jobs(entry.id, states=_SHOWN_JOBS))

    def records(self) -> list[GraphRecord]:
        jobs: dict[str, list[Job]] = {}
        for job in self.metadata.list_jobs(states=_SHOWN_JOBS):
            jobs.setdefault(job.graph_id, []).append(job)
        entries = sorted((e for e in list(self._graphs.values()) if not e.deleted), key=_created)
        return [self._record(entry, jobs.get(entry.id, [])) for entry in entries]

    def count_by_status(self) -> dict[str, int]:
        counts = {status.value: 0 for status in GraphStatus}
        for entry in list(self._graphs.values()):
            counts[GraphStatus.failed.value if entry.load_error else entry.graph.status.value] += 1
        return counts

    def _record(self, entry: _Entry, jobs: list[Job]) -> GraphRecord:
        graph = entry.graph
        status, error = graph.status.value, graph.error
        if entry.load_error is not None:
            status, error = GraphStatus.failed.value, entry.load_error
        progress = entry.build if graph.status in (GraphStatus.queued, GraphStatus.building) else None
        return GraphRecord(
            graph=graph,
            options=entry.options,
            status=status,
            error=error,
            progress=progress,
            version=entry.version,
            loading=entry.loading,
            rebuild=self._rebuild_record(entry, jobs),
        )

    @staticmethod
    def _rebuild_record(entry: _Entry, jobs: list[Job]) -> dict[str, Any] | None:
        """The latest rebuild job, while it is queued or running, or when it failed for good with updates still
        pending; with this server's progress of it."""
        rebuilds = [job for job in jobs if job.kind is JobKind.rebuild]
        if not rebuilds:
            return None
        job = max(rebuilds, key=lambda j: j.id)
        version = entry.version
        if job.state is JobState.failed and (version is None or version.number == version.labels.version):
            return None
        shown: dict[str, Any] = {
            "state": job.state.value,
            "attempts": job.attempts,
            "max_attempts": job.max_attempts,
            "error": job.error,
            "next_attempt_at": job.next_attempt_at if job.state is JobState.queued else None,
            "urgent": job.urgent,
        }
        if job.state is JobState.running and entry.rebuild is not None:
            shown.update(entry.rebuild.to_json())
        else:
            shown.update({"phase": job.state.value, "progress": 0.0})
        return shown

    # ---- uploads and builds ------------------------------------------------------------------------

    def add(
        self,
        graph_id: str,
        options: UploadOptions,
        *,
        name: str | None,
        replace: bool,
        upload_key: str,
        upload_bytes: int,
        memory_bytes: int,
        request_id: str,
    ) -> GraphRecord:
        """A new graph and its build job (one transaction); with ``replace``, one that takes ``name`` over once
        built. NameTaken, InvalidName, StorageFull: nothing was added."""
        graph = self.metadata.create_graph(
            graph_id,
            options.to_json(),
            name=name,
            replace=replace,
            upload_bytes=upload_bytes,
            upload_key=upload_key,
            build={"request_id": request_id},
            build_memory_bytes=memory_bytes,
        )
        if replace and name is not None:
            for stale in [e.id for e in list(self._graphs.values()) if e.graph.pending_name == name]:
                self._forget(stale)  # an older replacement for the same name: superseded
        entry = self._remember(graph)
        return self._record(entry, [])

    def settled(self, graph_id: str) -> Future[None]:
        """Done once the graph is ready (and served here), failed, or deleted."""
        entry = self._graphs.get(graph_id)
        if entry is None:
            done: Future[None] = Future()
            done.set_result(None)
            return done
        return entry.settled

    def building(self, job: Job) -> bool:
        """A build of ``job``'s graph starts here; False when the graph is gone."""
        try:
            graph = self.metadata.set_status(job.graph_id, GraphStatus.building)
        except GraphNotFound:
            self._forget(job.graph_id)
            return False
        entry = self._remember(graph)
        entry.build = Progress("read")
        return True

    def progress(self, job: Job, phase: str, fraction: float) -> bool:
        """A build's or a rebuild's progress; False when the graph is gone (the work stops)."""
        entry = self._graphs.get(job.graph_id)
        if entry is None or entry.deleted:
            return False
        if job.kind is JobKind.build:
            entry.build = Progress(phase, fraction)
        else:
            entry.rebuild = Progress(phase, fraction)
        return True

    def build_failed(self, job: Job, error: dict[str, Any]) -> None:
        """A build that failed for good: its graph is failed, saying why (the store does both at once), and its
        upload is removed (a build is never tried again from it)."""
        try:
            self.metadata.fail_job(job, error, retry=False)
        except LeaseLost:
            return  # deleted meanwhile, or another server took the job over
        self._refresh_row(job.graph_id)
        entry = self._graphs.get(job.graph_id)
        if entry is not None and entry.graph.upload_key is not None:
            self._drop_upload(entry.graph.upload_key)

    def _drop_upload(self, key: str) -> None:
        try:
            self.artifacts.delete_upload(key)
        except StateError as exc:  # the orphan sweep removes it later
            log.warning("upload %s left for the sweep: %s", key, exc.message)

    def rebuild_failed(self, job: Job, error: dict[str, Any]) -> None:
        """A rebuild that failed: tried again after a backoff while attempts remain (the record shows the error
        and when), the graph served as it is meanwhile."""
        entry = self._graphs.get(job.graph_id)
        try:
            ended = self.metadata.fail_job(job, error, retry=True)
        except LeaseLost:
            return
        if entry is not None:
            entry.rebuild = None
            if ended.state is not JobState.queued:
                entry.rebuild_asked_at = 0.0  # failed for good: the next update queues another one

    def job_deferred(self, job: Job, error: dict[str, Any], delay_s: float) -> None:
        """A build or rebuild put off (a store cannot be reached): queued again after ``delay_s``, its attempt not
        counted (the job's row keeps the error); a graph waiting for its build shows as queued meanwhile."""
        try:
            self.metadata.defer_job(job, error, delay_s)
            if job.kind is JobKind.build:
                self.metadata.set_status(job.graph_id, GraphStatus.queued)
        except (LeaseLost, GraphNotFound):
            return
        entry = self._graphs.get(job.graph_id)
        if entry is not None:
            entry.build = entry.rebuild = None
            self._refresh_row(job.graph_id)

    def _refresh_row(self, graph_id: str) -> None:
        try:
            graph = self.metadata.get_graph(graph_id)
        except GraphNotFound:
            self._forget(graph_id)
            return
        if graph.id != graph_id:  # the id is now another graph's name
            self._forget(graph_id)
            return
        entry = self._remember(graph)
        if graph.status is not GraphStatus.building:
            entry.build = None
        if graph.status is GraphStatus.failed:
            entry.settle()

    def publish(
        self,
        job: Job,
        folder: Path,
        stats: dict[str, Any] | None,
        backend: str,
        base_version: int | None = None,
    ) -> Graph | None:
        """Serve the index a build or a rebuild left in ``folder``: stored as its version (create-only), loaded
        (its checksums verified), published with ``job`` completed, then served with the journal rows past it.
        None, and nothing stored, when the graph was deleted or the job is no longer this server's."""
        graph_id = job.graph_id
        number = _saved_version(folder)
        known = self._graphs.get(graph_id)
        upload_key = known.graph.upload_key if known is not None else None
        manifest = self._store(graph_id, number, folder)
        try:
            with self._gate:
                loaded = _load(self.artifacts.fetch(graph_id, number, verify=False), backend)
            self.metadata.stage_version(
                graph_id,
                number,
                artifact_key=artifact_key(graph_id, number),
                checksum=manifest.checksum,
                size_bytes=manifest.size_bytes,
                base_version=base_version,
            )
            graph = self.metadata.publish_version(graph_id, number, stats=stats, job=job)
        except (GraphNotFound, LeaseLost, VersionStateError, IndexFileError, ArtifactCorrupt) as exc:
            # Refused for certain (a lost answer of a commit that may have happened is StoreUnavailable, and
            # keeps the files): what was stored is removed.
            log.info("graph %s: version %d not published: %s", graph_id, number, exc)
            self._discard(graph_id, number)
            if isinstance(exc, (GraphNotFound, LeaseLost)):
                self._refresh_row(graph_id)
                return None
            raise
        log.info("graph %s: version %d published", graph_id, number)
        if upload_key is not None:
            self._drop_upload(upload_key)  # built: needed no more
        entry = self._graphs.get(graph_id) or _Entry(graph)
        self._serve(entry, loaded)
        entry = self._remember(graph, entry)
        entry.build = entry.rebuild = None
        entry.rebuild_asked_at = 0.0
        entry.settle()
        return graph

    def _store(self, graph_id: str, number: int, folder: Path) -> Any:
        """``folder`` stored as version ``number``. A version stored by an earlier attempt of this job that
        crashed before its row was published is removed first."""
        try:
            return self.artifacts.publish(graph_id, number, folder, move=True)
        except ArtifactExists:
            try:
                row = self.metadata.get_version(graph_id, number)
            except VersionStateError:
                row = None
            if row is not None and row.status.value != "staged":
                raise
            log.info("graph %s: removing the unpublished version %d an earlier attempt left", graph_id, number)
            self.artifacts.delete(graph_id, number)
            return self.artifacts.publish(graph_id, number, folder, move=True)

    def _discard(self, graph_id: str, number: int) -> None:
        try:
            self.artifacts.delete(graph_id, number)
            self.metadata.forget_version(graph_id, number)
        except StateError as exc:  # the sweep removes it later
            log.warning("graph %s: version %d left for the sweep: %s", graph_id, number, exc.message)

    # ---- serving versions --------------------------------------------------------------------------

    def _serve(self, entry: _Entry, base: Version) -> None:
        """``base`` (a published version, just loaded) with the journal rows past it, as the graph's current
        version; under the graph's lock, so that no update comes between."""
        with entry.lock:
            if entry.deleted or not self.serving:
                return
            self._set_version(entry, self._replayed(entry, base))
            entry.loading = None
            entry.load_error = None
        with entry.relabeled:
            entry.relabeled.notify_all()

    def _replayed(self, entry: _Entry, version: Version, read: Journal | None = None) -> Version:
        """``version`` with the graph's journal rows past it applied: ``read`` (rows read and decoded before the
        version loaded, when they follow it) and the rows journaled since, read a page at a time, then folded at
        once (a fold per page would apply every page after the first one update at a time); while the graph
        loads, its progress says how far."""
        journal = read if read is not None and read.after == version.number else Journal(version.number)
        self._read_journal(entry, journal)
        total = max(entry.graph.head_version - version.number, journal.last - version.number)
        with self._gate:
            return fold_journal(version, journal, total, functools.partial(_report_journal, entry, total))

    def _read_journal(self, entry: _Entry, journal: Journal) -> Journal:
        """The graph's journal rows past ``journal``'s last version, decoded onto its end (outside the gate:
        beside the kernels' warm-up, which holds it at a start)."""
        total = max(entry.graph.head_version - journal.after, 0)
        return journal.read(
            self.journal(entry.id, journal.last), total, functools.partial(_report_journal, entry, total)
        )

    def _refresh(self, entry: _Entry, load_missing: bool = True) -> None:
        """Bring the graph's version in line with its row: its published version loaded when this server holds
        another (outside the graph's lock: queries and updates go on meanwhile), then the journal rows past
        it. A version that does not load marks the graph failed here (the store's row is left as it is).
        ``load_missing``: False to keep only the row of a graph that holds no version here."""
        for _ in range(3):
            try:
                graph = self.metadata.get_graph(entry.id)
            except GraphNotFound:
                self._forget(entry.id)
                return
            if graph.id != entry.id:
                self._forget(entry.id)
                return
            published = graph.published_version
            if graph.status is not GraphStatus.ready or published is None:
                self._remember(graph, entry)
                entry.loading = None
                if graph.status is GraphStatus.failed:
                    entry.settle()
                return
            current = entry.version
            if current is None and not load_missing:  # it answers once it loads on its first use
                self._remember(graph, entry)
                entry.loading = None
                entry.settle()
                return
            try:
                base, read = None, None
                if current is None or current.labels.version != published:
                    if entry.loading is not None or current is None:
                        entry.loading = Progress("journal")
                    read = self._read_journal(entry, Journal(published))
                    if entry.loading is not None:
                        entry.loading = Progress("load")
                    with self._gate:
                        base = _load(self.artifacts.fetch(entry.id, published, verify=False), entry.options.backend)
                with entry.lock:
                    if entry.deleted:
                        return
                    latest = self.metadata.get_graph(entry.id)
                    if latest.published_version != published:
                        continue  # published again while it loaded
                    # Without a new base, from the version held now: updates may have been applied since it was read.
                    start = base if base is not None else entry.version
                    if start is None or start.labels.version != published:
                        continue
                    self._set_version(entry, self._replayed(entry, start, read))
                    entry.loading = None
                    entry.load_error = None
                    if base is not None:  # another server's rebuild is published: the next update may ask again
                        entry.rebuild_asked_at = 0.0
                self._remember(latest, entry)
                entry.settle()
                return
            except GraphNotFound:
                self._forget(entry.id)
                return
            except ArtifactNotFound:
                continue  # retired and removed meanwhile: the row names a newer one
            except (IndexFileError, ArtifactCorrupt, JournalGap) as exc:
                log.error("graph %s: version %s does not load: %s", entry.id, published, exc)
                entry.loading = None
                entry.load_error = dict(_DAMAGED)
                self._remember(graph, entry)
                entry.settle()
                return
        log.warning("graph %s: its version kept changing while it loaded; the next change loads it", entry.id)
        entry.loading = None

    def sync(self, graph_id: str) -> None:
        """What another server wrote for a graph, here: created, renamed, published, updated or deleted."""
        entry = self._graphs.get(graph_id)
        if entry is None:
            try:
                graph = self.metadata.get_graph(graph_id)
            except GraphNotFound:
                return
            if graph.id != graph_id:
                return
            entry = _Entry(graph)  # remembered by ``_refresh``, once it answers if it is ready
        self._refresh(entry, load_missing=self.cache is None)

    def held_number(self, ref: str) -> int | None:
        """The version this server answers a graph (by id or name) from; None when it knows no such graph or
        has none loaded."""
        try:
            entry = self._entry(ref)
        except GraphNotFound:
            return None
        version = entry.version
        if version is None and self._loads_on_use(entry):
            return entry.graph.head_version  # what its load gives it, at least (its row follows the store)
        return version.number if version is not None else None

    def holds(self, change: Change) -> bool:
        """Whether this server answers from what a journal or version change made, or from later (so the
        change feed's follower has nothing to read for it). Mostly the change is this server's own: its update's
        row commits before the update is applied here, so the answer waits for an update of the graph in flight
        here (its lock) instead of reading the graph from the store meanwhile."""
        entry = self._graphs.get(change.graph_id or "")
        if entry is None or change.version is None:
            return False
        with entry.lock:
            version = entry.version
            if version is None:
                return False
            made = version.number if change.kind is ChangeKind.journal else version.labels.version
            return made >= change.version

    # ---- edge updates ------------------------------------------------------------------------------

    def update(self, ref: str, add: list[Any], remove: list[Any]) -> dict[str, Any]:
        """Plan the update against the current version, journal it, apply it: the answer once journaled.
        Anything refused (bad input, a full disk, a deletion that came first) changes nothing."""
        entry = self._entry(ref)
        payload = encode(add, remove)
        with entry.lock:
            for attempt in range(_UPDATE_TRIES):
                if entry.deleted:
                    raise GraphNotFound(ref)
                if self._loads_on_use(entry):  # dropped by the cache: loaded again (the graph's lock is held)
                    self._refresh(entry)
                current = self.ready_version(entry.id)
                with self._gate:
                    plan = current.plan_update(add, remove)
                try:
                    number = self.metadata.append_update(entry.id, current.number, payload)
                except VersionConflict:
                    if attempt == _UPDATE_TRIES - 1:
                        raise
                    self._refresh(entry)  # another server's updates (or a new version) came first
                    continue
                except GraphNotFound:
                    self._forget(entry.id)
                    raise
                break
            with self._gate:
                updated = current.apply(plan)
            assert updated.number == number, (updated.number, number)
            self._set_version(entry, updated)
        return _answer(updated)

    def update_many(self, updates: Sequence[tuple[str, list[Any], list[Any]]]) -> list[UpdateOutcome]:
        """``update`` of several graphs at once, their journal rows committed in one transaction (one flush of
        the disk): for each, its answer, its refusal (an exception to raise), or None for one left to
        ``update`` (a second update of a graph in the call, a graph whose lock another thread holds or whose
        version must load first, another server's update that came first): this call never waits for a lock."""
        outcomes: list[UpdateOutcome] = [None] * len(updates)
        held: list[tuple[int, _Entry, Version, Any]] = []
        appends: list[tuple[str, int, str]] = []
        try:
            for i, (ref, add, remove) in enumerate(updates):
                try:
                    entry = self._entry(ref)
                except GraphNotFound as exc:
                    outcomes[i] = exc
                    continue
                if any(e is entry for _, e, _, _ in held) or not entry.lock.acquire(blocking=False):
                    continue
                try:
                    if entry.deleted:
                        raise GraphNotFound(ref)
                    if self._loads_on_use(entry):
                        entry.lock.release()
                        continue
                    current = self.ready_version(entry.id)
                    with self._gate:
                        plan = current.plan_update(add, remove)
                except Exception as exc:  # refused (404, 409, 422 ...): this update only
                    entry.lock.release()
                    outcomes[i] = exc
                    continue
                held.append((i, entry, current, plan))
                appends.append((entry.id, current.number, encode(add, remove)))
            if not held:
                return outcomes
            numbers: Sequence[int | BaseException]
            try:
                numbers = self.metadata.append_updates(appends)
            except Exception as exc:  # the transaction did not commit: none of them happened
                numbers = [exc] * len(held)
            for (i, entry, current, plan), number in zip(held, numbers, strict=True):
                if isinstance(number, VersionConflict):
                    continue  # ``update`` catches up with the store and plans it again
                if isinstance(number, BaseException):
                    if isinstance(number, GraphNotFound):
                        self._forget(entry.id)
                    outcomes[i] = number
                    continue
                with self._gate:
                    updated = current.apply(plan)
                assert updated.number == number, (updated.number, number)
                self._set_version(entry, updated)
                outcomes[i] = _answer(updated)
        finally:
            for _, entry, _, _ in held:
                entry.lock.release()
        return outcomes

    def rebuild_if_pending(self, ref: str) -> bool:
        """Queue a rebuild of a graph (by id or name) with journaled updates past its published version, unless
        one is queued or running already (the store returns that one); True when one is queued now. It is due
        after ``rebuild_delay``."""
        try:
            entry = self._entry(ref)
        except GraphNotFound:
            return False
        graph_id = entry.id
        version = entry.version
        if version is None:
            if self.serving or entry.graph.pending_updates == 0:
                return False
        elif version.number == version.labels.version:
            return False
        else:
            self._hasten_if_searched(entry, version)
        now = time.monotonic()
        if entry.rebuild_asked_at and now - entry.rebuild_asked_at < _REBUILD_RECHECK_S:
            return False  # the common case under a stream of updates: asked already, nothing more to work out
        entry.rebuild_asked_at = now
        memory = self._rebuild_memory(entry, version)
        try:
            delay = self.rebuild_delay(graph_id)
            self.metadata.enqueue_job(graph_id, JobKind.rebuild, {}, memory_bytes=memory, delay_s=delay)
        except GraphNotFound:
            self._forget(graph_id)
            return False
        except StateError as exc:  # a full disk: the next update asks again
            entry.rebuild_asked_at = 0.0
            log.warning("graph %s: cannot queue a rebuild now: %s", graph_id, exc.message)
            return False
        return True

    @staticmethod
    def _rebuild_memory(entry: _Entry, version: Version | None) -> int:
        """What a rebuild of the graph is estimated to need."""
        if version is None:
            # A builder holds no version: the row it published says what is left to fold in.
            edges = int((entry.graph.stats or {}).get("edges", 0)) + entry.graph.pending_updates
        else:
            edges = version.stats.edges + version.pending.added_edges
        num_nodes = version.num_nodes if version is not None else int((entry.graph.stats or {}).get("nodes", 0))
        return sizing.build_bytes(entry.options.format or "edgelist", 0, num_nodes, edges)

    def rebuild_delay_of(self, job: Job) -> float:
        """How long a claimed rebuild should still wait (0: run it now): none for an urgent one, else
        ``rebuild_delay`` of its graph."""
        return 0.0 if job.urgent else self.rebuild_delay(job.graph_id)

    def rebuild_delay(self, graph_id: str, now: float | None = None) -> float:
        """How long a rebuild of the graph should still wait (0: start now): ``rebuild_wait`` of its journal's
        times as the metadata store has them (one read), as of ``now`` (seconds on the store's clock; None: the
        store's clock as it answers). 0 for a graph that is gone."""
        try:
            times = self.metadata.journal_times(graph_id)
        except GraphNotFound:
            return 0.0
        return rebuild_wait(times, times.now if now is None else now)

    def rebuild_deferred(self, job: Job, delay_s: float) -> None:
        """A rebuild claimed while its graph's updates still stream in: queued again, due in ``delay_s``, its
        attempt not counted."""
        with contextlib.suppress(LeaseLost):
            self.metadata.defer_job(job, None, delay_s)

    def rebuild_source(self, job: Job) -> tuple[int, int] | None:
        """(the published version, the last journaled one) of ``job``'s graph: what its rebuild folds; None
        when the graph is gone."""
        try:
            graph = self.metadata.get_graph(job.graph_id)
        except GraphNotFound:
            return None
        if graph.id != job.graph_id or graph.published_version is None:
            return None
        return graph.published_version, graph.head_version

    def journal(self, graph_id: str, after: int, through: int | None = None) -> Iterator[Row]:
        """The journal rows (after, through] (through None: to the last), a page at a time."""
        while through is None or after < through:
            rows = self.metadata.read_updates(graph_id, after, through, limit=JOURNAL_PAGE)
            if not rows:
                return
            yield from _rows(rows)
            after = rows[-1].version

    def rebuild_done(self, job: Job) -> None:
        """A rebuild found nothing to fold in."""
        with contextlib.suppress(LeaseLost):
            self.metadata.complete_job(job)
        entry = self._graphs.get(job.graph_id)
        if entry is not None:
            entry.rebuild = None
            entry.rebuild_asked_at = 0.0

    # ---- deletion ----------------------------------------------------------------------------------

    def delete(self, ref: str) -> None:
        """Delete a graph (and any replacement pending for its name): one transaction, then gone from memory.
        GraphNotFound when there is none; ReadOnlyStorage or StorageFull, and nothing deleted, when the store
        refuses the write."""
        graph = self.metadata.delete_graph(ref)
        self._forget(graph.id)
        for pending in [e.id for e in list(self._graphs.values()) if e.graph.pending_name == graph.name]:
            self._forget(pending)


_SHOWN_JOBS = (JobState.queued, JobState.running, JobState.failed)


def _answer(updated: Version) -> dict[str, Any]:
    """An update's answer: what the version it made changed, and how many updates its labels lack."""
    result = updated.last_update
    assert result is not None
    return {
        "version": result.version,
        "added": result.added,
        "removed": result.removed,
        "new_nodes": result.new_nodes,
        "pending_updates": updated.number - updated.labels.version,
    }


def rebuild_wait(times: JournalTimes, now: float) -> float:
    """How long a rebuild should still wait at ``now`` (the store's clock) for a graph whose journal has
    ``times``: 0 for a lone update, or with ``REBUILD_MAX_PENDING`` pending, or when the newest update came
    ``REBUILD_QUIET_S`` or more after the one before it (not a stream); else until the stream pauses for
    ``REBUILD_QUIET_S``, at most ``REBUILD_MAX_WAIT_S`` after the oldest update pending or the publication of
    the version before, whichever is later."""
    first, last, previous = times.first_at, times.last_at, times.previous_at
    if first is None or last is None or previous is None or times.pending >= REBUILD_MAX_PENDING:
        return 0.0  # no update pending, a lone one, or enough of them
    if last - previous >= REBUILD_QUIET_S:
        return 0.0  # the newest came after a pause: not a stream
    since = first if times.published_at is None else max(first, times.published_at)
    return max(0.0, min(last + REBUILD_QUIET_S, since + REBUILD_MAX_WAIT_S) - now)


def _created(entry: _Entry) -> tuple[float, str]:
    return entry.graph.created_at, entry.id


def _report_journal(entry: _Entry, total: int, done: int, _: int) -> None:
    if entry.loading is not None:
        entry.loading = Progress("journal", done / max(total, done, 1))


def _rows(rows: list[Any]) -> Iterator[Row]:
    return ((row.version, row.payload) for row in rows)


def _load(path: Path, backend: str) -> Version:
    """A stored version; a graph built on the CPU on request stays there, otherwise the GPU searches when there
    is one. Its checksums are verified (IndexFileError)."""
    return load_version(path, backend=resolve_backend("cpu" if backend == "cpu" else "auto"))


def _saved_version(folder: Path) -> int:
    """The version an index folder holds (what its build saved it as)."""
    _, meta = read_index_dir(folder, mmap=True, verify=False)
    return int(meta.get("version", 1))


def describe_error(kind: str, message: str, line: int | None = None) -> dict[str, Any]:
    """A failed build's error as its record keeps it."""
    error: dict[str, Any] = {"type": kind, "message": truncate(message)}
    if line is not None:
        error["line"] = line
    return error
