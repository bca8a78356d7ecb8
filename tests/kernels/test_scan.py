"""The device exclusive scan against numpy, across one, two and three levels of block sums."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from kernels.scan import SCAN_BLOCK, exclusive_scan


@pytest.mark.parametrize("size", [0, 1, SCAN_BLOCK, 3 * SCAN_BLOCK + 5, SCAN_BLOCK * SCAN_BLOCK + 7])
def test_exclusive_scan(size: int) -> None:
    values = np.random.default_rng(size).integers(0, 2**32, size=size, dtype=np.uint64)
    out = cuda.device_array(size + 1, dtype=np.uint64)
    exclusive_scan(cuda.to_device(values), out)
    expected = np.zeros(size + 1, dtype=np.uint64)
    expected[1:] = np.cumsum(values, dtype=np.uint64)
    np.testing.assert_array_equal(out.copy_to_host(), expected)
