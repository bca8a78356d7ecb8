"""Searches over one version of two source trees side by side (a change against its base), on generated
graphs: witness paths, listings (descendants and ancestors: a walk where the labels do not hold them) and
batches of pairs (under updates: searches from both ends).

Each round runs one process per tree, in turns (``--rounds`` rounds), on the same generated graphs: a deep
layered DAG and an R-MAT graph with cycles (``--scale`` x their default sizes), each with no pending update
and after ``--updates`` single-edge updates (half added random edges, half removed existing ones). Per case
and query: the median microseconds of one call over ``--pairs`` pairs (80% from downward walks, reachable
on the labels' graph; a listing is made from the pair's source for descendants, its target for ancestors;
``pairs`` times one ``query_batch`` of all of them), medians over the rounds, and whether both trees gave
the same answers (a path's length, a listing's count and method, a batch's answers).

    .venv/bin/python -m benchmarks.bench_path_trees --base /tmp/base [--tree .] [--rounds 3] [--pairs 300]
        [--scale 1.0] [--updates 100] [--queries paths,descendants,ancestors,pairs] [--stem paths-trees]

``--base``: a checkout of the base (``git archive <commit> | tar -x -C /tmp/base``); ``--base-numba-cache``:
a numba cache folder warm for it (else it compiles beside its sources on the first round). Both trees run
this file's worker, each with its own ``grail_core``. Writes benchmarks/results/<stem>.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
HEADER = ["graph", "nodes", "edges", "pending updates", "query", "calls", "base us", "tree us", "tree/base", "same"]
QUERIES = ("paths", "descendants", "ancestors", "pairs")


def _graphs(scale: float) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    from benchmarks.generate import rmat_edges
    from grail_core.synthetic import layered_dag

    nodes = max(1000, int(200_000 * scale))
    indptr, indices = layered_dag(nodes, max(10, nodes // 100), degree=3.0, seed=1)
    src = np.repeat(np.arange(nodes, dtype=np.int64), np.diff(indptr))
    rmat_scale = max(10, round(float(np.log2(max(1024, 131_072 * scale)))))
    rsrc, rdst = rmat_edges(rmat_scale, 4 << rmat_scale, seed=2)
    return {
        "deep-dag": (src, indices.astype(np.int64), nodes),
        "rmat-cycles": (rsrc.astype(np.int64), rdst.astype(np.int64), 1 << rmat_scale),
    }


def _pairs(src: np.ndarray, dst: np.ndarray, nodes: int, count: int) -> np.ndarray:
    from grail_core.synthetic import csr_from_edges, downward_walk_pairs

    indptr, indices = csr_from_edges(nodes, src, dst)
    return np.stack(downward_walk_pairs(indptr, indices, count, seed=3), axis=1)


def _updates(src: np.ndarray, dst: np.ndarray, nodes: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    added = rng.integers(0, nodes, size=(count - count // 2, 2))
    removed = np.stack([src, dst], axis=1)[rng.choice(src.size, size=count // 2, replace=False)]
    return added, removed


def _calls(version: Any, query: str, pairs: np.ndarray) -> list[Callable[[], Any]]:
    """One call per pair (a batch: one call of all), each answering what both trees must agree on."""

    def path(s: int, t: int) -> int:
        found = version.path_ids(s, t)
        return -1 if found is None else int(found.size)

    def listed(u: int, forward: bool) -> list[Any]:
        made = version.listing(u, forward)
        return [made.count, made.method]

    if query == "pairs":
        return [lambda: version.query_batch(pairs).tolist()]
    if query == "paths":
        return [lambda s=s, t=t: path(s, t) for s, t in pairs.tolist()]
    forward = query == "descendants"
    return [lambda u=(s if forward else t): listed(u, forward) for s, t in pairs.tolist()]


def worker(scale: float, pairs_count: int, updates: int, queries: list[str]) -> None:
    """One tree's timings, one JSON line per case and query (run with the tree first on the path)."""
    from grail_core import ReachabilityIndex

    for name, (src, dst, nodes) in _graphs(scale).items():
        index = ReachabilityIndex.from_edges(src, dst, num_nodes=nodes)
        pairs = _pairs(src, dst, nodes, pairs_count)
        added, removed = _updates(src, dst, nodes, updates)
        for pending, version in ((0, index.current()), (updates, index.current().updated(added, removed))):
            for query in queries:
                calls = _calls(version, query, pairs)
                calls[0]()  # compiled and warm
                seconds, answers = [], []
                for call in calls:
                    started = time.perf_counter()
                    answers.append(call())
                    seconds.append(time.perf_counter() - started)
                case = {"graph": name, "nodes": nodes, "edges": int(src.size), "pending": pending, "query": query}
                line = {**case, "calls": len(calls), "us": statistics.median(seconds) * 1e6, "answers": answers}
                print(json.dumps(line), flush=True)


def _run(root: Path, args: argparse.Namespace, numba_cache: Path | None) -> list[dict]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--queries", args.queries]
    command += ["--scale", str(args.scale), "--pairs", str(args.pairs), "--updates", str(args.updates)]
    # The tree first; what the caller's path had after it (e.g. packages installed with --target) stays.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    if numba_cache is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache)
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the worker of {root} failed:\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path)
    parser.add_argument("--base-numba-cache", type=Path)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--stem", default="paths-trees")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.scale, args.pairs, args.updates, args.queries.split(","))
        return
    if args.base is None:
        parser.error("--base is required")
    load = os.getloadavg()
    runs: dict[str, list[list[dict]]] = {"base": [], "tree": []}
    for round_ in range(args.rounds):
        for which, root, cache in (("base", args.base, args.base_numba_cache), ("tree", args.tree, None)):
            runs[which].append(_run(root.resolve(), args, cache))
        print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    rows = []
    for position, case in enumerate(runs["base"][0]):
        base_us = statistics.median(r[position]["us"] for r in runs["base"])
        tree_us = statistics.median(r[position]["us"] for r in runs["tree"])
        same = all(r[position]["answers"] == case["answers"] for r in runs["tree"])
        row = [case["graph"], case["nodes"], case["edges"], case["pending"], case["query"], case["calls"]]
        rows.append([*row, base_us, tree_us, tree_us / base_us, "yes" if same else "NO"])
    end = os.getloadavg()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # here only: a worker imports its tree's
    from benchmarks.common import markdown_table

    text = (
        f"# Searches: {args.tree.resolve().name} against {args.base.resolve().name} ({os.cpu_count()} cores; "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start, {end[0]:.1f} at the end)\n\n"
        f"`python -m benchmarks.bench_path_trees --rounds {args.rounds} --pairs {args.pairs} --scale {args.scale:g}"
        f" --updates {args.updates} --queries {args.queries}`: median microseconds a call, medians of "
        f"{args.rounds} rounds, the trees taken in turns.\n\n" + markdown_table(HEADER, rows) + "\n"
    )
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.stem}.md").write_text(text)


if __name__ == "__main__":
    main()
