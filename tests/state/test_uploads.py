"""Uploads in the artifact store, the same suite against a real folder and against a local S3-compatible server:
streamed in, counted and hashed, fetched with their checksum verified, create-only, and invisible until whole
(a stream that fails, one too large, a process killed while it streams)."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from service.state import ArtifactStore
from service.state.artifacts import UPLOAD_DATA, LocalArtifactStore
from service.state.errors import ArtifactCorrupt, UploadExists, UploadNotFound, UploadTooLarge

from .conftest import S3_CREDENTIALS

REPO = Path(__file__).resolve().parents[2]
# Larger than an S3 part, so that a bucket gets a multipart upload.
BIG = 9 << 20


def chunks(total: int, size: int = 1 << 20, seed: int = 1) -> Iterator[bytes]:
    """``total`` bytes of a repeatable pattern, ``size`` at a time."""
    block = hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1)
    sent = 0
    while sent < total:
        piece = block[: min(size, total - sent)]
        sent += len(piece)
        yield piece


def pattern(total: int, seed: int = 1) -> bytes:
    return b"".join(chunks(total, seed=seed))


def raw(artifacts: ArtifactStore) -> S3Store:
    """The bucket under an S3 store, for what a client of the store could never do."""
    store = artifacts._store  # type: ignore[attr-defined]
    assert isinstance(store, S3Store)
    return store


def everything(artifacts: ArtifactStore) -> list[str]:
    """Every file or object under the store's uploads, visible or not."""
    if isinstance(artifacts, LocalArtifactStore):
        folder = artifacts.root / "uploads"
        return sorted(p.relative_to(artifacts.root).as_posix() for p in folder.rglob("*")) if folder.exists() else []
    return sorted(meta["path"] for batch in obstore.list(raw(artifacts), prefix="uploads/") for meta in batch)


def test_put_fetch_list_delete(artifacts: ArtifactStore, tmp_path: Path) -> None:
    data = pattern(BIG + 12_345)
    stored = artifacts.put_upload("aaaaaaaaaaaa", chunks(len(data)))
    assert (stored.key, stored.size, stored.sha256) == ("aaaaaaaaaaaa", len(data), hashlib.sha256(data).hexdigest())
    assert artifacts.upload("aaaaaaaaaaaa") == stored
    from_file = artifacts.put_upload("bbbbbbbbbbbb", io.BytesIO(b"a b\nb c\n"))  # a file object, read in chunks
    empty = artifacts.put_upload("cccccccccccc", [])
    assert (from_file.size, empty.size, empty.sha256) == (8, 0, hashlib.sha256(b"").hexdigest())
    assert artifacts.uploads() == [stored, from_file, empty]

    target = tmp_path / "fetched" / "upload"
    assert artifacts.fetch_upload("aaaaaaaaaaaa", target) == stored
    assert target.read_bytes() == data
    assert artifacts.fetch_upload("bbbbbbbbbbbb", target) == from_file  # replaces the file whole
    assert target.read_bytes() == b"a b\nb c\n"
    assert [p.name for p in target.parent.iterdir()] == ["upload"]  # no temporary file left beside it

    with pytest.raises(UploadExists):  # create-only
        artifacts.put_upload("aaaaaaaaaaaa", [b"other"])
    assert artifacts.upload("aaaaaaaaaaaa") == stored
    # A build reads a local file: the stored one in a folder, a verified copy from a bucket.
    local = artifacts.upload_file("bbbbbbbbbbbb", tmp_path / "scratch" / "upload")
    assert local.read_bytes() == b"a b\nb c\n"
    assert (local == tmp_path / "scratch" / "upload") == (not isinstance(artifacts, LocalArtifactStore))

    artifacts.delete_upload("aaaaaaaaaaaa")
    artifacts.delete_upload("aaaaaaaaaaaa")  # absent: nothing to do
    with pytest.raises(UploadNotFound):
        artifacts.upload("aaaaaaaaaaaa")
    with pytest.raises(UploadNotFound):
        artifacts.fetch_upload("aaaaaaaaaaaa", tmp_path / "gone")
    with pytest.raises(UploadNotFound):
        artifacts.upload_file("aaaaaaaaaaaa", tmp_path / "gone")
    assert not (tmp_path / "gone").exists()
    assert [u.key for u in artifacts.uploads()] == ["bbbbbbbbbbbb", "cccccccccccc"]
    assert artifacts.put_upload("aaaaaaaaaaaa", [b"again"]).size == 5  # the key is free again


def failing_stream(after: int) -> Iterator[bytes]:
    yield from chunks(after)
    raise ConnectionResetError("the client went away")


def test_a_refused_put_leaves_nothing(artifacts: ArtifactStore) -> None:
    with pytest.raises(ConnectionResetError):  # the stream's own error, as it is
        artifacts.put_upload("aaaaaaaaaaaa", failing_stream(BIG + 1))
    with pytest.raises(UploadTooLarge) as too_large:
        artifacts.put_upload("aaaaaaaaaaaa", chunks(BIG + 1), max_bytes=BIG)
    assert too_large.value.limit == BIG
    assert everything(artifacts) == []
    with pytest.raises(UploadNotFound):
        artifacts.upload("aaaaaaaaaaaa")
    assert artifacts.uploads() == []
    exact = artifacts.put_upload("aaaaaaaaaaaa", chunks(BIG), max_bytes=BIG)  # the limit itself is allowed
    assert exact.size == BIG


def test_fetch_refuses_an_altered_upload(artifacts: ArtifactStore, tmp_path: Path) -> None:
    stored = artifacts.put_upload("aaaaaaaaaaaa", [b"a b\n", b"b c\n"])
    if isinstance(artifacts, LocalArtifactStore):
        (artifacts.root / "uploads" / "aaaaaaaaaaaa" / UPLOAD_DATA).write_bytes(b"a b\nb d\n")
    else:
        obstore.put(raw(artifacts), f"uploads/aaaaaaaaaaaa/{stored.objects}/{UPLOAD_DATA}", b"a b\nb d\n")
    (tmp_path / "target").write_bytes(b"what was there")
    with pytest.raises(ArtifactCorrupt):
        artifacts.fetch_upload("aaaaaaaaaaaa", tmp_path / "target")
    assert (tmp_path / "target").read_bytes() == b"what was there"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".target")) == []


def store_url_and_options(artifacts: ArtifactStore, s3_endpoint: str | None) -> tuple[str, dict[str, object]]:
    if isinstance(artifacts, LocalArtifactStore):
        return f"file://{artifacts.root}", {}
    return artifacts.url, {"endpoint": s3_endpoint, "client_options": {"allow_http": True}, **S3_CREDENTIALS}


def put_until_killed(url: str, options: str) -> None:
    """Stream an endless upload into the store, telling stdout once a few parts are written."""
    import json

    from service.state import open_artifacts

    artifacts = open_artifacts(url, Path("."), **json.loads(options))

    def endless() -> Iterator[bytes]:
        yield from chunks(BIG * 2)
        os.write(1, b"streaming\n")
        while True:
            yield from chunks(1 << 20)

    artifacts.put_upload("aaaaaaaaaaaa", endless())


def test_a_put_killed_mid_stream_leaves_nothing_visible(
    artifacts: ArtifactStore, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import json

    endpoint = None if isinstance(artifacts, LocalArtifactStore) else request.getfixturevalue("s3_endpoint")
    url, options = store_url_and_options(artifacts, endpoint)
    code = "import sys; from tests.state.test_uploads import put_until_killed as p; p(sys.argv[1], sys.argv[2])"
    child = subprocess.Popen(
        [sys.executable, "-c", code, url, json.dumps(options)],
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == b"streaming\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdout.close()
    with pytest.raises(UploadNotFound):
        artifacts.upload("aaaaaaaaaaaa")
    assert artifacts.uploads() == []
    # What it wrote is hidden, and removed once old enough; a put under the same key is not in its way.
    assert artifacts.remove_incomplete(3600) == []
    if isinstance(artifacts, LocalArtifactStore):
        (leftover,) = (artifacts.root / "uploads").iterdir()
        assert leftover.name.startswith(".aaaaaaaaaaaa.tmp-") and (leftover / UPLOAD_DATA).stat().st_size >= 2 * BIG
        assert artifacts.remove_incomplete(0) == [f"uploads/{leftover.name}"]
        assert not leftover.exists()
    assert artifacts.put_upload("aaaaaaaaaaaa", [b"a b\n"]).size == 4
    assert artifacts.remove_incomplete(0) == []
