"""Edge updates through HTTP, each answered only once its journal row has committed durably: a real grail-serve
(uvicorn) on SQLite (the data directory's file) and on PostgreSQL (a throwaway server, tests/postgres_server.py),
``--clients`` keep-alive clients, each updating its own graph (updates of one graph are ordered; many graphs are
updated at once), each update toggling one edge of a small graph (added, then removed: the graph stays small,
every update makes a new version). Each run lasts ``--seconds``; the stores take turns, run after run; the table
gives the median updates/s (min-max) and the load average, since other work on the machine moves the figures.

    .venv/bin/python benchmarks/bench_updates_http.py [--seconds 5] [--runs 3] [--clients 16]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import markdown_table  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402
from tests.service.conftest import Server  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
GRAPH = b"0 1\n1 2\n2 3\n3 0\n4 5\n"


def _run(url: str, graph_ids: list[str], seconds: float) -> int:
    """Updates acknowledged in ``seconds`` by one client per graph."""
    done = [0] * len(graph_ids)
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            added = False
            while time.monotonic() < stop:
                body = {"remove": [[5, 4]]} if added else {"add": [[5, 4]]}
                reply = http.post(f"/graphs/{graph_ids[i]}/edges", json=body)
                assert reply.status_code == 200, reply.text
                added = not added
                done[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(graph_ids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
    loads = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as postgres:
        root = Path(tmp)
        database = postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}")
        servers = {
            "sqlite": Server(root / "sqlite", root / "sqlite.log"),
            "postgresql": Server(
                root / "pg", root / "pg.log", "--database-url", database, "--store", f"file://{root / 'store'}"
            ),
        }
        graphs: dict[str, list[str]] = {}
        try:
            for name, server in servers.items():
                server.start()
                with httpx.Client(base_url=server.url, timeout=120) as http:
                    graphs[name] = [
                        http.post("/graphs?wait=true", content=GRAPH).json()["id"] for _ in range(args.clients)
                    ]
            for _ in range(args.runs):
                for name, server in servers.items():
                    count = _run(server.url, graphs[name], args.seconds)
                    rates[name].append(count / args.seconds)
                    loads.append(os.getloadavg())
                    print(f"{name}: {count / args.seconds:,.0f} updates/s", flush=True)
        finally:
            for server in servers.values():
                server.stop()
    rows = [
        [name, f"{statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f})", str(len(r))] for name, r in rates.items()
    ]
    load_text = "; ".join(", ".join(f"{x:.1f}" for x in load) for load in loads)
    text = (
        "# Edge updates through HTTP, each acknowledged after a durable commit\n\n"
        f"`benchmarks/bench_updates_http.py --seconds {args.seconds:g} --runs {args.runs} --clients {args.clients}` "
        f"on {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average (1, 5, "
        f"15 min) at the start and after each run: {load_text}. {args.clients} clients, each updating its own "
        "graph; one grail-serve process.\n\n" + markdown_table(["store", "updates/s: median (min-max)", "runs"], rows)
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "updates-http.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
