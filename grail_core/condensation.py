"""The condensation DAG of the strongly connected components, its topological numbering and levels.

Component ids are a topological order of the DAG (every DAG edge goes from a lower to a higher id),
which the query filter uses as a free first test. The order is defined by the graph alone, so every
backend and thread count gives the same ids: by decreasing *height* (the longest path down to a sink),
ties by the smallest node id in the component. An edge u -> v has height(u) > height(v), so this is
topological; and since the filter's level test is the longest path from a root (*depth*), the id test
is an independent second one: u reaches v only if depth(u) < depth(v) and height(u) > height(v).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .frontier import Frontier, advance, no_pull, push_edges
from .graph import Digraph, WorkCallback, mapped_csr, permuted_csr
from .parallel import PARALLEL_MIN_NODES, atomic_add, atomic_max, flagged, stable_order
from .scc import strongly_connected_components

__all__ = [
    "Condensation",
    "condense",
    "longest_path_levels",
    "quotient_graph",
    "renumber",
    "topological_numbering",
]


@njit(nogil=True, inline="always")
def _release_child(v, w, e, pending, level, _):
    """Kahn's step on an edge v -> w: w gets at least v's level + 1; its last parent queues it."""
    following = level[v] + 1
    if level[w] < following:
        atomic_max(level, w, following)
    return atomic_add(pending, w, -1) == 1


@njit(nogil=True, inline="always")
def _release_children(v, context, local, count, queue, tail):
    indptr, indices, pending, level = context
    return push_edges(v, indptr, indices, _release_child, pending, level, None, local, count, queue, tail)


@njit(nogil=True, parallel=True, cache=True)
def _kahn(indptr, indices, pending, level, queue, tail, frontier):
    """Longest path (in edges) from a source to every node, for the sources already in ``queue``."""
    return advance(_release_children, no_pull, (indptr, indices, pending, level), queue, tail, frontier)


@njit(nogil=True, parallel=True, cache=True)
def _in_degrees(in_indptr, pending, is_source):
    for v in prange(pending.size):
        pending[v] = in_indptr[v + 1] - in_indptr[v]
        is_source[v] = pending[v] == 0


def _levels_from(
    indptr: np.ndarray, indices: np.ndarray, reverse_indptr: np.ndarray, parallel_min: int = PARALLEL_MIN_NODES
) -> np.ndarray:
    """Longest path from a node without parents (parents: ``reverse_indptr``'s rows) along ``indptr``."""
    n = indptr.size - 1
    pending = np.empty(n, dtype=np.int64)
    is_source = np.empty(n, dtype=np.int8)
    _in_degrees(reverse_indptr, pending, is_source)
    queue = np.empty(n, dtype=indices.dtype)
    tail = np.array([flagged(is_source, queue)], dtype=np.int64)
    del is_source
    level = np.zeros(n, dtype=np.int32)
    done = _kahn(indptr, indices, pending, level, queue, tail, Frontier.over(n, parallel_min))
    if done != n:
        raise ValueError("the graph has a cycle: levels are defined on DAGs only")
    return level


def longest_path_levels(dag: Digraph) -> np.ndarray:
    """Level of every DAG node: 0 for roots; an edge u->v always has level[u] < level[v]."""
    return _levels_from(dag.out_indptr, dag.out_indices, dag.in_indptr)


def topological_numbering(dag: Digraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, rank, depth): the node of every canonical id (module docstring), the canonical id of every
    node, and every node's depth."""
    height = _levels_from(dag.in_indptr, dag.in_indices, dag.out_indptr)
    top = int(height.max()) + 1 if height.size else 0
    order, _ = stable_order(top - 1 - height, top)
    del height
    rank = np.empty_like(order)
    _invert(order, rank)
    return order, rank, longest_path_levels(dag)


@njit(nogil=True, parallel=True, cache=True)
def _invert(order, rank):
    for i in prange(order.size):
        rank[order[i]] = i


@njit(nogil=True, parallel=True, cache=True)
def _permute(values, rank, out):
    for i in prange(values.size):
        out[rank[i]] = values[i]


@njit(nogil=True, parallel=True, cache=True)
def _compose(first, second):
    """first[v] = second[first[v]], in place."""
    for v in prange(first.size):
        first[v] = second[first[v]]


@dataclass(frozen=True)
class Condensation:
    """The DAG of strongly connected components: ``comp`` maps nodes to DAG nodes."""

    comp: np.ndarray
    dag: Digraph
    level: np.ndarray

    @property
    def num_levels(self) -> int:
        return int(self.level.max()) + 1 if self.level.size else 0


# Nodes sampled to guess the largest component (whose internal edges the quotient drops by a bitmap).
_SAMPLE = 1 << 16


@njit(nogil=True, parallel=True, cache=True)
def _members(comp, cls, bits):
    for word in prange(bits.size):
        value = np.uint64(0)
        for v in range(64 * word, min(64 * word + 64, comp.size)):
            if comp[v] == cls:
                value |= np.uint64(1) << np.uint64(v - 64 * word)
        bits[word] = value


def quotient_graph(graph: Digraph, comp: np.ndarray, count: int, report: WorkCallback | None = None) -> Digraph:
    """The graph of the components (ids as in ``comp``): an edge between two components for every edge
    of the graph between them, repeats merged. ``report``: 4 x the graph's edges + 4 x the DAG's.

    A graph whose components are all single nodes (a DAG) is its own quotient: the components are
    numbered by their smallest node, so ``comp`` is the identity and nothing is built.
    """
    if count == graph.num_nodes:
        if report:
            report(4 * graph.num_edges)
        return graph
    out_indptr, out_indices = graph.out_indptr, graph.out_indices
    sample = comp[:: max(1, comp.size // _SAMPLE)]
    largest = int(np.bincount(sample).argmax()) if sample.size else 0
    inside = np.empty((comp.size + 63) // 64, dtype=np.uint64)
    _members(comp, largest, inside)
    csr = mapped_csr(count, out_indptr, out_indices, comp, report=report, inside=inside)
    return Digraph.from_csr(*csr, report)


def renumber(raw: Digraph, comp: np.ndarray, report: WorkCallback | None = None) -> Condensation:
    """The condensation on its canonical topological ids (module docstring), from the component DAG on
    any ids; ``comp`` is renumbered in place. ``report``: 10 x the DAG's edges."""
    order, rank, depth = topological_numbering(raw)
    if report:
        report(2 * raw.num_edges)
    level = np.empty_like(depth)
    _permute(depth, rank, level)
    del depth
    out_csr = permuted_csr(raw.out_indptr, raw.out_indices, order, rank)
    in_csr = permuted_csr(raw.in_indptr, raw.in_indices, order, rank)
    if report:
        report(8 * raw.num_edges)
    _compose(comp, rank)
    return Condensation(comp=comp, dag=Digraph(*out_csr, *in_csr), level=level)


def condense(graph: Digraph, report: WorkCallback | None = None) -> Condensation:
    """SCCs, the condensation DAG on topologically ordered ids (module docstring), and its levels."""
    comp, count = strongly_connected_components(graph, report=report)
    return renumber(quotient_graph(graph, comp, count, report), comp, report)
