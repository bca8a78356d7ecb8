"""Hub reach masks on the device: two sweeps of the engine over the labeling graph's level queues.

Bit i of ``fwd[v]`` says hub i reaches v, of ``bwd[v]`` that v reaches hub i (``grail_core.supportive``).
Top-down, every node ORs its mask into its children's (a node's parents all sit on lower levels, so its
mask is complete when its level comes); bottom-up, every node ORs its children's masks into its own.
The hubs are chosen as on the CPU: largest (in-degree + 1) x (out-degree + 1), ties to the smaller id.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .arrays import device_arrays
from .frontier import EngineConfig, LevelQueues, cooperative_blocks, make_sweep

__all__ = ["choose_hubs", "hub_reach_masks"]


@cuda.jit(device=True)
def _push_down(v, e, lvl, args):
    children, fwd = args
    mask = fwd[v]
    if mask != 0:
        cuda.atomic.or_(fwd, children[e], mask)


@cuda.jit(device=True)
def _pull_up(v, e, lvl, args):
    children, bwd = args
    mask = bwd[children[e]]
    if mask != 0:
        cuda.atomic.or_(bwd, v, mask)


_sweep_down = make_sweep(edge_op=_push_down)
_sweep_up = make_sweep(edge_op=_pull_up)


def choose_hubs(out_indptr: Any, in_indptr: Any, count: int) -> Any:
    """Sorted ids of the ``count`` nodes with the largest (in-degree + 1) x (out-degree + 1), ties to the
    smaller id (``grail_core.supportive.choose_hubs`` on device arrays)."""
    xp = device_arrays()
    n = out_indptr.size - 1
    count = min(count, n)
    if count == 0:
        return xp.empty(0, dtype=np.int64)
    score = (xp.diff(in_indptr) + 1) * (xp.diff(out_indptr) + 1)
    threshold = xp.partition(score, n - count)[n - count]
    above = xp.flatnonzero(score > threshold)
    tied = xp.flatnonzero(score == threshold)[: count - int(above.size)]
    return xp.sort(xp.concatenate([above, tied]))


def hub_reach_masks(lq: LevelQueues, indptr: Any, children: Any, hubs: Any, config: EngineConfig) -> tuple[Any, Any]:
    """(fwd, bwd) uint64 masks of every node of the labeling graph whose levels are ``lq`` (CSR
    ``indptr``/``children``, virtual root included; its own masks are meaningless)."""
    xp = device_arrays()
    n1 = indptr.size - 1
    fwd = xp.zeros(n1, dtype=np.uint64)
    bwd = xp.zeros(n1, dtype=np.uint64)
    bits = xp.left_shift(np.uint64(1), xp.arange(hubs.size, dtype=np.uint64))
    fwd[hubs] = bits
    bwd[hubs] = bits
    _sweep_down[cooperative_blocks(_sweep_down, config), config.block](
        indptr, lq.arrays, *lq.top_down(), (children, fwd), (), config.narrow
    )
    _sweep_up[cooperative_blocks(_sweep_up, config), config.block](
        indptr, lq.arrays, *lq.bottom_up(), (children, bwd), (), config.narrow
    )
    return fwd, bwd
