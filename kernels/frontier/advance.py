"""The degree-class advance: every out-edge of every node of a level, each node walked by a thread, a warp,
a block or the whole grid by its out-degree (Enterprise BFS's and Gunrock's split, plus the grid).

* SMALL (out-degree below ``medium_min``): one thread walks the node's edges;
* MEDIUM (below ``large_min``): one warp, lanes striding over the edges;
* LARGE (below ``huge_min``): one block, its threads striding over the edges;
* HUGE: the whole grid strides over the concatenated edges of the level's huge nodes, so a hub
  with millions of children is spread over every SM instead of serializing one block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from numba import cuda

from ..compiled import kernel, op_name
from .launch import WARP

__all__ = [
    "CLASSES",
    "HUGE",
    "LARGE",
    "MEDIUM",
    "SMALL",
    "DegreeSplit",
    "LevelArrays",
    "degree_class",
    "is_narrow",
    "level_width",
    "make_advance",
    "make_advance_body",
    "make_node_body",
]

SMALL, MEDIUM, LARGE, HUGE = 0, 1, 2, 3
CLASSES = 4


class LevelArrays(NamedTuple):
    """Level queues on the device: ``queues[cls]`` holds the nodes of level 0, then level 1, ...;
    ``ptr[cls, lvl]`` is where level ``lvl`` starts in queue ``cls`` and ``cnt[cls, lvl]`` how many nodes it has."""

    queues: Any  # int32 (CLASSES, capacity)
    ptr: Any  # int64 (CLASSES, levels + 1)
    cnt: Any  # int64 (CLASSES, levels + 1)


class DegreeSplit(NamedTuple):
    """The out-degrees at which a node moves to the next class (``EngineConfig``'s thresholds)."""

    medium_min: int
    large_min: int
    huge_min: int


@cuda.jit(device=True, inline=True)
def degree_class(degree, split):
    if degree < split.medium_min:
        return SMALL
    if degree < split.large_min:
        return MEDIUM
    if degree < split.huge_min:
        return LARGE
    return HUGE


@cuda.jit(device=True, inline=True)
def level_width(cnt, lvl):
    """Nodes on level ``lvl``, or -1 when the level holds a node of the large or huge class."""
    if cnt[LARGE, lvl] + cnt[HUGE, lvl] > 0:
        return -1
    return cnt[SMALL, lvl] + cnt[MEDIUM, lvl]


@cuda.jit(device=True, inline=True)
def is_narrow(cnt, lvl, narrow):
    """Whether level ``lvl`` is one block's work: at most ``narrow`` nodes, none of them large or huge.

    A grid barrier costs several microseconds; a run of such levels is walked by the first block alone
    with block barriers (tenths of a microsecond), which is what makes DAGs of 10^5 levels cheap."""
    width = level_width(cnt, lvl)
    return width >= 0 and width <= narrow


def make_advance_body(edge_op: Callable[..., None]) -> Any:
    """Device function ``advance_level(indptr, levels, lvl, args, block, blocks)``: ``edge_op(v, e, lvl, args)``
    once for every out-edge position ``e`` of every node ``v`` of level ``lvl`` of ``levels``
    (``LevelArrays``), split by degree class, over ``blocks`` blocks of which the caller's is ``block``
    (the grid: ``cuda.blockIdx.x, cuda.gridDim.x``; one block alone: ``0, 1``). Calls for edges of one
    node may run concurrently, so whatever ``edge_op`` accumulates goes through atomics.
    """

    @cuda.jit(device=True)
    def advance_level(indptr, levels, lvl, args, block, blocks):
        queues, ptr, cnt = levels
        tid = cuda.threadIdx.x
        gtid = block * cuda.blockDim.x + tid
        nthreads = blocks * cuda.blockDim.x
        start = ptr[SMALL, lvl]
        for i in range(gtid, cnt[SMALL, lvl], nthreads):
            v = queues[SMALL, start + i]
            for e in range(indptr[v], indptr[v + 1]):
                edge_op(v, e, lvl, args)
        lane = tid % WARP
        start = ptr[MEDIUM, lvl]
        for i in range(gtid // WARP, cnt[MEDIUM, lvl], nthreads // WARP):
            v = queues[MEDIUM, start + i]
            for e in range(indptr[v] + lane, indptr[v + 1], WARP):
                edge_op(v, e, lvl, args)
        start = ptr[LARGE, lvl]
        for i in range(block, cnt[LARGE, lvl], blocks):
            v = queues[LARGE, start + i]
            for e in range(indptr[v] + tid, indptr[v + 1], cuda.blockDim.x):
                edge_op(v, e, lvl, args)
        # The huge nodes' edges are strided over the grid as one concatenated range, so that several
        # huge nodes keep every thread busy just as one does.
        start = ptr[HUGE, lvl]
        offset = 0
        for i in range(cnt[HUGE, lvl]):
            v = queues[HUGE, start + i]
            first, stop = indptr[v], indptr[v + 1]
            skip = (gtid + nthreads - offset % nthreads) % nthreads
            for e in range(first + skip, stop, nthreads):
                edge_op(v, e, lvl, args)
            offset += stop - first

    return advance_level


def make_node_body(node_op: Callable[..., None]) -> Any:
    """Device function ``node_level(levels, lvl, args, gtid, nthreads)``: ``node_op(v, lvl, args)`` per node
    of the level, over ``nthreads`` threads of which the caller is ``gtid``."""

    @cuda.jit(device=True)
    def node_level(levels, lvl, args, gtid, nthreads):
        queues, ptr, cnt = levels
        for cls in range(CLASSES):
            start = ptr[cls, lvl]
            for i in range(gtid, cnt[cls, lvl], nthreads):
                node_op(queues[cls, start + i], lvl, args)

    return node_level


def make_advance(edge_op: Callable[..., None]) -> Any:
    """Kernel ``advance(indptr, levels, lvl, args)``: one level of ``make_advance_body`` (every node at once
    through ``LevelQueues.everything``)."""
    advance_level = make_advance_body(edge_op)

    def advance(indptr, levels, lvl, args):
        advance_level(indptr, levels, lvl, args, cuda.blockIdx.x, cuda.gridDim.x)

    return kernel(advance, f"advance[{op_name(edge_op)}]")
