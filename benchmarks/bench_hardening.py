"""Issue 15's figures: build memory against its estimate, the server's memory under the issue's gzip bombs,
/health under 5,000 slow clients, and single GETs while a 20 MB graph builds.

1. ``memory``: peak resident memory of reading and indexing generated graphs (a fresh process each, after a
   warm-up, as in a build worker) beside what grail_core.sizing estimates from the first MiB and from the
   parsed graph; the constants of grail_core.sizing come from this table.
2. ``bombs``: a server with its default limits gets the issue's 261 KB gzip body of "0 1" lines and a 10 MB
   gzip body of zeros; the answer, its time, and the peak memory of the server and of its build workers.
3. ``slow``: 5,000 connections that send their request a byte a second (reconnecting when the server cuts
   them), from one client process; /health's latency (p50, p99, max) from another meanwhile, and before.
4. ``fair``: a 20 MB edge list builds while wrk sends single-pair GETs on 64 connections (p50, p99; httpx
   clients where wrk is not installed), beside the same load without a build; and a small graph's upload to
   ready while the large one builds.

    .venv/bin/python benchmarks/bench_hardening.py [--only memory,bombs,slow,fair] [--slow-clients 5000]

Writes ``benchmarks/results/hardening.md``. Timings depend on the machine's load: ``uptime`` is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import multiprocessing as mp
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import zlib
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RESULTS = REPO / "benchmarks" / "results"
MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def status_bytes(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid: int) -> set[int]:
    kids: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids |= {int(k) for k in (task / "children").read_text().split()}
        except OSError:
            pass
    return kids


class Server:
    def __init__(self, folder: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.log = open(folder / "server.log", "wb")
        command = [sys.executable, "-m", "service.main", "--port", str(self.port), "--data-dir", str(folder / "data")]
        self.proc = subprocess.Popen([*command, "--backend", "cpu", *args], cwd=REPO, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        # The build workers are warm once both say so in the log.
        while time.monotonic() < deadline and (folder / "server.log").read_text().count("ready (pid") < 2:
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


# ---- 1. build memory against the estimate -------------------------------------------------------------------

_MEASURE = textwrap.dedent(
    """
    import os, sys, json
    from grail_core import ReachabilityIndex, read_graph, sizing
    from service.worker import warm_up_builds
    warm_up_builds("cpu")
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    path, fmt = sys.argv[1], sys.argv[2]
    base = status("VmRSS")
    with open(path, "rb") as fh:
        head = fh.read(sizing.SAMPLE_BYTES)
    estimate = sizing.estimate(head, os.path.getsize(path), fmt)
    graph = read_graph(path, format=fmt)
    exact = sizing.build_bytes(graph.format, os.path.getsize(path), graph.num_nodes, graph.num_edge_entries)
    ReachabilityIndex.build(graph, backend="cpu")
    print(json.dumps({"peak": status("VmHWM") - base, "estimate": estimate.bytes, "exact": exact,
                      "nodes": graph.num_nodes, "edges": graph.num_edge_entries}))
    """
)


def write_graph(path: Path, kind: str, nodes: int, edges: int) -> str:
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, nodes, size=(edges, 2))
    if kind == "gra":
        order = np.argsort(pairs[:, 0], kind="stable")
        src, dst = pairs[order, 0], pairs[order, 1]
        bounds = np.searchsorted(src, np.arange(nodes + 1))
        with open(path, "w") as fh:
            fh.write(f"graph_for_greach\n{nodes}\n")
            for i in range(nodes):
                fh.write(f"{i}: " + " ".join(map(str, dst[bounds[i] : bounds[i + 1]].tolist())) + " #\n")
        return "gra"
    if kind == "json":
        path.write_text(json.dumps({"edges": pairs.tolist()}))
        return "json"
    np.savetxt(path, pairs, fmt="n%d" if kind == "strings" else "%d")
    return "edgelist"


def bench_memory(work: Path) -> list[str]:
    shapes = [
        ("edge list, 1-byte names", "edgelist", 10, 4_000_000),
        ("edge list, 1M nodes", "edgelist", 1_000_000, 4_000_000),
        ("edge list, 5M nodes", "edgelist", 5_000_000, 2_000_000),
        ("edge list, string names", "strings", 1_000_000, 2_000_000),
        (".gra, 1M nodes", "gra", 1_000_000, 4_000_000),
        ("JSON, 1M nodes", "json", 1_000_000, 2_000_000),
    ]
    rows = [
        "| graph | text MiB | nodes | edges | peak MiB | x text | estimate (first MiB) MiB | estimate (parsed) MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, kind, nodes, edges in shapes:
        path = work / f"memory-{kind}-{nodes}"
        fmt = write_graph(path, kind, nodes, edges)
        out = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path), fmt], cwd=REPO, capture_output=True, text=True, check=True
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        size = path.stat().st_size
        rows.append(
            f"| {label} | {size / MIB:.1f} | {got['nodes']:,} | {got['edges']:,} | {got['peak'] / MIB:.0f} | "
            f"{got['peak'] / size:.1f} | {got['estimate'] / MIB:.0f} | {got['exact'] / MIB:.0f} |"
        )
        print(rows[-1], flush=True)
        path.unlink()
    return rows


# ---- 2. the bombs -------------------------------------------------------------------------------


def watch_peak(pid: int, stop: list[bool], peaks: dict[str, int]) -> None:
    while not stop:
        peaks["server"] = max(peaks.get("server", 0), status_bytes(pid, "VmRSS"))
        workers = sum(status_bytes(kid, "VmRSS") for kid in children(pid))
        peaks["workers"] = max(peaks.get("workers", 0), workers)
        time.sleep(0.02)


def zero_bomb(size: int) -> bytes:
    """A gzip stream of zeros at least ``size`` bytes long (about a thousand times that decompressed)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(64 << 20)
    parts: list[bytes] = []
    total = 0
    while total < size:
        parts.append(compressor.compress(block))
        total += len(parts[-1])
    parts.append(compressor.flush())
    return b"".join(parts)


def bench_bombs(work: Path) -> list[str]:
    server = Server(work / "bombs")
    rows = ["| body | answer | seconds | server peak RSS MiB | workers' peak RSS MiB |", "|---|---|---|---|---|"]
    try:
        bodies = [
            ("261 KB gzip of 64 Mi '0 1' lines (issue: 7.3 GB)", gzip.compress(b"0 1\n" * (64 << 20), 9)),
            ("10 MB gzip of zeros (issue: 8.6 GB for 52 s)", zero_bomb(10_000_000)),
        ]
        for label, body in bodies:
            peaks: dict[str, int] = {}
            stop: list[bool] = []
            thread = threading.Thread(target=watch_peak, args=(server.proc.pid, stop, peaks))
            thread.start()
            started = time.perf_counter()
            response = httpx.post(
                f"{server.url}/graphs?wait=true",
                content=body,
                headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"},
                timeout=600,
            )
            elapsed = time.perf_counter() - started
            stop.append(True)
            thread.join()
            answer = f"{response.status_code} {response.json().get('error')}"
            rows.append(
                f"| {label} ({len(body) / 1e6:.2f} MB) | {answer} | {elapsed:.2f} | {peaks['server'] / MIB:.0f} | "
                f"{peaks['workers'] / MIB:.0f} |"
            )
            print(rows[-1], flush=True)
    finally:
        server.stop()
    return rows


# ---- 3. slow clients ------------------------------------------------------------------------------------


async def _slow_clients(port: int, count: int, seconds: float, body: bool) -> dict[str, int]:
    """``count`` connections sending a request a byte a second; a cut one reconnects. Counts reconnects."""
    request = b"POST /graphs HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
    prefix = request if body else b""
    stats = {"connections": 0, "cut": 0, "refused": 0}  # refused: connect() failed
    deadline = time.monotonic() + seconds

    async def one(i: int) -> None:
        await asyncio.sleep(i / count)  # spread over a second
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                stats["refused"] += 1
                await asyncio.sleep(1)
                continue
            stats["connections"] += 1
            try:
                writer.write(prefix)
                payload = request if not body else b"0 1\n" * 25_000
                for byte in payload:
                    if time.monotonic() > deadline:
                        break
                    writer.write(bytes([byte]))
                    await writer.drain()
                    try:
                        await asyncio.wait_for(reader.read(1), 1.0)  # an answer (408, 503) or the end: cut
                    except asyncio.TimeoutError:
                        continue
                    stats["cut"] += 1
                    break
            except OSError:
                stats["cut"] += 1
            finally:
                writer.close()

    await asyncio.gather(*(one(i) for i in range(count)))
    return stats


def _slow_main(args: tuple[int, int, float, bool], queue: mp.Queue) -> None:  # type: ignore[type-arg]
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    queue.put(asyncio.run(_slow_clients(*args)))


def health_latencies(url: str, seconds: float, fresh: bool = False) -> list[float]:
    """/health's latency, on one kept-alive connection (after a first request that opens it), or each on a new
    connection (``fresh``: what a probe that connects every time sees, the TCP handshake included)."""
    out = []
    with httpx.Client(base_url=url, timeout=60) as client:
        client.get("/health")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if fresh:
                assert httpx.get(f"{url}/health", timeout=60).status_code == 200
            else:
                assert client.get("/health").status_code == 200
            out.append(time.perf_counter() - started)
            time.sleep(0.1 if fresh else 0.02)
    return out


def summary(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    return f"{len(ms)} | {p(0.5):.1f} | {p(0.99):.1f} | {ms[-1]:.1f}"


def bench_slow(work: Path, count: int) -> list[str]:
    server = Server(work / "slow")
    rows = [
        "| load | /health on | requests | p50 ms | p99 ms | max ms | slow connections made | cut by the server |",
        "|---|---|---|---|---|---|---|---|",
    ]
    try:
        for fresh in (False, True):
            on = "new connections" if fresh else "one connection"
            rows.append(f"| none | {on} | {summary(health_latencies(server.url, 10, fresh))} | - | - |")
            print(rows[-1], flush=True)
        for body in (False, True):
            queue: mp.Queue = mp.get_context("spawn").Queue()  # type: ignore[type-arg]
            proc = mp.get_context("spawn").Process(target=_slow_main, args=((server.port, count, 40.0, body), queue))
            proc.start()
            time.sleep(8)  # all connected
            kept = health_latencies(server.url, 14)
            fresh_ones = health_latencies(server.url, 14, fresh=True)
            stats = queue.get(timeout=120)
            proc.join()
            label = f"{count:,} clients sending " + ("a body" if body else "headers") + " a byte a second"
            made = f"{stats['connections']:,} | {stats['cut']:,}"
            rows.append(f"| {label} | one connection | {summary(kept)} | {made} |")
            rows.append(f"| {label} | new connections | {summary(fresh_ones)} | {made} |")
            print(*rows[-2:], sep="\n", flush=True)
    finally:
        server.stop()
    return rows


# ---- 4. fair builds -------------------------------------------------------------------------------------


def wrk_latency(url: str, seconds: int, connections: int) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) of wrk's GETs of ``url``."""
    out = subprocess.run(
        ["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def ms(label: str) -> float:
        match = re.search(rf"^\s*{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
        assert match, out
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return rate, ms("50%"), ms("99%")


def bench_fair(work: Path) -> list[str]:
    if shutil.which("wrk") is None:
        return ["wrk is not installed (apt-get install wrk): the fair-builds figures need it"]
    server = Server(work / "fair")
    rows = ["| load | GET/s | p50 ms | p99 ms |", "|---|---|---|---|"]
    try:
        with httpx.Client(base_url=server.url, timeout=600) as client:
            small = client.post("/graphs?wait=true", content=b"0 1\n1 2\n2 0\n2 3\n").json()["id"]
            url = f"{server.url}/graphs/{small}/reachable?source=0&target=3"
            rate, p50, p99 = wrk_latency(url, 10, 64)
            rows.append(f"| 64 connections, no build | {rate:.0f} | {p50:.1f} | {p99:.1f} |")
            print(rows[-1], flush=True)
            big = work / "big.txt"
            rng = np.random.default_rng(3)
            np.savetxt(big, rng.integers(0, 400_000, size=(1_400_000, 2)), fmt="%d")
            size = big.stat().st_size
            record = client.post("/graphs", content=big.read_bytes(), headers={"Content-Type": "text/plain"}).json()
            while client.get(f"/graphs/{record['id']}").json()["status"] == "queued":
                time.sleep(0.05)
            started = time.perf_counter()
            small_build = client.post("/graphs?wait=true", content=b"5 6\n6 7\n")
            small_seconds = time.perf_counter() - started
            still = client.get(f"/graphs/{record['id']}").json()["status"]
            rate, p50, p99 = wrk_latency(url, 10, 64)
            during = client.get(f"/graphs/{record['id']}").json()["status"]
            rows.append(
                f"| 64 connections while a {size / 1e6:.0f} MB edge list builds (still {during} at the end) | "
                f"{rate:.0f} | {p50:.1f} | {p99:.1f} |"
            )
            print(rows[-1], flush=True)
            rows.append("")
            rows.append(
                f"A small graph uploaded while the large one built: {small_build.status_code}, ready in "
                f"{small_seconds * 1000:.0f} ms (the large one was {still} then)."
            )
            print(rows[-1], flush=True)
            while client.get(f"/graphs/{record['id']}").json()["status"] not in ("ready", "failed"):
                time.sleep(0.2)
    finally:
        server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="memory,bombs,slow,fair")
    parser.add_argument("--slow-clients", type=int, default=5000)
    args = parser.parse_args()
    load = os.getloadavg()
    header = [
        "# Hardening figures (issue 15)",
        "",
        f"`benchmarks/bench_hardening.py`, {os.cpu_count()} cores, load average before the run "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
    ]
    sections = {
        "memory": ("Build memory against grail_core.sizing's estimate", bench_memory),
        "bombs": ("The issue's gzip bombs against a server with its default limits", bench_bombs),
        "slow": ("/health under slow clients", lambda w: bench_slow(w, args.slow_clients)),
        "fair": ("Single GETs (wrk, 64 connections) while a large graph builds", bench_fair),
    }
    out = header
    with tempfile.TemporaryDirectory(prefix="grail-bench-hardening-") as tmp:
        for name in args.only.split(","):
            title, run = sections[name]
            print(f"## {title}", flush=True)
            folder = Path(tmp) / name
            folder.mkdir()
            out += ["", f"## {title}", "", *run(folder)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    only = args.only.replace(",", "-")
    target = RESULTS / ("hardening.md" if args.only == "memory,bombs,slow,fair" else f"hardening-{only}.md")
    target.write_text("\n".join(out) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
