"""Request bodies read chunk by chunk under the size limit (--max-upload-mb): to a store, to bytes, or into
one numpy buffer.

Every read refuses a body over the limit with 413, from its Content-Length before any transfer where it is
declared, and turns a client that goes away mid-body into a 400.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import numpy as np
from starlette.requests import ClientDisconnect, Request

from .errors import CLIENT_DISCONNECT, PAYLOAD_TOO_LARGE, ServiceError

__all__ = ["declared_length", "stream_to", "read_bytes", "read_array", "STREAM_BLOCK"]

T = TypeVar("T")
# An upload reaches its store in blocks of this size.
STREAM_BLOCK = 1 << 20


def declared_length(request: Request, limit: int) -> int | None:
    """The body's Content-Length (None when the body is chunked); 413 when it is over ``limit``."""
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit():
        return None
    if int(declared) > limit:
        raise _too_large(limit)
    return int(declared)


async def stream_to(
    request: Request, limit: int, sink: Callable[[Iterator[bytes]], T], tap: Callable[[bytes], None]
) -> T:
    """The body handed to ``sink`` as an iterator of blocks (in a worker thread: a store's writes block), each
    block also shown to ``tap``; the upload is never held in memory as a whole (a block at a time, about
    ``STREAM_BLOCK`` bytes). Returns what ``sink`` returns; the body's errors (413, 400) come out of its
    iterator, through ``sink``."""
    blocks = _blocks(request, limit).__aiter__()

    async def next_block() -> bytes | None:
        try:
            return await blocks.__anext__()
        except StopAsyncIteration:
            return None

    def source() -> Iterator[bytes]:
        while (block := anyio.from_thread.run(next_block)) is not None:
            tap(block)
            yield block

    return await anyio.to_thread.run_sync(sink, source())


async def _blocks(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body in blocks of about ``STREAM_BLOCK`` bytes (a thread hop per block, not per network chunk)."""
    pending: list[bytes] = []
    size = 0
    async for chunk in _chunks(request, limit):
        pending.append(chunk)
        size += len(chunk)
        if size >= STREAM_BLOCK:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


async def read_bytes(request: Request, limit: int) -> bytes:
    return b"".join([chunk async for chunk in _chunks(request, limit)])


async def read_array(request: Request, limit: int) -> np.ndarray:
    """The body as a uint8 array. With a Content-Length each chunk is copied into one buffer of that size
    as it arrives: no list of chunks and no join, and numpy's large buffers take fresh memory in huge
    pages, which costs less than the 4 KiB pages of a bytes object where page faults are slow (VMs)."""
    length = declared_length(request, limit)
    if length is None:
        return np.frombuffer(await read_bytes(request, limit), dtype=np.uint8)
    buffer = np.empty(length, dtype=np.uint8)
    size = 0
    async for chunk in _chunks(request, limit):
        buffer[size : size + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
        size += len(chunk)
    return buffer[:size]


async def _chunks(request: Request, limit: int) -> AsyncIterator[bytes]:
    declared_length(request, limit)
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            yield chunk
    except ClientDisconnect:
        raise ServiceError(CLIENT_DISCONNECT, "the client went away before the body was complete") from None


def _too_large(limit: int) -> ServiceError:
    return ServiceError(
        PAYLOAD_TOO_LARGE,
        f"the body is over this server's limit of {limit // (1024 * 1024)} MiB (--max-upload-mb)",
    )
