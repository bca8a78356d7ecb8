"""Topological levels on the device (Kahn's algorithm, longest path from the root), as level queues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from .advance import CLASSES, HUGE, LARGE, MEDIUM, SMALL, DegreeSplit, LevelArrays, degree_class, make_advance_body
from .launch import EngineConfig, cooperative_blocks
from .maps import make_edge_map

__all__ = ["LevelQueues", "build_level_queues"]


@dataclass
class LevelQueues:
    """Level queues on the device plus host copies of their per-level layout."""

    arrays: LevelArrays  # level l of class c: queues[c, ptr[c, l] : ptr[c, l] + cnt[c, l]]
    everything: LevelArrays  # the same queues as one level 0 holding every node (for phases over all nodes)
    levels: int
    host_cnt: np.ndarray  # (CLASSES, levels)

    def top_down(self) -> tuple[int, int, int]:
        """(first, count, step) of a sweep from the root level down."""
        return 0, self.levels, 1

    def bottom_up(self) -> tuple[int, int, int]:
        """(first, count, step) of a sweep from the deepest level up."""
        return self.levels - 1, self.levels, -1


class _Discovery(NamedTuple):
    indptr: Any
    children: Any
    pending: Any  # parents not yet on a level, per node
    levels: LevelArrays
    split: DegreeSplit


@cuda.jit(device=True)
def _discover(v, e, lvl, args):
    """Kahn's step: an edge removes one pending parent; the last one puts the child on the next level."""
    c = args.children[e]
    if cuda.atomic.sub(args.pending, c, 1) == 1:
        queues, ptr, cnt = args.levels
        cls = degree_class(args.indptr[c + 1] - args.indptr[c], args.split)
        slot = cuda.atomic.add(cnt, (cls, lvl + 1), 1)
        queues[cls, ptr[cls, lvl] + cnt[cls, lvl] + slot] = c


@cuda.jit(device=True)
def _count_parent(e, args):
    children, pending = args
    cuda.atomic.add(pending, children[e], 1)


_discover_level = make_advance_body(_discover)
_map_count_parents = make_edge_map(_count_parent)


@cuda.jit
def _discover_levels(indptr, levels, max_levels, args, found):
    """Kahn's levels in one persistent launch; it stops on the device at the first empty level."""
    grid = cuda.cg.this_grid()
    gtid = cuda.grid(1)
    _queues, ptr, cnt = levels
    lvl = 0
    while lvl <= max_levels:
        _discover_level(indptr, levels, lvl, args)
        if gtid < CLASSES:
            ptr[gtid, lvl + 1] = ptr[gtid, lvl] + cnt[gtid, lvl]
        grid.sync()
        if cnt[SMALL, lvl + 1] + cnt[MEDIUM, lvl + 1] + cnt[LARGE, lvl + 1] + cnt[HUGE, lvl + 1] == 0:
            break
        lvl += 1
    if gtid == 0:
        found[0] = lvl + 1


def build_level_queues(
    indptr: Any,
    children: Any,
    root: int,
    root_degree: int,
    num_nodes: int,
    config: EngineConfig,
    max_levels: int,
) -> LevelQueues | None:
    """Topological levels by Kahn's algorithm on the device (longest path from ``root``), as level queues.

    Returns None when the graph has more than ``max_levels`` levels: level-synchronous phases would
    then cost more than the CPU labeling, and the caller labels such graphs on the CPU.
    Queue slots are handed out with atomic counters per class and level, so a level's order inside a
    queue is arbitrary; every phase built on it is order-independent (sums, minima, exact argmins).
    """
    grid, block = config.grid(), config.block
    pending = cuda.to_device(np.zeros(num_nodes, dtype=np.int32))
    _map_count_parents[grid, block](children.size, (children, pending))
    cap = max_levels + 2
    queues = cuda.device_array((CLASSES, num_nodes), dtype=np.int32)
    cnt_h = np.zeros((CLASSES, cap), dtype=np.int64)
    split = DegreeSplit(config.medium_min, config.large_min, config.huge_min)
    root_cls = int(np.searchsorted(split, root_degree, side="right"))
    cnt_h[root_cls, 0] = 1
    queues[root_cls, 0:1].copy_to_device(np.array([root], dtype=np.int32))
    levels = LevelArrays(queues, cuda.to_device(np.zeros((CLASSES, cap), dtype=np.int64)), cuda.to_device(cnt_h))
    found = cuda.to_device(np.zeros(1, dtype=np.int64))
    _discover_levels[cooperative_blocks(_discover_levels, config), block](
        indptr, levels, max_levels, _Discovery(indptr, children, pending, levels, split), found
    )
    count = int(found.copy_to_host()[0])
    if count > max_levels:
        return None
    host_cnt = levels.cnt[:, :count].copy_to_host()
    everything = LevelArrays(
        queues,
        cuda.to_device(np.zeros((CLASSES, 1), dtype=np.int64)),
        cuda.to_device(host_cnt.sum(axis=1).reshape(CLASSES, 1)),
    )
    return LevelQueues(arrays=levels, everything=everything, levels=count, host_cnt=host_cnt)
