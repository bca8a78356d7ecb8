"""Strongly connected components on the device: trim, forward-backward, trim (Slota et al.'s Multistep).

The same schedule as ``grail_core.scc`` without its coloring rounds: a complete trim (a node with no
live parent or no live child is a component of its own, peeled level by level from both sides), the
forward-backward reach from the live node of largest in x out degree (the giant component of a real
graph), and a second trim. Each is a discovery rule of the engine (``frontier.make_level_discovery``;
the trim walks both CSRs in the same launch), under a time budget (``frontier.LevelBudget``: what the
CPU would take for the components): a long chain or cycle (one node a level) gives it up early, and
whatever is still live then goes to ``grail_core.scc`` on the CPU, which finishes from the labels found
here. On R-MAT graphs and DAGs (of 10^5 levels too: narrow levels cost a block barrier) nothing is
left. Components are numbered by their smallest node, so the result is
``grail_core.scc.strongly_connected_components``'s exactly.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from .arrays import device_arrays
from .frontier import (
    MAX_LEVELS,
    DegreeSplit,
    Discovery,
    EngineConfig,
    LevelArrays,
    LevelBudget,
    append_next,
    degree_class,
    make_edge_map,
    make_level_discovery,
)

__all__ = ["LIVE", "DeviceComponents", "device_components", "number_components"]

LIVE = -1


class _Trim(NamedTuple):
    """One direction of the trim: a node that left takes one live parent (or child) from its neighbours."""

    neighbours: Any  # the CSR's targets along this direction
    label: Any
    degree: Any  # live in-degree (forward) or out-degree (backward) per node
    out_indptr: Any
    in_indptr: Any
    levels: LevelArrays
    split: DegreeSplit


@cuda.jit(device=True)
def _lose_neighbour(v, e, lvl, args):
    """v left: its neighbour c along this CSR loses one live (parent or child); at none it leaves too.

    The trim walks both CSRs, so a node's class is by its in- plus out-degree."""
    c = args.neighbours[e]
    label = args.label
    if label[c] == LIVE and cuda.atomic.add(args.degree, c, -1) == 1 and cuda.atomic.cas(label, c, LIVE, c) == LIVE:
        work = args.out_indptr[c + 1] - args.out_indptr[c] + args.in_indptr[c + 1] - args.in_indptr[c]
        append_next(c, degree_class(work, args.split), lvl, args.levels)


class _Reach(NamedTuple):
    """A reach along one CSR: nodes marked ``allowed`` become ``value`` when reached."""

    indptr: Any
    neighbours: Any
    mark: Any
    allowed: int
    value: int
    levels: LevelArrays
    split: DegreeSplit


@cuda.jit(device=True)
def _reach(v, e, lvl, args):
    """A neighbour marked ``allowed`` is reached: marked ``value`` and put on the next level."""
    c = args.neighbours[e]
    mark = args.mark
    if mark[c] == args.allowed and cuda.atomic.cas(mark, c, args.allowed, args.value) == args.allowed:
        append_next(c, degree_class(args.indptr[c + 1] - args.indptr[c], args.split), lvl, args.levels)


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

    def __init__(
        self, out_csr: tuple[Any, Any], in_csr: tuple[Any, Any], config: EngineConfig, budget: LevelBudget | None
    ):
        xp = device_arrays()
        self.xp, self.config = xp, config
        self.out_indptr, self.out_indices = out_csr
        self.in_indptr, self.in_indices = in_csr
        n = self.out_indptr.size - 1
        self.n = n
        self.label = xp.full(n, LIVE, dtype=np.int32)
        self.indeg = xp.diff(self.in_indptr).astype(np.int32)
        self.outdeg = xp.diff(self.out_indptr).astype(np.int32)
        self.discovery = Discovery(n, MAX_LEVELS, config)
        self.budget = budget
        self.started = time.perf_counter()

    def _budget(self, total: int) -> LevelBudget | None:
        """What is left of the components' budget, for a run that would reach ``total`` nodes."""
        if self.budget is None:
            return None
        return replace(self.budget, seconds=self.budget.seconds - (time.perf_counter() - self.started), total=total)

    def live(self) -> int:
        return int(self.xp.count_nonzero(self.label == LIVE))

    def trim(self) -> None:
        """Peels every node without a live parent or child; nodes a bounded run leaves stay live."""
        xp, d = self.xp, self.discovery
        live = self.label == LIVE
        start = xp.flatnonzero(live & ((self.indeg == 0) | (self.outdeg == 0))).astype(np.int32)
        self.label[start] = start
        common = (self.out_indptr, self.in_indptr, d.levels, d.split)
        d.reset()
        d.run(
            _trim_levels,
            start,
            self.out_indptr,
            _Trim(self.out_indices, self.label, self.indeg, *common),
            self.in_indptr,
            _Trim(self.in_indices, self.label, self.outdeg, *common),
            budget=self._budget(int(live.sum())),
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
        d.reset()
        forward = _Reach(self.out_indptr, self.out_indices, mark, 1, 2, d.levels, d.split)
        _, stopped = d.run(_reach_levels, start, self.out_indptr, forward, budget=self._budget(int(live.sum())))
        if stopped:
            return False
        mark[pivot] = 3
        d.reset()
        backward = _Reach(self.in_indptr, self.in_indices, mark, 2, 3, d.levels, d.split)
        _, stopped = d.run(_reach_levels, start, self.in_indptr, backward, budget=self._budget(int(live.sum())))
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
    out_csr: tuple[Any, Any], in_csr: tuple[Any, Any], config: EngineConfig, budget: LevelBudget | None = None
) -> tuple[Any, int]:
    """Labels of the nodes the device schedule placed (a member's id; ``LIVE`` for the rest) and how
    many are still live (all of the schedule that a ``budget`` lets run; its ``seconds`` span the whole)."""
    state = DeviceComponents(out_csr, in_csr, config, budget)
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
