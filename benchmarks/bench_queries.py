"""Index build and query times on every shared dataset, beside GRAIL* d=2 and O'Reach.

Usage: python benchmarks/bench_queries.py [--runs 5] [--dims 2] [--graphs a,b] [--backend cpu]
Prints a markdown table, writes it to benchmarks/results/queries-<host>.md and a chart (PNG).
Queries run on all cores (numba threads); O'Reach and GRAIL* figures are single-threaded.
"""

from __future__ import annotations

import argparse
import platform
import socket
import sys

import numba
import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    PEERS_NS,
    RESULTS,
    dataset_graphs,
    datasets_dir,
    geometric_mean,
    grail_reference,
    markdown_table,
    median_seconds,
)
from grail_core import ReachabilityIndex, read_graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dims", type=int, default=2)
    parser.add_argument("--graphs", default="")
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    folder = datasets_dir()
    if not folder.is_dir():
        print(f"datasets folder {folder} is absent; nothing to measure")
        return
    graphs = args.graphs.split(",") if args.graphs else dataset_graphs(folder)
    reference = grail_reference(folder)
    warm = ReachabilityIndex.from_edges(np.array([[0, 1], [1, 2]]), backend=args.backend)
    warm.query_batch(np.array([[0, 2]] * 10))
    rows, ratios = [], {"que": ([], []), "pos.que": ([], [])}
    chart = []
    for graph in graphs:
        parsed = read_graph(folder / f"{graph}.gra")
        indexes = []
        build = median_seconds(
            lambda indexes=indexes, parsed=parsed: indexes.append(
                ReachabilityIndex.build(parsed, dims=args.dims, backend=args.backend)
            ),
            args.runs,
        )
        index = indexes[-1]
        label_ms = np.median([i.stats.phase_seconds["labels"] for i in indexes]) * 1e3
        hubs_ms = np.median([i.stats.phase_seconds["hubs"] for i in indexes]) * 1e3
        for kind in ("que", "pos.que"):
            pairs = np.loadtxt(folder / f"{graph}.{kind}", dtype=np.int64, ndmin=2)
            truth = np.loadtxt(folder / f"{graph}.{kind.replace('que', 'ans')}", dtype=np.int64).astype(bool)
            answers, stats = index.query_batch_with_stats(pairs)
            assert (answers == truth).all(), f"wrong answers on {graph}.{kind}"
            query = median_seconds(lambda index=index, pairs=pairs: index.query_batch(pairs), args.runs)
            ns = query * 1e9 / len(pairs)
            grail_index_ms, grail_query_ms = reference.get((graph, kind), (float("nan"), float("nan")))
            grail_ns = grail_query_ms * 1e6 / len(pairs)
            oreach_ns = PEERS_NS.get(graph, ((float("nan"),) * 2,) * 2)[0][0 if kind == "que" else 1]
            ratios[kind][0].append(ns / oreach_ns)
            ratios[kind][1].append(ns / grail_ns)
            chart.append((f"{graph}.{kind}", ns, oreach_ns, grail_ns))
            rows.append(
                [
                    graph,
                    kind,
                    index.stats.nodes,
                    index.stats.edges,
                    build * 1e3,
                    label_ms,
                    hubs_ms,
                    grail_index_ms,
                    label_ms / grail_index_ms,
                    query * 1e3,
                    ns,
                    stats.searched,
                    int(answers.sum()),
                    grail_ns,
                    oreach_ns,
                    ns / grail_ns,
                    ns / oreach_ns,
                ]
            )
    header = [
        "graph",
        "set",
        "n",
        "m",
        "build ms",
        "labels ms",
        "hubs ms",
        "GRAIL* index ms",
        "labels/GRAIL*",
        "query ms",
        "ns/query",
        "searched",
        "positives",
        "GRAIL* ns",
        "O'Reach ns",
        "vs GRAIL*",
        "vs O'Reach",
    ]
    table = markdown_table(header, rows)
    summary = "\n".join(
        f"- geometric mean ratio on `{kind}` sets: {geometric_mean(ratios[kind][0]):.2f}x O'Reach, "
        f"{geometric_mean(ratios[kind][1]):.2f}x GRAIL* d=2 (below 1 is faster)"
        for kind in ratios
    )
    geo = {kind: geometric_mean([row[10] for row in rows if row[1] == kind]) for kind in ratios}
    summary += "\n" + "\n".join(f"- geometric mean ns/query on `{kind}`: {geo[kind]:.1f}" for kind in geo)
    machine = (
        f"{platform.processor() or platform.machine()}, {numba.get_num_threads()} numba threads, "
        f"numba {numba.__version__}, dims={args.dims}, backend={args.backend}, median of {args.runs} runs"
    )
    report = f"# Query and build benchmark ({socket.gethostname()})\n\n{machine}\n\n{table}\n\n{summary}\n"
    print(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "queries-cpu.md").write_text(report)
    _plot(chart, RESULTS / "queries-cpu.png")


def _plot(chart: list[tuple[str, float, float, float]], path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed; no chart")
        return
    labels = [c[0] for c in chart]
    x = np.arange(len(chart))
    fig, ax = plt.subplots(figsize=(max(10, len(chart) * 0.45), 5))
    for offset, column, name in ((-0.27, 1, "grail (this project)"), (0, 2, "O'Reach+pDFS"), (0.27, 3, "GRAIL* d=2")):
        ax.bar(x + offset, [c[column] for c in chart], width=0.27, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("ns per query")
    ax.set_xticks(x, labels, rotation=75, ha="right", fontsize=7)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"chart saved to {path}")


if __name__ == "__main__":
    main()
