"""The metadata schema and its migrations, one list for SQLite and PostgreSQL.

Each migration is a list of statements written once, with the few types that differ as ``{placeholders}``
(``Dialect.types``); a statement that formats to nothing is skipped (an index only one dialect needs).
``schema_version`` holds one row, the number of migrations applied; a store applies the missing ones when it
opens, in one transaction under a lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an advisory transaction lock),
so that servers starting together apply each once. A database whose version is newer than this release knows
is refused (``SchemaTooNew``), never written to.

Tables (version 1):

- ``graphs``: one row per graph, live or soft-deleted (``deleted_at``). ``name`` is unique among live graphs
  and defaults to the id; ``pending_name`` marks a replacement (PUT) that takes the name when its first version
  is published. ``head_version`` is the latest version (published or journaled), ``published_version`` the one
  whose artifact queries load.
- ``versions``: immutable index artifacts, ``(graph_id, version)``; status staged, published or retired.
- ``journal``: edge updates, ``(graph_id, version)``, the payload as the service wrote it.
- ``jobs``: builds and rebuilds with their lease (owner, fencing token, expiry) and retry schedule; at most one
  queued or running job per graph and kind.
- ``servers``: one row per live server process, with a heartbeat and an expiry.
- ``changes``: a row per change, for subscribers (PostgreSQL also notifies ``grail_changes``); pruned by age
  (rarely: by a scan, so that appends write no index of times).
- ``meta``: small key-value settings (what the importer did).

Version 2: ``jobs.memory_bytes``, the memory a job's build is estimated to need, so that a builder claims only
jobs that fit what it has free.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_V1 = [
    """CREATE TABLE graphs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        pending_name TEXT,
        params TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('queued', 'building', 'ready', 'failed')),
        error TEXT,
        stats TEXT,
        upload_bytes {bigint} NOT NULL DEFAULT 0,
        upload_key TEXT,
        published_version {bigint},
        head_version {bigint} NOT NULL DEFAULT 0,
        created_at {double} NOT NULL,
        updated_at {double} NOT NULL,
        deleted_at {double}
    )""",
    "CREATE UNIQUE INDEX graphs_live_name ON graphs (name) WHERE deleted_at IS NULL",
    """CREATE UNIQUE INDEX graphs_pending_name ON graphs (pending_name)
        WHERE deleted_at IS NULL AND pending_name IS NOT NULL""",
    "CREATE INDEX graphs_deleted ON graphs (deleted_at) WHERE deleted_at IS NOT NULL",
    """CREATE TABLE versions (
        graph_id TEXT NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
        version {bigint} NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('staged', 'published', 'retired')),
        artifact_key TEXT NOT NULL,
        checksum TEXT NOT NULL,
        size_bytes {bigint} NOT NULL,
        base_version {bigint},
        created_at {double} NOT NULL,
        published_at {double},
        retired_at {double},
        PRIMARY KEY (graph_id, version)
    )""",
    "CREATE INDEX versions_status ON versions (status, retired_at)",
    """CREATE TABLE journal (
        graph_id TEXT NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
        version {bigint} NOT NULL,
        payload TEXT NOT NULL,
        created_at {double} NOT NULL,
        PRIMARY KEY (graph_id, version)
    ){without_rowid}""",
    """CREATE TABLE jobs (
        id {serial_pk},
        graph_id TEXT NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('build', 'rebuild')),
        state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
        payload TEXT NOT NULL,
        through_version {bigint},
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        next_attempt_at {double} NOT NULL,
        lease_owner TEXT,
        lease_token {bigint} NOT NULL DEFAULT 0,
        lease_expires_at {double},
        error TEXT,
        created_at {double} NOT NULL,
        updated_at {double} NOT NULL
    )""",
    "CREATE UNIQUE INDEX jobs_active ON jobs (graph_id, kind) WHERE state IN ('queued', 'running')",
    "CREATE INDEX jobs_due ON jobs (state, next_attempt_at)",
    """CREATE TABLE servers (
        id TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        port INTEGER,
        started_at {double} NOT NULL,
        heartbeat_at {double} NOT NULL,
        expires_at {double} NOT NULL
    )""",
    """CREATE TABLE changes (
        seq {serial_pk},
        {txid_column}
        kind TEXT NOT NULL,
        graph_id TEXT,
        version {bigint},
        at {double} NOT NULL
    )""",
    "{changes_txid_index}",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
]

_V2 = ["ALTER TABLE jobs ADD COLUMN memory_bytes {bigint} NOT NULL DEFAULT 0"]

# One entry per schema version, in order; a release only ever appends.
MIGRATIONS: tuple[list[str], ...] = (_V1, _V2)
SCHEMA_VERSION = len(MIGRATIONS)
