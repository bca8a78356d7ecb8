"""Views of an index's graph that the searches beyond yes/no read, each built on first use and kept.

The index files hold the graph's children (CSR) and the DAG with its labels; paths, ancestors and edge
updates also need the parents of every node and DAG node (with the forward position of each edge, so that
a removed edge is recognised from either end) and the members of every DAG node. Counting descendants from
the labels needs, per dimension, the DAG nodes in post-order and the running total of their members.
"""

from __future__ import annotations

import threading

import numpy as np

from .graph import index_dtype
from .query import QueryArrays, frozen
from .traversal import Side, group_members, transpose_with_edges

__all__ = ["GraphViews", "frozen"]


class GraphViews:
    """The graph (``graph_csr``, node ids) and the DAG (``arrays``) in the forms the searches read."""

    def __init__(self, graph_csr: tuple[np.ndarray, np.ndarray], arrays: QueryArrays) -> None:
        self.out_indptr, self.out_indices = (frozen(a) for a in graph_csr)
        self.arrays = arrays
        self.num_nodes = self.out_indptr.size - 1
        self.num_edges = self.out_indices.size
        self.num_dag_nodes = int(arrays.level.size)
        self.comp = frozen(arrays.comp)
        self.edge_dtype = index_dtype(0, max(self.num_edges, int(arrays.out_indices.size)))
        self._lock = threading.Lock()
        self._members: tuple[np.ndarray, np.ndarray] | None = None
        self._forward: Side | None = None
        self._backward: Side | None = None
        self._dag_parents: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._post_order: tuple[np.ndarray, np.ndarray] | None = None

    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, nodes): the members of each DAG node, ids ascending."""
        if self._members is None:
            with self._lock:
                if self._members is None:
                    nodes = np.empty(self.num_nodes, dtype=index_dtype(self.num_nodes, 0))
                    indptr = group_members(self.comp, self.num_dag_nodes, nodes)
                    self._members = (frozen(indptr), frozen(nodes))
        return self._members

    def forward(self) -> Side:
        """Children of nodes and of DAG nodes."""
        if self._forward is None:
            mem_indptr, mem = self.members()
            none = frozen(np.zeros(0, dtype=self.edge_dtype))
            dag_indptr, dag_indices = self.dag_children()
            side = Side(
                self.out_indptr, self.out_indices, none, dag_indptr, dag_indices, none, self.comp, mem_indptr, mem
            )
            with self._lock:
                self._forward = self._forward or side
        return self._forward

    def dag_children(self) -> tuple[np.ndarray, np.ndarray]:
        return frozen(self.arrays.out_indptr), frozen(self.arrays.out_indices)

    def dag_parents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, indices, forward position of each entry) of the DAG's parents."""
        if self._dag_parents is None:
            parents = self._reverse(*self.dag_children())
            with self._lock:
                self._dag_parents = self._dag_parents or parents
        return self._dag_parents

    def backward(self) -> Side:
        """Parents of nodes and of DAG nodes, each entry with the forward position of its edge."""
        if self._backward is None:
            forward = self.forward()
            indptr, indices, edge = self._reverse(forward.indptr, forward.indices)
            side = Side(indptr, indices, edge, *self.dag_parents(), *forward[6:])
            with self._lock:
                self._backward = self._backward or side
        return self._backward

    def _reverse(self, indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out_indices = np.empty_like(indices)
        out_edge = np.empty(indices.size, dtype=self.edge_dtype)
        out_indptr = transpose_with_edges(indptr, indices, out_indices, out_edge)
        return frozen(out_indptr), frozen(out_indices), frozen(out_edge)

    def post_order(self) -> tuple[np.ndarray, np.ndarray]:
        """Per dimension k: the DAG nodes in post-order (``order[k, p]`` has post-order p) and the number of
        members of the DAG nodes before each post-order (``members_before[k, p]``, N + 1 entries)."""
        if self._post_order is None:
            hi = np.asarray(self.arrays.hi)
            dims = hi.shape[1]
            order = np.empty((dims, self.num_dag_nodes), dtype=np.int64)
            sizes = np.bincount(self.comp, minlength=self.num_dag_nodes)
            before = np.zeros((dims, self.num_dag_nodes + 1), dtype=np.int64)
            for k in range(dims):
                order[k, hi[:, k]] = np.arange(self.num_dag_nodes)
                np.cumsum(sizes[order[k]], out=before[k, 1:])
            with self._lock:
                self._post_order = self._post_order or (frozen(order), frozen(before))
        return self._post_order
