"""The service's state, on real components: a metadata store (graphs and names, versions, the edge-update
journal, build jobs with leases, servers, changes) and an artifact store (immutable index versions).

The contract the registry, the build workers and the API replicas use:

- ``open_metadata(database_url, data_dir)``: a ``MetadataStore`` (service.state.metadata says what each
  method promises): SQLite in ``<data_dir>/grail.db`` by default, PostgreSQL for ``postgresql://...``.
- ``open_artifacts(store_url, data_dir, cache_dir)``: an ``ArtifactStore`` (service.state.artifacts) of index
  versions and of uploads waiting for their build: a folder (``<data_dir>/graphs/<id>/v<N>/``,
  ``<data_dir>/uploads/<key>/``) by default, an S3-compatible bucket for ``s3://bucket/prefix``.
- ``service.state.sweep.sweep_orphans``: what the artifact store holds and no row refers to (a builder or an
  upload that crashed half-way, an upload no longer needed), removed after a grace period.
- ``DataDirLock``: one server per embedded data directory (service.state.datadir).
- ``service.state.importer.import_data_dir``: a data directory of the JSON-record layout, imported at first
  start (it needs grail_core, so it is imported on its own).

Every error is a ``StateError`` (service.state.errors) with a ``kind`` the service maps to its answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .artifacts import ArtifactStore, LocalArtifactStore
from .datadir import DataDirLock
from .errors import StateError
from .metadata import MetadataStore

__all__ = ["open_metadata", "open_artifacts", "DataDirLock", "MetadataStore", "ArtifactStore", "DEFAULT_DATABASE"]

# The embedded default: one SQLite file in the data directory.
DEFAULT_DATABASE = "sqlite"


def open_metadata(database_url: str | None, data_dir: Path, **options: Any) -> MetadataStore:
    """The metadata store a URL names: None or ``sqlite`` (``<data_dir>/grail.db``), ``sqlite:///PATH``, or
    ``postgresql://...`` (``postgres://`` too). Migrations are applied on the way."""
    url = (database_url or DEFAULT_DATABASE).strip()
    if url == DEFAULT_DATABASE:
        from .sqlite import DATABASE_FILE, SqliteMetadataStore

        return SqliteMetadataStore(Path(data_dir) / DATABASE_FILE, **options)
    if url.startswith("sqlite:///"):
        from .sqlite import SqliteMetadataStore

        return SqliteMetadataStore(Path(url.removeprefix("sqlite:///")), **options)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresMetadataStore

        return PostgresMetadataStore(url, **options)
    raise StateError("a database URL is 'sqlite', 'sqlite:///PATH' or 'postgresql://USER@HOST:PORT/DATABASE'")


def open_artifacts(
    store_url: str | None, data_dir: Path, cache_dir: Path | None = None, **options: Any
) -> ArtifactStore:
    """The artifact store a URL names: None (``<data_dir>/graphs/<id>/v<N>/``), ``file:///PATH``, or
    ``s3://bucket/prefix`` (versions fetched into ``cache_dir``, ``<data_dir>/cache`` by default; ``options``:
    obstore's S3 settings, beside the ``AWS_*`` environment variables)."""
    if store_url is None or store_url.strip() == "":
        return LocalArtifactStore(Path(data_dir))
    if store_url.startswith("file://"):
        return LocalArtifactStore(Path(store_url.removeprefix("file://")))
    if store_url.startswith("s3://"):
        from .s3 import S3ArtifactStore

        return S3ArtifactStore(store_url, cache_dir or Path(data_dir) / "cache", **options)
    raise StateError("an artifact store URL is 'file:///PATH' or 's3://BUCKET/PREFIX'")
