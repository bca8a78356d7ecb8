"""Where a batch's time goes with updates pending, through the library (CPU engine), one tree per process.

Per graph (``bench_updates``'s generated shapes, at ``--scale``), ``--apply`` updates of a stream of
``--stream`` (``--updates``: ``uniform`` random pairs, whose first updates of a longer stream are harder, their
added edges jumping farther; or ``shaped`` like the graph's own edges), then for a random and a
positive-heavy batch of 20,000 pairs the median milliseconds of each step of ``dynamic.answer_pairs``: the
verdicts of every pair, the crossing pass over the pairs they leave open, the searches on the updated graph
of the pairs still open, and the whole ``query_ids``; with the number of pairs each step takes.

    python3 -m benchmarks.bench_update_steps --graphs rmat-8,dag-10k [--stream 1000] [--apply 1000]
        [--updates uniform|shaped] [--scale 1.0]

To compare two checkouts, run it from each one's own folder (``git archive <commit> | tar -x -C DIR``, then
``cd DIR``), one after the other, on one machine: the project's packages are imported from the folder it runs in.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np


def median_ms(step: Callable[[], object], runs: int = 7) -> float:
    step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def batch_row(index, pairs: np.ndarray) -> list[str]:
    """[verdicts ms, pairs open, crossing ms, pairs searched, search ms, query_ids ms] of one batch."""
    from grail_core import dynamic
    from grail_core.records import UNDECIDED

    version = index.current()
    pending, hot = version._updates(), version.search.hot
    sides = (version.labels.views.forward(), version.labels.views.backward())
    comp = sides[0].comp
    pool = version.search.walk_buffers(version._walk_size())
    codes = dynamic.verdicts(hot, pending, pairs)
    open_pairs = np.flatnonzero(codes == UNDECIDED)

    def crossed() -> np.ndarray:
        out = codes.copy()
        dynamic._cross(comp, pending, hot, pool, pairs, open_pairs, out)
        return out

    searched = np.flatnonzero(crossed() == UNDECIDED)
    answers = np.zeros(pairs.shape[0], dtype=bool)
    search_ms = (
        median_ms(lambda: dynamic.search_pairs(sides, pending, hot, pool, pairs, searched, answers))
        if searched.size
        else 0.0
    )
    return [
        f"{median_ms(lambda: dynamic.verdicts(hot, pending, pairs)):.2f}",
        f"{open_pairs.size:,}",
        f"{median_ms(crossed):.2f}",
        f"{searched.size:,}",
        f"{search_ms:.2f}",
        f"{median_ms(lambda: index.query_ids(pairs)):.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="rmat-8,dag-10k")
    parser.add_argument("--stream", type=int, default=1000)
    parser.add_argument("--apply", type=int, default=1000)
    parser.add_argument("--updates", choices=("uniform", "shaped"), default="uniform")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    from benchmarks.bench_updates import edge_arrays, graphs, pair_batches, updates
    from grail_core import ReachabilityIndex

    print("| graph | batch | verdicts ms | crossing: pairs | ms | search: pairs | ms | query_ids ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.graphs.split(","):
        _, make = graphs(args.scale)[name]
        indptr, indices = make()
        src, dst = edge_arrays(indptr, indices)
        n = indptr.size - 1
        index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
        index.auto_rebuild = False  # measured: answers with the updates pending
        for add, remove in updates(src, dst, n, args.stream, args.updates, seed=2)[: args.apply]:
            index.update(add=add, remove=remove)
        for label, batch in pair_batches(indptr, indices, 20000, seed=1).items():
            row = batch_row(index, np.ascontiguousarray(batch, dtype=np.int64))
            print("| " + " | ".join([name, label, *row]) + " |", flush=True)


if __name__ == "__main__":
    main()
