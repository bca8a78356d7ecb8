"""Edge updates through HTTP, each answered only once its journal row has committed durably: a real grail-serve
(uvicorn) on SQLite (the data directory's file) and on PostgreSQL (a throwaway server, tests/postgres_server.py),
``--clients`` keep-alive clients, each updating its own graph (updates of one graph are ordered; many graphs are
updated at once), each update toggling one edge of a small graph (added, then removed: the graph stays small,
every update makes a new version). After a warm-up (not timed: the update kernels compile at their first use),
each run lasts ``--seconds``; the stores take turns, run after run; the table gives the median updates/s (min-max)
and the load average, since other work on the machine moves the figures, and the CPU time each acknowledged update
cost the server process (its own threads, from /proc; its build workers apart) and the PostgreSQL server (all its
processes), which depends little on that load. ``--baseline TREE`` runs another
checkout's server (its own ``.venv``) beside this one's, store by store, taking turns with it run after run: a
before/after comparison under the same load.

    .venv/bin/python benchmarks/bench_updates_http.py [--seconds 5] [--runs 3] [--clients 16]
        [--stores sqlite,postgresql] [--baseline ../main] [--output updates-http.md]
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


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of a process (all its threads) from /proc, with its waited-for children's (``children``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11 : 15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _postgres_cpu(postgres: PostgresServer) -> float:
    """CPU seconds of the PostgreSQL server: the postmaster with its ended children, and every live child."""
    postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
    total = _cpu_seconds(postmaster, children=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                total += _cpu_seconds(int(stat.parent.name))
        except (OSError, ValueError):  # ended meanwhile
            continue
    return total


def _servers(root: Path, stores: list[str], database: str, tree: Path, label: str) -> dict[str, Server]:
    """A server of ``tree`` per store, named ``store`` (``store @ label`` for a baseline)."""
    servers = {}
    for store in stores:
        name = store if tree == REPO else f"{store} @ {label}"
        folder = root / name.replace(" @ ", "-")
        args = ("--database-url", database, "--store", f"file://{folder}-store") if store == "postgresql" else ()
        servers[name] = Server(folder, folder.with_suffix(".log"), *args, tree=tree)
    return servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--stores", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--baseline", type=Path, help="another checkout (with its .venv) to run beside this one")
    parser.add_argument("--output", default="updates-http.md", help="the table's file under benchmarks/results")
    args = parser.parse_args()
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = set(stores) - {"sqlite", "postgresql"}
    if unknown or not stores:
        parser.error(f"--stores takes sqlite and postgresql, not {sorted(unknown)}")
    loads = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp, PostgresServer() as postgres:
        root = Path(tmp)
        trees = [(args.baseline.resolve(), "baseline")] if args.baseline is not None else []
        servers: dict[str, Server] = {}
        for tree, label in [*trees, (REPO, "")]:
            database = postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}") if "postgresql" in stores else ""
            servers.update(_servers(root, stores, database, tree, label))
        # Turns: the baseline's server of a store, then this tree's, store after store.
        order = sorted(servers, key=lambda name: (stores.index(name.split(" @ ")[0]), " @ " not in name))
        rates: dict[str, list[float]] = {name: [] for name in order}
        server_ms: dict[str, list[float]] = {name: [] for name in order}
        postgres_ms: dict[str, list[float]] = {name: [] for name in order}
        graphs: dict[str, list[str]] = {}
        try:
            for name in order:
                server = servers[name]
                server.start()
                with httpx.Client(base_url=server.url, timeout=120) as http:
                    graphs[name] = [
                        http.post("/graphs?wait=true", content=GRAPH).json()["id"] for _ in range(args.clients)
                    ]
                # Not timed: a server compiles the update kernels at their first use.
                _run(server.url, graphs[name], WARM_UP_S)
            for _ in range(args.runs):
                for name in order:
                    pid = servers[name].proc.pid  # type: ignore[union-attr]
                    uses_postgres = name.startswith("postgresql")
                    cpu_before = _cpu_seconds(pid), _postgres_cpu(postgres) if uses_postgres else 0.0
                    count = _run(servers[name].url, graphs[name], args.seconds)
                    cpu_after = _cpu_seconds(pid), _postgres_cpu(postgres) if uses_postgres else 0.0
                    rates[name].append(count / args.seconds)
                    server_ms[name].append(1000 * (cpu_after[0] - cpu_before[0]) / max(count, 1))
                    postgres_ms[name].append(1000 * (cpu_after[1] - cpu_before[1]) / max(count, 1))
                    loads.append(os.getloadavg())
                    print(
                        f"{name}: {count / args.seconds:,.0f} updates/s, CPU ms per update: server "
                        f"{server_ms[name][-1]:.3f}, PostgreSQL {postgres_ms[name][-1]:.3f}",
                        flush=True,
                    )
        finally:
            for server in servers.values():
                server.stop()
    rows: list[list[object]] = [
        [
            name,
            f"{statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f})",
            _median_range(server_ms[name]),
            _median_range(postgres_ms[name]) if name.startswith("postgresql") else "",
            str(len(r)),
        ]
        for name, r in rates.items()
    ]
    load_text = "; ".join(", ".join(f"{x:.1f}" for x in load) for load in loads)
    baseline = f" --baseline {args.baseline}" if args.baseline is not None else ""
    text = (
        "# Edge updates through HTTP, each acknowledged after a durable commit\n\n"
        f"`benchmarks/bench_updates_http.py --seconds {args.seconds:g} --runs {args.runs} --clients {args.clients} "
        f"--stores {','.join(stores)}{baseline}` on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average (1, 5, 15 min) at the start and after each run: {load_text}. "
        f"{args.clients} clients, each updating its own graph; one grail-serve process per row, the rows taking "
        "turns.\n\n"
        + markdown_table(
            [
                "server",
                "updates/s: median (min-max)",
                "server CPU ms per update",
                "PostgreSQL CPU ms per update",
                "runs",
            ],
            rows,
        )
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.output).write_text(text + "\n")
    print(text)


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


if __name__ == "__main__":
    main()
