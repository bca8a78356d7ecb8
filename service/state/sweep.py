"""Orphans of the artifact store: what no metadata row refers to, removed once older than a grace period.

A builder publishes a version's artifact before the row that stages it, and an API replica stores an upload
before (or while) the graph that refers to it is created: a crash in between leaves a complete artifact or
upload that nothing refers to. An upload is also left over once its graph is deleted, or its first version is
published (the graph no longer needs it). And a publish or put cut short leaves files or objects that no
manifest names. ``sweep_orphans`` removes all of these, but only those at least ``grace_s`` old, so that the
row of a publish or put still under way is written first: the grace period must be longer than any publish or
put takes between its artifact and its row, and than the clocks of the servers differ.

The store is listed before the references are read: an artifact whose row commits meanwhile is seen as
referenced. Versions that rows refer to are the metadata's to retire and remove (``MetadataStore.garbage``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from .artifacts import ArtifactStore
from .errors import ArtifactCorrupt, ArtifactNotFound
from .metadata import MetadataStore

__all__ = ["SweepReport", "sweep_orphans", "DEFAULT_GRACE_S"]

log = logging.getLogger("grail.service.state")

# Long enough for a publish or a put of a large graph to write its row after its files.
DEFAULT_GRACE_S = 6 * 3600.0


@dataclass(frozen=True)
class SweepReport:
    versions: list[tuple[str, int]]  # complete versions no row refers to, removed
    uploads: list[str]  # uploads no live graph refers to, removed
    incomplete: list[str]  # what writes cut short left, removed (paths under the store's root)


def sweep_orphans(metadata: MetadataStore, artifacts: ArtifactStore, grace_s: float = DEFAULT_GRACE_S) -> SweepReport:
    """Remove the artifact store's orphans at least ``grace_s`` seconds old (see the module doc)."""
    now = time.time()
    stored_versions = []
    for graph_id in artifacts.graphs():
        for version in artifacts.versions(graph_id):
            try:
                created_at = artifacts.manifest(graph_id, version).created_at
            except ArtifactNotFound:  # removed meanwhile
                continue
            except ArtifactCorrupt as exc:  # left for a person to look at, never guessed at
                log.warning("the artifact store's version %s of graph %s is unreadable: %s", version, graph_id, exc)
                continue
            stored_versions.append((graph_id, version, created_at))
    stored_uploads = artifacts.uploads()
    references = metadata.artifact_references()

    versions = []
    for graph_id, version, created_at in stored_versions:
        if (graph_id, version) not in references.versions and now - created_at >= grace_s:
            artifacts.delete(graph_id, version)
            versions.append((graph_id, version))
    uploads = []
    for upload in stored_uploads:
        if upload.key not in references.uploads and now - upload.created_at >= grace_s:
            artifacts.delete_upload(upload.key)
            uploads.append(upload.key)
    incomplete = artifacts.remove_incomplete(grace_s)
    if versions or uploads or incomplete:
        log.info(
            "removed from the artifact store: %d orphaned versions, %d uploads, %d incomplete writes",
            len(versions),
            len(uploads),
            len(incomplete),
        )
    return SweepReport(versions, uploads, incomplete)
