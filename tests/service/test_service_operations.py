"""What operators and newcomers meet first: start-up and readiness, request ids in answers and logs, JSON logs,
the API docs without internet, metrics by route, failed graphs filtered out of the list."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import httpx
import pytest

from service.client import GrailClient

from .conftest import GraphFiles, Server

pytestmark = pytest.mark.timeout(300)

_BAD_GRA = b"graph_for_greach\n3\n0: 1 #\n1: x #\n2: #\n"


def test_ready_once_the_kernels_are_compiled(server: Server, client: GrailClient) -> None:
    body = server.wait_until_ready()
    assert body["ready"] and body["kernels"] == "ready" and body["graphs_loaded"] and body["error"] is None
    assert body["kernels_seconds"] > 0 and body["threading_layer"]
    assert client.health()["ready"] is True


def test_health_answers_while_the_kernels_compile(tmp_path: Path) -> None:
    """On an empty numba cache the query kernels take tens of seconds to compile: /health answers meanwhile,
    /ready says 503 and why, and a query waits for the kernels instead of failing."""
    # TMPDIR: the warm-up's scratch folder, which a stop in the middle of compiling leaves behind.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache"), "TMPDIR": str(tmp_path)}
    server = Server(tmp_path / "data", tmp_path / "server.log", env=env)
    try:
        server.start(workers=False)  # the build workers compile too
        # Answered while /ready still says "compiling": the server did not wait for the compiler.
        ready = httpx.get(f"{server.url}/ready", timeout=5)
        assert ready.status_code == 503, ready.text
        assert ready.json()["kernels"] == "compiling" and not ready.json()["ready"]
        health = httpx.get(f"{server.url}/health", timeout=5).json()
        assert health["status"] == "ok" and health["ready"] is False
    finally:
        server.stop()
    assert "compiling the query kernels" in server.log()


def test_request_ids_on_answers_and_log_lines(server: Server, client: GrailClient, files: GraphFiles) -> None:
    given = client.http.get("/health", headers={"X-Request-ID": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42"
    made = {client.http.get("/graphs/nope").headers["x-request-id"] for _ in range(3)}  # a 404 has one too
    assert len(made) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in made)
    # An id that does not fit a log line (spaces, control characters, too long) is replaced.
    for odd in ("two words", "x" * 200):
        assert client.http.get("/health", headers={"X-Request-ID": odd}).headers["x-request-id"] != odd
    # The upload's id is on the lines of its build, which runs in a worker thread.
    upload = client.http.post(
        "/graphs",
        params={"wait": "true", "name": "traced"},
        content=files.path("cyclic.gra").read_bytes(),
        headers={"Content-Type": "text/x-grail-gra", "X-Request-ID": "upload-7"},
    )
    assert upload.status_code == 201 and upload.headers["x-request-id"] == "upload-7"
    graph_id = upload.json()["id"]
    lines = [line for line in server.log().splitlines() if graph_id in line]
    assert any("uploaded" in line for line in lines) and any("built in" in line for line in lines)
    assert all("[upload-7]" in line for line in lines), lines
    assert "[-]" in server.log()  # lines outside requests (start-up) carry a dash


def test_json_logs(fresh_server: Server, files: GraphFiles) -> None:
    server = Server(fresh_server.data_dir, fresh_server.log_path, "--log-format", "json")
    try:
        server.start()
        with server.client() as client:
            client.http.post(
                "/graphs?wait=true",
                content=files.path("cyclic.gra").read_bytes(),
                headers={"Content-Type": "text/x-grail-gra", "X-Request-ID": "json-1"},
            )
    finally:
        server.stop()
    records = [json.loads(line) for line in server.log().splitlines() if line.strip()]
    assert records and all({"time", "level", "logger", "message", "request_id"} <= set(r) for r in records)
    assert any(r["request_id"] == "json-1" and "built in" in r["message"] for r in records)
    assert any(r["logger"].startswith("uvicorn") for r in records)  # the server's own lines too


def test_docs_are_served_by_the_app(client: GrailClient) -> None:
    """Swagger UI and ReDoc load their scripts and styles from this server: no CDN, no internet needed."""
    for page in ("/docs", "/redoc"):
        html = client.http.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assert assets and all(a.startswith("/") for a in assets), assets  # nothing from another host
        for asset in assets:
            response = client.http.get(asset)
            assert response.status_code == 200 and len(response.content) > 1000, asset


def test_metrics_by_route_with_process_metrics(client: GrailClient) -> None:
    for path in ("/docs", "/openapi.json", "/no/such/path"):
        client.http.get(path)
    text = client.http.get("/metrics").text
    for route, status in (("/docs", 200), ("/openapi.json", 200), ("<unmatched>", 404)):
        assert f'grail_http_requests_total{{method="GET",route="{route}",status="{status}"}}' in text, route
    assert "process_resident_memory_bytes" in text and "python_gc_collections_total" in text
    assert "grail_http_request_duration_seconds_bucket" in text and "_created" not in text


def test_failed_graphs_filtered_by_status(client: GrailClient, files: GraphFiles) -> None:
    good = client.upload(files.path("cyclic.gra"), wait=True)["id"]
    bad = client.upload(_BAD_GRA, content_type="text/x-grail-gra")["id"]
    deadline = time.monotonic() + 60
    while client.get(bad)["status"] != "failed":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    failed = client.list(status="failed")
    assert bad in {r["id"] for r in failed} and {r["status"] for r in failed} == {"failed"}
    assert good not in {r["id"] for r in failed}
    both = {r["id"] for r in client.list(status=["failed", "ready"])}
    assert {good, bad} <= both
    assert {r["id"] for r in client.list()} >= both
    response = client.http.get("/graphs", params={"status": "done"})
    assert response.status_code == 422 and "status" in response.json()["detail"]
