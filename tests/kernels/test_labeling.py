"""GPU labeling under the simulator: labels equal the CPU DFS labels, or the build declines/fails loudly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core.backends import label_on_gpus
from grail_core.labeling import label_all
from kernels.device import Device
from kernels.labeling import LabelingDeclined, LabelingOptions, build_labels

from .graphs import diamond_stack, hub_graph, labeling_graph

FORCE_GPU = LabelingOptions(max_levels=1 << 10)  # the cost model sends graphs this small to the CPU
COMPARE = LabelingOptions(max_levels=1 << 10, path_count_levels=0)  # tree parents by comparing tree paths


def assert_same_labels(
    n: int, edges: list[tuple[int, int]], options: LabelingOptions = FORCE_GPU, dims: int = 2, seed: int = 0
) -> int:
    indptr, orders, root = labeling_graph(n, edges, dims, seed)
    expected = label_all(indptr, orders, root)
    built = build_labels(indptr, orders, root, options)
    for name, want, got in zip(
        ("post", "minpost", "tree_low"), expected, (built.post, built.minpost, built.tree_low), strict=True
    ):
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    return built.words


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 14) -> tuple[int, list[tuple[int, int]]]:
    n = draw(st.integers(min_value=1, max_value=max_nodes))
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), max_size=3 * n)) if pairs else []
    return n, edges


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.integers(min_value=0, max_value=2**31))
def test_random_dags_match_cpu(graph: tuple[int, list[tuple[int, int]]], seed: int) -> None:
    n, edges = graph
    assert_same_labels(n, edges, seed=seed)


def test_single_node() -> None:
    assert_same_labels(1, [])


def test_hub_with_many_roots_uses_every_degree_class() -> None:
    n, edges = hub_graph(roots=12, fan_out=10)
    assert_same_labels(n, edges, dims=3)


@pytest.mark.parametrize(("bits", "words"), [(8, 1), (4, 2), (2, 4)])
def test_diamond_stack_multi_word_weights(bits: int, words: int) -> None:
    """The root counts 126 unrolled nodes: one 8-bit word, two 4-bit words, four 2-bit words; labels stay exact."""
    n, edges = diamond_stack(5)
    assert assert_same_labels(n, edges, LabelingOptions(word_bits=bits, max_levels=1 << 10)) == words


def test_too_wide_counts_compare_tree_paths_instead() -> None:
    """Counts that need more than max_words words: the tree parents come from comparing tree paths."""
    n, edges = diamond_stack(5)
    options = LabelingOptions(word_bits=2, max_words=2, max_levels=1 << 10)
    assert assert_same_labels(n, edges, options) == 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), st.integers(min_value=0, max_value=2**31))
def test_random_dags_match_cpu_by_comparing_tree_paths(graph: tuple[int, list[tuple[int, int]]], seed: int) -> None:
    n, edges = graph
    assert assert_same_labels(n, edges, COMPARE, seed=seed) == 0


def layered(levels: int, width: int, seed: int) -> tuple[int, list[tuple[int, int]]]:
    """A DAG of ``levels`` layers of 1 to ``width`` nodes, each node with one to three parents among the
    three layers above: narrow and wide levels, tree paths that part near and far above."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, width + 1, levels)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    edges = []
    for layer in range(1, levels):
        low = starts[max(0, layer - 3)]
        for v in range(starts[layer], starts[layer + 1]):
            parents = rng.integers(low, starts[layer], rng.integers(1, 4))
            edges += [(int(u), v) for u in set(parents.tolist())]
    return int(starts[-1]), edges


@pytest.mark.parametrize("options", [FORCE_GPU, COMPARE], ids=["path counts", "comparison"])
def test_deep_layered_dag_matches_cpu(options: LabelingOptions) -> None:
    n, edges = layered(levels=40, width=5, seed=3)
    assert_same_labels(n, edges, options, dims=2, seed=7)


def test_deep_chain_declines() -> None:
    n = 30
    indptr, orders, root = labeling_graph(n, [(i, i + 1) for i in range(n - 1)])
    with pytest.raises(LabelingDeclined, match="levels"):
        build_labels(indptr, orders, root, LabelingOptions(max_levels=8))


def test_small_graphs_go_to_the_cpu_by_default() -> None:
    indptr, orders, root = labeling_graph(4, [(0, 1), (1, 2)])
    with pytest.raises(LabelingDeclined, match="CPU labels it faster"):
        build_labels(indptr, orders, root)


def test_level_hint_declines_before_device_work() -> None:
    indptr, orders, root = labeling_graph(4, [(0, 1), (1, 2)])
    with pytest.raises(LabelingDeclined, match="in 40 levels"):
        build_labels(indptr, orders, root, LabelingOptions(max_levels=30), level_hint=40)


def test_dimensions_dealt_over_two_devices_equal_the_cpu_labels() -> None:
    """Three dimensions over two devices (two on the first, one on the second; here both the simulator's
    one GPU): the labels of every dimension land in their place."""
    n, edges = hub_graph(roots=5, fan_out=6)
    indptr, orders, root = labeling_graph(n, edges, dims=3, seed=4)
    expected = label_all(indptr, orders, root)
    built = label_on_gpus(indptr, orders, root, [Device(0), Device(0)], options=FORCE_GPU)
    assert built.backend == "cuda"
    for name, want, got in zip(
        ("post", "minpost", "tree_low"), expected, (built.post, built.minpost, built.tree_low), strict=True
    ):
        np.testing.assert_array_equal(got, want, err_msg=name)
