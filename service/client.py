"""Python clients of the grail HTTP API on httpx: ``GrailClient`` (sync) and ``AsyncGrailClient``.

Every method that takes a ``graph_id`` takes a graph's name as well.

Every API call is written once, in ``_Calls``, as a plan: a generator that yields the HTTP requests it needs
(``Call``) or a pause (``Pause``), receives each answer, and returns the result. ``GrailClient`` runs plans
with httpx's blocking client and ``time.sleep``, ``AsyncGrailClient`` with its async client and
``asyncio.sleep``: the two have the same methods by construction (a test enumerates them). Requests that are
safe to repeat are retried on 503 (and 429) with backoff, waiting what ``Retry-After`` says (``Retry``).

Integer pairs travel as binary integers of the narrowest width that holds them (service.wire: no JSON for a
million pairs, and int16 or int32 where the names fit); string pairs as 'u v' text lines where no name holds
whitespace, others as JSON. Answers come back one bit each. pandas DataFrames and Arrow tables (their first two
columns) are taken as arrays, at the speed of lists of tuples.

Errors are ``service.exceptions``: one class per kind of error answer under ``GrailClientError``.

Read-your-writes across replicas: every read of a graph takes ``min_version``, sent as ``Grail-Min-Version``; the
server answers once it holds that version or a newer one, else 503 (retried as any 503, then
``VersionNotHereError``). ``update_edges`` answers the version its update made, so that a read through any
replica sees it::

    client.reachable("g", "a", "c", min_version=client.update_edges("g", add=[("b", "c")])["version"])
"""

from __future__ import annotations

import asyncio
import builtins
import email.utils
import itertools
import json
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import httpx
import numpy as np

from grail_core.formats import FORMAT_TABLE, GraphFormat, ReadOptions

from .exceptions import (
    BuildFailedError,
    GrailClientError,
    GrailConnectionError,
    GrailServiceError,
    error_class,
)
from .wire import (
    BINARY,
    DEFAULT_PAIR_WIDTH,
    MIN_VERSION_HEADER,
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
    "Retry",
    "GrailClientError",
    "GrailConnectionError",
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
Name = int | str
T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True)
class Retry:
    """When a request is sent again: an answer in ``statuses`` (the server says: not now) to a request that is
    safe to repeat (GET, DELETE, the query batches; never an upload or an edge update), or a 409 that says when
    to come back (``Retry-After``: GraphLoading after a server's start), up to ``attempts``
    tries in all. Each wait is what the answer's ``Retry-After`` says, else ``backoff`` seconds doubled at each
    try (with up to a quarter more at random, so that clients do not come back together); a wait over
    ``max_wait`` is not waited for: the error is raised. ``connect_errors``: a request that could not connect
    (nothing was sent) is tried again too. ``Retry(attempts=1)`` never retries."""

    attempts: int = 4
    backoff: float = 0.25
    max_wait: float = 30.0
    statuses: frozenset[int] = frozenset({429, 503})
    connect_errors: bool = False

    def wait(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before try ``attempt + 1`` after this answer (None: connect error), or None: no retry."""
        if attempt >= self.attempts:
            return None
        if response is not None and not self.retries(response):
            return None
        told = _retry_after(response.headers.get("retry-after")) if response is not None else None
        wait = told if told is not None else self.backoff * 2 ** (attempt - 1) * (1 + random.random() / 4)
        return wait if wait <= self.max_wait else None

    def retries(self, response: httpx.Response) -> bool:
        """An answer in ``statuses``, or a 409 with Retry-After: the graph's state, for a moment (a graph
        loading after the server's start, another server's update first)."""
        status = response.status_code
        return status in self.statuses or (status == 409 and "retry-after" in response.headers)


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP date."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


class _Body:
    """A request body that can be sent again (a retry): its chunks made afresh for each send, for either
    client; ``on_chunk(sent, total)`` after each chunk."""

    def __init__(self, source: bytes | Path | np.ndarray, on_chunk: UploadProgress | None = None) -> None:
        self.source = source
        self.on_chunk = on_chunk
        if isinstance(source, np.ndarray):
            self.size = int(source.nbytes)
        else:
            self.size = len(source) if isinstance(source, bytes) else source.stat().st_size

    def chunks(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self._pieces():
            yield chunk
            sent += len(chunk)
            if self.on_chunk is not None:
                self.on_chunk(sent, self.size)

    async def chunks_async(self) -> AsyncIterator[bytes]:
        if isinstance(self.source, Path):
            # File reads in a thread: the event loop goes on while the disk answers.
            sent = 0
            with open(self.source, "rb") as fh:
                while chunk := await asyncio.to_thread(fh.read, _CHUNK):
                    yield chunk
                    sent += len(chunk)
                    if self.on_chunk is not None:
                        self.on_chunk(sent, self.size)
            return
        for chunk in self.chunks():
            yield chunk

    def _pieces(self) -> Iterator[bytes]:
        if isinstance(self.source, Path):
            with open(self.source, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    yield chunk
            return
        # Views, not bytes copies: httpx sends any bytes-like chunk, though its types say bytes.
        view = memoryview(
            self.source.reshape(-1).view(np.uint8).data if isinstance(self.source, np.ndarray) else self.source
        )
        for start in range(0, len(view), _CHUNK):
            yield cast(bytes, view[start : start + _CHUNK])


@dataclass
class Call:
    """One HTTP request of a plan. ``idempotent``: safe to send again (``Retry``)."""

    method: str
    url: str
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | _Body | None = None
    idempotent: bool = True
    timeout: Any = httpx.USE_CLIENT_DEFAULT


@dataclass(frozen=True)
class Pause:
    """A plan's wait between polls."""

    seconds: float


Plan = Generator["Call | Pause", "httpx.Response | None", T]


def _check(response: httpx.Response) -> httpx.Response:
    """The answer, or the exception of its kind (``service.exceptions``) for an error answer."""
    if response.status_code < 400:
        return response
    try:
        body = response.json()
        detail, error, line = str(body.get("detail")), str(body.get("error", "HTTPError")), body.get("line")
    except (ValueError, AttributeError):
        body, detail, error, line = response.text, response.text or response.reason_phrase, "HTTPError", None
    raise error_class(error, response.status_code)(response.status_code, error, detail, body, line)


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


def _got(reply: httpx.Response | None) -> httpx.Response:
    assert reply is not None
    return _check(reply)


def _upload_call(
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
) -> Call:
    if isinstance(source, bytes):
        body = _Body(source, progress)
        guessed_type, guessed_encoding = "application/octet-stream", None
    else:
        path = Path(source)
        body = _Body(path, progress)
        guessed_type, guessed_encoding = content_type_for(path)
        if read.format is None and content_type is None:
            read = read.as_format(format_for_path(path))
    if replace and not name:
        raise ValueError("replace=True needs the name of the graph to replace")
    params: dict[str, Any] = {"dims": dims, "seed": seed, "wait": "true" if wait else "false"}
    if name is not None and not replace:
        params["name"] = name
    if backend is not None:
        params["backend"] = backend
    params.update((key, _query_value(value)) for key, value in read.given().items())
    # A known length lets the server refuse an oversized upload (413) before it is sent.
    headers = {"Content-Type": content_type or guessed_type, "Content-Length": str(body.size)}
    encoding = content_encoding or guessed_encoding
    if encoding:
        headers["Content-Encoding"] = encoding
    timeout = None if wait else httpx.USE_CLIENT_DEFAULT
    # PUT /graphs/{name} uploads a replacement of the graph holding the name.
    method, route = ("PUT", f"/graphs/{name}") if replace else ("POST", "/graphs")
    return Call(method, route, params, headers, body, idempotent=False, timeout=timeout)


def _query_value(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool) else value


@dataclass
class _Batch:
    """A batch's request: binary integer pairs (a C-contiguous array, sent in chunks without a bytes copy),
    text lines or a JSON body, with its headers; answers are asked for one bit each."""

    count: int
    headers: dict[str, str]
    body: np.ndarray | bytes


def _as_pairs(pairs: Any) -> Any:
    """A pandas DataFrame or an Arrow table as its first two columns: an (M, 2) integer array where both hold
    integers, else the pair of Arrow arrays (``_columns_text`` writes them as text in Arrow's own loops);
    anything else as it is."""
    if hasattr(pairs, "iloc") and hasattr(pairs, "columns"):  # pandas, without importing it
        if pairs.shape[1] != 2:
            raise ValueError("a table of pairs has two columns, sources then targets")
        columns = [pairs.iloc[:, i] for i in range(2)]
        if all(column.dtype.kind in "iu" for column in columns):
            return np.column_stack([column.to_numpy() for column in columns])
        import pyarrow as pa

        return tuple(pa.array(column, from_pandas=True) for column in columns)
    if hasattr(pairs, "column") and hasattr(pairs, "num_columns"):  # pyarrow.Table
        if pairs.num_columns != 2:
            raise ValueError("a table of pairs has two columns, sources then targets")
        arrays = [pairs.column(i).combine_chunks() for i in range(2)]
        if all(array.type.id in _ARROW_INTEGERS for array in arrays):
            return np.column_stack([array.to_numpy() for array in arrays])
        return tuple(arrays)
    return pairs


# Arrow's integer type ids (int8 ... uint64), read without importing pyarrow at the client's import.
_ARROW_INTEGERS = frozenset(range(2, 10))


def _columns_text(sources: Any, targets: Any) -> bytes | None:
    """Two Arrow columns of string names as 'u v' lines, joined by Arrow's kernels (the joined array's data
    buffer is the text); None where a name is empty, null or holds whitespace (such pairs go as JSON)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        columns = [array.cast(pa.large_string()) for array in (sources, targets)]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    for column in columns:
        if column.null_count or pc.any(pc.equal(pc.utf8_length(column), 0)).as_py():
            return None
    text = pa.large_string()
    lines = pc.binary_join_element_wise(columns[0], columns[1], pa.scalar(" ", text))  # "u v"
    lines = pc.binary_join_element_wise(lines, pa.scalar("", text), pa.scalar("\n", text))  # "u v\n"
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    joined = bytes(memoryview(lines.buffers()[2])[offsets[0] : offsets[-1]])
    # A name with whitespace in it shows as a separator too many (counted at memchr speed).
    count = len(lines)
    if joined.count(b" ") != count or joined.count(b"\n") != count or any(s in joined for s in _SPLIT_ELSEWHERE):
        return None
    return joined


def _batch(pairs: Any, width: int | None) -> _Batch:
    pairs = _as_pairs(pairs)
    if isinstance(pairs, tuple) and len(pairs) == 2 and hasattr(pairs[0], "type"):  # Arrow columns of names
        lines = _columns_text(*pairs) if width is None else None
        if lines is not None:
            return _Batch(len(pairs[0]), {"Content-Type": "text/plain", "Accept": _PACKED_ANSWERS}, lines)
        pairs = list(zip(pairs[0].to_pylist(), pairs[1].to_pylist(), strict=True))
    if width is None:
        lines = _text_lines(pairs)
        if lines is not None:
            return _Batch(len(pairs), {"Content-Type": "text/plain", "Accept": _PACKED_ANSWERS}, lines)
    array = pairs if isinstance(pairs, np.ndarray) else np.asarray(pairs)
    integers = array.dtype.kind in "iu" and array.ndim == 2 and array.shape[1] == 2
    fits = narrowest_width(array) if integers else None
    if width is not None:
        _check_width(width, fits)
    if fits is None:
        listed = array.tolist() if isinstance(pairs, np.ndarray) else [list(p) for p in pairs]
        body = json.dumps({"pairs": listed}).encode()
        return _Batch(len(listed), {"Content-Type": "application/json", "Accept": _PACKED_ANSWERS}, body)
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
    if isinstance(pairs, np.ndarray):
        if pairs.dtype.kind not in "UO" or pairs.ndim != 2 or pairs.shape[1] != 2 or not pairs.size:
            return None
        names = pairs.reshape(-1).tolist()  # one flat list: no list per pair
    elif not pairs:
        return None
    else:
        if set(map(len, pairs)) != {2}:
            return None
        names = list(itertools.chain.from_iterable(pairs))
    try:
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


def _integer_pairs(lines: bytes) -> np.ndarray | None:
    """The pairs of 'u v' lines when every name is an integer; None for the server to read the text."""
    numbers = text_integers(lines)
    return numbers.reshape(-1, 2) if numbers is not None and numbers.size % 2 == 0 else None


def _answers(response: httpx.Response, count: int, unknown: str) -> np.ndarray:
    """The answers of a batch: bits (service.wire), or JSON where null may answer (a masked array, masked where
    the pair names an unknown node)."""
    if unknown == "null":
        listed = response.json()["reachable"]
        missing = np.fromiter((answer is None for answer in listed), dtype=np.bool_, count=len(listed))
        values = np.fromiter((bool(answer) for answer in listed), dtype=np.bool_, count=len(listed))
        return np.ma.MaskedArray(values, mask=missing)
    width = media_type(response.headers.get("content-type", BINARY))[1].get("width", "8")
    return unpack_answers(response.content, count, int(width))


def _unknown(unknown: str) -> dict[str, str]:
    """The ``unknown`` parameter, sent only where it is not the default."""
    if unknown not in ("error", "false", "null"):
        raise ValueError(f"unknown is 'error', 'false' or 'null', not {unknown!r}")
    return {} if unknown == "error" else {"unknown": unknown}


def _auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY`` for ``api_key``, else for ``GRAIL_API_KEY``; none without either."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _min_version(min_version: int | None) -> dict[str, str]:
    """The header of a read that needs version ``min_version`` of its graph, or a newer one."""
    return {} if min_version is None else {MIN_VERSION_HEADER: str(int(min_version))}


def _status_filter(status: str | Sequence[str] | None) -> dict[str, Any]:
    if status is None:
        return {}
    return {"status": [status] if isinstance(status, str) else list(status)}


def _finished(record: Record) -> bool:
    """Whether the graph answers queries: ready, and (after a server's start) loaded."""
    if record["status"] == "failed":
        raise BuildFailedError(record)
    return record["status"] == "ready" and not record.get("loading")


class _Calls:
    """Every call of the API, once, as a plan (see the module's docstring). ``graph_id`` is a graph's id or its
    name."""

    def _health(self) -> Plan[Record]:
        """Liveness and what the server is: its version, default backend, GPU, graphs by status."""
        return _got((yield Call("GET", "/health"))).json()

    def _ready(self) -> Plan[Record]:
        """``/ready``'s answer, whether ready (200) or not yet (503): ``{"ready": ..., "kernels": ...}``."""
        reply = yield Call("GET", "/ready")
        assert reply is not None
        return _check(reply).json() if reply.status_code != 503 else reply.json()

    def _upload(
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
    ) -> Plan[Record]:
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
        call = _upload_call(
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
        return _got((yield call)).json()

    def _get(self, graph_id: str, *, min_version: int | None = None) -> Plan[Record]:
        """A graph's record: status, build progress, stats, version. ``min_version``, here and in every read of
        a graph: answered once the server holds that version or a newer one (VersionNotHereError otherwise)."""
        return _got((yield Call("GET", f"/graphs/{graph_id}", headers=_min_version(min_version)))).json()

    def _list(self, status: str | Sequence[str] | None = None) -> Plan[builtins.list[Record]]:
        """All graphs, oldest first; ``status`` keeps those in the given status(es) (e.g. ``"failed"``)."""
        return _got((yield Call("GET", "/graphs", _status_filter(status)))).json()["graphs"]

    def _delete(self, graph_id: str) -> Plan[None]:
        """Forget a graph and remove its files."""
        _got((yield Call("DELETE", f"/graphs/{graph_id}")))

    def _wait_until_ready(
        self, graph_id: str, *, timeout: float | None = None, poll: float = 0.1, on_progress: Progress | None = None
    ) -> Plan[Record]:
        """Poll until ready; BuildFailedError if the build failed, TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = _got((yield Call("GET", f"/graphs/{graph_id}"))).json()
            if on_progress is not None:
                on_progress(record)
            if _finished(record):
                return record
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"graph {graph_id} is still {record['status']} after {timeout} s")
            yield Pause(poll)

    def _reachable(
        self, graph_id: str, source: Name, target: Name, *, unknown: str = "error", min_version: int | None = None
    ) -> Plan[bool | None]:
        """Whether ``source`` reaches ``target``. ``unknown``: what answers a pair naming a node the graph
        lacks: ``"error"`` (UnknownNodeError), ``"false"``, or ``"null"`` (None)."""
        params = {"source": source, "target": target, **_unknown(unknown)}
        call = Call("GET", f"/graphs/{graph_id}/reachable", params, _min_version(min_version))
        answer = _got((yield call)).json()["reachable"]
        return None if answer is None else bool(answer)

    def _reachable_many(
        self,
        graph_id: str,
        pairs: Sequence[tuple[Name, Name]],
        *,
        unknown: str = "error",
        min_version: int | None = None,
    ) -> Plan[builtins.list[bool | None]]:
        """A few pairs in one GET (the server caps how many); query_batch takes any number."""
        params = {"pairs": ";".join(f"{u},{v}" for u, v in pairs), **_unknown(unknown)}
        call = Call("GET", f"/graphs/{graph_id}/reachable", params, _min_version(min_version))
        return _got((yield call)).json()["reachable"]

    def _query_batch(
        self,
        graph_id: str,
        pairs: Any,
        *,
        width: int | None = None,
        unknown: str = "error",
        min_version: int | None = None,
    ) -> Plan[np.ndarray]:
        """Answers (bool array) for an (M, 2) array, a list of pairs of names, a pandas DataFrame or an Arrow
        table (their first two columns). Integer names go as binary integers of ``width`` bits (16, 32 or 64;
        default: the narrowest that holds them). ``unknown="null"`` answers a masked array, masked where a pair
        names a node the graph lacks; ``"false"`` answers False there."""
        batch = _batch(pairs, width)
        headers = {
            **batch.headers,
            **({"Accept": "application/json"} if unknown == "null" else {}),
            **_min_version(min_version),
        }
        body = _Body(batch.body) if isinstance(batch.body, np.ndarray) else batch.body
        reply = yield Call("POST", f"/graphs/{graph_id}/queries", _unknown(unknown), headers, body)
        return _answers(_got(reply), batch.count, unknown)

    def _query_lines(
        self, graph_id: str, lines: bytes, *, unknown: str = "error", min_version: int | None = None
    ) -> Plan[bytes]:
        """'u v' text lines in, '0'/'1' lines out (``null`` lines with ``unknown="null"``). Integer names are
        parsed here and go as binary pairs, a fraction of the bytes; other names go as the text itself."""
        pairs = _integer_pairs(lines)
        if pairs is not None and unknown != "null":
            batch = self._query_batch(graph_id, pairs, unknown=unknown, min_version=min_version)
            return answer_lines((yield from batch))
        headers = {**_TEXT_HEADERS, **_min_version(min_version)}
        reply = yield Call("POST", f"/graphs/{graph_id}/queries", _unknown(unknown), headers, lines)
        return _got(reply).content

    def _path(
        self, graph_id: str, source: Name, target: Name, *, min_version: int | None = None
    ) -> Plan[builtins.list[Name] | None]:
        """A shortest path from source to target (names, both ends included), None when unreachable."""
        params = {"source": source, "target": target}
        reply = yield Call("GET", f"/graphs/{graph_id}/path", params, _min_version(min_version))
        return _got(reply).json()["path"]

    def _descendants(
        self,
        graph_id: str,
        node: Name,
        *,
        ancestors: bool = False,
        offset: int = 0,
        limit: int | None = None,
        min_version: int | None = None,
    ) -> Plan[Record]:
        """``{"node", "count", "offset", "nodes"}``: what ``node`` reaches (or, with ``ancestors``, what reaches
        it), itself excepted, a page of it with ``offset``/``limit``."""
        params: dict[str, Any] = {"node": node, "offset": offset}
        if limit is not None:
            params["limit"] = limit
        kind = "ancestors" if ancestors else "descendants"
        return _got((yield Call("GET", f"/graphs/{graph_id}/{kind}", params, _min_version(min_version)))).json()

    def _ancestors(
        self, graph_id: str, node: Name, *, offset: int = 0, limit: int | None = None, min_version: int | None = None
    ) -> Plan[Record]:
        """``descendants(..., ancestors=True)``: the nodes that reach ``node``."""
        listing = self._descendants(graph_id, node, ancestors=True, offset=offset, limit=limit, min_version=min_version)
        return (yield from listing)

    def _count(
        self, graph_id: str, node: Name, *, ancestors: bool = False, min_version: int | None = None
    ) -> Plan[Record]:
        """``{"node", "count", "method"}``: how many nodes ``node`` reaches (or reach it), without listing them."""
        kind = "ancestors" if ancestors else "descendants"
        params = {"node": node, "count": "true"}
        reply = yield Call("GET", f"/graphs/{graph_id}/{kind}", params, _min_version(min_version))
        return _got(reply).json()

    def _update_edges(
        self, graph_id: str, add: Sequence[Sequence[Name]] = (), remove: Sequence[Sequence[Name]] = ()
    ) -> Plan[Record]:
        """Add and remove edges; ``{"version", "added", "removed", ...}`` once the server has journaled them:
        ``version`` is what a read passes as ``min_version`` to see the update through any replica. Not retried:
        an update is not safe to send twice."""
        body = json.dumps({"add": [list(edge) for edge in add], "remove": [list(edge) for edge in remove]})
        headers = {"Content-Type": "application/json"}
        call = Call("POST", f"/graphs/{graph_id}/edges", {}, headers, body.encode(), idempotent=False)
        return _got((yield call)).json()


def _sync(plan: Callable[Concatenate[Any, P], Plan[T]]) -> Callable[Concatenate[Any, P], T]:
    """The blocking method of a plan."""

    def method(self: GrailClient, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(plan(self, *args, **kwargs))

    return _named(method, plan)


def _async(plan: Callable[Concatenate[Any, P], Plan[T]]) -> Callable[Concatenate[Any, P], Awaitable[T]]:
    """The awaitable method of a plan."""

    async def method(self: AsyncGrailClient, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(plan(self, *args, **kwargs))

    return _named(method, plan)


def _named(method: Any, plan: Callable[..., Any]) -> Any:
    method.__name__ = method.__qualname__ = plan.__name__.removeprefix("_")
    method.__doc__ = plan.__doc__
    method.__wrapped__ = plan  # inspect.signature shows the plan's parameters
    return method


class GrailClient(_Calls):
    """Synchronous client. Use as a context manager, or call ``close()``. ``api_key`` (default: the variable
    ``GRAIL_API_KEY``) is sent as ``Authorization: Bearer KEY`` to a server that requires keys; ``retry`` says
    when a request is sent again (``Retry``)."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout: float = 60.0,
        api_key: str | None = None,
        retry: Retry | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout, headers=_auth_headers(api_key))
        self.retry = retry or Retry()

    def __enter__(self) -> GrailClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _run(self, plan: Plan[T]) -> T:
        try:
            step = next(plan)
            while True:
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    step = plan.send(None)
                else:
                    step = plan.send(self._send(step))
        except StopIteration as done:
            return cast(T, done.value)

    def _send(self, call: Call) -> httpx.Response:
        for attempt in itertools.count(1):
            content = call.body.chunks() if isinstance(call.body, _Body) else call.body
            try:
                response = self.http.request(
                    call.method,
                    call.url,
                    params=call.params,
                    headers=call.headers,
                    content=content,
                    timeout=call.timeout,
                )
            except httpx.TransportError as exc:
                wait = _connect_retry(self.retry, call, attempt, exc)
                if wait is None:
                    raise GrailConnectionError(f"{call.method} {self.http.base_url}{call.url}: {exc}") from exc
                time.sleep(wait)
                continue
            wait = self.retry.wait(attempt, response) if call.idempotent else None
            if wait is None:
                return response
            response.close()
            time.sleep(wait)
        raise AssertionError("unreachable")

    health = _sync(_Calls._health)
    ready = _sync(_Calls._ready)
    upload = _sync(_Calls._upload)
    get = _sync(_Calls._get)
    list = _sync(_Calls._list)
    delete = _sync(_Calls._delete)
    wait_until_ready = _sync(_Calls._wait_until_ready)
    reachable = _sync(_Calls._reachable)
    reachable_many = _sync(_Calls._reachable_many)
    query_batch = _sync(_Calls._query_batch)
    query_lines = _sync(_Calls._query_lines)
    path = _sync(_Calls._path)
    descendants = _sync(_Calls._descendants)
    ancestors = _sync(_Calls._ancestors)
    count = _sync(_Calls._count)
    update_edges = _sync(_Calls._update_edges)


class AsyncGrailClient(_Calls):
    """The same API as GrailClient, awaitable. Use as an async context manager, or ``await aclose()``."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout: float = 60.0,
        api_key: str | None = None,
        retry: Retry | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=_auth_headers(api_key))
        self.retry = retry or Retry()

    async def __aenter__(self) -> AsyncGrailClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _run(self, plan: Plan[T]) -> T:
        try:
            step = next(plan)
            while True:
                if isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                    step = plan.send(None)
                else:
                    step = plan.send(await self._send(step))
        except StopIteration as done:
            return cast(T, done.value)

    async def _send(self, call: Call) -> httpx.Response:
        for attempt in itertools.count(1):
            content = call.body.chunks_async() if isinstance(call.body, _Body) else call.body
            try:
                response = await self.http.request(
                    call.method,
                    call.url,
                    params=call.params,
                    headers=call.headers,
                    content=content,
                    timeout=call.timeout,
                )
            except httpx.TransportError as exc:
                wait = _connect_retry(self.retry, call, attempt, exc)
                if wait is None:
                    raise GrailConnectionError(f"{call.method} {self.http.base_url}{call.url}: {exc}") from exc
                await asyncio.sleep(wait)
                continue
            wait = self.retry.wait(attempt, response) if call.idempotent else None
            if wait is None:
                return response
            await response.aclose()
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    health = _async(_Calls._health)
    ready = _async(_Calls._ready)
    upload = _async(_Calls._upload)
    get = _async(_Calls._get)
    list = _async(_Calls._list)
    delete = _async(_Calls._delete)
    wait_until_ready = _async(_Calls._wait_until_ready)
    reachable = _async(_Calls._reachable)
    reachable_many = _async(_Calls._reachable_many)
    query_batch = _async(_Calls._query_batch)
    query_lines = _async(_Calls._query_lines)
    path = _async(_Calls._path)
    descendants = _async(_Calls._descendants)
    ancestors = _async(_Calls._ancestors)
    count = _async(_Calls._count)
    update_edges = _async(_Calls._update_edges)


def _connect_retry(retry: Retry, call: Call, attempt: int, exc: httpx.TransportError) -> float | None:
    """The wait before sending again a request that could not connect (nothing reached the server)."""
    if not (retry.connect_errors and isinstance(exc, httpx.ConnectError)):
        return None
    return retry.wait(attempt, None)
