"""The hottest routes (single-pair GET, edge updates) answered by the innermost middleware, past the framework's
own layers: on a small request its exception middleware, exit stack, router and request wrapper each cost about
as much as one of the service's middlewares (issue #21: the server's CPU per edge update).

``PlainRoutes`` answers a request that one of its routes matches fully (path and method) as the router would:
``route``, ``endpoint`` and ``path_params`` in the scope, the endpoint's exception turned into an answer by the
app's exception handlers. Anything else (another route, a method the route does not serve: the router's 405)
goes on to the app, which keeps the same routes for that, for ``Allow`` and for the OpenAPI description.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["PlainRoutes"]

# An exception handler as FastAPI keeps them, by exception class or status; the service's are all async.
Handler = Callable[[Request, Any], Any]


class PlainRoutes:
    """Pure ASGI, innermost (see the module doc). ``handlers``: the app's exception handlers by exception class
    (``FastAPI.exception_handlers``; its handler of ``Exception``, if any, is left to the outer layers, as the
    framework does)."""

    def __init__(self, app: ASGIApp, routes: Sequence[Route], handlers: Mapping[Any, Handler]) -> None:
        self.app = app
        self.routes = tuple(routes)
        self.handlers = {key: handler for key, handler in handlers.items() if key is not Exception}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.routes:
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope["route"] = route
                    scope.update(child_scope)
                    await self._answer(route, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _answer(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise
            response = await handler(request, exc)
            exc.__traceback__ = None  # as the framework does: a reused exception would pile up tracebacks
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Handler | None:
        if isinstance(exc, HTTPException) and exc.status_code in self.handlers:
            return self.handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in self.handlers:
                return self.handlers[cls]
        return None
