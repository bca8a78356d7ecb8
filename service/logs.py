"""Request ids and log lines: every response carries ``X-Request-ID`` (the client's, or a new one) and every log
line the id of the request it belongs to (``-`` outside requests), as text or as one JSON object a line."""

from __future__ import annotations

import logging
import random
import re
import sys
import time
from collections.abc import Callable

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .context import request_id, request_path
from .errors import response_for

__all__ = [
    "REQUEST_ID_HEADER",
    "RequestIdMiddleware",
    "Observer",
    "configure_logging",
    "current_request_id",
    "new_request_id",
    "set_request_id",
]

REQUEST_ID_HEADER = "X-Request-ID"
_HEADER_KEY = REQUEST_ID_HEADER.lower().encode()
# What a client's id may be: printable ASCII without spaces, short enough for a log line; others are replaced.
_ACCEPTED_ID = re.compile(rb"[!-~]{1,128}")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
_JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s"
# A new id has uuid4's form: 128 random bits, 6 of them fixed (version 4, RFC 4122 variant).
_UUID4_FIXED = (0xF << 76) | (0x3 << 62)
_UUID4_BITS = (0x4 << 76) | (0x2 << 62)

log = logging.getLogger("grail.service")


def current_request_id() -> str:
    """The id of the request this code runs for; build threads inherit the id of the upload that queued them."""
    return request_id.get()


def set_request_id(value: str) -> None:
    """The id for this context's log lines from now on: a build worker takes that of the upload it builds."""
    request_id.set(value)


def new_request_id() -> str:
    """A uuid4 in hex, from Python's generator rather than uuid4's read of os.urandom, a system call per
    request: a request id names a request, it guards nothing."""
    return f"{random.getrandbits(128) & ~_UUID4_FIXED | _UUID4_BITS:032x}"


# What is told of each request once it is answered: its scope, its status and the seconds it took.
Observer = Callable[[Scope, int, float], None]


class RequestIdMiddleware:
    """Pure ASGI, outermost: sets the request's id for the log lines of everything below it, adds the header to
    the response, and turns an exception no handler took into a JSON 500 that carries the id as well. Each
    answered request is told to ``observe`` (the metrics, service.metrics.RequestMetrics): one layer for both,
    since each layer costs a good part of a small request."""

    def __init__(self, app: ASGIApp, observe: Observer | None = None) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        given = next((value for key, value in scope["headers"] if key == _HEADER_KEY), b"")
        this_id = given.decode() if _ACCEPTED_ID.fullmatch(given) else new_request_id()
        token = request_id.set(this_id)
        path_token = request_path.set(scope["path"])
        status = 0  # no response started yet

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (_HEADER_KEY, this_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if status:
                raise
            await response_for(RuntimeError())(scope, receive, send_with_id)
        finally:
            if self.observe is not None:
                self.observe(scope, status or 500, time.perf_counter() - began)
            request_path.reset(path_token)
            request_id.reset(token)


_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


class _TextFormatter(logging.Formatter):
    """Control characters in a message (a graph name with a newline) are written as escapes: one event, one
    line, whatever a client sends. Tracebacks, which are not part of the message, keep their lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if not record.message.isprintable():
            record.message = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), record.message)
        return super().formatMessage(record)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


def configure_logging(level: str, fmt: str) -> None:
    """One handler on the root logger for the service's, uvicorn's and numba's lines: ``fmt`` is text or json."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_RequestIdFilter())
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(
                _JSON_FIELDS,
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                # uvicorn adds a colored copy of some messages; the plain one is enough.
                reserved_attrs=[*RESERVED_ATTRS, "color_message"],
            )
        )
    else:
        handler.setFormatter(_TextFormatter(_TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # numba's CUDA driver logs every device allocation and free at INFO: thousands of lines a GPU build.
    logging.getLogger("numba").setLevel(max(logging.WARNING, root.level))
