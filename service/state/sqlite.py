"""The metadata store in one SQLite file (the embedded default): ``<data_dir>/grail.db``.

Durability: WAL journal with ``synchronous=FULL``. A commit returns once its WAL frames are written and flushed
to the disk (one ``fdatasync`` of the WAL per commit), so an acknowledged write survives a SIGKILL of the process
and also an OS crash or a power cut. ``NORMAL`` would survive a SIGKILL as well (the frames are in the kernel's
cache when COMMIT returns) and flush only at checkpoints, but a crash of the machine could lose the last
acknowledged updates, and their version numbers would then be handed out again for other updates: clients would
hold answers for versions that no longer mean what they were told. Nothing acknowledged is lost, so FULL; the
flush is shared instead of skipped: concurrent edge updates commit in groups, one transaction and one flush per
group (``SqlMetadataStore.append_update``, service.state.groupcommit).

Every write transaction starts with ``BEGIN IMMEDIATE``: writers take the file's write lock up front, one at a
time (a claim of a job is such a transaction). Those of this process first take turns on a lock of their own,
since SQLite's busy handler would make them sleep and poll for the file's lock, backing off up to 100 ms at a
time; other processes (build workers) wait for it up to ``busy_timeout_s``. Readers never wait (WAL). Each
thread has its own connection.

A write the disk refuses (SQLITE_FULL) is rolled back whole, and raises StorageFull. One server owns the file
(service.state.datadir's lock); several processes of one server (its build workers) may share it.

The change feed's cursor is the ``changes`` table's sequence: writers are serialized, so sequence order is
commit order. Subscribers in this process wake at each commit; those of other processes poll.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .errors import ReadOnlyStorage, StateError, StorageFull, StoreUnavailable
from .metadata import Change
from .sql import Dialect, PollingSubscription, SqlMetadataStore, Tx, _change

__all__ = ["SqliteMetadataStore", "DATABASE_FILE"]

T = TypeVar("T")

DATABASE_FILE = "grail.db"
_MIN_SQLITE = (3, 35, 0)  # RETURNING
# SQLite's primary result codes (the module names them from Python 3.11 on only).
_SQLITE_BUSY, _SQLITE_READONLY, _SQLITE_FULL = 5, 8, 13

DIALECT = Dialect(
    name="sqlite",
    types={
        "bigint": "INTEGER",
        "double": "REAL",
        "serial_pk": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "without_rowid": " WITHOUT ROWID",
        "txid_column": "",
        "changes_txid_index": "",
    },
    words={
        "now": "((julianday('now') - 2440587.5) * 86400.0)",
        "for_update": "",
        "skip_locked": "",
        "greatest": "MAX",
    },
    placeholder="?",
)


class _Database:
    """What this process's stores of one database file share: a lock that its write transactions take in turn
    (SQLite's own lock would make them sleep and poll, its busy handler backing off up to 100 ms at a time),
    and the wake-up of subscribers at each commit that recorded a change."""

    _by_path: ClassVar[dict[str, _Database]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.write_lock = threading.Lock()
        self._cond = threading.Condition()
        self._count = 0

    @classmethod
    def of(cls, path: Path) -> _Database:
        with cls._registry_lock:
            return cls._by_path.setdefault(str(path.resolve()), cls())

    def notify(self) -> None:
        with self._cond:
            self._count += 1
            self._cond.notify_all()

    def waiter(self) -> Callable[[float], bool]:
        seen = self._count

        def wait(timeout: float) -> bool:
            nonlocal seen
            with self._cond:
                self._cond.wait_for(lambda: self._count != seen, timeout)
                woke = self._count != seen
                seen = self._count
                return woke

        return wait


class SqliteMetadataStore(SqlMetadataStore):
    dialect = DIALECT
    shared = False
    unique_violation = sqlite3.IntegrityError

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0, **options: Any) -> None:
        super().__init__(**options)
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise StateError(f"SQLite {sqlite3.sqlite_version} is too old: the metadata store needs 3.35 or newer")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        self._database = _Database.of(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._migrate()

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreUnavailable("the metadata store is closed")
        try:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise _translated(exc, "opening the metadata database") from exc
        self._local.conn = conn
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    def _run(self, work: Callable[[Tx], T], write: bool) -> T:
        conn = self._connection()
        with self._database.write_lock if write else contextlib.nullcontext():
            cursor = conn.cursor()
            tx = Tx(cursor, self._sql)
            try:
                cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                result = work(tx)
                cursor.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and not isinstance(exc, self.unique_violation):
                    raise _translated(exc, "writing the metadata database" if write else "reading it") from exc
                raise
            finally:
                cursor.close()
        if tx.changed:
            self._database.notify()
        return result

    def _lock_migrations(self, tx: Tx) -> None:
        """BEGIN IMMEDIATE holds the write lock already."""

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()

    # ---- the change feed ----------------------------------------------------------------------------

    def current_cursor(self) -> int:
        row = self._read(lambda tx: tx.one("SELECT COALESCE(MAX(seq), 0) FROM changes"))
        assert row is not None
        return int(row[0])

    def changes_since(self, cursor: int) -> tuple[list[Change], int]:
        rows = self._read(
            lambda tx: tx.all(
                "SELECT seq, kind, graph_id, version, at FROM changes WHERE seq > ? ORDER BY seq", (cursor,)
            )
        )
        changes = [_change(row) for row in rows]
        return changes, (changes[-1].seq if changes else cursor)

    def subscribe(self, cursor: int | None = None, poll_s: float = 1.0) -> PollingSubscription:
        start = self.current_cursor() if cursor is None else cursor
        return PollingSubscription(self, start, poll_s, self._database.waiter())


def _translated(exc: sqlite3.Error, doing: str) -> StateError:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
    message = str(exc)
    if code == _SQLITE_FULL or "database or disk is full" in message:
        return StorageFull(f"the disk is full ({doing}); free space and try again")
    if code == _SQLITE_READONLY or "readonly database" in message:
        return ReadOnlyStorage(f"the data directory is read-only ({doing})")
    if code == _SQLITE_BUSY or "database is locked" in message:
        return StoreUnavailable(f"the metadata database stayed busy ({doing}); try again")
    return StateError(f"the metadata database failed ({doing}): {message}")
