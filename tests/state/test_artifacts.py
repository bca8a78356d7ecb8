"""The artifact store, the same suite against a real folder and against a local S3-compatible server."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from service.state import ArtifactStore, open_artifacts
from service.state.artifacts import ARTIFACT_MANIFEST, LocalArtifactStore
from service.state.errors import ArtifactCorrupt, ArtifactExists, ArtifactNotFound

from .conftest import S3_BUCKET, S3_CREDENTIALS

FILES = {"manifest.json": b'{"format": "grail-index"}', "query_low.npy": os.urandom(70_000), "sub/names.npy": b"x" * 10}


def index_folder(root: Path, files: dict[str, bytes] = FILES) -> Path:
    folder = root / f"staging-{len(list(root.glob('staging-*')))}"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def s3_raw(endpoint: str, prefix: str) -> S3Store:
    return S3Store(S3_BUCKET, prefix=prefix, endpoint=endpoint, client_options={"allow_http": True}, **S3_CREDENTIALS)


def test_publish_fetch_list_delete(artifacts: ArtifactStore, tmp_path: Path) -> None:
    assert isinstance(artifacts, ArtifactStore)
    assert not artifacts.exists("aaaaaaaaaaaa", 1) and artifacts.versions("aaaaaaaaaaaa") == []
    manifest = artifacts.publish("aaaaaaaaaaaa", 1, index_folder(tmp_path))
    assert manifest.size_bytes == sum(len(d) for d in FILES.values())
    assert {f.path: f.sha256 for f in manifest.files} == {n: hashlib.sha256(d).hexdigest() for n, d in FILES.items()}
    assert artifacts.manifest("aaaaaaaaaaaa", 1).checksum == manifest.checksum
    fetched = artifacts.fetch("aaaaaaaaaaaa", 1)
    assert {n: (fetched / n).read_bytes() for n in FILES} == FILES
    assert artifacts.fetch("aaaaaaaaaaaa", 1) == fetched  # cached, or the folder itself

    with pytest.raises(ArtifactExists):  # create-only
        artifacts.publish("aaaaaaaaaaaa", 1, index_folder(tmp_path, {"manifest.json": b"other"}))
    assert artifacts.manifest("aaaaaaaaaaaa", 1) == manifest

    artifacts.publish("aaaaaaaaaaaa", 2, index_folder(tmp_path), move=True)
    artifacts.publish("bbbbbbbbbbbb", 7, index_folder(tmp_path))
    assert artifacts.versions("aaaaaaaaaaaa") == [1, 2] and artifacts.graphs() == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    artifacts.delete("aaaaaaaaaaaa", 1)
    artifacts.delete("aaaaaaaaaaaa", 1)  # absent: nothing to do
    assert artifacts.versions("aaaaaaaaaaaa") == [2] and not artifacts.exists("aaaaaaaaaaaa", 1)
    with pytest.raises(ArtifactNotFound):
        artifacts.fetch("aaaaaaaaaaaa", 1)
    with pytest.raises(ArtifactNotFound):
        artifacts.manifest("cccccccccccc", 1)


def test_local_publish_is_invisible_until_complete_and_verified(tmp_path: Path) -> None:
    artifacts = LocalArtifactStore(tmp_path / "data")
    staging = index_folder(tmp_path)
    manifest = artifacts.publish("aaaaaaaaaaaa", 3, staging, move=True)
    folder = tmp_path / "data" / "graphs" / "aaaaaaaaaaaa" / "v3"
    assert not staging.exists() and (folder / ARTIFACT_MANIFEST).is_file()
    assert manifest.checksum in (folder / ARTIFACT_MANIFEST).read_text()
    # What a crash mid-publish leaves (a temporary folder, no manifest in place) is no version.
    leftover = folder.parent / ".v4.tmp-0123"
    leftover.mkdir()
    (leftover / "query_low.npy").write_bytes(b"partial")
    assert artifacts.versions("aaaaaaaaaaaa") == [3] and not artifacts.exists("aaaaaaaaaaaa", 4)
    # A published file altered afterwards is caught when the version is fetched.
    with open(folder / "query_low.npy", "r+b") as handle:
        handle.write(b"\0")
    with pytest.raises(ArtifactCorrupt):
        artifacts.fetch("aaaaaaaaaaaa", 3)


def test_s3_version_is_its_manifest_and_checksums_are_checked(s3_endpoint: str, tmp_path: Path) -> None:
    prefix = f"run-{os.urandom(4).hex()}"
    artifacts = open_artifacts(
        f"s3://{S3_BUCKET}/{prefix}",
        tmp_path,
        cache_dir=tmp_path / "cache",
        endpoint=s3_endpoint,
        client_options={"allow_http": True},
        **S3_CREDENTIALS,
    )
    raw = s3_raw(s3_endpoint, prefix)
    # Objects of a publish that never wrote its manifest (a builder killed mid-upload) are no version.
    obstore.put(raw, "graphs/aaaaaaaaaaaa/v1/deadbeef/query_low.npy", b"partial")
    assert not artifacts.exists("aaaaaaaaaaaa", 1) and artifacts.versions("aaaaaaaaaaaa") == []
    manifest = artifacts.publish("aaaaaaaaaaaa", 1, index_folder(tmp_path))
    # A racing publisher that loses on the manifest leaves the winner's objects alone.
    with pytest.raises(ArtifactExists):
        artifacts.publish("aaaaaaaaaaaa", 1, index_folder(tmp_path, {"query_low.npy": b"loser"}))
    fetched = artifacts.fetch("aaaaaaaaaaaa", 1)
    assert (fetched / "query_low.npy").read_bytes() == FILES["query_low.npy"]
    # An object altered in the bucket is refused on the way into the cache, which keeps no part of it.
    obstore.put(raw, f"graphs/aaaaaaaaaaaa/v1/{manifest.objects}/query_low.npy", b"tampered")
    fresh_cache = open_artifacts(
        f"s3://{S3_BUCKET}/{prefix}",
        tmp_path,
        cache_dir=tmp_path / "cache2",
        endpoint=s3_endpoint,
        client_options={"allow_http": True},
        **S3_CREDENTIALS,
    )
    with pytest.raises(ArtifactCorrupt):
        fresh_cache.fetch("aaaaaaaaaaaa", 1)
    assert not (tmp_path / "cache2" / "aaaaaaaaaaaa" / "v1").exists()
    assert list((tmp_path / "cache2" / "aaaaaaaaaaaa").iterdir()) == []
