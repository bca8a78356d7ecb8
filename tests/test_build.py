"""The parallel build's pieces against serial and brute-force references (hypothesis graphs with cycles,
self loops, duplicate edges and isolated nodes), with the thresholds lowered so that every parallel
branch runs on small graphs."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core import ReachabilityIndex
from grail_core.condensation import condense, longest_path_levels
from grail_core.graph import Digraph, build_csr, mapped_csr
from grail_core.labeling import dimension_seeds, make_child_orders, order_key
from grail_core.parallel import stable_order
from grail_core.scc import SccOptions, strongly_connected_components, tarjan_components
from grail_core.supportive import choose_hubs, hub_reach_masks
from tests.reference import reachability_matrix
from tests.strategies import cycle_chains, digraphs

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Every frontier level in parallel, coloring rounds until nothing is left, rounds that stop at once, or a
# round that gives up after its first level.
SCHEDULES = [
    SccOptions(),
    SccOptions(parallel_min_nodes=1, serial_below=0, min_round_share=0.0, coloring_visits=1e9),
    SccOptions(parallel_min_nodes=1, serial_below=0, min_round_share=1.0, coloring_visits=1e9),
    SccOptions(parallel_min_nodes=1, serial_below=0, min_round_share=0.0, coloring_visits=1e-9),
]


def _arrays(edges: list[tuple[int, int]], dtype: type[np.integer] = np.int64) -> tuple[np.ndarray, np.ndarray]:
    array = np.array(edges, dtype=dtype).reshape(-1, 2)
    return array[:, 0].copy(), array[:, 1].copy()


def _reference_csr(n: int, pairs: set[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    rows: list[list[int]] = [[] for _ in range(n)]
    for u, v in sorted(pairs):
        if u != v:
            rows[u].append(v)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(row) for row in rows])
    return indptr, np.array([v for row in rows for v in row], dtype=np.int32)


def _reference_components(n: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """Mutual reachability, components numbered by their smallest node."""
    reach = reachability_matrix(n, edges)
    mutual = reach & reach.T
    first = mutual.argmax(axis=1)  # the smallest node of each node's component
    _, comp = np.unique(first, return_inverse=True)
    return comp


@SETTINGS
@given(graph=digraphs(max_nodes=200), dtype=st.sampled_from([np.int32, np.int64]))
def test_csr_matches_the_sorted_distinct_edges(graph: tuple[int, list[tuple[int, int]]], dtype: type) -> None:
    n, edges = graph
    indptr, indices = build_csr(n, *_arrays(edges, dtype))
    want_indptr, want_indices = _reference_csr(n, set(edges))
    np.testing.assert_array_equal(indptr, want_indptr)
    np.testing.assert_array_equal(indices, want_indices)
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    digraph = Digraph.from_csr(indptr, indices)
    in_indptr, in_indices = _reference_csr(n, {(v, u) for u, v in edges})
    np.testing.assert_array_equal(digraph.in_indptr, in_indptr)
    np.testing.assert_array_equal(digraph.in_indices, in_indices)


@SETTINGS
@given(graph=digraphs(max_nodes=200), data=st.data())
def test_quotient_merges_classes(graph: tuple[int, list[tuple[int, int]]], data: st.DataObject) -> None:
    n, edges = graph
    classes = data.draw(st.integers(1, n))
    mapping = np.array(data.draw(st.lists(st.integers(0, classes - 1), min_size=n, max_size=n)), dtype=np.int32)
    indptr, indices = build_csr(n, *_arrays(edges))
    got = mapped_csr(classes, indptr, indices, mapping)
    want = _reference_csr(classes, {(int(mapping[u]), int(mapping[v])) for u, v in edges if u != v})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_buckets_of_many_rows() -> None:
    # More nodes than one bucket holds (2**13), with a hub: the bucket passes and their packing.
    rng = np.random.default_rng(5)
    n = 40_000
    src = np.concatenate([rng.integers(0, n, 200_000), np.full(5000, 17)])
    dst = np.concatenate([rng.integers(0, n, 200_000), rng.integers(0, n, 5000)])
    indptr, indices = build_csr(n, src, dst)
    keys = np.unique(src[src != dst] * n + dst[src != dst])
    np.testing.assert_array_equal(indices, keys % n)
    np.testing.assert_array_equal(indptr, np.searchsorted(keys // n, np.arange(n + 1)))


@SETTINGS
@given(graph=st.one_of(digraphs(max_nodes=150), cycle_chains()), schedule=st.sampled_from(SCHEDULES))
def test_components_match_mutual_reachability(graph: tuple[int, list[tuple[int, int]]], schedule: SccOptions) -> None:
    n, edges = graph
    digraph = Digraph.from_edges(n, *_arrays(edges))
    comp, count = strongly_connected_components(digraph, schedule)
    want = _reference_components(n, edges)
    np.testing.assert_array_equal(comp, want)
    assert count == int(want.max()) + 1
    np.testing.assert_array_equal(tarjan_components(digraph)[0], want)


def test_coloring_queues_a_node_again_when_its_color_rises_by_one() -> None:
    # The pivot's component is {0, 1, 2}; the cycle 10 -> 9 -> 5 -> 10 is left to the coloring, where 9
    # is visited (giving 9 to 5) before 10 raises it to 10: 9 must be visited again, or 5 keeps 9 and
    # the cycle falls apart into three components.
    edges = [(0, 1), (1, 0), (0, 2), (2, 0), (10, 9), (9, 5), (5, 10)]
    digraph = Digraph.from_edges(12, *_arrays(edges))
    comp, _ = strongly_connected_components(digraph, SCHEDULES[1])
    np.testing.assert_array_equal(comp, _reference_components(12, edges))


def test_components_of_long_cycles_and_chains() -> None:
    # A chain of 3-cycles (ids decreasing along it, so each coloring round finds one), a long cycle,
    # a tail: every path of the schedule on one graph.
    cycles = 60
    edges = [(3 * i + j, 3 * i + (j + 1) % 3) for i in range(cycles) for j in range(3)]
    edges += [(3 * (i + 1), 3 * i) for i in range(cycles - 1)]
    base = 3 * cycles
    edges += [(base + i, base + (i + 1) % 5000) for i in range(5000)] + [
        (base + 5000 + i, base + 5001 + i) for i in range(99)
    ]
    n = base + 5100
    digraph = Digraph.from_edges(n, *_arrays(edges))
    want = tarjan_components(digraph)
    rounds = SccOptions(parallel_min_nodes=64, serial_below=10, min_round_share=0.001, coloring_visits=1e9)
    for schedule in [*SCHEDULES, rounds]:
        comp, count = strongly_connected_components(digraph, schedule)
        assert count == want[1] == cycles + 1 + 100
        np.testing.assert_array_equal(comp, want[0])


def test_a_coloring_round_gives_up_past_its_visits_for_tarjan() -> None:
    """On a chain of 3-cycles whose ids fall along it, the largest id of each cycle rises at every node below
    it: the rounds place one cycle each where they may visit all they need, and where their visits are
    bounded the first round gives up and Tarjan places every cycle left at once. Both find the components."""
    cycles = 200
    edges = [(3 * i + j, 3 * i + (j + 1) % 3) for i in range(cycles) for j in range(3)]
    edges += [(3 * (i + 1), 3 * i) for i in range(cycles - 1)]
    digraph = Digraph.from_edges(3 * cycles, *_arrays(edges))
    want = tarjan_components(digraph)
    placed: dict[float, list[int]] = {}
    for visits in (1e9, 0.1):
        schedule = SccOptions(parallel_min_nodes=1, serial_below=0, min_round_share=0.0, coloring_visits=visits)
        comp, count = strongly_connected_components(digraph, schedule, placed.setdefault(visits, []).append)
        np.testing.assert_array_equal(comp, want[0])
        assert count == cycles and sum(placed[visits]) == 3 * cycles
    assert placed[1e9].count(3) >= cycles - 2, "a cycle a round"
    assert max(placed[0.1]) >= 3 * (cycles - 2), "the cycles left at once"


def _brute_levels(n: int, edges: set[tuple[int, int]], reverse: bool) -> np.ndarray:
    level = np.zeros(n, dtype=np.int64)
    for _ in range(n):
        for u, v in edges:
            a, b = (v, u) if reverse else (u, v)
            level[b] = max(level[b], level[a] + 1)
    return level


@SETTINGS
@given(graph=st.one_of(digraphs(max_nodes=80), cycle_chains()))
def test_condensation_ids_are_canonical_and_topological(graph: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = graph
    condensation = condense(Digraph.from_edges(n, *_arrays(edges)))
    comp, dag = condensation.comp, condensation.dag
    dag_edges = {(int(comp[u]), int(comp[v])) for u, v in edges if comp[u] != comp[v]}
    want = _reference_csr(dag.num_nodes, dag_edges)
    np.testing.assert_array_equal(dag.out_indptr, want[0])
    np.testing.assert_array_equal(dag.out_indices, want[1])
    assert all(u < v for u, v in dag_edges)
    depth = _brute_levels(dag.num_nodes, dag_edges, reverse=False)
    height = _brute_levels(dag.num_nodes, dag_edges, reverse=True)
    np.testing.assert_array_equal(condensation.level, depth)
    smallest = np.full(dag.num_nodes, n)
    np.minimum.at(smallest, comp, np.arange(n))
    order = np.lexsort((smallest, -height))
    np.testing.assert_array_equal(order, np.arange(dag.num_nodes))  # ids: by height down, then smallest node
    # Same partition as brute force (ids aside).
    reference = _reference_components(n, edges)
    assert len({(int(a), int(b)) for a, b in zip(comp, reference, strict=True)}) == dag.num_nodes


def test_levels_of_a_long_chain_and_a_wide_level() -> None:
    n = 20_000
    chain = Digraph.from_edges(n, np.arange(n - 1), np.arange(1, n))
    np.testing.assert_array_equal(longest_path_levels(chain), np.arange(n))
    star = Digraph.from_edges(n, np.zeros(n - 1, dtype=np.int64), np.arange(1, n))
    np.testing.assert_array_equal(longest_path_levels(star), np.minimum(np.arange(n), 1))


@SETTINGS
@given(graph=digraphs(max_nodes=80, acyclic=True), hubs=st.integers(0, 64))
def test_hub_masks_are_exact_reach_sets(graph: tuple[int, list[tuple[int, int]]], hubs: int) -> None:
    n, edges = graph
    dag = condense(Digraph.from_edges(n, *_arrays(edges))).dag
    dag_edges = list(zip(np.repeat(np.arange(dag.num_nodes), np.diff(dag.out_indptr)), dag.out_indices, strict=True))
    chosen = choose_hubs(dag, hubs)
    fwd, bwd = hub_reach_masks(dag, chosen)
    reach = reachability_matrix(dag.num_nodes, [(int(u), int(v)) for u, v in dag_edges])
    for bit, hub in enumerate(chosen):
        np.testing.assert_array_equal((fwd >> np.uint64(bit)) & np.uint64(1) == 1, reach[hub])
        np.testing.assert_array_equal((bwd >> np.uint64(bit)) & np.uint64(1) == 1, reach[:, hub])
    if chosen.size < 64:
        assert not ((fwd | bwd) >> np.uint64(chosen.size)).any()


def test_hub_ties_go_to_the_smaller_id() -> None:
    # Ten disjoint edges: every node scores 2; the first four ids win.
    dag = Digraph.from_edges(20, np.arange(0, 20, 2), np.arange(1, 20, 2))
    np.testing.assert_array_equal(choose_hubs(dag, 4), [0, 1, 2, 3])
    star = Digraph.from_edges(6, np.array([5, 5, 5, 0]), np.array([1, 2, 3, 1]))
    np.testing.assert_array_equal(choose_hubs(star, 2), [1, 5])


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.integers(0, 9), max_size=300))
def test_stable_order_is_a_stable_sort(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.int32)
    order, starts = stable_order(array, 10)
    np.testing.assert_array_equal(order, np.argsort(array, kind="stable"))
    np.testing.assert_array_equal(starts, np.searchsorted(np.sort(array), np.arange(11)))


@pytest.mark.parametrize("long_row", [None, 8])
def test_child_orders_sort_each_row_by_its_keys(long_row: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if long_row:  # rows longer than this take the radix passes (by default only the 20,000-child row)
        monkeypatch.setattr("grail_core.labeling.LONG_ROW", long_row)
    rng = np.random.default_rng(2)
    # Short rows, and a row of 20,000 children (keys equal in their top 24 bits occur there).
    n = 20_001
    src = np.concatenate([rng.integers(0, n, 6000), np.zeros(n - 1, dtype=np.int64)])
    dst = np.concatenate([rng.integers(0, n, 6000), np.arange(1, n)])
    indptr, indices = build_csr(n, src, dst)
    orders = make_child_orders(indptr, indices, 2, seed=4)
    seeds = dimension_seeds(2, 4)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    for k in range(2):
        keys = np.array([order_key(seeds[k], e) for e in range(indices.size)], dtype=np.int64)
        want = indices[np.lexsort((np.arange(indices.size), keys, rows))]
        np.testing.assert_array_equal(orders[k], want)


def test_child_orders_do_not_depend_on_the_thread_count() -> None:
    rng = np.random.default_rng(3)
    indptr, indices = build_csr(3000, rng.integers(0, 3000, 30_000), rng.integers(0, 3000, 30_000))
    every = make_child_orders(indptr, indices, 4, seed=9)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = make_child_orders(indptr, indices, 4, seed=9)
    finally:
        numba.set_num_threads(threads)
    np.testing.assert_array_equal(one, every)


def test_progress_is_monotone_and_follows_the_phases() -> None:
    rng = np.random.default_rng(4)
    seen: list[tuple[str, float]] = []
    ReachabilityIndex.from_edges(
        rng.integers(0, 5000, 40_000), rng.integers(0, 5000, 40_000), backend="cpu", progress=lambda *p: seen.append(p)
    )
    fractions = [fraction for _, fraction in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    phases = list(dict.fromkeys(phase for phase, _ in seen))
    assert phases == ["graph", "condense", "labels", "hubs"]
    # Within phases, not only at their ends: the graph phase reports each of its passes.
    assert len({fraction for phase, fraction in seen if phase == "graph"}) >= 8


def test_same_index_for_int32_and_int64_edges_and_any_thread_count() -> None:
    rng = np.random.default_rng(6)
    src, dst = rng.integers(0, 3000, 20_000), rng.integers(0, 3000, 20_000)
    first = ReachabilityIndex.from_edges(src, dst, backend="cpu", dims=3, seed=5)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        second = ReachabilityIndex.from_edges(src.astype(np.int32), dst.astype(np.int32), backend="cpu", dims=3, seed=5)
    finally:
        numba.set_num_threads(threads)
    for name, value in first.arrays._asdict().items():
        np.testing.assert_array_equal(getattr(second.arrays, name), value, err_msg=name)
    np.testing.assert_array_equal(first.current().labels.graph_csr[1], second.current().labels.graph_csr[1])


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint64])
def test_other_integer_edge_types_are_accepted(dtype: type) -> None:
    index = ReachabilityIndex.from_edges(np.array([0, 1], dtype=dtype), np.array([1, 2], dtype=dtype), backend="cpu")
    assert index.reachable(0, 2) and not index.reachable(2, 0)
