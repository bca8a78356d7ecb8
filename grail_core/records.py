"""The node-record layout and the filter's answer codes, shared by the CPU engine and the GPU search.

A record is one row of uint32 words per DAG node, padded to whole 64-byte cache lines:

| words | what |
|---|---|
| ``ID`` | the DAG node id (a topological rank) |
| ``LEVEL`` | the longest path from a root (u -> v implies level(u) < level(v)) |
| ``FWD``, ``FWD + 1`` | hub mask ``fwd`` (bit i: hub i reaches the node), low word first |
| ``BWD``, ``BWD + 1`` | hub mask ``bwd`` (bit i: the node reaches hub i) |
| ``HEADER_WORDS + 3 k + (LO, HI, TREE_LO)`` | dimension k's min post-order below, post-order, DFS-tree start |

``label_end(dims)`` is one past the last label word; the rest of a row is padding (the GPU search keeps
a node's device id there). A *compact* node record holds the words ``COMPACT_COLUMNS`` of the full one:
ID, LEVEL, then LO and HI of the first dimension (at ``COMPACT_LO`` and ``COMPACT_HI``).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "BWD",
    "CACHE_LINE_WORDS",
    "COMPACT_COLUMNS",
    "COMPACT_HI",
    "COMPACT_LO",
    "FWD",
    "HEADER_WORDS",
    "HI",
    "ID",
    "LABEL_WORDS",
    "LEVEL",
    "LO",
    "NO",
    "TREE_LO",
    "UNDECIDED",
    "YES",
    "label_end",
    "record_words",
]

# What the label tests say about 'u reaches v': no, yes, or only a search can tell.
NO = np.int8(0)
YES = np.int8(1)
UNDECIDED = np.int8(2)

ID, LEVEL, FWD, BWD = 0, 1, 2, 4
HEADER_WORDS = 6
LO, HI, TREE_LO = 0, 1, 2  # within a dimension's words
LABEL_WORDS = 3  # words per dimension
COMPACT_COLUMNS = (ID, LEVEL, HEADER_WORDS + LO, HEADER_WORDS + HI)
COMPACT_LO, COMPACT_HI = 2, 3
CACHE_LINE_WORDS = 16


def label_end(dims: int) -> int:
    """One past the last label word of a record with ``dims`` dimensions."""
    return HEADER_WORDS + LABEL_WORDS * dims


def record_words(dims: int) -> int:
    """Words of a full record: the labels rounded up to whole cache lines."""
    return -(-label_end(dims) // CACHE_LINE_WORDS) * CACHE_LINE_WORDS
