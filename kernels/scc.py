"""Strongly connected components on the device: trim, forward-backward, trim (Slota et al.'s Multistep).

The same schedule as ``grail_core.scc`` without its coloring rounds: a complete trim (a node with no
live parent or no live child is a component of its own, peeled level by level from both sides), the
forward-backward reach from the live node of largest in x out degree (the giant component of a real
graph), and a second trim. Each is one persistent launch of ``discovery.make_level_discovery`` over the
engine's level queues, bounded in levels: a long chain or cycle (one node a level) stops at the bound,
and whatever is still live then goes to ``grail_core.scc`` on the CPU, which finishes from the labels
found here. On R-MAT graphs and DAGs nothing is left. Components are numbered by their smallest node,
so the result is ``grail_core.scc.strongly_connected_components``'s exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .arrays import device_arrays
from .discovery import Discovery, append_next, make_level_discovery
from .frontier import EngineConfig, degree_class, make_edge_map

__all__ = ["LIVE", "DeviceComponents", "device_components", "number_components"]

LIVE = -1
# Levels a trim or reach may take before the rest is left to the CPU: ~3 us a level (a grid barrier).
MAX_LEVELS = 4096


@cuda.jit(device=True, inline=True)
def _class_of(c, out_indptr, in_indptr, medium_min, large_min, huge_min):
    work = out_indptr[c + 1] - out_indptr[c] + in_indptr[c + 1] - in_indptr[c]
    return degree_class(work, medium_min, large_min, huge_min)


@cuda.jit(device=True)
def _lose_neighbour(v, e, lvl, args):
    """v left: its neighbour c along this CSR loses one live (parent or child); at none it leaves too."""
    neighbours, label, degree, out_indptr, in_indptr, queues, ptr, cnt, medium_min, large_min, huge_min = args
    c = neighbours[e]
    if label[c] == LIVE and cuda.atomic.add(degree, c, -1) == 1 and cuda.atomic.cas(label, c, LIVE, c) == LIVE:
        append_next(c, _class_of(c, out_indptr, in_indptr, medium_min, large_min, huge_min), lvl, queues, ptr, cnt)


@cuda.jit(device=True)
def _reach(v, e, lvl, args):
    """A neighbour marked ``allowed`` is reached: marked ``value`` and put on the next level."""
    neighbours, mark, allowed, value, out_indptr, in_indptr, queues, ptr, cnt, medium_min, large_min, huge_min = args
    c = neighbours[e]
    if mark[c] == allowed and cuda.atomic.cas(mark, c, allowed, value) == allowed:
        append_next(c, _class_of(c, out_indptr, in_indptr, medium_min, large_min, huge_min), lvl, queues, ptr, cnt)


@cuda.jit(device=True)
def _live_degrees(v, args):
    """Live in- and out-degree of a live node (after the forward-backward step placed a component)."""
    out_indptr, out_indices, in_indptr, in_indices, label, indeg, outdeg = args
    if label[v] != LIVE:
        return
    count = 0
    for e in range(out_indptr[v], out_indptr[v + 1]):
        count += label[out_indices[e]] == LIVE
    outdeg[v] = count
    count = 0
    for e in range(in_indptr[v], in_indptr[v + 1]):
        count += label[in_indices[e]] == LIVE
    indeg[v] = count


@cuda.jit(device=True)
def _smallest_member(v, args):
    label, smallest = args
    cuda.atomic.min(smallest, label[v], v)


_trim_levels = make_level_discovery(_lose_neighbour, _lose_neighbour)
_reach_levels = make_level_discovery(_reach)
_map_live_degrees = make_edge_map(_live_degrees)
_map_smallest = make_edge_map(_smallest_member)


class DeviceComponents:
    """The device schedule's state: labels (LIVE until placed), live degrees, one set of level queues."""

    def __init__(self, out_csr: tuple[Any, Any], in_csr: tuple[Any, Any], config: EngineConfig, max_levels: int):
        xp = device_arrays()
        self.xp, self.config = xp, config
        self.out_indptr, self.out_indices = out_csr
        self.in_indptr, self.in_indices = in_csr
        n = self.out_indptr.size - 1
        self.n = n
        self.label = xp.full(n, LIVE, dtype=np.int32)
        self.indeg = xp.diff(self.in_indptr).astype(np.int32)
        self.outdeg = xp.diff(self.out_indptr).astype(np.int32)
        self.discovery = Discovery(n, max_levels, config)

    def _classes(self) -> tuple[int, int, int]:
        return self.config.medium_min, self.config.large_min, self.config.huge_min

    def live(self) -> int:
        return int(self.xp.count_nonzero(self.label == LIVE))

    def trim(self) -> None:
        """Peels every node without a live parent or child; nodes a bounded run leaves stay live."""
        xp, d = self.xp, self.discovery
        live = self.label == LIVE
        start = xp.flatnonzero(live & ((self.indeg == 0) | (self.outdeg == 0))).astype(np.int32)
        self.label[start] = start
        queues = (self.out_indptr, self.in_indptr, d.queues, d.ptr, d.cnt, *self._classes())
        d.reset()
        d.run(
            _trim_levels,
            start,
            self.out_indptr,
            self.in_indptr,
            (self.out_indices, self.label, self.indeg, *queues),
            (self.in_indices, self.label, self.outdeg, *queues),
        )

    def forward_backward(self) -> bool:
        """Places the pivot's component; False (nothing placed) when a reach outgrew the level bound."""
        xp, d = self.xp, self.discovery
        live = self.label == LIVE
        score = xp.where(live, self.indeg.astype(np.int64) * self.outdeg.astype(np.int64), -1)
        pivot = int(xp.argmax(score))
        mark = live.astype(np.int32)
        mark[pivot] = 2
        start = xp.full(1, pivot, dtype=np.int32)
        queues = (self.out_indptr, self.in_indptr, d.queues, d.ptr, d.cnt, *self._classes())
        d.reset()
        _, stopped = d.run(
            _reach_levels, start, self.out_indptr, self.in_indptr, (self.out_indices, mark, 1, 2, *queues)
        )
        if stopped:
            return False
        mark[pivot] = 3
        d.reset()
        _, stopped = d.run(
            _reach_levels, start, self.in_indptr, self.out_indptr, (self.in_indices, mark, 2, 3, *queues)
        )
        if stopped:
            return False
        self.label[mark == 3] = pivot
        cfg = self.config
        _map_live_degrees[cfg.grid(), cfg.block](
            self.n,
            (self.out_indptr, self.out_indices, self.in_indptr, self.in_indices, self.label, self.indeg, self.outdeg),
        )
        return True


def device_components(
    out_csr: tuple[Any, Any], in_csr: tuple[Any, Any], config: EngineConfig, max_levels: int = MAX_LEVELS
) -> tuple[Any, int]:
    """Labels of the nodes the device schedule placed (a member's id; ``LIVE`` for the rest) and how
    many are still live."""
    state = DeviceComponents(out_csr, in_csr, config, max_levels)
    state.trim()
    if state.live() and state.forward_backward():
        state.trim()
    return state.label, state.live()


def number_components(label: Any, config: EngineConfig) -> tuple[Any, int]:
    """Component ids 0..count-1 in the order of each component's smallest node (``label``: a member)."""
    xp = device_arrays()
    n = label.size
    smallest = xp.full(n, n, dtype=np.int32)
    _map_smallest[config.grid(), config.block](n, (label, smallest))
    root = smallest[label]
    first = root == xp.arange(n, dtype=np.int32)
    rank = xp.cumsum(first, dtype=np.int64) - 1
    count = int(rank[-1]) + 1 if n else 0
    return rank[root].astype(np.int32), count
