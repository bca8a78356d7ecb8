"""HTTP conventions the routes share: HEAD wherever GET is served, OPTIONS and 405 answers with every method of
the path in ``Allow``, and content negotiation with q-values (``negotiate``, 406 when nothing offered is
acceptable)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from starlette.responses import Response
from starlette.routing import Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import NOT_ACCEPTABLE, ServiceError
from .wire import media_type

__all__ = ["MethodsMiddleware", "negotiate", "accepts_json"]

_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class MethodsMiddleware:
    """Pure ASGI. HEAD runs the GET route (uvicorn sends the headers without the body); OPTIONS answers 204
    with ``Allow``; a 405 gets the full ``Allow`` of its path (Starlette names only the first route's)."""

    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router
        self._table: list[tuple[re.Pattern[str], frozenset[str]]] | None = None  # made at the first use

    def allowed(self, scope: Scope) -> list[str]:
        """Every method some route serves at this path (GET routes serve HEAD too), and OPTIONS."""
        if self._table is None:
            self._table = list(_route_table(self.router.routes))
        path = scope["path"]
        methods: set[str] = set()
        for pattern, route_methods in self._table:
            if pattern.match(path):
                methods |= route_methods
        if "GET" in methods:
            methods.add("HEAD")
        if methods:
            methods.add("OPTIONS")
        return sorted(methods, key=lambda m: _ORDER.index(m) if m in _ORDER else len(_ORDER))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if method == "OPTIONS":
            allowed = self.allowed(scope)
            if allowed:
                await Response(status_code=204, headers={"Allow": ", ".join(allowed)})(scope, receive, send)
                return
        inner = {**scope, "method": "GET"} if method == "HEAD" else scope

        async def send_with_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"allow"]
                message["headers"] = [*headers, (b"allow", ", ".join(self.allowed(scope)).encode())]
            await send(message)

        await self.app(inner, receive, send_with_allow)
        if inner is not scope:  # the route found for HEAD, for the metrics' route label
            scope.update({key: inner[key] for key in ("route", "endpoint") if key in inner})


def _route_table(routes: Sequence[Any]) -> Iterator[tuple[re.Pattern[str], frozenset[str]]]:
    """(path pattern, methods) of every route, with FastAPI's included routers opened up; mounts (the docs'
    static files) serve GET."""
    for route in routes:
        if hasattr(route, "effective_candidates"):
            for candidate in route.effective_candidates():
                yield candidate.path_regex, frozenset(candidate.methods or ())
        elif hasattr(route, "path_regex"):
            yield route.path_regex, frozenset(getattr(route, "methods", None) or {"GET"})


def negotiate(accept: str | None, offered: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The offered media type the client prefers (highest q; among equal q the one it names first, then the
    order of ``offered``), with the Accept item's parameters; no Accept header means the first offered.
    406 when every offered type has q=0 or none matches."""
    if accept is None or not accept.strip():
        return offered[0], {}
    excluded = _excluded(accept)
    best: tuple[float, int, int] | None = None
    chosen: tuple[str, dict[str, str]] | None = None
    for position, item in enumerate(accept.split(",")):
        media, params = media_type(item)
        q = _quality(params.pop("q", "1"))
        if q <= 0 or not media:
            continue
        for rank, candidate in enumerate(offered):
            if candidate in excluded or not _matches(media, candidate):
                continue
            key = (-q, position, rank)
            if best is None or key < best:
                best, chosen = key, (candidate, params if media == candidate else {})
    if chosen is None:
        raise ServiceError(
            NOT_ACCEPTABLE, f"cannot answer in any type Accept allows; this route answers {', '.join(offered)}"
        )
    return chosen


def _quality(text: str) -> float:
    try:
        q = float(text)
    except ValueError:
        return 1.0
    return q if 0 <= q <= 1 else 1.0


def _matches(pattern: str, media: str) -> bool:
    kind, _, subtype = pattern.partition("/")
    offered_kind, _, offered_subtype = media.partition("/")
    return kind in ("*", offered_kind) and subtype in ("*", offered_subtype)


def _excluded(accept: str) -> set[str]:
    """Types named exactly with q=0: excluded even where a wildcard would take them."""
    out = set()
    for item in accept.split(","):
        media, params = media_type(item)
        if "q" in params and _quality(params["q"]) == 0:
            out.add(media)
    return out


def accepts_json(accept: str | None) -> None:
    """406 unless the client accepts JSON, the only type of the API's answers but the batches'."""
    negotiate(accept, ("application/json",))
