"""GPU bitmask search vs the all-core CPU search on the pairs the label filter leaves (tables 6.4-6.6).

Usage: python benchmarks/bench_gpu_search.py [--runs 5] [--graphs a,b] [--generated uniprot_like,citation_like]
       [--pairs 1000000] [--scale 1.0] [--out DIR] [--register-caps 0,64,96,128]
Per shared dataset and query set (.que, .pos.que), and per generated graph with a positive-heavy
batch: CPU filter ms, pairs left to search, GPU search ms, all-core CPU search ms (the two taken in
turns, run by run), their ratio (of the medians, and the lowest and highest of the runs), positives,
the hybrid scheduler's choice and its time, and the thesis's GPU search time (random queries). Every
answer is checked (against the .ans files, or GPU == CPU on generated graphs). Medians of ``--runs``
after a warm-up. Writes ``search-<device>.md``/``.csv`` and a PNG chart under ``--out``; with
``--register-caps``, a second table: the generated batches' GPU search with the kernel compiled
under each register cap (0: the compiler's choice), answers checked against the default's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    RESULTS,
    alternating_seconds,
    dataset_graphs,
    datasets_dir,
    markdown_table,
    median_seconds,
    write_results,
)
from benchmarks.generate import generate, positive_heavy_pairs
from grail_core import backends
from grail_core.condensation import longest_path_levels
from grail_core.graph import Digraph
from grail_core.index import ReachabilityIndex
from grail_core.labeling import make_child_orders, with_virtual_root
from grail_core.query import UNDECIDED, QueryArrays, filter_pairs, pack
from grail_core.readers import read_graph
from grail_core.supportive import choose_hubs, hub_reach_masks
from kernels import search as gpu_search
from kernels.device import device_name
from kernels.labeling import LabelingOptions, build_labels

# The thesis's GPU search times (ms, its own 100k random queries): tables 6.4-6.6.
THESIS_GPU_MS = {
    "agrocyc_dag_uniq": 23.8,
    "amaze_dag_uniq": 773.0,
    "anthra_dag_uniq": 21.5,
    "ecoo_dag_uniq": 68.5,
    "human_dag_uniq": 16.1,
    "kegg_dag_uniq": 1347.2,
    "mtbrv_dag_uniq": 42.3,
    "nasa_dag_uniq": 221.5,
    "vchocyc_dag_uniq": 32.1,
    "citeseer_sub_10720": 1559.3,
    "go_sub_6793": 324.0,
    "pubmed_sub_9000-1": 757.6,
    "citeseer.scc": 221.4,
    "uniprotenc_22m.scc": 5709.4,
}


def measure(
    name: str, kind: str, arrays: QueryArrays, hot: object, ids: np.ndarray, truth: np.ndarray | None, runs: int
) -> dict[str, object]:
    codes = filter_pairs(hot, ids)  # also the warm-up (compilation) of the filter
    filter_s = median_seconds(lambda: filter_pairs(hot, ids), runs)
    undecided = np.flatnonzero(codes == UNDECIDED)
    s = np.ascontiguousarray(arrays.comp[ids[undecided, 0]])
    t = np.ascontiguousarray(arrays.comp[ids[undecided, 1]])
    row: dict[str, object] = {
        "graph": name,
        "queries": kind,
        "pairs": int(ids.shape[0]),
        "filter_ms": filter_s * 1e3,
        "searched": int(undecided.size),
    }
    start = time.perf_counter()
    gpu, first = gpu_search.search_pairs_with_stats(hot, s, t)
    print(
        f"  {name}.{kind}: filter {filter_s * 1e3:.1f} ms, {undecided.size} searched; first GPU call "
        f"{time.perf_counter() - start:.2f} s ({first})",
        flush=True,
    )
    start = time.perf_counter()
    cpu = backends.search_pairs("cpu", arrays, hot, s, t)[0]
    print(f"  first CPU call {time.perf_counter() - start:.2f} s", flush=True)
    if truth is not None:
        assert (gpu == truth[undecided]).all(), f"GPU answers differ from the .ans file on {name}.{kind}"
    row["cpu_agrees"] = int((gpu == cpu).sum()) == gpu.size
    gpu_s, cpu_s = alternating_seconds(
        [
            lambda: backends.search_pairs("cuda", arrays, hot, s, t),
            lambda: backends.search_pairs("cpu", arrays, hot, s, t),
        ],
        runs,
    )
    stats = gpu_search.search_pairs_with_stats(hot, s, t)[1]
    row["passes"], row["words"] = stats.passes, stats.words
    row["gpu_ms"], row["cpu_ms"] = np.median(gpu_s) * 1e3, np.median(cpu_s) * 1e3
    ratios = np.array(cpu_s) / np.array(gpu_s)
    row["ratio_range"] = f"{ratios.min():.2g}-{ratios.max():.2g}"
    answers = codes == 1
    answers[undecided] = gpu
    row["positives"] = int(answers.sum())
    # Both engines have now been timed through backends, so this is the scheduler's settled choice.
    choice = backends.choose_search_backend(int(undecided.size), arrays) if undecided.size else "none"
    row["hybrid"] = choice
    row["hybrid_ms"] = {"cuda": row["gpu_ms"], "cpu": row["cpu_ms"]}.get(choice, 0.0)
    row["thesis_gpu_ms"] = THESIS_GPU_MS.get(name, float("nan")) if kind == "que" else float("nan")
    return row


def dataset_rows(folder: Path, graph: str, runs: int) -> list[dict[str, object]]:
    index = ReachabilityIndex.build(read_graph(folder / f"{graph}.gra"), dims=2, backend="cpu")
    rows = []
    for kind in ("que", "pos.que"):
        pairs = np.loadtxt(folder / f"{graph}.{kind}", dtype=np.int64, ndmin=2)
        truth = np.loadtxt(folder / f"{graph}.{kind.replace('que', 'ans')}", dtype=np.int64).astype(bool)
        rows.append(measure(graph, kind, index.arrays, index.hot, index.names.lookup(pairs), truth, runs))
        print(rows[-1], flush=True)
    return rows


def generated_arrays(name: str, scale: float, cache: Path | None) -> QueryArrays:
    """Index arrays of a generated DAG (ids are already topological, so no condensation is needed)."""
    indptr, indices = generate(name, scale, cache)
    dag = Digraph.from_csr(indptr, indices)
    root_indptr, root_indices, root = with_virtual_root(indptr, indices)
    labels = build_labels(
        root_indptr, make_child_orders(root_indptr, root_indices, 2, seed=0), root, LabelingOptions(max_levels=4096)
    )
    n = indptr.size - 1
    fwd, bwd = hub_reach_masks(dag, choose_hubs(dag))
    return QueryArrays(
        comp=np.arange(n, dtype=np.int64),
        out_indptr=indptr,
        out_indices=indices,
        level=longest_path_levels(dag),
        lo=np.ascontiguousarray(labels.minpost[:, :n].T),
        hi=np.ascontiguousarray(labels.post[:, :n].T),
        tree_lo=np.ascontiguousarray(labels.tree_low[:, :n].T),
        fwd=fwd,
        bwd=bwd,
    )


def register_cap_rows(name: str, hot: object, ids: np.ndarray, caps: list[int], runs: int) -> list[list[object]]:
    """GPU search ms of a batch's undecided pairs per register cap of the search kernel."""
    undecided = np.flatnonzero(filter_pairs(hot, ids) == UNDECIDED)
    s, t = (np.ascontiguousarray(hot.rec_node[ids[undecided, k], 0]).astype(np.int32) for k in (0, 1))
    expected = gpu_search.search_pairs(hot, s, t)
    rows = []
    for cap in caps:
        options = gpu_search.SearchOptions(max_registers=cap)
        agrees = bool((gpu_search.search_pairs(hot, s, t, options) == expected).all())
        ms = median_seconds(lambda options=options: gpu_search.search_pairs(hot, s, t, options), runs) * 1e3
        rows.append([name, cap or "none", ms, agrees])
        print(rows[-1], flush=True)
    return rows


def chart(rows: list[dict[str, object]], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f"{r['graph']}.{r['queries']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(rows)), 5))
    ax.bar(x - 0.27, [max(float(r["gpu_ms"]), 1e-3) for r in rows], 0.27, label=f"GPU bitmask search ({device})")
    ax.bar(
        x, [max(float(r["cpu_ms"]), 1e-3) for r in rows], 0.27, label=f"CPU search, {numba.get_num_threads()} threads"
    )
    ax.bar(x + 0.27, [float(r["thesis_gpu_ms"]) for r in rows], 0.27, label="thesis GPU search")
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.set_xticks(x, names, rotation=70, ha="right", fontsize=7)
    ax.legend()
    ax.set_title("Search of the pairs the label filter leaves undecided")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--graphs", default=None, help="comma-separated dataset names ('' for none; default: all)")
    parser.add_argument("--generated", default="uniprot_like,citation_like")
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=None, help="folder that keeps generated graphs between runs")
    parser.add_argument("--register-caps", default="", help="comma-separated register caps to compare (0: none)")
    args = parser.parse_args()
    caps = [int(cap) for cap in filter(None, args.register_caps.split(","))]
    device = device_name() or "no-gpu"
    folder = datasets_dir()
    if args.graphs is None:
        graphs = dataset_graphs(folder) if folder.is_dir() else []
    else:
        graphs = list(filter(None, args.graphs.split(",")))
    rows = []
    cap_rows: list[list[object]] = []
    for graph in graphs:
        rows += dataset_rows(folder, graph, args.runs)
    for name in filter(None, args.generated.split(",")):
        start = time.perf_counter()
        arrays = generated_arrays(name, args.scale, args.cache)
        print(f"indexed {name} in {time.perf_counter() - start:.1f} s", flush=True)
        src, dst = positive_heavy_pairs(arrays.out_indptr, arrays.out_indices, args.pairs)
        hot, ids = pack(arrays), np.stack([src, dst], axis=1)
        rows.append(measure(name, f"{args.pairs} pos-heavy", arrays, hot, ids, None, args.runs))
        print(rows[-1], flush=True)
        if caps:
            cap_rows += register_cap_rows(name, hot, ids, caps, args.runs)
    header = [
        "graph",
        "queries",
        "pairs",
        "CPU filter",
        "searched",
        "GPU passes x words",
        "GPU search",
        f"CPU search ({numba.get_num_threads()} thr)",
        "CPU/GPU",
        "CPU/GPU per run",
        "CPU agrees",
        "positives",
        "hybrid",
        "hybrid ms",
        "thesis GPU",
        "thesis/GPU",
    ]
    table = [
        [
            r["graph"],
            r["queries"],
            r["pairs"],
            r["filter_ms"],
            r["searched"],
            f"{r['passes']} x {r['words']}",
            r["gpu_ms"],
            r["cpu_ms"],
            float(r["cpu_ms"]) / max(float(r["gpu_ms"]), 1e-9),
            r["ratio_range"],
            r["cpu_agrees"],
            r["positives"],
            r["hybrid"],
            r["hybrid_ms"],
            r["thesis_gpu_ms"],
            float(r["thesis_gpu_ms"]) / max(float(r["gpu_ms"]), 1e-9),
        ]
        for r in rows
    ]
    text = f"# Search on {device}, times in ms (median of {args.runs})\n\n" + markdown_table(header, table) + "\n"
    if cap_rows:
        text += (
            "\n## GPU search by register cap of the search kernel (ms)\n\n"
            + markdown_table(["graph", "max registers", "GPU search", "same answers"], cap_rows)
            + "\n"
        )
    print(text)
    stem = "search-" + device.replace(" ", "_")
    write_results(args.out, stem, text, header, table)
    chart(rows, args.out / f"{stem}.png", device)


if __name__ == "__main__":
    main()
