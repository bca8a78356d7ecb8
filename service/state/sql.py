"""The metadata store's logic and SQL, shared by SQLite and PostgreSQL (``SqlMetadataStore``).

A subclass supplies a ``Dialect`` (the few words of SQL that differ), runs one function per transaction
(``_run``: connection, ``BEGIN``/``COMMIT``, retry where the database asks for one, its errors translated into
``StateError``), and reads the change feed (``current_cursor``, ``changes_since``, ``subscribe``), whose
cursor means something different on each. Everything else is here, once.

Statements are written with ``?`` placeholders and ``{word}`` dialect words (``{now}``: the database's clock in
seconds; ``{for_update}``: a row lock where the database has them; ``{skip_locked}``: a claim that passes over
rows another transaction holds). Rows lock in one order, graphs before jobs, and several graphs by id, so
that PostgreSQL transactions never wait on each other in a cycle.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import (
    GraphExists,
    GraphNotFound,
    GraphNotReady,
    InvalidName,
    LeaseLost,
    NameTaken,
    SchemaTooNew,
    StateError,
    VersionConflict,
    VersionStateError,
)
from .groupcommit import GroupCommit, GroupStats
from .metadata import (
    URGENT,
    ArtifactReferences,
    Change,
    ChangeKind,
    Graph,
    GraphStatus,
    Job,
    JobKind,
    JobState,
    JournalEntry,
    JournalTimes,
    ServerInfo,
    Subscription,
    Version,
    VersionStatus,
    check_name,
)
from .schema import MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "Dialect",
    "SqlMetadataStore",
    "Tx",
    "PollingSubscription",
    "JOB_BACKOFF_BASE_S",
    "JOB_BACKOFF_MAX_S",
    "MAX_GROUP_APPENDS",
    "Append",
]

# A build's claims at most: one whose server died (its lease ran out) is taken over by another server, up to this
# many times; a build that fails is failed for good at once (service.jobs: bad input fails the same every time).
BUILD_CLAIMS = 3

T = TypeVar("T")

# The most edge updates one transaction commits together (a bound on a transaction's length, not a target).
MAX_GROUP_APPENDS = 256
# A failed job waits base * 2^(attempts - 1) seconds before its next attempt, at most the cap.
JOB_BACKOFF_BASE_S = 5.0
JOB_BACKOFF_MAX_S = 600.0

_GRAPH_COLUMNS = (
    "id, name, params, status, error, stats, upload_bytes, upload_key, published_version, head_version, "
    "pending_name, created_at, updated_at, deleted_at"
)
_VERSION_COLUMNS = (
    "graph_id, version, status, artifact_key, checksum, size_bytes, base_version, created_at, published_at, retired_at"
)
_JOB_COLUMNS = (
    "id, graph_id, kind, state, payload, through_version, attempts, max_attempts, next_attempt_at, lease_owner, "
    "lease_token, lease_expires_at, error, created_at, updated_at, memory_bytes"
)
_SERVER_COLUMNS = "id, role, host, pid, port, started_at, heartbeat_at, expires_at"
_ACTIVE_JOB = "state IN ('queued', 'running')"
# The live graph a ref names: its id first, else its name.
_BY_REF = "deleted_at IS NULL AND (id = ? OR name = ?) ORDER BY CASE WHEN id = ? THEN 0 ELSE 1 END LIMIT 1"


@dataclass(frozen=True)
class Append:
    """An edge update for the journal, as ``append_update`` takes it."""

    graph_id: str
    expected_version: int
    payload: str


@dataclass(frozen=True)
class Dialect:
    name: str
    types: dict[str, str]  # the schema's type words (service.state.schema)
    words: dict[str, str]  # now, for_update, skip_locked, greatest
    placeholder: str  # what "?" becomes


class Tx:
    """One transaction's cursor, speaking the shared SQL."""

    def __init__(self, cursor: Any, translate: Callable[[str], str]) -> None:
        self._cursor = cursor
        self._translate = translate
        self.changed = False  # a change row was written: subscribers are woken after the commit

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._cursor.execute(self._translate(sql), params)
        return list(self._cursor.fetchall())

    @property
    def cursor(self) -> Any:
        """The driver's cursor (its connection: ``cursor.connection``), for what the shared SQL cannot say."""
        return self._cursor

    def sql(self, template: str) -> str:
        """A statement of the shared SQL in the driver's words."""
        return self._translate(template)

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self.all(sql, params)  # every row read: SQLite finishes a RETURNING statement only then
        return rows[0] if rows else None

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cursor.execute(self._translate(sql), params)
        return int(self._cursor.rowcount)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _graph(row: tuple[Any, ...]) -> Graph:
    return Graph(
        id=row[0],
        name=row[1],
        params=json.loads(row[2]),
        status=GraphStatus(row[3]),
        error=_loads(row[4]),
        stats=_loads(row[5]),
        upload_bytes=int(row[6]),
        upload_key=row[7],
        published_version=None if row[8] is None else int(row[8]),
        head_version=int(row[9]),
        pending_name=row[10],
        created_at=float(row[11]),
        updated_at=float(row[12]),
        deleted_at=None if row[13] is None else float(row[13]),
    )


def _version(row: tuple[Any, ...]) -> Version:
    return Version(
        graph_id=row[0],
        version=int(row[1]),
        status=VersionStatus(row[2]),
        artifact_key=row[3],
        checksum=row[4],
        size_bytes=int(row[5]),
        base_version=None if row[6] is None else int(row[6]),
        created_at=float(row[7]),
        published_at=None if row[8] is None else float(row[8]),
        retired_at=None if row[9] is None else float(row[9]),
    )


def _job(row: tuple[Any, ...]) -> Job:
    return Job(
        id=int(row[0]),
        graph_id=row[1],
        kind=JobKind(row[2]),
        state=JobState(row[3]),
        payload=json.loads(row[4]),
        through_version=None if row[5] is None else int(row[5]),
        attempts=int(row[6]),
        max_attempts=int(row[7]),
        next_attempt_at=float(row[8]),
        lease_owner=row[9],
        lease_token=int(row[10]),
        lease_expires_at=None if row[11] is None else float(row[11]),
        error=_loads(row[12]),
        created_at=float(row[13]),
        updated_at=float(row[14]),
        memory_bytes=int(row[15]),
    )


def _server(row: tuple[Any, ...]) -> ServerInfo:
    return ServerInfo(
        id=row[0],
        role=row[1],
        host=row[2],
        pid=int(row[3]),
        port=None if row[4] is None else int(row[4]),
        started_at=float(row[5]),
        heartbeat_at=float(row[6]),
        expires_at=float(row[7]),
    )


def _change(row: Sequence[Any]) -> Change:
    return Change(
        seq=int(row[0]),
        kind=ChangeKind(row[1]),
        graph_id=row[2],
        version=None if row[3] is None else int(row[3]),
        at=float(row[4]),
    )


class SqlMetadataStore(ABC):
    """``MetadataStore`` over SQL; see service.state.metadata for what each method promises."""

    dialect: Dialect
    url: str
    shared: bool
    # The exception a unique index raises, per driver (a name taken by a racing transaction).
    unique_violation: type[BaseException]

    def __init__(self, *, job_backoff_s: tuple[float, float] = (JOB_BACKOFF_BASE_S, JOB_BACKOFF_MAX_S)) -> None:
        self.job_backoff_s = job_backoff_s
        self._appends: GroupCommit[Append, int] = GroupCommit(self._commit_appends, MAX_GROUP_APPENDS)
        self._statements: dict[str, str] = {}
        self._statements_lock = threading.Lock()

    # ---- what a subclass supplies -------------------------------------------------------------------

    @abstractmethod
    def _run(self, work: Callable[[Tx], T], write: bool) -> T:
        """``work`` in one transaction, committed before this returns; its errors as StateError."""

    @abstractmethod
    def _lock_migrations(self, tx: Tx) -> None:
        """Hold a lock that one migration run at a time takes, until the transaction ends."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def current_cursor(self) -> int: ...

    @abstractmethod
    def changes_since(self, cursor: int) -> tuple[list[Change], int]: ...

    @abstractmethod
    def subscribe(self, cursor: int | None = None, poll_s: float = 1.0) -> Subscription: ...

    # ---- SQL ----------------------------------------------------------------------------------------

    def _sql(self, template: str) -> str:
        statement = self._statements.get(template)
        if statement is None:
            statement = template.format(**self.dialect.words).replace("?", self.dialect.placeholder)
            with self._statements_lock:
                self._statements[template] = statement
        return statement

    def _write(self, work: Callable[[Tx], T]) -> T:
        return self._run(work, write=True)

    def _read(self, work: Callable[[Tx], T]) -> T:
        """A read of one statement (``work`` runs exactly one; a read of several, which must see one snapshot,
        is ``_run(work, write=False)``)."""
        return self._run(work, write=False)

    def _migrate(self) -> None:
        """Apply the migrations this database lacks (see service.state.schema)."""

        def work(tx: Tx) -> None:
            self._lock_migrations(tx)
            tx.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = tx.one("SELECT version FROM schema_version")
            current = 0 if row is None else int(row[0])
            if current > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"the metadata database has schema version {current}; this release knows up to {SCHEMA_VERSION}"
                )
            for statements in MIGRATIONS[current:]:
                for template in statements:
                    statement = template.format(**self.dialect.types).strip()
                    if statement:
                        tx.run(statement.replace("{", "{{").replace("}", "}}"))
            if row is None:
                tx.run("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif current < SCHEMA_VERSION:
                tx.run("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

        self._write(work)

    def schema_version(self) -> int:
        row = self._read(lambda tx: tx.one("SELECT version FROM schema_version"))
        return 0 if row is None else int(row[0])

    @staticmethod
    def _record_change(tx: Tx, kind: ChangeKind, graph_id: str | None, version: int | None = None) -> None:
        tx.run(
            "INSERT INTO changes (kind, graph_id, version, at) VALUES (?, ?, ?, {now})", (kind.value, graph_id, version)
        )
        tx.changed = True

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
        status: GraphStatus = GraphStatus.queued,
        build: dict[str, Any] | None = None,
        build_memory_bytes: int = 0,
    ) -> Graph:
        """A new graph, queued. ``name`` defaults to the id. With ``replace``, the graph is built to take over
        ``name``: if a live graph holds it, this one keeps its id as its name and ``pending_name`` says what it
        takes once its first version is published (a replacement still pending for that name is deleted: the
        newest wins); if none does, it takes the name now. NameTaken when the name is held and not replaced.
        ``build``: the payload of its build job, queued in the same transaction (``build_memory_bytes``: what
        the build is estimated to need), so that no graph waits for a build that was never queued."""
        if replace and name is None:
            raise InvalidName("a replacement needs the name of the graph it replaces")
        wanted = graph_id if name is None else check_name(name)

        def work(tx: Tx) -> Graph:
            # A graph is reached by its id or its name: no id may be another graph's name, nor the reverse.
            if tx.one("SELECT 1 FROM graphs WHERE id = ? OR (name = ? AND deleted_at IS NULL)", (graph_id, graph_id)):
                raise GraphExists(graph_id)
            if wanted != graph_id and tx.one("SELECT 1 FROM graphs WHERE id = ?", (wanted,)) is not None:
                raise NameTaken(wanted)
            holder = tx.one("SELECT id FROM graphs WHERE name = ? AND deleted_at IS NULL", (wanted,))
            if holder is not None and not replace:
                raise NameTaken(wanted)
            pending = None
            if replace:
                superseded = [r[0] for r in tx.all("SELECT id FROM graphs WHERE pending_name = ?", (wanted,))]
                for old in self._lock_graphs(tx, superseded):
                    self._soft_delete(tx, old)
                pending = wanted if holder is not None else None
            row = tx.one(
                f"""INSERT INTO graphs (id, name, pending_name, params, status, upload_bytes, upload_key, head_version,
                    created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, {{now}}, {{now}})
                    RETURNING {_GRAPH_COLUMNS}""",
                (
                    graph_id,
                    graph_id if pending else wanted,
                    pending,
                    _dumps(params),
                    GraphStatus(status).value,
                    upload_bytes,
                    upload_key,
                ),
            )
            assert row is not None
            self._record_change(tx, ChangeKind.graph, graph_id)
            if build is not None:
                self._insert_job(tx, graph_id, JobKind.build, build, None, BUILD_CLAIMS, build_memory_bytes)
            return _graph(row)

        try:
            return self._write(work)
        except self.unique_violation:  # a racing transaction took the name between the check and the insert
            raise NameTaken(wanted) from None

    def get_graph(self, ref: str) -> Graph:
        row = self._read(lambda tx: tx.one(f"SELECT {_GRAPH_COLUMNS} FROM graphs WHERE {_BY_REF}", (ref, ref, ref)))
        if row is None:
            raise GraphNotFound(ref)
        return _graph(row)

    def list_graphs(self) -> list[Graph]:
        rows = self._read(
            lambda tx: tx.all(f"SELECT {_GRAPH_COLUMNS} FROM graphs WHERE deleted_at IS NULL ORDER BY created_at, id")
        )
        return [_graph(row) for row in rows]

    def set_status(self, graph_id: str, status: GraphStatus, *, error: dict[str, Any] | None = None) -> Graph:
        """A build's progress (queued, building) or its failure, with the error; ready comes with
        ``publish_version``. GraphNotFound once deleted."""
        if GraphStatus(status) is GraphStatus.ready:
            raise VersionStateError("a graph becomes ready when a version is published (publish_version)")

        def work(tx: Tx) -> Graph:
            row = tx.one(
                f"""UPDATE graphs SET status = ?, error = ?, updated_at = {{now}}
                    WHERE id = ? AND deleted_at IS NULL RETURNING {_GRAPH_COLUMNS}""",
                (GraphStatus(status).value, _dumps(error), graph_id),
            )
            if row is None:
                raise GraphNotFound(graph_id)
            self._record_change(tx, ChangeKind.graph, graph_id)
            return _graph(row)

        return self._write(work)

    def delete_graph(self, ref: str) -> Graph:
        """Delete a live graph and any replacement pending for its name: names freed, jobs cancelled, versions
        retired (their artifacts are removed later, see ``garbage``), journal dropped. Returns the graph as it
        was; GraphNotFound when there is none."""

        def work(tx: Tx) -> Graph:
            row = tx.one(f"SELECT {_GRAPH_COLUMNS} FROM graphs WHERE {_BY_REF}", (ref, ref, ref))
            if row is None:
                raise GraphNotFound(ref)
            graph = _graph(row)
            pending = [r[0] for r in tx.all("SELECT id FROM graphs WHERE pending_name = ?", (graph.name,))]
            locked = self._lock_graphs(tx, [graph.id, *pending])
            if graph.id not in locked:  # deleted by a transaction that committed while this one waited
                raise GraphNotFound(ref)
            for graph_id in locked:
                self._soft_delete(tx, graph_id)
            return graph

        return self._write(work)

    def _lock_graphs(self, tx: Tx, ids: Iterable[str]) -> list[str]:
        """Lock the live graphs among ``ids``, in id order; returns those still live."""
        wanted = sorted(set(ids))
        if not wanted:
            return []
        marks = ", ".join("?" * len(wanted))
        rows = tx.all(
            f"SELECT id FROM graphs WHERE id IN ({marks}) AND deleted_at IS NULL ORDER BY id {{for_update}}", wanted
        )
        return [r[0] for r in rows]

    def _soft_delete(self, tx: Tx, graph_id: str) -> None:
        tx.run(
            "UPDATE graphs SET deleted_at = {now}, updated_at = {now} WHERE id = ? AND deleted_at IS NULL", (graph_id,)
        )
        tx.run(
            f"""UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL, updated_at = {{now}}
                WHERE graph_id = ? AND {_ACTIVE_JOB}""",
            (graph_id,),
        )
        tx.run(
            """UPDATE versions SET status = 'retired', retired_at = {now}
               WHERE graph_id = ? AND status <> 'retired'""",
            (graph_id,),
        )
        tx.run("DELETE FROM journal WHERE graph_id = ?", (graph_id,))
        self._record_change(tx, ChangeKind.graph, graph_id)

    def forget_deleted_graphs(self, older_than_s: float) -> list[str]:
        """Remove the rows of graphs deleted more than ``older_than_s`` ago whose versions are all forgotten
        (their artifacts removed); their jobs and journal go with them. Returns their ids."""
        rows = self._write(
            lambda tx: tx.all(
                """DELETE FROM graphs WHERE deleted_at IS NOT NULL AND deleted_at < {now} - ?
                   AND NOT EXISTS (SELECT 1 FROM versions WHERE versions.graph_id = graphs.id) RETURNING id""",
                (older_than_s,),
            )
        )
        return [r[0] for r in rows]

    def _live_locked(self, tx: Tx, graph_id: str) -> Graph:
        row = tx.one(
            f"SELECT {_GRAPH_COLUMNS} FROM graphs WHERE id = ? AND deleted_at IS NULL {{for_update}}", (graph_id,)
        )
        if row is None:
            raise GraphNotFound(graph_id)
        return _graph(row)

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
    ) -> Version:
        """Record a version whose artifact is stored and checksummed, not yet served. Staging a version again
        (a retried build) replaces its staged row; a published or retired one is never written again."""

        def work(tx: Tx) -> Version:
            self._live_locked(tx, graph_id)
            existing = tx.one("SELECT status FROM versions WHERE graph_id = ? AND version = ?", (graph_id, version))
            if existing is not None and existing[0] != VersionStatus.staged.value:
                raise VersionStateError(
                    f"version {version} of graph {graph_id!r} is {existing[0]}: a version is written once"
                )
            row = tx.one(
                f"""INSERT INTO versions (graph_id, version, status, artifact_key, checksum, size_bytes, base_version,
                        created_at)
                    VALUES (?, ?, 'staged', ?, ?, ?, ?, {{now}})
                    ON CONFLICT (graph_id, version) DO UPDATE SET artifact_key = excluded.artifact_key,
                        checksum = excluded.checksum, size_bytes = excluded.size_bytes,
                        base_version = excluded.base_version, created_at = excluded.created_at
                    RETURNING {_VERSION_COLUMNS}""",
                (graph_id, version, artifact_key, checksum, size_bytes, base_version),
            )
            assert row is not None
            return _version(row)

        return self._write(work)

    def publish_version(
        self,
        graph_id: str,
        version: int,
        *,
        stats: dict[str, Any] | None = None,
        job: Job | None = None,
    ) -> Graph:
        """Serve a staged version, in one transaction: the graph becomes ready at it (``stats`` recorded, its
        upload no longer needed), the version before it is retired, the journal rows it folds in (up to
        ``version``) are dropped, ``job`` (the build that made it) is completed (LeaseLost, and nothing done,
        when the caller no longer holds its lease), and a replacement takes its name over, the graph that held
        it deleted. GraphNotFound when the graph was deleted; VersionStateError when the version was not staged
        or is not newer than the published one."""

        def work(tx: Tx) -> Graph:
            row = tx.one(f"SELECT {_GRAPH_COLUMNS} FROM graphs WHERE id = ? AND deleted_at IS NULL", (graph_id,))
            if row is None:
                raise GraphNotFound(graph_id)
            pending = _graph(row).pending_name
            holders: list[str] = []
            if pending is not None:
                holders = [
                    r[0] for r in tx.all("SELECT id FROM graphs WHERE name = ? AND deleted_at IS NULL", (pending,))
                ]
            locked = self._lock_graphs(tx, [graph_id, *holders])
            if graph_id not in locked:
                raise GraphNotFound(graph_id)
            graph = self._live_locked(tx, graph_id)
            if job is not None:
                self._finish_job(tx, job, JobState.done, None)
            if graph.published_version is not None and version <= graph.published_version:
                raise VersionStateError(
                    f"graph {graph_id!r} serves version {graph.published_version}; version {version} is not newer"
                )
            published = tx.one(
                """UPDATE versions SET status = 'published', published_at = {now}
                   WHERE graph_id = ? AND version = ? AND status = 'staged' RETURNING version""",
                (graph_id, version),
            )
            if published is None:
                raise VersionStateError(f"version {version} of graph {graph_id!r} was not staged")
            tx.run(
                """UPDATE versions SET status = 'retired', retired_at = {now}
                   WHERE graph_id = ? AND status = 'published' AND version <> ?""",
                (graph_id, version),
            )
            name = graph.name
            if graph.pending_name is not None:
                for old in locked:
                    if old != graph_id:
                        self._soft_delete(tx, old)
                name = graph.pending_name
            row = tx.one(
                f"""UPDATE graphs SET status = 'ready', error = NULL, stats = COALESCE(?, stats),
                        published_version = ?, head_version = {{greatest}}(head_version, ?), name = ?,
                        pending_name = NULL, upload_key = NULL, updated_at = {{now}}
                    WHERE id = ? RETURNING {_GRAPH_COLUMNS}""",
                (_dumps(stats), version, version, name, graph_id),
            )
            assert row is not None
            tx.run("DELETE FROM journal WHERE graph_id = ? AND version <= ?", (graph_id, version))
            self._record_change(tx, ChangeKind.version, graph_id, version)
            return _graph(row)

        return self._write(work)

    def get_version(self, graph_id: str, version: int) -> Version:
        row = self._read(
            lambda tx: tx.one(
                f"SELECT {_VERSION_COLUMNS} FROM versions WHERE graph_id = ? AND version = ?", (graph_id, version)
            )
        )
        if row is None:
            raise VersionStateError(f"graph {graph_id!r} has no version {version}")
        return _version(row)

    def list_versions(self, graph_id: str) -> list[Version]:
        rows = self._read(
            lambda tx: tx.all(
                f"SELECT {_VERSION_COLUMNS} FROM versions WHERE graph_id = ? ORDER BY version", (graph_id,)
            )
        )
        return [_version(row) for row in rows]

    def garbage(self, older_than_s: float) -> list[Version]:
        """Versions whose artifacts may be removed: retired more than ``older_than_s`` ago (a server still
        answering from one has moved on by then), or staged that long ago by a build that no longer runs (its
        graph deleted, or no job of the graph active). Remove each artifact, then ``forget_version``."""
        rows = self._read(
            lambda tx: tx.all(
                f"""SELECT {_VERSION_COLUMNS} FROM versions v WHERE
                    (v.status = 'retired' AND v.retired_at < {{now}} - ?)
                    OR (v.status = 'staged' AND v.created_at < {{now}} - ? AND NOT EXISTS (
                        SELECT 1 FROM jobs j WHERE j.graph_id = v.graph_id AND j.{_ACTIVE_JOB}))
                    ORDER BY graph_id, version""",
                (older_than_s, older_than_s),
            )
        )
        return [_version(row) for row in rows]

    def forget_version(self, graph_id: str, version: int) -> None:
        """Drop a version's row once its artifact is removed; a published version is never forgotten."""
        self._write(
            lambda tx: tx.run(
                "DELETE FROM versions WHERE graph_id = ? AND version = ? AND status <> 'published'", (graph_id, version)
            )
        )

    def artifact_references(self) -> ArtifactReferences:
        """The versions and uploads the rows refer to, read in one transaction."""

        def work(tx: Tx) -> ArtifactReferences:
            versions = tx.all("SELECT graph_id, version FROM versions")
            uploads = tx.all("SELECT upload_key FROM graphs WHERE upload_key IS NOT NULL AND deleted_at IS NULL")
            return ArtifactReferences(
                versions=frozenset((graph_id, int(version)) for graph_id, version in versions),
                uploads=frozenset(key for (key,) in uploads),
            )

        return self._run(work, write=False)

    # ---- the edge-update journal --------------------------------------------------------------------

    def append_update(self, graph_id: str, expected_version: int, payload: str) -> int:
        """Journal one edge update as version ``expected_version + 1``, if the graph is live, ready and still
        at ``expected_version``; returns the new version once committed. VersionConflict (with the current
        version) when another update came first, GraphNotFound when the graph was deleted, GraphNotReady when it
        has no published version.

        Appends of this store that arrive while another commits wait for it and then commit together, one
        transaction for the group (service.state.groupcommit); each is answered after that commit. A refused
        one writes nothing and leaves the others of its group alone; a group whose commit fails answers each of
        its appends with that error, and none of them happened."""
        return self._appends.submit(Append(graph_id, expected_version, payload))

    def append_updates(self, appends: Sequence[tuple[str, int, str]]) -> list[int | BaseException]:
        """Journal several edge updates (graph id, expected version, payload; at most one per graph) in one
        transaction, as ``append_update`` does each: each one's new version, or its refusal (VersionConflict,
        GraphNotFound, GraphNotReady: that one wrote nothing). Raises, and none of them happened, when the
        transaction fails."""
        return self._commit_appends([Append(*append) for append in appends])

    def append_stats(self) -> GroupStats:
        """How the appends of this store were grouped so far: transactions, appends, the largest group."""
        return self._appends.stats()

    def _commit_appends(self, group: Sequence[Append]) -> list[int | BaseException]:
        """One transaction for a group of appends: each one's new version, or its refusal. One graph's appends
        keep their order of arrival (a later one may expect the version an earlier one made); the graphs' rows
        are taken in id order, as everywhere."""
        order = sorted(range(len(group)), key=lambda i: group[i].graph_id)

        def work(tx: Tx) -> list[int | BaseException]:
            versions = self._append_rows(tx, [group[i] for i in order])
            outcomes: list[int | BaseException] = [0] * len(group)
            for i, version in zip(order, versions, strict=True):
                outcomes[i] = self._refusal(tx, group[i]) if version is None else version
            return outcomes

        return self._run_appends(work, group)

    def _run_appends(self, work: Callable[[Tx], T], group: Sequence[Append]) -> T:
        """The transaction of a group of appends."""
        return self._write(work)

    def _append_rows(self, tx: Tx, appends: Sequence[Append]) -> list[int | None]:
        """The appends, in order, inside a transaction: for each, the version bump, the journal row and the
        change row; its new version, or None when it matched no row (and wrote nothing)."""
        versions: list[int | None] = []
        for append in appends:
            row = tx.one(
                """UPDATE graphs SET head_version = head_version + 1, updated_at = {now}
                   WHERE id = ? AND deleted_at IS NULL AND status = 'ready' AND head_version = ?
                   RETURNING head_version""",
                (append.graph_id, append.expected_version),
            )
            if row is None:
                versions.append(None)
                continue
            version = int(row[0])
            tx.run(
                "INSERT INTO journal (graph_id, version, payload, created_at) VALUES (?, ?, ?, {now})",
                (append.graph_id, version, append.payload),
            )
            self._record_change(tx, ChangeKind.journal, append.graph_id, version)
            versions.append(version)
        return versions

    @staticmethod
    def _refusal(tx: Tx, append: Append) -> StateError:
        """Why an append matched no row: the graph is gone, not ready, or at another version."""
        current = tx.one(
            "SELECT status, head_version FROM graphs WHERE id = ? AND deleted_at IS NULL", (append.graph_id,)
        )
        if current is None:
            return GraphNotFound(append.graph_id)
        if current[0] != GraphStatus.ready.value:
            return GraphNotReady(append.graph_id, current[0])
        return VersionConflict(append.graph_id, append.expected_version, int(current[1]))

    def read_updates(
        self, graph_id: str, after: int, through: int | None = None, limit: int | None = None
    ) -> list[JournalEntry]:
        """The journal rows past version ``after`` (up to ``through``; the first ``limit`` of them), in version
        order."""
        last = through if through is not None else 2**62
        rows = self._read(
            lambda tx: tx.all(
                """SELECT version, payload, created_at FROM journal
                   WHERE graph_id = ? AND version > ? AND version <= ? ORDER BY version LIMIT ?""",
                (graph_id, after, last, limit if limit is not None else 2**62),
            )
        )
        return [JournalEntry(graph_id, int(v), payload, float(at)) for v, payload, at in rows]

    def journal_times(self, graph_id: str) -> JournalTimes:
        """When the graph's journal rows past its published version were made (the oldest, the newest and the
        one before it: index lookups of the journal's key), when that version was published, and the store's
        clock, in one statement. GraphNotFound when the graph was deleted."""
        row = self._read(
            lambda tx: tx.one(
                """SELECT g.head_version - COALESCE(g.published_version, 0),
                    (SELECT created_at FROM journal j WHERE j.graph_id = g.id
                        AND j.version > COALESCE(g.published_version, 0) ORDER BY j.version LIMIT 1),
                    (SELECT created_at FROM journal j WHERE j.graph_id = g.id
                        AND j.version > COALESCE(g.published_version, 0) ORDER BY j.version DESC LIMIT 1),
                    (SELECT created_at FROM journal j WHERE j.graph_id = g.id
                        AND j.version > COALESCE(g.published_version, 0) ORDER BY j.version DESC LIMIT 1 OFFSET 1),
                    (SELECT published_at FROM versions v WHERE v.graph_id = g.id AND v.version = g.published_version),
                    {now}
                FROM graphs g WHERE g.id = ? AND g.deleted_at IS NULL""",
                (graph_id,),
            )
        )
        if row is None:
            raise GraphNotFound(graph_id)
        pending, first, last, previous, published, now = row
        return JournalTimes(
            pending=max(int(pending), 0),
            first_at=None if first is None else float(first),
            last_at=None if last is None else float(last),
            previous_at=None if previous is None else float(previous),
            published_at=None if published is None else float(published),
            now=float(now),
        )

    def drop_updates_through(self, graph_id: str, version: int) -> int:
        return self._write(
            lambda tx: tx.run("DELETE FROM journal WHERE graph_id = ? AND version <= ?", (graph_id, version))
        )

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
    ) -> Job:
        """Queue a job, due in ``delay_s`` seconds; when one of this graph and kind is queued or running already,
        that one is returned instead (a rebuild folds in every update journaled when it starts). GraphNotFound
        once the graph is deleted."""

        def work(tx: Tx) -> Job:
            self._live_locked(tx, graph_id)
            existing = tx.one(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE graph_id = ? AND kind = ? AND {_ACTIVE_JOB}",
                (graph_id, JobKind(kind).value),
            )
            if existing is not None:
                return _job(existing)
            return self._insert_job(tx, graph_id, kind, payload, through_version, max_attempts, memory_bytes, delay_s)

        return self._write(work)

    def _insert_job(
        self,
        tx: Tx,
        graph_id: str,
        kind: JobKind,
        payload: dict[str, Any],
        through_version: int | None,
        max_attempts: int,
        memory_bytes: int,
        delay_s: float = 0.0,
    ) -> Job:
        row = tx.one(
            f"""INSERT INTO jobs (graph_id, kind, state, payload, through_version, attempts, max_attempts,
                    next_attempt_at, lease_token, created_at, updated_at, memory_bytes)
                VALUES (?, ?, 'queued', ?, ?, 0, ?, {{now}} + ?, 0, {{now}}, {{now}}, ?) RETURNING {_JOB_COLUMNS}""",
            (
                graph_id,
                JobKind(kind).value,
                _dumps(payload),
                through_version,
                max_attempts,
                float(delay_s),
                int(memory_bytes),
            ),
        )
        assert row is not None
        self._record_change(tx, ChangeKind.job, graph_id)
        return _job(row)

    def claim_job(
        self,
        owner: str,
        lease_s: float,
        kinds: Sequence[JobKind] | None = None,
        max_memory_bytes: int | None = None,
        min_memory_bytes: int | None = None,
    ) -> Job | None:
        """The next due job for ``owner``, leased for ``lease_s`` seconds with a new fencing token: a queued
        one whose time has come, or a running one whose lease expired (its worker died; taken over); of
        ``kinds`` and needing at most ``max_memory_bytes`` and at least ``min_memory_bytes`` when given. A job
        whose lease expired after its last allowed attempt fails instead. None when nothing is due."""
        kind_filter = ""
        params: list[Any] = []
        if kinds:
            kind_filter = f"AND kind IN ({', '.join('?' * len(kinds))})"
            params = [JobKind(k).value for k in kinds]
        if max_memory_bytes is not None:
            kind_filter += " AND memory_bytes <= ?"
            params.append(int(max_memory_bytes))
        if min_memory_bytes is not None:
            kind_filter += " AND memory_bytes >= ?"
            params.append(int(min_memory_bytes))

        def work(tx: Tx) -> Job | None:
            while True:
                row = tx.one(
                    f"""SELECT id, state, attempts, max_attempts FROM jobs
                        WHERE ((state = 'queued' AND next_attempt_at <= {{now}})
                            OR (state = 'running' AND lease_expires_at < {{now}})) {kind_filter}
                        ORDER BY next_attempt_at, id LIMIT 1 {{skip_locked}}""",
                    params,
                )
                if row is None:
                    return None
                job_id, state, attempts, max_attempts = row
                if state == JobState.running.value and attempts >= max_attempts:
                    error = {
                        "type": "WorkerLost",
                        "message": f"the job's worker stopped answering {attempts} times; it is not tried again",
                    }
                    self._end_job(tx, int(job_id), JobState.failed, error)
                    continue
                claimed = tx.one(
                    f"""UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = ?,
                            lease_token = lease_token + 1, lease_expires_at = {{now}} + ?, updated_at = {{now}}
                        WHERE id = ? RETURNING {_JOB_COLUMNS}""",
                    (owner, lease_s, job_id),
                )
                assert claimed is not None
                return _job(claimed)

        return self._write(work)

    def heartbeat_job(self, job: Job, lease_s: float) -> Job:
        """Extend the lease by ``lease_s`` from now; LeaseLost when the job is no longer the caller's."""

        def work(tx: Tx) -> Job:
            row = tx.one(
                f"""UPDATE jobs SET lease_expires_at = {{now}} + ?, updated_at = {{now}}
                    WHERE id = ? AND lease_token = ? AND state = 'running' RETURNING {_JOB_COLUMNS}""",
                (lease_s, job.id, job.lease_token),
            )
            if row is None:
                raise LeaseLost(job.id)
            return _job(row)

        return self._write(work)

    def complete_job(self, job: Job) -> Job:
        return self._write(lambda tx: self._finish_job(tx, job, JobState.done, None))

    def fail_job(self, job: Job, error: dict[str, Any], *, retry: bool = True) -> Job:
        """End an attempt that failed: queued again after a backoff (``job_backoff_s``: base * 2^(attempts-1),
        capped) while attempts remain and ``retry``, else failed for good; a build that fails for good fails
        its graph with ``error``. LeaseLost when the job is no longer the caller's."""

        def work(tx: Tx) -> Job:
            current = tx.one(
                "SELECT attempts, max_attempts FROM jobs WHERE id = ? AND lease_token = ? AND state = 'running'",
                (job.id, job.lease_token),
            )
            if current is None:
                raise LeaseLost(job.id)
            attempts, max_attempts = int(current[0]), int(current[1])
            if retry and attempts < max_attempts:
                base, cap = self.job_backoff_s
                delay = min(base * 2 ** (attempts - 1), cap)
                row = tx.one(
                    f"""UPDATE jobs SET state = 'queued', next_attempt_at = {{now}} + ?, lease_owner = NULL,
                            lease_expires_at = NULL, error = ?, updated_at = {{now}}
                        WHERE id = ? RETURNING {_JOB_COLUMNS}""",
                    (delay, _dumps(error), job.id),
                )
                assert row is not None
                self._record_change(tx, ChangeKind.job, job.graph_id)
                return _job(row)
            return self._end_job(tx, job.id, JobState.failed, error)

        return self._write(work)

    def hasten_job(self, graph_id: str, kind: JobKind) -> Job | None:
        """The graph's queued job of ``kind`` made due now and urgent (``Job.urgent``: a builder runs it without
        waiting for the graph's updates to pause); None when none is queued."""

        def work(tx: Tx) -> Job | None:
            row = tx.one(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE graph_id = ? AND kind = ? AND state = 'queued'",
                (graph_id, JobKind(kind).value),
            )
            if row is None:
                return None
            job = _job(row)
            row = tx.one(
                f"""UPDATE jobs SET payload = ?, next_attempt_at = {{now}}, updated_at = {{now}}
                    WHERE id = ? RETURNING {_JOB_COLUMNS}""",
                (_dumps(job.payload | {URGENT: True}), job.id),
            )
            assert row is not None
            self._record_change(tx, ChangeKind.job, graph_id)
            return _job(row)

        return self._write(work)

    def defer_job(self, job: Job, error: dict[str, Any] | None, delay_s: float) -> Job:
        """Give a running job back after a failure that is not its own (a store that cannot be reached): queued
        again after ``delay_s``, its attempt not counted, ``error`` shown meanwhile (None: put off by choice, the
        last attempt's error kept). LeaseLost when the job is no longer the caller's."""

        def work(tx: Tx) -> Job:
            row = tx.one(
                f"""UPDATE jobs SET state = 'queued', attempts = {{greatest}}(attempts - 1, 0),
                        next_attempt_at = {{now}} + ?, lease_owner = NULL, lease_expires_at = NULL,
                        error = COALESCE(?, error),
                        updated_at = {{now}}
                    WHERE id = ? AND lease_token = ? AND state = 'running' RETURNING {_JOB_COLUMNS}""",
                (delay_s, _dumps(error), job.id, job.lease_token),
            )
            if row is None:
                raise LeaseLost(job.id)
            self._record_change(tx, ChangeKind.job, job.graph_id)
            return _job(row)

        return self._write(work)

    def _finish_job(self, tx: Tx, job: Job, state: JobState, error: dict[str, Any] | None) -> Job:
        if (
            tx.one(
                "SELECT 1 FROM jobs WHERE id = ? AND lease_token = ? AND state = 'running'", (job.id, job.lease_token)
            )
            is None
        ):
            raise LeaseLost(job.id)
        return self._end_job(tx, job.id, state, error)

    def _end_job(self, tx: Tx, job_id: int, state: JobState, error: dict[str, Any] | None) -> Job:
        row = tx.one(
            f"""UPDATE jobs SET state = ?, error = ?, lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = {{now}}
                WHERE id = ? RETURNING {_JOB_COLUMNS}""",
            (state.value, _dumps(error), job_id),
        )
        assert row is not None
        job = _job(row)
        if state is JobState.failed and job.kind is JobKind.build:
            failed = tx.run(
                """UPDATE graphs SET status = 'failed', error = ?, updated_at = {now}
                   WHERE id = ? AND deleted_at IS NULL AND status IN ('queued', 'building')""",
                (_dumps(error), job.graph_id),
            )
            if failed:
                self._record_change(tx, ChangeKind.graph, job.graph_id)
        return job

    def get_job(self, job_id: int) -> Job:
        row = self._read(lambda tx: tx.one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)))
        if row is None:
            raise StateError(f"no job {job_id}")
        return _job(row)

    def list_jobs(self, graph_id: str | None = None, states: Sequence[JobState] | None = None) -> list[Job]:
        clauses, params = [], []
        if graph_id is not None:
            clauses.append("graph_id = ?")
            params.append(graph_id)
        if states:
            clauses.append(f"state IN ({', '.join('?' * len(states))})")
            params.extend(JobState(s).value for s in states)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._read(lambda tx: tx.all(f"SELECT {_JOB_COLUMNS} FROM jobs {where} ORDER BY id", params))
        return [_job(row) for row in rows]

    def release_jobs(self, owner: str | None = None) -> int:
        """Give running jobs back unfinished, due at once, their attempt not counted: those of ``owner`` (a
        server that stops), or every one (a server that starts on an embedded store, whose lock says no other
        process runs any). Returns how many."""
        clause, params = ("AND lease_owner = ?", [owner]) if owner is not None else ("", [])

        def work(tx: Tx) -> int:
            released = tx.run(
                f"""UPDATE jobs SET state = 'queued', attempts = {{greatest}}(attempts - 1, 0),
                        next_attempt_at = {{now}}, lease_owner = NULL, lease_expires_at = NULL, updated_at = {{now}}
                    WHERE state = 'running' {clause}""",
                params,
            )
            if released:
                self._record_change(tx, ChangeKind.job, None)
            return released

        return self._write(work)

    def prune_jobs(self, older_than_s: float) -> int:
        """Remove the rows of jobs that ended (done, failed, cancelled) more than ``older_than_s`` ago."""
        return self._write(
            lambda tx: tx.run(
                "DELETE FROM jobs WHERE state IN ('done', 'failed', 'cancelled') AND updated_at < {now} - ?",
                (older_than_s,),
            )
        )

    # ---- servers ------------------------------------------------------------------------------------

    def register_server(
        self, server_id: str, *, role: str, host: str, pid: int, port: int | None, ttl_s: float
    ) -> ServerInfo:
        """Announce a server process, alive for ``ttl_s`` unless it heartbeats; rows of servers gone for an hour
        are removed on the way."""

        def work(tx: Tx) -> ServerInfo:
            tx.run("DELETE FROM servers WHERE expires_at < {now} - 3600")
            row = tx.one(
                f"""INSERT INTO servers (id, role, host, pid, port, started_at, heartbeat_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, {{now}}, {{now}}, {{now}} + ?)
                    ON CONFLICT (id) DO UPDATE SET role = excluded.role, host = excluded.host, pid = excluded.pid,
                        port = excluded.port, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
                        expires_at = excluded.expires_at
                    RETURNING {_SERVER_COLUMNS}""",
                (server_id, role, host, pid, port, ttl_s),
            )
            assert row is not None
            return _server(row)

        return self._write(work)

    def heartbeat_server(self, server_id: str, ttl_s: float) -> bool:
        """Extend a server's life by ``ttl_s``; False when its row is gone (register again)."""
        return bool(
            self._write(
                lambda tx: tx.run(
                    "UPDATE servers SET heartbeat_at = {now}, expires_at = {now} + ? WHERE id = ?", (ttl_s, server_id)
                )
            )
        )

    def live_servers(self) -> list[ServerInfo]:
        rows = self._read(
            lambda tx: tx.all(
                f"SELECT {_SERVER_COLUMNS} FROM servers WHERE expires_at >= {{now}} ORDER BY started_at, id"
            )
        )
        return [_server(row) for row in rows]

    def deregister_server(self, server_id: str) -> None:
        self._write(lambda tx: tx.run("DELETE FROM servers WHERE id = ?", (server_id,)))

    # ---- changes and settings -----------------------------------------------------------------------

    def prune_changes(self, older_than_s: float) -> int:
        return self._write(
            lambda tx: tx.run(
                "DELETE FROM changes WHERE seq <= (SELECT MAX(seq) FROM changes WHERE at < {now} - ?)", (older_than_s,)
            )
        )

    def get_meta(self, key: str) -> str | None:
        row = self._read(lambda tx: tx.one("SELECT value FROM meta WHERE key = ?", (key,)))
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._write(
            lambda tx: tx.run(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
        )

    def __enter__(self) -> SqlMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PollingSubscription:
    """Changes past a cursor: read from the ``changes`` table, waiting between reads on ``signal`` (a
    notification, or a commit in this process), or ``poll_s`` at most."""

    def __init__(
        self,
        store: SqlMetadataStore,
        cursor: int,
        poll_s: float,
        signal: Callable[[float], bool],
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.cursor = cursor
        self._store = store
        self._poll_s = poll_s
        self._signal = signal
        self._on_close = on_close

    def wait(self, timeout: float) -> list[Change]:
        deadline = time.monotonic() + timeout
        pause = self._poll_s
        while True:
            changes, self.cursor = self._store.changes_since(self.cursor)
            if changes:
                return changes
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            # Woken, yet nothing readable: the change's transaction may not be visible to the feed yet (on
            # PostgreSQL, until older transactions end); read again soon, then less and less often.
            pause = 0.005 if self._signal(min(remaining, pause)) else min(pause * 2, self._poll_s)

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
            self._on_close = None

    def __enter__(self) -> PollingSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
