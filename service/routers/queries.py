"""Reachability questions on a ready graph: single pairs and small batches over GET, large batches over POST.

Every route takes the graph's current version once, when it starts, and answers from it, header included.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request, Response

from grail_core import UnknownNodeError
from grail_core.version import Version

from ..bodies import declared_length, read_array
from ..codecs import BINARY, answer_type, batch_memory, decode_pairs, encode_answers, pair_format, parse_get_pairs
from ..conventions import accepts_json
from ..deps import ServiceState, get_state
from ..errors import BAD_PARAMETERS, ServiceError, response_for
from ..models import GRAPH_REF_DESCRIPTION, BatchOut, ErrorOut, GraphRef, PairOut, PairsIn, PairsOut
from ..wire import json_answers

__all__ = [
    "router",
    "reachable",
    "as_uploaded",
    "versioned_json",
    "REACHABLE_PATH",
    "REACHABLE_OPENAPI",
    "VERSION_HEADER",
]

# Every query's answer says which version of the graph it holds for (edge updates make new versions).
VERSION_HEADER = "Grail-Graph-Version"

router = APIRouter(prefix="/graphs/{graph_id}", tags=["queries"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown graph, or unknown node (named in the answer)"},
    409: {"model": ErrorOut, "description": "the graph is not ready (queued, building or failed)"},
    422: {"model": ErrorOut, "description": "bad parameters"},
}


def versioned_json(body: Any, version: int) -> Response:
    # Hand-serialised: a pydantic round trip would cost more than the query on this hot path.
    headers = {VERSION_HEADER: str(version)}
    return Response(json.dumps(body, separators=(",", ":")), media_type="application/json", headers=headers)


def _parameter(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": True, "schema": {"type": "string"}, "description": description}


def _error_ref() -> dict[str, Any]:
    return {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}


# The OpenAPI description of the route below, which FastAPI cannot derive since it is a plain Starlette route.
REACHABLE_PATH = "/graphs/{graph_id}/reachable"
REACHABLE_OPENAPI: dict[str, Any] = {
    "get": {
        "tags": ["queries"],
        "summary": "Does source reach target?",
        # OpenAPI cannot say "source and target, or else pairs": the second form is described here instead.
        "description": "A few pairs at once: ?pairs=U1,V1;U2,V2;... instead of source and target, answered in "
        'order as {"reachable": [...]} (up to --max-get-pairs).',
        "operationId": "reachable",
        "parameters": [
            {
                "name": "graph_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
                "description": GRAPH_REF_DESCRIPTION,
            },
            _parameter("source", "node name as uploaded (an integer name may be given as its decimal string)"),
            _parameter("target", "node name as uploaded"),
        ],
        "responses": {
            "200": {
                "description": "the answer",
                "content": {
                    "application/json": {
                        "schema": {"anyOf": [PairOut.model_json_schema(), PairsOut.model_json_schema()]}
                    }
                },
            },
            "404": {"description": "unknown graph, or unknown node (named in the answer)", **_error_ref()},
            "409": {"description": "the graph is not ready (queued, building or failed)", **_error_ref()},
            "422": {"description": "bad parameters", **_error_ref()},
        },
    }
}


async def reachable(request: Request) -> Response:
    """GET REACHABLE_PATH, the hottest route, registered by create_app as a plain Starlette route: FastAPI's
    parameter validation and dependency solving cost more than the query itself."""
    state: ServiceState = request.app.state.grail
    accepts_json(request.headers.get("accept"))
    version = state.registry.ready_version(request.path_params["graph_id"])
    params = request.query_params
    source, target, pairs = params.get("source"), params.get("target"), params.get("pairs")
    # Small work: answered right on the event loop, a thread hop would cost more than the query.
    if pairs is not None:
        if source is not None or target is not None:
            raise ServiceError(BAD_PARAMETERS, "give either ?pairs= or ?source=&target=, not both")
        batch = parse_get_pairs(pairs, state.settings.max_get_pairs)
        with state.core_gate:
            answers, stats = version.query_batch_with_stats(batch)
        _count(state, stats)
        return versioned_json({"reachable": answers.tolist()}, version.number)
    if source is None or target is None:
        raise ServiceError(BAD_PARAMETERS, "give ?source=U&target=V (or ?pairs=U1,V1;U2,V2)")
    # query_pair rather than a batch of one: half the cost, and it still says what decided the pair.
    with state.core_gate:
        answer, searched, _ = version.query_pair(source, target)
    state.metrics.queries(int(not searched), int(searched))
    body = {"source": as_uploaded(version, source), "target": as_uploaded(version, target), "reachable": bool(answer)}
    return versioned_json(body, version.number)


def as_uploaded(version: Version, name: str) -> int | str:
    """A name of the query string as uploaded: integer graphs answer with numbers (the version accepted it,
    so it parses)."""
    return int(name) if version.names_are_integers else name


def _count(state: ServiceState, stats: Any) -> None:
    data = stats.to_dict()
    state.metrics.queries(int(data["decided_by_filter"]), int(data["searched"]))


_PAIRS_DESCRIPTION = (
    "little-endian signed integers, source, target, source, target ...: int64, or int32/int16 with "
    "Content-Type: application/octet-stream; width=32 (or 16)"
)
_ANSWERS_DESCRIPTION = (
    "JSON, or 0/1 lines with Accept: text/plain, or one byte 0/1 per pair with Accept: application/octet-stream, "
    "or one bit per pair (numpy.packbits order: first pair in the high bit, zero-padded to whole bytes) with "
    "Accept: application/octet-stream; width=1"
)


@router.post(
    "/queries",
    response_model=BatchOut,
    responses={
        **_ERRORS,
        404: {"model": ErrorOut, "description": "unknown graph"},
        422: {"model": ErrorOut, "description": "malformed pairs, or a node the graph does not have (named in node)"},
        200: {"content": {"text/plain": {}, BINARY: {}}, "description": _ANSWERS_DESCRIPTION},
        406: {
            "model": ErrorOut,
            "description": "no answer type Accept allows, or binary answers of a width not 8 or 1",
        },
        413: {"model": ErrorOut, "description": "body over --max-upload-mb, or a batch over --max-batch-memory-mb"},
        503: {"model": ErrorOut, "description": "the batches being answered hold their memory (Retry-After)"},
        415: {"model": ErrorOut, "description": "unknown Content-Type, or binary pairs of a width not 64, 32 or 16"},
    },
    summary="Large batches: JSON pairs, 'u v' text lines, or binary integer pairs",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": PairsIn.model_json_schema()},
                # Any text: its "u v" lines are checked by the server (422 for an odd number of names).
                "text/plain": {"schema": {"description": "'u v' lines", "example": "0 5\n3 1\n"}},
                BINARY: {"schema": {"type": "string", "format": "binary", "description": _PAIRS_DESCRIPTION}},
            },
        }
    },
)
async def query_batch(
    graph_id: GraphRef, request: Request, state: Annotated[ServiceState, Depends(get_state)]
) -> Response:
    version = state.registry.ready_version(graph_id)
    content_type = request.headers.get("content-type") or "application/json"
    # Both formats are checked before the body is read: a refused request costs no transfer.
    media, width = pair_format(content_type)
    out_type = answer_type(request.headers.get("accept"))
    # The batch's memory is held from before its body is read until its answers are sent: a body of unknown
    # length may use what is left of the budget.
    settings = state.settings
    factor = batch_memory(media, width)
    declared = declared_length(request, settings.max_upload_bytes)
    limit = (
        settings.max_upload_bytes
        if declared is not None
        else min(settings.max_upload_bytes, settings.max_batch_memory_bytes // factor)
    )
    with state.admission.batch(factor * (declared if declared is not None else limit)):
        return await _answer_batch(request, state, version, content_type, out_type, limit)


async def _answer_batch(
    request: Request, state: ServiceState, version: Version, content_type: str, out_type: str, limit: int
) -> Response:
    # Every format into one numpy buffer: text and JSON bodies are scanned in place as binary ones are read.
    body = await read_array(request, limit)

    def run() -> bytes | memoryview:
        # Decoding, the query and encoding together in a worker thread: a million pairs must not stall the loop.
        pairs = decode_pairs(body, content_type)
        with state.core_gate:
            answers, stats = version.query_batch_with_stats(pairs)
        _count(state, stats)
        if out_type != "application/json":
            return encode_answers(answers, out_type)
        return json_answers(answers, stats.to_dict())

    try:
        content = await anyio.to_thread.run_sync(run)
    except UnknownNodeError as exc:
        # The graph exists (404 says it does not): the body names a node it does not have.
        return response_for(exc, status=422)
    return Response(content, media_type=out_type, headers={VERSION_HEADER: str(version.number)})
