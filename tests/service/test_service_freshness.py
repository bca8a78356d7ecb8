"""min_version and Grail-Min-Version as the middleware reads them (service.freshness) and as the client sends
them; the waiting itself is tested across real replicas in test_service_roles.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.app import create_app
from service.client import GrailClient, Retry
from service.errors import ServiceError
from service.exceptions import VersionNotHereError
from service.freshness import _wanted
from service.settings import Settings


def _scope(query: bytes, *headers: tuple[bytes, bytes]) -> dict:
    return {"type": "http", "path": "/graphs/g/reachable", "query_string": query, "headers": list(headers)}


def test_the_parameter_is_read_and_taken_out_of_the_query_string() -> None:
    wanted, scope = _wanted(_scope(b"source=a&min_version=7&target=b"))
    assert wanted == 7 and scope["query_string"] == b"source=a&target=b"
    wanted, scope = _wanted(_scope(b"min%5Fversion=%209"))
    assert wanted == 9 and scope["query_string"] == b""


def test_the_header_alone_and_the_larger_of_both() -> None:
    assert _wanted(_scope(b"pairs=1,2", (b"grail-min-version", b"4")))[0] == 4
    assert _wanted(_scope(b"min_version=3", (b"grail-min-version", b"5")))[0] == 5
    assert _wanted(_scope(b"min_version=6", (b"grail-min-version", b"5")))[0] == 6


def test_without_either_the_request_is_untouched() -> None:
    scope = _scope(b"source=min_versions&target=b")
    assert _wanted(scope) == (None, scope)


@pytest.mark.parametrize("value", [b"0", b"-1", b"two", b"1.5", b"", b"9" * 19, "\u00b2".encode()])
def test_a_value_that_is_not_a_positive_integer_is_refused(value: bytes) -> None:
    with pytest.raises(ServiceError) as refused:
        _wanted(_scope(b"min_version=" + value))
    assert refused.value.status == 422
    with pytest.raises(ServiceError):
        _wanted(_scope(b"", (b"grail-min-version", value)))


def test_the_client_sends_min_version_on_every_read() -> None:
    seen: list[tuple[str, str | None]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("Grail-Min-Version")))
        if request.url.path.endswith("/queries"):
            return httpx.Response(200, content=bytes([0b10000000]))
        if request.url.path.endswith("/path"):
            return httpx.Response(200, json={"path": ["a", "b"]})
        if "count" in request.url.params:
            return httpx.Response(200, json={"node": "a", "count": 1, "method": "labels"})
        if request.url.path.endswith("/descendants"):
            return httpx.Response(200, json={"node": "a", "count": 1, "offset": 0, "nodes": ["b"]})
        if request.url.path.endswith("/reachable"):
            return httpx.Response(200, json={"reachable": True})
        return httpx.Response(200, json={"id": "g", "status": "ready"})

    http = httpx.Client(base_url="http://grail", transport=httpx.MockTransport(answer))
    with GrailClient(http=http) as client:
        assert client.get("g", min_version=3)["id"] == "g"
        assert client.reachable("g", "a", "b", min_version=4) is True
        assert client.query_batch("g", np.array([[1, 2]]), min_version=5).tolist() == [True]
        assert client.path("g", "a", "b", min_version=6) == ["a", "b"]
        assert client.descendants("g", "a", min_version=7)["nodes"] == ["b"]
        assert client.count("g", "a", min_version=8)["count"] == 1
        assert client.reachable("g", "a", "b") is True
    assert [version for _, version in seen] == ["3", "4", "5", "6", "7", "8", None]


def test_a_version_not_here_is_retried_then_raised() -> None:
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        body = {"error": "VersionNotHere", "detail": "not here yet", "status": 503}
        return httpx.Response(503, json=body, headers={"Retry-After": "0"})

    http = httpx.Client(base_url="http://grail", transport=httpx.MockTransport(answer))
    with GrailClient(http=http, retry=Retry(attempts=2)) as client, pytest.raises(VersionNotHereError) as raised:
        client.reachable("g", "a", "b", min_version=9)
    assert raised.value.status == 503 and len(calls) == 2


def test_a_method_no_route_serves_waits_for_no_version(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path))

    async def trace() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://grail") as http:
            return await http.request(
                "TRACE", "/graphs/g/reachable", params={"source": "a", "target": "b", "min_version": 7}
            )

    answer = asyncio.run(trace())
    assert answer.status_code == 405 and answer.json()["error"] == "MethodNotAllowed", answer.text
    assert "GET" in answer.headers["Allow"]
