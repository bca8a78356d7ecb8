"""Node names as uploaded, and the vectorized mapping between names and internal node ids.

Internal ids are the ranks of the names in sorted order, so a lookup is one ``searchsorted``. A
``.gra`` file's names are its line numbers 0..n-1 and need no table at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import UnknownNodeError

__all__ = ["NodeNames", "sorted_unique_ids"]

_INT64 = np.iinfo(np.int64)
# An integer name as text: ASCII digits and a sign (int() also takes "5_0", spaces and other scripts' digits).
_DECIMAL = re.compile(r"[+-]?[0-9]{1,40}")


class NodeNames:
    """Names of nodes 0..n-1: the range itself, sorted unique integers, or sorted unique strings."""

    __slots__ = ("size", "values")

    def __init__(self, size: int, values: np.ndarray | None = None) -> None:
        self.size = size
        self.values = values

    @classmethod
    def identity(cls, size: int) -> NodeNames:
        return cls(size, None)

    @classmethod
    def from_sorted(cls, values: np.ndarray) -> NodeNames:
        """Sorted unique int64 or str values; an integer range 0..n-1 collapses to ``identity``."""
        if values.dtype.kind in "iu":
            values = values.astype(np.int64, copy=False)
            if values.size == 0 or (values[0] == 0 and values[-1] == values.size - 1):
                return cls.identity(values.size)
        return cls(values.size, values)

    @property
    def are_integers(self) -> bool:
        return self.values is None or self.values.dtype.kind == "i"

    @property
    def kind(self) -> str:
        if self.values is None:
            return "range"
        return "int" if self.values.dtype.kind == "i" else "str"

    def __len__(self) -> int:
        return self.size

    def lookup(self, names: Any) -> np.ndarray:
        """Internal ids (int64) of names, any array shape; raises UnknownNodeError for the first unknown.

        Integer graphs take integers or their decimal strings; string graphs take strings (an integer
        is read as its decimal string).
        """
        array = np.asarray(names)
        if self.are_integers:
            keys = self._as_integers(array)
            if self.values is None:
                # Two vectorized reductions instead of a mask: the common case is all names valid.
                if keys.size == 0 or (keys.min() >= 0 and keys.max() < self.size):
                    return keys
                found = (keys >= 0) & (keys < self.size)
                ids = keys
            else:
                ids = np.searchsorted(self.values, keys)
                found = ids < self.size
                found[found] = self.values[ids[found]] == keys[found]
        else:
            assert self.values is not None  # only integer names can go without a table
            keys = array.astype(str) if array.dtype.kind != "U" else array
            ids = np.searchsorted(self.values, keys)
            found = ids < self.size
            found[found] = self.values[ids[found]] == keys[found]
        if not found.all():
            position = np.unravel_index(int(np.argmin(found)), found.shape)
            raise UnknownNodeError(_python_value(array[position]))
        return ids.astype(np.int64, copy=False)

    def _as_integers(self, array: np.ndarray) -> np.ndarray:
        if array.dtype.kind == "u" and array.size and array.max() > _INT64.max:
            raise UnknownNodeError(_python_value(array.flat[int(np.argmax(array > _INT64.max))]))
        if array.dtype.kind in "iu":
            return array.astype(np.int64, copy=False)
        if array.dtype.kind == "U":
            try:
                keys = array.astype(np.int64)
            except (ValueError, OverflowError):
                pass
            else:
                # int() also reads "5_0", " 5" and other scripts' digits: only canonical decimals pass here.
                if np.array_equal(keys.astype(str), array):
                    return keys
        flat = [_to_int(value) for value in array.ravel()]
        for value, converted in zip(array.ravel(), flat, strict=True):
            if converted is None:
                raise UnknownNodeError(_python_value(value))
        return np.array(flat, dtype=np.int64).reshape(array.shape)

    def names_of(self, ids: Iterable[int] | np.ndarray) -> list[int | str]:
        """The uploaded names of internal ids, as Python ints or strings."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.values is None:
            return ids.tolist()
        return self.values[ids].tolist()

    def to_array(self) -> np.ndarray:
        """What the index files store: the sorted names, or an empty int64 array for the range."""
        return np.empty(0, dtype=np.int64) if self.values is None else self.values

    @classmethod
    def from_array(cls, size: int, array: np.ndarray) -> NodeNames:
        return cls.identity(size) if array.size == 0 and size > 0 else cls(size, np.asarray(array))


def _to_int(value: Any) -> int | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        number = int(value)
    elif isinstance(value, (float, np.floating)) and float(value).is_integer():
        number = int(value)
    elif isinstance(value, str) and _DECIMAL.fullmatch(value):
        number = int(value)
    else:
        return None
    # Names are 64-bit integers: a larger number names no node (and must not overflow the lookup).
    return number if _INT64.min <= number <= _INT64.max else None


def _python_value(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def sorted_unique_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique values and each value's rank; dense non-negative integers avoid a sort."""
    if values.dtype.kind in "iu" and values.size:
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high < 4 * values.size + 1024:
            present = np.zeros(high + 1, dtype=np.bool_)
            present[values] = True
            rank = np.cumsum(present, dtype=np.int64) - 1
            return np.flatnonzero(present).astype(np.int64), rank[values]
    unique, inverse = np.unique(values, return_inverse=True)
    return unique, inverse.astype(np.int64, copy=False).reshape(-1)
