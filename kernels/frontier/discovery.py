"""Level discovery: level queues grown from a start set by a discover rule, one persistent launch.

A rule is a per-edge function ``edge_op(v, e, lvl, args)`` run by the degree-class advance over the
out-edges of every node of level ``lvl``; it puts a node on level ``lvl + 1`` with ``append_next``.
Kahn's levels (``levels.build_level_queues``: the last parent puts a child on the next level) are one
rule; the build's trim (a node whose last live parent or child left) and reach (a node first reached)
are others. A rule may also look backwards along a second CSR (``reverse_op``), both in the same level.
One cooperative launch runs every level, a grid barrier between levels, and stops on the device at the
first empty level or after ``max_levels`` levels (a long chain would otherwise cost a barrier per node).

The queues are the engine's level queues (``LevelQueues``), so its sweeps run over them too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from ..arrays import as_xp
from ..compiled import kernel, op_name
from .advance import (
    CLASSES,
    HUGE,
    LARGE,
    MEDIUM,
    SMALL,
    DegreeSplit,
    LevelArrays,
    degree_class,
    is_narrow,
    make_advance_body,
)
from .launch import EngineConfig, cooperative_blocks
from .maps import make_edge_map
from .sweeps import make_sweep, no_edge

__all__ = [
    "MAX_LEVELS",
    "Discovery",
    "DiscoveryRule",
    "LevelBudget",
    "LevelQueues",
    "append_next",
    "make_level_discovery",
    "node_levels",
]


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


@cuda.jit(device=True, inline=True)
def append_next(c, cls, lvl, levels):
    """Puts node c (degree class ``cls``) on level ``lvl + 1`` of ``levels`` (``LevelArrays``): one atomic
    on that level's class counter."""
    queues, ptr, cnt = levels
    slot = cuda.atomic.add(cnt, (cls, lvl + 1), 1)
    queues[cls, ptr[cls, lvl] + cnt[cls, lvl] + slot] = c


@cuda.jit(device=True, inline=True)
def _next_level_empty(cnt, lvl):
    return cnt[SMALL, lvl + 1] + cnt[MEDIUM, lvl + 1] + cnt[LARGE, lvl + 1] + cnt[HUGE, lvl + 1] == 0


@dataclass(frozen=True)
class DiscoveryRule:
    """A discovery kernel and whether its rule also walks a reverse CSR (``Discovery.run`` checks it)."""

    kernel: Any
    both_ways: bool


def make_level_discovery(edge_op: Callable[..., None], reverse_op: Callable[..., None] | None = None) -> DiscoveryRule:
    """The rule's persistent kernel ``discover(indptr, reverse_indptr, levels, first, max_levels, args,
    reverse_args, status, narrow)``: from level ``first`` (level 0, or where an earlier launch stopped), per
    level ``edge_op`` over the level's edges along ``indptr`` (and ``reverse_op`` along ``reverse_indptr``);
    ``status[0]`` gets the number of levels, ``status[1]`` 1 when ``max_levels`` stopped it with the next
    level not empty, ``status[3]`` the nodes on the levels done. A level of at most ``narrow`` small or
    medium nodes, and the narrow levels after it, are walked by the first block alone with block barriers
    (``status[2]`` tells the other blocks where it stopped), so a long thin DAG costs a block barrier a
    level, not a grid's."""
    forward = make_advance_body(edge_op)
    backward = make_advance_body(reverse_op or no_edge)
    both_ways = reverse_op is not None  # a constant to the compiler: a one-way kernel has no second advance

    def discover(indptr, reverse_indptr, levels, first, max_levels, args, reverse_args, status, narrow):
        grid = cuda.cg.this_grid()
        block = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        gtid = cuda.grid(1)
        _queues, ptr, cnt = levels
        lvl = first
        while True:
            if is_narrow(cnt, lvl, narrow):
                if block == 0:
                    while True:
                        forward(indptr, levels, lvl, args, 0, 1)
                        if both_ways:
                            backward(reverse_indptr, levels, lvl, reverse_args, 0, 1)
                        if tid < CLASSES:
                            ptr[tid, lvl + 1] = ptr[tid, lvl] + cnt[tid, lvl]
                        cuda.syncthreads()
                        if _next_level_empty(cnt, lvl) or lvl + 1 >= max_levels or not is_narrow(cnt, lvl + 1, narrow):
                            break
                        lvl += 1
                    if tid == 0:
                        status[2] = lvl
                grid.sync()
                lvl = status[2]
            else:
                forward(indptr, levels, lvl, args, block, cuda.gridDim.x)
                if both_ways:
                    backward(reverse_indptr, levels, lvl, reverse_args, block, cuda.gridDim.x)
                if gtid < CLASSES:
                    ptr[gtid, lvl + 1] = ptr[gtid, lvl] + cnt[gtid, lvl]
                grid.sync()
            if _next_level_empty(cnt, lvl) or lvl + 1 >= max_levels:
                break
            lvl += 1
        if gtid == 0:
            status[0] = lvl + 1
            status[1] = 0 if _next_level_empty(cnt, lvl) else 1
            status[3] = ptr[SMALL, lvl + 1] + ptr[MEDIUM, lvl + 1] + ptr[LARGE, lvl + 1] + ptr[HUGE, lvl + 1]

    return DiscoveryRule(kernel(discover, f"discover[{op_name(edge_op)},{op_name(reverse_op)}]"), both_ways)


class _Seed(NamedTuple):
    nodes: Any
    indptr: Any
    reverse_indptr: Any
    both_ways: bool
    levels: LevelArrays
    split: DegreeSplit


@cuda.jit(device=True)
def _seed(i, args):
    """Start node i on level 0, in the class of its work (its degree along the CSRs the rule walks)."""
    v = args.nodes[i]
    work = args.indptr[v + 1] - args.indptr[v]
    if args.both_ways:
        work += args.reverse_indptr[v + 1] - args.reverse_indptr[v]
    queues, _ptr, cnt = args.levels
    cls = degree_class(work, args.split)
    queues[cls, cuda.atomic.add(cnt, (cls, 0), 1)] = v


_map_seed = make_edge_map(_seed)


# Levels a discovery may hold (a bounded run that reaches them stops, as when a budget runs out), and the
# levels of the first launch under a budget (doubling after each, up to the last).
MAX_LEVELS = 1 << 22
FIRST_LAUNCH_LEVELS = 1 << 10
LAST_LAUNCH_LEVELS = 1 << 16


@dataclass(frozen=True)
class LevelBudget:
    """When a discovery gives up so that the caller finishes on the CPU: as soon as its time on the device,
    projected from the levels done so far at their share of the ``total`` nodes a run to the end reaches,
    passes what the CPU would take: ``seconds``, plus ``per_level`` for every level the walk would take
    when its levels average at least ``wide`` nodes (the CPU walks such levels in parallel rounds, each a
    round of its threads; narrower ones, a chain's, in a loop). Where the CPU finishes from the device's
    results the device's whole projected time counts; where it ``restarts``, the time it has left.
    Checked between launches of a growing number of levels, so a chain of a million nodes gives up after
    its first launch."""

    seconds: float
    total: int
    per_level: float = 0.0
    wide: int = 32
    restarts: bool = False  # the CPU starts over when the device gives up: only the device's time left counts
    first_launch: int = FIRST_LAUNCH_LEVELS  # levels of the first launch; each later one twice its last

    def exceeded(self, elapsed: float, levels: int, done: int) -> bool:
        if done <= 0 or done >= self.total:
            return elapsed > self.seconds
        share = self.total / done
        cpu = self.seconds + (self.per_level * levels * share if done >= self.wide * levels else 0.0)
        return elapsed * (share - 1 if self.restarts else share) > cpu


class Discovery:
    """Level queues for traversals of one graph, each seeded from a start set and grown by a rule.

    The queues are reused by every ``run`` after a ``reset``; ``level_queues`` hands out views of them,
    valid until the next reset.
    """

    def __init__(self, num_nodes: int, max_levels: int, config: EngineConfig) -> None:
        """Queues for ``num_nodes`` nodes (each enters once per run) over at most ``max_levels`` levels
        (at most ``MAX_LEVELS``, and no more than the nodes)."""
        self.config = config
        self.split = DegreeSplit(config.medium_min, config.large_min, config.huge_min)
        self.max_levels = max(1, min(max_levels, MAX_LEVELS, num_nodes + 1))
        counts = (CLASSES, self.max_levels + 2)
        self.levels = LevelArrays(
            cuda.device_array((CLASSES, max(1, num_nodes)), dtype=np.int32),
            cuda.device_array(counts, dtype=np.int64),  # ptr[c, 0] stays 0; the kernel writes the later starts
            cuda.device_array(counts, dtype=np.int64),
        )
        as_xp(self.levels.ptr).fill(0)
        self.status = cuda.to_device(np.zeros(4, dtype=np.int64))
        self.reset()

    def reset(self) -> None:
        """Empties the queues for the next run."""
        as_xp(self.levels.cnt).fill(0)

    def run(
        self,
        rule: DiscoveryRule,
        nodes: Any,
        indptr: Any,
        args: tuple,
        reverse_indptr: Any = None,
        reverse_args: tuple = (),
        budget: LevelBudget | None = None,
    ) -> tuple[int, bool]:
        """Seeds level 0 with the device array ``nodes`` and grows the levels by ``rule`` (along ``indptr``,
        and ``reverse_indptr`` for a rule made with a ``reverse_op``); returns (levels, whether the
        level bound or the ``budget`` stopped it)."""
        if rule.both_ways != (reverse_indptr is not None):
            raise ValueError("a rule with a reverse_op needs reverse_indptr, and only such a rule takes one")
        cfg = self.config
        reverse = indptr if reverse_indptr is None else reverse_indptr  # a one-way kernel never reads it
        if nodes.size:
            _map_seed[cfg.grid(), cfg.block](
                nodes.size, _Seed(nodes, indptr, reverse, rule.both_ways, self.levels, self.split)
            )
        started = time.perf_counter()
        first, launch = 0, FIRST_LAUNCH_LEVELS if budget is None else budget.first_launch
        while True:
            bound = self.max_levels if budget is None else min(self.max_levels, first + launch)
            rule.kernel[cooperative_blocks(rule.kernel, cfg), cfg.block](
                indptr, reverse, self.levels, first, bound, args, reverse_args, self.status, cfg.narrow
            )
            levels, stopped, _, done = (int(x) for x in self.status.copy_to_host())
            if not stopped or bound >= self.max_levels:
                return levels, bool(stopped)
            if budget is not None and budget.exceeded(time.perf_counter() - started, levels, done):
                return levels, True
            first, launch = levels, min(2 * launch, LAST_LAUNCH_LEVELS)

    def level_queues(self, levels: int) -> LevelQueues:
        """The first ``levels`` levels of the last run as the engine's ``LevelQueues`` (for its sweeps)."""
        host_cnt = self.levels.cnt[:, :levels].copy_to_host()
        everything = LevelArrays(
            self.levels.queues,
            cuda.to_device(np.zeros((CLASSES, 1), dtype=np.int64)),
            cuda.to_device(host_cnt.sum(axis=1).reshape(CLASSES, 1)),
        )
        return LevelQueues(arrays=self.levels, everything=everything, levels=levels, host_cnt=host_cnt)


@cuda.jit(device=True)
def _write_level(v, lvl, args):
    (level,) = args
    level[v] = lvl


_sweep_levels = make_sweep(node_op=_write_level)


def node_levels(lq: LevelQueues, indptr: Any, level: Any, config: EngineConfig) -> None:
    """``level[v]`` = the level of every node in ``lq`` (the level queues of the CSR ``indptr``), by one
    persistent sweep."""
    _sweep_levels[cooperative_blocks(_sweep_levels, config), config.block](
        indptr, lq.arrays, *lq.top_down(), (), (level,), config.narrow
    )
