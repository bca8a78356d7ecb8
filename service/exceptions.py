"""What the Python client raises: one root (``GrailClientError``), the server's refusals (``GrailServiceError``,
carrying the problem details document) with one class per error kind, grouped by what a caller does about
them, and the failures to reach the server (``GrailConnectionError``).

``error_class(kind, status)`` maps an answer's ``error`` member to its class: a kind this client does not know
(a newer server's) gets the class of its status's group. docs/errors.md describes every kind.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GrailClientError",
    "GrailConnectionError",
    "GrailServiceError",
    "BadRequestError",
    "AccessError",
    "NotFoundError",
    "ConflictError",
    "TooLargeError",
    "UnavailableError",
    "ServerError",
    "BuildFailedError",
    "ERROR_CLASSES",
    "error_class",
]


class GrailClientError(Exception):
    """Everything the grail client raises about the service."""


class GrailConnectionError(GrailClientError):
    """The server could not be reached, or the connection broke (``__cause__`` is httpx's error)."""


class GrailServiceError(GrailClientError):
    """The server answered 4xx/5xx: ``status``, ``error`` (the kind), ``detail``, and ``problem``, the whole
    problem details document (``line``, ``node``, ``unknown`` ... where the kind has them)."""

    def __init__(self, status: int, error: str, detail: str, body: Any = None, line: int | None = None) -> None:
        """``line``: the graph file's line a format error names (the server's ``line``), kept in the message."""
        where = f" (line {line})" if line is not None and f"line {line}" not in detail else ""
        super().__init__(f"{status} {error}: {detail}{where}")
        self.status = status
        self.error = error
        self.detail = detail
        self.body = body
        self.line = line

    @property
    def problem(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}


# By what a caller does about them.
class BadRequestError(GrailServiceError):
    """The request is malformed (400, 406, 415, 422): fix it."""


class AccessError(GrailServiceError):
    """No access key, an unknown one, or one whose scope does not allow this (401, 403)."""


class NotFoundError(GrailServiceError):
    """What the request names does not exist: a graph, a node, a route (404)."""


class ConflictError(GrailServiceError):
    """The graph's state does not allow it now (409)."""


class TooLargeError(GrailServiceError):
    """A body, a batch or a graph over the server's limits (413, 431)."""


class UnavailableError(GrailServiceError):
    """The server cannot serve it now; the same request may succeed later (503, 507, 408)."""


class ServerError(GrailServiceError):
    """The server failed (500), or the graph's build did (424)."""


# One class per kind of the server's table (service.errors.ERRORS).
class InvalidParameterError(BadRequestError):
    """A parameter is out of its range."""


class GraphFormatError(BadRequestError):
    """The graph file is malformed (``line`` says where)."""


class UnknownNodeError(NotFoundError):
    """The request names nodes the graph does not have: ``node`` (the first), ``unknown`` (where: pair, end,
    name) and ``unknown_count``."""

    @property
    def node(self) -> Any:
        return self.problem.get("node")

    @property
    def unknown(self) -> list[dict[str, Any]]:
        return list(self.problem.get("unknown") or [])

    @property
    def unknown_count(self) -> int:
        return int(self.problem.get("unknown_count") or 1)


class UpdateConflictError(ConflictError):
    """An edge update that cannot apply to this graph."""


class IndexFileError(ServerError):
    """The graph's index files are damaged."""


class BackendUnavailableError(BadRequestError):
    """The backend asked for cannot run on this server."""


class InputTooLargeError(TooLargeError):
    """The graph is larger than the server reads."""


class BadParametersError(BadRequestError):
    """The query parameters do not go together."""


class InvalidRequestError(BadRequestError):
    """A parameter or the body does not fit its schema (the server's ``InvalidParameter``)."""


class BadPairsError(BadRequestError):
    """The pairs are malformed."""


class TooManyPairsError(BadRequestError):
    """Too many pairs for one GET."""


class BadJSONError(BadRequestError):
    """The body is not valid JSON."""


class BadTextError(BadRequestError):
    """The body is not UTF-8 text."""


class EmptyBodyError(BadRequestError):
    """The body is empty."""


class UnknownFormatError(BadRequestError):
    """No format grail reads has this Content-Type."""


class UnsupportedFormatError(BadRequestError):
    """grail does not read this graph format."""


class UnsupportedEncodingError(BadRequestError):
    """grail does not read this Content-Encoding."""


class UnsupportedPairWidthError(BadRequestError):
    """Binary pairs of this width are not read."""


class UnsupportedAnswerWidthError(BadRequestError):
    """Binary answers of this width are not written."""


class NotAcceptableError(BadRequestError):
    """No answer of a type that Accept allows."""


class ClientDisconnectError(BadRequestError):
    """The server heard the request end before its body was complete."""


class MalformedRequestError(BadRequestError):
    """The request is malformed (the server's ``BadRequest``)."""


class UnauthorizedError(AccessError):
    """An access key is required, or the one sent is unknown."""


class ForbiddenError(AccessError):
    """The access key's scope does not allow this."""


class ForbiddenOriginError(AccessError):
    """Writes from web pages of this origin are refused."""


class RouteNotFoundError(NotFoundError):
    """No such route (the server's ``NotFound``)."""


class MethodNotAllowedError(BadRequestError):
    """The route does not serve this method."""


class GraphNotFoundError(NotFoundError):
    """No such graph."""


class ProblemNotFoundError(NotFoundError):
    """No such kind of error."""


class GraphNotReadyError(ConflictError):
    """The graph is not ready yet (queued or building)."""


class GraphLoadingError(ConflictError):
    """The graph's version and journal are loading after a server's start: try again after Retry-After."""


class NameTakenError(ConflictError):
    """Another graph holds this name (``PUT /graphs/{name}``, ``replace=True``, replaces it)."""


class GraphExistsError(ConflictError):
    """A graph with this id exists."""


class InvalidNameError(BadRequestError):
    """Graph names are letters, digits, '.', '_' and '-'."""


class VersionConflictError(ConflictError):
    """Another server's update of the graph came first: try again."""


class UploadTooLargeError(TooLargeError):
    """The upload is over the server's limit."""


class VersionNotHereError(UnavailableError):
    """This server does not hold the version asked for (``min_version``) yet: try again after Retry-After, or
    on another replica."""


class StoreUnavailableError(UnavailableError):
    """The server's database or object store cannot be reached: try again after Retry-After."""


class GraphFailedError(ServerError):
    """The graph's build failed: ``problem["build"]`` is its error."""


class RequestTimeoutError(UnavailableError):
    """The headers took too long to arrive."""


class BodyTimeoutError(UnavailableError):
    """The body took too long to arrive."""


class PayloadTooLargeError(TooLargeError):
    """The body is over the route's limit."""


class BatchTooLargeError(TooLargeError):
    """The batch needs more memory than batches may use: send it in parts."""


class HeadersTooLargeError(TooLargeError):
    """The request line and headers are too large."""


class OverloadedError(UnavailableError):
    """The server is too busy; retried by the client where the request is safe to repeat."""


class GraphTooLargeError(TooLargeError):
    """The graph needs more build memory than the server allows."""


class OutOfMemoryError(UnavailableError):
    """The build ran out of memory."""


class DiskFullError(UnavailableError):
    """The server's disk is full."""


class ReadOnlyStorageError(UnavailableError):
    """The server's data directory is read-only."""


class StorageError(ServerError):
    """The server could not read or write its data."""


class BuildCrashedError(ServerError):
    """The build failed on the server's side."""


class BuildInterruptedError(ServerError):
    """A restart lost the build's upload (the server's ``Interrupted``)."""


class InternalServerError(ServerError):
    """The server failed on this request."""


class BuildFailedError(GrailServiceError):
    """wait_until_ready found the graph failed; ``record`` holds its error (with the line, for format errors)."""

    def __init__(self, record: dict[str, Any]) -> None:
        error = record.get("error") or {}
        kind, message = str(error.get("type", "BuildError")), str(error.get("message", "build failed"))
        super().__init__(422, kind, message, record, error.get("line"))
        self.record = record


# The server's kind (an answer's ``error``) -> the class raised.
ERROR_CLASSES: dict[str, type[GrailServiceError]] = {
    "InvalidParameterError": InvalidParameterError,
    "GraphFormatError": GraphFormatError,
    "UnknownNodeError": UnknownNodeError,
    "UpdateConflictError": UpdateConflictError,
    "IndexFileError": IndexFileError,
    "BackendUnavailableError": BackendUnavailableError,
    "InputTooLargeError": InputTooLargeError,
    "BadParameters": BadParametersError,
    "InvalidParameter": InvalidRequestError,
    "BadPairs": BadPairsError,
    "TooManyPairs": TooManyPairsError,
    "BadJSON": BadJSONError,
    "BadText": BadTextError,
    "EmptyBody": EmptyBodyError,
    "UnknownFormat": UnknownFormatError,
    "UnsupportedFormat": UnsupportedFormatError,
    "UnsupportedEncoding": UnsupportedEncodingError,
    "UnsupportedPairWidth": UnsupportedPairWidthError,
    "UnsupportedAnswerWidth": UnsupportedAnswerWidthError,
    "NotAcceptable": NotAcceptableError,
    "ClientDisconnect": ClientDisconnectError,
    "BadRequest": MalformedRequestError,
    "Unauthorized": UnauthorizedError,
    "Forbidden": ForbiddenError,
    "ForbiddenOrigin": ForbiddenOriginError,
    "NotFound": RouteNotFoundError,
    "MethodNotAllowed": MethodNotAllowedError,
    "GraphNotFound": GraphNotFoundError,
    "ProblemNotFound": ProblemNotFoundError,
    "GraphNotReady": GraphNotReadyError,
    "GraphFailed": GraphFailedError,
    "GraphLoading": GraphLoadingError,
    "NameTaken": NameTakenError,
    "GraphExists": GraphExistsError,
    "InvalidName": InvalidNameError,
    "VersionConflict": VersionConflictError,
    "UploadTooLarge": UploadTooLargeError,
    "StoreUnavailable": StoreUnavailableError,
    "VersionNotHere": VersionNotHereError,
    "RequestTimeout": RequestTimeoutError,
    "BodyTimeout": BodyTimeoutError,
    "PayloadTooLarge": PayloadTooLargeError,
    "BatchTooLarge": BatchTooLargeError,
    "HeadersTooLarge": HeadersTooLargeError,
    "Overloaded": OverloadedError,
    "GraphTooLarge": GraphTooLargeError,
    "OutOfMemory": OutOfMemoryError,
    "DiskFull": DiskFullError,
    "ReadOnlyStorage": ReadOnlyStorageError,
    "StorageError": StorageError,
    "BuildCrashed": BuildCrashedError,
    "Interrupted": BuildInterruptedError,
    "InternalServerError": InternalServerError,
}
_BY_STATUS: dict[int, type[GrailServiceError]] = {
    401: AccessError,
    403: AccessError,
    404: NotFoundError,
    408: UnavailableError,
    409: ConflictError,
    413: TooLargeError,
    424: ServerError,
    431: TooLargeError,
    503: UnavailableError,
    507: UnavailableError,
}


def error_class(kind: str, status: int) -> type[GrailServiceError]:
    """The class of an error answer: by its kind, else by its status (4xx: BadRequestError, 5xx: ServerError)."""
    known = ERROR_CLASSES.get(kind) or _BY_STATUS.get(status)
    if known is not None:
        return known
    return BadRequestError if status < 500 else ServerError
