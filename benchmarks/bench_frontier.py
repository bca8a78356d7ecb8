"""The CPU frontier passes of the build: Kahn's levels of a DAG and the strongly connected components.

Usage: python benchmarks/bench_frontier.py [--trees NAME=DIR ...] [--rounds 5] [--out DIR] [--tag NAME]

Times ``condensation.longest_path_levels`` (Kahn's levels: one queue) and ``scc.strongly_connected_components``
(the trim's queue, forward-backward reachability with bottom-up levels, label propagation, the coloring's
backward searches) on generated graphs: a 1M-node chain (a million levels of one node: the serial queue), a
layered DAG of 1M nodes on 10,000 levels, one of 2M nodes on 30 levels (wide levels: the parallel path), an
R-MAT graph of 2^20 nodes and 8M edges with cycles (a giant component, many small ones), and layered graphs
with a share of their edges turned back (``cycles-500k-10k``: 10% of a 500k-node DAG of 10,000 levels;
``cycles-2M-50k``: 5% of a 2M-node one of 50,000: components that span many levels). Beside the components,
serial Tarjan (``scc.tarjan_components``) on the graphs with cycles. ``--trees`` names
source trees to compare (``new=. old=/path/to/an/older/checkout``): each round runs every tree in a fresh
process of its own, in turns, so that a machine that drifts weighs on all alike; each process builds its
kernels first (numba's cache) and times each pass once. Medians over the rounds; writes
``frontier-<tag>.md`` / ``.csv`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, markdown_table, write_results

GRAPHS = ("chain-1M", "layered-1M-10k", "layered-2M-30", "rmat-8M", "cycles-500k-10k", "cycles-2M-50k")
# name -> (nodes, levels, share of the edges turned back)
_WITH_CYCLES = {"cycles-500k-10k": (500_000, 10_000, 0.1), "cycles-2M-50k": (2_000_000, 50_000, 0.05)}

# Run in a fresh process with the tree under test first on its path: times every pass once per graph.
_MEASURE = """
import json, sys, time
import numpy as np
from grail_core.condensation import longest_path_levels
from grail_core.graph import Digraph
from grail_core.scc import strongly_connected_components, tarjan_components

folder, names = sys.argv[1], sys.argv[2].split(",")
seconds = {}
for name in names:
    data = np.load(f"{folder}/{name}.npz")
    graph = Digraph.from_edges(int(data["n"]), data["src"], data["dst"])
    passes = [("scc", lambda: strongly_connected_components(graph))]
    if name.startswith(("chain", "layered")):
        passes.append(("levels", lambda: longest_path_levels(graph)))
    else:
        passes.append(("tarjan", lambda: tarjan_components(graph)))
    for kind, run in passes:
        run()  # loads (or compiles) the kernels
        start = time.perf_counter()
        run()
        seconds[f"{name} {kind}"] = time.perf_counter() - start
print(json.dumps(seconds))
"""


def make_graph(name: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(num_nodes, src, dst) of a named graph."""
    from benchmarks.generate import rmat_edges
    from grail_core.synthetic import layered_dag, with_back_edges

    if name == "chain-1M":
        nodes = np.arange(1_000_000, dtype=np.int32)
        return nodes.size, nodes[:-1].copy(), nodes[1:].copy()
    if name.startswith("rmat"):
        src, dst = rmat_edges(20, 8_000_000, seed=1)
        return 1 << 20, src, dst
    if name in _WITH_CYCLES:
        size, levels, share = _WITH_CYCLES[name]
        indptr, indices = with_back_edges(*layered_dag(size, levels, 3.0, 4), share)
    else:
        size, levels = {"layered-1M-10k": (1_000_000, 10_000), "layered-2M-30": (2_000_000, 30)}[name]
        indptr, indices = layered_dag(size, levels, seed=3)
    return size, np.repeat(np.arange(size, dtype=np.int32), np.diff(indptr)), indices


def measure(tree: Path, folder: Path, graphs: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(folder), ",".join(graphs)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="*", default=[f"this={Path(__file__).resolve().parent.parent}"])
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", default="cpu")
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, path in (tree.split("=", 1) for tree in args.trees)}
    graphs = args.graphs.split(",")
    times: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    with tempfile.TemporaryDirectory(prefix="grail-frontier-") as tmp:
        folder = Path(tmp)
        for graph in graphs:
            n, src, dst = make_graph(graph)
            np.savez(folder / f"{graph}.npz", n=n, src=src, dst=dst)
        for round_ in range(args.rounds):
            for name, tree in trees.items():
                for key, value in measure(tree, folder, graphs).items():
                    times[name].setdefault(key, []).append(value)
            print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    keys = list(next(iter(times.values())))
    names = list(trees)
    header = ["graph", "pass", *(f"{name} ms" for name in names)]
    if len(names) == 2:
        header.append(f"{names[0]} / {names[1]}")
    rows: list[list[object]] = []
    for key in keys:
        graph, kind = key.split(" ")
        medians = [1e3 * statistics.median(times[name][key]) for name in names]
        rows.append([graph, kind, *medians] + ([medians[0] / medians[1]] if len(names) == 2 else []))
    table = markdown_table(header, rows)
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, numba threads: all"
    text = (
        f"# CPU frontier passes ({args.tag})\n\n`python benchmarks/bench_frontier.py {' '.join(sys.argv[1:])}`\n\n"
        f"Median of {args.rounds} rounds, each tree in a fresh process per round; {machine}.\n\n{table}\n"
    )
    print(text)
    write_results(args.out, f"frontier-{args.tag}", text, header, rows)


if __name__ == "__main__":
    main()
