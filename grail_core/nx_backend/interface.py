"""The backend interface networkx dispatches to: ``GrailGraph`` (a networkx graph and its index), the
functions of ``FUNCTIONS`` with networkx's signatures, errors and results, and the conversions.

A node of any hashable type is an id 0..n-1 here (networkx's own equality: 1, 1.0 and True are one node), so
the index never sees the nodes themselves and every node type networkx accepts works.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, NamedTuple

import networkx as nx
import numpy as np

from ..index import ReachabilityIndex
from . import BACKEND_NAME

__all__ = ["GrailGraph", "BackendInterface", "backend_interface"]

# Where a graph's cache holds the token of its current contents (see ``_generation``).
_GENERATION_KEY = "grail_generation"


class _Indexed(NamedTuple):
    """One generation of a graph, indexed: its nodes by id, their ids, the index (None without nodes)."""

    nodes: np.ndarray  # object array
    ids: dict[Any, int]
    directed: bool
    reachability: ReachabilityIndex | None
    generation: object | None


def _generation(graph: Any) -> object | None:
    """A token that stays in place until the graph changes, or None where it cannot be kept.

    networkx clears a graph's ``__networkx_cache__`` (where it keeps the ``GrailGraph``) on every change made
    through its methods, but a view (``G.subgraph(...)``, ``G.reverse(copy=False)``) has a cache of its own that
    changes to the graph under it leave in place. The token lives in the cache of that graph."""
    root = graph
    while getattr(root, "_graph", None) is not None:
        root = root._graph
    cache = getattr(root, "__networkx_cache__", None)
    return None if cache is None else cache.setdefault(_GENERATION_KEY, object())


def _index_graph(graph: Any, generation: object | None) -> _Indexed:
    """Every node of the graph (isolated ones too) and its edges over node ids; an undirected graph's edges
    run both ways (its adjacency lists each edge at both ends), a multigraph's parallel edges count once."""
    n = graph.number_of_nodes()
    nodes = np.fromiter(graph, dtype=object, count=n)
    ids = {node: i for i, node in enumerate(nodes.tolist())}
    if n == 0:
        return _Indexed(nodes, ids, graph.is_directed(), None, generation)
    adjacency = graph.adj
    degrees = np.fromiter(map(len, adjacency.values()), dtype=np.int64, count=n)
    src = np.repeat(np.fromiter(map(ids.__getitem__, adjacency), dtype=np.int64, count=n), degrees)
    neighbors = itertools.chain.from_iterable(adjacency.values())
    dst = np.fromiter(map(ids.__getitem__, neighbors), dtype=np.int64, count=int(degrees.sum()))
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n)
    return _Indexed(nodes, ids, graph.is_directed(), index, generation)


class GrailGraph:
    """A networkx graph as the backend answers for it: the graph, and an index of it built on the first call
    and built again when the graph has changed. networkx keeps it in ``G.__networkx_cache__``."""

    __networkx_backend__ = BACKEND_NAME

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self._indexed: _Indexed | None = None

    def __reduce__(self) -> tuple[type[GrailGraph], tuple[Any]]:
        # Copied or pickled with its graph (networkx's cache goes with the graph), without the index: the copy
        # indexes on its first call.
        return GrailGraph, (self.graph,)

    def indexed(self) -> _Indexed:
        current = _generation(self.graph)
        indexed = self._indexed
        if indexed is None or current is None or indexed.generation is not current:
            indexed = self._indexed = _index_graph(self.graph, current)
        return indexed


def _endpoint(indexed: _Indexed, node: Any, role: str) -> int:
    """A path end's id; NodeNotFound as networkx's ``bidirectional_shortest_path`` raises it (an unhashable
    node is not in the graph either)."""
    try:
        return indexed.ids[node]
    except (KeyError, TypeError):
        raise nx.NodeNotFound(f"{role} {node} is not in G") from None


def _source(indexed: _Indexed, node: Any) -> int:
    """A search's source; NetworkXError as networkx's ``G.neighbors`` raises it (TypeError when unhashable)."""
    try:
        return indexed.ids[node]
    except KeyError:
        kind = "digraph" if indexed.directed else "graph"
        raise nx.NetworkXError(f"The node {node} is not in the {kind}.") from None


def _reach(G: GrailGraph, source: Any, forward: bool) -> set[Any]:
    indexed = G.indexed()
    u = _source(indexed, source)
    assert indexed.reachability is not None  # a graph with a node has an index
    ids = indexed.reachability.descendant_ids(u) if forward else indexed.reachability.ancestor_ids(u)
    return set(indexed.nodes[ids].tolist())


def has_path(G: GrailGraph, source: Any, target: Any) -> bool:
    indexed = G.indexed()
    u, v = _endpoint(indexed, source, "Source"), _endpoint(indexed, target, "Target")
    assert indexed.reachability is not None
    return bool(indexed.reachability.reachable(u, v))


def descendants(G: GrailGraph, source: Any) -> set[Any]:
    return _reach(G, source, True)


def ancestors(G: GrailGraph, source: Any) -> set[Any]:
    return _reach(G, source, False)


def shortest_path(
    G: GrailGraph, source: Any = None, target: Any = None, weight: Any = None, method: str = "dijkstra"
) -> list[Any]:
    if method not in ("dijkstra", "bellman-ford"):
        raise ValueError(f"method not supported: {method}")
    if reason := _shortest_path_unsupported(source, target, weight):
        raise NotImplementedError(reason)
    indexed = G.indexed()
    u, v = _endpoint(indexed, source, "Source"), _endpoint(indexed, target, "Target")
    assert indexed.reachability is not None
    path = indexed.reachability.path_ids(u, v)
    if path is None:
        raise nx.NetworkXNoPath(f"No path between {source} and {target}.")
    return indexed.nodes[path].tolist()


def _shortest_path_unsupported(source: Any, target: Any, weight: Any) -> str:
    """Why the index does not answer this form of ``shortest_path`` ('' when it does)."""
    if weight is not None:
        return "grail answers unweighted shortest paths only (weight=None)"
    if source is None or target is None:
        return "grail answers shortest paths between a given source and target only"
    return ""


_SHORTEST_PATH = inspect.signature(shortest_path)


class BackendInterface:
    """What networkx's dispatcher reads: the functions, ``can_run`` and the conversions."""

    has_path = staticmethod(has_path)
    descendants = staticmethod(descendants)
    ancestors = staticmethod(ancestors)
    shortest_path = staticmethod(shortest_path)

    @staticmethod
    def can_run(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool | str:
        """True, or why not (networkx then runs its own implementation when grail was chosen by priority)."""
        if name != "shortest_path":
            return True
        try:
            bound = _SHORTEST_PATH.bind(*args, **kwargs)
        except TypeError:
            return True  # the call raises networkx's TypeError
        bound.apply_defaults()
        arguments = bound.arguments
        return _shortest_path_unsupported(arguments["source"], arguments["target"], arguments["weight"]) or True

    @staticmethod
    def convert_from_nx(graph: Any, **_: Any) -> GrailGraph:
        """The backend graph of a networkx graph (attributes are not read: every function here ignores them)."""
        if not isinstance(graph, nx.Graph):
            raise TypeError(f"expected a networkx graph, got {type(graph).__name__}")
        return GrailGraph(graph)

    @staticmethod
    def convert_to_nx(obj: Any, **_: Any) -> Any:
        """The networkx graph behind a ``GrailGraph``; any other result as it is."""
        return obj.graph if isinstance(obj, GrailGraph) else obj


backend_interface = BackendInterface()
