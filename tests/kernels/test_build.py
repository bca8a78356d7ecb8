"""The GPU build under the simulator (numpy standing in for CuPy): every step equals the CPU build's.

Tiny graphs only (the simulator runs every thread in Python). ``tests/gpu/test_gpu_build.py`` runs the
same comparisons on the device at full launch size and on larger graphs.
"""

from __future__ import annotations

import numpy as np
import pytest

from grail_core.build import build_index_arrays
from grail_core.condensation import condense
from grail_core.graph import Digraph
from grail_core.labeling import dimension_seeds, make_child_orders, with_virtual_root
from grail_core.query import QueryArrays
from grail_core.scc import LIVE, strongly_connected_components
from kernels.arrays import to_device, to_host
from kernels.build import DeviceBuild
from kernels.frontier import EngineConfig
from kernels.labeling import LabelingOptions

from .graphs import diamond_stack

# The device's modulo-2**64 hash arithmetic, run on numpy scalars by the simulator, makes numpy warn.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
CONFIG = EngineConfig.default()
FORCE_LABELS = LabelingOptions(config=CONFIG, max_levels=1 << 10)


def _cycles_and_tail() -> tuple[int, np.ndarray, np.ndarray]:
    """Two 3-cycles joined by a path, a self loop, a repeated edge, an isolated node and a hub."""
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 6), (6, 4), (6, 7), (7, 7), (3, 4)]
    edges += [(8, v) for v in (0, 3, 5, 7, 9)] + [(10, 8)]
    array = np.array(edges, dtype=np.int64)
    return 12, array[:, 0].copy(), array[:, 1].copy()


def _random_graph(seed: int) -> tuple[int, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 20
    return n, rng.integers(0, n, 34), rng.integers(0, n, 34)


GRAPHS = [_cycles_and_tail(), _random_graph(1), _random_graph(2)]


def _device_arrays(n: int, src: np.ndarray, dst: np.ndarray, dims: int, seed: int, hubs: int) -> dict:
    build = DeviceBuild(n, src.size, CONFIG)
    build.graph(src, dst)
    live = build.components()
    if live:
        label, *csr = build.host_components()
        from grail_core.scc import finish_components

        build.set_components(finish_components(Digraph(*csr), label))
    build.quotient()
    assert build.renumber()
    build.labels(dimension_seeds(dims, seed), FORCE_LABELS)
    build.hubs(hubs)
    return build.download(with_labels=True)


@pytest.mark.parametrize("graph", GRAPHS, ids=["cycles", "random1", "random2"])
def test_device_build_equals_the_cpu_build(graph: tuple[int, np.ndarray, np.ndarray]) -> None:
    n, src, dst = graph
    cpu = build_index_arrays(n, src, dst, dims=2, seed=3, hubs=4, backend="cpu")
    device = _device_arrays(n, src, dst, 2, 3, 4)
    np.testing.assert_array_equal(device["graph_indptr"], cpu.graph_csr[0])
    np.testing.assert_array_equal(device["graph_indices"], cpu.graph_csr[1])
    for name in QueryArrays._fields:
        got, want = device[name], getattr(cpu.arrays, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_device_components_leave_a_long_cycle_to_the_cpu() -> None:
    # A 12-node cycle whose budget runs out after a first launch of 4 levels: the reach stops, the nodes
    # stay live, the CPU finishes. With time to spare, the device finds the one component.
    from kernels.frontier import LevelBudget
    from kernels.scc import device_components

    n = 12
    graph = Digraph.from_edges(n, np.arange(n), (np.arange(n) + 1) % n)
    out_csr = (to_device(graph.out_indptr), to_device(graph.out_indices))
    in_csr = (to_device(graph.in_indptr), to_device(graph.in_indices))
    label, live = device_components(out_csr, in_csr, CONFIG, LevelBudget(0.0, n, first_launch=4))
    assert live == n and (to_host(label) == LIVE).all()
    label, live = device_components(out_csr, in_csr, CONFIG, LevelBudget(60.0, n, first_launch=4))
    assert live == 0
    assert strongly_connected_components(graph)[1] == 1 and len(set(to_host(label).tolist())) == 1


def test_device_build_through_the_pipeline_with_cpu_fallbacks() -> None:
    # Through build_index_arrays: labels declined by the cost model (tiny graph) fall back to the CPU.
    n, src, dst = _cycles_and_tail()
    cpu = build_index_arrays(n, src, dst, dims=2, seed=1, hubs=64, backend="cpu")
    forced = build_index_arrays(n, src, dst, dims=2, seed=1, hubs=64, backend="cuda", force_device=True)
    assert forced.phase_backends["graph"] == "cuda" and forced.phase_backends["labels"] == "cpu"
    # The cost model's predictions of every phase on both backends, and where each ran, are in the record.
    assert set(forced.plan) == {"graph", "condense", "labels", "hubs", "download"}
    assert forced.plan["labels"]["cpu"] < forced.plan["labels"]["cuda"] and forced.plan["labels"]["ran"] == "cpu"
    assert all(phase["ran"] == forced.phase_backends[name] for name, phase in forced.plan.items())
    for name in QueryArrays._fields:
        np.testing.assert_array_equal(getattr(forced.arrays, name), getattr(cpu.arrays, name), err_msg=name)


def test_device_child_orders_equal_the_cpu_ones() -> None:
    from kernels.labeling import device_child_orders

    n, edges = diamond_stack(3)
    dag = condense(Digraph.from_edges(n, *np.array(edges).T)).dag
    indptr, indices, _ = with_virtual_root(dag.out_indptr, dag.out_indices)
    got = device_child_orders(to_device(indptr), to_device(indices), dimension_seeds(3, 7), CONFIG)
    np.testing.assert_array_equal(to_host(got), make_child_orders(indptr, indices, 3, seed=7))


def test_warm_up_runs_every_step() -> None:
    from kernels.build import warm_up

    warm_up()
