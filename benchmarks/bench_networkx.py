"""``nx.has_path`` through the grail backend against networkx's own, on generated graphs.

For each graph (an R-MAT graph with cycles and integer names, a deep layered DAG with string names), networkx
graphs built from the edges (nodes: those with an edge): 100,000 uniformly random node pairs, one call each.
``nx.has_path(G, u, v, backend="grail")``: the first call converts G and builds the index, included in the
time (the graph's cache is cleared before each run, so every run builds again); networkx's
``nx.has_path(G, u, v)`` (a bidirectional BFS per pair) on the same pairs, in turns with grail's runs, within a
time budget per graph that its runs share: the pairs it answered are timed and compared with grail's answers,
and its time for all pairs is projected at its rate when the budget ran out first (the table says so).
"batch s": the same pairs as one ``ReachabilityIndex.query_ids`` call on the built index, to show what the
per-call dispatch costs.

    .venv/bin/python -m benchmarks.bench_networkx [--pairs 100000] [--budget 90] [--runs 3] [--scale 1.0]

Writes benchmarks/results/networkx.md and .csv.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from benchmarks.common import RESULTS, markdown_table, median_seconds, write_results
from benchmarks.generate import layered_dag, rmat_edges
from grail_core.nx_backend import BACKEND_NAME
from grail_core.nx_backend.interface import backend_interface
from grail_core.warmup import warm_up

HEADER = [
    "graph",
    "nodes",
    "edges",
    "pairs",
    "reachable %",
    "grail build s",
    "grail queries s",
    "grail total s",
    "grail us/call",
    "batch s",
    "networkx pairs timed",
    "networkx s (timed)",
    "networkx us/call",
    "networkx s (all pairs)",
    "speedup",
    "answers equal",
]


def rmat_graph(scale: float) -> tuple[str, Any]:
    edges = int(1_000_000 * scale)
    src, dst = rmat_edges(max(2, int(np.log2(edges / 4))), edges, seed=1)
    graph = nx.DiGraph()
    graph.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    return f"R-MAT, {edges:,} edges drawn (cycles, self loops, repeats), integer names", graph


def deep_dag_graph(scale: float) -> tuple[str, Any]:
    nodes, levels = int(250_000 * scale), 2_500
    indptr, indices = layered_dag(nodes, levels)
    names = np.array([f"n{i}" for i in range(nodes)], dtype=object)
    src = np.repeat(np.arange(nodes), np.diff(indptr))
    graph = nx.DiGraph()
    graph.add_edges_from(zip(names[src].tolist(), names[indices].tolist(), strict=True))
    return f"layered DAG, {levels:,} levels, string names", graph


GRAPHS: list[Callable[[float], tuple[str, Any]]] = [rmat_graph, deep_dag_graph]


def grail_run(graph: Any, pairs: list[tuple[Any, Any]]) -> tuple[float, float, list[bool]]:
    """(seconds of the first call, which builds the index; seconds of all calls; answers)."""
    graph.__networkx_cache__.clear()
    start = time.perf_counter()
    answers = [nx.has_path(graph, *pairs[0], backend=BACKEND_NAME)]
    first = time.perf_counter() - start
    answers += [nx.has_path(graph, u, v, backend=BACKEND_NAME) for u, v in pairs[1:]]
    return first, time.perf_counter() - start, answers


def networkx_run(graph: Any, pairs: list[tuple[Any, Any]], budget: float) -> tuple[float, list[bool]]:
    """(seconds, answers) of networkx's has_path on the pairs in order, until ``budget`` seconds are spent."""
    answers = []
    start = time.perf_counter()
    for u, v in pairs:
        answers.append(nx.has_path(graph, u, v))
        if time.perf_counter() - start > budget:
            break
    return time.perf_counter() - start, answers


def measure(label: str, graph: Any, count: int, budget: float, runs: int) -> list[object]:
    nodes = np.fromiter(graph, dtype=object, count=graph.number_of_nodes())
    rng = np.random.default_rng(7)
    ends = nodes[rng.integers(0, nodes.size, (count, 2))].tolist()
    pairs = [(u, v) for u, v in ends]
    grail, networkx = [], []
    for _ in range(runs):  # in turns, so that a change of load weighs on both
        grail.append(grail_run(graph, pairs))
        networkx.append(networkx_run(graph, pairs, budget / runs))
    build = statistics.median(first for first, _, _ in grail)
    total = statistics.median(seconds for _, seconds, _ in grail)
    answers = grail[0][2]
    timed = min(len(nx_answers) for _, nx_answers in networkx)
    nx_answers = networkx[0][1][:timed]
    nx_seconds = statistics.median(seconds * timed / len(answered) for seconds, answered in networkx)
    indexed = backend_interface.convert_from_nx(graph).indexed()
    ids = np.array([[indexed.ids[u], indexed.ids[v]] for u, v in pairs], dtype=np.int64)
    assert indexed.reachability is not None
    batch_seconds = median_seconds(lambda: indexed.reachability.query_ids(ids), runs)
    assert indexed.reachability.query_ids(ids)[0].tolist() == answers
    nx_all = nx_seconds * count / timed
    row: list[object] = [
        label,
        graph.number_of_nodes(),
        graph.number_of_edges(),
        count,
        round(100 * sum(answers) / count, 1),
        build,
        total - build,
        total,
        1e6 * (total - build) / (count - 1),
        batch_seconds,
        timed,
        nx_seconds,
        1e6 * nx_seconds / timed,
        f"{nx_all:.1f}" + ("" if timed == count else " (projected)"),
        f"{nx_all / total:.0f}x",
        nx_answers == answers[:timed],
    ]
    print(markdown_table(HEADER, [row]).splitlines()[-1], flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=90.0, help="seconds networkx gets per graph, all runs")
    parser.add_argument("--runs", type=int, default=3, help="runs per graph (medians)")
    parser.add_argument("--scale", type=float, default=1.0, help="times the default graph sizes")
    parser.add_argument("--stem", default="networkx")
    args = parser.parse_args()
    nx.config.warnings_to_ignore.add("cache")  # the reuse of the cached index is what is measured
    warm_up()  # numba's kernels compiled or loaded before any timing
    load_before = os.getloadavg()
    rows = []
    for make in GRAPHS:
        label, graph = make(args.scale)
        rows.append(measure(label, graph, args.pairs, args.budget, args.runs))
    load_after = os.getloadavg()
    command = " ".join(["benchmarks/bench_networkx.py", f"--pairs {args.pairs}", f"--budget {args.budget:g}"])
    command += f" --runs {args.runs} --scale {args.scale:g}"
    text = "\n\n".join(
        [
            "# nx.has_path through the grail backend against networkx's own",
            f"`{command}`",
            f"{platform.machine()}, {os.cpu_count()} cores, networkx {nx.__version__}, Python "
            f"{platform.python_version()}; medians of {args.runs} runs, grail's and networkx's in turns; each grail "
            f"run builds the index on its first call; networkx's runs share a {args.budget:g} s budget per graph; "
            "load average before: "
            f"{' '.join(f'{x:.2f}' for x in load_before)}, after: {' '.join(f'{x:.2f}' for x in load_after)}",
            "grail build s: the first call (conversion of G and the index build); grail queries s: the other calls, "
            'one `nx.has_path(G, u, v, backend="grail")` each; batch s: the same pairs as one '
            "`ReachabilityIndex.query_ids` call; networkx s (all pairs): measured, or projected at its rate over the "
            "pairs timed; speedup: that over grail total s; answers equal: on the pairs networkx answered.",
            markdown_table(HEADER, rows),
        ]
    )
    print(text)
    write_results(RESULTS, args.stem, text + "\n", HEADER, rows)


if __name__ == "__main__":
    main()
