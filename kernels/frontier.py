"""The one frontier engine: level queues split by degree, an advance operator and a node operator.

Every GPU traversal in ``kernels`` (the five labeling phases, the schedule that orders them, the
bitmask search) is written as a per-edge or per-node device function handed to this engine; none of
them has a loop of its own over a frontier.

Frontiers are *level queues*: four int32 queues (one per degree class), each holding the nodes of
level 0, then level 1, and so on; ``ptr[cls, lvl]`` is where level ``lvl`` starts in queue ``cls`` and
``cnt[cls, lvl]`` how many nodes it has there. The degree classes follow Enterprise BFS and Gunrock's
thread / warp / block split, plus the grid:

* SMALL (out-degree below ``medium_min``): one thread walks the node's edges;
* MEDIUM (below ``large_min``): one warp, lanes striding over the edges;
* LARGE (below ``huge_min``): one block, its threads striding over the edges;
* HUGE: the whole grid strides over the concatenated edges of the level's huge nodes, so a hub
  with millions of children is spread over every SM instead of serializing one block.

For work known only at run time there are *balanced* queues: a level is a list of slots, each with
the start of its work items, filled from tasks with one atomic per block (``make_balanced_fill_body``)
and walked in tiles in which neighbouring threads take neighbouring items
(``make_balanced_advance_body``), so every thread gets the same share of a level's work however it is
spread over the slots.

Kernels run with a fixed grid and read the level's counts from device memory. A phase over many
levels is one persistent *sweep* kernel with a grid barrier between levels (a cooperative launch),
so neither the host nor the launch queue is involved per level; Kahn's level discovery stops on the
device at the first empty level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from .device import is_simulator, multiprocessors

__all__ = [
    "BALANCED_BLOCK",
    "CLASSES",
    "HUGE",
    "ITEM_BITS",
    "LARGE",
    "MAX_BALANCED_SLOTS",
    "MEDIUM",
    "SMALL",
    "EngineConfig",
    "LevelQueues",
    "balanced_slots",
    "build_level_queues",
    "cooperative_blocks",
    "csr_range",
    "degree_class",
    "make_advance",
    "make_advance_body",
    "make_balanced_advance_body",
    "make_balanced_fill_body",
    "make_edge_map",
    "make_edge_sweep",
    "make_map_body",
    "make_map_extent_body",
    "make_node_body",
    "make_node_pass",
    "make_node_sweep",
    "make_sweep",
]

SMALL, MEDIUM, LARGE, HUGE = 0, 1, 2, 3
CLASSES = 4
WARP = 32


@dataclass(frozen=True)
class EngineConfig:
    """Launch shape and degree thresholds; tests shrink all of them to reach every path in the simulator."""

    block: int = 256
    blocks: int = 0  # 0: 8 blocks per SM
    medium_min: int = 32
    large_min: int = 1024
    huge_min: int = 65536

    def grid(self) -> int:
        return self.blocks if self.blocks > 0 else 8 * multiprocessors()

    @staticmethod
    def default() -> EngineConfig:
        """Full-size launches on a GPU; one warp in the simulator, where every thread costs ~1 ms."""
        if is_simulator():
            return EngineConfig(block=WARP, blocks=1, medium_min=4, large_min=8, huge_min=12)
        return EngineConfig()


@cuda.jit(device=True, inline=True)
def degree_class(degree, medium_min, large_min, huge_min):
    if degree < medium_min:
        return SMALL
    if degree < large_min:
        return MEDIUM
    if degree < huge_min:
        return LARGE
    return HUGE


@cuda.jit(device=True, inline=True)
def csr_range(indptr, v):
    """Node v's work items are its out-edge positions in the CSR."""
    return indptr[v], indptr[v + 1]


def make_advance_body(edge_op: Callable[..., None], work_range: Callable[..., Any] = csr_range) -> Any:
    """Device function ``advance_level(ranges, queues, ptr, cnt, lvl, args)``: ``edge_op(v, e, lvl, args)``
    once for every work item ``e`` of every node ``v`` of level ``lvl``, split by degree class.

    A node's work items are ``range(*work_range(ranges, v))``: by default its out-edge positions
    (``ranges`` is the CSR indptr); a traversal whose work per node is known only at run time (the
    bitmask search) passes its own range function. Calls for items of one node may run concurrently,
    so whatever ``edge_op`` accumulates goes through atomics.
    """

    @cuda.jit(device=True)
    def advance_level(ranges, queues, ptr, cnt, lvl, args):
        tid = cuda.threadIdx.x
        gtid = cuda.blockIdx.x * cuda.blockDim.x + tid
        nthreads = cuda.gridDim.x * cuda.blockDim.x
        start = ptr[SMALL, lvl]
        for i in range(gtid, cnt[SMALL, lvl], nthreads):
            v = queues[SMALL, start + i]
            first, stop = work_range(ranges, v)
            for e in range(first, stop):
                edge_op(v, e, lvl, args)
        lane = tid % WARP
        start = ptr[MEDIUM, lvl]
        for i in range(gtid // WARP, cnt[MEDIUM, lvl], nthreads // WARP):
            v = queues[MEDIUM, start + i]
            first, stop = work_range(ranges, v)
            for e in range(first + lane, stop, WARP):
                edge_op(v, e, lvl, args)
        start = ptr[LARGE, lvl]
        for i in range(cuda.blockIdx.x, cnt[LARGE, lvl], cuda.gridDim.x):
            v = queues[LARGE, start + i]
            first, stop = work_range(ranges, v)
            for e in range(first + tid, stop, cuda.blockDim.x):
                edge_op(v, e, lvl, args)
        # The huge nodes' items are strided over the grid as one concatenated range, so that several
        # huge nodes keep every thread busy just as one does.
        start = ptr[HUGE, lvl]
        offset = 0
        for i in range(cnt[HUGE, lvl]):
            v = queues[HUGE, start + i]
            first, stop = work_range(ranges, v)
            skip = (gtid + nthreads - offset % nthreads) % nthreads
            for e in range(first + skip, stop, nthreads):
                edge_op(v, e, lvl, args)
            offset += stop - first

    return advance_level


# Balanced queues. A balanced level is a list of slots, each with the start of its work items (sorted
# by slot) and whatever payload the traversal keeps per slot in arrays of its own. One counter per
# level packs (slots << ITEM_BITS) + items, so that one atomic reserves slots and items together, in
# the same order. Slots come from a fixed capacity of at most MAX_BALANCED_SLOTS; that leaves the
# counter's slot field room to count past the capacity, so an overflow is always seen.
ITEM_BITS = 37
ITEM_MASK = (1 << ITEM_BITS) - 1
MAX_BALANCED_SLOTS = 1 << 25
# Most threads a block of the balanced operators may have (their shared arrays are sized by it), and
# the work items a thread takes per tile of the advance (more in the simulator, where every barrier
# costs a round of its Python threads).
BALANCED_BLOCK = WARP if is_simulator() else 1024
TILE_ITEMS_PER_THREAD = 8 if is_simulator() else 2
# Shared-array shapes must be compile-time constants.
_TILE_STARTS = BALANCED_BLOCK * TILE_ITEMS_PER_THREAD + 1
_SCAN_VALUES = (2, BALANCED_BLOCK)
_SCAN_WARPS = (2, BALANCED_BLOCK // WARP + 1)


@cuda.jit(device=True, inline=True)
def balanced_slots(packed):
    """Slots of a balanced level from its counter."""
    return packed >> ITEM_BITS


@cuda.jit(device=True)
def _block_exclusive_sums(first, second):
    """Block-wide exclusive sums of two values per thread, and the block's totals: (before1, before2, total1, total2).

    One thread per warp adds up its warp's values and one thread the warps' totals, in shared memory:
    three barriers, where a tree of partial sums needs two per step.
    """
    values = cuda.shared.array(_SCAN_VALUES, dtype=np.int64)
    warps = cuda.shared.array(_SCAN_WARPS, dtype=np.int64)
    tid = cuda.threadIdx.x
    size = cuda.blockDim.x
    values[0, tid] = first
    values[1, tid] = second
    cuda.syncthreads()
    if tid % WARP == 0:
        sums = (np.int64(0), np.int64(0))
        for k in range(tid, min(tid + WARP, size)):
            a = values[0, k]
            b = values[1, k]
            values[0, k] = sums[0]
            values[1, k] = sums[1]
            sums = (sums[0] + a, sums[1] + b)
        warps[0, tid // WARP] = sums[0]
        warps[1, tid // WARP] = sums[1]
    cuda.syncthreads()
    count = (size + WARP - 1) // WARP
    if tid == 0:
        sums = (np.int64(0), np.int64(0))
        for k in range(count):
            a = warps[0, k]
            b = warps[1, k]
            warps[0, k] = sums[0]
            warps[1, k] = sums[1]
            sums = (sums[0] + a, sums[1] + b)
        warps[0, count] = sums[0]
        warps[1, count] = sums[1]
    cuda.syncthreads()
    result = (
        values[0, tid] + warps[0, tid // WARP],
        values[1, tid] + warps[1, tid // WARP],
        warps[0, count],
        warps[1, count],
    )
    cuda.syncthreads()
    return result


def make_balanced_fill_body(measure: Callable[..., Any], emit: Callable[..., Any]) -> Any:
    """Device function ``fill(count, counters, at, capacity, overflow, args)``: fills the balanced level
    whose counter is ``counters[at]`` from the tasks i in [0, count).

    ``measure(i, args)`` gives (slots, items) of task i; ``emit(i, position, args)`` runs for every task,
    writes the task's slots from the packed ``position`` (slot << ITEM_BITS | first item) on, each
    slot's start included, and returns the position after them. Each thread measures its tasks, the
    block sums them, one thread reserves the block's slots and items with one atomic (per block and
    level, not per task: the counter is one address), and the tasks are emitted in the same order. A
    block whose slots would pass ``capacity`` emits nothing and sets ``overflow[0]``: the caller redoes
    the work in smaller pieces. All threads of the grid must call it.
    """

    @cuda.jit(device=True)
    def fill(count, counters, at, capacity, overflow, args):
        base = cuda.shared.array(1, dtype=np.int64)
        gtid = cuda.grid(1)
        nthreads = cuda.gridsize(1)
        my_slots = np.int64(0)
        my_items = np.int64(0)
        for i in range(gtid, count, nthreads):
            slots, items = measure(i, args)
            my_slots += slots
            my_items += items
        # Slots and items are summed apart: only a block's total that fits is packed into the counter.
        slots_before, items_before, block_slots, block_items = _block_exclusive_sums(my_slots, my_items)
        position = np.int64(0)
        if block_slots > 0:
            if block_slots <= capacity and cuda.threadIdx.x == 0:
                base[0] = cuda.atomic.add(counters, at, (block_slots << ITEM_BITS) + block_items)
            cuda.syncthreads()
            first = base[0] >> ITEM_BITS
            # Once one block passed the capacity, later ones may see a counter that wrapped: never write there.
            if block_slots > capacity or first < 0 or first + block_slots > capacity:
                if cuda.threadIdx.x == 0:
                    overflow[0] = 1
                return
            position = base[0] + (slots_before << ITEM_BITS) + items_before
        # Every task is emitted, also one without slots: emit does the task's other work (a search clears its node).
        for i in range(gtid, count, nthreads):
            position = emit(i, position, args)

    return fill


@cuda.jit(device=True)
def _slot_of(starts, slots, item, bounds):
    """The slot whose items hold ``item``: a search by the whole block, each step probing one start per thread."""
    tid = cuda.threadIdx.x
    size = cuda.blockDim.x
    low = np.int64(0)
    high = slots
    while high - low > 1:
        stride = (high - low + size - 1) // size
        probe = low + tid * stride
        following = probe + stride
        if probe < high and starts[probe] <= item and not (following < high and starts[following] <= item):
            bounds[0] = probe
            bounds[1] = min(high, following)
        cuda.syncthreads()
        low = bounds[0]
        high = bounds[1]
        cuda.syncthreads()
    return low


@cuda.jit(device=True, inline=True)
def _last_at_most(tile, size, item):
    """Largest k < size with tile[k] <= item (tile sorted, tile[0] <= item)."""
    low = 0
    high = size - 1
    while low < high:
        middle = (low + high + 1) // 2
        if tile[middle] <= item:
            low = middle
        else:
            high = middle - 1
    return low


def make_balanced_advance_body(item_op: Callable[..., None]) -> Any:
    """Device function ``advance(starts, packed, args)``: ``item_op(slot, i, args)`` for every work item i
    of every slot of a balanced level (``packed`` its counter, ``starts`` its slots' item starts).

    Every block takes an equal contiguous share of the level's items and walks it in tiles: the tile's
    slot starts are staged in shared memory, and thread t takes items t, t + blockDim, ... of the tile,
    finding each one's slot by a binary search there. Neighbouring threads so take neighbouring items,
    mostly of one slot: a warp runs one code path with one slot's data, and a level whose work sits in a
    few slots, or whose slots carry very different work, keeps every thread equally busy.
    """

    @cuda.jit(device=True)
    def advance(starts, packed, args):
        tile = cuda.shared.array(_TILE_STARTS, dtype=np.int64)
        bounds = cuda.shared.array(2, dtype=np.int64)
        slots = packed >> ITEM_BITS
        total = packed & ITEM_MASK
        tid = cuda.threadIdx.x
        size = cuda.blockDim.x
        span = size * TILE_ITEMS_PER_THREAD
        share = (total + cuda.gridDim.x - 1) // cuda.gridDim.x
        begin = cuda.blockIdx.x * share
        end = min(total, begin + share)
        if begin >= end:
            return
        slot = _slot_of(starts, slots, begin, bounds)
        for first in range(begin, end, span):
            for k in range(tid, span + 1, size):
                tile[k] = starts[slot + k] if slot + k < slots else total
            cuda.syncthreads()
            for k in range(TILE_ITEMS_PER_THREAD):
                item = first + k * size + tid
                if item < end:
                    at = _last_at_most(tile, span + 1, item)
                    item_op(slot + at, item - tile[at], args)
            following = slot + _last_at_most(tile, span + 1, first + span)
            cuda.syncthreads()
            slot = following

    return advance


def make_node_body(node_op: Callable[..., None]) -> Any:
    """Device function ``node_level(queues, ptr, cnt, lvl, args)``: ``node_op(v, lvl, args)`` per node of the level."""

    @cuda.jit(device=True)
    def node_level(queues, ptr, cnt, lvl, args):
        gtid = cuda.grid(1)
        nthreads = cuda.gridsize(1)
        for cls in range(CLASSES):
            start = ptr[cls, lvl]
            for i in range(gtid, cnt[cls, lvl], nthreads):
                node_op(queues[cls, start + i], lvl, args)

    return node_level


def make_advance(edge_op: Callable[..., None]) -> Any:
    """Kernel ``advance(indptr, queues, ptr, cnt, lvl, args)``: one level (or, through an all-levels
    layout, every node at once) of ``make_advance_body``."""
    advance_level = make_advance_body(edge_op)

    @cuda.jit
    def advance(indptr, queues, ptr, cnt, lvl, args):
        advance_level(indptr, queues, ptr, cnt, lvl, args)

    return advance


def make_edge_sweep(edge_op: Callable[..., None]) -> Any:
    """Persistent kernel ``sweep(indptr, queues, ptr, cnt, first, count, step, args)``: ``count`` levels
    from ``first`` in steps of ``step`` (+1 top-down, -1 bottom-up), a grid barrier after each level.

    One launch per phase instead of one per level: launches from Python cost ~0.1 ms each, a grid
    barrier a few microseconds. It needs a cooperative launch (``cooperative_blocks``).
    """
    advance_level = make_advance_body(edge_op)

    @cuda.jit
    def sweep(indptr, queues, ptr, cnt, first, count, step, args):
        grid = cuda.cg.this_grid()
        for i in range(count):
            advance_level(indptr, queues, ptr, cnt, first + i * step, args)
            grid.sync()

    return sweep


def make_node_sweep(node_op: Callable[..., None]) -> Any:
    """Like ``make_edge_sweep`` for a per-node operation: ``sweep(queues, ptr, cnt, first, count, step, args)``."""
    node_level = make_node_body(node_op)

    @cuda.jit
    def sweep(queues, ptr, cnt, first, count, step, args):
        grid = cuda.cg.this_grid()
        for i in range(count):
            node_level(queues, ptr, cnt, first + i * step, args)
            grid.sync()

    return sweep


def make_sweep(edge_op: Callable[..., None], node_op: Callable[..., None]) -> Any:
    """Per level, the edges (``edge_op``), a barrier, then the nodes (``node_op``), a barrier:
    ``sweep(indptr, queues, ptr, cnt, first, count, step, edge_args, node_args)``."""
    advance_level = make_advance_body(edge_op)
    node_level = make_node_body(node_op)

    @cuda.jit
    def sweep(indptr, queues, ptr, cnt, first, count, step, edge_args, node_args):
        grid = cuda.cg.this_grid()
        for i in range(count):
            lvl = first + i * step
            advance_level(indptr, queues, ptr, cnt, lvl, edge_args)
            grid.sync()
            node_level(queues, ptr, cnt, lvl, node_args)
            grid.sync()

    return sweep


def make_node_pass(node_op: Callable[..., None]) -> Any:
    """Kernel ``node_pass(queues, ptr, cnt, lvl, args)`` calling ``node_op(v, lvl, args)`` per node of the level."""
    node_level = make_node_body(node_op)

    @cuda.jit
    def node_pass(queues, ptr, cnt, lvl, args):
        node_level(queues, ptr, cnt, lvl, args)

    return node_pass


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

    @cuda.jit
    def edge_map(count, args):
        map_all(count, args)

    return edge_map


def cooperative_blocks(kernel: Any, config: EngineConfig) -> int:
    """Grid size for a persistent (grid-barrier) kernel: every block must be resident at once.

    Before the kernel's first compilation one block per SM is used (always resident when a block
    fits at all); afterwards the occupancy of the compiled kernel. The simulator runs blocks one
    after another, so a grid barrier only works there with a single block.
    """
    if is_simulator():
        return 1
    compiled = tuple(kernel.overloads.values())
    if not compiled:
        return multiprocessors()
    key = (id(kernel), len(compiled), config.block, config.grid())
    if key not in _resident_blocks:
        resident = min(k.max_cooperative_grid_blocks(config.block) for k in compiled)
        _resident_blocks[key] = max(1, min(config.grid(), resident))
    return _resident_blocks[key]


# Occupancy answers per (kernel, number of compiled versions, block, grid): a driver query per launch
# would add to the launch overhead of every search pass.
_resident_blocks: dict[tuple[int, int, int, int], int] = {}


@dataclass
class LevelQueues:
    """Level queues on the device plus host copies of their per-level layout."""

    queues: Any  # device int32 (CLASSES, capacity)
    ptr: Any  # device int64 (CLASSES, levels + 1)
    cnt: Any  # device int64 (CLASSES, levels + 1)
    levels: int
    host_cnt: np.ndarray  # (CLASSES, levels)
    all_ptr: Any  # device (CLASSES, 1): zeros, so level 0 of (all_ptr, all_cnt) is every node
    all_cnt: Any  # device (CLASSES, 1): per-class totals

    def top_down(self) -> tuple[int, int, int]:
        """(first, count, step) of a sweep from the root level down."""
        return 0, self.levels, 1

    def bottom_up(self) -> tuple[int, int, int]:
        """(first, count, step) of a sweep from the deepest level up."""
        return self.levels - 1, self.levels, -1


@cuda.jit(device=True)
def _discover(v, e, lvl, args):
    """Kahn's step: an edge removes one pending parent; the last one puts the child on the next level."""
    children, pending, indptr, queues, ptr, cnt, medium_min, large_min, huge_min = args
    c = children[e]
    if cuda.atomic.sub(pending, c, 1) == 1:
        cls = degree_class(indptr[c + 1] - indptr[c], medium_min, large_min, huge_min)
        slot = cuda.atomic.add(cnt, (cls, lvl + 1), 1)
        queues[cls, ptr[cls, lvl] + cnt[cls, lvl] + slot] = c


@cuda.jit(device=True)
def _count_parent(e, args):
    children, pending = args
    cuda.atomic.add(pending, children[e], 1)


_discover_level = make_advance_body(_discover)
_map_count_parents = make_edge_map(_count_parent)


@cuda.jit
def _discover_levels(indptr, queues, ptr, cnt, max_levels, args, levels):
    """Kahn's levels in one persistent launch; it stops on the device at the first empty level."""
    grid = cuda.cg.this_grid()
    gtid = cuda.grid(1)
    lvl = 0
    while lvl <= max_levels:
        _discover_level(indptr, queues, ptr, cnt, lvl, args)
        if gtid < CLASSES:
            ptr[gtid, lvl + 1] = ptr[gtid, lvl] + cnt[gtid, lvl]
        grid.sync()
        if cnt[SMALL, lvl + 1] + cnt[MEDIUM, lvl + 1] + cnt[LARGE, lvl + 1] + cnt[HUGE, lvl + 1] == 0:
            break
        lvl += 1
    if gtid == 0:
        levels[0] = lvl + 1


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
    root_cls = int(np.searchsorted([config.medium_min, config.large_min, config.huge_min], root_degree, side="right"))
    cnt_h[root_cls, 0] = 1
    queues[root_cls, 0:1].copy_to_device(np.array([root], dtype=np.int32))
    ptr, cnt = cuda.to_device(np.zeros((CLASSES, cap), dtype=np.int64)), cuda.to_device(cnt_h)
    args = (children, pending, indptr, queues, ptr, cnt, config.medium_min, config.large_min, config.huge_min)
    found = cuda.to_device(np.zeros(1, dtype=np.int64))
    _discover_levels[cooperative_blocks(_discover_levels, config), block](
        indptr, queues, ptr, cnt, max_levels, args, found
    )
    levels = int(found.copy_to_host()[0])
    if levels > max_levels:
        return None
    host_cnt = cnt[:, :levels].copy_to_host()
    return LevelQueues(
        queues=queues,
        ptr=ptr,
        cnt=cnt,
        levels=levels,
        host_cnt=host_cnt,
        all_ptr=cuda.to_device(np.zeros((CLASSES, 1), dtype=np.int64)),
        all_cnt=cuda.to_device(host_cnt.sum(axis=1).reshape(CLASSES, 1)),
    )
