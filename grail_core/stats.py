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
    """What one batch cost: pairs the label filter decided, pairs that needed a search, and where."""

    pairs: int
    decided_by_filter: int
    searched: int
    positives: int
    seconds: float
    search_backend: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
