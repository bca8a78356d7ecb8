"""The Python client: the sync and async clients have the same methods (enumerated), every error kind has its
exception, and requests safe to repeat are retried on 503 with Retry-After, against a small HTTP server that
answers 503 as many times as told."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from service import exceptions
from service.client import AsyncGrailClient, GrailClient, Retry
from service.errors import ERRORS

pytestmark = pytest.mark.timeout(60)


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_") and name not in ("close", "aclose")
    }


def test_sync_and_async_clients_have_the_same_methods() -> None:
    sync, asynchronous = public_methods(GrailClient), public_methods(AsyncGrailClient)
    assert sync.keys() == asynchronous.keys()
    assert {
        "upload",
        "query_batch",
        "path",
        "descendants",
        "ancestors",
        "count",
        "update_edges",
        "ready",
    } <= sync.keys()
    for name, signature in sync.items():
        assert signature == asynchronous[name], name
        assert inspect.iscoroutinefunction(getattr(AsyncGrailClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(GrailClient, name)), name
        assert getattr(GrailClient, name).__doc__, name


def test_every_error_kind_has_its_exception() -> None:
    for kind in ERRORS:
        cls = exceptions.error_class(kind.name, kind.status)
        assert cls is exceptions.ERROR_CLASSES[kind.name], kind.name
        assert issubclass(cls, exceptions.GrailServiceError) and issubclass(cls, exceptions.GrailClientError)
    assert set(exceptions.ERROR_CLASSES) == {kind.name for kind in ERRORS}
    # A kind of a newer server: the class of its status's group.
    assert exceptions.error_class("SomethingNew", 409) is exceptions.ConflictError
    assert exceptions.error_class("SomethingNew", 418) is exceptions.BadRequestError
    assert exceptions.error_class("SomethingNew", 502) is exceptions.ServerError


def test_a_409_that_says_when_is_retried_others_are_not() -> None:
    """GraphLoading (a graph loading after the server's start) is a 409 with Retry-After: a request safe to
    repeat comes back then; GraphNotReady (a graph building) says no time and is not retried."""
    retry = Retry()
    assert retry.wait(1, httpx.Response(409, headers={"Retry-After": "1"})) == 1.0
    assert retry.wait(1, httpx.Response(409)) is None
    assert retry.wait(1, httpx.Response(404, headers={"Retry-After": "1"})) is None
    assert retry.wait(retry.attempts, httpx.Response(409, headers={"Retry-After": "1"})) is None


class Busy:
    """A server that answers 503 (Retry-After: ``retry_after``) to the first ``refusals`` requests, then 200."""

    def __init__(self, refusals: int, retry_after: str = "0") -> None:
        self.refusals = refusals
        self.retry_after = retry_after
        self.seen: list[tuple[str, float]] = []
        busy = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                busy.seen.append((f"{self.command} {self.path}", time.monotonic()))
                refused = len(busy.seen) <= busy.refusals
                problem = {"type": "/problems/Overloaded", "status": 503, "error": "Overloaded", "detail": "busy"}
                body = json.dumps(problem if refused else {"status": "ok", "version": 1}).encode()
                self.send_response(503 if refused else 200)
                self.send_header("Content-Type", "application/problem+json" if refused else "application/json")
                if refused:
                    self.send_header("Retry-After", busy.retry_after)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def busy() -> Iterator[Busy]:
    server = Busy(refusals=2, retry_after="1")
    yield server
    server.close()


def test_idempotent_requests_wait_for_retry_after(busy: Busy) -> None:
    with GrailClient(busy.url) as client:
        assert client.health()["status"] == "ok"
    assert [seen for seen, _ in busy.seen] == ["GET /health"] * 3
    waits = [b - a for (_, a), (_, b) in itertools.pairwise(busy.seen)]
    assert all(wait >= 0.9 for wait in waits), waits  # Retry-After: 1, each time


def test_requests_that_are_not_safe_to_repeat_are_not_retried(busy: Busy) -> None:
    with GrailClient(busy.url) as client, pytest.raises(exceptions.OverloadedError) as refused:
        client.update_edges("g", add=[("a", "b")])
    assert refused.value.status == 503 and len(busy.seen) == 1
    with GrailClient(busy.url) as client, pytest.raises(exceptions.UnavailableError):
        client.upload(b"a b\n")
    assert len(busy.seen) == 2


def test_retries_are_configurable(busy: Busy) -> None:
    with GrailClient(busy.url, retry=Retry(attempts=1)) as client, pytest.raises(exceptions.OverloadedError):
        client.health()
    assert len(busy.seen) == 1
    # A Retry-After longer than the client waits: the error at once.
    with GrailClient(busy.url, retry=Retry(max_wait=0.5)) as client, pytest.raises(exceptions.OverloadedError):
        client.get("g")
    assert len(busy.seen) == 2


def test_backoff_without_retry_after_and_the_async_client() -> None:
    server = Busy(refusals=3, retry_after="")
    try:

        async def ask() -> dict:
            async with AsyncGrailClient(server.url, retry=Retry(backoff=0.05)) as client:
                return await client.health()

        assert asyncio.run(ask())["status"] == "ok"
        waits = [b - a for (_, a), (_, b) in itertools.pairwise(server.seen)]
        # 0.05 s, then doubled at each try (a sleep is never shorter than asked).
        assert len(server.seen) == 4 and all(wait >= 0.05 * 2**k for k, wait in enumerate(waits)), waits
    finally:
        server.close()


def test_connection_errors_have_their_class() -> None:
    with GrailClient("http://127.0.0.1:9", timeout=5) as client, pytest.raises(exceptions.GrailConnectionError):
        client.health()


def names_sent(pairs: object) -> tuple[str, list]:
    """The Content-Type of a batch's body and the names it carries, as the server reads them."""
    from service.client import _batch

    batch = _batch(pairs, None)
    kind = batch.headers["Content-Type"]
    if kind == "text/plain":
        assert isinstance(batch.body, bytes)
        return kind, batch.body.decode().split()
    if kind == "application/json":
        assert isinstance(batch.body, bytes)
        return kind, [name for pair in json.loads(batch.body)["pairs"] for name in pair]
    assert isinstance(batch.body, np.ndarray)
    return kind, batch.body.reshape(-1).tolist()


def test_tables_and_arrays_go_as_their_lists_do() -> None:
    pairs = [("a", "b"), ("c", "d"), ("x.y", "z")]
    expected = ("text/plain", ["a", "b", "c", "d", "x.y", "z"])
    frame = pd.DataFrame(pairs, columns=["source", "target"])
    table = pa.table({"source": [u for u, _ in pairs], "target": [v for _, v in pairs]})
    for given in (pairs, np.array(pairs), np.array(pairs, dtype=object), frame, table, table.slice(0)):
        assert names_sent(given) == expected, type(given)
    assert names_sent(table.slice(1)) == ("text/plain", expected[1][2:])
    # Names with blanks (C++ signatures) go as JSON, whatever holds them.
    spaced = [("void f(int, char)", "g"), ("h", "i")]
    for given in (spaced, pd.DataFrame(spaced), pa.table({"s": ["void f(int, char)", "h"], "t": ["g", "i"]})):
        assert names_sent(given) == ("application/json", ["void f(int, char)", "g", "h", "i"])
    # Integer columns: binary pairs of the narrowest width.
    ints = pd.DataFrame({"s": [1, 70000], "t": [2, 3]})
    assert names_sent(ints) == ("application/octet-stream; width=32", [1, 2, 70000, 3])
    assert names_sent(pa.Table.from_pandas(ints)) == names_sent(ints)
    with pytest.raises(ValueError, match="two columns"):
        names_sent(pd.DataFrame({"a": [1], "b": [2], "c": [3]}))
