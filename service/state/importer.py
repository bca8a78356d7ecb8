"""A data directory of the JSON-record layout, imported into the metadata and artifact stores at first start.

That layout: ``graphs/<id>/record.json`` (the graph's record), ``graphs/<id>/index/`` (its saved index; a swap
cut short leaves it as ``index.new`` or ``index.old``), ``graphs/<id>/updates.jsonl`` (edge updates past the
index, one JSON line each, the last one possibly cut short by a crash), ``uploads/<id>`` (an upload waiting for
its build, a file; it is moved into the artifact store's uploads under the key ``<id>``).

Each graph is imported as the start-up of that layout would have recovered it: a ready graph (or a queued one
whose index was published before a crash) with a loadable index becomes a ready graph whose index is version N
(the index's own version) in the artifact store and whose pending journal lines become journal rows; a queued or
building one whose upload survived is queued with a build job; the others are failed, saying why. A record's
label becomes the graph's name when it is a valid name no other graph holds, else the id is. A graph's old
files are removed once it is in the stores; an import a crash interrupted goes on from where it stopped at the
next start (every step looks at what the stores hold already).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grail_core import IndexFileError
from grail_core.storage import read_index_dir

from .artifacts import ArtifactStore, artifact_key, check_id
from .errors import (
    ArtifactExists,
    GraphExists,
    GraphNotFound,
    InvalidName,
    NameTaken,
    StateError,
    UploadExists,
    UploadNotFound,
)
from .metadata import Graph, GraphStatus, JobKind, MetadataStore, check_name

__all__ = ["import_data_dir", "ImportReport", "needs_import", "RECORD_FILE", "JOURNAL_FILE"]

log = logging.getLogger("grail.service.state")

RECORD_FILE = "record.json"
JOURNAL_FILE = "updates.jsonl"
_INDEX_FOLDERS = ("index", "index.new", "index.old")
_LEFTOVERS = (JOURNAL_FILE, *_INDEX_FOLDERS, ".record.json.tmp", "updates.tmp")
IMPORTED_KEY = "imported_json_records_at"


@dataclass
class ImportReport:
    ready: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # unreadable records, left where they are
    updates: int = 0  # journal lines imported


def needs_import(data_dir: Path) -> bool:
    return any((Path(data_dir) / "graphs").glob(f"*/{RECORD_FILE}"))


def import_data_dir(data_dir: Path, metadata: MetadataStore, artifacts: ArtifactStore) -> ImportReport:
    """Import every graph of the JSON-record layout under ``data_dir`` (see the module doc)."""
    data_dir = Path(data_dir)
    report = ImportReport()
    records = []
    for record_file in (data_dir / "graphs").glob(f"*/{RECORD_FILE}"):
        folder = record_file.parent
        try:
            record = json.loads(record_file.read_text())
            graph_id = check_id(str(record["id"]))
            if graph_id != folder.name:
                raise ValueError(f"the record names graph {graph_id}")
        except (OSError, ValueError, KeyError, TypeError, StateError) as exc:
            log.error("not importing %s: unreadable record: %s", folder.name, exc)
            report.skipped.append(folder.name)
            continue
        records.append((record_file, record))
    # Where labels collide, ready graphs keep theirs first, then the oldest.
    records.sort(key=lambda item: (item[1].get("status") != "ready", float(item[1].get("created_at") or 0)))
    for record_file, record in records:
        folder = record_file.parent
        graph = _import_graph(data_dir, folder, record, metadata, artifacts, report)
        if graph is not None:
            bucket = {GraphStatus.ready: report.ready, GraphStatus.failed: report.failed}.get(
                graph.status, report.queued
            )
            bucket.append(graph.id)
        for name in _LEFTOVERS:
            path = folder / name
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        record_file.unlink()  # last: until then, the next start imports (the rest of) this graph again
    if report.ready or report.queued or report.failed:
        metadata.set_meta(IMPORTED_KEY, str(time.time()))
        log.info(
            "imported %d ready, %d queued and %d failed graphs with %d edge updates from the JSON records",
            len(report.ready),
            len(report.queued),
            len(report.failed),
            report.updates,
        )
    return report


def _import_graph(
    data_dir: Path,
    folder: Path,
    record: dict[str, Any],
    metadata: MetadataStore,
    artifacts: ArtifactStore,
    report: ImportReport,
) -> Graph | None:
    graph_id = folder.name
    try:
        graph = metadata.get_graph(graph_id)
        if graph.id != graph_id:  # a name of another graph that happens to equal this id
            graph = _create(graph_id, record, data_dir, metadata, artifacts)
    except GraphNotFound:
        try:
            graph = _create(graph_id, record, data_dir, metadata, artifacts)
        except GraphExists:  # imported, then deleted, before its files could be removed
            return None
    if graph.published_version is not None or graph.status is GraphStatus.failed:
        return _import_journal(folder, graph, metadata, report)
    status = record.get("status")
    index = next((folder / name for name in _INDEX_FOLDERS if (folder / name / "manifest.json").is_file()), None)
    stored = artifacts.versions(graph_id)  # an import cut short after the index moved into the store
    if status in ("ready", "queued", "building") and (index is not None or stored):
        version = stored[-1] if stored else None
        if index is not None:
            try:
                version = _index_version(index)
            except IndexFileError as exc:
                log.error("graph %s: its index does not load: %s", graph_id, exc)
                version = None
        if version is not None:
            try:
                if index is None:
                    raise ArtifactExists(graph_id, version)
                manifest = artifacts.publish(graph_id, version, index, move=True)
            except ArtifactExists:
                manifest = artifacts.manifest(graph_id, version)
            metadata.stage_version(
                graph_id,
                version,
                artifact_key=artifact_key(graph_id, version),
                checksum=manifest.checksum,
                size_bytes=manifest.size_bytes,
            )
            graph = metadata.publish_version(graph_id, version, stats=record.get("stats"))
            artifacts.delete_upload(graph_id)  # built: its upload is needed no more
            return _import_journal(folder, graph, metadata, report)
    if status == "ready":
        error = {"type": "IndexFileError", "message": "index files are missing or corrupt; upload the graph again"}
        return metadata.set_status(graph_id, GraphStatus.failed, error=error)
    if status in ("queued", "building"):
        if graph.upload_key is not None:
            metadata.enqueue_job(graph_id, JobKind.build, {"imported": True})
            return metadata.get_graph(graph_id)
        error = {"type": "Interrupted", "message": "the build was interrupted and its upload is gone; upload again"}
        return metadata.set_status(graph_id, GraphStatus.failed, error=error)
    error = record.get("error") or {"type": "Unknown", "message": "the build failed"}
    return metadata.set_status(graph_id, GraphStatus.failed, error=error)


def _create(
    graph_id: str, record: dict[str, Any], data_dir: Path, metadata: MetadataStore, artifacts: ArtifactStore
) -> Graph:
    label = str(record.get("name") or graph_id)
    upload_key = _store_upload(data_dir, graph_id, artifacts)
    size = int(record.get("upload_bytes") or 0)
    params = dict(record.get("params") or {})
    if label != graph_id:
        try:
            name = check_name(label)
            return metadata.create_graph(graph_id, params, name=name, upload_bytes=size, upload_key=upload_key)
        except (InvalidName, NameTaken) as exc:
            log.warning("graph %s: its label %r is not kept as its name: %s", graph_id, label[:80], exc.message)
    return metadata.create_graph(graph_id, params, upload_bytes=size, upload_key=upload_key)


def _store_upload(data_dir: Path, graph_id: str, artifacts: ArtifactStore) -> str | None:
    """The graph's upload file moved into the artifact store (key: the graph's id); the key, or None when there
    is none. The file is first renamed aside (the store's own folder for the key may be the file's path), and
    removed once stored: a crash in between leaves it aside, where the next start finds it."""
    uploads = data_dir / "uploads"
    old, aside = uploads / graph_id, uploads / f".{graph_id}.import"
    if old.is_file():
        old.rename(aside)
    if aside.is_file():
        with open(aside, "rb") as handle:
            try:
                artifacts.put_upload(graph_id, handle)
            except UploadExists:  # stored before a crash
                pass
        aside.unlink()
    try:
        return artifacts.upload(graph_id).key
    except UploadNotFound:
        return None


def _index_version(index: Path) -> int:
    """The version an index folder holds (its labels' version, or that of the updates saved with it); its
    arrays' checksums verified on the way (IndexFileError)."""
    _arrays, meta = read_index_dir(index, mmap=True, verify=True)
    if isinstance(meta.get("updates"), dict) and "version" in meta["updates"]:
        return int(meta["updates"]["version"])
    return int(meta.get("version", 1))


def _import_journal(folder: Path, graph: Graph, metadata: MetadataStore, report: ImportReport) -> Graph:
    """The journal's lines past the graph's head, as rows; a last line without its newline (never answered)
    and anything past a gap are left out, as the JSON layout's start-up did."""
    path = folder / JOURNAL_FILE
    if graph.published_version is None or not path.is_file():
        return graph
    head = graph.head_version
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                log.warning("graph %s: dropping an unfinished last journal line", graph.id)
                break
            entry = json.loads(raw)
            version = int(entry["version"])
            if version <= head:
                continue
            if version != head + 1:
                log.error(
                    "graph %s: journal line %d does not follow version %d; the rest is left out",
                    graph.id,
                    version,
                    head,
                )
                break
            payload = json.dumps(
                {"add": entry.get("add", []), "remove": entry.get("remove", [])}, separators=(",", ":")
            )
            head = metadata.append_update(graph.id, head, payload)
            report.updates += 1
    return metadata.get_graph(graph.id)
