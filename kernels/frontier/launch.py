"""Launch shape of the engine's kernels and the grid size of persistent (grid-barrier) kernels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..device import is_simulator, multiprocessors

__all__ = ["WARP", "EngineConfig", "cooperative_blocks"]

WARP = 32


@dataclass(frozen=True)
class EngineConfig:
    """Launch shape and degree thresholds; tests shrink all of them to reach every path in the simulator."""

    block: int = 256
    blocks: int = 0  # 0: 8 blocks per SM
    medium_min: int = 32
    large_min: int = 1024
    huge_min: int = 65536
    narrow: int = 1024  # most nodes of a level that one block takes alone (advance.is_narrow)

    def grid(self) -> int:
        return self.blocks if self.blocks > 0 else 8 * multiprocessors()

    @staticmethod
    def default() -> EngineConfig:
        """Full-size launches on a GPU; one warp in the simulator, where every thread costs ~1 ms."""
        if is_simulator():
            return EngineConfig(block=WARP, blocks=1, medium_min=4, large_min=8, huge_min=12, narrow=3)
        return EngineConfig()


def cooperative_blocks(kernel: Any, config: EngineConfig) -> int:
    """Grid size for a persistent (grid-barrier) kernel: every block must be resident at once.

    Before the kernel's first compilation one block per SM is used (always resident when a block
    fits at all); afterwards the occupancy of the compiled kernel. The simulator runs blocks one
    after another, so a grid barrier only works there with a single block.
    """
    if is_simulator():
        return 1
    compiled = tuple(kernel.overloads.values())
    if not compiled:
        return multiprocessors()
    key = (id(kernel), len(compiled), config.block, config.grid())
    if key not in _resident_blocks:
        resident = min(k.max_cooperative_grid_blocks(config.block) for k in compiled)
        _resident_blocks[key] = max(1, min(config.grid(), resident))
    return _resident_blocks[key]


# Occupancy answers per (kernel, number of compiled versions, block, grid): a driver query per launch
# would add to the launch overhead of every search pass.
_resident_blocks: dict[tuple[int, int, int, int], int] = {}
