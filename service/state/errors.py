"""The state package's one exception root, ``StateError``, and its kinds.

Each error has a ``kind`` (a stable word, as the service's error answers name them) and a message that never
holds a filesystem path or a database address: the service may show it to a client as it is. The service maps
kinds to HTTP statuses in one table; nothing here knows about HTTP.
"""

from __future__ import annotations

import errno

__all__ = [
    "StateError",
    "GraphNotFound",
    "GraphNotReady",
    "Conflict",
    "GraphExists",
    "NameTaken",
    "InvalidName",
    "VersionConflict",
    "VersionStateError",
    "LeaseLost",
    "ArtifactNotFound",
    "ArtifactExists",
    "ArtifactCorrupt",
    "UploadNotFound",
    "UploadExists",
    "UploadTooLarge",
    "StorageFull",
    "ReadOnlyStorage",
    "StoreUnavailable",
    "SchemaTooNew",
    "DataDirLocked",
    "storage_error",
]


class StateError(Exception):
    """Root of everything this package raises on purpose."""

    kind = "StateError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GraphNotFound(StateError):
    """No live graph has this id or name (it may have been deleted a moment ago)."""

    kind = "GraphNotFound"

    def __init__(self, ref: str) -> None:
        super().__init__(f"no graph with id or name {ref[:80]!r}")
        self.ref = ref


class GraphNotReady(StateError):
    """The graph exists but takes no edge updates: it has no published version yet, or its build failed."""

    kind = "GraphNotReady"

    def __init__(self, graph_id: str, status: str) -> None:
        super().__init__(f"graph {graph_id!r} is {status}, not ready")
        self.graph_id = graph_id
        self.status = status


class Conflict(StateError):
    """A write that lost against another: the state moved on since the caller looked."""

    kind = "Conflict"


class GraphExists(Conflict):
    kind = "GraphExists"

    def __init__(self, graph_id: str) -> None:
        super().__init__(f"a graph with id {graph_id!r} exists")
        self.graph_id = graph_id


class NameTaken(Conflict):
    kind = "NameTaken"

    def __init__(self, name: str) -> None:
        super().__init__(f"the name {name[:80]!r} is taken by another graph (PUT /graphs/{{name}} replaces it)")
        self.name = name


class InvalidName(StateError):
    kind = "InvalidName"


class VersionConflict(Conflict):
    """An edge update written against ``expected`` while the graph is at ``current``."""

    kind = "VersionConflict"

    def __init__(self, graph_id: str, expected: int, current: int) -> None:
        super().__init__(f"graph {graph_id!r} is at version {current}, not {expected}")
        self.graph_id = graph_id
        self.expected = expected
        self.current = current


class VersionStateError(Conflict):
    """A version cannot move to the asked state (publishing one that was never staged, or an older one)."""

    kind = "VersionStateError"


class LeaseLost(Conflict):
    """The job's lease is no longer the caller's: it expired and another worker took the job, or the job was
    cancelled (its graph deleted). The caller stops and publishes nothing."""

    kind = "LeaseLost"

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} is no longer leased to this worker")
        self.job_id = job_id


class ArtifactNotFound(StateError):
    kind = "ArtifactNotFound"

    def __init__(self, graph_id: str, version: int) -> None:
        super().__init__(f"graph {graph_id!r} has no stored index at version {version}")
        self.graph_id = graph_id
        self.version = version


class ArtifactExists(Conflict):
    """Versions are written once: publishing a (graph, version) that is already stored."""

    kind = "ArtifactExists"

    def __init__(self, graph_id: str, version: int) -> None:
        super().__init__(f"graph {graph_id!r} already has a stored index at version {version}")
        self.graph_id = graph_id
        self.version = version


class ArtifactCorrupt(StateError):
    kind = "ArtifactCorrupt"


class UploadNotFound(StateError):
    kind = "UploadNotFound"

    def __init__(self, key: str) -> None:
        super().__init__(f"no stored upload {key[:80]!r}")
        self.key = key


class UploadExists(Conflict):
    """Uploads are written once: storing one under a key that is taken."""

    kind = "UploadExists"

    def __init__(self, key: str) -> None:
        super().__init__(f"an upload {key[:80]!r} is stored already")
        self.key = key


class UploadTooLarge(StateError):
    """The stream went past the size it was allowed; nothing of it is kept."""

    kind = "UploadTooLarge"

    def __init__(self, limit: int) -> None:
        super().__init__(f"the upload is larger than {limit} bytes")
        self.limit = limit


class StorageFull(StateError):
    """The disk (or quota) is full; nothing of the refused write is visible."""

    kind = "DiskFull"


class ReadOnlyStorage(StateError):
    kind = "ReadOnlyStorage"


class StoreUnavailable(StateError):
    """The database or the object store cannot be reached now; the same call later may succeed."""

    kind = "StoreUnavailable"


class SchemaTooNew(StateError):
    """The database was written by a newer release, whose schema this one does not know."""

    kind = "SchemaTooNew"


class DataDirLocked(StateError):
    """Another live server owns the data directory."""

    kind = "DataDirLocked"

    def __init__(self, message: str, owner: dict[str, object]) -> None:
        super().__init__(message)
        self.owner = owner


def storage_error(exc: OSError, doing: str) -> StateError | None:
    """A full or read-only disk as the state error that says so; None for any other OSError."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFull(f"the disk is full ({doing}); free space and try again")
    if exc.errno == errno.EROFS:
        return ReadOnlyStorage(f"the data directory is read-only ({doing})")
    return None
