"""Connection discipline: slow and greedy clients cannot hold the server's memory, file descriptors or lanes.

On the connection (``GuardedHttpProtocol``, uvicorn's httptools protocol with limits): beyond
``--max-connections`` a new connection gets a 503 and is closed at once; a request line and headers over
``--max-header-kb`` get 431; headers not complete within ``--header-timeout`` seconds get 408 (a connection
that sends nothing is closed), and so does a request whose body stalls (see ``BodyGuard``). A connection keeps
at most ``WRITE_BUFFER_BYTES`` of an answer beyond what the kernel took before the app waits to write more, and
a request may end its connection at once, what it still holds unsent dropped (``ABORT_EXTENSION``: a streamed
answer whose client stopped reading).

On the request (``BodyGuard``, pure ASGI): every route has a body limit (uploads and batches
``--max-upload-mb``, every other route ``SMALL_BODY_BYTES``), checked against Content-Length before the body is
read and again as it streams; a body that pauses longer than ``--body-timeout`` seconds, or that averages less
than ``MIN_BODY_RATE`` after that long, gets 408; a response to a request whose body was not read to its end
closes the connection, so that no one can keep sending a body nobody reads.

Admission: ``Admission`` caps uploads read at once and the memory of query batches running at once; beyond
either, 503 with ``Retry-After`` before the body is read.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .errors import (
    BATCH_TOO_LARGE,
    BODY_TIMEOUT,
    HEADERS_TOO_LARGE,
    OVERLOADED,
    PAYLOAD_TOO_LARGE,
    REQUEST_TIMEOUT,
    ServiceError,
    raw_error,
    response_for,
)

__all__ = [
    "ConnectionLimits",
    "GuardedHttpProtocol",
    "BodyGuard",
    "Admission",
    "SMALL_BODY_BYTES",
    "MIN_BODY_RATE",
    "protocol_class",
    "WRITE_BUFFER_BYTES",
    "ABORT_EXTENSION",
]

log = logging.getLogger("grail.service.guards")

SMALL_BODY_BYTES = 64 * 1024
MIN_BODY_RATE = 1024  # bytes a second, averaged, once a body has taken --body-timeout seconds
# Routes whose body can be large (the upload limit applies): uploads (POST /graphs, PUT /graphs/{name}) and
# batches (POST /graphs/{id}/queries).
_LARGE_POSTS = ("/graphs", "/queries")


def _large_body(method: str, path: str) -> bool:
    if method == "POST":
        return path.endswith(_LARGE_POSTS)
    return method == "PUT" and path.startswith("/graphs/") and path.count("/") == 2


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    max_header_bytes: int
    header_timeout: float


# How long a connection answered before its request was read goes on taking (and dropping) the client's bytes.
DRAIN_S = 2.0
# Bytes of an answer a connection holds, beyond the kernel's buffers, before the app's next write waits: a
# client that stops reading holds this much and the one write waiting (uvloop's default is 64 KiB).
WRITE_BUFFER_BYTES = 16 * 1024
# The scope extension through which a request ends its connection at once: ``{"abort": callable}``.
ABORT_EXTENSION = "grail.connection.abort"

# Written to a connection before (or instead of) the app: no request reached it.
_BUSY = raw_error(OVERLOADED, b"Service Unavailable", "too many connections")
_HEADERS_TOO_LARGE = raw_error(
    HEADERS_TOO_LARGE, b"Request Header Fields Too Large", "the request line and headers are too large"
)
_HEADERS_TIMEOUT = raw_error(REQUEST_TIMEOUT, b"Request Timeout", "the headers took too long to arrive")


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a connection cap, a header size limit and a header timeout.
    ``limits`` is set on a subclass per server (``protocol_class``)."""

    limits: ConnectionLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_headers = True
        self._header_bytes = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._draining = False  # answered before the request was read: what comes in is dropped

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self._refused = True
            self.transport = transport  # connection_lost closes it
            transport.write(_BUSY)
            transport.close()
            return
        super().connection_made(transport)
        transport.set_write_buffer_limits(high=WRITE_BUFFER_BYTES)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        if self._refused:
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused or self._draining:
            return
        if self._in_headers:
            self._header_bytes += len(data)
            if self._header_timer is None:
                self._arm_header_timer()
        super().data_received(data)
        if self._in_headers and self._header_bytes > self.limits.max_header_bytes and not self.transport.is_closing():
            self._cancel_header_timer()
            self._answer_and_drain(_HEADERS_TOO_LARGE)

    def _answer_and_drain(self, answer: bytes) -> None:
        """Answer, stop writing, and drop what the client still sends for up to ``DRAIN_S`` before closing: a
        socket closed with bytes unread is reset, and a client still sending would lose the answer."""
        self._draining = True
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(DRAIN_S, self.transport.close)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {ABORT_EXTENSION: {"abort": self._abort}}

    def _abort(self) -> None:
        """End the connection now, dropping what it holds unsent, the kernel's buffers included (a reset: a
        close would keep both until the client reads them, which a client that stopped reading never does)."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with suppress(OSError):  # already gone
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._cancel_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True  # the next bytes are the next request's

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_timed_out)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._in_headers:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being served; its body has its own timeout
        if self._header_bytes:
            self.transport.write(_HEADERS_TIMEOUT)
        self.transport.close()


def protocol_class(limits: ConnectionLimits) -> type[GuardedHttpProtocol]:
    """The protocol class for uvicorn's ``http=`` with these limits."""
    return type("GrailHttpProtocol", (GuardedHttpProtocol,), {"limits": limits})


class BodyGuard:
    """Pure ASGI: body limits for every route and body timeouts (see the module's docstring)."""

    def __init__(self, app: ASGIApp, large_body_bytes: int, body_timeout: float) -> None:
        self.app = app
        self.large_body_bytes = large_body_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        large = _large_body(method, path)
        limit = self.large_body_bytes if large else SMALL_BODY_BYTES
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        expects_body = (declared.isdigit() and int(declared) > 0) or b"transfer-encoding" in headers
        if declared.isdigit() and int(declared) > limit:
            raise_413 = ServiceError(
                PAYLOAD_TOO_LARGE, f"the body is over this route's limit of {_size(limit)}" + _hint(large)
            )
            await _answer(raise_413, scope, receive, send, close=True)
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        received = 0
        complete = not expects_body

        async def guarded_receive() -> Message:
            nonlocal received, complete
            if complete:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.body_timeout)
            except asyncio.TimeoutError:
                raise ServiceError(
                    BODY_TIMEOUT, f"the body paused for more than {self.body_timeout:g} s (--body-timeout)"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if received > limit:
                    raise ServiceError(
                        PAYLOAD_TOO_LARGE, f"the body is over this route's limit of {_size(limit)}" + _hint(large)
                    )
                elapsed = loop.time() - started
                if not complete and elapsed > self.body_timeout and received < MIN_BODY_RATE * elapsed:
                    raise ServiceError(
                        BODY_TIMEOUT, f"the body arrives slower than {MIN_BODY_RATE} bytes a second on average"
                    )
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not complete:
                message["headers"] = [*message.get("headers", ()), (b"connection", b"close")]
            await send(message)

        await self.app(scope, guarded_receive, closing_send)


async def _answer(exc: ServiceError, scope: Scope, receive: Receive, send: Send, close: bool) -> None:
    response = response_for(exc)
    if close:
        response.headers["Connection"] = "close"
    await response(scope, receive, send)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def _hint(large: bool) -> str:
    return " (--max-upload-mb)" if large else ""


class Admission:
    """Caps on concurrent uploads and on the memory of concurrent query batches; 503 beyond, at once."""

    def __init__(self, max_uploads: int, batch_memory_bytes: int) -> None:
        self.max_uploads = max_uploads
        self.batch_memory_bytes = batch_memory_bytes
        self._lock = threading.Lock()
        self._uploads = 0
        self._batch_bytes = 0

    @contextmanager
    def upload(self) -> Iterator[None]:
        with self._lock:
            if self._uploads >= self.max_uploads:
                raise ServiceError(OVERLOADED, f"{self._uploads} uploads are being received (--max-concurrent-uploads)")
            self._uploads += 1
        try:
            yield
        finally:
            with self._lock:
                self._uploads -= 1

    @contextmanager
    def batch(self, nbytes: int) -> Iterator[None]:
        """Hold ``nbytes`` of the batch memory while a batch is read, decoded, answered and encoded."""
        if nbytes > self.batch_memory_bytes:
            raise ServiceError(
                BATCH_TOO_LARGE,
                f"this batch needs about {nbytes >> 20} MiB to answer; batches may use {self.batch_memory_bytes >> 20}"
                " MiB (--max-batch-memory-mb): send it in parts",
            )
        with self._lock:
            if self._batch_bytes + nbytes > self.batch_memory_bytes:
                raise ServiceError(
                    OVERLOADED, "the batches being answered use the memory batches may have (--max-batch-memory-mb)"
                )
            self._batch_bytes += nbytes
        try:
            yield
        finally:
            with self._lock:
                self._batch_bytes -= nbytes
