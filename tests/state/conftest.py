"""The state tests run against both metadata stores (``store``: SQLite in a temporary folder, and PostgreSQL,
a fresh database of the session's server per test), and the artifact store against a real folder and a local
S3-compatible server (moto's server mode, a subprocess on a free loopback port)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service.state import ArtifactStore, open_artifacts, open_metadata
from service.state.sql import SqlMetadataStore
from tests.postgres_server import PostgresServer
from tests.s3_server import S3_CREDENTIALS, MotoServer

BACKENDS = ["sqlite", "postgresql"]
# Short enough that the tests of retries wait little; the schedule's shape is what they check.
TEST_BACKOFF_S = (0.2, 2.0)
S3_BUCKET = "grail-test"


def wait_until(condition: Callable[[], Any], timeout: float = 15.0, interval: float = 0.01) -> Any:
    """Poll ``condition`` until it returns something true, and return it; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {timeout} s")
        time.sleep(interval)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty metadata database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'grail.db'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture()
def store(store_url: str, tmp_path: Path) -> Iterator[SqlMetadataStore]:
    opened = open_metadata(store_url, tmp_path, job_backoff_s=TEST_BACKOFF_S)
    assert isinstance(opened, SqlMetadataStore)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a free loopback port, with an empty bucket ``S3_BUCKET``."""
    with MotoServer(S3_BUCKET) as moto:
        yield moto.endpoint


@pytest.fixture(params=["local", "s3"])
def artifacts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactStore]:
    """An empty artifact store of each kind: a folder, and a prefix of its own in moto's bucket."""
    if request.param == "local":
        yield open_artifacts(None, tmp_path / "data")
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    yield open_artifacts(
        f"s3://{S3_BUCKET}/run-{os.urandom(4).hex()}",
        tmp_path / "data",
        cache_dir=tmp_path / "cache",
        endpoint=endpoint,
        client_options={"allow_http": True},
        **S3_CREDENTIALS,
    )
