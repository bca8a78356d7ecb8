"""Byte-level scanners shared by the text readers (numba, one pass over the file's bytes)."""

from __future__ import annotations

import numpy as np
from numba import njit

NEWLINE = 10
CARRIAGE_RETURN = 13
SPACE = 32
TAB = 9
COMMA = 44
ZERO = 48
NINE = 57
MAX_ID = 2**53


@njit(inline="always")
def is_digit(c):
    return ZERO <= c <= NINE


@njit(nogil=True, cache=True)
def grow(array, size):
    bigger = np.empty(max(16, 2 * array.size), dtype=array.dtype)
    bigger[:size] = array[:size]
    return bigger
