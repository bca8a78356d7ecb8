"""Access keys (--api-keys), write origins and CORS against a real server; the client and CLI with --api-key."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.client import GrailServiceError

from .conftest import REPO, Server

pytestmark = pytest.mark.timeout(180)

WRITE_KEY = "w-0123456789abcdef0123"
READ_KEY = "r-0123456789abcdef0123"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("grail-keys")
    keys = root / "keys"
    keys.write_text(f"# who may do what\n{WRITE_KEY} write\n\n{READ_KEY}   read\n")
    keys.chmod(0o600)
    server = Server(
        root / "data", root / "server.log", "--api-keys", str(keys), "--cors-origins", "https://app.example"
    ).start()
    yield server
    server.stop()


def test_keys_and_scopes(keyed: Server) -> None:
    with httpx.Client(base_url=keyed.url, timeout=60) as anonymous:
        assert anonymous.get("/health").status_code == 200  # liveness stays open
        assert anonymous.get("/ready").status_code in (200, 503)  # so does readiness, for load balancers' checks
        for method, path in (("GET", "/graphs"), ("POST", "/graphs"), ("GET", "/metrics"), ("GET", "/openapi.json")):
            response = anonymous.request(method, path, content=b"0 1\n")
            assert response.status_code == 401, (method, path)
            assert response.headers["www-authenticate"].startswith("Bearer") and response.json()["error"]
        bad = anonymous.get("/graphs", headers={"Authorization": f"Bearer {WRITE_KEY}x"})
        assert bad.status_code == 401
        assert anonymous.get("/graphs", headers={"Authorization": f"Basic {WRITE_KEY}"}).status_code == 401
    with keyed.client(api_key=WRITE_KEY) as writer, keyed.client(api_key=READ_KEY) as reader:
        graph = writer.upload(b"0 1\n1 2\n", content_type="text/plain", wait=True)
        assert reader.reachable(graph["id"], 0, 2) is True
        assert reader.query_batch(graph["id"], [[0, 2], [2, 0]]).tolist() == [True, False]  # a POST that reads
        for attempt in (lambda: reader.upload(b"0 1\n", content_type="text/plain"), lambda: reader.delete(graph["id"])):
            with pytest.raises(GrailServiceError) as info:
                attempt()
            assert info.value.status == 403
        writer.delete(graph["id"])
    assert WRITE_KEY not in keyed.log() and READ_KEY not in keyed.log()


def test_origins_and_cors(keyed: Server) -> None:
    auth = {"Authorization": f"Bearer {WRITE_KEY}"}
    with httpx.Client(base_url=keyed.url, headers=auth, timeout=60) as http:
        evil = http.post(
            "/graphs", content=b"0 1\n", headers={"Origin": "http://evil.example", "Content-Type": "text/plain"}
        )
        assert evil.status_code == 403 and evil.json()["error"] == "ForbiddenOrigin"
        assert "access-control-allow-origin" not in evil.headers
        good = http.post(
            "/graphs", content=b"0 1\n", headers={"Origin": "https://app.example", "Content-Type": "text/plain"}
        )
        assert good.status_code == 202 and good.headers["access-control-allow-origin"] == "https://app.example"
        preflight = http.options(
            "/graphs", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 200 and "POST" in preflight.headers["access-control-allow-methods"]
        # A browser may ask for a version it wrote (read-your-writes) and read the version an answer is from.
        preflight = http.options(
            "/graphs/g/reachable",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "grail-min-version",
            },
        )
        assert preflight.status_code == 200, preflight.text
        assert "grail-min-version" in preflight.headers["access-control-allow-headers"].lower()
        assert "grail-graph-version" in good.headers["access-control-expose-headers"].lower()


def test_no_cors_and_foreign_writes_refused_by_default(server: Server) -> None:
    """The test server without keys (loopback): no CORS headers; a browser's cross-origin write is refused, the
    server's own pages (/docs, same origin on loopback) may write."""
    with httpx.Client(base_url=server.url, timeout=60) as http:
        evil = http.post(
            "/graphs", content=b"0 1\n", headers={"Origin": "http://evil.example", "Content-Type": "text/plain"}
        )
        assert evil.status_code == 403 and "access-control-allow-origin" not in evil.headers
        assert "access-control-allow-origin" not in http.get("/health", headers={"Origin": "http://x.example"}).headers
        own = http.post("/graphs", content=b"0 1\n", headers={"Origin": server.url, "Content-Type": "text/plain"})
        assert own.status_code == 202


def test_cli_and_client_take_the_key_from_flag_or_environment(keyed: Server) -> None:
    def cli(*args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "GRAIL_API_KEY"}
        if key is not None:
            env["GRAIL_API_KEY"] = key
        command = [sys.executable, "-m", "service.cli", "--url", keyed.url, *args]
        return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)

    assert cli("list").returncode == 4 and "401" in cli("list").stderr  # refused
    assert cli("--api-key", READ_KEY, "list").returncode == 0
    assert cli("list", key=READ_KEY).returncode == 0
    refused = cli("--api-key", READ_KEY, "delete", "nope")
    assert refused.returncode == 4 and "403" in refused.stderr and READ_KEY not in refused.stderr


def test_bad_keys_files_stop_the_start(tmp_path: Path) -> None:
    for text, expected in (("short write\n", "16 characters"), (f"{WRITE_KEY} admin\n", "line 1"), ("", "no key")):
        keys = tmp_path / "keys"
        keys.write_text(text)
        done = subprocess.run(
            [sys.executable, "-m", "service.main", "--api-keys", str(keys), "--data-dir", str(tmp_path / "d")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert WRITE_KEY not in done.stderr
