"""What every reader yields: edge arrays over node ids 0..n-1, and the nodes' names."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..names import NodeNames


@dataclass(frozen=True)
class GraphInput:
    """A parsed graph: ``src[i] -> dst[i]`` over ids 0..num_nodes-1 (self loops and repeats allowed)."""

    num_nodes: int
    src: np.ndarray
    dst: np.ndarray
    names: NodeNames
    format: str

    @property
    def num_edge_entries(self) -> int:
        return int(self.src.size)
