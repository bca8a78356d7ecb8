"""The server's state, opened: the metadata store (``--database-url``), the artifact store (``--store``) and,
for the embedded metadata store, the data directory's lock.

``open_stores`` takes the lock first (a second server on the same data directory is refused before it touches
anything: ``DataDirLocked`` names the holder), then opens both stores (migrations applied). On the embedded
store the lock says no other process is at work, so what a crash left is put right at once: jobs that were
running are given back, the staging folder is emptied, and the artifact store's orphans (written, never
referred to) and incomplete writes are removed without waiting for the grace period that shared stores need.
A data directory of the JSON-record layout is imported (service.state.importer) on the first start.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from .settings import Settings
from .state import ArtifactStore, DataDirLock, MetadataStore, open_artifacts, open_metadata
from .state.errors import StateError
from .state.sweep import sweep_orphans

__all__ = ["Stores", "open_stores", "STAGING_DIR", "SERVER_TTL_S"]

log = logging.getLogger("grail.service.stores")

STAGING_DIR = "staging"
# The JSON-record layout's folder of deletions under way (emptied at start).
_LEGACY_TRASH = "trash"
# A server not heard from for this long is no longer listed as live.
SERVER_TTL_S = 60.0


@dataclass
class Stores:
    metadata: MetadataStore
    artifacts: ArtifactStore
    lock: DataDirLock | None  # held for the embedded store
    server_id: str  # this process: its row in the servers table, and the owner of the jobs it claims

    def close(self) -> None:
        try:
            self.metadata.deregister_server(self.server_id)
        except StateError as exc:  # it expires instead
            log.warning("cannot deregister this server: %s", exc.message)
        self.metadata.close()
        if self.lock is not None:
            self.lock.release()


def open_stores(settings: Settings) -> Stores:
    """See the module doc. DataDirLocked, SchemaTooNew, StoreUnavailable and other StateErrors say why not."""
    data_dir = settings.data_dir
    lock = DataDirLock(data_dir, port=settings.port).acquire() if settings.embedded else None
    try:
        metadata = open_metadata(settings.database_url, data_dir)
        try:
            artifacts = open_artifacts(settings.store, data_dir)
            if lock is not None:
                _recover(data_dir, metadata)
            _import_legacy(data_dir, metadata, artifacts)
            if lock is not None:  # after the import, which may have stored a version it has not recorded yet
                sweep_orphans(metadata, artifacts, grace_s=0.0)
            server_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
            metadata.register_server(
                server_id,
                role=settings.role,
                host=socket.gethostname(),
                pid=os.getpid(),
                port=settings.port,
                ttl_s=SERVER_TTL_S,
            )
        except BaseException:
            metadata.close()
            raise
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    log.info("metadata in %s, index versions and uploads in %s", metadata.url, artifacts.url)
    return Stores(metadata, artifacts, lock, server_id)


def _recover(data_dir: Path, metadata: MetadataStore) -> None:
    """What a crash of the one server of this data directory left in its jobs and folders, put right."""
    released = metadata.release_jobs()
    if released:
        log.info("%d jobs that were running when the server stopped are queued again", released)
    staging = data_dir / STAGING_DIR
    if staging.is_dir():
        for leftover in staging.iterdir():
            log.info("removing the leftover staging folder %s", leftover.name)
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
    shutil.rmtree(data_dir / _LEGACY_TRASH, ignore_errors=True)


def _import_legacy(data_dir: Path, metadata: MetadataStore, artifacts: ArtifactStore) -> None:
    from .state.importer import import_data_dir, needs_import  # it needs grail_core: only when there is work

    if needs_import(data_dir):
        import_data_dir(data_dir, metadata, artifacts)
