"""An open-addressing table of non-negative int64 keys to int64 values, for numba, with one writer.

A table is an (capacity, 2) int64 array of (key, value) slots, capacity a power of two, probed linearly and
filled to at most half. Readers may probe while the one writer adds: a new slot's value is written before
its key, and a value a reader cannot use yet (the writer's sentinel) reads as absent. The writer never
moves a slot; a table that must grow is copied into a new array (``grown``), and the readers of the old
one keep it, whole and unchanged from then on.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

__all__ = ["EMPTY", "new_table", "lookup", "store", "grown", "needs_room"]

EMPTY = -1  # the key of a free slot, and what ``lookup`` answers for a key the table does not hold
_MIN_CAPACITY = 64

# One compiled form each, whatever integer types the callers pass: tables are written by the writer and read
# (read-only views) by the versions.
_TABLE = types.Array(types.int64, 2, "C")
_READ_ONLY_TABLE = types.Array(types.int64, 2, "C", readonly=True)


def new_table(capacity: int = _MIN_CAPACITY) -> np.ndarray:
    """An empty table of at least ``capacity`` slots."""
    size = _MIN_CAPACITY
    while size < capacity:
        size *= 2
    return np.full((size, 2), EMPTY, dtype=np.int64)


@njit(types.int64(types.int64, types.int64), nogil=True, cache=True)
def _home(key, mask):
    # splitmix64's finalizer: keys that differ in any bit land apart.
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.int64((z ^ (z >> np.uint64(31))) & np.uint64(mask))


@njit(
    [types.int64(_READ_ONLY_TABLE, types.int64), types.int64(_TABLE, types.int64)],
    nogil=True,
    cache=True,
)
def lookup(table, key):
    """The value of ``key``, or EMPTY."""
    mask = table.shape[0] - 1
    i = _home(key, mask)
    while True:
        k = table[i, 0]
        if k == key:
            return table[i, 1]
        if k == EMPTY:
            return EMPTY
        i = (i + 1) & mask


@njit(types.int64(_TABLE, types.int64, types.int64), nogil=True, cache=True)
def store(table, key, value):
    """Set ``key`` to ``value``; returns 1 when the key is new (the caller keeps the table at most half full)."""
    mask = table.shape[0] - 1
    i = _home(key, mask)
    while True:
        k = table[i, 0]
        if k == key:
            table[i, 1] = value
            return 0
        if k == EMPTY:
            table[i, 1] = value
            table[i, 0] = key
            return 1
        i = (i + 1) & mask


@njit(nogil=True, cache=True)
def _copy_into(old, new):
    for i in range(old.shape[0]):
        if old[i, 0] != EMPTY:
            store(new, old[i, 0], old[i, 1])


def needs_room(table: np.ndarray, used: int, more: int = 1) -> bool:
    """Whether ``more`` keys beyond ``used`` would fill the table past half."""
    return 2 * (used + more) > table.shape[0]


def grown(table: np.ndarray, used: int, more: int = 1) -> np.ndarray:
    """A copy of ``table`` with room for ``more`` keys beyond ``used`` (at least twice the slots they need)."""
    bigger = new_table(max(table.shape[0], 4 * (used + more)))
    _copy_into(table, bigger)
    return bigger
