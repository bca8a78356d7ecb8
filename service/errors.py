"""Every error the service answers: one table of kinds (``ERRORS``), one exception (``ServiceError``), and the
one place that turns an exception into an answer.

An ``ErrorKind`` is a stable name (the answer's ``error``, and what a failed build's record keeps) and its
HTTP status. grail_core knows nothing of HTTP: its errors carry a kind and a category (``grail_core.errors``),
and the category gives the status (``_CATEGORY_STATUS``). Every error answer's body is made by ``error_body``:
JSON ``{"detail", "error", ...}``, the detail cut to ``MAX_DETAIL_CHARS`` and safe to encode as UTF-8.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from grail_core.errors import CORE_ERRORS, Category, GrailError, GraphFormatError, IndexFileError, UnknownNodeError

from .state.errors import StateError

__all__ = [
    "ERRORS",
    "ErrorKind",
    "ServiceError",
    "MAX_DETAIL_CHARS",
    "truncate",
    "storage_error",
    "install_error_handlers",
    "error_body",
    "error_response",
    "status_for",
    "status_for_kind",
    "response_for",
]

log = logging.getLogger("grail.service")

# Long enough for any message the service words itself; a client's 15 MB repr of a malformed edge is cut here.
MAX_DETAIL_CHARS = 300


@dataclass(frozen=True)
class ErrorKind:
    """One kind of error answer: its name, its status, a ``Retry-After`` where waiting helps, and whether a
    failed build's record may keep it (``status_for_kind``)."""

    name: str
    status: int
    retry_after: int | None = None
    recorded: bool = False


# grail_core's errors: their status by category.
_CATEGORY_STATUS = {
    Category.INVALID: 422,
    Category.NOT_FOUND: 404,
    Category.TOO_LARGE: 413,
    Category.UNSUPPORTED: 422,
    Category.DAMAGED: 500,
}

# The table: every kind an answer may carry, grail_core's first (by category), then the service's own.
ERRORS: list[ErrorKind] = [ErrorKind(e.kind, _CATEGORY_STATUS[e.category], recorded=True) for e in CORE_ERRORS]


def _kind(name: str, status: int, *, retry_after: int | None = None, recorded: bool = False) -> ErrorKind:
    kind = ErrorKind(name, status, retry_after, recorded)
    ERRORS.append(kind)
    return kind


BAD_PARAMETERS = _kind("BadParameters", 422)  # query parameters that do not go together
INVALID_PARAMETER = _kind("InvalidParameter", 422)  # a parameter or a body that its schema refuses
BAD_PAIRS = _kind("BadPairs", 422)
TOO_MANY_PAIRS = _kind("TooManyPairs", 422)
BAD_JSON = _kind("BadJSON", 422)
BAD_TEXT = _kind("BadText", 422)
EMPTY_BODY = _kind("EmptyBody", 422)
UNKNOWN_FORMAT = _kind("UnknownFormat", 415)  # a Content-Type of no format grail reads
UNSUPPORTED_FORMAT = _kind("UnsupportedFormat", 415)  # a format grail recognises and refuses
UNSUPPORTED_ENCODING = _kind("UnsupportedEncoding", 415)
UNSUPPORTED_PAIR_WIDTH = _kind("UnsupportedWidth", 415)  # binary pairs of a width not read
UNSUPPORTED_ANSWER_WIDTH = _kind("UnsupportedWidth", 406)  # binary answers of a width not written
NOT_ACCEPTABLE = _kind("NotAcceptable", 406)
CLIENT_DISCONNECT = _kind("ClientDisconnect", 400)
UNAUTHORIZED = _kind("Unauthorized", 401)
FORBIDDEN = _kind("Forbidden", 403)
FORBIDDEN_ORIGIN = _kind("ForbiddenOrigin", 403)
GRAPH_NOT_FOUND = _kind("GraphNotFound", 404)
GRAPH_NOT_READY = _kind("GraphNotReady", 409)
GRAPH_LOADING = _kind("GraphLoading", 409, retry_after=1)  # after a start: its version and journal load
NAME_TAKEN = _kind("NameTaken", 409)
GRAPH_EXISTS = _kind("GraphExists", 409)
INVALID_NAME = _kind("InvalidName", 422)
VERSION_CONFLICT = _kind("VersionConflict", 409, retry_after=1)  # another server's update came first
UPLOAD_TOO_LARGE = _kind("UploadTooLarge", 413)
REQUEST_TIMEOUT = _kind("RequestTimeout", 408)  # the headers
BODY_TIMEOUT = _kind("BodyTimeout", 408)
PAYLOAD_TOO_LARGE = _kind("PayloadTooLarge", 413)
BATCH_TOO_LARGE = _kind("BatchTooLarge", 413)
HEADERS_TOO_LARGE = _kind("HeadersTooLarge", 431)
OVERLOADED = _kind("Overloaded", 503, retry_after=1)
GRAPH_TOO_LARGE = _kind("GraphTooLarge", 413, recorded=True)  # its build needs more memory than allowed
OUT_OF_MEMORY = _kind("OutOfMemory", 507, recorded=True)  # a build ran past its memory
DISK_FULL = _kind("DiskFull", 507, recorded=True)
READ_ONLY_STORAGE = _kind("ReadOnlyStorage", 503, retry_after=60, recorded=True)
STORE_UNAVAILABLE = _kind("StoreUnavailable", 503, retry_after=5)  # the database or the object store
STORAGE_ERROR = _kind("StorageError", 500, recorded=True)
BUILD_CRASHED = _kind("BuildCrashed", 500, recorded=True)  # the build worker died: ours
INTERRUPTED = _kind("Interrupted", 500, recorded=True)  # a restart lost a build's upload
INTERNAL = _kind("InternalServerError", 500)

_RECORDED = {kind.name: kind for kind in ERRORS if kind.recorded}
# The state store's errors (service.state.errors) answered by their kind; any other is the server's (500).
_STATE_KINDS = {
    kind.name: kind
    for kind in (
        GRAPH_NOT_FOUND,
        GRAPH_NOT_READY,
        NAME_TAKEN,
        GRAPH_EXISTS,
        INVALID_NAME,
        VERSION_CONFLICT,
        UPLOAD_TOO_LARGE,
        DISK_FULL,
        READ_ONLY_STORAGE,
        STORE_UNAVAILABLE,
    )
}


class ServiceError(Exception):
    """What the service raises on purpose: a request it refuses, with the kind (``ErrorKind``) of its answer."""

    def __init__(self, kind: ErrorKind, detail: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.kind = kind.name
        self.status = kind.status
        self.detail = detail
        self.headers = {**({"Retry-After": str(kind.retry_after)} if kind.retry_after else {}), **(headers or {})}


def truncate(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters in all)"


def storage_error(exc: OSError, doing: str) -> ServiceError | None:
    """A full disk (507) or a read-only data directory (503) as the client's answer; None for other errors."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ServiceError(DISK_FULL, f"the server's disk is full ({doing}); free space and try again")
    if exc.errno == errno.EROFS:
        return ServiceError(READ_ONLY_STORAGE, f"the server's data directory is read-only ({doing})")
    return None


def error_body(kind: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The body of every error answer: what is wrong for a human (``detail``), the kind for a program
    (``error``), and what else the kind says (``line``, ``node``, ...; None values left out)."""
    body: dict[str, Any] = {"detail": _utf8_safe(truncate(detail)), "error": kind}
    body.update({key: value for key, value in extra.items() if value is not None})
    return body


def error_response(
    status: int, kind: str, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse(error_body(kind, detail, **extra), status_code=status, headers=dict(headers or {}))


def status_for_kind(kind: str) -> int:
    """The status of a failed build recorded by its kind (unknown kinds are the server's: 500)."""
    recorded = _RECORDED.get(kind)
    return recorded.status if recorded is not None else 500


def status_for(exc: BaseException) -> int:
    """The HTTP status of an exception a build or a query raised."""
    if isinstance(exc, GrailError):
        return _CATEGORY_STATUS[exc.category]
    if isinstance(exc, ServiceError):
        return exc.status
    if isinstance(exc, StateError) and exc.kind in _STATE_KINDS:
        return _STATE_KINDS[exc.kind].status
    return 500


def response_for(exc: BaseException, status: int | None = None) -> JSONResponse:
    """The error answer of ``exc``; ``status`` overrides the usual one."""
    status = status_for(exc) if status is None else status
    if isinstance(exc, GraphFormatError):
        return error_response(status, exc.kind, str(exc), line=exc.line)
    if isinstance(exc, UnknownNodeError):
        return error_response(status, exc.kind, str(exc), node=_jsonable(exc.name))
    if isinstance(exc, IndexFileError):
        # Its message names files; the log has it (install_error_handlers), the answer does not.
        return error_response(status, exc.kind, "the index files of this graph are damaged; see the server's log")
    if isinstance(exc, GrailError):
        return error_response(status, exc.kind, str(exc))
    if isinstance(exc, ServiceError):
        return error_response(status, exc.kind, exc.detail, exc.headers)
    if isinstance(exc, StateError):
        # Its message holds no path or database address (service.state.errors).
        kind = _STATE_KINDS.get(exc.kind)
        retry = {"Retry-After": str(kind.retry_after)} if kind is not None and kind.retry_after else None
        return error_response(status, exc.kind, exc.message, retry)
    return error_response(status, INTERNAL.name, "the server failed on this request; see its log")


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
        if isinstance(exc, IndexFileError):
            # A broken index on disk is the server's fault, not the client's; say so and log it.
            log.error("index file error on %s %s: %s", request.method, request.url.path, exc)
        if isinstance(exc, StateError) and status_for(exc) == 500:
            log.error("state error on %s %s: %s: %s", request.method, request.url.path, exc.kind, exc.message)
        return response_for(exc)

    async def handle_validation(request: Request, exc: Exception) -> JSONResponse:
        # FastAPI's own 422, reshaped like every other error here: one readable sentence plus the details.
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        parts = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors]
        return error_response(
            INVALID_PARAMETER.status,
            INVALID_PARAMETER.name,
            "; ".join(parts) or str(exc),
            errors=[{"loc": list(e.get("loc", ())), "msg": truncate(str(e.get("msg")))} for e in errors[:20]],
        )

    async def handle_os_error(request: Request, exc: Exception) -> JSONResponse:
        # A disk that filled up or went read-only under a request: the client hears which, never a bare 500.
        assert isinstance(exc, OSError)
        known = storage_error(exc, f"{request.method} {request.url.path}")
        if known is None:
            log.exception("unexpected OS error on %s %s", request.method, request.url.path, exc_info=exc)
            return response_for(exc)
        return response_for(known)

    app.add_exception_handler(RequestValidationError, handle_validation)
    app.add_exception_handler(GrailError, handle)
    app.add_exception_handler(ServiceError, handle)
    app.add_exception_handler(StateError, handle)
    app.add_exception_handler(OSError, handle_os_error)
