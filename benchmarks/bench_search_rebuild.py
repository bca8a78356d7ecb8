"""Batches through a real server while a stream of edge updates splits large strongly connected components.

On a deep graph with large components (``bench_updates``' ``cycles-10k``: a layered DAG with a share of its
edges also turned back), removals inside the components leave most pairs to searches on the updated graph, of
milliseconds each, however few updates are pending. This runs a real ``grail-serve`` (CPU, SQLite) per tree:
it uploads the graph, answers ``--batches`` random batches with nothing pending, then for ``--seconds`` one
client streams updates (``bench_updates.updates``, shaped: removals of random edges and additions like the
graph's own, ``--rate`` a second) while another posts a random batch every ``--every`` seconds. Per window of
``--window`` seconds of the stream: the median batch time, its ratio to the median with nothing pending, and
the updates pending (the updates' own answers say how many the labels lack: a rebuild published brings it
down). ``--baseline TREE`` runs another checkout's server the same way first, under the same load: the
service's rebuild policy before and after.

    python3 -m benchmarks.bench_search_rebuild [--scale 1.0] [--seconds 60] [--rate 20] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.bench_updates import edge_arrays, graphs, updates
from benchmarks.serving import REPO, GrailServer

NAME = "split"


def _batch(client: httpx.Client, url: str, pairs: np.ndarray) -> float:
    start = time.perf_counter()
    answer = client.post(
        f"{url}/graphs/{NAME}/queries?unknown=false",  # a node without edges is not in the uploaded list
        content=pairs.astype("<i8").tobytes(),
        headers={"Content-Type": "application/octet-stream", "Accept": "application/octet-stream"},
        timeout=600,
    )
    answer.raise_for_status()
    return time.perf_counter() - start


def run_tree(tree: Path, text: bytes, stream: list, pairs: list[np.ndarray], args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="grail-bench-split-") as tmp:
        log = Path(tmp) / "server.log"
        server = GrailServer(Path(tmp) / "data", log, tree=tree).launch()
        url = server.url
        try:
            server.wait_for("/health", timeout=1800)
            with httpx.Client() as client:
                while client.get(f"{url}/ready").status_code != 200:  # the query kernels compiled
                    time.sleep(0.5)
                started = time.perf_counter()
                upload = f"{url}/graphs?wait=true&format=edgelist&name={NAME}"
                uploaded = client.post(upload, content=text, timeout=3600)
                uploaded.raise_for_status()
                built = time.perf_counter() - started
                # The server's first update compiles its kernels: two that change no pair of the graph, then their
                # rebuild (a lone update is folded in at once), before anything is timed.
                n = int(pairs[0].max()) + 1
                for body in ({"add": [[n, n + 1]], "remove": []}, {"add": [], "remove": [[n, n + 1]]}):
                    client.post(f"{url}/graphs/{NAME}/edges", json=body, timeout=3600).raise_for_status()
                while client.get(f"{url}/graphs/{NAME}").json()["pending_updates"]["updates"]:
                    time.sleep(0.2)
                for batch in pairs[:2]:  # warm: the first batches compile nothing, but fill caches
                    _batch(client, url, batch)
                quiet = [_batch(client, url, pairs[i % len(pairs)]) for i in range(args.batches)]
            pending: list[tuple[float, int]] = []
            stop = threading.Event()
            t0 = time.perf_counter()

            def updater() -> None:
                with httpx.Client() as own:
                    for i, (add, remove) in enumerate(stream):
                        due = t0 + i / args.rate
                        if stop.is_set():
                            return
                        time.sleep(max(0.0, due - time.perf_counter()))
                        body = {"add": add, "remove": remove}
                        answer = own.post(f"{url}/graphs/{NAME}/edges", json=body, timeout=600)
                        answer.raise_for_status()
                        pending.append((time.perf_counter() - t0, int(answer.json()["pending_updates"])))

            thread = threading.Thread(target=updater)
            thread.start()
            timed: list[tuple[float, float]] = []
            with httpx.Client() as client:
                i = 0
                while time.perf_counter() - t0 < args.seconds:
                    at = time.perf_counter() - t0
                    timed.append((at, _batch(client, url, pairs[i % len(pairs)])))
                    i += 1
                    time.sleep(max(0.0, t0 + at + args.every - time.perf_counter()))
            stop.set()
            thread.join()
            rebuilt = "rebuild now" in log.read_text(errors="replace")
        finally:
            server.kill()
    return {"built": built, "quiet": float(np.median(quiet)), "timed": timed, "pending": pending, "urgent": rebuilt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", default="cycles-10k")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=20.0, help="updates a second")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between batches")
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=9)
    parser.add_argument("--baseline", type=Path)
    args = parser.parse_args()
    description, make = graphs(args.scale)[args.graph]
    indptr, indices = make()
    src, dst = edge_arrays(indptr, indices)
    n = indptr.size - 1
    text = "".join(f"{u} {v}\n" for u, v in zip(src.tolist(), dst.tolist(), strict=True)).encode()
    stream = updates(src, dst, n, int(args.seconds * args.rate) + 1, "shaped", seed=11)
    rng = np.random.default_rng(12)
    pairs = [rng.integers(0, n, size=(args.pairs, 2)) for _ in range(16)]
    trees = ([("before", args.baseline)] if args.baseline else []) + [("after", REPO)]
    print(f"{args.graph}: {description}; {args.rate:g} updates/s for {args.seconds:g} s, {args.pairs:,} pairs a batch")
    results = {label: run_tree(tree, text, stream, pairs, args) for label, tree in trees}
    print("| tree | window s | batches | median ms | x | max ms | pending (last) |")
    print("|---|---|---|---|---|---|---|")
    for label, result in results.items():
        print(f"| {label} | quiet | {args.batches} | {1000 * result['quiet']:.2f} | 1.00 | | 0 |")
        for start in np.arange(0.0, args.seconds, args.window):
            inside = [s for at, s in result["timed"] if start <= at < start + args.window]
            seen = [p for at, p in result["pending"] if at < start + args.window]
            if inside:
                median = float(np.median(inside))
                print(
                    f"| {label} | {start:g}-{start + args.window:g} | {len(inside)} | {1000 * median:.2f} | "
                    f"{median / result['quiet']:.1f} | {1000 * max(inside):.0f} | {seen[-1] if seen else 0} |"
                )
        every = [s for _, s in result["timed"]]
        print(
            f"| {label} | all | {len(every)} | {1000 * float(np.median(every)):.2f} | "
            f"{float(np.median(every)) / result['quiet']:.1f} | {1000 * max(every):.0f} | "
            f"built in {result['built']:.1f} s; urgent rebuild logged: {result['urgent']} |"
        )


if __name__ == "__main__":
    main()
