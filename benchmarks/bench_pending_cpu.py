"""A batch's cost with updates pending over the same batch with none, in one process, as CPU time and wall
time (medians of ``--runs``): on a shared machine the CPU seconds of a single-threaded run
(``NUMBA_NUM_THREADS=1``) move least with the load. ``bench_updates``'s graphs, streams and batches.

    NUMBA_NUM_THREADS=1 python3 -m benchmarks.bench_pending_cpu --graphs rmat-2 [--pending 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def medians(index, batch: np.ndarray, runs: int) -> tuple[float, float]:
    """(CPU ms, wall ms) of ``index.query_ids(batch)``, medians after one warm-up."""
    index.query_ids(batch)
    cpu, wall = [], []
    for _ in range(runs):
        began, clock = time.process_time(), time.perf_counter()
        index.query_ids(batch)
        cpu.append(time.process_time() - began)
        wall.append(time.perf_counter() - clock)
    return float(np.median(cpu)) * 1e3, float(np.median(wall)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="rmat-2")
    parser.add_argument("--kinds", default="shaped,uniform")
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    from benchmarks.bench_updates import edge_arrays, graphs, pair_batches, updates
    from grail_core import ReachabilityIndex

    header = [
        "graph",
        "stream",
        "batch",
        "CPU ms, none",
        "CPU ms, pending",
        "CPU x",
        "wall ms, none",
        "wall ms, pending",
    ]
    print("| " + " | ".join([*header, "wall x"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.graphs.split(","):
        _, make = graphs(1.0)[name]
        indptr, indices = make()
        src, dst = edge_arrays(indptr, indices)
        n = indptr.size - 1
        batches = pair_batches(indptr, indices, args.pairs, seed=1)
        for kind in args.kinds.split(","):
            index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
            index.auto_rebuild = False  # measured: answers with the updates pending
            before = {label: medians(index, batch, args.runs) for label, batch in batches.items()}
            for add, remove in updates(src, dst, n, args.pending, kind, seed=2):
                index.update(add=add, remove=remove)
            for label, batch in batches.items():
                (cpu0, wall0), (cpu1, wall1) = before[label], medians(index, batch, args.runs)
                cells = [f"{cpu0:.2f}", f"{cpu1:.2f}", f"{cpu1 / cpu0:.1f}", f"{wall0:.2f}", f"{wall1:.2f}"]
                print("| " + " | ".join([name, kind, label, *cells, f"{wall1 / wall0:.1f}"]) + " |", flush=True)


if __name__ == "__main__":
    main()
