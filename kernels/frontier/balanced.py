"""Balanced queues: work known only at run time, spread evenly over the grid.

A balanced level is a list of slots, each with the start of its work items (sorted by slot) and
whatever payload the traversal keeps per slot in arrays of its own. It is filled from tasks with one
atomic per block (``make_balanced_fill_body``) and walked in tiles in which neighbouring threads take
neighbouring items (``make_balanced_advance_body``), so every thread gets the same share of a level's
work however it is spread over the slots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from ..device import is_simulator
from .launch import WARP

__all__ = [
    "BALANCED_BLOCK",
    "ITEM_BITS",
    "ITEM_MASK",
    "MAX_BALANCED_SLOTS",
    "balanced_slots",
    "make_balanced_advance_body",
    "make_balanced_fill_body",
]

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
