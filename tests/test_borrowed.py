"""``borrowed``: the same arrays, read through null owners, inside compiled code."""

from typing import NamedTuple

import numpy as np
from numba import njit

from grail_core.borrowed import borrowed


class _Pack(NamedTuple):
    count: int
    values: np.ndarray
    grid: np.ndarray


@njit
def _sum_borrowed(pack):
    pack = borrowed(pack)
    values = borrowed(pack.values)
    total = 0.0
    for i in range(pack.count):
        total += values[i] + pack.grid[i % pack.grid.shape[0], i % pack.grid.shape[1]]
    return total


@njit
def _borrowed_is_a_view(values, index, value):
    view = borrowed(values)
    view[index] = value
    return values[index]


def test_borrowed_arrays_read_and_write_the_same_memory() -> None:
    rng = np.random.default_rng(3)
    values = rng.random(1000)
    grid = rng.random((7, 11))
    pack = _Pack(1000, values, grid)
    expected = sum(values[i] + grid[i % 7, i % 11] for i in range(1000))
    assert _sum_borrowed(pack) == expected
    assert _borrowed_is_a_view(values, 17, 2.5) == 2.5
    assert values[17] == 2.5
