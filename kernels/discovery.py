"""Level discovery from any start set: the frontier engine's Kahn loop, generalised to any discover rule.

``frontier.build_level_queues`` discovers levels from one root by Kahn's rule (the last parent puts a
child on the next level). The build's other traversals (the SCC's trim and its forward and backward
reach) discover levels from a set of nodes by other rules: a node whose last live parent or child left,
a node first reached. ``make_level_discovery(edge_op[, reverse_op])`` gives the persistent kernel for a
rule: per level, the engine's degree-split advance calls ``edge_op(v, e, lvl, args)`` on the level's
nodes' edges (and ``reverse_op`` along a second CSR, for a rule that looks both ways); an op puts a node
on the next level with ``append_next``. One cooperative launch runs every level, with a grid barrier
between levels, and stops on the device at the first empty level or after ``max_levels`` levels (then
``status[1]`` is 1: a long chain would otherwise cost a barrier per node).

The queues are the engine's ``LevelQueues`` layout, so the engine's sweeps run over them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from .frontier import (
    CLASSES,
    HUGE,
    LARGE,
    MEDIUM,
    SMALL,
    EngineConfig,
    LevelQueues,
    cooperative_blocks,
    degree_class,
    make_advance_body,
    make_edge_map,
    make_node_sweep,
)
from .memory import device_fill

__all__ = ["Discovery", "append_next", "make_level_discovery", "node_levels"]


@cuda.jit(device=True, inline=True)
def append_next(c, cls, lvl, queues, ptr, cnt):
    """Puts node c (degree class ``cls``) on level ``lvl + 1``: one atomic on that level's class counter."""
    slot = cuda.atomic.add(cnt, (cls, lvl + 1), 1)
    queues[cls, ptr[cls, lvl] + cnt[cls, lvl] + slot] = c


@cuda.jit(device=True, inline=True)
def _next_level_empty(cnt, lvl):
    return cnt[SMALL, lvl + 1] + cnt[MEDIUM, lvl + 1] + cnt[LARGE, lvl + 1] + cnt[HUGE, lvl + 1] == 0


def make_level_discovery(edge_op: Callable[..., None], reverse_op: Callable[..., None] | None = None) -> Any:
    """Persistent kernel ``discover(indptr, reverse_indptr, queues, ptr, cnt, max_levels, args, reverse_args,
    status)``; ``status[0]`` gets the number of levels, ``status[1]`` 1 when ``max_levels`` stopped it."""
    forward = make_advance_body(edge_op)
    backward = make_advance_body(reverse_op) if reverse_op is not None else None

    if backward is None:

        @cuda.jit
        def discover(indptr, reverse_indptr, queues, ptr, cnt, max_levels, args, reverse_args, status):
            grid = cuda.cg.this_grid()
            gtid = cuda.grid(1)
            lvl = 0
            while True:
                forward(indptr, queues, ptr, cnt, lvl, args)
                if gtid < CLASSES:
                    ptr[gtid, lvl + 1] = ptr[gtid, lvl] + cnt[gtid, lvl]
                grid.sync()
                if _next_level_empty(cnt, lvl) or lvl + 1 >= max_levels:
                    break
                lvl += 1
            if gtid == 0:
                status[0] = lvl + 1
                status[1] = 0 if _next_level_empty(cnt, lvl) else 1

        return discover

    @cuda.jit
    def discover_both(indptr, reverse_indptr, queues, ptr, cnt, max_levels, args, reverse_args, status):
        grid = cuda.cg.this_grid()
        gtid = cuda.grid(1)
        lvl = 0
        while True:
            forward(indptr, queues, ptr, cnt, lvl, args)
            backward(reverse_indptr, queues, ptr, cnt, lvl, reverse_args)
            if gtid < CLASSES:
                ptr[gtid, lvl + 1] = ptr[gtid, lvl] + cnt[gtid, lvl]
            grid.sync()
            if _next_level_empty(cnt, lvl) or lvl + 1 >= max_levels:
                break
            lvl += 1
        if gtid == 0:
            status[0] = lvl + 1
            status[1] = 0 if _next_level_empty(cnt, lvl) else 1

    return discover_both


@cuda.jit(device=True)
def _seed(i, args):
    """Start node i on level 0, in the class of its work (out-degree plus in-degree)."""
    nodes, indptr, reverse_indptr, queues, cnt, medium_min, large_min, huge_min = args
    v = nodes[i]
    work = indptr[v + 1] - indptr[v] + reverse_indptr[v + 1] - reverse_indptr[v]
    cls = degree_class(work, medium_min, large_min, huge_min)
    slot = cuda.atomic.add(cnt, (cls, 0), 1)
    queues[cls, slot] = v


_map_seed = make_edge_map(_seed)


class Discovery:
    """Level queues for one traversal, seeded from a start set, and the launch of a discovery kernel."""

    def __init__(self, num_nodes: int, max_levels: int, config: EngineConfig) -> None:
        """Queues for ``num_nodes`` nodes (each enters once) over at most ``max_levels`` levels."""
        self.config = config
        self.max_levels = max(1, max_levels)
        self.queues = cuda.device_array((CLASSES, max(1, num_nodes)), dtype=np.int32)
        self.capacity = self.max_levels + 2
        self.ptr = cuda.to_device(np.zeros((CLASSES, self.capacity), dtype=np.int64))
        self.cnt = cuda.to_device(np.zeros((CLASSES, self.capacity), dtype=np.int64))
        self.status = cuda.to_device(np.zeros(2, dtype=np.int64))

    def reset(self) -> None:
        """Empties the queues for the next traversal."""
        device_fill(self.ptr, 0, self.config)
        device_fill(self.cnt, 0, self.config)

    def run(
        self, kernel: Any, nodes: Any, indptr: Any, reverse_indptr: Any, args: tuple, reverse_args: tuple = ()
    ) -> tuple[int, bool]:
        """Seeds level 0 with ``nodes`` and runs ``kernel``; returns (levels, whether the bound stopped it)."""
        cfg = self.config
        if nodes.size:
            _map_seed[cfg.grid(), cfg.block](
                nodes.size,
                (nodes, indptr, reverse_indptr, self.queues, self.cnt, cfg.medium_min, cfg.large_min, cfg.huge_min),
            )
        kernel[cooperative_blocks(kernel, cfg), cfg.block](
            indptr, reverse_indptr, self.queues, self.ptr, self.cnt, self.max_levels, args, reverse_args, self.status
        )
        levels, stopped = (int(x) for x in self.status.copy_to_host())
        return levels, bool(stopped)

    def level_queues(self, levels: int) -> LevelQueues:
        """The discovered levels as the engine's ``LevelQueues`` (for its sweeps)."""
        host_cnt = self.cnt[:, :levels].copy_to_host()
        return LevelQueues(
            queues=self.queues,
            ptr=self.ptr,
            cnt=self.cnt,
            levels=levels,
            host_cnt=host_cnt,
            all_ptr=cuda.to_device(np.zeros((CLASSES, 1), dtype=np.int64)),
            all_cnt=cuda.to_device(host_cnt.sum(axis=1).reshape(CLASSES, 1)),
        )


@cuda.jit(device=True)
def _write_level(v, lvl, args):
    (level,) = args
    level[v] = lvl


_sweep_levels = make_node_sweep(_write_level)


def node_levels(lq: LevelQueues, level: Any, config: EngineConfig) -> None:
    """``level[v]`` = the level of every node in the queues (one persistent sweep)."""
    first, count, step = lq.top_down()
    _sweep_levels[cooperative_blocks(_sweep_levels, config), config.block](
        lq.queues, lq.ptr, lq.cnt, first, count, step, (level,)
    )
