"""Index builds from integer edge arrays: per-phase times, peak memory and the backend of every phase.

Usage: python benchmarks/bench_build.py [--graphs rmat-10M,rmat-50M,...] [--backends cpu,cuda] [--runs 3]
       [--dims 2] [--cache DIR] [--out DIR] [--tag NAME]

Graphs: ``rmat-<edges>`` (R-MAT with cycles, self loops and duplicates, ~6 edges a node;
``benchmarks.generate.rmat_edges``), ``uniprot_like`` and ``citation_like`` (``benchmarks.generate``,
``@<scale>`` for a fraction of their size, edges in random order), ``chain-<nodes>`` and ``cycle-<nodes>``.
Each graph's builds on one backend run in a fresh process that loads the edge arrays, warms the kernels
up (``grail_core.warmup``: numba's cache for the CPU kernels; the GPU's engine kernels are compiled, which
numba cannot cache) and times ``ReachabilityIndex.from_edges`` to a ready index ``--runs`` times; its peak
RSS (``ru_maxrss``) is the builds' own (the same build repeated, its memory freed in between). In the same
run, in turns with the builds (per graph: the sort, the CPU, the GPU), another fresh process times numpy's
sort of the same edges as int64 keys (``src * n + dst``): the reference the targets are stated against.
Writes ``build-<tag>.md`` / ``.csv`` and ``build-<tag>.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, markdown_table, write_results

DEFAULT_GRAPHS = "rmat-10M,rmat-50M,rmat-200M,uniprot_like,citation_like,chain-1M,cycle-1M"
SORT = "numpy-sort"
_UNITS = {"K": 10**3, "M": 10**6, "G": 10**9}


def _count(text: str) -> int:
    return int(float(text[:-1]) * _UNITS[text[-1]]) if text[-1] in _UNITS else int(text)


def make_graph(name: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(num_nodes, src, dst) of a named benchmark graph."""
    from benchmarks.generate import generate, rmat_edges

    kind, _, size = name.partition("-")
    if kind == "rmat":
        edges = _count(size)
        scale = max(4, round(np.log2(edges / 6)))
        src, dst = rmat_edges(scale, edges, seed=1)
        return 1 << scale, src, dst
    if kind in ("chain", "cycle"):
        n = _count(size)
        nodes = np.arange(n, dtype=np.int32)
        if kind == "chain":
            return n, nodes[:-1].copy(), nodes[1:].copy()
        return n, nodes, np.roll(nodes, -1)
    base, _, scale = name.partition("@")
    indptr, indices = generate(base, float(scale or 1.0))
    n = indptr.size - 1
    src = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))
    order = np.random.default_rng(2).permutation(src.size)
    return n, src[order], indices[order].astype(np.int32)


def cached_graph(name: str, cache: Path) -> Path:
    """The graph's edge arrays as ``<name>.npz``-like .npy files in ``cache`` (generated once)."""
    folder = cache / name
    if not (folder / "dst.npy").exists():
        start = time.perf_counter()
        n, src, dst = make_graph(name)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "src.npy", src)
        np.save(folder / "dst.npy", dst)
        (folder / "nodes.txt").write_text(str(n))
        print(f"generated {name}: {n} nodes, {src.size} edges in {time.perf_counter() - start:.1f} s", flush=True)
    return folder


def _load(folder: Path) -> tuple[int, np.ndarray, np.ndarray]:
    return int((folder / "nodes.txt").read_text()), np.load(folder / "src.npy"), np.load(folder / "dst.npy")


def child(folder: Path, mode: str, dims: int, runs: int) -> list[dict[str, object]]:
    """``runs`` measurements in this (fresh) process: the numpy sort, or builds on ``mode``'s backend."""
    n, src, dst = _load(folder)
    if mode == SORT:
        keys = src.astype(np.int64) * n + dst
        results = []
        for _ in range(runs):
            start = time.perf_counter()
            np.sort(keys)
            results.append({"seconds": time.perf_counter() - start})
        return results
    from grail_core import ReachabilityIndex
    from grail_core.warmup import warm_up

    warm_seconds = warm_up(mode)
    results = []
    for _ in range(runs):
        start = time.perf_counter()
        index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend=mode, dims=dims)
        seconds = time.perf_counter() - start
        stats = index.stats
        del index
        results.append(
            {
                "seconds": seconds,
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "warm_up": warm_seconds,
                "phases": {k: v for k, v in stats.phase_seconds.items() if "." not in k},
                "parts": {k: v for k, v in stats.phase_seconds.items() if "." in k},
                "backends": dict(stats.phase_backends),
                "edges": stats.edges,
                "dag_nodes": stats.dag_nodes,
                "dag_edges": stats.dag_edges,
                "levels": stats.levels,
            }
        )
    return results


def run_child(folder: Path, mode: str, dims: int, runs: int) -> list[dict[str, object]]:
    command = [sys.executable, __file__, "--child", str(folder), mode, "--dims", str(dims), "--runs", str(runs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{folder.name} {mode} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def chart(rows: list[dict[str, object]], phases: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['graph']}\n{r['backend']}" for r in rows]
    x = np.arange(len(rows))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.8 * len(rows)), 8), sharex=True)
    base = np.zeros(len(rows))
    for phase in phases:
        values = np.array([float(r["phases"].get(phase, 0.0)) for r in rows])
        top.bar(x, values, bottom=base, label=phase)
        base += values
    top.scatter(x, [float(r["sort"]) for r in rows], marker="_", s=400, color="black", label="numpy sort of the keys")
    top.set_ylabel("seconds (median)")
    top.set_yscale("log")
    top.legend(fontsize=7, ncol=3)
    top.set_title(title)
    bottom.bar(x, [float(r["bytes_per_edge"]) for r in rows])
    bottom.axhline(40, color="red", linestyle="--", label="target: 40 bytes/edge")
    bottom.set_ylabel("peak RSS, bytes per edge")
    bottom.legend(fontsize=7)
    bottom.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(rows: list[dict[str, object]], args: argparse.Namespace, title: str, stem: str, load: tuple) -> None:
    """Prints and saves the table (markdown, CSV) and the chart of the rows measured so far."""
    phase_names = list(dict.fromkeys(p for r in rows for p in r["phases"]))
    header = [
        "graph",
        "backend",
        "edges in",
        "edges",
        "DAG nodes",
        "DAG edges",
        "levels",
        *[f"{p} s" for p in phase_names],
        "build s",
        "runs s",
        "numpy sort s",
        "build / sort",
        "peak RSS GB",
        "bytes/edge",
        "backend per phase",
        "warm-up s",
        "parts s",
    ]
    table = [
        [
            r["graph"],
            r["backend"],
            r["edges_in"],
            r["edges"],
            r["dag_nodes"],
            r["dag_edges"],
            r["levels"],
            *[r["phases"].get(p, "-") for p in phase_names],
            r["seconds"],
            " ".join(map(str, r["runs"])),
            r["sort"],
            r["seconds"] / r["sort"],
            r["peak_rss"] / 1e9,
            r["bytes_per_edge"],
            " ".join(f"{p}:{b}" for p, b in r["backends"].items()),
            r["warm_up"],
            " ".join(f"{p}={v:.3g}" for p, v in r["parts"].items()),
        ]
        for r in rows
    ]
    text = (
        f"# {title}\n\nMedian of {args.runs} runs; each graph's builds on a backend in a fresh process (peak RSS "
        f"the builds' own), the numpy sort of the same int64 edge keys in turns in the same run (module "
        f"docstring of benchmarks/bench_build.py). Load average at the start: "
        f"{load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.\n\n" + markdown_table(header, table) + "\n"
    )
    print(text, flush=True)
    write_results(args.out, stem, text, header, table)
    chart(rows, phase_names, args.out / f"{stem}.png", title)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--backends", default="cpu,cuda", help="cuda is skipped where there is no GPU")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dims", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/grail-bench-build"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", default=None, help="name of the result files (default: host and threads)")
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), args.child[1], args.dims, args.runs)), flush=True)
        return

    from grail_core import cuda_available, device_name

    backends = [b for b in args.backends.split(",") if b and (b != "cuda" or cuda_available())]
    threads = len(os.sched_getaffinity(0))
    device = device_name() or "no GPU"
    tag = args.tag or f"{platform.node() or 'host'}-{threads}threads".replace(" ", "_")
    load = os.getloadavg()
    title = f"Index builds from edge arrays, {threads} CPU threads, GPU: {device}, dims={args.dims}"
    rows = []
    for name in filter(None, args.graphs.split(",")):
        folder = cached_graph(name, args.cache)
        results: dict[str, list[dict[str, object]]] = {}
        for mode in [SORT, *backends]:
            results[mode] = run_child(folder, mode, args.dims, args.runs)
            print(f"{name} {mode}: " + " ".join(f"{r['seconds']:.3f}" for r in results[mode]) + " s", flush=True)
        sort = statistics.median(r["seconds"] for r in results[SORT])
        for backend in backends:
            runs = results[backend]
            last = runs[-1]
            phases = {p: statistics.median(r["phases"].get(p, 0.0) for r in runs) for p in last["phases"]}
            parts = {p: statistics.median(r["parts"].get(p, 0.0) for r in runs) for p in last["parts"]}
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = statistics.median(r["peak_rss"] for r in runs)
            rows.append(
                {
                    "graph": name,
                    "backend": backend,
                    "edges_in": int(np.load(folder / "src.npy", mmap_mode="r").size),
                    "edges": last["edges"],
                    "dag_nodes": last["dag_nodes"],
                    "dag_edges": last["dag_edges"],
                    "levels": last["levels"],
                    "seconds": seconds,
                    "runs": [round(float(r["seconds"]), 3) for r in runs],
                    "sort": sort,
                    "phases": phases,
                    "parts": parts,
                    "backends": last["backends"],
                    "peak_rss": peak,
                    "bytes_per_edge": peak / max(1, int(np.load(folder / "src.npy", mmap_mode="r").size)),
                    "warm_up": statistics.median(r["warm_up"] for r in runs),
                }
            )
            print(rows[-1], flush=True)
        # Saved after every graph, so that a run cut short keeps what it measured.
        report(rows, args, title, f"build-{tag}", load)


if __name__ == "__main__":
    main()
