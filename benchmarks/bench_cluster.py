"""Roles on one machine: two API replicas and a builder on a throwaway PostgreSQL (tests/postgres_server.py) and a
folder as the artifact store, beside a single ``grail-serve`` (role ``all``, SQLite), all real processes.

- **publish to first answer**: a graph uploaded through replica A (built by the builder); the time from its
  version row's ``published_at`` (the database's clock, this machine's) to the first 200 answer of replica B,
  which follows the change feed and loads the version from the store; per graph size.
- **journal propagation**: edge updates through replica A, one after the other; for each, the time from A's
  answer to replica B answering a read with ``min_version`` of that version (B waits for it server-side); p50 and
  p99.
- **queries/s**: ``--clients`` keep-alive clients asking single pairs of one graph for ``--seconds``, against
  replica A and against the single process in turns, ``--runs`` times; the median of each.

    .venv/bin/python benchmarks/bench_cluster.py [--updates 300] [--seconds 5] [--runs 3] [--clients 8]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import markdown_table  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402
from tests.service.conftest import Server  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
SIZES = (10_000, 1_000_000)  # edges of the random graphs published


def _random_graph(edges: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    nodes = max(edges // 8, 2)
    pairs = rng.integers(0, nodes, size=(edges, 2))
    return "".join(f"{u} {v}\n" for u, v in pairs.tolist()).encode()


def _published_at(database_url: str, graph_id: str) -> float | None:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT published_at FROM versions WHERE graph_id = %s AND status = 'published'", (graph_id,)
        ).fetchone()
    return None if row is None else float(row[0])


def publish_to_answer(a: Server, b: Server, database_url: str, edges: int, seed: int) -> float:
    """Seconds from the version's publish to replica B's first answer on it."""
    body = _random_graph(edges, seed)
    with httpx.Client(timeout=600) as http:
        graph_id = http.post(f"{a.url}/graphs", content=body).json()["id"]
        answered = None
        while answered is None:
            reply = http.get(
                f"{b.url}/graphs/{graph_id}/reachable", params={"source": 0, "target": 1, "unknown": "false"}
            )
            if reply.status_code == 200:
                answered = time.time()
            else:
                time.sleep(0.002)
    published = None
    while published is None:
        published = _published_at(database_url, graph_id)
    return answered - published


def propagation(a: Server, b: Server, graph_id: str, updates: int) -> list[float]:
    """For each update through A: seconds from A's answer to B's answer of a read with its version."""
    delays = []
    with httpx.Client(timeout=60) as http:
        for k in range(updates):
            edge = [[f"p{k}", f"p{k + 1}"]]
            version = http.post(f"{a.url}/graphs/{graph_id}/edges", json={"add": edge}).json()["version"]
            acknowledged = time.perf_counter()
            reply = http.get(
                f"{b.url}/graphs/{graph_id}/reachable",
                params={"source": f"p{k}", "target": f"p{k + 1}"},
                headers={"Grail-Min-Version": str(version)},
            )
            delays.append(time.perf_counter() - acknowledged)
            assert reply.status_code == 200 and reply.json()["reachable"] is True, reply.text
    return delays


def queries_per_second(url: str, graph_id: str, clients: int, seconds: float, nodes: int) -> float:
    done = [0] * clients
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        rng = np.random.default_rng(i)
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.monotonic() < stop:
                u, v = rng.integers(0, nodes, size=2).tolist()
                params = {"source": u, "target": v, "unknown": "false"}
                reply = http.get(f"/graphs/{graph_id}/reachable", params=params)
                assert reply.status_code == 200, reply.text
                done[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / seconds


def _until_held(http: httpx.Client, url: str, graph_id: str, version: int) -> None:
    """Until the server at ``url`` answers from ``version`` of the graph (a build takes its time on a busy machine)."""
    while http.get(f"{url}/graphs/{graph_id}", headers={"Grail-Min-Version": str(version)}).status_code != 200:
        pass


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    loads = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as postgres:
        root = Path(tmp)
        database = postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}")
        shared = ("--database-url", database, "--store", f"file://{root / 'store'}", "--min-version-timeout-s", "30")
        single = Server(root / "single", root / "single.log")
        a = Server(root / "a", root / "a.log", "--role", "api", *shared)
        b = Server(root / "b", root / "b.log", "--role", "api", *shared)
        builder = Server(root / "builder", root / "builder.log", "--role", "builder", *shared)
        servers = [single, a, b, builder]
        try:
            single.start()
            a.start(workers=False)
            b.start(workers=False)
            builder.start()
            for server in (single, a, b):
                server.wait_until_ready()
            publish: dict[int, list[float]] = {size: [] for size in SIZES}
            for run in range(args.runs):
                for size in SIZES:
                    publish[size].append(publish_to_answer(a, b, database, size, seed=run))
                    print(f"publish to first answer, {size:,} edges: {publish[size][-1]:.3f} s", flush=True)
            loads.append(os.getloadavg())
            with httpx.Client(timeout=120) as http:
                chain = http.post(f"{a.url}/graphs", content=b"p0 p0\n").json()["id"]
                _until_held(http, b.url, chain, 1)
                graph = _random_graph(100_000, seed=7)
                on_single = http.post(f"{single.url}/graphs?wait=true", content=graph).json()["id"]
                on_cluster = http.post(f"{a.url}/graphs", content=graph).json()["id"]
                _until_held(http, a.url, on_cluster, 1)
            delays = propagation(a, b, chain, args.updates)
            print(f"journal propagation: p50 {_percentile(delays, 50) * 1e3:.1f} ms", flush=True)
            loads.append(os.getloadavg())
            rates: dict[str, list[float]] = {"single process (all, SQLite)": [], "API replica (PostgreSQL)": []}
            nodes = 100_000 // 8
            for _ in range(args.runs):
                for name, url, graph_id in (
                    ("single process (all, SQLite)", single.url, on_single),
                    ("API replica (PostgreSQL)", a.url, on_cluster),
                ):
                    rates[name].append(queries_per_second(url, graph_id, args.clients, args.seconds, nodes))
                    print(f"{name}: {rates[name][-1]:,.0f} queries/s", flush=True)
                    loads.append(os.getloadavg())
        finally:
            for server in servers:
                server.stop()
    load_text = "; ".join(", ".join(f"{x:.1f}" for x in load) for load in loads)
    publish_rows = [
        [f"{size:,}", f"{statistics.median(v):.3f}", f"{min(v):.3f}-{max(v):.3f}", len(v)]
        for size, v in publish.items()
    ]
    rate_rows = [
        [name, f"{statistics.median(r):,.0f}", f"{min(r):,.0f}-{max(r):,.0f}", len(r)] for name, r in rates.items()
    ]
    single_rate, replica_rate = (statistics.median(r) for r in rates.values())
    text = (
        "# Roles on one machine: API replicas and a builder over PostgreSQL\n\n"
        f"`benchmarks/bench_cluster.py --updates {args.updates} --seconds {args.seconds:g} --runs {args.runs} "
        f"--clients {args.clients}` on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}: two API replicas, one builder, one single process, PostgreSQL and the "
        "clients all on this machine; the artifact store a local folder. Load average (1, 5, 15 min) at the start "
        f"and after each phase: {load_text}.\n\n"
        "## Publish to the first answer on another replica\n\n"
        "From the version row's `published_at` to replica B's first 200 answer (B follows the change feed, fetches "
        "the version from the store, verifies and loads it); random graphs, node ids 0..edges/8.\n\n"
        + markdown_table(["edges", "median s", "min-max s", "runs"], publish_rows)
        + "\n\n## Journal propagation\n\n"
        f"{len(delays)} edge updates through replica A, one at a time; from A's answer to replica B's answer of a "
        "read with `Grail-Min-Version` of that version.\n\n"
        + markdown_table(
            ["p50 ms", "p99 ms", "max ms"],
            [
                [
                    f"{_percentile(delays, 50) * 1e3:.1f}",
                    f"{_percentile(delays, 99) * 1e3:.1f}",
                    f"{max(delays) * 1e3:.1f}",
                ]
            ],
        )
        + "\n\n## Queries/s: one API replica against the single process\n\n"
        f"{args.clients} keep-alive clients asking random single pairs of a 100,000-edge graph for {args.seconds:g} s, "
        "the two servers in turns.\n\n"
        + markdown_table(["server", "median queries/s", "min-max", "runs"], rate_rows)
        + f"\n\nThe replica's median is {100 * (replica_rate / single_rate - 1):+.1f}% of the single process's.\n"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cluster.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
