"""Beyond yes or no on a ready graph: a witness path, and the nodes a node reaches or is reached from.

Listings stream: the ids are found first (8 bytes a node), then their names are written a slice at a time,
so a listing of millions of nodes never holds its whole JSON text. Every route answers from the version it
takes when it starts, names and header included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import numpy as np
from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import StreamingResponse

from grail_core.version import Version

from ..conventions import known_query
from ..deps import ServiceState, get_state
from ..models import ErrorOut, GraphRef, ListingOut, PathOut
from .queries import VERSION_HEADER, as_uploaded, versioned_json

__all__ = ["router", "LISTING_SLICE"]

router = APIRouter(prefix="/graphs/{graph_id}", tags=["queries"], dependencies=[Depends(known_query)])

# Names converted and written per slice of a streamed listing: about 1 MB of JSON for short names.
LISTING_SLICE = 65_536

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown graph, or unknown node (named in the answer)"},
    409: {"model": ErrorOut, "description": "the graph is not ready yet (queued or building)"},
    422: {"model": ErrorOut, "description": "bad parameters"},
    424: {"model": ErrorOut, "description": "the graph's build failed"},
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
    graph_id: GraphRef,
    state: Annotated[ServiceState, Depends(get_state)],
    source: Annotated[str, Query(description="node name as uploaded")],
    target: Annotated[str, Query(description="node name as uploaded")],
) -> Response:
    version = state.registry.ready_version(graph_id)

    def run() -> list[Any] | None:
        with state.core_gate:
            return version.path(source, target)

    found = await anyio.to_thread.run_sync(run)
    # The path's ends are the names as uploaded (the version read a decimal string as an integer name).
    ends = (found[0], found[-1]) if found is not None else (as_uploaded(version, source), as_uploaded(version, target))
    return versioned_json({"source": ends[0], "target": ends[1], "path": found}, version.number)


def _listing(kind: str) -> Any:
    forward = kind == "descendants"
    relation = "that the node reaches" if forward else "that reach the node"

    async def listing(
        graph_id: GraphRef,
        state: Annotated[ServiceState, Depends(get_state)],
        node: Annotated[str, Query(description="node name as uploaded")],
        offset: Annotated[int, Query(ge=0, description="skip this many nodes of the listing")] = 0,
        limit: Annotated[int | None, Query(ge=0, description="at most this many nodes (default: all)")] = None,
        count: Annotated[bool, Query(description="only the count, no listing")] = False,
    ) -> Response:
        version = state.registry.ready_version(graph_id)
        if count:

            def counted() -> Any:
                with state.core_gate:
                    return (version.count_descendants if forward else version.count_ancestors)(node)

            total, method = await anyio.to_thread.run_sync(counted)
            return versioned_json(
                {"node": as_uploaded(version, node), "count": total, "method": method}, version.number
            )

        def found() -> np.ndarray:
            with state.core_gate:
                return (version.descendant_ids if forward else version.ancestor_ids)(node)

        ids = await anyio.to_thread.run_sync(found)
        end = ids.size if limit is None else min(ids.size, offset + limit)
        head = {"node": as_uploaded(version, node), "count": int(ids.size), "offset": offset}
        chunks = _stream(version, ids[min(offset, ids.size) : end], _dumps(head)[:-1] + ',"nodes":[')
        return StreamingResponse(chunks, media_type="application/json", headers={VERSION_HEADER: str(version.number)})

    listing.__name__ = kind
    listing.__doc__ = (
        f"The nodes {relation} (itself excepted), in upload order, with their total ``count``: streamed, a "
        f"page with ``offset``/``limit``; ``count=true`` answers the count alone."
    )
    return listing


def _stream(version: Version, ids: np.ndarray, head: str) -> Iterator[bytes]:
    """The listing's JSON: ``head``, the names of ``ids`` a slice at a time, then the closing brackets (a sync
    iterator: Starlette runs each step in a worker thread)."""
    yield head.encode()
    for start in range(0, ids.size, LISTING_SLICE):
        names = version.names_of_ids(ids[start : start + LISTING_SLICE]).tolist()
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
