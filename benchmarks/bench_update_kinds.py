"""What applying updates costs, by kind: removals inside a strongly connected component, removals between two,
additions (``bench_updates``'s streams, one update at a time through ``ReachabilityIndex.update``).

CPU seconds of this process (``time.process_time``: steadier than the wall clock on a shared machine) and the
slowest update's wall milliseconds, per kind, after one warm-up update (compiled code is cached beside the
sources; the warm-up removes an edge the graph lacks). Run it from each checkout's own folder to compare them:

    python3 -m benchmarks.bench_update_kinds --graphs rmat-2 [--kinds shaped,uniform] [--count 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="rmat-2")
    parser.add_argument("--kinds", default="shaped,uniform")
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    from benchmarks.bench_updates import edge_arrays, graphs, updates
    from grail_core import ReachabilityIndex

    print("| graph | stream | updates | count | CPU s | slowest ms |\n|---|---|---|---|---|---|")
    for name in args.graphs.split(","):
        _, make = graphs(1.0)[name]
        indptr, indices = make()
        src, dst = edge_arrays(indptr, indices)
        n = indptr.size - 1
        for kind in args.kinds.split(","):
            index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
            comp = index.current().labels.views.forward().comp
            stream = updates(src, dst, n, args.count, kind, seed=2)
            absent = next(v for v in range(1, n) if v not in set(indices[indptr[0] : indptr[1]].tolist()))
            index.update(remove=[[0, absent]])  # warm-up (an edge the graph lacks: changes nothing)
            cpu: dict[str, list[float]] = {"inside a component": [], "between components": [], "additions": []}
            slowest = dict.fromkeys(cpu, 0.0)
            for add, remove in stream[: args.count]:
                if add:
                    label = "additions"
                else:
                    x, y = remove[0]
                    label = "inside a component" if comp[x] == comp[y] else "between components"
                began, wall = time.process_time(), time.perf_counter()
                index.update(add=add, remove=remove)
                cpu[label].append(time.process_time() - began)
                slowest[label] = max(slowest[label], time.perf_counter() - wall)
            for label, seconds in cpu.items():
                cells = [name, kind, label, f"{len(seconds):,}", f"{sum(seconds):.2f}", f"{slowest[label] * 1e3:.1f}"]
                print("| " + " | ".join(cells) + " |")
            total = float(np.sum([sum(s) for s in cpu.values()]))
            print(
                f"| {name} | {kind} | all | {args.count:,} | {total:.2f} ({args.count / total:,.0f}/s) | |", flush=True
            )


if __name__ == "__main__":
    main()
