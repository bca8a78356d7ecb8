"""Index builds from integer edge arrays, each in a fresh process: phases, where each ran, first and second build.

Usage: python benchmarks/bench_build.py [--graphs rmat-200M-d6,...] [--backends cpu,cuda] [--runs 2] [--builds 2]
       [--dims 2] [--cache DIR] [--out DIR] [--tag NAME] [--sort]

Graphs (generated here, seeded; cached as .npy files under ``--cache``):

* ``rmat-<edges>[-d<degree>]``: R-MAT with cycles, self loops and duplicates (``benchmarks.generate.rmat_edges``)
  over 2**k nodes, k such that the average out-degree is ``degree`` (default 6): ``rmat-200M-d6`` has
  33.5M nodes, ``rmat-200M-d24`` 8.4M;
* ``dag-<edges>-L<levels>``: a DAG of ``levels`` layers, a third as many nodes as edges, each edge from a
  random node to a random node of one of the next four layers (the next most often), node ids randomly
  permuted and edges shuffled (``dag_edges``);
* ``uniprot_like``, ``citation_like`` (``benchmarks.generate``, ``@<scale>``), ``chain-<nodes>``, ``cycle-<nodes>``.

Every build runs in a FRESH process that first does what a build worker of the service does at its start
(``service.worker.warm_up_builds``: the kernels, from numba's and CuPy's disk caches once filled), then builds
the graph ``--builds`` times (``ReachabilityIndex.from_edges`` to a ready index): the first build is the one
a user's upload meets, the second shows what the first still paid for. Per graph the backends take turns,
``--runs`` processes each. Reported per build: the phases with where each ran and the build plan's
predictions (``IndexStats.build_plan``), the process's peak RSS after its first build (``ru_maxrss``: the
edge arrays loaded are included), how long its start took (warm-up, and from interpreter start to ready),
and the kernels it compiled rather than loaded (``kernels.compiled.compilations``). With ``--sort`` a
fresh process also times numpy's sort of the edges as int64 keys, for reference. Writes
``build-<tag>.md`` / ``.csv`` and ``build-<tag>.png`` under ``--out``.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # before the imports: a fresh process's start counts them

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, markdown_table, write_results  # noqa: E402

# The shapes of issue 24's targets.
DEFAULT_GRAPHS = "rmat-200M-d6,rmat-200M-d24,dag-20M-L3000,dag-20M-L100000"
SORT = "numpy-sort"
SEED = 24  # this benchmark's own graphs
_UNITS = {"K": 10**3, "M": 10**6, "G": 10**9}


def _count(text: str) -> int:
    return int(float(text[:-1]) * _UNITS[text[-1]]) if text[-1] in _UNITS else int(text)


def dag_edges(edges: int, levels: int, seed: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(nodes, src, dst) of a DAG of ``levels`` equal layers and ``edges`` edges (``edges // 3`` nodes): each
    edge from a random node to a random node of the layer 1 to 4 below it (1 with probability 0.6, k + 1
    with 0.6 x 0.4**k), the last layer's nodes as sinks; ids permuted, edges shuffled, duplicates kept."""
    rng = np.random.default_rng(seed)
    n = max(levels, edges // 3)
    starts = -(-np.arange(levels + 1, dtype=np.int64) * n // levels)  # layer l is [starts[l], starts[l + 1])
    src = rng.integers(0, starts[-2], size=edges, dtype=np.int64)
    layer = np.searchsorted(starts, src, side="right") - 1
    target = np.minimum(layer + np.minimum(rng.geometric(0.6, size=edges), 4), levels - 1)
    low, high = starts[target], starts[target + 1]
    dst = low + (rng.random(edges) * (high - low)).astype(np.int64)
    ids = rng.permutation(n).astype(np.int32)
    order = rng.permutation(edges)
    return n, ids[src[order]], ids[dst[order]]


def make_graph(name: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(num_nodes, src, dst) of a named benchmark graph."""
    from benchmarks.generate import generate, rmat_edges

    kind, _, size = name.partition("-")
    if kind == "rmat":
        count, _, degree = size.partition("-d")
        edges = _count(count)
        scale = max(4, round(np.log2(edges / float(degree or 6))))
        src, dst = rmat_edges(scale, edges, seed=SEED)
        return 1 << scale, src, dst
    if kind == "dag":
        count, _, levels = size.partition("-L")
        return dag_edges(_count(count), _count(levels), SEED)
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
    order = np.random.default_rng(SEED).permutation(src.size)
    return n, src[order], indices[order].astype(np.int32)


def cached_graph(name: str, cache: Path) -> Path:
    """The graph's edge arrays as .npy files in ``cache / name`` (generated once)."""
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


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(folder: Path, mode: str, dims: int, builds: int) -> dict[str, object]:
    """One fresh process: the numpy sort, or a build worker's start-up warm-up and ``builds`` builds."""
    n, src, dst = _load(folder) if mode == SORT else (0, None, None)
    if mode == SORT:
        keys = src.astype(np.int64) * n + dst
        start = time.perf_counter()
        np.sort(keys)
        return {"seconds": time.perf_counter() - start}
    from grail_core import ReachabilityIndex
    from kernels.compiled import compilations
    from service.worker import warm_up_builds

    start = time.perf_counter()
    warm_up_builds(mode)
    result: dict[str, object] = {
        "warm_up": time.perf_counter() - start,
        "ready": time.perf_counter() - _STARTED,
        "compiled_in_warm_up": sum(compilations().values()),
    }
    n, src, dst = _load(folder)
    done = []
    for _ in range(builds):
        before = compilations()
        start = time.perf_counter()
        index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend=mode, dims=dims)
        seconds = time.perf_counter() - start
        stats = index.stats
        del index
        after = compilations()
        done.append(
            {
                "seconds": seconds,
                "peak_rss": _peak_rss(),
                "phases": {k: v for k, v in stats.phase_seconds.items() if "." not in k},
                "parts": {k: v for k, v in stats.phase_seconds.items() if "." in k},
                "backends": dict(stats.phase_backends),
                "plan": dict(getattr(stats, "build_plan", {}) or {}),
                "compiled": {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)},
                "edges": stats.edges,
                "dag_nodes": stats.dag_nodes,
                "dag_edges": stats.dag_edges,
                "levels": stats.levels,
            }
        )
    result["builds"] = done
    return result


def run_child(folder: Path, mode: str, dims: int, builds: int) -> dict[str, object]:
    command = [sys.executable, __file__, "--child", str(folder), mode, "--dims", str(dims), "--builds", str(builds)]
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
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.9 * len(rows)), 8), sharex=True)
    base = np.zeros(len(rows))
    for phase in phases:
        values = np.array([float(r["phases"].get(phase, 0.0)) for r in rows])
        top.bar(x, values, bottom=base, label=phase)
        base += values
    top.scatter(x, [float(r["second"]) for r in rows], marker="_", s=400, color="black", label="second build")
    top.set_ylabel("first build in a fresh process, s (median)")
    top.set_yscale("log")
    top.legend(fontsize=7, ncol=3)
    top.set_title(title)
    bottom.bar(x, [float(r["peak_rss"]) / 1e9 for r in rows])
    bottom.axhline(8, color="red", linestyle="--", label="target at 200M edges: 8 GB")
    bottom.set_ylabel("peak RSS, GB")
    bottom.legend(fontsize=7)
    bottom.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _phases_where(row: dict[str, object]) -> str:
    return " ".join(f"{p}:{b}" for p, b in row["backends"].items())


def _plan(row: dict[str, object]) -> str:
    """Per phase: predicted seconds on the CPU / on the GPU ('-' where the build did not predict one)."""

    def seconds(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else "-"

    return " ".join(f"{phase}={seconds(v.get('cpu'))}/{seconds(v.get('cuda'))}" for phase, v in row["plan"].items())


def report(rows: list[dict[str, object]], args: argparse.Namespace, title: str, stem: str, load: tuple) -> None:
    """Prints and saves the table (markdown, CSV) and the chart of the rows measured so far."""
    phase_names = list(dict.fromkeys(p for r in rows for p in r["phases"]))
    cpu = {r["graph"]: r["seconds"] for r in rows if r["backend"] == "cpu"}
    header = [
        "graph",
        "backend",
        "edges in",
        "edges",
        "DAG nodes",
        "DAG edges",
        "levels",
        *[f"{p} s" for p in phase_names],
        "first build s",
        "second build s",
        "first / second",
        "first / CPU first",
        "first builds s",
        "peak RSS GB",
        "where each phase ran",
        "plan: predicted s cpu/cuda",
        "warm-up s",
        "ready s",
        "kernels compiled (warm-up / builds)",
        "numpy sort s",
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
            r["second"],
            r["seconds"] / r["second"] if r["second"] else "-",
            r["seconds"] / cpu[r["graph"]] if r["graph"] in cpu else "-",
            " ".join(map(str, r["runs"])),
            r["peak_rss"] / 1e9,
            _phases_where(r),
            _plan(r),
            r["warm_up"],
            r["ready"],
            f"{r['compiled_in_warm_up']} / {r['compiled']}",
            r["sort"],
            " ".join(f"{p}={v:.3g}" for p, v in r["parts"].items()),
        ]
        for r in rows
    ]
    text = (
        f"# {title}\n\nEach build in a fresh process after a build worker's start-up warm-up; median of "
        f"{args.runs} processes per graph and backend, the backends in turns (module docstring of "
        f"benchmarks/bench_build.py). Load average at the start: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.\n\n"
        + markdown_table(header, table)
        + "\n"
    )
    print(text, flush=True)
    write_results(args.out, stem, text, header, table)
    chart(rows, phase_names, args.out / f"{stem}.png", title)


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def summarize(name: str, folder: Path, backend: str, runs: list[dict], sort: float) -> dict[str, object]:
    firsts = [run["builds"][0] for run in runs]
    seconds = [run["builds"][1]["seconds"] for run in runs if len(run["builds"]) > 1]
    last = firsts[-1]
    edges_in = int(np.load(folder / "src.npy", mmap_mode="r").size)
    return {
        "graph": name,
        "backend": backend,
        "edges_in": edges_in,
        "edges": last["edges"],
        "dag_nodes": last["dag_nodes"],
        "dag_edges": last["dag_edges"],
        "levels": last["levels"],
        "seconds": _median([b["seconds"] for b in firsts]),
        "second": _median(seconds),
        "runs": [round(float(b["seconds"]), 3) for b in firsts],
        "phases": {p: _median([b["phases"].get(p, 0.0) for b in firsts]) for p in last["phases"]},
        "parts": {p: _median([b["parts"].get(p, 0.0) for b in firsts]) for p in last["parts"]},
        "backends": last["backends"],
        "plan": last["plan"],
        "peak_rss": _median([b["peak_rss"] for b in firsts]),
        "warm_up": _median([run["warm_up"] for run in runs]),
        "ready": _median([run["ready"] for run in runs]),
        "compiled_in_warm_up": max(run["compiled_in_warm_up"] for run in runs),
        "compiled": sum(sum(b["compiled"].values()) for run in runs for b in run["builds"]),
        "sort": sort,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS)
    parser.add_argument("--backends", default="cpu,cuda", help="cuda is skipped where there is no GPU")
    parser.add_argument("--runs", type=int, default=2, help="fresh processes per graph and backend")
    parser.add_argument("--builds", type=int, default=2, help="builds per process (the first is the one reported)")
    parser.add_argument("--dims", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/grail-bench-build"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", default=None, help="name of the result files (default: host and threads)")
    parser.add_argument("--sort", action="store_true", help="also time numpy's sort of the edge keys")
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), args.child[1], args.dims, args.builds)), flush=True)
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
        sort = run_child(folder, SORT, args.dims, 1)["seconds"] if args.sort else float("nan")
        results: dict[str, list[dict]] = {backend: [] for backend in backends}
        for _ in range(args.runs):
            for backend in backends:
                run = run_child(folder, backend, args.dims, args.builds)
                results[backend].append(run)
                times = " ".join(f"{b['seconds']:.3f}" for b in run["builds"])
                print(f"{name} {backend}: ready {run['ready']:.2f} s, builds {times} s", flush=True)
        for backend in backends:
            rows.append(summarize(name, folder, backend, results[backend], sort))
            print(rows[-1], flush=True)
        # Saved after every graph, so that a run cut short keeps what it measured.
        report(rows, args, title, f"build-{tag}", load)


if __name__ == "__main__":
    main()
