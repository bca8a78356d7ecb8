"""Statistics of a built index and of a query batch (plain data, JSON-ready)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["IndexStats", "QueryStats"]


@dataclass(frozen=True)
class IndexStats:
    """Sizes of the graph and its condensation, the build parameters and the time of each phase."""

    nodes: int
    edges: int
    edge_entries: int
    components: int
    dag_nodes: int
    dag_edges: int
    levels: int
    dims: int
    seed: int
    backend: str
    hubs: int
    names: str
    phase_seconds: dict[str, float] = field(default_factory=dict)
    phase_backends: dict[str, str] = field(default_factory=dict)  # where each phase ran: 'cpu' or 'cuda'
    # Per phase: the build cost model's predicted seconds on each backend, and where it ran ('ran').
    build_plan: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def build_seconds(self) -> float:
        return sum(value for name, value in self.phase_seconds.items() if "." not in name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"build_seconds": self.build_seconds}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IndexStats:
        return cls(**{key: value for key, value in data.items() if key != "build_seconds"})


@dataclass(frozen=True)
class QueryStats:
    """What one batch cost: pairs the label filter decided, pairs that needed a search, and where.

    ``search_backend`` is 'cpu', 'cuda' or 'none' (nothing left to search); ``search_engine`` names the
    engine ('cpu', 'cuda:0', 'cuda:0+cuda:1') and ``search_mode`` how it searched ('dfs', 'levels',
    'frontier'). Where the scheduler chose, ``predicted_seconds`` holds its cost model's prediction for
    each engine ('cpu', and each GPU mode), to set beside the actual ``search_seconds``. With edge updates
    pending, ``searched`` includes the ``searched_updated`` pairs searched on the updated graph (on the CPU).
    """

    pairs: int
    decided_by_filter: int
    searched: int
    positives: int
    seconds: float
    search_backend: str
    search_engine: str = "none"
    search_mode: str = "none"
    search_seconds: float = 0.0
    predicted_seconds: dict[str, float] = field(default_factory=dict)
    probe_pairs: int = 0  # pairs searched on the calling thread for the prediction (the engine answers them too)
    version: int = 0  # the version of the graph the answers hold for
    searched_updated: int = 0  # pairs that pending edge updates may have changed, searched on the updated graph
    unknown_pairs: int = 0  # pairs naming a node the graph lacks, answered False (Version.query_batch_known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
