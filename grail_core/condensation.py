"""Strongly connected components, the condensation DAG and its topological levels.

Component ids are a topological order of the DAG (every DAG edge goes from a lower to a higher id),
which the query filter uses as a free first test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .graph import Digraph

__all__ = ["Condensation", "strongly_connected_components", "condense", "longest_path_levels"]


@njit(nogil=True, cache=True)
def _tarjan(indptr, indices):
    """Iterative Tarjan; components numbered in reverse completion order, i.e. topologically."""
    n = indptr.size - 1
    index = np.full(n, -1, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    on_stack = np.zeros(n, dtype=np.bool_)
    scc_stack = np.empty(n, dtype=np.int64)
    call_node = np.empty(n, dtype=np.int64)
    call_edge = np.empty(n, dtype=np.int64)
    comp = np.empty(n, dtype=np.int64)
    next_index = 0
    scc_top = 0
    completed = 0
    for start in range(n):
        if index[start] >= 0:
            continue
        index[start] = next_index
        low[start] = next_index
        next_index += 1
        scc_stack[scc_top] = start
        scc_top += 1
        on_stack[start] = True
        call_node[0] = start
        call_edge[0] = indptr[start]
        depth = 1
        while depth > 0:
            v = call_node[depth - 1]
            e = call_edge[depth - 1]
            if e < indptr[v + 1]:
                call_edge[depth - 1] = e + 1
                w = indices[e]
                if index[w] < 0:
                    index[w] = next_index
                    low[w] = next_index
                    next_index += 1
                    scc_stack[scc_top] = w
                    scc_top += 1
                    on_stack[w] = True
                    call_node[depth] = w
                    call_edge[depth] = indptr[w]
                    depth += 1
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            else:
                depth -= 1
                if low[v] == index[v]:
                    while True:
                        scc_top -= 1
                        w = scc_stack[scc_top]
                        on_stack[w] = False
                        comp[w] = completed
                        if w == v:
                            break
                    completed += 1
                if depth > 0:
                    parent = call_node[depth - 1]
                    if low[v] < low[parent]:
                        low[parent] = low[v]
    for v in range(n):
        comp[v] = completed - 1 - comp[v]
    return comp, completed


def strongly_connected_components(graph: Digraph) -> tuple[np.ndarray, int]:
    """Component id of every node (a topological order of the condensation) and their number."""
    comp, count = _tarjan(graph.out_indptr, graph.out_indices)
    dtype = np.int32 if count < 2**31 - 1 else np.int64
    return comp.astype(dtype), int(count)


@njit(nogil=True, cache=True)
def _levels(indptr_in, indices_in):
    """Longest path from a root, in edges; ids are topological, so one ascending sweep suffices."""
    n = indptr_in.size - 1
    level = np.zeros(n, dtype=np.int32)
    for v in range(n):
        best = 0
        for e in range(indptr_in[v], indptr_in[v + 1]):
            candidate = level[indices_in[e]] + 1
            if candidate > best:
                best = candidate
        level[v] = best
    return level


def longest_path_levels(dag: Digraph) -> np.ndarray:
    """Level of every DAG node: 0 for roots; an edge u->v always has level[u] < level[v]."""
    return _levels(dag.in_indptr, dag.in_indices)


@dataclass(frozen=True)
class Condensation:
    """The DAG of strongly connected components: ``comp`` maps nodes to DAG nodes."""

    comp: np.ndarray
    dag: Digraph
    level: np.ndarray

    @property
    def num_levels(self) -> int:
        return int(self.level.max()) + 1 if self.level.size else 0


def condense(graph: Digraph) -> Condensation:
    """SCCs, the condensation DAG on topologically ordered ids, and its levels."""
    comp, count = strongly_connected_components(graph)
    src = np.repeat(comp, np.diff(graph.out_indptr))
    dst = comp[graph.out_indices]
    dag = Digraph.from_edges(count, src, dst)
    return Condensation(comp=comp, dag=dag, level=longest_path_levels(dag))
