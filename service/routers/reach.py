"""Beyond yes or no on a ready graph: a witness path, and the nodes a node reaches or is reached from.

Listings stream page by page: the listing is counted first (read off the labels where they hold it, else one
search kept as a bit set, an eighth of a byte a node: ``Version.listing``, shared by the requests reading the
same one: service.listings), then its ids are found and named a slice at a time as the client reads, so a
listing of millions of nodes never holds its ids or its JSON text whole: between slices a stream keeps its
position alone, and a client that stops reading holds one slice waiting and what its connection keeps unsent
(``guards.WRITE_BUFFER_BYTES``) until the send timeout ends the connection, dropping both. Every route answers
from the version it takes when it starts, names and header included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterable, Callable, Iterable, Iterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from grail_core.version import Listing, Version

from ..conventions import known_query
from ..deps import ServiceState, get_state
from ..guards import ABORT_EXTENSION
from ..listings import SharedListings
from ..models import ErrorOut, GraphRef, ListingOut, PathOut
from .queries import VERSION_HEADER, as_uploaded, versioned_json

__all__ = ["router", "LISTING_SLICE", "TimedStream"]

log = logging.getLogger("grail.service.reach")

router = APIRouter(prefix="/graphs/{graph_id}", tags=["queries"], dependencies=[Depends(known_query)])

# Names converted and written per slice of a streamed listing: tens of KB of JSON for short names, what a client
# that stops reading holds in the server (one slice waiting to be sent, the next one made).
LISTING_SLICE = 4_096
# The listings being read now, by version and node.
SHARED_LISTINGS = SharedListings()

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown graph, or unknown node (named in the answer)"},
    409: {"model": ErrorOut, "description": "the graph is not ready yet (queued or building)"},
    422: {"model": ErrorOut, "description": "bad parameters"},
    424: {"model": ErrorOut, "description": "the graph's build failed"},
}


class TimedStream(StreamingResponse):
    """A streamed answer that gives up on a client that has not read for ``send_timeout`` seconds: the
    stream stops (its listing is freed) and the connection ends at once, what it held unsent dropped (a close
    would keep that until the client reads it)."""

    def __init__(self, content: Iterable[bytes] | AsyncIterable[bytes], send_timeout: float, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.send_timeout = send_timeout
        self._abort: Callable[[], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._abort = scope.get("extensions", {}).get(ABORT_EXTENSION, {}).get("abort")
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        async def timed(message: Message) -> None:
            with anyio.fail_after(self.send_timeout):
                await send(message)

        try:
            await super().stream_response(timed)
        except TimeoutError:
            log.warning(
                "a streamed answer stopped: the client read nothing for %g s (--send-timeout)", self.send_timeout
            )
            if self._abort is not None:
                self._abort()


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

    def run() -> Response:
        with state.core_gate:
            found = version.path(source, target)
        # The path's ends are the names as uploaded (the version read a decimal string as an integer name).
        if found is not None:
            ends = (found[0], found[-1])
        else:
            ends = (as_uploaded(version, source), as_uploaded(version, target))
        # Serialized here too: a path of millions of nodes is text the event loop should not wait for.
        return versioned_json({"source": ends[0], "target": ends[1], "path": found}, version.number)

    return await anyio.to_thread.run_sync(run)


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

        def make() -> Listing:
            with state.core_gate:
                return version.listing(node, forward)

        def found() -> Listing:
            return SHARED_LISTINGS.get(version, node, forward, make)

        listed = await anyio.to_thread.run_sync(found)
        head = {"node": as_uploaded(version, node), "count": listed.count, "offset": offset}
        chunks = _stream(version, listed, offset, limit, _dumps(head)[:-1] + ',"nodes":[')
        return TimedStream(
            chunks,
            state.settings.send_timeout,
            media_type="application/json",
            headers={VERSION_HEADER: str(version.number)},
        )

    listing.__name__ = kind
    listing.__doc__ = (
        f"The nodes {relation} (itself excepted), in upload order, with their total ``count``: streamed, a "
        f"page with ``offset``/``limit``; ``count=true`` answers the count alone."
    )
    return listing


async def _listing_head(
    graph_id: GraphRef,
    state: Annotated[ServiceState, Depends(get_state)],
    node: Annotated[str, Query(description="node name as uploaded")],
) -> Response:
    """HEAD of a listing: the graph and the node are checked (404), nothing is listed."""
    version = state.registry.ready_version(graph_id)
    version.node_id(node)
    return Response(media_type="application/json", headers={VERSION_HEADER: str(version.number)})


def _stream(version: Version, listed: Listing, offset: int, limit: int | None, head: str) -> Iterator[bytes]:
    """The listing's JSON: ``head``, the names of the ids from the ``offset``-th on (at most ``limit``) a slice
    at a time, then the closing brackets (a sync iterator: Starlette runs each step in a worker thread, so a
    slice is found and named as the client reads). Between slices it keeps the position in the listing and the
    slice it yielded, nothing else."""
    yield head.encode()
    left = listed.count - offset if limit is None else min(limit, listed.count - offset)
    position = listed.skip(offset) if left > 0 else 0
    first = True
    while left > 0:
        chunk, position, written = _named_slice(version, listed, position, min(LISTING_SLICE, left), first)
        if written == 0:
            break
        left -= written
        first = False
        yield chunk
    yield b"]}"


def _named_slice(version: Version, listed: Listing, position: int, wanted: int, first: bool) -> tuple[bytes, int, int]:
    """(the JSON of the names of up to ``wanted`` ids from id ``position`` on, the id to go on from, how many)."""
    ids, position = listed.read(position, wanted)
    text = _dumps(version.names_of_ids(ids).tolist())[1:-1]
    return (text if first else "," + text).encode(), position, int(ids.size)


for _kind in ("descendants", "ancestors"):
    # HEAD checks the graph and the node and lists nothing (left out of the schema: it has no body).
    router.add_api_route(f"/{_kind}", _listing_head, methods=["HEAD"], include_in_schema=False)
    router.add_api_route(
        f"/{_kind}",
        _listing(_kind),
        methods=["GET"],
        response_model=ListingOut,
        responses=_ERRORS,
        summary=f"The {_kind} of a node, streamed (?count=true: the count alone)",
    )
