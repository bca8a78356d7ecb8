"""Edge updates through HTTP, each answered only once its journal row has committed durably: a real grail-serve
(uvicorn) on SQLite (the data directory's file) and on PostgreSQL (a throwaway server, tests/postgres_server.py),
``--clients`` keep-alive clients, each updating its own graph (updates of one graph are ordered; many graphs are
updated at once), each update toggling one edge of a small graph (added, then removed: the graph stays small,
every update makes a new version). After a warm-up (not timed: the update kernels compile at their first use),
each run lasts ``--seconds``; the stores take turns, run after run; the table gives the median updates/s (min-max)
and the load average, since other work on the machine moves the figures.

    .venv/bin/python benchmarks/bench_updates_http.py [--seconds 5] [--runs 3] [--clients 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import tempfile
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
WARM_UP_S = 4.0


async def _client(host: str, port: int, graph_id: str, stop: float) -> int:
    """One keep-alive connection toggling one edge of its graph until ``stop``: raw HTTP/1.1, so that on a
    2-core machine the load generator's own cost (an httpx request costs about as much CPU as the server's
    work) does not hide the server's rate."""
    reader, writer = await asyncio.open_connection(host, port)
    bodies = [json.dumps({"add": [[5, 4]]}).encode(), json.dumps({"remove": [[5, 4]]}).encode()]
    requests = [
        f"POST /graphs/{graph_id}/edges HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
        for body in bodies
    ]
    done = 0
    try:
        while time.monotonic() < stop:
            writer.write(requests[done % 2])
            head = await reader.readuntil(b"\r\n\r\n")
            status = head.split(b" ", 2)[1]
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            body = await reader.readexactly(length)
            assert status == b"200", body
            done += 1
    finally:
        writer.close()
    return done


def _run(url: str, graph_ids: list[str], seconds: float) -> int:
    """Updates acknowledged in ``seconds`` by one connection per graph, all in one event loop."""
    address = httpx.URL(url)
    stop = time.monotonic() + seconds

    async def clients() -> list[int]:
        return await asyncio.gather(*(_client(address.host, address.port or 80, g, stop) for g in graph_ids))

    return sum(asyncio.run(clients()))


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
                # Not timed: a server compiles the update kernels at their first use.
                _run(server.url, graphs[name], WARM_UP_S)
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
