"""CSR on the device by sorting edge keys: one 64-bit key per edge, ``source << 32 | target``.

A sort (CuPy: CUB's radix sort) puts the keys in row order with each row sorted, a comparison with the
neighbour drops repeats, and a binary search of every row's first key gives the row offsets; the
transpose is the same with the halves swapped, and the condensation's quotient graph and its
renumbering are the same with both halves mapped. Self loops are dropped before the sort (fewer keys
to sort). The result equals ``grail_core.graph``'s CSR exactly (indptr int64, indices int32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import device_arrays

__all__ = ["MAX_DEVICE_NODES", "csr_from_keys", "edge_keys", "mapped_keys", "transposed_keys"]

# Node ids travel in the 32-bit halves of a key, and CSR indices are int32.
MAX_DEVICE_NODES = 2**31 - 1
_LOW = np.uint64(0xFFFFFFFF)
_HALF = np.uint64(32)


def _distinct_sorted(keys: Any) -> Any:
    xp = device_arrays()
    keys = xp.sort(keys)
    if keys.size < 2:
        return keys
    fresh = xp.empty(keys.size, dtype=np.bool_)
    fresh[0] = True
    xp.not_equal(keys[1:], keys[:-1], out=fresh[1:])
    return keys[fresh]


def edge_keys(src: Any, dst: Any) -> Any:
    """Sorted distinct keys of the edges ``src[i] -> dst[i]`` (device arrays), self loops dropped."""
    keep = src != dst
    keys = src[keep].astype(np.uint64) << _HALF
    keys |= dst[keep].astype(np.uint64)
    del keep
    return _distinct_sorted(keys)


def mapped_keys(keys: Any, mapping: Any) -> Any:
    """Sorted distinct keys of the edges ``mapping[u] -> mapping[w]`` for the edges u -> w of ``keys``,
    edges inside a class dropped (the quotient graph), or, for a permutation, the renumbered graph."""
    a = mapping[(keys >> _HALF).astype(np.int64)]
    b = mapping[(keys & _LOW).astype(np.int64)]
    keep = a != b
    out = a[keep].astype(np.uint64) << _HALF
    out |= b[keep].astype(np.uint64)
    return _distinct_sorted(out)


def transposed_keys(keys: Any) -> Any:
    """The keys of the reversed edges, sorted."""
    xp = device_arrays()
    return xp.sort((keys << _HALF) | (keys >> _HALF))


def csr_from_keys(num_nodes: int, keys: Any) -> tuple[Any, Any]:
    """(indptr int64, indices int32) of sorted distinct keys on nodes 0..num_nodes-1."""
    xp = device_arrays()
    rows = keys >> _HALF
    indptr = xp.searchsorted(rows, xp.arange(num_nodes + 1, dtype=np.uint64)).astype(np.int64)
    return indptr, (keys & _LOW).astype(np.int32)
