"""Topological levels on the device (Kahn's algorithm, longest path from the root), as level queues: the
discovery rule "the last parent puts a child on the next level", started from the root."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from .advance import DegreeSplit, LevelArrays, degree_class
from .discovery import Discovery, LevelBudget, LevelQueues, append_next, make_level_discovery
from .launch import EngineConfig
from .maps import make_edge_map

__all__ = ["build_level_queues"]


class _Kahn(NamedTuple):
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
        append_next(c, degree_class(args.indptr[c + 1] - args.indptr[c], args.split), lvl, args.levels)


@cuda.jit(device=True)
def _count_parent(e, args):
    children, pending = args
    cuda.atomic.add(pending, children[e], 1)


_kahn = make_level_discovery(_discover)
_map_count_parents = make_edge_map(_count_parent)


def build_level_queues(
    indptr: Any,
    children: Any,
    root: int,
    num_nodes: int,
    config: EngineConfig,
    max_levels: int,
    budget: LevelBudget | None = None,
) -> LevelQueues | None:
    """Topological levels by Kahn's algorithm on the device (longest path from ``root``), as level queues.

    Returns None when the graph has more than ``max_levels`` levels, or when the ``budget`` runs out:
    level-synchronous phases would then cost more than the CPU's, and the caller finishes on the CPU.
    Queue slots are handed out with atomic counters per class and level, so a level's order inside a
    queue is arbitrary; every phase built on it is order-independent (sums, minima, exact argmins).
    """
    pending = cuda.to_device(np.zeros(num_nodes, dtype=np.int32))
    if children.size:
        _map_count_parents[config.grid(), config.block](children.size, (children, pending))
    discovery = Discovery(num_nodes, max_levels, config)
    start = cuda.to_device(np.array([root], dtype=np.int32))
    count, stopped = discovery.run(
        _kahn, start, indptr, _Kahn(indptr, children, pending, discovery.levels, discovery.split), budget=budget
    )
    return None if stopped else discovery.level_queues(count)
