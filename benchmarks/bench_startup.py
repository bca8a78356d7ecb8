"""Start-up of ``make serve`` after the install: seconds to ``/health`` and ``/ready``, and the first uploads.

Each run starts ``make serve`` (the README's command; the install is done, so make only starts grail-serve) on a
free loopback port, in turns:
- cold: an empty numba cache (NUMBA_CACHE_DIR): the kernels compile in the background;
- restart: the cache the cold runs filled and a data directory with two ready graphs (a redeploy).
It times ``/health`` and ``/ready`` from the start of the command, then uploads the generated graph ``dag``
(tests/generated.py, 3,600 nodes) with ``wait=true`` twice: the first upload after the start, then a later one.
Prints a table of medians (min-max) and writes ``benchmarks/results/startup.md``.

    .venv/bin/python benchmarks/bench_startup.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.generated import generate  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
METRICS = ("/health", "/ready", "first upload", "second upload")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)
    raise TimeoutError(url)


def upload(url: str, graph: bytes) -> float:
    started = time.perf_counter()
    response = httpx.post(
        f"{url}/graphs?wait=true", content=graph, headers={"Content-Type": "text/x-grail-gra"}, timeout=600
    )
    response.raise_for_status()
    return time.perf_counter() - started


def run(cache: Path, data: Path, graph: bytes, log: Path) -> dict[str, float]:
    """One ``make serve``: seconds from the command's start to /health and /ready, then two uploads."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    command = ["make", "--no-print-directory", "serve", f"PORT={port}", f"DATA_DIR={data}"]
    started = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(f"{url}/health", started + 120)
        health = time.monotonic() - started
        ready: list[float] = []
        watcher = threading.Thread(
            target=lambda: (wait_for(f"{url}/ready", started + 900), ready.append(time.monotonic() - started))
        )
        watcher.start()
        # Right away, beside the warm-up: the first upload is what a user who does not wait for /ready meets.
        first = upload(url, graph)
        second = upload(url, graph)
        watcher.join()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    return {"/health": health, "/ready": ready[0], "first upload": first, "second upload": second}


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="grail-bench-startup-") as tmp:
        root = Path(tmp)
        generate(root / "graphs", ("dag",))
        graph = (root / "graphs" / "dag.gra").read_bytes()
        warm_cache, warm_data = root / "warm-cache", root / "warm-data"
        results: dict[str, dict[str, list[float]]] = {"cold": {}, "restart": {}}
        for i in range(args.runs):
            # In turns: a cold start (its cache then serves the restarts), then a restart on warm data.
            cold = run(root / f"cold-cache-{i}", root / f"cold-data-{i}", graph, root / "server.log")
            if i == 0:
                os.rename(root / "cold-cache-0", warm_cache)
                os.rename(root / "cold-data-0", warm_data)
            restart = run(warm_cache, warm_data, graph, root / "server.log")
            for kind, times in (("cold", cold), ("restart", restart)):
                for metric, value in times.items():
                    results[kind].setdefault(metric, []).append(value)
            print(f"run {i + 1}: cold {cold}, restart {restart}", flush=True)
    head = "| start | " + " | ".join(METRICS) + " |"
    rows = [f"| {kind} | " + " | ".join(cell(results[kind][m]) for m in METRICS) + " |" for kind in ("cold", "restart")]
    table = "\n".join([head, "|---" * (len(METRICS) + 1) + "|", *rows])
    text = (
        "# Start-up of `make serve` after the install\n\n"
        f"`benchmarks/bench_startup.py --runs {args.runs}`: seconds, median (min-max) of {args.runs} runs taken in "
        f"turns; {platform.node()}, {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        "at the start.\n"
        "cold: an empty numba cache; restart: the cache a cold run filled and a data directory with graphs.\n"
        "/health and /ready from the start of the command; the uploads (`dag`, 3,600 nodes, wait=true) right after "
        "/health answers, before /ready.\n\n" + table + "\n"
    )
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.md").write_text(text)


if __name__ == "__main__":
    main()
