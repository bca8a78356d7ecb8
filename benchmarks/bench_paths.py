"""Witness paths, descendants and edge updates on the shared datasets (GRAIL_DATASETS), through the library.

For each graph: the positive query pairs' paths (checked edge by edge, their length against a BFS shortest
path: median ratio, target <= 1.5), the time of a path query against a reachability query on the same pairs
(single pairs, taken in turns; target <= 10x), descendants of 1,000 sampled nodes against BFS (must be equal),
and single-pair query latency (p50/p99) idle and while another thread applies 1,000 single-edge updates per
second (adds and removes), with the answers after the stream checked against BFS on the updated graph.

    .venv/bin/python -m benchmarks.bench_paths [--graphs a,b] [--pairs 1000] [--max-mb 1] [--stream-seconds 3]

Writes benchmarks/results/paths-cpu.{md,csv} (``--stem``; and .png with matplotlib). Skips cleanly without datasets.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
from numba import njit

from benchmarks.common import RESULTS, alternating_seconds, dataset_graphs, datasets_dir, markdown_table, write_results
from grail_core import ReachabilityIndex, read_graph

HEADER = [
    "graph",
    "nodes",
    "edges",
    "pairs",
    "path/BFS median",
    "path/BFS max",
    "path us",
    "reach us",
    "path/reach",
    "desc checked",
    "desc equal",
    "p50 idle us",
    "p99 idle us",
    "p50 updating us",
    "p99 updating us",
    "updates/s",
    "exact after",
]


@njit(cache=True)
def _bfs(indptr, indices, source, distance, queue):
    """Distances from ``source`` (-1 unreached) into ``distance``; returns how many nodes were reached."""
    distance[:] = -1
    distance[source] = 0
    queue[0] = source
    head, tail = 0, 1
    while head < tail:
        x = queue[head]
        head += 1
        for e in range(indptr[x], indptr[x + 1]):
            y = indices[e]
            if distance[y] < 0:
                distance[y] = distance[x] + 1
                queue[tail] = y
                tail += 1
    return tail


def _csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst[order].astype(np.int64)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    values = np.array(samples) * 1e6
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


def bench_graph(folder: Path, name: str, pairs_wanted: int, stream_seconds: float, seed: int) -> list[object]:
    rng = np.random.default_rng(seed)
    graph = read_graph(folder / f"{name}.gra")
    index = ReachabilityIndex.build(graph, backend="cpu")
    index.auto_rebuild = False  # measured: answers with the updates pending
    n = index.num_nodes
    src, dst = index.edges()
    indptr, indices = _csr(n, src, dst)
    edge_set = set(zip(src.tolist(), dst.tolist(), strict=True))
    distance = np.empty(n, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)

    pairs = np.loadtxt(folder / f"{name}.pos.que", dtype=np.int64, ndmin=2)[:, :2]
    pairs = pairs[rng.permutation(len(pairs))[:pairs_wanted]]
    ratios = []
    for u, v in pairs.tolist():
        path = index.path(u, v)
        _bfs(indptr, indices, u, distance, queue)
        assert path is not None and path[0] == u and path[-1] == v, (name, u, v)
        assert all(edge in edge_set for edge in itertools.pairwise(path)), (name, u, v)
        shortest = int(distance[v])
        ratios.append((len(path) - 1) / shortest if shortest else 1.0)

    as_lists = pairs.tolist()

    def paths() -> None:
        for u, v in as_lists:
            index.path(u, v)

    def reach() -> None:
        for u, v in as_lists:
            index.reachable(u, v)

    path_runs, reach_runs = alternating_seconds([paths, reach], runs=5)
    path_us = statistics.median(path_runs) / len(as_lists) * 1e6
    reach_us = statistics.median(reach_runs) / len(as_lists) * 1e6

    sampled = rng.choice(n, size=min(1000, n), replace=False)
    equal = 0
    for u in sampled.tolist():
        reached = _bfs(indptr, indices, u, distance, queue)
        expected = np.sort(queue[1:reached])
        equal += int(np.array_equal(index.descendant_ids(u), expected))

    idle, updating, rate, exact = _latency_under_updates(index, rng, stream_seconds)
    p50_idle, p99_idle = _percentiles(idle)
    p50_up, p99_up = _percentiles(updating)
    return [
        name,
        n,
        len(edge_set),
        len(as_lists),
        float(np.median(ratios)),
        float(np.max(ratios)),
        path_us,
        reach_us,
        path_us / reach_us,
        len(sampled),
        equal,
        p50_idle,
        p99_idle,
        p50_up,
        p99_up,
        rate,
        exact,
    ]


def _latency_under_updates(
    index: ReachabilityIndex, rng: np.random.Generator, seconds: float
) -> tuple[list[float], list[float], float, str]:
    """Single-pair query latencies idle, then while a thread applies single-edge updates at 1,000/s: random
    new edges, and removals of random existing ones. Afterwards 300 random pairs are checked against BFS."""
    n = index.num_nodes
    probe = rng.integers(0, n, size=(200_000, 2)).tolist()

    def measure(stop: threading.Event | None, limit: float) -> list[float]:
        samples = []
        end = time.perf_counter() + limit
        for u, v in probe:
            start = time.perf_counter()
            index.reachable(u, v)
            samples.append(time.perf_counter() - start)
            if start > end or (stop is not None and stop.is_set()):
                break
        return samples

    idle = measure(None, seconds)
    src, dst = index.edges()
    existing = np.stack([src, dst], axis=1)
    plan = []
    for i in range(int(1000 * seconds)):
        if i % 2 and existing.size:
            plan.append(("remove", existing[rng.integers(0, len(existing))].tolist()))
        else:
            plan.append(("add", rng.integers(0, n, size=2).tolist()))
    stop = threading.Event()
    done = []

    def stream() -> None:
        start = time.perf_counter()
        for i, (kind, edge) in enumerate(plan):
            delay = start + i / 1000 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            index.update(**{kind: [edge]})
        done.append(time.perf_counter() - start)
        stop.set()

    thread = threading.Thread(target=stream)
    thread.start()
    updating = measure(stop, seconds * 10)
    thread.join()
    rate = len(plan) / done[0]

    src, dst = index.edges()
    indptr, indices = _csr(n, src, dst)
    distance = np.empty(n, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    checks = rng.integers(0, n, size=(300, 2))
    wrong = 0
    answers = index.query_batch(checks)
    for (u, v), answer in zip(checks.tolist(), answers.tolist(), strict=True):
        _bfs(indptr, indices, u, distance, queue)
        wrong += int(answer != (distance[v] >= 0))
    return idle, updating, rate, "yes" if wrong == 0 else f"NO ({wrong} wrong)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", help="comma-separated dataset names (default: all up to --max-mb)")
    parser.add_argument("--max-mb", type=float, default=1.0, help="skip .gra files larger than this")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--stream-seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--stem", default="paths-cpu", help="file names of the results")
    args = parser.parse_args()
    folder = datasets_dir()
    if not folder.is_dir():
        print(f"datasets folder {folder} is absent (set GRAIL_DATASETS): nothing to measure")
        return
    names = args.graphs.split(",") if args.graphs else dataset_graphs(folder)
    names = [g for g in names if (folder / f"{g}.gra").stat().st_size <= args.max_mb * 2**20 or args.graphs]
    load = os.getloadavg()
    rows = []
    for name in names:
        row = bench_graph(folder, name, args.pairs, args.stream_seconds, seed=len(rows))
        rows.append(row)
        print(markdown_table(HEADER, [row]).splitlines()[-1], flush=True)
    table = markdown_table(HEADER, rows)
    ratios = [float(row[4]) for row in rows]
    slow = [float(row[8]) for row in rows]
    text = (
        "# Paths, descendants and edge updates (library, CPU)\n\n"
        f"`{' '.join(['python -m benchmarks.bench_paths', *sys.argv[1:]])}`; load average at start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores.\n\n"
        f"{table}\n\n"
        f"Median path/BFS ratio over the graphs: {statistics.median(ratios):.3f} (target <= 1.5); "
        f"path/reach time: median {statistics.median(slow):.2f}x, worst {max(slow):.2f}x (target <= 10x). "
        "Latencies are single `reachable` calls on the calling thread, idle and while another thread applies "
        "single-edge updates (half adds of random pairs, half removals of random edges) at 1,000 per second.\n"
    )
    write_results(args.out, args.stem, text, HEADER, rows)
    print(text)
    _plot(args.out / f"{args.stem}.png", rows)


def _plot(path: Path, rows: list[list[object]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is absent: no chart")
        return
    names = [str(row[0]) for row in rows]
    x = np.arange(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    axes[0].bar(x, [float(row[8]) for row in rows])
    axes[0].axhline(10, color="red", linestyle="--", label="target")
    axes[0].set_ylabel("path query / reachability query time")
    axes[1].bar(x - 0.2, [float(row[11]) for row in rows], 0.4, label="p50 idle")
    axes[1].bar(x + 0.2, [float(row[13]) for row in rows], 0.4, label="p50 updating")
    axes[1].set_ylabel("single query latency, us")
    for ax in axes:
        ax.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
