"""Edge updates of a ready graph: journaled durably (a row of the metadata store), applied in order, exact for
every query after the answer (service.registry.GraphRegistry.update)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from ..bodies import read_bytes
from ..conventions import known_query
from ..deps import ServiceState, get_state
from ..errors import INVALID_PARAMETER, ServiceError
from ..models import EdgesIn, EdgesOut, ErrorOut, GraphRef
from .queries import versioned_json

__all__ = ["router"]

router = APIRouter(prefix="/graphs/{graph_id}", tags=["updates"], dependencies=[Depends(known_query)])


@router.post(
    "/edges",
    response_model=EdgesOut,
    responses={
        404: {
            "model": ErrorOut,
            "description": "unknown graph (or one deleted before the update was journaled), or an unknown node in "
            "remove",
        },
        409: {
            "model": ErrorOut,
            "description": "the graph is not ready yet, still loading after a start (GraphLoading, with "
            "Retry-After), another server's update came first (VersionConflict), or the update cannot apply to it "
            "(UpdateConflictError: a name its nodes cannot have, an edge both added and removed)",
        },
        422: {
            "model": ErrorOut,
            "description": "a body that is not {add, remove} of [source, target] names (a boolean or a float "
            "name, an unknown key, a name over --max-name-bytes)",
        },
        424: {"model": ErrorOut, "description": "the graph's build failed"},
        507: {"model": ErrorOut, "description": "the disk is full: the update was not made"},
    },
    summary="Add and remove edges (new nodes allowed in add); answered once journaled, with the new version",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": EdgesIn.model_json_schema()}}}
    },
)
async def update_edges(
    graph_id: GraphRef, request: Request, state: Annotated[ServiceState, Depends(get_state)]
) -> Response:
    registry = state.registry
    registry.ready_version(graph_id)  # 404 or 409 before the body is read
    # Read and checked here, not by FastAPI: a body that is not JSON is a 422 with the reason, like every body.
    raw = await read_bytes(request, state.settings.max_upload_bytes)
    try:
        body = EdgesIn.model_validate_json(raw, context={"max_name_bytes": state.settings.max_name_bytes})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise ServiceError(
            INVALID_PARAMETER, f"the body is not {{'add': [[u, v], ...], 'remove': [...]}}: {problems}"
        ) from None
    add = [list(edge) for edge in body.add]
    remove = [list(edge) for edge in body.remove]

    def run() -> dict[str, Any]:
        answer = registry.update(graph_id, add, remove)
        if registry.rebuild_if_pending(graph_id):
            state.runner.wake()
        return answer

    answer = await anyio.to_thread.run_sync(run)
    return versioned_json(answer, answer["version"])
