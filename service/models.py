"""Request and response bodies of the HTTP API (the wire format; the domain records live in registry)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grail_core.backend_names import BackendName
from grail_core.formats import FormatName

from .registry import GraphRecord
from .warmup import KernelState

__all__ = [
    "NodeName",
    "GraphOut",
    "GraphList",
    "ErrorOut",
    "PairsIn",
    "PairOut",
    "PairsOut",
    "PathOut",
    "ListingOut",
    "EdgesIn",
    "EdgesOut",
    "BatchOut",
    "HealthOut",
    "ReadyOut",
    "GraphFormat",
    "GraphStatusName",
    "Backend",
]

# Integer names for .gra and all-integer edge lists, strings otherwise; an integer may come as a decimal string.
NodeName = int | str
GraphFormat = FormatName
Backend = BackendName
GraphStatusName = Literal["queued", "building", "ready", "failed"]


class GraphOut(BaseModel):
    id: str
    name: str
    status: GraphStatusName
    phase: str | None = Field(None, description="current build phase while queued or building")
    progress: float | None = Field(None, ge=0, le=1, description="fraction of the current build done")
    error: dict[str, Any] | None = Field(None, description="why the build failed: type, message, line when known")
    stats: dict[str, Any] | None = Field(
        None,
        description="index statistics once ready (nodes, edges, components, "
        "dag_nodes, dag_edges, levels, dims, seed, backend, phase_seconds)",
    )
    format: str | None
    dims: int
    seed: int
    backend: str
    upload_bytes: int
    created_at: float
    updated_at: float
    version: int | None = Field(None, description="the version queries answer for; each edge update makes the next")
    checksum: str | None = Field(None, description="content checksum of the saved index (sha256 of its arrays)")
    pending_updates: dict[str, int] | None = Field(
        None,
        description="edge updates not yet in the index's labels (updates, added_edges, removed_edges, new_nodes): "
        "answered exactly all the same",
    )
    rebuild: dict[str, Any] | None = Field(
        None, description="the background rebuild folding the pending updates in: version, phase, progress"
    )

    @classmethod
    def from_record(cls, record: GraphRecord, live: dict[str, Any] | None = None) -> GraphOut:
        """``live``: what the served index adds (``GraphRegistry.live``)."""
        return cls(
            **(live or {}),
            id=record.id,
            name=record.name,
            status=record.status.value,
            phase=record.phase,
            progress=record.progress,
            error=record.error,
            stats=record.stats,
            format=record.params.format,
            dims=record.params.dims,
            seed=record.params.seed,
            backend=record.params.backend,
            upload_bytes=record.upload_bytes,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


class GraphList(BaseModel):
    graphs: list[GraphOut]


class ErrorOut(BaseModel):
    detail: str = Field(description="what is wrong, for a human")
    error: str = Field(description="machine-readable kind, e.g. GraphFormatError, UnknownNodeError, GraphNotReady")
    line: int | None = Field(None, description="1-based line of the graph file, for format errors")
    node: NodeName | None = Field(None, description="the unknown node, for UnknownNodeError")


class PairsIn(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"pairs": [[0, 5], [3, 1]]}})

    pairs: list[tuple[NodeName, NodeName]]


class PairOut(BaseModel):
    source: NodeName
    target: NodeName
    reachable: bool


class PairsOut(BaseModel):
    reachable: list[bool]


class PathOut(BaseModel):
    source: NodeName
    target: NodeName
    path: list[NodeName] | None = Field(
        description="the nodes of a path, source and target included; null: unreachable"
    )


# An edge as [source, target]: a two-item array, not a tuple's prefixItems (on which schemathesis's generator of
# negative bodies failed with an internal error).
Edge = Annotated[list[NodeName], Field(min_length=2, max_length=2)]


class EdgesIn(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"add": [["a", "b"]], "remove": [["b", "c"]]}})
    add: list[Edge] = Field(default_factory=list, description="edges to add; new nodes allowed")
    remove: list[Edge] = Field(default_factory=list, description="edges to remove")


class EdgesOut(BaseModel):
    version: int = Field(description="the graph's version after this update; every later query answers for it")
    added: int = Field(description="edges the graph did not have and now has")
    removed: int = Field(description="edges the graph had and no longer has")
    new_nodes: int
    pending_updates: int = Field(description="updates not yet folded into the index by a rebuild")


class ListingOut(BaseModel):
    node: NodeName
    count: int = Field(description="how many nodes the whole listing holds (before offset and limit)")
    offset: int | None = Field(None, description="where this page starts in the listing")
    nodes: list[NodeName] | None = Field(None, description="the page of the listing, in upload order")
    method: Literal["labels", "traversal"] | None = Field(
        None, description="with ?count=true: read off the index's labels, or counted by a search"
    )


class BatchOut(BaseModel):
    reachable: list[bool]
    stats: dict[str, Any] = Field(
        description="pairs, decided_by_filter, searched, positives, seconds, search_backend, search_engine, "
        "search_mode, search_seconds, predicted_seconds (the scheduler's prediction per engine), probe_pairs"
    )


class HealthOut(BaseModel):
    status: Literal["ok"]
    ready: bool = Field(description="what /ready answers: query kernels compiled, graphs on disk loaded")
    backend: str = Field(description="backend that builds use by default here: cpu or cuda")
    gpu: str | None = Field(None, description="name of the CUDA device, when one is usable")
    graphs: dict[str, int]


class ReadyOut(BaseModel):
    ready: bool
    kernels: KernelState = Field(description="the query kernels' warm-up")
    kernels_seconds: float | None = Field(None, description="how long the warm-up took (compiling or loading)")
    threading_layer: str | None = Field(None, description="numba's threading layer (tbb or omp: parallel calls)")
    graphs_loaded: bool
    error: str | None = Field(None, description="why the warm-up failed")
