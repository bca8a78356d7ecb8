"""Maps: a per-item function over a flat range, strided over the grid (edges, nodes, slots)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import cuda

from ..compiled import kernel, op_name

__all__ = ["make_edge_map", "make_map_body", "make_map_extent_body"]


def make_map_body(op: Callable[..., None]) -> Any:
    """Device function ``map_all(count, args)``: ``op(i, args)`` for i in [0, count), strided over the grid."""

    @cuda.jit(device=True)
    def map_all(count, args):
        gtid = cuda.grid(1)
        for i in range(gtid, count, cuda.gridsize(1)):
            op(i, args)

    return map_all


def make_map_extent_body(op: Callable[..., Any]) -> Any:
    """Device function ``map_extent(count, extent, args)``: ``op(i, args)`` for i in [0, count), strided over
    the grid, where op returns (low, high); folds the least low into ``extent[0]`` and the greatest high
    into ``extent[1]``, one atomic each per thread that has any. (A block-wide reduction first doubles
    the registers of a persistent kernel that holds it beside the balanced operators.)"""

    @cuda.jit(device=True)
    def map_extent(count, extent, args):
        low = extent[0]
        high = extent[1]
        for i in range(cuda.grid(1), count, cuda.gridsize(1)):
            a, b = op(i, args)
            low = min(low, a)
            high = max(high, b)
        if low < extent[0]:
            cuda.atomic.min(extent, 0, low)
        if high > extent[1]:
            cuda.atomic.max(extent, 1, high)

    return map_extent


def make_edge_map(op: Callable[..., None]) -> Any:
    """Kernel ``edge_map(count, args)`` calling ``op(i, args)`` for i in [0, count): flat maps over edges or nodes."""
    map_all = make_map_body(op)

    def edge_map(count, args):
        map_all(count, args)

    return kernel(edge_map, f"map[{op_name(op)}]")
