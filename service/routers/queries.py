"""Reachability questions on a ready graph: single pairs and small batches over GET, large batches over POST.

Every route takes the graph's current version once, when it starts, and answers from it, header included.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import numpy as np
from fastapi import APIRouter, Depends, Query, Request, Response

from grail_core import UnknownNodeError
from grail_core.version import StopCondition, Version

from ..bodies import declared_length, read_array
from ..codecs import BINARY, answer_type, batch_memory, decode_pairs, encode_answers, pair_format, parse_get_pairs
from ..conventions import accepts_json, check_query, known_query
from ..deps import ServiceState, get_state
from ..errors import BAD_PARAMETERS, NOT_ACCEPTABLE, PROBLEM_JSON, ServiceError, truncate
from ..models import (
    GRAPH_REF_DESCRIPTION,
    UNKNOWN_POLICIES,
    BatchOut,
    ErrorOut,
    GraphRef,
    PairOut,
    PairsIn,
    PairsOut,
    UnknownPolicy,
)
from ..wire import compact_json, json_answers, media_type

__all__ = [
    "router",
    "reachable",
    "as_uploaded",
    "versioned_json",
    "REACHABLE_PATH",
    "REACHABLE_OPENAPI",
    "VERSION_HEADER",
    "UNKNOWN_PARAMETER",
    "unknown_policy",
]

# Every query's answer says which version of the graph it holds for (edge updates make new versions).
VERSION_HEADER = "Grail-Graph-Version"

router = APIRouter(prefix="/graphs/{graph_id}", tags=["queries"], dependencies=[Depends(known_query)])


def versioned_json(body: Any, version: int) -> Response:
    # Hand-serialised: a pydantic round trip would cost more than the query on this hot path.
    headers = {VERSION_HEADER: str(version)}
    return Response(compact_json(body), media_type="application/json", headers=headers)


def _error_ref(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
    }


_UNKNOWN_DESCRIPTION = (
    "a pair that names a node the graph does not have: error (404 listing where, the default), false (its "
    "answer is false), or null (its answer is null; JSON and text answers only)"
)
UNKNOWN_PARAMETER: dict[str, Any] = {
    "name": "unknown",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": list(UNKNOWN_POLICIES), "default": "error"},
    "description": _UNKNOWN_DESCRIPTION,
}
# One pair or a few: "source and target, or else pairs" as one object exploded into the query string (each
# property its own parameter), the only way OpenAPI says that two parameters go together and exclude a third.
_NAME = {"type": "string", "description": "node name as uploaded (an integer name as its decimal string)"}
_ONE_PAIR = {
    "type": "object",
    "title": "one pair",
    "properties": {"source": _NAME, "target": _NAME},
    "required": ["source", "target"],
    "additionalProperties": False,
}
_FEW_PAIRS = {
    "type": "object",
    "title": "a few pairs",
    "properties": {
        "pairs": {
            "type": "string",
            # What parse_get_pairs reads: 'U,V' items separated by ';' (empty items skipped), at least one.
            "pattern": r"^;*[^,;]+,[^,;]+(;+[^,;]+,[^,;]+)*;*$",
            "description": "U1,V1;U2,V2;... (names without ',' or ';'; up to --max-get-pairs pairs): answered in "
            'order as {"reachable": [...]}',
            "example": "0,3;2,1",
        }
    },
    "required": ["pairs"],
    "additionalProperties": False,
}

_REACHABLE_PARAMETERS = frozenset({"source", "target", "pairs", "unknown"})

# The OpenAPI description of the route below, which FastAPI cannot derive since it is a plain Starlette route.
REACHABLE_PATH = "/graphs/{graph_id}/reachable"
REACHABLE_OPENAPI: dict[str, Any] = {
    "get": {
        "tags": ["queries"],
        "summary": "Does source reach target? (or, with pairs=, each of a few pairs)",
        "description": "?source=U&target=V answers one pair; ?pairs=U1,V1;U2,V2;... answers a few (up to "
        "--max-get-pairs; POST /graphs/{graph_id}/queries takes any number). Not both.",
        "operationId": "reachable",
        "parameters": [
            {
                "name": "graph_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string"},
                "description": GRAPH_REF_DESCRIPTION,
            },
            {
                "name": "pair",
                "in": "query",
                "required": True,
                "style": "form",
                "explode": True,
                "schema": {"oneOf": [_ONE_PAIR, _FEW_PAIRS]},
            },
            UNKNOWN_PARAMETER,
        ],
        "responses": {
            "200": {
                "description": "the answer (null where unknown=null and the pair names an unknown node)",
                "content": {
                    "application/json": {
                        "schema": {"anyOf": [PairOut.model_json_schema(), PairsOut.model_json_schema()]}
                    }
                },
            },
            "404": _error_ref("unknown graph, or unknown nodes (listed in the answer with their pairs)"),
            "409": _error_ref("the graph is not ready yet (queued or building)"),
            "422": _error_ref("bad parameters"),
            "424": _error_ref("the graph's build failed"),
        },
    }
}


async def reachable(request: Request) -> Response:
    """GET REACHABLE_PATH, the hottest route, registered by create_app as a plain Starlette route: FastAPI's
    parameter validation and dependency solving cost more than the query itself."""
    state: ServiceState = request.app.state.grail
    accepts_json(request.headers.get("accept"))
    check_query(request, _REACHABLE_PARAMETERS)
    params = request.query_params
    source, target, pairs = params.get("source"), params.get("target"), params.get("pairs")
    unknown = unknown_policy(params.get("unknown"))
    version = state.registry.ready_version(request.path_params["graph_id"])
    # Small work: answered right on the event loop, a thread hop would cost more than the query.
    if pairs is not None:
        if source is not None or target is not None:
            raise ServiceError(BAD_PARAMETERS, "give either ?pairs= or ?source=&target=, not both")
        batch = parse_get_pairs(pairs, state.settings.max_get_pairs)
        with state.core_gate:
            answers, missing, stats = _answer(version, batch, unknown)
        _count(state, stats)
        return versioned_json({"reachable": _with_nulls(answers, missing)}, version.number)
    if source is None or target is None:
        raise ServiceError(BAD_PARAMETERS, "give ?source=U&target=V (or ?pairs=U1,V1;U2,V2)")
    # query_pair rather than a batch of one: half the cost, and it still says what decided the pair.
    answer: bool | None
    try:
        with state.core_gate:
            answer, searched, _ = version.query_pair(source, target)
    except UnknownNodeError:
        if unknown == "error":
            with state.core_gate:  # as a batch of one, whose error lists both ends where both are unknown
                version.query_batch_with_stats([(source, target)])
            raise
        answer, searched = (False if unknown == "false" else None), False
    state.metrics.queries(int(not searched), int(searched))
    reached = None if answer is None else bool(answer)
    body = {"source": as_uploaded(version, source), "target": as_uploaded(version, target), "reachable": reached}
    return versioned_json(body, version.number)


def unknown_policy(value: str | None) -> str:
    """The ``unknown`` parameter: what answers a pair that names a node the graph lacks."""
    if value is None:
        return "error"
    if value not in UNKNOWN_POLICIES:
        raise ServiceError(
            BAD_PARAMETERS, f"unknown is one of {', '.join(UNKNOWN_POLICIES)}, not {truncate(value, 40)!r}"
        )
    return value


def _answer(
    version: Version, pairs: Any, unknown: str, stop: StopCondition | None = None
) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """(answers, the pairs naming unknown nodes or None, stats) under the ``unknown`` policy."""
    if unknown == "error":
        answers, stats = version.query_batch_with_stats(pairs, stop)
        return answers, None, stats
    answers, missing, stats = version.query_batch_known(pairs, stop)
    return answers, (missing if unknown == "null" and missing.any() else None), stats


def _with_nulls(answers: np.ndarray, missing: np.ndarray | None) -> list[bool | None]:
    listed: list[bool | None] = answers.tolist()
    if missing is not None:
        for i in np.flatnonzero(missing).tolist():
            listed[i] = None
    return listed


def as_uploaded(version: Version, name: str) -> int | str:
    """A name of the query string as uploaded: integer graphs answer with numbers; a name such a graph does not
    have (answered with unknown=false or null) as it was given."""
    if version.names_are_integers:
        try:
            return int(name)
        except ValueError:
            pass
    return name


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


_WS = r"[ \t\n\r\x0b\x0c]"
_NAME_TEXT = r"[^ \t\n\r\x0b\x0c]+"
# What decode_pairs reads as text: names separated by ASCII whitespace, an even number of them.
_TEXT_PAIRS = rf"^{_WS}*({_NAME_TEXT}{_WS}+{_NAME_TEXT}({_WS}+{_NAME_TEXT}{_WS}+{_NAME_TEXT})*)?{_WS}*$"


@router.post(
    "/queries",
    response_model=BatchOut,
    responses={
        200: {"content": {"text/plain": {}, BINARY: {}}, "description": _ANSWERS_DESCRIPTION},
        404: {"model": ErrorOut, "description": "unknown graph, or (unknown=error) unknown nodes, listed"},
        406: {
            "model": ErrorOut,
            "description": "no answer type Accept allows, binary answers of a width not 8 or 1, or binary answers "
            "with unknown=null",
        },
        409: {"model": ErrorOut, "description": "the graph is not ready yet (queued or building)"},
        413: {"model": ErrorOut, "description": "body over --max-upload-mb, or a batch over --max-batch-memory-mb"},
        415: {"model": ErrorOut, "description": "unknown Content-Type, or binary pairs of a width not 64, 32 or 16"},
        422: {"model": ErrorOut, "description": "malformed pairs"},
        424: {"model": ErrorOut, "description": "the graph's build failed"},
        503: {"model": ErrorOut, "description": "the batches being answered hold their memory (Retry-After)"},
    },
    summary="Large batches: JSON pairs, 'u v' text lines, or binary integer pairs",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": PairsIn.model_json_schema()},
                "text/plain": {
                    "schema": {
                        "type": "string",
                        "pattern": _TEXT_PAIRS,
                        "description": "'u v' lines: names separated by ASCII whitespace, an even number of them",
                        "example": "0 5\n3 1\n",
                    }
                },
                BINARY: {
                    "schema": {
                        "type": "string",
                        "format": "binary",
                        "description": _PAIRS_DESCRIPTION,
                        # JSON Schema cannot say "a multiple of": the pair's size in bytes, for tools.
                        "x-multiple-of-bytes": 16,
                    }
                },
            },
        }
    },
)
async def query_batch(
    graph_id: GraphRef,
    request: Request,
    state: Annotated[ServiceState, Depends(get_state)],
    unknown: Annotated[UnknownPolicy, Query(description=_UNKNOWN_DESCRIPTION)] = "error",
) -> Response:
    version = state.registry.ready_version(graph_id)
    content_type = request.headers.get("content-type") or "application/json"
    # Both formats are checked before the body is read: a refused request costs no transfer.
    media, width = pair_format(content_type)
    out_type = answer_type(request.headers.get("accept"))
    if unknown == "null" and media_type(out_type)[0] == BINARY:
        raise ServiceError(
            NOT_ACCEPTABLE, "binary answers hold no null: ask for JSON or text answers, or use unknown=false"
        )
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
        return await _answer_batch(request, state, graph_id, version, content_type, out_type, limit, unknown)


async def _answer_batch(
    request: Request,
    state: ServiceState,
    graph_id: str,
    version: Version,
    content_type: str,
    out_type: str,
    limit: int,
    unknown: str,
) -> Response:
    # Every format into one numpy buffer: text and JSON bodies are scanned in place as binary ones are read.
    body = await read_array(request, limit)

    def run() -> tuple[bytes | memoryview, Version]:
        # Decoding, the query and encoding together in a worker thread: a million pairs must not stall the loop.
        pairs = decode_pairs(body, content_type)
        with state.core_gate:
            (answers, missing, stats), answering = state.registry.answered(
                graph_id, version, lambda on, stop: _answer(on, pairs, unknown, stop)
            )
        _count(state, stats)
        if out_type != "application/json":
            return encode_answers(answers, out_type, missing), answering
        return json_answers(answers, stats.to_dict(), missing), answering

    content, answering = await anyio.to_thread.run_sync(run)
    return Response(content, media_type=out_type, headers={VERSION_HEADER: str(answering.number)})
