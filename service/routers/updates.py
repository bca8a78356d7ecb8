"""Edge updates of a ready graph: journaled durably (a row of the metadata store), applied in order, exact for
every query after the answer (service.registry.GraphRegistry.update).

``update_edges`` is served as a plain Starlette route (create_app puts it first): FastAPI's routing and
dependency solving would cost more than the update's own work. ``router`` holds the same function as a FastAPI
route that is never mounted, for the OpenAPI description alone (create_app's ``openapi`` reads it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from ..bodies import read_bytes
from ..conventions import check_query
from ..deps import ServiceState
from ..errors import INVALID_PARAMETER, ServiceError
from ..models import GRAPH_REF_DESCRIPTION, EdgesIn, EdgesOut, ErrorOut
from .queries import versioned_json

__all__ = ["router", "update_edges", "EDGES_PATH"]

EDGES_PATH = "/graphs/{graph_id}/edges"
# The route takes no query parameter (min_version is taken out before it, by service.freshness).
_NO_PARAMETERS: frozenset[str] = frozenset()


# POST EDGES_PATH: the answer once the update's journal row has committed, with the version it made. (No
# docstring: FastAPI would show it as the operation's description.)
async def update_edges(request: Request) -> Response:
    state: ServiceState = request.app.state.grail
    check_query(request, _NO_PARAMETERS)
    graph_id: str = request.path_params["graph_id"]
    registry = state.registry
    registry.ready_version(graph_id)  # 404 or 409 before the body is read
    # Read and checked here: a body that is not JSON is a 422 with the reason, like every body.
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
    # In a batch of the update queue's thread (service.update_queue): one commit and one wake-up for many.
    answer = await state.updates.submit(graph_id, add, remove)
    if answer is None:  # left to a worker thread, which waits for the graph's lock, a load or a catch-up

        def run() -> dict[str, Any]:
            answer = registry.update(graph_id, add, remove)
            if registry.rebuild_if_pending(graph_id):
                state.runner.wake()
            return answer

        answer = await asyncio.to_thread(run)
    return versioned_json(answer, answer["version"])


router = APIRouter()
router.add_api_route(
    EDGES_PATH,
    update_edges,
    methods=["POST"],
    tags=["updates"],
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
        # The path parameter as FastAPI writes a declared one (service.models.GraphRef): this endpoint reads it
        # from the request itself.
        "parameters": [
            {
                "name": "graph_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "title": "Graph Id", "description": GRAPH_REF_DESCRIPTION},
                "description": GRAPH_REF_DESCRIPTION,
            }
        ],
        "requestBody": {"required": True, "content": {"application/json": {"schema": EdgesIn.model_json_schema()}}},
    },
)
