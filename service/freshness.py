"""Read-your-writes across replicas: a request on a graph that names the version it needs (``min_version=N`` in
the query string, or a ``Grail-Min-Version: N`` header) is answered once this server holds version N or a newer
one, waiting up to ``--min-version-timeout-s`` for the journal row or the published version to arrive through
the change feed, and otherwise answered 503 ``VersionNotHere`` with ``Retry-After`` (another replica, or this one
a moment later, may hold it). Every answer says the version it read (``Grail-Graph-Version``), which is what a
client passes on.

A pure ASGI middleware in front of the routes of one graph (``/graphs/{id-or-name}`` and below): the routes
themselves are untouched and take the graph's current version as always, which is then N or newer (versions of a
graph only grow). ``min_version`` is taken out of the query string here, so that the routes, which refuse
parameters they do not declare, never see it.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any
from urllib.parse import unquote_plus

from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import BAD_PARAMETERS, VERSION_NOT_HERE, ServiceError, response_for, truncate
from .wire import MIN_VERSION_HEADER, MIN_VERSION_PARAMETER

__all__ = ["MinVersionMiddleware", "MIN_VERSION_PARAMETER", "MIN_VERSION_HEADER", "document_min_version"]

_HEADER_KEY = MIN_VERSION_HEADER.lower().encode()
# /graphs/{ref} and anything below it; not /graphs itself (listings and uploads name no graph).
_GRAPH_PATH = re.compile(r"^/graphs/([^/]+)(?:/|$)")
_DIGITS = re.compile(r"[0-9]{1,18}")
# The first checks come soon after the request (a journal row arrives in milliseconds), then less often.
_FIRST_DELAY_S = 0.002
_LONGEST_DELAY_S = 0.05
# The OpenAPI path templates of the reads that take min_version: GET below /graphs/{...}, and the query batches.
_READ_PATH = re.compile(r"^/graphs/\{[^/]+\}(?:/.*)?$")
_VERSION_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 10**18 - 1}
_DESCRIPTION = (
    "answer from this version of the graph or a newer one (read-your-writes through any replica: the version an "
    "update answered); a server that does not hold it waits for it, then answers 503 VersionNotHere"
)


class MinVersionMiddleware:
    """See the module doc. ``timeout_s``: how long a request waits for its version."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        match = _GRAPH_PATH.match(scope["path"])
        if match is None:
            await self.app(scope, receive, send)
            return
        try:
            wanted, scope = _wanted(scope)
        except ServiceError as exc:
            await response_for(exc)(scope, receive, send)
            return
        if wanted is not None and _served(scope) and not await self._wait(scope, match.group(1), wanted):
            refusal = ServiceError(
                VERSION_NOT_HERE,
                f"this server does not hold version {wanted} of graph {truncate(match.group(1), 80)!r} after "
                f"{self.timeout_s:g} s; try again after Retry-After (another replica may hold it)",
                {"Retry-After": str(VERSION_NOT_HERE.retry_after)},
            )
            await response_for(refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _wait(self, scope: Scope, ref: str, wanted: int) -> bool:
        """Whether this server holds version ``wanted`` of the graph, or a newer one, within the timeout."""
        registry = scope["app"].state.grail.registry
        deadline = time.monotonic() + self.timeout_s
        delay = _FIRST_DELAY_S
        while True:
            held = registry.held_number(ref)
            if held is not None and held >= wanted:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, _LONGEST_DELAY_S)


def document_min_version(schema: dict[str, Any]) -> None:
    """The OpenAPI schema's reads of a graph take ``min_version`` (query) and ``Grail-Min-Version`` (header), and
    may answer 503 with Retry-After when the version asked for is not here."""
    for path, operations in schema["paths"].items():
        if not _READ_PATH.match(path):
            continue
        for method, operation in operations.items():
            if not (method == "get" or (method == "post" and path.endswith("/queries"))):
                continue
            parameters = operation.setdefault("parameters", [])
            if any(parameter["name"] == MIN_VERSION_PARAMETER for parameter in parameters):
                continue  # a schema shared by several apps (one process's tests), documented already
            parameters.extend(
                {"name": name, "in": where, "required": False, "description": _DESCRIPTION, "schema": _VERSION_SCHEMA}
                for name, where in ((MIN_VERSION_PARAMETER, "query"), (MIN_VERSION_HEADER, "header"))
            )
            busy = operation["responses"].setdefault("503", {"description": ""})
            busy["description"] = "; ".join(
                filter(None, (busy["description"], f"VersionNotHere: {VERSION_NOT_HERE.title} (Retry-After)"))
            )
            busy.setdefault("headers", {})["Retry-After"] = {
                "description": "seconds to wait before trying again",
                "schema": {"type": "integer"},
            }


def _served(scope: Scope) -> bool:
    """Whether a route serves the request's method at its path: a method that none does is answered 405 at once,
    whatever version it names."""
    return any(route.matches(scope)[0] is Match.FULL for route in scope["app"].router.routes)


def _wanted(scope: Scope) -> tuple[int | None, Scope]:
    """The version the request asks for (the larger of the parameter and the header, when both are given), and
    the scope without the parameter; 422 for a value that is not a positive integer."""
    raw = scope.get("query_string", b"")
    values: list[str] = []
    kept = raw
    if MIN_VERSION_PARAMETER.encode() in raw or b"%" in raw:  # the key may be percent-encoded
        items = raw.split(b"&")
        rest = []
        for item in items:
            key, _, value = item.partition(b"=")
            if unquote_plus(key.decode("latin-1")) == MIN_VERSION_PARAMETER:
                values.append(unquote_plus(value.decode("latin-1")))
            else:
                rest.append(item)
        kept = b"&".join(rest)
    for key, value in scope.get("headers", ()):
        if key == _HEADER_KEY:
            values.append(value.decode("latin-1"))
    if not values:
        return None, scope
    wanted = max(_version(value) for value in values)
    return wanted, ({**scope, "query_string": kept} if kept is not raw else scope)


def _version(text: str) -> int:
    text = text.strip()
    if not _DIGITS.fullmatch(text) or int(text) == 0:
        raise ServiceError(
            BAD_PARAMETERS,
            f"{MIN_VERSION_PARAMETER} (or the {MIN_VERSION_HEADER} header) is a version number, a positive "
            f"integer; got {truncate(text, 40)!r}",
        )
    return int(text)
