"""HTTP conventions the routes share: HEAD wherever GET is served, OPTIONS and 405 answers with every method of
the path in ``Allow``, and content negotiation with q-values (``negotiate``, 406 when nothing offered is
acceptable)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, get_args, get_origin

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import BAD_PARAMETERS, NOT_ACCEPTABLE, PROBLEM_JSON, ServiceError, truncate
from .wire import media_type

__all__ = ["MethodsMiddleware", "negotiate", "accepts_json", "known_query", "check_query"]

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
    ``application/problem+json`` accepts JSON. 406 when every offered type has q=0 or none matches."""
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
        if media == PROBLEM_JSON:
            # A client that reads problem details reads JSON: asking for them is never a 406.
            media = "application/json"
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


def check_query(request: Request, allowed: frozenset[str], repeatable: frozenset[str] = frozenset()) -> None:
    """422 for a query parameter the route does not take (a misspelt ``unknwon=false`` would otherwise be
    ignored, and the default answer given), or one given twice that takes one value."""
    params = request.query_params
    for key in params:
        if key not in allowed:
            takes = ", ".join(sorted(allowed)) or "none"
            raise ServiceError(
                BAD_PARAMETERS, f"unknown query parameter {truncate(key, 40)!r}; this route takes {takes}"
            )
    if len(params) != len(params.multi_items()):
        for key in params:
            if key not in repeatable and len(params.getlist(key)) > 1:
                raise ServiceError(BAD_PARAMETERS, f"query parameter {key!r} is given more than once")


async def known_query(request: Request) -> None:
    """A dependency of every API route: its query string holds only the parameters the route declares
    (``check_query``). async: FastAPI would run a plain function in a worker thread."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    declared = _DECLARED.get(id(dependant))
    if declared is None:
        fields = list(_query_fields(dependant))
        allowed = frozenset(field.alias for field in fields)
        repeatable = frozenset(field.alias for field in fields if _is_list(field.field_info.annotation))
        declared = _DECLARED.setdefault(id(dependant), (allowed, repeatable))
    check_query(request, *declared)


# A route's declared query parameters and those that may repeat, by its dependant (routes live as long as the app).
_DECLARED: dict[int, tuple[frozenset[str], frozenset[str]]] = {}


def _query_fields(dependant: Any) -> Iterator[Any]:
    """The query parameters a route declares, its dependencies' included (a parameter object such as the
    uploads' is a dependency)."""
    yield from dependant.query_params
    for sub in dependant.dependencies:
        yield from _query_fields(sub)


def _is_list(annotation: Any) -> bool:
    """Whether a parameter's type is a list (``list[str] | None`` too): it may be repeated."""
    if get_origin(annotation) is list:
        return True
    return any(_is_list(arg) for arg in get_args(annotation))
