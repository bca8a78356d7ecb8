"""Request and response bodies of the HTTP API (the wire format; the records they show live in registry)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from grail_core.backend_names import BackendName
from grail_core.formats import FormatName

from .registry import GraphRecord
from .warmup import KernelState

__all__ = [
    "NodeName",
    "GraphRef",
    "GRAPH_REF_DESCRIPTION",
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
# Every route of a graph reaches it by its id or by its name (the path parameter keeps the name graph_id).
GRAPH_REF_DESCRIPTION = "the graph's id or name"
GraphRef = Annotated[str, Path(description=GRAPH_REF_DESCRIPTION)]
GraphFormat = FormatName
Backend = BackendName
GraphStatusName = Literal["queued", "building", "ready", "failed"]


class GraphOut(BaseModel):
    id: str
    name: str = Field(description="unique on this server; every route of the graph takes it as well as the id")
    replaces: str | None = Field(
        None, description="a replacement (PUT /graphs/{name}): the name it takes over once its index is ready"
    )
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
    checksum: str | None = Field(None, description="content checksum of the index's files (sha256 of its arrays)")
    pending_updates: dict[str, int] | None = Field(
        None,
        description="edge updates not yet in the index's labels (updates, added_edges, removed_edges, new_nodes): "
        "answered exactly all the same",
    )
    loading: dict[str, Any] | None = Field(
        None,
        description="after a start, while the graph's version loads and its journal is replayed: phase, progress "
        "(queries answer 409 GraphLoading meanwhile)",
    )
    rebuild: dict[str, Any] | None = Field(
        None,
        description="the rebuild folding the pending updates in: state (queued, running, failed), phase, progress, "
        "attempts, max_attempts, the last attempt's error and, while queued, next_attempt_at (seconds since the "
        "epoch)",
    )

    @classmethod
    def from_record(cls, record: GraphRecord) -> GraphOut:
        graph, options, version = record.graph, record.options, record.version
        live: dict[str, Any] = {}
        if version is not None:
            live = {
                "version": version.number,
                "checksum": version.labels.checksum,
                "pending_updates": version.pending._asdict(),
            }
        progress = record.progress
        return cls(
            **live,
            id=graph.id,
            name=graph.name,
            replaces=graph.pending_name,
            status=record.status,  # type: ignore[arg-type]  # one of GraphStatus's values
            phase=progress.phase if progress is not None else None,
            progress=progress.to_json()["progress"] if progress is not None else None,
            error=record.error,
            stats=graph.stats,
            format=options.format,
            dims=options.dims,
            seed=options.seed,
            backend=options.backend,
            upload_bytes=graph.upload_bytes,
            created_at=graph.created_at,
            updated_at=graph.updated_at,
            loading=record.loading.to_json() if record.loading is not None else None,
            rebuild=record.rebuild,
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
    graphs_loaded: bool = Field(description="every graph's version loaded and its journal replayed")
    loading: list[dict[str, Any]] = Field(
        default_factory=list, description="the graphs still loading: id, name, phase (load, journal), progress"
    )
    error: str | None = Field(None, description="why the warm-up failed")
