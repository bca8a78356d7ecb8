"""The graphs the service knows: one folder per graph under ``<data_dir>/graphs/<id>/``.

Each folder holds ``record.json`` (small, rewritten atomically: temp file, fsync, rename) and, once
built, ``index/``. The upload waits in ``<data_dir>/uploads/<id>`` until its index is published, so that a
build a crash interrupted can be redone from it. A build worker writes the index under
``<data_dir>/staging/<id>/`` and this registry, the only writer of records and graph folders, renames it into
place. A graph is served only when its record says ``ready`` and its index loaded.

Queries read a graph's current ``Version`` (``ready_version``): immutable, so that a request answers from one
version from start to end; an edge update or a rebuild puts the next one in place (``advance``,
``publish_rebuild``).

A record that cannot be written (full disk, read-only data directory) never leaves a graph stuck: the graph is
kept as failed, saying why, or not added at all. Deleting renames the folder into ``<data_dir>/trash/`` first (the
graph is gone at once, or still whole if the rename fails), then removes it. Start-up removes what a crash left:
temporary files, staged indexes, the trash, uploads and folders without a record.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import threading
import time
from dataclasses import asdict, dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from grail_core import IndexFileError
from grail_core.backends import resolve_backend
from grail_core.version import Version, load_version

from .errors import GRAPH_NOT_FOUND, GRAPH_NOT_READY, INTERRUPTED, STORAGE_ERROR, ServiceError, storage_error, truncate
from .options import UploadOptions
from .updates import JOURNAL_FILE, Journal, RebuildState, replay

__all__ = ["GraphStatus", "GraphRecord", "GraphRegistry"]

log = logging.getLogger("grail.service.registry")

RECORD_FILE = "record.json"
INDEX_DIR = "index"
# A rebuild's swap: the new index comes in as index.new, the old one leaves as index.old (see publish_rebuild).
_NEW_INDEX = f"{INDEX_DIR}.new"
_OLD_INDEX = f"{INDEX_DIR}.old"
_RECORD_TMP = f".{RECORD_FILE}.tmp"


class GraphStatus(str, Enum):
    queued = "queued"
    building = "building"
    ready = "ready"
    failed = "failed"


def _not_found(graph_id: str) -> ServiceError:
    return ServiceError(GRAPH_NOT_FOUND, f"no graph with id {truncate(graph_id, 40)!r}")


def _not_ready(record: GraphRecord) -> ServiceError:
    detail = f": {record.error['message']}" if record.error else ""
    return ServiceError(GRAPH_NOT_READY, f"graph {record.id!r} is {record.status.value}, not ready{detail}")


@dataclass(frozen=True)
class GraphRecord:
    id: str
    name: str
    params: UploadOptions  # kept so that a rebuild reads and builds alike
    status: GraphStatus
    created_at: float
    updated_at: float
    upload_bytes: int = 0
    phase: str | None = None
    progress: float | None = None
    error: dict[str, Any] | None = None
    stats: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["params"] = self.params.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphRecord:
        values = dict(data)
        values["params"] = UploadOptions.from_json(values["params"])
        values["status"] = GraphStatus(values["status"])
        return cls(**values)


@dataclass
class _Entry:
    record: GraphRecord
    version: Version | None = None  # what queries read; None until built and loaded
    # Set by delete() so that a build still running for this graph drops its result instead of publishing it.
    deleted: bool = False
    journal: Journal | None = None  # edge updates past the saved index (service.updates)
    rebuild: RebuildState | None = None  # the background rebuild that folds them in, while one is queued or runs


class GraphRegistry:
    """Thread-safe map of graph id to record and current version, mirrored on disk."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.uploads_dir = self.data_dir / "uploads"
        self.graphs_dir = self.data_dir / "graphs"
        self.staging_dir = self.data_dir / "staging"
        self.trash_dir = self.data_dir / "trash"
        self._lock = threading.Lock()
        # Serialises the rare writes that touch disk (record files, removal), so that a delete racing a
        # build's publish can never leave a record behind for a graph the user deleted.
        self._io_lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    # ---- paths -------------------------------------------------------------------------------------

    def upload_path(self, graph_id: str) -> Path:
        return self.uploads_dir / graph_id

    def index_path(self, graph_id: str) -> Path:
        return self.graphs_dir / graph_id / INDEX_DIR

    def staging_path(self, graph_id: str) -> Path:
        """Where a build worker writes the graph's index (and a decompressed text) before it is published."""
        return self.staging_dir / graph_id

    def new_upload_file(self) -> tuple[str, Path]:
        """A fresh id and the path its upload streams to (created empty, so the id is taken on disk)."""
        self.uploads_dir.mkdir(parents=True, exist_ok=True)
        while True:
            graph_id = secrets.token_hex(6)
            path = self.upload_path(graph_id)
            try:
                path.touch(exist_ok=False)
            except FileExistsError:
                continue
            return graph_id, path

    # ---- start-up ----------------------------------------------------------------------------------

    def recover(self) -> list[GraphRecord]:
        """Load every record on disk; returns the graphs whose build must (re)start.

        A ``ready`` graph whose index does not load is marked failed. A ``queued`` or ``building``
        one was interrupted by a crash: it is ready if its index was published before the crash
        (publishing is a rename, so a loadable index is a complete one), rebuilt if its upload survived,
        failed otherwise.
        """
        for folder in (self.uploads_dir, self.graphs_dir, self.staging_dir, self.trash_dir):
            folder.mkdir(parents=True, exist_ok=True)
        for leftover in (self.staging_dir, self.trash_dir):
            for path in leftover.iterdir():
                log.info("removing leftover %s", path)
                _remove(path)
        to_build: list[GraphRecord] = []
        known: set[str] = set()
        for folder in sorted(self.graphs_dir.iterdir()):
            record_file = folder / RECORD_FILE
            if not record_file.is_file():
                log.info("removing %s: it has no record", folder)
                _remove(folder)
                continue
            try:
                record = GraphRecord.from_json(json.loads(record_file.read_text()))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                log.error("ignoring unreadable record %s: %s", record_file, exc)
                continue
            known.add(record.id)
            self._remove_leftovers(folder)
            version = None
            if record.status in (GraphStatus.ready, GraphStatus.queued, GraphStatus.building):
                version = self._try_load(record.id, record.params.backend)
            if version is not None:
                if record.status is not GraphStatus.ready:
                    log.info("graph %s: index was published before the interruption; serving it", record.id)
                    record = replace(
                        record,
                        status=GraphStatus.ready,
                        phase=None,
                        progress=None,
                        stats=version.stats.to_dict(),
                        updated_at=time.time(),
                    )
                    self._write_record(record)
                    self.upload_path(record.id).unlink(missing_ok=True)
            elif record.status is GraphStatus.ready:
                record = self._failed(
                    record, IndexFileError.kind, "index files are missing or corrupt; upload the graph again"
                )
                self._write_record(record)
            elif record.status in (GraphStatus.queued, GraphStatus.building):
                if self.upload_path(record.id).is_file():
                    log.info("graph %s: build was interrupted; rebuilding from the saved upload", record.id)
                    shutil.rmtree(self.index_path(record.id), ignore_errors=True)
                    record = replace(
                        record, status=GraphStatus.queued, phase=None, progress=None, updated_at=time.time()
                    )
                    self._write_record(record)
                    to_build.append(record)
                else:
                    record = self._failed(
                        record,
                        INTERRUPTED.name,
                        "the build was interrupted and its upload is gone; upload the graph again",
                    )
                    self._write_record(record)
            self._entries[record.id] = _Entry(record, version, journal=self.journal_of(record.id))
        for orphan in self.uploads_dir.iterdir():
            if orphan.name not in known:
                log.info("removing orphan upload %s", orphan)
                _remove(orphan)
        log.info("registry at %s: %d graphs, %d to build", self.data_dir, len(self._entries), len(to_build))
        return to_build

    @staticmethod
    def _remove_leftovers(folder: Path) -> None:
        # Temporary files and folders of writes a crash interrupted (.record.json.tmp, half-renamed indexes).
        # A rebuild's swap cut short leaves the index as index.new or index.old: either holds with the journal.
        if not (folder / INDEX_DIR).exists():
            for name in (_NEW_INDEX, _OLD_INDEX):
                if (folder / name).is_dir():
                    log.info("%s: completing an interrupted index swap with %s", folder, name)
                    os.replace(folder / name, folder / INDEX_DIR)
                    break
        for path in folder.iterdir():
            if path.name not in (RECORD_FILE, INDEX_DIR, JOURNAL_FILE):
                _remove(path)

    def journal_of(self, graph_id: str) -> Journal:
        return Journal(self.graphs_dir / graph_id / JOURNAL_FILE)

    def _try_load(self, graph_id: str, backend: str) -> Version | None:
        path = self.index_path(graph_id)
        if not path.exists():
            return None
        try:
            loaded = _load(path, backend)
            version = replay(loaded, self.journal_of(graph_id))
        except (IndexFileError, OSError, ValueError, KeyError, TypeError) as exc:
            log.error("graph %s: cannot load index %s with its updates: %s", graph_id, path, exc)
            return None
        if version is not loaded:
            log.info(
                "graph %s: %d edge updates replayed from the journal, at version %d",
                graph_id,
                version.number - loaded.number,
                version.number,
            )
        return version

    # ---- reads -------------------------------------------------------------------------------------

    def get(self, graph_id: str) -> GraphRecord:
        with self._lock:
            entry = self._entries.get(graph_id)
            if entry is None or entry.deleted:
                raise _not_found(graph_id)
            return entry.record

    def records(self) -> list[GraphRecord]:
        with self._lock:
            return sorted((e.record for e in self._entries.values() if not e.deleted), key=lambda r: r.created_at)

    def ready_version(self, graph_id: str) -> Version:
        """The graph's current version, for a request to answer from; 404 if unknown, 409 (GraphNotReady)
        while not built."""
        entry = self._entries.get(graph_id)  # a dict read is atomic: no lock on the hot query path
        if entry is None or entry.deleted:
            raise _not_found(graph_id)
        version = entry.version
        if version is None:
            raise _not_ready(entry.record)
        return version

    def count_by_status(self) -> dict[str, int]:
        counts = {status.value: 0 for status in GraphStatus}
        for record in self.records():
            counts[record.status.value] += 1
        return counts

    # ---- writes ------------------------------------------------------------------------------------

    def add(self, graph_id: str, name: str, params: UploadOptions, upload_bytes: int) -> GraphRecord:
        """Register an upload as queued; a record that cannot be written removes the upload and raises."""
        now = time.time()
        record = GraphRecord(
            id=graph_id,
            name=name,
            params=params,
            status=GraphStatus.queued,
            created_at=now,
            updated_at=now,
            upload_bytes=upload_bytes,
        )
        try:
            self._write_record(record)
        except OSError:
            self._remove_files(graph_id)
            raise
        with self._lock:
            self._entries[graph_id] = _Entry(record, journal=self.journal_of(graph_id))
        return record

    def set_progress(self, graph_id: str, phase: str, progress: float) -> bool:
        """Called from a build's thread, often: memory only; the status change to building is persisted once.
        False when the build should stop: the graph was deleted, or its record could not be written."""
        with self._lock:
            entry = self._entries.get(graph_id)
            if entry is None or entry.deleted:
                return False
            first = entry.record.status is GraphStatus.queued
            entry.record = replace(
                entry.record,
                status=GraphStatus.building,
                phase=phase,
                progress=min(max(float(progress), 0.0), 1.0),
                updated_at=time.time(),
            )
        if first:
            with self._io_lock:
                if entry.deleted:
                    return False
                try:
                    self._write_record(entry.record)
                except OSError as exc:
                    self._fail_unwritable(graph_id, entry, exc, "recording that its build started")
                    return False
        return True

    def publish(self, graph_id: str, staged_index: Path) -> GraphRecord | None:
        """Move a built index into place and serve it. Returns None when the graph was deleted meanwhile, and
        the failed record when the index cannot be moved, loaded or recorded (the graph never stays building)."""
        with self._io_lock:
            entry = self._entries.get(graph_id)
            if entry is None or entry.deleted:
                self._remove_files(graph_id)
                return None
            final = self.index_path(graph_id)
            try:
                shutil.rmtree(final, ignore_errors=True)
                os.replace(staged_index, final)
                version = _load(final, entry.record.params.backend)
                record = replace(
                    entry.record,
                    status=GraphStatus.ready,
                    phase=None,
                    progress=None,
                    error=None,
                    stats=version.stats.to_dict(),
                    updated_at=time.time(),
                )
                self._write_record(record)
            except OSError as exc:
                shutil.rmtree(final, ignore_errors=True)
                return self._fail_unwritable(graph_id, entry, exc, "publishing its index")
            except IndexFileError as exc:
                shutil.rmtree(final, ignore_errors=True)
                return self._fail_locked(graph_id, entry, IndexFileError.kind, str(exc))
            with self._lock:
                entry.record = record
                entry.version = version
            _unlink(self.upload_path(graph_id))
        return record

    def journal(self, graph_id: str) -> Journal:
        """The journal of a ready graph (its lock orders the graph's updates and rebuild swaps)."""
        self.ready_version(graph_id)
        journal = self._entries[graph_id].journal
        assert journal is not None
        return journal

    def advance(self, graph_id: str, version: Version) -> None:
        """Queries read ``version`` from now on (the next version of the graph, made under its journal's lock);
        requests under way finish on the one they took."""
        entry = self._entries.get(graph_id)
        if entry is not None and not entry.deleted:
            entry.version = version

    def live(self, graph_id: str) -> dict[str, Any]:
        """What a ready graph's current version says beyond its record: version, checksum, pending updates, and
        the rebuild under way."""
        entry = self._entries.get(graph_id)
        version = entry.version if entry is not None else None
        if entry is None or version is None:
            return {}
        rebuild = entry.rebuild
        return {
            "version": version.number,
            "checksum": version.labels.checksum,
            "pending_updates": version.pending._asdict(),
            "rebuild": rebuild.to_json() if rebuild is not None else None,
        }

    def start_rebuild(self, graph_id: str, version: int) -> bool:
        """Mark a rebuild folding in ``version`` as queued; False when one is queued or running already."""
        with self._lock:
            entry = self._entries.get(graph_id)
            if entry is None or entry.deleted or entry.rebuild is not None:
                return False
            entry.rebuild = RebuildState(version)
            return True

    def rebuild_progress(self, graph_id: str, phase: str, progress: float) -> bool:
        """A rebuild's progress; False when the graph was deleted (the rebuild stops)."""
        entry = self._entries.get(graph_id)
        if entry is None or entry.deleted or entry.rebuild is None:
            return False
        entry.rebuild.phase, entry.rebuild.progress = phase, min(max(float(progress), 0.0), 1.0)
        return True

    def end_rebuild(self, graph_id: str) -> None:
        entry = self._entries.get(graph_id)
        if entry is not None:
            entry.rebuild = None

    def publish_rebuild(self, graph_id: str, staged_index: Path) -> Version | None:
        """Serve a rebuilt index: under the graph's update lock, the updates that came during the rebuild are
        applied to it, it replaces the served version (queries move to it at once, those under way finish on
        the old), and its files replace the old ones (index.new in, index out as index.old, index.new renamed:
        a crash at any step leaves an index that, with the journal, is the same graph); the journal then drops
        what the new index holds. Returns the new version, None when the graph was deleted meanwhile."""
        entry = self._entries.get(graph_id)
        if entry is None or entry.deleted or entry.version is None or entry.journal is None:
            return None
        folder = self.graphs_dir / graph_id
        # Loaded (checksums verified) before the lock: updates wait only for the swap. Its maps follow the files.
        rebuilt = _load(staged_index, entry.record.params.backend)
        folded = rebuilt.number
        with self._io_lock, entry.journal.lock:
            if entry.deleted:
                return None
            _remove(folder / _NEW_INDEX)  # what a failed swap left
            os.replace(staged_index, folder / _NEW_INDEX)
            fresh = replay(rebuilt, entry.journal)
            os.replace(folder / INDEX_DIR, folder / _OLD_INDEX)
            os.replace(folder / _NEW_INDEX, folder / INDEX_DIR)
            # The files moved, the maps of the new index stay valid (a rename keeps them).
            with self._lock:
                entry.version = fresh
                entry.record = replace(entry.record, stats=fresh.stats.to_dict(), updated_at=time.time())
            _remove(folder / _OLD_INDEX)
            entry.journal.drop_through(folded)
            try:
                self._write_record(entry.record)
            except OSError as exc:  # the record's stats are a copy: the index and journal are what count
                log.error("graph %s: cannot record its rebuilt stats: %s", graph_id, exc)
        return fresh

    def fail(self, graph_id: str, kind: str, message: str, line: int | None = None) -> GraphRecord | None:
        """The build failed: keep the graph as failed with the error, so its owner can read why."""
        with self._io_lock:
            entry = self._entries.get(graph_id)
            if entry is None or entry.deleted:
                self._remove_files(graph_id)
                return None
            return self._fail_locked(graph_id, entry, kind, message, line)

    def _fail_locked(
        self, graph_id: str, entry: _Entry, kind: str, message: str, line: int | None = None
    ) -> GraphRecord:
        record = self._failed(entry.record, kind, message, line)
        with self._lock:
            entry.record = record
        try:
            self._write_record(record)
        except OSError as exc:
            # Failed in memory all the same; on disk the record still says queued or building, and with its
            # upload removed below the next start marks it failed too.
            log.error("graph %s: cannot record its failure: %s", graph_id, exc)
        _unlink(self.upload_path(graph_id))
        return record

    def _fail_unwritable(self, graph_id: str, entry: _Entry, exc: OSError, doing: str) -> GraphRecord:
        known = storage_error(exc, doing)
        if known is None:
            log.error("graph %s: %s failed: %s", graph_id, doing, exc)
            return self._fail_locked(graph_id, entry, STORAGE_ERROR.name, f"{doing} failed: {exc}")
        return self._fail_locked(graph_id, entry, known.kind, known.detail)

    def delete(self, graph_id: str) -> None:
        """Forget the graph and remove its files. The folder is renamed away first: if that fails (read-only
        disk) the graph stays, whole and listed, and the error is raised. Queries already holding a version
        finish on it (memory-mapped files stay readable after unlink); a running build discards its result."""
        with self._io_lock:
            with self._lock:
                entry = self._entries.get(graph_id)
                if entry is None or entry.deleted:
                    raise _not_found(graph_id)
            folder = self.graphs_dir / graph_id
            retired = self.trash_dir / f"{graph_id}.{secrets.token_hex(4)}"
            try:
                self.trash_dir.mkdir(parents=True, exist_ok=True)
                os.rename(folder, retired)
            except FileNotFoundError:
                retired = folder  # never written (its record failed to save): nothing to move
            with self._lock:
                self._entries.pop(graph_id, None)
                entry.deleted = True
            _remove(retired)
            _unlink(self.upload_path(graph_id))
            _remove(self.staging_path(graph_id))

    def _remove_files(self, graph_id: str) -> None:
        _remove(self.graphs_dir / graph_id)
        _unlink(self.upload_path(graph_id))

    @staticmethod
    def _failed(record: GraphRecord, kind: str, message: str, line: int | None = None) -> GraphRecord:
        error: dict[str, Any] = {"type": kind, "message": truncate(message)}
        if line is not None:
            error["line"] = line
        return replace(
            record, status=GraphStatus.failed, phase=None, progress=None, error=error, updated_at=time.time()
        )

    def _write_record(self, record: GraphRecord) -> None:
        folder = self.graphs_dir / record.id
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / _RECORD_TMP
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(record.to_json(), fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, folder / RECORD_FILE)
        except OSError:
            _unlink(tmp)
            raise


def _load(path: Path, backend: str) -> Version:
    """A graph's saved version; a graph built on the CPU on request stays there, otherwise the GPU searches
    when there is one."""
    return load_version(path, backend=resolve_backend("cpu" if backend == "cpu" else "auto"))


def _unlink(path: Path) -> None:
    """Remove a file if it can be; what cannot (read-only disk) start-up removes later."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove %s: %s", path, exc)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        _unlink(path)
