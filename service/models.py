"""Request and response bodies of the HTTP API (the wire format; the records they show live in registry)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationInfo, field_validator

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
    "UnknownOut",
    "ProblemType",
    "ProblemList",
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
    "UnknownPolicy",
    "UNKNOWN_POLICIES",
]

# Integer names for .gra and all-integer edge lists, strings otherwise; an integer may come as a decimal string.
NodeName = int | str
# Every route of a graph reaches it by its id or by its name (the path parameter keeps the name graph_id).
GRAPH_REF_DESCRIPTION = "the graph's id or name"
GraphRef = Annotated[str, Path(description=GRAPH_REF_DESCRIPTION)]
GraphFormat = FormatName
Backend = BackendName
GraphStatusName = Literal["queued", "building", "ready", "failed"]
# What answers a query pair that names a node the graph does not have (the ``unknown`` parameter).
UnknownPolicy = Literal["error", "false", "null"]
UNKNOWN_POLICIES: tuple[str, ...] = get_args(UnknownPolicy)


class GraphOut(BaseModel):
    id: str
    name: str = Field(description="unique on this server; every route of the graph takes it as well as the id")
    replaces: str | None = Field(
        None, description="a replacement (PUT /graphs/{name}): the name it takes over once its index is ready"
    )
    status: GraphStatusName
    phase: str | None = Field(None, description="current build phase while queued or building")
    progress: float | None = Field(
        None, ge=0, le=1, description="in phase read: the fraction of the file read; after it: of the build done"
    )
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
        "attempts, max_attempts, the last attempt's error, while queued next_attempt_at (seconds since the "
        "epoch), and urgent: whether queries' searches of the pending updates made it due at once",
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


class UnknownOut(BaseModel):
    pair: int = Field(description="0-based index of the pair in the batch (of its answer)")
    end: Literal["source", "target"]
    name: NodeName


class ErrorOut(BaseModel):
    """An RFC 9457 problem details document (``application/problem+json``), with grail's members beside the
    standard ones; docs/errors.md describes every kind."""

    model_config = ConfigDict(extra="allow", title="Problem")

    type: str = Field(description="the problem type: /problems/KIND on this server, which describes it")
    title: str = Field(description="what kind of problem, the same for every answer of the kind")
    status: int = Field(description="the HTTP status of this answer")
    detail: str = Field(description="what is wrong this time, for a human")
    instance: str | None = Field(None, description="the path of the request")
    error: str = Field(description="the kind, for a program: GraphNotFound, UnknownNodeError, GraphFormatError ...")
    request_id: str | None = Field(None, description="the request's id (also its X-Request-ID header)")
    line: int | None = Field(None, description="1-based line of the graph file, for format errors")
    node: NodeName | None = Field(None, description="the (first) unknown node, for UnknownNodeError")
    unknown: list[UnknownOut] | None = Field(
        None, description="for UnknownNodeError in pairs: where they name unknown nodes (the first 100)"
    )
    unknown_count: int | None = Field(None, description="for UnknownNodeError: how many names are unknown in all")


class ProblemType(BaseModel):
    type: str
    error: str = Field(description="the kind's name, as error answers carry it")
    title: str
    status: int


class ProblemList(BaseModel):
    problems: list[ProblemType]


class PairsIn(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"pairs": [[0, 5], [3, 1]]}})

    pairs: list[tuple[NodeName, NodeName]]


class PairOut(BaseModel):
    source: NodeName
    target: NodeName
    reachable: bool | None = Field(description="null: unknown=null and the pair names a node the graph lacks")


class PairsOut(BaseModel):
    reachable: list[bool | None]


class PathOut(BaseModel):
    source: NodeName
    target: NodeName
    path: list[NodeName] | None = Field(
        description="the nodes of a path, source and target included; null: unreachable"
    )


# An edge as [source, target]: a two-item array, not a tuple's prefixItems (on which schemathesis's generator of
# negative bodies failed with an internal error). Names as queries take them: an integer or a string, never a
# boolean or a float (JSON's 5.0 and 1e3 are floats).
# A node's name is not empty (nor, as JSON text, a lone surrogate: the JSON parser refuses those).
Edge = Annotated[list[StrictInt | Annotated[StrictStr, Field(min_length=1)]], Field(min_length=2, max_length=2)]


class EdgesIn(BaseModel):
    """Validated with ``context={"max_name_bytes": N}``: a new node's name is at most N bytes of UTF-8, as in an
    upload (--max-name-bytes)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"example": {"add": [["a", "b"]], "remove": [["b", "c"]]}}
    )
    add: list[Edge] = Field(
        default_factory=list, description="edges to add; new nodes allowed (names of at most --max-name-bytes)"
    )
    remove: list[Edge] = Field(default_factory=list, description="edges to remove")

    @field_validator("add")
    @classmethod
    def _name_lengths(cls, edges: list[list[int | str]], info: ValidationInfo) -> list[list[int | str]]:
        limit = (info.context or {}).get("max_name_bytes")
        if limit is not None:
            for edge in edges:
                for name in edge:
                    if isinstance(name, str) and len(name.encode("utf-8", "surrogatepass")) > limit:
                        raise ValueError(
                            f"a node name is {len(name.encode('utf-8', 'surrogatepass'))} bytes of UTF-8, more "
                            f"than the {limit} this server allows (--max-name-bytes)"
                        )
        return edges


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
    reachable: list[bool | None] = Field(description="in the order of the pairs; null only with unknown=null")
    stats: dict[str, Any] = Field(
        description="pairs, decided_by_filter, searched, positives, seconds, search_backend, search_engine, "
        "search_mode, search_seconds, predicted_seconds (the scheduler's prediction per engine), probe_pairs, "
        "unknown_pairs (pairs naming a node the graph lacks, with unknown=false or null)"
    )


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str = Field(description="the server's version")
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
