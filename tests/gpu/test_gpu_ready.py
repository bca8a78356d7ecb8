"""On the device after the warm-up: builds and searches of every shape compile nothing, a fresh process loads
every kernel from the disk cache, and deep DAGs get their labels on the GPU, equal to the CPU's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from grail_core.index import ReachabilityIndex
from grail_core.labeling import label_all, make_child_orders, with_virtual_root
from grail_core.query import UNDECIDED, filter_pairs
from grail_core.synthetic import downward_walk_pairs, layered_dag

from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]


def _layered_edges(nodes: int, levels: int) -> tuple[int, np.ndarray, np.ndarray]:
    indptr, indices = layered_dag(nodes, levels, seed=levels)
    return nodes, np.repeat(np.arange(nodes, dtype=np.int64), np.diff(indptr)), indices.astype(np.int64)


def _shapes() -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    from benchmarks.generate import rmat_edges

    rmat = rmat_edges(18, 1_500_000, seed=4)
    chain = np.arange(300_000, dtype=np.int64)
    return {
        "rmat int32": (1 << 18, *rmat),
        "rmat int64": (1 << 18, *(ids.astype(np.int64) for ids in rmat)),
        "dag 3,000 levels": _layered_edges(400_000, 3_000),
        "dag 60,000 levels": _layered_edges(400_000, 60_000),
        "chain": (chain.size, chain[:-1], chain[1:]),
        "cycle": (chain.size, chain, np.roll(chain, -1)),
    }


def test_builds_and_searches_compile_nothing_after_the_warm_up() -> None:
    """Every launch of builds of every shape (the components' and the renumbering's hand-offs to the CPU
    included), of the labels both ways and of the search in both modes finds its kernel compiled: with
    compilation switched off, a launch the warm-up's list missed would fail here."""
    from grail_core.build import build_index_arrays
    from grail_core.query import QueryArrays
    from grail_core.warmup import warm_up
    from kernels.compiled import compilations
    from kernels.labeling import LabelingOptions, build_labels
    from kernels.specializations import forbid_compilation

    warm_up("cuda")
    before = compilations()
    forbid_compilation()
    try:
        for name, (n, src, dst) in _shapes().items():
            cpu = build_index_arrays(n, src, dst, dims=2, seed=3, hubs=64, backend="cpu")
            gpu = build_index_arrays(n, src, dst, dims=2, seed=3, hubs=64, backend="cuda", force_device=True)
            for field in QueryArrays._fields:
                np.testing.assert_array_equal(getattr(gpu.arrays, field), getattr(cpu.arrays, field), err_msg=name)
            assert set(gpu.plan) >= {"graph", "condense", "labels", "hubs"}, name
            assert all({"cpu", "cuda", "ran"} <= set(gpu.plan[phase]) for phase in ("graph", "labels", "hubs")), name
        n, src, dst = _layered_edges(50_000, 400)
        indptr, indices = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu").arrays[1:3]
        indptr, indices, root = with_virtual_root(indptr, indices)
        orders = make_child_orders(indptr, indices, 2, seed=1)
        for path_count_levels in (512, 0):
            build_labels(indptr, orders, root, LabelingOptions(max_levels=1 << 20, path_count_levels=path_count_levels))
        index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cuda")
        pairs = np.random.default_rng(2).integers(0, n, size=(50_000, 2))
        undecided = np.flatnonzero(filter_pairs(index.hot, pairs) == UNDECIDED)
        sources, targets = (index.arrays.comp[pairs[undecided, k]] for k in (0, 1))
        expected = index.scheduler.cpu.answer(sources, targets).answers
        for mode in ("levels", "frontier"):
            np.testing.assert_array_equal(index.scheduler.gpu.answer(sources, targets, mode).answers, expected)
    finally:
        forbid_compilation(False)
    assert compilations() == before


def test_a_fresh_process_loads_every_kernel_from_the_disk_cache() -> None:
    """After this process's warm-up filled the cache, a new one warms up without compiling a kernel."""
    from grail_core.warmup import warm_up_build

    warm_up_build("cuda")
    script = (
        "import json; from grail_core.warmup import warm_up_build; warm_up_build('cuda'); "
        "from kernels.compiled import compilations; print(json.dumps(compilations()))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


@pytest.mark.parametrize(("nodes", "levels"), [(600_000, 3_000), (300_000, 100_000)])
def test_deep_dags_label_on_the_gpu_as_on_the_cpu(nodes: int, levels: int) -> None:
    """Path counts of such DAGs need thousands of bits: the tree parents come from comparing tree paths,
    and every label equals the CPU DFS's."""
    from kernels.labeling import LabelingOptions, build_labels

    indptr, indices = layered_dag(nodes, levels, seed=levels)
    indptr, indices, root = with_virtual_root(indptr, indices)
    orders = make_child_orders(indptr, indices, 2, seed=5)
    built = build_labels(indptr, orders, root, LabelingOptions(max_levels=1 << 20))
    assert built.words == 0 and built.levels > levels // 2
    got = (built.post, built.minpost, built.tree_low)
    for name, want, have in zip(("post", "minpost", "tree_low"), label_all(indptr, orders, root), got, strict=True):
        np.testing.assert_array_equal(have, want, err_msg=name)


def test_a_deep_dag_builds_on_the_gpu_and_answers_exactly() -> None:
    """A 20,000-level DAG, ids shuffled, through the GPU build (its plan in the stats), answers walks and
    uniform pairs as the CPU-built one does."""
    n, src, dst = _layered_edges(400_000, 20_000)
    order = np.random.default_rng(1).permutation(n)
    src, dst = order[src], order[dst]
    gpu = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cuda")
    cpu = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
    assert gpu.stats.phase_backends["graph"] == "cuda"
    assert gpu.stats.build_plan["labels"]["ran"] == gpu.stats.phase_backends["labels"]
    indptr, indices = layered_dag(n, 20_000, seed=20_000)
    walks = np.stack(downward_walk_pairs(indptr, indices, 100_000, seed=3), axis=1)
    for pairs in (order[walks], np.random.default_rng(3).integers(0, n, size=(100_000, 2))):
        np.testing.assert_array_equal(gpu.query_batch(pairs), cpu.query_batch(pairs))
