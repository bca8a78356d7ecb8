"""The service's one exception root (``ServiceError``) and the one mapping of exceptions to HTTP answers.

grail_core knows nothing of HTTP: its client-fault errors get their status here. Every error answer is JSON
``{"detail", "error", ...}`` with the detail cut to ``MAX_DETAIL_CHARS`` and safe to encode as UTF-8.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Mapping
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

__all__ = [
    "ServiceError",
    "Overloaded",
    "MAX_DETAIL_CHARS",
    "truncate",
    "storage_error",
    "install_error_handlers",
    "error_response",
    "status_for",
    "status_for_kind",
    "response_for",
    "BUILD_FAILURE_STATUS",
]

log = logging.getLogger("grail.service")

# Long enough for any message the service words itself; a client's 15 MB repr of a malformed edge is cut here.
MAX_DETAIL_CHARS = 300


class ServiceError(Exception):
    """Root of everything the service raises on purpose: a request it refuses, with its status and kind."""

    def __init__(self, status: int, kind: str, detail: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.headers = dict(headers or {})


class Overloaded(ServiceError):
    """503 with ``Retry-After``: a cap on concurrent work is reached; the same request later will be served."""

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(503, "Overloaded", detail, {"Retry-After": str(retry_after)})


def truncate(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters in all)"


def storage_error(exc: OSError, doing: str) -> ServiceError | None:
    """A full disk (507) or a read-only data directory (503) as the client's answer; None for other errors."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ServiceError(507, "DiskFull", f"the server's disk is full ({doing}); free space and try again")
    if exc.errno == errno.EROFS:
        return ServiceError(
            503, "ReadOnlyStorage", f"the server's data directory is read-only ({doing})", {"Retry-After": "60"}
        )
    return None


def error_response(
    status: int, kind: str, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body: dict[str, Any] = {"detail": _utf8_safe(truncate(detail)), "error": kind}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


# grail_core's errors that are the client's fault, and their status; anything unlisted is ours (500).
_CORE_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (GraphFormatError, 422),
    (InputTooLargeError, 413),
    (UnknownNodeError, 404),
    (InvalidParameterError, 422),
    (BackendUnavailableError, 422),
)

# The status of a failed build, by the kind its record keeps (answers to wait=true). Kinds of the build worker:
# GraphTooLarge (its index needs more memory than this server builds with), OutOfMemory (the build ran past its
# memory), DiskFull, ReadOnlyStorage, BuildCrashed (the worker died: ours), Interrupted (a restart lost the upload).
BUILD_FAILURE_STATUS: dict[str, int] = {
    **{cls.__name__: status for cls, status in _CORE_STATUS},
    "GraphTooLarge": 413,
    "OutOfMemory": 507,
    "DiskFull": 507,
    "ReadOnlyStorage": 503,
}


def status_for_kind(kind: str) -> int:
    """The status of a failed build recorded by its kind."""
    return BUILD_FAILURE_STATUS.get(kind, 500)


def status_for(exc: BaseException) -> int:
    """The HTTP status of an exception a build or a query raised."""
    for cls, status in _CORE_STATUS:
        if isinstance(exc, cls):
            return status
    if isinstance(exc, ServiceError):
        return exc.status
    return 500


def response_for(exc: BaseException, status: int | None = None) -> JSONResponse:
    """The error answer of ``exc``; ``status`` overrides the usual one."""
    status = status_for(exc) if status is None else status
    if isinstance(exc, GraphFormatError):
        return error_response(status, "GraphFormatError", str(exc), line=exc.line)
    if isinstance(exc, UnknownNodeError):
        return error_response(status, "UnknownNodeError", str(exc), node=_jsonable(exc.name))
    if isinstance(exc, ServiceError):
        return error_response(status, exc.kind, exc.detail, exc.headers)
    return error_response(status, type(exc).__name__, str(exc))


def _jsonable(name: object) -> object:
    # numpy scalars and bytes are what an index may hand back; JSON needs plain int/str.
    if hasattr(name, "item"):
        name = name.item()
    if isinstance(name, bytes):
        return name.decode("utf-8", "replace")
    if isinstance(name, str):
        return _utf8_safe(truncate(name))
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
            errors=[{"loc": list(e.get("loc", ())), "msg": truncate(str(e.get("msg")))} for e in errors[:20]],
        )

    async def handle_os_error(request: Request, exc: Exception) -> JSONResponse:
        # A disk that filled up or went read-only under a request: the client hears which, never a bare 500.
        assert isinstance(exc, OSError)
        known = storage_error(exc, f"{request.method} {request.url.path}")
        if known is None:
            log.exception("unexpected OS error on %s %s", request.method, request.url.path, exc_info=exc)
            return error_response(500, "InternalServerError", "the server failed on this request; see its log")
        return response_for(known)

    app.add_exception_handler(RequestValidationError, handle_validation)
    for kind in (
        GraphFormatError,
        UnknownNodeError,
        InvalidParameterError,
        BackendUnavailableError,
        InputTooLargeError,
        ServiceError,
    ):
        app.add_exception_handler(kind, handle)
    app.add_exception_handler(IndexFileError, handle_index_file)
    app.add_exception_handler(OSError, handle_os_error)
