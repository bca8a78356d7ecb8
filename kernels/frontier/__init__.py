"""The one frontier engine: level queues split by degree, balanced queues, advance, node and map operators, sweeps.

Every GPU traversal in ``kernels`` (the five labeling phases, the levels that order them, the build's
components and hub masks, the bitmask search) is written as a per-edge, per-item or per-node device
function handed to this engine; none of them has a loop of its own over a frontier. One module per
concern, as Gunrock splits its operators:

* ``launch``: the launch shape (``EngineConfig``) and the grid of persistent kernels;
* ``discovery``: *level queues* (four int32 queues, one per degree class, each holding the nodes of
  level 0, then level 1, and so on) grown from a start set by a discover rule, in one persistent launch;
* ``levels``: topological levels (Kahn's rule from the root), the level queues the labeling sweeps;
* ``advance``: the degree-class advance over a level's out-edges (thread / warp / block / grid);
* ``balanced``: balanced queues for work known only at run time (slots with item starts, filled with
  one atomic per block, walked in tiles);
* ``maps``: flat maps over a range, and a map that folds a (low, high) extent;
* ``sweeps``: one persistent kernel over many levels with a grid barrier between steps, so neither
  the host nor the launch queue is involved per level.

Kernels run with a fixed grid and read the level's counts from device memory. Kernel arguments that
travel together are named tuples (``LevelArrays``, ``DegreeSplit``, and each traversal's own), which
numba passes field by field.
"""

from .advance import (
    CLASSES,
    HUGE,
    LARGE,
    MEDIUM,
    SMALL,
    DegreeSplit,
    LevelArrays,
    degree_class,
    make_advance,
    make_advance_body,
    make_node_body,
)
from .balanced import (
    BALANCED_BLOCK,
    ITEM_BITS,
    ITEM_MASK,
    MAX_BALANCED_SLOTS,
    balanced_slots,
    make_balanced_advance_body,
    make_balanced_fill_body,
)
from .discovery import (
    MAX_LEVELS,
    Discovery,
    DiscoveryRule,
    LevelBudget,
    LevelQueues,
    append_next,
    make_level_discovery,
    node_levels,
)
from .launch import WARP, EngineConfig, cooperative_blocks
from .levels import build_level_queues
from .maps import make_edge_map, make_map_body, make_map_extent_body
from .sweeps import make_sweep

__all__ = [
    "MAX_LEVELS",
    "BALANCED_BLOCK",
    "CLASSES",
    "HUGE",
    "ITEM_BITS",
    "ITEM_MASK",
    "LARGE",
    "MAX_BALANCED_SLOTS",
    "MEDIUM",
    "SMALL",
    "WARP",
    "DegreeSplit",
    "Discovery",
    "DiscoveryRule",
    "EngineConfig",
    "LevelArrays",
    "LevelBudget",
    "LevelQueues",
    "append_next",
    "balanced_slots",
    "build_level_queues",
    "cooperative_blocks",
    "degree_class",
    "make_advance",
    "make_advance_body",
    "make_balanced_advance_body",
    "make_balanced_fill_body",
    "make_edge_map",
    "make_level_discovery",
    "make_map_body",
    "make_map_extent_body",
    "make_node_body",
    "make_sweep",
    "node_levels",
]
