"""Beyond yes or no on a ready graph: a witness path, and the nodes a node reaches or is reached from.

Listings stream: the ids are found first (8 bytes a node), then their names are written a slice at a time,
so a listing of millions of nodes never holds its whole JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import numpy as np
from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import StreamingResponse

from ..deps import ServiceState, get_state
from ..models import ErrorOut, ListingOut, PathOut
from .queries import VERSION_HEADER

__all__ = ["router", "LISTING_SLICE"]

router = APIRouter(prefix="/graphs/{graph_id}", tags=["queries"])

# Names converted and written per slice of a streamed listing: about 1 MB of JSON for short names.
LISTING_SLICE = 65_536

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown graph, or unknown node (named in the answer)"},
    409: {"model": ErrorOut, "description": "the graph is not ready (queued, building or failed)"},
    422: {"model": ErrorOut, "description": "bad parameters"},
}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@router.get(
    "/path",
    response_model=PathOut,
    responses=_ERRORS,
    summary="A path from source to target through the graph (null when target is unreachable)",
)
async def path(
    graph_id: str,
    state: Annotated[ServiceState, Depends(get_state)],
    source: Annotated[str, Query(description="node name as uploaded")],
    target: Annotated[str, Query(description="node name as uploaded")],
) -> Response:
    index = state.registry.ready_index(graph_id)

    def run() -> tuple[list[Any] | None, int]:
        with state.core_gate:
            version = index.version
            return index.path(source, target), version

    found, version = await anyio.to_thread.run_sync(run)
    # The path's ends are the names as uploaded (the index read a decimal string as an integer name).
    ends = (found[0], found[-1]) if found is not None else (_name(index, source), _name(index, target))
    body = {"source": ends[0], "target": ends[1], "path": found}
    return Response(_dumps(body), media_type="application/json", headers={VERSION_HEADER: str(version)})


def _name(index: Any, name: str) -> int | str:
    return int(name) if index.names_are_integers else name


def _listing(kind: str) -> Any:
    forward = kind == "descendants"
    relation = "that the node reaches" if forward else "that reach the node"

    async def listing(
        graph_id: str,
        state: Annotated[ServiceState, Depends(get_state)],
        node: Annotated[str, Query(description="node name as uploaded")],
        offset: Annotated[int, Query(ge=0, description="skip this many nodes of the listing")] = 0,
        limit: Annotated[int | None, Query(ge=0, description="at most this many nodes (default: all)")] = None,
        count: Annotated[bool, Query(description="only the count, no listing")] = False,
    ) -> Response:
        index = state.registry.ready_index(graph_id)
        name = node
        if count:

            def counted() -> tuple[Any, int]:
                with state.core_gate:
                    version = index.version
                    return (index.count_descendants if forward else index.count_ancestors)(name), version

            (total, method), version = await anyio.to_thread.run_sync(counted)
            body = {"node": _name(index, name), "count": total, "method": method}
            return Response(_dumps(body), media_type="application/json", headers={VERSION_HEADER: str(version)})

        def found() -> tuple[np.ndarray, int]:
            with state.core_gate:
                version = index.version
                return (index.descendant_ids if forward else index.ancestor_ids)(name), version

        ids, version = await anyio.to_thread.run_sync(found)
        end = ids.size if limit is None else min(ids.size, offset + limit)
        head = {"node": _name(index, name), "count": int(ids.size), "offset": offset}
        chunks = _stream(index, ids[min(offset, ids.size) : end], _dumps(head)[:-1] + ',"nodes":[')
        return StreamingResponse(chunks, media_type="application/json", headers={VERSION_HEADER: str(version)})

    listing.__name__ = kind
    listing.__doc__ = (
        f"The nodes {relation} (itself excepted), in upload order, with their total ``count``: streamed, a "
        f"page with ``offset``/``limit``; ``count=true`` answers the count alone."
    )
    return listing


def _stream(index: Any, ids: np.ndarray, head: str) -> Iterator[bytes]:
    """The listing's JSON: ``head``, the names of ``ids`` a slice at a time, then the closing brackets (a sync
    iterator: Starlette runs each step in a worker thread)."""
    yield head.encode()
    for start in range(0, ids.size, LISTING_SLICE):
        names = index.names_of_ids(ids[start : start + LISTING_SLICE]).tolist()
        text = _dumps(names)[1:-1]
        yield (text if start == 0 else "," + text).encode()
    yield b"]}"


for _kind in ("descendants", "ancestors"):
    router.add_api_route(
        f"/{_kind}",
        _listing(_kind),
        methods=["GET"],
        response_model=ListingOut,
        responses=_ERRORS,
        summary=f"The {_kind} of a node, streamed (?count=true: the count alone)",
    )
