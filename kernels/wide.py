"""Fixed-width multi-word unsigned integers for path-count weights (device functions).

A wide number is ``words`` words of ``bits`` bits each (bits <= 64, even), least significant first,
stored word-major (``arr[..., w, node]``) so that a one-word build reads one coalesced row. Sums are
done on half-words ("limbs"): a uint64 holding a sum of limbs cannot overflow for fewer than 2**31
terms, so atomics may add limbs with no carry handling and carries are resolved once, afterwards.
Tests set ``bits`` small (e.g. 8) to reach the multi-word and overflow paths on graphs of tens of nodes.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

__all__ = ["MAX_WORDS", "add_into", "equal_to", "less_than", "limb_mask", "offset_into"]

MAX_WORDS = 16  # size of the per-thread scratch arrays; the build chooses at most this many words


@cuda.jit(device=True, inline=True)
def limb_mask(half):
    return (np.uint64(1) << half) - np.uint64(1)


@cuda.jit(device=True, inline=True)
def offset_into(out, scans, k, e, row_start, words, half):
    """``out`` = 1 + (prefix sum of the row's earlier child weights), from limb scans ``scans[k, limb, :]``.

    That is the pre-order distance, in the unrolled DFS tree, from a node to its child at position ``e``.
    """
    mask = limb_mask(half)
    carry = np.uint64(1)
    for w in range(words):
        lo = scans[k, 2 * w, e] - scans[k, 2 * w, row_start] + carry
        carry = lo >> half
        hi = scans[k, 2 * w + 1, e] - scans[k, 2 * w + 1, row_start] + carry
        carry = hi >> half
        out[w] = (lo & mask) | ((hi & mask) << half)


@cuda.jit(device=True, inline=True)
def add_into(out, values, k, v, words, half):
    """``out += values[k, :, v]`` modulo 2**(words*bits); callers only add what provably fits."""
    mask = limb_mask(half)
    carry = np.uint64(0)
    for w in range(words):
        a = out[w]
        b = values[k, w, v]
        lo = (a & mask) + (b & mask) + carry
        carry = lo >> half
        hi = (a >> half) + (b >> half) + carry
        carry = hi >> half
        out[w] = (lo & mask) | ((hi & mask) << half)


@cuda.jit(device=True, inline=True)
def equal_to(a, values, k, v, words):
    for w in range(words):
        if a[w] != values[k, w, v]:
            return False
    return True


@cuda.jit(device=True, inline=True)
def less_than(a, b, words):
    """Lexicographic a < b over words, most significant first."""
    for w in range(words - 1, -1, -1):
        if a[w] != b[w]:
            return a[w] < b[w]
    return False
