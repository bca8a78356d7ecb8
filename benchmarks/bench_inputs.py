"""Reading graph files: parse rate (MB/s of text) and peak memory per format and file size, on this machine.

R-MAT graphs (benchmarks/generate.py: cycles, self loops, repeated edges) of several sizes are written in every
format grail reads, with sparse 40-bit integer names and with package-like string names, as the tools users
export from write them (pyarrow's CSV writer as pandas' to_csv writes it, SNAP-style text with '#' comments,
Parquet, Feather, Matrix Market, networkx's adjacency list, GraphML, node-link JSON). Each read runs in a fresh
process (``read_graph`` on the file, format told), after a warm-up read of a small file in that process (numba's
cache loaded, pyarrow's threads up); the process reports the read's seconds and its peak RSS above the RSS
before the read (``VmHWM``). Runs take the formats in turns; medians are printed and saved.

``--before REF`` also reads the edge lists with the readers of git revision REF (default: none), side by side
in the same turns: the hand-written scanner that the pyarrow reader replaced.

    .venv/bin/python benchmarks/bench_inputs.py [--edges 1000000 4000000 12000000] [--runs 3] [--before main]

Writes benchmarks/results/inputs.md and .csv.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import markdown_table, write_results  # noqa: E402
from benchmarks.generate import package_names, rmat_edges, sparse_names  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"

# The child: warm up on a small file of the same format, then time one read and its peak memory.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from grail_core.readers import read_graph
path, warm, fmt = sys.argv[2], sys.argv[3], sys.argv[4] or None
read_graph(warm, format=fmt)

def status_kib(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1])

import gc; gc.collect()
before = status_kib("VmRSS:")
started = time.perf_counter()
graph = read_graph(path, format=fmt)
seconds = time.perf_counter() - started
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent through exec.
peak = status_kib("VmHWM:")
print(json.dumps({"seconds": seconds, "peak_kib": peak - before, "nodes": int(graph.num_nodes),
                  "edges": int(graph.num_edge_entries)}))
"""


@dataclass
class Case:
    label: str  # what the file is
    format: str
    suffix: str
    write: Callable[[Path, np.ndarray, np.ndarray, object], None]
    names: str  # "int" or "str"
    max_edges: int = 1 << 62  # formats read far slower than the rest are measured on the smaller graphs only
    before: bool = False  # whether the older readers take it too


def _names(kind: str, nodes: int, seed: int) -> object:
    import pyarrow as pa

    if kind == "int":
        return pa.array(sparse_names(nodes, seed))
    return pa.array(package_names(nodes, seed))


def _columns(src: np.ndarray, dst: np.ndarray, names: object) -> tuple[object, object]:
    return names.take(src), names.take(dst)  # type: ignore[attr-defined]


def _write_csv(path: Path, src: np.ndarray, dst: np.ndarray, names: object, delimiter: str = ",") -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    sources, targets = _columns(src, dst, names)
    table = pa.table({"source": sources, "target": targets})
    options = pacsv.WriteOptions(delimiter=delimiter, quoting_style="needed")
    pacsv.write_csv(table, str(path), options)


def _write_snap(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    sources, targets = _columns(src, dst, names)
    with open(path, "wb") as out:
        out.write(b"# Directed graph: benchmark\n# FromNodeId\tToNodeId\n")
        options = pacsv.WriteOptions(delimiter="\t", include_header=False, quoting_style="none")
        pacsv.write_csv(pa.table({"u": sources, "v": targets}), out, options)


def _write_parquet(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sources, targets = _columns(src, dst, names)
    pq.write_table(pa.table({"source": sources, "target": targets}), str(path))


def _write_feather(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    import pyarrow as pa
    import pyarrow.feather as feather

    sources, targets = _columns(src, dst, names)
    feather.write_feather(pa.table({"source": sources, "target": targets}), str(path))


def _write_mtx(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    nodes = int(max(src.max(), dst.max())) + 1
    with open(path, "wb") as out:
        out.write(b"%%MatrixMarket matrix coordinate pattern general\n")
        out.write(f"{nodes} {nodes} {src.size}\n".encode())
        options = pacsv.WriteOptions(delimiter=" ", include_header=False, quoting_style="none")
        pacsv.write_csv(pa.table({"i": src.astype(np.int64) + 1, "j": dst.astype(np.int64) + 1}), out, options)


def _write_adjlist(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    text = np.asarray(names.to_pylist(), dtype=object)  # type: ignore[attr-defined]
    starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
    ends = np.r_[starts[1:], src.size]
    with open(path, "w") as out:
        out.write("# networkx-style adjacency list\n")
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            out.write(f"{text[src[start]]} {' '.join(text[dst[start:end]])}\n")


def _write_graphml(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    import pyarrow.compute as pc

    text = pc.cast(names, "string")
    nodes = np.unique(np.concatenate([src, dst]))
    with open(path, "w") as out:
        out.write('<?xml version="1.0" encoding="utf-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n')
        out.write('<graph edgedefault="directed">\n')
        for name in text.take(nodes).to_pylist():
            out.write(f'<node id="{name}"/>\n')
        for u, v in zip(text.take(src).to_pylist(), text.take(dst).to_pylist(), strict=True):
            out.write(f'<edge source="{u}" target="{v}"/>\n')
        out.write("</graph>\n</graphml>\n")


def _write_node_link(path: Path, src: np.ndarray, dst: np.ndarray, names: object) -> None:
    sources, targets = (column.to_pylist() for column in _columns(src, dst, names))
    nodes = np.unique(np.concatenate([src, dst]))
    document = {
        "directed": True,
        "multigraph": True,
        "nodes": [{"id": name} for name in names.take(nodes).to_pylist()],  # type: ignore[attr-defined]
        "edges": [{"source": u, "target": v} for u, v in zip(sources, targets, strict=True)],
    }
    path.write_text(json.dumps(document))


CASES = [
    Case("CSV, header, integer names", "edgelist", ".csv", _write_csv, "int", before=True),
    Case("CSV, header, string names", "edgelist", ".csv", _write_csv, "str", before=True),
    Case("SNAP text, '#' comments, integer names", "edgelist", ".txt", _write_snap, "int", before=True),
    Case("Parquet, integer names", "parquet", ".parquet", _write_parquet, "int"),
    Case("Parquet, string names", "parquet", ".parquet", _write_parquet, "str"),
    Case("Feather (Arrow IPC), string names", "arrow", ".feather", _write_feather, "str"),
    Case("Matrix Market, pattern", "mtx", ".mtx", _write_mtx, "int"),
    Case("adjacency list, string names", "adjlist", ".adjlist", _write_adjlist, "str", max_edges=4_000_000),
    Case("GraphML, string names", "graphml", ".graphml", _write_graphml, "str", max_edges=1_000_000),
    Case("node-link JSON, string names", "json", ".json", _write_node_link, "str", max_edges=1_000_000),
]


def _graph(edges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    scale = max(10, int(np.log2(edges / 8)))  # about 8 edges a node, many nodes without any
    src, dst = rmat_edges(scale, edges, seed)
    return src.astype(np.int64), dst.astype(np.int64), 1 << scale


def _checkout(ref: str, folder: Path) -> Path:
    """The grail_core of git revision ``ref``, unpacked under ``folder``."""
    target = folder / f"grail-{ref}"
    target.mkdir()
    archive = subprocess.run(["git", "archive", ref, "grail_core"], cwd=REPO, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def _run(code_root: Path, path: Path, warm: Path, format: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(code_root), str(path), str(warm), format],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", type=int, nargs="+", default=[1_000_000, 4_000_000, 12_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", default=None, help="git revision whose readers run side by side")
    parser.add_argument("--only", nargs="*", default=None, help="labels (substrings) of the cases to run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--stem", default="inputs")
    args = parser.parse_args()
    cases = [case for case in CASES if not args.only or any(word in case.label for word in args.only)]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-inputs-") as scratch:
        folder = Path(scratch)
        roots = {"pyarrow readers": REPO}
        if args.before:
            roots[f"readers of {args.before}"] = _checkout(args.before, folder)
        warm_src, warm_dst, warm_nodes = _graph(2_000, seed=1)
        jobs = []  # (case, edges, path, warm path, reader, root)
        for edges in args.edges:
            src, dst, nodes = _graph(edges)
            names = {kind: _names(kind, nodes, seed=2) for kind in ("int", "str")}
            warm_names = {kind: _names(kind, warm_nodes, seed=3) for kind in ("int", "str")}
            for number, case in enumerate(cases):
                if edges > case.max_edges:
                    continue
                path = folder / f"{number}-{edges}{case.suffix}"
                warm = folder / f"{number}-warm{case.suffix}"
                case.write(path, src, dst, names[case.names])
                if not warm.exists():
                    case.write(warm, warm_src, warm_dst, warm_names[case.names])
                for reader, root in roots.items():
                    if reader == "pyarrow readers" or case.before:
                        jobs.append((case, edges, path, warm, reader, root))
            print(f"wrote the files of {edges:,} edges", flush=True)
        samples: dict[int, list[dict[str, float]]] = {k: [] for k in range(len(jobs))}
        for run in range(args.runs):
            for k, (case, _, path, warm, _, root) in enumerate(jobs):
                samples[k].append(_run(root, path, warm, case.format))
            print(f"run {run + 1} of {args.runs} done", flush=True)
        header = [
            "format",
            "reader",
            "edges",
            "nodes",
            "file MB",
            "median s",
            "MB/s",
            "peak RSS MB",
            "RSS B/edge",
            "added B/edge",
        ]
        rows = []
        smaller: dict[tuple[str, str], tuple[int, float]] = {}  # the last size's (edges, peak) of each reader
        for k, (case, edges, path, _, reader, _) in enumerate(jobs):
            seconds = statistics.median(sample["seconds"] for sample in samples[k])
            peak = statistics.median(sample["peak_kib"] for sample in samples[k]) * 1024
            size = path.stat().st_size
            nodes = int(samples[k][0]["nodes"])
            # The memory the larger graph added over the smaller one, per edge added: what grows with the graph.
            last = smaller.get((case.label, reader))
            added = round((peak - last[1]) / (edges - last[0]), 1) if last else "-"
            smaller[(case.label, reader)] = (edges, peak)
            rows.append(
                [
                    case.label,
                    reader,
                    edges,
                    nodes,
                    round(size / 1e6, 1),
                    seconds,
                    size / 1e6 / seconds,
                    round(peak / 1e6),
                    round(peak / edges, 1),
                    added,
                ]
            )
    load_after = os.getloadavg()
    import numba
    import pyarrow

    lines = [
        "# Reading graph files: parse rate and peak memory per format",
        "",
        f"`{' '.join(['benchmarks/bench_inputs.py', *sys.argv[1:]])}`",
        "",
        f"{platform.machine()}, {os.cpu_count()} cores, pyarrow {pyarrow.__version__}, numba {numba.__version__}; "
        f"median of {args.runs} runs taken in turns, each read in a fresh process after a warm-up read; "
        f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after: {' '.join(f'{x:.2f}' for x in load_after)}",
        "",
        "MB/s: the file's bytes (decimal MB) over the read's seconds (text to ids and names: a `GraphInput`). "
        "Peak RSS: the process's peak resident memory above its RSS before the read; B/edge: that over the "
        "edges; added B/edge: the peak's growth from the next smaller graph over the edges added (what grows "
        "with the graph, the fixed cost of threads and blocks aside). The graph itself (src and dst as int64) is "
        "16 B/edge, plus its names.",
        "",
        markdown_table(header, rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_results(args.out, args.stem, text, header, rows)


if __name__ == "__main__":
    main()
