"""What one graph's index costs a serving replica: bytes on disk (what the artifact store holds and a replica
downloads), bytes resident once every query form has been used, and the load's cost, at several sizes.

For each shape and size it builds the index on the CPU, saves it as the service does (``Version.save``: one
``.npy`` per array and a manifest), then, in a fresh process (so that the build's memory does not blur the
figures), loads it as a replica does (memory-mapped, every checksum verified) and uses every query form: a
batch of random pairs (the packed label records), a path, an ancestor listing and a descendant count (the
reverse graph, the DAG's parents, the post-orders). It reports

- the files' bytes per array group (labels and DAG, the graph's CSR, the names), per node and per edge;
- the anonymous memory the process gained (``RssAnon``: what the derived forms allocate) and the index file
  pages it touched (``RssFile``), from ``/proc/self/status``;
- the seconds of ``load_version`` with checksums verified (sha256 of every file; the page cache is warm, so
  this is the CPU side of a load, not the disk's or the network's), and of the first use of every query form
  (which builds the derived forms).

Shapes: ``rmat`` (R-MAT over 2**floor(log2(edges / 8)) nodes, an average degree of about 14: cycles, a giant
strongly connected component, self loops, duplicates, isolated nodes) with three kinds of node names (``range``:
the ids 0..n-1 themselves; ``int``: random 40-bit integers; ``str``: package-like strings), and ``layered`` (a
DAG of 10,000 layers, degree 3: every node is its own DAG node, the labels' worst case per edge).

    .venv/bin/python benchmarks/bench_index_size.py [--edges 1000000 4000000 16000000] [--out DIR]

Writes ``index-size.md`` and ``index-size.csv`` under ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import RESULTS, markdown_table, write_results  # noqa: E402
from benchmarks.generate import package_names, rmat_edges, sparse_names  # noqa: E402
from grail_core.index import ReachabilityIndex  # noqa: E402
from grail_core.names import NodeNames  # noqa: E402
from grail_core.readers import GraphInput  # noqa: E402
from grail_core.synthetic import layered_dag  # noqa: E402
from grail_core.version import Version, load_version  # noqa: E402

SHAPES = ("rmat/range", "rmat/int", "rmat/str", "layered/range")
DEFAULT_EDGES = (1_000_000, 4_000_000, 16_000_000)
RMAT_DEGREE = 8
LAYERED_DEGREE = 3
LAYERS = 10_000
QUERY_PAIRS = 100_000
# Which saved arrays make up each group of the report.
GROUPS = {"labels+DAG": "query_", "graph CSR": "graph_", "names": "names_"}


def make_graph(shape: str, edges: int) -> GraphInput:
    """The shape's graph with about ``edges`` edges (before duplicates and self loops are removed)."""
    kind, names = shape.split("/")
    if kind == "rmat":
        scale = max(int(np.log2(edges / RMAT_DEGREE)), 4)
        src, dst = rmat_edges(scale, edges, seed=1)
        nodes = 1 << scale
    else:
        nodes = edges // LAYERED_DEGREE
        indptr, dst = layered_dag(nodes, LAYERS, degree=LAYERED_DEGREE, seed=1)
        src = np.repeat(np.arange(nodes), np.diff(indptr))
    if names == "range":
        table = NodeNames.identity(nodes)
    elif names == "int":
        table = NodeNames.of(sparse_names(nodes, seed=1), integers=True)
    else:
        table = NodeNames.of(package_names(nodes, seed=1), integers=False)
    return GraphInput(nodes, np.asarray(src, np.int64), np.asarray(dst, np.int64), table, "arrays")


def _rss_kib() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            fields[key] = int(value.split()[0])
    return fields


def _use_every_form(version: Version) -> None:
    """A pair batch, a path, an ancestor listing and a descendant count on ``version``."""
    names = version.labels.names
    ids = np.random.default_rng(0).integers(0, names.size, size=(QUERY_PAIRS, 2))
    version.query_batch(list(zip(names.names_of(ids[:, 0]), names.names_of(ids[:, 1]), strict=True)))
    source, target = names.names_of(ids[0])
    version.path(source, target)
    version.ancestor_ids(target)
    version.count_descendants(source)


def measure(directory: Path) -> dict[str, float]:
    """In a fresh process: load the saved index as a replica does and use every query form, once before the
    measurement (the kernels and modules load then) and once measured, the first copy kept alive."""
    warm = load_version(directory, backend="cpu", mmap=True, verify=True)
    _use_every_form(warm)
    before = _rss_kib()
    started = time.perf_counter()
    version = load_version(directory, backend="cpu", mmap=True, verify=True)
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    _use_every_form(version)
    first_use_seconds = time.perf_counter() - started
    after = _rss_kib()
    return {
        "load_s": load_seconds,
        "first_use_s": first_use_seconds,
        "anon_bytes": (after["RssAnon"] - before["RssAnon"]) * 1024,
        "file_bytes_touched": (after["RssFile"] - before["RssFile"]) * 1024,
    }


def run_case(shape: str, edges: int, scratch: Path) -> dict[str, object]:
    graph = make_graph(shape, edges)
    started = time.perf_counter()
    index = ReachabilityIndex.build(graph, backend="cpu")
    build_seconds = time.perf_counter() - started
    stats = index.stats
    directory = scratch / f"{shape.replace('/', '-')}-{edges}"
    index.save(directory)
    del index, graph
    manifest = json.loads((directory / "manifest.json").read_text())
    groups = {group: 0 for group in GROUPS}
    for name, entry in manifest["arrays"].items():
        group = next(g for g, prefix in GROUPS.items() if name.startswith(prefix))
        groups[group] += entry["bytes"]
    total = sum(groups.values())
    child = subprocess.run([sys.executable, __file__, "--measure", str(directory)], capture_output=True, text=True)
    if child.returncode:
        raise RuntimeError(f"measuring {directory.name} failed:\n{child.stderr}")
    measured = json.loads(child.stdout.splitlines()[-1])
    row: dict[str, object] = {
        "shape": shape,
        "nodes": stats.nodes,
        "edges": stats.edges,
        "dag_nodes": stats.dag_nodes,
        "dag_edges": stats.dag_edges,
        "build_s": round(build_seconds, 2),
        **{f"{group} MB": round(size / 1e6, 1) for group, size in groups.items()},
        "files MB": round(total / 1e6, 1),
        "bytes/edge": round(total / stats.edges, 1),
        "bytes/(node+edge)": round(total / (stats.nodes + stats.edges), 1),
        "derived MB": round(float(measured["anon_bytes"]) / 1e6, 1),
        "resident bytes/edge": round((total + float(measured["anon_bytes"])) / stats.edges, 1),
        "load s": round(float(measured["load_s"]), 3),
        "verify GB/s": round(total / float(measured["load_s"]) / 1e9, 2),
        "first use s": round(float(measured["first_use_s"]), 2),
    }
    for path in directory.iterdir():
        path.unlink()
    directory.rmdir()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", type=int, nargs="+", default=list(DEFAULT_EDGES))
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    rows = []
    with tempfile.TemporaryDirectory(prefix="grail-index-size-") as scratch:
        for edges in args.edges:
            for shape in args.shapes:
                row = run_case(shape, edges, Path(scratch))
                print(json.dumps(row), flush=True)
                rows.append(row)
    header = list(rows[0])
    table = markdown_table(header, [list(row.values()) for row in rows])
    text = (
        "# Index size per graph: files, resident memory, load\n\n"
        f"`benchmarks/bench_index_size.py --edges {' '.join(map(str, args.edges))}`; {platform.node() or 'vm'}, "
        f"{os.cpu_count()} cores, load average {load} at the start. CPU builds, dims=2, 64 hubs.\n"
        "`files`: the saved index (what the artifact store holds and a replica fetches); `derived`: anonymous "
        "memory a fresh process gained after loading (mmap, checksums verified) and using a pair batch, a path, an "
        "ancestor listing and a descendant count; `resident`: both; `load s`: `load_version` with every checksum "
        "verified, page cache warm (the CPU side of a load); `first use s`: the four queries' first run, which builds "
        "the derived forms.\n\n" + table + "\n"
    )
    write_results(args.out, "index-size", text, header, [list(row.values()) for row in rows])
    print(table)


if __name__ == "__main__":
    main()
