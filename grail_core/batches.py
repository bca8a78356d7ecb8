"""How a batch of searches over the DAG spreads over its levels, as the GPU search runs it in passes.

Plain functions over arrays: the scheduler predicts a batch's cost from them, and the GPU search
(``kernels.search``) picks its mode from them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SPAN_SAMPLE", "pass_levels", "pass_spans"]

SPAN_SAMPLE = 256


def pass_levels(
    levels: np.ndarray, sources: np.ndarray, targets: np.ndarray, per_pass: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per pass of ``per_pass`` searches: its lowest source level and highest target level (``levels`` per
    DAG node), read from at most ``SPAN_SAMPLE`` pairs a pass, spread over it: the extremes of a large pass
    sit near the ends of the level range anyway, and each pair read is a cache miss."""
    count = -(-sources.size // per_pass)
    step = max(1, min(per_pass, sources.size) // SPAN_SAMPLE)
    positions = np.arange(count)[:, None] * per_pass + np.arange(0, min(per_pass, sources.size), step)[None, :]
    positions = np.minimum(positions, sources.size - 1)
    return levels[sources[positions]].min(axis=1), levels[targets[positions]].max(axis=1)


def pass_spans(levels: np.ndarray, sources: np.ndarray, targets: np.ndarray, per_pass: int) -> np.ndarray:
    """Levels each pass spans (see ``pass_levels``), as a levels-sweep launch would sweep them if every
    search stayed open."""
    if sources.size == 0:
        return np.zeros(0, dtype=np.int64)
    low, high = pass_levels(levels, sources, targets, per_pass)
    return np.maximum(high.astype(np.int64) - low, 0)
