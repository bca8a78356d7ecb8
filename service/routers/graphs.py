"""Upload, list, inspect and delete graphs. Uploads stream to the artifact store; the index builds in the
background (service.jobs); a graph is reached by its id or its name."""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi import Path as FastApiPath
from fastapi.responses import JSONResponse

from grail_core.backends import resolve_backend
from grail_core.errors import GraphFormatError, InvalidParameterError
from grail_core.formats import FORMAT_TABLE, ReadOptions
from grail_core.labels import MAX_DIMS

from ..bodies import declared_length, stream_to
from ..conventions import accepts_json, known_query
from ..deps import ServiceState, get_state
from ..errors import (
    CLIENT_DISCONNECT,
    EMPTY_BODY,
    GRAPH_NOT_FOUND,
    INVALID_PARAMETER,
    ServiceError,
    error_response,
    response_for,
    status_for_kind,
)
from ..formats import format_for
from ..jobs import UploadHead, estimate_upload
from ..logs import current_request_id
from ..models import Backend, ErrorOut, GraphFormat, GraphList, GraphOut, GraphRef, GraphStatusName
from ..options import UploadOptions
from ..registry import GraphRecord
from ..state import ArtifactStore
from ..state.errors import GraphNotFound, NameTaken, StateError
from ..state.metadata import MAX_NAME_CHARS, NAME_PATTERN, GraphStatus, check_name

__all__ = ["router"]

log = logging.getLogger("grail.service.graphs")

router = APIRouter(prefix="/graphs", tags=["graphs"], dependencies=[Depends(known_query)])

_COLUMN = (
    "edge lists, Parquet and Arrow: the column of the {role}, by name or 0-based position "
    "(default: recognised by its name; an ambiguous table is refused with a message naming this parameter)"
)
# A small graph in each text format, for the document's examples (Swagger UI sends them as they are).
_EXAMPLES = {
    "gra": "graph_for_greach\n3\n0: 1 #\n1: 2 #\n2: #\n",
    "text/csv": "source,target\na,b\nb,c\n",
    "text/tab-separated-values": "source\ttarget\na\tb\nb\tc\n",
    "mtx": "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n",
}
_EDGE_LINES = "a b\nb c\n"
_BINARY_BODY: dict[str, Any] = {"type": "string", "format": "binary", "minLength": 1}


def _text_body(example: str) -> dict[str, Any]:
    # No "type": a text body is text whatever JSON value a tool would write into it.
    return {"minLength": 1, "description": "the graph file's text", "example": example}


# An upload's body by media type, from the format table. Text formats take any bytes (their grammar is checked
# by the server: 422 with the line, or the build fails with it), so their schema is any text at least one byte
# long, under their text/* media types (schema tools write no text under another); a JSON graph is an object.
# XML ones (GraphML) are read too, but an XML media type here would have schema tools write the body as XML of
# the schema, not as a graph file. text/plain first: Swagger UI offers the first one.
_UPLOAD_BODIES: dict[str, Any] = {
    "text/plain": {"schema": _text_body(_EDGE_LINES)},
    **{
        media: {
            "schema": _BINARY_BODY
            if f.body == "binary"
            else {"type": "object", "example": {"edges": [["a", "b"], ["b", "c"]], "nodes": ["d"]}}
            if f.body == "json"
            else _text_body(_EXAMPLES.get(media) or _EXAMPLES.get(f.name) or _EDGE_LINES)
        }
        for f in FORMAT_TABLE.values()
        if f.readable and f.body in ("text", "binary", "json")
        for media in f.media_types
        if f.body != "text" or media.startswith("text/")
    },
    "application/gzip": {"schema": _BINARY_BODY},
}

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown graph"},
}
# The reading options, as the document describes them (app.py): one object exploded into the query string, one
# shape per kind of format, so that an option is only where its format takes it.
READ_PARAMETERS = ("format", "header", "source_column", "target_column")


_UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    201: {"model": GraphOut, "description": "with wait=true: the index is ready"},
    400: {"model": ErrorOut, "description": "the client went away before the body was complete"},
    409: {"model": ErrorOut, "description": "the name is taken by another graph (PUT /graphs/{name} replaces it)"},
    413: {"model": ErrorOut, "description": "body over the size limit, or a graph needing more build memory"},
    415: {"model": ErrorOut, "description": "format unknown or refused (DOT, GEXF) from Content-Type"},
    422: {
        "model": ErrorOut,
        "description": "bad parameter or name, an option the format does not take, or (wait=true) a malformed "
        "graph, with its line",
    },
    500: {"model": ErrorOut, "description": "(wait=true) the build failed on the server's side"},
    503: {"model": ErrorOut, "description": "too many uploads or builds at once (Retry-After), read-only disk"},
    507: {"model": ErrorOut, "description": "the disk is full, or (wait=true) the build ran out of memory"},
}
_UPLOAD_BODY = {"requestBody": {"required": True, "content": _UPLOAD_BODIES}}


@dataclass(frozen=True)
class _UploadParams:
    """The query parameters every upload takes (POST /graphs and PUT /graphs/{name})."""

    format: GraphFormat | None
    dims: int
    seed: int
    backend: Backend | None
    wait: bool
    source_column: str | None
    target_column: str | None
    header: bool | None


def _upload_params(
    format: Annotated[GraphFormat | None, Query(description="overrides the Content-Type")] = None,
    dims: Annotated[int, Query(ge=1, le=MAX_DIMS, description="GRAIL label dimensions")] = 2,
    seed: Annotated[int, Query(ge=0, lt=2**63, description="seed of the random child orders")] = 0,
    backend: Annotated[Backend | None, Query(description="build backend; the server's default if omitted")] = None,
    wait: Annotated[bool, Query(description="answer 201 only once the index is ready")] = False,
    source_column: Annotated[str | None, Query(max_length=200, description=_COLUMN.format(role="sources"))] = None,
    target_column: Annotated[str | None, Query(max_length=200, description=_COLUMN.format(role="targets"))] = None,
    header: Annotated[
        bool | None, Query(description="edge lists: whether the first row names the columns (default: recognised)")
    ] = None,
) -> _UploadParams:
    return _UploadParams(format, dims, seed, backend, wait, source_column, target_column, header)


@router.post(
    "",
    status_code=202,
    response_model=GraphOut,
    summary="Upload a graph and build its index",
    responses=_UPLOAD_RESPONSES,
    openapi_extra=_UPLOAD_BODY,
)
async def upload_graph(
    request: Request,
    state: Annotated[ServiceState, Depends(get_state)],
    params: Annotated[_UploadParams, Depends(_upload_params)],
    name: Annotated[
        str | None,
        Query(
            max_length=MAX_NAME_CHARS,
            pattern=NAME_PATTERN,
            description="a name unique on this server (letters, digits, '.', '_', '-'): the graph's routes take it "
            "as well as the id; defaults to the id",
        ),
    ] = None,
) -> Response:
    if name is not None:
        check_name(name)
        if state.registry.holds_name(name):
            raise NameTaken(name)
    return await _upload(request, state, params, name, replace=False)


@router.put(
    "/{graph_id}",
    status_code=202,
    response_model=GraphOut,
    summary="Upload a graph under a name, replacing the graph that holds it once the new index is ready",
    description="Queries by the name answer from the graph that holds it until the new one is built; then the "
    "name moves to the new graph (its own id, in the answer) and the old one is deleted, in one step. A build "
    "that fails leaves the old graph in place. The name is created if no graph holds it.",
    responses=_UPLOAD_RESPONSES,
    openapi_extra=_UPLOAD_BODY,
)
async def replace_graph(
    request: Request,
    state: Annotated[ServiceState, Depends(get_state)],
    params: Annotated[_UploadParams, Depends(_upload_params)],
    graph_id: Annotated[
        str,
        FastApiPath(
            max_length=MAX_NAME_CHARS, pattern=NAME_PATTERN, description="the name the new graph takes (not an id)"
        ),
    ],
) -> Response:
    return await _upload(request, state, params, check_name(graph_id), replace=True)


async def _upload(
    request: Request, state: ServiceState, params: _UploadParams, name: str | None, *, replace: bool
) -> Response:
    accepts_json(request.headers.get("accept"))
    read = ReadOptions(params.format, params.header, params.source_column, params.target_column)
    # Options that an explicit format does not take are refused before the upload is read; with the format
    # told by the Content-Type or the content, they apply where it takes them (as the document says).
    try:
        read.check()
    except InvalidParameterError as error:
        raise ServiceError(INVALID_PARAMETER, str(error)) from None
    graph_format = format_for(
        params.format, request.headers.get("content-type"), request.headers.get("content-encoding")
    )
    options = UploadOptions(
        read.as_format(graph_format), params.dims, params.seed, params.backend or state.settings.backend
    )
    # The core's own check, run before the upload so that a bad backend costs no transfer.
    resolve_backend(options.backend)
    settings = state.settings
    limit = settings.max_upload_bytes
    declared_length(request, limit)
    registry, artifacts = state.registry, state.registry.artifacts
    # The cap on uploads first, at once, in the order requests come (the queue's check costs a thread hop).
    with state.admission.upload():
        await asyncio.to_thread(state.runner.admit)
        graph_id = secrets.token_hex(6)
        head = UploadHead()
        upload = await stream_to(request, limit, lambda blocks: artifacts.put_upload(graph_id, blocks), head)
        try:
            if upload.size == 0:
                raise ServiceError(EMPTY_BODY, "the request body is empty; send the graph file as the body")
            if graph_format == "json" or _media(request) == "application/json":
                _check_json_object(bytes(head.head))
            if await request.is_disconnected():
                # The connection broke after the body (e.g. bytes past its Content-Length): no one would hear of it.
                raise ServiceError(CLIENT_DISCONNECT, "the connection broke before the upload was answered")
            estimate = estimate_upload(head, graph_format)
            state.runner.check(estimate)
            record = await asyncio.to_thread(
                registry.add,
                graph_id,
                options,
                name=name,
                replace=replace,
                upload_key=upload.key,
                upload_bytes=upload.size,
                memory_bytes=estimate.bytes,
                request_id=current_request_id(),
            )
        except BaseException:
            await asyncio.to_thread(_forget_upload, artifacts, graph_id)
            raise
        if await request.is_disconnected():  # it broke while the upload was registered: take it back
            await asyncio.to_thread(registry.delete, graph_id)
            raise ServiceError(CLIENT_DISCONNECT, "the connection broke before the upload was answered")
    state.runner.wake()
    state.metrics.uploaded(upload.size)
    log.info(
        "graph %s (%s%s): uploaded %d bytes, format %s, dims %d, seed %d, backend %s; build needs about %d MiB",
        graph_id,
        "replacing " if replace else "",
        name or "no name",
        upload.size,
        graph_format or "guessed",
        params.dims,
        params.seed,
        options.backend,
        estimate.bytes >> 20,
    )
    headers = {"Location": f"/graphs/{graph_id}"}
    if not params.wait:
        return JSONResponse(GraphOut.from_record(record).model_dump(mode="json"), status_code=202, headers=headers)
    await asyncio.wrap_future(registry.settled(graph_id))
    try:
        final = await asyncio.to_thread(registry.record, graph_id)
    except GraphNotFound:
        return response_for(ServiceError(GRAPH_NOT_FOUND, f"graph {graph_id!r} was deleted while it was building"))
    return _final_response(final, headers)


def _forget_upload(artifacts: ArtifactStore, key: str) -> None:
    """An upload no graph will refer to, removed (the orphan sweep's work, done at once where it can be)."""
    try:
        artifacts.delete_upload(key)
    except StateError as exc:
        log.warning("upload %s left for the orphan sweep: %s", key, exc.message)


def _media(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()


def _check_json_object(head: bytes) -> None:
    """A JSON graph is an object: anything else is refused now, not after a queued build (gzip is left to it)."""
    head = head[:4096].lstrip()
    if head and head[:1] != b"{" and head[:2] != b"\x1f\x8b":
        raise GraphFormatError('a JSON graph is an object: {"edges": [[u, v], ...]}')


def _final_response(record: GraphRecord, headers: dict[str, str]) -> Response:
    body = GraphOut.from_record(record).model_dump(mode="json")
    if record.status == GraphStatus.ready.value:
        return JSONResponse(body, status_code=201, headers=headers)
    error = record.error or {}
    kind = str(error.get("type", "BuildError"))
    status = status_for_kind(kind)
    return error_response(
        status, kind, f"the build failed: {error.get('message', 'unknown error')}", line=error.get("line"), graph=body
    )


@router.get("", response_model=GraphList, summary="All graphs, oldest first (?status= keeps those in a status)")
async def list_graphs(
    request: Request,
    state: Annotated[ServiceState, Depends(get_state)],
    status: Annotated[
        list[GraphStatusName] | None, Query(description="only graphs in this status; repeat for several")
    ] = None,
) -> GraphList:
    accepts_json(request.headers.get("accept"))
    records = await asyncio.to_thread(state.registry.records)
    if status is not None:
        records = [r for r in records if r.status in status]
    return GraphList(graphs=[GraphOut.from_record(r) for r in records])


@router.get(
    "/{graph_id}", response_model=GraphOut, responses=_ERRORS, summary="A graph's record: status, progress, stats"
)
async def get_graph(
    graph_id: GraphRef, request: Request, state: Annotated[ServiceState, Depends(get_state)]
) -> GraphOut:
    accepts_json(request.headers.get("accept"))
    return GraphOut.from_record(await asyncio.to_thread(state.registry.record, graph_id))


@router.delete(
    "/{graph_id}",
    status_code=204,
    responses={**_ERRORS, 503: {"model": ErrorOut, "description": "the data directory is read-only: nothing removed"}},
    summary="Delete a graph (its files are removed after a grace period)",
)
async def delete_graph(graph_id: GraphRef, state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    await asyncio.to_thread(state.registry.delete, graph_id)
    log.info("graph %s: deleted", graph_id)
    return Response(status_code=204)
