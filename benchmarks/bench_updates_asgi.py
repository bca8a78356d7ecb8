"""Edge updates through the app's ASGI callable in this process, without uvicorn or sockets: the CPU time the
service's own HTTP stack and update path take per update, apart from the HTTP server's parsing. A fresh app on a
SQLite data directory (its lifespan run here), ``--clients`` graphs each updated by its own coroutine (toggling
one edge, as benchmarks/bench_updates_http.py does), a warm-up of 100 updates each, then ``--updates`` updates;
prints the process's CPU time per update (every thread: the event loop, the update thread, the build runner's)
and the event loop thread's alone, which depend much less on other work on the machine than the rate does.
It imports the service found on the path: to compare two trees, run it with each on ``PYTHONPATH``
(``cd TREE && PYTHONPATH=$PWD python /path/to/bench_updates_asgi.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from typing import Any

import httpx

import service.main  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is imported, as grail-serve does)
from service.app import create_app
from service.settings import Settings

GRAPH = b"0 1\n1 2\n2 3\n3 0\n4 5\n"
WARM_UP_UPDATES = 100


async def _update(app: Any, graph_id: str, body: bytes) -> None:
    path = f"/graphs/{graph_id}/edges"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "state": {},
        "extensions": {},
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    status = 0

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # no disconnect: the answer is sent before anything else is read
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    assert status == 200, status


async def _measure(clients: int, updates: int) -> None:
    app = create_app(Settings.from_args(["--data-dir", tempfile.mkdtemp(), "--backend", "cpu"]))
    bodies = [json.dumps({"add": [[5, 4]]}).encode(), json.dumps({"remove": [[5, 4]]}).encode()]
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as http:
            graphs = [(await http.post("/graphs?wait=true", content=GRAPH)).json()["id"] for _ in range(clients)]

        async def client(graph_id: str, count: int) -> None:
            for i in range(count):
                await _update(app, graph_id, bodies[i % 2])

        await asyncio.gather(*(client(g, WARM_UP_UPDATES) for g in graphs))
        each = updates // clients
        process, loop_thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
        await asyncio.gather(*(client(g, each) for g in graphs))
        process, loop_thread = time.process_time() - process, time.thread_time() - loop_thread
        wall = time.perf_counter() - wall
    done = each * clients
    print(
        f"{done} updates: CPU ms per update {1000 * process / done:.3f} (process), {1000 * loop_thread / done:.3f} "
        f"(event loop thread); {done / wall:,.0f} updates/s; load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--updates", type=int, default=8000)
    args = parser.parse_args()
    asyncio.run(_measure(args.clients, args.updates))


if __name__ == "__main__":
    main()
