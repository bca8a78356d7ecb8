"""GPU labeling per phase (the thesis's tables 6.1-6.3) beside the CPU labeling, in the same run.

Usage: python benchmarks/bench_gpu_labels.py [--runs 5] [--dims 2] [--graphs a,b] [--generated uniprot_like,...]
       [--scale 1.0] [--out DIR]
For every shared dataset (condensed, plus the virtual root) and every generated graph: the GPU
pipeline's phases (median of ``--runs`` after a warm-up build that compiles the kernels), its total,
``grail_core.labeling.label_all`` on all cores, and whether the labels are identical. Graphs that
the pipeline declines (too deep) show the declined attempt's time and the CPU time the backend uses
instead. Writes ``labels-<device>.md``/``.csv`` and a PNG chart under ``--out``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, dataset_graphs, datasets_dir, markdown_table, write_results
from benchmarks.generate import generate
from grail_core.condensation import condense
from grail_core.graph import Digraph
from grail_core.labeling import label_all, make_child_orders, with_virtual_root
from grail_core.readers import read_graph
from kernels.device import device_name
from kernels.labeling import LabelingDeclined, LabelingOptions, build_labels

FORCED = LabelingOptions(max_levels=4096)  # the phase table runs the GPU even where the backend would not

# The thesis's GPU totals (ms, one dimension, GTX-class GPU): tables 6.1-6.3.
THESIS_TOTAL_MS = {
    "agrocyc_dag_uniq": 285.5,
    "amaze_dag_uniq": 275.0,
    "anthra_dag_uniq": 295.8,
    "ecoo_dag_uniq": 341.0,
    "human_dag_uniq": 319.1,
    "kegg_dag_uniq": 394.5,
    "mtbrv_dag_uniq": 356.1,
    "nasa_dag_uniq": 426.7,
    "vchocyc_dag_uniq": 313.1,
    "citeseer_sub_10720": 405.7,
    "go_sub_6793": 313.8,
    "pubmed_sub_9000-1": 288.2,
    "citeseer.scc": 318.5,
    "uniprotenc_22m.scc": 330.2,
}
PHASES = [
    "transfer",
    "level queues",
    "subgraph sizes DAG",
    "edge offsets",
    "parent SSSP",
    "subgraph sizes DT",
    "post-order",
    "min post-order",
    "check",
    "transfer back",
]


def labeling_graph_of_dataset(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    parsed = read_graph(path)
    dag = condense(Digraph.from_edges(parsed.num_nodes, parsed.src, parsed.dst)).dag
    return with_virtual_root(dag.out_indptr, dag.out_indices)


def measure(name: str, indptr: np.ndarray, indices: np.ndarray, root: int, runs: int, dims: int) -> dict[str, object]:
    orders = make_child_orders(indptr, indices, dims, seed=0)
    expected = label_all(indptr, orders, root)
    cpu_times = []
    for _ in range(runs):
        start = time.perf_counter()
        label_all(indptr, orders, root)
        cpu_times.append(time.perf_counter() - start)
    row: dict[str, object] = {
        "graph": name,
        "nodes": indptr.size - 2,
        "edges": int(indices.size),
        "cpu_ms": statistics.median(cpu_times) * 1e3,
    }
    totals, phases = [], {phase: [] for phase in PHASES}
    built = None
    start = time.perf_counter()
    try:
        build_labels(indptr, orders, root)
        auto = "GPU"
    except LabelingDeclined:
        auto = "CPU"
    decline_ms = (time.perf_counter() - start) * 1e3
    for _ in range(runs + 1):  # the first build compiles the kernels and is not counted
        start = time.perf_counter()
        try:
            built = build_labels(indptr, orders, root, FORCED)
        except LabelingDeclined as declined:
            row.update(
                status=f"declined: {declined}",
                gpu_ms=(time.perf_counter() - start) * 1e3,
                auto="CPU",
                auto_ms=decline_ms + float(row["cpu_ms"]),
            )
            return row
        totals.append(time.perf_counter() - start)
        for phase in PHASES:
            phases[phase].append(built.phase_seconds.get(phase, 0.0))
    same = all(np.array_equal(a, b) for a, b in zip(expected, (built.post, built.minpost, built.tree_low), strict=True))
    row.update(
        status="identical" if same else "DIFFERENT",
        levels=built.levels,
        words=built.words,
        gpu_ms=statistics.median(totals[1:]) * 1e3,
    )
    row["auto"] = auto
    row["auto_ms"] = row["gpu_ms"] if auto == "GPU" else decline_ms + float(row["cpu_ms"])
    for phase in PHASES:
        row[phase] = statistics.median(phases[phase][1:]) * 1e3
    return row


def chart(rows: list[dict[str, object]], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [str(r["graph"]) for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(rows)), 5))
    ax.bar(x - 0.27, [float(r["gpu_ms"]) for r in rows], 0.27, label=f"GPU pipeline ({device})")
    ax.bar(x, [float(r["cpu_ms"]) for r in rows], 0.27, label="CPU label_all (all cores)")
    ax.bar(x + 0.27, [THESIS_TOTAL_MS.get(n, np.nan) for n in names], 0.27, label="thesis GPU (d=1)")
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.legend()
    ax.set_title("GRAIL labeling, d=2: GPU pipeline vs CPU DFS")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dims", type=int, default=2)
    parser.add_argument("--graphs", default=None, help="comma-separated dataset names ('' for none; default: all)")
    parser.add_argument("--generated", default="uniprot_like,citation_like,chain")
    parser.add_argument("--scale", type=float, default=1.0, help="size of the generated graphs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=None, help="folder that keeps generated graphs between runs")
    args = parser.parse_args()
    device = device_name() or "no-gpu"
    rows = []
    folder = datasets_dir()
    if args.graphs is None:
        graphs = dataset_graphs(folder) if folder.is_dir() else []
    else:
        graphs = list(filter(None, args.graphs.split(",")))
    for graph in graphs:
        rows.append(measure(graph, *labeling_graph_of_dataset(folder / f"{graph}.gra"), args.runs, args.dims))
        print(rows[-1], flush=True)
    for name in filter(None, args.generated.split(",")):
        start = time.perf_counter()
        indptr, indices = generate(name, args.scale, args.cache)
        print(f"generated {name} in {time.perf_counter() - start:.1f} s", flush=True)
        rows.append(measure(name, *with_virtual_root(indptr, indices), args.runs, args.dims))
        print(rows[-1], flush=True)
    header = [
        "graph",
        "nodes",
        "edges",
        "levels",
        "words",
        *PHASES,
        "GPU total",
        "auto choice",
        "auto backend",
        "CPU label_all",
        "CPU/GPU total",
        "thesis GPU (d=1)",
        "status",
    ]
    table = [
        [
            r["graph"],
            r["nodes"],
            r["edges"],
            r.get("levels", "-"),
            r.get("words", "-"),
            *[r.get(p, "-") for p in PHASES],
            r["gpu_ms"],
            r["auto"],
            r["auto_ms"],
            r["cpu_ms"],
            float(r["cpu_ms"]) / float(r["gpu_ms"]),
            THESIS_TOTAL_MS.get(str(r["graph"]), "-"),
            r["status"],
        ]
        for r in rows
    ]
    text = (
        f"# GPU labeling on {device}, d={args.dims}, median of {args.runs} (ms)\n\n"
        + markdown_table(header, table)
        + "\n"
    )
    print(text)
    stem = "labels-" + device.replace(" ", "_")
    write_results(args.out, stem, text, header, table)
    chart(rows, args.out / f"{stem}.png", device)


if __name__ == "__main__":
    main()
