"""The GPU build on the device: the same index arrays as the CPU build, on generated graphs of every shape
(R-MAT with cycles, DAGs, a long chain and cycle that fall back to the CPU, a hub) and every dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grail_core.build import build_index_arrays
from grail_core.query import QueryArrays
from grail_core.readers import read_graph

from ..conftest import dataset_graphs
from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]

if device_present():
    from tests.kernels.test_build import (  # noqa: F401
        test_device_build_equals_the_cpu_build,
        test_device_build_through_the_pipeline_with_cpu_fallbacks,
        test_device_child_orders_equal_the_cpu_ones,
        test_device_components_leave_a_long_cycle_to_the_cpu,
    )


def _rmat(edges: int, seed: int) -> tuple[int, np.ndarray, np.ndarray]:
    from benchmarks.generate import rmat_edges

    scale = max(4, round(np.log2(edges / 6)))
    return 1 << scale, *rmat_edges(scale, edges, seed=seed)


def _dag(name: str, scale: float) -> tuple[int, np.ndarray, np.ndarray]:
    from benchmarks.generate import generate

    indptr, indices = generate(name, scale)
    n = indptr.size - 1
    return n, np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)), indices.astype(np.int64)


def _line(n: int, closed: bool) -> tuple[int, np.ndarray, np.ndarray]:
    nodes = np.arange(n, dtype=np.int64)
    return n, nodes if closed else nodes[:-1], (nodes + 1) % n if closed else nodes[1:]


def _hub(n: int) -> tuple[int, np.ndarray, np.ndarray]:
    leaves = np.arange(1, n)
    src = np.concatenate([leaves, [0, 0], leaves[::7]])
    dst = np.concatenate([np.zeros(n - 1, dtype=np.int64), [n, 5], leaves[::7] + 1])
    return n + 2, src, np.minimum(dst, n + 1)


GRAPHS = {
    "rmat-300k": lambda: _rmat(300_000, 1),
    "rmat-2M-int32": lambda: _rmat(2_000_000, 2),
    "uniprot_like": lambda: _dag("uniprot_like", 0.05),
    "citation_like": lambda: _dag("citation_like", 0.02),
    "chain-200k": lambda: _line(200_000, closed=False),
    "cycle-200k": lambda: _line(200_000, closed=True),
    "hub-300k": lambda: _hub(300_000),
}


def assert_same_index(n: int, src: np.ndarray, dst: np.ndarray, dims: int = 2, seed: int = 0) -> dict[str, str]:
    cpu = build_index_arrays(n, src, dst, dims=dims, seed=seed, hubs=64, backend="cpu")
    gpu = build_index_arrays(n, src, dst, dims=dims, seed=seed, hubs=64, backend="cuda", force_device=True)
    np.testing.assert_array_equal(gpu.graph_csr[0], cpu.graph_csr[0])
    np.testing.assert_array_equal(gpu.graph_csr[1], cpu.graph_csr[1])
    for name in QueryArrays._fields:
        got, want = getattr(gpu.arrays, name), getattr(cpu.arrays, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert gpu.levels == cpu.levels and gpu.hubs == cpu.hubs
    return gpu.phase_backends


@pytest.mark.parametrize("name", list(GRAPHS))
def test_gpu_build_equals_cpu_build(name: str) -> None:
    n, src, dst = GRAPHS[name]()
    if name.endswith("int32"):
        src, dst = src.astype(np.int32), dst.astype(np.int32)
    backends = assert_same_index(n, src, dst, dims=3 if name == "uniprot_like" else 2)
    assert backends["graph"] == "cuda"
    if name.startswith(("chain", "cycle")):
        assert backends["condense"] == "cuda+cpu"  # too deep for the device's bounded levels
    if name.startswith("rmat-2M"):
        assert backends["condense"] == "cuda"  # the device's schedule placed every node
    if name == "uniprot_like":  # 1.25M DAG nodes: the labels' cost model picks the device
        assert backends["labels"] == "cuda"


@pytest.mark.parametrize("graph", dataset_graphs())
def test_gpu_build_of_every_dataset(datasets: Path, graph: str) -> None:
    parsed = read_graph(datasets / f"{graph}.gra")
    assert_same_index(parsed.num_nodes, parsed.src, parsed.dst, dims=3, seed=11)
