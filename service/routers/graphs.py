"""Upload, list, inspect and delete graphs. Uploads stream to disk; the index builds in the background."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from grail_core.backends import resolve_backend
from grail_core.errors import GraphFormatError, InvalidParameterError
from grail_core.formats import FORMAT_TABLE, ReadOptions
from grail_core.labels import MAX_DIMS

from ..bodies import declared_length, stream_to_file
from ..conventions import accepts_json
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
from ..jobs import estimate_upload
from ..models import Backend, ErrorOut, GraphFormat, GraphList, GraphOut, GraphStatusName
from ..options import UploadOptions
from ..registry import GraphRecord, GraphStatus

__all__ = ["router"]

log = logging.getLogger("grail.service.graphs")

router = APIRouter(prefix="/graphs", tags=["graphs"])

_COLUMN = (
    "edge lists, Parquet and Arrow: the column of the {role}, by name or 0-based position "
    "(default: recognised by its name; an ambiguous table is refused with a message naming this parameter)"
)
_TEXT_BODY: dict[str, Any] = {"minLength": 1, "description": "the graph file's text", "example": "0 1\n1 2\n"}
_BINARY_BODY: dict[str, Any] = {"type": "string", "format": "binary", "minLength": 1}
# An upload's body by media type, from the format table. Text formats take any bytes (their grammar is checked
# by the server: 422 with the line), so their schema is any value at least one byte long, under their text/*
# media types (schema tools write no text under another); a JSON graph is an object. XML ones (GraphML) are
# read too, but an XML media type here would have schema tools write the body as XML of the schema, not as a
# graph file.
_BODY_SCHEMAS: dict[str, dict[str, Any]] = {
    "text": _TEXT_BODY,
    "binary": _BINARY_BODY,
    "json": {"type": "object", "example": {"edges": [[0, 1], [1, 2]], "nodes": [3]}},
}
_UPLOAD_BODIES = {
    **{
        media: {"schema": _BODY_SCHEMAS[f.body]}
        for f in FORMAT_TABLE.values()
        if f.readable and f.body in _BODY_SCHEMAS
        for media in f.media_types
        if f.body != "text" or media.startswith("text/")
    },
    "text/plain": {"schema": _TEXT_BODY},
    "application/gzip": {"schema": _BINARY_BODY},
}

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown graph"},
}


@router.post(
    "",
    status_code=202,
    response_model=GraphOut,
    summary="Upload a graph and build its index",
    responses={
        201: {"model": GraphOut, "description": "with wait=true: the index is ready"},
        400: {"model": ErrorOut, "description": "the client went away before the body was complete"},
        413: {"model": ErrorOut, "description": "body over the size limit, or a graph needing more build memory"},
        415: {"model": ErrorOut, "description": "format unknown or refused (DOT, GEXF) from Content-Type"},
        422: {"model": ErrorOut, "description": "bad parameter, or (wait=true) malformed graph, with its line"},
        500: {"model": ErrorOut, "description": "(wait=true) the build failed on the server's side"},
        503: {"model": ErrorOut, "description": "too many uploads or builds at once (Retry-After), read-only disk"},
        507: {"model": ErrorOut, "description": "the disk is full, or (wait=true) the build ran out of memory"},
    },
    openapi_extra={"requestBody": {"required": True, "content": _UPLOAD_BODIES}},
)
async def upload_graph(
    request: Request,
    state: Annotated[ServiceState, Depends(get_state)],
    name: Annotated[str | None, Query(max_length=200, description="label for people; defaults to the id")] = None,
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
) -> Response:
    accepts_json(request.headers.get("accept"))
    graph_format = format_for(format, request.headers.get("content-type"), request.headers.get("content-encoding"))
    options = UploadOptions(
        ReadOptions(graph_format, header, source_column, target_column), dims, seed, backend or state.settings.backend
    )
    # Options the format does not take are refused before the upload is read.
    try:
        options.read.check()
    except InvalidParameterError as error:
        raise ServiceError(INVALID_PARAMETER, str(error)) from None
    # The core's own check, run before the upload so that a bad backend costs no transfer.
    resolve_backend(options.backend)
    settings = state.settings
    limit = settings.max_upload_bytes
    declared_length(request, limit)
    state.runner.admit()
    with state.admission.upload():
        graph_id, path = await asyncio.to_thread(state.registry.new_upload_file)
        try:
            size = await stream_to_file(request, path, limit)
            if size == 0:
                raise ServiceError(EMPTY_BODY, "the request body is empty; send the graph file as the body")
            if graph_format == "json" or _media(request) == "application/json":
                await asyncio.to_thread(_check_json_object, path)
            if await request.is_disconnected():
                # The connection broke after the body (e.g. bytes past its Content-Length): no one would hear of it.
                raise ServiceError(CLIENT_DISCONNECT, "the connection broke before the upload was answered")
            estimate = await asyncio.to_thread(estimate_upload, path, graph_format)
            state.runner.check(estimate)
            record = await asyncio.to_thread(state.registry.add, graph_id, name or graph_id, options, size)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        if await request.is_disconnected():  # it broke while the upload was registered: take it back
            await asyncio.to_thread(state.registry.delete, graph_id)
            raise ServiceError(CLIENT_DISCONNECT, "the connection broke before the upload was answered")
    state.metrics.uploaded(size)
    log.info(
        "graph %s (%r): uploaded %d bytes, format %s, dims %d, seed %d, backend %s; build needs about %d MiB",
        graph_id,
        record.name,
        size,
        graph_format or "guessed",
        dims,
        seed,
        options.backend,
        estimate.bytes >> 20,
    )
    future = state.runner.submit(record, estimate.bytes)
    headers = {"Location": f"/graphs/{graph_id}"}
    if not wait:
        return JSONResponse(GraphOut.from_record(record).model_dump(mode="json"), status_code=202, headers=headers)
    final = await asyncio.wrap_future(future)
    if final is None:
        return response_for(ServiceError(GRAPH_NOT_FOUND, f"graph {graph_id!r} was deleted while it was building"))
    return _final_response(final, headers, state.registry.live(graph_id))


def _media(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()


def _check_json_object(path: Path) -> None:
    """A JSON graph is an object: anything else is refused now, not after a queued build (gzip is left to it)."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip()
    if head and head[:1] != b"{" and head[:2] != b"\x1f\x8b":
        raise GraphFormatError('a JSON graph is an object: {"edges": [[u, v], ...]}')


def _final_response(record: GraphRecord, headers: dict[str, str], live: dict[str, Any]) -> Response:
    body = GraphOut.from_record(record, live).model_dump(mode="json")
    if record.status is GraphStatus.ready:
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
    records = state.registry.records()
    if status is not None:
        records = [r for r in records if r.status.value in status]
    return GraphList(graphs=[GraphOut.from_record(r, state.registry.live(r.id)) for r in records])


@router.get(
    "/{graph_id}", response_model=GraphOut, responses=_ERRORS, summary="A graph's record: status, progress, stats"
)
async def get_graph(graph_id: str, request: Request, state: Annotated[ServiceState, Depends(get_state)]) -> GraphOut:
    accepts_json(request.headers.get("accept"))
    return GraphOut.from_record(state.registry.get(graph_id), state.registry.live(graph_id))


@router.delete(
    "/{graph_id}",
    status_code=204,
    responses={**_ERRORS, 503: {"model": ErrorOut, "description": "the data directory is read-only: nothing removed"}},
    summary="Forget a graph and remove its files",
)
async def delete_graph(graph_id: str, state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    await asyncio.to_thread(state.registry.delete, graph_id)
    log.info("graph %s: deleted", graph_id)
    return Response(status_code=204)
