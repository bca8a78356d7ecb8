"""Python clients of the grail HTTP API on httpx: ``GrailClient`` (sync) and ``AsyncGrailClient``.

Every method that takes a ``graph_id`` takes a graph's name as well.

Both share the request building and answer parsing below, so they differ only in how they wait.
Integer pairs travel as binary integers of the narrowest width that holds them (service.wire: no JSON for a
million pairs, and int16 or int32 where the names fit); string pairs as 'u v' text lines where no name holds
whitespace, others as JSON. Answers come back one bit each.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import json
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import numpy as np

from grail_core.formats import FORMAT_TABLE, GraphFormat, ReadOptions

from .wire import (
    BINARY,
    DEFAULT_PAIR_WIDTH,
    PAIR_WIDTHS,
    answer_lines,
    binary_type,
    media_type,
    narrowest_width,
    pair_dtype,
    text_integers,
    unpack_answers,
)

__all__ = [
    "GrailClient",
    "AsyncGrailClient",
    "GrailServiceError",
    "BuildFailedError",
    "content_type_for",
    "format_for_path",
    "UploadProgress",
    "DEFAULT_URL",
    "API_KEY_VARIABLE",
]

DEFAULT_URL = os.environ.get("GRAIL_URL", "http://127.0.0.1:8000")
API_KEY_VARIABLE = "GRAIL_API_KEY"
_CHUNK = 1 << 20
_PACKED_ANSWERS = f"{BINARY}; width=1"
_TEXT_HEADERS = {"Content-Type": "text/plain", "Accept": "text/plain"}
# The rest of the ASCII whitespace that the server splits text at (single bytes: found at memchr speed).
_SPLIT_ELSEWHERE = (b"\t", b"\r", b"\x0b", b"\x0c")


Record = dict[str, Any]
Progress = Callable[[Record], None]
# (bytes sent, bytes in all) after every chunk of an upload.
UploadProgress = Callable[[int, int], None]
Source = str | os.PathLike[str] | bytes


class GrailServiceError(Exception):
    """The server answered 4xx/5xx; ``status``, ``error`` (its kind) and ``detail`` say what and why."""

    def __init__(self, status: int, error: str, detail: str, body: Any = None, line: int | None = None) -> None:
        """``line``: the graph file's line a format error names (the server's ``line``), kept in the message."""
        where = f" (line {line})" if line is not None and f"line {line}" not in detail else ""
        super().__init__(f"{status} {error}: {detail}{where}")
        self.status = status
        self.error = error
        self.detail = detail
        self.body = body
        self.line = line


class BuildFailedError(GrailServiceError):
    """wait_until_ready found the graph failed; ``record`` holds its error (with the line, for format errors)."""

    def __init__(self, record: Record) -> None:
        error = record.get("error") or {}
        kind, message = str(error.get("type", "BuildError")), str(error.get("message", "build failed"))
        super().__init__(422, kind, message, record, error.get("line"))
        self.record = record


def _suffix(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        return (suffixes[-2] if len(suffixes) > 1 else ""), "gzip"
    return (suffixes[-1] if suffixes else ""), None


def _format_of_suffix(suffix: str) -> GraphFormat | None:
    return next((f for f in FORMAT_TABLE.values() if suffix in f.suffixes), None)


def content_type_for(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    """Content-Type and Content-Encoding of a graph file from its name (``x.gra.gz`` -> gra, gzip), as the
    format table says (``grail_core.formats``): the server maps the media type to the format. DOT and GEXF go
    with their own media types, which the server refuses before the upload with the supported formats named."""
    suffix, encoding = _suffix(path)
    row = _format_of_suffix(suffix)
    return (row.suffixes[suffix] if row is not None else None) or "text/plain", encoding


def format_for_path(path: str | os.PathLike[str]) -> str | None:
    """The ``format`` to send for a file whose format has no media type (``.adjlist``), else None."""
    row = _format_of_suffix(_suffix(path)[0])
    return row.name if row is not None and not row.media_types else None


@dataclass
class _Upload:
    params: dict[str, Any]
    headers: dict[str, str]
    body: bytes | Path
    progress: UploadProgress | None = None
    path: str = "/graphs"  # POST there; PUT /graphs/{name} for a replacement
    size: int = field(init=False)

    @property
    def method(self) -> str:
        return "POST" if self.path == "/graphs" else "PUT"

    def __post_init__(self) -> None:
        self.size = len(self.body) if isinstance(self.body, bytes) else self.body.stat().st_size
        # A known length lets the server refuse an oversized upload (413) before it is sent.
        self.headers["Content-Length"] = str(self.size)

    def content(self) -> bytes | Iterator[bytes]:
        if self.progress is None and isinstance(self.body, bytes):
            return self.body
        return self._reported(_chunks(self.body))

    def content_async(self) -> bytes | AsyncIterator[bytes]:
        if self.progress is None and isinstance(self.body, bytes):
            return self.body
        return self._reported_async(_chunks_async(self.body))

    def _reported(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        sent = 0
        for chunk in chunks:
            yield chunk
            sent += len(chunk)
            if self.progress is not None:
                self.progress(sent, self.size)

    async def _reported_async(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in chunks:
            yield chunk
            sent += len(chunk)
            if self.progress is not None:
                self.progress(sent, self.size)


def _upload(
    source: Source,
    *,
    name: str | None,
    replace: bool,
    dims: int,
    seed: int,
    backend: str | None,
    wait: bool,
    content_type: str | None,
    content_encoding: str | None,
    read: ReadOptions,
    progress: UploadProgress | None,
) -> _Upload:
    if isinstance(source, bytes):
        body: bytes | Path = source
        guessed_type, guessed_encoding = "application/octet-stream", None
    else:
        body = Path(source)
        guessed_type, guessed_encoding = content_type_for(body)
        if read.format is None and content_type is None:
            read = read.as_format(format_for_path(body))
    if replace and not name:
        raise ValueError("replace=True needs the name of the graph to replace")
    params: dict[str, Any] = {"dims": dims, "seed": seed, "wait": "true" if wait else "false"}
    if name is not None and not replace:
        params["name"] = name
    if backend is not None:
        params["backend"] = backend
    params.update((key, _query_value(value)) for key, value in read.given().items())
    headers = {"Content-Type": content_type or guessed_type}
    encoding = content_encoding or guessed_encoding
    if encoding:
        headers["Content-Encoding"] = encoding
    return _Upload(params, headers, body, progress, f"/graphs/{name}" if replace else "/graphs")


def _query_value(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool) else value


def _chunks(body: bytes | Path) -> Iterator[bytes]:
    if isinstance(body, bytes):
        view = memoryview(body)
        for start in range(0, len(view), _CHUNK):
            yield bytes(view[start : start + _CHUNK])
        return
    with open(body, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            yield chunk


async def _chunks_async(body: bytes | Path) -> AsyncIterator[bytes]:
    if isinstance(body, bytes):
        for chunk in _chunks(body):
            yield chunk
        return
    with open(body, "rb") as fh:
        while chunk := await asyncio.to_thread(fh.read, _CHUNK):
            yield chunk


@dataclass
class _Batch:
    """A batch's request: binary integer pairs (a C-contiguous array, sent in chunks without a bytes copy)
    or a JSON body, with its headers; answers are asked for one bit each."""

    count: int
    headers: dict[str, str]
    body: np.ndarray | bytes


def _batch(pairs: Any, width: int | None) -> _Batch:
    if width is None:
        lines = _text_lines(pairs.tolist() if isinstance(pairs, np.ndarray) and pairs.dtype.kind == "U" else pairs)
        if lines is not None:
            return _Batch(len(pairs), {"Content-Type": "text/plain", "Accept": _PACKED_ANSWERS}, lines)
    array = pairs if isinstance(pairs, np.ndarray) else np.asarray(pairs)
    integers = array.dtype.kind in "iu" and array.ndim == 2 and array.shape[1] == 2
    fits = narrowest_width(array) if integers else None
    if width is not None:
        _check_width(width, fits)
    if fits is None:
        as_list = array.tolist() if isinstance(pairs, np.ndarray) else [list(p) for p in pairs]
        body = json.dumps({"pairs": as_list}).encode()
        return _Batch(len(as_list), {"Content-Type": "application/json", "Accept": _PACKED_ANSWERS}, body)
    width = width or fits
    data = np.ascontiguousarray(array, dtype=pair_dtype(width))
    headers = {
        "Content-Type": binary_type(width, DEFAULT_PAIR_WIDTH),
        "Accept": _PACKED_ANSWERS,
        # A known length keeps the body out of chunked transfer encoding.
        "Content-Length": str(data.nbytes),
    }
    return _Batch(len(data), headers, data)


def _text_lines(pairs: Any) -> bytes | None:
    """The names of pairs of string names as text, separated by single spaces (the server reads any ASCII
    whitespace between names), when no name is empty or holds ASCII whitespace; None otherwise. Half the
    time of json.dumps for a million pairs, and smaller."""
    if isinstance(pairs, np.ndarray) or not pairs:
        return None
    try:
        if set(map(len, pairs)) != {2}:
            return None
        names = list(itertools.chain.from_iterable(pairs))
        if not all(names):  # an empty name
            return None
        text = " ".join(names).encode("utf-8") + b"\n"
    except (TypeError, UnicodeEncodeError):  # a name that is not a string, or a lone surrogate (JSON carries it)
        return None
    if text.count(b" ") != len(names) - 1 or text.count(b"\n") != 1 or any(s in text for s in _SPLIT_ELSEWHERE):
        return None
    return text


def _check_width(width: int, fits: int | None) -> None:
    if width not in PAIR_WIDTHS:
        raise ValueError(f"width must be one of {PAIR_WIDTHS}, not {width}")
    if fits is None:
        raise ValueError("width is for (M, 2) arrays of integer names of at most 64 bits; these pairs go as JSON")
    if width < fits:
        raise ValueError(f"these names need {fits} bits; width={width} cannot carry them")


def _buffer_chunks(data: np.ndarray) -> Iterable[bytes]:
    # Views, not bytes copies: httpx sends any bytes-like chunk, though its types say bytes.
    return cast(Iterable[bytes], _views(data))


def _views(data: np.ndarray) -> Iterator[memoryview]:
    view = data.reshape(-1).view(np.uint8).data
    for start in range(0, len(view), _CHUNK):
        yield view[start : start + _CHUNK]


async def _buffer_chunks_async(data: np.ndarray) -> AsyncIterable[bytes]:
    for chunk in _buffer_chunks(data):
        yield chunk


def _integer_pairs(lines: bytes) -> np.ndarray | None:
    """The pairs of 'u v' lines when every name is an integer; None for the server to read the text."""
    numbers = text_integers(lines)
    return numbers.reshape(-1, 2) if numbers is not None and numbers.size % 2 == 0 else None


def _answers(response: httpx.Response, count: int) -> np.ndarray:
    _check(response)
    width = media_type(response.headers.get("content-type", BINARY))[1].get("width", "8")
    return unpack_answers(response.content, count, int(width))


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code < 400:
        return response
    try:
        body = response.json()
        detail, error, line = str(body.get("detail")), str(body.get("error", "HTTPError")), body.get("line")
    except ValueError:
        body, detail, error, line = response.text, response.text or response.reason_phrase, "HTTPError", None
    raise GrailServiceError(response.status_code, error, detail, body, line)


def _auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY`` for ``api_key``, else for ``GRAIL_API_KEY``; none without either."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _status_filter(status: str | Sequence[str] | None) -> dict[str, Any]:
    if status is None:
        return {}
    return {"status": [status] if isinstance(status, str) else list(status)}


def _finished(record: Record) -> bool:
    """Whether the graph answers queries: ready, and (after a server's start) loaded."""
    if record["status"] == "failed":
        raise BuildFailedError(record)
    return record["status"] == "ready" and not record.get("loading")


class GrailClient:
    """Synchronous client. Use as a context manager, or call ``close()``. ``api_key`` (default: the variable
    ``GRAIL_API_KEY``) is sent as ``Authorization: Bearer KEY`` to a server that requires keys."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout: float = 60.0,
        api_key: str | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout, headers=_auth_headers(api_key))

    def __enter__(self) -> GrailClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def health(self) -> Record:
        return _check(self.http.get("/health")).json()

    def upload(
        self,
        source: Source,
        *,
        name: str | None = None,
        replace: bool = False,
        format: str | None = None,
        dims: int = 2,
        seed: int = 0,
        backend: str | None = None,
        wait: bool = False,
        content_type: str | None = None,
        content_encoding: str | None = None,
        source_column: str | int | None = None,
        target_column: str | int | None = None,
        header: bool | None = None,
        on_upload: UploadProgress | None = None,
    ) -> Record:
        """Send a graph file (path, streamed) or bytes; returns its record (ready when ``wait``).

        ``name``: a name unique on the server, which every call here takes as well as the id (409 when another
        graph holds it); with ``replace``, the new graph takes the name over from the graph holding it once it
        is built (``PUT /graphs/{name}``: queries by the name answer from the old one until then, and a failed
        build leaves it in place).

        The format is the server's to tell (from ``format``, else the Content-Type, which a file's name sets:
        .csv .tsv .json .gra .parquet .arrow .feather .graphml .mtx .adjlist, gzip-compressed too; else from
        the content). ``source_column``/``target_column`` (a name or a 0-based position) and ``header``
        choose how an edge list or table is read. ``on_upload(sent, total)`` is called after every chunk sent.
        """
        up = _upload(
            source,
            name=name,
            replace=replace,
            dims=dims,
            seed=seed,
            backend=backend,
            wait=wait,
            content_type=content_type,
            content_encoding=content_encoding,
            read=ReadOptions(format, header, source_column, target_column),
            progress=on_upload,
        )
        content = up.content()
        timeout = None if wait else httpx.USE_CLIENT_DEFAULT
        return _check(
            self.http.request(
                up.method, up.path, params=up.params, headers=up.headers, content=content, timeout=timeout
            )
        ).json()

    def get(self, graph_id: str) -> Record:
        return _check(self.http.get(f"/graphs/{graph_id}")).json()

    def list(self, status: str | Sequence[str] | None = None) -> list[Record]:
        """All graphs, oldest first; ``status`` keeps those in the given status(es) (e.g. ``"failed"``)."""
        return _check(self.http.get("/graphs", params=_status_filter(status))).json()["graphs"]

    def wait_until_ready(
        self, graph_id: str, *, timeout: float | None = None, poll: float = 0.1, on_progress: Progress | None = None
    ) -> Record:
        """Poll until ready; BuildFailedError if the build failed, TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.get(graph_id)
            if on_progress is not None:
                on_progress(record)
            if _finished(record):
                return record
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"graph {graph_id} is still {record['status']} after {timeout} s")
            time.sleep(poll)

    def reachable(self, graph_id: str, source: int | str, target: int | str) -> bool:
        response = self.http.get(f"/graphs/{graph_id}/reachable", params={"source": source, "target": target})
        return bool(_check(response).json()["reachable"])

    def reachable_many(self, graph_id: str, pairs: Sequence[tuple[int | str, int | str]]) -> builtins.list[bool]:
        """A few pairs in one GET (the server caps how many); use query_batch for more."""
        text = ";".join(f"{u},{v}" for u, v in pairs)
        return _check(self.http.get(f"/graphs/{graph_id}/reachable", params={"pairs": text})).json()["reachable"]

    def path(self, graph_id: str, source: int | str, target: int | str) -> builtins.list[int | str] | None:
        """A shortest path from source to target (names, both ends included), None when unreachable."""
        response = self.http.get(f"/graphs/{graph_id}/path", params={"source": source, "target": target})
        return _check(response).json()["path"]

    def descendants(
        self, graph_id: str, node: int | str, *, ancestors: bool = False, offset: int = 0, limit: int | None = None
    ) -> Record:
        """``{"node", "count", "offset", "nodes"}``: what ``node`` reaches (or, with ``ancestors``, what reaches
        it), itself excepted, a page of it with ``offset``/``limit``."""
        params: dict[str, Any] = {"node": node, "offset": offset}
        if limit is not None:
            params["limit"] = limit
        kind = "ancestors" if ancestors else "descendants"
        return _check(self.http.get(f"/graphs/{graph_id}/{kind}", params=params)).json()

    def update_edges(
        self, graph_id: str, add: Sequence[Sequence[int | str]] = (), remove: Sequence[Sequence[int | str]] = ()
    ) -> Record:
        """Add and remove edges; ``{"version", "added", "removed", ...}`` once the server has journaled them."""
        body = {"add": [list(edge) for edge in add], "remove": [list(edge) for edge in remove]}
        return _check(self.http.post(f"/graphs/{graph_id}/edges", json=body)).json()

    def query_batch(self, graph_id: str, pairs: Any, *, width: int | None = None) -> np.ndarray:
        """Answers (bool array) for an (M, 2) array or a list of pairs of names. Integer names go as binary
        integers of ``width`` bits (16, 32 or 64; default: the narrowest that holds them)."""
        batch = _batch(pairs, width)
        content = _buffer_chunks(batch.body) if isinstance(batch.body, np.ndarray) else batch.body
        response = self.http.post(f"/graphs/{graph_id}/queries", content=content, headers=batch.headers)
        return _answers(response, batch.count)

    def query_lines(self, graph_id: str, lines: bytes) -> bytes:
        """'u v' text lines in, '0'/'1' lines out (what the CLI pipes). Integer names are parsed here and go
        as binary pairs, a fraction of the bytes; other names go as the text itself."""
        pairs = _integer_pairs(lines)
        if pairs is not None:
            return answer_lines(self.query_batch(graph_id, pairs))
        response = self.http.post(f"/graphs/{graph_id}/queries", content=lines, headers=_TEXT_HEADERS)
        return _check(response).content

    def delete(self, graph_id: str) -> None:
        _check(self.http.delete(f"/graphs/{graph_id}"))


class AsyncGrailClient:
    """The same API as GrailClient, awaitable. Use as an async context manager, or ``await aclose()``."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout: float = 60.0,
        api_key: str | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=_auth_headers(api_key))

    async def __aenter__(self) -> AsyncGrailClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def health(self) -> Record:
        return _check(await self.http.get("/health")).json()

    async def upload(
        self,
        source: Source,
        *,
        name: str | None = None,
        replace: bool = False,
        format: str | None = None,
        dims: int = 2,
        seed: int = 0,
        backend: str | None = None,
        wait: bool = False,
        content_type: str | None = None,
        content_encoding: str | None = None,
        source_column: str | int | None = None,
        target_column: str | int | None = None,
        header: bool | None = None,
        on_upload: UploadProgress | None = None,
    ) -> Record:
        up = _upload(
            source,
            name=name,
            replace=replace,
            dims=dims,
            seed=seed,
            backend=backend,
            wait=wait,
            content_type=content_type,
            content_encoding=content_encoding,
            read=ReadOptions(format, header, source_column, target_column),
            progress=on_upload,
        )
        content = up.content_async()
        timeout = None if wait else httpx.USE_CLIENT_DEFAULT
        return _check(
            await self.http.request(
                up.method, up.path, params=up.params, headers=up.headers, content=content, timeout=timeout
            )
        ).json()

    async def get(self, graph_id: str) -> Record:
        return _check(await self.http.get(f"/graphs/{graph_id}")).json()

    async def list(self, status: str | Sequence[str] | None = None) -> list[Record]:
        return _check(await self.http.get("/graphs", params=_status_filter(status))).json()["graphs"]

    async def wait_until_ready(
        self, graph_id: str, *, timeout: float | None = None, poll: float = 0.1, on_progress: Progress | None = None
    ) -> Record:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = await self.get(graph_id)
            if on_progress is not None:
                on_progress(record)
            if _finished(record):
                return record
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"graph {graph_id} is still {record['status']} after {timeout} s")
            await asyncio.sleep(poll)

    async def reachable(self, graph_id: str, source: int | str, target: int | str) -> bool:
        response = await self.http.get(f"/graphs/{graph_id}/reachable", params={"source": source, "target": target})
        return bool(_check(response).json()["reachable"])

    async def reachable_many(self, graph_id: str, pairs: Sequence[tuple[int | str, int | str]]) -> builtins.list[bool]:
        text = ";".join(f"{u},{v}" for u, v in pairs)
        return _check(await self.http.get(f"/graphs/{graph_id}/reachable", params={"pairs": text})).json()["reachable"]

    async def query_batch(self, graph_id: str, pairs: Any, *, width: int | None = None) -> np.ndarray:
        batch = _batch(pairs, width)
        content = _buffer_chunks_async(batch.body) if isinstance(batch.body, np.ndarray) else batch.body
        response = await self.http.post(f"/graphs/{graph_id}/queries", content=content, headers=batch.headers)
        return _answers(response, batch.count)

    async def query_lines(self, graph_id: str, lines: bytes) -> bytes:
        pairs = _integer_pairs(lines)
        if pairs is not None:
            return answer_lines(await self.query_batch(graph_id, pairs))
        response = await self.http.post(f"/graphs/{graph_id}/queries", content=lines, headers=_TEXT_HEADERS)
        return _check(response).content

    async def delete(self, graph_id: str) -> None:
        _check(await self.http.delete(f"/graphs/{graph_id}"))
