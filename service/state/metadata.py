"""The metadata store's contract: what a graph, a version, a journal row, a job, a server and a change are, and
the one interface (``MetadataStore``) that SQLite (``service.state.sqlite``, the embedded default) and PostgreSQL
(``service.state.postgres``, shared by several servers) implement with the same SQL (``service.state.sql``).

Rules every implementation keeps:

- A method that returns has committed: nothing is acknowledged before it is durable, on disk past a crash of
  the machine, not only of the process (SQLite: WAL with ``synchronous=FULL``; PostgreSQL: a committed
  transaction, ``synchronous_commit`` on).
- A method that raises changed nothing (full disk, a conflict, a graph deleted meanwhile): each call is one
  transaction, but appends, which share one per group and are each applied whole or not at all within it.
- Graphs are soft-deleted: ``delete_graph`` marks the row, frees its name, cancels its jobs, retires its
  versions and drops its journal in one transaction; every later write for it raises ``GraphNotFound``. A write
  racing a delete is ordered with it (the graph's row is locked by both), never half applied.
- Versions are immutable: a row is ``staged`` when a build reserves it, ``published`` once its artifact is
  complete and checksummed (``publish_version``), ``retired`` when a newer one is published or the graph is
  deleted, and forgotten after its artifact is removed (``garbage``, ``forget_version``).
- The journal holds one row per edge update, numbered by the version it makes (``head_version + 1``);
  ``append_update`` is conditional on the caller's expected head, so writers through different servers
  serialize; ``publish_version`` drops the rows the published version folds in. Concurrent appends of one
  store commit in groups, one transaction each (``append_stats``), each answered after its group's commit; a
  refused append changes nothing and refuses no other.
- Changes (``changes_since``, ``subscribe``) are hints, delivered at least once: a change says which graph to
  read again, the rows say what is true.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from .errors import InvalidName
from .groupcommit import GroupStats

__all__ = [
    "GraphStatus",
    "VersionStatus",
    "JobKind",
    "JobState",
    "ChangeKind",
    "Graph",
    "Version",
    "JournalEntry",
    "JournalTimes",
    "Job",
    "URGENT",
    "ServerInfo",
    "Change",
    "ArtifactReferences",
    "Subscription",
    "MetadataStore",
    "NAME_PATTERN",
    "MAX_NAME_CHARS",
    "check_name",
]

MAX_NAME_CHARS = 200
NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]*$"
_NAME_PATTERN = re.compile(NAME_PATTERN)


class GraphStatus(str, Enum):
    queued = "queued"
    building = "building"
    ready = "ready"
    failed = "failed"


class VersionStatus(str, Enum):
    staged = "staged"
    published = "published"
    retired = "retired"


class JobKind(str, Enum):
    build = "build"  # a graph's first index, from its upload
    rebuild = "rebuild"  # new labels that fold the journal in


class JobState(str, Enum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"


class ChangeKind(str, Enum):
    graph = "graph"  # created, status or name changed, deleted
    version = "version"  # a version was published
    journal = "journal"  # an edge update was appended (its version is the change's)
    job = "job"  # a job was queued (builders wake up)


def check_name(name: str) -> str:
    """A graph name as URLs and the CLI can carry it: letters, digits, ``.``, ``_``, ``-``, at most
    ``MAX_NAME_CHARS``, starting with a letter or a digit (``NAME_PATTERN``). InvalidName otherwise. (That no
    name is another graph's id, nor an id another graph's name, the store keeps: ``create_graph``.)"""
    if not name or len(name) > MAX_NAME_CHARS or not _NAME_PATTERN.fullmatch(name):
        raise InvalidName(
            f"a graph name is 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-', starting with a letter or "
            f"digit; got {name[:80]!r}"
        )
    return name


@dataclass(frozen=True)
class Graph:
    id: str
    name: str  # unique among live graphs; the id itself unless one was given
    params: dict[str, Any]  # the build options, as the build job passes them
    status: GraphStatus
    error: dict[str, Any] | None
    stats: dict[str, Any] | None
    upload_bytes: int
    upload_key: str | None  # the artifact store's key of the upload that waits for its build (put_upload)
    published_version: int | None  # the version queries start from; None until the first build is published
    head_version: int  # the latest version: the published one or the last journal row past it
    pending_name: str | None  # a replacement (PUT): the name this graph takes once its first version is published
    created_at: float
    updated_at: float
    deleted_at: float | None

    @property
    def pending_updates(self) -> int:
        """Journal rows past the published version: what a rebuild would fold in."""
        return 0 if self.published_version is None else self.head_version - self.published_version


@dataclass(frozen=True)
class Version:
    graph_id: str
    version: int
    status: VersionStatus
    artifact_key: str  # where the artifact store keeps its files
    checksum: str  # the artifact's manifest checksum ("sha256:...")
    size_bytes: int
    base_version: int | None  # the version a rebuild started from; None for a build from an upload
    created_at: float
    published_at: float | None
    retired_at: float | None


@dataclass(frozen=True)
class JournalEntry:
    graph_id: str
    version: int  # the version this update makes
    payload: str  # the update as the service wrote it (JSON text; the store does not read it)
    created_at: float

    def decoded(self) -> Any:
        return json.loads(self.payload)


@dataclass(frozen=True)
class JournalTimes:
    """When a graph's journal rows past its published version were made, on the store's clock (seconds since
    the epoch), as every server sharing the store sees them: what decides when a rebuild folds them in."""

    pending: int  # journaled updates past the published version
    first_at: float | None  # the oldest of those rows (None: no row)
    last_at: float | None  # the newest
    previous_at: float | None  # the one before the newest (None: fewer than two)
    published_at: float | None  # when the published version was published
    now: float  # the store's clock when these were read


# The payload key of an urgent job (``MetadataStore.hasten_job``).
URGENT = "urgent"


@dataclass(frozen=True)
class Job:
    id: int
    graph_id: str
    kind: JobKind
    state: JobState
    payload: dict[str, Any]
    through_version: int | None  # a rebuild: the journal is folded in up to this version (None: all)
    attempts: int  # claims so far, this one included
    max_attempts: int
    next_attempt_at: float
    lease_owner: str | None
    lease_token: int  # the fencing token: changes at every claim; complete/fail/heartbeat must present it
    lease_expires_at: float | None
    error: dict[str, Any] | None
    created_at: float
    updated_at: float
    memory_bytes: int = 0  # what its build is estimated to need (a builder claims only jobs that fit)

    @property
    def urgent(self) -> bool:
        """A rebuild that runs without waiting for its graph's updates to pause (``hasten_job``)."""
        return bool(self.payload.get(URGENT))


@dataclass(frozen=True)
class ServerInfo:
    id: str
    role: str
    host: str
    pid: int
    port: int | None
    started_at: float
    heartbeat_at: float
    expires_at: float


@dataclass(frozen=True)
class Change:
    seq: int
    kind: ChangeKind
    graph_id: str | None
    version: int | None
    at: float


@dataclass(frozen=True)
class ArtifactReferences:
    """What the metadata refers to in the artifact store: anything else there is an orphan (service.state.sweep)."""

    versions: frozenset[tuple[str, int]]  # (graph id, version) of every version row, whatever its status
    uploads: frozenset[str]  # the upload keys of live graphs (one whose build was published needs it no more)


class Subscription(Protocol):
    """Changes as they commit, from any server: ``wait`` returns those past ``cursor`` (at least once each), or
    an empty list after ``timeout`` seconds. PostgreSQL wakes on LISTEN/NOTIFY, SQLite on commits of this
    process and by polling for other processes; both read the ``changes`` table, so nothing is missed across a
    lost notification or a reconnect."""

    cursor: int

    def wait(self, timeout: float) -> list[Change]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Subscription: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class MetadataStore(Protocol):
    """Graphs, names, versions, the edge-update journal, build jobs, servers and changes (see the module doc).

    Times are seconds since the epoch by the database's clock (leases compare against it, so servers' clocks
    may differ). ``ref`` arguments take a graph's id or its name; ``graph_id`` arguments take the id only.
    """

    url: str  # without its password
    shared: bool  # True when several servers may use it at once (PostgreSQL); SQLite needs the data-dir lock

    def close(self) -> None: ...

    # ---- graphs and names ---------------------------------------------------------------------------
    def create_graph(
        self,
        graph_id: str,
        params: dict[str, Any],
        *,
        name: str | None = None,
        replace: bool = False,
        upload_bytes: int = 0,
        upload_key: str | None = None,
        build: dict[str, Any] | None = None,
        build_memory_bytes: int = 0,
    ) -> Graph: ...

    def get_graph(self, ref: str) -> Graph: ...

    def list_graphs(self) -> list[Graph]: ...

    def set_status(self, graph_id: str, status: GraphStatus, *, error: dict[str, Any] | None = None) -> Graph: ...

    def delete_graph(self, ref: str) -> Graph: ...

    def forget_deleted_graphs(self, older_than_s: float) -> list[str]: ...

    # ---- versions -----------------------------------------------------------------------------------
    def stage_version(
        self,
        graph_id: str,
        version: int,
        *,
        artifact_key: str,
        checksum: str,
        size_bytes: int,
        base_version: int | None = None,
    ) -> Version: ...

    def publish_version(
        self,
        graph_id: str,
        version: int,
        *,
        stats: dict[str, Any] | None = None,
        job: Job | None = None,
    ) -> Graph: ...

    def get_version(self, graph_id: str, version: int) -> Version: ...

    def list_versions(self, graph_id: str) -> list[Version]: ...

    def garbage(self, older_than_s: float) -> list[Version]: ...

    def forget_version(self, graph_id: str, version: int) -> None: ...

    def artifact_references(self) -> ArtifactReferences: ...

    # ---- the edge-update journal --------------------------------------------------------------------
    def append_update(self, graph_id: str, expected_version: int, payload: str) -> int: ...

    def append_updates(self, appends: Sequence[tuple[str, int, str]]) -> list[int | BaseException]: ...

    def append_stats(self) -> GroupStats: ...

    def read_updates(
        self, graph_id: str, after: int, through: int | None = None, limit: int | None = None
    ) -> list[JournalEntry]: ...

    def drop_updates_through(self, graph_id: str, version: int) -> int: ...

    def journal_times(self, graph_id: str) -> JournalTimes: ...

    # ---- build jobs ---------------------------------------------------------------------------------
    def enqueue_job(
        self,
        graph_id: str,
        kind: JobKind,
        payload: dict[str, Any],
        *,
        through_version: int | None = None,
        max_attempts: int = 3,
        memory_bytes: int = 0,
        delay_s: float = 0.0,
    ) -> Job: ...

    def claim_job(
        self,
        owner: str,
        lease_s: float,
        kinds: Sequence[JobKind] | None = None,
        max_memory_bytes: int | None = None,
        min_memory_bytes: int | None = None,
    ) -> Job | None: ...

    def heartbeat_job(self, job: Job, lease_s: float) -> Job: ...

    def complete_job(self, job: Job) -> Job: ...

    def fail_job(self, job: Job, error: dict[str, Any], *, retry: bool = True) -> Job: ...

    def defer_job(self, job: Job, error: dict[str, Any] | None, delay_s: float) -> Job: ...

    def hasten_job(self, graph_id: str, kind: JobKind) -> Job | None: ...

    def get_job(self, job_id: int) -> Job: ...

    def list_jobs(self, graph_id: str | None = None, states: Sequence[JobState] | None = None) -> list[Job]: ...

    def release_jobs(self, owner: str | None = None) -> int: ...

    def prune_jobs(self, older_than_s: float) -> int: ...

    # ---- servers ------------------------------------------------------------------------------------
    def register_server(
        self, server_id: str, *, role: str, host: str, pid: int, port: int | None, ttl_s: float
    ) -> ServerInfo: ...

    def heartbeat_server(self, server_id: str, ttl_s: float) -> bool: ...

    def live_servers(self) -> list[ServerInfo]: ...

    def deregister_server(self, server_id: str) -> None: ...

    # ---- changes ------------------------------------------------------------------------------------
    def current_cursor(self) -> int: ...

    def changes_since(self, cursor: int) -> tuple[list[Change], int]: ...

    def subscribe(self, cursor: int | None = None, poll_s: float = 1.0) -> Subscription: ...

    def prune_changes(self, older_than_s: float) -> int: ...

    # ---- small settings -----------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...
