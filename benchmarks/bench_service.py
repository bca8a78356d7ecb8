"""Load benchmark of the HTTP service on the CPU backend (issue 5), for dataset graphs and named graphs.

Starts ``grail-serve --backend cpu`` on a free loopback port (or uses ``--url``), uploads a dataset (or, with
``--graph packages`` or ``--graph rmat``, a generated edge list with string or sparse integer names, see
benchmarks/generate.py), then measures with httpx async clients:
- single-pair ``GET /graphs/{id}/reachable`` requests per second, p50 and p99 latency, errors and wrong
  answers, at 1, 16 and 64 concurrent clients (spread over ``--client-procs`` processes, since one
  Python client process saturates a core before the server does);
- a 1M-pair batch end to end (client encode, transfer, query, answers back) in each encoding, beside the
  same batch through the library directly, by name (``ReachabilityIndex.query_batch``: int64 names, or
  string names as UTF-8 + offsets) and by internal id (``query_ids``), all paths taken in turns; the
  table gives the best and the median run of each, and each against the library by name.
Writes a markdown table and a PNG chart under ``benchmarks/results/`` (service_bench for datasets,
service_bench-<graph> for named graphs).

    .venv/bin/python benchmarks/bench_service.py [--graph kegg_dag_uniq|packages|rmat] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.generate import NAMED_GRAPHS  # noqa: E402
from grail_core import ReachabilityIndex  # noqa: E402
from grail_core.names import NameTokens  # noqa: E402
from service.client import GrailClient  # noqa: E402
from service.wire import narrowest_width  # noqa: E402

DATASETS = Path(os.environ.get("GRAIL_DATASETS", REPO.parent / "shared" / "datasets"))
RESULTS = REPO / "benchmarks" / "results"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(data_dir: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "service.main",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--backend",
        "cpu",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(command, cwd=REPO, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    # /ready, not /health: the server answers while its kernels still compile, and nothing here should time that.
    for _ in range(6000):
        try:
            if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server not ready after 10 minutes; see {log_path}")


async def _get_load(
    url: str, graph_id: str, pairs: np.ndarray, answers: np.ndarray, clients: int, seconds: float, offset: int
) -> dict[str, object]:
    """``clients`` simulated clients, each one request at a time on its own keep-alive connection.

    Each client drives its own ``httpx.AsyncHTTPTransport`` with requests built in advance: httpcore's
    shared pool slows down as connections are added (one pool of 64 gave a tenth of the rate of 64 pools
    here) and the Client layer doubles the CPU per request; the server sees the same GETs either way.
    """
    latencies: list[float] = []
    errors = wrong = 0
    context = ssl.create_default_context()  # unused for http://, but built once instead of per transport
    transports = [
        httpx.AsyncHTTPTransport(verify=context, limits=httpx.Limits(max_connections=1)) for _ in range(clients)
    ]
    count = min(len(pairs), 20000)
    start = offset % len(pairs)
    chosen = [(start + i) % len(pairs) for i in range(count)]
    requests = [
        httpx.Request(
            "GET", f"{url}/graphs/{graph_id}/reachable", params={"source": pairs[j][0], "target": pairs[j][1]}
        )
        for j in chosen
    ]
    expected = [bool(answers[j]) for j in chosen]

    async def one(transport: httpx.AsyncHTTPTransport, i: int) -> None:
        nonlocal errors, wrong
        started = time.perf_counter()
        try:
            response = await transport.handle_async_request(requests[i])
            body = await response.aread()
            await response.aclose()
        except httpx.HTTPError:
            errors += 1
            return
        latencies.append(time.perf_counter() - started)
        if response.status_code != 200:
            errors += 1
        elif json.loads(body)["reachable"] != expected[i]:
            wrong += 1

    # Open the connections and warm the server's code paths before timing.
    await asyncio.gather(*(one(t, k) for k, t in enumerate(transports)))
    latencies.clear()
    stop_at = time.perf_counter() + seconds

    async def client(k: int) -> None:
        i = k
        while time.perf_counter() < stop_at:
            await one(transports[k], i % count)
            i += clients

    began, cpu_began = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(k) for k in range(clients)))
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    for transport in transports:
        await transport.aclose()
    return {"latencies": latencies, "errors": errors, "wrong": wrong, "elapsed": elapsed, "cpu": cpu}


def _proc_main(args: tuple) -> dict[str, object]:
    return asyncio.run(_get_load(*args))


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc); 0 when unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get_benchmark(
    url: str,
    graph_id: str,
    pairs: np.ndarray,
    answers: np.ndarray,
    clients: int,
    seconds: float,
    procs: int,
    server_pid: int | None,
) -> dict[str, float]:
    procs = max(1, min(procs, clients))
    server_cpu = cpu_seconds(server_pid)
    shares = [clients // procs + (1 if p < clients % procs else 0) for p in range(procs)]
    jobs = [(url, graph_id, pairs, answers, share, seconds, p * 7919) for p, share in enumerate(shares)]
    if procs == 1:
        parts = [_proc_main(jobs[0])]
    else:
        with mp.get_context("spawn").Pool(procs) as pool:
            parts = pool.map(_proc_main, jobs)
    server_cpu = cpu_seconds(server_pid) - server_cpu
    latencies = np.concatenate([np.asarray(p["latencies"]) for p in parts])
    elapsed = max(float(p["elapsed"]) for p in parts)
    count = max(1, latencies.size)
    return {
        "server_us": server_cpu / count * 1e6 if server_pid else float("nan"),
        "client_us": sum(float(p["cpu"]) for p in parts) / count * 1e6,
        "clients": clients,
        "procs": procs,
        "requests": int(latencies.size),
        "rps": latencies.size / elapsed,
        "p50_ms": float(np.percentile(latencies, 50) * 1e3),
        "p99_ms": float(np.percentile(latencies, 99) * 1e3),
        "errors": int(sum(int(p["errors"]) for p in parts)),
        "wrong": int(sum(int(p["wrong"]) for p in parts)),
    }


def wrk_benchmark(
    url: str, graph_id: str, pairs: np.ndarray, clients: int, seconds: float, workdir: Path, server_pid: int | None
) -> dict[str, object] | None:
    """The same GETs from wrk (a C load generator, Debian package ``wrk``), when installed: it takes a
    fraction of the CPU that Python clients need, so on a small machine it shows the server's own limit."""
    if shutil.which("wrk") is None:
        return None
    script = workdir / "pairs.lua"
    paths = ",\n".join(
        f'"/graphs/{graph_id}/reachable?{urlencode({"source": u, "target": v})}"' for u, v in pairs[:20000]
    )
    script.write_text(
        "local paths = {\n" + paths + "\n}\nlocal i = 0\nrequest = function()\n  i = i + 1\n"
        '  return wrk.format("GET", paths[(i % #paths) + 1])\nend\n'
    )
    server_cpu = cpu_seconds(server_pid)
    done = subprocess.run(
        ["wrk", "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    if done.returncode != 0:
        print(f"wrk failed: {done.stderr.strip()}", file=sys.stderr)
        return None
    out = done.stdout

    def millis(label: str) -> float:
        match = re.search(rf"^\s*{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if match is None:
            return float("nan")
        return float(match.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[match.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, socket_errors.groups())) if socket_errors else 0)
    requests = int(total.group(1)) if total else 0
    return {
        "server_us": (cpu_seconds(server_pid) - server_cpu) / max(1, requests) * 1e6 if server_pid else float("nan"),
        "clients": clients,
        "requests": requests,
        "rps": float(rps.group(1)) if rps else 0.0,
        "p50_ms": millis("50%"),
        "p99_ms": millis("99%"),
        "errors": errors,
    }


def batch_benchmark(
    url: str, graph_id: str, index: ReachabilityIndex, ids: np.ndarray, repeats: int
) -> list[dict[str, object]]:
    """Each path ``repeats`` times, taken in turns (the library, then each HTTP path, then again) so that load
    from elsewhere on the machine falls on all of them alike; every answer is checked. ``ids``: the pairs
    as internal ids; every other path sends the same pairs by name."""
    expected = index.query_ids(ids)[0]
    flat = index.names.names_of(ids.ravel())
    as_list = [flat[k : k + 2] for k in range(0, len(flat), 2)]
    text_body = "".join(f"{u} {v}\n" for u, v in as_list).encode()
    if index.names.are_integers:
        by_name: object = np.array(flat, dtype=np.int64).reshape(-1, 2)
        library = "library by name: index.query_batch(int64 array)"
    else:
        by_name = NameTokens.from_strings(flat)
        library = "library by name: index.query_batch(UTF-8 + offsets)"

    with GrailClient(url, timeout=300) as client:

        def text_lines() -> np.ndarray:
            response = client.http.post(
                f"/graphs/{graph_id}/queries",
                content=text_body,
                headers={"Content-Type": "text/plain", "Accept": "text/plain"},
            )
            response.raise_for_status()
            return np.frombuffer(response.content, dtype=np.uint8)[0::2] == ord("1")

        def as_json(body: bytes | None = None) -> np.ndarray:
            body = body or json.dumps({"pairs": as_list}).encode()
            response = client.http.post(
                f"/graphs/{graph_id}/queries", content=body, headers={"Content-Type": "application/json"}
            )
            response.raise_for_status()
            return np.array(response.json()["reachable"], dtype=bool)

        json_body = json.dumps({"pairs": as_list}).encode()
        paths = [
            (library, lambda: index.query_batch(by_name)),
            ("library by internal id: index.query_ids(int64 array)", lambda: index.query_ids(ids)[0]),
            ("library from the Python list: index.query_batch(list of pairs)", lambda: index.query_batch(as_list)),
        ]
        if index.names.are_integers:
            auto_width = narrowest_width(by_name)
            paths.append(
                (
                    f"HTTP binary, narrowest width (int{auto_width} here), bit answers (GrailClient.query_batch)",
                    lambda: client.query_batch(graph_id, by_name),
                )
            )
            paths += [
                (
                    f"HTTP binary int{width}, bit answers (query_batch width={width})",
                    lambda width=width: client.query_batch(graph_id, by_name, width=width),
                )
                for width in (32, 64)
                if width > auto_width
            ]
            paths.append(
                (
                    "text lines parsed by the client, sent binary (grail query)",
                    lambda: np.frombuffer(client.query_lines(graph_id, text_body), dtype=np.uint8)[0::2] == ord("1"),
                )
            )
        else:
            paths.append(
                (
                    "HTTP text built from the list at the client, bit answers (GrailClient.query_batch)",
                    lambda: client.query_batch(graph_id, as_list),
                )
            )
        paths += [
            ("HTTP text lines in (body ready), 0/1 lines out (parsed by the server)", text_lines),
            ("HTTP JSON in (body ready), JSON out", lambda: as_json(json_body)),
            ("HTTP JSON in (json.dumps of the list at the client), JSON out", as_json),
        ]
        for _, run in paths:  # once untimed: connections, thread pools and caches warm
            run()
        times: dict[str, list[float]] = {label: [] for label, _ in paths}
        for _ in range(repeats):
            for label, run in paths:
                started = time.perf_counter()
                answers = run()
                times[label].append(time.perf_counter() - started)
                assert np.array_equal(answers, expected), f"{label}: wrong answers"
    reference = times[library]
    return [
        {
            "path": label,
            "best": min(seconds),
            "median": float(np.median(seconds)),
            "ratio_best": min(seconds) / min(reference),
            "ratio_median": float(np.median(seconds)) / float(np.median(reference)),
        }
        for label, seconds in times.items()
    ]


def write_results(
    out: Path,
    stem: str,
    meta: dict[str, object],
    gets: list[dict[str, float]],
    wrks: list[dict[str, object]],
    batches: list[dict[str, object]],
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Service benchmark (CPU backend)",
        "",
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- graph: {meta['graph']} ({meta['nodes']} nodes, {meta['edges']} edges); every answer is checked",
        f"- date: {meta['date']}; load average before the run (other work on the machine): {meta['load']}",
        "",
        "## Single-pair GET /graphs/{id}/reachable, httpx async clients",
        "",
        "| concurrent clients | client processes | requests | requests/s | p50 ms | p99 ms | errors | wrong answers "
        "| server CPU µs/request | client CPU µs/request |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for g in gets:
        lines.append(
            f"| {g['clients']} | {g['procs']} | {g['requests']} | {g['rps']:,.0f} | {g['p50_ms']:.2f} | "
            f"{g['p99_ms']:.2f} | {g['errors']} | {g['wrong']} | {g['server_us']:.0f} | {g['client_us']:.0f} |"
        )
    if wrks:
        lines += [
            "",
            "## The same GETs from wrk (C load generator, one thread), every answer 200",
            "",
            "| concurrent connections | requests | requests/s | p50 ms | p99 ms | errors | server CPU µs/request |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for w in wrks:
            lines.append(
                f"| {w['clients']} | {w['requests']} | {w['rps']:,.0f} | {w['p50_ms']:.2f} | "
                f"{w['p99_ms']:.2f} | {w['errors']} | {w['server_us']:.0f} |"
            )
    lines += [
        "",
        f"## One batch of {meta['batch_pairs']:,} pairs, end to end at the client ({meta['repeats']} runs of "
        "each path, taken in turns)",
        "",
        "| path | best s | median s | x library by name (best) | x library by name (median) |",
        "|---|---:|---:|---:|---:|",
    ]
    for b in batches:
        lines.append(
            f"| {b['path']} | {b['best']:.3f} | {b['median']:.3f} | {b['ratio_best']:.2f} | {b['ratio_median']:.2f} |"
        )
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = [str(g["clients"]) for g in gets]
    width = 0.4 if wrks else 0.8
    positions = np.arange(len(gets))
    left.bar(
        positions - (width / 2 if wrks else 0),
        [g["rps"] for g in gets],
        width,
        color="#4c72b0",
        label="httpx async clients",
    )
    if wrks:
        left.bar(positions + width / 2, [w["rps"] for w in wrks], width, color="#8172b2", label="wrk")
    left.set_xticks(positions, labels)
    left.axhline(2000, color="#c44e52", linestyle="--", label="target 2,000/s at 64 clients")
    for i, g in enumerate(gets):
        left.annotate(
            f"p50 {g['p50_ms']:.1f} ms\np99 {g['p99_ms']:.1f} ms",
            (i - (width / 2 if wrks else 0), g["rps"]),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    left.set_xlabel("concurrent clients")
    left.set_ylabel("single-pair GETs per second")
    left.set_title("GET /graphs/{id}/reachable")
    left.legend(loc="upper left", fontsize=8)
    left.set_ylim(0, 1.25 * max([float(g["rps"]) for g in gets] + [float(w["rps"]) for w in wrks] + [2000.0]))
    names = [str(b["path"]).split(" (")[0].split(":")[0] for b in batches]
    right.barh(names[::-1], [float(b["median"]) for b in batches][::-1], color="#55a868")
    target = float(meta["target"])  # issue 5's 2x for integer pairs, issue 12's 3x for string names
    right.axvline(target * float(batches[0]["median"]), color="#c44e52", linestyle="--", label=f"{target:g}x library")
    right.set_xscale("log")
    right.set_xlabel("median seconds (log scale)")
    right.set_title(f"{meta['batch_pairs']:,}-pair batch, end to end")
    right.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--graph", default="kegg_dag_uniq", help=f"dataset stem in GRAIL_DATASETS, or one of {', '.join(NAMED_GRAPHS)}"
    )
    parser.add_argument("--url", help="an already running server (default: start one)")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each GET run")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--client-procs", type=int, default=2, help="client processes for the GET runs")
    parser.add_argument("--batch-pairs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    if args.graph in NAMED_GRAPHS:
        title, make_edge_list = NAMED_GRAPHS[args.graph]
        upload: Path | bytes = make_edge_list()
        index = ReachabilityIndex.from_bytes(upload, format="edgelist", backend="cpu")
        sample = rng.integers(0, index.names.size, (20_000, 2))
        flat = index.names.names_of(sample.ravel())
        pairs = [flat[k : k + 2] for k in range(0, len(flat), 2)]
        answers = index.query_ids(sample)[0]
        batch = rng.integers(0, index.names.size, (args.batch_pairs, 2))
        stem = f"service_bench-{args.graph}"
        about = f"{title}, generated (benchmarks/generate.py); single GETs and batches of uniform random pairs by name"
    else:
        upload = DATASETS / f"{args.graph}.gra"
        if not upload.is_file():
            print(f"dataset {upload} is absent (set GRAIL_DATASETS)", file=sys.stderr)
            return 2
        que = [np.loadtxt(DATASETS / f"{args.graph}{k}.que", dtype=np.int64, ndmin=2) for k in ("", ".pos")]
        ans = [np.loadtxt(DATASETS / f"{args.graph}{k}.ans", dtype=np.int64).astype(bool) for k in ("", ".pos")]
        ids, answers = np.concatenate(que), np.concatenate(ans)
        pairs = ids.tolist()
        index = ReachabilityIndex.from_file(upload, backend="cpu")
        batch = ids[rng.integers(0, len(ids), args.batch_pairs)]
        stem = "service_bench"
        about = f"{args.graph}; single GETs cycle through its .que and .pos.que pairs"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="grail-bench-") as tmp:
        proc = None
        url = args.url
        if url is None:
            proc, url = start_server(Path(tmp) / "data", Path(tmp) / "server.log")
        server_pid = proc.pid if proc is not None else None
        try:
            with GrailClient(url, timeout=300) as client:
                record = client.upload(
                    upload,
                    name=args.graph,
                    backend="cpu",
                    wait=True,
                    content_type=None if isinstance(upload, Path) else "text/plain",
                )
            graph_id = record["id"]
            gets = []
            for clients in args.clients:
                result = get_benchmark(
                    url, graph_id, pairs, answers, clients, args.seconds, args.client_procs, server_pid
                )
                gets.append(result)
                print(
                    f"GET x{clients:3d} ({result['procs']} procs): {result['rps']:8.0f}/s"
                    f"  p50 {result['p50_ms']:.2f} ms  p99 {result['p99_ms']:.2f} ms"
                    f"  errors {result['errors']}  wrong {result['wrong']}",
                    flush=True,
                )
            wrks = []
            for clients in args.clients:
                result = wrk_benchmark(url, graph_id, pairs, clients, args.seconds, Path(tmp), server_pid)
                if result is not None:
                    wrks.append(result)
                    print(
                        f"wrk x{clients:3d}: {result['rps']:8.0f}/s  p50 {result['p50_ms']:.2f} ms"
                        f"  p99 {result['p99_ms']:.2f} ms  errors {result['errors']}",
                        flush=True,
                    )
            batches = batch_benchmark(url, graph_id, index, np.ascontiguousarray(batch), args.repeats)
            for b in batches:
                print(
                    f"{b['path']:<88} best {b['best']:.3f} s (x{b['ratio_best']:.2f})"
                    f"  median {b['median']:.3f} s (x{b['ratio_median']:.2f})",
                    flush=True,
                )
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)

    meta = {
        "command": " ".join(["python", os.path.relpath(Path(sys.argv[0]).resolve(), REPO), *sys.argv[1:]]),
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}",
        "graph": about,
        "nodes": record["stats"]["nodes"],
        "edges": record["stats"]["edges"],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "batch_pairs": args.batch_pairs,
        "repeats": args.repeats,
        "load": load,
        "target": 3 if args.graph in NAMED_GRAPHS else 2,
    }
    write_results(args.out, stem, meta, gets, wrks, batches)
    print(f"wrote {args.out / stem}.md and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
