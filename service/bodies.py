"""Request bodies read chunk by chunk under the size limit (--max-upload-mb): to a file, to bytes, or into
one numpy buffer.

Every read refuses a body over the limit with 413, from its Content-Length before any transfer where it is
declared, and turns a client that goes away mid-body into a 400.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
from starlette.requests import ClientDisconnect, Request

from .errors import CLIENT_DISCONNECT, PAYLOAD_TOO_LARGE, ServiceError

__all__ = ["declared_length", "stream_to_file", "read_bytes", "read_array"]


def declared_length(request: Request, limit: int) -> int | None:
    """The body's Content-Length (None when the body is chunked); 413 when it is over ``limit``."""
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit():
        return None
    if int(declared) > limit:
        raise _too_large(limit)
    return int(declared)


async def stream_to_file(request: Request, path: Path, limit: int) -> int:
    """Copy the body to ``path``; the upload is never held in memory as a whole. Returns its size."""
    size = 0
    with open(path, "wb") as fh:
        async for chunk in _chunks(request, limit):
            size += len(chunk)
            fh.write(chunk)
    return size


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
