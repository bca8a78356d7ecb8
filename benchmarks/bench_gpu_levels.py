"""What a level costs the GPU's level-synchronous walks on deep DAGs, and the GPU labels against the CPU's.

Usage: python benchmarks/bench_gpu_levels.py FOLDER... [--out DIR] [--tag NAME]

Each FOLDER holds a graph's edge arrays as ``benchmarks/bench_build.py`` caches them (``dag-20M-L3000``,
``dag-20M-L100000``). Per graph: the CPU build's DAG and its labeling graph, then on the device Kahn's level
discovery (``frontier.build_level_queues``) and a sweep over its levels (``frontier.node_levels``) with
``EngineConfig.narrow`` at 0 (every level a grid's) and at 256, 1024 and 4096 nodes (narrow levels a
block's), each timed on its second run; and the GPU labels (``kernels.labeling.build_labels``, tree parents
by comparing tree paths) against the CPU's child orders and DFS, checked equal. These figures set the level
costs of ``grail_core.build.BuildCosts``. Writes ``levels-<tag>.md`` / ``.csv`` under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, markdown_table, write_results

NARROW = (0, 256, 1024, 4096)


def measure(folder: Path) -> list[list[object]]:
    from numba import cuda

    from grail_core import ReachabilityIndex
    from grail_core.labeling import label_all, make_child_orders, with_virtual_root
    from kernels.arrays import to_device
    from kernels.frontier import EngineConfig, build_level_queues, node_levels
    from kernels.labeling import LabelingOptions, build_labels

    n = int((folder / "nodes.txt").read_text())
    src, dst = np.load(folder / "src.npy"), np.load(folder / "dst.npy")
    arrays = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu").arrays
    indptr, children, root = with_virtual_root(arrays.out_indptr, arrays.out_indices)
    start = time.perf_counter()
    orders = make_child_orders(indptr, children, 2, 0)
    cpu_orders = time.perf_counter() - start
    start = time.perf_counter()
    expected = label_all(indptr, orders, root)
    cpu_dfs = time.perf_counter() - start
    d_indptr, d_children = to_device(indptr), to_device(children.astype(np.int32))
    rows = []
    for narrow in NARROW:
        config = EngineConfig(narrow=narrow)
        for _ in range(2):
            start = time.perf_counter()
            lq = build_level_queues(d_indptr, d_children, root, indptr.size - 1, config, 1 << 22)
            cuda.synchronize()
            discovery = time.perf_counter() - start
        level = cuda.device_array(indptr.size - 1, dtype=np.int32)
        start = time.perf_counter()
        node_levels(lq, d_indptr, level, config)
        cuda.synchronize()
        sweep = time.perf_counter() - start
        rows.append([folder.name, f"levels, narrow {narrow}", lq.levels, discovery, sweep, discovery / lq.levels * 1e6])
    start = time.perf_counter()
    built = build_labels(indptr, orders, root, LabelingOptions(max_levels=1 << 22, path_count_levels=0))
    seconds = time.perf_counter() - start
    same = all(np.array_equal(a, b) for a, b in zip(expected, (built.post, built.minpost, built.tree_low), strict=True))
    phases = " ".join(f"{name}={value:.3g}" for name, value in built.phase_seconds.items())
    rows.append([folder.name, "GPU labels (tree parents by comparison)", built.levels, seconds, "-", phases, same])
    rows.append([folder.name, "CPU labels (orders + DFS, 2 dims)", built.levels, cpu_orders + cpu_dfs, "-", "", True])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", default="gpu")
    args = parser.parse_args()
    rows = [row for folder in args.folders for row in measure(folder)]
    header = ["graph", "what", "levels", "seconds", "sweep s", "us a discovery level / phases", "equal to the CPU's"]
    rows = [row + [""] * (len(header) - len(row)) for row in rows]
    text = "# Level costs on deep DAGs\n\n" + markdown_table(header, rows) + "\n"
    print(text)
    write_results(args.out, f"levels-{args.tag}", text, header, rows)


if __name__ == "__main__":
    main()
