"""Edge updates at scale, through the library (CPU engine): query cost against pending updates, update rates,
a journal folded at once, rebuild from a version; on generated deep DAGs and R-MAT graphs with cycles.

Sections:

* ``issue``: the issue's table (a 200,000-node DAG of 300 levels, edges jumping 1-8 levels; 500 random
  pairs before and after 1 or 20 added, 1 or 200 removed edges), run by this tree and, with ``--before DIR``,
  by another checkout of the project (e.g. ``git archive <commit> | tar -x -C DIR``) in a child process.
* ``queries``: per graph, updates applied one by one (half removals of random edges, half additions: either
  ``shaped`` like the graph's own edges, or ``uniform`` random pairs, which close cycles through a DAG) up
  to each pending count; at each, a random and a positive-heavy batch (median of 3 runs, against the same
  batch with nothing pending: the ratio is the cost), single pairs (p50/p99), the update rate since the
  last count; at 1,000 pending the answers are checked against a fresh build of the updated graph, whose
  time (edges of the version, then the build) is the rebuild time.
* ``apply``: 100,000 updates each adding a node (an edge between a new node and an existing one, or
  between two new ones) applied one by one (the rate over the last 10,000), then the same journal folded at
  once into a fresh copy (``update_many``), with its answers checked against the one-by-one index.
* ``apply-mixed``: per graph, the ``queries`` section's shaped and uniform streams (half removals, half
  additions) applied one by one from nothing pending to ``--mixed`` updates, each timed: per kind of update
  (an added or removed edge, between DAG nodes or inside a component) the count, median, p99 and total, and
  the rate and CPU seconds. To compare checkouts, copy this file into the other one's ``benchmarks/`` (it
  imports the project from the folder above its own) and run it there too.
* ``auto-rebuild`` (not in ``all``): per graph and stream, ``--mixed`` updates of the ``queries`` section's
  streams applied, then each batch (random, positive-heavy) on an index that keeps them pending
  (``auto_rebuild`` off: the median of 3 runs) and on a fresh one that rebuilds once its searches cost a rebuild
  (``auto_rebuild``, the default: the first run, and the median of QUERY_RUNS), against the batch before the
  updates; with the rebuilds done and the answers checked against the index that kept them pending. Beside it,
  the first run on a third index that rebuilds only once its searches have cost a rebuild, with no forecast.
* ``restart`` (not in ``all``): a real ``grail-serve`` (SQLite in its data directory, or ``--database-url``
  PostgreSQL) builds a DAG of 500,000 nodes (x scale), is killed (SIGKILL to its process group), finds
  ``--journal`` updates (a quarter removing edges, half adding edges between existing nodes, a quarter adding
  new nodes) journaled in its store, and starts again, ``--runs`` times from a copy of that data directory:
  seconds to ``/health`` and until the graph answers, ``/health`` latencies meanwhile, the 409s (with
  Retry-After) and ``/ready``'s loading phases seen; then its answers on sample pairs against a fresh build
  of the final edge set.

    .venv/bin/python -m benchmarks.bench_updates [--section all|issue|queries|apply|auto-rebuild|restart] [--scale 1.0]
        [--pairs 20000] [--pending 0,10,100,1000,10000] [--before DIR] [--stem updates-vm]
        [--journal 100000] [--runs 3] [--database-url postgresql://... | --postgres] [--mixed 1000]
        [--streams shaped,uniform]

``--scale`` multiplies the node counts (20 for DAGs of 10^7 nodes on a large machine). Writes
benchmarks/results/<stem>.{md,csv} and a plot (.png, with matplotlib).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# numba's cache folder as the server's, set before numba is imported: the kernels a server compiled load here.
import service.main  # noqa: F401
from grail_core import ReachabilityIndex
from grail_core import index as grail_index
from grail_core.synthetic import downward_walk_pairs, layered_dag, with_back_edges

PENDING = (0, 10, 100, 1_000, 10_000)
CHECKED_AT = 1_000
# The update streams (``updates``): additions like the graph's own edges, or between uniform random nodes.
STREAMS = ("shaped", "uniform")


# ---- graphs and updates ----------------------------------------------------------------------------------


def _rmat(nodes: int, edges: int) -> tuple[np.ndarray, np.ndarray]:
    from benchmarks.generate import rmat

    return rmat(nodes=nodes, edges=edges)


# name -> (description, generator of (indptr, indices) at a scale, generator of shaped additions)
def graphs(scale: float) -> dict[str, tuple[str, Callable[[], tuple[np.ndarray, np.ndarray]]]]:
    def n(count: int) -> int:
        return max(1000, int(count * scale))

    return {
        "dag-1k": (f"DAG {n(500_000):,} nodes, 1,000 levels", lambda: layered_dag(n(500_000), 1_000, 3.0, 4)),
        "dag-10k": (f"DAG {n(500_000):,} nodes, 10,000 levels", lambda: layered_dag(n(500_000), 10_000, 3.0, 4)),
        "dag-100k": (f"DAG {n(500_000):,} nodes, 100,000 levels", lambda: layered_dag(n(500_000), 100_000, 3.0, 4)),
        "rmat-8": (f"R-MAT {n(262_144):,} nodes, degree 8", lambda: _rmat(n(262_144), 8 * n(262_144))),
        "rmat-2": (f"R-MAT {n(262_144):,} nodes, degree 2", lambda: _rmat(n(262_144), 2 * n(262_144))),
        "rmat-16": (f"R-MAT {n(262_144):,} nodes, degree 16", lambda: _rmat(n(262_144), 16 * n(262_144))),
        "cycles-10k": (
            f"{n(500_000):,} nodes, 10,000 levels, 10% of the edges turned back",
            lambda: with_back_edges(*layered_dag(n(500_000), 10_000, 3.0, 4), 0.1),
        ),
    }


class Made(NamedTuple):
    """A graph of ``graphs``, made: its name and description, CSR, edge arrays and node count."""

    name: str
    description: str
    indptr: np.ndarray
    indices: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    n: int


def made_graphs(scale: float, only: list[str]) -> Iterator[Made]:
    """The graphs named in ``only`` (all where it is empty), made one at a time."""
    for name, (description, make) in graphs(scale).items():
        if only and name not in only:
            continue
        indptr, indices = make()
        yield Made(name, description, indptr, indices, *edge_arrays(indptr, indices), indptr.size - 1)


def edge_arrays(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    src = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    return src, np.asarray(indices, dtype=np.int64)


def updates(
    src: np.ndarray, dst: np.ndarray, n: int, count: int, kind: str, seed: int
) -> list[tuple[list[list[int]], list[list[int]]]]:
    """``count`` single-edge updates, removals and additions in turns. ``shaped`` additions copy a random
    edge's source and a random edge's target among the edges that leave nodes near it in id order (for the
    generated DAGs: a jump of a few levels, as the graph's own; for R-MAT: a draw from the same degrees);
    ``uniform`` ones join two random nodes."""
    rng = np.random.default_rng(seed)
    gone = rng.choice(src.size, size=count // 2 + 1, replace=False)
    if kind == "uniform":
        add = rng.integers(0, n, size=(count, 2))
    else:
        pick = rng.integers(0, src.size, size=count)
        near = np.clip(pick + rng.integers(-64, 65, size=count), 0, src.size - 1)
        add = np.stack([src[pick], dst[near]], axis=1)
        add[:, 1] = np.where(add[:, 0] == add[:, 1], dst[pick], add[:, 1])
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append(([], [[int(src[gone[i // 2]]), int(dst[gone[i // 2]])]]))
        else:
            out.append(([[int(add[i, 0]), int(add[i, 1])]], []))
    return out


def pair_batches(indptr: np.ndarray, indices: np.ndarray, count: int, seed: int) -> dict[str, np.ndarray]:
    n = indptr.size - 1
    rng = np.random.default_rng(seed)
    walks = np.stack(downward_walk_pairs(indptr, indices, count, seed=seed), axis=1)
    return {"random": rng.integers(0, n, size=(count, 2)), "positive": walks}


# Runs of each batch in the queries table, their median quoted: a batch takes about a millisecond, and on the
# 2-core VM the median of 3 swung by half between runs.
QUERY_RUNS = 9


def pending_index(src: np.ndarray, dst: np.ndarray, n: int) -> ReachabilityIndex:
    """An index that keeps its updates pending (no ``auto_rebuild``): what the sections measure is the cost of
    answering with them pending."""
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
    index.auto_rebuild = False
    return index


def batch_seconds(index: ReachabilityIndex, pairs: np.ndarray, runs: int = 3) -> tuple[float, np.ndarray]:
    times, answers = [], None
    for _ in range(runs):
        start = time.perf_counter()
        answers, _ = index.query_ids(pairs)
        times.append(time.perf_counter() - start)
    return float(np.median(times)), answers


def single_pairs(index: ReachabilityIndex, pairs: np.ndarray) -> tuple[float, float]:
    times = []
    for u, v in pairs.tolist():
        start = time.perf_counter()
        index.query_pair(u, v)
        times.append(time.perf_counter() - start)
    values = np.array(times) * 1e6
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


# ---- the issue's table ---------------------------------------------------------------------------------


ISSUE_ROWS = (
    ("1 added edge", 1, 0),
    ("20 added edges", 20, 0),
    ("1 removed edge", 0, 1),
    ("200 removed edges", 0, 200),
)


def issue_rows() -> list[dict[str, object]]:
    """The issue's measurement on this process's grail_core: 500 random pairs before and after one update."""
    indptr, indices = layered_dag(200_000, 300, degree=5.0, reach=8)
    src, dst = edge_arrays(indptr, indices)
    pairs = np.random.default_rng(7).integers(0, 200_000, size=(500, 2))
    rows = []
    for label, adds, removes in ISSUE_ROWS:
        index = pending_index(src, dst, 200_000)
        index.query_ids(pairs)  # compiled and warm
        before, _ = batch_seconds(index, pairs, runs=5)
        rng = np.random.default_rng(adds + 1000 * removes)
        add = rng.integers(0, 200_000, size=(adds, 2)).tolist()
        remove = np.stack([src, dst], axis=1)[rng.choice(src.size, size=removes, replace=False)].tolist()
        index.update(add=add, remove=remove)
        index.query_ids(pairs[:2])
        after, _ = batch_seconds(index, pairs, runs=1 if removes + adds > 1 else 3)
        rows.append({"update": label, "before_ms": before * 1e3, "after_ms": after * 1e3})
    return rows


def issue_section(before_tree: str | None) -> tuple[str, list[list[object]]]:
    header = ["update", "500 pairs before", "after", "slowdown"]
    runs = {"this tree": issue_rows()}
    if before_tree:
        env = dict(os.environ, PYTHONPATH=before_tree)
        here = str(Path(__file__).resolve().parent.parent)
        code = f"import json, sys; sys.path.insert(0, {here!r}); from benchmarks.bench_updates import issue_rows; "
        code += "print(json.dumps(issue_rows()))"
        # The child imports grail_core from the other tree (first on its path), this script from here.
        child = subprocess.run(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {before_tree!r}); " + code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=before_tree,
        )
        runs = {"before": json.loads(child.stdout.strip().splitlines()[-1]), **runs}
    lines, rows = [], []
    for name, measured in runs.items():
        lines.append(f"\n{name}:\n")
        table = [
            [
                r["update"],
                f"{r['before_ms']:.2f} ms",
                f"{r['after_ms']:.2f} ms",
                f"{r['after_ms'] / r['before_ms']:,.1f}x",
            ]
            for r in measured
        ]
        lines.append(_markdown(header, table))
        rows += [["issue", name, *row] for row in table]
    return "".join(lines), rows


# ---- queries against pending updates ---------------------------------------------------------------------


def queries_section(
    scale: float, pair_count: int, pending: tuple[int, ...], only: list[str], streams: tuple[str, ...] = STREAMS
) -> tuple[str, list[list[object]]]:
    header = [
        "graph",
        "updates",
        "pending",
        "random ms",
        "random x",
        "positive ms",
        "positive x",
        "searched",
        "p50 us",
        "p99 us",
        "updates/s",
    ]
    rows: list[list[object]] = []
    notes = []
    for name, description, indptr, indices, src, dst, n in made_graphs(scale, only):
        notes.append(f"- {name}: {description}")
        batches = pair_batches(indptr, indices, pair_count, seed=1)
        singles = np.concatenate([batches["random"][:1000], batches["positive"][:1000]])
        for kind in streams:
            start = time.perf_counter()
            index = pending_index(src, dst, n)
            build = time.perf_counter() - start
            stream = updates(src, dst, n, max(pending), kind, seed=2)
            for batch in batches.values():
                index.query_ids(batch[:4096])
            base = {label: batch_seconds(index, batch, QUERY_RUNS)[0] for label, batch in batches.items()}
            applied, rate = 0, float("nan")
            for count in pending:
                if count > applied:
                    start = time.perf_counter()
                    for add, remove in stream[applied:count]:
                        index.update(add=add, remove=remove)
                    rate = (count - applied) / (time.perf_counter() - start)
                    applied = count
                timings = {}
                searched = 0
                for label, batch in batches.items():
                    index.query_ids(batch[:64])
                    timings[label], _ = batch_seconds(index, batch, QUERY_RUNS)
                    searched += index.query_ids(batch)[1].searched_updated
                p50, p99 = single_pairs(index, singles)
                rows.append(
                    [
                        name,
                        kind,
                        count,
                        timings["random"] * 1e3,
                        timings["random"] / base["random"],
                        timings["positive"] * 1e3,
                        timings["positive"] / base["positive"],
                        searched,
                        p50,
                        p99,
                        rate if count else float("nan"),
                    ]
                )
                print(_markdown(header, [rows[-1]]).splitlines()[-1], flush=True)
                if count == CHECKED_AT:
                    notes.append(_check_and_rebuild(index, name, kind, batches, build))
    text = _markdown(header, rows) + "\n\n" + "\n".join(notes)
    return text, [["queries", *row] for row in rows]


def _check_and_rebuild(
    index: ReachabilityIndex, name: str, kind: str, batches: dict[str, np.ndarray], build: float
) -> str:
    """Answers against a fresh build of the version's graph; the rebuild's time (edges, then labels)."""
    start = time.perf_counter()
    src, _ = index.edges()
    edges = time.perf_counter() - start
    start = time.perf_counter()
    fresh = index.rebuilt()
    rebuild = time.perf_counter() - start
    wrong = sum(int(np.count_nonzero(index.query_ids(b)[0] != fresh.query_ids(b)[0])) for b in batches.values())
    assert wrong == 0, f"{name} {kind}: {wrong} answers differ from a fresh build"
    return (
        f"- {name}, {kind}, {CHECKED_AT:,} pending: {sum(b.shape[0] for b in batches.values()):,} answers equal a "
        f"fresh build's; rebuild from the version {rebuild:.2f} s (its edges {edges * 1e3:.0f} ms, {src.size:,}); "
        f"first build {build:.2f} s"
    )


def _first_batch_without_forecast(
    src: np.ndarray,
    dst: np.ndarray,
    n: int,
    stream: list[tuple[list[list[int]], list[list[int]]]],
    batch: np.ndarray,
    truth: np.ndarray,
) -> float:
    """Seconds of the first batch after ``stream`` on a fresh index whose ``auto_rebuild`` waits until the
    searches have cost a rebuild (no forecast: ``grail_core.index.FORECAST_MARGIN`` infinite)."""
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
    for add, remove in stream:
        index.update(add=add, remove=remove)
    margin, grail_index.FORECAST_MARGIN = grail_index.FORECAST_MARGIN, math.inf
    try:
        start = time.perf_counter()
        answers, _ = index.query_ids(batch)
        seconds = time.perf_counter() - start
    finally:
        grail_index.FORECAST_MARGIN = margin
    assert (answers == truth).all(), "answers differ after a rebuild"
    return seconds


def auto_rebuild_section(
    scale: float, pair_count: int, count: int, only: list[str], streams: tuple[str, ...] = STREAMS
) -> tuple[str, list[list[object]]]:
    header = [
        "graph",
        "updates",
        "batch",
        "before ms",
        "kept pending ms",
        "auto first, no forecast ms",
        "auto first ms",
        "auto median ms",
        "auto x",
        "rebuilds",
        "rebuild cost s",
    ]
    rows: list[list[object]] = []
    for name, _, indptr, indices, src, dst, n in made_graphs(scale, only):
        batches = pair_batches(indptr, indices, pair_count, seed=1)
        for kind in streams:
            stream = updates(src, dst, n, count, kind, seed=2)
            kept = pending_index(src, dst, n)
            for add, remove in stream:
                kept.update(add=add, remove=remove)
            for label, batch in batches.items():
                index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
                index.query_ids(batch[:4096])
                before, _ = batch_seconds(index, batch, QUERY_RUNS)
                for add, remove in stream:
                    index.update(add=add, remove=remove)
                cost = index.rebuild_seconds()
                kept.query_ids(batch[:4096])  # compiled (the first in a process may compile its searches)
                kept_seconds, truth = batch_seconds(kept, batch, 3)
                unforecast = _first_batch_without_forecast(src, dst, n, stream, batch, truth)
                runs = []
                for _ in range(QUERY_RUNS):
                    start = time.perf_counter()
                    answers, _ = index.query_ids(batch)
                    runs.append(time.perf_counter() - start)
                    assert (answers == truth).all(), f"{name} {kind} {label}: answers differ after a rebuild"
                median = float(np.median(runs))
                rows.append(
                    [
                        name,
                        kind,
                        label,
                        before * 1e3,
                        kept_seconds * 1e3,
                        unforecast * 1e3,
                        runs[0] * 1e3,
                        median * 1e3,
                        median / before,
                        index.auto_rebuilds,
                        cost,
                    ]
                )
                print(_markdown(header, [rows[-1]]).splitlines()[-1], flush=True)
    return _markdown(header, rows), [["auto-rebuild", *row] for row in rows]


# ---- applying updates that add nodes, one by one and folded -------------------------------------------


def apply_section(scale: float, total: int = 100_000) -> tuple[str, list[list[object]]]:
    n = max(1000, int(200_000 * scale))
    indptr, indices = layered_dag(n, 300, degree=5.0, reach=8)
    src, dst = edge_arrays(indptr, indices)
    rng = np.random.default_rng(3)
    journal: list[tuple[list[list[int]], list[list[int]]]] = []
    fresh = n
    for i in range(total):
        old = int(rng.integers(0, n))
        if i % 4 == 3 and fresh > n:  # between two new nodes
            journal.append(([[fresh, int(rng.integers(n, fresh))]], []))
        elif i % 2:
            journal.append(([[old, fresh]], []))
        else:
            journal.append(([[fresh, old]], []))
        fresh += 1
    one_by_one = pending_index(src, dst, n)
    one_by_one.update(add=[[0, n + total + 1]])  # the first update compiles and starts the state
    times = np.empty(total)
    for i, (add, remove) in enumerate(journal):
        start = time.perf_counter()
        one_by_one.update(add=add, remove=remove)
        times[i] = time.perf_counter() - start
    last = times[-10_000:]
    print(f"one by one: {1 / last.mean():,.0f} updates/s over the last 10,000", flush=True)
    folded = pending_index(src, dst, n)
    folded.update_many(journal[:10])  # compiled
    folded = pending_index(src, dst, n)
    start, cpu_start = time.perf_counter(), time.process_time()
    folded.update_many([([[0, n + total + 1]], []), *journal])
    fold_seconds, fold_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"folded at once: {fold_seconds:.2f} s ({fold_cpu:.2f} s of CPU)", flush=True)
    # A check, not a measure: with every mask bit taken, pairs of new nodes are searched on the whole graph.
    pairs = rng.integers(0, n + total, size=(2_000, 2))
    same = bool(np.array_equal(one_by_one.query_ids(pairs)[0], folded.query_ids(pairs)[0]))
    assert same and one_by_one.pending[1:] == folded.pending[1:]
    rows = [
        ["apply", f"{total:,} updates adding nodes, one by one", f"{1 / last.mean():,.0f} updates/s (last 10,000)"],
        [
            "apply",
            "median, p99 of the last 10,000",
            f"{np.median(last) * 1e6:.0f} us, {np.percentile(last, 99) * 1e6:.0f} us",
        ],
        ["apply", "first 10,000", f"{10_000 / times[:10_000].sum():,.0f} updates/s"],
        [
            "apply",
            f"the same {total:,} folded at once",
            f"{fold_seconds:.2f} s ({fold_cpu:.2f} s of CPU), answers equal",
        ],
    ]
    text = f"DAG {n:,} nodes, 300 levels:\n\n" + _markdown(["", "what", "figure"], rows)
    return text, rows


# ---- a mixed stream applied one by one, per kind of update -----------------------------------------------


def mixed_rows(
    scale: float, only: list[str], count: int, streams: tuple[str, ...] = STREAMS
) -> list[dict[str, object]]:
    """Per graph and stream, each update's seconds by kind (``apply-mixed``), on this process's grail_core;
    the first update (it makes the writer's state, and may compile) apart, and out of the rate and the CPU
    seconds."""
    rows: list[dict[str, object]] = []
    for name, _, _, _, src, dst, n in made_graphs(scale, only):
        for kind in streams:
            index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
            comp = np.asarray(index.current().labels.views.forward().comp)
            times: dict[str, list[float]] = {}
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            for i, (add, remove) in enumerate(updates(src, dst, n, count, kind, seed=2)):
                u, v = (add or remove)[0]
                label = ("added" if add else "removed") + (" inner" if comp[u] == comp[v] else " DAG")
                start, cpu_before = time.perf_counter(), time.process_time()
                index.update(add=add, remove=remove)
                times.setdefault("first" if i == 0 else label, []).append(time.perf_counter() - start)
                if i == 0:
                    first_cpu = time.process_time() - cpu_before
            wall, cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
            wall -= times["first"][0]  # it may compile, and makes the writer's state
            cpu -= first_cpu
            for label, seconds in sorted(times.items()):
                values = np.array(seconds) * 1e3
                rows.append(
                    {
                        "graph": name,
                        "stream": kind,
                        "kind": label,
                        "count": values.size,
                        "median_ms": float(np.median(values)),
                        "p99_ms": float(np.percentile(values, 99)),
                        "total_ms": float(values.sum()),
                    }
                )
            rows.append(
                {
                    "graph": name,
                    "stream": kind,
                    "kind": "all",
                    "count": count - 1,
                    "median_ms": float("nan"),
                    "p99_ms": float("nan"),
                    "total_ms": wall * 1e3,
                    "rate": (count - 1) / wall,
                    "cpu_s": cpu,
                }
            )
            print(f"{name} {kind}: {(count - 1) / wall:,.0f} updates/s after the first", flush=True)
    return rows


def mixed_section(
    scale: float, only: list[str], count: int, streams: tuple[str, ...] = STREAMS
) -> tuple[str, list[list[object]]]:
    runs = {"this tree": mixed_rows(scale, only, count, streams)}
    header = ["tree", "graph", "stream", "update", "count", "median ms", "p99 ms", "total ms", "updates/s"]
    table = [
        [
            tree,
            r["graph"],
            r["stream"],
            r["kind"],
            r["count"],
            r["median_ms"],
            r["p99_ms"],
            r["total_ms"],
            f"{r['rate']:,.0f} (CPU {r['cpu_s']:.2f} s after the first)" if "rate" in r else "",
        ]
        for tree, measured in runs.items()
        for r in measured
    ]
    return _markdown(header, table), [["apply-mixed", *row] for row in table]


# ---- a restart that replays a journal, through a real server -------------------------------------------


RESTART_NAME = "restart"
# A restart whose graph does not answer within this is reported so, not waited for.
RESTART_WAIT_S = 900.0


def restart_journal(
    edges: np.ndarray, n: int, total: int, seed: int
) -> tuple[list[tuple[list[list[int]], list[list[int]]]], np.ndarray]:
    """``total`` single-edge updates of a graph with these (unique) ``edges``: every fourth removes an edge of
    the graph (each one once), every fourth adds an edge to or from a new node (or between two new ones), the
    others add an edge between existing nodes shaped like the graph's own. Returns them and the final edges."""
    rng = np.random.default_rng(seed)
    removed = rng.choice(edges.shape[0], size=total // 4 + 1, replace=False)
    gone = {(int(u), int(v)) for u, v in edges[removed].tolist()}
    pick = rng.integers(0, edges.shape[0], size=total)
    near = np.clip(pick + rng.integers(-64, 65, size=total), 0, edges.shape[0] - 1)
    journal: list[tuple[list[list[int]], list[list[int]]]] = []
    added: list[tuple[int, int]] = []
    fresh = n
    for i in range(total):
        if i % 4 == 0:
            u, v = edges[removed[i // 4]].tolist()
            journal.append(([], [[u, v]]))
            continue
        u, v = int(edges[pick[i], 0]), int(edges[near[i], 1])
        if i % 4 == 3 or u == v or (u, v) in gone:
            if i % 16 == 15 and fresh > n:  # between two new nodes
                u, v = fresh, fresh - 1
            else:
                u, v = (u, fresh) if i % 2 else (fresh, u)
            fresh += 1
        journal.append(([[u, v]], []))
        added.append((u, v))
    keep = np.ones(edges.shape[0], dtype=bool)
    keep[removed[: (total + 3) // 4]] = False
    final = np.unique(np.concatenate([edges[keep], np.array(added, dtype=np.int64).reshape(-1, 2)]), axis=0)
    return journal, final


def _fill_journal(data_dir: Path, database_url: str | None, name: str, journal: list[Any]) -> tuple[int, float]:
    """The updates appended to the graph's journal through the metadata store (as the update route does, in
    transactions of 10,000): the version they reach and the seconds it took."""
    from service.state import open_metadata
    from service.state.sql import Append
    from service.updates import encode

    store = open_metadata(database_url, data_dir)
    try:
        graph = next(g for g in store.list_graphs() if g.name == name)
        head = graph.head_version
        started = time.perf_counter()
        for first in range(0, len(journal), 10_000):
            appends = [
                Append(graph.id, head + first + i, encode(add, remove))
                for i, (add, remove) in enumerate(journal[first : first + 10_000])
            ]
            made = store._write(lambda tx, appends=appends: store._append_rows(tx, appends))  # type: ignore[attr-defined]
            assert None not in made, "an append was refused"
        return head + len(journal), time.perf_counter() - started
    finally:
        store.close()


class _Watch:
    """Polls a starting server until its graph answers: /health (latency of each answer), the graph's
    ``/reachable`` (409s, Retry-After), ``/ready`` (the loading phases it lists)."""

    def __init__(self, url: str, pair: tuple[int, int]) -> None:
        import threading

        self.url, self.pair = url, pair
        self.health: list[tuple[float, float]] = []  # (when, seconds)
        self.health_failures = 0
        self.first_health = float("nan")
        self.answered = float("nan")
        self.conflicts = 0
        self.retry_after: set[str] = set()
        self.phases: list[str] = []
        self.done = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._health, self._graph, self._ready)]

    def run(self, started: float, timeout: float) -> None:
        self.started = started
        for thread in self.threads:
            thread.start()
        self.done.wait(timeout)
        self.done.set()
        for thread in self.threads:
            thread.join()

    def _get(self, client: Any, path: str) -> Any:
        import httpx

        try:
            return client.get(self.url + path, timeout=30)
        except httpx.TransportError:
            return None

    def _health(self) -> None:
        import httpx

        with httpx.Client() as client:
            while not self.done.is_set():
                sent = time.monotonic()
                answer = self._get(client, "/health")
                if answer is not None and answer.status_code == 200:
                    if self.first_health != self.first_health:
                        self.first_health = time.monotonic() - self.started
                    self.health.append((sent - self.started, time.monotonic() - sent))
                elif self.first_health == self.first_health:
                    self.health_failures += 1
                time.sleep(0.02)

    def _graph(self) -> None:
        import httpx

        path = f"/graphs/{RESTART_NAME}/reachable?source={self.pair[0]}&target={self.pair[1]}"
        with httpx.Client() as client:
            while not self.done.is_set():
                answer = self._get(client, path)
                if answer is not None and answer.status_code == 200:
                    self.answered = time.monotonic() - self.started
                    self.done.set()
                elif answer is not None and answer.status_code == 409:
                    self.conflicts += 1
                    self.retry_after.add(answer.headers.get("retry-after", "none"))
                time.sleep(0.02)

    def _ready(self) -> None:
        import httpx

        with httpx.Client() as client:
            while not self.done.is_set():
                answer = self._get(client, "/ready")
                if answer is not None and answer.status_code in (200, 503):
                    for graph in answer.json().get("loading", []):
                        phase = f"{graph['phase']} {graph['progress']:.0%}"
                        if not self.phases or self.phases[-1] != phase:
                            self.phases.append(phase)
                time.sleep(0.1)


def _replay_log(log: Path, since: int) -> str:
    """What the server logged of the graph's load: its own timing of the load and the replay, and how long
    after the kernels' warm-up (which holds every call into grail_core until numba's threading layer is
    known: the version's load waits for it, the journal is read meanwhile) it ended."""
    import re

    text = log.read_bytes()[since:].decode(errors="replace")
    stamp = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
    found = re.findall(stamp + r".*version \d+ loaded in ([\d.]+) s \((\d+) journaled updates replayed\)", text, re.M)
    warm = re.findall(stamp + r".*grail\.service\.warmup .*kernels ready in", text, re.M)
    if not found:
        return "-"
    when, seconds, replayed = found[-1]
    shown = f"{float(seconds):.2f} s ({int(replayed):,} replayed)"
    if warm:
        after = (_moment(when) - _moment(warm[0])).total_seconds()
        shown += f", {after:.2f} s after the warm-up"
    return shown


def _moment(stamp: str) -> Any:
    import datetime

    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")


def restart_section(
    scale: float, total: int, runs: int, database_url: str | None, pair_count: int
) -> tuple[str, list[list[object]]]:
    import shutil
    import tempfile

    import httpx

    from benchmarks.serving import GrailServer

    if database_url and runs > 1:
        raise SystemExit("a restart copies the data directory, not a database: --runs 1 with --database-url")
    n = max(1000, int(500_000 * scale))
    indptr, indices = layered_dag(n, 1_000, 3.0, 4)
    edges = np.unique(np.stack(edge_arrays(indptr, indices), axis=1), axis=0)
    journal, final = restart_journal(edges, n, total, seed=5)
    nodes = int(final.max()) + 1
    known = np.union1d(edges.ravel(), final.ravel())
    print(
        f"graph: {n:,} nodes, {edges.shape[0]:,} edges; {total:,} updates; final {final.shape[0]:,} edges", flush=True
    )
    # The answers a fresh build of the final edges gives, before any server takes the cores.
    fresh = ReachabilityIndex.from_edges(final[:, 0], final[:, 1], num_nodes=nodes, backend="cpu")
    order = np.argsort(final[:, 0], kind="stable")
    final_indptr = np.searchsorted(final[order, 0], np.arange(nodes + 1))
    rng = np.random.default_rng(9)
    walks = np.stack(downward_walk_pairs(final_indptr, final[order, 1], pair_count, seed=9), axis=1)
    pairs = np.concatenate([walks, known[rng.integers(0, known.size, size=(pair_count, 2))]])
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    expected = fresh.query_ids(pairs)[0]
    store = ["--database-url", database_url] if database_url else []
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="grail-bench-restart-") as tmp:
        root = Path(tmp)
        log = root / "server.log"
        seed = root / "seed"
        if database_url:
            store += ["--store", f"file://{root / 'store'}"]
        server = GrailServer(seed, log, *store).launch()
        try:
            server.wait_for("/health")
            text = "".join(f"{u} {v}\n" for u, v in edges.tolist()).encode()
            started = time.perf_counter()
            answer = httpx.post(
                f"{server.url}/graphs?wait=true&format=edgelist&name={RESTART_NAME}", content=text, timeout=3600
            )
            answer.raise_for_status()
            print(f"built through the server in {time.perf_counter() - started:.1f} s", flush=True)
        finally:
            server.kill()
        head, fill = _fill_journal(seed, database_url, RESTART_NAME, journal)
        print(f"{total:,} updates journaled in {fill:.1f} s", flush=True)
        for run in range(runs):
            data = root / f"run-{run}"
            shutil.copytree(seed, data)
            since = log.stat().st_size
            server = GrailServer(data, log, *store).launch()
            watch = _Watch(server.url, (int(walks[0, 0]), int(walks[0, 1])))
            try:
                watch.run(server.started_at, timeout=RESTART_WAIT_S)
                got: list[bool] = []
                record: dict[str, Any] = {}
                if watch.answered == watch.answered:
                    record = httpx.get(f"{server.url}/graphs/{RESTART_NAME}", timeout=60).json()
                    body = {"pairs": pairs.tolist()}
                    got = httpx.post(
                        f"{server.url}/graphs/{RESTART_NAME}/queries?unknown=false", json=body, timeout=600
                    ).json()["reachable"]
            finally:
                server.kill()
            wrong = int(np.count_nonzero(np.array(got, dtype=bool) != expected)) if got else len(pairs)
            during = [s for when, s in watch.health if when <= watch.answered]
            latencies = np.array(during or [float("nan")]) * 1e3
            row = [
                "restart",
                run + 1,
                f"{watch.first_health:.2f}",
                f"{watch.answered:.2f}",
                f"{watch.answered - watch.first_health:.2f}",
                _replay_log(log, since),
                f"{np.median(latencies):.0f} / {np.percentile(latencies, 99):.0f} / {latencies.max():.0f} ms "
                f"({len(during)})",
                f"{watch.conflicts} (Retry-After {', '.join(sorted(watch.retry_after)) or '-'})",
                " > ".join(watch.phases[:6]) + (" ..." if len(watch.phases) > 6 else ""),
                f"v{record.get('version')}/{head}: {len(got) - wrong:,}/{len(pairs):,} equal"
                if got
                else f"not answering after {RESTART_WAIT_S:.0f} s",
            ]
            print(_markdown(RESTART_HEADER, [row[1:]]).splitlines()[-1], flush=True)
            rows.append(row)
            assert not got or (wrong == 0 and record.get("version") == head), (wrong, record.get("version"), head)
    where = "PostgreSQL" if database_url else "SQLite (the data directory's file)"
    text = (
        f"DAG {n:,} nodes, {edges.shape[0]:,} edges, 1,000 levels; {total:,} journaled updates ({fill:.1f} s to "
        f"journal through the store); {where}; seconds from the server's launch:\n\n"
        + _markdown(RESTART_HEADER, [row[1:] for row in rows])
    )
    return text, rows


RESTART_HEADER = [
    "run",
    "/health s",
    "graph answers s",
    "after /health s",
    "server: load + replay (its log)",
    "/health p50 / p99 / max while loading (answers)",
    "409s",
    "/ready loading",
    "answers after",
]


# ---- output ------------------------------------------------------------------------------------------------


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _markdown(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _plot(rows: list[list[object]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    if not any(row[0] == "queries" for row in rows):
        return
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for axis, column, title in ((axes[0], 5, "random pairs"), (axes[1], 7, "positive-heavy pairs")):
        series: dict[str, list[tuple[int, float]]] = {}
        for row in rows:
            if row[0] == "queries" and row[3]:
                series.setdefault(f"{row[1]} {row[2]}", []).append((int(row[3]), float(row[column])))
        for label, points in series.items():
            axis.plot(*zip(*points, strict=True), marker="o", label=label)
        axis.axhline(3 if column == 5 else 5, color="grey", linestyle="--", linewidth=1)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("pending updates")
        axis.set_title(title)
    axes[0].set_ylabel("batch time / time with nothing pending")
    axes[1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--section",
        choices=("all", "issue", "queries", "apply", "apply-mixed", "auto-rebuild", "restart"),
        default="all",
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--pending", default=",".join(map(str, PENDING)))
    parser.add_argument("--graphs", default="", help="comma-separated names (default: all)")
    parser.add_argument("--before", default=None, help="another checkout to run the issue's table with")
    parser.add_argument("--mixed", type=int, default=1_000, help="apply-mixed, auto-rebuild: updates per stream")
    parser.add_argument(
        "--streams", default=",".join(STREAMS), help="queries, apply-mixed: the update streams (shaped, uniform)"
    )
    parser.add_argument("--stem", default="updates-vm")
    parser.add_argument("--journal", type=int, default=100_000, help="restart: journaled updates")
    parser.add_argument("--runs", type=int, default=3, help="restart: restarts from the same data")
    parser.add_argument("--database-url", default=None, help="restart: a PostgreSQL database instead of SQLite")
    parser.add_argument("--postgres", action="store_true", help="restart: on a throwaway PostgreSQL server")
    args = parser.parse_args()
    pending = tuple(int(x) for x in args.pending.split(","))
    streams = tuple(x for x in args.streams.split(",") if x)
    unknown = set(streams) - set(STREAMS)
    if unknown:
        parser.error(f"unknown streams: {', '.join(sorted(unknown))} (known: {', '.join(STREAMS)})")
    load = os.getloadavg()
    parts = [
        f"# Edge updates at scale ({os.cpu_count()} cores, load average {load[0]:.1f} at the start; "
        f"numba threads {os.environ.get('NUMBA_NUM_THREADS', 'all')})\n"
    ]
    rows: list[list[object]] = []
    sections = ("issue", "queries", "apply") if args.section == "all" else (args.section,)
    for section in sections:
        if section == "issue":
            text, found = issue_section(args.before)
        elif section == "restart":
            with contextlib.ExitStack() as stack:
                database_url = args.database_url
                if args.postgres:
                    from tests.postgres_server import PostgresServer

                    database_url = stack.enter_context(PostgresServer()).create_database("bench_restart")
                text, found = restart_section(args.scale, args.journal, args.runs, database_url, args.pairs)
        elif section == "queries":
            text, found = queries_section(
                args.scale, args.pairs, pending, [g for g in args.graphs.split(",") if g], streams
            )
        elif section == "apply-mixed":
            text, found = mixed_section(args.scale, [g for g in args.graphs.split(",") if g], args.mixed, streams)
        elif section == "auto-rebuild":
            only = [g for g in args.graphs.split(",") if g]
            text, found = auto_rebuild_section(args.scale, args.pairs, args.mixed, only, streams)
        else:
            text, found = apply_section(args.scale)
        print(f"\n## {section}\n{text}", flush=True)
        parts.append(f"\n## {section}\n\n{text}\n")
        rows += found
    parts.append(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.\n")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.stem}.md").write_text("".join(parts))
    with open(out / f"{args.stem}.csv", "w") as handle:
        for row in rows:
            handle.write(",".join(_cell(v).replace(",", "") for v in row) + "\n")
    _plot(rows, out / f"{args.stem}.png")


if __name__ == "__main__":
    main()
