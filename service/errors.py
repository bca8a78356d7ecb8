"""Every error the service answers: one table of kinds (``ERRORS``), one exception (``ServiceError``), and the
one place that turns an exception into an answer.

Every error answer is an RFC 9457 problem details document (``application/problem+json``): ``type`` (the URI
``/problems/KIND``, which this server answers with the kind's description), ``title``, ``status``, ``detail``
(what went wrong this time, for a human), ``instance`` (the request's path), and our members: ``error`` (the
kind, for a program), ``request_id``, and what the kind adds (``line``, ``node``, ``unknown``, ...). The
framework's own answers (an unknown route, a method the route does not serve, a parameter its schema refuses)
are made here too. docs/errors.md explains every kind and why it has its status.

An ``ErrorKind`` is a stable name (the answer's ``error``, and what a failed build's record keeps), its HTTP
status and its title. grail_core knows nothing of HTTP: its errors carry a kind and a category
(``grail_core.errors``), and the category gives the status (``_CATEGORY_STATUS``).
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from grail_core.errors import CORE_ERRORS, Category, GrailError, GraphFormatError, IndexFileError, UnknownNodeError

from .context import NO_REQUEST, request_id, request_path
from .state.errors import StateError

__all__ = [
    "ERRORS",
    "KINDS",
    "ErrorKind",
    "ServiceError",
    "PROBLEM_JSON",
    "PROBLEMS_PATH",
    "MAX_DETAIL_CHARS",
    "truncate",
    "storage_error",
    "install_error_handlers",
    "problem_type",
    "error_body",
    "error_response",
    "raw_error",
    "ProblemResponse",
    "status_for",
    "status_for_kind",
    "response_for",
]

log = logging.getLogger("grail.service")

PROBLEM_JSON = "application/problem+json"
PROBLEMS_PATH = "/problems"
# Long enough for any message the service words itself; a client's 15 MB repr of a malformed edge is cut here.
MAX_DETAIL_CHARS = 300


@dataclass(frozen=True)
class ErrorKind:
    """One kind of error answer: its name, its status, its title (one line, the same for every answer of the
    kind), a ``Retry-After`` where waiting helps, and whether a failed build's record may keep it
    (``status_for_kind``)."""

    name: str
    status: int
    title: str
    retry_after: int | None = None
    recorded: bool = False


# grail_core's errors: their status by category. A name the graph lacks is 404 wherever it is named (path,
# query string or body): the request is well formed, what it names does not exist. A conflict with the graph's
# state (an edge update that cannot apply to it) is 409.
_CATEGORY_STATUS = {
    Category.INVALID: 422,
    Category.NOT_FOUND: 404,
    Category.CONFLICT: 409,
    Category.TOO_LARGE: 413,
    Category.UNSUPPORTED: 422,
    Category.DAMAGED: 500,
}
_CORE_TITLES = {
    "InvalidParameterError": "A parameter is out of its range",
    "GraphFormatError": "The graph file is malformed",
    "UnknownNodeError": "The graph has no such node",
    "UpdateConflictError": "The edge update cannot apply to this graph",
    "IndexFileError": "The graph's index files are damaged",
    "BackendUnavailableError": "The backend cannot run on this server",
    "InputTooLargeError": "The graph is larger than this server reads",
}

# The table: every kind an answer may carry, grail_core's first (by category), then the service's own.
ERRORS: list[ErrorKind] = [
    ErrorKind(e.kind, _CATEGORY_STATUS[e.category], _CORE_TITLES[e.kind], recorded=True) for e in CORE_ERRORS
]


def _kind(name: str, status: int, title: str, *, retry_after: int | None = None, recorded: bool = False) -> ErrorKind:
    kind = ErrorKind(name, status, title, retry_after, recorded)
    ERRORS.append(kind)
    return kind


BAD_PARAMETERS = _kind("BadParameters", 422, "The query parameters do not fit the route")
INVALID_PARAMETER = _kind("InvalidParameter", 422, "A parameter or the body does not fit its schema")
BAD_PAIRS = _kind("BadPairs", 422, "The pairs are malformed")
TOO_MANY_PAIRS = _kind("TooManyPairs", 422, "Too many pairs for one GET")
BAD_JSON = _kind("BadJSON", 422, "The body is not valid JSON")
BAD_TEXT = _kind("BadText", 422, "The body is not UTF-8 text")
EMPTY_BODY = _kind("EmptyBody", 422, "The body is empty")
UNKNOWN_FORMAT = _kind("UnknownFormat", 415, "No format grail reads has this Content-Type")
UNSUPPORTED_FORMAT = _kind("UnsupportedFormat", 415, "grail does not read this graph format")
UNSUPPORTED_ENCODING = _kind("UnsupportedEncoding", 415, "grail does not read this Content-Encoding")
UNSUPPORTED_PAIR_WIDTH = _kind("UnsupportedPairWidth", 415, "Binary pairs of this width are not read")
UNSUPPORTED_ANSWER_WIDTH = _kind("UnsupportedAnswerWidth", 406, "Binary answers of this width are not written")
NOT_ACCEPTABLE = _kind("NotAcceptable", 406, "No answer of a type that Accept allows")
CLIENT_DISCONNECT = _kind("ClientDisconnect", 400, "The client went away before its request was complete")
UNAUTHORIZED = _kind("Unauthorized", 401, "An access key is required")
FORBIDDEN = _kind("Forbidden", 403, "The access key's scope does not allow this")
FORBIDDEN_ORIGIN = _kind("ForbiddenOrigin", 403, "Writes from web pages of this origin are refused")
NOT_FOUND = _kind("NotFound", 404, "No such route")
METHOD_NOT_ALLOWED = _kind("MethodNotAllowed", 405, "The route does not serve this method")
BAD_REQUEST = _kind("BadRequest", 400, "The request is malformed")
GRAPH_NOT_FOUND = _kind("GraphNotFound", 404, "No such graph")
PROBLEM_NOT_FOUND = _kind("ProblemNotFound", 404, "No such kind of error")
GRAPH_NOT_READY = _kind("GraphNotReady", 409, "The graph is not ready yet")
GRAPH_FAILED = _kind("GraphFailed", 424, "The graph's build failed")
GRAPH_LOADING = _kind("GraphLoading", 409, "The graph's version and journal are loading after a start", retry_after=1)
NAME_TAKEN = _kind("NameTaken", 409, "Another graph holds this name")
GRAPH_EXISTS = _kind("GraphExists", 409, "A graph with this id exists")
INVALID_NAME = _kind("InvalidName", 422, "Graph names are letters, digits, '.', '_' and '-'")
VERSION_CONFLICT = _kind("VersionConflict", 409, "Another server's update came first", retry_after=1)
UPLOAD_TOO_LARGE = _kind("UploadTooLarge", 413, "The upload is over the server's limit")
STORE_UNAVAILABLE = _kind("StoreUnavailable", 503, "The database or the object store cannot be reached", retry_after=5)
VERSION_NOT_HERE = _kind(
    "VersionNotHere", 503, "This server does not hold the version asked for (min_version) yet", retry_after=1
)
REQUEST_TIMEOUT = _kind("RequestTimeout", 408, "The headers took too long to arrive")
BODY_TIMEOUT = _kind("BodyTimeout", 408, "The body took too long to arrive")
PAYLOAD_TOO_LARGE = _kind("PayloadTooLarge", 413, "The body is over this route's limit")
BATCH_TOO_LARGE = _kind("BatchTooLarge", 413, "The batch needs more memory than batches may use")
HEADERS_TOO_LARGE = _kind("HeadersTooLarge", 431, "The request line and headers are too large")
OVERLOADED = _kind("Overloaded", 503, "The server is too busy; try again after Retry-After", retry_after=1)
GRAPH_TOO_LARGE = _kind("GraphTooLarge", 413, "The graph needs more build memory than allowed", recorded=True)
OUT_OF_MEMORY = _kind("OutOfMemory", 507, "The build ran out of memory", recorded=True)
DISK_FULL = _kind("DiskFull", 507, "The server's disk is full", recorded=True)
READ_ONLY_STORAGE = _kind(
    "ReadOnlyStorage", 503, "The server's data directory is read-only", retry_after=60, recorded=True
)
STORAGE_ERROR = _kind("StorageError", 500, "The server could not read or write its data", recorded=True)
BUILD_CRASHED = _kind("BuildCrashed", 500, "The build failed on the server's side", recorded=True)
INTERRUPTED = _kind("Interrupted", 500, "A restart lost the build's upload", recorded=True)
INTERNAL = _kind("InternalServerError", 500, "The server failed on this request")

KINDS: dict[str, ErrorKind] = {kind.name: kind for kind in ERRORS}
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
    """What the service raises on purpose: a request it refuses, with the kind (``ErrorKind``) of its answer and
    what else its answer says (``extra``: members of the problem document beside the standard ones)."""

    def __init__(self, kind: ErrorKind, detail: str, headers: Mapping[str, str] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.kind = kind.name
        self.status = kind.status
        self.detail = detail
        self.headers = {**({"Retry-After": str(kind.retry_after)} if kind.retry_after else {}), **(headers or {})}
        self.extra = extra


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


def problem_type(kind: str) -> str:
    """The problem type URI of a kind: a path of this server, which answers with the kind's title and status."""
    return f"{PROBLEMS_PATH}/{kind}"


def error_body(kind: str, detail: str, status: int | None = None, **extra: Any) -> dict[str, Any]:
    """The problem details document of every error answer: RFC 9457's members (``type``, ``title``,
    ``status``, ``detail``, ``instance``: the request's path), the kind for a program (``error``), the
    request's id, and what else the kind says (``line``, ``node``, ...; None values left out)."""
    known = KINDS.get(kind)
    body: dict[str, Any] = {
        "type": problem_type(kind),
        "title": known.title if known is not None else kind,
        "status": status if status is not None else (known.status if known is not None else 500),
        "detail": _utf8_safe(truncate(detail)),
        "instance": request_path.get(),
        "error": kind,
        "request_id": None if request_id.get() == NO_REQUEST else request_id.get(),
    }
    body.update(extra)
    return {key: value for key, value in body.items() if value is not None}


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_JSON


def error_response(
    status: int, kind: str, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    return ProblemResponse(error_body(kind, detail, status, **extra), status_code=status, headers=dict(headers or {}))


def raw_error(kind: ErrorKind, reason: bytes, detail: str) -> bytes:
    """A whole error answer as bytes, for a connection that no request reached (closed after it)."""
    body = json.dumps(error_body(kind.name, detail)).encode()
    extra = b"retry-after: %d\r\n" % kind.retry_after if kind.retry_after else b""
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n%s\r\n"
        % (kind.status, reason, PROBLEM_JSON.encode(), len(body), extra)
    ) + body


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
        unknown = [{"pair": u.pair, "end": u.end, "name": _jsonable(u.name)} for u in exc.unknown] or None
        return error_response(
            status, exc.kind, str(exc), node=_jsonable(exc.name), unknown=unknown, unknown_count=exc.count
        )
    if isinstance(exc, IndexFileError):
        # Its message names files; the log has it (install_error_handlers), the answer does not.
        return error_response(status, exc.kind, "the index files of this graph are damaged; see the server's log")
    if isinstance(exc, GrailError):
        return error_response(status, exc.kind, str(exc))
    if isinstance(exc, ServiceError):
        return error_response(status, exc.kind, exc.detail, exc.headers, **exc.extra)
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


# Starlette's own refusals (no route, a method the route does not serve), as the kinds of the table.
_HTTP_KINDS = {404: NOT_FOUND, 405: METHOD_NOT_ALLOWED}


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

    async def handle_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        kind = _HTTP_KINDS.get(exc.status_code)
        if kind is NOT_FOUND:
            detail = f"no route {truncate(request.url.path, 80)!r}; GET /docs lists the routes"
        elif kind is METHOD_NOT_ALLOWED:
            detail = f"{request.method} is not served here; the Allow header lists the methods that are"
        else:
            detail = str(exc.detail)
        name = (kind or BAD_REQUEST).name
        return error_response(exc.status_code, name, detail, exc.headers)

    async def handle_os_error(request: Request, exc: Exception) -> JSONResponse:
        # A disk that filled up or went read-only under a request: the client hears which, never a bare 500.
        assert isinstance(exc, OSError)
        known = storage_error(exc, f"{request.method} {request.url.path}")
        if known is None:
            log.exception("unexpected OS error on %s %s", request.method, request.url.path, exc_info=exc)
            return response_for(exc)
        return response_for(known)

    app.add_exception_handler(RequestValidationError, handle_validation)
    app.add_exception_handler(HTTPException, handle_http)
    app.add_exception_handler(GrailError, handle)
    app.add_exception_handler(ServiceError, handle)
    app.add_exception_handler(StateError, handle)
    app.add_exception_handler(OSError, handle_os_error)
