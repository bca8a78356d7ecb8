"""Builds, query batches, queries and listings with edge updates pending, on generated graphs: two source trees
side by side (a change to the kernels' argument types must not slow them).

    python benchmarks/bench_hot_paths.py TREE [TREE ...] [--rounds 5] [--scale 17]

Each round runs every tree once, in turns, in a new process (``PYTHONPATH=TREE``, a numba cache per tree, warm
after the first round, which is left out); a process times each step once, after one untimed run. Prints the
median seconds of each step per tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _graphs(scale: int) -> dict[str, tuple[object, object, int]]:
    import numpy as np

    from benchmarks.generate import rmat_edges

    src, dst = rmat_edges(scale, 8 << scale, seed=1)
    # A deep DAG: levels of 64 nodes, each node with four edges into the next few levels.
    nodes = 1 << scale
    rng = np.random.default_rng(2)
    tail = np.repeat(np.arange(nodes - 256, dtype=np.int64), 4)
    head = tail + 64 + rng.integers(0, 192, tail.size)
    return {"rmat": (src, dst, 1 << scale), "deep": (tail, head, nodes)}


def measure(scale: int) -> dict[str, float]:
    """One untimed and one timed run of each step; seconds by step."""
    import numpy as np

    from grail_core import ReachabilityIndex

    times: dict[str, float] = {}
    rng = np.random.default_rng(3)
    for name, (src, dst, nodes) in _graphs(scale).items():
        pairs = rng.integers(0, nodes, (200_000, 2)).astype(np.int64)
        for timed in (False, True):
            started = time.perf_counter()
            index = ReachabilityIndex.from_edges(src, dst, num_nodes=nodes, backend="cpu", dims=2)
            built = time.perf_counter() - started
            started = time.perf_counter()
            index.query_batch(pairs)
            queried = time.perf_counter() - started
            added = rng.integers(0, nodes, (20, 2)).tolist()
            removed = np.stack([np.asarray(src[:20]), np.asarray(dst[:20])], axis=1).tolist()
            index.update(add=added, remove=removed)
            started = time.perf_counter()
            index.query_batch(pairs[:20_000])
            updated = time.perf_counter() - started
            started = time.perf_counter()
            for node in pairs[:20, 0]:
                index.descendant_ids(int(node))
            listed = time.perf_counter() - started
            if timed:
                times.update(
                    {
                        f"{name} build": built,
                        f"{name} 200k pairs": queried,
                        f"{name} 20k pairs, updates pending": updated,
                        f"{name} 20 descendant listings, updates pending": listed,
                    }
                )
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=int, default=17)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one process's run
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.scale)))
        return 0
    here = Path(__file__).resolve().parent.parent
    results: dict[Path, list[dict[str, float]]] = {tree: [] for tree in args.trees}
    for round_number in range(args.rounds + 1):
        for tree in args.trees:
            environment = dict(os.environ, PYTHONPATH=f"{tree.resolve()}:{here}")
            cache = "-".join(tree.resolve().parts[1:])
            environment["NUMBA_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / f"bench-hot-paths-cache-{cache}")
            command = [sys.executable, __file__, "--measure", "--scale", str(args.scale)]
            run = subprocess.run(command, env=environment, cwd=tree, capture_output=True, text=True, check=True)
            if round_number:  # the first round compiles
                results[tree].append(json.loads(run.stdout.strip().splitlines()[-1]))
    steps = list(next(iter(results.values()))[0])
    print(f"median seconds of {args.rounds} rounds, load average {os.getloadavg()[0]:.1f} at the end")
    print("| step | " + " | ".join(str(tree) for tree in args.trees) + " |")
    print("|---|" + "---:|" * len(args.trees))
    for step in steps:
        medians = [statistics.median(run[step] for run in results[tree]) for tree in args.trees]
        print(f"| {step} | " + " | ".join(f"{value:.3f}" for value in medians) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
