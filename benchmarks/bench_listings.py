"""Listings through a real ``grail-serve``: the resident memory that stalled readers of a large listing hold,
and what ``HEAD``, a small ``limit`` and ``count=true`` cost beside the whole listing.

Two graphs of 1,000,000 nodes (x ``--scale``) in which node 0 reaches, or is reached from, every other: a
binary out-tree (``/descendants?node=0``: read off the labels) and the same tree with its edges reversed
(``/ancestors?node=0``: one search kept as a bit set).

Sections:

* ``stalled``: per graph, ``--readers`` raw sockets (a 16 KiB receive buffer each, so that the kernel holds
  little of the answer) send the request for the whole listing and never read. The resident memory of the
  server and its build workers (RSS, summed) before, once every reader has its first bytes (the peak over
  a few seconds), once ``--send-timeout`` has passed (the server gives up on them), and once the sockets are
  closed; the kernel's TCP buffers (/proc/net/sockstat) beside it; how many streams the server stopped.
* ``cheap``: per graph, the median seconds of ``HEAD``, ``limit=1``, ``limit=1000``, ``count=true``, and the
  whole listing read by the client.

    .venv/bin/python -m benchmarks.bench_listings [--section all|stalled|cheap] [--scale 1.0]
        [--readers 1000] [--send-timeout 20] [--runs 5] [--stem listings-vm]

Writes benchmarks/results/<stem>.md.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import markdown_table
from benchmarks.serving import GrailServer, group_rss

RESULTS = Path(__file__).resolve().parent / "results"
# name -> (route, reversed edges)
GRAPHS = {"out-tree": ("descendants", False), "in-tree": ("ancestors", True)}
_RECEIVE_BUFFER = 16 * 1024
_STOPPED = b"a streamed answer stopped"
# Seconds given to every reader to have its first bytes, and beyond the send timeout to every stream to stop.
FIRST_BYTES_WAIT_S = 120.0
STOP_WAIT_S = 600.0


def tree_text(nodes: int, reverse: bool) -> bytes:
    child = np.arange(1, nodes, dtype=np.int64)
    parent = (child - 1) // 2
    src, dst = (child, parent) if reverse else (parent, child)
    lines = np.char.add(np.char.add(src.astype(str), " "), dst.astype(str))
    return ("\n".join(lines.tolist()) + "\n").encode()


def kernel_tcp_bytes() -> int:
    """Memory of the kernel's TCP buffers, all sockets of the machine (``mem`` pages of /proc/net/sockstat)."""
    for line in Path("/proc/net/sockstat").read_text().splitlines():
        if line.startswith("TCP:"):
            words = line.split()
            return int(words[words.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE")
    return 0


def peak_rss(pid: int, seconds: float) -> int:
    deadline, peak = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        peak = max(peak, group_rss(pid))
        time.sleep(0.2)
    return peak


def stalled_readers(server: GrailServer, path: str, readers: int, send_timeout: float) -> list[object]:
    """Memory with ``readers`` clients that never read; returns the table's row (without the graph)."""
    assert server.proc is not None
    pid = server.proc.pid
    stopped_before = server.log_path.read_bytes().count(_STOPPED)
    time.sleep(2)
    before, kernel_before = peak_rss(pid, 3), kernel_tcp_bytes()
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    sockets = []
    started = time.monotonic()
    for _ in range(readers):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(request)
        sockets.append(sock)
    waiting = set(sockets)
    while waiting and time.monotonic() - started < FIRST_BYTES_WAIT_S:
        readable, _, _ = select.select(list(waiting)[:500], [], [], 1.0)
        waiting.difference_update(readable)
    answered = time.monotonic() - started
    held, kernel_held = peak_rss(pid, 5), kernel_tcp_bytes()
    # The server gives up on each reader send_timeout after its last write went through (once the kernel's
    # buffers of its socket are full: a busy server takes a while to fill a thousand).
    deadline = started + answered + send_timeout + STOP_WAIT_S
    while time.monotonic() < deadline:
        if server.log_path.read_bytes().count(_STOPPED) - stopped_before >= readers:
            break
        time.sleep(1)
    stopped = server.log_path.read_bytes().count(_STOPPED) - stopped_before
    time.sleep(2)
    after_timeout = peak_rss(pid, 3)
    for sock in sockets:
        sock.close()
    idle(server.url, path)
    closed = peak_rss(pid, 3)
    mb = 1 << 20
    return [
        path.split("?")[0].rsplit("/", 1)[1],
        readers - len(waiting),
        f"{answered:.1f}",
        f"{before / mb:,.0f}",
        f"{held / mb:,.0f} (+{(held - before) / mb:,.0f})",
        f"+{(kernel_held - kernel_before) / mb:,.0f}",
        stopped,
        f"{after_timeout / mb:,.0f} (+{(after_timeout - before) / mb:,.0f})",
        f"{closed / mb:,.0f} (+{(closed - before) / mb:,.0f})",
    ]


def idle(url: str, path: str, timeout: float = 300.0) -> None:
    """Until the server answers a HEAD of the listing within 50 ms (the streams it was writing are done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = time.perf_counter()
        httpx.head(url + path, timeout=60)
        if time.perf_counter() - started < 0.05:
            return
        time.sleep(1)


STALLED_HEADER = [
    "graph",
    "route",
    "readers with first bytes",
    "s to first bytes",
    "RSS before MB",
    "with stalled readers MB",
    "kernel TCP MB",
    "streams stopped",
    "after the send timeout MB",
    "sockets closed MB",
]


def cheap(url: str, path: str, runs: int) -> list[object]:
    """Median seconds of HEAD, limit=1, limit=1000, count=true and the whole listing read."""
    cases = {
        "HEAD": ("HEAD", path),
        "limit=1": ("GET", path + "&limit=1"),
        "limit=1000": ("GET", path + "&limit=1000"),
        "count=true": ("GET", path + "&count=true"),
        "whole": ("GET", path),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    with httpx.Client(base_url=url, timeout=600) as client:
        for _ in range(runs):
            for name, (method, target) in cases.items():
                started = time.perf_counter()
                answer = client.request(method, target)
                answer.raise_for_status()
                times[name].append(time.perf_counter() - started)
    return [f"{statistics.median(t) * 1e3:,.1f}" for t in times.values()]


CHEAP_HEADER = ["graph", "route", "HEAD ms", "limit=1 ms", "limit=1000 ms", "count=true ms", "whole listing ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--section", choices=("all", "stalled", "cheap"), default="all")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--readers", type=int, default=1000)
    parser.add_argument("--send-timeout", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--stem", default="listings-vm")
    args = parser.parse_args()
    nodes = max(1000, int(1_000_000 * args.scale))
    load = os.getloadavg()
    stalled_rows: list[list[object]] = []
    cheap_rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="grail-bench-listings-") as tmp:
        root = Path(tmp)
        server = GrailServer(root / "data", root / "server.log", "--send-timeout", str(args.send_timeout))
        server.launch()
        try:
            server.wait_for("/health")
            for name in args.graphs.split(","):
                route, reverse = GRAPHS[name]
                started = time.perf_counter()
                answer = httpx.post(
                    f"{server.url}/graphs?wait=true&format=edgelist&name={name}",
                    content=tree_text(nodes, reverse),
                    timeout=3600,
                )
                answer.raise_for_status()
                print(f"{name}: {nodes:,} nodes built in {time.perf_counter() - started:.1f} s", flush=True)
                server.wait_for("/ready")
                path = f"/graphs/{name}/{route}?node=0"
                # Compiled and warm: the first listing of a kind compiles its kernels.
                httpx.get(f"{server.url}{path}&limit=1", timeout=600).raise_for_status()
                idle(server.url, path)
                if args.section in ("all", "cheap"):
                    cheap_rows.append([name, route, *cheap(server.url, path, args.runs)])
                    print(markdown_table(CHEAP_HEADER, cheap_rows[-1:]), flush=True)
                if args.section in ("all", "stalled"):
                    stalled_rows.append([name, *stalled_readers(server, path, args.readers, args.send_timeout)])
                    print(markdown_table(STALLED_HEADER, stalled_rows[-1:]), flush=True)
        finally:
            server.stop()
    end = os.getloadavg()
    text = (
        f"# Listings through a real server ({os.cpu_count()} cores; load average {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f} at the start, {end[0]:.1f} at the end)\n\n"
        f"`python -m benchmarks.bench_listings --section {args.section} --scale {args.scale:g} --readers "
        f"{args.readers} --send-timeout {args.send_timeout:g} --runs {args.runs}`: trees of {nodes:,} nodes, "
        "node 0 listed (every other node).\n"
    )
    if stalled_rows:
        text += "\n## Stalled readers (RSS: the server and its build workers)\n\n"
        text += markdown_table(STALLED_HEADER, stalled_rows) + "\n"
    if cheap_rows:
        text += (
            f"\n## What a listing costs (median of {args.runs})\n\n" + markdown_table(CHEAP_HEADER, cheap_rows) + "\n"
        )
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.stem}.md").write_text(text)


if __name__ == "__main__":
    main()
