"""Exclusive prefix sum of a device array (uint64), the building block of every per-row offset.

A per-row exclusive scan over a CSR row is one global scan minus the scan at the row's start, so
the phases never scan row by row (a hub row would serialize) and need no segmented scan.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .compiled import kernel
from .device import is_simulator

__all__ = ["SCAN_BLOCK", "exclusive_scan"]

# Shared-memory sizes are compile-time constants; the simulator runs one Python thread per CUDA thread.
SCAN_BLOCK = 32 if is_simulator() else 1024


def _scan_block_sums(x, out, sums):
    """Hillis-Steele scan of each block's slice; writes exclusive partial sums and the block total."""
    buf = cuda.shared.array(SCAN_BLOCK, dtype=np.uint64)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * SCAN_BLOCK + tid
    value = x[i] if i < x.size else np.uint64(0)
    buf[tid] = value
    cuda.syncthreads()
    step = 1
    while step < SCAN_BLOCK:
        add = buf[tid - step] if tid >= step else np.uint64(0)
        cuda.syncthreads()
        buf[tid] += add
        cuda.syncthreads()
        step *= 2
    if i < x.size:
        out[i] = buf[tid] - value
    if tid == SCAN_BLOCK - 1:
        sums[cuda.blockIdx.x] = buf[tid]


def _add_offsets(out, offsets, n):
    i = cuda.blockIdx.x * SCAN_BLOCK + cuda.threadIdx.x
    if i < n:
        out[i] += offsets[cuda.blockIdx.x]
    if i == 0:
        out[n] = offsets[offsets.size - 1]


_scan_blocks = kernel(_scan_block_sums, "scan.blocks")
_add_block_offsets = kernel(_add_offsets, "scan.offsets")


def exclusive_scan(x: Any, out: Any) -> None:
    """``out[i] = x[0] + ... + x[i-1]`` for i in [0, n], with ``out`` of length ``x.size + 1`` (uint64, device)."""
    n = x.size
    blocks = max(1, -(-n // SCAN_BLOCK))
    sums = cuda.device_array(blocks, dtype=np.uint64)
    _scan_blocks[blocks, SCAN_BLOCK](x, out, sums)
    offsets = cuda.device_array(blocks + 1, dtype=np.uint64)
    if blocks == 1:
        offsets[0:1].copy_to_device(np.zeros(1, dtype=np.uint64))
        offsets[1:2].copy_to_device(sums)
    else:
        exclusive_scan(sums, offsets)
    _add_block_offsets[blocks, SCAN_BLOCK](out, offsets, n)
