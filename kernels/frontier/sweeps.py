"""Sweeps: one persistent kernel over many levels, a grid barrier after each step of a level.

One launch per phase instead of one per level: a launch from Python costs many grid barriers, and a block
barrier a fraction of one (runs of narrow levels take those). A sweep
needs a cooperative launch (``cooperative_blocks``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import cuda

from ..compiled import kernel, op_name
from .advance import is_narrow, make_advance_body, make_node_body

__all__ = ["make_sweep"]


@cuda.jit(device=True, inline=True)
def no_edge(v, e, lvl, args):
    """The edge op of a kernel without an edge step (also ``discovery``'s one-way rules)."""


@cuda.jit(device=True, inline=True)
def _no_node(v, lvl, args):
    pass


def make_sweep(edge_op: Callable[..., None] | None = None, node_op: Callable[..., None] | None = None) -> Any:
    """Persistent kernel ``sweep(indptr, levels, first, count, step, edge_args, node_args, narrow)``: ``count``
    levels of ``levels`` (``LevelArrays``) from ``first`` in steps of ``step`` (+1 top-down, -1 bottom-up);
    per level ``edge_op(v, e, lvl, edge_args)`` over the level's out-edges, a barrier, then
    ``node_op(v, lvl, node_args)`` over its nodes, a barrier. Either op may be left out (its args are
    then ignored; pass ``()``), and so is its step and its barrier. A run of levels of at most ``narrow``
    small or medium nodes each is walked by the first block alone, with block barriers, and one grid
    barrier after the run (``advance.is_narrow``).
    """
    if edge_op is None and node_op is None:
        raise ValueError("a sweep needs an edge or a node operation")
    advance_level = make_advance_body(edge_op or no_edge)
    node_level = make_node_body(node_op or _no_node)
    # Constants to the compiler: the step left out is compiled away.
    with_edges = edge_op is not None
    with_nodes = node_op is not None

    def sweep(indptr, levels, first, count, step, edge_args, node_args, narrow):
        grid = cuda.cg.this_grid()
        block = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        cnt = levels[2]
        i = 0
        while i < count:
            lvl = first + i * step
            if is_narrow(cnt, lvl, narrow):
                while i < count and is_narrow(cnt, first + i * step, narrow):
                    if block == 0:
                        lvl = first + i * step
                        if with_edges:
                            advance_level(indptr, levels, lvl, edge_args, 0, 1)
                            cuda.syncthreads()
                        if with_nodes:
                            node_level(levels, lvl, node_args, tid, cuda.blockDim.x)
                            cuda.syncthreads()
                    i += 1
                grid.sync()
                continue
            if with_edges:
                advance_level(indptr, levels, lvl, edge_args, block, cuda.gridDim.x)
                grid.sync()
            if with_nodes:
                node_level(levels, lvl, node_args, cuda.grid(1), cuda.gridsize(1))
                grid.sync()
            i += 1

    return kernel(sweep, f"sweep[{op_name(edge_op)},{op_name(node_op)}]")
