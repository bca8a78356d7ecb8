"""Where a batch's time goes with updates pending: per phase of ``dynamic.answer_pairs``, in one process.

Per graph and stream of ``bench_updates`` (``--pending`` updates applied one by one), for its random and
positive-heavy batches: the batch with nothing pending, the whole batch with updates pending, and each phase
alone (medians of ``--runs``): the verdicts, with the share of pairs whose both ends' open bits are set
(``pending.labels_hold``: their verdict reads the mask rows); crossing of the pairs they leave open (how
many); the searches on the updated graph of the pairs still open (how many); the pairs sent to the labels'
engine (how many); and single pairs (p50, p99 of the batch's first 300). With ``--serial-crossing``, the
same once more with crossing one pair at a time on the calling thread (``dynamic.PARALLEL_CROSSING`` raised
past the batch), to set the parallel pass against it in one process; every batch's answers are checked to be
equal both ways.

    python3 -m benchmarks.bench_update_phases --graphs rmat-2,dag-10k [--streams shaped,uniform]
        [--pending 1000] [--scale 1.0] [--serial-crossing]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

from benchmarks.common import median_seconds


def phases(version, pairs: np.ndarray, runs: int) -> tuple[np.ndarray, list[object]]:
    """The batch's answers, and its row's cells from the whole batch's milliseconds on: each phase of
    ``dynamic.answer_pairs`` alone (how many pairs it takes, milliseconds) and single pairs (microseconds)."""
    from grail_core import dynamic
    from grail_core.pending import BASE, BASE_FIRST
    from grail_core.records import UNDECIDED

    def ms(function) -> float:
        return median_seconds(function, runs) * 1e3

    pending, hot = version._updates(), version.search.hot
    sides = (version.labels.views.forward(), version.labels.views.backward())
    comp = sides[0].comp
    pool = version.search.walk_buffers(version._walk_size())
    answers = version.query_ids(pairs)[0]
    whole = ms(lambda: version.query_ids(pairs))
    verdicts = ms(lambda: dynamic.verdicts(hot, pending, pairs))
    codes = dynamic.verdicts(hot, pending, pairs)
    open_pairs = np.flatnonzero(codes == UNDECIDED)
    crossing = ms(lambda: dynamic._cross(comp, pending, hot, pool, pairs, open_pairs, codes.copy()))
    dynamic._cross(comp, pending, hot, pool, pairs, open_pairs, codes)
    left = np.flatnonzero(codes == UNDECIDED)
    found = np.zeros(pairs.shape[0], dtype=np.bool_)
    searches = ms(lambda: dynamic.search_pairs(sides, pending, hot, pool, pairs, left, found)) if left.size else 0.0
    to_labels = np.flatnonzero((codes == BASE) | (codes == BASE_FIRST))
    labels = ms(lambda: version.search.answer_ids(pairs[to_labels])) if to_labels.size else 0.0
    single = []
    for u, v in pairs[:300].tolist():
        began = time.perf_counter()
        version.reachable(u, v)
        single.append((time.perf_counter() - began) * 1e6)
    cells: list[object] = [f"{whole:.3f}", f"{verdicts:.3f}", f"{_rows_read(version, pairs):.2f}"]
    cells += [open_pairs.size, f"{crossing:.3f}", left.size]
    cells += [f"{searches:.3f}", to_labels.size, f"{labels:.3f}"]
    return answers, [*cells, f"{np.median(single):.1f} / {np.percentile(single, 99):.1f}"]


def _rows_read(version, pairs: np.ndarray) -> float:
    """The share of ``pairs`` (of the labels' graph's nodes) whose source's ``open_sources`` bit and target's
    ``open_targets`` bit are both set: the verdicts read their mask rows (removal marks of a node's own aside)."""
    pending = version._updates()
    comp = version.labels.views.forward().comp

    def opened(bits: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        dag = comp[nodes]
        return (np.asarray(bits)[dag >> 6] >> (dag & 63).astype(np.uint64)) & np.uint64(1) != 0

    base = (pairs[:, 0] < pending.n_base) & (pairs[:, 1] < pending.n_base)
    both = opened(pending.open_sources, pairs[base, 0]) & opened(pending.open_targets, pairs[base, 1])
    return float(both.mean()) if both.size else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="rmat-2,dag-10k")
    parser.add_argument("--streams", default="shaped,uniform")
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--serial-crossing", action="store_true")
    args = parser.parse_args()
    from benchmarks.bench_updates import edge_arrays, graphs, pair_batches, updates
    from grail_core import ReachabilityIndex, dynamic

    header = ["graph", "stream", "batch", "crossing", "none ms", "pending ms", "x", "verdicts ms", "rows read"]
    header += ["crossed"]
    header += ["crossing ms", "searched", "searches ms", "to labels", "labels ms", "single p50 / p99 us"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in args.graphs.split(","):
        _, make = graphs(args.scale)[name]
        indptr, indices = make()
        src, dst = edge_arrays(indptr, indices)
        n = indptr.size - 1
        batches = {
            label: np.ascontiguousarray(batch)
            for label, batch in pair_batches(indptr, indices, args.pairs, seed=1).items()
        }
        for stream in args.streams.split(","):
            index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
            index.auto_rebuild = False  # measured: answers with the updates pending
            for batch in batches.values():
                index.query_ids(batch[:4096])
            none = {
                label: median_seconds(partial(index.query_ids, batch), args.runs) * 1e3
                for label, batch in batches.items()
            }
            for add, remove in updates(src, dst, n, args.pending, stream, seed=2):
                index.update(add=add, remove=remove)
            version = index.current()
            for label, pairs in batches.items():
                modes = [("threads", dynamic.PARALLEL_CROSSING)]
                if args.serial_crossing:
                    modes.append(("one by one", pairs.shape[0] + 1))
                answers = []
                for mode, threshold in modes:
                    dynamic.PARALLEL_CROSSING, kept = threshold, dynamic.PARALLEL_CROSSING
                    try:
                        found, cells = phases(version, pairs, args.runs)
                    finally:
                        dynamic.PARALLEL_CROSSING = kept
                    answers.append(found)
                    whole = float(str(cells[0]))
                    row = [name, stream, label, mode, f"{none[label]:.3f}", cells[0], f"{whole / none[label]:.2f}"]
                    print("| " + " | ".join(str(cell) for cell in [*row, *cells[1:]]) + " |", flush=True)
                if any(not np.array_equal(answers[0], other) for other in answers[1:]):
                    raise SystemExit(f"{name} {stream} {label}: answers differ between the modes")


if __name__ == "__main__":
    main()
