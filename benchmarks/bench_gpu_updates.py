"""The pairs edge updates touch, searched on the CPU and on the GPU: per graph and pending count, a random and
a positive-heavy batch; the pairs of each that the updates' tests leave to a search on the updated graph
(*touched*) are searched by the CPU walk (all cores) and by the GPU (``CudaSearchEngine.answer_touched``),
median of ``--runs``, answers checked equal; then the whole batch with the scheduler on the CPU alone and
with the GPU engine (the machine's cost model, as a served index has it), and how many pairs it sent there.

Graphs (``--scale`` multiplies the nodes): a deep DAG (``layered_dag``, 500,000 nodes, 10,000 levels) and an
R-MAT graph with cycles (262,144 nodes, degree 8); updates as ``bench_updates`` makes them (removals of
random edges and additions in turns). Needs a CUDA GPU.

    .venv/bin/python -m benchmarks.bench_gpu_updates [--scale 1.0] [--pairs 100000] [--pending 0,100,1000]
        [--runs 3] [--out DIR] [--stem gpu-updates]

Writes <DIR>/<stem>.{md,csv} (DIR: ``--out``, else $OUT when set, else benchmarks/results).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_updates import _markdown, edge_arrays, pair_batches, updates
from grail_core import ReachabilityIndex
from grail_core.dynamic import search_pairs, verdicts
from grail_core.engines import CpuEngine
from grail_core.pending import BASE_FIRST
from grail_core.records import UNDECIDED
from grail_core.scheduler import Scheduler
from grail_core.search import start_calibration
from grail_core.synthetic import layered_dag

HEADER = [
    "graph",
    "pending",
    "batch",
    "pairs",
    "touched",
    "cpu touched s",
    "gpu touched s",
    "gpu/cpu",
    "gpu hops",
    "graph written s",
    "first upload s",
    "batch cpu-only s",
    "batch scheduled s",
    "sent to gpu",
]


def graphs(scale: float) -> dict[str, tuple[str, Callable[[], tuple[np.ndarray, np.ndarray]], str]]:
    def n(count: int) -> int:
        return max(1000, int(count * scale))

    from benchmarks.generate import rmat

    return {
        "dag-10k": (
            f"DAG {n(500_000):,} nodes, 10,000 levels",
            lambda: layered_dag(n(500_000), 10_000, 3.0, 4),
            "shaped",
        ),
        "rmat-8": (f"R-MAT {n(262_144):,} nodes, degree 8", lambda: rmat(n(262_144), 8 * n(262_144)), "uniform"),
    }


def median_seconds(run: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def touched_pairs(index: ReachabilityIndex, pairs: np.ndarray) -> np.ndarray:
    """Positions of the pairs the version's tests leave to a search on the updated graph: UNDECIDED, and
    BASE_FIRST whose labels' graph says no (as ``Version.query_ids`` searches them)."""
    version = index.current()
    if not version.updates_pending:
        return np.zeros(0, dtype=np.int64)
    codes = verdicts(version.search.hot, version._updates(), pairs)
    first = np.flatnonzero(codes == BASE_FIRST)
    base = version.search.scheduler.cpu.answer_ids(pairs[first])[0] if first.size else np.zeros(0, dtype=np.bool_)
    return np.sort(np.concatenate([np.flatnonzero(codes == UNDECIDED), first[~base]]))


def measure(index: ReachabilityIndex, engine: Any, pairs: np.ndarray, runs: int) -> list[object]:
    version = index.current()
    which = touched_pairs(index, pairs)
    cpu_seconds = gpu_seconds = written = uploaded = float("nan")
    hops = 0
    if which.size:
        views = version.labels.views
        sides = (views.forward(), views.backward())

        def on_cpu() -> np.ndarray:
            found = np.zeros(pairs.shape[0], dtype=np.bool_)
            pool = version.search.walk_buffers(version._walk_size())
            search_pairs(sides, version._updates(), version.search.hot, pool, pairs, which, found)
            return found[which]

        cpu_seconds, expected = median_seconds(on_cpu, runs)
        start = time.perf_counter()
        graph = version.touched_graph()
        written = time.perf_counter() - start
        first = engine.answer_touched(graph, pairs[which, 0], pairs[which, 1])
        uploaded = first.upload_seconds
        gpu_seconds, result = median_seconds(
            lambda: engine.answer_touched(graph, pairs[which, 0], pairs[which, 1]), runs
        )
        if not np.array_equal(result.answers, expected) or not np.array_equal(first.answers, expected):
            raise AssertionError("the GPU's answers differ from the CPU walk's")
        hops = result.rounds
    schedulers = version.search.scheduler, version.search.scheduler.gpu
    hot = version.search.hot
    version.search.scheduler = Scheduler(hot, CpuEngine(hot), None)
    cpu_batch, cpu_answers = median_seconds(lambda: index.query_ids(pairs)[0], runs)
    version.search.scheduler = schedulers[0]
    before = engine.touched_pairs
    batch, answers = median_seconds(lambda: index.query_ids(pairs)[0], runs)
    if not np.array_equal(answers, cpu_answers):
        raise AssertionError("the scheduled batch's answers differ from the CPU's")
    sent = (engine.touched_pairs - before) // runs
    ratio = gpu_seconds / cpu_seconds if which.size else float("nan")
    touched = [int(pairs.shape[0]), int(which.size), cpu_seconds, gpu_seconds, ratio, hops, written, uploaded]
    return [*touched, cpu_batch, batch, int(sent)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--pending", default="0,100,1000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--graphs", default="", help="comma-separated names (default: all)")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results"))
    parser.add_argument("--stem", default="gpu-updates")
    args = parser.parse_args()
    pending = sorted(int(x) for x in args.pending.split(","))
    start_calibration(wait=True)
    rows: list[list[object]] = []
    chosen = [g for g in args.graphs.split(",") if g]
    for name, (label, make, kind) in graphs(args.scale).items():
        if chosen and name not in chosen:
            continue
        indptr, indices = make()
        src, dst = edge_arrays(indptr, indices)
        n = indptr.size - 1
        index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cuda")
        index.auto_rebuild = False  # measured: answers with the updates pending
        scheduler = index.current().search.scheduler
        if scheduler.gpu is None:
            raise SystemExit("no CUDA GPU: this benchmark compares the CPU with one")
        engine = getattr(scheduler.gpu, "engines", [scheduler.gpu])[0]
        journal = updates(src, dst, n, max(pending), kind, seed=1)
        batches = pair_batches(indptr, indices, args.pairs, seed=2)
        applied = 0
        for count in pending:
            if count > applied:
                index.update_many(journal[applied:count])
            applied = count
            for batch, pairs in batches.items():
                row: list[object] = [name, count, batch, *measure(index, engine, pairs, args.runs)]
                rows.append(row)
                print(" | ".join(map(str, row)), flush=True)
        print(f"{name}: {label}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    text = (
        f"# The pairs updates touch: CPU walk vs GPU ({os.cpu_count()} cores, load {load[0]:.1f}; "
        f"{args.pairs:,} pairs a batch, median of {args.runs})\n\n{_markdown(HEADER, rows)}\n"
    )
    (out / f"{args.stem}.md").write_text(text)
    with open(out / f"{args.stem}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)
    print(text)


if __name__ == "__main__":
    main()
