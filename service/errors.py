"""grail_core and registry exceptions -> HTTP answers. The core knows nothing of HTTP; this is the one mapping."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from grail_core import (
    BackendUnavailableError,
    GraphFormatError,
    IndexFileError,
    InputTooLargeError,
    InvalidParameterError,
    UnknownNodeError,
)

from .registry import GraphNotFound, GraphNotReady

__all__ = ["ServiceError", "install_error_handlers", "error_response", "status_for", "status_for_kind"]

log = logging.getLogger("grail.service")


class ServiceError(Exception):
    """A request the service itself refuses (body too large, unknown media type, malformed pairs ...)."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail


def error_response(status: int, kind: str, detail: str, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"detail": _utf8_safe(detail), "error": kind}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=status)


# grail_core's errors that are the client's fault, and their status; anything unlisted is ours (500).
_CORE_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (GraphFormatError, 422),
    (InputTooLargeError, 413),
    (UnknownNodeError, 404),
    (InvalidParameterError, 422),
    (BackendUnavailableError, 422),
)


def status_for_kind(kind: str) -> int:
    """The status of a failed build recorded by its exception's class name (answers to ``wait=true``)."""
    return next((status for cls, status in _CORE_STATUS if cls.__name__ == kind), 500)


def status_for(exc: BaseException) -> int:
    """The HTTP status of an exception a build or a query raised."""
    for cls, status in _CORE_STATUS:
        if isinstance(exc, cls):
            return status
    if isinstance(exc, GraphNotFound):
        return 404
    if isinstance(exc, GraphNotReady):
        return 409
    if isinstance(exc, ServiceError):
        return exc.status
    return 500


def response_for(exc: BaseException) -> JSONResponse:
    status = status_for(exc)
    if isinstance(exc, GraphFormatError):
        return error_response(status, "GraphFormatError", str(exc), line=exc.line)
    if isinstance(exc, UnknownNodeError):
        return error_response(status, "UnknownNodeError", str(exc), node=_jsonable(exc.name))
    if isinstance(exc, ServiceError):
        return error_response(status, exc.kind, exc.detail)
    return error_response(status, type(exc).__name__, str(exc))


def _jsonable(name: object) -> object:
    # numpy scalars and bytes are what an index may hand back; JSON needs plain int/str.
    if hasattr(name, "item"):
        name = name.item()
    if isinstance(name, bytes):
        return name.decode("utf-8", "replace")
    if isinstance(name, str):
        return _utf8_safe(name)
    return name if isinstance(name, int) else str(name)


def _utf8_safe(text: str) -> str:
    """Text that encodes as UTF-8: a lone surrogate (JSON may name one, "\\ud801") is written as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def install_error_handlers(app: FastAPI) -> None:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return response_for(exc)

    async def handle_index_file(request: Request, exc: Exception) -> JSONResponse:
        # A broken index on disk is the server's fault, not the client's; say so and log it.
        log.error("index file error on %s %s: %s", request.method, request.url.path, exc)
        return error_response(500, "IndexFileError", f"the index files of this graph are damaged: {exc}")

    async def handle_validation(request: Request, exc: Exception) -> JSONResponse:
        # FastAPI's own 422, reshaped like every other error here: one readable sentence plus the details.
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        parts = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors]
        return error_response(
            422,
            "InvalidParameter",
            "; ".join(parts) or str(exc),
            errors=[{"loc": list(e.get("loc", ())), "msg": e.get("msg")} for e in errors],
        )

    app.add_exception_handler(RequestValidationError, handle_validation)
    for kind in (
        GraphFormatError,
        UnknownNodeError,
        InvalidParameterError,
        BackendUnavailableError,
        GraphNotFound,
        GraphNotReady,
        ServiceError,
    ):
        app.add_exception_handler(kind, handle)
    app.add_exception_handler(IndexFileError, handle_index_file)
