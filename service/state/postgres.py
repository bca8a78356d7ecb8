"""The metadata store on PostgreSQL (``--database-url postgresql://...``): several servers share it.

psycopg 3 with a connection pool; each call is one transaction, committed before it returns. Concurrent writers
of one graph serialize on the graph's row (``UPDATE ... WHERE head_version = ?`` waits for the other writer and
then sees its version); builders claim jobs with ``FOR UPDATE SKIP LOCKED``; a deadlock or serialization failure
is retried a few times, as PostgreSQL asks. Migrations run under an advisory lock, so servers that start
together apply each once. A lost connection, or a database that does not answer, is StoreUnavailable (the
service answers 503 with Retry-After); a commit whose answer was lost may have happened: a retried edge update
then meets VersionConflict, never a duplicate.

Durability: a commit returns once PostgreSQL has flushed its WAL record to disk (``synchronous_commit`` on, the
default; a server configured with ``off`` is overridden for this store's sessions, since it would acknowledge
commits that an OS crash can still take back), so an acknowledged write survives a kill of any process and a
crash of the machine. Concurrent edge updates of this server commit in groups, one transaction each, their
statements sent in one round trip (pipeline mode); PostgreSQL itself flushes the WAL of transactions that
commit together once.

The change feed: each write that records a change also ``NOTIFY grail_changes`` (delivered at commit).
Subscribers LISTEN on a connection of their own and read the ``changes`` table. Sequence numbers are taken in
one order and committed in another, so the feed's cursor is a transaction id horizon instead: a read returns
the rows of transactions older than every transaction still running (``pg_snapshot_xmin``), none of which can
commit later, and the next read starts there. Nothing is missed; a long transaction elsewhere in the cluster
delays the feed, it does not lose it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from .errors import StorageFull, StoreUnavailable
from .metadata import Change
from .sql import Append, Dialect, PollingSubscription, SqlMetadataStore, Tx, _change

__all__ = ["PostgresMetadataStore", "CHANNEL"]

log = logging.getLogger("grail.service.state")

T = TypeVar("T")

CHANNEL = "grail_changes"
_MIGRATION_LOCK = 0x67726169  # pg_advisory_xact_lock key of schema migrations ("grai")
_RETRIES = 5  # of a transaction that PostgreSQL aborted as a deadlock or a serialization failure

# One edge update in one statement: the version bump, the journal row, the change row, the notification.
_APPEND = f"""WITH bumped AS (
        UPDATE graphs SET head_version = head_version + 1, updated_at = {{now}}
        WHERE id = ? AND deleted_at IS NULL AND status = 'ready' AND head_version = ?
        RETURNING head_version),
    appended AS (
        INSERT INTO journal (graph_id, version, payload, created_at)
        SELECT ?, head_version, ?, {{now}} FROM bumped RETURNING version),
    noted AS (
        INSERT INTO changes (kind, graph_id, version, at)
        SELECT 'journal', ?, version, {{now}} FROM appended)
    SELECT version, pg_notify('{CHANNEL}', '') FROM appended"""

# Edge updates of distinct graphs in one statement (its own transaction: one round trip, one commit): the graphs'
# rows locked in id order, then as _APPEND does for each; each row's new version by its position in the input.
# The notification is an uncorrelated subquery, evaluated once for the statement (none when no row changed).
_APPEND_MANY = f"""WITH input AS (
        SELECT * FROM unnest(?::text[], ?::bigint[], ?::text[]) WITH ORDINALITY AS t(graph_id, expected, payload, n)),
    locked AS (
        SELECT g.id FROM graphs g JOIN input i ON g.id = i.graph_id ORDER BY g.id FOR UPDATE OF g),
    bumped AS (
        UPDATE graphs g SET head_version = g.head_version + 1, updated_at = {{now}}
        FROM input i, locked l
        WHERE g.id = i.graph_id AND l.id = g.id AND g.deleted_at IS NULL AND g.status = 'ready'
            AND g.head_version = i.expected
        RETURNING g.id, g.head_version, i.payload, i.n),
    appended AS (
        INSERT INTO journal (graph_id, version, payload, created_at)
        SELECT id, head_version, payload, {{now}} FROM bumped),
    noted AS (
        INSERT INTO changes (kind, graph_id, version, at)
        SELECT 'journal', id, head_version, {{now}} FROM bumped)
    SELECT n, head_version, (SELECT pg_notify('{CHANNEL}', '')) FROM bumped"""

DIALECT = Dialect(
    name="postgresql",
    types={
        "bigint": "BIGINT",
        "double": "DOUBLE PRECISION",
        "serial_pk": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "without_rowid": "",
        "txid_column": "txid BIGINT NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),",
        "changes_txid_index": "CREATE INDEX changes_txid ON changes (txid)",
    },
    words={
        "now": "extract(epoch from clock_timestamp())::double precision",
        "for_update": "FOR UPDATE",
        "skip_locked": "FOR UPDATE SKIP LOCKED",
        "greatest": "GREATEST",
    },
    placeholder="%s",
)


def _durable_commits(conn: psycopg.Connection[Any]) -> None:
    """A session whose commits return before their WAL is flushed (``synchronous_commit = off``) is set to
    wait for the flush; stronger settings (``remote_apply``, a synchronous standby) are kept."""
    row = conn.execute("SHOW synchronous_commit").fetchone()
    if row is not None and row[0] == "off":
        conn.execute("SET synchronous_commit = on")


def _distinct_graphs(appends: Sequence[Append]) -> bool:
    return len({a.graph_id for a in appends}) == len(appends)


def redacted(url: str) -> str:
    """The URL without its password, for logs and messages."""
    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


class PostgresMetadataStore(SqlMetadataStore):
    dialect = DIALECT
    shared = True
    unique_violation = psycopg.errors.UniqueViolation

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout_s: float = 10.0, **options: Any) -> None:
        super().__init__(**options)
        self.url = redacted(url)
        self._conninfo = url
        self._timeout_s = connect_timeout_s
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": max(int(connect_timeout_s), 1)},
            configure=_durable_commits,
            timeout=connect_timeout_s,
            open=False,
            name="grail-metadata",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailable(f"the metadata database at {self.url} does not answer") from exc
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

    def _run(self, work: Callable[[Tx], T], write: bool, single: bool = False) -> T:
        """``single``: ``work`` runs one statement, its own transaction (no BEGIN and COMMIT round trips)."""
        for attempt in range(_RETRIES):
            try:
                with self._pool.connection() as conn:
                    with contextlib.nullcontext() if single else conn.transaction(), conn.cursor() as cursor:
                        tx = Tx(cursor, self._sql)
                        result = work(tx)
                        if tx.changed:
                            cursor.execute(f"NOTIFY {CHANNEL}")
                return result
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                if attempt == _RETRIES - 1:
                    raise StoreUnavailable("the metadata database kept aborting this write; try again") from None
                time.sleep(0.01 * (attempt + 1))
            except psycopg.errors.DiskFull as exc:
                raise StorageFull("the metadata database's disk is full; free space and try again") from exc
            except PoolTimeout as exc:
                raise StoreUnavailable("no connection to the metadata database came free in time") from exc
            except psycopg.OperationalError as exc:
                log.warning("metadata database %s: %s", self.url, exc)
                raise StoreUnavailable("the metadata database cannot be reached now; try again") from exc
            except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.AdminShutdown) as exc:
                raise StoreUnavailable("the metadata database takes no writes now; try again") from exc
        raise AssertionError("unreachable")

    def _append_rows(self, tx: Tx, appends: Sequence[Append]) -> list[int | None]:
        """As SqlMetadataStore._append_rows: appends of distinct graphs in one statement (``_APPEND_MANY``);
        otherwise one statement per append (the version bump, the journal row, the change row and the
        notification, delivered at commit), all of them sent before the first answer is read (psycopg's pipeline
        mode): a group costs one round trip to the database, not one per append."""
        if len(appends) > 1 and _distinct_graphs(appends):
            rows = tx.all(
                _APPEND_MANY,
                (
                    [a.graph_id for a in appends],
                    [a.expected_version for a in appends],
                    [a.payload for a in appends],
                ),
            )
            made = {int(n): int(version) for n, version, _ in rows}
            return [made.get(n) for n in range(1, len(appends) + 1)]
        statement = tx.sql(_APPEND)
        params = [(a.graph_id, a.expected_version, a.graph_id, a.payload, a.graph_id) for a in appends]
        if len(appends) == 1:
            row = tx.one(_APPEND, params[0])
            return [None if row is None else int(row[0])]
        conn = tx.cursor.connection
        cursors = [conn.cursor() for _ in appends]
        try:
            with conn.pipeline():
                for cursor, values in zip(cursors, params, strict=True):
                    cursor.execute(statement, values)
            rows = [cursor.fetchone() for cursor in cursors]
        finally:
            for cursor in cursors:
                cursor.close()
        return [None if row is None else int(row[0]) for row in rows]

    def _read(self, work: Callable[[Tx], T]) -> T:
        """One statement, its own transaction (no BEGIN and COMMIT round trips): the same snapshot."""
        return self._run(work, write=False, single=True)

    def _run_appends(self, work: Callable[[Tx], T], group: Sequence[Append]) -> T:
        """A lone append, or appends of distinct graphs, are one statement: its own transaction (no BEGIN and
        COMMIT round trips). (A refusal is read after it, as a statement of its own.)"""
        return self._run(work, write=True, single=len(group) == 1 or _distinct_graphs(group))

    def _lock_migrations(self, tx: Tx) -> None:
        tx.one("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def close(self) -> None:
        self._pool.close()

    # ---- the change feed ----------------------------------------------------------------------------

    def current_cursor(self) -> int:
        row = self._read(lambda tx: tx.one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"))
        assert row is not None
        return int(row[0])

    def changes_since(self, cursor: int) -> tuple[list[Change], int]:
        rows = self._read(
            lambda tx: tx.all(
                """WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon)
                   SELECT h.horizon, c.seq, c.kind, c.graph_id, c.version, c.at
                   FROM h LEFT JOIN changes c ON c.txid >= ? AND c.txid < h.horizon
                   ORDER BY c.seq""",
                (cursor,),
            )
        )
        horizon = int(rows[0][0])
        changes = [_change(row[1:]) for row in rows if row[1] is not None]
        return changes, max(horizon, cursor)

    def subscribe(self, cursor: int | None = None, poll_s: float = 1.0) -> PollingSubscription:
        listener = _Listener(self._conninfo, self._timeout_s)
        listener.connect()
        start = self.current_cursor() if cursor is None else cursor
        return PollingSubscription(self, start, poll_s, listener.wait, listener.close)


class _Listener:
    """A connection of its own that LISTENs on the change channel; reconnected when it breaks (meanwhile the
    subscription polls)."""

    def __init__(self, conninfo: str, timeout_s: float) -> None:
        self._conninfo = conninfo
        self._timeout_s = timeout_s
        self._conn: psycopg.Connection[Any] | None = None

    def connect(self) -> None:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=max(int(self._timeout_s), 1))
            conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as exc:
            log.warning("cannot listen for metadata changes (polling meanwhile): %s", exc)
            return
        self._conn = conn

    def wait(self, timeout: float) -> bool:
        if self._conn is None:
            self.connect()
            if self._conn is None:
                time.sleep(timeout)
                return False
        try:
            for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.Error as exc:
            log.warning("lost the metadata change listener (polling meanwhile): %s", exc)
            self.close()
        return False

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(psycopg.Error):  # a broken connection: nothing left to release
                conn.close()
