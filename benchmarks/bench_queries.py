"""Index build and query times on every shared dataset, beside GRAIL* d=2 and O'Reach; and queries by node
name beside queries by internal id on generated named graphs.

Usage: python benchmarks/bench_queries.py [--runs 5] [--dims 2] [--graphs a,b] [--backend cpu]
                                          [--section all|datasets|names]
The datasets section prints a markdown table, writes it to benchmarks/results/queries-cpu.md and a chart
(PNG); the names section writes benchmarks/results/names-cpu.md and .csv: a package graph with string names
and an R-MAT graph with sparse integer names, read from edge lists, queried by name (in each input form)
and by internal id on the same pairs; a lookup of 10M pairs of sparse integer names; and the footprint of
an index with one 1 MiB name among 1,001 short ones.
Queries run on all cores (numba threads); O'Reach and GRAIL* figures are single-threaded.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import socket
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    PEERS_NS,
    RESULTS,
    alternating_seconds,
    dataset_graphs,
    datasets_dir,
    geometric_mean,
    grail_reference,
    markdown_table,
    median_seconds,
    write_results,
)
from benchmarks.generate import NAMED_GRAPHS, downward_walk_pairs, rmat_edges, sparse_names
from grail_core import ReachabilityIndex, read_graph
from grail_core.names import NameTokens, intern_integers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dims", type=int, default=2)
    parser.add_argument("--graphs", default="")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--section", choices=("all", "datasets", "names"), default="all")
    args = parser.parse_args()
    if args.section != "datasets":
        names_section(args.runs)
    if args.section != "names":
        datasets_section(args)


def datasets_section(args: argparse.Namespace) -> None:
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


NAMED_PAIRS = 1_000_000


def _inputs(index: ReachabilityIndex, ids: np.ndarray) -> dict[str, object]:
    """The same pairs by name, in the forms query_batch takes."""
    flat = index.names.names_of(ids.ravel())
    if index.names.are_integers:
        return {
            "by name: int64 array": np.array(flat, dtype=np.int64).reshape(-1, 2),
            "by name: decimal text (NameTokens)": NameTokens.from_strings([str(name) for name in flat]),
        }
    return {
        "by name: UTF-8 + offsets (NameTokens)": NameTokens.from_strings(flat),
        "by name: numpy str array": np.array(flat, dtype=str).reshape(-1, 2),
    }


def _by_name_and_by_id(index: ReachabilityIndex, ids: np.ndarray, runs: int) -> list[tuple[str, float]]:
    """(label, median seconds) of query_ids, of query_batch on each input form, and of the lookup alone."""
    truth = index.query_ids(ids)[0]
    inputs = _inputs(index, ids)
    for label, pairs in inputs.items():
        assert np.array_equal(index.query_batch(pairs), truth), f"{label}: wrong answers"
    first_label, first_input = next(iter(inputs.items()))
    functions = [lambda: index.query_ids(ids)]
    functions += [lambda pairs=pairs: index.query_batch(pairs) for pairs in inputs.values()]
    functions.append(lambda: index.names.lookup(first_input))
    labels = ["by internal id: query_ids", *inputs, f"lookup alone ({first_label.removeprefix('by name: ')})"]
    times = [float(np.median(seconds)) for seconds in alternating_seconds(functions, runs)]
    return list(zip(labels, times, strict=True))


def names_section(runs: int) -> None:
    header = ["graph", "pairs", "n", "m", "input", "median s", "x by id"]
    rows: list[list[object]] = []
    rng = np.random.default_rng(0)
    for graph, make_edge_list in NAMED_GRAPHS.values():
        text = make_edge_list()
        started = time.perf_counter()
        parsed = read_graph(text, "edgelist")
        read_seconds = time.perf_counter() - started
        index = ReachabilityIndex.build(parsed, backend="cpu")
        n, m = index.stats.nodes, index.stats.edges
        rows.append([graph, "-", n, m, f"read the edge list ({len(text) >> 20} MiB)", read_seconds, float("nan")])
        csr = index.graph
        walks = np.stack(downward_walk_pairs(csr.out_indptr, csr.out_indices, NAMED_PAIRS), axis=1)
        for kind, ids in (("uniform", rng.integers(0, n, (NAMED_PAIRS, 2))), ("walks", walks)):
            measured = _by_name_and_by_id(index, np.ascontiguousarray(ids, dtype=np.int64), runs)
            for label, seconds in measured:
                rows.append([graph, f"{len(ids):,} {kind}", n, m, label, seconds, seconds / measured[0][1]])
            print(markdown_table(header, rows[-len(measured) :]), flush=True)
    rows += _sparse_lookup(runs)
    footprint = [_long_name_footprint(size, limit) for size, limit in ((4096, 4096), (1 << 20, 1 << 20))]
    machine = (
        f"{platform.processor() or platform.machine()}, {numba.get_num_threads()} numba threads, "
        f"numba {numba.__version__}, median of {runs} runs taken in turns; load average before: {_load}"
    )
    footprint_table = markdown_table(
        ["longest name", "max_name_bytes", "index on disk", "names in the index", "peak RSS above start"],
        footprint,
    )
    report = (
        f"# Queries by name and by internal id ({socket.gethostname()})\n\n{machine}\n\n"
        f"{markdown_table(header, rows)}\n\n## One long name among 1,000 short ones (read, build, save)\n\n"
        f"{footprint_table}\n"
    )
    print(report)
    write_results(RESULTS, "names-cpu", report, header, rows)


_load = " ".join(f"{x:.2f}" for x in os.getloadavg())


def _sparse_lookup(runs: int) -> list[list[object]]:
    """10M pairs of sparse integer names looked up in the names of a 20M-edge graph (interned from its
    40M edge ends, as the edge-list reader does)."""
    src, dst = rmat_edges(23, 20_000_000, seed=1)
    ids = sparse_names(2**23, seed=1)
    ends = np.concatenate([ids[src], ids[dst]])
    started = time.perf_counter()
    names, _ = intern_integers(ends)
    intern_seconds = time.perf_counter() - started
    pairs = ends[np.random.default_rng(1).integers(0, ends.size, (10_000_000, 2))]
    lookup = float(np.median(alternating_seconds([lambda: names.lookup(pairs)], runs)[0]))
    graph = f"20M edges, {names.size:,} sparse integer names"
    return [
        [graph, "-", names.size, 20_000_000, "intern 40M edge ends (the reader's table)", intern_seconds, float("nan")],
        [graph, "10,000,000", names.size, 20_000_000, "lookup alone: int64 array", lookup, float("nan")],
    ]


def _long_name_footprint(size: int, limit: int) -> list[object]:
    """Read, build and save a graph with one name of ``size`` bytes among 1,000 short ones in a fresh process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        disk, names_bytes, rss = pool.apply(_footprint_child, (size, limit))
    return [
        f"{size:,} bytes",
        f"{limit:,}",
        f"{disk / 1e6:.2f} MB",
        f"{names_bytes / 1e6:.2f} MB",
        f"{rss / 1e6:.0f} MB",
    ]


def _footprint_child(size: int, limit: int) -> tuple[int, int, int]:
    names = [f"pkg{i}" for i in range(1000)] + ["x" * size]
    text = "".join(f"{names[i]} {names[i + 1]}\n" for i in range(1000)).encode()
    # The same graph with short names first, so that compiling is not counted; then the peak is reset.
    warm = "".join(f"w{i} w{i + 1}\n" for i in range(1001)).encode()
    with tempfile.TemporaryDirectory() as tmp:
        ReachabilityIndex.from_bytes(warm, format="edgelist", backend="cpu").save(Path(tmp) / "warm")
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_bytes("VmRSS")
        index = ReachabilityIndex.from_bytes(text, format="edgelist", backend="cpu", max_name_bytes=limit)
        index.save(Path(tmp) / "index")
        disk = sum(path.stat().st_size for path in (Path(tmp) / "index").iterdir())
    return disk, index.names.nbytes, _status_bytes("VmHWM") - before


def _status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (VmRSS now, VmHWM the peak since the reset)."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) * 1024


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
