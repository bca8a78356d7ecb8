"""The networkx backend ``grail``: answers, errors and results equal to networkx's own on random graphs with
cycles, self loops, parallel edges, isolated nodes and names of every kind; one index per graph, built again
after the graph changes (views included); networkx's own tests of these functions run with the backend."""

from __future__ import annotations

import copy
import itertools
import json
import os
import pickle
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core.nx_backend import BACKEND_NAME, FUNCTIONS
from tests.strategies import digraphs

nx = pytest.importorskip("networkx")

from grail_core.nx_backend import interface  # noqa: E402  (it imports networkx)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# networkx warns each time it reuses a converted graph from its cache; reusing it is the point here.
pytestmark = pytest.mark.filterwarnings("ignore:Note. conversions to backend graphs:UserWarning")

# Node names: how networkx users name nodes (ids differ from names, blanks, tuples, both kinds at once).
NAMINGS = {
    "integers": lambda i: i,
    "sparse integers": lambda i: 10**12 + 7919 * i,
    "strings": lambda i: f"node {i}",
    "tuples": lambda i: (i % 3, f"n{i}"),
    "mixed": lambda i: i if i % 2 else str(i),
}
KINDS = [nx.DiGraph, nx.Graph, nx.MultiDiGraph, nx.MultiGraph]


@st.composite
def nx_graphs(draw: st.DrawFn, max_nodes: int = 30) -> Any:
    """A networkx graph of ``digraphs``' shape: its nodes added in a random order, named by one of NAMINGS."""
    n, edges = draw(digraphs(max_nodes=max_nodes))
    name = NAMINGS[draw(st.sampled_from(sorted(NAMINGS)))]
    graph = draw(st.sampled_from(KINDS))()
    graph.add_nodes_from(name(i) for i in draw(st.permutations(range(n))))
    graph.add_edges_from((name(u), name(v)) for u, v in edges)
    return graph


def outcome(function: Any, *args: Any, **kwargs: Any) -> Any:
    """A call's result, or its exception's type and message."""
    try:
        return function(*args, **kwargs)
    except Exception as error:
        return type(error), str(error)


def check_path(graph: Any, path: Any, expected: Any) -> None:
    """``path`` fails as ``expected`` does, or is a walk of the graph as short as networkx's path."""
    if isinstance(expected, tuple):
        assert path == expected
        return
    assert path[0] == expected[0] and path[-1] == expected[-1] and len(path) == len(expected)
    assert all(graph.has_edge(a, b) for a, b in itertools.pairwise(path)), path


def check_same_answers(graph: Any) -> None:
    """Every node's descendants and ancestors and every pair's has_path and shortest_path, through the backend
    and through networkx."""
    for node in graph:
        for function in (nx.descendants, nx.ancestors):
            assert function(graph, node, backend=BACKEND_NAME) == function(graph, node, backend="networkx")
    for source, target in itertools.product(graph, repeat=2):
        expected = nx.has_path(graph, source, target, backend="networkx")
        assert nx.has_path(graph, source, target, backend=BACKEND_NAME) is expected
        path = outcome(nx.shortest_path, graph, source, target, backend=BACKEND_NAME)
        check_path(graph, path, outcome(nx.shortest_path, graph, source, target, backend="networkx"))


@SETTINGS
@given(graph=nx_graphs())
def test_answers_equal_networkx(graph: Any) -> None:
    check_same_answers(graph)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The graphs the backend indexes, in order."""
    built: list[Any] = []
    index_graph = interface._index_graph

    def counted(graph: Any, generation: object | None) -> Any:
        built.append(graph)
        return index_graph(graph, generation)

    monkeypatch.setattr(interface, "_index_graph", counted)
    return built


CHANGES = st.lists(
    st.tuples(st.sampled_from(["add_edge", "remove_edge", "add_node", "remove_node"]), st.integers(0, 40)),
    min_size=1,
    max_size=6,
)


def change(graph: Any, operation: str, seed: int) -> None:
    """One change through networkx's methods (which clear the graph's cache)."""
    nodes = list(graph)
    if operation == "add_edge" or not nodes:
        graph.add_edge(seed % 25, (seed * 7) % 25)
    elif operation == "remove_edge" and graph.number_of_edges():
        graph.remove_edge(*list(graph.edges())[seed % graph.number_of_edges()][:2])
    elif operation == "add_node":
        graph.add_node(100 + seed)
    else:
        graph.remove_node(nodes[seed % len(nodes)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=nx_graphs(max_nodes=20), changes=CHANGES, view=st.booleans())
def test_one_index_per_graph_until_it_changes(
    graph: Any, changes: list[tuple[str, int]], view: bool, builds: list[Any]
) -> None:
    """Queries reuse the index; a change through networkx's methods (to the graph, or to the graph a view looks
    at) makes the next query index the graph again, and answer for it as it is now."""
    graph = nx.relabel_nodes(graph, {node: i for i, node in enumerate(graph)})  # integers, for ``change``
    asked = graph.subgraph(range(0, 200, 2)) if view else graph
    builds.clear()
    check_same_answers(asked)
    assert builds == [asked] or not len(asked)
    for operation, seed in changes:
        builds.clear()
        change(graph, operation, seed)
        check_same_answers(asked)
        assert builds == [asked] or not len(asked)


@pytest.mark.parametrize("duplicate", [copy.deepcopy, lambda graph: pickle.loads(pickle.dumps(graph))])
def test_a_graph_copied_with_its_cache_answers_for_itself(duplicate: Any) -> None:
    """networkx's cache travels with a graph that is deep-copied or pickled: the copy indexes itself."""
    graph = nx.DiGraph([(1, 2)])
    graph.add_node(3)
    assert nx.has_path(graph, 1, 2, backend=BACKEND_NAME)
    copied = duplicate(graph)
    copied.add_edge(2, 3)
    assert nx.has_path(copied, 1, 3, backend=BACKEND_NAME)
    assert not nx.has_path(graph, 1, 3, backend=BACKEND_NAME)
    graph.add_edge(3, 1)
    assert nx.descendants(copied, 3, backend=BACKEND_NAME) == set()
    assert nx.descendants(graph, 3, backend=BACKEND_NAME) == {1, 2}


def test_unknown_nodes_fail_as_in_networkx() -> None:
    for graph in (nx.DiGraph([(1, 2)]), nx.Graph([(1, 2)]), nx.DiGraph()):
        for function, args in [
            (nx.has_path, (1, 9)),
            (nx.has_path, (9, 1)),
            (nx.has_path, ([1], 1)),  # unhashable: not in the graph
            (nx.shortest_path, (9, 9)),
            (nx.shortest_path, (1, [1])),
            (nx.descendants, (9,)),
            (nx.ancestors, (9,)),
            (nx.descendants, ([1],)),  # TypeError, as networkx's
        ]:
            expected = outcome(function, graph, *args, backend="networkx")
            assert isinstance(expected, tuple), (function, args)
            assert outcome(function, graph, *args, backend=BACKEND_NAME) == expected


def test_other_forms_of_shortest_path_are_networkx_s(builds: list[Any]) -> None:
    """Forms the index does not answer: NotImplementedError when grail is asked for by name, networkx's answer
    when grail is only preferred (nx.config.backend_priority), without building an index."""
    graph = nx.path_graph(4, create_using=nx.DiGraph)
    graph.add_edge(0, 3, weight=5)
    for kwargs in [{"source": 0}, {"target": 3}, {}, {"source": 0, "target": 3, "weight": "weight"}]:
        with pytest.raises(NotImplementedError, match="not implemented by 'grail' backend for the given arguments"):
            nx.shortest_path(graph, backend=BACKEND_NAME, **kwargs)
        with nx.config(backend_priority=[BACKEND_NAME]):
            answer = nx.shortest_path(graph, **kwargs)
        expected = nx.shortest_path(graph, backend="networkx", **kwargs)
        assert (dict(answer) if kwargs == {} else answer) == (dict(expected) if kwargs == {} else expected)
    assert builds == []
    with pytest.raises(ValueError, match="method not supported: dfs"):
        nx.shortest_path(graph, 0, 3, method="dfs", backend=BACKEND_NAME)
    with nx.config(backend_priority=[BACKEND_NAME]):
        assert nx.shortest_path(graph, 0, 3) == [0, 3]
        assert nx.has_path(graph, 3, 0) is False
    assert builds == [graph]


def test_networkx_finds_the_backend() -> None:
    """The entry points (pyproject.toml) are registered by the install, and every function they list exists."""
    assert BACKEND_NAME in nx.utils.backends.backends
    info = nx.utils.backends.backend_info[BACKEND_NAME]
    assert set(info["functions"]) == set(FUNCTIONS)
    loaded = nx.utils.backends._load_backend(BACKEND_NAME)
    assert all(callable(getattr(loaded, name)) for name in FUNCTIONS)


def test_imports_stay_light() -> None:
    """grail_core never imports networkx, and importing networkx (which reads the backend's info) loads no
    numba and no index."""
    for check in [
        "import sys, grail_core.index; assert 'networkx' not in sys.modules",
        "import sys, networkx; assert 'grail_core.nx_backend' in sys.modules; "
        "assert 'numba' not in sys.modules and 'grail_core.index' not in sys.modules",
    ]:
        subprocess.run([sys.executable, "-c", check], check=True, cwd=REPO_ROOT, timeout=120)


# networkx's tests of the backend's functions: descendants and ancestors (and the DAG functions built on
# them), has_path and shortest_path, and the functions that call them (simple paths, d-separation).
NETWORKX_TESTS = [
    "networkx.algorithms.tests.test_dag",
    "networkx.algorithms.shortest_paths.tests.test_generic",
    "networkx.algorithms.shortest_paths.tests.test_unweighted",
    "networkx.algorithms.tests.test_simple_paths",
    "networkx.algorithms.tests.test_d_separation",
]


def test_networkx_own_tests_pass_with_the_backend(tmp_path: Any) -> None:
    """networkx's test mode (NETWORKX_TEST_BACKEND): every dispatchable call goes to the backend where it can
    run, networkx runs the others (NETWORKX_FALLBACK_TO_NX); each of the backend's functions must be reached."""
    check_same_answers(nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3)]))  # numba's kernels compiled and cached first
    calls = tmp_path / "calls.json"
    env = os.environ | {
        "NETWORKX_TEST_BACKEND": BACKEND_NAME,
        "NETWORKX_FALLBACK_TO_NX": "True",
        "GRAIL_NX_CALLS": str(calls),
        "PYTHONPATH": REPO_ROOT,
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.nx_backend_probe"]
    done = subprocess.run(
        [*command, "--pyargs", *NETWORKX_TESTS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert " passed" in done.stdout and " xfail" not in done.stdout, done.stdout[-2000:]
    reached = json.loads(calls.read_text())
    assert set(reached) == set(FUNCTIONS) and min(reached.values()) > 0, reached
