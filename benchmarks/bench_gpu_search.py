"""GPU search (both modes) vs the all-core CPU search vs the hybrid scheduler, on the pairs the label filter leaves.

Usage: python benchmarks/bench_gpu_search.py [--runs 5] [--graphs a,b] [--generated uniprot_like,...]
       [--batches walk,random] [--pairs 1000000] [--scale 1.0] [--cache DIR] [--out DIR] [--register-caps 64,80]
Per shared dataset and query set (.que, .pos.que), and per generated graph (benchmarks/generate.py: shallow,
3,000 and 340,000 levels, R-MAT with cycles) with a batch of downward-walk pairs (80% reachable) and one
of uniform pairs: the filter, then the undecided pairs searched by the GPU's levels sweep, its frontier
queue, the CPU search (all threads) and the hybrid scheduler (probe + cost model + the engine it picks),
taken in turns within each run; medians of ``--runs`` after a warm-up. A way slower than
``SLOW_SECONDS`` in its warm-up is timed once. "hybrid / faster" is the hybrid's median over the fastest
of the three engines' medians (target: at most 1.1). With several GPUs, the GPU search split over all of
them is timed too ("GPUs split", against one GPU). Every answer is checked (the .ans files, or all engines
equal). The machine's cost model is fitted or read first, as the service does at its start
(``grail_core.search.start_calibration``), and printed. The first batch of each generated graph is also
run through the hybrid right after the engines are made (the index still on its way to the device), as a
user's first batch after a load is. Writes
``search-<device>.md``/``.csv`` and a PNG chart under ``--out``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, dataset_graphs, datasets_dir, markdown_table, write_results
from benchmarks.generate import DAGS, downward_walk_pairs, generate
from grail_core.condensation import longest_path_levels
from grail_core.engines import CpuEngine, SplitEngine
from grail_core.graph import Digraph
from grail_core.index import ReachabilityIndex
from grail_core.labeling import label_all, make_child_orders, with_virtual_root
from grail_core.query import UNDECIDED, HotArrays, QueryArrays, filter_pairs, pack
from grail_core.readers import read_graph
from grail_core.records import ID
from grail_core.scheduler import Scheduler, machine_model
from grail_core.search import start_calibration
from grail_core.supportive import choose_hubs, hub_reach_masks
from kernels.device import device_name, devices
from kernels.labeling import LabelingDeclined, LabelingOptions, build_labels
from kernels.search import CudaSearchEngine, SearchOptions

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
# A way whose warm-up takes longer than this is timed once, not --runs times (the levels sweep of a
# 340,000-level DAG takes seconds a call).
SLOW_SECONDS = 2.0


class Engines:
    """One graph's engines: the CPU's, one GPU engine per device (a batch split over all of them when there
    are several) and the hybrid scheduler over the CPU and the GPU engine an index would use. As an index
    does when it is built or loaded, the GPU engines start copying the index to their devices at once."""

    def __init__(self, hot: HotArrays) -> None:
        gpus = devices()
        self.cpu = CpuEngine(hot)
        self.gpus = [CudaSearchEngine(hot, gpu) for gpu in gpus]
        for engine in self.gpus:
            engine.prefetch()
        self.gpu = self.gpus[0]
        self.split = SplitEngine(self.gpus) if len(self.gpus) > 1 else None
        chosen = self.split or self.gpu
        self.scheduler = Scheduler(
            hot, self.cpu, chosen, pass_pairs=self.gpu.pass_pairs, parts=self.split.parts if self.split else None
        )

    def release(self) -> None:
        for engine in self.gpus:
            engine.release()


def timed_in_turns(
    ways: dict[str, Callable[[], Any]], runs: int, warm: dict[str, float] | None = None
) -> dict[str, list[float]]:
    """Seconds of each way: a warm-up call (or its time in ``warm``), then ``runs`` calls taken in turns; a
    way slower than SLOW_SECONDS in its warm-up keeps that one time."""
    times: dict[str, list[float]] = {}
    for name, way in ways.items():
        if warm and name in warm:
            times[name] = [warm[name]]
            continue
        start = time.perf_counter()
        way()
        times[name] = [time.perf_counter() - start]
    repeated = [name for name in ways if times[name][0] < SLOW_SECONDS]
    for name in repeated:
        times[name] = []
    for _ in range(runs):
        for name in repeated:
            start = time.perf_counter()
            ways[name]()
            times[name].append(time.perf_counter() - start)
    return times


def measure(
    graph: str, batch: str, engines: Engines, ids: np.ndarray, truth: np.ndarray | None, runs: int, first: bool = False
) -> dict:
    """One batch's row; ``first``: the graph's first batch, whose hybrid call right after the engines were
    made (the index still being copied to the device) is timed too."""
    hot = engines.cpu.hot
    if first:
        undecided = np.flatnonzero(filter_pairs(hot, ids) == UNDECIDED)
        s, t = (np.ascontiguousarray(hot.rec_node[ids[undecided, k], ID]).astype(np.int32) for k in (0, 1))
        start = time.perf_counter()
        first_answers, first_decision = engines.scheduler.search(s, t)
        first_ms = (time.perf_counter() - start) * 1e3
    codes = filter_pairs(hot, ids)
    start = time.perf_counter()
    codes = filter_pairs(hot, ids)
    row: dict[str, Any] = {"graph": graph, "batch": batch, "pairs": int(ids.shape[0])}
    row["filter_ms"] = (time.perf_counter() - start) * 1e3
    undecided = np.flatnonzero(codes == UNDECIDED)
    s = np.ascontiguousarray(hot.rec_node[ids[undecided, 0], ID]).astype(np.int32)
    t = np.ascontiguousarray(hot.rec_node[ids[undecided, 1], ID]).astype(np.int32)
    row["searched"] = int(undecided.size)
    answers, stats = {}, {}
    for mode in ("levels", "frontier"):
        start = time.perf_counter()
        answers[mode], stats[mode] = engines.gpu.answer_with_stats(s, t, mode)
        print(
            f"  {graph}.{batch}: {undecided.size} searched; first {mode} call {time.perf_counter() - start:.2f} s, "
            f"{stats[mode]}",
            flush=True,
        )
    answers["cpu"] = engines.cpu.answer(s, t).answers
    best_mode = min(stats, key=lambda mode: stats[mode].search_seconds)
    decisions = []

    def hybrid() -> None:
        decisions.append(engines.scheduler.search(s, t))

    ways: dict[str, Callable[[], Any]] = {
        "levels": lambda: engines.gpu.answer(s, t, "levels"),
        "frontier": lambda: engines.gpu.answer(s, t, "frontier"),
        "cpu": lambda: engines.cpu.answer(s, t),
        "hybrid": hybrid,
    }
    if engines.split is not None:
        ways["split"] = lambda: engines.split.answer(s, t, best_mode)
    warm = {mode: stats[mode].search_seconds for mode in stats if stats[mode].search_seconds >= SLOW_SECONDS}
    times = timed_in_turns(ways, runs, warm)
    answers["hybrid"] = decisions[-1][0]
    if engines.split is not None:
        answers["split"] = engines.split.answer(s, t, best_mode).answers
    expected = truth[undecided] if truth is not None else answers["cpu"]
    row["exact"] = all(bool(np.array_equal(got, expected)) for got in answers.values())
    assert row["exact"], f"answers differ on {graph}.{batch}: " + str(
        {way: int((got != expected).sum()) for way, got in answers.items()}
    )
    for way, seconds in times.items():
        row[f"{way}_ms"] = statistics.median(seconds) * 1e3
        row[f"{way}_runs"] = len(seconds)
    row["levels_swept"] = stats["levels"].longest
    row["hops"] = stats["frontier"].longest
    row["passes"] = stats["levels"].passes
    faster = min(row["levels_ms"], row["frontier_ms"], row["cpu_ms"])
    row["hybrid_over_faster"] = row["hybrid_ms"] / max(faster, 1e-9)
    row["first_ms"] = first_ms if first else float("nan")
    row["first_over_faster"] = row["first_ms"] / max(faster, 1e-9)
    row["first_over_cpu"] = row["first_ms"] / max(row["cpu_ms"], 1e-9)
    row["first_choice"] = first_decision.engine if first else "-"
    if first:
        assert np.array_equal(first_answers, expected), f"the first hybrid batch of {graph} is not exact"
    last = decisions[-1][1]
    row["hybrid_choice"] = "cpu" if last.engine == "cpu" else f"{last.engine} {last.mode}"
    row["predicted"] = " / ".join(
        f"{last.predicted[kind] * 1e3:.3g}" if kind in last.predicted else "-" for kind in ("cpu", "levels", "frontier")
    )
    row["hybrid_search_ms"] = last.seconds * 1e3
    row["thesis_gpu_ms"] = THESIS_GPU_MS.get(graph, float("nan")) if batch == "que" else float("nan")
    print(row, flush=True)
    return row


def dataset_rows(folder: Path, graph: str, runs: int) -> list[dict]:
    index = ReachabilityIndex.build(read_graph(folder / f"{graph}.gra"), dims=2, backend="cpu")
    engines = Engines(index.hot)
    rows = []
    try:
        for kind in ("que", "pos.que"):
            pairs = np.loadtxt(folder / f"{graph}.{kind}", dtype=np.int64, ndmin=2)
            truth = np.loadtxt(folder / f"{graph}.{kind.replace('que', 'ans')}", dtype=np.int64).astype(bool)
            rows.append(measure(graph, kind, engines, index.names.lookup(pairs), truth, runs, first=kind == "que"))
    finally:
        engines.release()
    return rows


def generated_hot(name: str, indptr: np.ndarray, indices: np.ndarray) -> HotArrays:
    """Index records of a generated graph: a DAG's directly (its ids are topological), with GPU labels where
    the GPU takes it (CPU labels for DAGs too deep for it); a graph with cycles through a full build."""
    if name not in DAGS:
        src = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
        index = ReachabilityIndex.from_edges(src, indices.astype(np.int64), num_nodes=indptr.size - 1, backend="cuda")
        print(f"  {name}: {index.stats.dag_nodes} DAG nodes, {index.stats.levels} levels", flush=True)
        return index.hot
    dag = Digraph.from_csr(indptr, indices)
    root_indptr, root_indices, root = with_virtual_root(indptr, indices)
    orders = make_child_orders(root_indptr, root_indices, 2, seed=0)
    try:
        labels = build_labels(root_indptr, orders, root, LabelingOptions(max_levels=4096))
        post, minpost, tree_low = labels.post, labels.minpost, labels.tree_low
    except LabelingDeclined:
        post, minpost, tree_low = label_all(root_indptr, orders, root)
    n = indptr.size - 1
    fwd, bwd = hub_reach_masks(dag, choose_hubs(dag))
    level = longest_path_levels(dag)
    print(f"  {name}: {n} nodes, {indices.size} edges, {int(level.max()) + 1} levels", flush=True)
    return pack(
        QueryArrays(
            comp=np.arange(n, dtype=np.int64),
            out_indptr=indptr,
            out_indices=indices,
            level=level,
            lo=np.ascontiguousarray(minpost[:, :n].T),
            hi=np.ascontiguousarray(post[:, :n].T),
            tree_lo=np.ascontiguousarray(tree_low[:, :n].T),
            fwd=fwd,
            bwd=bwd,
        )
    )


def batch_pairs(kind: str, indptr: np.ndarray, indices: np.ndarray, count: int) -> np.ndarray:
    if kind == "walk":
        return np.stack(downward_walk_pairs(indptr, indices, count), axis=1)
    return np.random.default_rng(1).integers(0, indptr.size - 1, size=(count, 2))


def register_cap_rows(graph: str, hot: HotArrays, ids: np.ndarray, caps: list[int], runs: int) -> list[list]:
    """GPU search ms of a batch's undecided pairs per register cap of the search kernels (both modes)."""
    undecided = np.flatnonzero(filter_pairs(hot, ids) == UNDECIDED)
    s, t = (np.ascontiguousarray(hot.rec_node[ids[undecided, k], ID]).astype(np.int32) for k in (0, 1))
    rows = []
    for mode in ("levels", "frontier"):
        expected = None
        for cap in caps:
            engine = CudaSearchEngine(hot, options=SearchOptions(max_registers=cap, mode=mode))
            got = engine.answer(s, t).answers
            expected = got if expected is None else expected
            times = timed_in_turns({"gpu": lambda engine=engine: engine.answer(s, t)}, runs)["gpu"]
            same = bool(np.array_equal(got, expected))
            rows.append([graph, mode, cap or "none", statistics.median(times) * 1e3, same])
            engine.release()
            print(rows[-1], flush=True)
    return rows


def chart(rows: list[dict], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f"{r['graph']}.{r['batch']}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(rows)), 5))
    best_gpu = [max(min(r["levels_ms"], r["frontier_ms"]), 1e-3) for r in rows]
    ax.bar(x - 0.3, best_gpu, 0.2, label=f"GPU search, faster mode ({device})")
    ax.bar(x - 0.1, [max(r["cpu_ms"], 1e-3) for r in rows], 0.2, label=f"CPU search, {numba.get_num_threads()} thr")
    ax.bar(x + 0.1, [max(r["hybrid_ms"], 1e-3) for r in rows], 0.2, label="hybrid (probe + choice + engine)")
    ax.bar(x + 0.3, [r["thesis_gpu_ms"] for r in rows], 0.2, label="thesis GPU search")
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.set_xticks(x, names, rotation=70, ha="right", fontsize=7)
    ax.legend(fontsize=8)
    ax.set_title("Search of the pairs the label filter leaves undecided")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--graphs", default=None, help="comma-separated dataset names ('' for none; default: all)")
    parser.add_argument("--generated", default="uniprot_like,citation_like,layered_3k,deep_340k,rmat")
    parser.add_argument("--batches", default="walk,random", help="generated batches: walk (80%% reachable), random")
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=None, help="folder that keeps generated graphs between runs")
    parser.add_argument("--register-caps", default="", help="comma-separated register caps to compare (0: none)")
    parser.add_argument("--tag", default="", help="suffix of the result files' names")
    args = parser.parse_args()
    caps = [int(cap) for cap in filter(None, args.register_caps.split(","))]
    gpus = devices()
    if not gpus:
        raise SystemExit("bench_gpu_search needs a CUDA device")
    device = device_name() or "gpu"
    start = time.perf_counter()
    start_calibration(wait=True)  # as the service's start: the machine's kept fit, or a fit now
    print(f"cost model ready in {time.perf_counter() - start:.1f} s: {machine_model()}")
    rows: list[dict] = []
    cap_rows: list[list] = []
    report = Report(args.out, device, len(gpus), args.runs, args.tag)
    for name in filter(None, args.generated.split(",")):
        start = time.perf_counter()
        indptr, indices = generate(name, args.scale, args.cache)
        hot = generated_hot(name, indptr, indices)
        print(f"indexed {name} in {time.perf_counter() - start:.1f} s", flush=True)
        engines = Engines(hot)
        try:
            for number, kind in enumerate(filter(None, args.batches.split(","))):
                ids = batch_pairs(kind, indptr, indices, args.pairs)
                rows.append(
                    measure(name, f"{args.pairs // 1000}k {kind}", engines, ids, None, args.runs, first=number == 0)
                )
                if caps:
                    cap_rows += register_cap_rows(name, hot, ids, caps, args.runs)
                report.write(rows, cap_rows)
        finally:
            engines.release()
    folder = datasets_dir()
    graphs = (dataset_graphs(folder) if folder.is_dir() else []) if args.graphs is None else args.graphs.split(",")
    for graph in filter(None, graphs):
        rows += dataset_rows(folder, graph, args.runs)
        report.write(rows, cap_rows)
    print(report.write(rows, cap_rows))
    report.chart(rows)


class Report:
    """The benchmark's markdown and CSV tables, written again after every graph (a run cut short keeps
    what it measured), and its chart."""

    def __init__(self, out: Path, device: str, gpus: int, runs: int, tag: str = "") -> None:
        self.out, self.device, self.gpus, self.runs = out, device, gpus, runs
        self.stem = "search-" + device.replace(" ", "_") + (f"-x{gpus}" if gpus > 1 else "") + tag

    def write(self, rows: list[dict], cap_rows: list[list]) -> str:
        header = [
            "graph",
            "batch",
            "pairs",
            "CPU filter",
            "searched",
            "passes",
            "levels swept (max a pass)",
            "hops (max a pass)",
            "GPU levels",
            "GPU frontier",
            f"CPU search ({numba.get_num_threads()} thr)",
            "CPU / GPU",
            "hybrid",
            "hybrid ms",
            "hybrid / faster",
            "first batch after load: hybrid ms (engine)",
            "first / faster",
            "first / CPU",
            "predicted ms cpu / levels / frontier",
            "hybrid search (last run)",
        ]
        if self.gpus > 1:
            header += [f"GPU split over {self.gpus}", f"1 GPU / {self.gpus} GPUs"]
        header += ["exact", "thesis GPU", "thesis / GPU"]
        table = []
        for r in rows:
            best_gpu = min(r["levels_ms"], r["frontier_ms"])
            line = [
                r["graph"],
                r["batch"],
                r["pairs"],
                r["filter_ms"],
                r["searched"],
                r["passes"],
                r["levels_swept"],
                r["hops"],
                r["levels_ms"] if r["levels_runs"] > 1 else f"{r['levels_ms']:.4g} (1 run)",
                r["frontier_ms"],
                r["cpu_ms"],
                r["cpu_ms"] / max(best_gpu, 1e-9),
                r["hybrid_choice"],
                r["hybrid_ms"],
                r["hybrid_over_faster"],
                f"{r['first_ms']:.3g} ({r['first_choice']})" if r["first_choice"] != "-" else "-",
                r["first_over_faster"] if r["first_choice"] != "-" else "-",
                r["first_over_cpu"] if r["first_choice"] != "-" else "-",
                r["predicted"],
                r["hybrid_search_ms"],
            ]
            if self.gpus > 1:
                line += [r["split_ms"], best_gpu / max(r["split_ms"], 1e-9)]
            line += [r["exact"], r["thesis_gpu_ms"], r["thesis_gpu_ms"] / max(best_gpu, 1e-9)]
            table.append(line)
        worst = max(
            (max(r["hybrid_over_faster"], r["first_over_faster"] if r["first_choice"] != "-" else 0) for r in rows),
            default=float("nan"),
        )
        text = (
            f"# Search on {self.device}, times in ms (median of {self.runs}, in turns)\n\n"
            + markdown_table(header, table)
            + f"\n\nHybrid / faster engine: at most {worst:.3g} over these batches, first batches after a load "
            "included (target 1.1).\n\n"
            + f"Cost model (the machine's, as the service fits or reads it at start): {machine_model()}\n"
        )
        if cap_rows:
            text += (
                "\n## GPU search by register cap of the search kernels (ms)\n\n"
                + markdown_table(["graph", "mode", "max registers", "GPU search", "same answers"], cap_rows)
                + "\n"
            )
        write_results(self.out, self.stem, text, header, table)
        return text

    def chart(self, rows: list[dict]) -> None:
        chart(rows, self.out / f"{self.stem}.png", self.device)


if __name__ == "__main__":
    main()
