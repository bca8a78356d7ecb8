"""Edge updates of a ready graph: journaled durably, applied in order, exact for every query after the answer."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from grail_core import UnknownNodeError

from ..bodies import read_bytes
from ..deps import ServiceState, get_state
from ..errors import INVALID_PARAMETER, STORAGE_ERROR, ServiceError, response_for, storage_error
from ..models import EdgesIn, EdgesOut, ErrorOut
from .queries import versioned_json

__all__ = ["router"]

router = APIRouter(prefix="/graphs/{graph_id}", tags=["updates"])


@router.post(
    "/edges",
    response_model=EdgesOut,
    responses={
        404: {"model": ErrorOut, "description": "unknown graph"},
        409: {"model": ErrorOut, "description": "the graph is not ready (queued, building or failed)"},
        422: {
            "model": ErrorOut,
            "description": "a malformed edge, a name the graph's nodes cannot have, an edge "
            "both added and removed, or an unknown node in remove",
        },
        507: {"model": ErrorOut, "description": "the disk is full: the update was not made"},
    },
    summary="Add and remove edges (new nodes allowed in add); answered once journaled, with the new version",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": EdgesIn.model_json_schema()}}}
    },
)
async def update_edges(graph_id: str, request: Request, state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    registry = state.registry
    journal = registry.journal(graph_id)
    # Read and checked here, not by FastAPI: a body that is not JSON is a 422 with the reason, like every body.
    raw = await read_bytes(request, state.settings.max_upload_bytes)
    try:
        body = EdgesIn.model_validate_json(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise ServiceError(
            INVALID_PARAMETER, f"the body is not {{'add': [[u, v], ...], 'remove': [...]}}: {problems}"
        ) from None
    add = [list(edge) for edge in body.add]
    remove = [list(edge) for edge in body.remove]

    def run() -> dict[str, Any]:
        # Plan (checks, nothing changes), journal, apply: one update at a time per graph, in order.
        with journal.lock:
            current = registry.ready_version(graph_id)  # after the lock: a rebuild may have swapped it meanwhile
            with state.core_gate:
                plan = current.plan_update(add, remove)
            try:
                journal.append(plan.version + 1, add, remove)
            except OSError as exc:
                raise storage_error(exc, "journaling the update") or ServiceError(
                    STORAGE_ERROR, f"the update could not be journaled: {exc}"
                ) from None
            with state.core_gate:
                updated = current.apply(plan)
            registry.advance(graph_id, updated)
            result = updated.last_update
            assert result is not None
            return {
                "version": result.version,
                "added": result.added,
                "removed": result.removed,
                "new_nodes": result.new_nodes,
                "pending_updates": updated.pending.updates,
            }

    try:
        answer = await anyio.to_thread.run_sync(run)
    except UnknownNodeError as exc:
        # The graph exists (404 says it does not): the body names a node it does not have.
        return response_for(exc, status=422)
    state.runner.rebuild_if_pending(graph_id)
    return versioned_json(answer, answer["version"])
